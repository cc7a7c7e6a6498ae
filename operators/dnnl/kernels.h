/* kernels.h: the oneDNN engine's kernel tables, one per family (operators/dnnl/<family>.c),
 * each ending in an entry whose type is NULL; register.c registers them (internal). */
#ifndef DM_OPERATORS_DNNL_KERNELS_H
#define DM_OPERATORS_DNNL_KERNELS_H

#include "core/registry.h"

extern DM_HIDDEN const dm_kernel_def dm_dnnl_eltwise_kernels[];
/* Conv, ConvGradient (conv.c). */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_conv_kernels[];
/* ConvFusion (conv.c), registered where its schema (operators/conv_fusion.c) is built. */
extern DM_HIDDEN const dm_kernel_def dm_dnnl_conv_fusion_kernels[];

#endif
