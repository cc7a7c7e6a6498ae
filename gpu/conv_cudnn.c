/* conv_cudnn.c: the cuDNN (engine "CUDNN") Conv and ConvGradient kernels, with their
 * descriptors and per-op algorithm cache kept in the kernel state (cudnn_common.h).
 *
 * Semantics are the CPU kernels' (operators/conv.c): every run first runs the op's
 * schema inference (dm_op_run_infer: the same argument, shape and dtype checks, outputs
 * allocated on the op's device), then enqueues cuDNN calls on the thread's context
 * stream. FP16/BF16 are faithful to tensor cores (16-bit tensors, FP32 compute type);
 * FP32 stays FP32 (CUDNN_FMA_MATH keeps TF32 out).
 *
 * Known differences from the CPU (documented, not bugs):
 * - Pads are expressed as cuDNN's symmetric (top, left) pads; a geometry whose output
 *   size differs under that is refused.
 *
 * Conv algorithms: cuDNN's heuristics by default; with exhaustive_search=1 (Caffe2's
 * argument) cudnnFind benchmarks them, which synchronises the host once per new shape.
 * Each op keeps its choices for its last few shapes (CONV_SHAPES).
 *
 * The forward and backward runs take the state and (backward) dY's data as arguments,
 * so that conv_fusion_cudnn.c's ConvFusion and ConvReluGradient run them too (kernels.h):
 * the forward with relu is cuDNN's ConvolutionBiasActivationForward (where cuDNN runs it
 * for the geometry; else Conv and the elementwise relu).
 */
#include <stdlib.h>
#include <string.h>

#include "cudnn_common.h"
#include "operators/conv_args.h"

/* Conv and ConvGradient ------------------------------------------------------------ */

/* The algorithms chosen for one shape key. */
typedef struct conv_choice {
  int64_t key[10]; /* dtype, X dims, W dims, grad and has dX */
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  cudnnMathType_t fwd_math, data_math, filter_math;
  size_t fwd_ws, data_ws, filter_ws;
} conv_choice;

/* Shapes an op remembers choices for. A net runs one shape per op as a rule; a few
 * more cover a caller who alternates batch sizes (training and a smaller last batch,
 * inference at two sizes) without searching again at every change, which with
 * exhaustive_search costs a host synchronisation and a benchmark each time. */
#define CONV_SHAPES 4

/* The descriptors of the op's convolution, set for shape key `key`: X, W and Y's
 * dtypes and dims (Y is dY for the gradient). */
typedef struct conv_desc {
  cudnnTensorDescriptor_t x, y, b;
  cudnnActivationDescriptor_t relu; /* ConvFusion's, made at its first fused run */
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  int valid;
  int64_t key[3 * DNN_TKEY];
} conv_desc;

/* Private state: the arguments, parsed once; the workspace limit, the search mode; the
 * descriptors; and the algorithm choices for the last CONV_SHAPES shape keys (the oldest
 * replaced first). */
typedef struct conv_state {
  dm_conv_args args;
  size_t ws_limit;
  int exhaustive; /* Caffe2's exhaustive_search: benchmark (cudnnFind), else heuristics */
  conv_desc d;
  int n, next;    /* choices held, and the one to replace next */
  conv_choice choice[CONV_SHAPES];
  /* ConvFusion without a bias: cuDNN's fused call takes one, so zeros of Y's dtype (M),
   * made at the first run of a (dtype, M) */
  dm_tensor *zero;
  int64_t zero_key[2];
} conv_state;

void dm_cuda_conv_fini(void *state) {
  conv_state *s = state;
  if (!s)
    return;
  if (s->d.relu) cudnnDestroyActivationDescriptor(s->d.relu);
  dm_tensor_free(s->zero);
  if (s->d.x) cudnnDestroyTensorDescriptor(s->d.x);
  if (s->d.y) cudnnDestroyTensorDescriptor(s->d.y);
  if (s->d.b) cudnnDestroyTensorDescriptor(s->d.b);
  if (s->d.w) cudnnDestroyFilterDescriptor(s->d.w);
  if (s->d.conv) cudnnDestroyConvolutionDescriptor(s->d.conv);
  free(s);
}

dm_status dm_cuda_conv_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  dm_conv_args a; /* argument errors at instantiation, as on the CPU */
  DM_TRY(dm_conv_args_parse(ctx, 0, &a));
  int64_t lim = dm_op_arg_int(ctx, "ws_nbytes_limit", (int64_t)1 << 30);
  if (lim < 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "ws_nbytes_limit is %lld; it must be >= 0",
                       (long long)lim);
  conv_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the cuDNN conv state");
  s->args = a;
  s->ws_limit = (size_t)lim;
  s->exhaustive = dm_op_arg_int(ctx, "exhaustive_search", 0) != 0;
  dm_status st = DM_OK;
  DNN_TRY(cudnnCreateTensorDescriptor(&s->d.x));
  DNN_TRY(cudnnCreateTensorDescriptor(&s->d.y));
  DNN_TRY(cudnnCreateTensorDescriptor(&s->d.b));
  DNN_TRY(cudnnCreateFilterDescriptor(&s->d.w));
  DNN_TRY(cudnnCreateConvolutionDescriptor(&s->d.conv));
done:
  if (st != DM_OK) {
    dm_cuda_conv_fini(s);
    return st;
  }
  *state = s;
  return DM_OK;
}

/* The math type the algorithm search starts from: FP32 without TF32 (FMA only); 16-bit
 * data on tensor cores. */
static cudnnMathType_t conv_base_math(dm_dtype t) {
  return t == DM_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/* Sets the descriptors for X, W and Y (whose dims the inference already set) unless they
 * are set for these shapes, and checks that cuDNN's symmetric (top, left) pads give the
 * CPU's output size. The math type is left to the caller, which sets it before every
 * call that depends on it. */
static dm_status conv_desc_set(dm_op_ctx *ctx, conv_state *cs, const dm_tensor *x,
                               const dm_tensor *w, const dm_tensor *y) {
  conv_desc *d = &cs->d;
  int64_t key[3 * DNN_TKEY];
  dnn_tkey(key, x);
  dnn_tkey(key + DNN_TKEY, w);
  dnn_tkey(key + 2 * DNN_TKEY, y);
  if (dnn_key_same(&d->valid, d->key, key, 3 * DNN_TKEY))
    return DM_OK;
  const dm_conv_args *a = &cs->args;
  dm_conv_geom g;
  DM_TRY(dm_conv_geometry(ctx, a, x, 0, &g));
  int64_t xd[4], yd[4];
  DM_TRY(dnn_xy4d(ctx, a->nhwc, x, y, d->x, d->y, xd, yd));
  int64_t M = w->dims[0], Cg = xd[1] / a->group;
  const int64_t v[] = {M, Cg, g.kernel[0], g.kernel[1], g.pads[0], g.pads[1], g.stride[0],
                       g.stride[1], g.dilation[0], g.dilation[1], a->group};
  DM_TRY(fits_int(ctx, v, 11));
  /* NHWC filters are Caffe2's (M, kH, kW, C/group): cuDNN's KRSC, given as (k, c, h, w). */
  DM_CUDNN_TRY(cudnnSetFilter4dDescriptor(d->w, dnn_type(w->dtype),
                                          a->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                          (int)M, (int)Cg, (int)g.kernel[0], (int)g.kernel[1]));
  DM_CUDNN_TRY(cudnnSetConvolution2dDescriptor(
      d->conv, (int)g.pads[0], (int)g.pads[1], (int)g.stride[0], (int)g.stride[1],
      (int)g.dilation[0], (int)g.dilation[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DM_CUDNN_TRY(cudnnSetConvolutionGroupCount(d->conv, (int)a->group));
  DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, conv_base_math(x->dtype)));
  DM_TRY(tensor4d(ctx, d->b, y->dtype, 0, 1, M, 1, 1));
  int on, oc, oh, ow;
  DM_CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &on, &oc, &oh, &ow));
  if (oh != yd[2] || ow != yd[3])
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "pads t %lld, l %lld, b %lld, r %lld give a %lldx%lld output that "
                       "cuDNN's symmetric pads cannot express (it gives %dx%d); run this "
                       "Conv on the CPU",
                       (long long)g.pads[0], (long long)g.pads[1], (long long)g.pads[2],
                       (long long)g.pads[3], (long long)yd[2], (long long)yd[3], oh, ow);
  dnn_key_set(&d->valid, d->key, key, 3 * DNN_TKEY);
  return DM_OK;
}

/* Whether a search result may be used, and the math type to run it with. FP32 must not
 * reach TF32: a tensor-op result is skipped and the others run with FMA math only
 * (cuDNN's DEFAULT math would allow TF32 on Ampere and later). */
static int conv_algo_ok(cudnnStatus_t st, cudnnMathType_t m, dm_dtype t, cudnnMathType_t *run) {
  if (st != CUDNN_STATUS_SUCCESS)
    return 0;
  if (t == DM_FLOAT && m != CUDNN_FMA_MATH && m != CUDNN_DEFAULT_MATH)
    return 0;
  *run = t == DM_FLOAT ? CUDNN_FMA_MATH : m;
  return 1;
}

/* Chooses (once per shape key) an algorithm per direction within the workspace limit:
 * with exhaustive_search the fastest measured by cudnnFind (which synchronises the host
 * and allocates its own buffers, once per new shape), else the first of cuDNN's
 * heuristics (no device work). The workspace size is asked for the math type the call
 * will run with. *out: the choice for this shape, valid until the next call. */
static dm_status conv_find(dm_op_ctx *ctx, conv_state *st, dm_gpu_context *c, const conv_desc *d,
                           const dm_tensor *x, const dm_tensor *w, int grad, int has_dx,
                           const conv_choice **out) {
  int64_t key[10] = {x->dtype, x->dims[0], x->dims[1], x->dims[2], x->dims[3],
                     w->dims[0], w->dims[1], w->dims[2], w->dims[3], grad * 2 + has_dx};
  for (int k = 0; k < st->n; k++)
    if (memcmp(key, st->choice[k].key, sizeof key) == 0) {
      *out = &st->choice[k];
      return DM_OK;
    }
  /* Searched into a scratch choice, kept only once every direction has an algorithm. */
  conv_choice found = {0}, *s = &found;
  const dm_dtype t = x->dtype;
  const cudnnMathType_t base = conv_base_math(t);
  cudnnMathType_t m = base;
  size_t ws = 0;
  int n = 0, i;
  if (!grad) {
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, base));
    if (st->exhaustive)
      DM_CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(
          c->cudnn, d->x, d->w, d->conv, d->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, p));
    else
      DM_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(
          c->cudnn, d->x, d->w, d->conv, d->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, p));
    for (i = 0; i < n; i++) {
      if (!conv_algo_ok(p[i].status, p[i].mathType, t, &m))
        continue;
      DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, m));
      if (cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, d->x, d->w, d->conv, d->y,
                                                  p[i].algo, &ws) == CUDNN_STATUS_SUCCESS &&
          ws <= st->ws_limit)
        break;
    }
    if (i == n)
      goto none;
    s->fwd = p[i].algo, s->fwd_math = m, s->fwd_ws = ws;
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, base));
    if (st->exhaustive)
      DM_CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithm(
          c->cudnn, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, p));
    else
      DM_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          c->cudnn, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, p));
    for (i = 0; i < n; i++) {
      if (!conv_algo_ok(p[i].status, p[i].mathType, t, &m))
        continue;
      DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, m));
      if (cudnnGetConvolutionBackwardFilterWorkspaceSize(c->cudnn, d->x, d->y, d->conv, d->w,
                                                         p[i].algo, &ws) ==
              CUDNN_STATUS_SUCCESS &&
          ws <= st->ws_limit)
        break;
    }
    if (i == n)
      goto none;
    s->bwd_filter = p[i].algo, s->filter_math = m, s->filter_ws = ws;
    s->data_ws = 0;
    if (has_dx) {
      cudnnConvolutionBwdDataAlgoPerf_t q[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, base));
      if (st->exhaustive)
        DM_CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithm(
            c->cudnn, d->w, d->y, d->conv, d->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, q));
      else
        DM_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            c->cudnn, d->w, d->y, d->conv, d->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, q));
      for (i = 0; i < n; i++) {
        if (!conv_algo_ok(q[i].status, q[i].mathType, t, &m))
          continue;
        DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, m));
        if (cudnnGetConvolutionBackwardDataWorkspaceSize(c->cudnn, d->w, d->y, d->conv, d->x,
                                                         q[i].algo, &ws) ==
                CUDNN_STATUS_SUCCESS &&
            ws <= st->ws_limit)
          break;
      }
      if (i == n)
        goto none;
      s->bwd_data = q[i].algo, s->data_math = m, s->data_ws = ws;
    }
  }
  memcpy(s->key, key, sizeof key);
  int slot = st->n < CONV_SHAPES ? st->n++ : st->next;
  st->next = (slot + 1) % CONV_SHAPES;
  st->choice[slot] = found;
  *out = &st->choice[slot];
  return DM_OK;
none:
  return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                     "cuDNN has no %s algorithm for these shapes within ws_nbytes_limit %zu",
                     grad ? "backward" : "forward", st->ws_limit);
}

/* ConvFusion's fused call: relu(conv(X, W) + b) in one cuDNN kernel. cuDNN runs the relu
 * form with IMPLICIT_PRECOMP_GEMM only; z (alpha2 = 0) is Y, unread. b is the op's (of
 * Y's dtype) or the state's zeros. Where cuDNN answers NOT_SUPPORTED for the geometry
 * (before any work is queued), *fallback is set and the caller runs Conv, then the
 * relu. */
static dm_status conv_relu_fused(dm_op_ctx *ctx, conv_state *cs, dm_gpu_context *c,
                                 const dm_tensor *x, const dm_tensor *w, const dm_tensor *b,
                                 dm_tensor *y, int *fallback) {
  conv_desc *d = &cs->d;
  dm_status st = DM_OK;
  const void *pb = b ? dm_tensor_data(b) : NULL;
  if (!d->relu) {
    DNN_TRY(cudnnCreateActivationDescriptor(&d->relu));
    DNN_TRY(cudnnSetActivationDescriptor(d->relu, CUDNN_ACTIVATION_RELU,
                                         CUDNN_PROPAGATE_NAN, 0.0));
  }
  if (!b) {
    int64_t M = w->dims[0], key[2] = {y->dtype, M};
    if (!cs->zero && !(cs->zero = dm_tensor_new(y->limit)))
      return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for ConvFusion's zero bias");
    if (memcmp(key, cs->zero_key, sizeof key) != 0) {
      dm_gpu_note_private_realloc(c); /* graphs recorded before may point at the old */
      ST_TRY(dm_tensor_resize_on(cs->zero, DM_CUDA, dm_op_device_id(ctx), y->dtype, 1, &M));
      CU_TRY(cudaMemsetAsync(dm_tensor_mutable_data(cs->zero), 0, dm_tensor_nbytes(cs->zero),
                             c->stream));
      memcpy(cs->zero_key, key, sizeof key);
    }
    pb = dm_tensor_data(cs->zero);
  }
  const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t need = 0;
  void *ws = NULL;
  DNN_TRY(cudnnSetConvolutionMathType(d->conv, conv_base_math(x->dtype)));
  cudnnStatus_t e = cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, d->x, d->w, d->conv,
                                                            d->y, algo, &need);
  if (e == CUDNN_STATUS_NOT_SUPPORTED || (e == CUDNN_STATUS_SUCCESS && need > cs->ws_limit)) {
    *fallback = 1;
    return DM_OK;
  }
  DNN_TRY(e);
  if (need)
    ST_TRY(dm_gpu_scratch(c, need, &ws));
  void *py = dm_tensor_mutable_data(y);
  e = cudnnConvolutionBiasActivationForward(c->cudnn, &k_one, d->x, dm_tensor_data(x), d->w,
                                            dm_tensor_data(w), d->conv, algo, ws, need,
                                            &k_zero, d->y, py, d->b, pb, d->relu, d->y, py);
  if (e == CUDNN_STATUS_NOT_SUPPORTED)
    *fallback = 1;
  else
    DNN_TRY(e);
done:
  return st;
}

dm_status dm_cuda_conv_forward(dm_op_ctx *ctx, void *state, int relu) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  const dm_tensor *b = dm_op_num_inputs(ctx) > 2 ? dm_op_input(ctx, 2) : NULL;
  dm_tensor *y = dm_op_output(ctx, 0);
  if (y->numel == 0)
    return DM_OK;
  conv_state *cs = state;
  const conv_choice *s = NULL;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  const conv_desc *d = &cs->d;
  dm_status st = DM_OK;
  void *ws = NULL;
  ST_TRY(conv_desc_set(ctx, cs, x, w, y));
  /* The fused call takes a bias of Y's dtype, FP32 or FP16 (cuDNN's configurations for
   * it); an FP32 bias of a 16-bit Conv, or BF16, takes the blend below and a separate
   * relu. */
  if (relu && y->dtype != DM_BFLOAT16 && (!b || b->dtype == y->dtype)) {
    int fallback = 0;
    ST_TRY(conv_relu_fused(ctx, cs, c, x, w, b, y, &fallback));
    if (!fallback)
      return DM_OK;
  }
  ST_TRY(conv_find(ctx, cs, c, d, x, w, 0, 0, &s));
  DNN_TRY(cudnnSetConvolutionMathType(d->conv, s->fwd_math));
  if (s->fwd_ws)
    ST_TRY(dm_gpu_scratch(c, s->fwd_ws, &ws));
  /* With a bias, Y is first set to the bias broadcast and the convolution is blended
   * into it (beta = 1): cuDNN adds the prior Y in its FP32 compute type before it rounds,
   * so a 16-bit Y is rounded once, as on the CPU, instead of once for the convolution and
   * again after a separate bias add. */
  void *py = dm_tensor_mutable_data(y);
  if (b) { /* args.nhwc: the order as parsed (case-insensitive, as conv_args.c) */
    int64_t M = w->dims[0], inner = cs->args.nhwc ? 1 : y->dims[2] * y->dims[3];
    CU_TRY(cudaMemsetAsync(py, 0, dm_tensor_nbytes(y), c->stream));
    CU_TRY(dmk_bias_add(c->stream, py, y->dtype, py, y->dtype, dm_tensor_data(b), b->dtype,
                        y->numel, inner, M));
  }
  DNN_TRY(cudnnConvolutionForward(c->cudnn, &k_one, d->x, dm_tensor_data(x), d->w,
                                  dm_tensor_data(w), d->conv, s->fwd, ws, s->fwd_ws,
                                  b ? &k_one : &k_zero, d->y, py));
  if (relu) /* the rounded Y: the relu commutes with the rounding */
    CU_TRY(dmk_relu(c->stream, y->dtype, py, py, y->numel));
done:
  return st;
}

static dm_status conv_cudnn_run(dm_op_ctx *ctx) {
  return dm_cuda_conv_forward(ctx, dm_op_state(ctx), 0);
}

/* ConvGradient: X, W, dY -> dW, [db], [dX] (which exist: no_bias and the output count, as
 * the CPU's conv_grad_prepare decides). */
dm_status dm_cuda_conv_backward(dm_op_ctx *ctx, void *state, const void *dy_data) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  int n_out = dm_op_num_outputs(ctx), no_bias = dm_op_arg_int(ctx, "no_bias", 0) != 0;
  dm_tensor *dw = dm_op_output(ctx, 0), *db = no_bias ? NULL : dm_op_output(ctx, 1);
  dm_tensor *dx = n_out == (no_bias ? 2 : 3) ? dm_op_output(ctx, n_out - 1) : NULL;
  conv_state *cs = state;
  const conv_choice *s = NULL;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  if (dy->numel == 0) { /* no images (or an empty output): the sums are zero */
    DM_CUDA_TRY(cudaMemsetAsync(dm_tensor_mutable_data(dw), 0, dm_tensor_nbytes(dw), c->stream));
    if (db)
      DM_CUDA_TRY(
          cudaMemsetAsync(dm_tensor_mutable_data(db), 0, dm_tensor_nbytes(db), c->stream));
    if (dx && dx->numel)
      DM_CUDA_TRY(
          cudaMemsetAsync(dm_tensor_mutable_data(dx), 0, dm_tensor_nbytes(dx), c->stream));
    return DM_OK;
  }
  const conv_desc *d = &cs->d;
  dm_status st = DM_OK;
  void *ws = NULL;
  ST_TRY(conv_desc_set(ctx, cs, x, w, dy));
  ST_TRY(conv_find(ctx, cs, c, d, x, w, 1, dx != NULL, &s));
  size_t need = s->filter_ws > s->data_ws ? s->filter_ws : s->data_ws;
  if (need) /* one buffer: the calls run one after another on the stream */
    ST_TRY(dm_gpu_scratch(c, need, &ws));
  DNN_TRY(cudnnSetConvolutionMathType(d->conv, s->filter_math));
  DNN_TRY(cudnnConvolutionBackwardFilter(c->cudnn, &k_one, d->x, dm_tensor_data(x), d->y,
                                         dy_data, d->conv, s->bwd_filter, ws,
                                         s->filter_ws, &k_zero, d->w, dm_tensor_mutable_data(dw)));
  if (db)
    DNN_TRY(cudnnConvolutionBackwardBias(c->cudnn, &k_one, d->y, dy_data, &k_zero, d->b,
                                         dm_tensor_mutable_data(db)));
  if (dx) {
    DNN_TRY(cudnnSetConvolutionMathType(d->conv, s->data_math));
    DNN_TRY(cudnnConvolutionBackwardData(c->cudnn, &k_one, d->w, dm_tensor_data(w), d->y,
                                         dy_data, d->conv, s->bwd_data, ws, s->data_ws,
                                         &k_zero, d->x, dm_tensor_mutable_data(dx)));
  }
done:
  return st;
}

static dm_status conv_grad_cudnn_run(dm_op_ctx *ctx) {
  return dm_cuda_conv_backward(ctx, dm_op_state(ctx), dm_tensor_data(dm_op_input(ctx, 2)));
}

const dm_kernel_def dm_cuda_conv_kernels[] = {
    GPU_KERNEL("Conv", "CUDNN", .init = dm_cuda_conv_init, .run = conv_cudnn_run,
               .fini = dm_cuda_conv_fini, GRAPH_SAFE),
    GPU_KERNEL("ConvGradient", "CUDNN", .init = dm_cuda_conv_init, .run = conv_grad_cudnn_run,
               .fini = dm_cuda_conv_fini, GRAPH_SAFE),
    {0},
};
