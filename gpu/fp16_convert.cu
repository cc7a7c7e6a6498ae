/* fp16_convert.cu: float -> half conversion on the GPU, the first CUDA code built.
 *
 * It exists so the build compiles and links real device code for every target
 * architecture, and so `demitasse info` and tests/tools can check that a kernel runs and
 * rounds exactly as the CPU conversion does (both round to nearest, ties to even).
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_kernels.h"

/* in: (n,) float32; out: (n,) FP16 bit patterns */
__global__ static void float_to_half_kernel(const float *in, uint16_t *out, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride)
    out[i] = __half_as_ushort(__float2half_rn(in[i]));
}

static int fail(cudaError_t e, const char *what, char *msg, size_t cap) {
  snprintf(msg, cap, "%s failed: %s (%s, %d)", what, cudaGetErrorString(e), cudaGetErrorName(e),
           (int)e);
  return (int)e;
}

#define CUDA_CHECK(call, what)                 \
  do {                                         \
    cudaError_t e_ = (call);                   \
    if (e_ != cudaSuccess) {                   \
      rc = fail(e_, what, msg, cap);           \
      goto cleanup;                            \
    }                                          \
  } while (0)

extern "C" int dmk_float_to_half_host(int device, const float *host_in, uint16_t *host_out,
                                      size_t n, char *msg, size_t cap) {
  int rc = 0;
  float *d_in = NULL;
  uint16_t *d_out = NULL;
  cudaStream_t stream = NULL;
  if (cap)
    msg[0] = '\0';
  if (n == 0)
    return 0;
  CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice");
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  CUDA_CHECK(cudaMallocAsync((void **)&d_in, n * sizeof(float), stream), "cudaMallocAsync");
  CUDA_CHECK(cudaMallocAsync((void **)&d_out, n * sizeof(uint16_t), stream), "cudaMallocAsync");
  CUDA_CHECK(cudaMemcpyAsync(d_in, host_in, n * sizeof(float), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync (to device)");
  {
    unsigned threads = 256;
    size_t want = (n + threads - 1) / threads;
    unsigned blocks = want > 4096 ? 4096u : (unsigned)want;
    float_to_half_kernel<<<blocks, threads, 0, stream>>>(d_in, d_out, n);
  }
  CUDA_CHECK(cudaGetLastError(), "launching float_to_half_kernel");
  CUDA_CHECK(cudaMemcpyAsync(host_out, d_out, n * sizeof(uint16_t), cudaMemcpyDeviceToHost,
                             stream),
             "cudaMemcpyAsync (to host)");
  CUDA_CHECK(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
cleanup:
  if (d_in)
    cudaFreeAsync(d_in, stream);
  if (d_out)
    cudaFreeAsync(d_out, stream);
  if (stream) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  return rc;
}
