/* elementwise.cu: the elementwise CUDA kernels behind gpu/elementwise.c, gpu/cast.c and
 * gpu/fill.c: Add, Sub, Mul, Div, Sum, Scale, SumReduceLike, Relu and its gradient, the
 * activations of operators/unary_family.h and their gradients, casts
 * and fills. Entry points in cuda_kernels.h; the launch helpers and conventions shared
 * with the other .cu files are in cuda_common.cuh.
 *
 * Sum, Relu, ReluGradient and the FLOAT <-> FLOAT16/BFLOAT16 casts are bound by memory
 * bandwidth (in mixed-precision ResNet-50 training, mostly FP16 Relu and 2-term sums of
 * gradients), so they run as pack ops (cuda_common.cuh): when every pointer is 16-byte
 * aligned each thread moves 16 bytes per access (8 halves, 4 floats), and the last
 * n % 8 (or % 4) elements are done one by one in the same launch; otherwise the whole
 * tensor is done one element per iteration. Both paths apply the same per-element code,
 * so results are bit-identical whichever is taken.
 */
#include "cuda_common.cuh"
#include "operators/cast_rules.h"

/* ---- Add / Sub / Mul / Div ------------------------------------------------------ */

namespace {
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
 * accumulator is y's own type, or its unsigned twin). Lane l of pack i is element
 * i*W + l and is summed exactly as one element always was: the same terms, in input
 * order, with the same widening and rounding. */
template <class C> struct SumOp {
  typedef typename C::T T;
  typedef typename C::A A;
  Terms x;
  int k, first, last;
  float *acc;
  T *y;
  template <int W> __device__ void run(int64_t i) const {
    A sum[W];
    if (!first && acc) { /* a later launch of a 16-bit chain */
      const Pack<float, W> v = load_pack<W>(acc, i);
#pragma unroll
      for (int l = 0; l < W; l++)
        sum[l] = (A)v.e[l];
    } else { /* the first term, or the running sum in y */
      const Pack<T, W> v = load_pack<W>(first ? (const T *)x.p[0] : y, i);
#pragma unroll
      for (int l = 0; l < W; l++)
        sum[l] = C::load(v.e[l]);
    }
    /* Unrolled over the DMK_MAX_TERMS slots so that x.p is indexed by constants: a
     * runtime index would make every thread copy the kernel's arguments to local memory. */
#pragma unroll
    for (int j = 0; j < DMK_MAX_TERMS; j++) {
      if (j >= k)
        break;
      if (j == 0 && first)
        continue; /* it started the sum */
      const Pack<T, W> v = load_pack<W>((const T *)x.p[j], i);
#pragma unroll
      for (int l = 0; l < W; l++)
        sum[l] = sum[l] + C::load(v.e[l]);
    }
    if (acc && !last) {
      Pack<float, W> r;
#pragma unroll
      for (int l = 0; l < W; l++)
        r.e[l] = (float)sum[l];
      store_pack<W>(acc, i, r);
    } else {
      Pack<T, W> r;
#pragma unroll
      for (int l = 0; l < W; l++)
        r.e[l] = C::store(sum[l]);
      store_pack<W>(y, i, r);
    }
  }
};

/* Packed when y, acc (if any) and all k terms are 16-byte aligned. */
template <class C>
static cudaError_t launch_sum(cudaStream_t s, const Terms &t, int k, int first, int last,
                              float *acc, void *y, int64_t n) {
  bool vec = aligned16(y) && (!acc || aligned16(acc));
  for (int j = 0; j < k; j++)
    vec = vec && aligned16(t.p[j]);
  const SumOp<C> op = {t, k, first, last, acc, (typename C::T *)y};
  return launch_packed<pack_width<typename C::T>()>(s, op, n, vec);
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
struct ReluF32 {
  __device__ float operator()(float v) const { return v > 0.0f || v != v ? v : 0.0f; }
};
/* On the bits, as the CPU: a set sign with magnitude up to inf is negative (or -0). */
struct Relu16 {
  unsigned inf;
  __device__ uint16_t operator()(uint16_t x) const {
    const unsigned v = x;
    return (v & 0x8000u) && (v & 0x7fffu) <= inf ? (uint16_t)0 : (uint16_t)v;
  }
};
struct ReluGradF32 {
  __device__ float operator()(float y, float dy) const { return y > 0.0f ? dy : 0.0f; }
};
struct ReluGrad16 {
  unsigned inf;
  __device__ uint16_t operator()(uint16_t y, uint16_t dy) const {
    const unsigned v = y;
    return !(v & 0x8000u) && v != 0 && v <= inf ? dy : (uint16_t)0;
  }
};

/* y = f(in[0]) or f(in[0], in[1]), lane by lane. All input packs are read before y's is
 * written, so y may be an input (Relu in place, dX in dY's storage). */
template <class T, int NIN, class F> struct MapOp {
  const T *in[NIN];
  T *y;
  F f;
  template <int W> __device__ void run(int64_t i) const {
    Pack<T, W> v[NIN], r;
#pragma unroll
    for (int j = 0; j < NIN; j++)
      v[j] = load_pack<W>(in[j], i);
#pragma unroll
    for (int l = 0; l < W; l++) {
      if constexpr (NIN == 1)
        r.e[l] = f(v[0].e[l]);
      else
        r.e[l] = f(v[0].e[l], v[1].e[l]);
    }
    store_pack<W>(y, i, r);
  }
};

/* Packed when y and every input are 16-byte aligned. */
template <class T, int NIN, class F>
static cudaError_t launch_map(cudaStream_t s, const MapOp<T, NIN, F> &op, int64_t n) {
  bool vec = aligned16(op.y);
  for (int j = 0; j < NIN; j++)
    vec = vec && aligned16(op.in[j]);
  return launch_packed<pack_width<T>()>(s, op, n, vec);
}

/* The 16-bit infinity's bit pattern (its largest non-NaN magnitude). */
unsigned inf16(int dtype) { return dtype == DMK_BFLOAT16 ? 0x7f80u : 0x7c00u; }

} // namespace

extern "C" cudaError_t dmk_relu(cudaStream_t s, int dtype, const void *x, void *y, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (dtype == DMK_FLOAT)
    return launch_map(s, MapOp<float, 1, ReluF32>{{(const float *)x}, (float *)y, {}}, n);
  return launch_map(s, MapOp<uint16_t, 1, Relu16>{{(const uint16_t *)x}, (uint16_t *)y,
                                                  {inf16(dtype)}}, n);
}

extern "C" cudaError_t dmk_relu_grad(cudaStream_t s, int dtype, const void *y, const void *dy,
                                     void *dx, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (dtype == DMK_FLOAT)
    return launch_map(s, MapOp<float, 2, ReluGradF32>{{(const float *)y, (const float *)dy},
                                                      (float *)dx, {}}, n);
  return launch_map(s, MapOp<uint16_t, 2, ReluGrad16>{{(const uint16_t *)y,
                                                       (const uint16_t *)dy},
                                                      (uint16_t *)dx, {inf16(dtype)}}, n);
}

/* ---- the activations (operators/unary_formulas.h, shared with the CPU kernels) ----- */

namespace {
/* kind is uniform across the grid, so the formulas' switch does not diverge. */
struct UnaryF {
  dm_unary_kind kind;
  dm_unary_params p;
  __device__ float operator()(float x) const { return dm_unary_forward(kind, &p, x); }
};
struct UnaryGradF {
  dm_unary_kind kind;
  dm_unary_params p;
  __device__ float operator()(float s, float dy) const {
    return dm_unary_gradient(kind, &p, s, dy);
  }
};
/* A float functor on 16-bit patterns: widened, computed, rounded once. */
template <bool BF, class F> struct On16 {
  F f;
  __device__ uint16_t operator()(uint16_t x) const { return narrow<BF>(f(widen<BF>(x))); }
  __device__ uint16_t operator()(uint16_t a, uint16_t b) const {
    return narrow<BF>(f(widen<BF>(a), widen<BF>(b)));
  }
};

template <int NIN, class F>
cudaError_t map_any(cudaStream_t s, int dtype, const void *const *in, void *y, int64_t n,
                    const F &f) {
  if (n == 0)
    return cudaSuccess;
  if (dtype == DMK_FLOAT) {
    MapOp<float, NIN, F> op{{}, (float *)y, f};
    for (int j = 0; j < NIN; j++)
      op.in[j] = (const float *)in[j];
    return launch_map(s, op, n);
  }
  if (dtype != DMK_FLOAT16 && dtype != DMK_BFLOAT16)
    return cudaErrorInvalidValue;
  if (dtype == DMK_BFLOAT16) {
    MapOp<uint16_t, NIN, On16<true, F>> op{{}, (uint16_t *)y, {f}};
    for (int j = 0; j < NIN; j++)
      op.in[j] = (const uint16_t *)in[j];
    return launch_map(s, op, n);
  }
  MapOp<uint16_t, NIN, On16<false, F>> op{{}, (uint16_t *)y, {f}};
  for (int j = 0; j < NIN; j++)
    op.in[j] = (const uint16_t *)in[j];
  return launch_map(s, op, n);
}
} // namespace

extern "C" cudaError_t dmk_unary(cudaStream_t s, int dtype, dm_unary_kind kind,
                                 dm_unary_params p, const void *x, void *y, int64_t n) {
  if ((unsigned)kind >= (unsigned)DM_UN_NONE)
    return cudaErrorInvalidValue;
  const void *in[1] = {x};
  return map_any<1>(s, dtype, in, y, n, UnaryF{kind, p});
}

extern "C" cudaError_t dmk_unary_grad(cudaStream_t s, int dtype, dm_unary_kind kind,
                                      dm_unary_params p, const void *sv, const void *dy,
                                      void *dx, int64_t n) {
  if ((unsigned)kind >= (unsigned)DM_UN_NONE)
    return cudaErrorInvalidValue;
  const void *in[2] = {sv, dy};
  return map_any<2>(s, dtype, in, dx, n, UnaryGradF{kind, p});
}

/* ---- Cast (operators/cast_rules.h, shared with operators/cast.c) and fills ---- */

namespace {
__device__ __forceinline__ bool is_floating(int t) {
  return t == DMK_FLOAT || t == DMK_DOUBLE || t == DMK_FLOAT16 || t == DMK_BFLOAT16;
}

/* load_real and store_real are forced inline so that CastOp's calls on a pack held in
 * registers fold to the one case of their constant dtype, with no local-memory copy. */
__device__ __forceinline__ double load_real(int t, const void *src, int64_t i) {
  switch (t) {
  case DMK_FLOAT: return ((const float *)src)[i];
  case DMK_DOUBLE: return ((const double *)src)[i];
  case DMK_FLOAT16: return widen<false>(((const uint16_t *)src)[i]);
  default: return widen<true>(((const uint16_t *)src)[i]);
  }
}

#define LOAD_INT_(DT, T, U, lo, hi)                                                         \
  case DMK_##DT: return ((const T *)src)[i];
__device__ int64_t load_int(int t, const void *src, int64_t i) {
  switch (t) {
  DM_CAST_NARROW_INTS(LOAD_INT_)
  case DMK_INT64: return ((const int64_t *)src)[i];
  case DMK_BOOL: return ((const uint8_t *)src)[i] != 0;
  default: return 0; /* not numeric: refused on the host */
  }
}

#define STORE_REAL_(DT, T, U, lo, hi)                                                       \
  case DMK_##DT: ((T *)dst)[i] = (T)dm_cast_real_to_int(d, lo, hi); break;
__device__ __forceinline__ void store_real(int t, void *dst, int64_t i, double d) {
  switch (t) {
  case DMK_FLOAT: ((float *)dst)[i] = __double2float_rn(d); break;
  case DMK_DOUBLE: ((double *)dst)[i] = d; break;
  case DMK_FLOAT16: ((uint16_t *)dst)[i] = __half_as_ushort(__double2half(d)); break;
  case DMK_BFLOAT16: ((uint16_t *)dst)[i] = __bfloat16_as_ushort(__double2bfloat16(d)); break;
  case DMK_BOOL: ((uint8_t *)dst)[i] = d != 0; break;
  DM_CAST_NARROW_INTS(STORE_REAL_)
  case DMK_INT64: ((int64_t *)dst)[i] = dm_cast_real_to_int64(d); break;
  default: break;
  }
}

#define STORE_INT_(DT, T, U, lo, hi)                                                        \
  case DMK_##DT: ((T *)dst)[i] = (T)(U)v; break;
__device__ void store_int(int t, void *dst, int64_t i, int64_t v) {
  switch (t) {
  case DMK_FLOAT: ((float *)dst)[i] = __ll2float_rn(v); break;
  case DMK_DOUBLE: ((double *)dst)[i] = __ll2double_rn(v); break;
  case DMK_FLOAT16:
    ((uint16_t *)dst)[i] = __half_as_ushort(__double2half(dm_cast_int_to_double_odd(v)));
    break;
  case DMK_BFLOAT16:
    ((uint16_t *)dst)[i] = __bfloat16_as_ushort(__double2bfloat16(dm_cast_int_to_double_odd(v)));
    break;
  case DMK_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
  DM_CAST_NARROW_INTS(STORE_INT_)
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

/* The casts of mixed precision, FLOAT <-> FLOAT16/BFLOAT16, as pack ops of 8 elements
 * (16 bytes on the 16-bit side, 32 on the FLOAT side). Each lane goes through load_real
 * and store_real with the dtypes cast_kernel would pass them, so results are unchanged. */
template <int FROM, int TO> struct CastOp {
  typedef typename RD<FROM>::T TF;
  typedef typename RD<TO>::T TT;
  const TF *x;
  TT *y;
  template <int W> __device__ void run(int64_t i) const {
    const Pack<TF, W> a = load_pack<W>(x, i);
    Pack<TT, W> r;
#pragma unroll
    for (int l = 0; l < W; l++)
      store_real(TO, r.e, l, load_real(FROM, a.e, l));
    store_pack<W>(y, i, r);
  }
};

template <int FROM, int TO>
static cudaError_t cast_packed(cudaStream_t s, const void *x, void *y, int64_t n) {
  const CastOp<FROM, TO> op = {(const typename CastOp<FROM, TO>::TF *)x,
                               (typename CastOp<FROM, TO>::TT *)y};
  return launch_packed<pack_width<uint16_t>()>(s, op, n, true);
}

} // namespace

/* Aligned FLOAT <-> 16-bit casts are packed; unaligned pointers and the other pairs take
 * cast_kernel, one element per iteration. */
extern "C" cudaError_t dmk_cast(cudaStream_t s, int from, int to, const void *x, void *y,
                                int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (aligned16(x) && aligned16(y)) {
    if (from == DMK_FLOAT && to == DMK_FLOAT16)
      return cast_packed<DMK_FLOAT, DMK_FLOAT16>(s, x, y, n);
    if (from == DMK_FLOAT && to == DMK_BFLOAT16)
      return cast_packed<DMK_FLOAT, DMK_BFLOAT16>(s, x, y, n);
    if (from == DMK_FLOAT16 && to == DMK_FLOAT)
      return cast_packed<DMK_FLOAT16, DMK_FLOAT>(s, x, y, n);
    if (from == DMK_BFLOAT16 && to == DMK_FLOAT)
      return cast_packed<DMK_BFLOAT16, DMK_FLOAT>(s, x, y, n);
  }
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
