/* softmax.c: Softmax over the dims from `axis` on, and SoftmaxGradient; FP32, FP16 and
 * BF16 (computed in FP32).
 *
 * X is viewed as N x D (N = product of dims before axis). Each row subtracts its max
 * before exponentiating, so large logits cannot overflow; an FP16 or BF16 row is widened to
 * FP32, computed there and rounded back once, which is what the precision class FP32 asks
 * for when the mixed-precision pass leaves a 16-bit tensor in front of it.
 *
 * SoftmaxGradient: Y, dY -> dX with dX = Y * (dY - <dY, Y>) per row; the row's dot
 * product is formed before dX is written, so dX may share dY's blob.
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

/* Shared view of the op: X (or Y) as N x D at `axis`. */
static dm_status softmax_rows(dm_op_ctx *ctx, const dm_tensor *x, const char *what,
                              int64_t *N, int64_t *D) {
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; %s takes FLOAT, FLOAT16 or BFLOAT16", what,
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  *N = dm_dims_product(x, 0, axis);
  *D = dm_dims_product(x, axis, x->ndim);
  return DM_OK;
}

static dm_status softmax_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int64_t N, D;
  DM_TRY(softmax_rows(ctx, x, "X", &N, &D));
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static dm_status softmax_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  int64_t N, D;
  DM_TRY(softmax_rows(ctx, y, "Y", &N, &D));
  char ys[96], ds[96];
  if (!dm_tensor_same_shape(y, dy) || dy->dtype != y->dtype)
    return dm_op_error(ctx, DM_ERR_SHAPE, "Y is %s %s but dY is %s %s; they must match",
                       dm_dtype_name(y->dtype), dm_shape_str(y, ys, sizeof ys),
                       dm_dtype_name(dy->dtype), dm_shape_str(dy, ds, sizeof ds));
  return dm_op_set_output(ctx, 0, y->dtype, y->ndim, y->dims);
}

/* exp, sum, divide per element; the max pass is a compare. */
static void softmax_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  double n = (double)x->numel, es = (double)dm_dtype_size(x->dtype);
  c->flops = 4 * n;
  c->bytes_read = n * es;
  c->bytes_written = n * es;
}

static void softmax_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *y = dm_op_input(ctx, 0);
  double n = (double)y->numel, es = (double)dm_dtype_size(y->dtype);
  c->flops = 4 * n; /* dot (2), subtract, multiply */
  c->bytes_read = 2 * n * es;
  c->bytes_written = n * es;
}

/* SoftmaxGradient reads the forward output, not X: Y, dY -> dX. */
static dm_status softmax_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_output(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "SoftmaxGradient", 2, in, 1, out);
}

static const dm_op_schema softmax_schema = {
    .type = "Softmax",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = softmax_args,
    .precision = DM_PREC_FP32,
    .doc = "X -> Y = exp(X - max) / sum(exp(X - max)) over dims [axis, ndim).",
    .infer = softmax_infer,
    .cost = softmax_cost,
    .gradient = softmax_gradient,
    /* a row from dim 1 (axis 1) holds the same values in either order */
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1,
};

static const dm_inplace_pair softmax_grad_inplace[] = {{1, 0}, {-1, -1}};

static const dm_op_schema softmax_grad_schema = {
    .type = "SoftmaxGradient",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = softmax_args,
    .inplace = softmax_grad_inplace,
    .precision = DM_PREC_FP32,
    .doc = "Y, dY -> dX = Y * (dY - sum(dY * Y)) per row of Y viewed as N x D at `axis`.",
    .infer = softmax_grad_infer,
    .cost = softmax_grad_cost,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x3, .layout_outputs = 0x1,
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

/* One gradient row: dx = y (dy - <dy, y>); dx may be dy. The dot is accumulated in
 * double so a long row adds no more than one rounding to each dx. */
static void softmax_grad_row(const float *y, const float *dy, float *dx, int64_t D) {
  double dot = 0;
  for (int64_t j = 0; j < D; j++)
    dot += (double)dy[j] * y[j];
  float fdot = (float)dot;
  for (int64_t j = 0; j < D; j++)
    dx[j] = y[j] * (dy[j] - fdot);
}

/* FP16 or BF16 (t) rows (N, D): X (or Y), dY for the gradient, and the output. */
typedef struct half_rows {
  dm_dtype t;
  const uint16_t *a, *dy;
  uint16_t *out;
  int64_t D;
} half_rows;

/* Row i of an FP16 or BF16 Softmax, in FP32 in the thread's scratch row. */
static void softmax_half_row(void *arg, void *scratch, int64_t i) {
  const half_rows *r = arg;
  float *row = scratch;
  dm_widen(r->t, r->a + i * r->D, row, (size_t)r->D);
  softmax_row(row, r->D);
  dm_narrow(r->t, row, r->out + i * r->D, (size_t)r->D);
}

/* Row i of an FP16 or BF16 SoftmaxGradient: Y and dY widened into the scratch (dX may be dY). */
static void softmax_grad_half_row(void *arg, void *scratch, int64_t i) {
  const half_rows *r = arg;
  float *row = scratch;
  const int64_t D = r->D;
  dm_widen(r->t, r->a + i * D, row, (size_t)D);
  dm_widen(r->t, r->dy + i * D, row + D, (size_t)D);
  softmax_grad_row(row, row + D, row + D, D);
  dm_narrow(r->t, row + D, r->out + i * D, (size_t)D);
}

static dm_status softmax_run(dm_op_ctx *ctx) {
  DM_TRY(softmax_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  int64_t N, D;
  DM_TRY(softmax_rows(ctx, x, "X", &N, &D));
  /* Rows are read fully before they are written, so a Y that shares X's storage is fine. */
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
  const half_rows r = {x->dtype, dm_tensor_data(x), NULL, dm_tensor_mutable_data(y), D};
  return dm_parallel_rows(ctx, N, N * D > (1 << 15), (size_t)D * sizeof(float),
                          "an FP32 row", softmax_half_row, (void *)&r);
}

static dm_status softmax_grad_run(dm_op_ctx *ctx) {
  DM_TRY(softmax_grad_infer(ctx));
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  dm_tensor *dx = dm_op_output(ctx, 0);
  int64_t N, D;
  DM_TRY(softmax_rows(ctx, y, "Y", &N, &D));
  if (N == 0 || D == 0)
    return DM_OK;
  if (y->dtype == DM_FLOAT) {
    const float *py = dm_tensor_data(y), *pdy = dm_tensor_data(dy); /* (N, D) each */
    float *pdx = dm_tensor_mutable_data(dx);                       /* (N, D), may be dy */
#if DM_HAVE_OPENMP
#pragma omp parallel for if (N * D > (1 << 15))
#endif
    for (int64_t i = 0; i < N; i++)
      softmax_grad_row(py + i * D, pdy + i * D, pdx + i * D, D);
    return DM_OK;
  }
  const half_rows r = {y->dtype, dm_tensor_data(y), dm_tensor_data(dy), dm_tensor_mutable_data(dx), D};
  return dm_parallel_rows(ctx, N, N * D > (1 << 15), 2 * (size_t)D * sizeof(float),
                          "FP32 rows", softmax_grad_half_row, (void *)&r);
}

static const dm_op_schema *const schemas[] = {&softmax_schema, &softmax_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Softmax", .device = DM_CPU, .run = softmax_run},
    {.type = "SoftmaxGradient", .device = DM_CPU, .run = softmax_grad_run},
    {0},
};
const dm_op_family dm_family_softmax = {schemas, kernels};
