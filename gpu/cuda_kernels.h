/* cuda_kernels.h: the one boundary between the C files of gpu/ and the nvcc-compiled .cu
 * files (internal; only with DM_HAVE_CUDA): plain C declarations of every launch function,
 * with extern "C" guards, so nvcc never sees core/ headers and the C files see no device
 * code.
 *
 * Every dmk_ function enqueues work on stream `s` and returns the launch's cudaError_t;
 * none synchronises. Pointers are device pointers; parameters (the learning-rate policy,
 * the transpose's strides, the dropout key) travel by value in the launch, so the host
 * may change its copies as soon as a call returns. Sizes are 64-bit; a size of 0
 * launches nothing.
 *
 * Element types are dm_dtype's numbers, repeated here as DMK_* (the one dtype enum across
 * this boundary; gpu/register.c checks at compile time that they agree). The device code
 * of each family: elementwise.cu (arithmetic, Relu, casts, fills), optimizer.cu (update
 * ops, loss scaling, Iter, LearningRate), multi_tensor.cu (the multi-tensor updates and
 * unscale), loss.cu, tensor_ops.cu (Concat/Split blocks,
 * Transpose, small writes), dropout.cu, dnn_aux.cu (the small kernels around cuDNN and
 * cuBLAS calls) and fp16_convert.cu (the self-test conversion).
 */
#ifndef DM_GPU_CUDA_KERNELS_H
#define DM_GPU_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "operators/unary_formulas.h" /* plain C: the activations' kinds and parameters */

#ifdef __cplusplus
extern "C" {
#endif

/* dm_dtype's numbers (core/demitasse.h). */
enum {
  DMK_FLOAT = 1, DMK_INT32 = 2, DMK_BOOL = 5, DMK_UINT8 = 6, DMK_INT8 = 7, DMK_UINT16 = 8,
  DMK_INT16 = 9, DMK_INT64 = 10, DMK_FLOAT16 = 12, DMK_DOUBLE = 13, DMK_BFLOAT16 = 20
};
#define DMK_MAX_DIMS 8 /* DM_MAX_DIMS */

/* ---- elementwise.cu, optimizer.cu, loss.cu -------------------------------------- */

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
/* The activations of operators/unary_family.h (kind: a row's dm_unary_kind; p: its
 * arguments), computed in FP32 from FLOAT, FLOAT16 or BFLOAT16 by unary_formulas.h, as
 * the CPU kernels do: y = f(x); dx = f'(s, dy), s being Y (X where the row's reads_x is
 * 1). y/dx may be x/dy. */
cudaError_t dmk_unary(cudaStream_t s, int dtype, dm_unary_kind kind, dm_unary_params p,
                      const void *x, void *y, int64_t n);
cudaError_t dmk_unary_grad(cudaStream_t s, int dtype, dm_unary_kind kind, dm_unary_params p,
                           const void *sv, const void *dy, void *dx, int64_t n);
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
/* AdamW (torch's, with Adam's negative lr): dmk_adam's step with weight decay wd and eps
 * added to sqrt(v / (1 - b2^t)), as operators/optimizer.c. */
cudaError_t dmk_adamw(cudaStream_t s, const float *w, const float *m, const float *v,
                      const float *g, const float *lr, const int64_t *iter, float *nw, float *nm,
                      float *nv, float b1, float b2, float eps, float wd, const void *skip,
                      int skip_dtype, int64_t n);
/* y = sum of w[j] * x[j] over k pairs (w one-element device scalars), chained like dmk_sum
 * with y as the running sum. With skip set, the first launch copies x0 into y (if they
 * differ) and every launch leaves y otherwise alone. */
cudaError_t dmk_weighted_sum(cudaStream_t s, const float *const *x, const float *const *w, int k,
                             int first, float *y, const void *skip, int skip_dtype, int64_t n);
/* UnscaleAndCheck: dmk_unscale_begin sets *found to 1.0f when the scale is not positive
 * and finite (the CPU's error, which the device cannot report), else 0.0f; then one
 * dmk_multi_unscale over every gradient (below) only ever sets it. */
cudaError_t dmk_unscale_begin(cudaStream_t s, const float *scale, float *found);
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

/* ---- optimizer.cu (Iter, LearningRate), tensor_ops.cu, dropout.cu ------------------ */

/* lr_policy.h's dm_lr_kind numbers. */
enum { DMK_LR_FIXED = 0, DMK_LR_STEP = 1, DMK_LR_EXP = 2, DMK_LR_INV = 3, DMK_LR_POLY = 4 };

/* Iter: *iter += 1 unless skip (NULL, or a one-element device scalar of skip_dtype) is
 * nonzero or NaN. fresh: the count starts from 0 (an empty blob), so *iter is not read
 * and becomes 1, or 0 when skipped. INT64_MAX stays INT64_MAX (the CPU's overflow error
 * cannot be reported from the device). */
cudaError_t dmk_iter(cudaStream_t s, int64_t *iter, int fresh, const void *skip, int skip_dtype);

/* LearningRate's parameters, parsed and checked on the host (lr_policy.h). */
typedef struct dmk_lr_params {
  int kind;
  int64_t stepsize, max_iter, warmup_iter;
  double gamma, power, warmup_start;
  double base_lr; /* the FLOAT argument, widened */
} dmk_lr_params;
/* *lr = (float)(base_lr * multiplier(*iter)), lr_policy.c's arithmetic in double in its
 * order. A negative *iter (the CPU's error) gives NaN. */
cudaError_t dmk_learning_rate(cudaStream_t s, const int64_t *iter, float *lr, dmk_lr_params p);

/* y[o * ypitch + yoff + j] = x[o * xpitch + xoff + j] for o < rows, j < cols, in elements
 * of es bytes (1, 2, 4 or 8): one input of Concat or one output of Split. */
cudaError_t dmk_copy_blocks(cudaStream_t s, const void *x, void *y, int es, int64_t rows,
                            int64_t cols, int64_t xpitch, int64_t xoff, int64_t ypitch,
                            int64_t yoff);

/* Transpose: y (ndim dims ydims, row-major) element k = x at sum idx[d] * xstride[d], idx
 * being k's multi-index in ydims; es bytes per element (1, 2, 4 or 8); n elements. */
cudaError_t dmk_transpose(cudaStream_t s, const void *x, void *y, int es, int ndim,
                          const int64_t *ydims, const int64_t *xstride, int64_t n);

/* NCHW2NHWCPad: y (N, HW, Cp) = x (N, C, HW) transposed, channels C..Cp-1 zero; es bytes
 * per element (1, 2, 4 or 8). */
cudaError_t dmk_nhwc_pad(cudaStream_t s, const void *x, void *y, int es, int64_t N, int64_t C,
                         int64_t HW, int64_t Cp);

/* Copies n bytes from host memory into dst through kernel parameters, in chunks of
 * DMK_SMALL_BYTES per launch: the launch captures the bytes, so src may change as soon as
 * this returns, and unlike a staged cudaMemcpyAsync nothing waits for an earlier copy
 * (Reshape's old_shape, Concat's split_info). */
#define DMK_SMALL_BYTES 2048
cudaError_t dmk_write_small(cudaStream_t s, void *dst, const void *src, size_t n);

/* Dropout in training: keep element i when (mix64(key + i * golden) >> 11) * 2^-53 >=
 * ratio (dropout.c's test), mask[i] = keep, y[i] = keep ? x[i] * scale : 0 in double,
 * rounded once to dtype (FLOAT, FLOAT16 or BFLOAT16). y may be x. */
cudaError_t dmk_dropout(cudaStream_t s, int dtype, const void *x, void *y, uint8_t *mask,
                        uint64_t key, float ratio, double scale, int64_t n);
/* DropoutGrad: dx[i] = mask[i] ? dy[i] * scale : 0, as dmk_dropout. dx may be dy. */
cudaError_t dmk_dropout_grad(cudaStream_t s, int dtype, const void *dy, const uint8_t *mask,
                             void *dx, double scale, int64_t n);

/* ---- dnn_aux.cu: around the cuDNN/cuBLAS calls ------------------------------------- */

/* The 16-bit-or-FP32 tensors below take DMK_FLOAT16, DMK_BFLOAT16 or (any other value)
 * FLOAT; the kernels load them exactly into FP32, compute in FP32 (sums in double) and
 * round each output once. */

/* out[i] = in[i] + b[(i / inner) % nb] for i < n, computed in FP32 and stored once in
 * out_t (so an FP32 GEMM result plus bias rounds to FP16 a single time). in and out may
 * be the same buffer (then in_t == out_t). */
cudaError_t dmk_bias_add(cudaStream_t s, const void *in, int in_t, void *out, int out_t,
                         const void *b, int b_t, int64_t n, int64_t inner, int64_t nb);

/* db[j] = sum over rows i < m of dy[i * nc + j] (dy (m, nc) of dy_t), accumulated in
 * double and rounded once (from the double) into db_t: FCGradient's bias gradient. */
cudaError_t dmk_col_sums(cudaStream_t s, const void *dy, int dy_t, int64_t m, int64_t nc,
                         void *db, int db_t);

/* SpatialBN's running statistics with Caffe2's convention, from cuDNN's batch results
 * (bmean, bvar_unbiased: the running outputs of a cuDNN training call with factor 1):
 *   rm_out = rm * mom + bmean * (1 - mom)
 *   rv_out = rv * mom + bvar_biased * (1 - mom), bvar_biased = bvar_unbiased * (M-1)/M
 * (0 when M == 1). rm_out may be rm and rv_out rv (in place). */
cudaError_t dmk_bn_running(cudaStream_t s, const float *rm, const float *rv,
                           const float *bmean, const float *bvar_unbiased, float *rm_out,
                           float *rv_out, int64_t C, int64_t M, float mom);

/* SpatialBNGradient of an is_test op (mean and var constants): per channel c over its
 * M = N * HW values, inv = 1 / sqrt(var + eps),
 *   dbias = sum dy, dscale = sum dy * (x - mean) * inv, dx = dy * scale * inv.
 * X, dY, dX of t, layout NCHW (nhwc 0) or NHWC; the rest FP32 (C). */
cudaError_t dmk_bn_grad_test(cudaStream_t s, int t, int nhwc, int64_t N, int64_t C,
                             int64_t HW, const void *x, const void *dy, const float *scale,
                             const float *mean, const float *var, double eps, void *dx,
                             float *dscale, float *dbias);

/* LRN's optional FP32 scale output: scale = bias + alpha_n * sum of x^2 over the window
 * [c - pre, c - pre + size) clipped to [0, C), pre = (size - 1) / 2, per position (n, hw);
 * alpha_n = alpha / size in double, as lrn.c. */
cudaError_t dmk_lrn_scale(cudaStream_t s, int t, int nhwc, int64_t N, int64_t C, int64_t HW,
                          const void *x, int size, double alpha_n, double bias, float *scale);

/* ---- fp16_convert.cu: the self-test conversion ------------------------------------- */

/* Copies n floats to device `device`, converts them to FP16 there (round to nearest
 * even, as __float2half_rn) and copies the bit patterns back into host_out. Returns 0 or
 * the cudaError_t of the first failing call (as an int) with a message in `msg`. */
int dmk_float_to_half_host(int device, const float *host_in, uint16_t *host_out, size_t n,
                           char *msg, size_t cap);

/* ---- multi_tensor.cu: one launch over lists of tensors (Apex's multi_tensor_apply) -- */

/* A device-side table drives each launch: one dmk_mt_tensor per tensor (its pointers and
 * size) and one dmk_mt_chunk per DMK_MT_CHUNK elements of each non-empty tensor; block b
 * handles chunks b, b + gridDim.x, ... The host builds it and uploads it on the stream
 * (gpu/multi_tensor.c), so pointers may change from run to run at no cost but the copy. */
#define DMK_MT_CHUNK 16384
#define DMK_MT_PTRS 7
typedef struct dmk_mt_tensor {
  void *p[DMK_MT_PTRS]; /* per kernel below: inputs, then outputs */
  int64_t n;            /* elements */
  int32_t dtype;        /* dmk_multi_unscale: DMK_FLOAT or DMK_FLOAT16 */
  int32_t pad;
} dmk_mt_tensor;
typedef struct dmk_mt_chunk {
  int32_t tensor, chunk; /* elements [chunk * DMK_MT_CHUNK, +DMK_MT_CHUNK) of tensor */
} dmk_mt_chunk;
/* MultiMomentumSGDUpdate: p = {g, m, param, ng, nm, nparam}; dmk_momentum_sgd per tensor. */
cudaError_t dmk_multi_momentum_sgd(cudaStream_t s, const dmk_mt_tensor *t, const dmk_mt_chunk *c,
                                   int64_t nchunks, const float *lr, float mu, int nesterov,
                                   const void *skip, int skip_dtype);
/* MultiAdam: p = {w, m1, m2, g, nw, nm1, nm2}; dmk_adam per tensor. */
cudaError_t dmk_multi_adam(cudaStream_t s, const dmk_mt_tensor *t, const dmk_mt_chunk *c,
                           int64_t nchunks, const float *lr, const int64_t *iter, float b1,
                           float b2, float eps, const void *skip, int skip_dtype);
/* MultiWeightedSum: p = {x, z, y}, y = w0 x + w1 z (dmk_weighted_sum's two pairs). */
cudaError_t dmk_multi_weighted_sum(cudaStream_t s, const dmk_mt_tensor *t, const dmk_mt_chunk *c,
                                   int64_t nchunks, const float *w0, const float *w1,
                                   const void *skip, int skip_dtype);
/* UnscaleAndCheck after dmk_unscale_begin: p = {x, y}, y = x * (float)(1 / (double)*scale)
 * in x's dtype (FLOAT or FLOAT16); *found = 1.0f when any x or y is inf/NaN. */
cudaError_t dmk_multi_unscale(cudaStream_t s, const dmk_mt_tensor *t, const dmk_mt_chunk *c,
                              int64_t nchunks, const float *scale, float *found);

/* ---- gather.cu, where.cu --------------------------------------------------------- */

/* Gather: y[o, j, c] = x[o, idx[j], c] for o < outer, j < nidx, c < row, elements of
 * elem_size bytes (1, 2, 4, 8); idx INT32 or (idx64) INT64, negative counted from the end
 * with wrap; an index out of [0, along) writes bad_bits (its low elem_size bytes). */
cudaError_t dmk_gather(cudaStream_t s, const void *x, const void *idx, int idx64, void *y,
                       int64_t outer, int64_t along, int64_t nidx, int64_t row, int elem_size,
                       uint64_t bad_bits, int wrap);
/* GatherGradient: dx (FLOAT, nx elements) zeroed, then dy (FLOAT, FLOAT16 or BFLOAT16,
 * Gather's output shape) added at each index with FP32 atomics (not deterministic); an
 * out-of-range index adds nothing. */
cudaError_t dmk_gather_grad(cudaStream_t s, const void *idx, int idx64, const void *dy,
                            int dy_dtype, float *dx, int64_t nx, int64_t outer, int64_t along,
                            int64_t nidx, int64_t row, int wrap);
/* Where's numpy broadcast: Z's dims (rank >= 1) and the element strides of C (0), X (1)
 * and Y (2) over them (0 along a broadcast dim). */
typedef struct dmk_bcast3 {
  int ndim;
  int64_t dims[DMK_MAX_DIMS];
  int64_t st[3][DMK_MAX_DIMS];
} dmk_bcast3;
/* Where: z = c ? x : y over n elements of elem_size bytes (1, 2, 4, 8). */
cudaError_t dmk_where(cudaStream_t s, const uint8_t *c, const void *x, const void *y, void *z,
                      int elem_size, const dmk_bcast3 *g, int64_t n);
/* WhereGradient of input k (1: X, 2: Y; nt elements, dtype FLOAT, FLOAT16 or BFLOAT16 as
 * dz): each element the FP32 sum, in Z order, of the dz it was broadcast to where
 * (c != 0) == want, rounded once. */
cudaError_t dmk_where_grad(cudaStream_t s, const uint8_t *c, const void *dz, int dtype,
                           void *dt, const dmk_bcast3 *g, int k, int want, int64_t nt);
/* ---- layernorm.cu, masked_softmax.cu ------------------------------------------- */

/* LayerNorm over N rows of D (x, y, dy, dx in dtype; gamma, beta, mean, sd FP32; gamma
 * and beta NULL without elementwise_affine); the gradient's dgamma, dbeta NULL then too.
 * dx may be dy. */
cudaError_t dmk_layernorm(cudaStream_t s, int dtype, const void *x, const float *gamma,
                          const float *beta, void *y, float *mean, float *sd, float eps,
                          int64_t N, int64_t D);
cudaError_t dmk_layernorm_grad(cudaStream_t s, int dtype, const void *dy, const void *x,
                               const float *mean, const float *sd, const float *gamma, void *dx,
                               float *dgamma, float *dbeta, int64_t N, int64_t D);
/* MaskedSoftmax's row geometry (operators/masked_softmax.h), by value in the launch. */
typedef struct dmk_mask_geom {
  int nd;
  int64_t lead[DMK_MAX_DIMS];
  int64_t mstride[DMK_MAX_DIMS + 1];
} dmk_mask_geom;
/* R rows of Tk (row r is query r % Tq); mask NULL or in mdtype; dx may be dy. */
cudaError_t dmk_masked_softmax(cudaStream_t s, int dtype, const void *x, const void *mask,
                               int mdtype, dmk_mask_geom g, void *y, float scale, int causal,
                               int64_t R, int64_t Tq, int64_t Tk);
cudaError_t dmk_masked_softmax_grad(cudaStream_t s, int dtype, const void *y, const void *dy,
                                    void *dx, float scale, int64_t R, int64_t Tk);

#ifdef __cplusplus
}
#endif
#endif
