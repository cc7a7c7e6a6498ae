/* fc.h: FC's GEMM geometry, shared by the CPU kernels (fc.c) and the cuBLAS kernels
 * (gpu/fc_cublas.c), and FC's reference pieces FCFusion reuses (internal). */
#ifndef DM_OPERATORS_FC_H
#define DM_OPERATORS_FC_H

#include <stdint.h>

#include "core/tensor.h"

/* FC's argument specs (FC, FCGradient, FCFusion; append a schema's own, then {NULL}). */
#define DM_FC_ARG_SPECS                                                                  \
  {"axis", DM_ARG_INT, 0, "flatten X to 2-D at this axis (default 1)"},                  \
      {"axis_w", DM_ARG_INT, 0, "flatten W to 2-D at this axis (default 1)"},            \
      {"float16_compute", DM_ARG_INT, 0, "GPU hint; the CPU always accumulates in FP32"}

/* X flattened to M x K at `axis`, W to N x K at `axis_w` (both canonical). */
typedef struct dm_fc_dims {
  int axis, axis_w;
  int64_t M, N, K;
} dm_fc_dims;

/* The geometry of FC and FCGradient; DM_ERR_SHAPE when W's K differs from X's. */
DM_HIDDEN dm_status dm_fc_geometry(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                                   dm_fc_dims *d);

/* FC's CPU reference (X, W, b -> Y), its shape inference and cost, for FC and FCFusion
 * (operators/conv_fusion.c). */
DM_HIDDEN dm_status dm_fc_infer(dm_op_ctx *ctx);
DM_HIDDEN dm_status dm_fc_run(dm_op_ctx *ctx);
DM_HIDDEN void dm_fc_cost(dm_op_ctx *ctx, dm_op_cost *c);
/* FCGradient's shape inference and cost (X, W, dY -> dW, db, [dX]), its CPU kernel with
 * dY's data taken from dy_data (dY's dtype and shape: FCReluGradient passes its masked
 * dY), and its gradient maker emitting `type` (with with_y the forward's Y as input 3). */
DM_HIDDEN dm_status dm_fc_grad_infer(dm_op_ctx *ctx);
DM_HIDDEN void dm_fc_grad_cost(dm_op_ctx *ctx, dm_op_cost *c);
DM_HIDDEN dm_status dm_fc_backward_run(dm_op_ctx *ctx, const void *dy_data);
DM_HIDDEN dm_status dm_fc_gradient_emit(dm_grad_ctx *g, const char *type, int with_y);

#endif
