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

/* The table element that element e of Gather's output (outer, nidx, row) reads, or -1
 * for an index out of range. */
__device__ __forceinline__ int64_t table_at(int64_t e, const void *idx, int idx64,
                                            int64_t along, int64_t nidx, int64_t row,
                                            int wrap) {
  const int64_t c = e % row, j = (e / row) % nidx, o = e / (row * nidx);
  int64_t q = index_at(idx, idx64, j);
  if (wrap && q < 0)
    q += along;
  return q < 0 || q >= along ? -1 : (o * along + q) * row + c;
}

template <typename E>
__global__ void gather_kernel(const E *x, const void *idx, int idx64, E *y, int64_t outer,
                              int64_t along, int64_t nidx, int64_t row, E bad, int wrap) {
  const int64_t n = outer * nidx * row;
  GRID_LOOP(e, n) {
    const int64_t t = table_at(e, idx, idx64, along, nidx, row, wrap);
    y[e] = t < 0 ? bad : x[t];
  }
}

template <int T>
__global__ void gather_grad_kernel(const void *idx, int idx64, const void *dy, float *dx,
                                   int64_t outer, int64_t along, int64_t nidx, int64_t row,
                                   int wrap) {
  const int64_t n = outer * nidx * row;
  GRID_LOOP(e, n) {
    const int64_t t = table_at(e, idx, idx64, along, nidx, row, wrap);
    if (t < 0)
      continue;
    const float v = T == DMK_FLOAT ? ((const float *)dy)[e]
                                   : widen<T == DMK_BFLOAT16>(((const uint16_t *)dy)[e]);
    atomicAdd(dx + t, v);
  }
}
} // namespace

namespace {
template <typename E>
cudaError_t launch_gather(cudaStream_t s, const void *x, const void *idx, int idx64, void *y,
                          int64_t outer, int64_t along, int64_t nidx, int64_t row,
                          uint64_t bad_bits, int wrap) {
  const int64_t n = outer * nidx * row;
  gather_kernel<E><<<grid_for(n), THREADS, 0, s>>>((const E *)x, idx, idx64, (E *)y, outer,
                                                   along, nidx, row, (E)bad_bits, wrap);
  return cudaGetLastError();
}

template <int T>
cudaError_t launch_gather_grad(cudaStream_t s, const void *idx, int idx64, const void *dy,
                               float *dx, int64_t outer, int64_t along, int64_t nidx,
                               int64_t row, int wrap) {
  const int64_t n = outer * nidx * row;
  gather_grad_kernel<T><<<grid_for(n), THREADS, 0, s>>>(idx, idx64, dy, dx, outer, along, nidx,
                                                        row, wrap);
  return cudaGetLastError();
}
} // namespace

extern "C" cudaError_t dmk_gather(cudaStream_t s, const void *x, const void *idx, int idx64,
                                  void *y, int64_t outer, int64_t along, int64_t nidx,
                                  int64_t row, int elem_size, uint64_t bad_bits, int wrap) {
  if (outer * nidx * row == 0)
    return cudaSuccess;
  switch (elem_size) {
  case 1: return launch_gather<uint8_t>(s, x, idx, idx64, y, outer, along, nidx, row, bad_bits, wrap);
  case 2: return launch_gather<uint16_t>(s, x, idx, idx64, y, outer, along, nidx, row, bad_bits, wrap);
  case 4: return launch_gather<uint32_t>(s, x, idx, idx64, y, outer, along, nidx, row, bad_bits, wrap);
  case 8: return launch_gather<uint64_t>(s, x, idx, idx64, y, outer, along, nidx, row, bad_bits, wrap);
  default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t dmk_gather_grad(cudaStream_t s, const void *idx, int idx64,
                                       const void *dy, int dy_dtype, float *dx, int64_t nx,
                                       int64_t outer, int64_t along, int64_t nidx, int64_t row,
                                       int wrap) {
  cudaError_t e = cudaMemsetAsync(dx, 0, (size_t)nx * sizeof(float), s);
  if (e != cudaSuccess || outer * nidx * row == 0)
    return e;
  switch (dy_dtype) {
  case DMK_FLOAT: return launch_gather_grad<DMK_FLOAT>(s, idx, idx64, dy, dx, outer, along, nidx, row, wrap);
  case DMK_FLOAT16: return launch_gather_grad<DMK_FLOAT16>(s, idx, idx64, dy, dx, outer, along, nidx, row, wrap);
  case DMK_BFLOAT16: return launch_gather_grad<DMK_BFLOAT16>(s, idx, idx64, dy, dx, outer, along, nidx, row, wrap);
  default: return cudaErrorInvalidValue;
  }
}
