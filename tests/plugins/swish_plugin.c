/* swish_plugin.c: a test operator plugin: Swish(X) = X * sigmoid(beta * X) and its
 * gradient, placed and painted by the passes exactly like a built-in op. Built as a
 * loadable module, loaded by `demitasse run|rewrite --plugin` and by dm_plugin_load in
 * the tests. It uses only demitasse_plugin.h.
 *   - schema: precision class FOLLOW (like Relu: FP16 after an FP16 op), in place allowed,
 *     shape/type inference, a gradient maker (SwishGradient: X, dY -> dX);
 *   - CPU kernels for FLOAT and FLOAT16 (FP16 in, FP32 compute, FP16 out, as the
 *     built-ins do it on the CPU, through the exported dm_f16_to_f32/dm_f32_to_f16);
 *   - CUDA kernels when the build has nvcc (SWISH_CUDA, swish_cuda.cu, queued on the op's
 *     stream), which implement beta = 1 only: their supports() refuses another beta with
 *     dm_op_refuse, so the device pass keeps that Swish on the CPU and says why. */
#include <math.h>

#include "demitasse_plugin.h"

DM_PLUGIN_DECLARE_VERSION();

static float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

/* X (and dY) FLOAT or FLOAT16, the same: declares dX/Y like X. */
static dm_status swish_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_dtype t = dm_tensor_dtype(x);
  if (t != DM_FLOAT && t != DM_FLOAT16)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s takes FLOAT or FLOAT16, got %s", dm_op_type(ctx),
                       dm_dtype_name(t));
  for (int i = 1; i < dm_op_num_inputs(ctx); i++)
    if (dm_tensor_dtype(dm_op_input(ctx, i)) != t)
      return dm_op_error(ctx, DM_ERR_TYPE, "%s: input %d is not %s like X", dm_op_type(ctx), i,
                         dm_dtype_name(t));
  return dm_op_set_output(ctx, 0, t, dm_tensor_ndim(x), dm_tensor_dims(x));
}

/* Element i of a FLOAT or FLOAT16 tensor's data, as float. */
static float load(dm_dtype t, const void *p, int64_t i) {
  return t == DM_FLOAT16 ? dm_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void store(dm_dtype t, void *p, int64_t i, float v) {
  if (t == DM_FLOAT16)
    ((uint16_t *)p)[i] = dm_f32_to_f16(v);
  else
    ((float *)p)[i] = v;
}

static dm_status swish_run(dm_op_ctx *ctx) {
  DM_TRY(swish_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const float beta = dm_op_arg_float(ctx, "beta", 1.0f);
  const dm_dtype t = dm_tensor_dtype(x);
  const void *px = dm_tensor_data(x);
  void *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < dm_tensor_numel(x); i++) {
    float v = load(t, px, i);
    store(t, py, i, v * sigmoid(beta * v));
  }
  return DM_OK;
}

/* dX = dY * (s + beta x s (1 - s)), s = sigmoid(beta x). */
static dm_status swish_grad_run(dm_op_ctx *ctx) {
  DM_TRY(swish_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  dm_tensor *dx = dm_op_output(ctx, 0);
  const float beta = dm_op_arg_float(ctx, "beta", 1.0f);
  const dm_dtype t = dm_tensor_dtype(x);
  const void *px = dm_tensor_data(x), *pdy = dm_tensor_data(dy);
  void *pdx = dm_tensor_mutable_data(dx);
  for (int64_t i = 0; i < dm_tensor_numel(x); i++) {
    float v = load(t, px, i), s = sigmoid(beta * v);
    store(t, pdx, i, load(t, pdy, i) * (s + beta * v * s * (1.0f - s)));
  }
  return DM_OK;
}

static dm_status swish_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "SwishGradient", 2, in, 1, out);
}

#ifdef SWISH_CUDA
/* swish_cuda.cu: Y (dX) on `stream`; half: FLOAT16 data, else FLOAT. 0 or a cudaError_t. */
int swish_cuda_forward(void *stream, int half, const void *x, void *y, int64_t n);
int swish_cuda_backward(void *stream, int half, const void *x, const void *dy, void *dx,
                        int64_t n);

/* The CUDA kernels implement beta = 1 only, in FLOAT and FLOAT16 (a dtype not known
 * yet, during placement, is given the benefit of the doubt; infer checks it at run). */
static int swish_cuda_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_float(ctx, "beta", 1.0f) != 1.0f)
    return dm_op_refuse(ctx, "the CUDA Swish implements beta = 1 only");
  dm_dtype t = dm_op_input_dtype(ctx, 0);
  if (t != DM_UNDEFINED && t != DM_FLOAT && t != DM_FLOAT16)
    return dm_op_refuse(ctx, "the CUDA Swish takes FLOAT or FLOAT16, not %s", dm_dtype_name(t));
  return 1;
}

static dm_status cuda_status(dm_op_ctx *ctx, int e) {
  return e ? dm_op_error(ctx, DM_ERR_DEVICE, "%s: CUDA error %d", dm_op_type(ctx), e) : DM_OK;
}

static dm_status swish_cuda_run(dm_op_ctx *ctx) {
  DM_TRY(swish_infer(ctx)); /* declares Y on the op's GPU */
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  return cuda_status(ctx, swish_cuda_forward(dm_op_cuda_stream(ctx),
                                             dm_tensor_dtype(x) == DM_FLOAT16, dm_tensor_data(x),
                                             dm_tensor_mutable_data(y), dm_tensor_numel(x)));
}

static dm_status swish_grad_cuda_run(dm_op_ctx *ctx) {
  DM_TRY(swish_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  dm_tensor *dx = dm_op_output(ctx, 0);
  return cuda_status(ctx, swish_cuda_backward(dm_op_cuda_stream(ctx),
                                              dm_tensor_dtype(x) == DM_FLOAT16,
                                              dm_tensor_data(x), dm_tensor_data(dy),
                                              dm_tensor_mutable_data(dx), dm_tensor_numel(x)));
}
#endif

static const dm_arg_spec swish_args[] = {
    {"beta", DM_ARG_FLOAT, 0, "Y = X * sigmoid(beta * X); default 1"}, {NULL, 0, 0, NULL}};
static const dm_inplace_pair swish_inplace[] = {{0, 0}, {-1, -1}};
static const dm_op_schema swish_schema = {DM_SCHEMA_SIZE,
    .type = "Swish", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .args = swish_args, .inplace = swish_inplace, .precision = DM_PREC_FOLLOW,
    .doc = "Y = X * sigmoid(beta * X); FLOAT or FLOAT16", .infer = swish_infer,
    .gradient = swish_gradient};
static const dm_op_schema swish_grad_schema = {DM_SCHEMA_SIZE,
    .type = "SwishGradient", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .args = swish_args, .precision = DM_PREC_FOLLOW,
    .doc = "X, dY -> dX for Swish (same beta)", .infer = swish_infer};
static const dm_kernel_def kernels[] = {
    {DM_KERNEL_SIZE, .type = "Swish", .device = DM_CPU, .run = swish_run},
    {DM_KERNEL_SIZE, .type = "SwishGradient", .device = DM_CPU, .run = swish_grad_run},
#ifdef SWISH_CUDA
    /* graph-safe: each run queues one kernel on the op's stream, from its pointers and
     * element count alone (a CUDA graph may record it once and replay it) */
    {DM_KERNEL_SIZE, .type = "Swish", .device = DM_CUDA, .run = swish_cuda_run,
     .supports = swish_cuda_supports, .flags = DM_KERNEL_GRAPH_SAFE},
    {DM_KERNEL_SIZE, .type = "SwishGradient", .device = DM_CUDA, .run = swish_grad_cuda_run,
     .supports = swish_cuda_supports, .flags = DM_KERNEL_GRAPH_SAFE},
#endif
    {0}};

DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host) {
  DM_TRY(host->register_schema(&swish_schema));
  DM_TRY(host->register_schema(&swish_grad_schema));
  for (const dm_kernel_def *k = kernels; k->type; k++)
    DM_TRY(host->register_kernel(k));
  return DM_OK;
}
