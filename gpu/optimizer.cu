/* optimizer.cu: the update-op and loss-scaling CUDA kernels behind gpu/optimizer.c and
 * gpu/loss_scale.c: MomentumSGDUpdate, Adam and AdamW, WeightedSum (with the skip flag the update
 * ops and Iter share), UnscaleAndCheck, UpdateLossScale, and Iter and LearningRate on one
 * thread (so a step's counter and rate never go to the host). Entry points in
 * cuda_kernels.h; launch helpers and conventions in cuda_common.cuh. The learning rate
 * uses CUDA's double pow (within 2 ulp of glibc's), so it matches the CPU after the final
 * rounding to FP32, not necessarily in double.
 */
#include "cuda_common.cuh"
#include "update_math.cuh"

/* ---- update ops (operators/optimizer.c) ----------------------------------------- */

namespace {
__global__ void momentum_kernel(const float *g, const float *m, const float *lr, const float *p,
                                float *ng, float *nm, float *np, float mu, int nesterov,
                                const void *skipp, int skipt, int64_t n) {
  const bool skip = skip_set(skipp, skipt);
  const float lrv = *lr;
  GRID_LOOP(i, n) momentum_at(i, g, m, p, ng, nm, np, lrv, mu, nesterov, skip);
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
/* Adam, and AdamW when decoupled (weight decay wd, torch's epsilon). */
__global__ void adam_kernel(const float *w, const float *m, const float *v, const float *g,
                            const float *lr, const int64_t *iter, float *nw, float *nm,
                            float *nv, float b1, float b2, float eps, float wd, int decoupled,
                            const void *skipp, int skipt, int64_t n) {
  __shared__ float corr_s, decay_s, eps_s;
  const bool skip = skip_set(skipp, skipt);
  /* Caffe2's correction (and AdamW's constants), in double as the CPU computes them,
   * once per block. */
  if (threadIdx.x == 0) {
    corr_s = 0.0f, decay_s = 1.0f, eps_s = eps;
    const int64_t t = decoupled ? *iter : *iter + 1; /* optimizer.c's adam_run_as */
    if (!skip)
      corr_s = adam_correction(t, b1, b2);
    if (!skip && decoupled)
      adamw_constants(*lr, wd, b2, eps, t, &decay_s, &eps_s);
  }
  __syncthreads(); /* the shared values are always written: no uninitialised read */
  const float corr = corr_s, lrv = *lr, decay = decay_s, e = eps_s;
  GRID_LOOP(i, n) adamw_at(i, w, m, v, g, nw, nm, nv, lrv, corr, b1, b2, e, decay, skip);
}

} // namespace

extern "C" cudaError_t dmk_adam(cudaStream_t s, const float *w, const float *m, const float *v,
                                const float *g, const float *lr, const int64_t *iter, float *nw,
                                float *nm, float *nv, float b1, float b2, float eps,
                                const void *skip, int skip_dtype, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  adam_kernel<<<grid_for(n), THREADS, 0, s>>>(w, m, v, g, lr, iter, nw, nm, nv, b1, b2, eps,
                                              0.0f, 0, skip, skip_dtype, n);
  return cudaGetLastError();
}

extern "C" cudaError_t dmk_adamw(cudaStream_t s, const float *w, const float *m,
                                 const float *v, const float *g, const float *lr,
                                 const int64_t *iter, float *nw, float *nm, float *nv, float b1,
                                 float b2, float eps, float wd, const void *skip, int skip_dtype,
                                 int64_t n) {
  if (n == 0)
    return cudaSuccess;
  adam_kernel<<<grid_for(n), THREADS, 0, s>>>(w, m, v, g, lr, iter, nw, nm, nv, b1, b2, eps, wd,
                                              1, skip, skip_dtype, n);
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
__global__ void unscale_begin_kernel(const float *scale, float *found) {
  const float sv = *scale;
  *found = sv > 0 && !f32_nonfinite(sv) ? 0.0f : 1.0f;
}

} // namespace

extern "C" cudaError_t dmk_unscale_begin(cudaStream_t s, const float *scale, float *found) {
  unscale_begin_kernel<<<1, 1, 0, s>>>(scale, found);
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
