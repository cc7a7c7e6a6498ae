/* activation.c: Relu for FP32 and FP16 (in place allowed).
 *
 * y = max(x, 0) with NaN passed through (a NaN must stay visible to the overflow check
 * of mixed-precision training) and -0 and -inf mapped to +0.
 */
#include "dm_config.h"

#include "common.h"
#include "builtin.h"

static const dm_inplace_pair relu_inplace[] = {{0, 0}, {-1, -1}};

static const dm_op_schema relu_schema = {
    .type = "Relu",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .inplace = relu_inplace,
    .precision = DM_PREC_FOLLOW,
    .doc = "X -> Y = max(X, 0); FLOAT or FLOAT16; may run in place.",
};

static dm_status relu_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (x->dtype != DM_FLOAT && x->dtype != DM_FLOAT16)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; Relu takes FLOAT or FLOAT16",
                       dm_dtype_name(x->dtype));
  /* In place (y == x) the resize keeps the storage: same bytes. */
  DM_TRY(dm_tensor_resize_like(y, x));
  int64_t n = x->numel;
  if (x->dtype == DM_FLOAT) {
    const float *px = dm_tensor_data(x); /* (n) */
    float *py = dm_tensor_mutable_data(y);
#if DM_HAVE_OPENMP
#pragma omp parallel for simd if (n > (1 << 16))
#endif
    for (int64_t i = 0; i < n; i++)
      py[i] = px[i] > 0.0f || px[i] != px[i] ? px[i] : 0.0f;
  } else {
    const uint16_t *px = dm_tensor_data(x); /* (n) FP16 bit patterns */
    uint16_t *py = dm_tensor_mutable_data(y);
    /* On the bits: a set sign with a magnitude up to inf (0x7c00) is a negative number
     * (or -0); above that it is a NaN, which passes through. */
#if DM_HAVE_OPENMP
#pragma omp parallel for simd if (n > (1 << 16))
#endif
    for (int64_t i = 0; i < n; i++)
      py[i] = (px[i] & 0x8000u) && (px[i] & 0x7fffu) <= 0x7c00u ? 0 : px[i];
  }
  return DM_OK;
}

static const dm_kernel_def relu_cpu = {.type = "Relu", .device = DM_CPU, .run = relu_run};

static const dm_op_schema *const schemas[] = {&relu_schema, NULL};
static const dm_kernel_def *const kernels[] = {&relu_cpu, NULL};
const dm_op_family dm_family_activation = {schemas, kernels};
