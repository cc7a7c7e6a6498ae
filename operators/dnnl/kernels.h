/* kernels.h: the oneDNN engine's kernel tables, one per family (operators/dnnl/<family>.c),
 * each ending in an entry whose type is NULL; register.c registers them (internal). */
#ifndef DM_OPERATORS_DNNL_KERNELS_H
#define DM_OPERATORS_DNNL_KERNELS_H

#include "core/registry.h"

extern DM_HIDDEN const dm_kernel_def dm_dnnl_eltwise_kernels[];
extern DM_HIDDEN const dm_kernel_def dm_dnnl_fc_kernels[];        /* FC, FCGradient */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_fc_fusion_kernels[]; /* FCFusion */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_sum_kernels[];       /* Sum, Add */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_concat_kernels[];    /* Concat */

/* For supports hooks: whether input `input` is FLOAT or BFLOAT16 (or not known yet: the
 * executor asks again once it is); otherwise refuses with the reason (sum.c). */
DM_HIDDEN int dm_dnnl_float_or_bf16(const dm_op_ctx *ctx, int input);

#endif
