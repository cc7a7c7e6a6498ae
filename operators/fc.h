/* fc.h: FC's GEMM geometry, shared by the CPU kernels (fc.c) and the cuBLAS kernels
 * (gpu/fc_cublas.c) (internal). */
#ifndef DM_OPERATORS_FC_H
#define DM_OPERATORS_FC_H

#include <stdint.h>

#include "core/tensor.h"

/* X flattened to M x K at `axis`, W to N x K at `axis_w` (both canonical). */
typedef struct dm_fc_dims {
  int axis, axis_w;
  int64_t M, N, K;
} dm_fc_dims;

/* The geometry of FC and FCGradient; DM_ERR_SHAPE when W's K differs from X's. */
DM_HIDDEN dm_status dm_fc_geometry(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                                   dm_fc_dims *d);

#endif
