/* layout_internal.h: what the layout pass's files share (internal): the blob table and
 * its groups (layout_groups.c), the plan (layout_plan.c) and its application
 * (layout_apply.c); net/passes/layout_pass.c runs them in that order. */
#ifndef DM_NET_PASSES_LAYOUT_INTERNAL_H
#define DM_NET_PASSES_LAYOUT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "demitasse_plugin.h"
#include "net/passes/layout_pass.h"

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

/* The op's rule: its schema's, or ELEMENTWISE (masks 0: in-place slots only) for an
 * optimizer update, which works element by element on its state in place. */
typedef struct op_rule {
  dm_layout_rule rule;
  uint64_t in, out;
} op_rule;

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

DM_HIDDEN void lp_free(lp_state *L);
/* The id of `s`, or (size_t)-1 when it is not interned. */
DM_HIDDEN size_t lp_find_id(const lp_state *L, const char *s);
DM_HIDDEN size_t lp_uf_find(lp_state *L, size_t i);
DM_HIDDEN unsigned lp_need_of(lp_state *L, const char *s);
DM_HIDDEN op_rule lp_rule_of(const Caffe2__OperatorDef *op);
DM_HIDDEN int lp_is_ordered(dm_layout_rule r);
/* An integer argument, or `dflt` when absent. */
DM_HIDDEN int64_t lp_arg_int(const Caffe2__OperatorDef *op, const char *name, int64_t dflt);
DM_HIDDEN dm_status lp_refuse(size_t i, const Caffe2__OperatorDef *op, const char *blob,
                        const char *why);
DM_HIDDEN dm_status lp_build(lp_state *L, const Caffe2__NetDef *net);
/* Groups (elementwise ops join their masked slots; a flattening op's masked outputs, its
 * dX, join its X) and what each needs. */
DM_HIDDEN void lp_groups(lp_state *L, const Caffe2__NetDef *net);
/* Every op touching a blob the pass re-lays must take it; nothing is changed yet. */
DM_HIDDEN dm_status lp_check(lp_state *L, const Caffe2__NetDef *net);
/* Whether output k of op writes NCHW data into an NHWC group (a DB reader's batch): a
 * Transpose follows it. */
DM_HIDDEN int lp_writes_nchw(lp_state *L, const Caffe2__OperatorDef *op, size_t k);
/* A weight: read before any op of the net writes it, and not fed. */
DM_HIDDEN int lp_is_source(lp_state *L, size_t id);
/* The weight a group reads (its one source not fed), or -1. */
DM_HIDDEN long lp_group_weight(lp_state *L, size_t root, const dm_layout_opts *o);
/* The channels of each forward NHWC activation, as the filters (their weights) that
 * make them: an FC reading one reorders its weight by their count. */
DM_HIDDEN dm_status lp_channels(lp_state *L, const Caffe2__NetDef *net, const dm_layout_opts *o);
DM_HIDDEN void lp_plan_free(lp_plan *P);
/* Decides the whole rewrite, or refuses the net; reads the net, changes nothing. */
DM_HIDDEN dm_status lp_plan_build(lp_plan *P, const Caffe2__NetDef *net, const dm_layout_opts *o);
/* Rewrites the net as planned. The orders first (ops are matched by index). */
DM_HIDDEN dm_status lp_plan_apply(lp_plan *P, Caffe2__NetDef *net, const dm_layout_opts *o,
                              Caffe2__NetDef *add, dm_layout_summary *sum);

#endif
