/* where.cu: the CUDA kernels of Where and WhereGradient (gpu/where.c), numpy's broadcast
 * as operators/where.c walks it. Entry points in cuda_kernels.h; conventions in
 * cuda_common.cuh.
 *
 * The gradient is deterministic: one thread per X (or Y) element sums, in FP32, the dZ
 * elements that element was broadcast to, in increasing Z order, which is the order the
 * CPU's walk over Z adds them in, so dX and dY are the CPU's bit for bit.
 */
#include "cuda_common.cuh"

namespace {
template <typename E>
__global__ void where_kernel(const uint8_t *c, const E *x, const E *y, E *z, dmk_bcast3 g,
                             int64_t n) {
  GRID_LOOP(e, n) {
    int64_t r = e, oc = 0, ox = 0, oy = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
      const int64_t i = r % g.dims[d];
      r /= g.dims[d];
      oc += i * g.st[0][d], ox += i * g.st[1][d], oy += i * g.st[2][d];
    }
    z[e] = c[oc] ? x[ox] : y[oy];
  }
}

/* Input k's (1 X, 2 Y) gradient: element t sums dZ where C is `want`. */
template <int T>
__global__ void where_grad_kernel(const uint8_t *c, const void *dz, void *dt, dmk_bcast3 g,
                                  int k, bool want, int64_t nt) {
  GRID_LOOP(t, nt) {
    int64_t base[DMK_MAX_DIMS], count = 1;
    for (int d = 0; d < g.ndim; d++) {
      const int64_t sd = g.st[k][d];
      base[d] = sd ? (t / sd) % g.dims[d] : 0;
      if (!sd)
        count *= g.dims[d];
    }
    float acc = 0.0f;
    for (int64_t q = 0; q < count; q++) {
      int64_t rem = q, zi = 0, mult = 1, oc = 0;
      int64_t idx[DMK_MAX_DIMS];
      for (int d = g.ndim - 1; d >= 0; d--) {
        if (g.st[k][d]) {
          idx[d] = base[d];
        } else {
          idx[d] = rem % g.dims[d];
          rem /= g.dims[d];
        }
      }
      for (int d = g.ndim - 1; d >= 0; d--) {
        zi += idx[d] * mult;
        mult *= g.dims[d];
        oc += idx[d] * g.st[0][d];
      }
      if ((c[oc] != 0) == want) {
        const float v = T == DMK_FLOAT ? ((const float *)dz)[zi]
                                       : widen<T == DMK_BFLOAT16>(((const uint16_t *)dz)[zi]);
        acc = __fadd_rn(acc, v);
      }
    }
    if (T == DMK_FLOAT)
      ((float *)dt)[t] = acc;
    else
      ((uint16_t *)dt)[t] = narrow<T == DMK_BFLOAT16>(acc);
  }
}
} // namespace

namespace {
template <typename E>
cudaError_t launch_where(cudaStream_t s, const uint8_t *c, const void *x, const void *y, void *z,
                         const dmk_bcast3 *g, int64_t n) {
  where_kernel<E><<<grid_for(n), THREADS, 0, s>>>(c, (const E *)x, (const E *)y, (E *)z, *g, n);
  return cudaGetLastError();
}

template <int T>
cudaError_t launch_where_grad(cudaStream_t s, const uint8_t *c, const void *dz, void *dt,
                              const dmk_bcast3 *g, int k, int want, int64_t nt) {
  where_grad_kernel<T><<<grid_for(nt), THREADS, 0, s>>>(c, dz, dt, *g, k, want != 0, nt);
  return cudaGetLastError();
}
} // namespace

extern "C" cudaError_t dmk_where(cudaStream_t s, const uint8_t *c, const void *x, const void *y,
                                 void *z, int elem_size, const dmk_bcast3 *g, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  switch (elem_size) {
  case 1: return launch_where<uint8_t>(s, c, x, y, z, g, n);
  case 2: return launch_where<uint16_t>(s, c, x, y, z, g, n);
  case 4: return launch_where<uint32_t>(s, c, x, y, z, g, n);
  case 8: return launch_where<uint64_t>(s, c, x, y, z, g, n);
  default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t dmk_where_grad(cudaStream_t s, const uint8_t *c, const void *dz,
                                      int dtype, void *dt, const dmk_bcast3 *g, int k,
                                      int want, int64_t nt) {
  if (nt == 0)
    return cudaSuccess;
  switch (dtype) {
  case DMK_FLOAT: return launch_where_grad<DMK_FLOAT>(s, c, dz, dt, g, k, want, nt);
  case DMK_FLOAT16: return launch_where_grad<DMK_FLOAT16>(s, c, dz, dt, g, k, want, nt);
  case DMK_BFLOAT16: return launch_where_grad<DMK_BFLOAT16>(s, c, dz, dt, g, k, want, nt);
  default: return cudaErrorInvalidValue;
  }
}
