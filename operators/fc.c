/* fc.c: FC (fully connected), Y = X W^T + b, and FCGradient, for FP32, FP16 and BF16.
 *
 * X is flattened to M x K at `axis`, W to N x K at `axis_w`; Y keeps X's leading dims and
 * appends N. The FP16 (BF16) kernels take FP16 (BF16) X and W, bias of the same dtype or
 * FP32, accumulate in FP32 and round each result once, as tensor cores do (see
 * operators/math/gemm.h).
 *
 * FCGradient: X, W, dY -> dW (W's shape), db (N), dX (X's shape), as Caffe2 (which always
 * emits dX): dW = dY^T X, db = column sums of dY, dX = dY W. db takes dY's dtype.
 *
 * FCWeightToNHWC: the layout pass's reorder of an FC weight whose X it holds NHWC.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/half.h"
#include "math/gemm.h"
#include "builtin.h"
#include "fc.h"

static const dm_arg_spec fc_args[] = {DM_FC_ARG_SPECS, {NULL, 0, 0, NULL}};

dm_status dm_fc_geometry(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                         dm_fc_dims *d) {
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &d->axis));
  DM_TRY(dm_op_canonical_axis(ctx, "axis_w", dm_op_arg_int(ctx, "axis_w", 1), w->ndim, 0,
                              &d->axis_w));
  d->M = dm_dims_product(x, 0, d->axis);
  d->K = dm_dims_product(x, d->axis, x->ndim);
  d->N = dm_dims_product(w, 0, d->axis_w);
  int64_t Kw = dm_dims_product(w, d->axis_w, w->ndim);
  char xs[96], ws[96];
  if (d->K != Kw)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "X is %s flattened at axis %d to %lldx%lld, but W is %s: K differs "
                       "(%lld vs %lld)",
                       dm_shape_str(x, xs, sizeof xs), d->axis, (long long)d->M,
                       (long long)d->K, dm_shape_str(w, ws, sizeof ws), (long long)d->K,
                       (long long)Kw);
  return DM_OK;
}

/* ---- FC ------------------------------------------------------------------------- */

dm_status dm_fc_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *b = dm_op_input(ctx, 2);
  dm_fc_dims d;
  DM_TRY(dm_fc_geometry(ctx, x, w, &d));
  char ws[96];
  if (b->numel != d.N)
    return dm_op_error(ctx, DM_ERR_SHAPE, "b has %lld elements, but W is %s: N = %lld",
                       (long long)b->numel, dm_shape_str(w, ws, sizeof ws), (long long)d.N);
  int r16 = dm_is_reduced_float(x->dtype);
  if ((x->dtype != DM_FLOAT && !r16) || w->dtype != x->dtype ||
      (b->dtype != x->dtype && !(r16 && b->dtype == DM_FLOAT)))
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X, W, b are %s, %s, %s; expected all FLOAT, or FLOAT16 (BFLOAT16) X "
                       "and W with a bias of the same dtype or FLOAT",
                       dm_dtype_name(x->dtype), dm_dtype_name(w->dtype), dm_dtype_name(b->dtype));
  int64_t dims[DM_MAX_DIMS];
  for (int i = 0; i < d.axis; i++)
    dims[i] = x->dims[i];
  dims[d.axis] = d.N;
  return dm_op_set_output(ctx, 0, x->dtype, d.axis + 1, dims);
}

void dm_fc_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0), *y = dm_op_output(ctx, 0);
  int64_t n = y->ndim ? y->dims[y->ndim - 1] : 1, m = n ? y->numel / n : 0;
  int64_t k = m ? x->numel / m : 0;
  dm_cost_io(ctx, c);
  c->flops = 2.0 * (double)m * (double)n * (double)k + (double)y->numel;
}

/* FCGradient: X, W, dY -> dW, db, dX (FCReluGradient: X, W, dY, Y). */
dm_status dm_fc_gradient_emit(dm_grad_ctx *g, const char *type, int with_y) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_input(g, 1), dm_grad_output_grad(g, 0),
                      dm_grad_output(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 1), dm_grad_input_grad(g, 2),
                       dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, type, with_y ? 4 : 3, in, 3, out);
}

static dm_status fc_gradient(dm_grad_ctx *g) { return dm_fc_gradient_emit(g, "FCGradient", 0); }

static const dm_op_schema fc_schema = {
    .type = "FC",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = fc_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W (N x K), b (N) -> Y = X W^T + b; X flattened to M x K at `axis`.",
    .infer = dm_fc_infer,
    .cost = dm_fc_cost,
    .gradient = fc_gradient,
    .layout = DM_LAYOUT_FLATTEN, .layout_inputs = 0x1,
};

dm_status dm_fc_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *b = dm_op_input(ctx, 2);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_tensors_alias(y, x) || dm_tensors_alias(y, w) || dm_tensors_alias(y, b))
    dm_tensor_reset(y); /* a view of an input (Reshape): write Y into fresh storage */
  DM_TRY(dm_fc_infer(ctx));
  dm_fc_dims d;
  DM_TRY(dm_fc_geometry(ctx, x, w, &d));
  int64_t M = d.M, N = d.N, K = d.K;
  if (dm_is_reduced_float(x->dtype))
    return dm_gemm_r16(x->dtype, 0, 1, M, N, K, dm_tensor_data(x), dm_tensor_data(w),
                       dm_tensor_data(b), b->dtype, dm_tensor_mutable_data(y));
  float *py = dm_tensor_mutable_data(y); /* (M, N) */
  const float *pb = dm_tensor_data(b);   /* (N) */
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++)
      py[i * N + j] = pb[j];
  return dm_gemm_f32(0, 1, M, N, K, 1.0f, dm_tensor_data(x), dm_tensor_data(w), 1.0f, py);
}

/* ---- FCGradient ------------------------------------------------------------------ */

dm_status dm_fc_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_fc_dims d;
  DM_TRY(dm_fc_geometry(ctx, x, w, &d));
  if (!dm_is_float_or_reduced(x->dtype) || w->dtype != x->dtype || dy->dtype != x->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X, W, dY are %s, %s, %s; expected all FLOAT, all FLOAT16 or all "
                       "BFLOAT16",
                       dm_dtype_name(x->dtype), dm_dtype_name(w->dtype), dm_dtype_name(dy->dtype));
  char s[96];
  if (dy->numel != d.M * d.N || dy->ndim < 1 || dy->dims[dy->ndim - 1] != d.N)
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY is %s; expected %lld rows of N = %lld",
                       dm_shape_str(dy, s, sizeof s), (long long)d.M, (long long)d.N);
  for (int o = 0; o < dm_op_num_outputs(ctx); o++)
    for (int i = 0; i < 3; i++)
      if (dm_op_output(ctx, o) == dm_op_input(ctx, i))
        return dm_op_error(ctx, DM_ERR_INVALID, "output %d is input %d; FCGradient cannot run "
                                                "in place", o, i);
  int64_t n = d.N;
  DM_TRY(dm_op_set_output(ctx, 0, w->dtype, w->ndim, w->dims));
  DM_TRY(dm_op_set_output(ctx, 1, dy->dtype, 1, &n));
  if (dm_op_num_outputs(ctx) > 2)
    DM_TRY(dm_op_set_output(ctx, 2, x->dtype, x->ndim, x->dims));
  return DM_OK;
}

void dm_fc_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  int64_t n = dm_op_output(ctx, 1)->numel, m = n ? dy->numel / n : 0, k = m ? x->numel / m : 0;
  dm_cost_io(ctx, c);
  /* dW and dX are one M x N x K product each; db one pass over dY */
  c->flops = 2.0 * (double)m * (double)n * (double)k * (dm_op_num_outputs(ctx) > 2 ? 2 : 1) +
             (double)dy->numel;
}

dm_status dm_fc_backward_run(dm_op_ctx *ctx, const void *dy_data) {
  DM_TRY(dm_fc_grad_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_fc_dims d;
  DM_TRY(dm_fc_geometry(ctx, x, w, &d));
  int64_t M = d.M, N = d.N, K = d.K;
  dm_tensor *dw = dm_op_output(ctx, 0), *db = dm_op_output(ctx, 1);
  dm_tensor *dx = dm_op_num_outputs(ctx) > 2 ? dm_op_output(ctx, 2) : NULL;
  /* db[j] = sum_i dY[i][j], accumulated in double (more than FP32's accuracy, and the
   * same on every thread count), rounded once into db's dtype. */
  double *acc = calloc((size_t)(N ? N : 1), sizeof *acc);
  float *row = malloc((size_t)(N ? N : 1) * sizeof *row);
  if (!acc || !row) {
    free(acc);
    free(row);
    return DM_NOMEM("FCGradient bias accumulator");
  }
  for (int64_t i = 0; i < M; i++) {
    dm_load_f32(dy->dtype, dy_data, i * N, N, row);
    for (int64_t j = 0; j < N; j++)
      acc[j] += row[j];
  }
  for (int64_t j = 0; j < N; j++)
    row[j] = (float)acc[j];
  if (dm_is_reduced_float(db->dtype)) /* double -> 16 bits once, not via float */
    for (int64_t j = 0; j < N; j++)
      ((uint16_t *)dm_tensor_mutable_data(db))[j] = dm_double_to_reduced(db->dtype, acc[j]);
  else
    dm_store_f32(db->dtype, dm_tensor_mutable_data(db), 0, N, row);
  free(acc);
  free(row);
  if (dm_is_reduced_float(x->dtype)) {
    /* dW (N x K) = dY^T (N x M) X (M x K); dX (M x K) = dY (M x N) W (N x K) */
    DM_TRY(dm_gemm_r16(x->dtype, 1, 0, N, K, M, dy_data, dm_tensor_data(x), NULL,
                       DM_FLOAT, dm_tensor_mutable_data(dw)));
    if (dx)
      DM_TRY(dm_gemm_r16(x->dtype, 0, 0, M, K, N, dy_data, dm_tensor_data(w), NULL,
                         DM_FLOAT, dm_tensor_mutable_data(dx)));
    return DM_OK;
  }
  DM_TRY(dm_gemm_f32(1, 0, N, K, M, 1.0f, dy_data, dm_tensor_data(x), 0.0f,
                     dm_tensor_mutable_data(dw)));
  if (dx)
    DM_TRY(dm_gemm_f32(0, 0, M, K, N, 1.0f, dy_data, dm_tensor_data(w), 0.0f,
                       dm_tensor_mutable_data(dx)));
  return DM_OK;
}

static dm_status fc_grad_run(dm_op_ctx *ctx) {
  return dm_fc_backward_run(ctx, dm_tensor_data(dm_op_input(ctx, 2)));
}

static const dm_op_schema fc_grad_schema = {
    .type = "FCGradient",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 2,
    .max_outputs = 3,
    .args = fc_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W, dY -> dW, db, [dX] for FC (same axis, axis_w).",
    .infer = dm_fc_grad_infer,
    .cost = dm_fc_grad_cost,
    .layout = DM_LAYOUT_FLATTEN, .layout_inputs = 0x1, .layout_outputs = 0x4, /* X -> dX */
};

/* ---- FCWeightToNHWC: the layout pass's reorder of an FC weight ------------------- */

/* W (N x K) with K = C * S, C the channels (the sum of the C_i's first dims), S = H*W:
 * the column of NCHW element (c, s) is c*S + s, of NHWC element (s, c) s*C + c. */
static dm_status fc_nhwc_geometry(dm_op_ctx *ctx, int64_t *N, int64_t *C, int64_t *S) {
  const dm_tensor *w = dm_op_input(ctx, 0);
  char ws[96];
  if (w->ndim != 2 || w->dtype == DM_STRING)
    return dm_op_error(ctx, DM_ERR_INVALID, "W is %s %s; %s takes a 2-D numeric W (N x K)",
                       dm_dtype_name(w->dtype), dm_shape_str(w, ws, sizeof ws), dm_op_type(ctx));
  int64_t c = 0;
  for (int i = 1; i < dm_op_num_inputs(ctx); i++) {
    const dm_tensor *t = dm_op_input(ctx, i);
    if (t->ndim < 1 || t->dims[0] <= 0)
      return dm_op_error(ctx, DM_ERR_INVALID, "input %d ('%s') is %s: no channel count in its "
                         "first dim", i, dm_op_input_name(ctx, i), dm_shape_str(t, ws, sizeof ws));
    c += t->dims[0];
  }
  if (w->dims[1] % c != 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "W is %s: K = %lld is not a multiple of the %lld "
                       "channels", dm_shape_str(w, ws, sizeof ws), (long long)w->dims[1],
                       (long long)c);
  *N = w->dims[0];
  *C = c;
  *S = w->dims[1] / c;
  return DM_OK;
}

static dm_status fc_nhwc_infer(dm_op_ctx *ctx) {
  int64_t N, C, S;
  DM_TRY(fc_nhwc_geometry(ctx, &N, &C, &S));
  const dm_tensor *w = dm_op_input(ctx, 0);
  if (dm_op_output(ctx, 0) == w)
    return dm_op_error(ctx, DM_ERR_INVALID, "Y is W; %s cannot run in place", dm_op_type(ctx));
  return dm_op_set_output(ctx, 0, w->dtype, 2, w->dims);
}

static dm_status fc_nhwc_run(dm_op_ctx *ctx) {
  DM_TRY(fc_nhwc_infer(ctx));
  int64_t N, C, S;
  DM_TRY(fc_nhwc_geometry(ctx, &N, &C, &S));
  const dm_tensor *w = dm_op_input(ctx, 0);
  size_t es = dm_dtype_size(w->dtype);
  const char *pw = dm_tensor_data(w);
  char *py = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t s = 0; s < S; s++)
        memcpy(py + (size_t)(n * C * S + s * C + c) * es, pw + (size_t)(n * C * S + c * S + s) * es,
               es);
  return DM_OK;
}

static const dm_op_schema fc_nhwc_schema = {
    .type = "FCWeightToNHWC",
    .min_inputs = 2,
    .max_inputs = -1,
    .min_outputs = 1,
    .max_outputs = 1,
    .precision = DM_PREC_NONE, /* a permutation, any dtype */
    .doc = "W (N x K), C_1, [C_2, ...] -> Y (N x K): W's columns, read as (C, K/C) with C the "
           "sum of the C_i's first dims (the filters making the channels), reordered to "
           "(K/C, C): the weight of an FC that reads the same data flattened from NHWC "
           "(the layout pass puts it in the init-net addition).",
    .infer = fc_nhwc_infer,
    .no_gradient = 1,
};

static const dm_op_schema *const schemas[] = {&fc_schema, &fc_grad_schema, &fc_nhwc_schema,
                                              NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "FC", .device = DM_CPU, .run = dm_fc_run},
    {.type = "FCGradient", .device = DM_CPU, .run = fc_grad_run},
    {.type = "FCWeightToNHWC", .device = DM_CPU, .run = fc_nhwc_run},
    {0},
};
const dm_op_family dm_family_fc = {schemas, kernels};
