/* multi_tensor.cu: the multi-tensor kernels behind gpu/multi_tensor.c and
 * gpu/loss_scale.c: MultiMomentumSGDUpdate, MultiAdam, MultiWeightedSum and
 * UnscaleAndCheck update every
 * tensor of their lists in ONE launch, Apex's multi_tensor_apply: the host uploads a table
 * of tensors (pointers, sizes) and chunks (cuda_kernels.h), and each block walks its
 * chunks. The arithmetic per element is update_math.cuh's, the single-tensor kernels'
 * (optimizer.cu), so the results are bit-identical to one launch per tensor.
 */
#include "cuda_common.cuh"
#include "update_math.cuh"

namespace {
/* Elements [lo, hi) of tensor t: the chunk c of the table. */
struct Range {
  const dmk_mt_tensor *t;
  int64_t lo, hi;
};

__device__ __forceinline__ Range chunk_range(const dmk_mt_tensor *ts, const dmk_mt_chunk *cs,
                                             int64_t b) {
  const dmk_mt_chunk c = cs[b];
  const dmk_mt_tensor *t = &ts[c.tensor];
  const int64_t lo = (int64_t)c.chunk * DMK_MT_CHUNK;
  const int64_t hi = lo + DMK_MT_CHUNK < t->n ? lo + DMK_MT_CHUNK : t->n;
  return Range{t, lo, hi};
}

#define CHUNK_LOOP(b, nchunks) for (int64_t b = blockIdx.x; b < (nchunks); b += gridDim.x)
#define ELEM_LOOP(i, r) for (int64_t i = (r).lo + threadIdx.x; i < (r).hi; i += blockDim.x)

unsigned grid_for_chunks(int64_t nchunks) {
  return nchunks > 65535 ? 65535u : (unsigned)nchunks;
}

__global__ void multi_momentum_kernel(const dmk_mt_tensor *ts, const dmk_mt_chunk *cs,
                                      int64_t nchunks, const float *lr, float mu, int nesterov,
                                      const void *skipp, int skipt) {
  const bool skip = skip_set(skipp, skipt);
  const float lrv = *lr;
  CHUNK_LOOP(b, nchunks) {
    const Range r = chunk_range(ts, cs, b);
    const float *g = (const float *)r.t->p[0], *m = (const float *)r.t->p[1],
                *p = (const float *)r.t->p[2];
    float *ng = (float *)r.t->p[3], *nm = (float *)r.t->p[4], *np = (float *)r.t->p[5];
    ELEM_LOOP(i, r) momentum_at(i, g, m, p, ng, nm, np, lrv, mu, nesterov, skip);
  }
}

__global__ void multi_adam_kernel(const dmk_mt_tensor *ts, const dmk_mt_chunk *cs,
                                  int64_t nchunks, const float *lr, const int64_t *iter, float b1,
                                  float b2, float eps, const void *skipp, int skipt) {
  __shared__ float corr_s;
  const bool skip = skip_set(skipp, skipt);
  if (threadIdx.x == 0)
    corr_s = skip ? 0.0f : adam_correction(*iter + 1, b1, b2); /* Caffe2's t */
  __syncthreads();
  const float corr = corr_s, lrv = *lr;
  CHUNK_LOOP(b, nchunks) {
    const Range r = chunk_range(ts, cs, b);
    const float *w = (const float *)r.t->p[0], *m = (const float *)r.t->p[1],
                *v = (const float *)r.t->p[2], *g = (const float *)r.t->p[3];
    float *nw = (float *)r.t->p[4], *nm = (float *)r.t->p[5], *nv = (float *)r.t->p[6];
    ELEM_LOOP(i, r) adam_at(i, w, m, v, g, nw, nm, nv, lrv, corr, b1, b2, eps, skip);
  }
}

__global__ void multi_wsum_kernel(const dmk_mt_tensor *ts, const dmk_mt_chunk *cs,
                                  int64_t nchunks, const float *w0, const float *w1,
                                  const void *skipp, int skipt) {
  const bool skip = skip_set(skipp, skipt);
  const float a = *w0, b = *w1;
  CHUNK_LOOP(c, nchunks) {
    const Range r = chunk_range(ts, cs, c);
    const float *x = (const float *)r.t->p[0], *z = (const float *)r.t->p[1];
    float *y = (float *)r.t->p[2];
    ELEM_LOOP(i, r) wsum2_at(i, x, z, y, a, b, skip);
  }
}

__global__ void multi_unscale_kernel(const dmk_mt_tensor *ts, const dmk_mt_chunk *cs,
                                     int64_t nchunks, const float *scale, float *found) {
  const float inv = unscale_inverse(scale);
  bool bad = false;
  CHUNK_LOOP(b, nchunks) {
    const Range r = chunk_range(ts, cs, b);
    const void *x = r.t->p[0];
    void *y = r.t->p[1];
    if (r.t->dtype == DMK_FLOAT) {
      ELEM_LOOP(i, r) bad |= unscale_elem<false>(x, y, i, inv);
    } else {
      ELEM_LOOP(i, r) bad |= unscale_elem<true>(x, y, i, inv);
    }
  }
  /* Every writer stores the same value, so plain stores race harmlessly. */
  if (bad)
    *found = 1.0f;
}

} // namespace

extern "C" cudaError_t dmk_multi_momentum_sgd(cudaStream_t s, const dmk_mt_tensor *t,
                                              const dmk_mt_chunk *c, int64_t nchunks,
                                              const float *lr, float mu, int nesterov,
                                              const void *skip, int skip_dtype) {
  if (nchunks == 0)
    return cudaSuccess;
  multi_momentum_kernel<<<grid_for_chunks(nchunks), THREADS, 0, s>>>(t, c, nchunks, lr, mu,
                                                                     nesterov, skip, skip_dtype);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_multi_adam(cudaStream_t s, const dmk_mt_tensor *t,
                                      const dmk_mt_chunk *c, int64_t nchunks, const float *lr,
                                      const int64_t *iter, float b1, float b2, float eps,
                                      const void *skip, int skip_dtype) {
  if (nchunks == 0)
    return cudaSuccess;
  multi_adam_kernel<<<grid_for_chunks(nchunks), THREADS, 0, s>>>(t, c, nchunks, lr, iter, b1, b2,
                                                                 eps, skip, skip_dtype);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_multi_weighted_sum(cudaStream_t s, const dmk_mt_tensor *t,
                                              const dmk_mt_chunk *c, int64_t nchunks,
                                              const float *w0, const float *w1, const void *skip,
                                              int skip_dtype) {
  if (nchunks == 0)
    return cudaSuccess;
  multi_wsum_kernel<<<grid_for_chunks(nchunks), THREADS, 0, s>>>(t, c, nchunks, w0, w1, skip,
                                                                 skip_dtype);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_multi_unscale(cudaStream_t s, const dmk_mt_tensor *t,
                                         const dmk_mt_chunk *c, int64_t nchunks,
                                         const float *scale, float *found) {
  if (nchunks == 0)
    return cudaSuccess;
  multi_unscale_kernel<<<grid_for_chunks(nchunks), THREADS, 0, s>>>(t, c, nchunks, scale, found);
  return cudaGetLastError();
}
