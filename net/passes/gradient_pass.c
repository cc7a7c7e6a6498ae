/* gradient_pass.c: the gradient pass: the backward net of a forward net, from each op's
 * gradient maker (the dm_grad_* calls makers use are core's, core/grad_ctx.c; the pass
 * fills their dm_grad_ctx and appends what they emit). */
#include "net/passes/gradient_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core/grad_ctx_impl.h"
#include "core/registry.h"
#include "demitasse_plugin.h"
#include "net/passes/memory_pass.h"
#include "net/netdef_build.h"
#include "net/op_origin.h"

/* One (blob, version) in the forward net's SSA form. */
typedef struct version_info {
  int consumers;  /* forward ops on the loss path that read this version */
  int remaining;  /* consumers not yet visited in the backward walk */
  char **partials; /* gradient contributions so far */
  size_t n_partials;
  char *grad;     /* the final gradient blob name, once known */
} version_info;

typedef struct blob_versions {
  char *name;
  version_info *v; /* indexed by version */
  int n;           /* versions so far */
} blob_versions;

/* Name -> index into pass_state.blobs (an array that moves as it grows, so the hash
 * entries live apart from it). */
typedef struct blob_index {
  const char *name; /* the blob_versions' own copy */
  long id;
  UT_hash_handle hh;
} blob_index;

typedef struct pass_state {
  Caffe2__NetDef *net;
  blob_versions *blobs;
  size_t n_blobs;
  blob_index *index; /* uthash over blobs */
  int **in_ver, **out_ver; /* per forward op */
  char *on_path;           /* per forward op: some output reaches a loss */
  char *needed;            /* per blob index: loss gradient can use it */
} pass_state;

/* dm_grad_host.emit for the pass: the op a maker emits, built and appended to the
 * backward net `self`. The gradient kernel reads the same conv geometry, axis, etc., so
 * the forward op's arguments, device and engine are copied. */
static dm_status emit_gradient_op(void *self, const Caffe2__OperatorDef *fwd, const char *type,
                                  int n_in, const char *const *in, int n_out,
                                  const char *const *out, Caffe2__OperatorDef **made) {
  dm_opb b;
  dm_opb_start(&b, type);
  for (int i = 0; i < n_in; i++)
    dm_opb_input(&b, in[i]);
  for (int i = 0; i < n_out; i++)
    dm_opb_output(&b, out[i]);
  for (size_t i = 0; i < fwd->n_arg; i++)
    dm_opb_copy_arg(&b, fwd->arg[i]);
  if (fwd->device_option)
    dm_opb_device_option(&b, fwd->device_option);
  if (fwd->engine)
    dm_opb_engine(&b, fwd->engine);
  dm_opb_gradient(&b, 1);
  Caffe2__OperatorDef *op = dm_opb_op(&b);
  if (op) /* errors name it after its forward op as written (op_origin.h) */
    op->debug_info = dm_origin_of_gradient(fwd);
  DM_TRY(dm_opb_append(&b, (Caffe2__NetDef *)self));
  *made = op;
  return DM_OK;
}

/* --- running one maker -------------------------------------------------------------- */

static void grad_ctx_free(dm_grad_ctx *g) {
  for (size_t i = 0; i < g->op->n_input; i++) {
    free(g->in_grads[i]);
    free(g->in_alias[i]);
  }
  free(g->in_grads);
  free(g->in_alias);
}

static char *str_printf(const char *fmt, const char *a, int k) {
  int n = snprintf(NULL, 0, fmt, a, k);
  char *s = malloc((size_t)n + 1);
  if (s)
    snprintf(s, (size_t)n + 1, fmt, a, k);
  return s;
}

/* Calls the maker of `op`. in_names[i] is the name the pass wants input i's gradient
 * written to; on return, alias[i] (if set) names an existing blob instead. */
static dm_status run_maker(const Caffe2__OperatorDef *op, const dm_op_schema *schema,
                           const char **out_grads, char **in_names, const char *needed,
                           Caffe2__NetDef *out, char ***alias_out) {
  dm_grad_ctx g = {.op = op, .out_grads = out_grads, .needed = needed,
                   .host = {out, emit_gradient_op}};
  g.in_grads = calloc(op->n_input + 1, sizeof *g.in_grads);
  g.in_alias = calloc(op->n_input + 1, sizeof *g.in_alias);
  if (!g.in_grads || !g.in_alias) {
    free(g.in_grads);
    free(g.in_alias);
    return DM_NOMEM("gradient names");
  }
  for (size_t i = 0; i < op->n_input; i++)
    if (!(g.in_grads[i] = strdup(in_names[i]))) {
      grad_ctx_free(&g);
      return DM_NOMEM("gradient names");
    }
  dm_status s = schema->gradient(&g);
  if (s == DM_OK) {
    *alias_out = g.in_alias;
    g.in_alias = calloc(op->n_input + 1, sizeof *g.in_alias); /* keep free() simple */
  }
  grad_ctx_free(&g);
  return s;
}

dm_status dm_op_gradient_ops(const Caffe2__OperatorDef *op, const char *const *output_grads,
                             Caffe2__NetDef *out) {
  const dm_op_schema *schema = dm_schema_lookup(op->type ? op->type : "");
  if (!schema)
    return dm_unknown_op_error(op->type);
  if (!schema->gradient)
    return dm_error(DM_ERR_INVALID, "%s has no gradient", op->type);
  char **names = calloc(op->n_input + 1, sizeof *names);
  if (!names)
    return DM_NOMEM("gradient names");
  dm_status s = DM_OK;
  for (size_t i = 0; i < op->n_input && s == DM_OK; i++)
    if (!(names[i] = str_printf("%s_grad", op->input[i], 0)))
      s = DM_NOMEM("gradient names");
  char **alias = NULL;
  if (s == DM_OK)
    s = run_maker(op, schema, (const char **)output_grads, names, NULL, out, &alias);
  for (size_t i = 0; i < op->n_input; i++) {
    free(names[i]);
    if (alias)
      free(alias[i]);
  }
  free(names);
  free(alias);
  return s;
}

/* --- the pass ----------------------------------------------------------------------- */

/* The index of blob `name`; with `create`, a new one if needed. -1: not found (or, with
 * `create`, out of memory). */
static long blob_id(pass_state *ps, const char *name, int create) {
  blob_index *e = NULL;
  HASH_FIND_STR(ps->index, name, e);
  if (e)
    return e->id;
  if (!create)
    return -1;
  blob_versions *b = realloc(ps->blobs, (ps->n_blobs + 1) * sizeof *b);
  if (!b)
    return -1;
  ps->blobs = b;
  char *copy = strdup(name);
  if (!copy || !(e = calloc(1, sizeof *e))) {
    free(copy);
    return -1;
  }
  b[ps->n_blobs] = (blob_versions){copy, NULL, 0};
  e->name = copy;
  e->id = (long)ps->n_blobs++;
  HASH_ADD_KEYPTR(hh, ps->index, e->name, strlen(e->name), e);
  return e->id;
}

static version_info *version_at(pass_state *ps, long id, int ver) {
  blob_versions *b = &ps->blobs[id];
  if (ver >= b->n) {
    version_info *v = realloc(b->v, (size_t)(ver + 1) * sizeof *v);
    if (!v)
      return NULL;
    memset(v + b->n, 0, (size_t)(ver + 1 - b->n) * sizeof *v);
    b->v = v;
    b->n = ver + 1;
  }
  return &b->v[ver];
}

static void pass_free(pass_state *ps, size_t n_ops) {
  blob_index *e, *tmp;
  HASH_ITER(hh, ps->index, e, tmp) {
    HASH_DEL(ps->index, e);
    free(e);
  }
  for (size_t i = 0; i < ps->n_blobs; i++) {
    for (int k = 0; k < ps->blobs[i].n; k++) {
      version_info *v = &ps->blobs[i].v[k];
      for (size_t j = 0; j < v->n_partials; j++)
        free(v->partials[j]);
      free(v->partials);
      free(v->grad);
    }
    free(ps->blobs[i].v);
    free(ps->blobs[i].name);
  }
  free(ps->blobs);
  for (size_t i = 0; i < n_ops; i++) {
    if (ps->in_ver)
      free(ps->in_ver[i]);
    if (ps->out_ver)
      free(ps->out_ver[i]);
  }
  free(ps->in_ver);
  free(ps->out_ver);
  free(ps->on_path);
  free(ps->needed);
}

/* SSA versions: reading blob b sees its current version; writing makes a new one. */
static dm_status number_versions(pass_state *ps, size_t n_ops) {
  Caffe2__NetDef *net = ps->net;
  ps->in_ver = calloc(n_ops + 1, sizeof *ps->in_ver);
  ps->out_ver = calloc(n_ops + 1, sizeof *ps->out_ver);
  ps->on_path = calloc(n_ops + 1, 1);
  if (!ps->in_ver || !ps->out_ver || !ps->on_path)
    return DM_NOMEM("the gradient pass");
  for (size_t i = 0; i < n_ops; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    ps->in_ver[i] = calloc(op->n_input + 1, sizeof(int));
    ps->out_ver[i] = calloc(op->n_output + 1, sizeof(int));
    if (!ps->in_ver[i] || !ps->out_ver[i])
      return DM_NOMEM("the gradient pass");
    for (size_t j = 0; j < op->n_input; j++) {
      long id = blob_id(ps, op->input[j], 1);
      if (id < 0)
        return DM_NOMEM("the gradient pass");
      ps->in_ver[i][j] = ps->blobs[id].n ? ps->blobs[id].n - 1 : 0;
      if (!version_at(ps, id, ps->in_ver[i][j]))
        return DM_NOMEM("the gradient pass");
    }
    for (size_t j = 0; j < op->n_output; j++) {
      long id = blob_id(ps, op->output[j], 1);
      if (id < 0)
        return DM_NOMEM("the gradient pass");
      /* A blob first written here (never read before) starts at version 0. */
      ps->out_ver[i][j] = ps->blobs[id].n;
      if (!version_at(ps, id, ps->out_ver[i][j]))
        return DM_NOMEM("the gradient pass");
    }
  }
  ps->needed = calloc(ps->n_blobs + 1, 1);
  return ps->needed ? DM_OK : DM_NOMEM("the gradient pass");
}

/* Marks the ops whose outputs reach a loss through differentiable ops, counts the
 * consumers of each version among them, and marks the blobs whose gradient is wanted. */
static dm_status mark_path(pass_state *ps, size_t n_ops, const char *const *losses,
                           size_t n_losses) {
  Caffe2__NetDef *net = ps->net;
  /* reach[id][ver]: this version of the blob feeds a loss. */
  char **reach = calloc(ps->n_blobs + 1, sizeof *reach);
  if (!reach)
    return DM_NOMEM("the gradient pass");
  dm_status s = DM_OK;
  for (size_t i = 0; i < ps->n_blobs && s == DM_OK; i++)
    if (!(reach[i] = calloc((size_t)ps->blobs[i].n + 1, 1)))
      s = DM_NOMEM("the gradient pass");
  for (size_t l = 0; l < n_losses && s == DM_OK; l++) {
    long id = blob_id(ps, losses[l], 0);
    if (id < 0 || ps->blobs[id].n == 0)
      s = dm_error(DM_ERR_NOT_FOUND, "loss blob '%s' is not produced by the net", losses[l]);
    else
      reach[id][ps->blobs[id].n - 1] = 1;
  }
  char what[512];
  for (size_t i = n_ops; i-- > 0 && s == DM_OK;) {
    const Caffe2__OperatorDef *op = net->op[i];
    int hit = 0;
    for (size_t j = 0; j < op->n_output; j++)
      hit |= reach[blob_id(ps, op->output[j], 0)][ps->out_ver[i][j]];
    if (!hit)
      continue;
    const dm_op_schema *schema = dm_schema_lookup(op->type ? op->type : "");
    if (!schema)
      s = dm_error_prefix(dm_unknown_op_error(op->type), "%s",
                          dm_opdef_describe(op, i, what, sizeof what));
    else if (!schema->gradient && !schema->no_gradient)
      s = dm_error(DM_ERR_INVALID, "%s: the loss depends on its output, but it has no gradient",
                   dm_opdef_describe(op, i, what, sizeof what));
    if (s != DM_OK || !schema->gradient)
      continue;
    /* Makers index inputs and outputs as the schema declares them: an op of another
     * arity (which instantiation would refuse too) must not reach its maker, where
     * Add's, with no output, passed a NULL gradient name on (found by fuzz_net). */
    int ni = (int)op->n_input, no = (int)op->n_output;
    if (ni < schema->min_inputs || (schema->max_inputs >= 0 && ni > schema->max_inputs) ||
        no < schema->min_outputs || (schema->max_outputs >= 0 && no > schema->max_outputs)) {
      s = dm_error(DM_ERR_INVALID,
                   "%s has %d inputs and %d outputs; its schema allows %d to %d "
                   "inputs and %d to %d outputs (-1: any number)",
                   dm_opdef_describe(op, i, what, sizeof what), ni, no, schema->min_inputs, schema->max_inputs,
                   schema->min_outputs, schema->max_outputs);
      continue;
    }
    ps->on_path[i] = 1;
    for (size_t j = 0; j < op->n_input; j++) {
      long id = blob_id(ps, op->input[j], 0);
      reach[id][ps->in_ver[i][j]] = 1;
      ps->blobs[id].v[ps->in_ver[i][j]].consumers++;
      ps->blobs[id].v[ps->in_ver[i][j]].remaining++;
      ps->needed[id] = 1;
    }
  }
  for (size_t i = 0; i < ps->n_blobs; i++)
    free(reach[i]);
  free(reach);
  return s;
}

/* When the last consumer of a version has been visited, its partials become X_grad. */
static dm_status finish_version(pass_state *ps, long id, version_info *v) {
  const char *name = ps->blobs[id].name;
  if (v->n_partials == 0)
    return DM_OK;
  if (v->n_partials == 1 && v->consumers <= 1) {
    v->grad = v->partials[0];
    v->partials[0] = NULL;
    v->n_partials = 0;
    return DM_OK;
  }
  char *grad = str_printf("%s_grad", name, 0);
  if (!grad)
    return DM_NOMEM("a gradient name");
  dm_opb b;
  dm_opb_start(&b, "Sum");
  dm_opb_inputs(&b, (const char *const *)v->partials, v->n_partials);
  dm_opb_output(&b, grad);
  dm_opb_gradient(&b, 1);
  dm_status s = dm_opb_append(&b, ps->net);
  if (s != DM_OK) {
    free(grad);
    return s;
  }
  v->grad = grad;
  return DM_OK;
}

/* Whether the ops emitted since `start` (or an alias) produced gradient `name`. */
static int wrote_grad(const pass_state *ps, size_t start, const char *alias, const char *name) {
  if (alias)
    return 1;
  for (size_t k = start; k < ps->net->n_op; k++)
    for (size_t o = 0; o < ps->net->op[k]->n_output; o++)
      if (strcmp(ps->net->op[k]->output[o], name) == 0)
        return 1;
  return 0;
}

static dm_status backward_op(pass_state *ps, size_t i) {
  const Caffe2__OperatorDef *op = ps->net->op[i];
  const dm_op_schema *schema = dm_schema_lookup(op->type);
  const char **out_grads = calloc(op->n_output + 1, sizeof *out_grads);
  char **in_names = calloc(op->n_input + 1, sizeof *in_names);
  char *needed = calloc(op->n_input + 1, 1);
  char **alias = NULL;
  dm_status s = out_grads && in_names && needed ? DM_OK : DM_NOMEM("the gradient pass");
  int any = 0;
  for (size_t j = 0; j < op->n_output && s == DM_OK; j++) {
    version_info *v = &ps->blobs[blob_id(ps, op->output[j], 0)].v[ps->out_ver[i][j]];
    out_grads[j] = v->grad;
    any |= v->grad != NULL;
  }
  for (size_t j = 0; j < op->n_input && s == DM_OK; j++) {
    long id = blob_id(ps, op->input[j], 0);
    version_info *v = &ps->blobs[id].v[ps->in_ver[i][j]];
    needed[j] = ps->needed[id];
    in_names[j] = v->consumers > 1 ? str_printf("_%s_grad_autosplit_%d", op->input[j],
                                                v->consumers - v->remaining)
                                   : str_printf("%s_grad", op->input[j], 0);
    if (!in_names[j])
      s = DM_NOMEM("a gradient name");
  }
  size_t start = ps->net->n_op;
  if (s == DM_OK && any) {
    s = run_maker(op, schema, out_grads, in_names, needed, ps->net, &alias);
    char what[512];
    if (s != DM_OK)
      dm_error_prefix(s, "gradient of %s", dm_opdef_describe(op, i, what, sizeof what));
  }
  /* Record what each input received, and finish versions whose consumers are done. */
  for (size_t j = 0; j < op->n_input && s == DM_OK; j++) {
    long id = blob_id(ps, op->input[j], 0);
    version_info *v = &ps->blobs[id].v[ps->in_ver[i][j]];
    if (any && wrote_grad(ps, start, alias ? alias[j] : NULL, in_names[j])) {
      char *name = alias && alias[j] ? alias[j] : in_names[j];
      char **p = realloc(v->partials, (v->n_partials + 1) * sizeof *p);
      if (!p) {
        s = DM_NOMEM("the gradient pass");
        break;
      }
      v->partials = p;
      v->partials[v->n_partials++] = strdup(name);
      if (!v->partials[v->n_partials - 1])
        s = DM_NOMEM("a gradient name");
    }
    if (--v->remaining == 0 && s == DM_OK)
      s = finish_version(ps, id, v);
  }
  for (size_t j = 0; j < op->n_input; j++) {
    if (in_names)
      free(in_names[j]);
    if (alias)
      free(alias[j]);
  }
  free(alias);
  free(in_names);
  free(out_grads);
  free(needed);
  return s;
}

dm_status dm_gradient_pass(Caffe2__NetDef *net, const dm_gradient_opts *o) {
  const char *const *losses = o->losses;
  size_t n_losses = o->n_losses;
  DM_TRY(dm_init()); /* the pass reads the op schemas */
  DM_TRY(dm_memory_refuse_planned(net, "gradient"));
  for (size_t i = 0; i < net->n_op; i++)
    if (net->op[i]->is_gradient_op)
      return dm_error(DM_ERR_INVALID,
                      "op %zu (%s) is already a gradient op: the gradient pass takes a forward "
                      "net, and this one has its backward pass",
                      i, net->op[i]->type ? net->op[i]->type : "");
  size_t n_ops = net->n_op;
  pass_state ps = {.net = net};
  dm_status s = number_versions(&ps, n_ops);
  if (s == DM_OK)
    s = mark_path(&ps, n_ops, losses, n_losses);
  /* Seed: d loss / d loss = 1, shaped like the loss. */
  for (size_t l = 0; l < n_losses && s == DM_OK; l++) {
    long id = blob_id(&ps, losses[l], 0);
    version_info *v = &ps.blobs[id].v[ps.blobs[id].n - 1];
    char *grad = str_printf("%s_autogen_grad", losses[l], 0);
    dm_opb b;
    dm_opb_start(&b, "ConstantFill");
    dm_opb_input(&b, losses[l]);
    if (grad)
      dm_opb_output(&b, grad);
    else
      dm_opb_fail(&b, DM_NOMEM("a gradient name"));
    dm_opb_arg_float(&b, "value", 1.0f);
    dm_opb_gradient(&b, 1);
    s = dm_opb_append(&b, net);
    if (s == DM_OK && v->grad)
      s = dm_error(DM_ERR_INVALID, "loss '%s' is given twice", losses[l]);
    if (s == DM_OK)
      v->grad = grad;
    else
      free(grad);
  }
  for (size_t i = n_ops; i-- > 0 && s == DM_OK;)
    if (ps.on_path[i])
      s = backward_op(&ps, i);
  pass_free(&ps, n_ops);
  return s;
}
