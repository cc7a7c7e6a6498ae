/* cuda_common.cuh: what the .cu files of gpu/ share (internal; included by
 * elementwise.cu, optimizer.cu, loss.cu, tensor_ops.cu, dropout.cu, layernorm.cu and
 * masked_softmax.cu, nothing else):
 * the block size, the grid-stride loop, the 16-bit widen/narrow conversions and the block
 * sum. One header rather than a copy per file, so they launch and reduce alike; the
 * names are in an anonymous namespace (grid_for static), so each file keeps its own
 * private copy.
 *
 * Conventions: each kernel mirrors its CPU reference in operators/
 * element by element. Products and sums use the _rn intrinsics where the CPU writes
 * a*b + c, because nvcc would otherwise contract them into an FMA (one rounding instead
 * of the CPU's two) and results would stop being bit-identical to the CPU's. 16-bit
 * floats travel as their bit patterns (uint16_t), widened to float, computed in FP32 and
 * rounded once. Reductions accumulate in double where the CPU does; their summation
 * order (a tree) differs from the CPU's loop, so they agree to rounding, not bit for bit.
 *
 * Loops are grid-stride with 64-bit indices. The bandwidth-bound elementwise kernels
 * move 16 bytes per thread per access (packs, below) where every pointer is 16-byte
 * aligned; each element's arithmetic is the same either way. Nothing here synchronises
 * with the host: values the CPU reads on the host (lr, iter, skip, loss_scale, labels)
 * are read by the kernels on the device.
 */
#ifndef DM_GPU_CUDA_COMMON_CUH
#define DM_GPU_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_kernels.h"

#define THREADS 256 /* every launch uses this block size; the reductions rely on it */

static unsigned grid_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return b > 16384 ? 16384u : (unsigned)b;
}

#define GRID_LOOP(i, n)                                                         \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);     \
       i += (int64_t)gridDim.x * blockDim.x)

/* True when p can be read and written 16 bytes at a time (the pack path below). Checked
 * on the host, at launch, for every pointer a packed kernel touches. */
static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* ---- 16-bit patterns, the block sum -------------------------------------------- */

namespace {
template <bool BF> __device__ __forceinline__ float widen(uint16_t u) {
  return BF ? __bfloat162float(__ushort_as_bfloat16(u)) : __half2float(__ushort_as_half(u));
}
template <bool BF> __device__ __forceinline__ uint16_t narrow(float f) {
  return BF ? __bfloat16_as_ushort(__float2bfloat16_rn(f)) : __half_as_ushort(__float2half_rn(f));
}

/* Element i of a FLOAT (T 0), FLOAT16 (1) or BFLOAT16 (2) array widened to float, and a
 * float stored into one (rounded once). */
template <int T> __device__ __forceinline__ float ld_f32(const void *p, int64_t i) {
  if (T == 0)
    return ((const float *)p)[i];
  return widen<T == 2>(((const uint16_t *)p)[i]);
}
template <int T> __device__ __forceinline__ void st_f32(void *p, int64_t i, float v) {
  if (T == 0)
    ((float *)p)[i] = v;
  else
    ((uint16_t *)p)[i] = narrow<T == 2>(v);
}

/* The FP32 max (MAX; NaNs passed over, as the CPU's compare) or sum of v over the block,
 * to every thread: warp shuffles, then one warp over the warps' results (sh: 32 floats). */
template <bool MAX> __device__ float block_reduce_f(float v, float *sh) {
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? (u > v ? u : v) : v + u;
  }
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  if (l == 0)
    sh[w] = v;
  __syncthreads();
  v = l < THREADS / 32 ? sh[l] : (MAX ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? (u > v ? u : v) : v + u;
  }
  __syncthreads(); /* sh is reused by the next call */
  return v;
}

/* The sum of v over the block, returned to every thread (sh: THREADS doubles). */
__device__ double block_sum(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s)
      sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads(); /* sh is reused by the next call */
  return r;
}

/* ---- 16-byte packs ------------------------------------------------------------- */

/* Memory-bound kernels (Relu, Sum, casts) that load 2 or 4 bytes per thread per iteration
 * leave much of HBM's bandwidth unused; loading 16 at a time (8 halves, 4 floats, 2
 * doubles) recovers it. A Pack is W consecutive elements, aligned to its size up to 16
 * bytes, so that nvcc moves each 16 bytes with one 128-bit access (ld/st.global.v4).
 * W = 1 is a plain element: one body written for "pack i of width W" serves both the
 * vector path and the element-by-element one, which keeps their arithmetic identical. */
template <class T, int W> struct alignas(sizeof(T) * W < 16 ? sizeof(T) * W : 16) Pack {
  T e[W];
};
/* Elements of T in 16 bytes. */
template <class T> constexpr int pack_width() { return 16 / (int)sizeof(T); }

/* Pack i of width W: elements i*W .. i*W + W-1 of p. */
template <int W, class T> __device__ __forceinline__ Pack<T, W> load_pack(const T *p, int64_t i) {
  return ((const Pack<T, W> *)p)[i];
}
template <int W, class T>
__device__ __forceinline__ void store_pack(T *p, int64_t i, const Pack<T, W> &v) {
  ((Pack<T, W> *)p)[i] = v;
}

/* op.run<W>(i) computes pack i of width W; it reads all its inputs before it writes, so an
 * output may be an input (in place). The kernel runs the n / W whole packs, then the
 * n % W elements left (none when W = 1) one at a time, with run<1> at their element
 * index: the tail needs no second launch and no second copy of the arithmetic. */
template <int W, class Op> __global__ void pack_kernel(Op op, int64_t n) {
  const int64_t np = n / W;
  GRID_LOOP(i, np) op.template run<W>(i);
  GRID_LOOP(i, n - np * W) op.template run<1>(np * W + i);
}

} // namespace

/* Runs op over n > 0 elements: in packs of W when vec (the caller has checked every
 * pointer op touches with aligned16), else one element per iteration. The packed grid
 * covers ceil(n / W) threads, at least one, so that a tail-only n still launches. */
template <int W, class Op>
static cudaError_t launch_packed(cudaStream_t s, const Op &op, int64_t n, bool vec) {
  if (vec)
    pack_kernel<W><<<grid_for((n + W - 1) / W), THREADS, 0, s>>>(op, n);
  else
    pack_kernel<1><<<grid_for(n), THREADS, 0, s>>>(op, n);
  return cudaGetLastError();
}

#endif
