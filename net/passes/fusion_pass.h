/* fusion_pass.h: the inference fusion pass, NetDef -> NetDef (internal).
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
 * With post_ops, oneDNN-style post-op fusions follow, on the net the folds left (so
 * Conv + SpatialBN + Relu becomes one op), into the ops of operators/conv_fusion.c, with
 * the argument names and numbering of Caffe2's IDEEP backend:
 *   - Conv + Sum/Add: Sum(t, S) or Add(t, S) (two operands, Add without broadcast),
 *     either operand t a Conv's output, becomes ConvFusion(X, W, [b], S) fusion_type 2;
 *   - Relu after a Conv, after such a ConvFusion (then fusion_type 3), or after an FC
 *     (FCFusion(X, W, b) fusion_type 1) joins it; ConvFusion fusion_type 1 for a Conv.
 * The fused op takes the first op's arguments unchanged (NCHW or NHWC) and sits where
 * the pattern's last op was, writing its output (which may be S: the residual sum in
 * place). It is made only when it computes the blobs the caller can see: the
 * intermediate blob t (the first op's output) is not fed, is read by the last op once
 * and by no other op (unless t is the last op's output too, in place: then no op between
 * them reads or writes it), and is not fetched (external output or `keep`) unless in
 * place; no op between them writes an input of the first (it now reads them later); the
 * output is not one of the first op's inputs (S aside). Each Relu, Sum and Add not fused
 * is named in the report with the reason.
 * ConvFusion and FCFusion have CPU kernels only: a caller that places the net on CUDA
 * should leave post_ops 0.
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
  int post_ops; /* nonzero: the post-op fusions after the folds; 0: the folds only */
} dm_fusion_opts;

typedef struct dm_fusion_summary {
  size_t bn_total;   /* SpatialBN ops seen */
  size_t folded;     /* of which folded into their Conv */
  char **new_params; /* the folded weights and biases the addition makes (owned) */
  size_t n_new_params;
  char *report;      /* one line per BN not folded (and with post_ops, per Relu, Sum or Add
                        not fused), with the reason (owned; NULL: none) */
  /* with post_ops: */
  size_t post_total;    /* Relu, Sum and Add ops seen */
  size_t conv_sum;      /* Sum/Add fused with a Conv (ConvFusion fusion_type 2) */
  size_t conv_relu;     /* Relu fused into a Conv (ConvFusion fusion_type 1) */
  size_t conv_sum_relu; /* Relu fused into a Conv + Sum (fusion_type 2 made 3) */
  size_t fc_relu;       /* Relu fused into an FC (FCFusion fusion_type 1) */
  size_t act_total;     /* other activations seen (Clip, Sigmoid, ..., Swish's Mul) */
  size_t conv_act;      /* of which fused into a Conv or a Conv + Sum (`activation`) */
} dm_fusion_summary;

/* Rewrites `net` in place and appends the FoldBN ops to `init_add`. On failure the net
 * may hold part of the folds; free the summary either way. */
DM_HIDDEN dm_status dm_fusion_pass(Caffe2__NetDef *net, const dm_fusion_opts *o,
                                   Caffe2__NetDef *init_add, dm_fusion_summary *sum);
DM_HIDDEN void dm_fusion_summary_free(dm_fusion_summary *s);

#endif
