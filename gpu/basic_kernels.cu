/* basic_kernels.cu: the CUDA kernels behind gpu/kernels_basic.c: elementwise arithmetic,
 * Relu, casts, fills, the update ops, loss scaling and the FP32 losses.
 *
 * Each kernel mirrors its CPU reference in operators/ element by element. Products and
 * sums use the _rn intrinsics where the CPU writes a*b + c, because nvcc would otherwise
 * contract them into an FMA (one rounding instead of the CPU's two) and results would
 * stop being bit-identical to the CPU's. 16-bit floats travel as their bit patterns
 * (uint16_t), widened to float, computed in FP32 and rounded once. Reductions accumulate
 * in double where the CPU does; their summation order (a tree) differs from the CPU's
 * loop, so they agree to rounding, not bit for bit.
 *
 * Loops are grid-stride with 64-bit indices. Nothing here synchronises with the host:
 * values the CPU reads on the host (lr, iter, skip, loss_scale, labels) are read by the
 * kernels on the device.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "basic_kernels.h"

#define THREADS 256 /* every launch uses this block size; the reductions rely on it */
#define LOG_FLOOR 1e-20

static unsigned grid_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return b > 16384 ? 16384u : (unsigned)b;
}

#define GRID_LOOP(i, n)                                                         \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);     \
       i += (int64_t)gridDim.x * blockDim.x)

/* ---- 16-bit patterns, reductions, the skip flag -------------------------------- */

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

/* The max as the CPU takes it (x > m ? x : m, so NaNs are passed over). */
__device__ float block_max(float v, float *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      float o = sh[threadIdx.x + s];
      sh[threadIdx.x] = o > sh[threadIdx.x] ? o : sh[threadIdx.x];
    }
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}

/* optimizer.c's skip_requested, on the device: nonzero or NaN skips. */
__device__ __forceinline__ bool skip_set(const void *p, int t) {
  if (!p)
    return false;
  switch (t) {
  case DMK_BOOL:
  case DMK_UINT8: return *(const uint8_t *)p != 0;
  case DMK_INT32: return *(const int32_t *)p != 0;
  case DMK_INT64: return *(const int64_t *)p != 0;
  case DMK_FLOAT: return !(*(const float *)p == 0.0f);
  case DMK_DOUBLE: return !(*(const double *)p == 0.0);
  case DMK_FLOAT16: return !(__half2float(__ushort_as_half(*(const uint16_t *)p)) == 0.0f);
  default: return true; /* the schema refuses other dtypes */
  }
}

/* ---- Add / Sub / Mul / Div ------------------------------------------------------ */

template <int OP> struct FOp {
  __device__ float operator()(float x, float y) const {
    return OP == DMK_ADD ? __fadd_rn(x, y)
           : OP == DMK_SUB ? __fsub_rn(x, y)
           : OP == DMK_MUL ? __fmul_rn(x, y)
                           : __fdiv_rn(x, y);
  }
};
template <int OP> struct DOp {
  __device__ double operator()(double x, double y) const {
    return OP == DMK_ADD ? __dadd_rn(x, y)
           : OP == DMK_SUB ? __dsub_rn(x, y)
           : OP == DMK_MUL ? __dmul_rn(x, y)
                           : __ddiv_rn(x, y);
  }
};
template <int OP, bool BF> struct HOp {
  __device__ uint16_t operator()(uint16_t x, uint16_t y) const {
    return narrow<BF>(FOp<OP>()(widen<BF>(x), widen<BF>(y)));
  }
};
/* Integers wrap through the unsigned type; x / -1 is the wrapped negation; x / 0 is 0
 * (the CPU refuses it before running; the device cannot report it). */
template <int OP, class T, class U> struct IOp {
  __device__ T operator()(T x, T y) const {
    if (OP == DMK_ADD)
      return (T)((U)x + (U)y);
    if (OP == DMK_SUB)
      return (T)((U)x - (U)y);
    if (OP == DMK_MUL)
      return (T)((U)x * (U)y);
    return y == 0 ? (T)0 : y == -1 ? (T)((U)0 - (U)x) : (T)(x / y);
  }
};

/* a: (pre, n, post); b: (n). c[i] = f(a[i], b[(i / post) % n]). */
template <class T, class F>
__global__ void binary_kernel(const T *a, const T *b, T *c, int64_t total, int64_t n,
                              int64_t post, F f) {
  if (n == total) { /* no broadcast: b has a's shape */
    GRID_LOOP(i, total) c[i] = f(a[i], b[i]);
  } else {
    GRID_LOOP(i, total) c[i] = f(a[i], b[(i / post) % n]);
  }
}

template <class T, class F>
static cudaError_t launch_binary(cudaStream_t s, const void *a, const void *b, void *c,
                                 int64_t total, int64_t n, int64_t post) {
  binary_kernel<T, F><<<grid_for(total), THREADS, 0, s>>>((const T *)a, (const T *)b, (T *)c,
                                                          total, n, post, F());
  return cudaGetLastError();
}

template <int OP>
static cudaError_t binary_op(cudaStream_t s, int dtype, const void *a, const void *b, void *c,
                             int64_t total, int64_t n, int64_t post) {
  switch (dtype) {
  case DMK_FLOAT: return launch_binary<float, FOp<OP>>(s, a, b, c, total, n, post);
  case DMK_DOUBLE: return launch_binary<double, DOp<OP>>(s, a, b, c, total, n, post);
  case DMK_FLOAT16: return launch_binary<uint16_t, HOp<OP, false>>(s, a, b, c, total, n, post);
  case DMK_BFLOAT16: return launch_binary<uint16_t, HOp<OP, true>>(s, a, b, c, total, n, post);
  case DMK_INT32:
    return launch_binary<int32_t, IOp<OP, int32_t, uint32_t>>(s, a, b, c, total, n, post);
  case DMK_INT64:
    return launch_binary<int64_t, IOp<OP, int64_t, uint64_t>>(s, a, b, c, total, n, post);
  default: return cudaErrorInvalidValue;
  }
}

} // namespace

extern "C" cudaError_t dmk_binary(cudaStream_t s, int op, int dtype, const void *a,
                                  const void *b, void *c, int64_t pre, int64_t n,
                                  int64_t post) {
  int64_t total = pre * n * post;
  if (total == 0)
    return cudaSuccess;
  switch (op) {
  case DMK_ADD: return binary_op<DMK_ADD>(s, dtype, a, b, c, total, n, post);
  case DMK_SUB: return binary_op<DMK_SUB>(s, dtype, a, b, c, total, n, post);
  case DMK_MUL: return binary_op<DMK_MUL>(s, dtype, a, b, c, total, n, post);
  case DMK_DIV: return binary_op<DMK_DIV>(s, dtype, a, b, c, total, n, post);
  default: return cudaErrorInvalidValue;
  }
}

/* ---- Sum ---------------------------------------------------------------------- */

/* Element type T, accumulator A: load widens, store narrows, add accumulates. */
namespace {
struct CF {
  typedef float T;
  typedef float A;
  static __device__ A load(T v) { return v; }
  static __device__ T store(A v) { return v; }
};
struct CD {
  typedef double T;
  typedef double A;
  static __device__ A load(T v) { return v; }
  static __device__ T store(A v) { return v; }
};
struct CI32 {
  typedef int32_t T;
  typedef uint32_t A;
  static __device__ A load(T v) { return (A)v; }
  static __device__ T store(A v) { return (T)v; }
};
struct CI64 {
  typedef int64_t T;
  typedef uint64_t A;
  static __device__ A load(T v) { return (A)v; }
  static __device__ T store(A v) { return (T)v; }
};
template <bool BF> struct CH {
  typedef uint16_t T;
  typedef float A;
  static __device__ A load(T v) { return widen<BF>(v); }
  static __device__ T store(A v) { return narrow<BF>(v); }
};

struct Terms {
  const void *p[DMK_MAX_TERMS];
};

/* The running sum lives in acc (16-bit types: FP32) or else in y itself (exact: the
 * accumulator is y's own type, or its unsigned twin). */
template <class C>
__global__ void sum_kernel(Terms x, int k, int first, int last, float *acc, typename C::T *y,
                           int64_t n) {
  typedef typename C::T T;
  typedef typename C::A A;
  GRID_LOOP(i, n) {
    A sum;
    int j = 0;
    if (first)
      sum = C::load(((const T *)x.p[j++])[i]);
    else
      sum = acc ? (A)acc[i] : C::load(y[i]);
    for (; j < k; j++)
      sum = sum + C::load(((const T *)x.p[j])[i]);
    if (acc && !last)
      acc[i] = (float)sum;
    else
      y[i] = C::store(sum);
  }
}

template <class C>
static cudaError_t launch_sum(cudaStream_t s, const Terms &t, int k, int first, int last,
                              float *acc, void *y, int64_t n) {
  sum_kernel<C><<<grid_for(n), THREADS, 0, s>>>(t, k, first, last, acc, (typename C::T *)y, n);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t dmk_sum(cudaStream_t s, int dtype, const void *const *x, int k, int first,
                               int last, float *acc, void *y, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (k < 0 || k > DMK_MAX_TERMS)
    return cudaErrorInvalidValue;
  Terms t = {};
  for (int j = 0; j < k; j++)
    t.p[j] = x[j];
  switch (dtype) {
  case DMK_FLOAT: return launch_sum<CF>(s, t, k, first, last, NULL, y, n);
  case DMK_DOUBLE: return launch_sum<CD>(s, t, k, first, last, NULL, y, n);
  case DMK_INT32: return launch_sum<CI32>(s, t, k, first, last, NULL, y, n);
  case DMK_INT64: return launch_sum<CI64>(s, t, k, first, last, NULL, y, n);
  case DMK_FLOAT16: return launch_sum<CH<false>>(s, t, k, first, last, acc, y, n);
  case DMK_BFLOAT16: return launch_sum<CH<true>>(s, t, k, first, last, acc, y, n);
  default: return cudaErrorInvalidValue;
  }
}

/* ---- Scale, SumReduceLike ------------------------------------------------------- */

namespace {
template <class C> __global__ void scale_kernel(const typename C::T *x, typename C::T *y,
                                                float k, int64_t n) {
  GRID_LOOP(i, n) y[i] = C::store(__fmul_rn(C::load(x[i]), k));
}
__global__ void scale_double_kernel(const double *x, double *y, float k, int64_t n) {
  GRID_LOOP(i, n) y[i] = __dmul_rn((double)k, x[i]);
}

} // namespace

extern "C" cudaError_t dmk_scale(cudaStream_t s, int dtype, const void *x, void *y, float k,
                                 int64_t n) {
  if (n == 0)
    return cudaSuccess;
  switch (dtype) {
  case DMK_FLOAT:
    scale_kernel<CF><<<grid_for(n), THREADS, 0, s>>>((const float *)x, (float *)y, k, n);
    break;
  case DMK_FLOAT16:
    scale_kernel<CH<false>><<<grid_for(n), THREADS, 0, s>>>((const uint16_t *)x, (uint16_t *)y,
                                                            k, n);
    break;
  case DMK_BFLOAT16:
    scale_kernel<CH<true>><<<grid_for(n), THREADS, 0, s>>>((const uint16_t *)x, (uint16_t *)y,
                                                           k, n);
    break;
  case DMK_DOUBLE:
    scale_double_kernel<<<grid_for(n), THREADS, 0, s>>>((const double *)x, (double *)y, k, n);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/* Element to double and double to element, rounding once (as the CPU's SumReduceLike). */
namespace {
template <int DT> struct RD;
template <> struct RD<DMK_FLOAT> {
  typedef float T;
  static __device__ double wide(T v) { return v; }
  static __device__ T from(double d) { return __double2float_rn(d); }
};
template <> struct RD<DMK_DOUBLE> {
  typedef double T;
  static __device__ double wide(T v) { return v; }
  static __device__ T from(double d) { return d; }
};
template <> struct RD<DMK_FLOAT16> {
  typedef uint16_t T;
  static __device__ double wide(T v) { return widen<false>(v); }
  static __device__ T from(double d) { return __half_as_ushort(__double2half(d)); }
};
template <> struct RD<DMK_BFLOAT16> {
  typedef uint16_t T;
  static __device__ double wide(T v) { return widen<true>(v); }
  static __device__ T from(double d) { return __bfloat16_as_ushort(__double2bfloat16(d)); }
};

/* One block per output element j (grid-stride over j): a is (pre, n, post). */
template <int DT>
__global__ void reduce_like_kernel(const typename RD<DT>::T *a, typename RD<DT>::T *c,
                                   int64_t pre, int64_t n, int64_t post) {
  __shared__ double sh[THREADS];
  const int64_t m = pre * post;
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    double t = 0;
    for (int64_t e = threadIdx.x; e < m; e += THREADS) {
      const int64_t p = e / post, q = e % post;
      t += RD<DT>::wide(a[(p * n + j) * post + q]);
    }
    t = block_sum(t, sh);
    if (threadIdx.x == 0)
      c[j] = RD<DT>::from(t);
  }
}

} // namespace

extern "C" cudaError_t dmk_sum_reduce_like(cudaStream_t s, int dtype, const void *a, void *c,
                                           int64_t pre, int64_t n, int64_t post) {
  if (n == 0)
    return cudaSuccess;
  unsigned g = n > 16384 ? 16384u : (unsigned)n;
#define RL(DT)                                                                             \
  reduce_like_kernel<DT><<<g, THREADS, 0, s>>>((const RD<DT>::T *)a, (RD<DT>::T *)c, pre, n, \
                                               post);                                      \
  break
  switch (dtype) {
  case DMK_FLOAT: RL(DMK_FLOAT);
  case DMK_DOUBLE: RL(DMK_DOUBLE);
  case DMK_FLOAT16: RL(DMK_FLOAT16);
  case DMK_BFLOAT16: RL(DMK_BFLOAT16);
  default: return cudaErrorInvalidValue;
  }
#undef RL
  return cudaGetLastError();
}

/* ---- Relu ----------------------------------------------------------------------- */

namespace {
__global__ void relu_f32(const float *x, float *y, int64_t n) {
  GRID_LOOP(i, n) {
    const float v = x[i];
    y[i] = v > 0.0f || v != v ? v : 0.0f;
  }
}
/* On the bits, as the CPU: a set sign with magnitude up to inf is negative (or -0). */
__global__ void relu_16(const uint16_t *x, uint16_t *y, unsigned inf, int64_t n) {
  GRID_LOOP(i, n) {
    const unsigned v = x[i];
    y[i] = (v & 0x8000u) && (v & 0x7fffu) <= inf ? (uint16_t)0 : (uint16_t)v;
  }
}
__global__ void relu_grad_f32(const float *y, const float *dy, float *dx, int64_t n) {
  GRID_LOOP(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
__global__ void relu_grad_16(const uint16_t *y, const uint16_t *dy, uint16_t *dx, unsigned inf,
                             int64_t n) {
  GRID_LOOP(i, n) {
    const unsigned v = y[i];
    dx[i] = !(v & 0x8000u) && v != 0 && v <= inf ? dy[i] : (uint16_t)0;
  }
}

} // namespace

extern "C" cudaError_t dmk_relu(cudaStream_t s, int dtype, const void *x, void *y, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (dtype == DMK_FLOAT)
    relu_f32<<<grid_for(n), THREADS, 0, s>>>((const float *)x, (float *)y, n);
  else
    relu_16<<<grid_for(n), THREADS, 0, s>>>((const uint16_t *)x, (uint16_t *)y,
                                            dtype == DMK_BFLOAT16 ? 0x7f80u : 0x7c00u, n);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_relu_grad(cudaStream_t s, int dtype, const void *y, const void *dy,
                                     void *dx, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (dtype == DMK_FLOAT)
    relu_grad_f32<<<grid_for(n), THREADS, 0, s>>>((const float *)y, (const float *)dy,
                                                  (float *)dx, n);
  else
    relu_grad_16<<<grid_for(n), THREADS, 0, s>>>((const uint16_t *)y, (const uint16_t *)dy,
                                                 (uint16_t *)dx,
                                                 dtype == DMK_BFLOAT16 ? 0x7f80u : 0x7c00u, n);
  return cudaGetLastError();
}

/* ---- Cast (operators/cast.c's rules) and fills ---------------------------------- */

namespace {
__device__ __forceinline__ bool is_floating(int t) {
  return t == DMK_FLOAT || t == DMK_DOUBLE || t == DMK_FLOAT16 || t == DMK_BFLOAT16;
}

__device__ double load_real(int t, const void *src, int64_t i) {
  switch (t) {
  case DMK_FLOAT: return ((const float *)src)[i];
  case DMK_DOUBLE: return ((const double *)src)[i];
  case DMK_FLOAT16: return widen<false>(((const uint16_t *)src)[i]);
  default: return widen<true>(((const uint16_t *)src)[i]);
  }
}

__device__ int64_t load_int(int t, const void *src, int64_t i) {
  switch (t) {
  case DMK_INT32: return ((const int32_t *)src)[i];
  case DMK_INT64: return ((const int64_t *)src)[i];
  case DMK_BOOL: return ((const uint8_t *)src)[i] != 0;
  case DMK_UINT8: return ((const uint8_t *)src)[i];
  case DMK_INT8: return ((const int8_t *)src)[i];
  case DMK_UINT16: return ((const uint16_t *)src)[i];
  default: return ((const int16_t *)src)[i]; /* INT16 */
  }
}

/* Truncate toward zero, saturate to [lo, hi], NaN -> 0 (lo, hi exact in double). */
__device__ int64_t real_to_int(double d, int64_t lo, int64_t hi) {
  if (d != d)
    return 0;
  if (d <= (double)lo)
    return lo;
  if (d >= (double)hi)
    return hi;
  return (int64_t)d;
}

__device__ void store_real(int t, void *dst, int64_t i, double d) {
  switch (t) {
  case DMK_FLOAT: ((float *)dst)[i] = __double2float_rn(d); break;
  case DMK_DOUBLE: ((double *)dst)[i] = d; break;
  case DMK_FLOAT16: ((uint16_t *)dst)[i] = __half_as_ushort(__double2half(d)); break;
  case DMK_BFLOAT16: ((uint16_t *)dst)[i] = __bfloat16_as_ushort(__double2bfloat16(d)); break;
  case DMK_BOOL: ((uint8_t *)dst)[i] = d != 0; break;
  case DMK_INT32: ((int32_t *)dst)[i] = (int32_t)real_to_int(d, INT32_MIN, INT32_MAX); break;
  case DMK_UINT8: ((uint8_t *)dst)[i] = (uint8_t)real_to_int(d, 0, UINT8_MAX); break;
  case DMK_INT8: ((int8_t *)dst)[i] = (int8_t)real_to_int(d, INT8_MIN, INT8_MAX); break;
  case DMK_UINT16: ((uint16_t *)dst)[i] = (uint16_t)real_to_int(d, 0, UINT16_MAX); break;
  case DMK_INT16: ((int16_t *)dst)[i] = (int16_t)real_to_int(d, INT16_MIN, INT16_MAX); break;
  case DMK_INT64:
    ((int64_t *)dst)[i] = d != d ? 0 : d >= 0x1p63 ? INT64_MAX : d <= -0x1p63 ? INT64_MIN
                                                                         : (int64_t)d;
    break;
  default: break;
  }
}

/* int64 -> double rounded to odd, so a second rounding to 16 bits is still correct. */
__device__ double int_to_double_odd(int64_t v) {
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  int bits = 64 - __clzll((long long)(u | 1));
  if (bits > 53) {
    uint64_t mask = ((uint64_t)1 << (bits - 53)) - 1;
    u = (u & ~mask) | ((u & mask) ? mask + 1 : 0);
  }
  double d = __ull2double_rn(u);
  return v < 0 ? -d : d;
}

__device__ void store_int(int t, void *dst, int64_t i, int64_t v) {
  switch (t) {
  case DMK_FLOAT: ((float *)dst)[i] = __ll2float_rn(v); break;
  case DMK_DOUBLE: ((double *)dst)[i] = __ll2double_rn(v); break;
  case DMK_FLOAT16:
    ((uint16_t *)dst)[i] = __half_as_ushort(__double2half(int_to_double_odd(v)));
    break;
  case DMK_BFLOAT16:
    ((uint16_t *)dst)[i] = __bfloat16_as_ushort(__double2bfloat16(int_to_double_odd(v)));
    break;
  case DMK_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
  case DMK_INT32: ((int32_t *)dst)[i] = (int32_t)(uint32_t)v; break;
  case DMK_UINT8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
  case DMK_INT8: ((int8_t *)dst)[i] = (int8_t)(uint8_t)v; break;
  case DMK_UINT16: ((uint16_t *)dst)[i] = (uint16_t)v; break;
  case DMK_INT16: ((int16_t *)dst)[i] = (int16_t)(uint16_t)v; break;
  case DMK_INT64: ((int64_t *)dst)[i] = v; break;
  default: break;
  }
}

/* from/to are uniform across the grid, so the switches do not diverge. Each element is
 * read before it is written by the same thread, so y may be x (same element size). */
__global__ void cast_kernel(int from, int to, const void *x, void *y, int64_t n) {
  if (is_floating(from)) {
    GRID_LOOP(i, n) store_real(to, y, i, load_real(from, x, i));
  } else {
    GRID_LOOP(i, n) store_int(to, y, i, load_int(from, x, i));
  }
}

} // namespace

extern "C" cudaError_t dmk_cast(cudaStream_t s, int from, int to, const void *x, void *y,
                                int64_t n) {
  if (n == 0)
    return cudaSuccess;
  cast_kernel<<<grid_for(n), THREADS, 0, s>>>(from, to, x, y, n);
  return cudaGetLastError();
}

namespace {
template <class T> __global__ void fill_kernel(T *y, T v, int64_t n) {
  GRID_LOOP(i, n) y[i] = v;
}

} // namespace

extern "C" cudaError_t dmk_fill(cudaStream_t s, void *y, int size, uint64_t bits, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  switch (size) {
  case 1: fill_kernel<uint8_t><<<grid_for(n), THREADS, 0, s>>>((uint8_t *)y, (uint8_t)bits, n); break;
  case 2:
    fill_kernel<uint16_t><<<grid_for(n), THREADS, 0, s>>>((uint16_t *)y, (uint16_t)bits, n);
    break;
  case 4:
    fill_kernel<uint32_t><<<grid_for(n), THREADS, 0, s>>>((uint32_t *)y, (uint32_t)bits, n);
    break;
  case 8: fill_kernel<uint64_t><<<grid_for(n), THREADS, 0, s>>>((uint64_t *)y, bits, n); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/* ---- update ops (operators/optimizer.c) ----------------------------------------- */

namespace {
__global__ void momentum_kernel(const float *g, const float *m, const float *lr, const float *p,
                                float *ng, float *nm, float *np, float mu, int nesterov,
                                const void *skipp, int skipt, int64_t n) {
  const bool skip = skip_set(skipp, skipt);
  const float lrv = *lr;
  GRID_LOOP(i, n) {
    if (skip) { /* the identity step: only outputs in other blobs are written */
      if (ng != g)
        ng[i] = g[i];
      if (nm != m)
        nm[i] = m[i];
      if (np != p)
        np[i] = p[i];
      continue;
    }
    const float gi = g[i], mi = m[i], pi = p[i];
    float adj, mnew;
    if (!nesterov) {
      adj = __fadd_rn(__fmul_rn(lrv, gi), __fmul_rn(mu, mi));
      mnew = adj;
    } else {
      mnew = __fadd_rn(__fmul_rn(mu, mi), __fmul_rn(lrv, gi));
      adj = __fsub_rn(__fmul_rn(__fadd_rn(1.0f, mu), mnew), __fmul_rn(mu, mi));
    }
    nm[i] = mnew;
    ng[i] = adj;
    np[i] = __fsub_rn(pi, adj);
  }
}

} // namespace

extern "C" cudaError_t dmk_momentum_sgd(cudaStream_t s, const float *g, const float *m,
                                        const float *lr, const float *p, float *ng, float *nm,
                                        float *np, float mu, int nesterov, const void *skip,
                                        int skip_dtype, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  momentum_kernel<<<grid_for(n), THREADS, 0, s>>>(g, m, lr, p, ng, nm, np, mu, nesterov, skip,
                                                  skip_dtype, n);
  return cudaGetLastError();
}

namespace {
__global__ void adam_kernel(const float *w, const float *m, const float *v, const float *g,
                            const float *lr, const int64_t *iter, float *nw, float *nm,
                            float *nv, float b1, float b2, float eps, const void *skipp,
                            int skipt, int64_t n) {
  __shared__ float corr_s;
  const bool skip = skip_set(skipp, skipt);
  /* Caffe2's correction, in double as the CPU computes it, once per block. */
  if (threadIdx.x == 0) {
    corr_s = 0.0f;
    if (!skip) {
      const double t = (double)*iter + 1;
      corr_s = __double2float_rn(sqrt(1 - pow((double)b2, t)) / (1 - pow((double)b1, t)));
    }
  }
  __syncthreads(); /* corr_s is always written: no read of uninitialised shared memory */
  const float corr = corr_s, lrv = *lr;
  const float c1 = 1 - b1, c2 = 1 - b2;
  GRID_LOOP(i, n) {
    if (skip) {
      if (nw != w)
        nw[i] = w[i];
      if (nm != m)
        nm[i] = m[i];
      if (nv != v)
        nv[i] = v[i];
      continue;
    }
    const float gi = g[i], wi = w[i];
    const float mi = __fadd_rn(__fmul_rn(m[i], b1), __fmul_rn(gi, c1));
    const float vi = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(__fmul_rn(gi, gi), c2));
    nm[i] = mi;
    nv[i] = vi;
    nw[i] = __fadd_rn(wi, __fdiv_rn(__fmul_rn(__fmul_rn(lrv, corr), mi),
                                    __fadd_rn(__fsqrt_rn(vi), eps)));
  }
}

} // namespace

extern "C" cudaError_t dmk_adam(cudaStream_t s, const float *w, const float *m, const float *v,
                                const float *g, const float *lr, const int64_t *iter, float *nw,
                                float *nm, float *nv, float b1, float b2, float eps,
                                const void *skip, int skip_dtype, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  adam_kernel<<<grid_for(n), THREADS, 0, s>>>(w, m, v, g, lr, iter, nw, nm, nv, b1, b2, eps,
                                              skip, skip_dtype, n);
  return cudaGetLastError();
}

namespace {
struct WTerms {
  const float *x[DMK_MAX_TERMS];
  const float *w[DMK_MAX_TERMS];
};

__global__ void wsum_kernel(WTerms t, int k, int first, float *y, const void *skipp, int skipt,
                            int64_t n) {
  const bool skip = skip_set(skipp, skipt);
  GRID_LOOP(i, n) {
    if (skip) {
      if (first && y != t.x[0])
        y[i] = t.x[0][i];
      continue;
    }
    float acc;
    int j = 0;
    if (first) {
      acc = __fmul_rn(*t.w[0], t.x[0][i]);
      j = 1;
    } else {
      acc = y[i];
    }
    for (; j < k; j++)
      acc = __fadd_rn(acc, __fmul_rn(*t.w[j], t.x[j][i]));
    y[i] = acc;
  }
}

} // namespace

extern "C" cudaError_t dmk_weighted_sum(cudaStream_t s, const float *const *x,
                                        const float *const *w, int k, int first, float *y,
                                        const void *skip, int skip_dtype, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (k < 1 || k > DMK_MAX_TERMS)
    return cudaErrorInvalidValue;
  WTerms t = {};
  for (int j = 0; j < k; j++) {
    t.x[j] = x[j];
    t.w[j] = w[j];
  }
  wsum_kernel<<<grid_for(n), THREADS, 0, s>>>(t, k, first, y, skip, skip_dtype, n);
  return cudaGetLastError();
}

/* ---- loss scaling (operators/loss_scale.c) -------------------------------------- */

namespace {
__device__ __forceinline__ bool f32_nonfinite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}
__device__ __forceinline__ bool f16_nonfinite(uint16_t h) { return (h & 0x7c00u) == 0x7c00u; }

__global__ void unscale_begin_kernel(const float *scale, float *found) {
  const float sv = *scale;
  *found = sv > 0 && !f32_nonfinite(sv) ? 0.0f : 1.0f;
}

template <bool H>
__global__ void unscale_kernel(const void *x, void *y, const float *scale, float *found,
                               int64_t n) {
  const float inv = __double2float_rn(1.0 / (double)*scale); /* exact for powers of two */
  bool bad = false;
  GRID_LOOP(i, n) {
    if (!H) {
      const float xi = ((const float *)x)[i], yi = __fmul_rn(xi, inv);
      ((float *)y)[i] = yi;
      bad |= f32_nonfinite(xi) | f32_nonfinite(yi);
    } else {
      const uint16_t xi = ((const uint16_t *)x)[i];
      const uint16_t yi = narrow<false>(__fmul_rn(widen<false>(xi), inv));
      ((uint16_t *)y)[i] = yi;
      bad |= f16_nonfinite(xi) | f16_nonfinite(yi);
    }
  }
  /* Every writer stores the same value, so plain stores race harmlessly. */
  if (bad)
    *found = 1.0f;
}

} // namespace

extern "C" cudaError_t dmk_unscale_begin(cudaStream_t s, const float *scale, float *found) {
  unscale_begin_kernel<<<1, 1, 0, s>>>(scale, found);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_unscale(cudaStream_t s, int dtype, const void *x, void *y,
                                   const float *scale, float *found, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (dtype == DMK_FLOAT)
    unscale_kernel<false><<<grid_for(n), THREADS, 0, s>>>(x, y, scale, found, n);
  else
    unscale_kernel<true><<<grid_for(n), THREADS, 0, s>>>(x, y, scale, found, n);
  return cudaGetLastError();
}

namespace {
__global__ void update_loss_scale_kernel(const float *scale, const float *found,
                                         const int64_t *goodp, const int64_t *skippedp,
                                         float *nscale, int64_t *ngood, int64_t *nskipped,
                                         int dynamic, double growth, double backoff,
                                         double min_scale, double max_scale, int64_t interval) {
  const double sv = *scale;
  const bool fnd = !(*found == 0.0f); /* NaN counts as found */
  int64_t good = *goodp, skipped = *skippedp;
  double ns = sv;
  /* A bad scale or a negative count is the CPU's error; here it leaves the state as it is
   * (UnscaleAndCheck has already flagged the step as skipped for a bad scale). */
  const bool valid = sv > 0 && isfinite(sv) && good >= 0 && skipped >= 0;
  if (valid && fnd) {
    if (skipped < INT64_MAX)
      skipped++;
    good = 0;
    if (dynamic)
      ns = fmax(__dmul_rn(sv, backoff), min_scale);
  } else if (valid && good < INT64_MAX) {
    good++;
    if (dynamic && good >= interval) {
      ns = fmin(__dmul_rn(sv, growth), max_scale);
      good = 0;
    }
  }
  *nscale = __double2float_rn(ns);
  *ngood = good;
  *nskipped = skipped;
}

} // namespace

extern "C" cudaError_t dmk_update_loss_scale(cudaStream_t s, const float *scale,
                                             const float *found, const int64_t *good,
                                             const int64_t *skipped, float *nscale,
                                             int64_t *ngood, int64_t *nskipped, int dynamic,
                                             double growth, double backoff, double min_scale,
                                             double max_scale, int64_t interval) {
  update_loss_scale_kernel<<<1, 1, 0, s>>>(scale, found, good, skipped, nscale, ngood, nskipped,
                                           dynamic, growth, backoff, min_scale, max_scale,
                                           interval);
  return cudaGetLastError();
}

/* ---- losses (operators/loss.c) --------------------------------------------------- */

namespace {
template <bool H> __device__ __forceinline__ float logit(const void *x, int64_t i) {
  return H ? widen<false>(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

/* One block per row: p = softmax(x) (max subtracted, double sums) and the row's weighted
 * loss into rowloss[r]. */
template <bool H>
__global__ void softmax_loss_kernel(const void *x, const int32_t *label, const float *probl,
                                    const float *w, float *p, double *rowloss, int64_t N,
                                    int64_t D) {
  __shared__ double shd[THREADS];
  __shared__ float shf[THREADS];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t base = r * D;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < D; j += THREADS) {
      const float v = logit<H>(x, base + j);
      mx = v > mx ? v : mx;
    }
    mx = block_max(mx, shf);
    double sum = 0;
    for (int64_t j = threadIdx.x; j < D; j += THREADS)
      sum += exp((double)logit<H>(x, base + j) - mx);
    sum = block_sum(sum, shd);
    double li = 0;
    for (int64_t j = threadIdx.x; j < D; j += THREADS) {
      const float pj = __double2float_rn(exp((double)logit<H>(x, base + j) - mx) / sum);
      p[base + j] = pj;
      if (probl)
        li = __dsub_rn(li, __dmul_rn((double)probl[base + j], log(fmax((double)pj, LOG_FLOOR))));
    }
    if (probl)
      li = block_sum(li, shd);
    if (threadIdx.x == 0) {
      if (!probl) {
        const int32_t y = label[r];
        if (y < 0 || y >= D) {
          li = nan("");
        } else { /* the same value another thread stored into p */
          const float py = __double2float_rn(exp((double)logit<H>(x, base + y) - mx) / sum);
          li = -log(fmax((double)py, LOG_FLOOR));
        }
      }
      rowloss[r] = w ? __dmul_rn((double)w[r], li) : li;
    }
  }
}

/* One block: loss = scale * sum(rowloss) / sum(w) (or / N); 0 when the weights sum to 0. */
__global__ void softmax_loss_total(const double *rowloss, const float *w, float *loss,
                                   float scale, int64_t N) {
  __shared__ double sh[THREADS];
  double l = 0, tw = 0;
  for (int64_t i = threadIdx.x; i < N; i += THREADS) {
    l += rowloss[i];
    if (w)
      tw += w[i];
  }
  l = block_sum(l, sh);
  tw = w ? block_sum(tw, sh) : (double)N;
  if (threadIdx.x == 0)
    *loss = tw != 0 ? __double2float_rn(__dmul_rn((double)scale, l) / tw) : 0.0f;
}

} // namespace

extern "C" cudaError_t dmk_softmax_loss(cudaStream_t s, int xdtype, const void *x,
                                        const int32_t *label, const float *prob_label,
                                        const float *w, float *p, double *rowloss, float *loss,
                                        float scale, int64_t N, int64_t D) {
  unsigned g = N > 16384 ? 16384u : (unsigned)N;
  /* D = 0 needs no case of its own: a row then has no logits, so its loss is 0 with
   * probability labels (as the CPU's) and NaN with an integer label (none is in range). */
  if (N > 0) {
    if (xdtype == DMK_FLOAT16)
      softmax_loss_kernel<true><<<g, THREADS, 0, s>>>(x, label, prob_label, w, p, rowloss, N, D);
    else
      softmax_loss_kernel<false><<<g, THREADS, 0, s>>>(x, label, prob_label, w, p, rowloss, N,
                                                       D);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return e;
  softmax_loss_total<<<1, THREADS, 0, s>>>(rowloss, w, loss, scale, N);
  return cudaGetLastError();
}

/* k = scale * dloss / sum(w) (or / N), as the CPU: scale * dloss is a float product. */
namespace {
__global__ void softmax_grad_k(const float *w, const float *dloss, double *kbuf, float scale,
                               int64_t N) {
  __shared__ double sh[THREADS];
  double tw = 0;
  if (w) {
    for (int64_t i = threadIdx.x; i < N; i += THREADS)
      tw += w[i];
    tw = block_sum(tw, sh);
  } else {
    tw = (double)N;
  }
  if (threadIdx.x == 0)
    *kbuf = tw != 0 ? (double)__fmul_rn(scale, *dloss) / tw : 0;
}

template <bool H>
__global__ void softmax_grad_kernel(const int32_t *label, const float *probl, const float *w,
                                    const float *p, const double *kbuf, void *dx, int64_t N,
                                    int64_t D) {
  __shared__ double sh[THREADS];
  const double k = *kbuf;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t base = r * D;
    const double ki = w ? __dmul_rn(k, (double)w[r]) : k;
    double ts = 0;
    if (probl) {
      for (int64_t j = threadIdx.x; j < D; j += THREADS)
        ts += probl[base + j];
      ts = block_sum(ts, sh);
    }
    const int32_t y = probl ? 0 : label[r];
    const bool bad = !probl && (y < 0 || y >= D);
    for (int64_t j = threadIdx.x; j < D; j += THREADS) {
      double d;
      if (bad)
        d = nan("");
      else if (probl)
        d = __dmul_rn(ki, __dsub_rn(__dmul_rn((double)p[base + j], ts), (double)probl[base + j]));
      else
        d = __dmul_rn(ki, __dsub_rn((double)p[base + j], j == y ? 1.0 : 0.0));
      const float f = __double2float_rn(d);
      if (H)
        ((uint16_t *)dx)[base + j] = narrow<false>(f); /* via float, as the CPU's buffer */
      else
        ((float *)dx)[base + j] = f;
    }
  }
}

} // namespace

extern "C" cudaError_t dmk_softmax_loss_grad(cudaStream_t s, int xdtype, const int32_t *label,
                                             const float *prob_label, const float *w,
                                             const float *p, const float *dloss, double *kbuf,
                                             void *dx, float scale, int64_t N, int64_t D) {
  if (N == 0 || D == 0)
    return cudaSuccess;
  softmax_grad_k<<<1, THREADS, 0, s>>>(w, dloss, kbuf, scale, N);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return e;
  unsigned g = N > 16384 ? 16384u : (unsigned)N;
  if (xdtype == DMK_FLOAT16)
    softmax_grad_kernel<true><<<g, THREADS, 0, s>>>(label, prob_label, w, p, kbuf, dx, N, D);
  else
    softmax_grad_kernel<false><<<g, THREADS, 0, s>>>(label, prob_label, w, p, kbuf, dx, N, D);
  return cudaGetLastError();
}

namespace {
__global__ void label_xent_kernel(const float *x, const int32_t *label, float *y, int64_t N,
                                  int64_t D) {
  GRID_LOOP(r, N) {
    const int32_t l = label[r];
    y[r] = l < 0 || l >= D ? __int_as_float(0x7fc00000)
                           : __double2float_rn(-log(fmax((double)x[r * D + l], LOG_FLOOR)));
  }
}

__global__ void label_xent_grad_kernel(const float *x, const int32_t *label, const float *dy,
                                       float *dx, int64_t N, int64_t D) {
  GRID_LOOP(i, N * D) {
    const int64_t r = i / D, j = i % D;
    const int32_t l = label[r];
    float d = 0.0f;
    if (l < 0 || l >= D) {
      d = __int_as_float(0x7fc00000);
    } else if (j == l) { /* below the floor the forward is constant: derivative 0 */
      const float xl = x[i];
      d = (double)xl > LOG_FLOOR ? __fdiv_rn(-dy[r], xl) : 0.0f;
    }
    dx[i] = d;
  }
}

} // namespace

extern "C" cudaError_t dmk_label_xent(cudaStream_t s, const float *x, const int32_t *label,
                                      float *y, int64_t N, int64_t D) {
  if (N == 0)
    return cudaSuccess;
  label_xent_kernel<<<grid_for(N), THREADS, 0, s>>>(x, label, y, N, D);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_label_xent_grad(cudaStream_t s, const float *x, const int32_t *label,
                                           const float *dy, float *dx, int64_t N, int64_t D) {
  if (N == 0 || D == 0)
    return cudaSuccess;
  label_xent_grad_kernel<<<grid_for(N * D), THREADS, 0, s>>>(x, label, dy, dx, N, D);
  return cudaGetLastError();
}

namespace {
__global__ void averaged_loss_kernel(const float *x, float *y, int64_t n) {
  __shared__ double sh[THREADS];
  double t = 0;
  for (int64_t i = threadIdx.x; i < n; i += THREADS)
    t += x[i];
  t = block_sum(t, sh);
  if (threadIdx.x == 0)
    *y = n ? __double2float_rn(t / (double)n) : 0.0f; /* the mean of nothing is 0 */
}

__global__ void averaged_loss_grad_kernel(const float *dy, float *dx, int64_t n) {
  const float g = __double2float_rn((double)*dy / (double)n);
  GRID_LOOP(i, n) dx[i] = g;
}

} // namespace

extern "C" cudaError_t dmk_averaged_loss(cudaStream_t s, const float *x, float *y, int64_t n) {
  averaged_loss_kernel<<<1, THREADS, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_averaged_loss_grad(cudaStream_t s, const float *dy, float *dx,
                                              int64_t n) {
  if (n == 0)
    return cudaSuccess;
  averaged_loss_grad_kernel<<<grid_for(n), THREADS, 0, s>>>(dy, dx, n);
  return cudaGetLastError();
}

/* One block: the fraction of rows with fewer than top_k entries strictly above the
 * label's; NaN when a label is out of range. */
namespace {
__global__ void accuracy_kernel(const float *x, const int32_t *label, float *y, int64_t k,
                                int64_t N, int64_t D) {
  __shared__ double sh[THREADS];
  double correct = 0, bad = 0;
  for (int64_t r = threadIdx.x; r < N; r += THREADS) {
    const int32_t l = label[r];
    if (l < 0 || l >= D) {
      bad = 1;
      continue;
    }
    const float *row = x + r * D;
    const float v = row[l];
    int64_t greater = 0;
    for (int64_t j = 0; j < D && greater < k; j++)
      greater += row[j] > v;
    correct += greater < k;
  }
  correct = block_sum(correct, sh);
  bad = block_sum(bad, sh);
  if (threadIdx.x == 0)
    *y = bad != 0 ? __int_as_float(0x7fc00000)
         : N    ? __double2float_rn(correct / (double)N)
                : 0.0f;
}

} // namespace

extern "C" cudaError_t dmk_accuracy(cudaStream_t s, const float *x, const int32_t *label,
                                    float *y, int64_t top_k, int64_t N, int64_t D) {
  accuracy_kernel<<<1, THREADS, 0, s>>>(x, label, y, top_k, N, D);
  return cudaGetLastError();
}
