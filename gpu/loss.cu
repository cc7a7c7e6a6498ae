/* loss.cu: the FP32 loss CUDA kernels behind gpu/loss.c: SoftmaxWithLoss (logits
 * and dX may also be FP16) and its gradient, LabelCrossEntropy, AveragedLoss, their
 * gradients, and Accuracy. Entry points in cuda_kernels.h; launch helpers and conventions
 * in cuda_common.cuh.
 */
#include "cuda_common.cuh"

#define LOG_FLOOR 1e-20

/* log(max(p, 1e-20)) with a NaN p kept NaN, as on the CPU (fmax drops NaNs). */
__device__ inline double log_floored(double p) { return log(isnan(p) ? p : fmax(p, LOG_FLOOR)); }

/* ---- the block max -------------------------------------------------------------- */

namespace {
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

} // namespace

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
        li = __dsub_rn(li, __dmul_rn((double)probl[base + j], log_floored((double)pj)));
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
          li = -log_floored((double)py);
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
                           : __double2float_rn(-log_floored((double)x[r * D + l]));
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
 * label's and no NaN; NaN when a label is out of range. */
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
    int64_t greater = 0; /* a NaN anywhere in the row makes it wrong, as on the CPU */
    bool nan = isnan(v);
    for (int64_t j = 0; j < D && !nan; j++) {
      nan = isnan(row[j]);
      greater += row[j] > v;
    }
    correct += !nan && greater < k;
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
