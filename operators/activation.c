/* activation.c: Relu and ReluGradient for FP32, FP16 and BF16 (in place allowed).
 *
 * y = max(x, 0) with NaN passed through (a NaN must stay visible to the overflow check
 * of mixed-precision training) and -0 and -inf mapped to +0.
 * ReluGradient: Y, dY -> dX = dY where Y > 0, else 0 (Caffe2's rule, which reads Y, not
 * X, so that Relu can run in place); dX may be dY's blob.
 */
#include "dm_config.h"

#include "activation.h"
#include "builtin.h"
#include "common.h"

static const dm_inplace_pair relu_inplace[] = {{0, 0}, {-1, -1}};
static const dm_inplace_pair relu_grad_inplace[] = {{1, 0}, {-1, -1}};

static dm_status relu_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; Relu takes FLOAT, FLOAT16 or BFLOAT16",
                       dm_dtype_name(x->dtype));
  /* In place (y == x) the resize keeps the storage: same bytes. */
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static void relu_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = (double)dm_op_output(ctx, 0)->numel;
}

static dm_status relu_gradient(dm_grad_ctx *g) { /* ReluGradient: Y, dY -> dX */
  const char *in[] = {dm_grad_output(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "ReluGradient", 2, in, 1, out);
}

static const dm_op_schema relu_schema = {
    .type = "Relu",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .inplace = relu_inplace,
    .precision = DM_PREC_FOLLOW,
    .doc = "X -> Y = max(X, 0); FLOAT, FLOAT16 or BFLOAT16; may run in place.",
    .infer = relu_infer,
    .cost = relu_cost,
    .gradient = relu_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1,
};

void dm_relu_buffer(dm_dtype t, const void *x, void *y, int64_t n) {
  if (t == DM_FLOAT) {
    const float *px = x;
    float *py = y;
#if DM_HAVE_OPENMP
#pragma omp parallel for simd if (n > (1 << 16))
#endif
    for (int64_t i = 0; i < n; i++)
      py[i] = px[i] > 0.0f || px[i] != px[i] ? px[i] : 0.0f;
  } else {
    const uint16_t *px = x; /* FP16 or BF16 bit patterns */
    uint16_t *py = y;
    const unsigned inf = t == DM_BFLOAT16 ? 0x7f80u : 0x7c00u;
    /* On the bits: a set sign with a magnitude up to inf is a negative number (or -0);
     * above that it is a NaN, which passes through. */
#if DM_HAVE_OPENMP
#pragma omp parallel for simd if (n > (1 << 16))
#endif
    for (int64_t i = 0; i < n; i++)
      py[i] = (px[i] & 0x8000u) && (px[i] & 0x7fffu) <= inf ? 0 : px[i];
  }
}

static dm_status relu_run(dm_op_ctx *ctx) {
  DM_TRY(relu_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  dm_relu_buffer(x->dtype, dm_tensor_data(x), dm_tensor_mutable_data(y), x->numel);
  return DM_OK;
}

/* ---- ReluGradient ---------------------------------------------------------------- */

static dm_status relu_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  char a[96], b[96];
  if (!dm_is_float_or_reduced(y->dtype) || dy->dtype != y->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "Y, dY are %s, %s; expected both FLOAT, both FLOAT16 or both BFLOAT16",
                       dm_dtype_name(y->dtype), dm_dtype_name(dy->dtype));
  if (!dm_tensor_same_shape(y, dy))
    return dm_op_error(ctx, DM_ERR_SHAPE, "Y is %s but dY is %s", dm_shape_str(y, a, sizeof a),
                       dm_shape_str(dy, b, sizeof b));
  DM_TRY(dm_op_check_grad_alias(ctx, 0, 1, 1u << 0, (const char *const[]){"Y", "dY"}));
  return dm_op_set_output(ctx, 0, y->dtype, y->ndim, y->dims);
}

void dm_relu_grad_buffer(dm_dtype t, const void *y, const void *dy, void *dx, int64_t n) {
  if (t == DM_FLOAT) {
    const float *py = y, *pdy = dy;
    float *pdx = dx;
#if DM_HAVE_OPENMP
#pragma omp parallel for simd if (n > (1 << 16))
#endif
    for (int64_t i = 0; i < n; i++)
      pdx[i] = py[i] > 0.0f ? pdy[i] : 0.0f;
  } else {
    const uint16_t *py = y, *pdy = dy; /* 16-bit floats */
    uint16_t *pdx = dx;
    const unsigned inf = t == DM_BFLOAT16 ? 0x7f80u : 0x7c00u;
    /* Y > 0 on the bits: sign clear, nonzero, not NaN (magnitude at most inf). */
#if DM_HAVE_OPENMP
#pragma omp parallel for simd if (n > (1 << 16))
#endif
    for (int64_t i = 0; i < n; i++)
      pdx[i] = !(py[i] & 0x8000u) && py[i] != 0 && py[i] <= inf ? pdy[i] : 0;
  }
}

static dm_status relu_grad_run(dm_op_ctx *ctx) {
  DM_TRY(relu_grad_infer(ctx));
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  dm_relu_grad_buffer(y->dtype, dm_tensor_data(y), dm_tensor_data(dy),
                      dm_tensor_mutable_data(dm_op_output(ctx, 0)), y->numel);
  return DM_OK;
}

static const dm_op_schema relu_grad_schema = {
    .type = "ReluGradient",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .inplace = relu_grad_inplace,
    .precision = DM_PREC_FOLLOW,
    .doc = "Y, dY -> dX = dY * (Y > 0); dX may be dY.",
    .infer = relu_grad_infer,
    .cost = relu_cost,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x3, .layout_outputs = 0x1,
};

static const dm_op_schema *const schemas[] = {&relu_schema, &relu_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Relu", .device = DM_CPU, .run = relu_run},
    {.type = "ReluGradient", .device = DM_CPU, .run = relu_grad_run},
    {0},
};
const dm_op_family dm_family_activation = {schemas, kernels};
