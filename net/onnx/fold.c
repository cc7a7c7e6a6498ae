/* fold.c: constant folding at import, for the shape subgraphs exporters write.
 *
 * torch.onnx.export writes `x.view(n, g, c // g, h, w)` as Shape -> Gather -> Div ->
 * Unsqueeze -> Concat -> Reshape, computed in the graph although every value is known
 * once the input's shape is. Caffe2's Reshape takes its shape as an argument, so the
 * importer evaluates such chains here: a node whose inputs are all constants
 * (initializers, Constant values, earlier folds) and whose op is shape arithmetic
 * (Identity, Gather, Unsqueeze, Squeeze, Concat, Slice, Cast, Add, Sub, Mul, Div,
 * Expand, Equal, Where, Reshape, ConstantOfShape, Range), or a Shape/Size of a tensor whose static
 * shape is known (net/onnx/translate.c's shape table), becomes a constant: registered with
 * ox_const_add, a fill in the init net (dropped at the end when no predict-net op reads
 * it), and nothing in the predict net; the Reshape that reads it then has a constant
 * shape like any other.
 *
 * The evaluator is a small one of its own, on int64 values (every integer type) and
 * doubles (FLOAT, DOUBLE) with ONNX's rules (numpy broadcasting, negative indices and
 * axes, Slice's clamping and steps, Div truncating integers as ONNX Runtime does), rather
 * than our CPU kernels in a scratch workspace: these are ONNX's semantics, which the
 * Caffe2 ops (axis 0 Gather, Caffe2's Slice) do not all share, and the values are a few
 * dozen integers. FLOAT results are rounded once from the double result, which for one
 * +, -, * or / is the correctly rounded float result. Integer arithmetic is exact
 * (__builtin_*_overflow): a result that would overflow, or a float cast to an integer
 * type that cannot hold it, is not folded, so a fold never yields a value ONNX would
 * not. Anything it cannot evaluate (a
 * type, an out-of-range index, an attribute it does not know) is left to the
 * translators, which refuse it with their own reason. Results are capped at
 * FOLD_NUMEL_MAX elements so that folding never writes a large tensor into the init net.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net/onnx/translate.h"

#define FOLD_NUMEL_MAX ((int64_t)1 << 16)

enum { T_FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
       T_DOUBLE = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE,
       T_INT64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
       T_INT32 = ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
       T_BOOL = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
       T_UINT8 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8,
       T_INT8 = ONNX__TENSOR_PROTO__DATA_TYPE__INT8 };

/* A value being folded: integers in i, FLOAT/DOUBLE in f (one of them allocated). */
typedef struct val {
  int32_t type;
  int rank;
  int64_t dims[DM_MAX_DIMS];
  int64_t n;
  int64_t *i;
  double *f;
} val;

static int is_float(int32_t t) { return t == T_FLOAT || t == T_DOUBLE; }

static void val_free(val *v) {
  free(v->i);
  free(v->f);
  v->i = NULL;
  v->f = NULL;
}

/* Allocates v's values for its type, rank and dims; 0 when too large. */
static dm_status val_alloc(val *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] < 0 || (v->dims[d] && n > FOLD_NUMEL_MAX / v->dims[d]))
      return OX_REFUSED;
    n *= v->dims[d];
  }
  if (n > FOLD_NUMEL_MAX)
    return OX_REFUSED;
  v->n = n;
  if (is_float(v->type))
    v->f = calloc((size_t)n + 1, sizeof *v->f);
  else
    v->i = calloc((size_t)n + 1, sizeof *v->i);
  return v->f || v->i ? DM_OK : DM_NOMEM("a folded constant");
}

static dm_status val_new(val *v, int32_t type, int rank, const int64_t *dims) {
  memset(v, 0, sizeof *v);
  v->type = type;
  v->rank = rank;
  if (rank)
    memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
  return val_alloc(v);
}

/* Element k as a double / an int64, whatever v holds. */
static double get_f(const val *v, int64_t k) { return v->f ? v->f[k] : (double)v->i[k]; }
static int64_t get_i(const val *v, int64_t k) { return v->i ? v->i[k] : (int64_t)v->f[k]; }

/* The constant `name` as a value: OX_REFUSED when it is not one or its type is another. */
static dm_status val_from(imp *c, const Onnx__TensorProto *t, val *v) {
  memset(v, 0, sizeof *v);
  if (!t || !t->has_data_type || t->n_dims > DM_MAX_DIMS)
    return OX_REFUSED;
  int32_t ty = t->data_type;
  if (ty != T_FLOAT && ty != T_DOUBLE && ty != T_INT64 && ty != T_INT32 && ty != T_BOOL &&
      ty != T_UINT8 && ty != T_INT8)
    return OX_REFUSED;
  int64_t numel = ox_tensor_numel(t);
  if (numel < 0 || numel > FOLD_NUMEL_MAX)
    return OX_REFUSED;
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  if (ox_tensor_bytes(c, t, numel, &data, &owned) != DM_OK) {
    dm_error_clear(); /* a malformed constant: the translator or the fill reports it */
    return OX_REFUSED;
  }
  dm_status s = val_new(v, ty, (int)t->n_dims, t->dims);
  for (int64_t k = 0; s == DM_OK && k < numel; k++) {
    switch (ty) {
    case T_FLOAT: { float x; memcpy(&x, data + 4 * k, 4); v->f[k] = x; break; }
    case T_DOUBLE: memcpy(&v->f[k], data + 8 * k, 8); break;
    case T_INT64: memcpy(&v->i[k], data + 8 * k, 8); break;
    case T_INT32: { int32_t x; memcpy(&x, data + 4 * k, 4); v->i[k] = x; break; }
    case T_INT8: v->i[k] = (int8_t)data[k]; break;
    case T_BOOL: v->i[k] = data[k] != 0; break;
    default: v->i[k] = data[k]; break;
    }
  }
  free(owned);
  if (s != DM_OK)
    val_free(v);
  return s;
}

static dm_status val_load(imp *c, const char *name, val *v) {
  return val_from(c, ox_const_find(c, name), v);
}

/* Whether double x converts to integer type `to` exactly as C defines it: finite and,
 * truncated, inside the type's range (outside, the conversion is undefined in C and the
 * C++ of ONNX Runtime alike, so such a Cast is not folded). */
static int float_fits(double x, int32_t to) {
  double lo = to == T_INT32 ? -2147483648.0 : to == T_INT8 ? -128.0 : to == T_UINT8 ? 0.0
                                                                      : -9223372036854775808.0;
  double hi = to == T_INT32 ? 2147483648.0 : to == T_INT8 ? 128.0 : to == T_UINT8 ? 256.0
                                                                     : 9223372036854775808.0;
  return isfinite(x) && trunc(x) >= lo && trunc(x) < hi;
}

/* v into type `to` (values converted as C converts them, FLOAT rounded to float);
 * OX_REFUSED for a float value outside the integer type `to`. */
static dm_status val_cast(val *v, int32_t to) {
  if (v->f && !is_float(to) && to != T_BOOL)
    for (int64_t k = 0; k < v->n; k++)
      if (!float_fits(v->f[k], to))
        return OX_REFUSED;
  val r;
  DM_TRY(val_new(&r, to, v->rank, v->dims));
  for (int64_t k = 0; k < v->n; k++) {
    switch (to) {
    case T_FLOAT: r.f[k] = (float)get_f(v, k); break;
    case T_DOUBLE: r.f[k] = get_f(v, k); break;
    case T_BOOL: r.i[k] = get_f(v, k) != 0; break;
    case T_INT32: r.i[k] = (int32_t)get_i(v, k); break;
    case T_INT8: r.i[k] = (int8_t)get_i(v, k); break;
    case T_UINT8: r.i[k] = (uint8_t)get_i(v, k); break;
    default: r.i[k] = get_i(v, k); break;
    }
  }
  val_free(v);
  *v = r;
  return DM_OK;
}

/* ---- reading a node ---------------------------------------------------------------- */

/* The ints of an attribute (opset < 13's axes) or of a constant input (13's), into a[];
 * *n = -1 when neither is given. OX_REFUSED when the input is not a constant. */
static dm_status axes_of(imp *c, const Onnx__NodeProto *n, size_t input, const char *attr,
                         int64_t *a, int *count) {
  *count = -1;
  if (ox_in_name(n, input)) {
    val v;
    DM_TRY(val_load(c, ox_in_name(n, input), &v));
    if (v.rank > 1 || v.n > DM_MAX_DIMS || is_float(v.type)) {
      val_free(&v);
      return OX_REFUSED;
    }
    for (int64_t k = 0; k < v.n; k++)
      a[k] = v.i[k];
    *count = (int)v.n;
    val_free(&v);
    return DM_OK;
  }
  size_t k;
  const int64_t *x = ox_attr_ints(n, attr, &k);
  if (!ox_attr(n, attr))
    return DM_OK;
  if (k > DM_MAX_DIMS)
    return OX_REFUSED;
  if (k)
    memcpy(a, x, k * sizeof *x);
  *count = (int)k;
  return DM_OK;
}

/* Canonical axis in [0, rank), or -1. */
static int axis_in(int64_t a, int rank) {
  if (a < 0)
    a += rank;
  return a >= 0 && a < rank ? (int)a : -1;
}

/* Row-major strides of a shape. */
static void strides(const val *v, int64_t *st) {
  int64_t s = 1;
  for (int d = v->rank; d-- > 0;) {
    st[d] = s;
    s *= v->dims[d];
  }
}

/* ---- the ops -------------------------------------------------------------------------- */

typedef dm_status (*fold_fn)(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out);

/* Shape: the input's static shape (not its values), with opset 15's start and end. */
static dm_status fold_shape_dims(imp *c, const Onnx__NodeProto *n, const int64_t *dims,
                                 int rank, val *out) {
  (void)c;
  int64_t lo = ox_attr_int(n, "start", 0), hi = ox_attr_int(n, "end", rank);
  lo = lo < 0 ? lo + rank : lo;
  hi = hi < 0 ? hi + rank : hi;
  lo = lo < 0 ? 0 : lo > rank ? rank : lo;
  hi = hi < 0 ? 0 : hi > rank ? rank : hi;
  int64_t len = hi > lo ? hi - lo : 0;
  DM_TRY(val_new(out, T_INT64, 1, &len));
  for (int64_t k = 0; k < len; k++)
    out->i[k] = dims[lo + k];
  return DM_OK;
}

static dm_status fold_identity(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)c;
  (void)n;
  if (n_in != 1)
    return OX_REFUSED;
  *out = in[0];
  memset(&in[0], 0, sizeof in[0]); /* taken */
  return DM_OK;
}

static dm_status fold_cast(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  if (n_in != 1)
    return OX_REFUSED;
  int64_t to = ox_attr_int(n, "to", -1);
  if (to != T_FLOAT && to != T_DOUBLE && to != T_INT64 && to != T_INT32 && to != T_BOOL &&
      to != T_INT8 && to != T_UINT8)
    return OX_REFUSED;
  DM_TRY(fold_identity(c, n, in, n_in, out));
  return val_cast(out, (int32_t)to);
}

/* Gather along `axis`: out = data.dims[:axis] + indices.dims + data.dims[axis+1:]. */
static dm_status fold_gather(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)c;
  if (n_in != 2 || is_float(in[1].type))
    return OX_REFUSED;
  const val *x = &in[0], *idx = &in[1];
  int axis = axis_in(ox_attr_int(n, "axis", 0), x->rank);
  if (axis < 0 || x->rank - 1 + idx->rank > DM_MAX_DIMS)
    return OX_REFUSED;
  int64_t dims[DM_MAX_DIMS];
  int r = 0;
  for (int d = 0; d < axis; d++)
    dims[r++] = x->dims[d];
  for (int d = 0; d < idx->rank; d++)
    dims[r++] = idx->dims[d];
  for (int d = axis + 1; d < x->rank; d++)
    dims[r++] = x->dims[d];
  DM_TRY(val_new(out, x->type, r, dims));
  int64_t outer = 1, inner = 1, along = x->dims[axis];
  for (int d = 0; d < axis; d++)
    outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++)
    inner *= x->dims[d];
  int64_t k = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < idx->n; j++) {
      int64_t q = idx->i[j] < 0 ? idx->i[j] + along : idx->i[j];
      if (q < 0 || q >= along)
        return OX_REFUSED; /* out of range: the translator's op reports it at run time */
      for (int64_t e = 0; e < inner; e++, k++) {
        int64_t src = (o * along + q) * inner + e;
        if (out->f)
          out->f[k] = x->f[src];
        else
          out->i[k] = x->i[src];
      }
    }
  return DM_OK;
}

/* Unsqueeze: axes (attribute, or input 1 from opset 13) name the new dims of the output. */
static dm_status fold_unsqueeze(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)n_in;
  int64_t axes[DM_MAX_DIMS];
  int k;
  DM_TRY(axes_of(c, n, 1, "axes", axes, &k));
  int r = in[0].rank + k;
  if (k <= 0 || r > DM_MAX_DIMS)
    return OX_REFUSED;
  int is_new[DM_MAX_DIMS] = {0};
  for (int j = 0; j < k; j++) {
    int a = axis_in(axes[j], r);
    if (a < 0 || is_new[a])
      return OX_REFUSED;
    is_new[a] = 1;
  }
  int64_t was[DM_MAX_DIMS];
  memcpy(was, in[0].dims, sizeof was);
  *out = in[0];
  memset(&in[0], 0, sizeof in[0]);
  for (int d = 0, src = 0; d < r; d++)
    out->dims[d] = is_new[d] ? 1 : was[src++];
  out->rank = r;
  return DM_OK;
}

/* Squeeze: the listed dims (each 1), or every dim of size 1. */
static dm_status fold_squeeze(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)n_in;
  int64_t axes[DM_MAX_DIMS];
  int k;
  DM_TRY(axes_of(c, n, 1, "axes", axes, &k));
  int drop[DM_MAX_DIMS] = {0};
  const val *x = &in[0];
  for (int j = 0; j < k; j++) {
    int a = axis_in(axes[j], x->rank);
    if (a < 0 || x->dims[a] != 1)
      return OX_REFUSED;
    drop[a] = 1;
  }
  for (int d = 0; k < 0 && d < x->rank; d++)
    drop[d] = x->dims[d] == 1;
  int64_t dims[DM_MAX_DIMS];
  int r = 0;
  for (int d = 0; d < x->rank; d++)
    if (!drop[d])
      dims[r++] = x->dims[d];
  *out = in[0];
  memset(&in[0], 0, sizeof in[0]);
  out->rank = r;
  memcpy(out->dims, dims, (size_t)r * sizeof *dims);
  return DM_OK;
}

/* Reshape: 0 keeps the input's dim (unless allowzero), one -1 is inferred. */
static dm_status fold_reshape(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)c;
  if (n_in != 2 || is_float(in[1].type) || in[1].rank != 1 || in[1].n > DM_MAX_DIMS)
    return OX_REFUSED;
  int64_t dims[DM_MAX_DIMS], known = 1;
  int infer = -1, allowzero = ox_attr_int(n, "allowzero", 0) != 0;
  for (int d = 0; d < (int)in[1].n; d++) {
    int64_t v = in[1].i[d];
    if (v == 0 && !allowzero) {
      if (d >= in[0].rank)
        return OX_REFUSED;
      v = in[0].dims[d];
    }
    if (v == -1) {
      if (infer >= 0)
        return OX_REFUSED;
      infer = d;
      v = 1;
    } else if (v < 0) {
      return OX_REFUSED;
    }
    dims[d] = v;
    if (__builtin_mul_overflow(known, v, &known))
      return OX_REFUSED; /* no tensor has that many elements */
  }
  if (infer >= 0) {
    if (known == 0 || in[0].n % known)
      return OX_REFUSED;
    dims[infer] = in[0].n / known;
  } else if (known != in[0].n) {
    return OX_REFUSED;
  }
  *out = in[0];
  memset(&in[0], 0, sizeof in[0]);
  out->rank = (int)in[1].n;
  memcpy(out->dims, dims, (size_t)out->rank * sizeof *dims);
  return DM_OK;
}

static dm_status fold_concat(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)c;
  const Onnx__AttributeProto *a = ox_attr(n, "axis");
  if (n_in < 1 || !a || !a->has_i)
    return OX_REFUSED;
  int axis = axis_in(a->i, in[0].rank);
  if (axis < 0)
    return OX_REFUSED;
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, in[0].dims, sizeof dims);
  dims[axis] = 0;
  for (int j = 0; j < n_in; j++) {
    if (in[j].type != in[0].type || in[j].rank != in[0].rank)
      return OX_REFUSED;
    for (int d = 0; d < in[0].rank; d++)
      if (d != axis && in[j].dims[d] != in[0].dims[d])
        return OX_REFUSED;
    dims[axis] += in[j].dims[axis];
  }
  DM_TRY(val_new(out, in[0].type, in[0].rank, dims));
  int64_t outer = 1, inner = 1, k = 0;
  for (int d = 0; d < axis; d++)
    outer *= dims[d];
  for (int d = axis + 1; d < in[0].rank; d++)
    inner *= dims[d];
  for (int64_t o = 0; o < outer; o++)
    for (int j = 0; j < n_in; j++) {
      int64_t len = in[j].dims[axis] * inner;
      for (int64_t e = 0; e < len; e++, k++) {
        if (out->f)
          out->f[k] = in[j].f[o * len + e];
        else
          out->i[k] = in[j].i[o * len + e];
      }
    }
  return DM_OK;
}

/* Slice with ONNX's rules: starts/ends (attributes before opset 10, inputs after) clamped
 * to the dim, negative ones counted from the end, any nonzero step. */
static dm_status fold_slice(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  const val *x = &in[0];
  int64_t st[DM_MAX_DIMS], en[DM_MAX_DIMS], ax[DM_MAX_DIMS], sp[DM_MAX_DIMS];
  int ns, ne, na, nsp;
  (void)n_in;
  DM_TRY(axes_of(c, n, 1, "starts", st, &ns));
  DM_TRY(axes_of(c, n, 2, "ends", en, &ne));
  DM_TRY(axes_of(c, n, 3, "axes", ax, &na));
  DM_TRY(axes_of(c, n, 4, "steps", sp, &nsp));
  if (c->opset >= 10 && (ox_attr(n, "starts") || ox_attr(n, "ends")))
    return OX_REFUSED;
  if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
    return OX_REFUSED;
  int64_t lo[DM_MAX_DIMS], step[DM_MAX_DIMS], dims[DM_MAX_DIMS];
  int seen[DM_MAX_DIMS] = {0};
  for (int d = 0; d < x->rank; d++) {
    lo[d] = 0;
    step[d] = 1;
    dims[d] = x->dims[d];
  }
  for (int j = 0; j < ns; j++) {
    int a = axis_in(na >= 0 ? ax[j] : j, x->rank);
    int64_t s = nsp >= 0 ? sp[j] : 1, dim = x->dims[a >= 0 ? a : 0];
    if (a < 0 || seen[a] || s == 0)
      return OX_REFUSED;
    seen[a] = 1;
    int64_t b = st[j], e = en[j];
    b = b < 0 ? (b < -dim ? -dim : b) + dim : b;
    e = e < 0 ? (e < -dim ? -dim : e) + dim : e;
    if (s > 0) {
      b = b > dim ? dim : b;
      e = e > dim ? dim : e;
      dims[a] = e > b ? (e - b - 1) / s + 1 : 0; /* ceil((e - b) / s), s up to INT64_MAX */
    } else { /* backwards: from b (at most dim - 1) down to past e (at least -1) */
      b = b > dim - 1 ? dim - 1 : b;
      e = en[j] < -dim ? -1 : e > dim - 1 ? dim - 1 : e;
      /* ceil((b - e) / -s) without negating s (INT64_MIN): (b - e - 1) / s is <= 0 */
      dims[a] = b > e ? 1 - (b - e - 1) / s : 0;
    }
    lo[a] = b;
    step[a] = s;
  }
  DM_TRY(val_new(out, x->type, x->rank, dims));
  int64_t xs[DM_MAX_DIMS], idx[DM_MAX_DIMS] = {0};
  strides(x, xs);
  for (int64_t k = 0; k < out->n; k++) {
    int64_t src = 0;
    for (int d = 0; d < x->rank; d++)
      src += (lo[d] + idx[d] * step[d]) * xs[d];
    if (out->f)
      out->f[k] = x->f[src];
    else
      out->i[k] = x->i[src];
    for (int d = x->rank; d-- > 0;)
      if (++idx[d] < dims[d])
        break;
      else
        idx[d] = 0;
  }
  return DM_OK;
}

/* numpy broadcasting of up to three values: the result's rank and dims, each input's
 * element offset as the walk visits the result's elements in order. */
typedef struct bcast {
  int n, r;
  int64_t dims[DM_MAX_DIMS], st[3][DM_MAX_DIMS], idx[DM_MAX_DIMS], off[3];
} bcast;

/* 0 when the shapes do not broadcast. */
static int bcast_init(bcast *b, const val *in, int n) {
  memset(b, 0, sizeof *b);
  b->n = n;
  for (int k = 0; k < n; k++)
    b->r = in[k].rank > b->r ? in[k].rank : b->r;
  for (int d = 0; d < b->r; d++) {
    b->dims[d] = 1;
    for (int k = 0; k < n; k++) {
      int dk = d - (b->r - in[k].rank);
      int64_t x = dk >= 0 ? in[k].dims[dk] : 1;
      if (x != 1 && b->dims[d] != 1 && x != b->dims[d])
        return 0;
      if (x != 1)
        b->dims[d] = x;
    }
  }
  for (int k = 0; k < n; k++) {
    int64_t t[DM_MAX_DIMS];
    strides(&in[k], t);
    for (int d = 0; d < b->r; d++) {
      int dk = d - (b->r - in[k].rank);
      b->st[k][d] = dk >= 0 && in[k].dims[dk] != 1 ? t[dk] : 0;
    }
  }
  return 1;
}

/* Sets b->off for the current element, then (after the caller used them) steps. */
static void bcast_offsets(bcast *b) {
  for (int k = 0; k < b->n; k++) {
    b->off[k] = 0;
    for (int d = 0; d < b->r; d++)
      b->off[k] += b->idx[d] * b->st[k][d];
  }
}
static void bcast_step(bcast *b) {
  for (int d = b->r; d-- > 0;)
    if (++b->idx[d] < b->dims[d])
      break;
    else
      b->idx[d] = 0;
}

/* Add, Sub, Mul, Div with numpy broadcasting; 'E' (Expand): A broadcast to the shape of
 * B, whose values are not read (B may have none). */
static dm_status arith(imp *c, val *in, int n_in, val *out, char op) {
  if (n_in != 2 || in[0].type != in[1].type)
    return OX_REFUSED;
  const val *a = &in[0], *b = &in[1];
  bcast w;
  if (!bcast_init(&w, in, 2))
    return OX_REFUSED;
  DM_TRY(val_new(out, a->type, w.r, w.dims));
  for (int64_t k = 0; k < out->n; k++, bcast_step(&w)) {
    bcast_offsets(&w);
    int64_t pa = w.off[0], pb = w.off[1];
    if (out->f) {
      double x = a->f[pa], y = op == 'E' ? 0 : b->f[pb];
      double v = op == '+'   ? x + y
                 : op == '-' ? x - y
                 : op == '*' ? x * y
                 : op == '/' ? x / y
                             : x; /* E: A broadcast to B's shape */
      out->f[k] = out->type == T_FLOAT ? (float)v : v;
    } else {
      int64_t x = a->i[pa], y = op == 'E' ? 1 : b->i[pb], v = x;
      if (op == '/' && (y == 0 || (x == INT64_MIN && y == -1)))
        return OX_REFUSED;
      /* exact or not at all: a wrapped shape value is no shape ONNX means */
      int over = op == '+'   ? __builtin_add_overflow(x, y, &v)
                 : op == '-' ? __builtin_sub_overflow(x, y, &v)
                 : op == '*' ? __builtin_mul_overflow(x, y, &v)
                             : 0;
      if (op == '/')
        v = x / y;
      if (over || (out->type == T_INT32 && (v < INT32_MIN || v > INT32_MAX)))
        return ox_refuse(c, "%lld %c %lld overflows %s", (long long)x, op, (long long)y,
                         ox_dtype_name(out->type));
      out->i[k] = v;
    }
  }
  return DM_OK;
}

/* Equal(A, B) -> BOOL with numpy broadcasting (A and B of one type). */
static dm_status fold_equal(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)n;
  bcast w;
  if (n_in != 2 || in[0].type != in[1].type || !bcast_init(&w, in, 2))
    return OX_REFUSED;
  DM_TRY(val_new(out, T_BOOL, w.r, w.dims));
  for (int64_t k = 0; k < out->n; k++, bcast_step(&w)) {
    bcast_offsets(&w);
    out->i[k] = in[0].f ? in[0].f[w.off[0]] == in[1].f[w.off[1]]
                        : in[0].i[w.off[0]] == in[1].i[w.off[1]];
  }
  (void)c;
  return DM_OK;
}

/* Where(C, X, Y) -> C ? X : Y with numpy broadcasting of the three (C BOOL, X and Y of
 * one type). */
static dm_status fold_where(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)n;
  (void)c;
  bcast w;
  if (n_in != 3 || in[0].type != T_BOOL || in[1].type != in[2].type || !bcast_init(&w, in, 3))
    return OX_REFUSED;
  DM_TRY(val_new(out, in[1].type, w.r, w.dims));
  for (int64_t k = 0; k < out->n; k++, bcast_step(&w)) {
    bcast_offsets(&w);
    const val *pick = in[0].i[w.off[0]] ? &in[1] : &in[2];
    int64_t at = in[0].i[w.off[0]] ? w.off[1] : w.off[2];
    if (out->f)
      out->f[k] = pick->f[at];
    else
      out->i[k] = pick->i[at];
  }
  return DM_OK;
}

/* Add, Sub, Mul, Div: told apart by the first letter of the op type. */
static dm_status fold_arith(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  char t = n->op_type[0];
  return arith(c, in, n_in, out, t == 'A' ? '+' : t == 'S' ? '-' : t == 'M' ? '*' : '/');
}

/* Expand: the data broadcast with the shape input (numpy's rule, both ways). */
static dm_status fold_expand(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)n;
  if (n_in != 2 || in[1].rank != 1 || is_float(in[1].type) || in[1].n > DM_MAX_DIMS)
    return OX_REFUSED;
  val pair[2] = {in[0], {.type = in[0].type, .rank = (int)in[1].n}};
  for (int d = 0; d < pair[1].rank; d++) {
    if (in[1].i[d] < 0)
      return OX_REFUSED;
    pair[1].dims[d] = in[1].i[d];
  }
  return arith(c, pair, 2, out, 'E');
}

/* ConstantOfShape: the 1-D shape input, filled with `value` (a one-element tensor;
 * default FLOAT 0). */
static dm_status fold_constant_of_shape(imp *c, const Onnx__NodeProto *n, val *in, int n_in,
                                        val *out) {
  if (n_in != 1 || in[0].rank != 1 || is_float(in[0].type) || in[0].n > DM_MAX_DIMS)
    return OX_REFUSED;
  val fill;
  memset(&fill, 0, sizeof fill);
  const Onnx__AttributeProto *a = ox_attr(n, "value");
  if (a && a->t) {
    DM_TRY(val_from(c, a->t, &fill));
    if (fill.n != 1) {
      val_free(&fill);
      return OX_REFUSED;
    }
  } else {
    int64_t one = 1;
    DM_TRY(val_new(&fill, T_FLOAT, 1, &one));
  }
  dm_status s = val_new(out, fill.type, (int)in[0].n, in[0].i);
  for (int64_t k = 0; s == DM_OK && k < out->n; k++) {
    if (out->f)
      out->f[k] = fill.f[0];
    else
      out->i[k] = fill.i[0];
  }
  val_free(&fill);
  return s;
}

/* Range(start, limit, delta): scalars; max(ceil((limit - start) / delta), 0) values,
 * start, start + delta, ... as ONNX Runtime makes them: for integers the count exactly
 * (limit - start in int64, never through a double, which loses 2^60 + 3 - 2^60), for
 * FLOAT and DOUBLE the difference in the type and each value the previous one plus
 * delta in the type. Not folded when a value overflows or is not finite. */
static dm_status fold_range(imp *c, const Onnx__NodeProto *n, val *in, int n_in, val *out) {
  (void)n;
  if (n_in != 3 || in[0].n != 1 || in[1].n != 1 || in[2].n != 1 ||
      in[0].type != in[1].type || in[0].type != in[2].type)
    return OX_REFUSED;
  int64_t len;
  if (in[0].f) {
    int f32 = in[0].type == T_FLOAT;
    double s = in[0].f[0], l = in[1].f[0], d = in[2].f[0];
    double diff = f32 ? (double)((float)l - (float)s) : l - s, cnt = ceil(diff / d);
    if (d == 0 || !isfinite(cnt))
      return OX_REFUSED;
    len = cnt <= 0 ? 0 : cnt > (double)FOLD_NUMEL_MAX ? FOLD_NUMEL_MAX + 1 : (int64_t)cnt;
  } else {
    int64_t s = in[0].i[0], l = in[1].i[0], d = in[2].i[0], diff;
    if (d == 0)
      return OX_REFUSED;
    if (__builtin_sub_overflow(l, s, &diff) || (diff == INT64_MIN && d == -1))
      return ox_refuse(c, "limit - start (%lld - %lld) overflows int64", (long long)l,
                       (long long)s);
    /* both signs alike: the quotient is >= 0 and truncation is floor, so ceil adds one
     * where there is a remainder */
    len = (diff > 0) != (d > 0) || diff == 0 ? 0 : diff / d + (diff % d != 0);
  }
  DM_TRY(val_new(out, in[0].type, 1, &len)); /* more than FOLD_NUMEL_MAX: refused */
  if (out->f) {
    double v = in[0].f[0];
    for (int64_t k = 0; k < len; k++) {
      out->f[k] = v;
      v = out->type == T_FLOAT ? (double)((float)v + (float)in[2].f[0]) : v + in[2].f[0];
    }
    return DM_OK;
  }
  int64_t v = in[0].i[0];
  for (int64_t k = 0; k < len; k++) {
    out->i[k] = v;
    if (k + 1 < len && __builtin_add_overflow(v, in[2].i[0], &v))
      return OX_REFUSED; /* cannot happen inside [start, limit), checked all the same */
  }
  if (out->type == T_INT32)
    for (int64_t k = 0; k < len; k++)
      if (out->i[k] < INT32_MIN || out->i[k] > INT32_MAX)
        return OX_REFUSED;
  return DM_OK;
}

/* How a node folds: on constant inputs, from its input's static shape (Shape, Size),
 * or as a second name of a constant (Identity). */
enum { ON_VALUES, ON_SHAPE, ALIAS };

/* The ops folded, and how many leading inputs are their data (later ones, Unsqueeze's
 * axes or Slice's starts, are read by the op itself). */
static const struct {
  const char *type;
  fold_fn fn;
  int n_data; /* -1: all */
  int how;
} folds[] = {
    {"Shape", NULL, 1, ON_SHAPE},
    {"Size", NULL, 1, ON_SHAPE},
    {"Identity", NULL, 1, ALIAS},
    {"Cast", fold_cast, 1, ON_VALUES},
    {"Gather", fold_gather, 2, ON_VALUES},
    {"Unsqueeze", fold_unsqueeze, 1, ON_VALUES},
    {"Squeeze", fold_squeeze, 1, ON_VALUES},
    {"Reshape", fold_reshape, 2, ON_VALUES},
    {"Concat", fold_concat, -1, ON_VALUES},
    {"Slice", fold_slice, 1, ON_VALUES},
    {"Add", fold_arith, 2, ON_VALUES},
    {"Sub", fold_arith, 2, ON_VALUES},
    {"Mul", fold_arith, 2, ON_VALUES},
    {"Div", fold_arith, 2, ON_VALUES},
    {"Expand", fold_expand, 2, ON_VALUES},
    {"Equal", fold_equal, 2, ON_VALUES},
    {"Where", fold_where, 3, ON_VALUES},
    {"ConstantOfShape", fold_constant_of_shape, 1, ON_VALUES},
    {"Range", fold_range, 3, ON_VALUES},
};

/* The result as a constant: an init-net fill, known to the translators. */
static dm_status emit(imp *c, const char *name, val *v) {
  size_t es = v->type == T_FLOAT || v->type == T_INT32 ? 4
              : v->type == T_INT64 || v->type == T_DOUBLE ? 8 : 1;
  if (v->type == T_DOUBLE || v->type == T_UINT8 || v->type == T_INT8)
    return OX_REFUSED; /* ox_emit_fill holds FLOAT, INT64, INT32 and BOOL */
  uint8_t *buf = malloc((size_t)v->n * es + 1);
  if (!buf)
    return DM_NOMEM("a folded constant");
  for (int64_t k = 0; k < v->n; k++) {
    if (v->type == T_FLOAT) {
      float x = (float)v->f[k];
      memcpy(buf + 4 * k, &x, 4);
    } else if (v->type == T_INT64) {
      memcpy(buf + 8 * k, &v->i[k], 8);
    } else if (v->type == T_INT32) {
      int32_t x = (int32_t)v->i[k];
      memcpy(buf + 4 * k, &x, 4);
    } else {
      buf[k] = v->i[k] != 0;
    }
  }
  Onnx__TensorProto *t = NULL;
  dm_status s = ox_made_tensor(c, v->type, v->rank, v->dims, buf, (size_t)v->n * es, &t);
  free(buf);
  DM_TRY(s);
  DM_TRY(ox_emit_fill(c, name, t));
  c->out_rank = v->rank;
  return ox_const_add(c, name, t);
}

dm_status ox_fold(imp *c, const Onnx__NodeProto *n, int *folded) {
  *folded = 0;
  const char *type = n->op_type ? n->op_type : "";
  if (ox_n_outputs_used(n) != 1 || !n->output[0][0] || n->n_output != 1)
    return DM_OK;
  size_t f = 0;
  while (f < sizeof folds / sizeof folds[0] && strcmp(folds[f].type, type) != 0)
    f++;
  if (f == sizeof folds / sizeof folds[0] || n->n_input == 0 || n->n_input > DM_MAX_DIMS + 2)
    return DM_OK;
  val out;
  memset(&out, 0, sizeof out);
  dm_status s;
  if (folds[f].how == ON_SHAPE) {
    int64_t dims[DM_MAX_DIMS];
    int rank = ox_shape_of(c, ox_in_name(n, 0), dims);
    if (rank < 0 || n->n_input != 1)
      return DM_OK;
    if (type[1] == 'h') { /* Shape, else Size */
      s = fold_shape_dims(c, n, dims, rank, &out);
    } else {
      int64_t numel = 1;
      for (int d = 0; d < rank; d++)
        if (__builtin_mul_overflow(numel, dims[d], &numel))
          return DM_OK; /* no such tensor: left to the translator */
      s = val_new(&out, T_INT64, 0, NULL);
      if (s == DM_OK)
        out.i[0] = numel;
    }
  } else if (folds[f].how == ALIAS) {
    /* A constant under a second name (exporters dedupe shared weights this way): the
     * same tensor filled again, whatever its size, so no Copy runs each time. */
    const Onnx__TensorProto *t = ox_const_find(c, ox_in_name(n, 0));
    if (!t || n->n_input != 1 || !t->has_data_type ||
        (t->data_type != T_FLOAT && t->data_type != T_INT64 && t->data_type != T_INT32 &&
         t->data_type != T_BOOL)) /* the types ox_emit_fill writes */
      return DM_OK;
    DM_TRY(ox_emit_fill(c, n->output[0], t));
    c->out_rank = (int)t->n_dims;
    *folded = 1;
    return ox_const_add(c, n->output[0], t);
  } else {
    for (size_t j = 0; j < n->n_input; j++)
      if (ox_in_name(n, j) && !ox_const_find(c, ox_in_name(n, j)))
        return DM_OK; /* a value known only at run time */
    int n_in = folds[f].n_data < 0 ? (int)n->n_input : folds[f].n_data;
    if (n_in > (int)n->n_input)
      return DM_OK;
    val in[DM_MAX_DIMS + 2];
    memset(in, 0, sizeof in);
    s = DM_OK;
    for (int j = 0; j < n_in && s == DM_OK; j++)
      s = ox_in_name(n, (size_t)j) ? val_load(c, ox_in_name(n, (size_t)j), &in[j]) : OX_REFUSED;
    if (s == DM_OK)
      s = folds[f].fn(c, n, in, n_in, &out);
    for (int j = 0; j < n_in; j++)
      val_free(&in[j]);
  }
  if (s == DM_OK)
    s = emit(c, n->output[0], &out);
  val_free(&out);
  if (s == OX_REFUSED) /* not folded (c->why may say why): the translator decides */
    return DM_OK;
  if (s == DM_OK)
    *folded = 1;
  return s;
}
