/* train_fusion_pass.h: the training fusion pass, NetDef -> NetDef (internal).
 *
 * Run on a forward net BEFORE the gradient pass (a net with gradient ops is refused), so
 * that the gradient pass emits the fused backward ops the fused ops' schemas name:
 *   - SpatialBN (is_test=0) then Relu            -> SpatialBNRelu
 *   - SpatialBN (is_test=0) then Sum or Add (two operands, Add without broadcast) with
 *     another blob Z, then Relu                   -> SpatialBNAddRelu(..., Z)
 *     (operators/bn_fusion.c; backward SpatialBNReluGradient, SpatialBNAddReluGradient)
 *   - Conv (with or without a bias) then Relu    -> ConvFusion, fusion_type 1
 *   - FC then Relu                               -> FCFusion, fusion_type 1
 *     (operators/conv_fusion.c, the inference fusion's ops, IDEEP's names; backward
 *     ConvReluGradient, FCReluGradient: dY masked where Y > 0, then Conv's/FC's gradient)
 * On a GPU cuDNN runs the BN forms as one kernel each and ConvFusion as its
 * ConvolutionBiasActivationForward (gpu/batchnorm_cudnn.c, gpu/conv_fusion_cudnn.c); on the CPU
 * the fused reference kernels run the ops they replace's own loops, so they compute the
 * same bits, but an unfused op may have an engine kernel (oneDNN) the fused one lacks or
 * runs differently, hence the pass is off by default. The pass matches those ops by type
 * (a rule about that pattern, which no schema field states: tests/layering/
 * check_pass_rules.py allows this file to name them).
 *
 * A pattern is fused only when the fused op computes every blob the caller can see: the
 * BN has the training form (5 inputs, 5 outputs), a Conv or FC one output; the head's Y
 * is read first by the Relu (or the Sum/Add, whose output is read first by the Relu);
 * each intermediate blob (the head's Y, the sum) that is not the Relu's output has no
 * reader or writer outside the pattern and is not fetched (an external output or `keep`)
 * or fed; no op between the head and the Relu reads or writes the Relu's output (ops
 * before the Sum may when it is Z), the BN's other outputs, or writes the head's inputs or
 * (after the Sum) Z, since the fused op reads and writes them where the Relu was; the
 * Relu's output is not an input (or statistics output) of the head. The fused op is the
 * head's OperatorDef (name, arguments, device, engine) with the new type, the Relu's
 * output as Y; the BN forms get Z appended and a `reserve` output (a fresh blob, empty on
 * the CPU: cuDNN's reserve space for the fused backward), Conv and FC the argument
 * fusion_type 1; it sits where the Relu was. Every training BN left alone is named in the
 * report with the reason, and every Conv or FC whose Y a Relu reads first but that is
 * left alone.
 */
#ifndef DM_NET_TRAIN_FUSION_H
#define DM_NET_TRAIN_FUSION_H

#include <stddef.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

typedef struct dm_train_fusion_opts {
  const char *const *keep; /* blobs the caller fetches besides the external outputs */
  size_t n_keep;
  const char *const *fed; /* blobs the caller feeds before each run */
  size_t n_fed;
} dm_train_fusion_opts;

typedef struct dm_train_fusion_summary {
  size_t bn_total;    /* training-mode SpatialBN ops seen */
  size_t bn_relu;     /* of which made SpatialBNRelu */
  size_t bn_add_relu; /* of which made SpatialBNAddRelu */
  size_t conv_relu;   /* Conv + Relu made ConvFusion (fusion_type 1) */
  size_t fc_relu;     /* FC + Relu made FCFusion (fusion_type 1) */
  char *report;       /* one line per training BN not fused, and per Conv/FC read first by
                         a Relu but not fused, with the reason (owned) */
} dm_train_fusion_summary;

/* Rewrites `net` in place (o may be NULL: nothing kept or fed). On failure the net may
 * hold part of the fusions; free the summary either way. */
DM_HIDDEN dm_status dm_train_fusion_pass(Caffe2__NetDef *net, const dm_train_fusion_opts *o,
                                         dm_train_fusion_summary *sum);
DM_HIDDEN void dm_train_fusion_summary_free(dm_train_fusion_summary *s);

#endif
