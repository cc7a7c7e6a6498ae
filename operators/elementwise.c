/* elementwise.c: Sum of same-shaped tensors, X0 + X1 + ... + Xn -> Y (in place on X0).
 *
 * Works in blocks: every input's block is read and summed in a local accumulator before
 * the block of Y is written, so Y may share storage with any input. FP16 inputs are
 * summed in FP32 and rounded once (tensor-core style); integer sums wrap around
 * (two's complement) instead of invoking C's undefined signed overflow.
 */
#include <string.h>

#include "dm_config.h"

#include "common.h"
#include "core/half.h"
#include "builtin.h"

#define BLOCK 1024

static const dm_inplace_pair sum_inplace[] = {{0, 0}, {-1, -1}};

static const dm_op_schema sum_schema = {
    .type = "Sum",
    .min_inputs = 1,
    .max_inputs = -1,
    .min_outputs = 1,
    .max_outputs = 1,
    .inplace = sum_inplace,
    .precision = DM_PREC_FOLLOW,
    .doc = "X0, X1, ... (same shape and dtype) -> Y = elementwise sum; Y may be X0.",
};

/* One block [i0, i0 + n) for an accumulator type ACC over element type T; LOAD widens an
 * element, STORE narrows the accumulator into Y. */
#define SUM_BLOCK(T, ACC, LOAD, STORE)                                 \
  do {                                                                 \
    ACC acc[BLOCK];                                                    \
    const T *p0 = (const T *)dm_tensor_data(dm_op_input(ctx, 0)) + i0; \
    for (int64_t j = 0; j < n; j++)                                    \
      acc[j] = LOAD(p0[j]);                                            \
    for (int k = 1; k < nin; k++) {                                    \
      const T *pk = (const T *)dm_tensor_data(dm_op_input(ctx, k)) + i0; \
      for (int64_t j = 0; j < n; j++)                                  \
        acc[j] += LOAD(pk[j]);                                         \
    }                                                                  \
    T *py = (T *)out + i0;                                             \
    for (int64_t j = 0; j < n; j++)                                    \
      py[j] = STORE(acc[j]);                                           \
  } while (0)

#define SAME(v) (v)
#define TO_I32(v) ((int32_t)(v)) /* uint32 -> int32: modular on every target compiler */
#define TO_I64(v) ((int64_t)(v))

static dm_status sum_run(dm_op_ctx *ctx) {
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  int nin = dm_op_num_inputs(ctx);
  dm_dtype t = x0->dtype;
  if (t != DM_FLOAT && t != DM_FLOAT16 && t != DM_INT32 && t != DM_INT64 && t != DM_DOUBLE)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X0 is %s; Sum takes FLOAT, FLOAT16, INT32, INT64 or DOUBLE",
                       dm_dtype_name(t));
  for (int k = 1; k < nin; k++) {
    const dm_tensor *xk = dm_op_input(ctx, k);
    char a[96], b[96];
    if (xk->dtype != t)
      return dm_op_error(ctx, DM_ERR_TYPE, "input %d '%s' is %s, but X0 is %s", k,
                         dm_op_input_name(ctx, k), dm_dtype_name(xk->dtype), dm_dtype_name(t));
    if (!dm_tensor_same_shape(xk, x0))
      return dm_op_error(ctx, DM_ERR_SHAPE, "input %d '%s' is %s, but X0 '%s' is %s", k,
                         dm_op_input_name(ctx, k), dm_shape_str(xk, a, sizeof a),
                         dm_op_input_name(ctx, 0), dm_shape_str(x0, b, sizeof b));
  }
  dm_tensor *y = dm_op_output(ctx, 0);
  DM_TRY(dm_tensor_resize_like(y, x0));
  void *out = dm_tensor_mutable_data(y);
  int64_t total = x0->numel;
#if DM_HAVE_OPENMP
#pragma omp parallel for if (total > (1 << 16))
#endif
  for (int64_t i0 = 0; i0 < total; i0 += BLOCK) {
    int64_t n = total - i0 < BLOCK ? total - i0 : BLOCK;
    switch (t) {
    case DM_FLOAT: SUM_BLOCK(float, float, SAME, SAME); break;
    case DM_DOUBLE: SUM_BLOCK(double, double, SAME, SAME); break;
    case DM_FLOAT16: SUM_BLOCK(uint16_t, float, dm_half_to_float, dm_float_to_half); break;
    case DM_INT32: SUM_BLOCK(int32_t, uint32_t, (uint32_t), TO_I32); break;
    case DM_INT64: SUM_BLOCK(int64_t, uint64_t, (uint64_t), TO_I64); break;
    default: break;
    }
  }
  return DM_OK;
}

static const dm_kernel_def sum_cpu = {.type = "Sum", .device = DM_CPU, .run = sum_run};

static const dm_op_schema *const schemas[] = {&sum_schema, NULL};
static const dm_kernel_def *const kernels[] = {&sum_cpu, NULL};
const dm_op_family dm_family_elementwise = {schemas, kernels};
