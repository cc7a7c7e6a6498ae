/* reduce.c: ReduceSum, ReduceMean and ReduceMax over `axes` (default: all), with
 * `keepdims` (default 1), Caffe2's arguments; FLOAT, FLOAT16 and BFLOAT16.
 *
 * X is walked in rows of its last dim; each element is added (or compared) into the
 * output element it reduces to, held in double, so the result is exact to the last
 * rounding whatever the thread count, and rounded once into Y's dtype. An empty
 * reduction gives 0 (Sum), NaN (Mean: 0/0) and -inf (Max); Max propagates NaN.
 *
 * Gradients, Caffe2's: Reduce{Sum,Mean,Max}Gradient: dY, X, Y -> dX of X's shape, each
 * element the dY it was reduced into (over the count for Mean; for Max only where X
 * equals Y, every tied element alike), with the forward's axes and keepdims.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "broadcast.h"
#include "builtin.h"
#include "common.h"

typedef enum red_kind { R_SUM, R_MEAN, R_MAX } red_kind;

static red_kind kind_of(dm_op_ctx *ctx) {
  const char *t = dm_op_type(ctx);
  return strcmp(t, "ReduceSum") == 0 ? R_SUM : strcmp(t, "ReduceMean") == 0 ? R_MEAN : R_MAX;
}

/* reduced[d] for every dim of X (all when `axes` is absent); the output's dims. */
static dm_status reduce_geometry(dm_op_ctx *ctx, const dm_tensor *x, int *reduced, int *ndim,
                                 int64_t *dims) {
  size_t na = 0;
  const int64_t *axes = dm_op_arg_ints(ctx, "axes", &na);
  int keep = dm_op_arg_int(ctx, "keepdims", 1) != 0;
  for (int d = 0; d < x->ndim; d++)
    reduced[d] = !dm_op_has_arg(ctx, "axes");
  for (size_t i = 0; i < na; i++) {
    int ax;
    DM_TRY(dm_op_canonical_axis(ctx, "axes", axes[i], x->ndim, 0, &ax));
    if (reduced[ax])
      return dm_op_error(ctx, DM_ERR_INVALID, "axes name dim %d twice", ax);
    reduced[ax] = 1;
  }
  *ndim = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!reduced[d] || keep)
      dims[(*ndim)++] = reduced[d] ? 1 : x->dims[d];
  return DM_OK;
}

/* X's dims (rank 0 stays rank 1 of one element, as the callers preset) and the output
 * strides along them (0 along a reduced dim); returns how many elements reduce into one. */
static int64_t reduce_strides(const dm_tensor *x, const int *reduced, int64_t *dims,
                              int64_t *os) {
  int64_t s = 1, count = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    dims[d] = x->dims[d];
    os[d] = reduced[d] ? 0 : s;
    s *= reduced[d] ? 1 : x->dims[d];
    count *= reduced[d] ? x->dims[d] : 1;
  }
  return count;
}

static dm_status reduce_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X is %s: unsupported dtype; %s takes FLOAT, FLOAT16 or BFLOAT16",
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  int reduced[DM_MAX_DIMS], ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(reduce_geometry(ctx, x, reduced, &ndim, dims));
  if (dm_op_output(ctx, 0) == x)
    return dm_op_error(ctx, DM_ERR_INVALID, "Y may not be X's blob");
  return dm_op_set_output(ctx, 0, x->dtype, ndim, dims);
}

static dm_status reduce_run(dm_op_ctx *ctx) {
  DM_TRY(reduce_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const red_kind k = kind_of(ctx);
  int reduced[DM_MAX_DIMS], ndim;
  int64_t odims[DM_MAX_DIMS];
  DM_TRY(reduce_geometry(ctx, x, reduced, &ndim, odims));
  const int nd = x->ndim > 0 ? x->ndim : 1;
  int64_t dims[DM_MAX_DIMS] = {1}, os[DM_MAX_DIMS] = {0};
  const int64_t count = reduce_strides(x, reduced, dims, os);
  const int64_t nout = y->numel;
  double *acc = malloc((size_t)(nout ? nout : 1) * sizeof *acc);
  const int64_t len = dims[nd - 1];
  float *row = malloc((size_t)(len ? len : 1) * sizeof *row);
  if (!acc || !row) {
    free(acc);
    free(row);
    return DM_NOMEM("the reduction's accumulators");
  }
  for (int64_t i = 0; i < nout; i++)
    acc[i] = k == R_MAX ? -INFINITY : 0.0;
  const int64_t rows = len ? x->numel / len : 0, step = os[nd - 1];
  for (int64_t r = 0; r < rows; r++) {
    double *pa = acc + dm_bcast_row_offset(nd, dims, os, r);
    dm_load_f32(x->dtype, dm_tensor_data(x), r * len, len, row);
    if (k == R_MAX) {
      for (int64_t q = 0; q < len; q++) {
        double v = row[q], *a = pa + q * step;
        *a = *a != *a || v != v ? NAN : v > *a ? v : *a;
      }
    } else {
      for (int64_t q = 0; q < len; q++)
        pa[q * step] += row[q];
    }
  }
  free(row);
  void *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < nout; i++) {
    double v = k == R_MEAN ? acc[i] / (double)count : acc[i];
    if (dm_is_reduced_float(y->dtype))
      ((uint16_t *)py)[i] = dm_double_to_reduced(y->dtype, v);
    else
      ((float *)py)[i] = (float)v;
  }
  free(acc);
  return DM_OK;
}

/* ---- the gradients ------------------------------------------------------------------ */

static dm_status grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *dy = dm_op_input(ctx, 0), *x = dm_op_input(ctx, 1), *y = dm_op_input(ctx, 2);
  if (!dm_is_float_or_reduced(x->dtype) || dy->dtype != x->dtype || y->dtype != x->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "dY, X, Y are %s, %s, %s; expected the same dtype, FLOAT, FLOAT16 or "
                       "BFLOAT16", dm_dtype_name(dy->dtype), dm_dtype_name(x->dtype),
                       dm_dtype_name(y->dtype));
  int reduced[DM_MAX_DIMS], ndim;
  int64_t dims[DM_MAX_DIMS], n = 1;
  DM_TRY(reduce_geometry(ctx, x, reduced, &ndim, dims));
  for (int d = 0; d < ndim; d++)
    n *= dims[d];
  char a[96], b[96];
  if (dy->numel != n || y->numel != n)
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY is %s and Y is %s, but X reduces to %lld elements",
                       dm_shape_str(dy, a, sizeof a), dm_shape_str(y, b, sizeof b), (long long)n);
  DM_TRY(dm_op_check_grad_alias(ctx, 0, -1, 1u << 0 | 1u << 2,
                                (const char *const[]){"dY", "X", "Y"}));
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static dm_status grad_run(dm_op_ctx *ctx) {
  DM_TRY(grad_infer(ctx));
  const dm_tensor *dy = dm_op_input(ctx, 0), *x = dm_op_input(ctx, 1), *y = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0);
  const char *t = dm_op_type(ctx);
  const red_kind k = strncmp(t, "ReduceSum", 9) == 0 ? R_SUM
                     : strncmp(t, "ReduceMean", 10) == 0 ? R_MEAN : R_MAX;
  int reduced[DM_MAX_DIMS], ndim;
  int64_t odims[DM_MAX_DIMS];
  DM_TRY(reduce_geometry(ctx, x, reduced, &ndim, odims));
  const int nd = x->ndim > 0 ? x->ndim : 1;
  int64_t dims[DM_MAX_DIMS] = {1}, os[DM_MAX_DIMS] = {0};
  const int64_t count = reduce_strides(x, reduced, dims, os);
  const int64_t len = dims[nd - 1], rows = len ? x->numel / len : 0, step = os[nd - 1];
  float *buf = malloc((size_t)(3 * (len ? len : 1)) * sizeof *buf);
  float *g = malloc((size_t)(2 * (dy->numel ? dy->numel : 1)) * sizeof *g);
  if (!buf || !g) {
    free(buf);
    free(g);
    return DM_NOMEM("the reduction gradient's buffers");
  }
  float *yv = g + dy->numel;
  dm_load_f32(dy->dtype, dm_tensor_data(dy), 0, dy->numel, g);
  dm_load_f32(y->dtype, dm_tensor_data(y), 0, y->numel, yv);
  for (int64_t r = 0; r < rows; r++) {
    const int64_t o = dm_bcast_row_offset(nd, dims, os, r);
    float *xr = buf + len;
    dm_load_f32(x->dtype, dm_tensor_data(x), r * len, len, xr);
    for (int64_t q = 0; q < len; q++) {
      const int64_t j = o + q * step;
      buf[q] = k == R_SUM    ? g[j]
               : k == R_MEAN ? (float)((double)g[j] / (double)count)
               : xr[q] == yv[j] ? g[j] : 0.0f;
    }
    dm_store_f32(x->dtype, dm_tensor_mutable_data(dx), r * len, len, buf);
  }
  free(buf);
  free(g);
  return DM_OK;
}

/* dY, X, Y -> dX; the forward's axes and keepdims are copied onto it. */
static dm_status emit_grad(dm_grad_ctx *g, const char *type) {
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_input(g, 0), dm_grad_output(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, type, 3, in, 1, out);
}
static dm_status rsum_gradient(dm_grad_ctx *g) { return emit_grad(g, "ReduceSumGradient"); }
static dm_status rmean_gradient(dm_grad_ctx *g) { return emit_grad(g, "ReduceMeanGradient"); }
static dm_status rmax_gradient(dm_grad_ctx *g) { return emit_grad(g, "ReduceMaxGradient"); }

static void reduce_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = (double)dm_op_input(ctx, 0)->numel;
}

static const dm_arg_spec reduce_args[] = {
    {"axes", DM_ARG_INTS, 0, "the dims to reduce (negative: from the end); default all"},
    {"keepdims", DM_ARG_INT, 0, "1 (default): keep the reduced dims as 1s; 0: drop them"},
    {NULL, 0, 0, NULL},
};

#define REDUCE_SCHEMA(var, name, docstr)                                                    \
  static const dm_op_schema var##_schema = {                                                \
      .type = name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,   \
      .args = reduce_args, .precision = DM_PREC_FOLLOW, .doc = docstr,                      \
      .infer = reduce_infer, .cost = reduce_cost, .gradient = var##_gradient}
#define GRAD_SCHEMA(var, name, docstr)                                                      \
  static const dm_op_schema var##_schema = {                                                \
      .type = name, .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,   \
      .args = reduce_args, .precision = DM_PREC_FOLLOW, .doc = docstr,                      \
      .infer = grad_infer, .cost = reduce_cost}

REDUCE_SCHEMA(rsum, "ReduceSum", "X -> Y = X summed over `axes` (default all), `keepdims`.");
REDUCE_SCHEMA(rmean, "ReduceMean", "X -> Y = the mean of X over `axes` (default all), `keepdims`.");
REDUCE_SCHEMA(rmax, "ReduceMax", "X -> Y = the max of X over `axes` (default all), `keepdims`; "
                                 "NaN propagated.");
GRAD_SCHEMA(rsum_grad, "ReduceSumGradient",
            "dY, X, Y -> dX of X's shape: dY broadcast back over the reduced `axes`.");
GRAD_SCHEMA(rmean_grad, "ReduceMeanGradient",
            "dY, X, Y -> dX of X's shape: dY over the count, broadcast back over `axes`.");
GRAD_SCHEMA(rmax_grad, "ReduceMaxGradient",
            "dY, X, Y -> dX of X's shape: dY where X equals its max Y (every tie), else 0.");

static const dm_op_schema *const schemas[] = {&rsum_schema,      &rmean_schema,
                                              &rmax_schema,      &rsum_grad_schema,
                                              &rmean_grad_schema, &rmax_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "ReduceSum", .device = DM_CPU, .run = reduce_run},
    {.type = "ReduceMean", .device = DM_CPU, .run = reduce_run},
    {.type = "ReduceMax", .device = DM_CPU, .run = reduce_run},
    {.type = "ReduceSumGradient", .device = DM_CPU, .run = grad_run},
    {.type = "ReduceMeanGradient", .device = DM_CPU, .run = grad_run},
    {.type = "ReduceMaxGradient", .device = DM_CPU, .run = grad_run},
    {0},
};
const dm_op_family dm_family_reduce = {schemas, kernels};
