/* export.c: a Caffe2 inference pair as an ONNX model (see net/onnx/export.h).
 *
 * The driver: runs the init net (so that any fill gives the weights `run` would use),
 * turns what it leaves into initializers, declares the graph inputs and outputs, infers
 * every blob's shape when all inputs have one, single-assigns the blob names, and hands
 * each predict op to its translator (net/onnx/export_ops.c). A refused op does not stop the
 * walk: the error lists them all, and no model comes back.
 */
#include "net/onnx/export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/api.h"
#include "core/demitasse.h"
#include "core/fileio.h"
#include "net/netdef_build.h"
#include "net/onnx/emit.h"
#include "net/onnx/export_names.h"
#include "net/shape_infer.h"

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
      ex_name *n = ex_names_get(t, init->op[i]->output[k]);
      if (!n)
        return DM_NOMEM("a name");
      n->filled = 1;
    }
  for (size_t i = 0; i < p->n_external_input; i++) {
    ex_name *n = ex_names_get(t, p->external_input[i]);
    if (!n)
      return DM_NOMEM("a name");
    n->ext_in = 1;
  }
  for (size_t i = 0; i < p->n_external_output; i++) {
    ex_name *n = ex_names_get(t, p->external_output[i]);
    if (!n)
      return DM_NOMEM("a name");
    n->ext_out = 1;
  }
  for (size_t i = 0; i < p->n_op; i++) {
    const Caffe2__OperatorDef *op = p->op[i];
    if (op->n_input > x->max_in)
      x->max_in = op->n_input;
    for (size_t k = 0; k < op->n_input; k++) {
      ex_name *n = ex_names_get(t, op->input[k]);
      if (!n)
        return DM_NOMEM("a name");
      n->reads++;
    }
    for (size_t k = 0; k < op->n_output; k++) {
      ex_name *n = ex_names_get(t, op->output[k]);
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
      ex_name *n = ex_names_find(&x->names, name);
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
    DM_TRY(dm_tensor_set_shape(b->tensor, gs->dtype ? gs->dtype : DM_FLOAT, gs->ndim, gs->dims));
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
    ex_fail(e, DM_NOMEM("a graph input"));
    return NULL;
  }
  onnx__value_info_proto__init(v);
  onnx__type_proto__init(ty);
  onnx__type_proto__tensor__init(tt);
  v->name = ex_dup(e, name);
  v->type = ty;
  ty->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  ty->tensor_type = tt;
  tt->has_elem_type = 1;
  tt->elem_type = ex_onnx_dtype(dtype) ? ex_onnx_dtype(dtype) : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  if (ndim < 0)
    return v;
  tt->shape = malloc(sizeof *tt->shape);
  if (!tt->shape) {
    ex_fail(e, DM_NOMEM("a shape"));
    return v;
  }
  onnx__tensor_shape_proto__init(tt->shape);
  tt->shape->dim = calloc((size_t)ndim + 1, sizeof *tt->shape->dim);
  if (!tt->shape->dim) {
    ex_fail(e, DM_NOMEM("a shape"));
    return v;
  }
  for (int i = 0; i < ndim; i++) {
    Onnx__TensorShapeProto__Dimension *d = malloc(sizeof *d);
    if (!d) {
      ex_fail(e, DM_NOMEM("a shape"));
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
  Onnx__ValueInfoProto **a = ex_grow(e, *arr, *n, sizeof *a);
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
    ex_name *n = ex_names_find(&x->names, p->external_input[i]);
    if (!n || !is_graph_input(n) || n->cur)
      continue;
    const dm_onnx_input_shape *gs = given_shape(x, n->name);
    add_value(&x->e, &x->e.g->input, &x->e.g->n_input,
              value_info(&x->e, n->name, gs && gs->dtype ? gs->dtype : DM_FLOAT,
                         gs ? gs->dims : NULL, gs ? gs->ndim : -1));
    DM_TRY(x->e.s);
    n->fixed = 1;
    n->cur = n->name;
  }
  for (size_t i = 0; x->opts && i < x->opts->n_shapes; i++) {
    const ex_name *n = ex_names_find(&x->names, x->opts->shapes[i].name);
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
  ex_name *n = ex_names_find(&x->names, blob);
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
  static const ex_translator *const tables[] = {ex_ops, ex_ops_math, ex_ops_seq};
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
  const ex_name *n = ex_names_find(&x->names, blob);
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
    ex_name *n = ex_names_find(&x->names, op->input[k]);
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
    ex_name *n = ex_names_find(&x->names, op->output[k]);
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
    const ex_name *n = ex_names_find(&x->names, p->external_output[i]);
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
  ex_names_free(&x.names);
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
