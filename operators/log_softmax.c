/* log_softmax.c: LogSoftmax and LogSoftmaxGradient over the dims from `axis` on (X
 * viewed as N x D, Softmax's rule); FLOAT, FLOAT16 and BFLOAT16, computed in FP32.
 *
 * Not a Caffe2 op (Caffe2 fuses log and softmax only inside its losses); the name is
 * ONNX's and PyTorch's. y = x - max - log(sum(exp(x - max))) per row: the max is
 * subtracted first, so large logits cannot overflow, and the log of the sum is taken
 * once, so no exp underflowing to 0 gives -inf for a finite logit. The sum is in double.
 *
 * LogSoftmaxGradient: Y, dY -> dX = dY - exp(Y) * sum(dY) per row; dX may be dY.
 */
#include <math.h>
#include <stdlib.h>

#include "builtin.h"
#include "common.h"

static const dm_arg_spec args[] = {
    {"axis", DM_ARG_INT, 0, "first dim of the rows (default 1); negative counts from the end"},
    {NULL, 0, 0, NULL},
};

static dm_status rows_of(dm_op_ctx *ctx, const dm_tensor *x, const char *what, int64_t *N,
                         int64_t *D) {
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "%s is %s: unsupported dtype; %s takes FLOAT, FLOAT16 or BFLOAT16", what,
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  *N = dm_dims_product(x, 0, axis);
  *D = dm_dims_product(x, axis, x->ndim);
  return DM_OK;
}

static dm_status lsm_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int64_t N, D;
  DM_TRY(rows_of(ctx, x, "X", &N, &D));
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static dm_status lsm_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  int64_t N, D;
  DM_TRY(rows_of(ctx, y, "Y", &N, &D));
  char ys[96], ds[96];
  if (!dm_tensor_same_shape(y, dy) || dy->dtype != y->dtype)
    return dm_op_error(ctx, DM_ERR_SHAPE, "Y is %s %s but dY is %s %s; they must match",
                       dm_dtype_name(y->dtype), dm_shape_str(y, ys, sizeof ys),
                       dm_dtype_name(dy->dtype), dm_shape_str(dy, ds, sizeof ds));
  DM_TRY(dm_op_check_grad_alias(ctx, 0, 1, 1u << 0, (const char *const[]){"Y", "dY"}));
  return dm_op_set_output(ctx, 0, y->dtype, y->ndim, y->dims);
}

static void lsm_row(float *r, int64_t D) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < D; j++)
    mx = r[j] > mx || r[j] != r[j] ? r[j] : mx;
  if (mx == -INFINITY || mx != mx) { /* all -inf (or a NaN): exp(x - max) is NaN */
    for (int64_t j = 0; j < D; j++)
      r[j] = NAN;
    return;
  }
  double sum = 0;
  for (int64_t j = 0; j < D; j++)
    sum += exp((double)r[j] - mx);
  const double lse = (double)mx + log(sum);
  for (int64_t j = 0; j < D; j++)
    r[j] = (float)((double)r[j] - lse);
}

static void lsm_grad_row(const float *y, float *g, int64_t D) {
  double sum = 0;
  for (int64_t j = 0; j < D; j++)
    sum += g[j];
  for (int64_t j = 0; j < D; j++)
    g[j] = (float)((double)g[j] - exp((double)y[j]) * sum);
}

/* Rows of input 0 (and input 1 for the gradient) through FP32 buffers into output 0. */
static dm_status run_rows(dm_op_ctx *ctx, int grad) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  const dm_tensor *dy = grad ? dm_op_input(ctx, 1) : NULL;
  dm_tensor *y = dm_op_output(ctx, 0);
  int64_t N, D;
  DM_TRY(rows_of(ctx, x, grad ? "Y" : "X", &N, &D));
  if (N == 0 || D == 0)
    return DM_OK;
  float *a = malloc(2 * (size_t)D * sizeof *a);
  if (!a)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for FP32 rows of %lld", (long long)D);
  float *b = a + D;
  for (int64_t i = 0; i < N; i++) { /* each row read fully before it is written */
    dm_load_f32(x->dtype, dm_tensor_data(x), i * D, D, a);
    if (grad) {
      dm_load_f32(x->dtype, dm_tensor_data(dy), i * D, D, b);
      lsm_grad_row(a, b, D);
      dm_store_f32(x->dtype, dm_tensor_mutable_data(y), i * D, D, b);
    } else {
      lsm_row(a, D);
      dm_store_f32(x->dtype, dm_tensor_mutable_data(y), i * D, D, a);
    }
  }
  free(a);
  return DM_OK;
}

static dm_status lsm_run(dm_op_ctx *ctx) {
  DM_TRY(lsm_infer(ctx));
  return run_rows(ctx, 0);
}

static dm_status lsm_grad_run(dm_op_ctx *ctx) {
  DM_TRY(lsm_grad_infer(ctx));
  return run_rows(ctx, 1);
}

static void lsm_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = 4.0 * (double)dm_op_output(ctx, 0)->numel;
}

static dm_status lsm_gradient(dm_grad_ctx *g) { /* Y, dY -> dX, `axis` copied */
  const char *in[] = {dm_grad_output(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "LogSoftmaxGradient", 2, in, 1, out);
}

static const dm_inplace_pair lsm_inplace[] = {{0, 0}, {-1, -1}};
static const dm_inplace_pair lsm_grad_inplace[] = {{1, 0}, {-1, -1}};

static const dm_op_schema lsm_schema = {
    .type = "LogSoftmax", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .args = args, .inplace = lsm_inplace, .precision = DM_PREC_FP32,
    .doc = "X -> Y = X - max - log(sum(exp(X - max))) over dims [axis, ndim) (Softmax's "
           "rows; not a Caffe2 op); may run in place.",
    .infer = lsm_infer, .cost = lsm_cost, .gradient = lsm_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1};

static const dm_op_schema lsm_grad_schema = {
    .type = "LogSoftmaxGradient", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .args = args, .inplace = lsm_grad_inplace, .precision = DM_PREC_FP32,
    .doc = "Y, dY -> dX = dY - exp(Y) * sum(dY) per row of Y viewed as N x D at `axis`.",
    .infer = lsm_grad_infer, .cost = lsm_cost,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x3, .layout_outputs = 0x1};

static const dm_op_schema *const schemas[] = {&lsm_schema, &lsm_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "LogSoftmax", .device = DM_CPU, .run = lsm_run},
    {.type = "LogSoftmaxGradient", .device = DM_CPU, .run = lsm_grad_run},
    {0},
};
const dm_op_family dm_family_log_softmax = {schemas, kernels};
