/* dnn_common.h: the helpers the cuDNN/cuBLAS kernel files share (internal; included by
 * kernels_conv.c, kernels_pool_norm.c and kernels_fc.c): the alpha/beta constants, the
 * goto-done error macros, the dtype maps to cuDNN and to dnn_kernels.h's codes, and the
 * int-sized 4-D tensor descriptors. One header instead of a copy per file; the helpers are
 * static inline, so each file keeps them private as when the three were one file.
 */
#ifndef DM_GPU_DNN_COMMON_H
#define DM_GPU_DNN_COMMON_H

#include <limits.h>

#include "context.h"
#include "core/tensor.h"
#include "demitasse_plugin.h"
#include "dnn_kernels.h"
#include "operators/common.h"

/* Shared helpers ----------------------------------------------------------------- */

static const float k_one = 1.0f, k_zero = 0.0f;

/* Inside a run: a failure sets `st` and jumps to `done`, where descriptors are freed. */
#define DNN_TRY(call)                                                \
  do {                                                               \
    cudnnStatus_t e_ = (call);                                       \
    if (e_ != CUDNN_STATUS_SUCCESS) {                                \
      st = dm_cudnn_error(e_, #call);                                \
      goto done;                                                     \
    }                                                                \
  } while (0)
#define CU_TRY(call)                                                 \
  do {                                                               \
    cudaError_t e_ = (call);                                         \
    if (e_ != cudaSuccess) {                                         \
      st = dm_cuda_error(e_, #call);                                 \
      goto done;                                                     \
    }                                                                \
  } while (0)
#define ST_TRY(call)                                                 \
  do {                                                               \
    st = (call);                                                     \
    if (st != DM_OK)                                                 \
      goto done;                                                     \
  } while (0)

static inline cudnnDataType_t dnn_type(dm_dtype t) {
  return t == DM_FLOAT16 ? CUDNN_DATA_HALF : t == DM_BFLOAT16 ? CUDNN_DATA_BFLOAT16
                                                               : CUDNN_DATA_FLOAT;
}
static inline int cu_type(dm_dtype t) {
  return t == DM_FLOAT16 ? DM_CUDA_F16 : t == DM_BFLOAT16 ? DM_CUDA_BF16 : DM_CUDA_F32;
}
/* cuDNN descriptors take int sizes. */
static inline dm_status fits_int(dm_op_ctx *ctx, const int64_t *v, int n) {
  for (int i = 0; i < n; i++)
    if (v[i] < 0 || v[i] > INT_MAX)
      return dm_op_error(ctx, DM_ERR_LIMIT, "size %lld exceeds cuDNN's int range",
                         (long long)v[i]);
  return DM_OK;
}

/* A 4-D tensor descriptor (n, c, h, w) in NCHW or NHWC memory order. */
static inline dm_status tensor4d(dm_op_ctx *ctx, cudnnTensorDescriptor_t d, dm_dtype t, int nhwc,
                                 int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t v[4] = {n, c, h, w};
  DM_TRY(fits_int(ctx, v, 4));
  DM_CUDNN_TRY(cudnnSetTensor4dDescriptor(d, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                          dnn_type(t), (int)n, (int)c, (int)h, (int)w));
  return DM_OK;
}

/* X's (N, C, H, W) from dm_conv_geom-style 4-D dims in the given order. */
static inline void nchw_of(const dm_tensor *x, int nhwc, int64_t d[4]) {
  d[0] = x->dims[0];
  d[1] = x->dims[nhwc ? 3 : 1];
  d[2] = x->dims[nhwc ? 1 : 2];
  d[3] = x->dims[nhwc ? 2 : 3];
}

#endif
