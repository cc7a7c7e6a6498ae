/* dnn_kernels.h: host entry points of the small device kernels in dnn_kernels.cu that
 * the cuDNN/cuBLAS ops (kernels_conv.c, kernels_pool_norm.c, kernels_fc.c) need around
 * the library calls (internal).
 *
 * Plain C declarations (CUDA runtime types only), so those C files can call into
 * nvcc-compiled code. Every function only enqueues work on `s` and returns the launch's
 * cudaError_t. Element types are the DM_CUDA_* codes below (not dm_dtype: the .cu files
 * include no core/ header).
 */
#ifndef DM_GPU_DNN_KERNELS_H
#define DM_GPU_DNN_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DM_CUDA_F32 = 0, DM_CUDA_F16 = 1, DM_CUDA_BF16 = 2 };

/* out[i] = in[i] + b[(i / inner) % nb] for i < n, computed in FP32 and stored once in
 * out_t (so an FP32 GEMM result plus bias rounds to FP16 a single time). in and out may
 * be the same buffer (then in_t == out_t). */
cudaError_t dm_cuda_bias_add(cudaStream_t s, const void *in, int in_t, void *out, int out_t,
                             const void *b, int b_t, int64_t n, int64_t inner, int64_t nb);

/* db[j] = sum over rows i < m of dy[i * nc + j] (dy (m, nc) of dy_t), accumulated in
 * double and rounded once (from the double) into db_t: FCGradient's bias gradient. */
cudaError_t dm_cuda_col_sums(cudaStream_t s, const void *dy, int dy_t, int64_t m, int64_t nc,
                             void *db, int db_t);

/* SpatialBN's running statistics with Caffe2's convention, from cuDNN's batch results
 * (bmean, bvar_unbiased: the running outputs of a cuDNN training call with factor 1):
 *   rm_out = rm * mom + bmean * (1 - mom)
 *   rv_out = rv * mom + bvar_biased * (1 - mom), bvar_biased = bvar_unbiased * (M-1)/M
 * (0 when M == 1). rm_out may be rm and rv_out rv (in place). */
cudaError_t dm_cuda_bn_running(cudaStream_t s, const float *rm, const float *rv,
                               const float *bmean, const float *bvar_unbiased, float *rm_out,
                               float *rv_out, int64_t C, int64_t M, float mom);

/* SpatialBNGradient of an is_test op (mean and var constants): per channel c over its
 * M = N * HW values, inv = 1 / sqrt(var + eps),
 *   dbias = sum dy, dscale = sum dy * (x - mean) * inv, dx = dy * scale * inv.
 * X, dY, dX of t, layout NCHW (nhwc 0) or NHWC; the rest FP32 (C). */
cudaError_t dm_cuda_bn_grad_test(cudaStream_t s, int t, int nhwc, int64_t N, int64_t C,
                                 int64_t HW, const void *x, const void *dy, const float *scale,
                                 const float *mean, const float *var, double eps, void *dx,
                                 float *dscale, float *dbias);

/* LRN's optional FP32 scale output: scale = bias + alpha_n * sum of x^2 over the window
 * [c - pre, c - pre + size) clipped to [0, C), pre = (size - 1) / 2, per position (n, hw);
 * alpha_n = alpha / size in double, as lrn.c. */
cudaError_t dm_cuda_lrn_scale(cudaStream_t s, int t, int nhwc, int64_t N, int64_t C, int64_t HW,
                              const void *x, int size, double alpha_n, double bias, float *scale);

#ifdef __cplusplus
}
#endif
#endif
