/* batchnorm_cudnn.c: the cuDNN (engine "CUDNN") SpatialBN and SpatialBNGradient kernels, and
 * those of the fused training ops SpatialBNRelu, SpatialBNAddRelu and their gradients
 * (operators/bn_fusion.c), with their descriptors kept in the kernel state
 * (cudnn_common.h). The small kernels around
 * the cuDNN calls (Caffe2's running statistics, the is_test gradient) are dnn_aux.cu's.
 *
 * Semantics are the CPU kernels' (operators/batchnorm.c): every run first runs the op's
 * schema inference, then enqueues work on the thread's context stream.
 *
 * Training in NHWC (FLOAT16, FLOAT) runs cuDNN's CUDNN_BATCHNORM_SPATIAL_PERSISTENT
 * mode, through the Ex functions (workspace in scratch) when cuDNN wants no reserve
 * space for plain batch norm, else through the non-Ex ones: the spatial mode on NHWC is
 * cuDNN's slow path (the prime suspect in an NHWC ResNet-50 training 6x slower than
 * NCHW). NCHW and test mode keep CUDNN_BATCHNORM_SPATIAL, the persistent mode's NCHW
 * path being documented to overflow on large inputs. The results follow Caffe2's
 * conventions in either mode. All of cuDNN 9's batch-norm functions, the non-Ex ones too,
 * are deprecated in favour of its graph API; they warn only when CUDNN_WARN_DEPRECATED is
 * defined, which we do not do.
 *
 * The fused ops run as one cuDNN call (the Ex functions with
 * CUDNN_BATCHNORM_OPS_BN_ACTIVATION or _BN_ADD_ACTIVATION and a Relu activation
 * descriptor) where cuDNN takes them: FLOAT16 NHWC in the persistent mode, with the op's
 * `reserve` slot present to carry cuDNN's reserve space (the relu mask) from the forward
 * to the backward, and cuDNN's size queries succeeding. Elsewhere (NCHW, FLOAT, BFLOAT16,
 * no reserve slot, an empty reserve reaching the backward) they fall back to the unfused
 * kernel sequence on the GPU: SpatialBN's own path, then dmk_binary's add and dmk_relu;
 * dmk_relu_grad, then SpatialBNGradient's path. The fallback computes what the unfused
 * ops compute on the GPU.
 */
#include <stdlib.h>

#include "cudnn_common.h"

/* cuDNN's lower bound on epsilon (0 in cuDNN 9, 1e-5 in older releases). */
static dm_status bn_eps_check(dm_op_ctx *ctx, double eps) {
  if (eps < CUDNN_BN_MIN_EPSILON)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "epsilon %g is below cuDNN's minimum %g; run this %s on the CPU", eps,
                       (double)CUDNN_BN_MIN_EPSILON, dm_op_type(ctx));
  return DM_OK;
}

typedef struct bn_desc {
  cudnnTensorDescriptor_t x, p; /* X as (N, C, HW, 1); the FP32 per-channel parameters */
  cudnnBatchNormMode_t mode;
  int64_t N, C, HW;
} bn_desc;

/* The arguments, parsed once; the descriptors, set for shape key `key` (X's dtype and
 * dims, and whether the call trains). */
typedef struct bn_state {
  int nhwc, is_test;
  double eps;
  float mom;
  bn_desc d;
  cudnnActivationDescriptor_t act; /* Relu, for the fused ops */
  int valid;
  int64_t key[DNN_TKEY + 1];
} bn_state;

static void bn_fini(void *state) {
  bn_state *s = state;
  if (!s)
    return;
  if (s->d.x) cudnnDestroyTensorDescriptor(s->d.x);
  if (s->d.p) cudnnDestroyTensorDescriptor(s->d.p);
  if (s->act) cudnnDestroyActivationDescriptor(s->act);
  free(s);
}

static dm_status bn_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  bn_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the cuDNN batch-norm state");
  s->nhwc = dnn_order_nhwc(ctx);
  s->is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  s->eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  s->mom = dm_op_arg_float(ctx, "momentum", 0.9f);
  dm_status st = DM_OK;
  DNN_TRY(cudnnCreateTensorDescriptor(&s->d.x));
  DNN_TRY(cudnnCreateTensorDescriptor(&s->d.p));
  DNN_TRY(cudnnCreateActivationDescriptor(&s->act));
  DNN_TRY(cudnnSetActivationDescriptor(s->act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
done:
  if (st != DM_OK) {
    bn_fini(s);
    return st;
  }
  *state = s;
  return DM_OK;
}

/* X as (N, C, HW, 1) in its order, the mode, and the parameter descriptor derived with
 * that mode. Training in NHWC takes CUDNN_BATCHNORM_SPATIAL_PERSISTENT: cuDNN's NHWC
 * batch-norm kernels sit behind it, and its plain spatial mode on NHWC is the slow path.
 * NCHW training and test mode keep CUDNN_BATCHNORM_SPATIAL: in NCHW the persistent mode
 * may reduce in scaled atomic integers, which overflow to Inf/NaN on large finite inputs
 * where the spatial mode stays finite (cuDNN documents that caveat for NCHW only). */
static dm_status bn_desc_set(dm_op_ctx *ctx, bn_state *s, const dm_tensor *x, int training) {
  int64_t key[DNN_TKEY + 1];
  dnn_tkey(key, x);
  key[DNN_TKEY] = training;
  if (dnn_key_same(&s->valid, s->key, key, DNN_TKEY + 1))
    return DM_OK;
  bn_desc *d = &s->d;
  dm_channel_view(x, s->nhwc, &d->N, &d->C, &d->HW);
  /* FLOAT16 and FLOAT only: those are the types cuDNN documents the persistent path for
   * (BFLOAT16 keeps the spatial mode it had before). */
  int persistent_type = x->dtype == DM_FLOAT16 || x->dtype == DM_FLOAT;
  d->mode = training && s->nhwc && persistent_type ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT
                                                   : CUDNN_BATCHNORM_SPATIAL;
  DM_TRY(tensor4d(ctx, d->x, x->dtype, s->nhwc, d->N, d->C, d->HW, 1));
  DM_CUDNN_TRY(cudnnDeriveBNTensorDescriptor(d->p, d->x, d->mode));
  dnn_key_set(&s->valid, s->key, key, DNN_TKEY + 1);
  return DM_OK;
}

/* Scratch pieces start on 256-byte boundaries. */
static size_t bn_align(size_t n) { return (n + 255) & ~(size_t)255; }

/* The bytes of scratch the Ex functions get as workspace for this training call (forward
 * or gradient), or 0 when the non-Ex functions run it. The Ex functions are taken only in
 * the persistent mode, and only when cuDNN wants no reserve space for plain batch norm
 * (CUDNN_BATCHNORM_OPS_BN) on this X: SpatialBN has no output to carry one to
 * SpatialBNGradient, whose inputs are X, scale, dY and the saved mean and inverse std.
 * Otherwise the non-Ex functions run in the same mode (the persistent mode is documented
 * for them too). Asked on every call: the queries are host-side lookups on the
 * descriptors, and both ops ask the reserve question of the same X descriptor and mode.
 * The workspace is never empty: with a NULL workspace the Ex functions do what the non-Ex
 * ones do, without the NHWC kernels. The descriptors OPS_BN does not use (y of the
 * gradient, z, dz, the activation) are NULL here as in the calls. */
static dm_status bn_ex_workspace(dm_gpu_context *c, const bn_desc *d, int grad, size_t *bytes) {
  size_t reserve = 0, ws = 0;
  *bytes = 0;
  if (d->mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
    return DM_OK;
  DM_CUDNN_TRY(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
      c->cudnn, d->mode, CUDNN_BATCHNORM_OPS_BN, NULL, d->x, &reserve));
  if (reserve)
    return DM_OK;
  if (grad)
    DM_CUDNN_TRY(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        c->cudnn, d->mode, CUDNN_BATCHNORM_OPS_BN, d->x, NULL, d->x, NULL, d->x, d->p, NULL,
        &ws));
  else
    DM_CUDNN_TRY(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        c->cudnn, d->mode, CUDNN_BATCHNORM_OPS_BN, d->x, NULL, d->x, d->p, NULL, &ws));
  *bytes = bn_align(ws ? ws : 1);
  return DM_OK;
}

/* The training forward, after bn_desc_set: cuDNN's batch statistics with
 * exponentialAverageFactor 1 into scratch (so they are the batch mean and cuDNN's unbiased
 * variance), then dmk_bn_running applies Caffe2's convention (momentum on the old value,
 * biased variance), which cuDNN's own update does not. saved_mean and saved_inv_std are
 * cuDNN's saved mean and 1/sqrt(biased var + eps), what the CPU's gradient expects.
 * `ops`: CUDNN_BATCHNORM_OPS_BN, or a fused op's (then z, the activation and the reserve
 * space go to cuDNN); `ws`: the Ex workspace (0: the non-Ex call, OPS_BN only). With
 * `tail` (a fused op cuDNN did not take) the unfused ops follow on Y: + Z when z, Relu.
 * A fused call cuDNN turns down when it runs (CUDNN_STATUS_NOT_SUPPORTED: a constraint
 * its size queries do not check) becomes the plain non-Ex call in the same mode and the
 * tail, and sets *declined (the reserve was not written). */
static dm_status bn_train(dm_op_ctx *ctx, const bn_state *bs, dm_gpu_context *c,
                          cudnnBatchNormOps_t ops, size_t ws, const dm_tensor *z,
                          void *reserve, size_t reserve_bytes, int tail, int *declined) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const bn_desc *d = &bs->d;
  dm_status st = DM_OK;
  const void *scale = dm_tensor_data(dm_op_input(ctx, 1)), *bias = dm_tensor_data(dm_op_input(ctx, 2));
  const float *rm = dm_tensor_data(dm_op_input(ctx, 3)), *rv = dm_tensor_data(dm_op_input(ctx, 4));
  int fused = ops != CUDNN_BATCHNORM_OPS_BN;
  /* Scratch, one request: batch mean and variance (C each), the Ex workspace, and Y's
   * values when Y is X's or Z's blob (cuDNN reads them again after writing Y). */
  int alias = dm_tensors_alias(y, x) || (z && dm_tensors_alias(y, z));
  size_t stat = bn_align((size_t)d->C * 2 * sizeof(float));
  void *buf;
  ST_TRY(dm_gpu_scratch(c, stat + ws + (alias ? dm_tensor_nbytes(y) : 0), &buf));
  float *bmean = buf, *bvar = bmean + d->C;
  void *wsp = (char *)buf + stat;
  void *ytmp = alias ? (char *)buf + stat + ws : dm_tensor_mutable_data(y);
  void *smean = dm_tensor_mutable_data(dm_op_output(ctx, 3));
  void *sinv = dm_tensor_mutable_data(dm_op_output(ctx, 4));
  /* Factor 1 ignores the old values, but 0 * NaN would not: start from zeros. */
  CU_TRY(cudaMemsetAsync(bmean, 0, (size_t)d->C * 2 * sizeof(float), c->stream));
  cudnnStatus_t e = CUDNN_STATUS_SUCCESS;
  if (ws)
    e = cudnnBatchNormalizationForwardTrainingEx(
        c->cudnn, d->mode, ops, &k_one, &k_zero, d->x, dm_tensor_data(x),
        fused && z ? d->x : NULL, fused && z ? dm_tensor_data(z) : NULL, d->x, ytmp, d->p,
        scale, bias, 1.0, bmean, bvar, bs->eps, smean, sinv, fused ? bs->act : NULL, wsp, ws,
        reserve, reserve_bytes);
  if (ws && fused && e == CUDNN_STATUS_NOT_SUPPORTED) {
    *declined = 1;
    tail = 1;
    ws = 0;
  } else if (e != CUDNN_STATUS_SUCCESS) {
    st = dm_cudnn_error(e, "cudnnBatchNormalizationForwardTrainingEx");
    goto done;
  }
  if (!ws)
    DNN_TRY(cudnnBatchNormalizationForwardTraining(c->cudnn, d->mode, &k_one, &k_zero, d->x,
                                                   dm_tensor_data(x), d->x, ytmp, d->p, scale,
                                                   bias, 1.0, bmean, bvar, bs->eps, smean, sinv));
  CU_TRY(dmk_bn_running(c->stream, rm, rv, bmean, bvar,
                        dm_tensor_mutable_data(dm_op_output(ctx, 1)),
                        dm_tensor_mutable_data(dm_op_output(ctx, 2)), d->C, d->N * d->HW, bs->mom));
  void *py = dm_tensor_mutable_data(y);
  if (tail && z) /* the unfused Add (the Sum/Add kernels' FP32 math), into Y */
    CU_TRY(dmk_binary(c->stream, DMK_ADD, x->dtype, ytmp, dm_tensor_data(z), py, 1, x->numel, 1));
  else if (alias)
    CU_TRY(cudaMemcpyAsync(py, ytmp, dm_tensor_nbytes(y), cudaMemcpyDeviceToDevice, c->stream));
  if (tail)
    CU_TRY(dmk_relu(c->stream, x->dtype, py, py, x->numel));
done:
  return st;
}

/* A forward run's start: the inference, then the context in *c, or *c NULL when X is
 * empty and there is nothing to do (training with no values is refused by the
 * inference). */
static dm_status bn_forward_start(dm_op_ctx *ctx, dm_gpu_context **c) {
  *c = NULL;
  DM_TRY(dm_op_run_infer(ctx));
  if (dm_op_input(ctx, 0)->numel == 0)
    return DM_OK;
  DM_TRY(bn_eps_check(ctx, ((const bn_state *)dm_op_state(ctx))->eps));
  return dm_gpu_op_context(ctx, c);
}

/* Test mode: cuDNN's inference with the given mean and var. Training: bn_train. */
static dm_status bn_cudnn_run(dm_op_ctx *ctx) {
  dm_gpu_context *c;
  DM_TRY(bn_forward_start(ctx, &c));
  if (!c)
    return DM_OK;
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  bn_state *bs = dm_op_state(ctx);
  const bn_desc *d = &bs->d;
  dm_status st = DM_OK;
  ST_TRY(bn_desc_set(ctx, bs, x, !bs->is_test));
  if (bs->is_test) { /* elementwise, so Y may be X */
    DNN_TRY(cudnnBatchNormalizationForwardInference(
        c->cudnn, d->mode, &k_one, &k_zero, d->x, dm_tensor_data(x), d->x,
        dm_tensor_mutable_data(y), d->p, dm_tensor_data(dm_op_input(ctx, 1)),
        dm_tensor_data(dm_op_input(ctx, 2)), dm_tensor_data(dm_op_input(ctx, 3)),
        dm_tensor_data(dm_op_input(ctx, 4)), bs->eps));
    goto done;
  }
  size_t ws;
  ST_TRY(bn_ex_workspace(c, d, 0, &ws));
  ST_TRY(bn_train(ctx, bs, c, CUDNN_BATCHNORM_OPS_BN, ws, NULL, NULL, 0, 0, NULL));
done:
  return st;
}

/* X, scale, dY, saved_mean, saved_inv_std (is_test: mean, var) -> dX, dscale, dbias, with
 * dY at `dy`, masked first where mask_y > 0 (mask_y: a Y, or NULL) into scratch.
 * Training: cuDNN's backward with the saved statistics, in the forward's mode.
 * is_test: mean and var are constants, which cuDNN's backward does not model:
 * dmk_bn_grad_test. */
static dm_status bn_backward(dm_op_ctx *ctx, bn_state *bs, const void *dy, const void *mask_y) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  const int is_test = bs->is_test, nhwc = bs->nhwc;
  const double eps = bs->eps;
  dm_tensor *dx = dm_op_output(ctx, 0), *dscale = dm_op_output(ctx, 1), *dbias = dm_op_output(ctx, 2);
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  const bn_desc *d = &bs->d;
  dm_status st = DM_OK;
  int64_t N, C, HW;
  dm_channel_view(x, nhwc, &N, &C, &HW);
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1));
  const float *s_mean = dm_tensor_data(dm_op_input(ctx, 3)), *s_inv = dm_tensor_data(dm_op_input(ctx, 4));
  const int simple = is_test || N * HW == 0; /* also the empty batch: sums of nothing are zero */
  size_t ws = 0, mbytes = mask_y ? bn_align(dm_tensor_nbytes(x)) : 0;
  if (!simple) {
    ST_TRY(bn_eps_check(ctx, eps));
    ST_TRY(bn_desc_set(ctx, bs, x, 1));
    ST_TRY(bn_ex_workspace(c, d, 1, &ws));
  }
  void *buf = NULL;
  if (ws + mbytes)
    ST_TRY(dm_gpu_scratch(c, ws + mbytes, &buf));
  if (mask_y) { /* ReluGradient's rule, into scratch after the workspace */
    void *m = (char *)buf + ws;
    CU_TRY(dmk_relu_grad(c->stream, x->dtype, mask_y, dy, m, x->numel));
    dy = m;
  }
  if (simple) {
    CU_TRY(dmk_bn_grad_test(c->stream, x->dtype, nhwc, N, C, HW, dm_tensor_data(x), dy, scale,
                            s_mean, s_inv, eps, dm_tensor_mutable_data(dx),
                            dm_tensor_mutable_data(dscale), dm_tensor_mutable_data(dbias)));
    goto done;
  }
  if (ws)
    DNN_TRY(cudnnBatchNormalizationBackwardEx(
        c->cudnn, d->mode, CUDNN_BATCHNORM_OPS_BN, &k_one, &k_zero, &k_one, &k_zero, d->x,
        dm_tensor_data(x), NULL, NULL, d->x, dy, NULL, NULL, d->x,
        dm_tensor_mutable_data(dx), d->p, scale, NULL, dm_tensor_mutable_data(dscale),
        dm_tensor_mutable_data(dbias), eps, s_mean, s_inv, NULL, buf, ws, NULL, 0));
  else
    DNN_TRY(cudnnBatchNormalizationBackward(
        c->cudnn, d->mode, &k_one, &k_zero, &k_one, &k_zero, d->x, dm_tensor_data(x), d->x,
        dy, d->x, dm_tensor_mutable_data(dx), d->p, scale,
        dm_tensor_mutable_data(dscale), dm_tensor_mutable_data(dbias), eps, s_mean, s_inv));
done:
  return st;
}

static dm_status bn_grad_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return bn_backward(ctx, dm_op_state(ctx), dm_tensor_data(dm_op_input(ctx, 2)), NULL);
}

/* The fused ops ------------------------------------------------------------------ */

/* Whether cuDNN runs fused op `ops` on this X (after bn_desc_set for training), and its
 * workspace and reserve bytes: FLOAT16 in the persistent (NHWC) mode, the op's reserve
 * slot present, and cuDNN's size queries accepting the descriptors; a refused query is
 * no error, only a fallback. */
static int bn_fused_sizes(dm_gpu_context *c, const bn_state *bs, cudnnBatchNormOps_t ops,
                          dm_dtype t, int has_reserve, int grad, size_t *ws, size_t *reserve) {
  const bn_desc *d = &bs->d;
  const cudnnTensorDescriptor_t z = ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION ? d->x : NULL;
  *ws = *reserve = 0;
  if (!has_reserve || t != DM_FLOAT16 || d->mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
    return 0;
  cudnnStatus_t e = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
      c->cudnn, d->mode, ops, bs->act, d->x, reserve);
  if (e == CUDNN_STATUS_SUCCESS && grad)
    e = cudnnGetBatchNormalizationBackwardExWorkspaceSize(c->cudnn, d->mode, ops, d->x, d->x,
                                                          d->x, z, d->x, d->p, bs->act, ws);
  else if (e == CUDNN_STATUS_SUCCESS)
    e = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(c->cudnn, d->mode, ops, d->x,
                                                                 z, d->x, d->p, bs->act, ws);
  *ws = bn_align(*ws ? *ws : 1); /* never empty: see bn_ex_workspace */
  return e == CUDNN_STATUS_SUCCESS;
}

/* SpatialBNRelu, SpatialBNAddRelu: X, scale, bias, mean, var, [Z] -> Y, running_mean,
 * running_var, saved_mean, saved_inv_std, [reserve]. */
static dm_status bn_fused_run(dm_op_ctx *ctx) {
  dm_gpu_context *c;
  DM_TRY(bn_forward_start(ctx, &c));
  if (!c)
    return DM_OK;
  const dm_tensor *x = dm_op_input(ctx, 0);
  const dm_tensor *z = dm_op_num_inputs(ctx) > 5 ? dm_op_input(ctx, 5) : NULL;
  bn_state *bs = dm_op_state(ctx);
  dm_status st = DM_OK;
  ST_TRY(bn_desc_set(ctx, bs, x, 1));
  cudnnBatchNormOps_t ops = z ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
                              : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  /* The reserve (when the op has the slot) is sized here, after the inference, so that
   * its buffer stays from run to run; empty when cuDNN does not take the fused op, which
   * sends the backward to its fallback too. */
  const int has_reserve = dm_op_num_outputs(ctx) > 5;
  size_t ws, reserve;
  void *rp = NULL;
  int declined = 0;
  if (bn_fused_sizes(c, bs, ops, x->dtype, has_reserve, 0, &ws, &reserve)) {
    ST_TRY(dm_op_set_output(ctx, 5, DM_UINT8, 1, &(int64_t){(int64_t)reserve}));
    rp = reserve ? dm_tensor_mutable_data(dm_op_output(ctx, 5)) : NULL;
    ST_TRY(bn_train(ctx, bs, c, ops, ws, z, rp, reserve, 0, &declined));
  } else {
    ST_TRY(bn_ex_workspace(c, &bs->d, 0, &ws));
    ST_TRY(bn_train(ctx, bs, c, CUDNN_BATCHNORM_OPS_BN, ws, z, NULL, 0, 1, NULL));
    declined = 1;
  }
  if (declined && has_reserve)
    ST_TRY(dm_op_set_output(ctx, 5, DM_UINT8, 1, &(int64_t){0}));
done:
  return st;
}

/* SpatialBNReluGradient, SpatialBNAddReluGradient: X, scale, dY, saved_mean,
 * saved_inv_std, Y, bias, [reserve] -> dX, dscale, dbias, [dZ]. cuDNN's fused backward
 * when the forward left it a reserve of the size it wants for this X; else dY masked
 * (into dZ for the Add form, which is its gradient, else into scratch) and the plain
 * backward. */
static dm_status bn_fused_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2), *y = dm_op_input(ctx, 5);
  const dm_tensor *res = dm_op_num_inputs(ctx) > 7 ? dm_op_input(ctx, 7) : NULL;
  dm_tensor *dz = dm_op_num_outputs(ctx) > 3 ? dm_op_output(ctx, 3) : NULL;
  bn_state *bs = dm_op_state(ctx);
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  dm_status st = DM_OK;
  cudnnBatchNormOps_t ops = dz ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
                               : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  size_t ws = 0, reserve = 0;
  int fused = 0;
  if (res && res->numel > 0 && x->numel > 0) {
    ST_TRY(bn_eps_check(ctx, bs->eps));
    ST_TRY(bn_desc_set(ctx, bs, x, 1));
    fused = bn_fused_sizes(c, bs, ops, x->dtype, 1, 1, &ws, &reserve) &&
            reserve == (size_t)res->numel;
  }
  if (fused) {
    const bn_desc *d = &bs->d;
    void *wsp;
    ST_TRY(dm_gpu_scratch(c, ws, &wsp));
    cudnnStatus_t e = cudnnBatchNormalizationBackwardEx(
        c->cudnn, d->mode, ops, &k_one, &k_zero, &k_one, &k_zero, d->x, dm_tensor_data(x), d->x,
        dm_tensor_data(y), d->x, dm_tensor_data(dy), dz ? d->x : NULL,
        dz ? dm_tensor_mutable_data(dz) : NULL, d->x, dm_tensor_mutable_data(dm_op_output(ctx, 0)),
        d->p, dm_tensor_data(dm_op_input(ctx, 1)), dm_tensor_data(dm_op_input(ctx, 6)),
        dm_tensor_mutable_data(dm_op_output(ctx, 1)), dm_tensor_mutable_data(dm_op_output(ctx, 2)),
        bs->eps, dm_tensor_data(dm_op_input(ctx, 3)), dm_tensor_data(dm_op_input(ctx, 4)),
        bs->act, wsp, ws, (void *)dm_tensor_data(res), reserve);
    if (e == CUDNN_STATUS_SUCCESS)
      goto done;
    if (e != CUDNN_STATUS_NOT_SUPPORTED) {
      st = dm_cudnn_error(e, "cudnnBatchNormalizationBackwardEx");
      goto done;
    } /* turned down when run: the fallback below */
  }
  if (dz) {
    CU_TRY(dmk_relu_grad(c->stream, x->dtype, dm_tensor_data(y), dm_tensor_data(dy),
                         dm_tensor_mutable_data(dz), x->numel));
    ST_TRY(bn_backward(ctx, bs, dm_tensor_data(dz), NULL));
  } else {
    ST_TRY(bn_backward(ctx, bs, dm_tensor_data(dy), dm_tensor_data(y)));
  }
done:
  return st;
}

const dm_kernel_def dm_cuda_bn_kernels[] = {
    GPU_KERNEL("SpatialBN", "CUDNN", .init = bn_init, .run = bn_cudnn_run, .fini = bn_fini, GRAPH_SAFE),
    GPU_KERNEL("SpatialBNGradient", "CUDNN", .init = bn_init, .run = bn_grad_cudnn_run,
               .fini = bn_fini, GRAPH_SAFE),
    GPU_KERNEL("SpatialBNRelu", "CUDNN", .init = bn_init, .run = bn_fused_run, .fini = bn_fini, GRAPH_SAFE),
    GPU_KERNEL("SpatialBNAddRelu", "CUDNN", .init = bn_init, .run = bn_fused_run,
               .fini = bn_fini, GRAPH_SAFE),
    GPU_KERNEL("SpatialBNReluGradient", "CUDNN", .init = bn_init, .run = bn_fused_grad_run,
               .fini = bn_fini, GRAPH_SAFE),
    GPU_KERNEL("SpatialBNAddReluGradient", "CUDNN", .init = bn_init, .run = bn_fused_grad_run,
               .fini = bn_fini, GRAPH_SAFE),
    {0},
};
