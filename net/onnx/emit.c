/* emit.c: the builders the ONNX exporter's driver and translators share (emit.h): the
 * name table, nodes, attributes, initializers and constants, and reading an op's
 * arguments. Each call keeps the first allocation failure in e->s and does nothing
 * after it, so a translator checks once, at its end.
 */
#include "net/onnx/emit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/netdef_build.h"
#include "net/onnx/export_names.h"

/* ---- the name table ---------------------------------------------------------------- */

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

ex_name *ex_names_find(const ex_names *t, const char *name) {
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
ex_name *ex_names_get(ex_names *t, const char *name) {
  ex_name *e = ex_names_find(t, name);
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

void ex_names_free(ex_names *t) {
  for (size_t i = 0; i < t->cap; i++)
    free(t->slot[i].name);
  free(t->slot);
}

/* ---- builders the translators share ------------------------------------------------ */

void ex_fail(oxe *e, dm_status s) {
  if (e->s == DM_OK)
    e->s = s;
}

void *ex_grow(oxe *e, void *arr, size_t n, size_t size) {
  if (e->s != DM_OK)
    return NULL;
  void *p = realloc(arr, (n + 1) * size);
  if (!p)
    ex_fail(e, DM_NOMEM("the ONNX model"));
  return p;
}

char *ex_dup(oxe *e, const char *s) {
  if (e->s != DM_OK)
    return NULL;
  char *d = strdup(s ? s : "");
  if (!d)
    ex_fail(e, DM_NOMEM("a name"));
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
  char **p = ex_grow(e, e->pool, e->n_pool, sizeof *p);
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
    ex_fail(e, DM_NOMEM("a name"));
    return NULL;
  }
  snprintf(s, n, "%s%s", base, suffix);
  for (int k = 1; ex_names_find(e->names, s); k++)
    snprintf(s, n, "%s%s_%d", base, suffix, k);
  if (!ex_names_get(e->names, s)) {
    free(s);
    ex_fail(e, DM_NOMEM("a name"));
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
  Onnx__NodeProto **nodes = ex_grow(e, e->g->node, e->g->n_node, sizeof *nodes);
  if (!nodes)
    return NULL;
  e->g->node = nodes;
  Onnx__NodeProto *n = malloc(sizeof *n);
  if (!n) {
    ex_fail(e, DM_NOMEM("a node"));
    return NULL;
  }
  onnx__node_proto__init(n);
  e->g->node[e->g->n_node++] = n;
  n->op_type = ex_dup(e, type);
  if (name && *name)
    n->name = ex_dup(e, name);
  return n;
}

Onnx__NodeProto *ex_unary(oxe *e, const char *type, const char *name, const char *x,
                          const char *y) {
  Onnx__NodeProto *n = ex_node(e, type, name);
  ex_in(e, n, x);
  ex_out(e, n, y);
  return n;
}

Onnx__NodeProto *ex_binary(oxe *e, const char *type, const char *name, const char *a,
                           const char *b, const char *y) {
  Onnx__NodeProto *n = ex_node(e, type, name);
  ex_in(e, n, a);
  ex_in(e, n, b);
  ex_out(e, n, y);
  return n;
}

void ex_reshape_const(oxe *e, const char *x, const int64_t *dims, int ndim, const char *y,
                      const char *name) {
  ex_binary(e, "Reshape", name, x, ex_const_i64(e, y, "_shape", dims, (size_t)ndim), y);
}

static void push_str(oxe *e, char ***arr, size_t *n, const char *s) {
  char **a = ex_grow(e, *arr, *n, sizeof *a);
  if (!a)
    return;
  *arr = a;
  char *d = ex_dup(e, s);
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
  Onnx__AttributeProto **arr = ex_grow(e, n->attribute, n->n_attribute, sizeof *arr);
  if (!arr)
    return NULL;
  n->attribute = arr;
  Onnx__AttributeProto *a = malloc(sizeof *a);
  if (!a) {
    ex_fail(e, DM_NOMEM("an attribute"));
    return NULL;
  }
  onnx__attribute_proto__init(a);
  n->attribute[n->n_attribute++] = a;
  a->name = ex_dup(e, name);
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
  char *d = a ? ex_dup(e, v) : NULL;
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
    ex_fail(e, DM_NOMEM("an attribute"));
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
    ex_fail(e, dm_error(DM_ERR_TYPE, "'%s' is %s, which ONNX initializers cannot hold here", name,
                     dm_dtype_name(dtype)));
    return;
  }
  Onnx__TensorProto **arr = ex_grow(e, e->g->initializer, e->g->n_initializer, sizeof *arr);
  ex_const *c = arr ? ex_grow(e, e->consts, e->n_consts, sizeof *c) : NULL;
  if (arr)
    e->g->initializer = arr;
  if (!c)
    return;
  e->consts = c;
  Onnx__TensorProto *t = malloc(sizeof *t);
  int64_t *d = malloc((size_t)ndim * sizeof *d + 1);
  uint8_t *raw = malloc((size_t)numel * es + 1);
  char *nm = ex_dup(e, name);
  if (!t || !d || !raw || !nm) {
    free(t);
    free(d);
    free(raw);
    free(nm);
    ex_fail(e, DM_NOMEM("an initializer"));
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

/* ---- an op's arguments -------------------------------------------------------------- */

int64_t ex_arg_i(const ex_op *o, const char *name, int64_t def) {
  return dm_opdef_arg_int(o->def, name, def);
}

float ex_arg_f(const ex_op *o, const char *name, float def) {
  const Caffe2__Argument *a = dm_opdef_find_arg(o->def, name);
  return !a ? def : a->has_f ? a->f : a->has_i ? (float)a->i : def;
}

/* A node of `type` on inputs in[0..n_in) writing out[0], named as the op. */
Onnx__NodeProto *ex_node_io(oxe *e, const ex_op *o, const char *type, size_t n_in) {
  Onnx__NodeProto *n = ex_node(e, type, o->def->name);
  for (size_t k = 0; k < n_in && k < o->def->n_input; k++)
    ex_in(e, n, o->in[k]);
  ex_out(e, n, o->out[0]);
  return n;
}
