/* kernels_dnn.c: the CUDA library ops. cuDNN (engine "CUDNN"): Conv, ConvGradient,
 * MaxPool, AveragePool and their gradients, SpatialBN(+Gradient), Softmax(+Gradient),
 * LRN(+Gradient). cuBLAS (plain engine): FC, FCGradient.
 *
 * Semantics are the CPU kernels' (operators/): every kernel first runs the op's schema
 * inference (dm_op_run_infer: the same argument, shape and dtype checks, and the
 * outputs allocated on the op's device), then enqueues library calls on the thread's
 * context stream. FP16/BF16 are faithful to tensor cores: 16-bit tensors, FP32 compute
 * (cuDNN convolution compute type FLOAT, cublasGemmEx with CUBLAS_COMPUTE_32F). FP32
 * stays FP32: CUDNN_FMA_MATH and CUBLAS_COMPUTE_32F_PEDANTIC keep TF32 out, so results
 * match the CPU at FP32 tolerance.
 *
 * Known differences from the CPU (documented, not bugs):
 * - Conv with a bias in FP16/BF16 rounds twice (cuDNN writes a 16-bit Y, the bias is
 *   added after); FC rounds once (the GEMM writes FP32 scratch, the bias kernel rounds).
 * - MaxPoolGradient gives a tied window's gradient to one input (cuDNN), not to every
 *   input equal to the max (Caffe2's CPU rule).
 * - Pads are expressed as cuDNN's symmetric (top, left) pads; a geometry whose output
 *   size differs under that (some legacy_pad SAME / CAFFE_POOLING shapes) is refused.
 * - LRN is bounded by cuDNN: size <= 16, bias >= 1e-5, beta >= 0.01.
 *
 * Conv algorithms: cuDNN's heuristics by default; with exhaustive_search=1 (Caffe2's
 * argument) cudnnFind benchmarks them, which synchronises the host once per new shape.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "core/tensor.h"
#include "demitasse_plugin.h"
#include "dnn_kernels.h"
#include "kernels.h"
#include "operators/common.h"
#include "operators/conv_args.h"

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

static cudnnDataType_t dnn_type(dm_dtype t) {
  return t == DM_FLOAT16 ? CUDNN_DATA_HALF : t == DM_BFLOAT16 ? CUDNN_DATA_BFLOAT16
                                                               : CUDNN_DATA_FLOAT;
}
static int cu_type(dm_dtype t) {
  return t == DM_FLOAT16 ? DM_CUDA_F16 : t == DM_BFLOAT16 ? DM_CUDA_BF16 : DM_CUDA_F32;
}
static cudaDataType_t blas_type(dm_dtype t) {
  return t == DM_FLOAT16 ? CUDA_R_16F : t == DM_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* cuDNN descriptors take int sizes. */
static dm_status fits_int(dm_op_ctx *ctx, const int64_t *v, int n) {
  for (int i = 0; i < n; i++)
    if (v[i] < 0 || v[i] > INT_MAX)
      return dm_op_error(ctx, DM_ERR_LIMIT, "size %lld exceeds cuDNN's int range",
                         (long long)v[i]);
  return DM_OK;
}

/* A 4-D tensor descriptor (n, c, h, w) in NCHW or NHWC memory order. */
static dm_status tensor4d(dm_op_ctx *ctx, cudnnTensorDescriptor_t d, dm_dtype t, int nhwc,
                          int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t v[4] = {n, c, h, w};
  DM_TRY(fits_int(ctx, v, 4));
  DM_CUDNN_TRY(cudnnSetTensor4dDescriptor(d, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                          dnn_type(t), (int)n, (int)c, (int)h, (int)w));
  return DM_OK;
}

/* X's (N, C, H, W) from dm_conv_geom-style 4-D dims in the given order. */
static void nchw_of(const dm_tensor *x, int nhwc, int64_t d[4]) {
  d[0] = x->dims[0];
  d[1] = x->dims[nhwc ? 3 : 1];
  d[2] = x->dims[nhwc ? 1 : 2];
  d[3] = x->dims[nhwc ? 2 : 3];
}

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

/* Conv and ConvGradient ------------------------------------------------------------ */

/* Private state: the workspace limit, the search mode and the algorithms chosen for the
 * last shape key. */
typedef struct conv_state {
  size_t ws_limit;
  int exhaustive; /* Caffe2's exhaustive_search: benchmark (cudnnFind), else heuristics */
  int valid;
  int64_t key[10]; /* dtype, X dims, W dims, grad and has dX */
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  cudnnMathType_t fwd_math, data_math, filter_math;
  size_t fwd_ws, data_ws, filter_ws;
} conv_state;

static dm_status conv_init(dm_op_ctx *ctx, void **state) {
  dm_conv_args a; /* argument errors at instantiation, as on the CPU */
  DM_TRY(dm_conv_args_parse(ctx, 0, &a));
  int64_t lim = dm_op_arg_int(ctx, "ws_nbytes_limit", (int64_t)1 << 30);
  if (lim < 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "ws_nbytes_limit is %lld; it must be >= 0",
                       (long long)lim);
  conv_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the cuDNN conv state");
  s->ws_limit = (size_t)lim;
  s->exhaustive = dm_op_arg_int(ctx, "exhaustive_search", 0) != 0;
  *state = s;
  return DM_OK;
}

static void conv_fini(void *state) { free(state); }

/* The descriptors of one conv call. */
typedef struct conv_desc {
  cudnnTensorDescriptor_t x, y, b;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  int nhwc;
} conv_desc;

static void conv_desc_free(conv_desc *d) {
  if (d->x) cudnnDestroyTensorDescriptor(d->x);
  if (d->y) cudnnDestroyTensorDescriptor(d->y);
  if (d->b) cudnnDestroyTensorDescriptor(d->b);
  if (d->w) cudnnDestroyFilterDescriptor(d->w);
  if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
}

/* The math type the algorithm search starts from: FP32 without TF32 (FMA only); 16-bit
 * data on tensor cores. */
static cudnnMathType_t conv_base_math(dm_dtype t) {
  return t == DM_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/* Builds the descriptors for X, W and Y (whose dims the inference already set) and checks
 * that cuDNN's symmetric (top, left) pads give the CPU's output size. */
static dm_status conv_desc_make(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                                const dm_tensor *y, conv_desc *d) {
  dm_conv_args a;
  dm_conv_geom g;
  DM_TRY(dm_conv_args_parse(ctx, 0, &a));
  DM_TRY(dm_conv_geometry(ctx, &a, x, 0, &g));
  d->nhwc = a.nhwc;
  DM_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->x));
  DM_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->y));
  DM_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->b));
  DM_CUDNN_TRY(cudnnCreateFilterDescriptor(&d->w));
  DM_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&d->conv));
  int64_t xd[4], yd[4];
  nchw_of(x, a.nhwc, xd);
  nchw_of(y, a.nhwc, yd);
  DM_TRY(tensor4d(ctx, d->x, x->dtype, a.nhwc, xd[0], xd[1], xd[2], xd[3]));
  DM_TRY(tensor4d(ctx, d->y, x->dtype, a.nhwc, yd[0], yd[1], yd[2], yd[3]));
  int64_t M = w->dims[0], Cg = xd[1] / a.group;
  const int64_t v[] = {M, Cg, g.kernel[0], g.kernel[1], g.pads[0], g.pads[1], g.stride[0],
                       g.stride[1], g.dilation[0], g.dilation[1], a.group};
  DM_TRY(fits_int(ctx, v, 11));
  /* NHWC filters are Caffe2's (M, kH, kW, C/group): cuDNN's KRSC, given as (k, c, h, w). */
  DM_CUDNN_TRY(cudnnSetFilter4dDescriptor(d->w, dnn_type(w->dtype),
                                          a.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, (int)M,
                                          (int)Cg, (int)g.kernel[0], (int)g.kernel[1]));
  DM_CUDNN_TRY(cudnnSetConvolution2dDescriptor(
      d->conv, (int)g.pads[0], (int)g.pads[1], (int)g.stride[0], (int)g.stride[1],
      (int)g.dilation[0], (int)g.dilation[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DM_CUDNN_TRY(cudnnSetConvolutionGroupCount(d->conv, (int)a.group));
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
 * will run with. */
static dm_status conv_find(dm_op_ctx *ctx, conv_state *s, dm_gpu_context *c, const conv_desc *d,
                           const dm_tensor *x, const dm_tensor *w, int grad, int has_dx) {
  int64_t key[10] = {x->dtype, x->dims[0], x->dims[1], x->dims[2], x->dims[3],
                     w->dims[0], w->dims[1], w->dims[2], w->dims[3], grad * 2 + has_dx};
  if (s->valid && memcmp(key, s->key, sizeof key) == 0)
    return DM_OK;
  s->valid = 0;
  const dm_dtype t = x->dtype;
  const cudnnMathType_t base = conv_base_math(t);
  cudnnMathType_t m = base;
  size_t ws = 0;
  int n = 0, i;
  if (!grad) {
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, base));
    if (s->exhaustive)
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
          ws <= s->ws_limit)
        break;
    }
    if (i == n)
      goto none;
    s->fwd = p[i].algo, s->fwd_math = m, s->fwd_ws = ws;
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, base));
    if (s->exhaustive)
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
          ws <= s->ws_limit)
        break;
    }
    if (i == n)
      goto none;
    s->bwd_filter = p[i].algo, s->filter_math = m, s->filter_ws = ws;
    s->data_ws = 0;
    if (has_dx) {
      cudnnConvolutionBwdDataAlgoPerf_t q[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      DM_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, base));
      if (s->exhaustive)
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
            ws <= s->ws_limit)
          break;
      }
      if (i == n)
        goto none;
      s->bwd_data = q[i].algo, s->data_math = m, s->data_ws = ws;
    }
  }
  memcpy(s->key, key, sizeof key);
  s->valid = 1;
  return DM_OK;
none:
  return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                     "cuDNN has no %s algorithm for these shapes within ws_nbytes_limit %zu",
                     grad ? "backward" : "forward", s->ws_limit);
}

static dm_status conv_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  const dm_tensor *b = dm_op_num_inputs(ctx) > 2 ? dm_op_input(ctx, 2) : NULL;
  dm_tensor *y = dm_op_output(ctx, 0);
  if (y->numel == 0)
    return DM_OK;
  conv_state *s = dm_op_state(ctx);
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  conv_desc d = {0};
  dm_status st = DM_OK;
  void *ws = NULL;
  ST_TRY(conv_desc_make(ctx, x, w, y, &d));
  ST_TRY(conv_find(ctx, s, c, &d, x, w, 0, 0));
  DNN_TRY(cudnnSetConvolutionMathType(d.conv, s->fwd_math));
  if (s->fwd_ws)
    ST_TRY(dm_gpu_scratch(c, s->fwd_ws, &ws));
  DNN_TRY(cudnnConvolutionForward(c->cudnn, &k_one, d.x, dm_tensor_data(x), d.w,
                                  dm_tensor_data(w), d.conv, s->fwd, ws, s->fwd_ws, &k_zero, d.y,
                                  dm_tensor_mutable_data(y)));
  if (b) { /* d.nhwc: the order as parsed (case-insensitive, as conv_args.c) */
    int64_t M = w->dims[0], inner = d.nhwc ? 1 : y->dims[2] * y->dims[3];
    void *py = dm_tensor_mutable_data(y);
    CU_TRY(dm_cuda_bias_add(c->stream, py, cu_type(y->dtype), py, cu_type(y->dtype),
                            dm_tensor_data(b), cu_type(b->dtype), y->numel, inner, M));
  }
done:
  conv_desc_free(&d);
  return st;
}

/* ConvGradient: X, W, dY -> dW, [db], [dX] (which exist: no_bias and the output count, as
 * the CPU's conv_grad_prepare decides). */
static dm_status conv_grad_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  int n_out = dm_op_num_outputs(ctx), no_bias = dm_op_arg_int(ctx, "no_bias", 0) != 0;
  dm_tensor *dw = dm_op_output(ctx, 0), *db = no_bias ? NULL : dm_op_output(ctx, 1);
  dm_tensor *dx = n_out == (no_bias ? 2 : 3) ? dm_op_output(ctx, n_out - 1) : NULL;
  conv_state *s = dm_op_state(ctx);
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
  conv_desc d = {0};
  dm_status st = DM_OK;
  void *ws = NULL;
  ST_TRY(conv_desc_make(ctx, x, w, dy, &d));
  ST_TRY(conv_find(ctx, s, c, &d, x, w, 1, dx != NULL));
  size_t need = s->filter_ws > s->data_ws ? s->filter_ws : s->data_ws;
  if (need) /* one buffer: the calls run one after another on the stream */
    ST_TRY(dm_gpu_scratch(c, need, &ws));
  DNN_TRY(cudnnSetConvolutionMathType(d.conv, s->filter_math));
  DNN_TRY(cudnnConvolutionBackwardFilter(c->cudnn, &k_one, d.x, dm_tensor_data(x), d.y,
                                         dm_tensor_data(dy), d.conv, s->bwd_filter, ws,
                                         s->filter_ws, &k_zero, d.w, dm_tensor_mutable_data(dw)));
  if (db)
    DNN_TRY(cudnnConvolutionBackwardBias(c->cudnn, &k_one, d.y, dm_tensor_data(dy), &k_zero, d.b,
                                         dm_tensor_mutable_data(db)));
  if (dx) {
    DNN_TRY(cudnnSetConvolutionMathType(d.conv, s->data_math));
    DNN_TRY(cudnnConvolutionBackwardData(c->cudnn, &k_one, d.w, dm_tensor_data(w), d.y,
                                         dm_tensor_data(dy), d.conv, s->bwd_data, ws, s->data_ws,
                                         &k_zero, d.x, dm_tensor_mutable_data(dx)));
  }
done:
  conv_desc_free(&d);
  return st;
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

/* X as (N, C, HW, 1) in its order, and the derived FP32 per-channel descriptor. */
static dm_status bn_desc_make(dm_op_ctx *ctx, const dm_tensor *x, cudnnTensorDescriptor_t xd,
                              cudnnTensorDescriptor_t pd, int *nhwc, int64_t *N, int64_t *C,
                              int64_t *HW) {
  channel_view(ctx, x, nhwc, N, C, HW);
  DM_TRY(tensor4d(ctx, xd, x->dtype, *nhwc, *N, *C, *HW, 1));
  DM_CUDNN_TRY(cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL));
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
  cudnnTensorDescriptor_t xd = NULL, pd = NULL;
  dm_status st = DM_OK;
  int nhwc;
  int64_t N, C, HW;
  DNN_TRY(cudnnCreateTensorDescriptor(&xd));
  DNN_TRY(cudnnCreateTensorDescriptor(&pd));
  ST_TRY(bn_desc_make(ctx, x, xd, pd, &nhwc, &N, &C, &HW));
  const void *scale = dm_tensor_data(dm_op_input(ctx, 1)), *bias = dm_tensor_data(dm_op_input(ctx, 2));
  const float *rm = dm_tensor_data(dm_op_input(ctx, 3)), *rv = dm_tensor_data(dm_op_input(ctx, 4));
  if (is_test) { /* elementwise, so Y may be X */
    DNN_TRY(cudnnBatchNormalizationForwardInference(
        c->cudnn, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, xd, dm_tensor_data(x), xd,
        dm_tensor_mutable_data(y), pd, scale, bias, rm, rv, eps));
    goto done;
  }
  /* Scratch: batch mean and variance (C each), and Y's values when Y is X's blob (cuDNN
   * reads X again after writing Y). */
  int alias = dm_tensors_alias(y, x);
  size_t stat = ((size_t)C * 2 * sizeof(float) + 255) & ~(size_t)255;
  void *buf;
  ST_TRY(dm_gpu_scratch(c, stat + (alias ? dm_tensor_nbytes(y) : 0), &buf));
  float *bmean = buf, *bvar = bmean + C;
  void *ytmp = alias ? (char *)buf + stat : dm_tensor_mutable_data(y);
  /* Factor 1 ignores the old values, but 0 * NaN would not: start from zeros. */
  CU_TRY(cudaMemsetAsync(bmean, 0, (size_t)C * 2 * sizeof(float), c->stream));
  DNN_TRY(cudnnBatchNormalizationForwardTraining(
      c->cudnn, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, xd, dm_tensor_data(x), xd, ytmp, pd,
      scale, bias, 1.0, bmean, bvar, eps, dm_tensor_mutable_data(dm_op_output(ctx, 3)),
      dm_tensor_mutable_data(dm_op_output(ctx, 4))));
  CU_TRY(dm_cuda_bn_running(c->stream, rm, rv, bmean, bvar,
                            dm_tensor_mutable_data(dm_op_output(ctx, 1)),
                            dm_tensor_mutable_data(dm_op_output(ctx, 2)), C, N * HW, mom));
  if (alias)
    CU_TRY(cudaMemcpyAsync(dm_tensor_mutable_data(y), ytmp, dm_tensor_nbytes(y),
                           cudaMemcpyDeviceToDevice, c->stream));
done:
  if (xd) cudnnDestroyTensorDescriptor(xd);
  if (pd) cudnnDestroyTensorDescriptor(pd);
  return st;
}

/* X, scale, dY, saved_mean, saved_inv_std (is_test: mean, var) -> dX, dscale, dbias.
 * Training: cuDNN's backward with the saved statistics. is_test: mean and var are
 * constants, which cuDNN's backward does not model: dm_cuda_bn_grad_test. */
static dm_status bn_grad_cudnn_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  dm_tensor *dx = dm_op_output(ctx, 0), *dscale = dm_op_output(ctx, 1), *dbias = dm_op_output(ctx, 2);
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  cudnnTensorDescriptor_t xd = NULL, pd = NULL;
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
  DNN_TRY(cudnnCreateTensorDescriptor(&xd));
  DNN_TRY(cudnnCreateTensorDescriptor(&pd));
  ST_TRY(bn_desc_make(ctx, x, xd, pd, &nhwc, &N, &C, &HW));
  DNN_TRY(cudnnBatchNormalizationBackward(
      c->cudnn, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, &k_one, &k_zero, xd, dm_tensor_data(x),
      xd, dm_tensor_data(dy), xd, dm_tensor_mutable_data(dx), pd, scale,
      dm_tensor_mutable_data(dscale), dm_tensor_mutable_data(dbias), eps, s_mean, s_inv));
done:
  if (xd) cudnnDestroyTensorDescriptor(xd);
  if (pd) cudnnDestroyTensorDescriptor(pd);
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

/* FC and FCGradient (cuBLAS) ----------------------------------------------------------- */

/* Row-major (M, K), (N, K) etc. are column-major transposes to cuBLAS, so each product is
 * written for the transposed result. FP32: pedantic FP32 (no TF32); 16-bit: FP32 compute,
 * one rounding into the 16-bit result. */
static dm_status gemm(dm_gpu_context *c, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                      int64_t n, int64_t k, const void *A, int64_t lda, const void *B,
                      int64_t ldb, void *C, cudaDataType_t ct, int64_t ldc, dm_dtype t) {
  cudaDataType_t ab = blas_type(t);
  cublasComputeType_t comp = t == DM_FLOAT ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  DM_CUBLAS_TRY(cublasGemmEx(c->cublas, ta, tb, (int)m, (int)n, (int)k, &k_one, A, ab, (int)lda,
                             B, ab, (int)ldb, &k_zero, C, ct, (int)ldc, comp,
                             CUBLAS_GEMM_DEFAULT));
  return DM_OK;
}

/* M, N, K as fc.c flattens them (the inference has checked them). */
static dm_status fc_dims(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w, int64_t *M,
                         int64_t *N, int64_t *K) {
  int axis, axis_w;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  DM_TRY(dm_op_canonical_axis(ctx, "axis_w", dm_op_arg_int(ctx, "axis_w", 1), w->ndim, 0,
                              &axis_w));
  *M = dm_dims_product(x, 0, axis);
  *K = dm_dims_product(x, axis, x->ndim);
  *N = dm_dims_product(w, 0, axis_w);
  if (*M > INT_MAX || *N > INT_MAX || *K > INT_MAX)
    return dm_op_error(ctx, DM_ERR_LIMIT, "FC of %lldx%lld by %lldx%lld exceeds cuBLAS's int "
                       "sizes", (long long)*M, (long long)*K, (long long)*N, (long long)*K);
  return DM_OK;
}

/* FC: X (M, K), W (N, K), b (N) -> Y (M, N) = X W^T + b. 16-bit: the GEMM writes FP32
 * scratch and the bias kernel rounds once, as the CPU. */
static dm_status fc_cuda_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *b = dm_op_input(ctx, 2);
  dm_tensor *y = dm_op_output(ctx, 0);
  /* As fc.c (fc_infer does not do it): Y that is a view of an input (Reshape) gets fresh
   * storage, or the GEMM (FP32 writes Y directly) and the bias kernel would read what
   * they write. */
  if (dm_tensors_alias(y, x) || dm_tensors_alias(y, w) || dm_tensors_alias(y, b))
    dm_tensor_reset(y);
  DM_TRY(dm_op_run_infer(ctx));
  int64_t M, N, K;
  DM_TRY(fc_dims(ctx, x, w, &M, &N, &K));
  if (M == 0 || N == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  void *acc = dm_tensor_mutable_data(y);
  if (x->dtype != DM_FLOAT)
    DM_TRY(dm_gpu_scratch(c, (size_t)(M * N) * sizeof(float), &acc));
  if (K == 0)
    DM_CUDA_TRY(cudaMemsetAsync(acc, 0, (size_t)(M * N) * sizeof(float), c->stream));
  else
    DM_TRY(gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, dm_tensor_data(w), K, dm_tensor_data(x), K,
                acc, CUDA_R_32F, N, x->dtype));
  DM_CUDA_TRY(dm_cuda_bias_add(c->stream, acc, DM_CUDA_F32, dm_tensor_mutable_data(y),
                               cu_type(y->dtype), dm_tensor_data(b), cu_type(b->dtype), M * N, 1,
                               N));
  return DM_OK;
}

/* FCGradient: X, W, dY -> dW = dY^T X (N, K), db = column sums of dY (N), [dX = dY W]. */
static dm_status fc_grad_cuda_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *dw = dm_op_output(ctx, 0), *db = dm_op_output(ctx, 1);
  dm_tensor *dx = dm_op_num_outputs(ctx) > 2 ? dm_op_output(ctx, 2) : NULL;
  int64_t M, N, K;
  DM_TRY(fc_dims(ctx, x, w, &M, &N, &K));
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  cudaDataType_t ot = blas_type(x->dtype);
  if (N > 0 && K > 0) {
    if (M == 0)
      DM_CUDA_TRY(cudaMemsetAsync(dm_tensor_mutable_data(dw), 0, dm_tensor_nbytes(dw), c->stream));
    else
      DM_TRY(gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, dm_tensor_data(x), K, dm_tensor_data(dy),
                  N, dm_tensor_mutable_data(dw), ot, K, x->dtype));
  }
  DM_CUDA_TRY(dm_cuda_col_sums(c->stream, dm_tensor_data(dy), cu_type(dy->dtype), M, N,
                               dm_tensor_mutable_data(db), cu_type(db->dtype)));
  if (dx && M > 0 && K > 0) {
    if (N == 0)
      DM_CUDA_TRY(cudaMemsetAsync(dm_tensor_mutable_data(dx), 0, dm_tensor_nbytes(dx), c->stream));
    else
      DM_TRY(gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, dm_tensor_data(w), K, dm_tensor_data(dy),
                  N, dm_tensor_mutable_data(dx), ot, K, x->dtype));
  }
  return DM_OK;
}

/* Tables ------------------------------------------------------------------------------- */

#define CUDNN_KERNEL(name, op, i, r, f)                                                    \
  static const dm_kernel_def name = {                                                      \
      .type = op, .device = DM_CUDA, .engine = "CUDNN", .init = i, .run = r, .fini = f}

CUDNN_KERNEL(conv_k, "Conv", conv_init, conv_cudnn_run, conv_fini);
CUDNN_KERNEL(conv_grad_k, "ConvGradient", conv_init, conv_grad_cudnn_run, conv_fini);
CUDNN_KERNEL(max_pool_k, "MaxPool", pool_init, pool_cudnn_run, NULL);
CUDNN_KERNEL(avg_pool_k, "AveragePool", pool_init, pool_cudnn_run, NULL);
CUDNN_KERNEL(max_pool_grad_k, "MaxPoolGradient", pool_init, pool_grad_cudnn_run, NULL);
CUDNN_KERNEL(avg_pool_grad_k, "AveragePoolGradient", pool_init, pool_grad_cudnn_run, NULL);
CUDNN_KERNEL(bn_k, "SpatialBN", NULL, bn_cudnn_run, NULL);
CUDNN_KERNEL(bn_grad_k, "SpatialBNGradient", NULL, bn_grad_cudnn_run, NULL);
CUDNN_KERNEL(softmax_k, "Softmax", NULL, softmax_cudnn_run, NULL);
CUDNN_KERNEL(softmax_grad_k, "SoftmaxGradient", NULL, softmax_cudnn_run, NULL);
CUDNN_KERNEL(lrn_k, "LRN", NULL, lrn_cudnn_run, NULL);
CUDNN_KERNEL(lrn_grad_k, "LRNGradient", NULL, lrn_cudnn_run, NULL);
static const dm_kernel_def fc_k = {.type = "FC", .device = DM_CUDA, .engine = "",
                                   .run = fc_cuda_run};
static const dm_kernel_def fc_grad_k = {.type = "FCGradient", .device = DM_CUDA, .engine = "",
                                        .run = fc_grad_cuda_run};

static const dm_op_schema *const schemas[] = {NULL};
static const dm_kernel_def *const kernels[] = {
    &conv_k,    &conv_grad_k,    &max_pool_k, &avg_pool_k, &max_pool_grad_k, &avg_pool_grad_k,
    &bn_k,      &bn_grad_k,      &softmax_k,  &softmax_grad_k, &lrn_k,       &lrn_grad_k,
    &fc_k,      &fc_grad_k,      NULL};
const dm_op_family dm_cuda_family_dnn = {schemas, kernels};
