/* more_kernels.h: host entry points of gpu/more_kernels.cu (internal; only with
 * DM_HAVE_CUDA), called by the kernels of gpu/kernels_more.c.
 *
 * Plain C with CUDA runtime types only, so nvcc never sees core/ headers. Every function
 * enqueues work on `stream` and returns the launch's cudaError_t; none synchronises.
 * Pointers are device pointers; parameters (the learning-rate policy, the transpose's
 * strides, the dropout key) travel by value in the launch, so the host may change its
 * copies as soon as a call returns. Element types are dm_dtype numbers, repeated here as
 * DMM_* (kernels_more.c checks at compile time that they agree). Sizes are 64-bit; a size
 * of 0 launches nothing.
 */
#ifndef DM_GPU_MORE_KERNELS_H
#define DM_GPU_MORE_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  DMM_FLOAT = 1, DMM_INT32 = 2, DMM_BOOL = 5, DMM_UINT8 = 6, DMM_INT64 = 10, DMM_FLOAT16 = 12,
  DMM_DOUBLE = 13, DMM_BFLOAT16 = 20
};
/* lr_policy.h's dm_lr_kind numbers. */
enum { DMM_LR_FIXED = 0, DMM_LR_STEP = 1, DMM_LR_EXP = 2, DMM_LR_INV = 3, DMM_LR_POLY = 4 };
#define DMM_MAX_DIMS 8 /* DM_MAX_DIMS */

/* Iter: *iter += 1 unless skip (NULL, or a one-element device scalar of skip_dtype) is
 * nonzero or NaN. fresh: the count starts from 0 (an empty blob), so *iter is not read
 * and becomes 1, or 0 when skipped. INT64_MAX stays INT64_MAX (the CPU's overflow error
 * cannot be reported from the device). */
cudaError_t dmm_iter(cudaStream_t s, int64_t *iter, int fresh, const void *skip, int skip_dtype);

/* LearningRate's parameters, parsed and checked on the host (lr_policy.h). */
typedef struct dmm_lr_params {
  int kind;
  int64_t stepsize, max_iter, warmup_iter;
  double gamma, power, warmup_start;
  double base_lr; /* the FLOAT argument, widened */
} dmm_lr_params;
/* *lr = (float)(base_lr * multiplier(*iter)), lr_policy.c's arithmetic in double in its
 * order. A negative *iter (the CPU's error) gives NaN. */
cudaError_t dmm_learning_rate(cudaStream_t s, const int64_t *iter, float *lr, dmm_lr_params p);

/* y[o * ypitch + yoff + j] = x[o * xpitch + xoff + j] for o < rows, j < cols, in elements
 * of es bytes (1, 2, 4 or 8): one input of Concat or one output of Split. */
cudaError_t dmm_copy_blocks(cudaStream_t s, const void *x, void *y, int es, int64_t rows,
                            int64_t cols, int64_t xpitch, int64_t xoff, int64_t ypitch,
                            int64_t yoff);

/* Transpose: y (ndim dims ydims, row-major) element k = x at sum idx[d] * xstride[d], idx
 * being k's multi-index in ydims; es bytes per element (1, 2, 4 or 8); n elements. */
cudaError_t dmm_transpose(cudaStream_t s, const void *x, void *y, int es, int ndim,
                          const int64_t *ydims, const int64_t *xstride, int64_t n);

/* Copies n bytes from host memory into dst through kernel parameters, in chunks of
 * DMM_SMALL_BYTES per launch: the launch captures the bytes, so src may change as soon as
 * this returns, and unlike a staged cudaMemcpyAsync nothing waits for an earlier copy
 * (Reshape's old_shape, Concat's split_info). */
#define DMM_SMALL_BYTES 2048
cudaError_t dmm_write_small(cudaStream_t s, void *dst, const void *src, size_t n);

/* Dropout in training: keep element i when (mix64(key + i * golden) >> 11) * 2^-53 >=
 * ratio (dropout.c's test), mask[i] = keep, y[i] = keep ? x[i] * scale : 0 in double,
 * rounded once to dtype (FLOAT, FLOAT16 or BFLOAT16). y may be x. */
cudaError_t dmm_dropout(cudaStream_t s, int dtype, const void *x, void *y, uint8_t *mask,
                        uint64_t key, float ratio, double scale, int64_t n);
/* DropoutGrad: dx[i] = mask[i] ? dy[i] * scale : 0, as dmm_dropout. dx may be dy. */
cudaError_t dmm_dropout_grad(cudaStream_t s, int dtype, const void *dy, const uint8_t *mask,
                             void *dx, double scale, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
