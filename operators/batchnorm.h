/* batchnorm.h: SpatialBN's checks and loops (operators/batchnorm.c), shared with the
 * fused training ops SpatialBNRelu and SpatialBNAddRelu (bn_fusion.c), which run the same
 * code and so compute the same bits as SpatialBN followed by the unfused ops (internal).
 *
 * The forward and backward read the op's inputs in SpatialBN's slots (X, scale, bias,
 * mean, var; the gradient's X, scale, dY, saved_mean, saved_inv_std) and write its
 * outputs, except Y (dY), whose buffer the caller gives: the fused kernels put Y in a
 * temporary or take dY from a masked copy. Call after the op's inference.
 */
#ifndef DM_OPERATORS_BATCHNORM_H
#define DM_OPERATORS_BATCHNORM_H

#include "core/status.h"
#include "demitasse_plugin.h"

/* is_test, epsilon, momentum, order. */
extern DM_HIDDEN const dm_arg_spec dm_bn_args[];
/* SpatialBN's inference as if the op had `nout` outputs (1 with is_test, else 5):
 * checks slots 0..4 and declares outputs 0..nout-1. */
DM_HIDDEN dm_status dm_bn_infer_outputs(dm_op_ctx *ctx, int nout);
/* SpatialBNGradient's inference: slots 0..4 checked, outputs dX, dscale, dbias declared. */
DM_HIDDEN dm_status dm_bn_grad_infer(dm_op_ctx *ctx);
/* Y into py (X's dtype and layout; may be X's buffer), and in training outputs 1..4. */
DM_HIDDEN dm_status dm_bn_forward(dm_op_ctx *ctx, void *py);
/* dX (output 0), dscale and dbias from dY at pdy (X's dtype and layout; may be dX's
 * buffer). */
DM_HIDDEN dm_status dm_bn_backward(dm_op_ctx *ctx, const void *pdy);

#endif
