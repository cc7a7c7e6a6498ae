/* mixed_precision_pass.c: the mixed-precision pass (see net/passes/mixed_precision_pass.h for what it makes). */
#include "net/passes/mixed_precision_pass.h"

#include <float.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core/registry.h"
#include "core/slot_mask.h"
#include "demitasse_plugin.h"
#include "net/passes/memory_pass.h"
#include "net/netdef_build.h"
#include "net/op_origin.h"
#include "net/passes/optimizer_pass.h"

typedef enum color { C_NONE = 0, C_F16 = 1, C_F32 = 2 } color;

/* Where a blob's current value lives and in which precision, and its cast copies. */
typedef struct blob_state {
  char *name;
  char *cur;   /* the blob holding the current value (differs after an in-place rename) */
  color dtype; /* C_NONE: not known to be a float of either kind */
  char *f16, *f32; /* a valid cast copy of the current value, or NULL */
  int param;
  UT_hash_handle hh;
} blob_state;

typedef struct pass {
  const dm_mp_opts *o;
  Caffe2__NetDef *out; /* the ops of the rewritten net, in order */
  blob_state *blobs;
  dm_mp_summary *sum;
  char **param_casts; /* params whose FP16 copy the net uses */
  size_t n_param_casts;
  char *report;
  size_t report_len;
  /* Inference: the blobs fetched as FP32 after the net (external outputs, fp32_outputs)
   * and the index of the op that writes each last (SIZE_MAX: none does); op_index is the
   * op being rewritten (n_op once all are). */
  char **outs;
  size_t *out_last;
  size_t n_outs;
  size_t op_index;
} pass;

/* Input slots that never decide a follow op's precision: FP32-by-design or not float. */
static int fixed_input(const dm_op_schema *schema, size_t slot) {
  return dm_slot_in(schema->fp32_inputs | schema->nonfloat_inputs, slot);
}

/* The precision a slot of an op painted `c` holds: nonfloat slots none (never cast),
 * FP32 slots FP32 whenever the op computes in floats, every other slot the op's. */
static color slot_color(uint64_t fp32_mask, uint64_t nonfloat_mask, size_t slot, color c) {
  if (dm_slot_in(nonfloat_mask, slot))
    return C_NONE;
  if (dm_slot_in(fp32_mask, slot))
    return c == C_NONE ? C_NONE : C_F32;
  return c;
}

DM_PRINTF(2, 3) static void report(pass *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dm_text_vappendf(&p->report, &p->report_len, fmt, ap);
  va_end(ap);
}

static blob_state *state(pass *p, const char *name) {
  blob_state *b = NULL;
  HASH_FIND_STR(p->blobs, name, b);
  if (b)
    return b;
  b = calloc(1, sizeof *b);
  if (!b || !(b->name = strdup(name)) || !(b->cur = strdup(name))) {
    if (b)
      free(b->name);
    free(b);
    return NULL;
  }
  HASH_ADD_KEYPTR(hh, p->blobs, b->name, strlen(b->name), b);
  return b;
}

static void free_states(pass *p) {
  blob_state *b, *t;
  HASH_ITER(hh, p->blobs, b, t) {
    HASH_DEL(p->blobs, b);
    free(b->name);
    free(b->cur);
    free(b->f16);
    free(b->f32);
    free(b);
  }
}

static int set_str(char **dst, const char *src) {
  char *c = src ? strdup(src) : NULL;
  if (src && !c)
    return 0;
  free(*dst);
  *dst = c;
  return 1;
}

/* Appends `op` (owned) to the rewritten net. */
static dm_status emit(pass *p, Caffe2__OperatorDef *op) { return dm_netdef_append_op(p->out, op); }

/* Starts a cast op src -> dst, to the reduced precision (`down`) or back to FP32:
 * FloatToHalf / HalfToFloat for FP16, Cast(to) for BF16 (ops this pass emits). */
static void start_cast(dm_opb *b, const dm_mp_opts *o, int down, const char *src,
                       const char *dst) {
  int bf16 = o->target == DM_BFLOAT16;
  dm_opb_start(b, bf16 ? "Cast" : down ? "FloatToHalf" : "HalfToFloat");
  dm_opb_input(b, src);
  dm_opb_output(b, dst);
  if (bf16)
    dm_opb_arg_int(b, "to", down ? DM_BFLOAT16 : DM_FLOAT);
}

static dm_status emit_cast(pass *p, int down, const char *src, const char *dst, int grad) {
  dm_opb b;
  start_cast(&b, p->o, down, src, dst);
  dm_opb_gradient(&b, grad);
  p->sum->casts++;
  return dm_opb_append(&b, p->out);
}

static const char *reduced_suffix(const dm_mp_opts *o) {
  return o->target == DM_BFLOAT16 ? "_bf16" : "_fp16";
}

/* Inference: the index of `name` among the blobs fetched as FP32, or -1. */
static long fetched(const pass *p, const char *name) {
  for (size_t k = 0; k < p->n_outs; k++)
    if (strcmp(p->outs[k], name) == 0)
      return (long)k;
  return -1;
}

/* Whether b is a fetched blob whose last write is done and went to its reduced-precision
 * name: its FP32 copy is then the blob itself, under the name the caller fetches. */
static int fetched_done(const pass *p, const blob_state *b) {
  long k = fetched(p, b->name);
  return k >= 0 && p->out_last[k] != SIZE_MAX && p->op_index > p->out_last[k] &&
         strcmp(b->cur, b->name) != 0;
}

/* The name of b's current value in precision `want`, casting once if needed. */
static dm_status value_in(pass *p, blob_state *b, color want, int grad, const char **out) {
  if (want == C_NONE || b->dtype == want || (want == C_F32 && b->dtype == C_NONE)) {
    *out = b->cur;
    return DM_OK;
  }
  char **copy = want == C_F16 ? &b->f16 : &b->f32;
  if (!*copy) {
    char name[600];
    snprintf(name, sizeof name, "%s%s", b->name, want == C_F32 ? "_fp32" : reduced_suffix(p->o));
    if (want == C_F32 && fetched_done(p, b))
      snprintf(name, sizeof name, "%s", b->name);
    if (!set_str(copy, name))
      return DM_NOMEM("a blob name");
    if (b->param && want == C_F16) {
      /* the master's copy is made once, at the top of the net */
      char **pc = realloc(p->param_casts, (p->n_param_casts + 1) * sizeof *pc);
      if (!pc || !(pc[p->n_param_casts] = strdup(b->name)))
        return DM_NOMEM("a blob name");
      p->param_casts = pc;
      p->n_param_casts++;
    } else {
      DM_TRY(emit_cast(p, want == C_F16, b->cur, *copy, grad));
    }
  }
  *out = *copy;
  return DM_OK;
}

/* The op's precision and, for the summary, why. */
static color paint(pass *p, const Caffe2__OperatorDef *op, const dm_op_schema *schema,
                   const char **why) {
  const Caffe2__Argument *pin = dm_opdef_find_arg(op, "precision");
  if (pin && pin->has_s && pin->s.len == 4 &&
      (memcmp(pin->s.data, "fp16", 4) == 0 || memcmp(pin->s.data, "bf16", 4) == 0)) {
    *why = "pinned to the reduced precision by its `precision` argument";
    return C_F16;
  }
  if (pin && pin->has_s && pin->s.len == 4 && memcmp(pin->s.data, "fp32", 4) == 0) {
    *why = "pinned fp32 by its `precision` argument";
    return C_F32;
  }
  if (dm_str_in_list(op->type, p->o->force_fp32, p->o->n_force_fp32)) {
    *why = "its type is on the FP32 list";
    return C_F32;
  }
  if (dm_str_in_list(op->type, p->o->force_fp16, p->o->n_force_fp16)) {
    *why = "its type is on the FP16 list";
    return C_F16;
  }
  switch (schema->precision) {
  case DM_PREC_FP16: *why = "FP16 op"; return C_F16;
  case DM_PREC_FP32: *why = "its schema requires FP32 (softmax, loss or reduction)"; return C_F32;
  case DM_PREC_NONE: *why = "not a float computation"; return C_NONE;
  case DM_PREC_FOLLOW: break;
  }
  /* Follow: FP16 when some (castable) input already holds FP16, so that a follow op never
   * starts an FP16 island of its own; but FP32 when an FP32 activation meets an FP16 one
   * (a transformer's residual stream plus a block's FP16 output), the wider of the two as
   * autocast's type promotion keeps it. A weight does not count as FP32 there: its
   * reduced copy is made once, at the top of the net. Gradient ops take the same rule,
   * so a backward op reading an FP32 activation or an FP32 loss gradient beside an FP16
   * one runs in FP32 (in CNNs: the ops between an FP32 head and the FP16 body). */
  int reduced = 0, wide = 0;
  for (size_t i = 0; i < op->n_input; i++) {
    blob_state *b = NULL;
    HASH_FIND_STR(p->blobs, op->input[i], b);
    if (!b || fixed_input(schema, i))
      continue;
    reduced |= b->dtype == C_F16;
    wide |= b->dtype == C_F32 && !b->param;
  }
  if (reduced && wide) {
    *why = "an FP32 input meets an FP16 one: the wider, as autocast promotes";
    return C_F32;
  }
  if (reduced) {
    *why = "follows its FP16 input";
    return C_F16;
  }
  *why = "follows its FP32 inputs";
  return C_F32;
}

/* Rewrites one forward or backward op: inputs through their current value in the op's
 * precision, outputs recorded. `op` is owned and emitted. */
static dm_status rewrite_op(pass *p, const dm_op_schema *schema, Caffe2__OperatorDef *op,
                            color c) {
  int grad = op->is_gradient_op;
  dm_status s = DM_OK;
  char **orig = calloc(op->n_input + 1, sizeof *orig); /* input names before renaming */
  if (!orig) {
    s = DM_NOMEM("the pass");
    goto cleanup;
  }
  for (size_t i = 0; i < op->n_input; i++) {
    blob_state *b = state(p, op->input[i]);
    if (!b || !(orig[i] = strdup(op->input[i]))) {
      s = DM_NOMEM("the pass");
      goto cleanup;
    }
    color want = slot_color(schema->fp32_inputs, schema->nonfloat_inputs, i, c);
    const char *name = NULL;
    if ((s = value_in(p, b, want, grad, &name)) != DM_OK)
      goto cleanup;
    if (strcmp(name, op->input[i]) != 0 && !set_str(&op->input[i], name)) {
      s = DM_NOMEM("a blob name");
      goto cleanup;
    }
  }
  for (size_t o = 0; o < op->n_output; o++) {
    blob_state *b = state(p, op->output[o]);
    if (!b) {
      s = DM_NOMEM("the pass");
      goto cleanup;
    }
    /* In place on a renamed input: write the renamed blob, which now holds the value. */
    for (size_t i = 0; i < op->n_input; i++)
      if (strcmp(orig[i], op->output[o]) == 0 && strcmp(op->input[i], orig[i]) != 0 &&
          !set_str(&op->output[o], op->input[i])) {
        s = DM_NOMEM("a blob name");
        goto cleanup;
      }
    b->dtype = slot_color(schema->fp32_outputs, schema->nonfloat_outputs, o, c);
    b->param = 0; /* written: no longer the init net's value, whose copy is made once */
    /* Inference: the last write of a fetched blob in the reduced precision goes to
     * X_fp16, so that X itself can hold the FP32 value the caller fetches. */
    long k = b->dtype == C_F16 ? fetched(p, b->name) : -1;
    if (k >= 0 && p->out_last[k] == p->op_index && strcmp(op->output[o], b->name) == 0) {
      char name[600];
      snprintf(name, sizeof name, "%s%s", b->name, reduced_suffix(p->o));
      if (!set_str(&op->output[o], name)) {
        s = DM_NOMEM("a blob name");
        goto cleanup;
      }
    }
    if (!set_str(&b->cur, op->output[o]) || !set_str(&b->f16, NULL) || !set_str(&b->f32, NULL)) {
      s = DM_NOMEM("a blob name");
      goto cleanup;
    }
  }
cleanup:
  for (size_t i = 0; orig && i < op->n_input; i++)
    free(orig[i]);
  free(orig);
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&op->base, NULL);
    return s;
  }
  return emit(p, op);
}

/* Seed * S: the loss gradient scaled by the loss scale. */
static dm_status scale_seed(pass *p, const char *seed) {
  dm_opb b;
  dm_opb_start(&b, "Mul");
  dm_opb_input(&b, seed);
  dm_opb_input(&b, DM_MP_SCALE_BLOB);
  dm_opb_output(&b, seed);
  dm_opb_arg_int(&b, "broadcast", 1);
  dm_opb_gradient(&b, 1);
  return dm_opb_append(&b, p->out);
}

/* FP32 weight gradients, one UnscaleAndCheck over all, then UpdateLossScale. */
static dm_status unscale_and_check(pass *p, char **params, size_t n_params) {
  dm_opb b = {0};
  dm_status s = DM_OK;
  /* The gradients' FP32 names first (value_in may emit their casts), then the op. */
  const char **grads = calloc(n_params + 1, sizeof *grads);
  if (!grads) {
    s = DM_NOMEM("the pass");
    goto cleanup;
  }
  for (size_t i = 0; i < n_params; i++) {
    char gname[600];
    snprintf(gname, sizeof gname, "%s_grad", params[i]);
    blob_state *g = state(p, gname);
    if (!g) {
      s = DM_NOMEM("the pass");
      goto cleanup;
    }
    const char *name = NULL;
    if ((s = value_in(p, g, C_F32, 1, &name)) != DM_OK)
      goto cleanup;
    if (!set_str(&g->cur, name) || !set_str(&g->f32, NULL)) {
      s = DM_NOMEM("a blob name");
      goto cleanup;
    }
    g->dtype = C_F32;
    grads[i] = g->cur;
  }
  dm_opb_start(&b, "UnscaleAndCheck");
  dm_opb_input(&b, DM_MP_SCALE_BLOB);
  dm_opb_inputs(&b, grads, n_params);
  dm_opb_outputs(&b, grads, n_params);
  dm_opb_output(&b, DM_MP_FOUND_INF_BLOB);
  if ((s = dm_opb_append(&b, p->out)) != DM_OK)
    goto cleanup;
  const dm_mp_opts *o = p->o;
  dm_opb_start(&b, "UpdateLossScale");
  dm_opb_input(&b, DM_MP_SCALE_BLOB);
  dm_opb_input(&b, DM_MP_FOUND_INF_BLOB);
  dm_opb_input(&b, DM_MP_GOOD_BLOB);
  dm_opb_input(&b, DM_MP_SKIPPED_BLOB);
  dm_opb_output(&b, DM_MP_SCALE_BLOB);
  dm_opb_output(&b, DM_MP_GOOD_BLOB);
  dm_opb_output(&b, DM_MP_SKIPPED_BLOB);
  dm_opb_arg_int(&b, "dynamic", o->scaling == DM_LOSS_SCALE_DYNAMIC);
  dm_opb_arg_int(&b, "growth_interval", o->growth_interval);
  dm_opb_arg_float(&b, "growth_factor", (float)o->growth_factor);
  dm_opb_arg_float(&b, "backoff_factor", (float)o->backoff_factor);
  dm_opb_arg_float(&b, "min_scale", (float)o->min_scale);
  dm_opb_arg_float(&b, "max_scale", (float)o->max_scale);
  s = dm_opb_append(&b, p->out);
cleanup:
  free(grads);
  return s;
}

/* An optimizer-role op (its schema's role): inputs through their FP32 values (renaming
 * in-place outputs), plus found_inf as the skip input when loss scaling is on and the
 * schema says the op takes one. */
static dm_status rewrite_update(pass *p, const dm_op_schema *schema, Caffe2__OperatorDef *op) {
  dm_status s = rewrite_op(p, schema, op, C_F32); /* emits op; still ours to amend below */
  if (s == DM_OK && p->o->scaling != DM_LOSS_SCALE_NONE && schema->skip_input)
    s = dm_opdef_add_input(op, DM_MP_FOUND_INF_BLOB);
  return s;
}

/* A ConstantFill of a 1-element blob; `scalar`: 0-d (the loss scale, so that it
 * broadcasts onto a 0-d loss gradient), else shape [1]. */
static dm_status add_fill(Caffe2__NetDef *init, const char *blob, const char *dtype, double v,
                          int scalar) {
  static const int64_t one = 1;
  dm_opb b;
  dm_opb_start(&b, "ConstantFill");
  dm_opb_output(&b, blob);
  dm_opb_arg_ints(&b, "shape", &one, scalar ? 0 : 1);
  if (strcmp(dtype, "INT64") == 0)
    dm_opb_arg_int(&b, "value", (int64_t)v);
  else
    dm_opb_arg_float(&b, "value", (float)v);
  dm_opb_arg_string(&b, "dtype", dtype);
  return dm_opb_append(&b, init);
}

void dm_mp_opts_init(dm_mp_opts *o) {
  memset(o, 0, sizeof *o);
  o->target = DM_FLOAT16;
  o->scaling = DM_LOSS_SCALE_DYNAMIC;
  o->init_scale = 65536;
  o->growth_interval = 2000;
  o->growth_factor = 2;
  o->backoff_factor = 0.5;
  o->min_scale = 1;
  o->max_scale = 16777216;
}

void dm_mp_summary_free(dm_mp_summary *s) {
  free(s->report);
  memset(s, 0, sizeof *s);
}

/* Whether an op of `net` reads or writes `blob`. */
static int net_uses(const Caffe2__NetDef *net, const char *blob) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; k < op->n_input + op->n_output; k++)
      if (strcmp(k < op->n_input ? op->input[k] : op->output[k - op->n_input], blob) == 0)
        return 1;
  }
  return 0;
}

/* Inference: Free(w, ...) after the casts, for the cast weights that the painted net
 * (p->out) neither reads nor writes and the caller does not fetch. */
static int unused_master(const pass *p, const char *w) {
  return !net_uses(p->out, w) && fetched(p, w) < 0;
}

static dm_status free_masters(pass *p, Caffe2__NetDef *init_add) {
  size_t n = 0;
  for (size_t i = 0; i < p->n_param_casts; i++)
    n += (size_t)unused_master(p, p->param_casts[i]);
  if (!n)
    return DM_OK;
  dm_opb b;
  dm_opb_start(&b, "Free");
  for (size_t i = 0; i < p->n_param_casts; i++)
    if (unused_master(p, p->param_casts[i])) {
      dm_opb_input(&b, p->param_casts[i]);
      dm_opb_output(&b, p->param_casts[i]);
    }
  return dm_opb_append(&b, init_add);
}

static dm_status run_pass(pass *p, Caffe2__NetDef *net, char **params, size_t n_params,
                          Caffe2__NetDef *init_add) {
  for (size_t i = 0; i < n_params; i++) {
    blob_state *b = state(p, params[i]);
    if (!b)
      return DM_NOMEM("the pass");
    b->param = 1;
    b->dtype = C_F32;
  }
  /* Take the ops out of the net; they are re-emitted into p->out in the new order. */
  size_t n = net->n_op;
  Caffe2__OperatorDef **ops = net->op;
  net->op = NULL;
  net->n_op = 0;
  dm_status s = dm_netdef_new(NULL, &p->out);
  int scaled = !p->o->inference && p->o->scaling != DM_LOSS_SCALE_NONE, unscaled = 0;
  for (size_t i = 0; i < n && s == DM_OK; i++) {
    Caffe2__OperatorDef *op = ops[i];
    p->op_index = i;
    ops[i] = NULL;
    const char *type = op->type ? op->type : "";
    const dm_op_schema *schema = dm_schema_lookup(type);
    if (!schema) { /* the message first: `type` lives in op */
      char what[512];
      s = dm_error_prefix(dm_unknown_op_error(type), "%s",
                          dm_opdef_describe(op, i, what, sizeof what));
      protobuf_c_message_free_unpacked(&op->base, NULL);
      break;
    }
    if (schema->role == DM_ROLE_OPTIMIZER) {
      if (scaled && !unscaled) {
        s = unscale_and_check(p, params, n_params);
        unscaled = 1;
      }
      if (s == DM_OK)
        s = rewrite_update(p, schema, op);
      else
        protobuf_c_message_free_unpacked(&op->base, NULL);
      continue;
    }
    const char *why = "";
    color c = paint(p, op, schema, &why);
    p->sum->ops_total++;
    if (c == C_F16)
      p->sum->ops_fp16++;
    if (c == C_F32) {
      p->sum->ops_fp32++;
      report(p, "  op %zu (%s%s%s) FP32: %s\n", i, type, op->name && *op->name ? " " : "",
             op->name ? op->name : "", why);
    }
    /* The loss gradient's seed, as the gradient pass emits it (ConstantFill -> X_autogen_grad):
     * the pass's own op, recognised to be scaled, not a per-op rule. */
    int seed = op->is_gradient_op && strcmp(type, "ConstantFill") == 0 && op->n_output == 1 &&
               strstr(op->output[0], "_autogen_grad");
    char *seed_name = seed ? strdup(op->output[0]) : NULL;
    s = rewrite_op(p, schema, op, c);
    if (s == DM_OK && seed && scaled)
      s = seed_name ? scale_seed(p, seed_name) : DM_NOMEM("a blob name");
    free(seed_name);
  }
  for (size_t i = 0; i < n; i++)
    if (ops[i])
      protobuf_c_message_free_unpacked(&ops[i]->base, NULL);
  free(ops);
  /* Inference: each fetched blob left in the reduced precision is cast back under its
   * own name, once, after the net (unless a later op's FP32 read made that cast). */
  p->op_index = n;
  for (size_t k = 0; k < p->n_outs && s == DM_OK; k++) {
    blob_state *b = NULL;
    HASH_FIND_STR(p->blobs, p->outs[k], b);
    const char *name = NULL;
    if (b && b->dtype == C_F16)
      s = value_in(p, b, C_F32, 0, &name);
  }
  if (s == DM_OK && scaled && !unscaled)
    s = dm_error(DM_ERR_INVALID, "loss scaling needs the optimizer's update ops (run the "
                                 "optimizer pass first, or use no loss scaling)");
  /* The masters' FP16 copies: training refreshes them at the top of every step (the
   * masters change); inference casts them once, in the init addition. */
  if (s == DM_OK && p->o->inference && p->n_param_casts && !init_add)
    s = dm_error(DM_ERR_INVALID, "inference painting needs an init-net addition for the "
                                 "weights' casts");
  for (size_t i = 0; i < p->n_param_casts && s == DM_OK; i++) {
    char dst[600];
    snprintf(dst, sizeof dst, "%s%s", p->param_casts[i], reduced_suffix(p->o));
    dm_opb b;
    start_cast(&b, p->o, 1, p->param_casts[i], dst);
    s = p->o->inference ? dm_opb_append(&b, init_add) : dm_opb_insert(&b, p->out, i);
    p->sum->casts++;
  }
  if (s == DM_OK && p->o->inference && p->o->free_masters && p->n_param_casts)
    s = free_masters(p, init_add);
  if (s == DM_OK) { /* hand the new op list to the net */
    net->op = p->out->op;
    net->n_op = p->out->n_op;
    p->out->op = NULL;
    p->out->n_op = 0;
  }
  if (s == DM_OK && scaled) {
    s = add_fill(init_add, DM_MP_SCALE_BLOB, "FLOAT", p->o->init_scale, 1);
    if (s == DM_OK)
      s = add_fill(init_add, DM_MP_GOOD_BLOB, "INT64", 0, 0);
    if (s == DM_OK)
      s = add_fill(init_add, DM_MP_SKIPPED_BLOB, "INT64", 0, 0);
  }
  if (s == DM_OK)
    s = dm_netdef_set_arg_string(net, "mixed_precision",
                                 p->o->target == DM_BFLOAT16 ? "bf16" : "fp16");
  return s;
}

/* Whether an op before `before` writes `blob`. */
static int written_before(const Caffe2__NetDef *net, size_t before, const char *blob) {
  for (size_t i = 0; i < before; i++)
    for (size_t k = 0; k < net->op[i]->n_output; k++)
      if (strcmp(net->op[i]->output[k], blob) == 0)
        return 1;
  return 0;
}

/* Inference: the state whose reduced copies are made once: o->params when given, else
 * every blob an op reads before any op writes it, less o->exclude (the fed inputs). */
static dm_status inference_params(const Caffe2__NetDef *net, const dm_mp_opts *o,
                                  char ***params, size_t *n) {
  if (o->params) {
    for (size_t i = 0; i < o->n_params; i++)
      if (!dm_str_in_list(o->params[i], (const char *const *)*params, *n))
        DM_TRY(dm_strv_push(params, n, o->params[i]));
    return DM_OK;
  }
  for (size_t i = 0; i < net->n_op; i++)
    for (size_t j = 0; j < net->op[i]->n_input; j++) {
      const char *in = net->op[i]->input[j];
      if (!dm_str_in_list(in, o->exclude, o->n_exclude) &&
          !dm_str_in_list(in, (const char *const *)*params, *n) && !written_before(net, i, in))
        DM_TRY(dm_strv_push(params, n, in));
    }
  return DM_OK;
}

/* Inference: the blobs fetched as FP32 (external outputs, then o->fp32_outputs, once
 * each) and the index of the last op that writes each. */
static dm_status fetched_outputs(pass *p, const Caffe2__NetDef *net, const dm_mp_opts *o) {
  for (size_t i = 0; i < net->n_external_output + o->n_fp32_outputs; i++) {
    const char *name = i < net->n_external_output ? net->external_output[i]
                                                  : o->fp32_outputs[i - net->n_external_output];
    if (name && !dm_str_in_list(name, (const char *const *)p->outs, p->n_outs))
      DM_TRY(dm_strv_push(&p->outs, &p->n_outs, name));
  }
  if (p->n_outs && !(p->out_last = malloc(p->n_outs * sizeof *p->out_last)))
    return DM_NOMEM("the pass");
  for (size_t k = 0; k < p->n_outs; k++) {
    p->out_last[k] = SIZE_MAX;
    for (size_t i = net->n_op; i-- > 0 && p->out_last[k] == SIZE_MAX;)
      for (size_t j = 0; j < net->op[i]->n_output; j++)
        if (strcmp(net->op[i]->output[j], p->outs[k]) == 0)
          p->out_last[k] = i;
  }
  return DM_OK;
}

dm_loss_scale_mode dm_mp_loss_scaling(dm_loss_scale_mode mode, dm_dtype target) {
  if (mode != DM_LOSS_SCALE_AUTO)
    return mode;
  return target == DM_BFLOAT16 ? DM_LOSS_SCALE_NONE : DM_LOSS_SCALE_DYNAMIC;
}

dm_status dm_mixed_precision_pass(Caffe2__NetDef *net, const dm_mp_opts *given,
                                  Caffe2__NetDef *init_add, dm_mp_summary *summary) {
  memset(summary, 0, sizeof *summary);
  dm_mp_opts decided = *given; /* loss scaling AUTO decided, as the pipeline's plan does */
  decided.scaling = dm_mp_loss_scaling(given->scaling, given->target);
  const dm_mp_opts *o = &decided;
  DM_TRY(dm_init()); /* the pass reads the op schemas */
  if (dm_netdef_find_arg(net, "mixed_precision")) {
    summary->already = 1;
    return DM_OK;
  }
  DM_TRY(dm_memory_refuse_planned(net, "mixed-precision"));
  if (o->target != DM_FLOAT16 && o->target != DM_BFLOAT16)
    return dm_error(DM_ERR_INVALID, "the reduced precision must be FLOAT16 or BFLOAT16, not %s",
                    dm_dtype_name(o->target));
  if (!o->inference && o->scaling != DM_LOSS_SCALE_NONE &&
      !(o->init_scale > 0 && o->init_scale <= FLT_MAX && o->min_scale > 0 &&
        o->min_scale <= o->max_scale && o->max_scale <= FLT_MAX && o->backoff_factor > 0 &&
        o->backoff_factor < 1 && o->growth_factor > 1 && o->growth_interval >= 1))
    return dm_error(DM_ERR_INVALID, "loss scaling options out of range (need 0 < scale <= "
                                    "FLT_MAX, 0 < min <= max <= FLT_MAX, 0 < backoff < 1, "
                                    "growth > 1, interval >= 1)");
  if (o->n_fp32_outputs && !o->fp32_outputs)
    return dm_error(DM_ERR_INVALID, "mixed precision: %zu fp32 outputs but no list",
                    o->n_fp32_outputs);
  char **params = NULL;
  size_t n_params = 0;
  pass p = {.o = o, .sum = summary};
  dm_status s = o->inference ? inference_params(net, o, &params, &n_params)
                             : dm_find_trainable_params(net, o->exclude, o->n_exclude, &params,
                                                        &n_params);
  summary->bf16 = o->target == DM_BFLOAT16;
  if (s == DM_OK && o->inference)
    s = fetched_outputs(&p, net, o);
  if (s == DM_OK)
    s = run_pass(&p, net, params, n_params, init_add);
  summary->report = p.report;
  if (p.out)
    protobuf_c_message_free_unpacked(&p.out->base, NULL);
  for (size_t i = 0; i < p.n_param_casts; i++)
    free(p.param_casts[i]);
  free(p.param_casts);
  for (size_t i = 0; i < p.n_outs; i++)
    free(p.outs[i]);
  free(p.outs);
  free(p.out_last);
  free_states(&p);
  dm_optimizer_free_names(params, n_params);
  return s;
}
