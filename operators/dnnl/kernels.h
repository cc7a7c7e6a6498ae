/* kernels.h: the oneDNN engine's kernel tables, one per family (operators/dnnl/<family>.c),
 * each ending in an entry whose type is NULL; register.c registers them (internal). */
#ifndef DM_OPERATORS_DNNL_KERNELS_H
#define DM_OPERATORS_DNNL_KERNELS_H

#include "core/registry.h"

extern DM_HIDDEN const dm_kernel_def dm_dnnl_eltwise_kernels[];

#endif
