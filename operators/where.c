/* where.c: Where (Caffe2's and ONNX's: C BOOL, X, Y -> Z = C ? X : Y, the three
 * broadcast by numpy's rule) and WhereGradient.
 *
 * The forward moves elements, so any numeric dtype runs the same code (FP16 and BF16 are
 * copied, never converted). The gradient takes X and Y for their shapes, so it can sum
 * dZ over the dims they were broadcast along itself (no SumReduceLike behind it): dX =
 * sum over broadcast dims of (C ? dZ : 0), dY of (C ? 0 : dZ), accumulated in FP32 in the
 * order of Z's elements (deterministic) and rounded once into dZ's dtype.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broadcast.h"
#include "builtin.h"
#include "common.h"

static const char *const where_slots[] = {"C", "X", "Y"};

/* Z's shape and the three inputs' strides over it (rank 0 taken as rank 1). */
typedef struct where_geom {
  int ndim, zndim; /* zndim: Z's own rank (0 for scalars) */
  int64_t dims[DM_MAX_DIMS], st[3][DM_MAX_DIMS], rows, len;
} where_geom;

static dm_status where_check(dm_op_ctx *ctx, const dm_tensor *c, const dm_tensor *x,
                             const dm_tensor *y, int for_output, where_geom *g) {
  if (c->dtype != DM_BOOL)
    return dm_op_error(ctx, DM_ERR_TYPE, "C is %s; Where's condition must be BOOL",
                       dm_dtype_name(c->dtype));
  if (x->dtype != y->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s and Y is %s; Where takes one dtype for both",
                       dm_dtype_name(x->dtype), dm_dtype_name(y->dtype));
  if (x->dtype == DM_STRING || x->dtype == DM_UNDEFINED)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; Where takes numeric tensors",
                       dm_dtype_name(x->dtype));
  const dm_tensor *in[3] = {c, x, y};
  DM_TRY(for_output ? dm_bcast_numpy_output_shape(ctx, 3, in, where_slots, &g->ndim, g->dims)
                    : dm_bcast_numpy_shape(ctx, 3, in, where_slots, &g->ndim, g->dims));
  g->zndim = g->ndim;
  int nd = g->ndim ? g->ndim : 1;
  int64_t dims1[DM_MAX_DIMS];
  memcpy(dims1, g->dims, sizeof dims1);
  if (!g->ndim)
    dims1[0] = 1;
  for (int k = 0; k < 3; k++)
    dm_bcast_numpy_strides(in[k], nd, dims1, g->st[k]);
  g->len = dims1[nd - 1];
  int64_t n = 1;
  for (int d = 0; d < nd; d++)
    n *= dims1[d];
  g->rows = g->len ? n / g->len : 0;
  memcpy(g->dims, dims1, sizeof dims1);
  g->ndim = nd;
  return DM_OK;
}

static dm_status where_infer(dm_op_ctx *ctx) {
  where_geom g;
  const dm_tensor *x = dm_op_input(ctx, 1);
  DM_TRY(where_check(ctx, dm_op_input(ctx, 0), x, dm_op_input(ctx, 2), 1, &g));
  return dm_op_set_output(ctx, 0, x->dtype, g.zndim, g.dims);
}

static dm_status where_run(dm_op_ctx *ctx) {
  DM_TRY(where_infer(ctx));
  const dm_tensor *c = dm_op_input(ctx, 0), *x = dm_op_input(ctx, 1), *y = dm_op_input(ctx, 2);
  where_geom g;
  DM_TRY(where_check(ctx, c, x, y, 1, &g));
  const uint8_t *pc = dm_tensor_data(c);
  const char *px = dm_tensor_data(x), *py = dm_tensor_data(y);
  char *pz = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  size_t es = dm_dtype_size(x->dtype);
  int last = g.ndim - 1;
  for (int64_t r = 0; r < g.rows; r++) {
    int64_t oc = dm_bcast_row_offset(g.ndim, g.dims, g.st[0], r);
    int64_t ox = dm_bcast_row_offset(g.ndim, g.dims, g.st[1], r);
    int64_t oy = dm_bcast_row_offset(g.ndim, g.dims, g.st[2], r);
    /* Z may be X's or Y's blob only at Z's shape (checked), so element i is read first */
    for (int64_t i = 0; i < g.len; i++) {
      const char *src = pc[oc + i * g.st[0][last]] ? px + (size_t)(ox + i * g.st[1][last]) * es
                                                   : py + (size_t)(oy + i * g.st[2][last]) * es;
      char *dst = pz + (size_t)(r * g.len + i) * es;
      if (dst != src)
        memcpy(dst, src, es);
    }
  }
  return DM_OK;
}

/* WhereGradient: C, X, Y (read for their shapes), dZ -> dX, dY. */
static dm_status where_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 1), *y = dm_op_input(ctx, 2), *dz = dm_op_input(ctx, 3);
  where_geom g;
  DM_TRY(where_check(ctx, dm_op_input(ctx, 0), x, y, 0, &g));
  if (!dm_is_float_or_reduced(dz->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "dZ is %s; WhereGradient takes FLOAT, FLOAT16 or "
                       "BFLOAT16", dm_dtype_name(dz->dtype));
  int nd = g.zndim;
  const int64_t *dims = g.dims;
  int same = dz->ndim == nd;
  for (int d = 0; same && d < nd; d++)
    same = dz->dims[d] == dims[d];
  if (!same) {
    char a[96], b[96] = "", *p = b;
    for (int d = 0; d < nd && p < b + sizeof b - 24; d++)
      p += snprintf(p, (size_t)(b + sizeof b - p), d ? "x%lld" : "%lld", (long long)dims[d]);
    return dm_op_error(ctx, DM_ERR_SHAPE, "dZ is %s; it must have Where's output shape %s",
                       dm_shape_str(dz, a, sizeof a), nd ? b : "(scalar)");
  }
  DM_TRY(dm_op_set_output(ctx, 0, dz->dtype, x->ndim, x->dims));
  if (dm_op_num_outputs(ctx) > 1)
    DM_TRY(dm_op_set_output(ctx, 1, dz->dtype, y->ndim, y->dims));
  return DM_OK;
}

static dm_status where_grad_run(dm_op_ctx *ctx) {
  const dm_tensor *c = dm_op_input(ctx, 0), *x = dm_op_input(ctx, 1), *y = dm_op_input(ctx, 2);
  const dm_tensor *dz = dm_op_input(ctx, 3);
  int nout = dm_op_num_outputs(ctx); /* no in-place pairs: outputs are apart from inputs */
  DM_TRY(where_grad_infer(ctx));
  where_geom g;
  DM_TRY(where_check(ctx, c, x, y, 0, &g));
  int64_t nx = x->numel, ny = nout > 1 ? y->numel : 0;
  float *acc = calloc((size_t)(nx + ny + g.len + 1), sizeof *acc); /* dX, dY, one dZ row */
  if (!acc)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for WhereGradient's FP32 sums");
  float *ax = acc, *ay = acc + nx, *row = acc + nx + ny;
  const uint8_t *pc = dm_tensor_data(c);
  int last = g.ndim - 1;
  for (int64_t r = 0; r < g.rows; r++) {
    int64_t oc = dm_bcast_row_offset(g.ndim, g.dims, g.st[0], r);
    int64_t ox = dm_bcast_row_offset(g.ndim, g.dims, g.st[1], r);
    int64_t oy = dm_bcast_row_offset(g.ndim, g.dims, g.st[2], r);
    dm_load_f32(dz->dtype, dm_tensor_data(dz), r * g.len, g.len, row);
    for (int64_t i = 0; i < g.len; i++) {
      if (pc[oc + i * g.st[0][last]])
        ax[ox + i * g.st[1][last]] += row[i];
      else if (ny)
        ay[oy + i * g.st[2][last]] += row[i];
    }
  }
  dm_store_f32(dz->dtype, dm_tensor_mutable_data(dm_op_output(ctx, 0)), 0, nx, ax);
  if (ny)
    dm_store_f32(dz->dtype, dm_tensor_mutable_data(dm_op_output(ctx, 1)), 0, ny, ay);
  free(acc);
  return DM_OK;
}

static void where_cost(dm_op_ctx *ctx, dm_op_cost *c) { dm_cost_io(ctx, c); }

static void where_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *dz = dm_op_input(ctx, 3);
  *c = (dm_op_cost){0};
  c->flops = (double)dz->numel;
  c->bytes_read = (double)dm_tensor_nbytes(dz) + (double)dm_tensor_nbytes(dm_op_input(ctx, 0));
  c->bytes_written = (double)dm_tensor_nbytes(dm_op_output(ctx, 0));
  if (dm_op_num_outputs(ctx) > 1)
    c->bytes_written += (double)dm_tensor_nbytes(dm_op_output(ctx, 1));
}

static dm_status where_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_input(g, 1), dm_grad_input(g, 2),
                      dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 1), dm_grad_input_grad(g, 2)};
  return dm_grad_emit(g, "WhereGradient", 4, in, 2, out);
}

static const dm_inplace_pair where_inplace[] = {{1, 0}, {2, 0}, {-1, -1}};
static const dm_grad_slot where_grad_slots[] = {{1, NULL}, {2, NULL}, {-1, NULL}};

static const dm_op_schema where_schema = {
    .type = "Where", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .inplace = where_inplace, .precision = DM_PREC_FOLLOW,
    .nonfloat_inputs = 0x1, /* the BOOL condition */
    .doc = "C (BOOL), X, Y -> Z = C ? X : Y elementwise, the three broadcast by numpy's rule "
           "(X and Y one dtype, Z the same); Z may be X's or Y's blob at Z's shape",
    .infer = where_infer, .cost = where_cost, .gradient = where_gradient};

static const dm_op_schema where_grad_schema = {
    .type = "WhereGradient", .min_inputs = 4, .max_inputs = 4,
    .min_outputs = 1, .max_outputs = 2, .precision = DM_PREC_FOLLOW, .nonfloat_inputs = 0x1,
    .doc = "C, X, Y, dZ -> dX, [dY]: C ? dZ : 0 and C ? 0 : dZ, each summed over the dims "
           "its input was broadcast along (FP32 sums, dZ's dtype; X and Y read for their "
           "shapes)",
    .infer = where_grad_infer, .cost = where_grad_cost, .grad_slots = where_grad_slots};

static const dm_op_schema *const schemas[] = {&where_schema, &where_grad_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "Where", .device = DM_CPU, .run = where_run},
    {.type = "WhereGradient", .device = DM_CPU, .run = where_grad_run},
    {0},
};
const dm_op_family dm_family_where = {schemas, kernels};
