/* kernels_dnn.c: the family table of the CUDA library ops (dm_cuda_family_dnn). cuDNN
 * (engine "CUDNN"): Conv, ConvGradient (kernels_conv.c); MaxPool, AveragePool and their
 * gradients, SpatialBN(+Gradient), Softmax(+Gradient), LRN(+Gradient)
 * (kernels_pool_norm.c). cuBLAS (plain engine): FC, FCGradient (kernels_fc.c). The
 * kernels live in those files, split by op family so each stays small; this file only
 * lists their definitions (declared in dnn_kernel_defs.h) for register.c.
 *
 * Semantics are the CPU kernels' (operators/): every kernel first runs the op's schema
 * inference (dm_op_run_infer: the same argument, shape and dtype checks, and the
 * outputs allocated on the op's device), then enqueues library calls on the thread's
 * context stream. FP16/BF16 are faithful to tensor cores: 16-bit tensors, FP32 compute
 * (cuDNN convolution compute type FLOAT, cublasGemmEx with CUBLAS_COMPUTE_32F). FP32
 * stays FP32: CUDNN_FMA_MATH and CUBLAS_COMPUTE_32F_PEDANTIC keep TF32 out, so results
 * match the CPU at FP32 tolerance. The documented differences from the CPU are listed
 * in each kernel file's header.
 */
#include <stddef.h>

#include "dnn_kernel_defs.h"
#include "kernels.h"

static const dm_op_schema *const schemas[] = {NULL};
static const dm_kernel_def *const kernels[] = {
    &dm_cuda_conv_k,         &dm_cuda_conv_grad_k,     &dm_cuda_max_pool_k,
    &dm_cuda_avg_pool_k,     &dm_cuda_max_pool_grad_k, &dm_cuda_avg_pool_grad_k,
    &dm_cuda_bn_k,           &dm_cuda_bn_grad_k,       &dm_cuda_softmax_k,
    &dm_cuda_softmax_grad_k, &dm_cuda_lrn_k,           &dm_cuda_lrn_grad_k,
    &dm_cuda_fc_k,           &dm_cuda_fc_grad_k,       NULL};
const dm_op_family dm_cuda_family_dnn = {schemas, kernels};
