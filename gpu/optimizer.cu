/* optimizer.cu: the update-op and loss-scaling CUDA kernels behind gpu/optimizer.c and
 * gpu/loss_scale.c: MomentumSGDUpdate, Adam, WeightedSum (with the skip flag the update
 * ops and Iter share), UnscaleAndCheck, UpdateLossScale, and Iter and LearningRate on one
 * thread (so a step's counter and rate never go to the host). Entry points in
 * cuda_kernels.h; launch helpers and conventions in cuda_common.cuh. The learning rate
 * uses CUDA's double pow (within 2 ulp of glibc's), so it matches the CPU after the final
 * rounding to FP32, not necessarily in double.
 */
#include "cuda_common.cuh"

/* ---- the skip flag -------------------------------------------------------------- */

namespace {
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

} // namespace

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

/* ---- Iter, LearningRate (operators/optimizer.c) ---------------------------------- */

namespace {

__global__ void iter_kernel(int64_t *it, int fresh, const void *skip, int st) {
  int64_t cur = fresh ? 0 : *it;
  if (!skip_set(skip, st) && cur != (int64_t)0x7fffffffffffffffLL)
    cur += 1;
  *it = cur;
}

/* lr_policy.c's dm_lr_multiplier, operation for operation. */
__global__ void lr_kernel(const int64_t *iterp, float *lr, dmk_lr_params p) {
  const int64_t iter = *iterp;
  if (iter < 0) {
    *lr = __int_as_float(0x7fc00000); /* NaN: the CPU refuses a negative iteration */
    return;
  }
  double it = (double)iter, m = 1;
  switch (p.kind) {
  case DMK_LR_STEP: m = pow(p.gamma, (double)(iter / p.stepsize)); break;
  case DMK_LR_EXP: m = pow(p.gamma, it); break;
  case DMK_LR_INV: m = pow(__dadd_rn(1.0, __dmul_rn(p.gamma, it)), -p.power); break;
  case DMK_LR_POLY:
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

} // namespace

extern "C" cudaError_t dmk_iter(cudaStream_t s, int64_t *iter, int fresh, const void *skip,
                                int skip_dtype) {
  iter_kernel<<<1, 1, 0, s>>>(iter, fresh, skip, skip_dtype);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_learning_rate(cudaStream_t s, const int64_t *iter, float *lr,
                                         dmk_lr_params p) {
  lr_kernel<<<1, 1, 0, s>>>(iter, lr, p);
  return cudaGetLastError();
}
