/* dropout.cu: Dropout and DropoutGrad on the GPU, behind gpu/dropout.c.
 *
 * The mask is operators/dropout.c's counter-based hash, integer for integer, so it is
 * bit-identical to the CPU's; the key comes from the same host code (dropout.h). The
 * 16-bit conversions are core/half.h's bit-level routines ported as they are (round to
 * odd, then to nearest even; NaN payloads kept), not the CUDA intrinsics of
 * cuda_common.cuh (widen/narrow), whose NaNs differ. Double arithmetic uses the _rn
 * intrinsics so that nvcc contracts nothing into an FMA.
 */
#include "cuda_common.cuh"

namespace {

/* ---- core/half.h on the device --------------------------------------------------- */

__device__ __forceinline__ uint32_t shift_rne(uint32_t m, unsigned s) {
  uint32_t r = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  return r + (rem > half || (rem == half && (r & 1)));
}

__device__ uint16_t f2h(float f) { /* dm_float_to_half */
  uint32_t x = __float_as_uint(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)
    return (uint16_t)(ax == 0x7f800000u ? sign | 0x7c00u : sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x47800000u)
    return (uint16_t)(sign | 0x7c00u);
  uint32_t e = ax >> 23, m = ax & 0x7fffffu;
  if (e >= 113)
    return (uint16_t)(sign | shift_rne(((e - 112) << 23 | m), 13));
  if (e < 102)
    return (uint16_t)sign;
  return (uint16_t)(sign | shift_rne(m | 0x800000u, 126 - e));
}

__device__ float h2f(uint16_t h) { /* dm_half_to_float */
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31)
    return __uint_as_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
  if (e != 0)
    return __uint_as_float(sign | (e + 112) << 23 | m << 13);
  return __uint_as_float(sign | __float_as_uint(__fmul_rn((float)m, 0x1p-24f)));
}

__device__ uint16_t f2bf(float f) { /* dm_float_to_bf16 */
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

__device__ float bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ float d2f_odd(double d) { /* dm_double_to_float_odd_ */
  float f = __double2float_rn(d);
  if (f != f || (double)f == d || isinf(f))
    return f;
  uint32_t u = __float_as_uint(f);
  if (fabs((double)f) > fabs(d))
    u--;
  return __uint_as_float(u | 1u);
}

template <bool BF> __device__ __forceinline__ float widen_bits(uint16_t u) {
  return BF ? bf2f(u) : h2f(u);
}
template <bool BF> __device__ __forceinline__ uint16_t narrow_bits_d(double d) {
  return BF ? f2bf(d2f_odd(d)) : f2h(d2f_odd(d));
}

/* ---- Dropout ---------------------------------------------------------------------- */

__device__ __forceinline__ uint64_t mix64(uint64_t z) { /* dropout.c's */
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* K: 0 FLOAT, 1 FLOAT16, 2 BFLOAT16. */
template <int K>
__global__ void dropout_kernel(const void *x, void *y, uint8_t *mask, uint64_t key, float ratio,
                               double scale, int64_t n) {
  GRID_LOOP(i, n) {
    uint64_t h = mix64(key + (uint64_t)i * 0x9E3779B97F4A7C15ull);
    double u = __dmul_rn(__ull2double_rn(h >> 11), 0x1p-53); /* exact: 53 bits */
    bool keep = u >= (double)ratio;
    mask[i] = (uint8_t)keep;
    if (K == 0) {
      float v = ((const float *)x)[i];
      ((float *)y)[i] = keep ? __double2float_rn(__dmul_rn((double)v, scale)) : 0.0f;
    } else {
      uint16_t v = ((const uint16_t *)x)[i];
      double d = keep ? __dmul_rn((double)widen_bits<K == 2>(v), scale) : 0.0;
      ((uint16_t *)y)[i] = narrow_bits_d<K == 2>(d);
    }
  }
}

template <int K>
__global__ void dropout_grad_kernel(const void *dy, const uint8_t *mask, void *dx, double scale,
                                    int64_t n) {
  GRID_LOOP(i, n) {
    bool keep = mask[i] != 0;
    if (K == 0) {
      float v = ((const float *)dy)[i];
      ((float *)dx)[i] = keep ? __double2float_rn(__dmul_rn((double)v, scale)) : 0.0f;
    } else {
      uint16_t v = ((const uint16_t *)dy)[i];
      double d = keep ? __dmul_rn((double)widen_bits<K == 2>(v), scale) : 0.0;
      ((uint16_t *)dx)[i] = narrow_bits_d<K == 2>(d);
    }
  }
}

int dropout_k(int dtype) {
  return dtype == DMK_FLOAT ? 0 : dtype == DMK_FLOAT16 ? 1 : dtype == DMK_BFLOAT16 ? 2 : -1;
}

} // namespace

extern "C" cudaError_t dmk_dropout(cudaStream_t s, int dtype, const void *x, void *y,
                                   uint8_t *mask, uint64_t key, float ratio, double scale,
                                   int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  switch (dropout_k(dtype)) {
  case 0: dropout_kernel<0><<<grid_for(n), THREADS, 0, s>>>(x, y, mask, key, ratio, scale, n); break;
  case 1: dropout_kernel<1><<<grid_for(n), THREADS, 0, s>>>(x, y, mask, key, ratio, scale, n); break;
  case 2: dropout_kernel<2><<<grid_for(n), THREADS, 0, s>>>(x, y, mask, key, ratio, scale, n); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_dropout_grad(cudaStream_t s, int dtype, const void *dy,
                                        const uint8_t *mask, void *dx, double scale, int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  switch (dropout_k(dtype)) {
  case 0: dropout_grad_kernel<0><<<grid_for(n), THREADS, 0, s>>>(dy, mask, dx, scale, n); break;
  case 1: dropout_grad_kernel<1><<<grid_for(n), THREADS, 0, s>>>(dy, mask, dx, scale, n); break;
  case 2: dropout_grad_kernel<2><<<grid_for(n), THREADS, 0, s>>>(dy, mask, dx, scale, n); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
