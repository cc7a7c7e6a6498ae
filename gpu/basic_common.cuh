/* basic_common.cuh: what every part of the basic CUDA kernels shares (internal; included
 * by basic_elementwise.cu, basic_optim.cu and basic_losses.cu, nothing else): the block
 * size, the grid-stride loop, the 16-bit widen/narrow conversions and the block sum. One
 * header rather than a copy per file, so the three parts launch and reduce alike; the
 * names are in an anonymous namespace (grid_for static), so each part keeps its own
 * private copy, as when they were one file.
 *
 * Conventions of all three parts: each kernel mirrors its CPU reference in operators/
 * element by element. Products and sums use the _rn intrinsics where the CPU writes
 * a*b + c, because nvcc would otherwise contract them into an FMA (one rounding instead
 * of the CPU's two) and results would stop being bit-identical to the CPU's. 16-bit
 * floats travel as their bit patterns (uint16_t), widened to float, computed in FP32 and
 * rounded once. Reductions accumulate in double where the CPU does; their summation
 * order (a tree) differs from the CPU's loop, so they agree to rounding, not bit for bit.
 *
 * Loops are grid-stride with 64-bit indices. Nothing here synchronises with the host:
 * values the CPU reads on the host (lr, iter, skip, loss_scale, labels) are read by the
 * kernels on the device.
 */
#ifndef DM_GPU_BASIC_COMMON_CUH
#define DM_GPU_BASIC_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "basic_kernels.h"

#define THREADS 256 /* every launch uses this block size; the reductions rely on it */

static unsigned grid_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return b > 16384 ? 16384u : (unsigned)b;
}

#define GRID_LOOP(i, n)                                                         \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);     \
       i += (int64_t)gridDim.x * blockDim.x)

/* ---- 16-bit patterns, the block sum -------------------------------------------- */

namespace {
template <bool BF> __device__ __forceinline__ float widen(uint16_t u) {
  return BF ? __bfloat162float(__ushort_as_bfloat16(u)) : __half2float(__ushort_as_half(u));
}
template <bool BF> __device__ __forceinline__ uint16_t narrow(float f) {
  return BF ? __bfloat16_as_ushort(__float2bfloat16_rn(f)) : __half_as_ushort(__float2half_rn(f));
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

} // namespace

#endif
