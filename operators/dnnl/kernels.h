/* kernels.h: the oneDNN engine's kernel tables, one per family (operators/dnnl/<family>.c),
 * each ending in an entry whose type is NULL; register.c registers them (internal). Also
 * the few checks the families share. */
#ifndef DM_OPERATORS_DNNL_KERNELS_H
#define DM_OPERATORS_DNNL_KERNELS_H

#include "core/registry.h"
#include "dnnl_common.h"

extern DM_HIDDEN const dm_kernel_def dm_dnnl_eltwise_kernels[];
extern DM_HIDDEN const dm_kernel_def dm_dnnl_pool_kernels[];
extern DM_HIDDEN const dm_kernel_def dm_dnnl_bn_kernels[];

/* dm_op_check_shapes (operators/common.h): the reference's checks and messages, the
 * outputs left as they are. */
DM_HIDDEN dm_status dm_dnnl_check_shapes(dm_op_ctx *ctx);
/* The channel block of a layout whose only inner block is on dim 1 (16 for nChw16c), 1
 * for one with none (nchw, nhwc), 0 for any other (the kernels that address elements
 * themselves reorder those to plain first). */
DM_HIDDEN int64_t dm_dnnl_channel_block(const dnnl_memory_desc_t *md);
/* Where element (n, c, h, w) of a 4-D layout with at most a channel block sits:
 * off0 + n s[0] + (c / blk) s[1] + h s[2] + w s[3] + c % blk; dm_dnnl_flat4_of fills it
 * for md (0: md is not such a layout). For kernels that address elements themselves. */
typedef struct dm_dnnl_flat4 {
  int64_t off0, s[4], blk;
} dm_dnnl_flat4;
DM_HIDDEN int dm_dnnl_flat4_of(const dnnl_memory_desc_t *md, dm_dnnl_flat4 *f);
/* The offset of (n, c, 0, 0): the channel block's division done once per plane. */
static inline int64_t dm_dnnl_flat4_plane(const dm_dnnl_flat4 *f, int64_t n, int64_t c) {
  return f->off0 + n * f->s[0] + (c / f->blk) * f->s[1] + c % f->blk;
}
/* Conv, ConvGradient (conv.c). */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_conv_kernels[];
/* ConvFusion (conv.c), registered where its schema (operators/conv_fusion.c) is built. */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_conv_fusion_kernels[];
extern DM_HIDDEN const dm_kernel_def dm_dnnl_fc_kernels[];        /* FC, FCGradient */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_fc_fusion_kernels[]; /* FCFusion */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_sum_kernels[]; /* Sum, Add, Sub, Mul, Div */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_concat_kernels[];    /* Concat */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_matmul_kernels[];    /* BatchMatMul, MatMul */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_layernorm_kernels[]; /* LayerNorm, LayerNormGradient */


#endif
