/* fc.c: FC (fully connected), Y = X W^T + b, for FP32 and FP16.
 *
 * X is flattened to M x K at `axis`, W to N x K at `axis_w`; Y keeps X's leading dims and
 * appends N. The FP16 kernel takes FP16 X and W (bias FP16 or FP32), accumulates in FP32
 * and rounds Y to FP16 once, as tensor cores do (see operators/math/gemm.h).
 */
#include "common.h"
#include "math/gemm.h"
#include "builtin.h"

static const dm_arg_spec fc_args[] = {
    {"axis", DM_ARG_INT, 0, "flatten X to 2-D at this axis (default 1)"},
    {"axis_w", DM_ARG_INT, 0, "flatten W to 2-D at this axis (default 1)"},
    {"float16_compute", DM_ARG_INT, 0, "GPU hint; the CPU always accumulates in FP32"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema fc_schema = {
    .type = "FC",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = fc_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W (N x K), b (N) -> Y = X W^T + b; X flattened to M x K at `axis`.",
};

static dm_status fc_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *b = dm_op_input(ctx, 2);
  dm_tensor *y = dm_op_output(ctx, 0);
  int axis, axis_w;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  DM_TRY(dm_op_canonical_axis(ctx, "axis_w", dm_op_arg_int(ctx, "axis_w", 1), w->ndim, 0,
                              &axis_w));
  int64_t M = dm_dims_product(x, 0, axis), K = dm_dims_product(x, axis, x->ndim);
  int64_t N = dm_dims_product(w, 0, axis_w), Kw = dm_dims_product(w, axis_w, w->ndim);
  char xs[96], ws[96];
  if (K != Kw)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "X is %s flattened at axis %d to %lldx%lld, but W is %s: K differs "
                       "(%lld vs %lld)",
                       dm_shape_str(x, xs, sizeof xs), axis, (long long)M, (long long)K,
                       dm_shape_str(w, ws, sizeof ws), (long long)K, (long long)Kw);
  if (b->numel != N)
    return dm_op_error(ctx, DM_ERR_SHAPE, "b has %lld elements, but W is %s: N = %lld",
                       (long long)b->numel, dm_shape_str(w, ws, sizeof ws), (long long)N);
  int fp16 = x->dtype == DM_FLOAT16;
  if ((x->dtype != DM_FLOAT && !fp16) || w->dtype != x->dtype ||
      (b->dtype != x->dtype && !(fp16 && b->dtype == DM_FLOAT)))
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X, W, b are %s, %s, %s; expected all FLOAT, or FLOAT16 X and W with "
                       "a FLOAT16 or FLOAT b",
                       dm_dtype_name(x->dtype), dm_dtype_name(w->dtype), dm_dtype_name(b->dtype));
  if (dm_tensors_alias(y, x) || dm_tensors_alias(y, w) || dm_tensors_alias(y, b))
    dm_tensor_reset(y); /* a view of an input (Reshape): write Y into fresh storage */
  int64_t dims[DM_MAX_DIMS];
  for (int i = 0; i < axis; i++)
    dims[i] = x->dims[i];
  dims[axis] = N;
  DM_TRY(dm_tensor_resize(y, x->dtype, axis + 1, dims));
  dm_status s;
  if (fp16) {
    s = dm_gemm_f16(0, 1, M, N, K, dm_tensor_data(x), dm_tensor_data(w), dm_tensor_data(b),
                    b->dtype == DM_FLOAT16, dm_tensor_mutable_data(y));
  } else {
    float *py = dm_tensor_mutable_data(y); /* (M, N) */
    const float *pb = dm_tensor_data(b);   /* (N) */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++)
        py[i * N + j] = pb[j];
    s = dm_gemm_f32(0, 1, M, N, K, 1.0f, dm_tensor_data(x), dm_tensor_data(w), 1.0f, py);
  }
  return s;
}

static const dm_kernel_def fc_cpu = {.type = "FC", .device = DM_CPU, .run = fc_run};

static const dm_op_schema *const schemas[] = {&fc_schema, NULL};
static const dm_kernel_def *const kernels[] = {&fc_cpu, NULL};
const dm_op_family dm_family_fc = {schemas, kernels};
