/* tensor_ops.cu: the device side of gpu/tensor_ops.c: the block copies of Concat and
 * Split, a general strided Transpose, and small host-to-device writes carried in kernel
 * parameters (Reshape's old_shape, Concat's split_info). Pure data movement: no
 * arithmetic, so the results are the CPU's bit for bit. Loops are grid-stride with
 * 64-bit indices (cuda_common.cuh). Nothing here synchronises with the host.
 */
#include <string.h>

#include "cuda_common.cuh"

namespace {

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
  int64_t dims[DMK_MAX_DIMS]; /* Y's, after merging */
  int64_t st[DMK_MAX_DIMS];   /* X's step per Y dim */
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

/* NCHW2NHWCPad: y (N, HW, Cp) from x (N, C, HW), channels >= C zero; one pass. */
template <class T>
__global__ void nhwc_pad_kernel(const T *x, T *y, int64_t C, int64_t HW, int64_t Cp, int64_t n) {
  GRID_LOOP(k, n) {
    const int64_t c = k % Cp, r = k / Cp, sp = r % HW, b = r / HW;
    y[k] = c < C ? x[(b * C + c) * HW + sp] : T(0);
  }
}

template <class T>
cudaError_t launch_nhwc_pad(cudaStream_t s, const void *x, void *y, int64_t C, int64_t HW,
                            int64_t Cp, int64_t n) {
  nhwc_pad_kernel<T><<<grid_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, C, HW, Cp, n);
  return cudaGetLastError();
}

struct SmallBytes {
  unsigned char b[DMK_SMALL_BYTES];
};

__global__ void small_kernel(unsigned char *dst, SmallBytes v, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    dst[i] = v.b[i];
}

} // namespace

extern "C" cudaError_t dmk_copy_blocks(cudaStream_t s, const void *x, void *y, int es,
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

extern "C" cudaError_t dmk_transpose(cudaStream_t s, const void *x, void *y, int es, int ndim,
                                     const int64_t *ydims, const int64_t *xstride, int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  if (ndim < 0 || ndim > DMK_MAX_DIMS)
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

extern "C" cudaError_t dmk_write_small(cudaStream_t s, void *dst, const void *src, size_t n) {
  for (size_t off = 0; off < n; off += DMK_SMALL_BYTES) {
    const size_t k = n - off < DMK_SMALL_BYTES ? n - off : DMK_SMALL_BYTES;
    SmallBytes v = {}; /* the unused tail is sent too; zeroed, not left uninitialised */
    memcpy(v.b, (const unsigned char *)src + off, k);
    small_kernel<<<1, THREADS, 0, s>>>((unsigned char *)dst + off, v, (int)k);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

extern "C" cudaError_t dmk_nhwc_pad(cudaStream_t s, const void *x, void *y, int es, int64_t N,
                                    int64_t C, int64_t HW, int64_t Cp) {
  const int64_t n = N * HW * Cp;
  if (n <= 0)
    return cudaSuccess;
  if (C > Cp)
    return cudaErrorInvalidValue;
  switch (es) { /* zero bits are 0 in every float dtype */
  case 1: return launch_nhwc_pad<uint8_t>(s, x, y, C, HW, Cp, n);
  case 2: return launch_nhwc_pad<uint16_t>(s, x, y, C, HW, Cp, n);
  case 4: return launch_nhwc_pad<uint32_t>(s, x, y, C, HW, Cp, n);
  case 8: return launch_nhwc_pad<unsigned long long>(s, x, y, C, HW, Cp, n);
  default: return cudaErrorInvalidValue;
  }
}
