/* layout_apply.c: the layout pass's rewriting (layout_internal.h): the net changed as the
 * plan says (orders, re-laid and padded weights, Transposes where data enters and
 * leaves), the weights' re-layouts appended to the init addition. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse_plugin.h"
#include "net/netdef_build.h"
#include "net/passes/layout_internal.h"

static int net_uses(const Caffe2__NetDef *net, const char *name) {
  if (!net)
    return 0;
  for (size_t i = 0; i < net->n_op; i++)
    if (dm_opdef_reads(net->op[i], name) || dm_opdef_writes(net->op[i], name))
      return 1;
  return dm_str_in_list(name, (const char *const *)net->external_input, net->n_external_input) ||
         dm_str_in_list(name, (const char *const *)net->external_output, net->n_external_output);
}

/* `base` + "_" + `suffix`, made unique among the blobs of the net and the addition. */
static dm_status fresh_name_as(const Caffe2__NetDef *net, const Caffe2__NetDef *add,
                               const char *base, const char *suffix, char **out) {
  size_t len = strlen(base) + strlen(suffix) + 32;
  char *name = malloc(len);
  if (!name)
    return DM_NOMEM("a blob name");
  snprintf(name, len, "%s_%s", base, suffix);
  for (unsigned n = 1; net_uses(net, name) || net_uses(add, name); n++)
    snprintf(name, len, "%s_%s_%u", base, suffix, n);
  *out = name;
  return DM_OK;
}

static dm_status fresh_name(const Caffe2__NetDef *net, const Caffe2__NetDef *add,
                            const char *base, char **out) {
  return fresh_name_as(net, add, base, "nhwc", out);
}

static dm_status replace_str(char **slot, const char *to) {
  char *c = strdup(to);
  if (!c)
    return DM_NOMEM("a blob name");
  free(*slot);
  *slot = c;
  return DM_OK;
}

/* Renames `from` to `to` in the inputs and outputs of ops [begin, n_op) of `net`. */
static dm_status rename_from(Caffe2__NetDef *net, size_t begin, const char *from,
                             const char *to) {
  for (size_t i = begin; i < net->n_op; i++) {
    Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; k < op->n_input; k++)
      if (strcmp(op->input[k], from) == 0)
        DM_TRY(replace_str(&op->input[k], to));
    for (size_t k = 0; k < op->n_output; k++)
      if (strcmp(op->output[k], from) == 0)
        DM_TRY(replace_str(&op->output[k], to));
  }
  return DM_OK;
}

/* A weight renamed in the whole net, its external inputs too (the net reads the new
 * blob; the old one, the init net's, stays as it was). */
static dm_status rename_weight(Caffe2__NetDef *net, const char *from, const char *to) {
  for (size_t k = 0; k < net->n_external_input; k++)
    if (strcmp(net->external_input[k], from) == 0)
      DM_TRY(replace_str(&net->external_input[k], to));
  return rename_from(net, 0, from, to);
}

static const int64_t TO_NHWC[4] = {0, 2, 3, 1}, TO_NCHW[4] = {0, 3, 1, 2};

static dm_status insert_transpose(Caffe2__NetDef *net, size_t at, const char *x, const char *y,
                                  const int64_t *axes) {
  dm_opb b;
  dm_opb_start(&b, "Transpose");
  dm_opb_input(&b, x);
  dm_opb_output(&b, y);
  dm_opb_arg_ints(&b, "axes", axes, 4);
  return dm_opb_insert(&b, net, at);
}

/* The padded entry (of data or of a filter): one op, transposed and zero-padded. */
static dm_status insert_pad(Caffe2__NetDef *net, size_t at, const char *x, const char *y,
                            int multiple) {
  dm_opb b;
  dm_opb_start(&b, "NCHW2NHWCPad");
  dm_opb_input(&b, x);
  dm_opb_output(&b, y);
  dm_opb_arg_int(&b, "multiple", multiple);
  return dm_opb_insert(&b, net, at);
}

/* After the last op of `add` writing one of names[0..n), or at *front (then advanced). */
static size_t add_position(const Caffe2__NetDef *add, const char *const *names, size_t n,
                           size_t *front) {
  size_t at = 0;
  int found = 0;
  for (size_t i = 0; i < add->n_op; i++)
    for (size_t k = 0; k < n; k++)
      if (dm_opdef_writes(add->op[i], names[k])) {
        at = i + 1;
        found = 1;
      }
  if (!found || at <= *front)
    return (*front)++;
  return at;
}

static const char *renamed_to(const dm_layout_summary *sum, const char *w, int fc) {
  for (size_t k = 0; k < sum->n_renamed; k++)
    if (strcmp(sum->renamed[2 * k], w) == 0 && sum->fc[k] == fc)
      return sum->renamed[2 * k + 1];
  return NULL;
}

static dm_status record_rename(dm_layout_summary *sum, const char *from, const char *to,
                               int fc, int pad) {
  size_t n = sum->n_renamed;
  char **r = realloc(sum->renamed, 2 * (n + 1) * sizeof *r);
  if (!r)
    return DM_NOMEM("the layout summary");
  sum->renamed = r;
  int *f = realloc(sum->fc, (n + 1) * sizeof *f);
  if (!f)
    return DM_NOMEM("the layout summary");
  sum->fc = f;
  int *pd = realloc(sum->pad, (n + 1) * sizeof *pd);
  if (!pd)
    return DM_NOMEM("the layout summary");
  sum->pad = pd;
  r[2 * n] = strdup(from);
  r[2 * n + 1] = strdup(to);
  f[n] = fc;
  pd[n] = pad;
  sum->n_renamed = n + 1; /* counted before the check, so free() frees both */
  return r[2 * n] && r[2 * n + 1] ? DM_OK : DM_NOMEM("the layout summary");
}

/* The padding weight `w` (a filter) was re-laid with, or -1 when it was not. */
static int padded_with(const dm_layout_summary *sum, const char *w) {
  for (size_t k = 0; k < sum->n_renamed; k++)
    if (strcmp(sum->renamed[2 * k], w) == 0 && !sum->fc[k])
      return sum->pad[k];
  return -1;
}

/* Re-lays weight `w` once in the addition (Transpose, NCHW2NHWCPad with `pad` > 1, or
 * FCWeightToNHWC with the channel sources `chans`), or finds it re-laid already; renames
 * it in the net. */
static dm_status relay_weight(Caffe2__NetDef *net, Caffe2__NetDef *add, size_t *front,
                              dm_layout_summary *sum, const char *w, int fc, int pad,
                              const char *const *chans, size_t n_chans) {
  const char *done = renamed_to(sum, w, fc);
  if (done && !fc && padded_with(sum, w) != pad)
    return dm_error(DM_ERR_UNSUPPORTED, "layout pass: filter '%s' was re-laid %s for the net "
                    "it shares weights with, but net '%s' reads it %s", w,
                    padded_with(sum, w) > 1 ? "with its channels padded" : "unpadded",
                    net->name ? net->name : "",
                    pad > 1 ? "with padded data" : "with unpadded data");
  if (done)
    return rename_weight(net, w, done);
  if (renamed_to(sum, w, !fc))
    return dm_error(DM_ERR_UNSUPPORTED, "layout pass: weight '%s' is read both as a filter "
                    "and as an FC weight", w);
  if (!add)
    return dm_error(DM_ERR_UNSUPPORTED, "layout pass: weight '%s' is read NHWC by net '%s' "
                    "but was not re-laid for the net it shares weights with", w,
                    net->name ? net->name : "");
  char *to = NULL;
  DM_TRY(fresh_name(net, add, w, &to));
  const char **after = malloc((n_chans + 1) * sizeof *after);
  dm_status s = after ? DM_OK : DM_NOMEM("the layout pass");
  if (s == DM_OK) {
    after[0] = w;
    for (size_t k = 0; k < n_chans; k++)
      after[k + 1] = chans[k];
    size_t at = add_position(add, after, n_chans + 1, front);
    if (fc) {
      dm_opb b;
      dm_opb_start(&b, "FCWeightToNHWC");
      dm_opb_input(&b, w);
      dm_opb_inputs(&b, chans, n_chans);
      dm_opb_output(&b, to);
      s = dm_opb_insert(&b, add, at);
    } else if (pad > 1) {
      s = insert_pad(add, at, w, to, pad);
    } else {
      s = insert_transpose(add, at, w, to, TO_NHWC);
    }
    if (s == DM_OK)
      s = rename_from(add, at + 1, w, to);
  }
  if (s == DM_OK)
    s = rename_weight(net, w, to);
  if (s == DM_OK)
    s = record_rename(sum, w, to, fc, fc ? 0 : pad);
  free(after);
  free(to);
  return s;
}

/* Sets order NHWC on the ordered ops touching NHWC data, renumbering a JOIN's axis. */
static dm_status set_orders(lp_state *L, Caffe2__NetDef *net, dm_layout_summary *sum) {
  for (size_t i = 0; i < net->n_op; i++) {
    Caffe2__OperatorDef *op = net->op[i];
    op_rule r = lp_rule_of(op);
    if (!lp_is_ordered(r.rule))
      continue;
    int touches = 0;
    for (size_t k = 0; k < op->n_input + op->n_output; k++)
      touches |= (lp_need_of(L, k < op->n_input ? op->input[k] : op->output[k - op->n_input]) &
                  NEED_NHWC) != 0;
    if (!touches)
      continue;
    DM_TRY(dm_opdef_set_arg_string(op, "order", "NHWC"));
    const Caffe2__Argument *a = dm_opdef_find_arg(op, "axis");
    if (r.rule == DM_LAYOUT_JOIN && a && a->has_i) {
      static const int64_t nhwc_dim[4] = {0, 3, 1, 2}; /* NCHW dim d is NHWC dim nhwc_dim[d] */
      int64_t d = a->i < 0 ? a->i + 4 : a->i; /* in [0, 3]: lp_check refused others */
      DM_TRY(dm_opdef_set_arg_int(op, "axis", nhwc_dim[d]));
    }
    sum->ops_order++;
  }
  return DM_OK;
}

/* Planning ------------------------------------------------------------------------ */

/* Applying ------------------------------------------------------------------------ */

/* The dX outputs the plan dropped (padded data's: nothing reads them). */
static void apply_drops(const lp_plan *P, Caffe2__NetDef *net) {
  for (size_t i = 0; P->n_out && i < net->n_op; i++) {
    Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = P->n_out[i]; k < op->n_output; k++)
      free(op->output[k]);
    op->n_output = P->n_out[i];
  }
}

static int is_weight(lp_state *L, size_t id, const dm_layout_opts *o) {
  return L->need[lp_uf_find(L, id)] == NEED_NHWC && lp_is_source(L, id) &&
         !dm_str_in_list(L->name[id], o->fed, o->fed ? o->n_fed : 0);
}

/* Filters, in the order the net reads them. */
static dm_status apply_filters(lp_plan *P, Caffe2__NetDef *net, const dm_layout_opts *o,
                               Caffe2__NetDef *add, size_t *front, dm_layout_summary *sum) {
  for (size_t id = 0; id < P->L.n; id++)
    if (is_weight(&P->L, id, o))
      DM_TRY(relay_weight(net, add, front, sum, P->L.name[id], 0,
                          P->padw && P->padw[id] ? o->pad_channels : 0, NULL, 0));
  return DM_OK;
}

/* FC op i's weight, with the (re-laid) filters that make its X's channels. */
static dm_status apply_fc(lp_plan *P, Caffe2__NetDef *net, const dm_layout_opts *o,
                          Caffe2__NetDef *add, size_t *front, dm_layout_summary *sum,
                          size_t i) {
  lp_state *L = &P->L;
  const Caffe2__OperatorDef *op = net->op[i];
  size_t x = lp_find_id(L, op->input[0]);
  long w = lp_group_weight(L, lp_uf_find(L, lp_find_id(L, op->input[1])), o);
  const char **chans = malloc((L->n_chan[x] ? L->n_chan[x] : 1) * sizeof *chans);
  dm_status s = chans ? DM_OK : DM_NOMEM("the layout pass");
  for (size_t k = 0; s == DM_OK && k < L->n_chan[x]; k++) {
    const char *f = L->name[L->chan[x][k]];
    chans[k] = renamed_to(sum, f, 0);
    if (!chans[k]) /* a filter read in NCHW order: cannot happen after apply_filters */
      s = lp_refuse(i, op, f, "its channels' filter was not re-laid");
  }
  if (s == DM_OK)
    s = relay_weight(net, add, front, sum, L->name[w], 1, 0, chans, L->n_chan[x]);
  free(chans);
  return s;
}

static dm_status apply_fcs(lp_plan *P, Caffe2__NetDef *net, const dm_layout_opts *o,
                           Caffe2__NetDef *add, size_t *front, dm_layout_summary *sum) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (lp_rule_of(op).rule == DM_LAYOUT_FLATTEN && !op->is_gradient_op && op->n_input >= 2 &&
        (lp_need_of(&P->L, op->input[0]) & NEED_NHWC))
      DM_TRY(apply_fc(P, net, o, add, front, sum, i));
  }
  return DM_OK;
}

/* Data entering: one Transpose each, from the last op back so indices hold. */
static dm_status apply_entries(lp_plan *P, Caffe2__NetDef *net, const dm_layout_opts *o,
                               Caffe2__NetDef *add, dm_layout_summary *sum) {
  for (size_t e = P->n_ent; e > 0; e--) {
    entry *en = &P->ent[e - 1];
    size_t at = (size_t)(en->after + 1);
    char *tmp = NULL;
    dm_status s = fresh_name(net, add, en->name, &tmp);
    if (s == DM_OK)
      s = en->pad ? insert_pad(net, at, en->name, tmp, o->pad_channels)
                  : insert_transpose(net, at, en->name, tmp, TO_NHWC);
    if (s == DM_OK)
      s = rename_from(net, at + 1, en->name, tmp);
    free(tmp);
    DM_TRY(s);
    sum->transposes++;
    sum->padded += en->pad != 0;
  }
  return DM_OK;
}

/* Exits: Transpose(x) -> <x>_nchw just before the op, which reads it instead. */
static dm_status apply_exits(lp_plan *P, Caffe2__NetDef *net, Caffe2__NetDef *add,
                             dm_layout_summary *sum) {
  for (size_t e = 0; e < P->n_exit; e++) {
    size_t at = 0;
    while (at < net->n_op && net->op[at] != P->exits[e].op)
      at++;
    char **in = &P->exits[e].op->input[P->exits[e].k];
    char *tmp = NULL;
    dm_status s = fresh_name_as(net, add, *in, "nchw", &tmp);
    if (s == DM_OK)
      s = insert_transpose(net, at, *in, tmp, TO_NCHW);
    if (s == DM_OK)
      s = replace_str(in, tmp);
    free(tmp);
    DM_TRY(s);
    sum->transposes++;
  }
  return DM_OK;
}

/* Fetched blobs: written as <name>_nhwc, transposed back at the end. */
static dm_status apply_fetched(const lp_plan *P, Caffe2__NetDef *net, Caffe2__NetDef *add,
                               dm_layout_summary *sum) {
  for (size_t f = 0; f < P->n_fetch; f++) {
    char *yc = strdup(P->L.name[P->fetch[f]]), *tmp = NULL;
    dm_status s = yc ? fresh_name(net, add, yc, &tmp) : DM_NOMEM("a blob name");
    if (s == DM_OK)
      s = rename_from(net, 0, yc, tmp);
    if (s == DM_OK)
      s = insert_transpose(net, net->n_op, tmp, yc, TO_NCHW);
    free(yc);
    free(tmp);
    DM_TRY(s);
    sum->transposes++;
  }
  return DM_OK;
}

/* Rewrites the net as planned. The orders first (ops are matched by index). */
dm_status lp_plan_apply(lp_plan *P, Caffe2__NetDef *net, const dm_layout_opts *o,
                              Caffe2__NetDef *add, dm_layout_summary *sum) {
  size_t front = 0;
  apply_drops(P, net);
  DM_TRY(set_orders(&P->L, net, sum));
  DM_TRY(apply_filters(P, net, o, add, &front, sum));
  DM_TRY(apply_fcs(P, net, o, add, &front, sum));
  DM_TRY(apply_entries(P, net, o, add, sum));
  DM_TRY(apply_exits(P, net, add, sum));
  DM_TRY(apply_fetched(P, net, add, sum));
  return dm_netdef_set_arg_string(net, DM_LAYOUT_MARK, "NHWC");
}
