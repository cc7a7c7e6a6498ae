/* layout_plan.c: the layout pass's plan (layout_internal.h): from the groups, where data
 * enters and leaves the NHWC part, which weights are re-laid, which data enters padded,
 * and which fetched blobs get a Transpose back; it reads the net and changes nothing, so
 * a refused net is returned as it was. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse_plugin.h"
#include "net/netdef_build.h"
#include "net/passes/layout_internal.h"

void lp_plan_free(lp_plan *P) {
  for (size_t e = 0; e < P->n_ent; e++)
    free(P->ent[e].name);
  free(P->ent);
  free(P->exits);
  free(P->padw);
  free(P->n_out);
  free(P->fetch);
  lp_free(&P->L);
}

static const dm_op_schema *schema_of(const Caffe2__OperatorDef *op) {
  return op->type ? dm_schema_lookup(op->type) : NULL;
}

/* A cast (or a copy): reads one blob and writes the same values, 0 staying 0. */
static int is_cast(const Caffe2__OperatorDef *op) {
  const dm_op_schema *s = schema_of(op);
  return op->n_input == 1 && op->n_output == 1 && s && s->value_copy &&
         lp_rule_of(op).rule == DM_LAYOUT_ELEMENTWISE;
}

/* The output of gradient op `op` that is the gradient of its forward op's input `in`
 * (its schema's grad_slots, an output an argument leaves out moving the later ones
 * down), whether or not the op has it; -1 when the schema does not say. */
static long grad_output(const Caffe2__OperatorDef *op, int in) {
  const dm_op_schema *s = schema_of(op);
  long k = 0;
  for (const dm_grad_slot *g = s ? s->grad_slots : NULL; g && g->input >= 0; g++) {
    if (g->unless && lp_arg_int(op, g->unless, 0))
      continue;
    if (g->input == in)
      return k;
    k++;
  }
  return -1;
}

static int in_group(lp_state *L, const char *b, size_t root) {
  size_t id = lp_find_id(L, b);
  return id != (size_t)-1 && lp_uf_find(L, id) == root;
}

static int fetched(const Caffe2__NetDef *net, const dm_layout_opts *o, const char *b) {
  return dm_str_in_list(b, (const char *const *)net->external_output, net->n_external_output) ||
         dm_str_in_list(b, o->keep, o->keep ? o->n_keep : 0);
}

/* Whether group `g`'s data is read and written only as padding allows: as a FILTER op's
 * X, or through casts; written only by casts of it or in NCHW (its entry). */
static int pad_readers_ok(lp_plan *P, const Caffe2__NetDef *net, size_t g) {
  lp_state *L = &P->L;
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = lp_rule_of(op);
    int reads = 0;
    for (size_t k = 0; k < op->n_input; k++)
      if (in_group(L, op->input[k], g)) {
        if ((r.rule != DM_LAYOUT_FILTER && !is_cast(op)) || (r.rule == DM_LAYOUT_FILTER && k != 0))
          return 0;
        reads = 1;
      }
    for (size_t k = 0; k < P->n_out[i]; k++)
      if (in_group(L, op->output[k], g) && !(reads && is_cast(op)) && !lp_writes_nchw(L, op, k))
        return 0; /* something else writes into the data */
  }
  return 1;
}

/* Whether FILTER op `op` (op i) reading group `g` as X may read it padded: a forward op
 * with one output, or a gradient op whose dX (the gradient of input 0, which would carry
 * the padded channels on) nothing reads (the gradient pass makes the fed data's); and
 * its filter a weight read only by such ops and elementwise ones (casts, updates). With
 * `mark`, drops that dX and flags the filter in padw. */
static int pad_conv(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o, size_t i,
                    size_t g, int mark) {
  lp_state *L = &P->L;
  const Caffe2__OperatorDef *op = net->op[i];
  if (op->n_input < 2 || (!op->is_gradient_op && P->n_out[i] != 1))
    return 0;
  long dx = op->is_gradient_op ? grad_output(op, 0) : 0;
  if (dx < 0)
    return 0; /* a gradient op whose schema does not say which output is dX */
  if (op->is_gradient_op && P->n_out[i] > (size_t)dx) {
    const char *d = op->output[dx];
    if (fetched(net, o, d) || L->first_read[lp_find_id(L, d)] >= 0)
      return 0;
    if (mark)
      P->n_out[i] = (size_t)dx;
  }
  size_t wr = lp_uf_find(L, lp_find_id(L, op->input[1]));
  long w = lp_group_weight(L, wr, o);
  if (w < 0 || L->need[wr] != NEED_NHWC)
    return 0;
  for (size_t j = 0; j < net->n_op; j++) {
    const Caffe2__OperatorDef *u = net->op[j];
    op_rule ru = lp_rule_of(u);
    for (size_t k = 0; k < u->n_input; k++)
      if (in_group(L, u->input[k], wr) &&
          !(ru.rule == DM_LAYOUT_FILTER && k == 1 && in_group(L, u->input[0], g)) &&
          ru.rule != DM_LAYOUT_ELEMENTWISE)
        return 0;
  }
  if (mark)
    P->padw[w] = 1;
  return 1;
}

/* Whether the data of group `g` (one entry) may enter padded: only Convs read it (as X,
 * no dX made), through casts; nothing fetches it; each of their filters is read only by
 * Convs reading this data and by elementwise ops (casts, updates). The padded filter
 * channels stay 0 only because they meet zeros: the padded data channels are 0, so
 * their gradients are 0, and a cast or an update of 0 with a 0 gradient is 0 (decay of 0
 * included); an elementwise op that could make them nonzero would read something else. */
static int pad_group(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o, size_t g,
                     int mark) {
  lp_state *L = &P->L;
  int convs = 0;
  if (L->need[g] != NEED_NHWC)
    return 0;
  for (size_t k = 0; k < net->n_external_output + o->n_keep; k++)
    if (in_group(L, k < net->n_external_output ? net->external_output[k]
                                               : o->keep[k - net->n_external_output], g))
      return 0;
  if (!pad_readers_ok(P, net, g))
    return 0;
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (lp_rule_of(op).rule != DM_LAYOUT_FILTER || !op->n_input || !in_group(L, op->input[0], g))
      continue;
    if (!pad_conv(P, net, o, i, g, mark))
      return 0;
    convs++;
  }
  return convs > 0;
}

/* FC weights: each must come from one weight, and its X's channels from filters. */
static dm_status plan_fc(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  lp_state *L = &P->L;
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (lp_rule_of(op).rule != DM_LAYOUT_FLATTEN || op->n_input < 2 ||
        !(lp_need_of(L, op->input[0]) & NEED_NHWC))
      continue;
    size_t x = lp_find_id(L, op->input[0]);
    if (lp_group_weight(L, lp_uf_find(L, lp_find_id(L, op->input[1])), o) < 0)
      return lp_refuse(i, op, op->input[1], "its W is not one weight made by the init nets");
    if (!op->is_gradient_op && (!L->chan_known[x] || L->n_chan[x] == 0))
      return lp_refuse(i, op, op->input[0], "it flattens NHWC data whose channel count no Conv "
                                         "filter gives, so its weight cannot be reordered");
  }
  return DM_OK;
}

/* Where NCHW data enters: fed inputs and ops writing it in NCHW. */
static dm_status plan_entries(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  lp_state *L = &P->L;
  for (size_t id = 0; id < L->n; id++) {
    if (!(L->need[lp_uf_find(L, id)] & NEED_NHWC))
      continue;
    long after = -2;
    if (lp_is_source(L, id) && dm_str_in_list(L->name[id], o->fed, o->fed ? o->n_fed : 0))
      after = -1;
    for (size_t i = 0; after == -2 && i < net->n_op; i++)
      for (size_t k = 0; k < net->op[i]->n_output; k++)
        if (strcmp(net->op[i]->output[k], L->name[id]) == 0 && lp_writes_nchw(L, net->op[i], k)) {
          after = (long)i;
          break;
        }
    if (after == -2)
      continue;
    entry *g = realloc(P->ent, (P->n_ent + 1) * sizeof *g);
    if (!g)
      return DM_NOMEM("the layout pass");
    P->ent = g;
    g[P->n_ent] = (entry){strdup(L->name[id]), after, 0};
    if (!g[P->n_ent++].name)
      return DM_NOMEM("the layout pass");
  }
  return DM_OK;
}

/* Padded entries (alone in their group) and the filters padded with them. */
static dm_status plan_pads(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  lp_state *L = &P->L;
  if (o->pad_channels <= 1)
    return DM_OK;
  P->padw = calloc(L->n ? L->n : 1, 1);
  P->n_out = malloc((net->n_op ? net->n_op : 1) * sizeof *P->n_out);
  if (!P->padw || !P->n_out)
    return DM_NOMEM("the layout pass");
  for (size_t i = 0; i < net->n_op; i++)
    P->n_out[i] = net->op[i]->n_output;
  for (size_t e = 0; e < P->n_ent; e++) {
    size_t g = lp_uf_find(L, lp_find_id(L, P->ent[e].name)), same = 0;
    for (size_t f = 0; f < P->n_ent; f++)
      same += lp_uf_find(L, lp_find_id(L, P->ent[f].name)) == g;
    if (same == 1 && pad_group(P, net, o, g, 0))
      P->ent[e].pad = pad_group(P, net, o, g, 1);
  }
  return DM_OK;
}

/* Exits: an op without a layout rule reading NHWC data (lp_check let only those that
 * do not update it in place through). */
static dm_status plan_exits(lp_plan *P, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    if (lp_rule_of(net->op[i]).rule != DM_LAYOUT_REFUSE)
      continue;
    for (size_t k = 0; k < net->op[i]->n_input; k++) {
      if (lp_need_of(&P->L, net->op[i]->input[k]) != NEED_NHWC)
        continue;
      exit_read *x = realloc(P->exits, (P->n_exit + 1) * sizeof *x);
      if (!x)
        return DM_NOMEM("the layout pass");
      P->exits = x;
      P->exits[P->n_exit++] = (exit_read){net->op[i], k};
    }
  }
  return DM_OK;
}

/* The NHWC blobs the caller fetches (external outputs, then o->keep), each once; a
 * weight's source is re-laid in place of a transpose. */
static dm_status plan_fetched(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  lp_state *L = &P->L;
  size_t n = net->n_external_output + o->n_keep;
  if (n && !(P->fetch = malloc(n * sizeof *P->fetch)))
    return DM_NOMEM("the layout pass");
  for (size_t k = 0; k < n; k++) {
    const char *y = k < net->n_external_output ? net->external_output[k]
                                               : o->keep[k - net->n_external_output];
    size_t id = lp_find_id(L, y), dup = 0;
    if (id == (size_t)-1 || L->need[lp_uf_find(L, id)] != NEED_NHWC || lp_is_source(L, id))
      continue;
    for (size_t j = 0; j < P->n_fetch; j++)
      dup |= P->fetch[j] == id; /* listed twice (an external output also kept) */
    if (!dup)
      P->fetch[P->n_fetch++] = id;
  }
  return DM_OK;
}

/* Decides the whole rewrite, or refuses the net; reads the net, changes nothing. */
dm_status lp_plan_build(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  DM_TRY(lp_build(&P->L, net));
  lp_groups(&P->L, net);
  DM_TRY(lp_check(&P->L, net));
  DM_TRY(lp_channels(&P->L, net, o));
  DM_TRY(plan_fc(P, net, o));
  DM_TRY(plan_entries(P, net, o));
  DM_TRY(plan_pads(P, net, o));
  DM_TRY(plan_exits(P, net));
  return plan_fetched(P, net, o);
}
