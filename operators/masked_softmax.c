/* masked_softmax.c: MaskedSoftmax and MaskedSoftmaxGradient, attention's softmax over
 * the last axis with a causal rule, an additive mask and a logit scale; FLOAT, FLOAT16
 * and BFLOAT16, computed in FP32.
 *
 * Not a Caffe2 op (Caffe2 has none; its transformers add the mask with Add). X is
 * [..., Tq, Tk]; each row of Tk logits is z_j = scale * x_j + mask_j with the scale
 * applied in FP32, so FP16 logits whose scaled value fits are never formed in FP16 (an
 * FP16 x * scale product that would overflow before the scale brings it down cannot
 * occur either: x is widened first). With causal=1 key j of query i is masked out when
 * j > i + (Tk - Tq), the rule for Tq queries that are the last of Tk positions (a
 * decoder's cached keys); a mask value of -inf masks a key out too. Masked keys get
 * y = 0 exactly. A row with every key masked out gives zeros, not NaN (PyTorch's
 * fused attention does the same), and its gradient is zero.
 *
 * The mask (FP32 or X's dtype) broadcasts to X as numpy does from the trailing dims
 * ([Tq, Tk] for every batch and head, [B, 1, 1, Tk] for key padding). It is taken as a
 * constant: no gradient flows to it.
 *
 * MaskedSoftmaxGradient: Y, dY -> dX = scale * Y * (dY - <dY, Y>) per row; masked keys
 * have Y = 0 and so dX = 0. dX may share dY's blob.
 */
#include <math.h>
#include <stdlib.h>

#include "dm_config.h"

#include "builtin.h"
#include "common.h"
#include "masked_softmax.h"

static const dm_arg_spec ms_args[] = {
    {"causal", DM_ARG_INT, 0, "1: key j of query i is masked out when j > i + (Tk - Tq) "
                              "(default 0)"},
    {"scale", DM_ARG_FLOAT, 0, "logits are scale * X, formed in FP32 (default 1; "
                               "attention's 1/sqrt(head dim))"},
    {NULL, 0, 0, NULL},
};

/* The checks both ops share: a float X (or Y) of at least 2 dims, causal 0 or 1, a finite
 * scale. */
static dm_status ms_common(dm_op_ctx *ctx, const dm_tensor *x, const char *what) {
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; %s takes FLOAT, FLOAT16 or BFLOAT16", what,
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  char xs[96];
  if (x->ndim < 2)
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s; expected at least 2 dims [..., Tq, Tk]",
                       what, dm_shape_str(x, xs, sizeof xs));
  int64_t causal = dm_op_arg_int(ctx, "causal", 0);
  if (causal != 0 && causal != 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "causal is %lld; expected 0 or 1", (long long)causal);
  float scale = dm_op_arg_float(ctx, "scale", 1.0f);
  if (!isfinite(scale))
    return dm_op_error(ctx, DM_ERR_INVALID, "scale is %g; it must be finite", (double)scale);
  return DM_OK;
}

static dm_status ms_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(ms_common(ctx, x, "X"));
  if (dm_op_num_inputs(ctx) == 2) {
    const dm_tensor *m = dm_op_input(ctx, 1);
    char xs[96], ms[96];
    if (m->dtype != DM_FLOAT && m->dtype != x->dtype)
      return dm_op_error(ctx, DM_ERR_TYPE, "mask is %s; expected FLOAT or X's dtype %s",
                         dm_dtype_name(m->dtype), dm_dtype_name(x->dtype));
    int ok = m->ndim <= x->ndim;
    for (int k = 0; ok && k < m->ndim; k++) {
      int64_t md = m->dims[m->ndim - 1 - k], xd = x->dims[x->ndim - 1 - k];
      ok = md == 1 || md == xd;
    }
    if (!ok)
      return dm_op_error(ctx, DM_ERR_SHAPE, "mask %s does not broadcast to X %s (from the "
                         "trailing dims, each 1 or X's)", dm_shape_str(m, ms, sizeof ms),
                         dm_shape_str(x, xs, sizeof xs));
  }
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static dm_status ms_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  DM_TRY(ms_common(ctx, y, "Y"));
  char ys[96], ds[96];
  if (!dm_tensor_same_shape(y, dy) || dy->dtype != y->dtype)
    return dm_op_error(ctx, DM_ERR_SHAPE, "Y is %s %s but dY is %s %s; they must match",
                       dm_dtype_name(y->dtype), dm_shape_str(y, ys, sizeof ys),
                       dm_dtype_name(dy->dtype), dm_shape_str(dy, ds, sizeof ds));
  /* each row of Y and dY is widened before that row of dX is written */
  DM_TRY(dm_op_check_grad_alias(ctx, 0, 1, 0, (const char *const[]){"Y", "dY"}));
  return dm_op_set_output(ctx, 0, y->dtype, y->ndim, y->dims);
}

static void ms_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  c->flops = 6 * (double)dm_op_input(ctx, 0)->numel; /* scale, mask, max, exp, sum, divide */
  dm_cost_io(ctx, c);
}

static void ms_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  c->flops = 5 * (double)dm_op_input(ctx, 0)->numel; /* dot (2), subtract, two multiplies */
  dm_cost_io(ctx, c);
}

/* Y, dY -> dX; the mask is a constant and gets no gradient. */
static dm_status ms_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_output(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "MaskedSoftmaxGradient", 2, in, 1, out);
}

static const dm_op_schema ms_schema = {
    .type = "MaskedSoftmax",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = ms_args,
    .precision = DM_PREC_FP32,
    .fp32_inputs = 0x2, /* the mask: -1e9 or -inf masks need no 16-bit copy */
    .doc = "X [..., Tq, Tk] [, mask] -> Y: softmax over the last axis of scale * X + mask "
           "(scale in FP32; mask FP32 or X's dtype, broadcast from the trailing dims, no "
           "gradient), keys j > i + (Tk - Tq) of query i masked out with causal=1. Masked "
           "keys give 0; a row with every key masked out gives zeros.",
    .infer = ms_infer,
    .cost = ms_cost,
    .gradient = ms_gradient,
};

static const dm_inplace_pair ms_grad_inplace[] = {{1, 0}, {-1, -1}};

static const dm_op_schema ms_grad_schema = {
    .type = "MaskedSoftmaxGradient",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = ms_args,
    .inplace = ms_grad_inplace,
    .precision = DM_PREC_FP32,
    .doc = "Y, dY -> dX = scale * Y * (dY - sum(dY * Y)) per row of the last axis.",
    .infer = ms_grad_infer,
    .cost = ms_grad_cost,
};

/* One run's rows: R rows of Tk, row r being query r % Tq. */
typedef struct ms_rows {
  dm_dtype t, mt;
  int64_t Tq, Tk;
  float scale;
  int causal;
  const void *x, *dy, *mask;
  void *out;
  int nd;                          /* X's leading dims (all but the last) */
  int64_t lead[DM_MAX_DIMS];       /* their sizes */
  int64_t mstride[DM_MAX_DIMS + 1]; /* the mask's stride along each of X's dims (0: broadcast) */
} ms_rows;

/* The mask's offset of row r's first key. */
static int64_t ms_mask_offset(const ms_rows *r, int64_t row) {
  int64_t off = 0;
  for (int k = r->nd - 1; k >= 0; k--) {
    off += (row % r->lead[k]) * r->mstride[k];
    row /= r->lead[k];
  }
  return off;
}

/* Row i of MaskedSoftmax; the scratch holds the logits, then the mask row, in FP32. */
static void ms_row(void *arg, void *scratch, int64_t i) {
  const ms_rows *r = arg;
  const int64_t Tk = r->Tk;
  float *z = scratch, *m = z + Tk; /* (Tk) each */
  dm_load_f32(r->t, r->x, i * Tk, Tk, z);
  /* keys [0, lim) may be kept */
  int64_t lim = Tk;
  if (r->causal) {
    int64_t q = i % r->Tq, l = q + (Tk - r->Tq) + 1;
    lim = l < 0 ? 0 : l < Tk ? l : Tk;
  }
  if (r->mask) {
    int64_t off = ms_mask_offset(r, i);
    if (r->mstride[r->nd]) /* one mask value per key */
      dm_load_f32(r->mt, r->mask, off, lim, m);
    else if (lim > 0) {    /* one for the whole row */
      dm_load_f32(r->mt, r->mask, off, 1, m);
      for (int64_t j = 1; j < lim; j++)
        m[j] = m[0];
    }
  }
  float mx = -INFINITY;
  for (int64_t j = 0; j < lim; j++) {
    z[j] = r->scale * z[j];
    if (r->mask)
      z[j] += m[j];
    mx = z[j] > mx ? z[j] : mx;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < lim; j++) {
    /* a -inf logit is a masked key: exp(-inf) is 0; a row of them has mx -inf */
    z[j] = mx == -INFINITY ? 0.0f : expf(z[j] - mx);
    sum += z[j];
  }
  float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int64_t j = 0; j < Tk; j++)
    z[j] = j < lim ? z[j] * inv : 0.0f;
  dm_store_f32(r->t, r->out, i * Tk, Tk, z);
}

/* Row i of MaskedSoftmaxGradient; the dot is accumulated in double, as Softmax's. */
static void ms_grad_row(void *arg, void *scratch, int64_t i) {
  const ms_rows *r = arg;
  const int64_t Tk = r->Tk;
  float *y = scratch, *dy = y + Tk; /* (Tk) each */
  dm_load_f32(r->t, r->x, i * Tk, Tk, y);
  dm_load_f32(r->t, r->dy, i * Tk, Tk, dy);
  double dot = 0;
  for (int64_t j = 0; j < Tk; j++)
    dot += (double)dy[j] * y[j];
  float fdot = (float)dot;
  for (int64_t j = 0; j < Tk; j++)
    dy[j] = r->scale * (y[j] * (dy[j] - fdot));
  dm_store_f32(r->t, r->out, i * Tk, Tk, dy);
}

void dm_masked_softmax_geom(const dm_tensor *x, const dm_tensor *m, int *nd, int64_t *lead,
                            int64_t *mstride) {
  *nd = x->ndim - 1;
  for (int k = 0; k < *nd; k++)
    lead[k] = x->dims[k];
  int64_t st = 1;
  for (int k = x->ndim - 1; k >= 0; k--) {
    int mk = m ? k - (x->ndim - m->ndim) : -1; /* the mask's dim aligned with X's dim k */
    int64_t md = mk >= 0 ? m->dims[mk] : 1;
    mstride[k] = md == 1 ? 0 : st;
    st *= md;
  }
}

/* The row view shared by both kernels; the mask's strides when there is one. */
static void ms_setup(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *m, ms_rows *r) {
  r->t = x->dtype;
  r->Tq = x->dims[x->ndim - 2], r->Tk = x->dims[x->ndim - 1];
  r->scale = dm_op_arg_float(ctx, "scale", 1.0f);
  r->causal = dm_op_arg_int(ctx, "causal", 0) != 0;
  dm_masked_softmax_geom(x, m, &r->nd, r->lead, r->mstride);
  if (m)
    r->mt = m->dtype, r->mask = dm_tensor_data(m);
}

static dm_status ms_run(dm_op_ctx *ctx) {
  DM_TRY(ms_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  const dm_tensor *m = dm_op_num_inputs(ctx) == 2 ? dm_op_input(ctx, 1) : NULL;
  ms_rows r = {0};
  ms_setup(ctx, x, m, &r);
  r.x = dm_tensor_data(x), r.out = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  if (x->numel == 0)
    return DM_OK;
  int64_t R = x->numel / r.Tk;
  return dm_parallel_rows(ctx, R, x->numel > (1 << 15), 2 * (size_t)r.Tk * sizeof(float),
                          "FP32 rows", ms_row, &r);
}

static dm_status ms_grad_run(dm_op_ctx *ctx) {
  DM_TRY(ms_grad_infer(ctx));
  const dm_tensor *y = dm_op_input(ctx, 0);
  ms_rows r = {0};
  ms_setup(ctx, y, NULL, &r);
  r.x = dm_tensor_data(y), r.dy = dm_tensor_data(dm_op_input(ctx, 1));
  r.out = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  if (y->numel == 0)
    return DM_OK;
  int64_t R = y->numel / r.Tk;
  return dm_parallel_rows(ctx, R, y->numel > (1 << 15), 2 * (size_t)r.Tk * sizeof(float),
                          "FP32 rows", ms_grad_row, &r);
}

static const dm_op_schema *const schemas[] = {&ms_schema, &ms_grad_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "MaskedSoftmax", .device = DM_CPU, .run = ms_run},
    {.type = "MaskedSoftmaxGradient", .device = DM_CPU, .run = ms_grad_run},
    {0},
};
const dm_op_family dm_family_masked_softmax = {schemas, kernels};
