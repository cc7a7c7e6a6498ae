/* conv_args.h: the arguments Conv and the pools share, parsed and checked in one place,
 * and the output size they give for an input (internal).
 *
 * Caffe2's conventions (shared/reference/caffe2-ops.md), 2-D only:
 *   kernel | kernel_h + kernel_w | kernels [h, w]          (required unless global_pooling)
 *   stride | stride_h + stride_w | strides [h, w]          (default 1)
 *   pad | pad_t + pad_l + pad_b + pad_r | pads [t, l, b, r] (default 0)
 *   dilation | dilation_h + dilation_w | dilations [h, w]  (default 1; 1 when group != 1)
 *   group = 1, order = NCHW | NHWC, legacy_pad = 0..3, global_pooling = 0.
 * Every check lives here so that a net's shape inference and the kernels report the
 * same errors with the same words.
 */
#ifndef DM_OPERATORS_CONV_ARGS_H
#define DM_OPERATORS_CONV_ARGS_H

#include <stdint.h>

#include "core/tensor.h"
#include "unary_formulas.h"

/* Caffe2's LegacyPadding. */
enum {
  DM_LEGACY_NOTSET = 0,
  DM_LEGACY_VALID = 1,        /* no padding; out = (in - k) / stride + 1 */
  DM_LEGACY_SAME = 2,         /* out = ceil(in / stride); an odd total pad puts the extra at the tail */
  DM_LEGACY_CAFFE_POOLING = 3 /* ceil output size; last window dropped if it starts in the pad */
};

typedef struct dm_conv_args {
  int64_t kernel[2];   /* h, w; 0 while global pooling takes them from the input */
  int64_t stride[2];   /* h, w */
  int64_t dilation[2]; /* h, w */
  int64_t pads[4];     /* t, l, b, r as given (legacy_pad may replace them) */
  int64_t group;
  int nhwc;            /* order: 0 NCHW, 1 NHWC */
  int legacy_pad;
  int global_pooling;
  int ceil_mode;         /* pools: ONNX's and PyTorch's ceil_mode (see dm_conv_geometry) */
  int count_include_pad; /* AveragePool: the divisor counts the padding (Caffe2's argument) */
} dm_conv_args;

/* One input's geometry: everything a kernel loop needs. */
typedef struct dm_conv_geom {
  int64_t N, C, H, W;      /* input (whatever the order) */
  int64_t kernel[2], stride[2], dilation[2];
  int64_t pads[4];         /* effective t, l, b, r after legacy_pad */
  int64_t outH, outW;
  /* The padded input count_include_pad counts, t, l, b, r: the effective pads, except
   * under ceil_mode, where a last window may reach past the given pads and only they
   * count (ONNX, PyTorch). */
  int64_t count_pads[4];
} dm_conv_geom;

/* The argument specs both families list (append to a schema's own, then {NULL}). */
#define DM_CONV_POOL_ARG_SPECS                                                               \
  {"kernel", DM_ARG_INT, 0, "square kernel size"},                                          \
      {"kernel_h", DM_ARG_INT, 0, "kernel height (with kernel_w)"},                         \
      {"kernel_w", DM_ARG_INT, 0, "kernel width (with kernel_h)"},                          \
      {"kernels", DM_ARG_INTS, 0, "kernel [h, w]"},                                         \
      {"stride", DM_ARG_INT, 0, "stride (default 1)"},                                      \
      {"stride_h", DM_ARG_INT, 0, "stride height"},                                         \
      {"stride_w", DM_ARG_INT, 0, "stride width"},                                          \
      {"strides", DM_ARG_INTS, 0, "strides [h, w]"},                                        \
      {"pad", DM_ARG_INT, 0, "padding on every side (default 0)"},                          \
      {"pad_t", DM_ARG_INT, 0, "top padding"},                                              \
      {"pad_l", DM_ARG_INT, 0, "left padding"},                                             \
      {"pad_b", DM_ARG_INT, 0, "bottom padding"},                                           \
      {"pad_r", DM_ARG_INT, 0, "right padding"},                                            \
      {"pads", DM_ARG_INTS, 0, "paddings [t, l, b, r]"},                                    \
      {"order", DM_ARG_STRING, 0, "NCHW (default) or NHWC"},                                \
      {"legacy_pad", DM_ARG_INT, 0, "0 NOTSET, 1 VALID, 2 SAME, 3 CAFFE_LEGACY_POOLING"}

/* The pools' own (append to DM_CONV_POOL_ARG_SPECS). */
#define DM_POOL_ARG_SPECS                                                                    \
  {"ceil_mode", DM_ARG_INT, 0,                                                             \
   "pools: round the output size up (ONNX/PyTorch: a last window starting past the top or " \
   "left padding plus the input is dropped); legacy_pad 0 only"},                           \
      {"count_include_pad", DM_ARG_INT, 0,                                                 \
       "AveragePool: divide by the window clipped to the padded input, padding included"}

/* Reads and checks the arguments (values in range, forms not mixed, dilation with group,
 * pooling without dilation). is_pool: the op is a pool (global_pooling allowed,
 * dilation must be 1, group ignored). */
DM_HIDDEN dm_status dm_conv_args_parse(dm_op_ctx *ctx, int is_pool, dm_conv_args *a);

/* The geometry for input x (4-D in a's order): kernel from the input for global
 * pooling, pads and output size per legacy_pad, the kernel checked to fit the padded
 * input; for pools, every window must hold at least one input element. */
DM_HIDDEN dm_status dm_conv_geometry(dm_op_ctx *ctx, const dm_conv_args *a, const dm_tensor *x,
                                     int is_pool, dm_conv_geom *g);

/* Conv's argument specs (Conv, ConvGradient, ConvFusion; append a schema's own, then
 * {NULL}). */
#define DM_CONV_ARG_SPECS                                                                   \
  DM_CONV_POOL_ARG_SPECS, {"dilation", DM_ARG_INT, 0, "dilation (default 1)"},            \
      {"dilation_h", DM_ARG_INT, 0, "dilation height"},                                   \
      {"dilation_w", DM_ARG_INT, 0, "dilation width"},                                    \
      {"dilations", DM_ARG_INTS, 0, "dilations [h, w]"},                                  \
      {"group", DM_ARG_INT, 0, "channel groups (default 1; C for depthwise)"},            \
      {"no_bias", DM_ARG_INT, 0, "ConvGradient: there is no bias, so no db"},             \
      {"exhaustive_search", DM_ARG_ANY, 0, "GPU hint (ignored on the CPU)"},              \
      {"ws_nbytes_limit", DM_ARG_ANY, 0, "GPU hint (ignored on the CPU)"},                \
      {"enable_tensor_core", DM_ARG_ANY, 0, "GPU hint (ignored on the CPU)"},             \
      {"float16_compute", DM_ARG_ANY, 0, "GPU hint; the CPU always accumulates in FP32"}, \
      {"shared_buffer", DM_ARG_ANY, 0, "GPU hint (ignored on the CPU)"},                  \
      {"deterministic", DM_ARG_ANY, 0, "GPU hint (the CPU is deterministic)"}


/* The activation an epilogue ends in: none, Relu (max(Y, 0), NaN passed through as Relu
 * does), an op of unary_family.h (Clip, Sigmoid, HardSwish, ...: ConvFusion's
 * `activation`, its formula and arguments), or Swish (Y * Sigmoid(Y), SiLU). */
typedef enum dm_conv_act { DM_CONV_ACT_NONE, DM_CONV_ACT_RELU, DM_CONV_ACT_UNARY,
                           DM_CONV_ACT_SWISH } dm_conv_act;

/* Conv's forward pass with an epilogue: Conv is {has_bias, -1, DM_CONV_ACT_NONE};
 * ConvFusion (operators/conv_fusion.c) adds S and an activation in the same FP32 pass,
 * before the one rounding of a FLOAT16 or BFLOAT16 Y. Defined in conv.c. */
typedef struct dm_conv_epilogue {
  int has_bias;       /* input 2 is b (M) */
  int sum;            /* input index of S (Y's shape and dtype; Y may be S), added after
                         the bias; -1: none */
  dm_conv_act act;    /* then the activation */
  dm_unary_kind unary; /* DM_CONV_ACT_UNARY: which, with its arguments */
  dm_unary_params p;
} dm_conv_epilogue;

/* ConvFusion's fusion_type (Caffe2's IDEEP numbering, see operators/conv_fusion.c); 0 is
 * Conv itself. */
enum { DM_CONV_FUSE_NONE = 0, DM_CONV_FUSE_RELU = 1, DM_CONV_FUSE_SUM = 2,
       DM_CONV_FUSE_SUM_RELU = 3 };

/* The epilogue that fusion_type t (DM_CONV_FUSE_NONE: Conv) with n inputs asks for:
 * relu: X, W, [b]; sum forms: X, W, [b], S (S last); the activation Relu where there is
 * one. 0 for a pair ConvFusion does not take (nothing reported: conv_fusion.c words the
 * error, engines refuse the op). */
DM_HIDDEN int dm_conv_epilogue_of(int64_t t, int n, dm_conv_epilogue *e);
/* ConvFusion's epilogue: fusion_type and the inputs (dm_conv_epilogue_of), then the
 * activation its `activation` argument names where fusion_type has one (1, 3; default
 * Relu: Caffe2's ops), with that op's arguments read from ConvFusion's; the error naming
 * what does not go together otherwise. Shared by every engine's ConvFusion kernel. */
DM_HIDDEN dm_status dm_conv_fusion_epilogue(dm_op_ctx *ctx, dm_conv_epilogue *e);
/* Applies e's activation to y[0 .. n) in place (FP32; conv.c). */
DM_HIDDEN void dm_conv_act_apply(const dm_conv_epilogue *e, float *y, int64_t n);
/* Whether the fusion pass (net/passes/fusion_pass.c) fuses an op of `type` after a Conv
 * as ConvFusion's activation: Relu and the unary family's ops every CPU engine runs fused
 * (the oneDNN engine has post-ops for them; Erf and Sqrt are left alone). */
DM_HIDDEN int dm_conv_fusable_activation(const char *type);

/* A convolution's checked geometry: its arguments, X's geometry, W's channels, Y's dims
 * (N, M, outH, outW in the order's places). */
typedef struct dm_conv_shape {
  dm_conv_args a;
  dm_conv_geom g;
  int64_t M, Cg, Mg;  /* output channels; channels per group in and out */
  int64_t ydims[4];
} dm_conv_shape;

/* Conv's and ConvFusion's checks, free of side effects (nothing resized, nothing
 * written): the dtypes, the arguments, W against X, b (M values), S (Y's shape and
 * dtype) and the blobs Y may be (S only; when Y is S no other input shares its storage).
 * The reference kernel (conv.c, conv_fusion.c) and the oneDNN engine's (dnnl/conv.c)
 * both call it, so they report the same errors in the same words. */
DM_HIDDEN dm_status dm_conv_check_forward(dm_op_ctx *ctx, const dm_conv_epilogue *e,
                                          dm_conv_shape *s);
/* ConvGradient's (X, W, dY -> dW, [db], [dX]), likewise shared: the dtypes, no_bias
 * against the output count (*has_db, *has_dx: which outputs there are), the geometry and
 * dY against Conv's Y. */
DM_HIDDEN dm_status dm_conv_check_backward(dm_op_ctx *ctx, dm_conv_shape *s, int *has_db,
                                           int *has_dx);

/* Checks the inputs (b and S included) and sets Y's shape and dtype. */
DM_HIDDEN dm_status dm_conv_forward_infer(dm_op_ctx *ctx, const dm_conv_epilogue *e);
/* Computes Y; the kernel's state is dm_conv_init's. */
DM_HIDDEN dm_status dm_conv_forward_run(dm_op_ctx *ctx, const dm_conv_epilogue *e);
/* ConvGradient's shape inference and cost (X, W, dY at 0..2 -> dW, [db], [dX] as its
 * no_bias says), and its CPU kernel with dY's data taken from dy_data (dY's dtype and
 * shape): ConvReluGradient (operators/conv_fusion.c) passes its masked dY. */
DM_HIDDEN dm_status dm_conv_grad_infer(dm_op_ctx *ctx);
DM_HIDDEN void dm_conv_grad_cost(dm_op_ctx *ctx, dm_op_cost *c);
DM_HIDDEN dm_status dm_conv_backward_run(dm_op_ctx *ctx, const void *dy_data);
/* Caffe2's GetConvGradient emitting `type` (X, W, dY, and with with_y the forward's Y, ->
 * dW, [db], [dX]): ConvGradient's maker and ConvFusion's (ConvReluGradient). */
DM_HIDDEN dm_status dm_conv_gradient_emit(dm_grad_ctx *g, const char *type, int with_y);
/* ConvGradient's outputs as gradients of Conv's inputs (its schema's grad_slots). */
DM_HIDDEN extern const dm_grad_slot dm_conv_grad_slots[];
/* Kernel init (arguments checked at instantiation, scratch kept between runs; fini is
 * dm_scratch_fini) and the cost (2 * numel(Y) * C/group*kH*kW FLOPs). */
DM_HIDDEN dm_status dm_conv_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN void dm_conv_cost(dm_op_ctx *ctx, dm_op_cost *c);
/* y[i] = max(y[i], 0), NaN passed through and -0 made +0, as Relu (operators/activation.c). */
DM_HIDDEN void dm_relu_f32(float *y, int64_t n);

/* Conv's scratch per chunk of images, in bytes (defined in conv.c; tests lower it). */
extern DM_HIDDEN size_t dm_conv_chunk_bytes;

/* Output dims (N, C, outH, outW) in a's order into dims[4]. */
DM_HIDDEN void dm_conv_out_dims(const dm_conv_args *a, const dm_conv_geom *g, int64_t channels,
                                int64_t dims[4]);

/* The input rows (d = 0) or columns (d = 1) under output position o of a pooling window,
 * clipped to the input's `in` (padding is not part of it): from *lo below *hi in steps
 * of g->dilation[d] (*lo the first tap inside). Shared by the reference pools and the
 * oneDNN engine's MaxPoolGradient (which takes no dilation). */
static inline void dm_pool_window(const dm_conv_geom *g, int d, int64_t o, int64_t in,
                                  int64_t *lo, int64_t *hi) {
  int64_t dil = g->dilation[d], s = o * g->stride[d] - g->pads[d];
  int64_t e = s + dil * (g->kernel[d] - 1) + 1;
  *lo = s >= 0 ? s : s + (-s + dil - 1) / dil * dil;
  *hi = e > in ? in : e;
}

/* AveragePool's divisor for output (oh, ow): the input pixels under the window, or with
 * count_include_pad the window clipped to the padded input (g->count_pads). */
static inline int64_t dm_pool_divisor(const dm_conv_geom *g, int count_include_pad, int64_t oh,
                                      int64_t ow) {
  const int64_t in[2] = {g->H, g->W}, o[2] = {oh, ow};
  int64_t n = 1;
  for (int d = 0; d < 2; d++) {
    /* taps s + i dil, 0 <= i < k, that fall in [lo, hi) */
    int64_t dil = g->dilation[d], s = o[d] * g->stride[d] - g->pads[d];
    int64_t lo = count_include_pad ? -g->count_pads[d] : 0;
    int64_t hi = in[d] + (count_include_pad ? g->count_pads[d + 2] : 0);
    int64_t i0 = s >= lo ? 0 : (lo - s + dil - 1) / dil;
    int64_t i1 = hi - 1 - s < 0 ? -1 : (hi - 1 - s) / dil;
    if (i1 > g->kernel[d] - 1)
      i1 = g->kernel[d] - 1;
    n *= i1 >= i0 ? i1 - i0 + 1 : 0;
  }
  return n;
}

/* Conv's dtype rule, in the reference's words: X and W FLOAT, or both FLOAT16 (BFLOAT16)
 * with b of their dtype or FLOAT. */
DM_HIDDEN dm_status dm_conv_check_dtypes(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                                         const dm_tensor *b);

#endif
