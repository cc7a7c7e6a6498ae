/* layernorm.cu: the CUDA kernels behind gpu/layernorm.c: LayerNorm forward and
 * backward (operators/layernorm.c's semantics) on FLOAT, FLOAT16 or BFLOAT16 rows with
 * FP32 gamma, beta, mean and std. Entry points in cuda_kernels.h.
 *
 * One block per row of D values; the statistics and the backward's two row means are
 * FP32 sums reduced with warp shuffles (the CPU reference sums in double, so they agree
 * to FP32 rounding, not bit for bit); each output is computed in FP32 and rounded once
 * to its dtype. dgamma and dbeta are column sums over the N rows, one thread a column,
 * in row order, so they do not depend on the launch.
 */
#include "cuda_common.cuh"

namespace {
template <int T>
__global__ void ln_fwd_kernel(const void *x, const float *gamma, const float *beta, void *y,
                              float *mean, float *sd, float eps, int64_t N, int64_t D) {
  __shared__ float sh[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t b = r * D;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < D; j += THREADS)
      s += ld_f32<T>(x, b + j);
    const float m = block_reduce_f<false>(s, sh) / (float)D;
    float v = 0.0f;
    for (int64_t j = threadIdx.x; j < D; j += THREADS) {
      const float d = ld_f32<T>(x, b + j) - m;
      v = fmaf(d, d, v);
    }
    const float sdv = sqrtf(block_reduce_f<false>(v, sh) / (float)D + eps), inv = 1.0f / sdv;
    for (int64_t j = threadIdx.x; j < D; j += THREADS) {
      const float h = (ld_f32<T>(x, b + j) - m) * inv;
      st_f32<T>(y, b + j, gamma ? fmaf(h, gamma[j], beta[j]) : h);
    }
    if (threadIdx.x == 0)
      mean[r] = m, sd[r] = sdv;
  }
}

template <int T>
__global__ void ln_bwd_kernel(const void *dy, const void *x, const float *mean, const float *sd,
                              const float *gamma, void *dx, int64_t N, int64_t D) {
  __shared__ float sh[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t b = r * D;
    const float m = mean[r], inv = 1.0f / sd[r];
    float sg = 0.0f, sgh = 0.0f;
    for (int64_t j = threadIdx.x; j < D; j += THREADS) {
      const float h = (ld_f32<T>(x, b + j) - m) * inv;
      const float g = gamma ? ld_f32<T>(dy, b + j) * gamma[j] : ld_f32<T>(dy, b + j);
      sg += g, sgh = fmaf(g, h, sgh);
    }
    sg = block_reduce_f<false>(sg, sh) / (float)D;
    sgh = block_reduce_f<false>(sgh, sh) / (float)D;
    /* every thread has read its dY and X elements before any writes dX: dX may be dY */
    __syncthreads();
    for (int64_t j = threadIdx.x; j < D; j += THREADS) {
      const float h = (ld_f32<T>(x, b + j) - m) * inv;
      const float g = gamma ? ld_f32<T>(dy, b + j) * gamma[j] : ld_f32<T>(dy, b + j);
      st_f32<T>(dx, b + j, (g - sg - h * sgh) * inv);
    }
  }
}

/* dgamma[j] = sum_r dy xhat, dbeta[j] = sum_r dy: one thread a column, rows in order. */
template <int T>
__global__ void ln_param_kernel(const void *dy, const void *x, const float *mean, const float *sd,
                                float *dgamma, float *dbeta, int64_t N, int64_t D) {
  GRID_LOOP(j, D) {
    float sg = 0.0f, sb = 0.0f;
    for (int64_t r = 0; r < N; r++) {
      const float d = ld_f32<T>(dy, r * D + j);
      sg = fmaf(d, (ld_f32<T>(x, r * D + j) - mean[r]) / sd[r], sg);
      sb += d;
    }
    dgamma[j] = sg, dbeta[j] = sb;
  }
}

unsigned rows_grid(int64_t N) { return N > 16384 ? 16384u : (unsigned)N; }
} // namespace

extern "C" cudaError_t dmk_layernorm(cudaStream_t s, int dtype, const void *x, const float *gamma,
                                     const float *beta, void *y, float *mean, float *sd,
                                     float eps, int64_t N, int64_t D) {
  if (N == 0 || D == 0)
    return cudaSuccess;
  const unsigned g = rows_grid(N);
  if (dtype == DMK_FLOAT16)
    ln_fwd_kernel<1><<<g, THREADS, 0, s>>>(x, gamma, beta, y, mean, sd, eps, N, D);
  else if (dtype == DMK_BFLOAT16)
    ln_fwd_kernel<2><<<g, THREADS, 0, s>>>(x, gamma, beta, y, mean, sd, eps, N, D);
  else
    ln_fwd_kernel<0><<<g, THREADS, 0, s>>>(x, gamma, beta, y, mean, sd, eps, N, D);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_layernorm_grad(cudaStream_t s, int dtype, const void *dy,
                                          const void *x, const float *mean, const float *sd,
                                          const float *gamma, void *dx, float *dgamma,
                                          float *dbeta, int64_t N, int64_t D) {
  if (D == 0)
    return cudaSuccess;
  /* the column sums first: they read dY, which dX may overwrite */
  if (dgamma) {
    const unsigned gp = grid_for(D);
    if (dtype == DMK_FLOAT16)
      ln_param_kernel<1><<<gp, THREADS, 0, s>>>(dy, x, mean, sd, dgamma, dbeta, N, D);
    else if (dtype == DMK_BFLOAT16)
      ln_param_kernel<2><<<gp, THREADS, 0, s>>>(dy, x, mean, sd, dgamma, dbeta, N, D);
    else
      ln_param_kernel<0><<<gp, THREADS, 0, s>>>(dy, x, mean, sd, dgamma, dbeta, N, D);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  if (N == 0)
    return cudaSuccess;
  const unsigned g = rows_grid(N);
  if (dtype == DMK_FLOAT16)
    ln_bwd_kernel<1><<<g, THREADS, 0, s>>>(dy, x, mean, sd, gamma, dx, N, D);
  else if (dtype == DMK_BFLOAT16)
    ln_bwd_kernel<2><<<g, THREADS, 0, s>>>(dy, x, mean, sd, gamma, dx, N, D);
  else
    ln_bwd_kernel<0><<<g, THREADS, 0, s>>>(dy, x, mean, sd, gamma, dx, N, D);
  return cudaGetLastError();
}
