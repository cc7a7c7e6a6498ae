/* import.c: translates an ONNX graph into a Caffe2 init net and predict net.
 *
 * Initializers and Constant nodes become GivenTensor*Fill ops in the init net (the
 * weights a Caffe2 predictor loads once); every other node becomes one Caffe2 op of the
 * predict net, found in a table by its ONNX op type, unless it is folded into a
 * constant first (net/onnx/fold.c: shape arithmetic on constants and on the static shapes
 * known here). Static shapes: the graph inputs' declared dims, the constants', and the
 * outputs of each emitted op by its schema's own shape inference (ox_infer_op), kept as
 * shape-only tensors in a workspace of the importer's. A Constant or folded value that
 * no predict-net op reads in the end (a shape taken into an argument) is not filled.
 * A translator either emits its op or says why it cannot (an attribute value, an opset,
 * an input that must be constant); the import goes on to the end of the graph so that
 * the error lists every node that cannot be translated at once, and nothing is written
 * or run. The names are ONNX's, so what a user fed or fetched from ONNX Runtime is fed
 * and fetched here under the same names.
 */
#include "net/onnx/import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uthash.h>

#include "core/netio.h"
#include "core/tensor.h"
#include "net/onnx/translate.h"

/* ---- Constant -------------------------------------------------------------------- */

/* A Constant node's value goes to the init net like an initializer, and is known to
 * the translators that need constant inputs (Reshape's shape). */
static dm_status tr_constant(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  (void)b;
  DM_TRY(ox_need_outputs(c, n, 1));
  const Onnx__AttributeProto *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
  if (!a || !a->name)
    return ox_refuse(c, "expected exactly one value attribute");
  if (strcmp(a->name, "value") == 0 && a->t) {
    DM_TRY(ox_emit_fill(c, n->output[0], a->t));
    c->out_rank = (int)a->t->n_dims;
    return ox_const_add(c, n->output[0], a->t);
  }
  int is_list = strcmp(a->name, "value_floats") == 0 || strcmp(a->name, "value_ints") == 0;
  int is_float = strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_floats") == 0;
  int is_int = strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0;
  if (!is_float && !is_int)
    return ox_refuse(c, "a Constant given by '%s'", a->name);
  /* The values copied into a tensor of the importer's (value_float(s): FLOAT,
   * value_int(s): INT64; a list is 1-D, a single value a scalar). */
  int64_t len = (int64_t)(is_float ? a->n_floats : a->n_ints);
  const void *data = is_float ? (is_list ? (const void *)a->floats : &a->f)
                              : (is_list ? (const void *)a->ints : &a->i);
  size_t bytes = is_list ? (size_t)len * (is_float ? sizeof(float) : sizeof(int64_t))
                         : (is_float ? sizeof(float) : sizeof(int64_t));
  Onnx__TensorProto *t = NULL;
  DM_TRY(ox_made_tensor(c, is_float ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
                                    : ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
                        is_list, &len, data, bytes, &t));
  DM_TRY(ox_emit_fill(c, n->output[0], t));
  c->out_rank = (int)t->n_dims;
  return ox_const_add(c, n->output[0], t);
}

/* The translator tables, searched in order; Constant is the importer's own. */
static const ox_translator ox_ops_constant[] = {{"Constant", tr_constant}, {NULL, NULL}};
static const ox_translator *const tables[] = {ox_ops_constant, ox_ops_nn, ox_ops_tensor,
                                              ox_ops_math, ox_ops_reduce, ox_ops_shape,
                                              ox_ops_spatial};

static ox_node_fn find_translator(const char *op_type) {
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const ox_translator *e = tables[t]; e->op_type; e++)
      if (strcmp(e->op_type, op_type) == 0)
        return e->fn;
  return NULL;
}

/* ---- the driver ------------------------------------------------------------------ */

static int is_default_domain(const char *d) {
  return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

/* The override for symbolic dim `name` (import-onnx --dim), or -1. */
static int64_t dim_override(const imp *c, const char *name) {
  for (size_t k = 0; name && k < c->n_dims; k++)
    if (strcmp(c->dims[k].name, name) == 0)
      return c->dims[k].value;
  return -1;
}

/* A graph input's static shape, where its ValueInfo gives every dim a value or names a
 * dim_param the caller gave a value (any other dim_param, a symbolic batch size, leaves
 * it unknown). */
static dm_status input_shape(imp *c, const char *name, const Onnx__TypeProto__Tensor *tt,
                             int rank) {
  dm_dtype dt = tt->has_elem_type ? ox_dm_dtype(tt->elem_type) : DM_UNDEFINED;
  int64_t dims[DM_MAX_DIMS];
  if (dt == DM_UNDEFINED || rank > DM_MAX_DIMS)
    return DM_OK;
  for (int d = 0; d < rank; d++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
      dims[d] = dim_override(c, dim->dim_param);
    else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
      dims[d] = dim->dim_value;
    else
      dims[d] = -1;
  }
  for (int d = 0; d < rank; d++)
    if (dims[d] < 0)
      return DM_OK;
  int64_t numel;
  if (dm_shape_numel(rank, dims, &numel) != DM_OK) {
    dm_error_clear(); /* too large to be static: left unknown */
    return DM_OK;
  }
  return ox_shape_set(c, name, dt, rank, dims);
}

/* Whether constant `name` is one the graph computes (a Constant node, a fold) that no
 * op of the predict net reads and no graph output names: a shape consumed at import
 * (Reshape's, Slice's), or a step of a folded chain, which the init net need not hold. */
static int unused_derived(const imp *c, const char *name) {
  const Onnx__GraphProto *g = c->g;
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
      return 0;
  for (size_t i = 0; i < g->n_output; i++)
    if (g->output[i]->name && strcmp(g->output[i]->name, name) == 0)
      return 0;
  for (size_t i = 0; i < c->pred->n_op; i++)
    if (dm_opdef_reads(c->pred->op[i], name))
      return 0;
  return 1;
}

/* Removes the init-net fill of `name`. */
static void drop_fill(Caffe2__NetDef *init, const char *name) {
  for (size_t i = init->n_op; i-- > 0;)
    if (init->op[i]->n_output == 1 && strcmp(init->op[i]->output[0], name) == 0) {
      protobuf_c_message_free_unpacked(&init->op[i]->base, NULL);
      memmove(&init->op[i], &init->op[i + 1], (init->n_op - i - 1) * sizeof *init->op);
      init->n_op--;
      return;
    }
}

/* A name and what first wrote it (a graph input, an initializer, a node's output). */
typedef struct ssa_writer {
  const char *name;
  char what[48];
  UT_hash_handle hh;
} ssa_writer;

/* Records `name`'s writer; *prev is the earlier one, if any (and nothing is recorded). */
static void ssa_write(ssa_writer **set, ssa_writer *slots, size_t *used, const char *name,
                      const char *fmt, size_t a, size_t b, const ssa_writer **prev) {
  ssa_writer *w = NULL;
  HASH_FIND_STR(*set, name, w);
  *prev = w;
  if (w)
    return;
  w = &slots[(*used)++];
  w->name = name;
  snprintf(w->what, sizeof w->what, fmt, a, b);
  HASH_ADD_KEYPTR(hh, *set, w->name, strlen(w->name), w);
}

/* Refuses a graph that is not in SSA form (one writer a name: onnx.checker, ONNX
 * Runtime), or has no outputs. A hash of the names, so that a graph of many nodes is
 * checked in linear time (a 42 KB model once took seconds with a scan per output). */
static dm_status check_ssa(const Onnx__GraphProto *g) {
  if (g->n_output == 0)
    return dm_error(DM_ERR_INVALID, "the graph has no outputs (ONNX needs at least one)");
  size_t n = g->n_input + g->n_initializer, used = 0;
  for (size_t i = 0; i < g->n_node; i++)
    n += g->node[i]->n_output;
  ssa_writer *slots = calloc(n ? n : 1, sizeof *slots), *set = NULL;
  if (!slots)
    return DM_NOMEM("the graph's names");
  dm_status s = DM_OK;
  const ssa_writer *prev;
  /* An initializer may also be listed as a graph input (IR version 3): not two writers. */
  for (size_t k = 0; k < g->n_input; k++)
    if (g->input[k]->name)
      ssa_write(&set, slots, &used, g->input[k]->name, "graph input %zu", k, 0, &prev);
  for (size_t k = 0; k < g->n_initializer; k++)
    if (g->initializer[k]->name)
      ssa_write(&set, slots, &used, g->initializer[k]->name, "initializer %zu", k, 0, &prev);
  for (size_t i = 0; i < g->n_node && s == DM_OK; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    for (size_t j = 0; j < nd->n_output && s == DM_OK; j++) {
      if (!nd->output[j] || !nd->output[j][0])
        continue;
      ssa_write(&set, slots, &used, nd->output[j], "output %zu of node %zu", j, i, &prev);
      if (prev)
        s = dm_error(DM_ERR_INVALID,
                     "node %zu (%s '%s'): output %zu '%s' is already written by %s; an "
                     "ONNX graph gives each name one writer (SSA)",
                     i, nd->op_type ? nd->op_type : "", nd->name ? nd->name : "", j,
                     nd->output[j], prev->what);
    }
  }
  HASH_CLEAR(hh, set);
  free(slots);
  return s;
}

/* How much of the error message a refusal list may take: DM_ERROR_CAP (core/status.c,
 * 2 KB) less room for the file name and context callers prepend. */
#define REPORT_CAP 1400

static dm_status translate_graph(imp *c) {
  const Onnx__GraphProto *g = c->g;
  for (size_t i = 0; i < g->n_input; i++)
    if (!g->input[i]->name || !*g->input[i]->name)
      return dm_error(DM_ERR_PARSE, "graph input %zu has no name", i);
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    if (!t->name || !*t->name)
      return dm_error(DM_ERR_PARSE, "initializer %zu has no name", i);
    DM_TRY(ox_emit_fill(c, t->name, t));
    DM_TRY(ox_const_add(c, t->name, t));
    DM_TRY(dm_strv_push(&c->init->external_output, &c->init->n_external_output, t->name));
  }
  if (g->n_sparse_initializer)
    return dm_error(DM_ERR_UNSUPPORTED, "sparse initializers are not supported");
  DM_TRY(check_ssa(g));

  char *report = NULL;
  size_t report_len = 0, n_refused = 0, n_listed = 0, n_refused_names = 0;
  char **refused = NULL; /* the outputs of refused nodes */
  dm_status s = DM_OK;
  for (size_t i = 0; i < g->n_input && s == DM_OK; i++) {
    const Onnx__TypeProto *ty = g->input[i]->type;
    int rank = ty && ty->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                       ty->tensor_type->shape
                   ? (int)ty->tensor_type->shape->n_dim
                   : -1;
    if (g->input[i]->name)
      s = ox_known_add(c, g->input[i]->name, rank);
    if (s == DM_OK && g->input[i]->name && rank >= 0 &&
        !ox_const_find(c, g->input[i]->name)) /* an initializer's own dims win */
      s = input_shape(c, g->input[i]->name, ty->tensor_type, rank);
  }
  for (size_t i = 0; i < g->n_initializer && s == DM_OK; i++)
    s = ox_known_add(c, g->initializer[i]->name, (int)g->initializer[i]->n_dims);

  for (size_t i = 0; i < g->n_node && s == DM_OK; i++) {
    const Onnx__NodeProto *n = g->node[i];
    const char *type = n->op_type ? n->op_type : "";
    const char *name = n->name ? n->name : "";
    /* An input no earlier node, input or initializer defines: a missing initializer, or
     * a graph that is not in topological order (a cycle). */
    for (size_t j = 0; j < n->n_input && s == DM_OK; j++)
      if (ox_in_name(n, j) && !dm_str_in_list(n->input[j], (const char *const *)c->known, c->n_known))
        s = dm_error(DM_ERR_INVALID,
                     "node %zu (%s '%s'): input '%s' is not a graph input, an initializer or "
                     "an output of an earlier node (a missing initializer, or nodes out of "
                     "order)",
                     i, type, name, n->input[j]);
    if (s != DM_OK)
      break;
    c->why[0] = '\0';
    c->out_rank = ox_rank_of(c, ox_in_name(n, 0));
    dm_status r = OX_REFUSED;
    if (!is_default_domain(n->domain)) {
      snprintf(c->why, sizeof c->why, "domain '%s' is not supported", n->domain);
    } else {
      ox_node_fn fn = find_translator(type);
      int folded = 0;
      r = ox_fold(c, n, &folded);
      if (r != DM_OK || folded) {
        /* folded into constants, refused with a reason, or an error */
      } else if (!fn) {
        char fold_why[sizeof c->why];
        snprintf(fold_why, sizeof fold_why, "%s", c->why);
        r = OX_REFUSED;
        snprintf(c->why, sizeof c->why, "no translation for this op%s%.200s",
                 fold_why[0] ? "; not folded: " : "", fold_why);
      } else {
        c->why[0] = '\0'; /* a fold's reason; the translator gives its own */
        dm_opb b;
        b.op = NULL;
        b.s = DM_OK;
        r = fn(c, n, &b);
        if (r == DM_OK) {
          if (name[0] && b.op && !b.op->name) {
            b.op->name = strdup(name);
            if (!b.op->name)
              dm_opb_fail(&b, DM_NOMEM("an op name"));
          }
          int emitted = b.op != NULL;
          r = b.op || b.s != DM_OK ? dm_opb_append(&b, c->pred) : DM_OK;
          if (r == DM_OK && emitted)
            r = ox_infer_op(c, c->pred->op[c->pred->n_op - 1]);
        } else if (b.op) {
          dm_opb_discard(&b);
        }
      }
    }
    if (r == OX_REFUSED && c->why[0]) {
      /* whole lines while they fit the message, then a count of the rest */
      char line[512];
      snprintf(line, sizeof line, "\n  node %zu '%.120s': %.64s (domain '%.64s', opset %lld): %s",
               i, name, type, is_default_domain(n->domain) ? "ai.onnx" : n->domain,
               (long long)c->opset, c->why);
      /* a refusal that may only follow from an earlier one (an input whose shape is not
       * known because its node was refused) says so */
      for (size_t j = 0; j < n->n_input; j++)
        if (ox_in_name(n, j) &&
            dm_str_in_list(n->input[j], (const char *const *)refused, n_refused_names)) {
          size_t len = strlen(line);
          snprintf(line + len, sizeof line - len, " (input '%.64s' is from a refused node)",
                   n->input[j]);
          break;
        }
      for (size_t j = 0; j < n->n_output && s == DM_OK; j++)
        if (n->output[j] && n->output[j][0])
          s = dm_strv_push(&refused, &n_refused_names, n->output[j]);
      n_refused++;
      if (n_listed + 1 == n_refused && report_len + strlen(line) <= REPORT_CAP) {
        n_listed++;
        dm_text_appendf(&report, &report_len, "%s", line);
      }
    } else if (r != DM_OK) {
      s = dm_error_prefix(r, "node %zu (%s '%s')", i, type, name);
      break;
    }
    for (size_t j = 0; j < n->n_output && s == DM_OK; j++)
      if (n->output[j] && n->output[j][0]) {
        int64_t dims[DM_MAX_DIMS];
        int rank = ox_shape_of(c, n->output[j], dims); /* inferred, where static */
        s = ox_known_add(c, n->output[j], rank >= 0 ? rank : c->out_rank);
      }
  }
  if (s == DM_OK && n_refused) {
    char more[64] = "";
    if (n_listed < n_refused)
      snprintf(more, sizeof more, "\n  ... and %zu more", n_refused - n_listed);
    s = dm_error(DM_ERR_UNSUPPORTED, "%zu of %zu nodes cannot be imported:%s%s\nnothing was "
                 "written or run", n_refused, g->n_node, report ? report : "", more);
  }
  for (size_t i = 0; i < g->n_output && s == DM_OK; i++) {
    const char *o = g->output[i]->name;
    if (!o || !dm_str_in_list(o, (const char *const *)c->known, c->n_known))
      s = dm_error(DM_ERR_INVALID, "graph output '%s' is not produced by any node",
                   o ? o : "(no name)");
    else
      s = ox_add_external(&c->pred->external_output, &c->pred->n_external_output, o);
  }
  /* External inputs: the graph's inputs (fed), then the constants the net reads. */
  for (size_t i = 0; i < g->n_input && s == DM_OK; i++)
    s = ox_add_external(&c->pred->external_input, &c->pred->n_external_input, g->input[i]->name);
  for (size_t i = 0; i < c->n_consts && s == DM_OK; i++) {
    if (unused_derived(c, c->const_names[i]))
      drop_fill(c->init, c->const_names[i]);
    else
      s = ox_add_external(&c->pred->external_input, &c->pred->n_external_input,
                          c->const_names[i]);
  }
  free(report);
  for (size_t i = 0; i < n_refused_names; i++)
    free(refused[i]);
  free(refused);
  return s;
}

/* Checks the overrides before anything is translated: a name, a value of at least 1,
 * each name once. */
static dm_status check_dims(const dm_onnx_import_options *o) {
  for (size_t k = 0; k < o->n_dims; k++) {
    const dm_onnx_dim *d = &o->dims[k];
    if (!d->name || !*d->name)
      return dm_error(DM_ERR_INVALID, "dim override %zu has no name", k);
    if (d->value < 1)
      return dm_error(DM_ERR_INVALID, "dim '%s' = %lld: a dim override must be at least 1",
                      d->name, (long long)d->value);
    for (size_t j = 0; j < k; j++)
      if (strcmp(o->dims[j].name, d->name) == 0)
        return dm_error(DM_ERR_INVALID, "dim '%s' is given twice", d->name);
  }
  return DM_OK;
}

/* Refuses an override that names no graph input's dim (a typo the user should hear
 * of), listing the dims the inputs name. */
static dm_status check_dims_named(const Onnx__GraphProto *g, const dm_onnx_import_options *o) {
  for (size_t k = 0; k < o->n_dims; k++) {
    char names[256] = "";
    size_t len = 0;
    int found = 0;
    for (size_t i = 0; i < g->n_input && !found; i++) {
      const Onnx__TypeProto *ty = g->input[i]->type;
      if (!ty || ty->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !ty->tensor_type->shape)
        continue;
      for (size_t d = 0; d < ty->tensor_type->shape->n_dim && !found; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = ty->tensor_type->shape->dim[d];
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ||
            !dim->dim_param)
          continue;
        found = strcmp(dim->dim_param, o->dims[k].name) == 0;
        if (len + strlen(dim->dim_param) + 8 < sizeof names && !strstr(names, dim->dim_param))
          len += (size_t)snprintf(names + len, sizeof names - len, "%s'%s'", len ? ", " : "",
                                  dim->dim_param);
      }
    }
    if (!found)
      return dm_error(DM_ERR_INVALID, "no graph input has a dim named '%s' (the named dims: %s)",
                      o->dims[k].name, len ? names : "none");
  }
  return DM_OK;
}

dm_status dm_onnx_import(const Onnx__ModelProto *model, const char *base_dir,
                         Caffe2__NetDef **init, Caffe2__NetDef **predict) {
  return dm_onnx_import_with(model, base_dir, NULL, init, predict);
}

dm_status dm_onnx_import_with(const Onnx__ModelProto *model, const char *base_dir,
                              const dm_onnx_import_options *opts, Caffe2__NetDef **init,
                              Caffe2__NetDef **predict) {
  if (!model || !init || !predict || (opts && opts->n_dims && !opts->dims))
    return dm_error(DM_ERR_INVALID, "dm_onnx_import: NULL argument");
  *init = *predict = NULL;
  if (opts)
    DM_TRY(check_dims(opts));
  if (!model->graph)
    return dm_error(DM_ERR_PARSE, "the model has no graph");
  if (opts)
    DM_TRY(check_dims_named(model->graph, opts));
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
  if (c.opset < OX_OPSET_MIN || c.opset > OX_OPSET_MAX)
    return dm_error(DM_ERR_UNSUPPORTED, "opset %lld; the importer reads opsets %d to %d",
                    (long long)c.opset, OX_OPSET_MIN, OX_OPSET_MAX);
  if (opts) {
    c.dims = opts->dims;
    c.n_dims = opts->n_dims;
  }
  const char *gname = model->graph->name && *model->graph->name ? model->graph->name : "onnx";
  dm_status s = dm_init(); /* the schemas, whose shape inference gives static shapes */
  if (s == DM_OK)
    s = dm_workspace_new(&c.ws);
  if (s == DM_OK)
    s = dm_netdef_new(gname, &c.init);
  if (s == DM_OK)
    s = dm_netdef_new(gname, &c.pred);
  if (s == DM_OK)
    s = translate_graph(&c);
  for (size_t i = 0; i < c.n_made; i++) {
    free(c.made[i]->dims);
    free(c.made[i]->raw_data.data);
    free(c.made[i]);
  }
  dm_workspace_destroy(c.ws);
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
  return dm_onnx_import_file_with(path, NULL, init, predict);
}

dm_status dm_onnx_import_file_with(const char *path, const dm_onnx_import_options *opts,
                                   Caffe2__NetDef **init, Caffe2__NetDef **predict) {
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
  dm_status s =
      dm_onnx_import_with((const Onnx__ModelProto *)m, slash ? dir : ".", opts, init, predict);
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
