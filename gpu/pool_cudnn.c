/* kernels_pool_norm.c: the cuDNN (engine "CUDNN") pooling and normalisation kernels:
 * MaxPool, AveragePool and their gradients, SpatialBN(+Gradient), Softmax(+Gradient),
 * LRN(+Gradient). Split from kernels_dnn.c (which now holds only the family table) so
 * each file holds one op family; the shared helpers are in dnn_common.h, the kernel
 * definitions are declared in dnn_kernel_defs.h.
 *
 * Known differences from the CPU (documented, not bugs):
 * - MaxPoolGradient gives a tied window's gradient to one input (cuDNN), not to every
 *   input equal to the max (Caffe2's CPU rule).
 * - Pool pads are expressed as cuDNN's symmetric (top, left) pads; a geometry whose
 *   output size differs under that (some legacy_pad SAME / CAFFE_POOLING shapes) is
 *   refused.
 * - LRN is bounded by cuDNN: size <= 16, bias >= 1e-5, beta >= 0.01.
 *
 * SpatialBN(+Gradient) training in NHWC (FLOAT16, FLOAT) runs cuDNN's
 * CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode, through the Ex functions (workspace in scratch) when cuDNN wants no reserve space
 * for plain batch norm, else through the non-Ex ones: the spatial mode on NHWC is cuDNN's
 * slow path (the prime suspect in an NHWC ResNet-50 training 6x slower than NCHW). NCHW
 * and test mode keep CUDNN_BATCHNORM_SPATIAL, the persistent mode's NCHW path being
 * documented to overflow on large inputs. The results follow Caffe2's conventions in
 * either mode. All of cuDNN 9's batch-norm functions, the non-Ex ones too, are deprecated
 * in favour of its graph API; they warn only when CUDNN_WARN_DEPRECATED is defined, which
 * we do not do.
 */
#include <string.h>

#include "dnn_common.h"
#include "dnn_kernel_defs.h"
#include "operators/conv_args.h"

/* The (N, C, HW) view of BN and LRN inputs ------------------------------------------- */

/* Order argument and the (N, C, HW) view of BN and LRN inputs (>= 2 dims, checked by the
 * schema inference before this runs). */
static void channel_view(dm_op_ctx *ctx, const dm_tensor *x, int *nhwc, int64_t *N, int64_t *C,
                         int64_t *HW) {
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  *nhwc = order[0] == 'N' && order[1] == 'H';
  *N = x->dims[0];
  *C = *nhwc ? x->dims[x->ndim - 1] : x->dims[1];
  *HW = *nhwc ? dm_dims_product(x, 1, x->ndim - 1) : dm_dims_product(x, 2, x->ndim);
}

/* MaxPool, AveragePool and their gradients --------------------------------------- */

static int is_max_pool(dm_op_ctx *ctx) { return strncmp(dm_op_type(ctx), "MaxPool", 7) == 0; }

static dm_status pool_init(dm_op_ctx *ctx, void **state) {
  dm_conv_args a;
  *state = NULL;
  return dm_conv_args_parse(ctx, 1, &a);
}

typedef struct pool_desc {
  cudnnTensorDescriptor_t x, y;
  cudnnPoolingDescriptor_t pool;
} pool_desc;

static void pool_desc_free(pool_desc *d) {
  if (d->x) cudnnDestroyTensorDescriptor(d->x);
  if (d->y) cudnnDestroyTensorDescriptor(d->y);
  if (d->pool) cudnnDestroyPoolingDescriptor(d->pool);
}

/* Max: padding never wins (cuDNN treats it as -inf), and NaN inputs are not propagated:
 * the CPU's max (x > acc ? x : acc from -inf) never selects a NaN. Average: the divisor
 * counts only input pixels, as the CPU's AveragePool. */
static dm_status pool_desc_make(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *y,
                                pool_desc *d) {
  dm_conv_args a;
  dm_conv_geom g;
  DM_TRY(dm_conv_args_parse(ctx, 1, &a));
  DM_TRY(dm_conv_geometry(ctx, &a, x, 1, &g));
  DM_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->x));
  DM_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->y));
  DM_CUDNN_TRY(cudnnCreatePoolingDescriptor(&d->pool));
  int64_t xd[4], yd[4];
  nchw_of(x, a.nhwc, xd);
  nchw_of(y, a.nhwc, yd);
  DM_TRY(tensor4d(ctx, d->x, x->dtype, a.nhwc, xd[0], xd[1], xd[2], xd[3]));
  DM_TRY(tensor4d(ctx, d->y, x->dtype, a.nhwc, yd[0], yd[1], yd[2], yd[3]));
  const int64_t v[] = {g.kernel[0], g.kernel[1], g.pads[0], g.pads[1], g.stride[0], g.stride[1]};
  DM_TRY(fits_int(ctx, v, 6));
  DM_CUDNN_TRY(cudnnSetPooling2dDescriptor(
      d->pool, is_max_pool(ctx) ? CUDNN_POOLING_MAX_DETERMINISTIC
                                : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
      CUDNN_NOT_PROPAGATE_NAN, (int)g.kernel[0], (int)g.kernel[1], (int)g.pads[0], (int)g.pads[1],
      (int)g.stride[0], (int)g.stride[1]));
  int on, oc, oh, ow;
  DM_CUDNN_TRY(cudnnGetPooling2dForwardOutputDim(d->pool, d->x, &on, &oc, &oh, &ow));
  if (oh != yd[2] || ow != yd[3])
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "pads t %lld, l %lld, b %lld, r %lld (legacy_pad %d) give a %lldx%lld "
                       "output that cuDNN's symmetric pads cannot express (it gives %dx%d); "
                       "run this %s on the CPU",
                       (long long)g.pads[0], (long long)g.pads[1], (long long)g.pads[2],
                       (long long)g.pads[3], a.legacy_pad, (long long)yd[2], (long long)yd[3],
                       oh, ow, dm_op_type(ctx));
  return DM_OK;
}

static dm_status pool_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (y->numel == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  pool_desc d = {0};
  dm_status st = DM_OK;
  ST_TRY(pool_desc_make(ctx, x, y, &d));
  DNN_TRY(cudnnPoolingForward(c->cudnn, d.pool, &k_one, d.x, dm_tensor_data(x), &k_zero, d.y,
                              dm_tensor_mutable_data(y)));
done:
  pool_desc_free(&d);
  return st;
}

/* X, Y, dY -> dX. */
static dm_status pool_grad_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *y = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0);
  if (dx->numel == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  pool_desc d = {0};
  dm_status st = DM_OK;
  ST_TRY(pool_desc_make(ctx, x, y, &d));
  DNN_TRY(cudnnPoolingBackward(c->cudnn, d.pool, &k_one, d.y, dm_tensor_data(y), d.y,
                               dm_tensor_data(dy), d.x, dm_tensor_data(x), &k_zero, d.x,
                               dm_tensor_mutable_data(dx)));
done:
  pool_desc_free(&d);
  return st;
}

/* SpatialBN and SpatialBNGradient --------------------------------------------------- */

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
  int nhwc;
  int64_t N, C, HW;
} bn_desc;

static void bn_desc_free(bn_desc *d) {
  if (d->x) cudnnDestroyTensorDescriptor(d->x);
  if (d->p) cudnnDestroyTensorDescriptor(d->p);
}

/* X as (N, C, HW, 1) in its order, the mode, and the parameter descriptor derived with
 * that mode. Training in NHWC takes CUDNN_BATCHNORM_SPATIAL_PERSISTENT: cuDNN's NHWC
 * batch-norm kernels sit behind it, and its plain spatial mode on NHWC is the slow path.
 * NCHW training and test mode keep CUDNN_BATCHNORM_SPATIAL: in NCHW the persistent mode
 * may reduce in scaled atomic integers, which overflow to Inf/NaN on large finite inputs
 * where the spatial mode stays finite (cuDNN documents that caveat for NCHW only). */
static dm_status bn_desc_make(dm_op_ctx *ctx, const dm_tensor *x, int training, bn_desc *d) {
  channel_view(ctx, x, &d->nhwc, &d->N, &d->C, &d->HW);
  /* FLOAT16 and FLOAT only: those are the types cuDNN documents the persistent path for
   * (BFLOAT16 keeps the spatial mode it had before). */
  int persistent_type = x->dtype == DM_FLOAT16 || x->dtype == DM_FLOAT;
  d->mode = training && d->nhwc && persistent_type ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT
                                                   : CUDNN_BATCHNORM_SPATIAL;
  DM_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->x));
  DM_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->p));
  DM_TRY(tensor4d(ctx, d->x, x->dtype, d->nhwc, d->N, d->C, d->HW, 1));
  DM_CUDNN_TRY(cudnnDeriveBNTensorDescriptor(d->p, d->x, d->mode));
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

/* Test mode: cuDNN's inference with the given mean and var. Training: cuDNN's batch
 * statistics with exponentialAverageFactor 1 into scratch (so they are the batch mean and
 * cuDNN's unbiased variance), then dm_cuda_bn_running applies Caffe2's convention
 * (momentum on the old value, biased variance), which cuDNN's own update does not.
 * saved_mean and saved_inv_std are cuDNN's saved mean and 1/sqrt(biased var + eps), what
 * the CPU's gradient expects. */
static dm_status bn_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  float mom = dm_op_arg_float(ctx, "momentum", 0.9f);
  if (x->numel == 0)
    return DM_OK; /* training with no values is refused by the inference */
  DM_TRY(bn_eps_check(ctx, eps));
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  bn_desc d = {0};
  dm_status st = DM_OK;
  ST_TRY(bn_desc_make(ctx, x, !is_test, &d));
  const void *scale = dm_tensor_data(dm_op_input(ctx, 1)), *bias = dm_tensor_data(dm_op_input(ctx, 2));
  const float *rm = dm_tensor_data(dm_op_input(ctx, 3)), *rv = dm_tensor_data(dm_op_input(ctx, 4));
  if (is_test) { /* elementwise, so Y may be X */
    DNN_TRY(cudnnBatchNormalizationForwardInference(
        c->cudnn, d.mode, &k_one, &k_zero, d.x, dm_tensor_data(x), d.x,
        dm_tensor_mutable_data(y), d.p, scale, bias, rm, rv, eps));
    goto done;
  }
  /* Scratch, one request: batch mean and variance (C each), the Ex workspace, and Y's
   * values when Y is X's blob (cuDNN reads X again after writing Y). */
  size_t ws;
  ST_TRY(bn_ex_workspace(c, &d, 0, &ws));
  int alias = dm_tensors_alias(y, x);
  size_t stat = bn_align((size_t)d.C * 2 * sizeof(float));
  void *buf;
  ST_TRY(dm_gpu_scratch(c, stat + ws + (alias ? dm_tensor_nbytes(y) : 0), &buf));
  float *bmean = buf, *bvar = bmean + d.C;
  void *wsp = (char *)buf + stat;
  void *ytmp = alias ? (char *)buf + stat + ws : dm_tensor_mutable_data(y);
  void *smean = dm_tensor_mutable_data(dm_op_output(ctx, 3));
  void *sinv = dm_tensor_mutable_data(dm_op_output(ctx, 4));
  /* Factor 1 ignores the old values, but 0 * NaN would not: start from zeros. */
  CU_TRY(cudaMemsetAsync(bmean, 0, (size_t)d.C * 2 * sizeof(float), c->stream));
  if (ws)
    DNN_TRY(cudnnBatchNormalizationForwardTrainingEx(
        c->cudnn, d.mode, CUDNN_BATCHNORM_OPS_BN, &k_one, &k_zero, d.x, dm_tensor_data(x),
        NULL, NULL, d.x, ytmp, d.p, scale, bias, 1.0, bmean, bvar, eps, smean, sinv, NULL, wsp,
        ws, NULL, 0));
  else
    DNN_TRY(cudnnBatchNormalizationForwardTraining(c->cudnn, d.mode, &k_one, &k_zero, d.x,
                                                   dm_tensor_data(x), d.x, ytmp, d.p, scale,
                                                   bias, 1.0, bmean, bvar, eps, smean, sinv));
  CU_TRY(dm_cuda_bn_running(c->stream, rm, rv, bmean, bvar,
                            dm_tensor_mutable_data(dm_op_output(ctx, 1)),
                            dm_tensor_mutable_data(dm_op_output(ctx, 2)), d.C, d.N * d.HW, mom));
  if (alias)
    CU_TRY(cudaMemcpyAsync(dm_tensor_mutable_data(y), ytmp, dm_tensor_nbytes(y),
                           cudaMemcpyDeviceToDevice, c->stream));
done:
  bn_desc_free(&d);
  return st;
}

/* X, scale, dY, saved_mean, saved_inv_std (is_test: mean, var) -> dX, dscale, dbias.
 * Training: cuDNN's backward with the saved statistics, in the forward's mode.
 * is_test: mean and var are constants, which cuDNN's backward does not model:
 * dm_cuda_bn_grad_test. */
static dm_status bn_grad_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  dm_tensor *dx = dm_op_output(ctx, 0), *dscale = dm_op_output(ctx, 1), *dbias = dm_op_output(ctx, 2);
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  bn_desc d = {0};
  dm_status st = DM_OK;
  int nhwc;
  int64_t N, C, HW;
  channel_view(ctx, x, &nhwc, &N, &C, &HW);
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1));
  const float *s_mean = dm_tensor_data(dm_op_input(ctx, 3)), *s_inv = dm_tensor_data(dm_op_input(ctx, 4));
  if (is_test || N * HW == 0) { /* also the empty batch: sums of nothing are zero */
    CU_TRY(dm_cuda_bn_grad_test(c->stream, cu_type(x->dtype), nhwc, N, C, HW, dm_tensor_data(x),
                                dm_tensor_data(dy), scale, s_mean, s_inv, eps,
                                dm_tensor_mutable_data(dx), dm_tensor_mutable_data(dscale),
                                dm_tensor_mutable_data(dbias)));
    goto done;
  }
  ST_TRY(bn_eps_check(ctx, eps));
  ST_TRY(bn_desc_make(ctx, x, 1, &d));
  size_t ws;
  ST_TRY(bn_ex_workspace(c, &d, 1, &ws));
  if (ws) {
    void *wsp;
    ST_TRY(dm_gpu_scratch(c, ws, &wsp));
    DNN_TRY(cudnnBatchNormalizationBackwardEx(
        c->cudnn, d.mode, CUDNN_BATCHNORM_OPS_BN, &k_one, &k_zero, &k_one, &k_zero, d.x,
        dm_tensor_data(x), NULL, NULL, d.x, dm_tensor_data(dy), NULL, NULL, d.x,
        dm_tensor_mutable_data(dx), d.p, scale, NULL, dm_tensor_mutable_data(dscale),
        dm_tensor_mutable_data(dbias), eps, s_mean, s_inv, NULL, wsp, ws, NULL, 0));
  } else
    DNN_TRY(cudnnBatchNormalizationBackward(
        c->cudnn, d.mode, &k_one, &k_zero, &k_one, &k_zero, d.x, dm_tensor_data(x), d.x,
        dm_tensor_data(dy), d.x, dm_tensor_mutable_data(dx), d.p, scale,
        dm_tensor_mutable_data(dscale), dm_tensor_mutable_data(dbias), eps, s_mean, s_inv));
done:
  bn_desc_free(&d);
  return st;
}

/* Softmax and SoftmaxGradient -------------------------------------------------------- */

/* X viewed as N x D at `axis` (the CPU's view): cuDNN's per-instance softmax over
 * (N, D, 1, 1). */
static dm_status softmax_desc(dm_op_ctx *ctx, const dm_tensor *x, cudnnTensorDescriptor_t d) {
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  return tensor4d(ctx, d, x->dtype, 0, dm_dims_product(x, 0, axis),
                  dm_dims_product(x, axis, x->ndim), 1, 1);
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
  cudnnTensorDescriptor_t d = NULL;
  dm_status st = DM_OK;
  DNN_TRY(cudnnCreateTensorDescriptor(&d));
  ST_TRY(softmax_desc(ctx, a, d));
  int alias = dm_tensors_alias(out, a) || (dy && dm_tensors_alias(out, dy));
  void *dst = dm_tensor_mutable_data(out);
  if (alias)
    ST_TRY(dm_gpu_scratch(c, dm_tensor_nbytes(out), &dst));
  if (!grad)
    DNN_TRY(cudnnSoftmaxForward(c->cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE,
                                &k_one, d, dm_tensor_data(a), &k_zero, d, dst));
  else
    DNN_TRY(cudnnSoftmaxBackward(c->cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE,
                                 &k_one, d, dm_tensor_data(a), d, dm_tensor_data(dy), &k_zero, d,
                                 dst));
  if (alias)
    CU_TRY(cudaMemcpyAsync(dm_tensor_mutable_data(out), dst, dm_tensor_nbytes(out),
                           cudaMemcpyDeviceToDevice, c->stream));
done:
  if (d) cudnnDestroyTensorDescriptor(d);
  return st;
}

/* LRN and LRNGradient ------------------------------------------------------------------ */

/* cuDNN's cross-channel LRN has the CPU's formula (it divides alpha by size itself, and
 * its window for odd sizes is the CPU's) within its bounds. */
static dm_status lrn_desc(dm_op_ctx *ctx, const dm_tensor *x, cudnnTensorDescriptor_t xd,
                          cudnnLRNDescriptor_t ld) {
  int nhwc;
  int64_t N, C, HW;
  channel_view(ctx, x, &nhwc, &N, &C, &HW);
  DM_TRY(tensor4d(ctx, xd, x->dtype, nhwc, N, C, HW, 1));
  int64_t size = dm_op_arg_int(ctx, "size", 0);
  double alpha = dm_op_arg_float(ctx, "alpha", 0.0f), beta = dm_op_arg_float(ctx, "beta", 0.0f);
  double bias = dm_op_arg_float(ctx, "bias", 1.0f);
  if (size > CUDNN_LRN_MAX_N || bias < CUDNN_LRN_MIN_K || beta < CUDNN_LRN_MIN_BETA)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "size %lld, bias %g, beta %g: cuDNN's LRN needs size <= %d, bias >= %g "
                       "and beta >= %g; run this %s on the CPU",
                       (long long)size, bias, beta, CUDNN_LRN_MAX_N, CUDNN_LRN_MIN_K,
                       CUDNN_LRN_MIN_BETA, dm_op_type(ctx));
  DM_CUDNN_TRY(cudnnSetLRNDescriptor(ld, (unsigned)size, alpha, beta, bias));
  return DM_OK;
}

/* LRN: X -> Y, [scale (FP32)]; LRNGradient: X, Y, dY, [scale] -> dX (scale unused: cuDNN
 * recomputes it). */
static dm_status lrn_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  int grad = strcmp(dm_op_type(ctx), "LRNGradient") == 0;
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *out = dm_op_output(ctx, 0);
  if (out->numel == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  cudnnTensorDescriptor_t xd = NULL;
  cudnnLRNDescriptor_t ld = NULL;
  dm_status st = DM_OK;
  DNN_TRY(cudnnCreateTensorDescriptor(&xd));
  DNN_TRY(cudnnCreateLRNDescriptor(&ld));
  ST_TRY(lrn_desc(ctx, x, xd, ld));
  int alias = 0;
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    alias |= dm_tensors_alias(out, dm_op_input(ctx, i));
  void *dst = dm_tensor_mutable_data(out);
  if (alias)
    ST_TRY(dm_gpu_scratch(c, dm_tensor_nbytes(out), &dst));
  if (!grad) {
    DNN_TRY(cudnnLRNCrossChannelForward(c->cudnn, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &k_one, xd,
                                        dm_tensor_data(x), &k_zero, xd, dst));
    if (dm_op_num_outputs(ctx) > 1) {
      int nhwc;
      int64_t N, C, HW, size = dm_op_arg_int(ctx, "size", 0);
      channel_view(ctx, x, &nhwc, &N, &C, &HW);
      double alpha_n = (double)dm_op_arg_float(ctx, "alpha", 0.0f) / (double)size;
      CU_TRY(dm_cuda_lrn_scale(c->stream, cu_type(x->dtype), nhwc, N, C, HW, dm_tensor_data(x),
                               (int)size, alpha_n, dm_op_arg_float(ctx, "bias", 1.0f),
                               dm_tensor_mutable_data(dm_op_output(ctx, 1))));
    }
  } else {
    DNN_TRY(cudnnLRNCrossChannelBackward(
        c->cudnn, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &k_one, xd, dm_tensor_data(dm_op_input(ctx, 1)),
        xd, dm_tensor_data(dm_op_input(ctx, 2)), xd, dm_tensor_data(x), &k_zero, xd, dst));
  }
  if (alias)
    CU_TRY(cudaMemcpyAsync(dm_tensor_mutable_data(out), dst, dm_tensor_nbytes(out),
                           cudaMemcpyDeviceToDevice, c->stream));
done:
  if (xd) cudnnDestroyTensorDescriptor(xd);
  if (ld) cudnnDestroyLRNDescriptor(ld);
  return st;
}

/* Kernel definitions (listed in kernels_dnn.c) -------------------------------------- */

CUDNN_KERNEL(dm_cuda_max_pool_k, "MaxPool", pool_init, pool_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_avg_pool_k, "AveragePool", pool_init, pool_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_max_pool_grad_k, "MaxPoolGradient", pool_init, pool_grad_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_avg_pool_grad_k, "AveragePoolGradient", pool_init, pool_grad_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_bn_k, "SpatialBN", NULL, bn_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_bn_grad_k, "SpatialBNGradient", NULL, bn_grad_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_softmax_k, "Softmax", NULL, softmax_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_softmax_grad_k, "SoftmaxGradient", NULL, softmax_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_lrn_k, "LRN", NULL, lrn_cudnn_run, NULL);
CUDNN_KERNEL(dm_cuda_lrn_grad_k, "LRNGradient", NULL, lrn_cudnn_run, NULL);
