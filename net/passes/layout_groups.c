/* layout_groups.c: the layout pass's reading of the net (layout_internal.h): every blob
 * interned, the groups of blobs that must share a layout (a union-find over the ops'
 * layout rules), what each group needs, the refusals, and the channel sources (the
 * filters whose output channels a forward NHWC activation carries). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse_plugin.h"
#include "net/netdef_build.h"
#include "net/passes/layout_internal.h"

void lp_free(lp_state *L) {
  for (size_t i = 0; i < L->n; i++) {
    free(L->name[i]);
    if (L->chan)
      free(L->chan[i]);
  }
  free(L->name);
  free(L->slot);
  free(L->parent);
  free(L->need);
  free(L->first_read);
  free(L->first_write);
  free(L->chan);
  free(L->n_chan);
  free(L->chan_known);
}

static size_t hash_str(const char *s) {
  size_t h = 1469598103934665603u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* The id of `s`, or (size_t)-1 when it is not interned. */
size_t lp_find_id(const lp_state *L, const char *s) {
  if (!L->nslot)
    return (size_t)-1;
  for (size_t h = hash_str(s) & (L->nslot - 1);; h = (h + 1) & (L->nslot - 1)) {
    if (!L->slot[h])
      return (size_t)-1;
    if (strcmp(L->name[L->slot[h] - 1], s) == 0)
      return L->slot[h] - 1;
  }
}

static dm_status lp_intern(lp_state *L, const char *s, size_t *id) {
  size_t f = lp_find_id(L, s);
  if (f != (size_t)-1) {
    *id = f;
    return DM_OK;
  }
  if (L->n == L->cap) {
    size_t c = L->cap ? 2 * L->cap : 256;
    char **g = realloc(L->name, c * sizeof *g);
    if (!g)
      return DM_NOMEM("the layout pass's blob table");
    L->name = g;
    L->cap = c;
  }
  if (2 * (L->n + 1) > L->nslot) { /* rehash at half full */
    size_t ns = L->nslot ? 2 * L->nslot : 512;
    size_t *sl = calloc(ns, sizeof *sl);
    if (!sl)
      return DM_NOMEM("the layout pass's blob table");
    for (size_t i = 0; i < L->n; i++) {
      size_t h = hash_str(L->name[i]) & (ns - 1);
      while (sl[h])
        h = (h + 1) & (ns - 1);
      sl[h] = i + 1;
    }
    free(L->slot);
    L->slot = sl;
    L->nslot = ns;
  }
  if (!(L->name[L->n] = strdup(s)))
    return DM_NOMEM("the layout pass's blob table");
  size_t h = hash_str(s) & (L->nslot - 1);
  while (L->slot[h])
    h = (h + 1) & (L->nslot - 1);
  L->slot[h] = L->n + 1;
  *id = L->n++;
  return DM_OK;
}

size_t lp_uf_find(lp_state *L, size_t i) {
  while (L->parent[i] != i) {
    L->parent[i] = L->parent[L->parent[i]];
    i = L->parent[i];
  }
  return i;
}

static void uf_union(lp_state *L, size_t a, size_t b) {
  a = lp_uf_find(L, a);
  b = lp_uf_find(L, b);
  if (a != b) {
    L->parent[b] = a;
    L->need[a] |= L->need[b];
  }
}

unsigned lp_need_of(lp_state *L, const char *s) {
  size_t id = lp_find_id(L, s);
  return id == (size_t)-1 ? 0 : L->need[lp_uf_find(L, id)];
}

op_rule lp_rule_of(const Caffe2__OperatorDef *op) {
  const dm_op_schema *s = op->type ? dm_schema_lookup(op->type) : NULL;
  op_rule r = {DM_LAYOUT_REFUSE, 0, 0};
  if (s && s->role == DM_ROLE_OPTIMIZER)
    r.rule = DM_LAYOUT_ELEMENTWISE;
  else if (s) {
    r.rule = s->layout;
    r.in = s->layout_inputs;
    r.out = s->layout_outputs;
  }
  return r;
}

static int masked(uint64_t mask, size_t k) { return (mask >> (k < 63 ? k : 63)) & 1u; }

int lp_is_ordered(dm_layout_rule r) {
  return r == DM_LAYOUT_ORDER || r == DM_LAYOUT_FILTER || r == DM_LAYOUT_JOIN;
}

/* An integer argument, or `dflt` when absent. */
int64_t lp_arg_int(const Caffe2__OperatorDef *op, const char *name, int64_t dflt) {
  const Caffe2__Argument *a = dm_opdef_find_arg(op, name);
  return a && a->has_i ? a->i : dflt;
}

dm_status lp_refuse(size_t i, const Caffe2__OperatorDef *op, const char *blob,
                        const char *why) {
  return dm_error(DM_ERR_UNSUPPORTED,
                  "layout pass: op %zu (%s '%s') cannot be converted to NHWC: %s%s%s%s", i,
                  op->type ? op->type : "?", op->name ? op->name : "", why,
                  blob ? " (blob '" : "", blob ? blob : "", blob ? "')" : "");
}

/* Analysis ------------------------------------------------------------------------ */

dm_status lp_build(lp_state *L, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; k < op->n_input + op->n_output; k++) {
      size_t id;
      DM_TRY(lp_intern(L, k < op->n_input ? op->input[k] : op->output[k - op->n_input], &id));
    }
  }
  size_t n = L->n ? L->n : 1;
  L->parent = malloc(n * sizeof *L->parent);
  L->need = calloc(n, 1);
  L->first_read = malloc(n * sizeof *L->first_read);
  L->first_write = malloc(n * sizeof *L->first_write);
  L->chan = calloc(n, sizeof *L->chan);
  L->n_chan = calloc(n, sizeof *L->n_chan);
  L->chan_known = calloc(n, sizeof *L->chan_known);
  if (!L->parent || !L->need || !L->first_read || !L->first_write || !L->chan || !L->n_chan ||
      !L->chan_known)
    return DM_NOMEM("the layout pass's tables");
  for (size_t i = 0; i < L->n; i++) {
    L->parent[i] = i;
    L->first_read[i] = L->first_write[i] = -1;
  }
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; k < op->n_input; k++) {
      size_t id = lp_find_id(L, op->input[k]);
      if (L->first_read[id] < 0)
        L->first_read[id] = (long)i;
    }
    for (size_t k = 0; k < op->n_output; k++) {
      size_t id = lp_find_id(L, op->output[k]);
      if (L->first_write[id] < 0)
        L->first_write[id] = (long)i;
    }
  }
  return DM_OK;
}

/* Groups (elementwise ops join their masked slots; a flattening op's masked outputs, its
 * dX, join its X) and what each needs. */
void lp_groups(lp_state *L, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = lp_rule_of(op);
    if (r.rule != DM_LAYOUT_ELEMENTWISE && r.rule != DM_LAYOUT_FLATTEN)
      continue;
    long first = -1;
    for (size_t k = 0; k < op->n_input; k++)
      if (r.rule == DM_LAYOUT_ELEMENTWISE ? masked(r.in, k) : k == 0) {
        size_t id = lp_find_id(L, op->input[k]);
        if (first < 0)
          first = (long)id;
        else
          uf_union(L, (size_t)first, id);
      }
    for (size_t k = 0; first >= 0 && k < op->n_output; k++)
      if (masked(r.out, k))
        uf_union(L, (size_t)first, lp_find_id(L, op->output[k]));
  }
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = lp_rule_of(op);
    if (!lp_is_ordered(r.rule))
      continue;
    for (size_t k = 0; k < op->n_input; k++)
      if (masked(r.in, k))
        L->need[lp_uf_find(L, lp_find_id(L, op->input[k]))] |= NEED_NHWC;
    for (size_t k = 0; k < op->n_output; k++)
      if (masked(r.out, k))
        L->need[lp_uf_find(L, lp_find_id(L, op->output[k]))] |= NEED_NHWC;
  }
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (lp_rule_of(op).rule == DM_LAYOUT_FLATTEN && op->n_input >= 2 &&
        (lp_need_of(L, op->input[0]) & NEED_NHWC))
      L->need[lp_uf_find(L, lp_find_id(L, op->input[1]))] |= NEED_FC;
  }
}

static int in_place(const Caffe2__OperatorDef *op, const char *name) {
  return dm_opdef_reads(op, name) && dm_opdef_writes(op, name);
}

/* Every op touching a blob the pass re-lays must take it; nothing is changed yet. */
dm_status lp_check(lp_state *L, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = lp_rule_of(op);
    int touches = 0;
    for (size_t k = 0; k < op->n_input; k++) {
      const char *b = op->input[k];
      unsigned g = lp_need_of(L, b);
      if (!g)
        continue;
      touches = 1;
      if (g == (NEED_NHWC | NEED_FC))
        return lp_refuse(i, op, b, "the blob would be both NHWC data and an FC weight");
      switch (r.rule) {
      case DM_LAYOUT_REFUSE: /* NHWC data is transposed back before it (an exit) */
        if (g != NEED_NHWC)
          return lp_refuse(i, op, b, "its schema gives no layout rule, and it reads an FC weight "
                                  "the pass reorders");
        if (in_place(op, b))
          return lp_refuse(i, op, b, "its schema gives no layout rule, and it updates a blob the "
                                  "pass holds NHWC in place");
        break;
      case DM_LAYOUT_ORDER:
      case DM_LAYOUT_FILTER:
      case DM_LAYOUT_JOIN:
        if (!masked(r.in, k) || g != NEED_NHWC)
          return lp_refuse(i, op, b, "the blob is NHWC in a slot its order does not cover");
        break;
      case DM_LAYOUT_ELEMENTWISE:
        if (!masked(r.in, k) && !in_place(op, b))
          return lp_refuse(i, op, b, "the blob is NHWC in a slot that is neither elementwise "
                                  "nor in place");
        break;
      case DM_LAYOUT_FLATTEN:
        if (k == 1 && g == NEED_FC && !(lp_need_of(L, op->input[0]) & NEED_NHWC))
          return lp_refuse(i, op, b, "its W is an FC weight reordered for NHWC data, but its X "
                                  "is not NHWC");
        if (!((k == 0 && g == NEED_NHWC) || (k == 1 && g == NEED_FC)))
          return lp_refuse(i, op, b, "the blob is NHWC in a slot other than X");
        break;
      }
    }
    for (size_t k = 0; k < op->n_output; k++)
      touches |= lp_need_of(L, op->output[k]) != 0;
    if (!touches)
      continue;
    if (r.rule == DM_LAYOUT_ELEMENTWISE && lp_arg_int(op, "broadcast", 0) != 0)
      return lp_refuse(i, op, NULL, "it broadcasts (broadcast=1), which depends on the order");
    if (r.rule == DM_LAYOUT_ELEMENTWISE && lp_arg_int(op, "axis", 1) != 1)
      return lp_refuse(i, op, NULL, "its axis is not 1 (a row from dim 1 is the same set of "
                                 "values in either order; a row from another dim is not)");
    if (r.rule == DM_LAYOUT_FLATTEN &&
        (lp_arg_int(op, "axis", 1) != 1 || lp_arg_int(op, "axis_w", 1) != 1))
      return lp_refuse(i, op, NULL, "it flattens from an axis other than 1");
    if (r.rule == DM_LAYOUT_JOIN && lp_arg_int(op, "add_axis", 0) != 0)
      return lp_refuse(i, op, NULL, "add_axis stacks along a new dim");
    if (r.rule == DM_LAYOUT_JOIN && (lp_arg_int(op, "axis", 1) < -4 || lp_arg_int(op, "axis", 1) > 3))
      return lp_refuse(i, op, NULL, "its axis is not a dim of 4-D data");
    for (size_t k = 0; k < op->n_output; k++) {
      const char *b = op->output[k];
      unsigned g = lp_need_of(L, b);
      int made = (lp_is_ordered(r.rule) || r.rule == DM_LAYOUT_ELEMENTWISE ||
                  r.rule == DM_LAYOUT_FLATTEN) && masked(r.out, k);
      if ((g & NEED_FC) && !made && !in_place(op, b))
        return lp_refuse(i, op, b, "it computes an FC weight that the pass would have to "
                                "reorder at every run");
    }
  }
  return DM_OK;
}

/* Whether output k of op writes NCHW data into an NHWC group (a DB reader's batch): a
 * Transpose follows it. */
int lp_writes_nchw(lp_state *L, const Caffe2__OperatorDef *op, size_t k) {
  op_rule r = lp_rule_of(op);
  if (!(lp_need_of(L, op->output[k]) & NEED_NHWC) || in_place(op, op->output[k]))
    return 0;
  return r.rule == DM_LAYOUT_REFUSE || !masked(r.out, k);
}

/* A weight: read before any op of the net writes it, and not fed. */
int lp_is_source(lp_state *L, size_t id) {
  return L->first_read[id] >= 0 &&
         (L->first_write[id] < 0 || L->first_write[id] >= L->first_read[id]);
}

/* The weight a group reads (its one source not fed), or -1. */
long lp_group_weight(lp_state *L, size_t root, const dm_layout_opts *o) {
  long w = -1;
  for (size_t id = 0; id < L->n; id++)
    if (lp_uf_find(L, id) == root && lp_is_source(L, id) &&
        !dm_str_in_list(L->name[id], o->fed, o->fed ? o->n_fed : 0)) {
      if (w >= 0)
        return -1;
      w = (long)id;
    }
  return w;
}

static dm_status chan_set(lp_state *L, size_t id, const size_t *src, size_t n) {
  size_t *c = n ? malloc(n * sizeof *c) : NULL;
  if (n && !c)
    return DM_NOMEM("the layout pass's channel table");
  if (n)
    memcpy(c, src, n * sizeof *c);
  free(L->chan[id]);
  L->chan[id] = c;
  L->n_chan[id] = n;
  L->chan_known[id] = 1;
  return DM_OK;
}

/* The channels of each forward NHWC activation, as the filters (their weights) that
 * make them: an FC reading one reorders its weight by their count. */
dm_status lp_channels(lp_state *L, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = lp_rule_of(op);
    if (op->is_gradient_op || !op->n_input)
      continue;
    if (r.rule == DM_LAYOUT_FILTER && op->n_input >= 2) {
      long w = lp_group_weight(L, lp_uf_find(L, lp_find_id(L, op->input[1])), o);
      for (size_t k = 0; w >= 0 && k < op->n_output; k++)
        if (masked(r.out, k)) {
          size_t src = (size_t)w;
          DM_TRY(chan_set(L, lp_find_id(L, op->output[k]), &src, 1));
        }
    } else if (r.rule == DM_LAYOUT_ORDER || r.rule == DM_LAYOUT_ELEMENTWISE) {
      long from = -1;
      for (size_t k = 0; k < op->n_input && from < 0; k++)
        if ((r.rule == DM_LAYOUT_ORDER ? k == 0 : masked(r.in, k)) &&
            L->chan_known[lp_find_id(L, op->input[k])])
          from = (long)lp_find_id(L, op->input[k]);
      for (size_t k = 0; from >= 0 && k < op->n_output; k++)
        if (masked(r.out, k))
          DM_TRY(chan_set(L, lp_find_id(L, op->output[k]), L->chan[from], L->n_chan[from]));
    } else if (r.rule == DM_LAYOUT_JOIN && r.out == 1 && lp_arg_int(op, "axis", 1) == 1) {
      size_t n = 0, *all = NULL;
      int known = 1;
      for (size_t k = 0; k < op->n_input && known; k++) {
        size_t in = lp_find_id(L, op->input[k]);
        known = L->chan_known[in];
        size_t *g = known ? realloc(all, (n + L->n_chan[in] + 1) * sizeof *g) : NULL;
        if (known && !g) {
          free(all);
          return DM_NOMEM("the layout pass's channel table");
        }
        if (known) {
          all = g;
          memcpy(all + n, L->chan[in], L->n_chan[in] * sizeof *all);
          n += L->n_chan[in];
        }
      }
      dm_status s = known && op->n_output ? chan_set(L, lp_find_id(L, op->output[0]), all, n)
                                          : DM_OK;
      free(all);
      DM_TRY(s);
    }
  }
  return DM_OK;
}

/* Rewriting ----------------------------------------------------------------------- */
