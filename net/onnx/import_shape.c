/* import_shape.c: ONNX translators for the shape-manipulating ops: Shape, Gather,
 * Squeeze, Unsqueeze, Slice, ConstantOfShape.
 *
 * What is computable at import never reaches these: net/onnx/fold.c turns a Shape of a
 * static shape, and any of these ops on constants, into constants first. What is left
 * works on run-time values and becomes Caffe2's op (Shape, Gather with wrap_indices,
 * Squeeze and ExpandDims with `dims`, Slice with `starts`/`ends`, ConstantFill with
 * input_as_shape); the index lists those ops take as arguments must be constants here.
 */
#include <stdlib.h>
#include <string.h>

#include "net/onnx/translate.h"

/* The ints of input `i` (a constant) or, before opset `since`, of attribute `attr`;
 * *n = -1 when neither is given. Refuses a computed input. The caller frees *out. */
static dm_status ints_of(imp *c, const Onnx__NodeProto *n, size_t i, int64_t since,
                         const char *attr, const char *what, int64_t **out, int *count) {
  *out = NULL;
  *count = -1;
  if (c->opset >= since) {
    if (!ox_in_name(n, i))
      return DM_OK;
    const Onnx__TensorProto *t = ox_const_find(c, ox_in_name(n, i));
    if (!t)
      return ox_refuse(c, "the %s are computed in the graph (only constant %s are supported)",
                       what, what);
    size_t k = 0;
    DM_TRY(ox_const_ints(c, t, out, &k));
    if (k > DM_MAX_DIMS) {
      free(*out);
      *out = NULL;
      return ox_refuse(c, "%zu %s (at most %d)", k, what, DM_MAX_DIMS);
    }
    *count = (int)k;
    return DM_OK;
  }
  size_t k = 0;
  const int64_t *v = ox_attr_ints(n, attr, &k);
  if (!ox_attr(n, attr))
    return DM_OK;
  if (k > DM_MAX_DIMS)
    return ox_refuse(c, "%zu %s (at most %d)", k, what, DM_MAX_DIMS);
  *out = malloc(k * sizeof **out + 1);
  if (!*out)
    return DM_NOMEM("a list of axes");
  if (k)
    memcpy(*out, v, k * sizeof *v);
  *count = (int)k;
  return DM_OK;
}

/* Shape of a tensor whose shape is known only at run time (net/onnx/fold.c folds the rest). */
static dm_status tr_shape(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "Shape", 1));
  c->out_rank = 1;
  const Onnx__AttributeProto *s = ox_attr(n, "start"), *e = ox_attr(n, "end");
  if (!s && !e)
    return DM_OK;
  int rank = ox_rank_of(c, ox_in_name(n, 0));
  if (rank < 0)
    return ox_refuse(c, "start/end on a tensor of unknown rank");
  int64_t lo = s ? s->i : 0, hi = e ? e->i : rank, axes[DM_MAX_DIMS];
  lo = lo < 0 ? lo + rank : lo;
  hi = hi < 0 ? hi + rank : hi;
  lo = lo < 0 ? 0 : lo > rank ? rank : lo;
  hi = hi < 0 ? 0 : hi > rank ? rank : hi;
  size_t k = 0;
  for (int64_t d = lo; d < hi; d++)
    axes[k++] = d;
  dm_opb_arg_ints(b, "axes", axes, k);
  return DM_OK;
}

/* Gather's constant indices against the static size of the data along `axis`: each in
 * [-size, size), as ONNX Runtime requires before it runs. */
static dm_status check_const_indices(imp *c, const Onnx__NodeProto *n, int64_t axis) {
  const Onnx__TensorProto *t = ox_const_find(c, ox_in_name(n, 1));
  int64_t dims[DM_MAX_DIMS], numel = t ? ox_tensor_numel(t) : -1;
  int rank = ox_static_dims(c, ox_in_name(n, 0), dims, DM_MAX_DIMS);
  int i64 = t && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  if (numel < 0 || rank <= axis ||
      (!i64 && t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32))
    return DM_OK; /* nothing to check here: the op's own checks run with the net */
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  DM_TRY(ox_tensor_bytes(c, t, numel, &data, &owned));
  dm_status s = DM_OK;
  for (int64_t k = 0; k < numel && s == DM_OK; k++) {
    int64_t v;
    if (i64) {
      memcpy(&v, data + 8 * k, 8);
    } else {
      int32_t x;
      memcpy(&x, data + 4 * k, 4);
      v = x;
    }
    if (v < -dims[axis] || v >= dims[axis])
      s = ox_refuse(c, "index %lld (indices[%lld]) is out of range for axis %lld of size %lld",
                    (long long)v, (long long)k, (long long)axis, (long long)dims[axis]);
  }
  free(owned);
  return s;
}

static dm_status tr_gather(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "Gather", 2));
  int64_t axis = ox_attr_int(n, "axis", 0);
  int rd = ox_rank_of(c, ox_in_name(n, 0)), ri = ox_rank_of(c, ox_in_name(n, 1));
  if (axis < 0 && rd >= 0)
    axis += rd;
  if (axis < 0)
    return ox_refuse(c, "a negative axis on a tensor of unknown rank");
  DM_TRY(check_const_indices(c, n, axis));
  if (axis)
    dm_opb_arg_int(b, "axis", axis);
  dm_opb_arg_int(b, "wrap_indices", 1); /* ONNX counts negative indices from the end */
  c->out_rank = rd < 0 || ri < 0 ? -1 : rd - 1 + ri;
  return DM_OK;
}

/* Squeeze and Unsqueeze: axes from the attribute (before opset 13) or a constant input. */
static dm_status squeeze_like(imp *c, const Onnx__NodeProto *n, dm_opb *b, int squeeze) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0) || n->n_input > 2)
    return ox_refuse(c, "expected data and an optional axes input");
  int64_t *axes = NULL, dims[DM_MAX_DIMS];
  int k;
  DM_TRY(ints_of(c, n, 1, 13, "axes", "axes", &axes, &k));
  int rank = ox_rank_of(c, ox_in_name(n, 0));
  if (k < 0 && squeeze) { /* every dim of size 1: needs the static shape */
    int r = ox_shape_of(c, ox_in_name(n, 0), dims);
    if (r < 0)
      return ox_refuse(c, "no axes and the input's shape is not known at import");
    axes = malloc(DM_MAX_DIMS * sizeof *axes);
    if (!axes)
      return DM_NOMEM("a list of axes");
    k = 0;
    for (int d = 0; d < r; d++)
      if (dims[d] == 1)
        axes[k++] = d;
  }
  if (k < 0) {
    free(axes);
    return ox_refuse(c, "no axes");
  }
  ox_start(b, squeeze ? "Squeeze" : "ExpandDims", n, 1);
  dm_opb_arg_ints(b, "dims", axes, (size_t)k); /* negative ones as ONNX: from the end */
  free(axes);
  c->out_rank = rank < 0 ? -1 : squeeze ? rank - k : rank + k;
  return DM_OK;
}

static dm_status tr_squeeze(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return squeeze_like(c, n, b, 1);
}

static dm_status tr_unsqueeze(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return squeeze_like(c, n, b, 0);
}

/* Slice: constant starts/ends/axes (attributes before opset 10, inputs after), step 1.
 * Caffe2's Slice takes a start and end for each leading dim, a negative one counting
 * from one past the end; with the input's static shape the bounds are made exact
 * (ONNX clamps, and an empty range is allowed), otherwise mapped to Caffe2's rule. */
static dm_status tr_slice(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0))
    return ox_refuse(c, "no data input");
  int64_t *st = NULL, *en = NULL, *ax = NULL, *sp = NULL;
  int ns, ne, na = -1, nsp = -1;
  dm_status s = ints_of(c, n, 1, 10, "starts", "starts", &st, &ns);
  if (s == DM_OK)
    s = ints_of(c, n, 2, 10, "ends", "ends", &en, &ne);
  if (s == DM_OK)
    s = ints_of(c, n, 3, 10, "axes", "axes", &ax, &na);
  if (s == DM_OK)
    s = ints_of(c, n, 4, 10, "steps", "steps", &sp, &nsp);
  int64_t dims[DM_MAX_DIMS], lo[DM_MAX_DIMS], hi[DM_MAX_DIMS];
  int rank = ox_rank_of(c, ox_in_name(n, 0));
  int known = ox_shape_of(c, ox_in_name(n, 0), dims) >= 0, used = 0;
  if (s == DM_OK && (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns)))
    s = ox_refuse(c, "starts, ends, axes and steps differ in length");
  if (s == DM_OK && rank < 0)
    s = ox_refuse(c, "a tensor of unknown rank");
  for (int d = 0; s == DM_OK && d < rank; d++) {
    lo[d] = 0;
    hi[d] = known ? dims[d] : -1; /* the whole dim */
  }
  for (int j = 0; s == DM_OK && j < ns; j++) {
    int64_t a = na >= 0 ? ax[j] : j;
    a = a < 0 ? a + rank : a;
    if (a < 0 || a >= rank) {
      s = ox_refuse(c, "axis %lld out of range for rank %d", (long long)(na >= 0 ? ax[j] : j),
                    rank);
      break;
    }
    if (nsp >= 0 && sp[j] != 1) {
      s = ox_refuse(c, "step %lld (only step 1 is supported)", (long long)sp[j]);
      break;
    }
    int64_t bj = st[j], ej = en[j];
    if (known) { /* ONNX's clamping, exactly */
      int64_t dim = dims[a];
      bj = bj < 0 ? (bj < -dim ? 0 : bj + dim) : bj > dim ? dim : bj;
      ej = ej < 0 ? (ej < -dim ? 0 : ej + dim) : ej > dim ? dim : ej;
      ej = ej < bj ? bj : ej;
    } else { /* Caffe2 counts a negative bound from one past the end */
      const int64_t far = (int64_t)1 << 62;
      bj = bj < 0 ? (bj < -far ? -far : bj) - 1 : bj;
      ej = ej < 0 ? (ej < -far ? -far : ej) - 1 : ej;
    }
    lo[a] = bj;
    hi[a] = ej;
    used = (int)a + 1 > used ? (int)a + 1 : used;
  }
  free(st);
  free(en);
  free(ax);
  free(sp);
  DM_TRY(s);
  ox_start(b, "Slice", n, 1);
  dm_opb_arg_ints(b, "starts", lo, (size_t)used);
  dm_opb_arg_ints(b, "ends", hi, (size_t)used);
  return DM_OK;
}

/* ConstantOfShape of a computed shape (a constant one is folded, or made here when too
 * large to fold): ConstantFill of the value's type. */
static dm_status tr_constant_of_shape(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "ConstantFill", 1));
  const Onnx__AttributeProto *a = ox_attr(n, "value");
  const Onnx__TensorProto *v = a ? a->t : NULL;
  if (v && !v->has_data_type) /* ONNX Runtime refuses it too: its type is the output's */
    return ox_refuse(c, "a value with no data_type");
  int32_t ty = v ? v->data_type : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  if (v && ox_tensor_numel(v) != 1)
    return ox_refuse(c, "a value that is not one element");
  if (ty != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && ty != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
      ty != ONNX__TENSOR_PROTO__DATA_TYPE__INT32 && ty != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL)
    return ox_refuse(c, "a %s value", ox_dtype_name(ty));
  double x = 0;
  int64_t xi = 0; /* an integer value, exactly (a double holds 53 bits) */
  if (v) {
    const uint8_t *data = NULL;
    uint8_t *owned = NULL;
    DM_TRY(ox_tensor_bytes(c, v, 1, &data, &owned));
    if (ty == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
      float f;
      memcpy(&f, data, 4);
      x = f;
    } else if (ty == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
      memcpy(&xi, data, 8);
    } else if (ty == ONNX__TENSOR_PROTO__DATA_TYPE__INT32) {
      int32_t i;
      memcpy(&i, data, 4);
      xi = i;
    } else {
      xi = data[0] != 0;
    }
    free(owned);
  }
  int64_t *shape = NULL;
  size_t k = 0;
  const Onnx__TensorProto *t = ox_const_find(c, ox_in_name(n, 0));
  if (t) { /* a constant shape too large to fold: the fill runs with the net */
    dm_opb_discard(b);
    DM_TRY(ox_const_ints(c, t, &shape, &k));
    dm_opb_start(b, "ConstantFill");
    dm_opb_output(b, n->output[0]);
    dm_opb_arg_ints(b, "shape", shape, k);
    free(shape);
  } else {
    dm_opb_arg_int(b, "input_as_shape", 1);
  }
  dm_opb_arg_int(b, "dtype", ox_dm_dtype(ty));
  if (ty == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
    dm_opb_arg_float(b, "value", (float)x);
  else
    dm_opb_arg_int(b, "value", xi);
  c->out_rank = t ? (int)k : -1;
  return DM_OK;
}

const ox_translator ox_ops_shape[] = {
    {"Shape", tr_shape},
    {"Gather", tr_gather},
    {"Squeeze", tr_squeeze},
    {"Unsqueeze", tr_unsqueeze},
    {"Slice", tr_slice},
    {"ConstantOfShape", tr_constant_of_shape},
    {NULL, NULL},
};
