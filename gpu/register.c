/* register.c: registers the CUDA backend: its device table and every CUDA kernel.
 *
 * One table per op family file (kernels.h), each an array of dm_kernel_def ending in a
 * zero entry (registered by core's dm_register_kernel_table); the list below is itself
 * such an array, walked by one loop. An op without
 * a CUDA kernel fails at instantiation on CUDA with "no kernel for (type, CUDA)"; the
 * device pass leaves such ops on the CPU with copies around them. Registration works
 * without a usable GPU: it only fills tables.
 */
#include "register.h"

#include "core/device.h"
#include "kernels.h"

/* cuda_kernels.h repeats dm_dtype's numbers (and DM_MAX_DIMS) for the .cu files. */
#define SAME_NUM(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME_NUM(DMK_FLOAT, DM_FLOAT) && SAME_NUM(DMK_INT32, DM_INT32) &&
                   SAME_NUM(DMK_BOOL, DM_BOOL) && SAME_NUM(DMK_UINT8, DM_UINT8) &&
                   SAME_NUM(DMK_INT8, DM_INT8) && SAME_NUM(DMK_UINT16, DM_UINT16) &&
                   SAME_NUM(DMK_INT16, DM_INT16) && SAME_NUM(DMK_INT64, DM_INT64) &&
                   SAME_NUM(DMK_FLOAT16, DM_FLOAT16) && SAME_NUM(DMK_DOUBLE, DM_DOUBLE) &&
                   SAME_NUM(DMK_BFLOAT16, DM_BFLOAT16),
               "cuda_kernels.h's dtype numbers must be dm_dtype's");
_Static_assert(DMK_MAX_DIMS == DM_MAX_DIMS, "cuda_kernels.h's DMK_MAX_DIMS is DM_MAX_DIMS");

static const struct {
  const char *family;
  const dm_kernel_def *kernels;
} tables[] = {
    {"device copies", dm_cuda_copy_kernels},
    {"elementwise", dm_cuda_elementwise_kernels},
    {"casts", dm_cuda_cast_kernels},
    {"fills", dm_cuda_fill_kernels},
    {"optimizer", dm_cuda_optimizer_kernels},
    {"loss scaling", dm_cuda_loss_scale_kernels},
    {"losses", dm_cuda_loss_kernels},
    {"tensor ops", dm_cuda_tensor_kernels},
    {"dropout", dm_cuda_dropout_kernels},
    {"cuDNN conv", dm_cuda_conv_kernels},
    {"cuDNN pooling", dm_cuda_pool_kernels},
    {"cuDNN batch norm", dm_cuda_bn_kernels},
    {"cuDNN softmax", dm_cuda_softmax_kernels},
    {"cuDNN LRN", dm_cuda_lrn_kernels},
    {"cuBLAS FC", dm_cuda_fc_kernels},
    {"fused Conv/FC + Relu", dm_cuda_conv_fusion_kernels},
    {"NCCL all-reduce", dm_cuda_allreduce_kernels},
    {"multi-tensor updates", dm_cuda_multi_tensor_kernels},
    {"cuBLAS BatchMatMul/MatMul", dm_cuda_batch_matmul_kernels},
    {"gather", dm_cuda_gather_kernels},
    {"where", dm_cuda_where_kernels},
    {"LayerNorm", dm_cuda_layernorm_kernels},
    {"masked softmax", dm_cuda_masked_softmax_kernels},
    {NULL, NULL},
};

dm_status dm_register_cuda_ops(void) {
  dm_device_register(DM_CUDA, &dm_cuda_device_ops);
  for (int t = 0; tables[t].family; t++) {
    dm_status s = dm_register_kernel_table(tables[t].kernels);
    if (s != DM_OK)
      return dm_error_prefix(s, "registering the CUDA %s kernels", tables[t].family);
  }
  return DM_OK;
}
