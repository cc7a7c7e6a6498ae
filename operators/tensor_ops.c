/* tensor_ops.c: shape and layout ops: Concat, Split, Reshape, Flatten, ResizeLike,
 * Transpose (+ TransposeGradient), NCHW2NHWCPad, StopGradient. Any dtype but STRING.
 *
 * Reshape, Flatten and ResizeLike make Y a view of X's storage (DESIGN: "Reshape shares
 * memory"); the executor detaches a view before an op overwrites it, except in place.
 *
 * Gradients: Concat -> Split(dY, split_info) (Concat must have its split_info output);
 * Split -> Concat of the output gradients (zeros where none arrives); Reshape ->
 * Reshape(dY, old_shape), or ResizeLike(dY, X) without the old_shape output; Flatten ->
 * ResizeLike(dY, X); Transpose -> TransposeGradient, which takes the forward's `axes`
 * and applies their inverse (a gradient maker cannot set a list argument; without
 * `axes` the reversal is its own inverse and a plain Transpose is emitted).
 *
 * NCHW2NHWCPad is the layout pass's entry for images whose channel count tensor cores do
 * not take whole (conv1's 3): one pass over the data that transposes and appends zero
 * channels, for the images and for the filter reading them alike. It has no gradient:
 * the pass emits it after the gradient pass, for fed data and weights only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "builtin.h"
#include "tensor_ops.h"

static dm_status check_not_string(dm_op_ctx *ctx, const dm_tensor *x, const char *what) {
  if (x->dtype == DM_STRING || x->dtype == DM_UNDEFINED)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; %s takes numeric tensors", what,
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  return DM_OK;
}

dm_status dm_concat_axis(dm_op_ctx *ctx, int ndim, int *out) {
  int axis;
  if (dm_op_has_arg(ctx, "axis"))
    return dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), ndim, 0, out);
  DM_TRY(dm_op_order_axis(ctx, &axis));
  return dm_op_canonical_axis(ctx, "axis (from order)", axis, ndim, 0, out);
}

/* Views need no bytes moved. */
static void view_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  (void)ctx;
  *c = (dm_op_cost){0};
}

static void copy_cost(dm_op_ctx *ctx, dm_op_cost *c) { dm_cost_io(ctx, c); }

static const dm_arg_spec concat_args[] = {
    {"axis", DM_ARG_INT, 0, "the axis to join along (default from order)"},
    {"order", DM_ARG_STRING, 0, "NCHW (axis 1, the default) or NHWC (axis 3)"},
    {"add_axis", DM_ARG_INT, 0, "1: stack along a new axis at `axis` (default 0)"},
    {"split", DM_ARG_INTS, 0, "Split: the sizes along axis (or the second input)"},
    {NULL, 0, 0, NULL},
};

/* ---- Concat ------------------------------------------------------------------------ */

static dm_status concat_infer(dm_op_ctx *ctx) {
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  int n = dm_op_num_inputs(ctx), add = dm_op_arg_int(ctx, "add_axis", 0) != 0, axis;
  DM_TRY(check_not_string(ctx, x0, "X0"));
  if (x0->ndim + add > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_SHAPE, "the result would have more than %d dims", DM_MAX_DIMS);
  DM_TRY(dm_concat_axis(ctx, x0->ndim + add, &axis));
  int64_t dims[DM_MAX_DIMS], total = 0;
  char a[96], b[96];
  for (int i = 0; i < n; i++) {
    const dm_tensor *x = dm_op_input(ctx, i);
    if (x->dtype != x0->dtype)
      return dm_op_error(ctx, DM_ERR_TYPE, "input %d '%s' is %s, but X0 is %s", i,
                         dm_op_input_name(ctx, i), dm_dtype_name(x->dtype),
                         dm_dtype_name(x0->dtype));
    int same = x->ndim == x0->ndim;
    for (int d = 0; same && d < x->ndim; d++)
      same = x->dims[d] == x0->dims[d] || (!add && d == axis);
    if (!same)
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "input %d '%s' is %s and X0 is %s: they may differ only in dim %d%s", i,
                         dm_op_input_name(ctx, i), dm_shape_str(x, a, sizeof a),
                         dm_shape_str(x0, b, sizeof b), axis, add ? " (none with add_axis)" : "");
    if (__builtin_add_overflow(total, add ? 1 : x->dims[axis], &total))
      return dm_op_error(ctx, DM_ERR_LIMIT, "the inputs' dims %d add up to more than 2^63-1 "
                         "(at input %d '%s', %s)", axis, i, dm_op_input_name(ctx, i),
                         dm_shape_str(x, a, sizeof a));
  }
  if (!add)
    for (int d = 0; d < x0->ndim; d++)
      dims[d] = d == axis ? total : x0->dims[d];
  else
    for (int d = 0, k = 0; d < x0->ndim + 1; d++)
      dims[d] = d == axis ? total : x0->dims[k++];
  DM_TRY(dm_op_set_output(ctx, 0, x0->dtype, x0->ndim + add, dims));
  if (dm_op_num_outputs(ctx) > 1) {
    int64_t nn = n;
    DM_TRY(dm_op_set_output(ctx, 1, DM_INT32, 1, &nn));
  }
  return DM_OK;
}

static dm_status concat_run(dm_op_ctx *ctx) {
  DM_TRY(concat_infer(ctx));
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  int n = dm_op_num_inputs(ctx), add = dm_op_arg_int(ctx, "add_axis", 0) != 0, axis;
  DM_TRY(dm_concat_axis(ctx, x0->ndim + add, &axis));
  dm_tensor *y = dm_op_output(ctx, 0);
  size_t es = dm_dtype_size(x0->dtype);
  int64_t outer = dm_dims_product(x0, 0, axis), row = y->numel / (outer ? outer : 1), off = 0;
  char *py = dm_tensor_mutable_data(y);
  for (int i = 0; i < n; i++) {
    const dm_tensor *x = dm_op_input(ctx, i);
    int64_t inner = outer ? x->numel / outer : 0; /* this input's part of one Y row */
    const char *px = dm_tensor_data(x);
    for (int64_t o = 0; o < outer && inner; o++)
      memcpy(py + (size_t)(o * row + off) * es, px + (size_t)(o * inner) * es, (size_t)inner * es);
    if (dm_op_num_outputs(ctx) > 1)
      ((int32_t *)dm_tensor_mutable_data(dm_op_output(ctx, 1)))[i] =
          (int32_t)(add ? 1 : x->dims[axis]);
    off += inner;
  }
  return DM_OK;
}

static dm_status concat_gradient(dm_grad_ctx *g) { /* Split(dY, split_info) -> dX_i */
  if (dm_grad_num_outputs(g) < 2)
    return dm_error(DM_ERR_INVALID,
                    "Concat's gradient needs its second output (split_info) to split dY");
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_output(g, 1)};
  int n = dm_grad_num_inputs(g);
  const char **out = malloc((size_t)n * sizeof *out);
  if (!out)
    return DM_NOMEM("Concat gradient names");
  for (int i = 0; i < n; i++)
    out[i] = dm_grad_input_grad(g, i);
  dm_status s = dm_grad_emit(g, "Split", 2, in, n, out);
  free(out);
  return s;
}

/* ---- Split ------------------------------------------------------------------------- */

/* The sizes along the axis, from the input, `split`, or equal parts. */
static dm_status split_sizes(dm_op_ctx *ctx, const dm_tensor *x, int axis, int64_t *sizes) {
  int n = dm_op_num_outputs(ctx), add = dm_op_arg_int(ctx, "add_axis", 0) != 0;
  size_t na;
  const int64_t *arg = dm_op_arg_ints(ctx, "split", &na);
  int64_t dim = x->dims[axis], sum = 0;
  if (dm_op_num_inputs(ctx) > 1) {
    const dm_tensor *s = dm_op_input(ctx, 1);
    if (arg)
      return dm_op_error(ctx, DM_ERR_INVALID, "give the sizes as the 'split' argument or as "
                                              "the second input, not both");
    if (s->ndim != 1 || s->numel != n || (s->dtype != DM_INT32 && s->dtype != DM_INT64))
      return dm_op_error(ctx, DM_ERR_SHAPE, "the split input must be 1-D INT32 or INT64 with "
                                            "%d elements (one per output)", n);
    DM_TRY(dm_op_need_values(ctx, 1, "the split sizes"));
    for (int i = 0; i < n; i++)
      sizes[i] = s->dtype == DM_INT32 ? ((const int32_t *)dm_tensor_data(s))[i]
                                      : ((const int64_t *)dm_tensor_data(s))[i];
  } else if (arg) {
    if (na != (size_t)n)
      return dm_op_error(ctx, DM_ERR_INVALID, "'split' has %zu sizes for %d outputs", na, n);
    for (int i = 0; i < n; i++)
      sizes[i] = arg[i];
  } else {
    if (dim % n)
      return dm_op_error(ctx, DM_ERR_SHAPE, "dim %d (%lld) does not split into %d equal parts",
                         axis, (long long)dim, n);
    for (int i = 0; i < n; i++)
      sizes[i] = dim / n;
  }
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0 || (add && sizes[i] != 1))
      return dm_op_error(ctx, DM_ERR_SHAPE, "split size %d is %lld%s", i, (long long)sizes[i],
                         add ? "; with add_axis every size must be 1" : " (negative)");
    if (__builtin_add_overflow(sum, sizes[i], &sum))
      return dm_op_error(ctx, DM_ERR_LIMIT, "the split sizes add up to more than 2^63-1 (at "
                         "size %d, %lld)", i, (long long)sizes[i]);
  }
  if (sum != dim)
    return dm_op_error(ctx, DM_ERR_SHAPE, "the split sizes add up to %lld, but dim %d is %lld",
                       (long long)sum, axis, (long long)dim);
  return DM_OK;
}

dm_status dm_split_geometry(dm_op_ctx *ctx, int *axis, int64_t **sizes) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(check_not_string(ctx, x, "X"));
  /* With add_axis the axis is that of the stacked input, as Concat's with add_axis. */
  DM_TRY(dm_concat_axis(ctx, x->ndim, axis));
  *sizes = malloc((size_t)dm_op_num_outputs(ctx) * sizeof **sizes);
  if (!*sizes)
    return DM_NOMEM("split sizes");
  dm_status s = split_sizes(ctx, x, *axis, *sizes);
  if (s != DM_OK) {
    free(*sizes);
    *sizes = NULL;
  }
  return s;
}

static dm_status split_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int axis, add = dm_op_arg_int(ctx, "add_axis", 0) != 0;
  int64_t *sizes;
  DM_TRY(dm_split_geometry(ctx, &axis, &sizes));
  dm_status s = DM_OK;
  for (int i = 0; i < dm_op_num_outputs(ctx) && s == DM_OK; i++) {
    if (dm_op_output(ctx, i) == x)
      s = dm_op_error(ctx, DM_ERR_INVALID, "output %d is X; Split cannot run in place", i);
    int64_t dims[DM_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < x->ndim; d++)
      if (d != axis || !add)
        dims[k++] = d == axis ? sizes[i] : x->dims[d];
    if (s == DM_OK)
      s = dm_op_set_output(ctx, i, x->dtype, k, dims);
  }
  free(sizes);
  return s;
}

static dm_status split_run(dm_op_ctx *ctx) {
  DM_TRY(split_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  int axis;
  int64_t *sizes;
  DM_TRY(dm_split_geometry(ctx, &axis, &sizes));
  size_t es = dm_dtype_size(x->dtype);
  int64_t outer = dm_dims_product(x, 0, axis), inner = dm_dims_product(x, axis + 1, x->ndim);
  int64_t row = x->dims[axis] * inner, off = 0;
  const char *px = dm_tensor_data(x);
  for (int i = 0; i < dm_op_num_outputs(ctx); i++) {
    char *py = dm_tensor_mutable_data(dm_op_output(ctx, i));
    int64_t part = sizes[i] * inner;
    for (int64_t o = 0; o < outer && part; o++)
      memcpy(py + (size_t)(o * part) * es, px + (size_t)(o * row + off) * es, (size_t)part * es);
    off += part;
  }
  free(sizes);
  return DM_OK;
}

/* Concat(dY_0, ..., dY_n) -> dX; an output without a gradient contributes zeros. */
static dm_status split_gradient(dm_grad_ctx *g) {
  int n = dm_grad_num_outputs(g);
  const char **in = calloc((size_t)n, sizeof *in);
  char **zeros = calloc((size_t)n, sizeof *zeros);
  dm_status s = in && zeros ? DM_OK : DM_NOMEM("Split gradient names");
  for (int i = 0; i < n && s == DM_OK; i++) {
    in[i] = dm_grad_output_grad(g, i);
    if (in[i])
      continue;
    const char *y = dm_grad_output(g, i);
    size_t len = strlen(y) + 16;
    if (!(zeros[i] = malloc(len))) {
      s = DM_NOMEM("Split gradient names");
      break;
    }
    snprintf(zeros[i], len, "%s_zero_grad", y);
    const char *fin[] = {y}, *fout[] = {zeros[i]};
    s = dm_grad_emit(g, "ConstantFill", 1, fin, 1, fout);
    if (s == DM_OK) {
      dm_grad_clear_args(g);
      s = dm_grad_set_arg_float(g, "value", 0.0f);
    }
    in[i] = zeros[i];
  }
  if (s == DM_OK) {
    const char *out[] = {dm_grad_input_grad(g, 0)};
    s = dm_grad_emit(g, "Concat", n, in, 1, out);
  }
  for (int i = 0; zeros && i < n; i++)
    free(zeros[i]);
  free(zeros);
  free(in);
  return s;
}

/* ---- Reshape ---------------------------------------------------------------------- */

static const dm_arg_spec reshape_args[] = {
    {"shape", DM_ARG_INTS, 0, "the new shape (or the second input): 0 keeps X's dim, -1 is "
                              "inferred"},
    {NULL, 0, 0, NULL},
};

dm_status dm_reshape_dims(dm_op_ctx *ctx, int *ndim, int64_t *dims) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  size_t n = 0;
  const int64_t *arg = dm_op_arg_ints(ctx, "shape", &n);
  int has_arg = dm_op_has_arg(ctx, "shape");
  int64_t req[DM_MAX_DIMS];
  if (dm_op_num_inputs(ctx) > 1) {
    const dm_tensor *s = dm_op_input(ctx, 1);
    if (has_arg)
      return dm_op_error(ctx, DM_ERR_INVALID, "give the new shape as the 'shape' argument or "
                                              "as the second input, not both");
    if (s->ndim != 1 || (s->dtype != DM_INT32 && s->dtype != DM_INT64))
      return dm_op_error(ctx, DM_ERR_SHAPE, "the new_shape input must be 1-D INT32 or INT64, "
                                            "but it is %d-d %s", s->ndim, dm_dtype_name(s->dtype));
    DM_TRY(dm_op_need_values(ctx, 1, "the new shape"));
    n = (size_t)s->numel;
    if (n > DM_MAX_DIMS)
      return dm_op_error(ctx, DM_ERR_SHAPE, "the new shape has %zu dims (at most %d)", n, DM_MAX_DIMS);
    for (size_t i = 0; i < n; i++)
      req[i] = s->dtype == DM_INT32 ? ((const int32_t *)dm_tensor_data(s))[i]
                                    : ((const int64_t *)dm_tensor_data(s))[i];
  } else {
    if (!has_arg)
      return dm_op_error(ctx, DM_ERR_INVALID, "the new shape is missing: give the 'shape' "
                                              "argument or a second input");
    if (n > DM_MAX_DIMS)
      return dm_op_error(ctx, DM_ERR_SHAPE, "'shape' has %zu dims (at most %d)", n, DM_MAX_DIMS);
    if (n) /* an empty 'shape' (a scalar) has no array: memcpy from NULL is undefined */
      memcpy(req, arg, n * sizeof *req);
  }
  int infer_at = -1, any_zero = 0;
  int64_t known = 1; /* the product of the nonzero known dims */
  char xs[96];
  dm_shape_str(x, xs, sizeof xs);
  for (size_t i = 0; i < n; i++) {
    int64_t d = req[i];
    if (d == 0) {
      if ((int)i >= x->ndim)
        return dm_op_error(ctx, DM_ERR_SHAPE, "new shape dim %zu is 0 (keep X's), but X %s "
                                              "has only %d dims", i, xs, x->ndim);
      d = x->dims[i];
    } else if (d == -1) {
      if (infer_at >= 0)
        return dm_op_error(ctx, DM_ERR_SHAPE, "new shape dims %d and %zu are both -1; at most "
                                              "one can be inferred", infer_at, i);
      infer_at = (int)i;
      dims[i] = -1;
      continue;
    } else if (d < 0) {
      return dm_op_error(ctx, DM_ERR_SHAPE, "new shape dim %zu is %lld; dims are >= 0, or -1 "
                                            "(inferred) or 0 (kept)", i, (long long)d);
    }
    dims[i] = d;
    /* A zero dim does not excuse the others: Y's nonzero dims must multiply within int64
     * like any tensor's (dm_shape_numel), or a later product of them overflows. */
    if (d == 0)
      any_zero = 1;
    else if (__builtin_mul_overflow(known, d, &known))
      return dm_op_error(ctx, DM_ERR_LIMIT, "the new shape's size overflows 64 bits (at dim "
                                            "%zu, %lld)", i, (long long)d);
  }
  if (any_zero)
    known = 0;
  if (infer_at >= 0) {
    if (known == 0 || x->numel % known)
      return dm_op_error(ctx, DM_ERR_SHAPE, "cannot reshape X %s (%lld elements) with a -1 "
                                            "dim: the other dims multiply to %lld",
                         xs, (long long)x->numel, (long long)known);
    dims[infer_at] = x->numel / known;
  } else if (known != x->numel) {
    return dm_op_error(ctx, DM_ERR_SHAPE, "cannot reshape X %s (%lld elements) to a shape of "
                                          "%lld elements", xs, (long long)x->numel, (long long)known);
  }
  *ndim = (int)n;
  return DM_OK;
}

void dm_make_view(dm_tensor *y, const dm_tensor *x, int ndim, const int64_t *dims) {
  /* dims may be y's own (ResizeLike with `like` being Y's blob): copy before writing y */
  int64_t d[DM_MAX_DIMS] = {0};
  memcpy(d, dims, (size_t)ndim * sizeof *dims);
  dm_tensor_share(y, x);
  y->ndim = ndim;
  memcpy(y->dims, d, sizeof y->dims);
}

static dm_status reshape_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int ndim;
  int64_t dims[DM_MAX_DIMS], xn = x->ndim;
  DM_TRY(check_not_string(ctx, x, "X"));
  DM_TRY(dm_reshape_dims(ctx, &ndim, dims));
  if (dm_op_num_outputs(ctx) > 1 && dm_op_output(ctx, 1) == x)
    return dm_op_error(ctx, DM_ERR_INVALID, "old_shape cannot be X's blob");
  if (dm_op_num_outputs(ctx) > 1)
    DM_TRY(dm_op_set_output(ctx, 1, DM_INT64, 1, &xn));
  if (dm_op_shape_only(ctx))
    return dm_op_set_output(ctx, 0, x->dtype, ndim, dims);
  return DM_OK;
}

static dm_status reshape_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(reshape_infer(ctx));
  DM_TRY(dm_reshape_dims(ctx, &ndim, dims));
  if (dm_op_num_outputs(ctx) > 1) /* before an in-place reshape changes X's dims */
    memcpy(dm_tensor_mutable_data(dm_op_output(ctx, 1)), x->dims, (size_t)x->ndim * sizeof(int64_t));
  dm_make_view(dm_op_output(ctx, 0), x, ndim, dims);
  return DM_OK;
}

dm_status dm_resize_like_gradient(dm_grad_ctx *g) { /* ResizeLike(dY, X) -> dX */
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_input(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  DM_TRY(dm_grad_emit(g, "ResizeLike", 2, in, 1, out));
  dm_grad_clear_args(g);
  return DM_OK;
}

static dm_status reshape_gradient(dm_grad_ctx *g) { /* Reshape(dY, old_shape) -> dX */
  if (dm_grad_num_outputs(g) < 2)
    return dm_resize_like_gradient(g);
  const char *dx = dm_grad_input_grad(g, 0);
  size_t len = strlen(dx) + 8;
  char *dims_name = malloc(len);
  if (!dims_name)
    return DM_NOMEM("Reshape gradient names");
  snprintf(dims_name, len, "_%s_dims", dx);
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_output(g, 1)};
  const char *out[] = {dx, dims_name};
  dm_status s = dm_grad_emit(g, "Reshape", 2, in, 2, out);
  free(dims_name);
  if (s == DM_OK)
    dm_grad_clear_args(g);
  return s;
}

/* ---- Flatten, ResizeLike ----------------------------------------------------------- */

static const dm_arg_spec flatten_args[] = {
    {"axis", DM_ARG_INT, 0, "Y is (prod dims[0..axis), prod dims[axis..]); default 1"},
    {NULL, 0, 0, NULL},
};

dm_status dm_flatten_dims(dm_op_ctx *ctx, int64_t dims[2]) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int axis;
  DM_TRY(check_not_string(ctx, x, "X"));
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 1, &axis));
  dims[0] = dm_dims_product(x, 0, axis);
  dims[1] = dm_dims_product(x, axis, x->ndim);
  return DM_OK;
}

static dm_status flatten_infer(dm_op_ctx *ctx) {
  int64_t dims[2];
  DM_TRY(dm_flatten_dims(ctx, dims));
  return dm_op_shape_only(ctx) ? dm_op_set_output(ctx, 0, dm_op_input(ctx, 0)->dtype, 2, dims)
                               : DM_OK;
}

static dm_status flatten_run(dm_op_ctx *ctx) {
  int64_t dims[2];
  DM_TRY(flatten_infer(ctx));
  DM_TRY(dm_flatten_dims(ctx, dims));
  dm_make_view(dm_op_output(ctx, 0), dm_op_input(ctx, 0), 2, dims);
  return DM_OK;
}

static dm_status resize_like_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *like = dm_op_input(ctx, 1);
  char a[96], b[96];
  DM_TRY(check_not_string(ctx, x, "X"));
  if (x->numel != like->numel)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X %s has %lld elements, but like %s has %lld",
                       dm_shape_str(x, a, sizeof a), (long long)x->numel,
                       dm_shape_str(like, b, sizeof b), (long long)like->numel);
  return dm_op_shape_only(ctx) ? dm_op_set_output(ctx, 0, x->dtype, like->ndim, like->dims)
                               : DM_OK;
}

static dm_status resize_like_run(dm_op_ctx *ctx) {
  DM_TRY(resize_like_infer(ctx));
  const dm_tensor *like = dm_op_input(ctx, 1);
  dm_make_view(dm_op_output(ctx, 0), dm_op_input(ctx, 0), like->ndim, like->dims);
  return DM_OK;
}

/* ---- Transpose ------------------------------------------------------------------- */

static const dm_arg_spec transpose_args[] = {
    {"axes", DM_ARG_INTS, 0, "Y's dim i is X's dim axes[i]; default: reversed"},
    {NULL, 0, 0, NULL},
};

dm_status dm_transpose_perm(dm_op_ctx *ctx, int inverse, int *perm) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  size_t n;
  const int64_t *axes = dm_op_arg_ints(ctx, "axes", &n);
  DM_TRY(check_not_string(ctx, x, "X"));
  if (!axes || n == 0) {
    for (int i = 0; i < x->ndim; i++)
      perm[i] = x->ndim - 1 - i;
    return DM_OK;
  }
  if (n != (size_t)x->ndim)
    return dm_op_error(ctx, DM_ERR_INVALID, "'axes' has %zu entries for a %d-d X", n, x->ndim);
  int seen[DM_MAX_DIMS] = {0};
  for (size_t i = 0; i < n; i++) {
    if (axes[i] < 0 || axes[i] >= x->ndim || seen[axes[i]]++)
      return dm_op_error(ctx, DM_ERR_INVALID, "'axes' is not a permutation of 0..%d (entry %zu "
                                              "is %lld)", x->ndim - 1, i, (long long)axes[i]);
    if (inverse)
      perm[axes[i]] = (int)i;
    else
      perm[i] = (int)axes[i];
  }
  return DM_OK;
}

void dm_transpose_steps(const dm_tensor *x, const int *perm, int64_t *st) {
  int64_t xstride[DM_MAX_DIMS];
  for (int64_t i = x->ndim - 1, s = 1; i >= 0; i--) {
    xstride[i] = s;
    s *= x->dims[i];
  }
  for (int i = 0; i < x->ndim; i++)
    st[i] = xstride[perm[i]]; /* X step for Y dim i */
}

static dm_status transpose_infer_as(dm_op_ctx *ctx, int inverse) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int perm[DM_MAX_DIMS];
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dm_transpose_perm(ctx, inverse, perm));
  if (dm_op_output(ctx, 0) == x)
    return dm_op_error(ctx, DM_ERR_INVALID, "Y is X; Transpose cannot run in place");
  for (int i = 0; i < x->ndim; i++)
    dims[i] = x->dims[perm[i]];
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, dims);
}

static dm_status transpose_infer(dm_op_ctx *ctx) { return transpose_infer_as(ctx, 0); }
static dm_status transpose_grad_infer(dm_op_ctx *ctx) { return transpose_infer_as(ctx, 1); }

/* Walks Y in order with a multi-index, stepping X by its permuted strides. */
static dm_status transpose_run_as(dm_op_ctx *ctx, int inverse) {
  DM_TRY(transpose_infer_as(ctx, inverse));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  int perm[DM_MAX_DIMS], nd = x->ndim;
  DM_TRY(dm_transpose_perm(ctx, inverse, perm));
  int64_t st[DM_MAX_DIMS], idx[DM_MAX_DIMS] = {0};
  dm_transpose_steps(x, perm, st);
  size_t es = dm_dtype_size(x->dtype);
  const char *px = dm_tensor_data(x);
  char *py = dm_tensor_mutable_data(y);
  /* Y's trailing dims that are contiguous in X too (a channel shuffle's H and W) make one
   * run, copied at once; the odometer walks the dims before them. */
  int r = nd;
  int64_t run = 1;
  while (r > 0 && (st[r - 1] == run || y->dims[r - 1] == 1))
    run *= y->dims[--r];
  int64_t src = 0;
  for (int64_t k = 0; k < y->numel; k += run) {
    if (run > 1) {
      memcpy(py + (size_t)k * es, px + (size_t)src * es, (size_t)run * es);
    } else {
      switch (es) {
      case 1: py[k] = px[src]; break;
      case 2: ((uint16_t *)(void *)py)[k] = ((const uint16_t *)(const void *)px)[src]; break;
      case 4: ((uint32_t *)(void *)py)[k] = ((const uint32_t *)(const void *)px)[src]; break;
      default: memcpy(py + (size_t)k * es, px + (size_t)src * es, es); break;
      }
    }
    for (int d = r - 1; d >= 0; d--) { /* odometer over Y's dims before the run */
      src += st[d];
      if (++idx[d] < y->dims[d])
        break;
      src -= st[d] * y->dims[d];
      idx[d] = 0;
    }
  }
  return DM_OK;
}

static dm_status transpose_run(dm_op_ctx *ctx) { return transpose_run_as(ctx, 0); }
static dm_status transpose_grad_run(dm_op_ctx *ctx) { return transpose_run_as(ctx, 1); }

static dm_status transpose_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, dm_grad_has_arg(g, "axes") ? "TransposeGradient" : "Transpose", 1, in,
                      1, out);
}

/* ---- NCHW2NHWCPad ---------------------------------------------------------------- */

static const dm_arg_spec nhwc_pad_args[] = {
    {"multiple", DM_ARG_INT, 0, "Y's channels: X's rounded up to a multiple of this (default "
                                "8)"},
    {NULL, 0, 0, NULL},
};

static dm_status nhwc_pad_dims(dm_op_ctx *ctx, int64_t *dims) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(check_not_string(ctx, x, "X"));
  int64_t m = dm_op_arg_int(ctx, "multiple", 8);
  if (m < 1 || m > 1024)
    return dm_op_error(ctx, DM_ERR_INVALID, "'multiple' is %lld; it must be in [1, 1024]",
                       (long long)m);
  if (x->ndim != 4)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %d-d; NCHW2NHWCPad takes 4-D NCHW data",
                       x->ndim);
  if (dm_op_output(ctx, 0) == x)
    return dm_op_error(ctx, DM_ERR_INVALID, "Y is X; NCHW2NHWCPad cannot run in place");
  dims[0] = x->dims[0];
  dims[1] = x->dims[2];
  dims[2] = x->dims[3];
  dims[3] = (x->dims[1] + m - 1) / m * m;
  return DM_OK;
}

static dm_status nhwc_pad_infer(dm_op_ctx *ctx) {
  int64_t dims[4];
  DM_TRY(nhwc_pad_dims(ctx, dims));
  return dm_op_set_output(ctx, 0, dm_op_input(ctx, 0)->dtype, 4, dims);
}

/* Element by element in Y's order: a real channel is X's (n, c, h, w), a padded one 0. */
static dm_status nhwc_pad_run(dm_op_ctx *ctx) {
  DM_TRY(nhwc_pad_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const int64_t C = x->dims[1], HW = x->dims[2] * x->dims[3], Cp = y->dims[3];
  const size_t es = dm_dtype_size(x->dtype);
  const char *px = dm_tensor_data(x);
  char *py = dm_tensor_mutable_data(y);
  for (int64_t n = 0; n < x->dims[0]; n++)
    for (int64_t s = 0; s < HW; s++) {
      char *row = py + (size_t)((n * HW + s) * Cp) * es;
      for (int64_t c = 0; c < C; c++)
        memcpy(row + (size_t)c * es, px + (size_t)((n * C + c) * HW + s) * es, es);
      memset(row + (size_t)C * es, 0, (size_t)(Cp - C) * es); /* 0 in every float dtype */
    }
  return DM_OK;
}

/* ---- StopGradient ---------------------------------------------------------------- */

static dm_status stop_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static dm_status stop_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (y == x)
    return DM_OK; /* in place: nothing to do */
  DM_TRY(stop_infer(ctx));
  return dm_tensor_copy(y, x);
}

/* ---- tables ---------------------------------------------------------------------- */

static const dm_inplace_pair inplace00[] = {{0, 0}, {-1, -1}};

static const dm_op_schema schema_list[] = {
    {.type = "Concat", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 2,
     .args = concat_args, .precision = DM_PREC_FOLLOW, .nonfloat_outputs = 0x2,
     .doc = "X0, X1, ... -> Y joined along `axis`, [split_info (INT32 sizes)]",
     .infer = concat_infer, .cost = copy_cost, .gradient = concat_gradient,
     .layout = DM_LAYOUT_JOIN, .layout_inputs = UINT64_MAX, .layout_outputs = 0x1},
    {.type = "Split", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = -1,
     .args = concat_args, .precision = DM_PREC_FOLLOW,
     .nonfloat_inputs = 0x2, .host_inputs = 0x2, /* the split sizes, read on the host */
     .doc = "X, [split] -> Y0, Y1, ... cut along `axis` by `split` (or equal parts)",
     .infer = split_infer, .cost = copy_cost, .gradient = split_gradient,
     .layout = DM_LAYOUT_JOIN, .layout_inputs = 0x1, .layout_outputs = UINT64_MAX},
    {.type = "Reshape", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 2,
     .args = reshape_args, .inplace = inplace00, .precision = DM_PREC_FOLLOW,
     /* new_shape is read on the host; it and old_shape are integers */
     .nonfloat_inputs = 0x2, .host_inputs = 0x2, .nonfloat_outputs = 0x2,
     .doc = "X, [new_shape] -> Y (a view), [old_shape (INT64)]", .infer = reshape_infer,
     .cost = view_cost, .gradient = reshape_gradient},
    {.type = "Flatten", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .args = flatten_args, .inplace = inplace00, .precision = DM_PREC_FOLLOW,
     .doc = "X -> Y 2-D (a view), split at `axis`", .infer = flatten_infer, .cost = view_cost,
     .gradient = dm_resize_like_gradient},
    {.type = "ResizeLike", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .inplace = inplace00, .precision = DM_PREC_FOLLOW,
     .doc = "X, like -> Y = X's values (a view) in like's shape", .infer = resize_like_infer,
     .cost = view_cost, .gradient = dm_resize_like_gradient},
    {.type = "Transpose", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .args = transpose_args, .precision = DM_PREC_FOLLOW,
     .doc = "X -> Y with dims permuted by `axes` (default reversed)", .infer = transpose_infer,
     .cost = copy_cost, .gradient = transpose_gradient},
    {.type = "TransposeGradient", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
     .max_outputs = 1, .args = transpose_args, .precision = DM_PREC_FOLLOW,
     .doc = "dY -> dX: Transpose by the inverse of the forward's `axes`",
     .infer = transpose_grad_infer, .cost = copy_cost, .gradient = transpose_gradient},
    {.type = "NCHW2NHWCPad", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
     .max_outputs = 1, .args = nhwc_pad_args, .precision = DM_PREC_FOLLOW,
     .doc = "X (N, C, H, W) -> Y (N, H, W, C') = X transposed, C' = C rounded up to "
            "`multiple`, the added channels 0 (the layout pass's entry for tensor cores)",
     .infer = nhwc_pad_infer, .cost = copy_cost},
    {.type = "StopGradient", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
     .max_outputs = 1, .inplace = inplace00, .precision = DM_PREC_FOLLOW,
     .doc = "X -> Y = X; no gradient flows back through it", .infer = stop_infer,
     .cost = copy_cost, .no_gradient = 1, .layout = DM_LAYOUT_ELEMENTWISE,
     .layout_inputs = 0x1, .layout_outputs = 0x1, .value_copy = 1},
};

/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Concat", .device = DM_CPU, .run = concat_run},
    {.type = "Split", .device = DM_CPU, .run = split_run},
    {.type = "Reshape", .device = DM_CPU, .run = reshape_run},
    {.type = "Flatten", .device = DM_CPU, .run = flatten_run},
    {.type = "ResizeLike", .device = DM_CPU, .run = resize_like_run},
    {.type = "Transpose", .device = DM_CPU, .run = transpose_run},
    {.type = "TransposeGradient", .device = DM_CPU, .run = transpose_grad_run},
    {.type = "NCHW2NHWCPad", .device = DM_CPU, .run = nhwc_pad_run},
    {.type = "StopGradient", .device = DM_CPU, .run = stop_run},
    {0},
};

static const dm_op_schema *const schemas[] = {
    &schema_list[0], &schema_list[1], &schema_list[2], &schema_list[3],
    &schema_list[4], &schema_list[5], &schema_list[6], &schema_list[7], &schema_list[8], NULL};
const dm_op_family dm_family_tensor_ops = {schemas, kernels};
