/* fc_cublas.c: the cuBLAS FC and FCGradient kernels (plain engine). The GEMM geometry is
 * the CPU kernels' (operators/fc.h); the bias add and FC's bias gradient are dnn_aux.cu's.
 *
 * FP32 uses CUBLAS_COMPUTE_32F_PEDANTIC (no TF32); FP16/BF16 use cublasGemmEx with
 * CUBLAS_COMPUTE_32F. With a bias in FP16/BF16, FC rounds once (the GEMM writes FP32
 * scratch, the bias kernel rounds), unlike Conv (conv_cudnn.c).
 */
#include <limits.h>

#include "cudnn_common.h"
#include "operators/fc.h"

/* FC and FCGradient (cuBLAS) ----------------------------------------------------------- */

static cudaDataType_t blas_type(dm_dtype t) {
  return t == DM_FLOAT16 ? CUDA_R_16F : t == DM_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Row-major (M, K), (N, K) etc. are column-major transposes to cuBLAS, so each product is
 * written for the transposed result. FP32: pedantic FP32 (no TF32); 16-bit: FP32 compute,
 * one rounding into the 16-bit result. */
static dm_status gemm(dm_gpu_context *c, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                      int64_t n, int64_t k, const void *A, int64_t lda, const void *B,
                      int64_t ldb, void *C, cudaDataType_t ct, int64_t ldc, dm_dtype t) {
  cudaDataType_t ab = blas_type(t);
  cublasComputeType_t comp = t == DM_FLOAT ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  DM_CUBLAS_TRY(cublasGemmEx(c->cublas, ta, tb, (int)m, (int)n, (int)k, &k_one, A, ab, (int)lda,
                             B, ab, (int)ldb, &k_zero, C, ct, (int)ldc, comp,
                             CUBLAS_GEMM_DEFAULT));
  return DM_OK;
}

/* M, N, K as fc.c flattens them (the inference has checked them). */
static dm_status fc_dims(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w, int64_t *M,
                         int64_t *N, int64_t *K) {
  dm_fc_dims d;
  DM_TRY(dm_fc_geometry(ctx, x, w, &d));
  *M = d.M;
  *N = d.N;
  *K = d.K;
  if (*M > INT_MAX || *N > INT_MAX || *K > INT_MAX)
    return dm_op_error(ctx, DM_ERR_LIMIT, "FC of %lldx%lld by %lldx%lld exceeds cuBLAS's int "
                       "sizes", (long long)*M, (long long)*K, (long long)*N, (long long)*K);
  return DM_OK;
}

/* FC: X (M, K), W (N, K), b (N) -> Y (M, N) = X W^T + b. 16-bit: the GEMM writes FP32
 * scratch and the bias kernel rounds once, as the CPU. */
dm_status dm_cuda_fc_forward(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *b = dm_op_input(ctx, 2);
  dm_tensor *y = dm_op_output(ctx, 0);
  /* As fc.c (fc_infer does not do it): Y that is a view of an input (Reshape) gets fresh
   * storage, or the GEMM (FP32 writes Y directly) and the bias kernel would read what
   * they write. */
  if (dm_tensors_alias(y, x) || dm_tensors_alias(y, w) || dm_tensors_alias(y, b))
    dm_tensor_reset(y);
  DM_TRY(dm_op_run_infer(ctx));
  int64_t M, N, K;
  DM_TRY(fc_dims(ctx, x, w, &M, &N, &K));
  if (M == 0 || N == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  void *acc = dm_tensor_mutable_data(y);
  if (x->dtype != DM_FLOAT)
    DM_TRY(dm_gpu_scratch(c, (size_t)(M * N) * sizeof(float), &acc));
  if (K == 0)
    DM_CUDA_TRY(cudaMemsetAsync(acc, 0, (size_t)(M * N) * sizeof(float), c->stream));
  else
    DM_TRY(gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, dm_tensor_data(w), K, dm_tensor_data(x), K,
                acc, CUDA_R_32F, N, x->dtype));
  DM_CUDA_TRY(dmk_bias_add(c->stream, acc, DMK_FLOAT, dm_tensor_mutable_data(y), y->dtype,
                           dm_tensor_data(b), b->dtype, M * N, 1, N));
  return DM_OK;
}

/* FCGradient: X, W, dY -> dW = dY^T X (N, K), db = column sums of dY (N), [dX = dY W]. */
dm_status dm_cuda_fc_backward(dm_op_ctx *ctx, const void *dy_data) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *dw = dm_op_output(ctx, 0), *db = dm_op_output(ctx, 1);
  dm_tensor *dx = dm_op_num_outputs(ctx) > 2 ? dm_op_output(ctx, 2) : NULL;
  int64_t M, N, K;
  DM_TRY(fc_dims(ctx, x, w, &M, &N, &K));
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  cudaDataType_t ot = blas_type(x->dtype);
  if (N > 0 && K > 0) {
    if (M == 0)
      DM_CUDA_TRY(cudaMemsetAsync(dm_tensor_mutable_data(dw), 0, dm_tensor_nbytes(dw), c->stream));
    else
      DM_TRY(gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, dm_tensor_data(x), K, dy_data,
                  N, dm_tensor_mutable_data(dw), ot, K, x->dtype));
  }
  DM_CUDA_TRY(dmk_col_sums(c->stream, dy_data, dy->dtype, M, N,
                           dm_tensor_mutable_data(db), db->dtype));
  if (dx && M > 0 && K > 0) {
    if (N == 0)
      DM_CUDA_TRY(cudaMemsetAsync(dm_tensor_mutable_data(dx), 0, dm_tensor_nbytes(dx), c->stream));
    else
      DM_TRY(gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, dm_tensor_data(w), K, dy_data,
                  N, dm_tensor_mutable_data(dx), ot, K, x->dtype));
  }
  return DM_OK;
}

static dm_status fc_grad_cuda_run(dm_op_ctx *ctx) {
  return dm_cuda_fc_backward(ctx, dm_tensor_data(dm_op_input(ctx, 2)));
}

const dm_kernel_def dm_cuda_fc_kernels[] = {
    GPU_KERNEL("FC", "", .run = dm_cuda_fc_forward, GRAPH_SAFE),
    GPU_KERNEL("FCGradient", "", .run = fc_grad_cuda_run, GRAPH_SAFE),
    {0},
};
