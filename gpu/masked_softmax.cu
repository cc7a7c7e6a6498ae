/* masked_softmax.cu: the CUDA kernels behind gpu/masked_softmax.c: MaskedSoftmax and its
 * gradient (operators/masked_softmax.c's semantics) on FLOAT, FLOAT16 or BFLOAT16 rows of
 * the last axis, the mask FLOAT or X's dtype. Entry points in cuda_kernels.h.
 *
 * One block per row of Tk keys. The logits are scale * x + mask in FP32 (x widened
 * first, so 16-bit logits never overflow in 16 bits), the max and the sum reduced with
 * warp shuffles in FP32 (the CPU also sums in FP32, in another order), each y rounded
 * once to its dtype. Keys past the causal limit and -inf logits are 0; a row with none
 * kept is all zeros, as on the CPU.
 */
#include "cuda_common.cuh"

namespace {
__device__ __forceinline__ float ld_any(int t, const void *p, int64_t i) {
  return t == DMK_FLOAT16    ? ld_f32<1>(p, i)
         : t == DMK_BFLOAT16 ? ld_f32<2>(p, i)
                             : ld_f32<0>(p, i);
}

__device__ int64_t mask_offset(const dmk_mask_geom &g, int64_t row) {
  int64_t off = 0;
  for (int k = g.nd - 1; k >= 0; k--) {
    off += (row % g.lead[k]) * g.mstride[k];
    row /= g.lead[k];
  }
  return off;
}

template <int T>
__global__ void ms_fwd_kernel(const void *x, const void *mask, int mdtype, dmk_mask_geom g,
                              void *y, float scale, int causal, int64_t R, int64_t Tq,
                              int64_t Tk) {
  __shared__ float sh[32];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const int64_t b = r * Tk;
    int64_t lim = Tk;
    if (causal) {
      const int64_t l = r % Tq + (Tk - Tq) + 1;
      lim = l < 0 ? 0 : l < Tk ? l : Tk;
    }
    const int64_t off = mask ? mask_offset(g, r) : 0, ms = g.mstride[g.nd];
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < lim; j += THREADS) {
      float z = scale * ld_f32<T>(x, b + j);
      if (mask)
        z += ld_any(mdtype, mask, off + j * ms);
      mx = z > mx ? z : mx;
    }
    mx = block_reduce_f<true>(mx, sh);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < lim && mx != -INFINITY; j += THREADS) {
      float z = scale * ld_f32<T>(x, b + j);
      if (mask)
        z += ld_any(mdtype, mask, off + j * ms);
      s += expf(z - mx);
    }
    s = block_reduce_f<false>(s, sh);
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    /* all reads of this row's X are done (the reductions synchronise): Y may be X */
    for (int64_t j = threadIdx.x; j < Tk; j += THREADS) {
      float v = 0.0f;
      if (j < lim && mx != -INFINITY) {
        float z = scale * ld_f32<T>(x, b + j);
        if (mask)
          z += ld_any(mdtype, mask, off + j * ms);
        v = expf(z - mx) * inv;
      }
      st_f32<T>(y, b + j, v);
    }
    __syncthreads();
  }
}

template <int T>
__global__ void ms_bwd_kernel(const void *y, const void *dy, void *dx, float scale, int64_t R,
                              int64_t Tk) {
  __shared__ float sh[32];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const int64_t b = r * Tk;
    float d = 0.0f;
    for (int64_t j = threadIdx.x; j < Tk; j += THREADS)
      d = fmaf(ld_f32<T>(dy, b + j), ld_f32<T>(y, b + j), d);
    d = block_reduce_f<false>(d, sh);
    for (int64_t j = threadIdx.x; j < Tk; j += THREADS) /* dX may be dY: same j, read first */
      st_f32<T>(dx, b + j, scale * (ld_f32<T>(y, b + j) * (ld_f32<T>(dy, b + j) - d)));
  }
}

unsigned rows_grid(int64_t R) { return R > 16384 ? 16384u : (unsigned)R; }
} // namespace

extern "C" cudaError_t dmk_masked_softmax(cudaStream_t s, int dtype, const void *x,
                                          const void *mask, int mdtype, dmk_mask_geom g,
                                          void *y, float scale, int causal, int64_t R,
                                          int64_t Tq, int64_t Tk) {
  if (R == 0 || Tk == 0)
    return cudaSuccess;
  const unsigned n = rows_grid(R);
  if (dtype == DMK_FLOAT16)
    ms_fwd_kernel<1><<<n, THREADS, 0, s>>>(x, mask, mdtype, g, y, scale, causal, R, Tq, Tk);
  else if (dtype == DMK_BFLOAT16)
    ms_fwd_kernel<2><<<n, THREADS, 0, s>>>(x, mask, mdtype, g, y, scale, causal, R, Tq, Tk);
  else
    ms_fwd_kernel<0><<<n, THREADS, 0, s>>>(x, mask, mdtype, g, y, scale, causal, R, Tq, Tk);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_masked_softmax_grad(cudaStream_t s, int dtype, const void *y,
                                               const void *dy, void *dx, float scale, int64_t R,
                                               int64_t Tk) {
  if (R == 0 || Tk == 0)
    return cudaSuccess;
  const unsigned n = rows_grid(R);
  if (dtype == DMK_FLOAT16)
    ms_bwd_kernel<1><<<n, THREADS, 0, s>>>(y, dy, dx, scale, R, Tk);
  else if (dtype == DMK_BFLOAT16)
    ms_bwd_kernel<2><<<n, THREADS, 0, s>>>(y, dy, dx, scale, R, Tk);
  else
    ms_bwd_kernel<0><<<n, THREADS, 0, s>>>(y, dy, dx, scale, R, Tk);
  return cudaGetLastError();
}
