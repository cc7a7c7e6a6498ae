/* register.c: the CUDA backend's kernel tables, registered from operators/builtin.c.
 *
 * One family per file of kernels: copies (copy.c); the CUDA-kernel ops (kernels_basic.c:
 * elementwise, activations, casts, fills, optimizers, loss scaling, losses); the
 * library ops (kernels_dnn.c's table of kernels_conv.c, kernels_pool_norm.c and
 * kernels_fc.c: cuDNN convolution, pooling, softmax, batch norm, LRN; cuBLAS FC); and
 * the rest (kernels_more.c: Iter and LearningRate, so a step's counter and rate never
 * leave the GPU; shape ops; Concat, Split, Transpose; Dropout). An op without a CUDA
 * kernel fails at instantiation on CUDA with "no kernel for (type, CUDA)"; the device
 * pass leaves such ops on the CPU with copies around them.
 * Registration works without a usable GPU: it only fills tables.
 */
#include "register.h"

#include "core/device.h"
#include "kernels.h"

dm_status dm_register_cuda_ops(void) {
  dm_device_register(DM_CUDA, &dm_cuda_device_ops);
  static const dm_op_family *const families[] = {&dm_cuda_family_copy, &dm_cuda_family_basic,
                                                 &dm_cuda_family_dnn, &dm_cuda_family_more,
                                                 NULL};
  for (const dm_op_family *const *f = families; *f; f++)
    DM_TRY(dm_register_family(*f));
  return DM_OK;
}
