/* onnx_import.c: translates an ONNX graph into a Caffe2 init net and predict net.
 *
 * Initializers and Constant nodes become GivenTensor*Fill ops in the init net (the
 * weights a Caffe2 predictor loads once); every other node becomes one Caffe2 op of the
 * predict net, found in a table by its ONNX op type. A translator either emits its op or
 * says why it cannot (an attribute value, an opset, an input that must be constant); the
 * import goes on to the end of the graph so that the error lists every node that cannot
 * be translated at once, and nothing is written or run. The names are ONNX's, so what a
 * user fed or fetched from ONNX Runtime is fed and fetched here under the same names.
 */
#include "onnx_import.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fileio.h"
#include "core/netio.h"
#include "netdef_build.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; the importer reads it in place on little-endian hosts only"
#endif

/* The default-domain opsets the importer claims: from 7 to the newest the onnx package
 * (1.23) defines. A newer opset may change an op's meaning, so it is refused. */
#define OPSET_MIN 7
#define OPSET_MAX 28
/* Largest element count one tensor may claim (its bytes must fit a file anyway). */
#define NUMEL_MAX ((int64_t)1 << 31)

typedef struct imp {
  const Onnx__GraphProto *g;
  const char *base_dir;
  int64_t opset;
  Caffe2__NetDef *init, *pred;
  /* Tensors known at import time: initializers and Constant values, by name. */
  const Onnx__TensorProto **consts;
  const char **const_names;
  size_t n_consts, cap_consts;
  /* Tensors made here from Constant's value_float(s)/value_int(s): the struct and dims
   * are owned here, the values borrowed from the attribute. */
  Onnx__TensorProto **made;
  size_t n_made;
  /* Every name a node may read (graph inputs, initializers, earlier outputs) and its
   * rank where known (-1: unknown); a translator sets out_rank for its outputs. */
  char **known;
  int *ranks;
  size_t n_known;
  int out_rank;
  char why[256]; /* a translator's reason for refusing a node */
} imp;

static int rank_of(const imp *c, const char *name) {
  for (size_t i = c->n_known; name && i-- > 0;)
    if (strcmp(c->known[i], name) == 0)
      return c->ranks[i];
  return -1;
}

static dm_status known_add(imp *c, const char *name, int rank) {
  int *r = realloc(c->ranks, (c->n_known + 1) * sizeof *r);
  if (!r)
    return DM_NOMEM("the importer's name table");
  c->ranks = r;
  DM_TRY(dm_strv_push(&c->known, &c->n_known, name));
  c->ranks[c->n_known - 1] = rank;
  return DM_OK;
}

/* A translator's verdict when it cannot translate a node: c->why says why. */
#define REFUSED DM_ERR_UNSUPPORTED

static dm_status refuse(imp *c, const char *fmt, ...) DM_PRINTF(2, 3);
static dm_status refuse(imp *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  return REFUSED;
}

/* ---- attributes ------------------------------------------------------------------ */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
      return n->attribute[i];
  return NULL;
}

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = attr(n, name);
  return a && a->has_i ? a->i : def;
}

static float attr_float(const Onnx__NodeProto *n, const char *name, float def) {
  const Onnx__AttributeProto *a = attr(n, name);
  return a && a->has_f ? a->f : def;
}

/* The ints of `name` (NULL, *count 0 if absent). */
static const int64_t *attr_ints(const Onnx__NodeProto *n, const char *name, size_t *count) {
  const Onnx__AttributeProto *a = attr(n, name);
  *count = a ? a->n_ints : 0;
  return a ? a->ints : NULL;
}

/* Whether string attribute `name` equals `v` (absent: equals `def`). */
static int attr_str_is(const Onnx__NodeProto *n, const char *name, const char *def, const char *v) {
  const Onnx__AttributeProto *a = attr(n, name);
  if (!a || !a->has_s)
    return strcmp(def, v) == 0;
  return a->s.len == strlen(v) && memcmp(a->s.data, v, a->s.len) == 0;
}

/* Input i, or NULL when absent or "" (an omitted optional input). */
static const char *in_name(const Onnx__NodeProto *n, size_t i) {
  return i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

static size_t n_outputs_used(const Onnx__NodeProto *n) {
  size_t k = 0;
  for (size_t i = 0; i < n->n_output; i++)
    if (n->output[i] && n->output[i][0])
      k = i + 1;
  return k;
}

/* ---- constants ------------------------------------------------------------------- */

static const Onnx__TensorProto *const_find(const imp *c, const char *name) {
  for (size_t i = c->n_consts; name && i-- > 0;)
    if (strcmp(c->const_names[i], name) == 0)
      return c->consts[i];
  return NULL;
}

static dm_status const_add(imp *c, const char *name, const Onnx__TensorProto *t) {
  if (c->n_consts == c->cap_consts) {
    size_t cap = c->cap_consts ? 2 * c->cap_consts : 16;
    const Onnx__TensorProto **a = realloc(c->consts, cap * sizeof *a);
    if (!a)
      return DM_NOMEM("the importer's constant table");
    c->consts = a;
    const char **b = realloc(c->const_names, cap * sizeof *b);
    if (!b)
      return DM_NOMEM("the importer's constant table");
    c->const_names = b;
    c->cap_consts = cap;
  }
  c->consts[c->n_consts] = t;
  c->const_names[c->n_consts++] = name;
  return DM_OK;
}

static int64_t tensor_numel(const Onnx__TensorProto *t) {
  int64_t n = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0 || (t->dims[i] && n > NUMEL_MAX / t->dims[i]))
      return -1;
    n *= t->dims[i];
  }
  return n;
}

static const char *onnx_dtype_name(int32_t t) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&onnx__tensor_proto__data_type__descriptor, t);
  return v ? v->name : "an unknown data type";
}

static size_t elem_size(int32_t t) {
  switch (t) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return 4;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return 8;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return 1;
  default: return 0;
  }
}

/* Whether a relative external-data path stays inside the model's folder. */
static int safe_location(const char *loc) {
  if (!loc || !*loc || loc[0] == '/')
    return 0;
  for (const char *p = loc; *p;) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.')
      return 0;
    p += len + (e != NULL);
  }
  return 1;
}

/* Reads an external tensor's `bytes` bytes into *out (malloc'd). */
static dm_status read_external(const imp *c, const Onnx__TensorProto *t, size_t bytes,
                               uint8_t **out) {
  const char *loc = NULL;
  long long offset = 0, length = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key || !e->value)
      continue;
    char *end = NULL;
    if (strcmp(e->key, "location") == 0)
      loc = e->value;
    else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
      errno = 0;
      long long v = strtoll(e->value, &end, 10);
      if (errno || end == e->value || *end || v < 0)
        return dm_error(DM_ERR_PARSE, "external data '%s' is '%s'; expected a byte count",
                        e->key, e->value);
      *(strcmp(e->key, "offset") == 0 ? &offset : &length) = v;
    }
  }
  if (!safe_location(loc))
    return dm_error(DM_ERR_INVALID,
                    "external data location '%s' must be a relative path inside the model's "
                    "folder",
                    loc ? loc : "(none)");
  if (length >= 0 && (size_t)length != bytes)
    return dm_error(DM_ERR_PARSE, "external data length %lld; the dims need %zu bytes", length,
                    bytes);
  size_t plen = strlen(c->base_dir) + strlen(loc) + 2;
  char *path = malloc(plen);
  uint8_t *buf = malloc(bytes ? bytes : 1);
  dm_status s = DM_OK;
  FILE *f = NULL;
  if (!path || !buf) {
    s = DM_NOMEM("external data");
    goto cleanup;
  }
  snprintf(path, plen, "%s/%s", c->base_dir, loc);
  f = fopen(path, "rb");
  if (!f) {
    s = dm_error(DM_ERR_IO, "external data '%s': %s", path, dm_errno_text(errno));
    goto cleanup;
  }
  if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(buf, 1, bytes, f) != bytes) {
    s = dm_error(DM_ERR_PARSE, "external data '%s' has no %zu bytes at offset %lld", path, bytes,
                 offset);
    goto cleanup;
  }
  *out = buf;
  buf = NULL;
cleanup:
  if (f)
    fclose(f);
  free(buf);
  free(path);
  return s;
}

/* The tensor's bytes, little-endian and packed: from raw_data, the external file, or
 * the typed field. *owned is set when the caller must free *data. */
static dm_status tensor_bytes(const imp *c, const Onnx__TensorProto *t, int64_t numel,
                              const uint8_t **data, uint8_t **owned) {
  size_t es = elem_size(t->data_type), bytes = (size_t)numel * es;
  *owned = NULL;
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    DM_TRY(read_external(c, t, bytes, owned));
    *data = *owned;
    return DM_OK;
  }
  if (t->has_raw_data) {
    if (t->raw_data.len != bytes)
      return dm_error(DM_ERR_PARSE, "raw_data has %zu bytes; dims and %s need %zu",
                      t->raw_data.len, onnx_dtype_name(t->data_type), bytes);
    *data = t->raw_data.data;
    return DM_OK;
  }
  size_t have;
  const void *src;
  switch (t->data_type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: have = t->n_float_data; src = t->float_data; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: have = t->n_int64_data; src = t->int64_data; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: have = t->n_double_data; src = t->double_data; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: have = t->n_int32_data; src = t->int32_data; break;
  default: {
    /* BOOL, UINT8, INT8 are stored one per int32_data entry. */
    if ((size_t)numel != t->n_int32_data)
      return dm_error(DM_ERR_PARSE, "int32_data has %zu values; dims need %lld", t->n_int32_data,
                      (long long)numel);
    uint8_t *b = malloc(bytes ? bytes : 1);
    if (!b)
      return DM_NOMEM("a tensor");
    for (size_t i = 0; i < bytes; i++)
      b[i] = (uint8_t)t->int32_data[i];
    *data = *owned = b;
    return DM_OK;
  }
  }
  if (have != (size_t)numel)
    return dm_error(DM_ERR_PARSE, "%s has %zu values; dims need %lld",
                    onnx_dtype_name(t->data_type), have, (long long)numel);
  *data = src;
  return DM_OK;
}

/* A GivenTensor*Fill of tensor `t` into blob `name`, appended to the init net. */
static dm_status emit_fill(imp *c, const char *name, const Onnx__TensorProto *t) {
  if (!t->has_data_type)
    return dm_error(DM_ERR_PARSE, "tensor '%s' has no data_type", name);
  size_t es = elem_size(t->data_type);
  const char *fill = NULL;
  switch (t->data_type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: fill = "GivenTensorFill"; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: fill = "GivenTensorInt64Fill"; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: fill = "GivenTensorIntFill"; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: fill = "GivenTensorBoolFill"; break;
  default: break;
  }
  if (!fill || !es)
    return dm_error(DM_ERR_UNSUPPORTED, "tensor '%s' is %s; the importer reads FLOAT, INT64, "
                    "INT32 and BOOL tensors", name, onnx_dtype_name(t->data_type));
  int64_t numel = tensor_numel(t);
  if (numel < 0)
    return dm_error(DM_ERR_LIMIT, "tensor '%s': a negative dim or more than 2^31 elements", name);
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  dm_status s = tensor_bytes(c, t, numel, &data, &owned);
  if (s != DM_OK)
    return dm_error_prefix(s, "tensor '%s'", name);
  dm_opb b;
  dm_opb_start(&b, fill);
  dm_opb_output(&b, name);
  dm_opb_arg_ints(&b, "shape", t->dims, t->n_dims);
  Caffe2__OperatorDef *op = dm_opb_op(&b);
  if (op && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
    float *v = malloc((size_t)numel * sizeof *v + 1);
    if (!v) {
      dm_opb_fail(&b, DM_NOMEM("a tensor's values"));
    } else {
      if (numel > 0) /* an empty tensor may have no data pointer at all */
        memcpy(v, data, (size_t)numel * sizeof *v);
      dm_opb_fail(&b, dm_opdef_set_arg_floats(op, "values", v, (size_t)numel));
      free(v);
    }
  } else if (op) {
    int64_t *v = malloc((size_t)numel * sizeof *v + 1);
    if (!v) {
      dm_opb_fail(&b, DM_NOMEM("a tensor's values"));
    } else {
      for (int64_t i = 0; i < numel; i++) {
        if (es == 8) {
          memcpy(&v[i], data + 8 * i, 8);
        } else if (es == 4) {
          int32_t x;
          memcpy(&x, data + 4 * i, 4);
          v[i] = x;
        } else {
          v[i] = data[i] != 0;
        }
      }
      dm_opb_fail(&b, dm_opdef_set_arg_ints(op, "values", v, (size_t)numel));
      free(v);
    }
  }
  free(owned);
  return dm_opb_append(&b, c->init);
}

/* The int64 values of a constant INT64/INT32 1-D input (the shape of a Reshape...). */
static dm_status const_ints(imp *c, const Onnx__TensorProto *t, int64_t **out, size_t *n) {
  int64_t numel = tensor_numel(t);
  if (numel < 0 || t->n_dims > 1 || (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
                                     t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32))
    return refuse(c, "expected a 1-D INT64 constant");
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  DM_TRY(tensor_bytes(c, t, numel, &data, &owned));
  int64_t *v = malloc((size_t)numel * sizeof *v + 1);
  if (!v) {
    free(owned);
    return DM_NOMEM("a constant");
  }
  for (int64_t i = 0; i < numel; i++) {
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
      memcpy(&v[i], data + 8 * i, 8);
    } else {
      int32_t x;
      memcpy(&x, data + 4 * i, 4);
      v[i] = x;
    }
  }
  free(owned);
  *out = v;
  *n = (size_t)numel;
  return DM_OK;
}

/* ---- translators ----------------------------------------------------------------- */

static dm_status add_external(char ***arr, size_t *n, const char *name) {
  if (dm_str_in_list(name, (const char *const *)*arr, *n))
    return DM_OK;
  return dm_strv_push(arr, n, name);
}

typedef dm_status (*node_fn)(imp *c, const Onnx__NodeProto *n, dm_opb *b);

/* Starts op `type` with the node's first `n_in` inputs (those given) and its outputs. */
static void start(dm_opb *b, const char *type, const Onnx__NodeProto *n, size_t n_in) {
  dm_opb_start(b, type);
  for (size_t i = 0; i < n_in && i < n->n_input; i++)
    if (in_name(n, i))
      dm_opb_input(b, n->input[i]);
  size_t k = n_outputs_used(n);
  for (size_t i = 0; i < k; i++)
    dm_opb_output(b, n->output[i]);
}

static dm_status need_outputs(imp *c, const Onnx__NodeProto *n, size_t max) {
  if (n_outputs_used(n) > max)
    return refuse(c, "only the first %zu output%s supported (it has %zu)", max,
                  max == 1 ? " is" : "s are", n_outputs_used(n));
  if (n_outputs_used(n) == 0)
    return refuse(c, "no output");
  return DM_OK;
}

/* Window arguments shared by Conv and the pools: kernel_shape, strides, pads, dilations,
 * auto_pad. 2-D only, as the Caffe2 ops. */
static dm_status window_args(imp *c, const Onnx__NodeProto *n, dm_opb *b, int is_pool,
                             const int64_t *kernel_dims) {
  size_t nk, ns, np, nd;
  const int64_t *k = attr_ints(n, "kernel_shape", &nk);
  const int64_t *st = attr_ints(n, "strides", &ns);
  const int64_t *p = attr_ints(n, "pads", &np);
  const int64_t *d = attr_ints(n, "dilations", &nd);
  if (!k && kernel_dims) {
    k = kernel_dims;
    nk = 2;
  }
  if (!k)
    return refuse(c, "no kernel_shape and the weights are not an initializer");
  if (nk != 2)
    return refuse(c, "%zu-D; only 2-D windows are supported", nk);
  if ((st && ns != 2) || (p && np != 4) || (d && nd != 2))
    return refuse(c, "strides/pads/dilations do not match a 2-D kernel");
  dm_opb_arg_ints(b, "kernels", k, 2);
  if (st)
    dm_opb_arg_ints(b, "strides", st, 2);
  if (d && (d[0] != 1 || d[1] != 1)) {
    if (is_pool)
      return refuse(c, "dilated pooling is not supported");
    dm_opb_arg_ints(b, "dilations", d, 2);
  }
  int ceil_mode = is_pool && attr_int(n, "ceil_mode", 0) != 0;
  if (attr_str_is(n, "auto_pad", "NOTSET", "NOTSET")) {
    int64_t zero[4] = {0, 0, 0, 0};
    if (!p)
      p = zero;
    if (ceil_mode) {
      /* Caffe's pooling rounds up and drops a last window that starts in the padding,
       * the rule ONNX's ceil_mode follows; it pads both sides alike. */
      if (p[0] != p[2] || p[1] != p[3])
        return refuse(c, "ceil_mode with asymmetric pads");
      dm_opb_arg_int(b, "legacy_pad", 3);
    }
    dm_opb_arg_ints(b, "pads", p, 4); /* ONNX's order is Caffe2's: t, l, b, r */
  } else if (ceil_mode) {
    return refuse(c, "ceil_mode with auto_pad");
  } else if (attr_str_is(n, "auto_pad", "NOTSET", "VALID")) {
    dm_opb_arg_int(b, "legacy_pad", 1);
  } else if (attr_str_is(n, "auto_pad", "NOTSET", "SAME_UPPER")) {
    dm_opb_arg_int(b, "legacy_pad", 2); /* an odd total puts the extra pixel at the end */
  } else {
    return refuse(c, "auto_pad other than NOTSET, VALID, SAME_UPPER");
  }
  return DM_OK;
}

static dm_status tr_conv(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  if (!in_name(n, 0) || !in_name(n, 1))
    return refuse(c, "X and W are required");
  const Onnx__TensorProto *w = const_find(c, in_name(n, 1));
  start(b, "Conv", n, 3);
  if (w && w->n_dims != 4)
    return refuse(c, "weights of rank %zu; only 2-D convolutions are supported", w->n_dims);
  DM_TRY(window_args(c, n, b, 0, w ? w->dims + 2 : NULL));
  int64_t group = attr_int(n, "group", 1);
  if (group != 1)
    dm_opb_arg_int(b, "group", group);
  return DM_OK;
}

static dm_status pool(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type) {
  DM_TRY(need_outputs(c, n, 1));
  if (attr_int(n, "storage_order", 0) != 0)
    return refuse(c, "storage_order 1");
  start(b, type, n, 1);
  DM_TRY(window_args(c, n, b, 1, NULL));
  if (attr_int(n, "count_include_pad", 0) != 0) {
    size_t np;
    const int64_t *p = attr_ints(n, "pads", &np);
    for (size_t i = 0; p && i < np; i++)
      if (p[i])
        return refuse(c, "count_include_pad with padding (the average counts input pixels only)");
    if (!attr_str_is(n, "auto_pad", "NOTSET", "NOTSET") &&
        !attr_str_is(n, "auto_pad", "NOTSET", "VALID"))
      return refuse(c, "count_include_pad with auto_pad SAME");
  }
  return DM_OK;
}

static dm_status tr_maxpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return pool(c, n, b, "MaxPool");
}

static dm_status tr_avgpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return pool(c, n, b, "AveragePool");
}

static dm_status global_pool(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type) {
  DM_TRY(need_outputs(c, n, 1));
  start(b, type, n, 1);
  dm_opb_arg_int(b, "global_pooling", 1);
  return DM_OK;
}

static dm_status tr_gavgpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return global_pool(c, n, b, "AveragePool");
}

static dm_status tr_gmaxpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return global_pool(c, n, b, "MaxPool");
}

/* Ops that map one to one with no arguments (Relu, Identity -> Copy, ...). */
static dm_status plain(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type,
                       size_t n_in) {
  DM_TRY(need_outputs(c, n, 1));
  for (size_t i = 0; i < n_in; i++)
    if (!in_name(n, i))
      return refuse(c, "input %zu is missing", i);
  if (n->n_input > n_in)
    return refuse(c, "%zu inputs; expected %zu", n->n_input, n_in);
  start(b, type, n, n_in);
  return DM_OK;
}

static dm_status tr_relu(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return plain(c, n, b, "Relu", 1);
}

static dm_status tr_identity(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return plain(c, n, b, "Copy", 1);
}

/* Elementwise binary ops. ONNX broadcasts numpy's way; the Caffe2 ops take equal shapes,
 * or (broadcast 1) a B whose dims, leading and trailing 1s dropped, are a run of A's
 * starting at `axis`. That is numpy's rule when B is a constant of rank <= A's with no
 * 1 inside that run, aligned at axis = rank(A) - rank(B); for Add and Mul a constant A
 * is swapped to the B side. Other broadcasts are refused where the ranks say so, and
 * two non-constant inputs of one rank are taken to have equal shapes. */
static dm_status binary(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type,
                        int commutes) {
  if (attr(n, "broadcast"))
    return refuse(c, "the legacy broadcast attribute");
  DM_TRY(need_outputs(c, n, 1));
  if (n->n_input != 2 || !in_name(n, 0) || !in_name(n, 1))
    return refuse(c, "expected 2 inputs");
  const char *x = in_name(n, 0), *y = in_name(n, 1);
  const Onnx__TensorProto *ky = const_find(c, y);
  if (commutes && !ky && const_find(c, x)) {
    const char *t = x;
    x = y;
    y = t;
    ky = const_find(c, y);
  }
  int ra = rank_of(c, x), rb = rank_of(c, y);
  c->out_rank = ra < 0 || rb < 0 ? -1 : ra > rb ? ra : rb;
  dm_opb_start(b, type);
  dm_opb_input(b, x);
  dm_opb_input(b, y);
  dm_opb_output(b, n->output[0]);
  if (ky && tensor_numel(ky) == 1) { /* a scalar: any rank */
    dm_opb_arg_int(b, "broadcast", 1);
    return DM_OK;
  }
  if (ky && ra >= 0 && rb <= ra) {
    size_t lo = 0, hi = ky->n_dims;
    while (lo < hi && ky->dims[lo] == 1)
      lo++;
    while (hi > lo && ky->dims[hi - 1] == 1)
      hi--;
    for (size_t i = lo; i < hi; i++)
      if (ky->dims[i] == 1)
        return refuse(c, "B (%s) broadcasts along a dim inside its shape", y);
    dm_opb_arg_int(b, "broadcast", 1);
    dm_opb_arg_int(b, "axis", ra - rb);
    return DM_OK;
  }
  if (ra >= 0 && rb >= 0 && ra != rb)
    return refuse(c, "a broadcast between ranks %d and %d of a non-constant input", ra, rb);
  return DM_OK;
}

static dm_status tr_add(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Add", 1);
}

static dm_status tr_sub(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Sub", 0);
}

static dm_status tr_mul(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Mul", 1);
}

static dm_status tr_div(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Div", 0);
}

static dm_status tr_dropout(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  if (attr_int(n, "is_test", 1) == 0)
    return refuse(c, "training mode (is_test 0)");
  const char *tm = in_name(n, 2);
  if (tm) {
    const Onnx__TensorProto *t = const_find(c, tm);
    if (!t || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL || tensor_numel(t) != 1)
      return refuse(c, "training_mode is not a constant");
    const uint8_t *data = NULL;
    uint8_t *owned = NULL;
    DM_TRY(tensor_bytes(c, t, 1, &data, &owned));
    int training = data[0] != 0;
    free(owned);
    if (training)
      return refuse(c, "training_mode true");
  }
  start(b, "Copy", n, 1); /* inference: Y = X */
  return DM_OK;
}

static dm_status tr_flatten(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(plain(c, n, b, "Flatten", 1));
  int64_t axis = attr_int(n, "axis", 1);
  int rank = rank_of(c, in_name(n, 0));
  if (axis < 0 && rank >= 0)
    axis += rank; /* opset 11 counts a negative axis from the end */
  if (axis < 0)
    return refuse(c, "a negative axis on a tensor of unknown rank");
  dm_opb_arg_int(b, "axis", axis);
  c->out_rank = 2;
  return DM_OK;
}

static dm_status tr_concat(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  const Onnx__AttributeProto *a = attr(n, "axis");
  if (!a || !a->has_i)
    return refuse(c, "no axis");
  for (size_t i = 0; i < n->n_input; i++)
    if (!in_name(n, i))
      return refuse(c, "an empty input name");
  int64_t axis = a->i;
  int rank = rank_of(c, in_name(n, 0));
  if (axis < 0 && rank >= 0)
    axis += rank;
  if (axis < 0)
    return refuse(c, "a negative axis on tensors of unknown rank");
  start(b, "Concat", n, n->n_input);
  dm_opb_arg_int(b, "axis", axis);
  return DM_OK;
}

/* A new init-net blob "<base><suffix>" for a weight the importer derives: its name, or
 * NULL (out of memory) in *out, which the caller frees. Also an external input of the
 * predict net. */
static dm_status derived_name(imp *c, const char *base, const char *suffix, char **out) {
  size_t len = strlen(base) + strlen(suffix) + 1;
  *out = malloc(len);
  if (!*out)
    return DM_NOMEM("a blob name");
  snprintf(*out, len, "%s%s", base, suffix);
  if (dm_str_in_list(*out, (const char *const *)c->known, c->n_known)) {
    free(*out);
    *out = NULL;
    return refuse(c, "the graph already has a blob '%s%s'", base, suffix);
  }
  DM_TRY(add_external(&c->pred->external_input, &c->pred->n_external_input, *out));
  return dm_strv_push(&c->init->external_output, &c->init->n_external_output, *out);
}

/* Fills blob `name` (init net) with the transpose of the 2-D FLOAT constant `t`: FC's
 * weights are (N, K), a MatMul's or a transB 0 Gemm's B is (K, N). */
static dm_status fill_transposed(imp *c, const char *name, const Onnx__TensorProto *t) {
  int64_t numel = tensor_numel(t);
  if (t->n_dims != 2 || numel < 0 || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
    return refuse(c, "B is not a 2-D FLOAT constant");
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  DM_TRY(tensor_bytes(c, t, numel, &data, &owned));
  int64_t k = t->dims[0], n = t->dims[1], dims[2] = {n, k};
  float *v = malloc((size_t)numel * sizeof *v + 1);
  dm_opb b;
  dm_opb_start(&b, "GivenTensorFill");
  if (!v)
    dm_opb_fail(&b, DM_NOMEM("transposed weights"));
  for (int64_t i = 0; v && i < k; i++)
    for (int64_t j = 0; j < n; j++)
      memcpy(&v[j * k + i], data + 4 * (i * n + j), 4);
  dm_opb_output(&b, name);
  dm_opb_arg_ints(&b, "shape", dims, 2);
  if (dm_opb_op(&b) && v)
    dm_opb_fail(&b, dm_opdef_set_arg_floats(dm_opb_op(&b), "values", v, (size_t)numel));
  free(v);
  free(owned);
  return dm_opb_append(&b, c->init);
}

/* Fills blob `name` with N zeros (FC's bias where ONNX has none). */
static dm_status fill_zeros(imp *c, const char *name, int64_t N) {
  dm_opb b;
  dm_opb_start(&b, "ConstantFill");
  dm_opb_output(&b, name);
  dm_opb_arg_ints(&b, "shape", &N, 1);
  dm_opb_arg_float(&b, "value", 0.0f);
  return dm_opb_append(&b, c->init);
}

/* FC(X, W, bias) for a node whose B is `b_name`, (N, K) when `b_is_nk`, else a (K, N)
 * constant transposed here; a missing bias is zeros (N from a constant B). */
static dm_status as_fc(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *b_name,
                       int b_is_nk, const char *bias_name, int64_t axis) {
  const Onnx__TensorProto *kb = const_find(c, b_name);
  char *w = NULL, *zb = NULL;
  if (!b_is_nk && !kb)
    return refuse(c, "B is (K, N) and not a constant (FC takes (N, K) weights)");
  if (kb && kb->n_dims != 2)
    return refuse(c, "B of rank %zu", kb->n_dims);
  if (!bias_name && !kb)
    return refuse(c, "no bias and B is not a constant (its size is unknown)");
  dm_status s = DM_OK;
  if (!b_is_nk && (s = derived_name(c, b_name, "_transposed", &w)) == DM_OK)
    s = fill_transposed(c, w, kb);
  if (s == DM_OK && !bias_name &&
      (s = derived_name(c, n->output[0], "_zero_bias", &zb)) == DM_OK)
    s = fill_zeros(c, zb, b_is_nk ? kb->dims[0] : kb->dims[1]);
  if (s == DM_OK) {
    dm_opb_start(b, "FC");
    dm_opb_input(b, in_name(n, 0));
    dm_opb_input(b, w ? w : b_name);
    dm_opb_input(b, zb ? zb : bias_name);
    dm_opb_output(b, n->output[0]);
    if (axis != 1)
      dm_opb_arg_int(b, "axis", axis);
  }
  free(w);
  free(zb);
  return s;
}

/* Gemm as FC: Y = A B^T + C with B as (N, K), which is how exporters write a Linear;
 * a constant B given as (K, N) (transB 0) is transposed at import. */
static dm_status tr_gemm(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  if (attr_int(n, "transA", 0) != 0)
    return refuse(c, "transA 1");
  if (attr_float(n, "alpha", 1.0f) != 1.0f || attr_float(n, "beta", 1.0f) != 1.0f)
    return refuse(c, "alpha or beta other than 1");
  if (!in_name(n, 0) || !in_name(n, 1))
    return refuse(c, "A and B are required");
  const Onnx__TensorProto *bias = const_find(c, in_name(n, 2));
  if (bias && bias->n_dims != 1)
    return refuse(c, "C of rank %zu; only a 1-D bias is supported", bias->n_dims);
  c->out_rank = 2;
  return as_fc(c, n, b, in_name(n, 1), attr_int(n, "transB", 0) != 0, in_name(n, 2), 1);
}

/* MatMul by a constant matrix as FC along A's last axis (FC flattens the leading ones). */
static dm_status tr_matmul(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  if (!in_name(n, 0) || !in_name(n, 1) || n->n_input != 2)
    return refuse(c, "expected 2 inputs");
  int ra = rank_of(c, in_name(n, 0));
  if (ra < 2)
    return refuse(c, "A of %s rank (2 or more is supported)", ra < 0 ? "unknown" : "lower");
  if (!const_find(c, in_name(n, 1)))
    return refuse(c, "B is not a constant");
  c->out_rank = ra;
  return as_fc(c, n, b, in_name(n, 1), 0, NULL, ra - 1);
}

static dm_status tr_batchnorm(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  if (attr_int(n, "training_mode", 0) != 0)
    return refuse(c, "training mode");
  if (attr_int(n, "spatial", 1) == 0)
    return refuse(c, "spatial 0 (statistics per element, not per channel)");
  for (size_t i = 0; i < 5; i++)
    if (!in_name(n, i))
      return refuse(c, "input %zu is missing", i);
  start(b, "SpatialBN", n, 5);
  dm_opb_arg_int(b, "is_test", 1);
  dm_opb_arg_float(b, "epsilon", attr_float(n, "epsilon", 1e-5f));
  return DM_OK;
}

static dm_status tr_softmax(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(plain(c, n, b, "Softmax", 1));
  /* Before opset 13 Softmax flattens to 2-D at `axis` (default 1), which is Caffe2's
   * rule; from 13 it normalises along the one axis (default -1), the same only when
   * that is the last. */
  int64_t axis = attr_int(n, "axis", c->opset >= 13 ? -1 : 1);
  int rank = rank_of(c, in_name(n, 0));
  if (c->opset >= 13 && axis != -1 && !(rank > 0 && axis == rank - 1))
    return refuse(c, "Softmax along axis %lld of a tensor of %s rank (only the last axis is "
                  "supported)", (long long)axis, rank < 0 ? "unknown" : "another");
  if (c->opset >= 13)
    axis = -1;
  dm_opb_arg_int(b, "axis", axis);
  return DM_OK;
}

static dm_status tr_reshape(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  if (!in_name(n, 0))
    return refuse(c, "no data input");
  int64_t *shape = NULL;
  size_t ns = 0;
  if (c->opset < 5) {
    const int64_t *s = attr_ints(n, "shape", &ns);
    start(b, "Reshape", n, 1);
    dm_opb_arg_ints(b, "shape", s, ns);
    c->out_rank = (int)ns;
    return DM_OK;
  }
  if (!in_name(n, 1))
    return refuse(c, "no shape input");
  const Onnx__TensorProto *t = const_find(c, in_name(n, 1));
  if (!t)
    return refuse(c, "the shape is computed in the graph (only a constant shape is supported)");
  DM_TRY(const_ints(c, t, &shape, &ns));
  int zero = 0;
  for (size_t i = 0; i < ns; i++)
    zero |= shape[i] == 0;
  if (zero && attr_int(n, "allowzero", 0) != 0) {
    free(shape);
    return refuse(c, "allowzero with a 0 in the shape");
  }
  start(b, "Reshape", n, 1); /* the shape goes in as an argument; 0 keeps a dim in both */
  dm_opb_arg_ints(b, "shape", shape, ns);
  free(shape);
  c->out_rank = (int)ns;
  return DM_OK;
}

static dm_status tr_sum(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(need_outputs(c, n, 1));
  for (size_t i = 0; i < n->n_input; i++)
    if (!in_name(n, i))
      return refuse(c, "an empty input name");
  if (n->n_input == 0)
    return refuse(c, "no inputs");
  start(b, "Sum", n, n->n_input); /* equal shapes, as Add */
  return DM_OK;
}

static dm_status tr_transpose(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(plain(c, n, b, "Transpose", 1));
  size_t k;
  const int64_t *perm = attr_ints(n, "perm", &k);
  if (perm)
    dm_opb_arg_ints(b, "axes", perm, k); /* absent: reversed, in both */
  return DM_OK;
}

/* LRN across channels: ONNX's formula is Caffe2's (alpha divided by size); ONNX's
 * defaults differ from the op's, so all four are written. */
static dm_status tr_lrn(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(plain(c, n, b, "LRN", 1));
  const Onnx__AttributeProto *size = attr(n, "size");
  if (!size || !size->has_i)
    return refuse(c, "no size");
  dm_opb_arg_int(b, "size", size->i);
  dm_opb_arg_float(b, "alpha", attr_float(n, "alpha", 1e-4f));
  dm_opb_arg_float(b, "beta", attr_float(n, "beta", 0.75f));
  dm_opb_arg_float(b, "bias", attr_float(n, "bias", 1.0f));
  return DM_OK;
}

static dm_status tr_cast(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(plain(c, n, b, "Cast", 1));
  /* The element types both sides know, by the name the Cast op reads. */
  static const int32_t ok[] = {
      ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
      ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
      ONNX__TENSOR_PROTO__DATA_TYPE__INT64, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
      ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, ONNX__TENSOR_PROTO__DATA_TYPE__INT8};
  int64_t to = attr_int(n, "to", -1);
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (to == ok[i]) {
      dm_opb_arg_string(b, "to", onnx_dtype_name(ok[i]));
      return DM_OK;
    }
  return refuse(c, "to %s", onnx_dtype_name((int32_t)to));
}

static dm_status tr_split(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  size_t n_out = n_outputs_used(n);
  if (!in_name(n, 0) || n_out == 0)
    return refuse(c, "no input or no outputs");
  for (size_t i = 0; i < n_out; i++)
    if (!n->output[i][0])
      return refuse(c, "an empty output name");
  int64_t *sizes = NULL;
  size_t ns = 0;
  if (c->opset < 13) {
    const int64_t *v = attr_ints(n, "split", &ns);
    if (v) {
      sizes = malloc(ns * sizeof *sizes + 1);
      if (!sizes)
        return DM_NOMEM("split sizes");
      memcpy(sizes, v, ns * sizeof *sizes);
    }
  } else if (in_name(n, 1)) {
    const Onnx__TensorProto *t = const_find(c, in_name(n, 1));
    if (!t)
      return refuse(c, "the split sizes are computed in the graph");
    DM_TRY(const_ints(c, t, &sizes, &ns));
  } else if (attr(n, "num_outputs") && attr_int(n, "num_outputs", 0) != (int64_t)n_out) {
    return refuse(c, "num_outputs differs from the outputs given");
  }
  if (sizes && ns != n_out) {
    free(sizes);
    return refuse(c, "%zu split sizes for %zu outputs", ns, n_out);
  }
  int64_t axis = attr_int(n, "axis", 0);
  int rank = rank_of(c, in_name(n, 0));
  if (axis < 0 && rank >= 0)
    axis += rank;
  if (axis < 0) {
    free(sizes);
    return refuse(c, "a negative axis on a tensor of unknown rank");
  }
  start(b, "Split", n, 1); /* without sizes, both cut into equal parts */
  dm_opb_arg_int(b, "axis", axis);
  if (sizes)
    dm_opb_arg_ints(b, "split", sizes, ns);
  free(sizes);
  return DM_OK;
}

static dm_status tr_constant(imp *c, const Onnx__NodeProto *n, dm_opb *b);

/* ONNX op type -> translator. A translator that leaves the builder unstarted (Constant)
 * adds nothing to the predict net. */
static const struct {
  const char *op_type;
  node_fn fn;
} translators[] = {
    {"Constant", tr_constant},
    {"Conv", tr_conv},
    {"MaxPool", tr_maxpool},
    {"AveragePool", tr_avgpool},
    {"GlobalAveragePool", tr_gavgpool},
    {"GlobalMaxPool", tr_gmaxpool},
    {"Relu", tr_relu},
    {"Identity", tr_identity},
    {"Dropout", tr_dropout},
    {"Add", tr_add},
    {"Sub", tr_sub},
    {"Mul", tr_mul},
    {"Div", tr_div},
    {"Flatten", tr_flatten},
    {"Concat", tr_concat},
    {"Gemm", tr_gemm},
    {"MatMul", tr_matmul},
    {"BatchNormalization", tr_batchnorm},
    {"Softmax", tr_softmax},
    {"Reshape", tr_reshape},
    {"Sum", tr_sum},
    {"Transpose", tr_transpose},
    {"LRN", tr_lrn},
    {"Cast", tr_cast},
    {"Split", tr_split},
    {NULL, NULL},
};

/* ---- Constant -------------------------------------------------------------------- */

/* A Constant node's value goes to the init net like an initializer, and is known to
 * the translators that need constant inputs (Reshape's shape). */
static dm_status tr_constant(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  (void)b;
  DM_TRY(need_outputs(c, n, 1));
  const Onnx__AttributeProto *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
  if (!a || !a->name)
    return refuse(c, "expected exactly one value attribute");
  if (strcmp(a->name, "value") == 0 && a->t) {
    DM_TRY(emit_fill(c, n->output[0], a->t));
    c->out_rank = (int)a->t->n_dims;
    return const_add(c, n->output[0], a->t);
  }
  int is_list = strcmp(a->name, "value_floats") == 0 || strcmp(a->name, "value_ints") == 0;
  int is_float = strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_floats") == 0;
  int is_int = strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0;
  if (!is_float && !is_int)
    return refuse(c, "a Constant given by '%s'", a->name);
  Onnx__TensorProto **list = realloc(c->made, (c->n_made + 1) * sizeof *list);
  if (!list)
    return DM_NOMEM("a constant");
  c->made = list;
  Onnx__TensorProto *t = malloc(sizeof *t);
  if (!t)
    return DM_NOMEM("a constant");
  onnx__tensor_proto__init(t);
  c->made[c->n_made++] = t;
  t->has_data_type = 1;
  t->data_type = is_float ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  if (is_list) {
    t->dims = malloc(sizeof *t->dims);
    if (!t->dims)
      return DM_NOMEM("a constant");
    t->n_dims = 1;
    t->dims[0] = (int64_t)(is_float ? a->n_floats : a->n_ints);
  }
  if (is_float) {
    t->n_float_data = is_list ? a->n_floats : 1;
    t->float_data = is_list ? a->floats : (float *)&a->f;
  } else {
    t->n_int64_data = is_list ? a->n_ints : 1;
    t->int64_data = is_list ? a->ints : (int64_t *)&a->i;
  }
  DM_TRY(emit_fill(c, n->output[0], t));
  c->out_rank = (int)t->n_dims;
  return const_add(c, n->output[0], t);
}

/* ---- the driver ------------------------------------------------------------------ */

static int is_default_domain(const char *d) {
  return !d || !*d || strcmp(d, "ai.onnx") == 0;
}


static dm_status translate_graph(imp *c) {
  const Onnx__GraphProto *g = c->g;
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    if (!t->name || !*t->name)
      return dm_error(DM_ERR_PARSE, "initializer %zu has no name", i);
    DM_TRY(emit_fill(c, t->name, t));
    DM_TRY(const_add(c, t->name, t));
    DM_TRY(dm_strv_push(&c->init->external_output, &c->init->n_external_output, t->name));
  }
  if (g->n_sparse_initializer)
    return dm_error(DM_ERR_UNSUPPORTED, "sparse initializers are not supported");

  char *report = NULL;
  size_t report_len = 0, n_refused = 0;
  dm_status s = DM_OK;
  for (size_t i = 0; i < g->n_input && s == DM_OK; i++) {
    const Onnx__TypeProto *ty = g->input[i]->type;
    int rank = ty && ty->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                       ty->tensor_type->shape
                   ? (int)ty->tensor_type->shape->n_dim
                   : -1;
    if (g->input[i]->name)
      s = known_add(c, g->input[i]->name, rank);
  }
  for (size_t i = 0; i < g->n_initializer && s == DM_OK; i++)
    s = known_add(c, g->initializer[i]->name, (int)g->initializer[i]->n_dims);

  for (size_t i = 0; i < g->n_node && s == DM_OK; i++) {
    const Onnx__NodeProto *n = g->node[i];
    const char *type = n->op_type ? n->op_type : "";
    const char *name = n->name ? n->name : "";
    /* An input no earlier node, input or initializer defines: a missing initializer, or
     * a graph that is not in topological order (a cycle). */
    for (size_t j = 0; j < n->n_input && s == DM_OK; j++)
      if (in_name(n, j) && !dm_str_in_list(n->input[j], (const char *const *)c->known, c->n_known))
        s = dm_error(DM_ERR_INVALID,
                     "node %zu (%s '%s'): input '%s' is not a graph input, an initializer or "
                     "an output of an earlier node (a missing initializer, or nodes out of "
                     "order)",
                     i, type, name, n->input[j]);
    if (s != DM_OK)
      break;
    c->why[0] = '\0';
    c->out_rank = rank_of(c, in_name(n, 0));
    dm_status r = REFUSED;
    if (!is_default_domain(n->domain)) {
      snprintf(c->why, sizeof c->why, "domain '%s' is not supported", n->domain);
    } else {
      size_t k = 0;
      while (translators[k].op_type && strcmp(translators[k].op_type, type) != 0)
        k++;
      if (!translators[k].op_type) {
        snprintf(c->why, sizeof c->why, "no translation for this op");
      } else {
        dm_opb b;
        b.op = NULL;
        b.s = DM_OK;
        r = translators[k].fn(c, n, &b);
        if (r == DM_OK) {
          if (name[0] && b.op && !b.op->name) {
            b.op->name = strdup(name);
            if (!b.op->name)
              dm_opb_fail(&b, DM_NOMEM("an op name"));
          }
          r = b.op || b.s != DM_OK ? dm_opb_append(&b, c->pred) : DM_OK;
        } else if (b.op) {
          dm_opb_discard(&b);
        }
      }
    }
    if (r == REFUSED && c->why[0]) {
      n_refused++;
      dm_text_appendf(&report, &report_len, "\n  node %zu '%s': %s (domain '%s', opset %lld): %s",
                      i, name, type, is_default_domain(n->domain) ? "ai.onnx" : n->domain,
                      (long long)c->opset, c->why);
    } else if (r != DM_OK) {
      s = dm_error_prefix(r, "node %zu (%s '%s')", i, type, name);
      break;
    }
    for (size_t j = 0; j < n->n_output && s == DM_OK; j++)
      if (n->output[j] && n->output[j][0])
        s = known_add(c, n->output[j], c->out_rank);
  }
  if (s == DM_OK && n_refused)
    s = dm_error(DM_ERR_UNSUPPORTED, "%zu of %zu nodes cannot be imported:%s", n_refused,
                 g->n_node, report ? report : "");
  for (size_t i = 0; i < g->n_output && s == DM_OK; i++) {
    const char *o = g->output[i]->name;
    if (!o || !dm_str_in_list(o, (const char *const *)c->known, c->n_known))
      s = dm_error(DM_ERR_INVALID, "graph output '%s' is not produced by any node",
                   o ? o : "(no name)");
    else
      s = add_external(&c->pred->external_output, &c->pred->n_external_output, o);
  }
  /* External inputs: the graph's inputs (fed), then the constants the net reads. */
  for (size_t i = 0; i < g->n_input && s == DM_OK; i++)
    s = add_external(&c->pred->external_input, &c->pred->n_external_input, g->input[i]->name);
  for (size_t i = 0; i < c->n_consts && s == DM_OK; i++)
    s = add_external(&c->pred->external_input, &c->pred->n_external_input, c->const_names[i]);
  free(report);
  return s;
}

dm_status dm_onnx_import(const Onnx__ModelProto *model, const char *base_dir,
                         Caffe2__NetDef **init, Caffe2__NetDef **predict) {
  if (!model || !init || !predict)
    return dm_error(DM_ERR_INVALID, "dm_onnx_import: NULL argument");
  *init = *predict = NULL;
  if (!model->graph)
    return dm_error(DM_ERR_PARSE, "the model has no graph");
  imp c;
  memset(&c, 0, sizeof c);
  c.g = model->graph;
  c.base_dir = base_dir ? base_dir : ".";
  c.opset = -1;
  for (size_t i = 0; i < model->n_opset_import; i++)
    if (is_default_domain(model->opset_import[i]->domain) && model->opset_import[i]->has_version)
      c.opset = model->opset_import[i]->version;
  if (c.opset < 0)
    return dm_error(DM_ERR_PARSE, "the model imports no version of the default (ai.onnx) opset");
  if (c.opset < OPSET_MIN || c.opset > OPSET_MAX)
    return dm_error(DM_ERR_UNSUPPORTED, "opset %lld; the importer reads opsets %d to %d",
                    (long long)c.opset, OPSET_MIN, OPSET_MAX);
  const char *gname = model->graph->name && *model->graph->name ? model->graph->name : "onnx";
  dm_status s = dm_netdef_new(gname, &c.init);
  if (s == DM_OK)
    s = dm_netdef_new(gname, &c.pred);
  if (s == DM_OK)
    s = translate_graph(&c);
  for (size_t i = 0; i < c.n_made; i++) {
    free(c.made[i]->dims);
    free(c.made[i]);
  }
  free(c.made);
  free(c.consts);
  free(c.const_names);
  for (size_t i = 0; i < c.n_known; i++)
    free(c.known[i]);
  free(c.known);
  free(c.ranks);
  if (s != DM_OK) {
    if (c.init)
      protobuf_c_message_free_unpacked(&c.init->base, NULL);
    if (c.pred)
      protobuf_c_message_free_unpacked(&c.pred->base, NULL);
    return s;
  }
  *init = c.init;
  *predict = c.pred;
  return DM_OK;
}

dm_status dm_onnx_import_file(const char *path, Caffe2__NetDef **init, Caffe2__NetDef **predict) {
  ProtobufCMessage *m = NULL;
  DM_TRY(dm_message_read_file(path, &onnx__model_proto__descriptor, DM_FORMAT_BINARY, &m));
  char *dir = strdup(path);
  if (!dir) {
    protobuf_c_message_free_unpacked(m, NULL);
    return DM_NOMEM("a path");
  }
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  dm_status s = dm_onnx_import((const Onnx__ModelProto *)m, slash ? dir : ".", init, predict);
  if (s != DM_OK)
    dm_error_prefix(s, "%s", path);
  free(dir);
  protobuf_c_message_free_unpacked(m, NULL);
  return s;
}

int dm_onnx_is_model_path(const char *path) {
  size_t n = path ? strlen(path) : 0;
  return n > 5 && strcasecmp(path + n - 5, ".onnx") == 0;
}
