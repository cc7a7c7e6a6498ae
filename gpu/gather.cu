/* gather.cu: the CUDA kernels of Gather and GatherGradient (gpu/gather.c). Entry points
 * in cuda_kernels.h; conventions in cuda_common.cuh.
 *
 * Indices are read on the device, so an out-of-range one cannot be reported without a
 * host sync: Gather writes the row as `bad` bits (NaN for float data, 0 otherwise) and
 * GatherGradient adds nothing for it; neither reads or writes outside its tensors.
 * GatherGradient adds with FP32 atomics: the order of the additions into one table row
 * (a repeated token) varies from run to run, so its sums are NOT deterministic (they
 * agree with the CPU's ordered sum to FP32 rounding, not bit for bit).
 */
#include "cuda_common.cuh"

namespace {
__device__ __forceinline__ int64_t index_at(const void *idx, int idx64, int64_t j) {
  return idx64 ? ((const int64_t *)idx)[j] : (int64_t)((const int32_t *)idx)[j];
}

template <typename E>
__global__ void gather_kernel(const E *x, const void *idx, int idx64, E *y, int64_t outer,
                              int64_t along, int64_t nidx, int64_t row, E bad, int wrap) {
  const int64_t n = outer * nidx * row;
  GRID_LOOP(e, n) {
    const int64_t c = e % row, j = (e / row) % nidx, o = e / (row * nidx);
    int64_t q = index_at(idx, idx64, j);
    if (wrap && q < 0)
      q += along;
    y[e] = q < 0 || q >= along ? bad : x[(o * along + q) * row + c];
  }
}

template <int T>
__global__ void gather_grad_kernel(const void *idx, int idx64, const void *dy, float *dx,
                                   int64_t outer, int64_t along, int64_t nidx, int64_t row,
                                   int wrap) {
  const int64_t n = outer * nidx * row;
  GRID_LOOP(e, n) {
    const int64_t c = e % row, j = (e / row) % nidx, o = e / (row * nidx);
    int64_t q = index_at(idx, idx64, j);
    if (wrap && q < 0)
      q += along;
    if (q < 0 || q >= along)
      continue;
    const float v = T == DMK_FLOAT ? ((const float *)dy)[e]
                                   : widen<T == DMK_BFLOAT16>(((const uint16_t *)dy)[e]);
    atomicAdd(dx + (o * along + q) * row + c, v);
  }
}
} // namespace

extern "C" cudaError_t dmk_gather(cudaStream_t s, const void *x, const void *idx, int idx64,
                                  void *y, int64_t outer, int64_t along, int64_t nidx,
                                  int64_t row, int elem_size, uint64_t bad_bits, int wrap) {
  const int64_t n = outer * nidx * row;
  if (n == 0)
    return cudaSuccess;
  switch (elem_size) {
  case 1:
    gather_kernel<uint8_t><<<grid_for(n), THREADS, 0, s>>>(
        (const uint8_t *)x, idx, idx64, (uint8_t *)y, outer, along, nidx, row,
        (uint8_t)bad_bits, wrap);
    break;
  case 2:
    gather_kernel<uint16_t><<<grid_for(n), THREADS, 0, s>>>(
        (const uint16_t *)x, idx, idx64, (uint16_t *)y, outer, along, nidx, row,
        (uint16_t)bad_bits, wrap);
    break;
  case 4:
    gather_kernel<uint32_t><<<grid_for(n), THREADS, 0, s>>>(
        (const uint32_t *)x, idx, idx64, (uint32_t *)y, outer, along, nidx, row,
        (uint32_t)bad_bits, wrap);
    break;
  case 8:
    gather_kernel<uint64_t><<<grid_for(n), THREADS, 0, s>>>(
        (const uint64_t *)x, idx, idx64, (uint64_t *)y, outer, along, nidx, row, bad_bits,
        wrap);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_gather_grad(cudaStream_t s, const void *idx, int idx64,
                                       const void *dy, int dy_dtype, float *dx, int64_t nx,
                                       int64_t outer, int64_t along, int64_t nidx, int64_t row,
                                       int wrap) {
  cudaError_t e = cudaMemsetAsync(dx, 0, (size_t)nx * sizeof(float), s);
  const int64_t n = outer * nidx * row;
  if (e != cudaSuccess || n == 0)
    return e;
  switch (dy_dtype) {
  case DMK_FLOAT:
    gather_grad_kernel<DMK_FLOAT><<<grid_for(n), THREADS, 0, s>>>(idx, idx64, dy, dx, outer,
                                                                  along, nidx, row, wrap);
    break;
  case DMK_FLOAT16:
    gather_grad_kernel<DMK_FLOAT16><<<grid_for(n), THREADS, 0, s>>>(idx, idx64, dy, dx, outer,
                                                                    along, nidx, row, wrap);
    break;
  case DMK_BFLOAT16:
    gather_grad_kernel<DMK_BFLOAT16><<<grid_for(n), THREADS, 0, s>>>(idx, idx64, dy, dx, outer,
                                                                     along, nidx, row, wrap);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
