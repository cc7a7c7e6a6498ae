/* pool_cudnn.c: the cuDNN (engine "CUDNN") MaxPool, AveragePool and their gradients, with
 * their descriptors kept in the kernel state (cudnn_common.h).
 *
 * Semantics are the CPU kernels' (operators/pool.c): every run first runs the op's
 * schema inference, then enqueues cuDNN calls on the thread's context stream. Known
 * differences from the CPU (documented, not bugs):
 * - MaxPoolGradient gives a tied window's gradient to one input (cuDNN), not to every
 *   input equal to the max (Caffe2's CPU rule).
 * - Pool pads are expressed as cuDNN's symmetric (top, left) pads; a geometry whose
 *   output size differs under that (some legacy_pad SAME / CAFFE_POOLING shapes) is
 *   refused.
 */
#include <stdlib.h>
#include <string.h>

#include "cudnn_common.h"
#include "operators/conv_args.h"

/* The arguments, parsed once; the descriptors, set for shape key `key` (X's and Y's
 * dtypes and dims). */
typedef struct pool_state {
  dm_conv_args args;
  int is_max; /* MaxPool(Gradient), else AveragePool(Gradient) */
  cudnnTensorDescriptor_t x, y;
  cudnnPoolingDescriptor_t pool;
  int valid;
  int64_t key[2 * DNN_TKEY];
} pool_state;

static void pool_fini(void *state) {
  pool_state *s = state;
  if (!s)
    return;
  if (s->x) cudnnDestroyTensorDescriptor(s->x);
  if (s->y) cudnnDestroyTensorDescriptor(s->y);
  if (s->pool) cudnnDestroyPoolingDescriptor(s->pool);
  free(s);
}

static dm_status pool_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  dm_conv_args a;
  DM_TRY(dm_conv_args_parse(ctx, 1, &a));
  pool_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the cuDNN pooling state");
  s->args = a;
  s->is_max = strncmp(dm_op_type(ctx), "MaxPool", 7) == 0;
  dm_status st = DM_OK;
  DNN_TRY(cudnnCreateTensorDescriptor(&s->x));
  DNN_TRY(cudnnCreateTensorDescriptor(&s->y));
  DNN_TRY(cudnnCreatePoolingDescriptor(&s->pool));
done:
  if (st != DM_OK) {
    pool_fini(s);
    return st;
  }
  *state = s;
  return DM_OK;
}

/* Sets the descriptors for X and Y unless they are set for these shapes. Max: padding
 * never wins (cuDNN treats it as -inf), and NaN inputs are not propagated: the CPU's max
 * (x > acc ? x : acc from -inf) never selects a NaN. Average: the divisor counts only
 * input pixels, as the CPU's AveragePool, or with count_include_pad the whole window:
 * the CPU's divisor too, since the symmetric pads accepted below keep every window
 * within the padded input. */
static dm_status pool_desc_set(dm_op_ctx *ctx, pool_state *s, const dm_tensor *x,
                               const dm_tensor *y) {
  int64_t key[2 * DNN_TKEY];
  dnn_tkey(key, x);
  dnn_tkey(key + DNN_TKEY, y);
  if (dnn_key_same(&s->valid, s->key, key, 2 * DNN_TKEY))
    return DM_OK;
  const dm_conv_args *a = &s->args;
  dm_conv_geom g;
  DM_TRY(dm_conv_geometry(ctx, a, x, 1, &g));
  int64_t xd[4], yd[4];
  DM_TRY(dnn_xy4d(ctx, a->nhwc, x, y, s->x, s->y, xd, yd));
  const int64_t v[] = {g.kernel[0], g.kernel[1], g.pads[0], g.pads[1], g.stride[0], g.stride[1]};
  DM_TRY(fits_int(ctx, v, 6));
  DM_CUDNN_TRY(cudnnSetPooling2dDescriptor(
      s->pool, s->is_max                ? CUDNN_POOLING_MAX_DETERMINISTIC
               : a->count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
      CUDNN_NOT_PROPAGATE_NAN, (int)g.kernel[0], (int)g.kernel[1], (int)g.pads[0], (int)g.pads[1],
      (int)g.stride[0], (int)g.stride[1]));
  int on, oc, oh, ow;
  DM_CUDNN_TRY(cudnnGetPooling2dForwardOutputDim(s->pool, s->x, &on, &oc, &oh, &ow));
  if (oh != yd[2] || ow != yd[3])
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "pads t %lld, l %lld, b %lld, r %lld (legacy_pad %d) give a %lldx%lld "
                       "output that cuDNN's symmetric pads cannot express (it gives %dx%d); "
                       "run this %s on the CPU",
                       (long long)g.pads[0], (long long)g.pads[1], (long long)g.pads[2],
                       (long long)g.pads[3], a->legacy_pad, (long long)yd[2], (long long)yd[3],
                       oh, ow, dm_op_type(ctx));
  dnn_key_set(&s->valid, s->key, key, 2 * DNN_TKEY);
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
  pool_state *s = dm_op_state(ctx);
  DM_TRY(pool_desc_set(ctx, s, x, y));
  DM_CUDNN_TRY(cudnnPoolingForward(c->cudnn, s->pool, &k_one, s->x, dm_tensor_data(x), &k_zero,
                                   s->y, dm_tensor_mutable_data(y)));
  return DM_OK;
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
  pool_state *s = dm_op_state(ctx);
  DM_TRY(pool_desc_set(ctx, s, x, y));
  DM_CUDNN_TRY(cudnnPoolingBackward(c->cudnn, s->pool, &k_one, s->y, dm_tensor_data(y), s->y,
                                    dm_tensor_data(dy), s->x, dm_tensor_data(x), &k_zero, s->x,
                                    dm_tensor_mutable_data(dx)));
  return DM_OK;
}

/* cuDNN pools without dilation: a dilated pool stays on the CPU. */
static int pool_supports(const dm_op_ctx *ctx) {
  size_t nd = 0;
  const int64_t *dl = dm_op_arg_ints(ctx, "dilations", &nd);
  if (dm_op_arg_int(ctx, "dilation", 1) != 1 || dm_op_arg_int(ctx, "dilation_h", 1) != 1 ||
      dm_op_arg_int(ctx, "dilation_w", 1) != 1 || (nd == 2 && (dl[0] != 1 || dl[1] != 1)))
    return dm_op_refuse(ctx, "cuDNN pools without dilation");
  return 1;
}

const dm_kernel_def dm_cuda_pool_kernels[] = {
    GPU_KERNEL("MaxPool", "CUDNN", .init = pool_init, .run = pool_cudnn_run, .fini = pool_fini,
               .supports = pool_supports, GRAPH_SAFE),
    GPU_KERNEL("AveragePool", "CUDNN", .init = pool_init, .run = pool_cudnn_run,
               .fini = pool_fini, .supports = pool_supports, GRAPH_SAFE),
    GPU_KERNEL("MaxPoolGradient", "CUDNN", .init = pool_init, .run = pool_grad_cudnn_run,
               .fini = pool_fini, .supports = pool_supports, GRAPH_SAFE),
    GPU_KERNEL("AveragePoolGradient", "CUDNN", .init = pool_init, .run = pool_grad_cudnn_run,
               .fini = pool_fini, .supports = pool_supports, GRAPH_SAFE),
    {0},
};
