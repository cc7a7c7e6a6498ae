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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/netio.h"
#include "onnx_translate.h"

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
  DM_TRY(ox_emit_fill(c, n->output[0], t));
  c->out_rank = (int)t->n_dims;
  return ox_const_add(c, n->output[0], t);
}

/* The translator tables, searched in order; Constant is the importer's own. */
static const ox_translator ox_ops_constant[] = {{"Constant", tr_constant}, {NULL, NULL}};
static const ox_translator *const tables[] = {ox_ops_constant, ox_ops_nn, ox_ops_tensor,
                                              ox_ops_math, ox_ops_spatial};

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

static dm_status translate_graph(imp *c) {
  const Onnx__GraphProto *g = c->g;
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
      s = ox_known_add(c, g->input[i]->name, rank);
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
      if (!fn) {
        snprintf(c->why, sizeof c->why, "no translation for this op");
      } else {
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
          r = b.op || b.s != DM_OK ? dm_opb_append(&b, c->pred) : DM_OK;
        } else if (b.op) {
          dm_opb_discard(&b);
        }
      }
    }
    if (r == OX_REFUSED && c->why[0]) {
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
        s = ox_known_add(c, n->output[j], c->out_rank);
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
      s = ox_add_external(&c->pred->external_output, &c->pred->n_external_output, o);
  }
  /* External inputs: the graph's inputs (fed), then the constants the net reads. */
  for (size_t i = 0; i < g->n_input && s == DM_OK; i++)
    s = ox_add_external(&c->pred->external_input, &c->pred->n_external_input, g->input[i]->name);
  for (size_t i = 0; i < c->n_consts && s == DM_OK; i++)
    s = ox_add_external(&c->pred->external_input, &c->pred->n_external_input, c->const_names[i]);
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
  if (c.opset < OX_OPSET_MIN || c.opset > OX_OPSET_MAX)
    return dm_error(DM_ERR_UNSUPPORTED, "opset %lld; the importer reads opsets %d to %d",
                    (long long)c.opset, OX_OPSET_MIN, OX_OPSET_MAX);
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
