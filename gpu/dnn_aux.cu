/* dnn_aux.cu: the small device kernels around the cuDNN and cuBLAS calls of
 * conv_cudnn.c, fc_cublas.c, batchnorm_cudnn.c and lrn_cudnn.c: bias add with a single rounding,
 * column sums (FC's db), SpatialBN's Caffe2-convention running statistics and its
 * is_test gradient, LRN's scale output. Entry points in cuda_kernels.h.
 *
 * Every kernel loads FP16/BF16 exactly into FP32, computes in FP32 (sums in double, as
 * the CPU kernels do) and rounds each output once (round to nearest even).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_kernels.h"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float load(const void *p, int t, int64_t i) {
  if (t == DMK_FLOAT16)
    return __half2float(static_cast<const __half *>(p)[i]);
  if (t == DMK_BFLOAT16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  return static_cast<const float *>(p)[i];
}

__device__ __forceinline__ void store(void *p, int t, int64_t i, float v) {
  if (t == DMK_FLOAT16)
    static_cast<__half *>(p)[i] = __float2half_rn(v);
  else if (t == DMK_BFLOAT16)
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float *>(p)[i] = v;
}

/* A double rounded once into t (not through float, which could round twice), as the
 * CPU's dm_double_to_half / dm_double_to_bf16. */
__device__ __forceinline__ void store_d(void *p, int t, int64_t i, double v) {
  if (t == DMK_FLOAT16)
    static_cast<__half *>(p)[i] = __double2half(v);
  else if (t == DMK_BFLOAT16)
    static_cast<__nv_bfloat16 *>(p)[i] = __double2bfloat16(v);
  else
    static_cast<float *>(p)[i] = (float)v;
}

/* Grid for a grid-stride loop over n elements (capped; the loop covers the rest). */
unsigned grid_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

__global__ void bias_add_kernel(const void *in, int in_t, void *out, int out_t, const void *b,
                                int b_t, int64_t n, int64_t inner, int64_t nb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    store(out, out_t, i, load(in, in_t, i) + load(b, b_t, (i / inner) % nb));
}

__global__ void col_sums_kernel(const void *dy, int dy_t, int64_t m, int64_t nc, void *db,
                                int db_t) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nc;
       j += (int64_t)gridDim.x * blockDim.x) {
    double s = 0; /* neighbouring threads read neighbouring columns: coalesced rows */
    for (int64_t i = 0; i < m; i++)
      s += load(dy, dy_t, i * nc + j);
    store_d(db, db_t, j, s);
  }
}

__global__ void bn_running_kernel(const float *rm, const float *rv, const float *bmean,
                                  const float *bvar, float *rm_out, float *rv_out, int64_t C,
                                  int64_t M, float mom) {
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < C;
       c += (int64_t)gridDim.x * blockDim.x) {
    double biased = M > 1 ? (double)bvar[c] * (double)(M - 1) / (double)M : 0.0;
    double m = mom;
    rm_out[c] = (float)((double)rm[c] * m + (double)bmean[c] * (1 - m));
    rv_out[c] = (float)((double)rv[c] * m + biased * (1 - m));
  }
}

/* Index of value j (of M = N*HW) of channel c. */
__device__ __forceinline__ int64_t bn_index(int nhwc, int64_t C, int64_t HW, int64_t c,
                                            int64_t j) {
  return nhwc ? j * C + c : ((j / HW) * C + c) * HW + j % HW;
}

/* One block per channel: block-wide double sums, then dX. */
__global__ void bn_grad_test_kernel(int t, int nhwc, int64_t N, int64_t C, int64_t HW,
                                    const void *x, const void *dy, const float *scale,
                                    const float *mean, const float *var, double eps, void *dx,
                                    float *dscale, float *dbias) {
  __shared__ double s_dy[kThreads], s_dyx[kThreads];
  const int64_t M = N * HW;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const double inv = 1.0 / sqrt((double)var[c] + eps), mu = mean[c];
    double a = 0, b = 0;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
      int64_t i = bn_index(nhwc, C, HW, c, j);
      double g = load(dy, t, i);
      a += g;
      b += g * (((double)load(x, t, i) - mu) * inv);
    }
    s_dy[threadIdx.x] = a;
    s_dyx[threadIdx.x] = b;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
      if ((int)threadIdx.x < k) {
        s_dy[threadIdx.x] += s_dy[threadIdx.x + k];
        s_dyx[threadIdx.x] += s_dyx[threadIdx.x + k];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      dbias[c] = (float)s_dy[0];
      dscale[c] = (float)s_dyx[0];
    }
    const double k = (double)scale[c] * inv;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
      int64_t i = bn_index(nhwc, C, HW, c, j);
      store_d(dx, t, i, k * (double)load(dy, t, i));
    }
    __syncthreads(); /* the shared sums are reused by the next channel */
  }
}

__global__ void lrn_scale_kernel(int t, int nhwc, int64_t N, int64_t C, int64_t HW,
                                 const void *x, int size, double alpha_n, double bias,
                                 float *scale) {
  const int64_t n_all = N * C * HW, pre = (size - 1) / 2;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_all;
       i += (int64_t)gridDim.x * blockDim.x) {
    /* i = (n, c, hw) in X's layout; its channel c and the stride between channels. */
    int64_t c, base, cs;
    if (nhwc) {
      c = i % C, base = i - c, cs = 1;
    } else {
      int64_t n = i / (C * HW), hw = i % HW;
      c = (i / HW) % C, base = n * C * HW + hw, cs = HW;
    }
    int64_t lo = c - pre < 0 ? 0 : c - pre, hi = c - pre + size;
    if (hi > C)
      hi = C;
    double s = 0;
    for (int64_t k = lo; k < hi; k++) {
      double v = load(x, t, base + k * cs);
      s += v * v;
    }
    scale[i] = (float)(bias + alpha_n * s);
  }
}

} // namespace

extern "C" cudaError_t dmk_bias_add(cudaStream_t s, const void *in, int in_t, void *out,
                                    int out_t, const void *b, int b_t, int64_t n,
                                    int64_t inner, int64_t nb) {
  if (n <= 0)
    return cudaSuccess;
  bias_add_kernel<<<grid_for(n), kThreads, 0, s>>>(in, in_t, out, out_t, b, b_t, n, inner, nb);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_col_sums(cudaStream_t s, const void *dy, int dy_t, int64_t m,
                                    int64_t nc, void *db, int db_t) {
  if (nc <= 0)
    return cudaSuccess;
  col_sums_kernel<<<grid_for(nc), kThreads, 0, s>>>(dy, dy_t, m, nc, db, db_t);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_bn_running(cudaStream_t s, const float *rm, const float *rv,
                                      const float *bmean, const float *bvar_unbiased,
                                      float *rm_out, float *rv_out, int64_t C, int64_t M,
                                      float mom) {
  if (C <= 0)
    return cudaSuccess;
  bn_running_kernel<<<grid_for(C), kThreads, 0, s>>>(rm, rv, bmean, bvar_unbiased, rm_out,
                                                     rv_out, C, M, mom);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_bn_grad_test(cudaStream_t s, int t, int nhwc, int64_t N,
                                        int64_t C, int64_t HW, const void *x,
                                        const void *dy, const float *scale,
                                        const float *mean, const float *var, double eps,
                                        void *dx, float *dscale, float *dbias) {
  if (C <= 0)
    return cudaSuccess;
  unsigned blocks = (unsigned)(C > 65535 ? 65535 : C);
  bn_grad_test_kernel<<<blocks, kThreads, 0, s>>>(t, nhwc, N, C, HW, x, dy, scale, mean, var,
                                                  eps, dx, dscale, dbias);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_lrn_scale(cudaStream_t s, int t, int nhwc, int64_t N, int64_t C,
                                     int64_t HW, const void *x, int size, double alpha_n,
                                     double bias, float *scale) {
  int64_t n = N * C * HW;
  if (n <= 0)
    return cudaSuccess;
  lrn_scale_kernel<<<grid_for(n), kThreads, 0, s>>>(t, nhwc, N, C, HW, x, size, alpha_n, bias,
                                                    scale);
  return cudaGetLastError();
}
