/* basic_kernels.h: host entry points of the basic CUDA kernels (internal; only with
 * DM_HAVE_CUDA), defined in gpu/basic_elementwise.cu, gpu/basic_optim.cu and
 * gpu/basic_losses.cu and called by the kernels of gpu/kernels_basic.c.
 *
 * Plain C with CUDA runtime types only, so nvcc never sees core/ headers. Every function
 * enqueues work on `stream` and returns the launch's cudaError_t; none synchronises.
 * Pointers are device pointers. Element types are dm_dtype numbers, repeated here as
 * DMK_* (kernels_basic.c checks at compile time that they agree). Sizes are 64-bit;
 * a size of 0 launches nothing.
 */
#ifndef DM_GPU_BASIC_KERNELS_H
#define DM_GPU_BASIC_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  DMK_FLOAT = 1, DMK_INT32 = 2, DMK_BOOL = 5, DMK_UINT8 = 6, DMK_INT8 = 7, DMK_UINT16 = 8,
  DMK_INT16 = 9, DMK_INT64 = 10, DMK_FLOAT16 = 12, DMK_DOUBLE = 13, DMK_BFLOAT16 = 20
};
/* Add, Sub, Mul, Div. */
enum { DMK_ADD = 0, DMK_SUB = 1, DMK_MUL = 2, DMK_DIV = 3 };
/* Inputs one launch of Sum or WeightedSum takes; more are chained. */
#define DMK_MAX_TERMS 8

/* c[i] = a[i] op b[(i / post) % n] over pre * n * post elements (the legacy broadcast;
 * post = 1, n = numel without it). FLOAT, FLOAT16, BFLOAT16 (FP32 math, one rounding),
 * DOUBLE, INT32, INT64 (wrapping; an integer x / 0 gives 0). c may be a or (unbroadcast) b. */
cudaError_t dmk_binary(cudaStream_t s, int op, int dtype, const void *a, const void *b, void *c,
                       int64_t pre, int64_t n, int64_t post);
/* y = x[0] + ... + x[k-1] in input order (16-bit: summed in FP32). `first` zero: the running
 * sum is read from acc (16-bit: an FP32 buffer; else y itself). `last` zero: the sum is
 * written to acc (16-bit) instead of y. */
cudaError_t dmk_sum(cudaStream_t s, int dtype, const void *const *x, int k, int first, int last,
                    float *acc, void *y, int64_t n);
/* y = scale * x: FLOAT, FLOAT16, BFLOAT16 (FP32), DOUBLE (scale widened). */
cudaError_t dmk_scale(cudaStream_t s, int dtype, const void *x, void *y, float scale, int64_t n);
/* c[j] = sum over (p, q) of a[p][j][q] (a viewed as pre x n x post), summed in double and
 * rounded once into c's dtype (a's). */
cudaError_t dmk_sum_reduce_like(cudaStream_t s, int dtype, const void *a, void *c, int64_t pre,
                                int64_t n, int64_t post);
/* Relu and its gradient on FLOAT or 16-bit bit patterns (NaN passes, -0 -> +0). */
cudaError_t dmk_relu(cudaStream_t s, int dtype, const void *x, void *y, int64_t n);
cudaError_t dmk_relu_grad(cudaStream_t s, int dtype, const void *y, const void *dy, void *dx,
                          int64_t n);
/* y = x converted from dtype `from` to `to` with operators/cast.c's rules. y may be x when
 * the element sizes match. */
cudaError_t dmk_cast(cudaStream_t s, int from, int to, const void *x, void *y, int64_t n);
/* n elements of `size` bytes (1, 2, 4 or 8) set to the low bytes of `bits`. */
cudaError_t dmk_fill(cudaStream_t s, void *y, int size, uint64_t bits, int64_t n);

/* Update ops. skip: NULL or a one-element device scalar of dtype skip_dtype (nonzero or
 * NaN: the step is skipped; outputs not in their input's storage get a copy). */
cudaError_t dmk_momentum_sgd(cudaStream_t s, const float *g, const float *m, const float *lr,
                             const float *p, float *ng, float *nm, float *np, float mu,
                             int nesterov, const void *skip, int skip_dtype, int64_t n);
cudaError_t dmk_adam(cudaStream_t s, const float *w, const float *m, const float *v,
                     const float *g, const float *lr, const int64_t *iter, float *nw, float *nm,
                     float *nv, float b1, float b2, float eps, const void *skip, int skip_dtype,
                     int64_t n);
/* y = sum of w[j] * x[j] over k pairs (w one-element device scalars), chained like dmk_sum
 * with y as the running sum. With skip set, the first launch copies x0 into y (if they
 * differ) and every launch leaves y otherwise alone. */
cudaError_t dmk_weighted_sum(cudaStream_t s, const float *const *x, const float *const *w, int k,
                             int first, float *y, const void *skip, int skip_dtype, int64_t n);
/* UnscaleAndCheck: dmk_unscale_begin sets *found to 1.0f when the scale is not positive
 * and finite (the CPU's error, which the device cannot report), else 0.0f; then one
 * dmk_unscale per gradient: y = x * (float)(1 / (double)*scale) (FLOAT or FLOAT16), and
 * *found = 1.0f when any x or y is inf/NaN (only ever set, never cleared). */
cudaError_t dmk_unscale_begin(cudaStream_t s, const float *scale, float *found);
cudaError_t dmk_unscale(cudaStream_t s, int dtype, const void *x, void *y, const float *scale,
                        float *found, int64_t n);
/* UpdateLossScale's arithmetic on one thread (every input read before an output is
 * written, so the outputs may be the inputs). */
cudaError_t dmk_update_loss_scale(cudaStream_t s, const float *scale, const float *found,
                                  const int64_t *good, const int64_t *skipped, float *nscale,
                                  int64_t *ngood, int64_t *nskipped, int dynamic, double growth,
                                  double backoff, double min_scale, double max_scale,
                                  int64_t interval);

/* Losses, FP32 (SoftmaxWithLoss's logits and dX may also be FLOAT16). A label outside
 * [0, D) cannot be reported without a host sync: it makes the row's loss, gradient or
 * accuracy NaN instead. rowloss: N doubles of scratch. w: NULL or N weights. */
cudaError_t dmk_softmax_loss(cudaStream_t s, int xdtype, const void *x, const int32_t *label,
                             const float *prob_label, const float *w, float *p, double *rowloss,
                             float *loss, float scale, int64_t N, int64_t D);
/* kbuf: one double of scratch. dx in xdtype. */
cudaError_t dmk_softmax_loss_grad(cudaStream_t s, int xdtype, const int32_t *label,
                                  const float *prob_label, const float *w, const float *p,
                                  const float *dloss, double *kbuf, void *dx, float scale,
                                  int64_t N, int64_t D);
cudaError_t dmk_label_xent(cudaStream_t s, const float *x, const int32_t *label, float *y,
                           int64_t N, int64_t D);
cudaError_t dmk_label_xent_grad(cudaStream_t s, const float *x, const int32_t *label,
                                const float *dy, float *dx, int64_t N, int64_t D);
cudaError_t dmk_averaged_loss(cudaStream_t s, const float *x, float *y, int64_t n);
cudaError_t dmk_averaged_loss_grad(cudaStream_t s, const float *dy, float *dx, int64_t n);
cudaError_t dmk_accuracy(cudaStream_t s, const float *x, const int32_t *label, float *y,
                         int64_t top_k, int64_t N, int64_t D);

#ifdef __cplusplus
}
#endif
#endif
