/* lrn_cudnn.c: the cuDNN (engine "CUDNN") LRN and LRNGradient kernels, with their
 * descriptors kept in the kernel state (cudnn_common.h). LRN's optional FP32 scale
 * output is dnn_aux.cu's dmk_lrn_scale.
 *
 * Semantics are the CPU kernels' (operators/lrn.c): cuDNN's cross-channel LRN has the
 * CPU's formula (it divides alpha by size itself, and its window for odd sizes is the
 * CPU's) within its bounds, which are a documented difference: size <= 16, bias >= 1e-5,
 * beta >= 0.01 (refused with DM_ERR_UNSUPPORTED otherwise).
 */
#include <stdlib.h>
#include <string.h>

#include "cudnn_common.h"

/* The arguments, parsed once; the descriptors, set for shape key `key` (X's dtype and
 * dims). */
typedef struct lrn_state {
  int nhwc, grad;
  int64_t size;
  double alpha, beta, bias;
  cudnnTensorDescriptor_t xd;
  cudnnLRNDescriptor_t ld;
  int valid;
  int64_t key[DNN_TKEY];
} lrn_state;

static void lrn_fini(void *state) {
  lrn_state *s = state;
  if (!s)
    return;
  if (s->xd) cudnnDestroyTensorDescriptor(s->xd);
  if (s->ld) cudnnDestroyLRNDescriptor(s->ld);
  free(s);
}

static dm_status lrn_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  lrn_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the cuDNN LRN state");
  s->nhwc = dnn_order_nhwc(ctx);
  s->grad = strcmp(dm_op_type(ctx), "LRNGradient") == 0;
  s->size = dm_op_arg_int(ctx, "size", 0);
  s->alpha = dm_op_arg_float(ctx, "alpha", 0.0f);
  s->beta = dm_op_arg_float(ctx, "beta", 0.0f);
  s->bias = dm_op_arg_float(ctx, "bias", 1.0f);
  dm_status st = DM_OK;
  DNN_TRY(cudnnCreateTensorDescriptor(&s->xd));
  DNN_TRY(cudnnCreateLRNDescriptor(&s->ld));
done:
  if (st != DM_OK) {
    lrn_fini(s);
    return st;
  }
  *state = s;
  return DM_OK;
}

/* X as (N, C, HW, 1) in its order and the LRN parameters, unless set for this shape. */
static dm_status lrn_desc_set(dm_op_ctx *ctx, lrn_state *s, const dm_tensor *x) {
  int64_t key[DNN_TKEY];
  dnn_tkey(key, x);
  if (dnn_key_same(&s->valid, s->key, key, DNN_TKEY))
    return DM_OK;
  int64_t N, C, HW;
  dm_channel_view(x, s->nhwc, &N, &C, &HW);
  DM_TRY(tensor4d(ctx, s->xd, x->dtype, s->nhwc, N, C, HW, 1));
  if (s->size > CUDNN_LRN_MAX_N || s->bias < CUDNN_LRN_MIN_K || s->beta < CUDNN_LRN_MIN_BETA)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "size %lld, bias %g, beta %g: cuDNN's LRN needs size <= %d, bias >= %g "
                       "and beta >= %g; run this %s on the CPU",
                       (long long)s->size, s->bias, s->beta, CUDNN_LRN_MAX_N, CUDNN_LRN_MIN_K,
                       CUDNN_LRN_MIN_BETA, dm_op_type(ctx));
  DM_CUDNN_TRY(cudnnSetLRNDescriptor(s->ld, (unsigned)s->size, s->alpha, s->beta, s->bias));
  dnn_key_set(&s->valid, s->key, key, DNN_TKEY);
  return DM_OK;
}

/* LRN: X -> Y, [scale (FP32)]; LRNGradient: X, Y, dY, [scale] -> dX (scale unused: cuDNN
 * recomputes it). */
static dm_status lrn_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *out = dm_op_output(ctx, 0);
  if (out->numel == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  lrn_state *s = dm_op_state(ctx);
  DM_TRY(lrn_desc_set(ctx, s, x));
  int alias = 0;
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    alias |= dm_tensors_alias(out, dm_op_input(ctx, i));
  void *dst = dm_tensor_mutable_data(out);
  if (alias)
    DM_TRY(dm_gpu_scratch(c, dm_tensor_nbytes(out), &dst));
  if (!s->grad) {
    DM_CUDNN_TRY(cudnnLRNCrossChannelForward(c->cudnn, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                             &k_one, s->xd, dm_tensor_data(x), &k_zero, s->xd,
                                             dst));
    if (dm_op_num_outputs(ctx) > 1) {
      int64_t N, C, HW;
      dm_channel_view(x, s->nhwc, &N, &C, &HW);
      double alpha_n = s->alpha / (double)s->size;
      DM_CUDA_TRY(dmk_lrn_scale(c->stream, x->dtype, s->nhwc, N, C, HW, dm_tensor_data(x),
                                (int)s->size, alpha_n, s->bias,
                                dm_tensor_mutable_data(dm_op_output(ctx, 1))));
    }
  } else {
    DM_CUDNN_TRY(cudnnLRNCrossChannelBackward(
        c->cudnn, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &k_one, s->xd,
        dm_tensor_data(dm_op_input(ctx, 1)), s->xd, dm_tensor_data(dm_op_input(ctx, 2)), s->xd,
        dm_tensor_data(x), &k_zero, s->xd, dst));
  }
  if (alias)
    DM_CUDA_TRY(cudaMemcpyAsync(dm_tensor_mutable_data(out), dst, dm_tensor_nbytes(out),
                                cudaMemcpyDeviceToDevice, c->stream));
  return DM_OK;
}

const dm_kernel_def dm_cuda_lrn_kernels[] = {
    GPU_KERNEL("LRN", "CUDNN", .init = lrn_init, .run = lrn_cudnn_run, .fini = lrn_fini, GRAPH_SAFE),
    GPU_KERNEL("LRNGradient", "CUDNN", .init = lrn_init, .run = lrn_cudnn_run, .fini = lrn_fini, GRAPH_SAFE),
    {0},
};
