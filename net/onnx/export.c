/* export.c: a Caffe2 inference pair as an ONNX model (see net/onnx/export.h).
 *
 * The driver: runs the init net (so that any fill gives the weights `run` would use),
 * turns what it leaves into initializers, declares the graph inputs and outputs, infers
 * every blob's shape when all inputs have one, single-assigns the blob names, and hands
 * each predict op to its translator (net/onnx/export_ops.c). A refused op does not stop the
 * walk: the error lists them all, and no model comes back.
 */
#include "net/onnx/export.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/api.h"
#include "core/demitasse.h"
#include "core/fileio.h"
#include "net/netdef_build.h"
#include "net/onnx/emit.h"
#include "net/shape_infer.h"

/* ---- the name table ---------------------------------------------------------------- */

/* One name: a Caffe2 blob (how often the predict net writes and reads it, whether it is
 * fixed as a graph input or initializer, the ONNX name of its current value) or a name
 * made here (only taken). Open addressing on an FNV-1a hash; never shrinks. */
typedef struct ex_name {
  char *name;
  int writes, seen, reads;
  int fixed;      /* a graph input or an initializer: every write gets a new name */
  int filled;     /* the init net leaves it */
  int ext_in, ext_out;
  const char *cur; /* the ONNX name of its current value (NULL: none yet) */
} ex_name;

struct ex_names {
  ex_name *slot;
  size_t cap, n;
};

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static ex_name *names_find(const ex_names *t, const char *name) {
  if (!t->cap || !name)
    return NULL;
  for (size_t i = fnv(name) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    if (!t->slot[i].name)
      return NULL;
    if (strcmp(t->slot[i].name, name) == 0)
      return &t->slot[i];
  }
}

/* The entry for `name`, added (zeroed) if absent; NULL when out of memory. */
static ex_name *names_get(ex_names *t, const char *name) {
  ex_name *e = names_find(t, name);
  if (e)
    return e;
  if ((t->n + 1) * 2 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    ex_name *slot = calloc(cap, sizeof *slot);
    if (!slot)
      return NULL;
    for (size_t k = 0; k < t->cap; k++) {
      if (!t->slot[k].name)
        continue;
      size_t i = fnv(t->slot[k].name) & (cap - 1);
      while (slot[i].name)
        i = (i + 1) & (cap - 1);
      slot[i] = t->slot[k];
    }
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
  }
  size_t i = fnv(name) & (t->cap - 1);
  while (t->slot[i].name)
    i = (i + 1) & (t->cap - 1);
  t->slot[i].name = strdup(name);
  if (!t->slot[i].name)
    return NULL;
  t->n++;
  return &t->slot[i];
}

static void names_free(ex_names *t) {
  for (size_t i = 0; i < t->cap; i++)
    free(t->slot[i].name);
  free(t->slot);
}

/* ---- builders the translators share ------------------------------------------------ */

static void fail(oxe *e, dm_status s) {
  if (e->s == DM_OK)
    e->s = s;
}

static void *grow(oxe *e, void *arr, size_t n, size_t size) {
  if (e->s != DM_OK)
    return NULL;
  void *p = realloc(arr, (n + 1) * size);
  if (!p)
    fail(e, DM_NOMEM("the ONNX model"));
  return p;
}

static char *dup(oxe *e, const char *s) {
  if (e->s != DM_OK)
    return NULL;
  char *d = strdup(s ? s : "");
  if (!d)
    fail(e, DM_NOMEM("a name"));
  return d;
}

dm_status ex_refuse(oxe *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  return EX_REFUSED;
}

static const char *pool_keep(oxe *e, char *s) {
  char **p = grow(e, e->pool, e->n_pool, sizeof *p);
  if (!p) {
    free(s);
    return NULL;
  }
  e->pool = p;
  e->pool[e->n_pool++] = s;
  return s;
}

const char *ex_fresh(oxe *e, const char *base, const char *suffix) {
  if (e->s != DM_OK)
    return NULL;
  size_t n = strlen(base) + strlen(suffix) + 24;
  char *s = malloc(n);
  if (!s) {
    fail(e, DM_NOMEM("a name"));
    return NULL;
  }
  snprintf(s, n, "%s%s", base, suffix);
  for (int k = 1; names_find(e->names, s); k++)
    snprintf(s, n, "%s%s_%d", base, suffix, k);
  if (!names_get(e->names, s)) {
    free(s);
    fail(e, DM_NOMEM("a name"));
    return NULL;
  }
  return pool_keep(e, s);
}

const ex_const *ex_const_find(const oxe *e, const char *name) {
  for (size_t i = 0; name && i < e->n_consts; i++)
    if (strcmp(e->consts[i].name, name) == 0)
      return &e->consts[i];
  return NULL;
}

Onnx__NodeProto *ex_node(oxe *e, const char *type, const char *name) {
  Onnx__NodeProto **nodes = grow(e, e->g->node, e->g->n_node, sizeof *nodes);
  if (!nodes)
    return NULL;
  e->g->node = nodes;
  Onnx__NodeProto *n = malloc(sizeof *n);
  if (!n) {
    fail(e, DM_NOMEM("a node"));
    return NULL;
  }
  onnx__node_proto__init(n);
  e->g->node[e->g->n_node++] = n;
  n->op_type = dup(e, type);
  if (name && *name)
    n->name = dup(e, name);
  return n;
}

static void push_str(oxe *e, char ***arr, size_t *n, const char *s) {
  char **a = grow(e, *arr, *n, sizeof *a);
  if (!a)
    return;
  *arr = a;
  char *d = dup(e, s);
  if (d)
    a[(*n)++] = d;
}

void ex_in(oxe *e, Onnx__NodeProto *n, const char *name) {
  if (n)
    push_str(e, &n->input, &n->n_input, name);
}

void ex_out(oxe *e, Onnx__NodeProto *n, const char *name) {
  if (n)
    push_str(e, &n->output, &n->n_output, name);
}

static Onnx__AttributeProto *attr(oxe *e, Onnx__NodeProto *n, const char *name,
                                  Onnx__AttributeProto__AttributeType type) {
  if (!n)
    return NULL;
  Onnx__AttributeProto **arr = grow(e, n->attribute, n->n_attribute, sizeof *arr);
  if (!arr)
    return NULL;
  n->attribute = arr;
  Onnx__AttributeProto *a = malloc(sizeof *a);
  if (!a) {
    fail(e, DM_NOMEM("an attribute"));
    return NULL;
  }
  onnx__attribute_proto__init(a);
  n->attribute[n->n_attribute++] = a;
  a->name = dup(e, name);
  a->has_type = 1;
  a->type = type;
  return a;
}

void ex_attr_int(oxe *e, Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  if (a) {
    a->has_i = 1;
    a->i = v;
  }
}

void ex_attr_float(oxe *e, Onnx__NodeProto *n, const char *name, float v) {
  Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  if (a) {
    a->has_f = 1;
    a->f = v;
  }
}

void ex_attr_str(oxe *e, Onnx__NodeProto *n, const char *name, const char *v) {
  Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  char *d = a ? dup(e, v) : NULL;
  if (d) {
    a->has_s = 1;
    a->s.data = (uint8_t *)d;
    a->s.len = strlen(d);
  }
}

void ex_attr_ints(oxe *e, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t k) {
  Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  if (!a)
    return;
  a->ints = malloc(k * sizeof *v + 1);
  if (!a->ints) {
    fail(e, DM_NOMEM("an attribute"));
    return;
  }
  memcpy(a->ints, v, k * sizeof *v);
  a->n_ints = k;
}

int32_t ex_onnx_dtype(dm_dtype t) {
  switch (t) {
  case DM_FLOAT: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  case DM_INT32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
  case DM_BYTE:
  case DM_UINT8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
  case DM_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
  case DM_INT8: return ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
  case DM_UINT16: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT16;
  case DM_INT16: return ONNX__TENSOR_PROTO__DATA_TYPE__INT16;
  case DM_INT64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  case DM_FLOAT16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
  case DM_DOUBLE: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  case DM_BFLOAT16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
  default: return 0;
  }
}

/* Copies n elements of `size` bytes from host order to little-endian. */
static void to_le(uint8_t *dst, const void *src, int64_t n, size_t size) {
  const uint16_t probe = 1;
  if (*(const uint8_t *)&probe == 1 || size == 1) {
    memcpy(dst, src, (size_t)n * size);
    return;
  }
  const uint8_t *s = src;
  for (int64_t i = 0; i < n; i++)
    for (size_t b = 0; b < size; b++)
      dst[(size_t)i * size + b] = s[(size_t)i * size + size - 1 - b];
}

void ex_initializer(oxe *e, const char *name, dm_dtype dtype, int ndim, const int64_t *dims,
                    const void *data) {
  int32_t ot = ex_onnx_dtype(dtype);
  size_t es = dm_dtype_size(dtype);
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++)
    numel *= dims[i];
  if (e->s != DM_OK)
    return;
  if (!ot || !es) {
    fail(e, dm_error(DM_ERR_TYPE, "'%s' is %s, which ONNX initializers cannot hold here", name,
                     dm_dtype_name(dtype)));
    return;
  }
  Onnx__TensorProto **arr = grow(e, e->g->initializer, e->g->n_initializer, sizeof *arr);
  ex_const *c = arr ? grow(e, e->consts, e->n_consts, sizeof *c) : NULL;
  if (arr)
    e->g->initializer = arr;
  if (!c)
    return;
  e->consts = c;
  Onnx__TensorProto *t = malloc(sizeof *t);
  int64_t *d = malloc((size_t)ndim * sizeof *d + 1);
  uint8_t *raw = malloc((size_t)numel * es + 1);
  char *nm = dup(e, name);
  if (!t || !d || !raw || !nm) {
    free(t);
    free(d);
    free(raw);
    free(nm);
    fail(e, DM_NOMEM("an initializer"));
    return;
  }
  onnx__tensor_proto__init(t);
  if (ndim)
    memcpy(d, dims, (size_t)ndim * sizeof *d);
  to_le(raw, data, numel, es);
  t->name = nm;
  t->n_dims = (size_t)ndim;
  t->dims = d;
  t->has_data_type = 1;
  t->data_type = ot;
  t->has_raw_data = 1;
  t->raw_data.data = raw;
  t->raw_data.len = (size_t)numel * es;
  e->g->initializer[e->g->n_initializer++] = t;
  /* Translators read the constants' bytes as host-order values: the little-endian
   * hosts this builds for, where to_le is a copy. */
  e->consts[e->n_consts++] = (ex_const){t->name, dtype, ndim, t->dims, raw, numel};
}

const char *ex_const_i64(oxe *e, const char *base, const char *suffix, const int64_t *v,
                         size_t k) {
  const char *name = ex_fresh(e, base, suffix);
  int64_t dims[1] = {(int64_t)k};
  if (name)
    ex_initializer(e, name, DM_INT64, 1, dims, v);
  return e->s == DM_OK ? name : NULL;
}

/* ---- the export --------------------------------------------------------------------- */

typedef struct exporter {
  oxe e;
  const Caffe2__NetDef *pred;
  const dm_onnx_export_opts *opts;
  dm_workspace *ws;
  ex_shape *shapes;   /* per op, per input (max_in of them): the hook's record */
  size_t max_in;
  int inferred;       /* shapes holds the inference's record */
  char *infer_error;  /* why inference failed, when it did */
  ex_names names;
} exporter;

/* Runs the init net once on the CPU (a CUDA device option is dropped; seeds are kept). */
static dm_status run_init(exporter *x, const Caffe2__NetDef *init) {
  Caffe2__NetDef *def = NULL;
  DM_TRY(DM_PB_CLONE(Caffe2__NetDef, init, &def));
  for (size_t i = 0; i < def->n_op; i++) {
    Caffe2__DeviceOption *d = def->op[i]->device_option;
    if (d) {
      d->has_device_type = 0;
      d->device_type = 0;
      d->has_device_id = 0;
      d->device_id = 0;
    }
  }
  if (def->device_option) {
    def->device_option->has_device_type = 0;
    def->device_option->has_device_id = 0;
  }
  dm_net *net = NULL;
  DM_TRY(dm_workspace_create_net(x->ws, def, "the init net", &net));
  return dm_net_run(net);
}

static const dm_onnx_input_shape *given_shape(const exporter *x, const char *name) {
  for (size_t i = 0; x->opts && i < x->opts->n_shapes; i++)
    if (strcmp(x->opts->shapes[i].name, name) == 0)
      return &x->opts->shapes[i];
  return NULL;
}

static int is_graph_input(const ex_name *n) { return n->ext_in && !n->filled && (n->reads || n->ext_out); }

/* Records the name table: what each blob is and how often it is written and read. */
static dm_status scan(exporter *x, const Caffe2__NetDef *init) {
  const Caffe2__NetDef *p = x->pred;
  ex_names *t = &x->names;
  for (size_t i = 0; init && i < init->n_op; i++)
    for (size_t k = 0; k < init->op[i]->n_output; k++) {
      ex_name *n = names_get(t, init->op[i]->output[k]);
      if (!n)
        return DM_NOMEM("a name");
      n->filled = 1;
    }
  for (size_t i = 0; i < p->n_external_input; i++) {
    ex_name *n = names_get(t, p->external_input[i]);
    if (!n)
      return DM_NOMEM("a name");
    n->ext_in = 1;
  }
  for (size_t i = 0; i < p->n_external_output; i++) {
    ex_name *n = names_get(t, p->external_output[i]);
    if (!n)
      return DM_NOMEM("a name");
    n->ext_out = 1;
  }
  for (size_t i = 0; i < p->n_op; i++) {
    const Caffe2__OperatorDef *op = p->op[i];
    if (op->n_input > x->max_in)
      x->max_in = op->n_input;
    for (size_t k = 0; k < op->n_input; k++) {
      ex_name *n = names_get(t, op->input[k]);
      if (!n)
        return DM_NOMEM("a name");
      n->reads++;
    }
    for (size_t k = 0; k < op->n_output; k++) {
      ex_name *n = names_get(t, op->output[k]);
      if (!n)
        return DM_NOMEM("a name");
      n->writes++;
    }
  }
  return DM_OK;
}

/* The initializers: every blob the init net leaves that the predict net reads. */
static dm_status add_initializers(exporter *x, const Caffe2__NetDef *init) {
  for (size_t i = 0; init && i < init->n_op; i++)
    for (size_t k = 0; k < init->op[i]->n_output; k++) {
      const char *name = init->op[i]->output[k];
      ex_name *n = names_find(&x->names, name);
      if (!n || !n->reads || n->cur)
        continue; /* unread, or done (a blob two init ops write) */
      const dm_tensor *t = dm_workspace_tensor(x->ws, name);
      if (!t || t->dtype == DM_UNDEFINED)
        return dm_error(DM_ERR_INVALID, "the init net left '%s' empty", name);
      int dev_id;
      if (dm_tensor_device(t, &dev_id) != DM_CPU)
        return dm_error(DM_ERR_INVALID, "the init net left '%s' off the host", name);
      const void *data = t->numel ? dm_tensor_data(t) : "";
      if (!data)
        return dm_error(DM_ERR_INVALID, "'%s' has no data", name);
      ex_initializer(&x->e, name, t->dtype, t->ndim, t->dims, data);
      DM_TRY(x->e.s);
      n->fixed = 1;
      n->cur = n->name;
    }
  return DM_OK;
}

static dm_status record_shapes(void *user, dm_workspace *ws, const Caffe2__OperatorDef *op,
                               int index) {
  exporter *x = user;
  for (size_t k = 0; k < op->n_input; k++) {
    const dm_tensor *t = dm_workspace_tensor(ws, op->input[k]);
    ex_shape *s = &x->shapes[(size_t)index * x->max_in + k];
    if (!t || t->dtype == DM_UNDEFINED)
      continue;
    s->known = 1;
    s->dtype = t->dtype;
    s->ndim = t->ndim;
    memcpy(s->dims, t->dims, sizeof s->dims);
  }
  return DM_OK;
}

/* Shapes of every op's inputs, by shape inference when every graph input has one given
 * (a failure is kept in infer_error: reported unless an op is refused); otherwise only
 * the constants' shapes are known. */
static dm_status infer_shapes(exporter *x) {
  x->shapes = calloc(x->pred->n_op * (x->max_in ? x->max_in : 1) + 1, sizeof *x->shapes);
  if (!x->shapes)
    return DM_NOMEM("shapes");
  int all = 1;
  for (size_t i = 0; i < x->names.cap && all; i++) {
    const ex_name *n = &x->names.slot[i];
    if (n->name && is_graph_input(n) && !given_shape(x, n->name))
      all = 0;
  }
  if (!all)
    return DM_OK;
  for (size_t i = 0; x->opts && i < x->opts->n_shapes; i++) {
    dm_blob *b = NULL;
    const dm_onnx_input_shape *gs = &x->opts->shapes[i];
    DM_TRY(dm_workspace_get_or_create(x->ws, gs->name, &b));
    DM_TRY(dm_tensor_set_shape(b->tensor, DM_FLOAT, gs->ndim, gs->dims));
  }
  if (dm_infer_net_shapes(x->ws, x->pred, "the predict net", record_shapes, x, NULL) == DM_OK) {
    x->inferred = 1;
    return DM_OK;
  }
  x->infer_error = strdup(dm_last_error());
  if (!x->infer_error)
    return DM_NOMEM("a message");
  memset(x->shapes, 0, x->pred->n_op * (x->max_in ? x->max_in : 1) * sizeof *x->shapes);
  return DM_OK;
}

static Onnx__ValueInfoProto *value_info(oxe *e, const char *name, dm_dtype dtype,
                                        const int64_t *dims, int ndim) {
  Onnx__ValueInfoProto *v = malloc(sizeof *v);
  Onnx__TypeProto *ty = malloc(sizeof *ty);
  Onnx__TypeProto__Tensor *tt = malloc(sizeof *tt);
  if (!v || !ty || !tt) {
    free(v);
    free(ty);
    free(tt);
    fail(e, DM_NOMEM("a graph input"));
    return NULL;
  }
  onnx__value_info_proto__init(v);
  onnx__type_proto__init(ty);
  onnx__type_proto__tensor__init(tt);
  v->name = dup(e, name);
  v->type = ty;
  ty->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  ty->tensor_type = tt;
  tt->has_elem_type = 1;
  tt->elem_type = ex_onnx_dtype(dtype) ? ex_onnx_dtype(dtype) : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  if (ndim < 0)
    return v;
  tt->shape = malloc(sizeof *tt->shape);
  if (!tt->shape) {
    fail(e, DM_NOMEM("a shape"));
    return v;
  }
  onnx__tensor_shape_proto__init(tt->shape);
  tt->shape->dim = calloc((size_t)ndim + 1, sizeof *tt->shape->dim);
  if (!tt->shape->dim) {
    fail(e, DM_NOMEM("a shape"));
    return v;
  }
  for (int i = 0; i < ndim; i++) {
    Onnx__TensorShapeProto__Dimension *d = malloc(sizeof *d);
    if (!d) {
      fail(e, DM_NOMEM("a shape"));
      return v;
    }
    onnx__tensor_shape_proto__dimension__init(d);
    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d->dim_value = dims[i];
    tt->shape->dim[tt->shape->n_dim++] = d;
  }
  return v;
}

static void add_value(oxe *e, Onnx__ValueInfoProto ***arr, size_t *n, Onnx__ValueInfoProto *v) {
  if (!v)
    return;
  Onnx__ValueInfoProto **a = grow(e, *arr, *n, sizeof *a);
  if (!a) {
    protobuf_c_message_free_unpacked(&v->base, NULL);
    return;
  }
  *arr = a;
  a[(*n)++] = v;
}

/* Graph inputs, in the order of the predict net's external inputs. */
static dm_status add_inputs(exporter *x) {
  const Caffe2__NetDef *p = x->pred;
  for (size_t i = 0; i < p->n_external_input; i++) {
    ex_name *n = names_find(&x->names, p->external_input[i]);
    if (!n || !is_graph_input(n) || n->cur)
      continue;
    const dm_onnx_input_shape *gs = given_shape(x, n->name);
    add_value(&x->e, &x->e.g->input, &x->e.g->n_input,
              value_info(&x->e, n->name, DM_FLOAT, gs ? gs->dims : NULL, gs ? gs->ndim : -1));
    DM_TRY(x->e.s);
    n->fixed = 1;
    n->cur = n->name;
  }
  for (size_t i = 0; x->opts && i < x->opts->n_shapes; i++) {
    const ex_name *n = names_find(&x->names, x->opts->shapes[i].name);
    if (!n || !is_graph_input(n))
      return dm_error(DM_ERR_INVALID,
                      "an input shape for '%s', which is not an input of the predict net%s",
                      x->opts->shapes[i].name,
                      n && n->filled ? " (the init net fills it)" : "");
  }
  return DM_OK;
}

/* The ONNX name of op output `blob`'s new value: the blob's own name for its last write,
 * "<blob>__<k>" for an earlier one (or for any write of a graph input or initializer). */
static const char *out_name(exporter *x, const char *blob) {
  ex_name *n = names_find(&x->names, blob);
  if (!n)
    return NULL;
  n->seen++;
  const char *name = n->name;
  if (n->fixed || n->seen < n->writes) {
    char suf[24];
    snprintf(suf, sizeof suf, "__%d", n->seen);
    name = ex_fresh(&x->e, blob, suf);
  }
  return name;
}

static ex_fn find_translator(const char *type) {
  static const ex_translator *const tables[] = {ex_ops, ex_ops_math};
  for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++)
    for (const ex_translator *t = tables[k]; t->type; t++)
      if (strcmp(t->type, type) == 0)
        return t->fn;
  return NULL;
}

/* Whether `blob` is read by an op after op `i`, or is a graph output. */
static int read_after(const exporter *x, size_t i, const char *blob) {
  const Caffe2__NetDef *p = x->pred;
  for (size_t j = i + 1; j < p->n_op; j++) {
    for (size_t k = 0; k < p->op[j]->n_input; k++)
      if (strcmp(p->op[j]->input[k], blob) == 0)
        return 1;
    for (size_t k = 0; k < p->op[j]->n_output; k++)
      if (strcmp(p->op[j]->output[k], blob) == 0)
        return 0; /* overwritten first */
  }
  const ex_name *n = names_find(&x->names, blob);
  return n && n->ext_out;
}

typedef struct op_bufs {
  const char **in, **out;
  int *used, *unfilled;
  ex_shape *shape;
} op_bufs;

static dm_status translate_op(exporter *x, size_t i, op_bufs *b, char **report, size_t *len,
                              size_t *n_refused) {
  const Caffe2__OperatorDef *op = x->pred->op[i];
  const char *type = op->type ? op->type : "";
  const char *name = op->name ? op->name : "";
  oxe *e = &x->e;
  e->why[0] = '\0';
  dm_status r = DM_OK;
  /* ONNX reads an empty name as an omitted optional input or output: a Caffe2 op's ""
   * blob (which `run` refuses) must not become one */
  for (size_t k = 0; k < op->n_input + op->n_output && r == DM_OK; k++) {
    const char *blob = k < op->n_input ? op->input[k] : op->output[k - op->n_input];
    if (!blob || !*blob)
      r = ex_refuse(e, "%s %zu has an empty name", k < op->n_input ? "input" : "output",
                    k < op->n_input ? k : k - op->n_input);
  }
  for (size_t k = 0; k < op->n_input; k++) {
    ex_name *n = names_find(&x->names, op->input[k]);
    b->in[k] = n ? n->cur : NULL;
    b->unfilled[k] = n && n->ext_in && !n->filled;
    if (!b->in[k] && r == DM_OK)
      r = ex_refuse(e, "input '%s' is not an input of the net, nor filled by the init net, nor "
                    "written by an earlier op (a missing fill?)", op->input[k]);
    b->shape[k] = x->shapes[i * x->max_in + k];
    const ex_const *c = b->in[k] ? ex_const_find(e, b->in[k]) : NULL;
    if (c && !b->shape[k].known) { /* a constant's shape is known without inference */
      b->shape[k].known = 1;
      b->shape[k].dtype = c->dtype;
      b->shape[k].ndim = c->ndim;
      memcpy(b->shape[k].dims, c->dims, (size_t)c->ndim * sizeof *c->dims);
    }
  }
  for (size_t k = 0; k < op->n_output; k++) {
    b->used[k] = read_after(x, i, op->output[k]);
    b->out[k] = out_name(x, op->output[k]);
  }
  DM_TRY(e->s);
  if (r == DM_OK) {
    ex_fn fn = find_translator(type);
    if (!fn) {
      r = ex_refuse(e, "no ONNX translation for this op");
    } else {
      ex_op o = {op, i, b->in, b->out, b->shape, b->used, b->unfilled};
      r = fn(e, &o);
      if (e->s != DM_OK)
        r = e->s;
    }
  }
  for (size_t k = 0; k < op->n_output; k++) { /* later ops read the new values */
    ex_name *n = names_find(&x->names, op->output[k]);
    if (n && b->out[k])
      n->cur = b->out[k];
  }
  if (r == EX_REFUSED && e->why[0]) {
    (*n_refused)++;
    dm_text_appendf(report, len, "\n  op %zu '%s': %s: %s", i, name, type, e->why);
    return DM_OK;
  }
  if (r != DM_OK)
    return dm_error_prefix(r, "op %zu (%s '%s')", i, type, name);
  return DM_OK;
}

static dm_status translate_ops(exporter *x) {
  size_t m = x->max_in, mo = 0;
  for (size_t i = 0; i < x->pred->n_op; i++)
    if (x->pred->op[i]->n_output > mo)
      mo = x->pred->op[i]->n_output;
  op_bufs b = {calloc(m + 1, sizeof *b.in), calloc(mo + 1, sizeof *b.out),
               calloc(mo + 1, sizeof *b.used), calloc(m + 1, sizeof *b.unfilled),
               calloc(m + 1, sizeof *b.shape)};
  char *report = NULL;
  size_t len = 0, n_refused = 0;
  dm_status s = b.in && b.out && b.used && b.unfilled && b.shape ? DM_OK : DM_NOMEM("an op");
  for (size_t i = 0; i < x->pred->n_op && s == DM_OK; i++)
    s = translate_op(x, i, &b, &report, &len, &n_refused);
  if (s == DM_OK && n_refused)
    s = dm_error(DM_ERR_UNSUPPORTED, "%zu of %zu ops cannot be exported to ONNX:%s", n_refused,
                 x->pred->n_op, report ? report : "");
  if (s == DM_OK && x->infer_error)
    s = dm_error(DM_ERR_SHAPE, "shape inference with the given input shapes failed: %s",
                 x->infer_error);
  free(report);
  free(b.in);
  free(b.out);
  free(b.used);
  free(b.unfilled);
  free(b.shape);
  return s;
}

/* Graph outputs: each external output's last value, with its inferred dtype and shape. */
static dm_status add_outputs(exporter *x) {
  const Caffe2__NetDef *p = x->pred;
  for (size_t i = 0; i < p->n_external_output; i++) {
    const ex_name *n = names_find(&x->names, p->external_output[i]);
    if (!n || !n->cur)
      return dm_error(DM_ERR_INVALID,
                      "external output '%s' is not written by any op nor an input of the net",
                      p->external_output[i]);
    int dup_out = 0;
    for (size_t k = 0; k < x->e.g->n_output; k++)
      dup_out |= strcmp(x->e.g->output[k]->name, n->cur) == 0;
    if (dup_out)
      continue;
    const dm_tensor *t = x->inferred ? dm_workspace_tensor(x->ws, n->name) : NULL;
    int known = t && t->dtype != DM_UNDEFINED;
    add_value(&x->e, &x->e.g->output, &x->e.g->n_output,
              value_info(&x->e, n->cur, known ? t->dtype : DM_FLOAT, known ? t->dims : NULL,
                         known ? t->ndim : -1));
    DM_TRY(x->e.s);
  }
  return DM_OK;
}

/* Drops the initializers no node reads and no graph output names: a constant a
 * translator replaced by a reshaped copy (a broadcast B, a 4-D FC weight). */
static void prune_initializers(Onnx__GraphProto *g) {
  size_t kept = 0;
  for (size_t i = 0; i < g->n_initializer; i++) {
    Onnx__TensorProto *t = g->initializer[i];
    int used = 0;
    for (size_t j = 0; j < g->n_node && !used; j++)
      for (size_t k = 0; k < g->node[j]->n_input && !used; k++)
        used = strcmp(g->node[j]->input[k], t->name) == 0;
    for (size_t j = 0; j < g->n_output && !used; j++)
      used = strcmp(g->output[j]->name, t->name) == 0;
    if (used)
      g->initializer[kept++] = t;
    else
      protobuf_c_message_free_unpacked(&t->base, NULL);
  }
  g->n_initializer = kept;
}

static dm_status new_model(const Caffe2__NetDef *pred, Onnx__ModelProto **out) {
  Onnx__ModelProto *m = malloc(sizeof *m);
  Onnx__GraphProto *g = malloc(sizeof *g);
  Onnx__OperatorSetIdProto **ops = malloc(sizeof *ops);
  Onnx__OperatorSetIdProto *os = malloc(sizeof *os);
  if (!m || !g || !ops || !os) {
    free(m);
    free(g);
    free(ops);
    free(os);
    return DM_NOMEM("a model");
  }
  onnx__model_proto__init(m);
  onnx__graph_proto__init(g);
  onnx__operator_set_id_proto__init(os);
  m->graph = g;
  m->opset_import = ops;
  ops[0] = os;
  m->n_opset_import = 1;
  os->domain = strdup("");
  os->has_version = 1;
  os->version = DM_ONNX_EXPORT_OPSET;
  m->has_ir_version = 1;
  m->ir_version = DM_ONNX_EXPORT_IR_VERSION;
  m->producer_name = strdup("demitasse");
  m->producer_version = strdup(dm_version_string());
  g->name = strdup(pred->name && *pred->name ? pred->name : "demitasse");
  *out = m;
  if (!os->domain || !m->producer_name || !m->producer_version || !g->name) {
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = NULL;
    return DM_NOMEM("a model");
  }
  return DM_OK;
}

dm_status dm_onnx_export(const Caffe2__NetDef *init, const Caffe2__NetDef *pred,
                         const dm_onnx_export_opts *opts, Onnx__ModelProto **out) {
  if (!pred || !out)
    return dm_error(DM_ERR_INVALID, "dm_onnx_export: NULL %s", !pred ? "predict net" : "out");
  *out = NULL;
  for (size_t i = 0; opts && i < opts->n_shapes; i++)
    if (!opts->shapes[i].name || opts->shapes[i].ndim < 0 || opts->shapes[i].ndim > 8)
      return dm_error(DM_ERR_INVALID, "input shape %zu: no name, or more than 8 dims", i);
  DM_TRY(dm_init());
  exporter x;
  memset(&x, 0, sizeof x);
  x.pred = pred;
  x.opts = opts;
  x.e.names = &x.names;
  Onnx__ModelProto *m = NULL;
  dm_status s = new_model(pred, &m);
  if (s == DM_OK) {
    x.e.g = m->graph;
    s = dm_workspace_new(&x.ws);
  }
  if (s == DM_OK)
    s = scan(&x, init);
  if (s == DM_OK && init && (s = run_init(&x, init)) != DM_OK)
    dm_error_prefix(s, "running the init net");
  if (s == DM_OK)
    s = add_initializers(&x, init);
  if (s == DM_OK)
    s = add_inputs(&x);
  if (s == DM_OK)
    s = infer_shapes(&x);
  if (s == DM_OK)
    s = translate_ops(&x);
  if (s == DM_OK)
    s = add_outputs(&x);
  if (s == DM_OK)
    prune_initializers(m->graph);
  dm_workspace_destroy(x.ws);
  names_free(&x.names);
  for (size_t i = 0; i < x.e.n_pool; i++)
    free(x.e.pool[i]);
  free(x.e.pool);
  free(x.e.consts);
  free(x.shapes);
  free(x.infer_error);
  if (s != DM_OK) {
    if (m)
      protobuf_c_message_free_unpacked(&m->base, NULL);
    return s;
  }
  *out = m;
  return DM_OK;
}

dm_status dm_onnx_model_write(const Onnx__ModelProto *model, const char *path) {
  size_t n = protobuf_c_message_get_packed_size(&model->base);
  /* protobuf's own limit; a bigger model needs ONNX's external data, not written here */
  if (n > ((size_t)1 << 31) - 1)
    return dm_error(DM_ERR_LIMIT, "%s: the model would be %zu bytes, over protobuf's 2 GiB", path, n);
  uint8_t *buf = malloc(n + 1);
  if (!buf)
    return DM_NOMEM("the model's bytes");
  protobuf_c_message_pack(&model->base, buf);
  dm_status s = dm_write_file_atomic(path, buf, n);
  free(buf);
  return s;
}
