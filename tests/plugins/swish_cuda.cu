// swish_cuda.cu: the Swish plugin's CUDA kernels (beta = 1), FLOAT or FLOAT16 data with
// FP32 arithmetic, queued on the stream the host gives the op (dm_op_cuda_stream).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

template <typename T> __device__ float ld(const T *p, int64_t i);
template <> __device__ float ld<float>(const float *p, int64_t i) { return p[i]; }
template <> __device__ float ld<__half>(const __half *p, int64_t i) { return __half2float(p[i]); }
__device__ void st(float *p, int64_t i, float v) { p[i] = v; }
__device__ void st(__half *p, int64_t i, float v) { p[i] = __float2half_rn(v); }

template <typename T>
__global__ void swish_fwd(const T *x, T *y, int64_t n) {  // x, y: (n)
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = ld(x, i);
    st(y, i, v / (1.0f + expf(-v)));
  }
}

template <typename T>
__global__ void swish_bwd(const T *x, const T *dy, T *dx, int64_t n) {  // x, dy, dx: (n)
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = ld(x, i), s = 1.0f / (1.0f + expf(-v));
    st(dx, i, ld(dy, i) * (s + v * s * (1.0f - s)));
  }
}

static unsigned blocks(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

extern "C" int swish_cuda_forward(void *stream, int half, const void *x, void *y, int64_t n) {
  cudaStream_t s = (cudaStream_t)stream;
  if (half)
    swish_fwd<<<blocks(n), 256, 0, s>>>((const __half *)x, (__half *)y, n);
  else
    swish_fwd<<<blocks(n), 256, 0, s>>>((const float *)x, (float *)y, n);
  return (int)cudaGetLastError();
}

extern "C" int swish_cuda_backward(void *stream, int half, const void *x, const void *dy,
                                   void *dx, int64_t n) {
  cudaStream_t s = (cudaStream_t)stream;
  if (half)
    swish_bwd<<<blocks(n), 256, 0, s>>>((const __half *)x, (const __half *)dy, (__half *)dx, n);
  else
    swish_bwd<<<blocks(n), 256, 0, s>>>((const float *)x, (const float *)dy, (float *)dx, n);
  return (int)cudaGetLastError();
}
