/* optimizer_pass.c: appends Caffe2's update ops after the gradient pass (see
 * net/passes/optimizer_pass.h for what it emits and why base_lr's sign depends on the optimizer). */
#include "net/passes/optimizer_pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/passes/memory_pass.h"
#include "net/netdef_build.h"
#include "operators/lr_policy.h"

void dm_optimizer_opts_init(dm_optimizer_opts *o) {
  memset(o, 0, sizeof *o);
  o->kind = DM_OPTIMIZER_SGD;
  o->lr = 0.01;
  o->momentum = 0.9;
  o->beta1 = 0.9;
  o->beta2 = 0.999;
  o->epsilon = 1e-5;
  o->multi_tensor = DM_SWITCH_AUTO;
}

dm_status dm_optimizer_kind_from_name(const char *name, dm_optimizer *out) {
  static const char *const names[] = {"sgd", "momentum", "adam", "adamw"};
  for (int k = 0; k < 4; k++)
    if (strcmp(name, names[k]) == 0) {
      *out = (dm_optimizer)k;
      return DM_OK;
    }
  return dm_error(DM_ERR_INVALID, "unknown optimizer '%s' (sgd, momentum, adam, adamw)", name);
}

void dm_optimizer_free_names(char **names, size_t n) {
  for (size_t i = 0; names && i < n; i++)
    free(names[i]);
  free(names);
}

/* ---- finding the parameters ------------------------------------------------------- */

static int in_list(const char *const *list, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (list[i] && strcmp(list[i], s) == 0)
      return 1;
  return 0;
}

/* Whether some op of the net writes `blob`. */
static int net_writes(const Caffe2__NetDef *net, const char *blob) {
  for (size_t i = 0; i < net->n_op; i++)
    for (size_t o = 0; o < net->op[i]->n_output; o++)
      if (strcmp(net->op[i]->output[o], blob) == 0)
        return 1;
  return 0;
}

/* Whether the forward op `before` or an earlier forward op writes `blob`. */
static int forward_writes_before(const Caffe2__NetDef *net, size_t before, const char *blob) {
  for (size_t i = 0; i < before; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (op->is_gradient_op)
      continue;
    for (size_t o = 0; o < op->n_output; o++)
      if (strcmp(op->output[o], blob) == 0)
        return 1;
  }
  return 0;
}

static char *grad_name(const char *p) {
  size_t n = strlen(p) + sizeof "_grad";
  char *s = malloc(n);
  if (s)
    snprintf(s, n, "%s_grad", p);
  return s;
}

/* Adds `name` to the candidates when it is new, has a gradient and is not excluded. */
static dm_status consider(const Caffe2__NetDef *net, const char *name, const char *const *exclude,
                          size_t n_exclude, char ***out, size_t *n) {
  if (in_list(exclude, n_exclude, name) || in_list((const char *const *)*out, *n, name))
    return DM_OK;
  char *g = grad_name(name);
  if (!g)
    return DM_NOMEM("a gradient name");
  int has = net_writes(net, g);
  free(g);
  return has ? dm_strv_push(out, n, name) : DM_OK;
}

dm_status dm_find_trainable_params(const Caffe2__NetDef *net, const char *const *exclude,
                                   size_t n_exclude, char ***out, size_t *n_out) {
  char **names = NULL;
  size_t n = 0;
  dm_status s = DM_OK;
  for (size_t i = 0; i < net->n_external_input && s == DM_OK; i++)
    s = consider(net, net->external_input[i], exclude, n_exclude, &names, &n);
  for (size_t i = 0; i < net->n_op && s == DM_OK; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (op->is_gradient_op)
      continue;
    for (size_t j = 0; j < op->n_input && s == DM_OK; j++)
      if (!forward_writes_before(net, i, op->input[j]))
        s = consider(net, op->input[j], exclude, n_exclude, &names, &n);
  }
  if (s != DM_OK) {
    dm_optimizer_free_names(names, n);
    return s;
  }
  *out = names;
  *n_out = n;
  return DM_OK;
}

/* ---- building ops ----------------------------------------------------------------- */

/* ConstantFill -> name: FLOAT [1] `value`, or with `like`, like's shape (value 0). */
static dm_status fill(Caffe2__NetDef *init, const char *name, const char *like, int dtype,
                      double value) {
  static const int64_t one[1] = {1};
  dm_opb b;
  dm_opb_start(&b, "ConstantFill");
  if (like)
    dm_opb_input(&b, like);
  dm_opb_output(&b, name);
  if (!like)
    dm_opb_arg_ints(&b, "shape", one, 1);
  dm_opb_arg_int(&b, "dtype", dtype);
  if (dtype == 10)
    dm_opb_arg_int(&b, "value", (int64_t)value);
  else
    dm_opb_arg_float(&b, "value", (float)value);
  return dm_opb_append(&b, init);
}

/* The policy's own arguments only (those its formula in lr_policy.h reads), as Caffe2's
 * files list them. */
static dm_status learning_rate_op(Caffe2__NetDef *net, const dm_optimizer_opts *o,
                                  const dm_lr_policy *p) {
  dm_opb b;
  dm_opb_start(&b, "LearningRate");
  dm_opb_input(&b, DM_OPTIM_ITER_BLOB);
  dm_opb_output(&b, DM_OPTIM_LR_BLOB);
  /* Caffe2's optimizer.py: WeightedSum and Adam add lr * step (so base_lr < 0),
   * MomentumSGDUpdate subtracts it (base_lr > 0). */
  double base = o->kind == DM_OPTIMIZER_MOMENTUM ? o->lr : -o->lr;
  dm_opb_arg_float(&b, "base_lr", (float)base);
  dm_opb_arg_string(&b, "policy", o->policy ? o->policy : "fixed");
  if (p->kind == DM_LR_STEP)
    dm_opb_arg_int(&b, "stepsize", p->stepsize);
  if (p->kind == DM_LR_STEP || p->kind == DM_LR_EXP || p->kind == DM_LR_INV)
    dm_opb_arg_float(&b, "gamma", (float)p->gamma);
  if (p->kind == DM_LR_INV || p->kind == DM_LR_POLY)
    dm_opb_arg_float(&b, "power", (float)p->power);
  if (p->kind == DM_LR_POLY)
    dm_opb_arg_int(&b, "max_iter", p->max_iter);
  if (p->warmup_iter > 0) {
    dm_opb_arg_int(&b, "warmup_iter", p->warmup_iter);
    dm_opb_arg_float(&b, "warmup_start", (float)p->warmup_start);
  }
  return dm_opb_append(&b, net);
}

/* Appends type(in) -> out with no arguments. */
static dm_status plain_op(Caffe2__NetDef *net, const char *type, const char *const *in,
                          size_t n_in, const char *const *out, size_t n_out) {
  dm_opb b;
  dm_opb_start(&b, type);
  dm_opb_inputs(&b, in, n_in);
  dm_opb_outputs(&b, out, n_out);
  return dm_opb_append(&b, net);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* "<p><suffix>" in buf (names longer than buf are refused). */
static dm_status suffixed(char *buf, size_t cap, const char *p, const char *suffix) {
  if ((size_t)snprintf(buf, cap, "%s%s", p, suffix) >= cap)
    return dm_error(DM_ERR_LIMIT, "parameter name '%.64s...' is too long", p);
  return DM_OK;
}

/* Whether p gets weight decay: named *_w, or every param with decay_all. */
static int decayed(const char *p, const dm_optimizer_opts *o) {
  return o->weight_decay > 0 && (o->decay_all || ends_with(p, "_w"));
}

/* The weight-decay WeightedSum of p, when p is decayed (AdamW decays in its update). */
static dm_status decay_op(Caffe2__NetDef *net, const char *p, const dm_optimizer_opts *o) {
  char g[512];
  DM_TRY(suffixed(g, sizeof g, p, "_grad"));
  if (!net_writes(net, g))
    return dm_error(DM_ERR_INVALID, "parameter '%s' has no gradient: no op writes '%s'", p, g);
  if (o->kind != DM_OPTIMIZER_ADAMW && decayed(p, o)) {
    const char *in[4] = {g, DM_OPTIM_ONE_BLOB, p, DM_OPTIM_WD_BLOB}, *out[1] = {g};
    DM_TRY(plain_op(net, "WeightedSum", in, 4, out, 1));
  }
  return DM_OK;
}

static void momentum_args(dm_opb *b, const dm_optimizer_opts *o) {
  dm_opb_arg_float(b, "momentum", (float)o->momentum);
  dm_opb_arg_int(b, "nesterov", o->nesterov ? 1 : 0);
}

static void adam_args(dm_opb *b, const dm_optimizer_opts *o) {
  dm_opb_arg_float(b, "beta1", (float)o->beta1);
  dm_opb_arg_float(b, "beta2", (float)o->beta2);
  dm_opb_arg_float(b, "epsilon", (float)o->epsilon);
}

/* The state's fills of p (its moments, zero, p's shape). */
static dm_status state_fills(Caffe2__NetDef *init, const char *p, const dm_optimizer_opts *o) {
  char m[512];
  if (o->kind == DM_OPTIMIZER_MOMENTUM) {
    DM_TRY(suffixed(m, sizeof m, p, "_momentum"));
    return fill(init, m, p, 1, 0);
  }
  if (o->kind == DM_OPTIMIZER_ADAM || o->kind == DM_OPTIMIZER_ADAMW) {
    DM_TRY(suffixed(m, sizeof m, p, "_first_moment"));
    DM_TRY(fill(init, m, p, 1, 0));
    DM_TRY(suffixed(m, sizeof m, p, "_second_moment"));
    return fill(init, m, p, 1, 0);
  }
  return DM_OK;
}

static dm_status update_ops(Caffe2__NetDef *net, Caffe2__NetDef *init, const char *p,
                            const dm_optimizer_opts *o) {
  char g[512], m1[512], m2[512];
  DM_TRY(decay_op(net, p, o));
  DM_TRY(suffixed(g, sizeof g, p, "_grad"));
  DM_TRY(state_fills(init, p, o));
  dm_opb b;
  switch (o->kind) {
  case DM_OPTIMIZER_SGD: {
    const char *in[4] = {p, DM_OPTIM_ONE_BLOB, g, DM_OPTIM_LR_BLOB}, *out[1] = {p};
    return plain_op(net, "WeightedSum", in, 4, out, 1);
  }
  case DM_OPTIMIZER_MOMENTUM: {
    DM_TRY(suffixed(m1, sizeof m1, p, "_momentum"));
    const char *in[4] = {g, m1, DM_OPTIM_LR_BLOB, p}, *out[3] = {g, m1, p};
    dm_opb_start(&b, "MomentumSGDUpdate");
    dm_opb_inputs(&b, in, 4);
    dm_opb_outputs(&b, out, 3);
    momentum_args(&b, o);
    return dm_opb_append(&b, net);
  }
  case DM_OPTIMIZER_ADAM:
  case DM_OPTIMIZER_ADAMW: {
    DM_TRY(suffixed(m1, sizeof m1, p, "_first_moment"));
    DM_TRY(suffixed(m2, sizeof m2, p, "_second_moment"));
    const char *in[6] = {p, m1, m2, g, DM_OPTIM_LR_BLOB, DM_OPTIM_ITER_BLOB};
    const char *out[3] = {p, m1, m2};
    const int w = o->kind == DM_OPTIMIZER_ADAMW;
    dm_opb_start(&b, w ? "AdamW" : "Adam");
    dm_opb_inputs(&b, in, 6);
    dm_opb_outputs(&b, out, 3);
    adam_args(&b, o);
    if (w) /* 0 for the params not decayed (biases, norms' scales), as *_w decides */
      dm_opb_arg_float(&b, "weight_decay", decayed(p, o) ? (float)o->weight_decay : 0.0f);
    return dm_opb_append(&b, net);
  }
  }
  return dm_error(DM_ERR_INVALID, "unknown optimizer kind %d", (int)o->kind);
}

/* The n names p_k + suffix, as malloc'd strings appended to *list (dm_strv_push). */
static dm_status push_suffixed(char ***list, size_t *n, const char *const *params, size_t np,
                               const char *suffix) {
  for (size_t k = 0; k < np; k++) {
    char name[512];
    DM_TRY(suffixed(name, sizeof name, params[k], suffix));
    DM_TRY(dm_strv_push(list, n, name));
  }
  return DM_OK;
}

/* MultiWeightedSum(x_1..x_n, w0, z_1..z_n, w1) -> x_1..x_n with x_k = p_k + xs,
 * z_k = p_k + zs, over the params `p` (n of them). */
static dm_status multi_wsum_op(Caffe2__NetDef *net, const char *const *p, size_t n,
                               const char *xs, const char *w0, const char *zs, const char *w1) {
  char **in = NULL;
  size_t n_in = 0;
  dm_status s = push_suffixed(&in, &n_in, p, n, xs);
  if (s == DM_OK)
    s = dm_strv_push(&in, &n_in, w0);
  if (s == DM_OK)
    s = push_suffixed(&in, &n_in, p, n, zs);
  if (s == DM_OK)
    s = dm_strv_push(&in, &n_in, w1);
  if (s == DM_OK)
    s = plain_op(net, "MultiWeightedSum", (const char *const *)in, n_in,
                 (const char *const *)in, n);
  dm_optimizer_free_names(in, n_in);
  return s;
}

/* ONE MultiWeightedSum for the decayed params' decays, then ONE MultiMomentumSGDUpdate,
 * MultiAdam or (SGD) MultiWeightedSum (header). */
static dm_status multi_update_ops(Caffe2__NetDef *net, Caffe2__NetDef *init,
                                  const char *const *params, size_t np,
                                  const dm_optimizer_opts *o) {
  const char **decayed_p = calloc(np ? np : 1, sizeof *decayed_p);
  if (!decayed_p)
    return DM_NOMEM("the optimizer pass");
  size_t nd = 0;
  dm_status s = DM_OK;
  for (size_t k = 0; k < np && s == DM_OK; k++) {
    char g[512];
    s = suffixed(g, sizeof g, params[k], "_grad");
    if (s == DM_OK && !net_writes(net, g))
      s = dm_error(DM_ERR_INVALID, "parameter '%s' has no gradient: no op writes '%s'",
                   params[k], g);
    if (s == DM_OK)
      s = state_fills(init, params[k], o);
    if (decayed(params[k], o))
      decayed_p[nd++] = params[k];
  }
  /* g = 1 * g + wd * p for the decayed params */
  if (s == DM_OK && nd)
    s = multi_wsum_op(net, decayed_p, nd, "_grad", DM_OPTIM_ONE_BLOB, "", DM_OPTIM_WD_BLOB);
  free(decayed_p);
  if (s != DM_OK)
    return s;
  if (o->kind == DM_OPTIMIZER_SGD) /* p = 1 * p + lr * g */
    return multi_wsum_op(net, params, np, "", DM_OPTIM_ONE_BLOB, "_grad", DM_OPTIM_LR_BLOB);
  char **in = NULL, **out = NULL;
  size_t n_in = 0, n_out = 0;
  const int adam = o->kind == DM_OPTIMIZER_ADAM;
  const char *m1 = adam ? "_first_moment" : "_momentum";
  if (adam) { /* p, m1, m2, g lists, lr, iter -> p, m1, m2 lists */
    s = push_suffixed(&in, &n_in, params, np, "");
    if (s == DM_OK)
      s = push_suffixed(&in, &n_in, params, np, m1);
    if (s == DM_OK)
      s = push_suffixed(&in, &n_in, params, np, "_second_moment");
    if (s == DM_OK)
      s = push_suffixed(&in, &n_in, params, np, "_grad");
    if (s == DM_OK)
      s = dm_strv_push(&in, &n_in, DM_OPTIM_LR_BLOB);
    if (s == DM_OK)
      s = dm_strv_push(&in, &n_in, DM_OPTIM_ITER_BLOB);
    for (size_t k = 0; k < 3 * np && s == DM_OK; k++)
      s = dm_strv_push(&out, &n_out, in[k]);
  } else { /* g, m lists, lr, p list -> g, m, p lists */
    s = push_suffixed(&in, &n_in, params, np, "_grad");
    if (s == DM_OK)
      s = push_suffixed(&in, &n_in, params, np, m1);
    if (s == DM_OK)
      s = dm_strv_push(&in, &n_in, DM_OPTIM_LR_BLOB);
    if (s == DM_OK)
      s = push_suffixed(&in, &n_in, params, np, "");
    for (size_t k = 0; k < 3 * np + 1 && s == DM_OK; k++)
      if (k != 2 * np) /* lr */
        s = dm_strv_push(&out, &n_out, in[k]);
  }
  if (s == DM_OK) {
    dm_opb b;
    dm_opb_start(&b, adam ? "MultiAdam" : "MultiMomentumSGDUpdate");
    dm_opb_inputs(&b, (const char *const *)in, n_in);
    dm_opb_outputs(&b, (const char *const *)out, n_out);
    if (adam)
      adam_args(&b, o);
    else
      momentum_args(&b, o);
    s = dm_opb_append(&b, net);
  }
  dm_optimizer_free_names(in, n_in);
  dm_optimizer_free_names(out, n_out);
  return s;
}

/* ClipByGlobalNorm over every parameter's gradient, in place, before the updates (and the
 * weight decay, as torch's clip_grad_norm_ before optimizer.step); its role makes the
 * mixed-precision pass divide the loss scale out before it, so it sees the true norm. */
static dm_status clip_op(Caffe2__NetDef *net, const char *const *params, size_t np,
                         const dm_optimizer_opts *o) {
  char **g = NULL;
  size_t ng = 0;
  dm_status s = push_suffixed(&g, &ng, params, np, "_grad");
  if (s == DM_OK) {
    dm_opb b;
    dm_opb_start(&b, "ClipByGlobalNorm");
    dm_opb_inputs(&b, (const char *const *)g, ng);
    dm_opb_outputs(&b, (const char *const *)g, ng);
    dm_opb_arg_float(&b, "clip_norm", (float)o->clip_norm);
    s = dm_opb_append(&b, net);
  }
  dm_optimizer_free_names(g, ng);
  return s;
}

/* ---- checks ---------------------------------------------------------------------------- */

static dm_status check_opts(const dm_optimizer_opts *o, dm_lr_policy *p) {
  if (!(isfinite(o->lr) && o->lr > 0))
    return dm_error(DM_ERR_INVALID, "the learning rate must be finite and > 0 (it is %g)", o->lr);
  if (!(isfinite(o->weight_decay) && o->weight_decay >= 0))
    return dm_error(DM_ERR_INVALID, "weight decay must be finite and >= 0 (it is %g)",
                    o->weight_decay);
  if (o->kind == DM_OPTIMIZER_MOMENTUM && !(o->momentum >= 0 && o->momentum < 1))
    return dm_error(DM_ERR_INVALID, "momentum must be in [0, 1) (it is %g)", o->momentum);
  if ((o->kind == DM_OPTIMIZER_ADAM || o->kind == DM_OPTIMIZER_ADAMW) &&
      !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->epsilon > 0 &&
        isfinite(o->epsilon)))
    return dm_error(DM_ERR_INVALID, "Adam needs beta1, beta2 in [0, 1) and epsilon > 0");
  if (!(isfinite(o->clip_norm) && o->clip_norm >= 0))
    return dm_error(DM_ERR_INVALID, "the clip norm must be finite and >= 0 (0: no clipping; "
                    "it is %g)", o->clip_norm);
  if (o->kind == DM_OPTIMIZER_ADAMW && o->multi_tensor == DM_SWITCH_ON)
    return dm_error(DM_ERR_UNSUPPORTED, "AdamW has no multi-tensor update (there is no "
                    "MultiAdamW op): use per-parameter updates (--no-multi-tensor)");
  /* The policy is checked here, before anything is emitted, by the very functions the
   * LearningRate kernel's init calls (lr_policy.h, one layer down): the rules exist once,
   * and a bad --policy fails the pass with a message about the options rather than the
   * first run of the net with one about an op it did not write. */
  memset(p, 0, sizeof *p);
  DM_TRY(dm_lr_kind_from_name(o->policy ? o->policy : "fixed", &p->kind));
  p->stepsize = o->stepsize;
  p->gamma = o->gamma;
  p->power = o->power;
  p->max_iter = o->max_iter;
  p->warmup_iter = o->warmup_iter;
  p->warmup_start = o->warmup_start;
  /* Every parameter counts as given; the ranges catch what was left at 0. */
  return dm_lr_policy_check(p, 1, 1, 1, 1);
}

/* DM_ERR_EXISTS when a blob of `net` already has a name the pass creates. With
 * `may_read`, ops may read it (the iteration counter: a data input op reads it to pick
 * its batch) but not write it. */
static dm_status check_free(const Caffe2__NetDef *net, const char *name, int may_read) {
  for (size_t i = 0; i < net->n_external_input && !may_read; i++)
    if (strcmp(net->external_input[i], name) == 0)
      goto taken;
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t j = 0; j < op->n_input && !may_read; j++)
      if (strcmp(op->input[j], name) == 0)
        goto taken;
    for (size_t j = 0; j < op->n_output; j++)
      if (strcmp(op->output[j], name) == 0)
        goto taken;
  }
  return DM_OK;
taken:
  return dm_error(DM_ERR_EXISTS,
                  "the optimizer pass creates blob '%s', but the net already uses that name", name);
}

static dm_status check_names(const Caffe2__NetDef *net, const char *const *params, size_t n,
                             const dm_optimizer_opts *o) {
  DM_TRY(check_free(net, DM_OPTIM_ITER_BLOB, 1));
  DM_TRY(check_free(net, DM_OPTIM_LR_BLOB, 0));
  DM_TRY(check_free(net, DM_OPTIM_ONE_BLOB, 0));
  DM_TRY(check_free(net, DM_OPTIM_WD_BLOB, 0));
  static const char *const suffixes[4][2] = {{NULL, NULL},
                                             {"_momentum", NULL},
                                             {"_first_moment", "_second_moment"},
                                             {"_first_moment", "_second_moment"}};
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) {
      const char *suf = suffixes[o->kind][k];
      char name[512];
      if (!suf)
        continue;
      DM_TRY(suffixed(name, sizeof name, params[i], suf));
      DM_TRY(check_free(net, name, 0));
    }
  return DM_OK;
}

dm_status dm_optimizer_pass(Caffe2__NetDef *net, const dm_optimizer_opts *o,
                            Caffe2__NetDef *init_add) {
  const char *const *params = o->params;
  size_t n_params = o->n_params;
  if ((unsigned)o->kind > DM_OPTIMIZER_ADAMW)
    return dm_error(DM_ERR_INVALID, "unknown optimizer kind %d", (int)o->kind);
  DM_TRY(dm_memory_refuse_planned(net, "optimizer"));
  dm_lr_policy policy;
  DM_TRY(check_opts(o, &policy));
  char **found = NULL;
  if (!params) {
    DM_TRY(dm_find_trainable_params(net, o->exclude, o->n_exclude, &found, &n_params));
    params = (const char *const *)found;
  }
  dm_status s = n_params ? DM_OK
                         : dm_error(DM_ERR_INVALID, "the net has no trainable parameters (no "
                                                    "input with a <name>_grad): run the gradient "
                                                    "pass first");
  if (s == DM_OK)
    s = check_names(net, params, n_params, o);
  /* State, created once by the init-net addition. */
  if (s == DM_OK)
    s = fill(init_add, DM_OPTIM_ITER_BLOB, NULL, 10, 0);
  /* the decay's WeightedSum reads 1 and wd; AdamW's decay is an argument of its update */
  int wd_sum = o->weight_decay > 0 && o->kind != DM_OPTIMIZER_ADAMW;
  int need_one = o->kind == DM_OPTIMIZER_SGD || wd_sum;
  if (s == DM_OK && need_one)
    s = fill(init_add, DM_OPTIM_ONE_BLOB, NULL, 1, 1);
  if (s == DM_OK && wd_sum)
    s = fill(init_add, DM_OPTIM_WD_BLOB, NULL, 1, o->weight_decay);
  /* Iter first, as Caffe2 builds it, then the rate, then one update per param. */
  const char *io[1] = {DM_OPTIM_ITER_BLOB};
  if (s == DM_OK)
    s = plain_op(net, "Iter", io, 1, io, 1);
  if (s == DM_OK)
    s = learning_rate_op(net, o, &policy);
  if (s == DM_OK && o->clip_norm > 0)
    s = clip_op(net, params, n_params, o);
  if (o->multi_tensor == DM_SWITCH_ON) {
    if (s == DM_OK)
      s = multi_update_ops(net, init_add, params, n_params, o);
  } else {
    for (size_t i = 0; i < n_params && s == DM_OK; i++)
      s = update_ops(net, init_add, params[i], o);
  }
  dm_optimizer_free_names(found, found ? n_params : 0);
  return s;
}
