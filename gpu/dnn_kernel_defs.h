/* dnn_kernel_defs.h: the kernel definitions of the cuDNN/cuBLAS ops (internal). Each
 * kernels_*.c file of the family defines its own; kernels_dnn.c lists them all in
 * dm_cuda_family_dnn. A header of its own so the table file needs nothing but these
 * names.
 */
#ifndef DM_GPU_DNN_KERNEL_DEFS_H
#define DM_GPU_DNN_KERNEL_DEFS_H

#include "demitasse_plugin.h"

/* kernels_conv.c */
extern const dm_kernel_def dm_cuda_conv_k, dm_cuda_conv_grad_k;
/* kernels_pool_norm.c */
extern const dm_kernel_def dm_cuda_max_pool_k, dm_cuda_avg_pool_k, dm_cuda_max_pool_grad_k,
    dm_cuda_avg_pool_grad_k, dm_cuda_bn_k, dm_cuda_bn_grad_k, dm_cuda_softmax_k,
    dm_cuda_softmax_grad_k, dm_cuda_lrn_k, dm_cuda_lrn_grad_k;
/* kernels_fc.c */
extern const dm_kernel_def dm_cuda_fc_k, dm_cuda_fc_grad_k;

/* A cuDNN kernel definition (engine "CUDNN"), for the files above. */
#define CUDNN_KERNEL(name, op, i, r, f)                                                    \
  const dm_kernel_def name = {                                                             \
      .type = op, .device = DM_CUDA, .engine = "CUDNN", .init = i, .run = r, .fini = f}

#endif
