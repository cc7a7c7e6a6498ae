/* more_kernels.cu: the CUDA kernels behind gpu/kernels_more.c: Iter and LearningRate on
 * one thread (so a step's counter and rate never go to the host), the block copies of
 * Concat and Split, a general strided Transpose, Dropout / DropoutGrad, and small
 * host-to-device writes carried in kernel parameters (Reshape's old_shape, Concat's
 * split_info).
 *
 * Each kernel mirrors its CPU reference in operators/. Double arithmetic uses the _rn
 * intrinsics where the CPU writes a*b + c, because nvcc would otherwise contract it into
 * an FMA (one rounding instead of the CPU's two). The dropout mask is dropout.c's
 * counter-based hash, integer for integer, so it is bit-identical to the CPU's; its
 * 16-bit conversions are core/half.h's bit-level routines ported as they are (round to
 * odd, then to nearest even; NaN payloads kept), not the CUDA intrinsics, whose NaNs
 * differ. The learning rate uses CUDA's double pow (within 2 ulp of glibc's), so it
 * matches the CPU after the final rounding to FP32, not necessarily in double.
 *
 * Loops are grid-stride with 64-bit indices. Nothing here synchronises with the host.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "more_kernels.h"

#define THREADS 256

static unsigned grid_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return b > 16384 ? 16384u : (unsigned)b;
}

#define GRID_LOOP(i, n)                                                         \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);     \
       i += (int64_t)gridDim.x * blockDim.x)

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

template <bool BF> __device__ __forceinline__ float widen(uint16_t u) {
  return BF ? bf2f(u) : h2f(u);
}
template <bool BF> __device__ __forceinline__ uint16_t narrow_d(double d) {
  return BF ? f2bf(d2f_odd(d)) : f2h(d2f_odd(d));
}

/* optimizer.c's skip_requested: nonzero or NaN skips. */
__device__ bool skip_set(const void *p, int t) {
  if (!p)
    return false;
  switch (t) {
  case DMM_BOOL:
  case DMM_UINT8: return *(const uint8_t *)p != 0;
  case DMM_INT32: return *(const int32_t *)p != 0;
  case DMM_INT64: return *(const int64_t *)p != 0;
  case DMM_FLOAT: return !(*(const float *)p == 0.0f);
  case DMM_DOUBLE: return !(*(const double *)p == 0.0);
  case DMM_FLOAT16: return !(h2f(*(const uint16_t *)p) == 0.0f);
  default: return true; /* the schema refuses other dtypes */
  }
}

/* ---- Iter, LearningRate ------------------------------------------------------------ */

__global__ void iter_kernel(int64_t *it, int fresh, const void *skip, int st) {
  int64_t cur = fresh ? 0 : *it;
  if (!skip_set(skip, st) && cur != (int64_t)0x7fffffffffffffffLL)
    cur += 1;
  *it = cur;
}

/* lr_policy.c's dm_lr_multiplier, operation for operation. */
__global__ void lr_kernel(const int64_t *iterp, float *lr, dmm_lr_params p) {
  const int64_t iter = *iterp;
  if (iter < 0) {
    *lr = __int_as_float(0x7fc00000); /* NaN: the CPU refuses a negative iteration */
    return;
  }
  double it = (double)iter, m = 1;
  switch (p.kind) {
  case DMM_LR_STEP: m = pow(p.gamma, (double)(iter / p.stepsize)); break;
  case DMM_LR_EXP: m = pow(p.gamma, it); break;
  case DMM_LR_INV: m = pow(__dadd_rn(1.0, __dmul_rn(p.gamma, it)), -p.power); break;
  case DMM_LR_POLY:
    m = iter >= p.max_iter ? 0 : pow(__dsub_rn(1.0, __ddiv_rn(it, (double)p.max_iter)), p.power);
    break;
  default: m = 1; break;
  }
  if (iter < p.warmup_iter)
    m = __dmul_rn(m, __dadd_rn(p.warmup_start,
                               __ddiv_rn(__dmul_rn(__dsub_rn(1.0, p.warmup_start), it),
                                         (double)p.warmup_iter)));
  *lr = __double2float_rn(__dmul_rn(p.base_lr, m));
}

/* ---- Concat / Split blocks, Transpose ---------------------------------------------- */

template <class U>
__global__ void blocks_kernel(const U *x, U *y, int64_t rows, int64_t cols, int64_t xp,
                              int64_t xo, int64_t yp, int64_t yo) {
  const int64_t total = rows * cols;
  GRID_LOOP(i, total) {
    int64_t o = i / cols, j = i - o * cols;
    y[o * yp + yo + j] = x[o * xp + xo + j];
  }
}

template <class U>
cudaError_t launch_blocks(cudaStream_t s, const void *x, void *y, int64_t rows, int64_t cols,
                          int64_t xp, int64_t xo, int64_t yp, int64_t yo) {
  blocks_kernel<U><<<grid_for(rows * cols), THREADS, 0, s>>>((const U *)x, (U *)y, rows, cols,
                                                             xp, xo, yp, yo);
  return cudaGetLastError();
}

struct TransposeParams {
  int nd;
  int64_t dims[DMM_MAX_DIMS]; /* Y's, after merging */
  int64_t st[DMM_MAX_DIMS];   /* X's step per Y dim */
};

template <class T>
__global__ void transpose_kernel(const T *x, T *y, TransposeParams p, int64_t n) {
  GRID_LOOP(k, n) {
    int64_t rem = k, src = 0;
    for (int d = p.nd - 1; d >= 0; d--) {
      int64_t q = rem / p.dims[d];
      src += (rem - q * p.dims[d]) * p.st[d];
      rem = q;
    }
    y[k] = x[src];
  }
}

template <class T>
cudaError_t launch_transpose(cudaStream_t s, const void *x, void *y, const TransposeParams &p,
                             int64_t n) {
  transpose_kernel<T><<<grid_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, p, n);
  return cudaGetLastError();
}

struct SmallBytes {
  unsigned char b[DMM_SMALL_BYTES];
};

__global__ void small_kernel(unsigned char *dst, SmallBytes v, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    dst[i] = v.b[i];
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
      double d = keep ? __dmul_rn((double)widen<K == 2>(v), scale) : 0.0;
      ((uint16_t *)y)[i] = narrow_d<K == 2>(d);
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
      double d = keep ? __dmul_rn((double)widen<K == 2>(v), scale) : 0.0;
      ((uint16_t *)dx)[i] = narrow_d<K == 2>(d);
    }
  }
}

int dropout_k(int dtype) {
  return dtype == DMM_FLOAT ? 0 : dtype == DMM_FLOAT16 ? 1 : dtype == DMM_BFLOAT16 ? 2 : -1;
}

} // namespace

/* ---- entry points ------------------------------------------------------------------ */

extern "C" cudaError_t dmm_iter(cudaStream_t s, int64_t *iter, int fresh, const void *skip,
                                int skip_dtype) {
  iter_kernel<<<1, 1, 0, s>>>(iter, fresh, skip, skip_dtype);
  return cudaGetLastError();
}

extern "C" cudaError_t dmm_learning_rate(cudaStream_t s, const int64_t *iter, float *lr,
                                         dmm_lr_params p) {
  lr_kernel<<<1, 1, 0, s>>>(iter, lr, p);
  return cudaGetLastError();
}

extern "C" cudaError_t dmm_copy_blocks(cudaStream_t s, const void *x, void *y, int es,
                                       int64_t rows, int64_t cols, int64_t xpitch, int64_t xoff,
                                       int64_t ypitch, int64_t yoff) {
  if (rows <= 0 || cols <= 0)
    return cudaSuccess;
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return cudaErrorInvalidValue;
  if (rows == 1 || (xpitch == cols && ypitch == cols)) /* one contiguous run */
    return cudaMemcpyAsync((char *)y + yoff * es, (const char *)x + xoff * es,
                           (size_t)(rows * cols * es), cudaMemcpyDeviceToDevice, s);
  /* The widest unit (up to 16 bytes) that divides every extent, offset and address, so
   * that narrow dtypes move in wide loads. */
  const uint64_t bits = (uint64_t)(cols * es) | (uint64_t)(xpitch * es) | (uint64_t)(xoff * es) |
                        (uint64_t)(ypitch * es) | (uint64_t)(yoff * es) | (uint64_t)(uintptr_t)x |
                        (uint64_t)(uintptr_t)y;
  int w = 16;
  while (w > 1 && (bits & (uint64_t)(w - 1)))
    w >>= 1;
  const int64_t f = w / es; /* elements per unit when w >= es; else w < es never happens */
  if (w < es) /* an address misaligned for the dtype: copy byte by byte */
    return launch_blocks<uint8_t>(s, x, y, rows, cols * es, xpitch * es, xoff * es, ypitch * es,
                                  yoff * es);
  cols /= f, xpitch /= f, xoff /= f, ypitch /= f, yoff /= f;
  switch (w) {
  case 1: return launch_blocks<uint8_t>(s, x, y, rows, cols, xpitch, xoff, ypitch, yoff);
  case 2: return launch_blocks<uint16_t>(s, x, y, rows, cols, xpitch, xoff, ypitch, yoff);
  case 4: return launch_blocks<uint32_t>(s, x, y, rows, cols, xpitch, xoff, ypitch, yoff);
  case 8: return launch_blocks<unsigned long long>(s, x, y, rows, cols, xpitch, xoff, ypitch,
                                                   yoff);
  default: return launch_blocks<uint4>(s, x, y, rows, cols, xpitch, xoff, ypitch, yoff);
  }
}

extern "C" cudaError_t dmm_transpose(cudaStream_t s, const void *x, void *y, int es, int ndim,
                                     const int64_t *ydims, const int64_t *xstride, int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  if (ndim < 0 || ndim > DMM_MAX_DIMS)
    return cudaErrorInvalidValue;
  /* Fewer dims, fewer divisions: drop Y dims of size 1 (they never move the source) and
   * merge a Y dim into the next when X steps through the pair contiguously. */
  TransposeParams p;
  p.nd = 0;
  for (int d = 0; d < ndim; d++) {
    if (ydims[d] == 1)
      continue;
    if (p.nd > 0 && p.st[p.nd - 1] == xstride[d] * ydims[d]) {
      p.dims[p.nd - 1] *= ydims[d];
      p.st[p.nd - 1] = xstride[d];
      continue;
    }
    p.dims[p.nd] = ydims[d];
    p.st[p.nd] = xstride[d];
    p.nd++;
  }
  if (p.nd == 0 || (p.nd == 1 && p.st[0] == 1)) /* the identity permutation, in effect */
    return cudaMemcpyAsync(y, x, (size_t)(n * es), cudaMemcpyDeviceToDevice, s);
  switch (es) {
  case 1: return launch_transpose<uint8_t>(s, x, y, p, n);
  case 2: return launch_transpose<uint16_t>(s, x, y, p, n);
  case 4: return launch_transpose<uint32_t>(s, x, y, p, n);
  case 8: return launch_transpose<unsigned long long>(s, x, y, p, n);
  default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t dmm_write_small(cudaStream_t s, void *dst, const void *src, size_t n) {
  for (size_t off = 0; off < n; off += DMM_SMALL_BYTES) {
    const size_t k = n - off < DMM_SMALL_BYTES ? n - off : DMM_SMALL_BYTES;
    SmallBytes v = {}; /* the unused tail is sent too; zeroed, not left uninitialised */
    memcpy(v.b, (const unsigned char *)src + off, k);
    small_kernel<<<1, THREADS, 0, s>>>((unsigned char *)dst + off, v, (int)k);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

extern "C" cudaError_t dmm_dropout(cudaStream_t s, int dtype, const void *x, void *y,
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

extern "C" cudaError_t dmm_dropout_grad(cudaStream_t s, int dtype, const void *dy,
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
