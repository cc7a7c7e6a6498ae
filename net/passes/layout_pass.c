/* layout_pass.c: the layout pass (see net/passes/layout_pass.h): an NCHW net made NHWC, from the
 * layout rules in the op schemas. layout_plan decides everything (groups of blobs sharing
 * a layout, refusals, where data enters and leaves, which weights to re-lay, which data
 * enters padded) from the net without changing it, so a refused net is returned as it
 * was; layout_apply then rewrites it as planned. What an op is comes from its schema
 * alone (layout, layout_inputs/outputs, value_copy, grad_slots), so a plugin's op takes
 * part like a built-in one; the pass names only the ops it emits. */
#include "net/passes/layout_pass.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse_plugin.h"
#include "net/netdef_build.h"

void dm_layout_summary_free(dm_layout_summary *s) {
  if (!s)
    return;
  for (size_t i = 0; i < 2 * s->n_renamed; i++)
    free(s->renamed[i]);
  free(s->renamed);
  free(s->fc);
  free(s->pad);
  memset(s, 0, sizeof *s);
}

enum { NEED_NHWC = 1, NEED_FC = 2 };

/* The blobs of the net, interned (copies: the net's strings change as it is rewritten),
 * with a union-find over them and, per group root, what the group needs. */
typedef struct lp_state {
  char **name;
  size_t n, cap;
  size_t *slot; /* open addressing: id + 1, 0 empty */
  size_t nslot;
  size_t *parent;
  unsigned char *need;
  long *first_read, *first_write; /* op index, -1: none */
  /* per id: the channel sources (ids of filter weights) of a forward NHWC activation */
  size_t **chan;
  size_t *n_chan;
  int *chan_known;
} lp_state;

static void lp_free(lp_state *L) {
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
static size_t lp_find_id(const lp_state *L, const char *s) {
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

static size_t uf_find(lp_state *L, size_t i) {
  while (L->parent[i] != i) {
    L->parent[i] = L->parent[L->parent[i]];
    i = L->parent[i];
  }
  return i;
}

static void uf_union(lp_state *L, size_t a, size_t b) {
  a = uf_find(L, a);
  b = uf_find(L, b);
  if (a != b) {
    L->parent[b] = a;
    L->need[a] |= L->need[b];
  }
}

static unsigned need_of(lp_state *L, const char *s) {
  size_t id = lp_find_id(L, s);
  return id == (size_t)-1 ? 0 : L->need[uf_find(L, id)];
}

/* The op's rule: its schema's, or ELEMENTWISE (masks 0: in-place slots only) for an
 * optimizer update, which works element by element on its state in place. */
typedef struct op_rule {
  dm_layout_rule rule;
  uint64_t in, out;
} op_rule;

static op_rule rule_of(const Caffe2__OperatorDef *op) {
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

static int is_ordered(dm_layout_rule r) {
  return r == DM_LAYOUT_ORDER || r == DM_LAYOUT_FILTER || r == DM_LAYOUT_JOIN;
}

/* An integer argument, or `dflt` when absent. */
static int64_t arg_int(const Caffe2__OperatorDef *op, const char *name, int64_t dflt) {
  const Caffe2__Argument *a = dm_opdef_find_arg(op, name);
  return a && a->has_i ? a->i : dflt;
}

static dm_status refuse(size_t i, const Caffe2__OperatorDef *op, const char *blob,
                        const char *why) {
  return dm_error(DM_ERR_UNSUPPORTED,
                  "layout pass: op %zu (%s '%s') cannot be converted to NHWC: %s%s%s%s", i,
                  op->type ? op->type : "?", op->name ? op->name : "", why,
                  blob ? " (blob '" : "", blob ? blob : "", blob ? "')" : "");
}

/* Analysis ------------------------------------------------------------------------ */

static dm_status lp_build(lp_state *L, const Caffe2__NetDef *net) {
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
static void lp_groups(lp_state *L, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = rule_of(op);
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
    op_rule r = rule_of(op);
    if (!is_ordered(r.rule))
      continue;
    for (size_t k = 0; k < op->n_input; k++)
      if (masked(r.in, k))
        L->need[uf_find(L, lp_find_id(L, op->input[k]))] |= NEED_NHWC;
    for (size_t k = 0; k < op->n_output; k++)
      if (masked(r.out, k))
        L->need[uf_find(L, lp_find_id(L, op->output[k]))] |= NEED_NHWC;
  }
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (rule_of(op).rule == DM_LAYOUT_FLATTEN && op->n_input >= 2 &&
        (need_of(L, op->input[0]) & NEED_NHWC))
      L->need[uf_find(L, lp_find_id(L, op->input[1]))] |= NEED_FC;
  }
}

static int in_place(const Caffe2__OperatorDef *op, const char *name) {
  return dm_opdef_reads(op, name) && dm_opdef_writes(op, name);
}

/* Every op touching a blob the pass re-lays must take it; nothing is changed yet. */
static dm_status lp_check(lp_state *L, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = rule_of(op);
    int touches = 0;
    for (size_t k = 0; k < op->n_input; k++) {
      const char *b = op->input[k];
      unsigned g = need_of(L, b);
      if (!g)
        continue;
      touches = 1;
      if (g == (NEED_NHWC | NEED_FC))
        return refuse(i, op, b, "the blob would be both NHWC data and an FC weight");
      switch (r.rule) {
      case DM_LAYOUT_REFUSE: /* NHWC data is transposed back before it (an exit) */
        if (g != NEED_NHWC)
          return refuse(i, op, b, "its schema gives no layout rule, and it reads an FC weight "
                                  "the pass reorders");
        if (in_place(op, b))
          return refuse(i, op, b, "its schema gives no layout rule, and it updates a blob the "
                                  "pass holds NHWC in place");
        break;
      case DM_LAYOUT_ORDER:
      case DM_LAYOUT_FILTER:
      case DM_LAYOUT_JOIN:
        if (!masked(r.in, k) || g != NEED_NHWC)
          return refuse(i, op, b, "the blob is NHWC in a slot its order does not cover");
        break;
      case DM_LAYOUT_ELEMENTWISE:
        if (!masked(r.in, k) && !in_place(op, b))
          return refuse(i, op, b, "the blob is NHWC in a slot that is neither elementwise "
                                  "nor in place");
        break;
      case DM_LAYOUT_FLATTEN:
        if (k == 1 && g == NEED_FC && !(need_of(L, op->input[0]) & NEED_NHWC))
          return refuse(i, op, b, "its W is an FC weight reordered for NHWC data, but its X "
                                  "is not NHWC");
        if (!((k == 0 && g == NEED_NHWC) || (k == 1 && g == NEED_FC)))
          return refuse(i, op, b, "the blob is NHWC in a slot other than X");
        break;
      }
    }
    for (size_t k = 0; k < op->n_output; k++)
      touches |= need_of(L, op->output[k]) != 0;
    if (!touches)
      continue;
    if (r.rule == DM_LAYOUT_ELEMENTWISE && arg_int(op, "broadcast", 0) != 0)
      return refuse(i, op, NULL, "it broadcasts (broadcast=1), which depends on the order");
    if (r.rule == DM_LAYOUT_ELEMENTWISE && arg_int(op, "axis", 1) != 1)
      return refuse(i, op, NULL, "its axis is not 1 (a row from dim 1 is the same set of "
                                 "values in either order; a row from another dim is not)");
    if (r.rule == DM_LAYOUT_FLATTEN &&
        (arg_int(op, "axis", 1) != 1 || arg_int(op, "axis_w", 1) != 1))
      return refuse(i, op, NULL, "it flattens from an axis other than 1");
    if (r.rule == DM_LAYOUT_JOIN && arg_int(op, "add_axis", 0) != 0)
      return refuse(i, op, NULL, "add_axis stacks along a new dim");
    if (r.rule == DM_LAYOUT_JOIN && (arg_int(op, "axis", 1) < -4 || arg_int(op, "axis", 1) > 3))
      return refuse(i, op, NULL, "its axis is not a dim of 4-D data");
    for (size_t k = 0; k < op->n_output; k++) {
      const char *b = op->output[k];
      unsigned g = need_of(L, b);
      int made = (is_ordered(r.rule) || r.rule == DM_LAYOUT_ELEMENTWISE ||
                  r.rule == DM_LAYOUT_FLATTEN) && masked(r.out, k);
      if ((g & NEED_FC) && !made && !in_place(op, b))
        return refuse(i, op, b, "it computes an FC weight that the pass would have to "
                                "reorder at every run");
    }
  }
  return DM_OK;
}

/* Whether output k of op writes NCHW data into an NHWC group (a DB reader's batch): a
 * Transpose follows it. */
static int writes_nchw(lp_state *L, const Caffe2__OperatorDef *op, size_t k) {
  op_rule r = rule_of(op);
  if (!(need_of(L, op->output[k]) & NEED_NHWC) || in_place(op, op->output[k]))
    return 0;
  return r.rule == DM_LAYOUT_REFUSE || !masked(r.out, k);
}

/* A weight: read before any op of the net writes it, and not fed. */
static int is_source(lp_state *L, size_t id) {
  return L->first_read[id] >= 0 &&
         (L->first_write[id] < 0 || L->first_write[id] >= L->first_read[id]);
}

/* The weight a group reads (its one source not fed), or -1. */
static long group_weight(lp_state *L, size_t root, const dm_layout_opts *o) {
  long w = -1;
  for (size_t id = 0; id < L->n; id++)
    if (uf_find(L, id) == root && is_source(L, id) &&
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
static dm_status lp_channels(lp_state *L, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    op_rule r = rule_of(op);
    if (op->is_gradient_op || !op->n_input)
      continue;
    if (r.rule == DM_LAYOUT_FILTER && op->n_input >= 2) {
      long w = group_weight(L, uf_find(L, lp_find_id(L, op->input[1])), o);
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
    } else if (r.rule == DM_LAYOUT_JOIN && r.out == 1 && arg_int(op, "axis", 1) == 1) {
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
    op_rule r = rule_of(op);
    if (!is_ordered(r.rule))
      continue;
    int touches = 0;
    for (size_t k = 0; k < op->n_input + op->n_output; k++)
      touches |= (need_of(L, k < op->n_input ? op->input[k] : op->output[k - op->n_input]) &
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

typedef struct entry {
  char *name;
  long after; /* the op writing it in NCHW; -1: fed, at the start */
  int pad;    /* enters through NCHW2NHWCPad */
} entry;

typedef struct exit_read {
  Caffe2__OperatorDef *op; /* matched by pointer: the ops move as others are inserted */
  size_t k;
} exit_read;

/* Everything the pass decided, before it changes the net: the groups of blobs and what
 * each needs (which blobs go NHWC, which ordered ops get `order`, which weights are
 * re-laid: the sources of NHWC groups), where data enters and leaves, and the padding. */
typedef struct lp_plan {
  lp_state L;
  entry *ent; /* data entering the NHWC part, in blob order */
  size_t n_ent;
  exit_read *exits; /* NHWC data read by an op without a layout rule */
  size_t n_exit;
  unsigned char *padw; /* per blob id: a filter padded with its data; NULL: no padding */
  size_t *n_out;       /* per op: the outputs it keeps (a padded Conv's dX goes) */
  size_t *fetch;       /* ids of the NHWC blobs fetched (external outputs, keep): each
                          gets a Transpose back to NCHW at the end; once each */
  size_t n_fetch;
} lp_plan;

static void plan_free(lp_plan *P) {
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
         rule_of(op).rule == DM_LAYOUT_ELEMENTWISE;
}

/* The output of gradient op `op` that is the gradient of its forward op's input `in`
 * (its schema's grad_slots, an output an argument leaves out moving the later ones
 * down), whether or not the op has it; -1 when the schema does not say. */
static long grad_output(const Caffe2__OperatorDef *op, int in) {
  const dm_op_schema *s = schema_of(op);
  long k = 0;
  for (const dm_grad_slot *g = s ? s->grad_slots : NULL; g && g->input >= 0; g++) {
    if (g->unless && arg_int(op, g->unless, 0))
      continue;
    if (g->input == in)
      return k;
    k++;
  }
  return -1;
}

static int in_group(lp_state *L, const char *b, size_t root) {
  size_t id = lp_find_id(L, b);
  return id != (size_t)-1 && uf_find(L, id) == root;
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
    op_rule r = rule_of(op);
    int reads = 0;
    for (size_t k = 0; k < op->n_input; k++)
      if (in_group(L, op->input[k], g)) {
        if ((r.rule != DM_LAYOUT_FILTER && !is_cast(op)) || (r.rule == DM_LAYOUT_FILTER && k != 0))
          return 0;
        reads = 1;
      }
    for (size_t k = 0; k < P->n_out[i]; k++)
      if (in_group(L, op->output[k], g) && !(reads && is_cast(op)) && !writes_nchw(L, op, k))
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
  size_t wr = uf_find(L, lp_find_id(L, op->input[1]));
  long w = group_weight(L, wr, o);
  if (w < 0 || L->need[wr] != NEED_NHWC)
    return 0;
  for (size_t j = 0; j < net->n_op; j++) {
    const Caffe2__OperatorDef *u = net->op[j];
    op_rule ru = rule_of(u);
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
    if (rule_of(op).rule != DM_LAYOUT_FILTER || !op->n_input || !in_group(L, op->input[0], g))
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
    if (rule_of(op).rule != DM_LAYOUT_FLATTEN || op->n_input < 2 ||
        !(need_of(L, op->input[0]) & NEED_NHWC))
      continue;
    size_t x = lp_find_id(L, op->input[0]);
    if (group_weight(L, uf_find(L, lp_find_id(L, op->input[1])), o) < 0)
      return refuse(i, op, op->input[1], "its W is not one weight made by the init nets");
    if (!op->is_gradient_op && (!L->chan_known[x] || L->n_chan[x] == 0))
      return refuse(i, op, op->input[0], "it flattens NHWC data whose channel count no Conv "
                                         "filter gives, so its weight cannot be reordered");
  }
  return DM_OK;
}

/* Where NCHW data enters: fed inputs and ops writing it in NCHW. */
static dm_status plan_entries(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o) {
  lp_state *L = &P->L;
  for (size_t id = 0; id < L->n; id++) {
    if (!(L->need[uf_find(L, id)] & NEED_NHWC))
      continue;
    long after = -2;
    if (is_source(L, id) && dm_str_in_list(L->name[id], o->fed, o->fed ? o->n_fed : 0))
      after = -1;
    for (size_t i = 0; after == -2 && i < net->n_op; i++)
      for (size_t k = 0; k < net->op[i]->n_output; k++)
        if (strcmp(net->op[i]->output[k], L->name[id]) == 0 && writes_nchw(L, net->op[i], k)) {
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
    size_t g = uf_find(L, lp_find_id(L, P->ent[e].name)), same = 0;
    for (size_t f = 0; f < P->n_ent; f++)
      same += uf_find(L, lp_find_id(L, P->ent[f].name)) == g;
    if (same == 1 && pad_group(P, net, o, g, 0))
      P->ent[e].pad = pad_group(P, net, o, g, 1);
  }
  return DM_OK;
}

/* Exits: an op without a layout rule reading NHWC data (lp_check let only those that
 * do not update it in place through). */
static dm_status plan_exits(lp_plan *P, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    if (rule_of(net->op[i]).rule != DM_LAYOUT_REFUSE)
      continue;
    for (size_t k = 0; k < net->op[i]->n_input; k++) {
      if (need_of(&P->L, net->op[i]->input[k]) != NEED_NHWC)
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
    if (id == (size_t)-1 || L->need[uf_find(L, id)] != NEED_NHWC || is_source(L, id))
      continue;
    for (size_t j = 0; j < P->n_fetch; j++)
      dup |= P->fetch[j] == id; /* listed twice (an external output also kept) */
    if (!dup)
      P->fetch[P->n_fetch++] = id;
  }
  return DM_OK;
}

/* Decides the whole rewrite, or refuses the net; reads the net, changes nothing. */
static dm_status layout_plan(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o) {
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
  return L->need[uf_find(L, id)] == NEED_NHWC && is_source(L, id) &&
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
  long w = group_weight(L, uf_find(L, lp_find_id(L, op->input[1])), o);
  const char **chans = malloc((L->n_chan[x] ? L->n_chan[x] : 1) * sizeof *chans);
  dm_status s = chans ? DM_OK : DM_NOMEM("the layout pass");
  for (size_t k = 0; s == DM_OK && k < L->n_chan[x]; k++) {
    const char *f = L->name[L->chan[x][k]];
    chans[k] = renamed_to(sum, f, 0);
    if (!chans[k]) /* a filter read in NCHW order: cannot happen after apply_filters */
      s = refuse(i, op, f, "its channels' filter was not re-laid");
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
    if (rule_of(op).rule == DM_LAYOUT_FLATTEN && !op->is_gradient_op && op->n_input >= 2 &&
        (need_of(&P->L, op->input[0]) & NEED_NHWC))
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
static dm_status layout_apply(lp_plan *P, Caffe2__NetDef *net, const dm_layout_opts *o,
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

dm_status dm_layout_pass(Caffe2__NetDef *net, const dm_layout_opts *o, Caffe2__NetDef *add,
                         dm_layout_summary *sum) {
  static const dm_layout_opts none = {0};
  if (!net || !sum)
    return dm_error(DM_ERR_INVALID, "dm_layout_pass: NULL argument");
  if (!o)
    o = &none;
  if (dm_netdef_find_arg(net, DM_LAYOUT_MARK)) {
    sum->already = 1;
    return DM_OK;
  }
  lp_plan P = {0};
  dm_status s = layout_plan(&P, net, o);
  if (s == DM_OK)
    s = layout_apply(&P, net, o, add, sum);
  sum->ops_total += net->n_op;
  plan_free(&P);
  return s;
}
