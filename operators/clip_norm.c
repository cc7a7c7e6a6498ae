/* clip_norm.c: ClipByGlobalNorm, torch.nn.utils.clip_grad_norm_'s rule as one op (Caffe2
 * has none): g_1..g_n (FLOAT) -> g_1..g_n in place, scaled by
 * min(1, clip_norm / (norm + 1e-6)), norm = sqrt(sum over every g of g^2), and an
 * optional last output holding the norm (FLOAT scalar, before clipping).
 *
 * The sum of squares is taken in double, so the norm is the FP32 rounding of nearly the
 * exact one whatever n and the tensors' sizes. A norm that is not finite (an inf or NaN
 * gradient: the step the loss-scale check skips) leaves every gradient as it was rather
 * than turning them all NaN, and the norm output says why. It runs on the FP32
 * gradients after they are unscaled (role OPTIMIZER), so the norm is the true one.
 */
#include <math.h>

#include "builtin.h"
#include "common.h"

static const dm_arg_spec clip_args[] = {
    {"clip_norm", DM_ARG_FLOAT, 1, "the largest global L2 norm let through (> 0)"},
    {NULL, 0, 0, NULL},
};

static dm_status clip_infer(dm_op_ctx *ctx) {
  int n = dm_op_num_inputs(ctx), m = dm_op_num_outputs(ctx);
  if (m != n && m != n + 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "%d gradients and %d outputs; expected the %d "
                       "gradients again, then optionally the norm", n, m, n);
  float clip = dm_op_arg_float(ctx, "clip_norm", 0);
  if (!(clip > 0) || isinf(clip))
    return dm_op_error(ctx, DM_ERR_INVALID, "clip_norm is %g; it must be positive and finite",
                       (double)clip);
  for (int i = 0; i < n; i++) {
    const dm_tensor *g = dm_op_input(ctx, i);
    if (g->dtype != DM_FLOAT)
      return dm_op_error(ctx, DM_ERR_TYPE, "gradient %d '%s' is %s; ClipByGlobalNorm takes the "
                         "FLOAT (unscaled master) gradients", i, dm_op_input_name(ctx, i),
                         dm_dtype_name(g->dtype));
    if (!dm_op_shape_only(ctx) && dm_op_output(ctx, i) != g)
      return dm_op_error(ctx, DM_ERR_INVALID, "output %d is '%s' but gradient %d is '%s': "
                         "ClipByGlobalNorm scales in place", i, dm_op_output_name(ctx, i), i,
                         dm_op_input_name(ctx, i));
    DM_TRY(dm_op_set_output(ctx, i, DM_FLOAT, g->ndim, g->dims));
  }
  /* A gradient listed twice, or the norm into a gradient's blob, names one output blob
   * twice, which the executor refuses for every op. */
  if (m == n + 1)
    DM_TRY(dm_op_set_output(ctx, n, DM_FLOAT, 0, NULL));
  return DM_OK;
}

static dm_status clip_run(dm_op_ctx *ctx) {
  DM_TRY(clip_infer(ctx));
  int n = dm_op_num_inputs(ctx);
  double ss = 0;
  for (int i = 0; i < n; i++) {
    const dm_tensor *g = dm_op_input(ctx, i);
    const float *p = dm_tensor_data(g);
    for (int64_t k = 0; k < g->numel; k++)
      ss += (double)p[k] * p[k];
  }
  double norm = sqrt(ss);
  if (dm_op_num_outputs(ctx) == n + 1)
    *(float *)dm_tensor_mutable_data(dm_op_output(ctx, n)) = (float)norm;
  if (!isfinite(norm))
    return DM_OK;
  double coef = (double)dm_op_arg_float(ctx, "clip_norm", 0) / (norm + 1e-6);
  if (coef >= 1)
    return DM_OK; /* torch multiplies by 1.0, which changes no value */
  float c = (float)coef;
  for (int i = 0; i < n; i++) {
    dm_tensor *g = dm_op_output(ctx, i);
    float *p = dm_tensor_mutable_data(g);
    for (int64_t k = 0; k < g->numel; k++)
      p[k] *= c;
  }
  return DM_OK;
}

static void clip_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  double e = 0;
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    e += (double)dm_op_input(ctx, i)->numel;
  c->flops = 3 * e;
  c->bytes_read = 8 * e; /* read for the norm, then again to scale */
  c->bytes_written = 4 * e + 4;
}

static const dm_op_schema clip_schema = {
    .type = "ClipByGlobalNorm", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1,
    .max_outputs = -1, .args = clip_args, .inplace_any = 1, .precision = DM_PREC_FP32,
    .role = DM_ROLE_OPTIMIZER,
    .doc = "g_1..g_n (FLOAT) -> g_1..g_n (in place), [norm]: each g *= min(1, clip_norm / "
           "(norm + 1e-6)), norm = the L2 norm of all the g together (torch's "
           "clip_grad_norm_); a non-finite norm leaves them unchanged",
    .infer = clip_infer, .cost = clip_cost};

static const dm_op_schema *const schemas[] = {&clip_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "ClipByGlobalNorm", .device = DM_CPU, .run = clip_run},
    {0},
};
const dm_op_family dm_family_clip_norm = {schemas, kernels};
