/* softmax.c: Softmax over the dims from `axis` on, FP32 and FP16 (computed in FP32).
 *
 * X is viewed as N x D (N = product of dims before axis). Each row subtracts its max
 * before exponentiating, so large logits cannot overflow; an FP16 row is widened to FP32,
 * computed there and rounded back once, which is what the precision class FP32 asks for
 * when the mixed-precision pass leaves an FP16 tensor in front of it.
 */
#include <math.h>
#include <stdlib.h>

#include "dm_config.h"

#include "common.h"
#include "core/half.h"
#include "builtin.h"

static const dm_arg_spec softmax_args[] = {
    {"axis", DM_ARG_INT, 0, "first dim of the softmax (default 1); negative counts from the end"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema softmax_schema = {
    .type = "Softmax",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = softmax_args,
    .precision = DM_PREC_FP32,
    .doc = "X -> Y = exp(X - max) / sum(exp(X - max)) over dims [axis, ndim).",
};

/* One row in place in `r` (D floats). */
static void softmax_row(float *r, int64_t D) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < D; j++)
    mx = r[j] > mx ? r[j] : mx;
  float sum = 0.0f;
  for (int64_t j = 0; j < D; j++) {
    r[j] = expf(r[j] - mx);
    sum += r[j];
  }
  float inv = 1.0f / sum;
  for (int64_t j = 0; j < D; j++)
    r[j] *= inv;
}

static dm_status softmax_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (x->dtype != DM_FLOAT && x->dtype != DM_FLOAT16)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; Softmax takes FLOAT or FLOAT16",
                       dm_dtype_name(x->dtype));
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  int64_t N = dm_dims_product(x, 0, axis), D = dm_dims_product(x, axis, x->ndim);
  /* Rows are read fully before they are written, so a Y that shares X's storage is fine. */
  DM_TRY(dm_tensor_resize_like(y, x));
  if (N == 0 || D == 0)
    return DM_OK;
  if (x->dtype == DM_FLOAT) {
    const float *px = dm_tensor_data(x); /* (N, D) */
    float *py = dm_tensor_mutable_data(y);
#if DM_HAVE_OPENMP
#pragma omp parallel for if (N * D > (1 << 15))
#endif
    for (int64_t i = 0; i < N; i++) {
      if (py != px)
        for (int64_t j = 0; j < D; j++)
          py[i * D + j] = px[i * D + j];
      softmax_row(py + i * D, D);
    }
    return DM_OK;
  }
  const uint16_t *px = dm_tensor_data(x); /* (N, D) FP16 */
  uint16_t *py = dm_tensor_mutable_data(y);
  int failed = 0;
#if DM_HAVE_OPENMP
#pragma omp parallel if (N * D > (1 << 15))
#endif
  {
    float *row = malloc((size_t)D * sizeof *row); /* one FP32 row per thread */
    if (!row) {
#if DM_HAVE_OPENMP
#pragma omp atomic write
#endif
      failed = 1;
    }
#if DM_HAVE_OPENMP
#pragma omp for
#endif
    for (int64_t i = 0; i < N; i++) {
      if (!row)
        continue;
      dm_half_to_float_array(px + i * D, row, (size_t)D);
      softmax_row(row, D);
      dm_float_to_half_array(row, py + i * D, (size_t)D);
    }
    free(row);
  }
  if (failed)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for an FP32 row of %lld", (long long)D);
  return DM_OK;
}

static const dm_kernel_def softmax_cpu = {.type = "Softmax", .device = DM_CPU,
                                          .run = softmax_run};

static const dm_op_schema *const schemas[] = {&softmax_schema, NULL};
static const dm_kernel_def *const kernels[] = {&softmax_cpu, NULL};
const dm_op_family dm_family_softmax = {schemas, kernels};
