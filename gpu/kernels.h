/* kernels.h: the CUDA backend's kernel families and device table (internal; only with
 * DM_HAVE_CUDA). Listed in register.c. */
#ifndef DM_GPU_KERNELS_H
#define DM_GPU_KERNELS_H

#include "core/device.h"
#include "core/registry.h"

extern const dm_device_ops dm_cuda_device_ops;   /* memory.c */
extern const dm_op_family dm_cuda_family_copy;   /* copy.c */
extern const dm_op_family dm_cuda_family_basic;  /* kernels_basic.c */
extern const dm_op_family dm_cuda_family_dnn;    /* kernels_dnn.c */
extern const dm_op_family dm_cuda_family_more;   /* kernels_more.c */

#endif
