/* translate.c: the helpers the ONNX translators share (see net/onnx/translate.h):
 * attributes, constant tensors (raw, typed or external data), init-net fills, and the
 * op builder's common starts.
 */
#include "net/onnx/translate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "net/shape_infer.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; the importer reads it in place on little-endian hosts only"
#endif

int ox_rank_of(const imp *c, const char *name) {
  for (size_t i = c->n_known; name && i-- > 0;)
    if (strcmp(c->known[i], name) == 0)
      return c->ranks[i];
  return -1;
}

dm_status ox_known_add(imp *c, const char *name, int rank) {
  int *r = realloc(c->ranks, (c->n_known + 1) * sizeof *r);
  if (!r)
    return DM_NOMEM("the importer's name table");
  c->ranks = r;
  DM_TRY(dm_strv_push(&c->known, &c->n_known, name));
  c->ranks[c->n_known - 1] = rank;
  return DM_OK;
}

dm_status ox_refuse(imp *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  return OX_REFUSED;
}

/* ---- attributes ------------------------------------------------------------------ */

const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
      return n->attribute[i];
  return NULL;
}

int64_t ox_attr_int(const Onnx__NodeProto *n, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  return a && a->has_i ? a->i : def;
}

float ox_attr_float(const Onnx__NodeProto *n, const char *name, float def) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  return a && a->has_f ? a->f : def;
}

/* The ints of `name` (NULL, *count 0 if absent). */
const int64_t *ox_attr_ints(const Onnx__NodeProto *n, const char *name, size_t *count) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  *count = a ? a->n_ints : 0;
  return a ? a->ints : NULL;
}

/* Whether string attribute `name` equals `v` (absent: equals `def`). */
int ox_attr_str_is(const Onnx__NodeProto *n, const char *name, const char *def, const char *v) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  if (!a || !a->has_s)
    return strcmp(def, v) == 0;
  return a->s.len == strlen(v) && memcmp(a->s.data, v, a->s.len) == 0;
}

/* Input i, or NULL when absent or "" (an omitted optional input). */
const char *ox_in_name(const Onnx__NodeProto *n, size_t i) {
  return i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

size_t ox_n_outputs_used(const Onnx__NodeProto *n) {
  size_t k = 0;
  for (size_t i = 0; i < n->n_output; i++)
    if (n->output[i] && n->output[i][0])
      k = i + 1;
  return k;
}

/* ---- constants ------------------------------------------------------------------- */

const Onnx__TensorProto *ox_const_find(const imp *c, const char *name) {
  for (size_t i = c->n_consts; name && i-- > 0;)
    if (strcmp(c->const_names[i], name) == 0)
      return c->consts[i];
  return NULL;
}

dm_status ox_const_add(imp *c, const char *name, const Onnx__TensorProto *t) {
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
  /* A constant's shape is static (a type we do not hold simply stays unknown). */
  int64_t numel = ox_tensor_numel(t);
  dm_dtype dt = t->has_data_type ? ox_dm_dtype(t->data_type) : DM_UNDEFINED;
  if (numel < 0 || dt == DM_UNDEFINED || t->n_dims > DM_MAX_DIMS)
    return DM_OK;
  return ox_shape_set(c, name, dt, (int)t->n_dims, t->dims);
}

/* ---- static shapes ----------------------------------------------------------------- */

dm_dtype ox_dm_dtype(int32_t onnx_type) {
  switch (onnx_type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return DM_FLOAT;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return DM_FLOAT16;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return DM_BFLOAT16;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return DM_DOUBLE;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return DM_INT64;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return DM_INT32;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return DM_INT16;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return DM_INT8;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return DM_UINT8;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return DM_UINT16;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return DM_BOOL;
  default: return DM_UNDEFINED;
  }
}

int ox_shape_of(const imp *c, const char *name, int64_t *dims) {
  const dm_tensor *t = c->ws && name ? dm_workspace_tensor(c->ws, name) : NULL;
  if (!t || t->dtype == DM_UNDEFINED)
    return -1;
  memcpy(dims, t->dims, (size_t)t->ndim * sizeof *dims);
  return t->ndim;
}

dm_status ox_shape_set(imp *c, const char *name, dm_dtype dtype, int rank, const int64_t *dims) {
  dm_blob *blob = NULL;
  DM_TRY(dm_workspace_get_or_create(c->ws, name, &blob));
  return dm_tensor_set_shape(blob->tensor, dtype, rank, dims);
}

/* Runs `op`'s schema inference alone over the shapes in c->ws. */
static dm_status infer_one(imp *c, const Caffe2__OperatorDef *op) {
  Caffe2__NetDef *net = NULL;
  Caffe2__OperatorDef *copy = NULL;
  DM_TRY(dm_netdef_new("onnx-shapes", &net));
  dm_status s = DM_PB_CLONE(Caffe2__OperatorDef, op, &copy);
  if (s == DM_OK)
    s = dm_netdef_append_op(net, copy); /* the net owns it, even on failure */
  if (s == DM_OK)
    s = dm_infer_net_shapes(c->ws, net, "onnx import", NULL, NULL, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  return s;
}

/* The init-net op that writes `name` (a weight a translator derived: transposed, zero
 * bias), or NULL. */
static const Caffe2__OperatorDef *init_writer(const imp *c, const char *name) {
  for (size_t i = c->init->n_op; i-- > 0;)
    if (dm_opdef_writes(c->init->op[i], name))
      return c->init->op[i];
  return NULL;
}

dm_status ox_infer_op(imp *c, const Caffe2__OperatorDef *op) {
  int64_t dims[DM_MAX_DIMS];
  for (size_t i = 0; i < op->n_input; i++) {
    if (ox_shape_of(c, op->input[i], dims) >= 0)
      continue;
    /* a weight derived at import: its fill's own inference gives its shape */
    const Caffe2__OperatorDef *w = init_writer(c, op->input[i]);
    if (!w || w->n_input || infer_one(c, w) != DM_OK || ox_shape_of(c, op->input[i], dims) < 0) {
      dm_error_clear();
      return DM_OK; /* an input of unknown shape: the outputs' shapes are unknown */
    }
  }
  const dm_op_schema *schema = dm_schema_lookup(op->type);
  if (!schema || !schema->infer)
    return DM_OK; /* nothing to ask: its outputs' shapes are unknown */
  dm_status s = infer_one(c, op);
  if (s == DM_ERR_NOMEM)
    return s;
  if (s != DM_OK && s != DM_ERR_NOT_FOUND) {
    /* The op's own checks refuse its arguments, or the shapes or types the graph
     * declares (zero strides, a broadcast the Caffe2 op does not do, a dilated grouped
     * Conv no kernel runs, a Reshape past any tensor's size): `run` would refuse the net,
     * so the node cannot be translated as it is. */
    const char *msg = dm_last_error(), *tail = strstr(msg, "): ");
    dm_status r = ox_refuse(c, "%s refuses the arguments and shapes known at import: %s",
                            op->type, tail ? tail + 3 : msg);
    dm_error_clear();
    return r;
  }
  if (s != DM_OK) {
    /* DM_ERR_NOT_FOUND: what its inference needs is not known here (an input's values,
     * read at run time): its outputs' shapes are unknown. */
    dm_error_clear();
    for (size_t i = 0; i < op->n_output; i++) {
      dm_blob *b = dm_workspace_find(c->ws, op->output[i]);
      if (b)
        dm_tensor_reset(b->tensor);
    }
  }
  return DM_OK;
}

dm_status ox_made_tensor(imp *c, int32_t onnx_type, int rank, const int64_t *dims,
                         const void *data, size_t bytes, Onnx__TensorProto **out) {
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
  t->data_type = onnx_type;
  t->dims = malloc((size_t)rank * sizeof *t->dims + 1);
  t->raw_data.data = malloc(bytes + 1);
  if (!t->dims || !t->raw_data.data)
    return DM_NOMEM("a constant");
  t->n_dims = (size_t)rank;
  if (rank)
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  t->has_raw_data = 1;
  t->raw_data.len = bytes;
  if (bytes)
    memcpy(t->raw_data.data, data, bytes);
  *out = t;
  return DM_OK;
}

int64_t ox_tensor_numel(const Onnx__TensorProto *t) {
  int64_t n = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0 || (t->dims[i] && n > OX_NUMEL_MAX / t->dims[i]))
      return -1;
    n *= t->dims[i];
  }
  return n;
}

const char *ox_dtype_name(int32_t t) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&onnx__tensor_proto__data_type__descriptor, t);
  return v ? v->name : "an unknown data type";
}

size_t ox_elem_size(int32_t t) {
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

/* Opens external-data file `loc` of the model in `base_dir` for reading: the path as
 * the kernel resolves it (symlinks included) must lie under the model's folder as it
 * resolves, and be a regular file. Opened O_NONBLOCK so that a FIFO swapped in after
 * the check cannot block, and O_NOFOLLOW against a last component swapped for a link.
 * *fd and *size on success; *resolved (malloc'd, for messages) always, or NULL. */
static dm_status open_external(const char *base_dir, const char *loc, int *fd, off_t *size,
                               char **resolved) {
  *fd = -1;
  *resolved = NULL;
  size_t plen = strlen(base_dir) + strlen(loc) + 2;
  char *path = malloc(plen), *root = NULL;
  dm_status s = DM_OK;
  if (!path) {
    s = DM_NOMEM("external data");
    goto cleanup;
  }
  snprintf(path, plen, "%s/%s", base_dir, loc);
  root = realpath(base_dir, NULL);
  if (!root) {
    s = dm_error(DM_ERR_IO, "external data '%s': the model's folder '%s': %s", loc, base_dir,
                 dm_errno_text(errno));
    goto cleanup;
  }
  *resolved = realpath(path, NULL);
  if (!*resolved) {
    s = dm_error(errno == ENOENT ? DM_ERR_NOT_FOUND : DM_ERR_IO, "external data '%s': %s", path,
                 dm_errno_text(errno));
    goto cleanup;
  }
  size_t rl = strlen(root);
  int under = strcmp(root, "/") == 0 ||
              (strncmp(*resolved, root, rl) == 0 && (*resolved)[rl] == '/');
  if (!under) {
    s = dm_error(DM_ERR_INVALID,
                 "external data location '%s' resolves to '%s', outside the model's folder "
                 "'%s'",
                 loc, *resolved, root);
    goto cleanup;
  }
  *fd = open(*resolved, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (*fd < 0) {
    s = dm_error(DM_ERR_IO, "external data '%s': %s", *resolved, dm_errno_text(errno));
    goto cleanup;
  }
  struct stat st;
  if (fstat(*fd, &st) != 0) {
    s = dm_error(DM_ERR_IO, "external data '%s': %s", *resolved, dm_errno_text(errno));
    goto cleanup;
  }
  if (!S_ISREG(st.st_mode)) {
    s = dm_error(DM_ERR_INVALID, "external data '%s' is %s; it must be a regular file",
                 *resolved, dm_file_kind(st.st_mode));
    goto cleanup;
  }
  *size = st.st_size;
cleanup:
  if (s != DM_OK && *fd >= 0) {
    close(*fd);
    *fd = -1;
  }
  free(root);
  free(path);
  return s;
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
  int fd = -1;
  off_t size = 0;
  char *real = NULL;
  uint8_t *buf = NULL;
  dm_status s = open_external(c->base_dir, loc, &fd, &size, &real);
  if (s != DM_OK)
    goto cleanup;
  if ((unsigned long long)offset > (unsigned long long)size ||
      (unsigned long long)size - (unsigned long long)offset < bytes) {
    s = dm_error(DM_ERR_PARSE, "external data '%s' has no %zu bytes at offset %lld", real, bytes,
                 offset);
    goto cleanup;
  }
  buf = malloc(bytes ? bytes : 1);
  if (!buf) {
    s = DM_NOMEM("external data");
    goto cleanup;
  }
  for (size_t got = 0; got < bytes;) {
    ssize_t r = pread(fd, buf + got, bytes - got, (off_t)offset + (off_t)got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      s = r < 0 ? dm_error(DM_ERR_IO, "external data '%s': %s", real, dm_errno_text(errno))
                : dm_error(DM_ERR_PARSE, "external data '%s' has no %zu bytes at offset %lld",
                           real, bytes, offset);
      goto cleanup;
    }
    got += (size_t)r;
  }
  *out = buf;
  buf = NULL;
cleanup:
  if (fd >= 0)
    close(fd);
  free(buf);
  free(real);
  return s;
}

/* The tensor's bytes, little-endian and packed: from raw_data, the external file, or
 * the typed field. *owned is set when the caller must free *data. */
dm_status ox_tensor_bytes(const imp *c, const Onnx__TensorProto *t, int64_t numel,
                              const uint8_t **data, uint8_t **owned) {
  size_t es = ox_elem_size(t->data_type), bytes = (size_t)numel * es;
  *owned = NULL;
  if (!es) /* no reader for its values: none may be taken as bytes of another size */
    return dm_error(DM_ERR_UNSUPPORTED, "the values of a %s tensor are not read here",
                    ox_dtype_name(t->data_type));
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    DM_TRY(read_external(c, t, bytes, owned));
    *data = *owned;
    return DM_OK;
  }
  if (t->has_raw_data) {
    if (t->raw_data.len != bytes)
      return dm_error(DM_ERR_PARSE, "raw_data has %zu bytes; dims and %s need %zu",
                      t->raw_data.len, ox_dtype_name(t->data_type), bytes);
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
                    ox_dtype_name(t->data_type), have, (long long)numel);
  *data = src;
  return DM_OK;
}

/* A GivenTensor*Fill of tensor `t` into blob `name`, appended to the init net. */
dm_status ox_emit_fill(imp *c, const char *name, const Onnx__TensorProto *t) {
  if (!t->has_data_type)
    return dm_error(DM_ERR_PARSE, "tensor '%s' has no data_type", name);
  size_t es = ox_elem_size(t->data_type);
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
                    "INT32 and BOOL tensors", name, ox_dtype_name(t->data_type));
  int64_t numel = ox_tensor_numel(t);
  if (numel < 0)
    return dm_error(DM_ERR_LIMIT, "tensor '%s': a negative dim or more than 2^31 elements", name);
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  dm_status s = ox_tensor_bytes(c, t, numel, &data, &owned);
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
dm_status ox_const_ints(imp *c, const Onnx__TensorProto *t, int64_t **out, size_t *n) {
  int64_t numel = ox_tensor_numel(t);
  if (numel < 0 || t->n_dims > 1 || (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
                                     t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32))
    return ox_refuse(c, "expected a 1-D INT64 constant");
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  DM_TRY(ox_tensor_bytes(c, t, numel, &data, &owned));
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

dm_status ox_add_external(char ***arr, size_t *n, const char *name) {
  if (dm_str_in_list(name, (const char *const *)*arr, *n))
    return DM_OK;
  return dm_strv_push(arr, n, name);
}

/* Starts op `type` with the node's first `n_in` inputs (those given) and its outputs. */
void ox_start(dm_opb *b, const char *type, const Onnx__NodeProto *n, size_t n_in) {
  dm_opb_start(b, type);
  for (size_t i = 0; i < n_in && i < n->n_input; i++)
    if (ox_in_name(n, i))
      dm_opb_input(b, n->input[i]);
  size_t k = ox_n_outputs_used(n);
  for (size_t i = 0; i < k; i++)
    dm_opb_output(b, n->output[i]);
}

dm_status ox_need_outputs(imp *c, const Onnx__NodeProto *n, size_t max) {
  if (ox_n_outputs_used(n) > max)
    return ox_refuse(c, "only the first %zu output%s supported (it has %zu)", max,
                  max == 1 ? " is" : "s are", ox_n_outputs_used(n));
  if (ox_n_outputs_used(n) == 0)
    return ox_refuse(c, "no output");
  return DM_OK;
}
/* Ops that map one to one with no arguments (Relu, Identity -> Copy, ...). */
dm_status ox_plain(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type,
                       size_t n_in) {
  DM_TRY(ox_need_outputs(c, n, 1));
  for (size_t i = 0; i < n_in; i++)
    if (!ox_in_name(n, i))
      return ox_refuse(c, "input %zu is missing", i);
  if (n->n_input > n_in)
    return ox_refuse(c, "%zu inputs; expected %zu", n->n_input, n_in);
  ox_start(b, type, n, n_in);
  return DM_OK;
}
/* A new init-net blob "<base><suffix>" for a weight the importer derives: its name, or
 * NULL (out of memory) in *out, which the caller frees. Also an external input of the
 * predict net. */
dm_status ox_derived_name(imp *c, const char *base, const char *suffix, char **out) {
  size_t len = strlen(base) + strlen(suffix) + 1;
  *out = malloc(len);
  if (!*out)
    return DM_NOMEM("a blob name");
  snprintf(*out, len, "%s%s", base, suffix);
  if (dm_str_in_list(*out, (const char *const *)c->known, c->n_known)) {
    free(*out);
    *out = NULL;
    return ox_refuse(c, "the graph already has a blob '%s%s'", base, suffix);
  }
  DM_TRY(ox_add_external(&c->pred->external_input, &c->pred->n_external_input, *out));
  return dm_strv_push(&c->init->external_output, &c->init->n_external_output, *out);
}

/* Fills blob `name` with N zeros (FC's bias where ONNX has none). */
dm_status ox_fill_zeros(imp *c, const char *name, int64_t N) {
  dm_opb b;
  dm_opb_start(&b, "ConstantFill");
  dm_opb_output(&b, name);
  dm_opb_arg_ints(&b, "shape", &N, 1);
  dm_opb_arg_float(&b, "value", 0.0f);
  return dm_opb_append(&b, c->init);
}
