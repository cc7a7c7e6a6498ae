/* shape_ops.c: Caffe2's shape-manipulating ops the ONNX importer needs: Shape, Gather,
 * Squeeze, ExpandDims and Slice. Any dtype but STRING (they move elements of any size,
 * so FP16 and BF16 are the same code); Shape and the index inputs are integers.
 *
 * Caffe2's conventions, which ONNX's translators map onto: Shape (optional `axes`) gives
 * INT64 dims; Gather takes `axis` (default 0) and, with `wrap_indices`, counts negative
 * indices from the end; Squeeze drops the listed `dims` (each of size 1); ExpandDims
 * inserts a 1 at each of `dims` (positions in the result, taken in ascending order);
 * Slice takes `starts`/`ends` (arguments or INT32/INT64 inputs) for the leading dims,
 * a negative one counting from one past the end (-1 is the end), values beyond a dim
 * clamped to it. Unlike old Caffe2, any number of dims may be sliced at once.
 *
 * Squeeze and ExpandDims make Y a view of X (as Reshape); their gradient is
 * ResizeLike(dY, X). Gather's gradient is GatherGradient(DATA, INDICES, dY) -> dDATA, a
 * dense scatter-add where Caffe2 emits a sparse gradient: dDATA is FP32 whatever DATA's
 * dtype (an embedding table's FP32 master takes it unconverted, and repeated tokens add
 * in FP32 rather than in 16 bits), summed in index order, so it is deterministic. Slice
 * has no gradient maker here (differentiating through it is refused), Shape passes none.
 */
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "tensor_ops.h"

static dm_status check_numeric(dm_op_ctx *ctx, const dm_tensor *x, const char *what) {
  if (x->dtype == DM_STRING || x->dtype == DM_UNDEFINED)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; %s takes numeric tensors", what,
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  return DM_OK;
}

static dm_status check_index_type(dm_op_ctx *ctx, const dm_tensor *t, const char *what) {
  if (t->dtype != DM_INT32 && t->dtype != DM_INT64)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; it must be INT32 or INT64", what,
                       dm_dtype_name(t->dtype));
  return DM_OK;
}

static int64_t index_at(const dm_tensor *t, int64_t k) {
  return t->dtype == DM_INT32 ? ((const int32_t *)dm_tensor_data(t))[k]
                              : ((const int64_t *)dm_tensor_data(t))[k];
}

static void view_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  (void)ctx;
  *c = (dm_op_cost){0};
}

static void copy_cost(dm_op_ctx *ctx, dm_op_cost *c) { dm_cost_io(ctx, c); }

/* ---- Shape -------------------------------------------------------------------------- */

static const dm_arg_spec shape_args[] = {
    {"axes", DM_ARG_INTS, 0, "the dims to report, in this order (default all)"},
    {NULL, 0, 0, NULL},
};

/* The dims Y reports: X's, or those of `axes`. */
static dm_status shape_axes(dm_op_ctx *ctx, int *n, int *axes) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  size_t k = 0;
  const int64_t *a = dm_op_arg_ints(ctx, "axes", &k);
  if (!dm_op_has_arg(ctx, "axes")) {
    for (int d = 0; d < x->ndim; d++)
      axes[d] = d;
    *n = x->ndim;
    return DM_OK;
  }
  if (k > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_INVALID, "'axes' has %zu entries (at most %d)", k,
                       DM_MAX_DIMS);
  for (size_t i = 0; i < k; i++)
    DM_TRY(dm_op_canonical_axis(ctx, "axes", a[i], x->ndim, 0, &axes[i]));
  *n = (int)k;
  return DM_OK;
}

static dm_status shape_infer(dm_op_ctx *ctx) {
  int axes[DM_MAX_DIMS], n;
  DM_TRY(shape_axes(ctx, &n, axes));
  int64_t len = n;
  return dm_op_set_output(ctx, 0, DM_INT64, 1, &len);
}

static dm_status shape_run(dm_op_ctx *ctx) {
  int axes[DM_MAX_DIMS], n;
  DM_TRY(shape_infer(ctx));
  DM_TRY(shape_axes(ctx, &n, axes));
  const dm_tensor *x = dm_op_input(ctx, 0);
  int64_t *y = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  for (int i = 0; i < n; i++)
    y[i] = x->dims[axes[i]];
  return DM_OK;
}

/* ---- Gather ------------------------------------------------------------------------- */

static const dm_arg_spec gather_args[] = {
    {"axis", DM_ARG_INT, 0, "the DATA dim INDICES index into (default 0)"},
    {"wrap_indices", DM_ARG_INT, 0, "1: a negative index counts from the end (default 0)"},
    {NULL, 0, 0, NULL},
};

/* Gather's OUTPUT shape (checking DATA, INDICES and `axis`), and the canonical axis. */
static dm_status gather_shape(dm_op_ctx *ctx, int *axis, int *ndim, int64_t *dims) {
  const dm_tensor *x = dm_op_input(ctx, 0), *idx = dm_op_input(ctx, 1);
  DM_TRY(check_numeric(ctx, x, "DATA"));
  DM_TRY(check_index_type(ctx, idx, "INDICES"));
  if (x->ndim == 0)
    return dm_op_error(ctx, DM_ERR_SHAPE, "DATA is a scalar; it needs a dim to index");
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 0), x->ndim, 0, axis));
  if (x->ndim - 1 + idx->ndim > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_SHAPE, "OUTPUT would have %d dims (at most %d)",
                       x->ndim - 1 + idx->ndim, DM_MAX_DIMS);
  int r = 0;
  for (int d = 0; d < *axis; d++)
    dims[r++] = x->dims[d];
  for (int d = 0; d < idx->ndim; d++)
    dims[r++] = idx->dims[d];
  for (int d = *axis + 1; d < x->ndim; d++)
    dims[r++] = x->dims[d];
  *ndim = r;
  return DM_OK;
}

static dm_status gather_infer(dm_op_ctx *ctx) {
  int axis, r;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(gather_shape(ctx, &axis, &r, dims));
  return dm_op_set_output(ctx, 0, dm_op_input(ctx, 0)->dtype, r, dims);
}

/* Every index in range before anything is written, so a bad one leaves no half-written
 * output (an out-of-range token id is an error, never an out-of-bounds access). */
static dm_status gather_check_indices(dm_op_ctx *ctx, const dm_tensor *idx, int axis,
                                      int64_t along, int wrap) {
  for (int64_t j = 0; j < idx->numel; j++) {
    int64_t q = index_at(idx, j);
    if (q < -along || q >= along || (q < 0 && !wrap))
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "INDICES[%lld] = %lld is out of range for DATA dim %d of size %lld%s",
                         (long long)j, (long long)q, axis, (long long)along,
                         q < 0 && q >= -along ? " (negative: set wrap_indices)" : "");
  }
  return DM_OK;
}

static dm_status gather_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *idx = dm_op_input(ctx, 1);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (y == x || y == idx)
    return dm_op_error(ctx, DM_ERR_INVALID, "OUTPUT cannot be DATA's or INDICES' blob");
  DM_TRY(gather_infer(ctx));
  int axis, wrap = dm_op_arg_int(ctx, "wrap_indices", 0) != 0;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 0), x->ndim, 0, &axis));
  int64_t outer = dm_dims_product(x, 0, axis), along = x->dims[axis];
  size_t row = (size_t)dm_dims_product(x, axis + 1, x->ndim) * dm_dtype_size(x->dtype);
  const char *px = dm_tensor_data(x);
  char *py = dm_tensor_mutable_data(y);
  DM_TRY(gather_check_indices(ctx, idx, axis, along, wrap));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < idx->numel; j++) {
      int64_t q = index_at(idx, j);
      q = q < 0 ? q + along : q;
      if (row)
        memcpy(py + (size_t)(o * idx->numel + j) * row, px + (size_t)(o * along + q) * row, row);
    }
  return DM_OK;
}

/* GatherGradient: DATA (read for its shape), INDICES, dY -> dDATA (FLOAT, DATA's shape). */
static dm_status gather_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  int axis, r;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(gather_shape(ctx, &axis, &r, dims));
  if (!dm_is_float_or_reduced(dy->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "dY is %s; GatherGradient takes FLOAT, FLOAT16 or "
                       "BFLOAT16", dm_dtype_name(dy->dtype));
  int same = dy->ndim == r;
  for (int d = 0; same && d < r; d++)
    same = dy->dims[d] == dims[d];
  if (!same) {
    char a[96], b[96], c[96];
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY is %s but DATA %s gathered at INDICES %s along "
                       "axis %d gives another shape", dm_shape_str(dy, a, sizeof a),
                       dm_shape_str(x, b, sizeof b),
                       dm_shape_str(dm_op_input(ctx, 1), c, sizeof c), axis);
  }
  return dm_op_set_output(ctx, 0, DM_FLOAT, x->ndim, x->dims);
}

static dm_status gather_grad_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *idx = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0); /* no in-place pair: the executor keeps it apart */
  int axis, r, wrap = dm_op_arg_int(ctx, "wrap_indices", 0) != 0;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(gather_shape(ctx, &axis, &r, dims));
  int64_t along = x->dims[axis];
  /* before infer allocates dDATA, so a bad index leaves the blob as it was */
  DM_TRY(gather_check_indices(ctx, idx, axis, along, wrap));
  DM_TRY(gather_grad_infer(ctx));
  int64_t outer = dm_dims_product(x, 0, axis), row = dm_dims_product(x, axis + 1, x->ndim);
  float *pdx = dm_tensor_mutable_data(dx); /* (outer, along, row) */
  memset(pdx, 0, (size_t)dx->numel * sizeof *pdx);
  if (row == 0)
    return DM_OK;
  float *buf = malloc((size_t)row * sizeof *buf); /* one dY row widened to FP32 */
  if (!buf)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for a row of dY (%lld elements)",
                       (long long)row);
  /* in index order: a token repeated k times sums its k rows the same way every run */
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < idx->numel; j++) {
      int64_t q = index_at(idx, j);
      q = q < 0 ? q + along : q;
      dm_load_f32(dy->dtype, dm_tensor_data(dy), (o * idx->numel + j) * row, row, buf);
      float *d = pdx + (o * along + q) * row;
      for (int64_t k = 0; k < row; k++)
        d[k] += buf[k];
    }
  free(buf);
  return DM_OK;
}

static void gather_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *dy = dm_op_input(ctx, 2), *idx = dm_op_input(ctx, 1);
  const dm_tensor *x = dm_op_input(ctx, 0);
  c->flops = (double)dy->numel;
  c->bytes_read = (double)dm_tensor_nbytes(dy) + (double)dm_tensor_nbytes(idx);
  c->bytes_written = 4.0 * (double)x->numel;
}

static dm_status gather_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_input(g, 1), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "GatherGradient", 3, in, 1, out);
}

/* ---- Squeeze, ExpandDims --------------------------------------------------------- */

static const dm_arg_spec dims_args[] = {
    {"dims", DM_ARG_INTS, 1, "the dims to drop (Squeeze: each of size 1) or to insert "
                             "(ExpandDims: positions in Y); negative counts from the end"},
    {NULL, 0, 0, NULL},
};

/* Y's shape: X's without the `dims` (squeeze) or with 1s inserted at them. */
static dm_status dims_shape(dm_op_ctx *ctx, int squeeze, int *ndim, int64_t *dims) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  size_t k = 0;
  const int64_t *a = dm_op_arg_ints(ctx, "dims", &k);
  DM_TRY(check_numeric(ctx, x, "X"));
  int r = squeeze ? x->ndim - (int)k : x->ndim + (int)k;
  if (k > DM_MAX_DIMS || r < 0 || r > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X has %d dims and 'dims' %zu entries: Y would "
                       "have %d dims (0 to %d)", x->ndim, k, r, DM_MAX_DIMS);
  int mark[DM_MAX_DIMS] = {0};
  for (size_t i = 0; i < k; i++) {
    int d;
    DM_TRY(dm_op_canonical_axis(ctx, "dims", a[i], squeeze ? x->ndim : r, 0, &d));
    if (mark[d])
      return dm_op_error(ctx, DM_ERR_INVALID, "'dims' names dim %d twice", d);
    if (squeeze && x->dims[d] != 1)
      return dm_op_error(ctx, DM_ERR_SHAPE, "X dim %d is %lld; only a dim of size 1 can be "
                         "squeezed", d, (long long)x->dims[d]);
    mark[d] = 1;
  }
  int n = 0;
  if (squeeze) {
    for (int d = 0; d < x->ndim; d++)
      if (!mark[d])
        dims[n++] = x->dims[d];
  } else {
    for (int d = 0, src = 0; d < r; d++)
      dims[n++] = mark[d] ? 1 : x->dims[src++];
  }
  *ndim = n;
  return DM_OK;
}

static dm_status dims_infer_as(dm_op_ctx *ctx, int squeeze) {
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dims_shape(ctx, squeeze, &ndim, dims));
  return dm_op_shape_only(ctx)
             ? dm_op_set_output(ctx, 0, dm_op_input(ctx, 0)->dtype, ndim, dims)
             : DM_OK;
}

static dm_status dims_run_as(dm_op_ctx *ctx, int squeeze) {
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dims_shape(ctx, squeeze, &ndim, dims));
  dm_make_view(dm_op_output(ctx, 0), dm_op_input(ctx, 0), ndim, dims);
  return DM_OK;
}

static dm_status squeeze_infer(dm_op_ctx *ctx) { return dims_infer_as(ctx, 1); }
static dm_status squeeze_run(dm_op_ctx *ctx) { return dims_run_as(ctx, 1); }
static dm_status expand_dims_infer(dm_op_ctx *ctx) { return dims_infer_as(ctx, 0); }
static dm_status expand_dims_run(dm_op_ctx *ctx) { return dims_run_as(ctx, 0); }

/* ---- Slice -------------------------------------------------------------------------- */

static const dm_arg_spec slice_args[] = {
    {"starts", DM_ARG_INTS, 0, "first index per leading dim (or the second input)"},
    {"ends", DM_ARG_INTS, 0, "one past the last index per leading dim (or the third input); "
                             "negative: from one past the end, -1 is the end"},
    {NULL, 0, 0, NULL},
};

/* The start and extent of Y in each dim of X. */
static dm_status slice_geometry(dm_op_ctx *ctx, int64_t *lo, int64_t *dims) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int64_t st[DM_MAX_DIMS], en[DM_MAX_DIMS];
  size_t ns = 0, ne = 0;
  DM_TRY(check_numeric(ctx, x, "X"));
  if (dm_op_num_inputs(ctx) == 3) {
    const dm_tensor *s = dm_op_input(ctx, 1), *e = dm_op_input(ctx, 2);
    if (dm_op_has_arg(ctx, "starts") || dm_op_has_arg(ctx, "ends"))
      return dm_op_error(ctx, DM_ERR_INVALID, "give starts and ends as arguments or as "
                                              "inputs, not both");
    DM_TRY(check_index_type(ctx, s, "starts"));
    DM_TRY(check_index_type(ctx, e, "ends"));
    if (s->ndim != 1 || e->ndim != 1 || s->numel > DM_MAX_DIMS || e->numel > DM_MAX_DIMS)
      return dm_op_error(ctx, DM_ERR_SHAPE, "starts and ends must be 1-D with at most %d "
                                            "entries", DM_MAX_DIMS);
    DM_TRY(dm_op_need_values(ctx, 1, "the slice's starts"));
    DM_TRY(dm_op_need_values(ctx, 2, "the slice's ends"));
    ns = (size_t)s->numel;
    ne = (size_t)e->numel;
    for (size_t i = 0; i < ns; i++)
      st[i] = index_at(s, (int64_t)i);
    for (size_t i = 0; i < ne; i++)
      en[i] = index_at(e, (int64_t)i);
  } else if (dm_op_num_inputs(ctx) == 1) {
    const int64_t *a = dm_op_arg_ints(ctx, "starts", &ns), *b = dm_op_arg_ints(ctx, "ends", &ne);
    if (ns > DM_MAX_DIMS || ne > DM_MAX_DIMS)
      return dm_op_error(ctx, DM_ERR_INVALID, "starts/ends have more than %d entries",
                         DM_MAX_DIMS);
    if (ns)
      memcpy(st, a, ns * sizeof *a);
    if (ne)
      memcpy(en, b, ne * sizeof *b);
  } else {
    return dm_op_error(ctx, DM_ERR_INVALID, "takes X alone (starts/ends as arguments) or X, "
                                            "starts, ends");
  }
  if (ns != ne || (int)ns > x->ndim)
    return dm_op_error(ctx, DM_ERR_SHAPE, "%zu starts and %zu ends for X of %d dims: one "
                       "pair per leading dim", ns, ne, x->ndim);
  for (int d = 0; d < x->ndim; d++) {
    int64_t dim = x->dims[d], b = 0, e = dim;
    if (d < (int)ns) {
      b = st[d] < 0 ? dim + 1 + st[d] : st[d];
      e = en[d] < 0 ? dim + 1 + en[d] : en[d];
      b = b > dim ? dim : b;
      e = e > dim ? dim : e;
      if (b < 0 || e < b)
        return dm_op_error(ctx, DM_ERR_SHAPE, "dim %d (of size %lld): start %lld, end %lld "
                           "give [%lld, %lld), not a range inside the dim", d, (long long)dim,
                           (long long)st[d], (long long)en[d], (long long)b, (long long)e);
    }
    lo[d] = b;
    dims[d] = e - b;
  }
  return DM_OK;
}

static dm_status slice_infer(dm_op_ctx *ctx) {
  int64_t lo[DM_MAX_DIMS], dims[DM_MAX_DIMS];
  DM_TRY(slice_geometry(ctx, lo, dims));
  const dm_tensor *x = dm_op_input(ctx, 0);
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, dims);
}

static dm_status slice_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (y == x)
    return dm_op_error(ctx, DM_ERR_INVALID, "Y cannot be X's blob");
  DM_TRY(slice_infer(ctx));
  int64_t lo[DM_MAX_DIMS], dims[DM_MAX_DIMS], xs[DM_MAX_DIMS], idx[DM_MAX_DIMS] = {0};
  DM_TRY(slice_geometry(ctx, lo, dims));
  if (y->numel == 0)
    return DM_OK;
  int nd = x->ndim;
  size_t es = dm_dtype_size(x->dtype);
  /* copy rows of the last dim: walk Y's other dims row-major */
  int64_t s = 1;
  for (int d = nd; d-- > 0;) {
    xs[d] = s;
    s *= x->dims[d];
  }
  size_t row = (size_t)(nd ? dims[nd - 1] : 1) * es;
  int64_t rows = nd ? y->numel / dims[nd - 1] : 1;
  const char *px = dm_tensor_data(x);
  char *py = dm_tensor_mutable_data(y);
  for (int64_t r = 0; r < rows; r++) {
    int64_t off = nd ? lo[nd - 1] : 0;
    for (int d = 0; d < nd - 1; d++)
      off += (lo[d] + idx[d]) * xs[d];
    memcpy(py + (size_t)r * row, px + (size_t)off * es, row);
    for (int d = nd - 1; d-- > 0;)
      if (++idx[d] < dims[d])
        break;
      else
        idx[d] = 0;
  }
  return DM_OK;
}

/* ---- tables ------------------------------------------------------------------------ */

static const dm_inplace_pair inplace00[] = {{0, 0}, {-1, -1}};
static const dm_grad_slot gather_grad_slots[] = {{0, NULL}, {-1, NULL}};

static const dm_op_schema schema_list[] = {
    {.type = "Shape", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .args = shape_args, .precision = DM_PREC_NONE, .nonfloat_outputs = 0x1,
     .doc = "X -> Y (INT64, 1-D): X's dims, or those of `axes`", .infer = shape_infer,
     .no_gradient = 1},
    {.type = "Gather", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .args = gather_args, .precision = DM_PREC_FOLLOW, .nonfloat_inputs = 0x2,
     .doc = "DATA, INDICES (INT32/INT64) -> OUTPUT: DATA's entries along `axis` at INDICES",
     .infer = gather_infer, .cost = copy_cost, .gradient = gather_gradient},
    {.type = "GatherGradient", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1,
     .max_outputs = 1, .args = gather_args, .precision = DM_PREC_FOLLOW,
     .nonfloat_inputs = 0x2, .fp32_outputs = 0x1, /* dDATA is FP32 in any precision */
     .doc = "DATA (read for its shape), INDICES, dY -> dDATA (FLOAT, DATA's shape): zero, "
            "then each dY row added at its index, in FP32 and in index order",
     .infer = gather_grad_infer, .cost = gather_grad_cost, .grad_slots = gather_grad_slots},
    {.type = "Squeeze", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .args = dims_args, .inplace = inplace00, .precision = DM_PREC_FOLLOW,
     .doc = "X -> Y (a view) without the size-1 dims `dims`", .infer = squeeze_infer,
     .cost = view_cost, .gradient = dm_resize_like_gradient},
    {.type = "ExpandDims", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
     .max_outputs = 1, .args = dims_args, .inplace = inplace00, .precision = DM_PREC_FOLLOW,
     .doc = "X -> Y (a view) with a dim of size 1 at each of `dims`",
     .infer = expand_dims_infer, .cost = view_cost, .gradient = dm_resize_like_gradient},
    {.type = "Slice", .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .args = slice_args, .precision = DM_PREC_FOLLOW,
     .nonfloat_inputs = 0x6, .host_inputs = 0x6, /* starts and ends, read on the host */
     .doc = "X, [starts, ends] -> Y: X[starts:ends] in each leading dim", .infer = slice_infer,
     .cost = copy_cost},
};

static const dm_kernel_def kernels[] = {
    {.type = "Shape", .device = DM_CPU, .run = shape_run},
    {.type = "Gather", .device = DM_CPU, .run = gather_run},
    {.type = "GatherGradient", .device = DM_CPU, .run = gather_grad_run},
    {.type = "Squeeze", .device = DM_CPU, .run = squeeze_run},
    {.type = "ExpandDims", .device = DM_CPU, .run = expand_dims_run},
    {.type = "Slice", .device = DM_CPU, .run = slice_run},
    {0},
};

static const dm_op_schema *const schemas[] = {
    &schema_list[0], &schema_list[1], &schema_list[2], &schema_list[3],
    &schema_list[4], &schema_list[5], NULL};
const dm_op_family dm_family_shape_ops = {schemas, kernels};
