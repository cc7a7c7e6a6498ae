/* softmax_cudnn.c: the cuDNN (engine "CUDNN") Softmax and SoftmaxGradient kernels, with
 * their tensor descriptor kept in the kernel state (cudnn_common.h). Semantics are the
 * CPU kernels' (operators/softmax.c): X viewed as N x D at `axis`, cuDNN's accurate
 * per-instance softmax over (N, D, 1, 1).
 */
#include <stdlib.h>

#include "cudnn_common.h"

/* The descriptor, set for shape key `key` (A's dtype and dims). */
typedef struct softmax_state {
  int64_t axis; /* the argument, canonicalised for each shape */
  cudnnTensorDescriptor_t d;
  int valid;
  int64_t key[DNN_TKEY];
} softmax_state;

static void softmax_fini(void *state) {
  softmax_state *s = state;
  if (!s)
    return;
  if (s->d) cudnnDestroyTensorDescriptor(s->d);
  free(s);
}

static dm_status softmax_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  softmax_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the cuDNN softmax state");
  s->axis = dm_op_arg_int(ctx, "axis", 1);
  cudnnStatus_t e = cudnnCreateTensorDescriptor(&s->d);
  if (e != CUDNN_STATUS_SUCCESS) {
    softmax_fini(s);
    return dm_cudnn_error(e, "cudnnCreateTensorDescriptor");
  }
  *state = s;
  return DM_OK;
}

/* X viewed as N x D at `axis` (the CPU's view), unless set for this shape already. */
static dm_status softmax_desc_set(dm_op_ctx *ctx, softmax_state *s, const dm_tensor *x) {
  int64_t key[DNN_TKEY];
  dnn_tkey(key, x);
  if (dnn_key_same(&s->valid, s->key, key, DNN_TKEY))
    return DM_OK;
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", s->axis, x->ndim, 0, &axis));
  DM_TRY(tensor4d(ctx, s->d, x->dtype, 0, dm_dims_product(x, 0, axis),
                  dm_dims_product(x, axis, x->ndim), 1, 1));
  dnn_key_set(&s->valid, s->key, key, DNN_TKEY);
  return DM_OK;
}

/* Softmax: X -> Y; SoftmaxGradient: Y, dY -> dX (dX may be dY's blob: then through
 * scratch, since cuDNN does not promise in-place). */
static dm_status softmax_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  int grad = dm_op_num_inputs(ctx) == 2;
  const dm_tensor *a = dm_op_input(ctx, 0), *dy = grad ? dm_op_input(ctx, 1) : NULL;
  dm_tensor *out = dm_op_output(ctx, 0);
  if (out->numel == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  softmax_state *s = dm_op_state(ctx);
  DM_TRY(softmax_desc_set(ctx, s, a));
  const cudnnTensorDescriptor_t d = s->d;
  int alias = dm_tensors_alias(out, a) || (dy && dm_tensors_alias(out, dy));
  void *dst = dm_tensor_mutable_data(out);
  if (alias)
    DM_TRY(dm_gpu_scratch(c, dm_tensor_nbytes(out), &dst));
  if (!grad)
    DM_CUDNN_TRY(cudnnSoftmaxForward(c->cudnn, CUDNN_SOFTMAX_ACCURATE,
                                     CUDNN_SOFTMAX_MODE_INSTANCE, &k_one, d, dm_tensor_data(a),
                                     &k_zero, d, dst));
  else
    DM_CUDNN_TRY(cudnnSoftmaxBackward(c->cudnn, CUDNN_SOFTMAX_ACCURATE,
                                      CUDNN_SOFTMAX_MODE_INSTANCE, &k_one, d, dm_tensor_data(a),
                                      d, dm_tensor_data(dy), &k_zero, d, dst));
  if (alias)
    DM_CUDA_TRY(cudaMemcpyAsync(dm_tensor_mutable_data(out), dst, dm_tensor_nbytes(out),
                                cudaMemcpyDeviceToDevice, c->stream));
  return DM_OK;
}

const dm_kernel_def dm_cuda_softmax_kernels[] = {
    GPU_KERNEL("Softmax", "CUDNN", .init = softmax_init, .run = softmax_cudnn_run,
               .fini = softmax_fini, GRAPH_SAFE),
    GPU_KERNEL("SoftmaxGradient", "CUDNN", .init = softmax_init, .run = softmax_cudnn_run,
               .fini = softmax_fini, GRAPH_SAFE),
    {0},
};
