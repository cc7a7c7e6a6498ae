/* fusion.h: the inference fusion pass, NetDef -> NetDef (internal).
 *
 * Folds each test-mode SpatialBN into the Conv that feeds it: the BN op goes, the Conv
 * writes the BN's output and reads folded weights and a bias made by a FoldBN op
 * (operators/fold_bn.c) appended to the init-net addition, so the fold runs once, after
 * the caller's init nets, and the rewritten nets stay ordinary nets a user can print,
 * diff and run. The pass matches Conv and SpatialBN by type: a fusion is a rule about
 * that pair by design (tests/layering/check_pass_rules.py allows this file to name
 * them); everything else it needs it reads from the ops' arguments.
 *
 * A pair is folded only when the result computes the same blobs the caller can see:
 *   - the BN is in test mode (is_test=1, one output), NCHW, and its X is the output of
 *     the last op writing X before it, a Conv (NCHW, one output);
 *   - X has no other reader or writer and is not fetched (an external output or in
 *     `keep`): the Conv's own output disappears;
 *   - no op between them reads or writes the BN's output (the Conv now writes it
 *     earlier);
 *   - no op of the net writes W, b or the BN's parameters, none of them is fed, and
 *     with a params list all are in it: they are weights, loaded before the fold runs.
 * Grouped Convs fold like the others: W's first dim is still the output channel.
 * Each BN left unfolded is named in the summary's report with the reason.
 *
 * The fused net is for inference: a net with gradient ops is refused.
 */
#ifndef DM_NET_FUSION_H
#define DM_NET_FUSION_H

#include <stddef.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

typedef struct dm_fusion_opts {
  const char *const *keep; /* blobs the caller fetches besides the external outputs */
  size_t n_keep;
  const char *const *fed;  /* blobs the caller feeds before each run: never folded (the
                              fold runs once, before any feed) */
  size_t n_fed;
  const char *const *params; /* the weights the init nets make (NULL: not known): when
                                given, W, b and the BN's parameters must be among them */
  size_t n_params;
} dm_fusion_opts;

typedef struct dm_fusion_summary {
  size_t bn_total;   /* SpatialBN ops seen */
  size_t folded;     /* of which folded into their Conv */
  char **new_params; /* the folded weights and biases the addition makes (owned) */
  size_t n_new_params;
  char *report;      /* one line per BN not folded, with the reason (owned; NULL: none) */
} dm_fusion_summary;

/* Rewrites `net` in place and appends the FoldBN ops to `init_add`. On failure the net
 * may hold part of the folds; free the summary either way. */
DM_HIDDEN dm_status dm_fusion_pass(Caffe2__NetDef *net, const dm_fusion_opts *o,
                                   Caffe2__NetDef *init_add, dm_fusion_summary *sum);
DM_HIDDEN void dm_fusion_summary_free(dm_fusion_summary *s);

#endif
