/* loss.c: SoftmaxWithLoss, LabelCrossEntropy, AveragedLoss and Accuracy, with the
 * gradients of the first three (Caffe2's inputs, outputs and defaults).
 *
 * Losses run in FP32 (precision class FP32). SoftmaxWithLoss also accepts FP16 and BF16
 * logits, widened to FP32 on the way in: its softmax output is FP32 whatever the logits
 * are, and its gradient dX comes back in the logits' dtype so it can flow into a 16-bit
 * net.
 *
 * Token-level use: logits [N, T, V] with `axis` 2 are N*T rows of V classes, and the
 * labels may have the logits' dims before `axis` ([N, T]) as well as (N*T) or (N*T, 1).
 * With `ignore_label`, a row whose label equals it counts for nothing: no loss, a zero
 * gradient row, and it leaves the mean (the loss is averaged over the counted rows'
 * weights; with none counted the loss is 0 and the gradient zero).
 * Row sums are accumulated in double. As in Caffe2 the log is of max(p, 1e-20), so a
 * probability that underflows gives a large but finite loss; a NaN probability (a
 * diverged net) stays NaN, so the loss shows it (fmax would return the floor).
 *
 * A label outside [0, D) (other than ignore_label) is an error naming the row and the
 * value (checked when the kernel runs: shape inference sees no data).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dm_config.h"

#include "common.h"
#include "loss.h"
#include "core/half.h"
#include "builtin.h"

#define DM_LOG_FLOOR 1e-20

/* log(max(p, 1e-20)), but NaN for a NaN p: fmax drops NaNs, which turned a diverged
 * net's NaN predictions into a finite loss of 46.0517 (issue 12). */
static double log_floored(double p) {
  return log(isnan(p) ? p : fmax(p, DM_LOG_FLOOR));
}

/* --- shared checks ------------------------------------------------------------------ */

/* N x D view of X at `axis` (SoftmaxWithLoss) or at 1 (the others; a 1-d X is one row). */
dm_status dm_loss_rows(dm_op_ctx *ctx, const dm_tensor *x, int64_t axis_arg, int64_t *N,
                       int64_t *D) {
  if (x->ndim == 1) {
    *N = 1, *D = x->dims[0];
    return DM_OK;
  }
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", axis_arg, x->ndim, 0, &axis));
  *N = dm_dims_product(x, 0, axis);
  *D = dm_dims_product(x, axis, x->ndim);
  return DM_OK;
}

/* Whether l's dims are x's dims [0, axis): one label per row of an N x D view at axis. */
static int labels_match_leading(const dm_tensor *l, const dm_tensor *x, int axis) {
  if (axis < 2 || l->ndim != axis)
    return 0;
  for (int d = 0; d < axis; d++)
    if (l->dims[d] != x->dims[d])
      return 0;
  return 1;
}

/* Integer labels: INT32, N of them, as (N) or (N, 1), or (lead) when `lead` (the logits
 * given with their axis, SoftmaxWithLoss) has those dims before the axis. */
static dm_status check_int_labels(dm_op_ctx *ctx, const dm_tensor *l, int64_t N,
                                  const dm_tensor *lead, int axis) {
  char ls[96];
  if (l->dtype != DM_INT32)
    return dm_op_error(ctx, DM_ERR_TYPE, "labels are %s; expected INT32 (or FLOAT with "
                       "label_prob=1 for SoftmaxWithLoss)", dm_dtype_name(l->dtype));
  if ((l->ndim == 1 && l->dims[0] == N) || (l->ndim == 2 && l->dims[0] == N && l->dims[1] == 1) ||
      (lead && labels_match_leading(l, lead, axis)))
    return DM_OK;
  char lead_s[128] = "";
  if (lead && axis >= 2) {
    int k = snprintf(lead_s, sizeof lead_s, " or ");
    for (int d = 0; d < axis && k < (int)sizeof lead_s - 48; d++)
      k += snprintf(lead_s + k, sizeof lead_s - (size_t)k, d ? "x%lld" : "%lld",
                    (long long)lead->dims[d]);
    snprintf(lead_s + k, sizeof lead_s - (size_t)k, " (the logits' dims before axis %d)", axis);
  }
  return dm_op_error(ctx, DM_ERR_SHAPE, "labels are %s but X has %lld rows; expected (%lld)%s",
                     dm_shape_str(l, ls, sizeof ls), (long long)N, (long long)N, lead_s);
}

/* Runs over the labels: the first out of [0, D) is an error naming its row. `ignore`
 * (SoftmaxWithLoss's ignore_label) is let through when has_ignore. */
static dm_status check_label_range_ignoring(dm_op_ctx *ctx, const int32_t *lab, int64_t N,
                                            int64_t D, int has_ignore, int32_t ignore) {
  for (int64_t i = 0; i < N; i++)
    if ((lab[i] < 0 || lab[i] >= D) && !(has_ignore && lab[i] == ignore))
      return dm_op_error(ctx, DM_ERR_INVALID, "label %d in row %lld is out of range [0, %lld)%s",
                         (int)lab[i], (long long)i, (long long)D,
                         has_ignore ? " and is not ignore_label" : "");
  return DM_OK;
}

static dm_status check_label_range(dm_op_ctx *ctx, const int32_t *lab, int64_t N, int64_t D) {
  return check_label_range_ignoring(ctx, lab, N, D, 0, 0);
}

static dm_status need_float(dm_op_ctx *ctx, const dm_tensor *t, const char *what) {
  if (t->dtype != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; %s takes FLOAT", what,
                       dm_dtype_name(t->dtype), dm_op_type(ctx));
  return DM_OK;
}

/* A copy of x as FP32 when it is FP16 or BF16, else x's own data; *owned is what to
 * free. */
static const float *as_f32(const dm_tensor *x, float **owned) {
  *owned = NULL;
  if (x->dtype == DM_FLOAT)
    return dm_tensor_data(x);
  *owned = malloc((size_t)(x->numel ? x->numel : 1) * sizeof(float));
  if (*owned)
    dm_widen(x->dtype, dm_tensor_data(x), *owned, (size_t)x->numel);
  return *owned;
}

/* --- SoftmaxWithLoss ---------------------------------------------------------------- */

static const dm_arg_spec swl_args[] = {
    {"scale", DM_ARG_FLOAT, 0, "multiplies the loss (default 1)"},
    {"label_prob", DM_ARG_INT, 0, "1: labels are FLOAT N x D probabilities (default 0)"},
    {"axis", DM_ARG_INT, 0, "logits are flattened to N x D at this axis (default 1); "
                            "[N, T, V] logits with axis 2 take [N, T] labels"},
    {"order", DM_ARG_STRING, 0, "accepted for compatibility; only NCHW is meaningful here"},
    {"ignore_label", DM_ARG_INT, 0, "rows with this label add no loss and no gradient, and "
                                    "the mean is over the others (default: none)"},
    {NULL, 0, 0, NULL},
};

/* ignore_label, read once: whether it is set, and its value (an int32 label's range). */
static dm_status ignore_arg(dm_op_ctx *ctx, int *has, int32_t *v) {
  *has = dm_op_has_arg(ctx, "ignore_label");
  int64_t a = dm_op_arg_int(ctx, "ignore_label", 0);
  if (a < INT32_MIN || a > INT32_MAX)
    return dm_op_error(ctx, DM_ERR_INVALID, "ignore_label %lld is not an INT32 label",
                       (long long)a);
  *v = (int32_t)a;
  return DM_OK;
}

/* Checks logits, labels and optional weights (inputs 0, 1 and, when has_w, 2). */
static dm_status swl_check(dm_op_ctx *ctx, int has_w, int64_t *N, int64_t *D) {
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "logits are %s; %s takes FLOAT, FLOAT16 or BFLOAT16",
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  if (x->ndim < 1)
    return dm_op_error(ctx, DM_ERR_SHAPE, "logits are 0-d; expected N x D");
  DM_TRY(dm_loss_rows(ctx, x, dm_op_arg_int(ctx, "axis", 1), N, D));
  int axis = 1;
  if (x->ndim > 1)
    DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  char ls[96];
  int has_ig = 0;
  int32_t ig = 0;
  DM_TRY(ignore_arg(ctx, &has_ig, &ig));
  if (dm_op_arg_int(ctx, "label_prob", 0) && has_ig)
    return dm_op_error(ctx, DM_ERR_INVALID, "ignore_label needs integer labels; label_prob=1 "
                                            "gives a row no single label to compare");
  if (dm_op_arg_int(ctx, "label_prob", 0)) {
    if (l->dtype != DM_FLOAT)
      return dm_op_error(ctx, DM_ERR_TYPE, "labels are %s; label_prob=1 takes FLOAT N x D",
                         dm_dtype_name(l->dtype));
    if (l->numel != *N * *D || (l->ndim > 0 && l->dims[0] != *N))
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "labels are %s but the logits are %lld x %lld (label_prob=1)",
                         dm_shape_str(l, ls, sizeof ls), (long long)*N, (long long)*D);
  } else {
    DM_TRY(check_int_labels(ctx, l, *N, x, axis));
  }
  if (has_w) {
    const dm_tensor *w = dm_op_input(ctx, 2);
    DM_TRY(need_float(ctx, w, "weights"));
    if (w->numel != *N)
      return dm_op_error(ctx, DM_ERR_SHAPE, "weights have %lld elements but there are %lld rows",
                         (long long)w->numel, (long long)*N);
  }
  return DM_OK;
}

static dm_status swl_infer(dm_op_ctx *ctx) {
  int64_t N, D;
  DM_TRY(swl_check(ctx, dm_op_num_inputs(ctx) == 3, &N, &D));
  const dm_tensor *x = dm_op_input(ctx, 0);
  /* Caffe2 writes the softmax in the logits' shape, and the loss as a 0-d scalar. */
  DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, x->ndim, x->dims));
  return dm_op_set_output(ctx, 1, DM_FLOAT, 0, NULL);
}

/* Inputs: logits, labels, [weights], softmax, d_avg_loss. */
static dm_status swl_grad_infer(dm_op_ctx *ctx) {
  int n = dm_op_num_inputs(ctx);
  int64_t N, D;
  DM_TRY(swl_check(ctx, n == 5, &N, &D));
  const dm_tensor *x = dm_op_input(ctx, 0), *p = dm_op_input(ctx, n - 2);
  const dm_tensor *dl = dm_op_input(ctx, n - 1);
  char xs[96], ps[96];
  if (p->dtype != DM_FLOAT || p->numel != x->numel)
    return dm_op_error(ctx, DM_ERR_SHAPE, "softmax is %s %s but the logits are %s; expected "
                       "the FLOAT softmax output of the forward op",
                       dm_dtype_name(p->dtype), dm_shape_str(p, ps, sizeof ps),
                       dm_shape_str(x, xs, sizeof xs));
  DM_TRY(need_float(ctx, dl, "d_avg_loss"));
  if (dl->numel != 1)
    return dm_op_error(ctx, DM_ERR_SHAPE, "d_avg_loss has %lld elements; expected 1",
                       (long long)dl->numel);
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static void swl_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  double n = (double)x->numel;
  c->flops = 6 * n; /* softmax, then the log term(s) */
  c->bytes_read = (double)dm_tensor_nbytes(x) + (double)dm_tensor_nbytes(l);
  c->bytes_written = 4 * n + 4;
}

static void swl_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  double n = (double)x->numel;
  c->flops = 3 * n;
  c->bytes_read = 4 * n + (double)dm_tensor_nbytes(l);
  c->bytes_written = (double)dm_tensor_nbytes(x);
}

/* Caffe2 passes back only the loss's gradient. A net that also differentiates through
 * the softmax output (another loss on the probabilities) gets that part too, from
 * SoftmaxGradient, and the two are summed; both parts must then have the same dtype
 * (FLOAT logits), since the softmax part is FP32. */
static dm_status swl_gradient(dm_grad_ctx *g) {
  const char *dp = dm_grad_output_grad(g, 0), *dl = dm_grad_output_grad(g, 1);
  const char *dx = dm_grad_input_grad(g, 0);
  char part_p[512], part_l[512];
  snprintf(part_p, sizeof part_p, "%s_softmax_part", dx);
  snprintf(part_l, sizeof part_l, "%s_loss_part", dx);
  if (dl) {
    int has_w = dm_grad_num_inputs(g) == 3;
    const char *in[5];
    int k = 0;
    in[k++] = dm_grad_input(g, 0);
    in[k++] = dm_grad_input(g, 1);
    if (has_w)
      in[k++] = dm_grad_input(g, 2);
    in[k++] = dm_grad_output(g, 0);
    in[k++] = dl;
    /* Labels and weights get no gradient. */
    const char *out[] = {dp ? part_l : dx};
    DM_TRY(dm_grad_emit(g, "SoftmaxWithLossGradient", k, in, 1, out));
  }
  if (dp) {
    const char *in[] = {dm_grad_output(g, 0), dp};
    const char *out[] = {dl ? part_p : dx};
    DM_TRY(dm_grad_emit(g, "SoftmaxGradient", 2, in, 1, out));
  }
  if (dp && dl) {
    const char *in[] = {part_l, part_p};
    const char *out[] = {dx};
    DM_TRY(dm_grad_emit(g, "Sum", 2, in, 1, out));
    dm_grad_clear_args(g);
  }
  return DM_OK;
}

static const dm_op_schema swl_schema = {
    .type = "SoftmaxWithLoss",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 2,
    .max_outputs = 2,
    .args = swl_args,
    .precision = DM_PREC_FP32,
    .doc = "logits (N x D at axis), labels (INT32 N, or the logits' dims before axis; FLOAT "
           "N x D with label_prob), [weights N] -> softmax (FLOAT), avg_loss = scale * sum_i "
           "w_i l_i / sum_i w_i over the rows whose label is not ignore_label (0 if none), "
           "l_i = -sum_j label_ij log(max(p_ij, 1e-20)).",
    .infer = swl_infer,
    .cost = swl_cost,
    .gradient = swl_gradient,
};

static const dm_op_schema swl_grad_schema = {
    .type = "SoftmaxWithLossGradient",
    .min_inputs = 4,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = swl_args,
    .precision = DM_PREC_FP32,
    .doc = "logits, labels, [weights], softmax, d_avg_loss -> dX (in the logits' dtype).",
    .infer = swl_grad_infer,
    .cost = swl_grad_cost,
};

/* Row i's softmax into p (double sums; the max is subtracted first). */
static void softmax_row(const float *x, float *p, int64_t D) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < D; j++)
    mx = x[j] > mx ? x[j] : mx;
  double sum = 0;
  for (int64_t j = 0; j < D; j++)
    sum += exp((double)x[j] - mx);
  for (int64_t j = 0; j < D; j++)
    p[j] = (float)(exp((double)x[j] - mx) / sum);
}

/* Whether row i counts: its integer label is not ignore_label (lab NULL: label_prob). */
static int row_counts(const int32_t *lab, int has_ignore, int32_t ignore, int64_t i) {
  return !lab || !has_ignore || lab[i] != ignore;
}

/* sum_i w_i (w NULL: 1) over the counted rows: the loss is a weighted mean. */
static double total_weight(const float *w, int64_t N, const int32_t *lab, int has_ignore,
                           int32_t ignore) {
  double t = 0;
  for (int64_t i = 0; i < N; i++)
    if (row_counts(lab, has_ignore, ignore, i))
      t += w ? w[i] : 1.0;
  return t;
}

static dm_status swl_run(dm_op_ctx *ctx) {
  DM_TRY(swl_infer(ctx));
  int has_w = dm_op_num_inputs(ctx) == 3, prob = dm_op_arg_int(ctx, "label_prob", 0) != 0;
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, x, dm_op_arg_int(ctx, "axis", 1), &N, &D));
  int has_ig = 0;
  int32_t ig = 0;
  DM_TRY(ignore_arg(ctx, &has_ig, &ig));
  const int32_t *lab = prob ? NULL : dm_tensor_data(l); /* (N) */
  if (!prob)
    DM_TRY(check_label_range_ignoring(ctx, lab, N, D, has_ig, ig));
  const float *w = has_w ? dm_tensor_data(dm_op_input(ctx, 2)) : NULL; /* (N) */
  float *owned;
  const float *px = as_f32(x, &owned); /* (N, D) */
  if (!px)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory widening the 16-bit logits");
  float *pp = dm_tensor_mutable_data(dm_op_output(ctx, 0)); /* (N, D) */
  double loss = 0;
#if DM_HAVE_OPENMP
#pragma omp parallel for reduction(+ : loss) if (N * D > (1 << 15))
#endif
  for (int64_t i = 0; i < N; i++) {
    float *p = pp + i * D;
    softmax_row(px + i * D, p, D);
    double li = 0;
    if (!row_counts(lab, has_ig, ig, i))
      continue; /* its softmax is still written: P is every row's */
    if (prob) {
      const float *t = (const float *)dm_tensor_data(l) + i * D; /* (D) */
      for (int64_t j = 0; j < D; j++)
        li -= t[j] * log_floored(p[j]);
    } else {
      li = -log_floored(p[lab[i]]);
    }
    loss += w ? w[i] * li : li;
  }
  free(owned);
  double tw = total_weight(w, N, lab, has_ig, ig);
  float *out = dm_tensor_mutable_data(dm_op_output(ctx, 1));
  /* All weights zero or every row ignored: nothing was measured; Caffe2 reports 0 rather
   * than 0/0. */
  *out = tw != 0 ? (float)(dm_op_arg_float(ctx, "scale", 1.0f) * loss / tw) : 0.0f;
  return DM_OK;
}

static dm_status swl_grad_run(dm_op_ctx *ctx) {
  DM_TRY(swl_grad_infer(ctx));
  int n = dm_op_num_inputs(ctx), has_w = n == 5;
  int prob = dm_op_arg_int(ctx, "label_prob", 0) != 0;
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, x, dm_op_arg_int(ctx, "axis", 1), &N, &D));
  int has_ig = 0;
  int32_t ig = 0;
  DM_TRY(ignore_arg(ctx, &has_ig, &ig));
  const int32_t *lab = prob ? NULL : dm_tensor_data(l); /* (N) */
  if (!prob)
    DM_TRY(check_label_range_ignoring(ctx, lab, N, D, has_ig, ig));
  const float *w = has_w ? dm_tensor_data(dm_op_input(ctx, 2)) : NULL; /* (N) */
  const float *pp = dm_tensor_data(dm_op_input(ctx, n - 2));            /* (N, D) */
  double tw = total_weight(w, N, lab, has_ig, ig);
  double k = tw != 0 ? dm_op_arg_float(ctx, "scale", 1.0f) *
                           *(const float *)dm_tensor_data(dm_op_input(ctx, n - 1)) / tw
                     : 0;
  dm_tensor *dx = dm_op_output(ctx, 0);
  int fp16 = dm_is_reduced_float(x->dtype);
  /* FP16/BF16 dX: computed into an FP32 buffer and rounded once. */
  float *buf = fp16 ? malloc((size_t)(x->numel ? x->numel : 1) * sizeof *buf)
                    : dm_tensor_mutable_data(dx);
  if (!buf)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for an FP32 dX");
#if DM_HAVE_OPENMP
#pragma omp parallel for if (N * D > (1 << 15))
#endif
  for (int64_t i = 0; i < N; i++) {
    const float *p = pp + i * D;
    float *d = buf + i * D;
    double ki = w ? k * w[i] : k;
    if (!row_counts(lab, has_ig, ig, i)) {
      for (int64_t j = 0; j < D; j++)
        d[j] = 0.0f; /* an ignored row: no gradient, even from a NaN softmax */
    } else if (prob) {
      /* d/dx_j of -sum_k t_k log p_k is p_j sum_k t_k - t_j (p_j - t_j when t sums to 1). */
      const float *t = (const float *)dm_tensor_data(l) + i * D;
      double ts = 0;
      for (int64_t j = 0; j < D; j++)
        ts += t[j];
      for (int64_t j = 0; j < D; j++)
        d[j] = (float)(ki * (p[j] * ts - t[j]));
    } else {
      int32_t y = lab[i];
      for (int64_t j = 0; j < D; j++)
        d[j] = (float)(ki * ((double)p[j] - (j == y)));
    }
  }
  if (fp16) {
    dm_narrow(x->dtype, buf, dm_tensor_mutable_data(dx), (size_t)x->numel);
    free(buf);
  }
  return DM_OK;
}

/* --- LabelCrossEntropy -------------------------------------------------------------- */

static dm_status lce_check(dm_op_ctx *ctx, int64_t *N, int64_t *D) {
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  DM_TRY(need_float(ctx, x, "X"));
  char xs[96];
  if (x->ndim != 1 && x->ndim != 2)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s; expected N x D (or D for one row)",
                       dm_shape_str(x, xs, sizeof xs));
  DM_TRY(dm_loss_rows(ctx, x, 1, N, D));
  return check_int_labels(ctx, l, *N, NULL, 1);
}

static dm_status lce_infer(dm_op_ctx *ctx) {
  int64_t N, D;
  DM_TRY(lce_check(ctx, &N, &D));
  return dm_op_set_output(ctx, 0, DM_FLOAT, 1, &N);
}

/* X, label, dY -> dX. */
static dm_status lce_grad_infer(dm_op_ctx *ctx) {
  int64_t N, D;
  DM_TRY(lce_check(ctx, &N, &D));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  DM_TRY(need_float(ctx, dy, "dY"));
  if (dy->numel != N)
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY has %lld elements but X has %lld rows",
                       (long long)dy->numel, (long long)N);
  return dm_op_set_output(ctx, 0, DM_FLOAT, x->ndim, x->dims);
}

static void lce_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *l = dm_op_input(ctx, 1);
  c->flops = 2 * (double)l->numel;
  c->bytes_read = 8 * (double)l->numel; /* one X entry and one label per row */
  c->bytes_written = 4 * (double)l->numel;
}

static void lce_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  c->flops = 2 * (double)l->numel;
  c->bytes_read = 12 * (double)l->numel;
  c->bytes_written = (double)dm_tensor_nbytes(x);
}

static dm_status lce_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_input(g, 1), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "LabelCrossEntropyGradient", 3, in, 1, out);
}

static const dm_op_schema lce_schema = {
    .type = "LabelCrossEntropy",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .precision = DM_PREC_FP32,
    .nonfloat_inputs = 0x2, /* the INT32 labels */
    .doc = "X (N x D probabilities), label (INT32 N) -> Y[i] = -log(max(X[i, label_i], 1e-20)).",
    .infer = lce_infer,
    .cost = lce_cost,
    .gradient = lce_gradient,
};

static const dm_op_schema lce_grad_schema = {
    .type = "LabelCrossEntropyGradient",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .precision = DM_PREC_FP32,
    .nonfloat_inputs = 0x2, /* the INT32 labels */
    .doc = "X, label, dY -> dX: -dY[i] / max(X[i, label_i], 1e-20) at the label, 0 elsewhere.",
    .infer = lce_grad_infer,
    .cost = lce_grad_cost,
};

static dm_status lce_run(dm_op_ctx *ctx) {
  DM_TRY(lce_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, dm_op_input(ctx, 0), 1, &N, &D));
  const float *px = dm_tensor_data(dm_op_input(ctx, 0)); /* (N, D) */
  const int32_t *lab = dm_tensor_data(dm_op_input(ctx, 1)); /* (N) */
  DM_TRY(check_label_range(ctx, lab, N, D));
  float *py = dm_tensor_mutable_data(dm_op_output(ctx, 0)); /* (N) */
  for (int64_t i = 0; i < N; i++)
    py[i] = (float)-log_floored(px[i * D + lab[i]]);
  return DM_OK;
}

static dm_status lce_grad_run(dm_op_ctx *ctx) {
  DM_TRY(lce_grad_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, dm_op_input(ctx, 0), 1, &N, &D));
  const float *px = dm_tensor_data(dm_op_input(ctx, 0));   /* (N, D) */
  const int32_t *lab = dm_tensor_data(dm_op_input(ctx, 1)); /* (N) */
  const float *pdy = dm_tensor_data(dm_op_input(ctx, 2));   /* (N) */
  DM_TRY(check_label_range(ctx, lab, N, D));
  float *pdx = dm_tensor_mutable_data(dm_op_output(ctx, 0)); /* (N, D) */
  for (int64_t i = 0; i < N * D; i++)
    pdx[i] = 0.0f;
  /* Below the floor the forward is constant, so its derivative there is 0 too. */
  for (int64_t i = 0; i < N; i++) {
    float xl = px[i * D + lab[i]];
    pdx[i * D + lab[i]] = xl > DM_LOG_FLOOR ? -pdy[i] / xl : 0.0f;
  }
  return DM_OK;
}

/* --- AveragedLoss ------------------------------------------------------------------- */

static dm_status avg_infer(dm_op_ctx *ctx) {
  DM_TRY(need_float(ctx, dm_op_input(ctx, 0), "X"));
  return dm_op_set_output(ctx, 0, DM_FLOAT, 0, NULL);
}

static dm_status avg_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  DM_TRY(need_float(ctx, x, "X"));
  DM_TRY(need_float(ctx, dy, "dY"));
  if (dy->numel != 1)
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY has %lld elements; expected 1 (a scalar loss)",
                       (long long)dy->numel);
  return dm_op_set_output(ctx, 0, DM_FLOAT, x->ndim, x->dims);
}

static void avg_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  c->flops = (double)x->numel;
  c->bytes_read = (double)dm_tensor_nbytes(x);
  c->bytes_written = 4;
}

static void avg_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  c->flops = 1;
  c->bytes_read = 4; /* X is read for its shape only */
  c->bytes_written = (double)dm_tensor_nbytes(x);
}

static dm_status avg_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "AveragedLossGradient", 2, in, 1, out);
}

static const dm_op_schema avg_schema = {
    .type = "AveragedLoss",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .precision = DM_PREC_FP32,
    .doc = "X -> the mean of all of X's elements (a 0-d FLOAT).",
    .infer = avg_infer,
    .cost = avg_cost,
    .gradient = avg_gradient,
};

static const dm_op_schema avg_grad_schema = {
    .type = "AveragedLossGradient",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .precision = DM_PREC_FP32,
    .doc = "X, dY (scalar) -> dX = dY / numel(X) everywhere, in X's shape.",
    .infer = avg_grad_infer,
    .cost = avg_grad_cost,
};

static dm_status avg_run(dm_op_ctx *ctx) {
  DM_TRY(avg_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  const float *px = dm_tensor_data(x); /* (numel) */
  double s = 0;
#if DM_HAVE_OPENMP
#pragma omp parallel for reduction(+ : s) if (x->numel > (1 << 16))
#endif
  for (int64_t i = 0; i < x->numel; i++)
    s += px[i];
  /* The mean of nothing is 0 (Caffe2 would divide by zero). */
  *(float *)dm_tensor_mutable_data(dm_op_output(ctx, 0)) =
      x->numel ? (float)(s / (double)x->numel) : 0.0f;
  return DM_OK;
}

static dm_status avg_grad_run(dm_op_ctx *ctx) {
  DM_TRY(avg_grad_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  float g = x->numel ? (float)(*(const float *)dm_tensor_data(dm_op_input(ctx, 1)) /
                               (double)x->numel)
                     : 0.0f;
  float *pdx = dm_tensor_mutable_data(dm_op_output(ctx, 0)); /* (numel) */
  for (int64_t i = 0; i < x->numel; i++)
    pdx[i] = g;
  return DM_OK;
}

/* --- Accuracy ----------------------------------------------------------------------- */

static const dm_arg_spec acc_args[] = {
    {"top_k", DM_ARG_INT, 0, "a row counts as correct when fewer than top_k entries exceed "
                             "the label's (default 1)"},
    {"ignore_label", DM_ARG_INT, 0, "rows with this label are not counted: the fraction is "
                                    "over the others, 0 when there are none (default: none)"},
    {NULL, 0, 0, NULL},
};

static dm_status acc_infer(dm_op_ctx *ctx) {
  int64_t N, D;
  DM_TRY(lce_check(ctx, &N, &D));
  int64_t k = dm_op_arg_int(ctx, "top_k", 1);
  if (k < 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "top_k is %lld; it must be at least 1", (long long)k);
  int has_ig = 0;
  int32_t ig = 0;
  DM_TRY(ignore_arg(ctx, &has_ig, &ig));
  return dm_op_set_output(ctx, 0, DM_FLOAT, 0, NULL);
}

static void acc_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0), *l = dm_op_input(ctx, 1);
  c->flops = (double)x->numel; /* one compare each */
  c->bytes_read = (double)dm_tensor_nbytes(x) + (double)dm_tensor_nbytes(l);
  c->bytes_written = 4;
}

static const dm_op_schema acc_schema = {
    .type = "Accuracy",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = acc_args,
    .precision = DM_PREC_FP32,
    .nonfloat_inputs = 0x2, /* the INT32 labels */
    .doc = "predictions (N x D), labels (INT32 N) -> the fraction of rows whose label is in "
           "the top_k (ties favour the label: only strictly greater entries count; a row "
           "holding a NaN is wrong), over the rows whose label is not ignore_label (a "
           "masked LM's unmasked positions). Not differentiable.",
    .infer = acc_infer,
    .cost = acc_cost,
    .gradient = NULL,
    .no_gradient = 0, /* asking for its gradient is an error */
};

static dm_status acc_run(dm_op_ctx *ctx) {
  DM_TRY(acc_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, dm_op_input(ctx, 0), 1, &N, &D));
  const float *px = dm_tensor_data(dm_op_input(ctx, 0));   /* (N, D) */
  const int32_t *lab = dm_tensor_data(dm_op_input(ctx, 1)); /* (N) */
  int has_ig = 0;
  int32_t ig = 0;
  DM_TRY(ignore_arg(ctx, &has_ig, &ig));
  DM_TRY(check_label_range_ignoring(ctx, lab, N, D, has_ig, ig));
  int64_t k = dm_op_arg_int(ctx, "top_k", 1), correct = 0, counted = 0;
  for (int64_t i = 0; i < N; i++) {
    if (has_ig && lab[i] == ig)
      continue;
    counted++;
    const float *r = px + i * D;
    float v = r[lab[i]];
    /* A NaN anywhere in the row makes it wrong: NaN compares greater than nothing, so a
     * diverged net's all-NaN output would otherwise score every row correct. */
    int64_t greater = 0, nan = isnan(v);
    for (int64_t j = 0; j < D && !nan; j++) {
      nan = isnan(r[j]);
      greater += r[j] > v;
    }
    correct += !nan && greater < k;
  }
  *(float *)dm_tensor_mutable_data(dm_op_output(ctx, 0)) =
      counted ? (float)((double)correct / (double)counted) : 0.0f;
  return DM_OK;
}

/* --- registration ------------------------------------------------------------------- */

/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "SoftmaxWithLoss", .device = DM_CPU, .run = swl_run},
    {.type = "SoftmaxWithLossGradient", .device = DM_CPU, .run = swl_grad_run},
    {.type = "LabelCrossEntropy", .device = DM_CPU, .run = lce_run},
    {.type = "LabelCrossEntropyGradient", .device = DM_CPU, .run = lce_grad_run},
    {.type = "AveragedLoss", .device = DM_CPU, .run = avg_run},
    {.type = "AveragedLossGradient", .device = DM_CPU, .run = avg_grad_run},
    {.type = "Accuracy", .device = DM_CPU, .run = acc_run},
    {0},
};

static const dm_op_schema *const schemas[] = {
    &swl_schema, &swl_grad_schema, &lce_schema, &lce_grad_schema,
    &avg_schema, &avg_grad_schema, &acc_schema, NULL,
};
const dm_op_family dm_family_loss = {schemas, kernels};
