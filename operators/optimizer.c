/* optimizer.c: the update ops of training, with Caffe2's names, inputs, arguments and
 * arithmetic: Iter, LearningRate, WeightedSum, MomentumSGDUpdate, Adam, and AdamW (torch's,
 * which Caffe2 lacks). FP32 only.
 *
 * Signs follow Caffe2 exactly, and they differ between ops (the optimizer pass chooses
 * base_lr's sign per update op):
 *   WeightedSum        Y = sum w_i X_i; plain SGD is param = 1 * param + lr * grad, so lr
 *                      (base_lr) is NEGATIVE; weight decay is grad = 1 * grad + wd * param.
 *   MomentumSGDUpdate  g' = lr * g + mu * m; m = g'; param -= g'   (lr POSITIVE)
 *                      nesterov: m' = mu * m + lr * g; g' = (1 + mu) m' - mu m; param -= g'
 *   Adam               m1 = b1 m1 + (1 - b1) g; m2 = b2 m2 + (1 - b2) g^2;
 *                      param += lr * c * m1 / (sqrt(m2) + eps),  (lr NEGATIVE)
 *                      c = sqrt(1 - b2^t) / (1 - b1^t), t = iter + 1 (Caffe2's correction).
 *   AdamW              torch.optim.AdamW (decoupled weight decay) at step t = iter (the
 *                      Iter op before it counted the step, so the first is t = 1, as
 *                      torch's), with Adam's inputs and
 *                      Adam's sign of lr (NEGATIVE, lr = -torch's lr): torch's step
 *                        param *= 1 - |lr| wd; m1, m2 as Adam;
 *                        param -= |lr| / (1 - b1^t) * m1 / (sqrt(m2) / sqrt(1 - b2^t) + eps)
 *                      is Adam's element step with param scaled by 1 + lr * wd and epsilon
 *                      eps * sqrt(1 - b2^t) (the same quotient, multiplied through by
 *                      sqrt(1 - b2^t)), so both ops run one loop. Defaults are torch's:
 *                      epsilon 1e-8 (added to sqrt(m2 / (1 - b2^t)), not Caffe2's place),
 *                      weight_decay 0.01.
 *   Iter               iter += 1 (INT64, in place); with no input, an output blob that is
 *                      still empty starts at 0, as Caffe2's IterOp does; an empty (0-element)
 *                      input starts at 0 as well. The executor refuses an input blob that
 *                      was never written, so a net that cannot rely on an init net uses the
 *                      no-input form `Iter() -> iter`.
 *   LearningRate       lr = base_lr * multiplier(iter) (lr_policy.h), a FLOAT scalar (0-d,
 *                      one element, as Caffe2).
 *
 * Skipping a step (for the mixed-precision pass, which must leave everything unchanged
 * when a gradient overflowed): every update op takes one OPTIONAL input after Caffe2's
 * own, `skip`, a one-element BOOL, UINT8, INT32, INT64, FLOAT, FLOAT16 or DOUBLE tensor.
 * When it is nonzero (NaN counts as nonzero) the op writes nothing: an in-place output
 * stays bit-for-bit what it was; an output in a different blob receives a copy of the
 * input it would have updated (the identity step). The optional input sits at:
 *   Iter: iter, [skip]        MomentumSGDUpdate: grad, moment, lr, param, [skip]
 *   Adam, AdamW: param, m1, m2, grad, lr, iter, [skip]
 *   WeightedSum: X0, w0, ..., Xn, wn, [skip]  (an odd input count means a skip input)
 * Caffe2 has no such input; nets without it are Caffe2's nets unchanged.
 *
 * None of these ops can be differentiated (schemas say so: gradient NULL, no_gradient 0),
 * except Iter, which passes no gradient (no_gradient 1), as in Caffe2.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "builtin.h"
#include "common.h"
#include "core/half.h"
#include "lr_policy.h"
#include "optimizer.h"

/* Threads for loops over `n` elements (the pragma names the local variable n); each
 * element is independent, so results do not depend on the thread count. */
#if DM_HAVE_OPENMP
#define OMP_FOR_N _Pragma("omp parallel for if (n > (1 << 16))")
#else
#define OMP_FOR_N
#endif

/* ---- shared helpers ---------------------------------------------------------------- */

/* Input i must be a one-element tensor of a numeric dtype (checked in infer). */
dm_status dm_update_check_scalar(dm_op_ctx *ctx, int i, const char *what, int float_only) {
  const dm_tensor *t = dm_op_input(ctx, i);
  dm_dtype d = t->dtype;
  int ok = float_only ? d == DM_FLOAT
                      : d == DM_FLOAT || d == DM_FLOAT16 || d == DM_DOUBLE || d == DM_BOOL ||
                            d == DM_UINT8 || d == DM_INT32 || d == DM_INT64;
  if (!ok)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s (input %d '%s') is %s; expected %s", what, i,
                       dm_op_input_name(ctx, i), dm_dtype_name(d),
                       float_only ? "FLOAT" : "BOOL, UINT8, INT32, INT64, FLOAT, FLOAT16 or DOUBLE");
  if (t->numel != 1) {
    char buf[96];
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s (input %d '%s') must have one element, but is %s",
                       what, i, dm_op_input_name(ctx, i), dm_shape_str(t, buf, sizeof buf));
  }
  return DM_OK;
}

/* Whether the optional skip input at index i is present and nonzero. */
int dm_update_skip_requested(dm_op_ctx *ctx, int i) {
  if (dm_op_num_inputs(ctx) <= i)
    return 0;
  const dm_tensor *t = dm_op_input(ctx, i);
  const void *p = dm_tensor_data(t);
  switch (t->dtype) {
  case DM_BOOL:
  case DM_UINT8: return *(const uint8_t *)p != 0;
  case DM_INT32: return *(const int32_t *)p != 0;
  case DM_INT64: return *(const int64_t *)p != 0;
  case DM_FLOAT: return !(*(const float *)p == 0);
  case DM_DOUBLE: return !(*(const double *)p == 0);
  case DM_FLOAT16: return !(dm_half_to_float(*(const uint16_t *)p) == 0);
  default: return 1; /* infer refuses other dtypes */
  }
}

/* A skipped step: each output (out[k]) not in its input's blob (in[k]) gets a copy. */
dm_status dm_update_skip_outputs(dm_op_ctx *ctx, int n, const int *in, const int *out) {
  for (int k = 0; k < n; k++) {
    const dm_tensor *x = dm_op_input(ctx, in[k]);
    dm_tensor *y = dm_op_output(ctx, out[k]);
    if (y != x)
      DM_TRY(dm_tensor_copy(y, x));
  }
  return DM_OK;
}

/* Inputs listed in idx must all be FLOAT with the shape of the first. */
static dm_status check_same_float(dm_op_ctx *ctx, int n, const int *idx, const char *const *what) {
  const dm_tensor *ref = dm_op_input(ctx, idx[0]);
  for (int k = 0; k < n; k++) {
    const dm_tensor *t = dm_op_input(ctx, idx[k]);
    if (t->dtype != DM_FLOAT)
      return dm_op_error(ctx, DM_ERR_TYPE, "%s (input %d '%s') is %s; this update takes FLOAT",
                         what[k], idx[k], dm_op_input_name(ctx, idx[k]), dm_dtype_name(t->dtype));
    if (!dm_tensor_same_shape(t, ref)) {
      char a[96], b[96];
      return dm_op_error(ctx, DM_ERR_SHAPE, "%s '%s' is %s, but %s '%s' is %s", what[k],
                         dm_op_input_name(ctx, idx[k]), dm_shape_str(t, a, sizeof a), what[0],
                         dm_op_input_name(ctx, idx[0]), dm_shape_str(ref, b, sizeof b));
    }
  }
  return DM_OK;
}

/* ---- Iter ----------------------------------------------------------------------------- */

static const dm_inplace_pair iter_inplace[] = {{0, 0}, {-1, -1}};

static dm_status iter_infer(dm_op_ctx *ctx) {
  static const int64_t one[1] = {1};
  if (dm_op_num_inputs(ctx) == 0)
    return dm_op_set_output(ctx, 0, DM_INT64, 1, one);
  const dm_tensor *it = dm_op_input(ctx, 0);
  if (dm_op_output(ctx, 0) != it)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "Iter runs in place: its output must be its input '%s', not '%s'",
                       dm_op_input_name(ctx, 0), dm_op_output_name(ctx, 0));
  if (it->dtype != DM_INT64 || it->numel > 1) {
    char buf[96];
    return dm_op_error(ctx, DM_ERR_TYPE, "iter '%s' is %s %s; expected INT64 with one element",
                       dm_op_input_name(ctx, 0), dm_dtype_name(it->dtype),
                       dm_shape_str(it, buf, sizeof buf));
  }
  if (dm_op_num_inputs(ctx) > 1)
    DM_TRY(dm_update_check_scalar(ctx, 1, "skip", 0));
  if (it->numel == 1)
    return dm_op_set_output(ctx, 0, DM_INT64, it->ndim, it->dims);
  return dm_op_set_output(ctx, 0, DM_INT64, 1, one);
}

static dm_status iter_run(dm_op_ctx *ctx) {
  dm_tensor *y = dm_op_output(ctx, 0);
  int64_t cur = 0;
  if (dm_op_num_inputs(ctx) == 0) {
    /* Caffe2's input-less form: the output blob itself holds the count. */
    if (y->dtype != DM_UNDEFINED && y->numel > 0) {
      if (y->dtype != DM_INT64 || y->numel != 1)
        return dm_op_error(ctx, DM_ERR_TYPE, "iter '%s' holds %s data; expected one INT64",
                           dm_op_output_name(ctx, 0), dm_dtype_name(y->dtype));
      cur = *(const int64_t *)dm_tensor_data(y);
    } else {
      static const int64_t one[1] = {1};
      DM_TRY(dm_op_set_output(ctx, 0, DM_INT64, 1, one));
      cur = 0;
    }
  } else {
    /* Read the count before infer resizes the blob (an empty one grows to one element,
     * whose fresh storage holds no count yet). */
    const dm_tensor *it = dm_op_input(ctx, 0);
    if (it->dtype == DM_INT64 && it->numel == 1)
      cur = *(const int64_t *)dm_tensor_data(it);
    DM_TRY(iter_infer(ctx));
    if (dm_update_skip_requested(ctx, 1)) {
      *(int64_t *)dm_tensor_mutable_data(y) = cur; /* unchanged (an empty count is 0) */
      return DM_OK;
    }
  }
  if (cur == INT64_MAX)
    return dm_op_error(ctx, DM_ERR_LIMIT, "the iteration count overflows INT64");
  if (y->numel != 1) {
    static const int64_t one[1] = {1};
    DM_TRY(dm_op_set_output(ctx, 0, DM_INT64, 1, one));
  }
  *(int64_t *)dm_tensor_mutable_data(y) = cur + 1;
  return DM_OK;
}

static const dm_op_schema iter_schema = {
    .type = "Iter", .min_inputs = 0, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .inplace = iter_inplace, .precision = DM_PREC_NONE,
    .nonfloat_inputs = 0x1, .nonfloat_outputs = 0x1, /* the INT64 counter */
    .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "[iter, [skip]] -> iter (INT64, one element, in place): +1 per run; with no input "
           "an empty output starts at 0; a nonzero skip leaves it unchanged.",
    .infer = iter_infer, .gradient = NULL, .no_gradient = 1};

/* ---- LearningRate ---------------------------------------------------------------------- */

static const dm_arg_spec lr_args[] = {
    {"base_lr", DM_ARG_FLOAT, 1, "the rate at iteration 0 before warmup (Caffe2: negative for "
                                 "WeightedSum/Adam, positive for MomentumSGDUpdate)"},
    {"policy", DM_ARG_STRING, 0, "fixed (default), step, exp, inv or poly"},
    {"stepsize", DM_ARG_INT, 0, "step: iterations per step"},
    {"gamma", DM_ARG_FLOAT, 0, "step, exp, inv: decay factor"},
    {"power", DM_ARG_FLOAT, 0, "inv, poly: exponent"},
    {"max_iter", DM_ARG_INT, 0, "poly: the iteration where the rate reaches 0"},
    {"warmup_iter", DM_ARG_INT, 0, "linear warmup over this many iterations (default 0)"},
    {"warmup_start", DM_ARG_FLOAT, 0, "warmup multiplier at iteration 0 (default 0)"},
    {NULL, 0, 0, NULL},
};

/* Arguments are checked once, when the net is instantiated. */
static dm_status lr_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  dm_lr_policy p;
  float base_lr;
  return dm_lr_args(ctx, &p, &base_lr);
}

static dm_status lr_infer(dm_op_ctx *ctx) {
  const dm_tensor *it = dm_op_input(ctx, 0);
  if (it->dtype != DM_INT64 || it->numel != 1) {
    char buf[96];
    return dm_op_error(ctx, DM_ERR_TYPE, "iter '%s' is %s %s; expected INT64 with one element",
                       dm_op_input_name(ctx, 0), dm_dtype_name(it->dtype),
                       dm_shape_str(it, buf, sizeof buf));
  }
  return dm_op_set_output(ctx, 0, DM_FLOAT, 0, NULL);
}

static dm_status lr_run(dm_op_ctx *ctx) {
  DM_TRY(lr_infer(ctx));
  dm_lr_policy p;
  DM_TRY(dm_lr_policy_from_args(ctx, &p));
  int64_t iter = *(const int64_t *)dm_tensor_data(dm_op_input(ctx, 0));
  if (iter < 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "the iteration is negative (%lld)", (long long)iter);
  double lr = (double)dm_op_arg_float(ctx, "base_lr", 0) * dm_lr_multiplier(&p, iter);
  *(float *)dm_tensor_mutable_data(dm_op_output(ctx, 0)) = (float)lr;
  return DM_OK;
}

static const dm_op_schema lr_schema = {
    .type = "LearningRate", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .args = lr_args, .precision = DM_PREC_FP32,
    .nonfloat_inputs = 0x1, /* the INT64 iteration */
    .role = DM_ROLE_OPTIMIZER, /* no skip input: it follows Iter, which a skip holds */
    .doc = "iter -> lr (FLOAT scalar) = base_lr * policy(iter) * warmup(iter).",
    .infer = lr_infer};

/* ---- WeightedSum ----------------------------------------------------------------------- */

static const dm_inplace_pair ws_inplace[] = {{0, 0}, {-1, -1}};

/* Caffe2: y = w0 * x0, then y += wk * xk for each further pair, in FP32. Each element
 * reads every input before y is written, so Y may be X0. */
void dm_weighted_sum_f32(const float *const *x, const float *w, int np, float *y, int64_t n) {
  OMP_FOR_N
  for (int64_t i = 0; i < n; i++) {
    float acc = w[0] * x[0][i];
    for (int k = 1; k < np; k++)
      acc += w[k] * x[k][i];
    y[i] = acc;
  }
}

/* Number of (X, w) pairs; an odd input count means a trailing skip input. */
static int ws_pairs(dm_op_ctx *ctx) { return dm_op_num_inputs(ctx) / 2; }

static dm_status ws_infer(dm_op_ctx *ctx) {
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  int np = ws_pairs(ctx);
  for (int k = 0; k < np; k++) {
    const dm_tensor *x = dm_op_input(ctx, 2 * k);
    char a[96], b[96];
    if (x->dtype != DM_FLOAT)
      return dm_op_error(ctx, DM_ERR_TYPE, "X%d '%s' is %s; WeightedSum takes FLOAT", k,
                         dm_op_input_name(ctx, 2 * k), dm_dtype_name(x->dtype));
    if (!dm_tensor_same_shape(x, x0))
      return dm_op_error(ctx, DM_ERR_SHAPE, "X%d '%s' is %s, but X0 '%s' is %s", k,
                         dm_op_input_name(ctx, 2 * k), dm_shape_str(x, a, sizeof a),
                         dm_op_input_name(ctx, 0), dm_shape_str(x0, b, sizeof b));
    DM_TRY(dm_update_check_scalar(ctx, 2 * k + 1, "a weight", 1));
  }
  if (dm_op_num_inputs(ctx) % 2)
    DM_TRY(dm_update_check_scalar(ctx, dm_op_num_inputs(ctx) - 1, "skip", 0));
  return dm_op_set_output(ctx, 0, DM_FLOAT, x0->ndim, x0->dims);
}

static dm_status ws_run(dm_op_ctx *ctx) {
  DM_TRY(ws_infer(ctx));
  if (dm_op_num_inputs(ctx) % 2 && dm_update_skip_requested(ctx, dm_op_num_inputs(ctx) - 1)) {
    static const int in[1] = {0}, out[1] = {0};
    return dm_update_skip_outputs(ctx, 1, in, out);
  }
  int np = ws_pairs(ctx);
  const float **x = malloc((size_t)np * sizeof *x);
  float *w = malloc((size_t)np * sizeof *w);
  if (!x || !w) {
    free(x);
    free(w);
    return DM_NOMEM("WeightedSum's input list");
  }
  for (int k = 0; k < np; k++) {
    x[k] = dm_tensor_data(dm_op_input(ctx, 2 * k));
    w[k] = *(const float *)dm_tensor_data(dm_op_input(ctx, 2 * k + 1));
  }
  dm_weighted_sum_f32(x, w, np, dm_tensor_mutable_data(dm_op_output(ctx, 0)),
                      dm_op_input(ctx, 0)->numel);
  free(x);
  free(w);
  return DM_OK;
}

static const dm_op_schema ws_schema = {
    .type = "WeightedSum", .min_inputs = 2, .max_inputs = -1, .min_outputs = 1,
    .max_outputs = 1, .inplace = ws_inplace, .precision = DM_PREC_FP32,
    .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "X0, w0, X1, w1, ..., [skip] -> Y = sum w_k X_k (FLOAT; w one-element); Y may be "
           "X0; an odd input count ends with a skip input (nonzero: Y = X0 unchanged).",
    .infer = ws_infer};

/* ---- MomentumSGDUpdate ----------------------------------------------------------------- */

/* Caffe2's momentum_sgd_update, element by element: every input is read before any
 * output is written, so each output may share its input's blob. */
void dm_momentum_sgd_f32(const float *g, const float *m, const float *p, float *ng, float *nm,
                         float *np, int64_t n, float lr, float mu, int nesterov) {
  OMP_FOR_N
  for (int64_t i = 0; i < n; i++) {
    const float gi = g[i], mi = m[i], pi = p[i];
    float adj, mnew;
    if (!nesterov) {
      adj = lr * gi + mu * mi;
      mnew = adj;
    } else {
      mnew = mu * mi + lr * gi;
      adj = (1 + mu) * mnew - mu * mi;
    }
    nm[i] = mnew;
    ng[i] = adj;
    np[i] = pi - adj;
  }
}

enum { M_GRAD, M_MOMENT, M_LR, M_PARAM, M_SKIP };
static const dm_arg_spec momentum_args[] = {
    {"momentum", DM_ARG_FLOAT, 0, "mu (default 0)"},
    {"nesterov", DM_ARG_INT, 0, "1: Nesterov's momentum (default 0)"},
    {NULL, 0, 0, NULL},
};
static const dm_inplace_pair momentum_inplace[] = {{0, 0}, {1, 1}, {3, 2}, {-1, -1}};

static dm_status momentum_infer(dm_op_ctx *ctx) {
  static const int idx[] = {M_GRAD, M_MOMENT, M_PARAM};
  static const char *const what[] = {"grad", "moment", "param"};
  DM_TRY(check_same_float(ctx, 3, idx, what));
  DM_TRY(dm_update_check_scalar(ctx, M_LR, "lr", 1));
  if (dm_op_num_inputs(ctx) > M_SKIP)
    DM_TRY(dm_update_check_scalar(ctx, M_SKIP, "skip", 0));
  const dm_tensor *g = dm_op_input(ctx, M_GRAD);
  for (int o = 0; o < 3; o++)
    DM_TRY(dm_op_set_output(ctx, o, DM_FLOAT, g->ndim, g->dims));
  return DM_OK;
}

static dm_status momentum_run(dm_op_ctx *ctx) {
  DM_TRY(momentum_infer(ctx));
  if (dm_update_skip_requested(ctx, M_SKIP)) {
    static const int in[3] = {M_GRAD, M_MOMENT, M_PARAM}, out[3] = {0, 1, 2};
    return dm_update_skip_outputs(ctx, 3, in, out);
  }
  const float *g = dm_tensor_data(dm_op_input(ctx, M_GRAD));
  const float *m = dm_tensor_data(dm_op_input(ctx, M_MOMENT));
  const float *p = dm_tensor_data(dm_op_input(ctx, M_PARAM));
  float *ng = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  float *nm = dm_tensor_mutable_data(dm_op_output(ctx, 1));
  float *np = dm_tensor_mutable_data(dm_op_output(ctx, 2));
  const float lr = *(const float *)dm_tensor_data(dm_op_input(ctx, M_LR));
  dm_momentum_sgd_f32(g, m, p, ng, nm, np, dm_op_input(ctx, M_GRAD)->numel, lr,
                      dm_op_arg_float(ctx, "momentum", 0), dm_op_arg_int(ctx, "nesterov", 0) != 0);
  return DM_OK;
}

static const dm_op_schema momentum_schema = {
    .type = "MomentumSGDUpdate", .min_inputs = 4, .max_inputs = 5, .min_outputs = 3,
    .max_outputs = 3, .args = momentum_args, .inplace = momentum_inplace,
    .precision = DM_PREC_FP32, .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "grad, moment, lr, param, [skip] -> grad, moment, param (in place): g' = lr g + mu "
           "m (nesterov: m' = mu m + lr g, g' = (1 + mu) m' - mu m); m = g' (m'); param -= g'.",
    .infer = momentum_infer};

/* ---- Adam ------------------------------------------------------------------------------- */

/* Caffe2: correction = sqrt(1 - b2^t) / (1 - b1^t), std::pow(float, int64) in double,
 * rounded to float. */
float dm_adam_correction(float b1, float b2, int64_t t) {
  return (float)(sqrt(1 - pow((double)b2, (double)t)) / (1 - pow((double)b1, (double)t)));
}

/* decay multiplies param before the step (AdamW's decoupled weight decay; Adam passes
 * 1, which leaves every value bit-identical). */
void dm_adamw_f32(const float *w, const float *m, const float *v, const float *g, float *nw,
                  float *nm, float *nv, int64_t n, float lr, float corr, float b1, float b2,
                  float eps, float decay) {
  OMP_FOR_N
  for (int64_t i = 0; i < n; i++) {
    const float gi = g[i], wi = w[i] * decay;
    const float mi = m[i] * b1 + gi * (1 - b1);
    const float vi = v[i] * b2 + gi * gi * (1 - b2);
    nm[i] = mi;
    nv[i] = vi;
    nw[i] = wi + lr * corr * mi / (sqrtf(vi) + eps);
  }
}

enum { A_PARAM, A_M1, A_M2, A_GRAD, A_LR, A_ITER, A_SKIP };
static const dm_arg_spec adam_args[] = {
    {"beta1", DM_ARG_FLOAT, 0, "first-moment decay (default 0.9)"},
    {"beta2", DM_ARG_FLOAT, 0, "second-moment decay (default 0.999)"},
    {"epsilon", DM_ARG_FLOAT, 0, "added to sqrt(m2) (default 1e-5)"},
    {NULL, 0, 0, NULL},
};
static const dm_arg_spec adamw_args[] = {
    {"beta1", DM_ARG_FLOAT, 0, "first-moment decay (default 0.9)"},
    {"beta2", DM_ARG_FLOAT, 0, "second-moment decay (default 0.999)"},
    {"epsilon", DM_ARG_FLOAT, 0, "added to sqrt(m2 / (1 - beta2^t)), torch's place "
                                 "(default 1e-8)"},
    {"weight_decay", DM_ARG_FLOAT, 0, "decoupled decay: param *= 1 - |lr| weight_decay "
                                      "(default 0.01)"},
    {NULL, 0, 0, NULL},
};
static const dm_inplace_pair adam_inplace[] = {{0, 0}, {1, 1}, {2, 2}, {-1, -1}};

static dm_status adam_infer(dm_op_ctx *ctx) {
  static const int idx[] = {A_PARAM, A_M1, A_M2, A_GRAD};
  static const char *const what[] = {"param", "moment_1", "moment_2", "grad"};
  DM_TRY(check_same_float(ctx, 4, idx, what));
  DM_TRY(dm_update_check_scalar(ctx, A_LR, "lr", 1));
  const dm_tensor *it = dm_op_input(ctx, A_ITER);
  if (it->dtype != DM_INT64 || it->numel != 1)
    return dm_op_error(ctx, DM_ERR_TYPE, "iter '%s' is %s with %lld elements; expected one INT64",
                       dm_op_input_name(ctx, A_ITER), dm_dtype_name(it->dtype),
                       (long long)it->numel);
  if (dm_op_num_inputs(ctx) > A_SKIP)
    DM_TRY(dm_update_check_scalar(ctx, A_SKIP, "skip", 0));
  const dm_tensor *p = dm_op_input(ctx, A_PARAM);
  for (int o = 0; o < 3; o++)
    DM_TRY(dm_op_set_output(ctx, o, DM_FLOAT, p->ndim, p->dims));
  return DM_OK;
}

/* AdamW's per-step constants for Adam's loop: the param factor 1 + lr wd (lr negative)
 * and torch's epsilon moved inside the corrected quotient, eps sqrt(1 - b2^t). */
void dm_adamw_constants(float lr, float wd, float b2, float eps, int64_t t, float *decay,
                        float *eps_in) {
  *decay = (float)(1 + (double)lr * wd);
  *eps_in = (float)(eps * sqrt(1 - pow((double)b2, (double)t)));
}

/* Adam (decoupled 0) and AdamW (1) share inputs, checks and loop. */
static dm_status adam_run_as(dm_op_ctx *ctx, int decoupled) {
  DM_TRY(adam_infer(ctx));
  if (dm_update_skip_requested(ctx, A_SKIP)) {
    static const int in[3] = {A_PARAM, A_M1, A_M2}, out[3] = {0, 1, 2};
    return dm_update_skip_outputs(ctx, 3, in, out);
  }
  const float b1 = dm_op_arg_float(ctx, "beta1", 0.9f);
  const float b2 = dm_op_arg_float(ctx, "beta2", 0.999f);
  float eps = dm_op_arg_float(ctx, "epsilon", decoupled ? 1e-8f : 1e-5f), decay = 1;
  const int64_t iter = *(const int64_t *)dm_tensor_data(dm_op_input(ctx, A_ITER));
  /* Caffe2's Adam steps t = iter + 1; AdamW is torch's, whose first step is t = 1: the
   * Iter op before the update has already counted this step, so t = iter there */
  const int64_t t = decoupled ? iter : iter + 1;
  if (decoupled && t < 1) /* t <= 0: no bias correction exists (Adam keeps Caffe2's) */
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "iter '%s' is %lld; AdamW's step t = iter must be at least 1 (the Iter "
                       "op runs before the update)", dm_op_input_name(ctx, A_ITER),
                       (long long)iter);
  const float corr = dm_adam_correction(b1, b2, t);
  const float lr = *(const float *)dm_tensor_data(dm_op_input(ctx, A_LR));
  if (decoupled)
    dm_adamw_constants(lr, dm_op_arg_float(ctx, "weight_decay", 0.01f), b2, eps, t, &decay,
                       &eps);
  dm_adamw_f32(dm_tensor_data(dm_op_input(ctx, A_PARAM)), dm_tensor_data(dm_op_input(ctx, A_M1)),
               dm_tensor_data(dm_op_input(ctx, A_M2)), dm_tensor_data(dm_op_input(ctx, A_GRAD)),
               dm_tensor_mutable_data(dm_op_output(ctx, 0)),
               dm_tensor_mutable_data(dm_op_output(ctx, 1)),
               dm_tensor_mutable_data(dm_op_output(ctx, 2)), dm_op_input(ctx, A_PARAM)->numel,
               lr, corr, b1, b2, eps, decay);
  return DM_OK;
}

static dm_status adam_run(dm_op_ctx *ctx) { return adam_run_as(ctx, 0); }
static dm_status adamw_run(dm_op_ctx *ctx) { return adam_run_as(ctx, 1); }

static const dm_op_schema adam_schema = {
    .type = "Adam", .min_inputs = 6, .max_inputs = 7, .min_outputs = 3, .max_outputs = 3,
    .args = adam_args, .inplace = adam_inplace, .precision = DM_PREC_FP32,
    .nonfloat_inputs = 0x20, /* the INT64 iteration */
    .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "param, moment_1, moment_2, grad, lr, iter, [skip] -> param, moment_1, moment_2 "
           "(in place): param += lr * correction * m1 / (sqrt(m2) + epsilon), Caffe2's "
           "correction sqrt(1 - beta2^t) / (1 - beta1^t) with t = iter + 1.",
    .infer = adam_infer};

static const dm_op_schema adamw_schema = {
    .type = "AdamW", .min_inputs = 6, .max_inputs = 7, .min_outputs = 3, .max_outputs = 3,
    .args = adamw_args, .inplace = adam_inplace, .precision = DM_PREC_FP32,
    .nonfloat_inputs = 0x20, /* the INT64 iteration */
    .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "param, moment_1, moment_2, grad, lr (NEGATIVE, as Adam's), iter, [skip] -> "
           "param, moment_1, moment_2 (in place): torch.optim.AdamW at step t = iter (the "
           "Iter op before it has counted the step): "
           "param *= 1 + lr * weight_decay, then param += lr / (1 - beta1^t) * m1 / "
           "(sqrt(m2 / (1 - beta2^t)) + epsilon).",
    .infer = adam_infer};

static const dm_op_schema *const schemas[] = {&iter_schema, &lr_schema,   &ws_schema,
                                              &momentum_schema, &adam_schema, &adamw_schema,
                                              NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Iter", .device = DM_CPU, .run = iter_run},
    {.type = "LearningRate", .device = DM_CPU, .init = lr_init, .run = lr_run},
    {.type = "WeightedSum", .device = DM_CPU, .run = ws_run},
    {.type = "MomentumSGDUpdate", .device = DM_CPU, .run = momentum_run},
    {.type = "Adam", .device = DM_CPU, .run = adam_run},
    {.type = "AdamW", .device = DM_CPU, .run = adamw_run},
    {0},
};
const dm_op_family dm_family_optimizer = {schemas, kernels};
