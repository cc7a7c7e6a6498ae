/* cudnn_common.h: what the cuDNN/cuBLAS kernel files share (internal; included by
 * conv_cudnn.c, pool_cudnn.c, batchnorm_cudnn.c, softmax_cudnn.c, lrn_cudnn.c and fc_cublas.c):
 * the alpha/beta constants, the goto-done error macros, the dtype map to cuDNN, the
 * int-sized 4-D tensor descriptors, and the shape keys by which each kernel's state
 * keeps its descriptors set until the input shapes change. The helpers are static
 * inline, so each file keeps them private.
 *
 * Every cuDNN kernel creates its descriptors in its init (into its state, one per op
 * instance; an op runs on one thread at a time) and destroys them in its fini; a run
 * sets them again only when its shape key differs from the one they were set for (a net
 * run at another batch size, say), as Caffe2's cuDNN ops do. Arguments are parsed once,
 * in init.
 */
#ifndef DM_GPU_CUDNN_COMMON_H
#define DM_GPU_CUDNN_COMMON_H

#include <limits.h>

#include <string.h>

#include "kernels.h"

/* Shared helpers ----------------------------------------------------------------- */

static const float k_one = 1.0f, k_zero = 0.0f;

/* Inside a run or an init: a failure sets `st` and jumps to `done`. */
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

/* The `order` argument as BN and LRN read it: nonzero for NHWC (the schema inference has
 * refused anything but NCHW and NHWC). */
static inline int dnn_order_nhwc(dm_op_ctx *ctx) {
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  return order[0] == 'N' && order[1] == 'H';
}

/* X's (N, C, H, W) from dm_conv_geom-style 4-D dims in the given order. */
static inline void nchw_of(const dm_tensor *x, int nhwc, int64_t d[4]) {
  d[0] = x->dims[0];
  d[1] = x->dims[nhwc ? 3 : 1];
  d[2] = x->dims[nhwc ? 1 : 2];
  d[3] = x->dims[nhwc ? 2 : 3];
}

/* X and Y of a conv or pool (4-D in NCHW or NHWC order): their (N, C, H, W) into xd and
 * yd, and two descriptors of X's dtype. */
static inline dm_status dnn_xy4d(dm_op_ctx *ctx, int nhwc, const dm_tensor *x, const dm_tensor *y,
                                 cudnnTensorDescriptor_t xdesc, cudnnTensorDescriptor_t ydesc,
                                 int64_t xd[4], int64_t yd[4]) {
  nchw_of(x, nhwc, xd);
  nchw_of(y, nhwc, yd);
  DM_TRY(tensor4d(ctx, xdesc, x->dtype, nhwc, xd[0], xd[1], xd[2], xd[3]));
  return tensor4d(ctx, ydesc, x->dtype, nhwc, yd[0], yd[1], yd[2], yd[3]);
}

/* Shape keys ------------------------------------------------------------------------ */

/* A tensor's dtype, ndim and dims (zero past ndim) as DNN_TKEY values of a key. */
#define DNN_TKEY (2 + DM_MAX_DIMS)
static inline void dnn_tkey(int64_t *k, const dm_tensor *t) {
  k[0] = t->dtype;
  k[1] = t->ndim;
  for (int i = 0; i < DM_MAX_DIMS; i++)
    k[2 + i] = i < t->ndim ? t->dims[i] : 0;
}

/* Whether descriptors set for (*valid, have) serve `want` (n values); if not, *valid is
 * cleared until the caller has set them again and calls dnn_key_set. */
static inline int dnn_key_same(int *valid, const int64_t *have, const int64_t *want, size_t n) {
  if (*valid && memcmp(have, want, n * sizeof *want) == 0)
    return 1;
  *valid = 0;
  return 0;
}
static inline void dnn_key_set(int *valid, int64_t *have, const int64_t *want, size_t n) {
  memcpy(have, want, n * sizeof *want);
  *valid = 1;
}

#endif
