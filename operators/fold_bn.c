/* fold_bn.c: FoldBN, which folds an inference SpatialBN into the Conv before it.
 *
 * FoldBN(W, scale, bias, mean, var, [b]) -> W_folded, b_folded, with per output channel o
 * (W's first dim, whatever the Conv's group: a grouped W is (M, C/group, kH, kW) and
 * output channel o still owns the row W[o]):
 *
 *   k[o]         = scale[o] / sqrt(var[o] + epsilon)
 *   W_folded[o]  = W[o] * k[o]
 *   b_folded[o]  = (b[o] - mean[o]) * k[o] + bias[o]        (b = 0 when absent)
 *
 * so Conv(X, W_folded, b_folded) = SpatialBN(Conv(X, W, b)) in test mode. The inference
 * fusion pass (net/passes/fusion_pass.c) emits it into the init-net addition, so the fold runs once,
 * after the weights are loaded, and stays an ordinary op a user can read in
 * `rewrite --fuse --init-out`. Computed in double and rounded once to FP32, as the
 * SpatialBN kernel computes its inv_std, so the fold adds one rounding per weight.
 * In the pipeline the fold runs before the mixed-precision pass casts the weights, so W
 * and b are FP32; a net painted already (FP16 or BF16 copies of W and b, as `rewrite
 * --fp16` prints) folds too: W_folded (b_folded) takes W's (b's, else W's) dtype, one
 * rounding from double. scale, bias, mean and var are FP32, as SpatialBN has them.
 */
#include <math.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "core/half.h"

static const dm_arg_spec fold_args[] = {
    {"epsilon", DM_ARG_FLOAT, 0, "the SpatialBN's epsilon (default 1e-5)"},
    {NULL, 0, 0, NULL},
};

static dm_status fold_infer(dm_op_ctx *ctx) {
  static const char *const names[] = {"W", "scale", "bias", "mean", "var", "b"};
  const dm_tensor *w = dm_op_input(ctx, 0);
  int nin = dm_op_num_inputs(ctx);
  for (int i = 0; i < nin; i++) {
    dm_dtype t = dm_op_input(ctx, i)->dtype;
    int weight = i == 0 || i == 5; /* W, b: any float dtype; the BN's: FP32 */
    if (weight ? !dm_is_float_or_reduced(t) : t != DM_FLOAT)
      return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; FoldBN takes %s", names[i],
                         dm_dtype_name(t), weight ? "FLOAT, FLOAT16 or BFLOAT16" : "FLOAT");
  }
  char ws[96];
  if (w->ndim < 1 || w->dims[0] < 1)
    return dm_op_error(ctx, DM_ERR_SHAPE, "W is %s; expected (M, ...) with M >= 1 output "
                       "channels", dm_shape_str(w, ws, sizeof ws));
  int64_t m = w->dims[0];
  for (int i = 1; i < nin; i++)
    if (dm_op_input(ctx, i)->numel != m)
      return dm_op_error(ctx, DM_ERR_SHAPE, "%s has %lld elements but W has %lld output "
                         "channels (%s)", names[i], (long long)dm_op_input(ctx, i)->numel,
                         (long long)m, dm_shape_str(w, ws, sizeof ws));
  float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  if (!(eps >= 0.0f) || isinf(eps))
    return dm_op_error(ctx, DM_ERR_INVALID, "epsilon is %g; it must be finite and >= 0",
                       (double)eps);
  DM_TRY(dm_op_set_output(ctx, 0, w->dtype, w->ndim, w->dims));
  return dm_op_set_output(ctx, 1, nin > 5 ? dm_op_input(ctx, 5)->dtype : w->dtype, 1, &m);
}

/* Element i of a float tensor's data, widened to double. */
static double load(const void *p, dm_dtype t, int64_t i) {
  return t == DM_FLOAT16    ? dm_half_to_float(((const uint16_t *)p)[i])
         : t == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)p)[i])
                            : ((const float *)p)[i];
}

/* Rounds d once to the dtype t and stores it as element i. */
static void store(void *p, dm_dtype t, int64_t i, double d) {
  if (t == DM_FLOAT16)
    ((uint16_t *)p)[i] = dm_double_to_half(d);
  else if (t == DM_BFLOAT16)
    ((uint16_t *)p)[i] = dm_double_to_bf16(d);
  else
    ((float *)p)[i] = (float)d;
}

static dm_status fold_run(dm_op_ctx *ctx) {
  DM_TRY(fold_infer(ctx)); /* checks, and allocates the outputs */
  const dm_tensor *w = dm_op_input(ctx, 0), *b = NULL;
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1)); /* (M) each */
  const float *bias = dm_tensor_data(dm_op_input(ctx, 2));
  const float *mean = dm_tensor_data(dm_op_input(ctx, 3));
  const float *var = dm_tensor_data(dm_op_input(ctx, 4));
  if (dm_op_num_inputs(ctx) > 5)
    b = dm_op_input(ctx, 5);
  dm_tensor *wf = dm_op_output(ctx, 0), *bf = dm_op_output(ctx, 1);
  const void *pw = dm_tensor_data(w), *pb = b ? dm_tensor_data(b) : NULL; /* (M, K), (M) */
  void *pwf = dm_tensor_mutable_data(wf), *pbf = dm_tensor_mutable_data(bf);
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  int64_t m = w->dims[0], k = w->numel / m;
  for (int64_t o = 0; o < m; o++) {
    if (!(var[o] + eps > 0.0))
      return dm_op_error(ctx, DM_ERR_INVALID, "var[%lld] + epsilon is %g; the fold needs it "
                         "> 0", (long long)o, (double)var[o] + eps);
    double f = scale[o] / sqrt((double)var[o] + eps);
    for (int64_t j = 0; j < k; j++) /* W_folded may not alias W: no in-place pair */
      store(pwf, wf->dtype, o * k + j, load(pw, w->dtype, o * k + j) * f);
    store(pbf, bf->dtype, o, ((b ? load(pb, b->dtype, o) : 0.0) - mean[o]) * f + bias[o]);
  }
  return DM_OK;
}

static void fold_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  memset(c, 0, sizeof *c);
  const dm_tensor *w = dm_op_input(ctx, 0);
  c->flops = (double)w->numel + 4.0 * (double)(w->ndim ? w->dims[0] : 0);
}

static const dm_op_schema fold_schema = {
    .type = "FoldBN",
    .min_inputs = 5,
    .max_inputs = 6,
    .min_outputs = 2,
    .max_outputs = 2,
    .args = fold_args,
    .precision = DM_PREC_FOLLOW, /* W and b in any float dtype, as SpatialBN's X */
    .fp32_inputs = 0x1e,         /* scale, bias, mean, var: FP32, as SpatialBN has them */
    .doc = "W, scale, bias, mean, var, [b] -> W_folded, b_folded: a test-mode SpatialBN "
           "folded into the Conv before it, per output channel.",
    .infer = fold_infer,
    .cost = fold_cost,
    .no_gradient = 1,
};

static const dm_op_schema *const schemas[] = {&fold_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "FoldBN", .device = DM_CPU, .run = fold_run},
    {0},
};
const dm_op_family dm_family_fold_bn = {schemas, kernels};
