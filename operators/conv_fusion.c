/* conv_fusion.c: ConvFusion and FCFusion, the fused inference ops the fusion pass
 * (net/passes/fusion_pass.c) makes of Conv + Relu, Conv + Sum (+ Relu) and FC + Relu. CPU reference
 * kernels only: Conv's and FC's own (operators/conv.c, fc.c) with the epilogue in the
 * same pass, FP32, FP16 and BF16.
 *
 * The op name, the argument name and its numbering are Caffe2's IDEEP backend's
 * (FUSION_CONV_RELU = 1, FUSION_CONV_SUM = 2, FUSION_CONV_SUM_RELU = 3), so a net fused
 * there reads the same here:
 *   ConvFusion fusion_type 1: X, W, [b]    -> Y = relu(conv(X, W) + b)
 *              fusion_type 2: X, W, [b], S -> Y = conv(X, W) + b + S
 *              fusion_type 3: X, W, [b], S -> Y = relu(conv(X, W) + b + S)
 *   `activation` (not Caffe2's) replaces the relu of types 1 and 3 by another: Swish
 *   (Y * Sigmoid(Y), SiLU) or an op of operators/unary_family.h (Clip for ReLU6,
 *   Sigmoid, HardSwish, ...), its formula as that op's and its arguments (min, max,
 *   alpha, beta, fast_gelu) on the ConvFusion op (conv_args.c, dm_conv_fusion_epilogue).
 *   S is always the last input (b is there iff there are 4 inputs), has Y's shape and
 *   dtype, and may be Y's own blob (the ResNet pattern: the residual sum written over the
 *   shortcut). Every Conv argument (kernel, pads, strides, dilations, group, order ...)
 *   means what it means for Conv.
 *   FCFusion fusion_type 1: X, W, b -> Y = relu(FC(X, W, b)), FC's axis and axis_w.
 * The training fusion pass (net/passes/train_fusion_pass.c) makes fusion_type 1 of Conv + Relu and
 * FC + Relu in a training net, so types 1 have gradients, each one fused op:
 *   ConvReluGradient: X, W, dY, Y -> dW, [db], [dX] (ConvGradient's outputs and no_bias /
 *                     no_gradient_to_input) = ConvGradient(X, W, ReluGradient(Y, dY))
 *   FCReluGradient:   X, W, dY, Y -> dW, db, [dX] = FCGradient(X, W, ReluGradient(Y, dY))
 * The CPU kernels mask dY with ReluGradient's own loop (dm_relu_grad_buffer: dY where
 * Y > 0, else 0, NaN in Y masking) into a buffer and run ConvGradient's / FCGradient's
 * kernel on it, so the bits are the unfused pair's. Types 2 and 3 (a sum input) have no
 * gradient: their maker refuses with the reason.
 * FP16 and BF16: FP32 accumulation, S widened exactly and added in FP32, and Y rounded
 * once, after the relu (relu and rounding commute, so FCFusion applies it to FC's
 * rounded output). The relu passes NaN through, as Relu does.
 */
#include <stdlib.h>

#include "activation.h"
#include "builtin.h"
#include "common.h"
#include "conv_args.h"
#include "fc.h"

/* ---- ConvFusion ------------------------------------------------------------------ */

static dm_status conv_fusion_infer(dm_op_ctx *ctx) {
  dm_conv_epilogue e;
  DM_TRY(dm_conv_fusion_epilogue(ctx, &e));
  return dm_conv_forward_infer(ctx, &e);
}

static dm_status conv_fusion_init(dm_op_ctx *ctx, void **state) {
  dm_conv_epilogue e; /* a bad fusion_type at instantiation, not at the first run */
  DM_TRY(dm_conv_fusion_epilogue(ctx, &e));
  return dm_conv_init(ctx, state);
}

static dm_status conv_fusion_run(dm_op_ctx *ctx) {
  dm_conv_epilogue e;
  DM_TRY(dm_conv_fusion_epilogue(ctx, &e));
  return dm_conv_forward_run(ctx, &e);
}

/* Conv's FLOPs, plus one per output for the sum and one for the relu. */
static void conv_fusion_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_conv_cost(ctx, c);
  int64_t t = dm_op_arg_int(ctx, "fusion_type", 0);
  double y = (double)dm_op_output(ctx, 0)->numel;
  c->flops += y * ((t == DM_CONV_FUSE_SUM || t == DM_CONV_FUSE_SUM_RELU) +
                   (t == DM_CONV_FUSE_RELU || t == DM_CONV_FUSE_SUM_RELU));
}

/* Only conv + relu: a sum's gradient would be a second output the pass never needs. */
static dm_status conv_fusion_gradient(dm_grad_ctx *g) {
  int64_t t = dm_grad_arg_int(g, "fusion_type", 0);
  if (dm_grad_has_arg(g, "activation"))
    return dm_error(DM_ERR_UNSUPPORTED, "ConvFusion with an `activation` has no gradient "
                    "(the training fusion fuses Relu alone, written without the argument)");
  if (t != DM_CONV_FUSE_RELU || dm_grad_num_inputs(g) > 3)
    return dm_error(DM_ERR_UNSUPPORTED, "ConvFusion has a gradient for fusion_type 1 (conv + "
                    "relu, X, W, [b]) only, not fusion_type %lld with %d inputs", (long long)t,
                    dm_grad_num_inputs(g));
  return dm_conv_gradient_emit(g, "ConvReluGradient", 1);
}

static const dm_arg_spec conv_fusion_args[] = {
    DM_CONV_ARG_SPECS,
    {"fusion_type", DM_ARG_INT, 1, "1 conv + relu, 2 conv + sum, 3 conv + sum + relu"},
    {"activation", DM_ARG_STRING, 0,
     "types 1 and 3: the activation instead of relu (not Caffe2's): Relu (the default), "
     "Swish (Y * Sigmoid(Y)) or an op of the unary family (Clip, Sigmoid, HardSwish, ...), "
     "with that op's arguments below"},
    {"min", DM_ARG_FLOAT, 0, "activation Clip: the lower bound"},
    {"max", DM_ARG_FLOAT, 0, "activation Clip: the upper bound"},
    {"alpha", DM_ARG_FLOAT, 0, "activation LeakyRelu, HardSigmoid: alpha"},
    {"beta", DM_ARG_FLOAT, 0, "activation HardSigmoid: beta"},
    {"fast_gelu", DM_ARG_INT, 0, "activation Gelu: the tanh form"},
    {NULL, 0, 0, NULL},
};

/* Y may be S, the last input: input 2 without a bias, 3 with one (the kernel refuses Y
 * as b). */
static const dm_inplace_pair conv_fusion_inplace[] = {{2, 0}, {3, 0}, {-1, -1}};

static const dm_op_schema conv_fusion_schema = {
    .type = "ConvFusion",
    .min_inputs = 2,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = conv_fusion_args,
    .inplace = conv_fusion_inplace,
    .precision = DM_PREC_FP16,
    .doc = "X, W (M x C/group x kH x kW), [b (M)], [S] -> Y: Conv with a fused epilogue "
           "(inference). fusion_type 1: Y = relu(conv + b); 2: conv + b + S; 3: relu(conv + "
           "b + S); `activation` replaces relu (Clip, Sigmoid, Swish, ...). S is last (b is "
           "there when 4 inputs are), has Y's shape and may be Y. Conv's arguments and "
           "layouts.",
    .infer = conv_fusion_infer,
    .cost = conv_fusion_cost,
    .gradient = conv_fusion_gradient,
    /* X, W, S (with b; S without b, at 2, is refused by the layout pass) -> Y */
    .layout = DM_LAYOUT_FILTER, .layout_inputs = 0xb, .layout_outputs = 0x1,
};

/* ---- FCFusion -------------------------------------------------------------------- */

static dm_status fc_fusion_check(dm_op_ctx *ctx) {
  int64_t t = dm_op_arg_int(ctx, "fusion_type", 0);
  if (t != DM_CONV_FUSE_RELU)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "fusion_type is %lld; FCFusion takes 1 (FC + relu)", (long long)t);
  return DM_OK;
}

static dm_status fc_fusion_infer(dm_op_ctx *ctx) {
  DM_TRY(fc_fusion_check(ctx));
  return dm_fc_infer(ctx);
}

static dm_status fc_fusion_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  return fc_fusion_check(ctx);
}

static dm_status fc_fusion_run(dm_op_ctx *ctx) {
  DM_TRY(fc_fusion_check(ctx));
  DM_TRY(dm_fc_run(ctx));
  dm_tensor *y = dm_op_output(ctx, 0);
  int64_t n = y->numel;
  if (y->dtype == DM_FLOAT) {
    dm_relu_f32(dm_tensor_mutable_data(y), n);
    return DM_OK;
  }
  /* FP16 or BF16 bits (already rounded; the relu commutes with the rounding): a set sign
   * with a magnitude up to inf is a negative number or -0; above that, a NaN. */
  uint16_t *py = dm_tensor_mutable_data(y); /* (n) */
  const unsigned inf = y->dtype == DM_BFLOAT16 ? 0x7f80u : 0x7c00u;
  for (int64_t i = 0; i < n; i++)
    if ((py[i] & 0x8000u) && (py[i] & 0x7fffu) <= inf)
      py[i] = 0;
  return DM_OK;
}

static void fc_fusion_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_fc_cost(ctx, c);
  c->flops += (double)dm_op_output(ctx, 0)->numel; /* the relu */
}

static dm_status fc_fusion_gradient(dm_grad_ctx *g) {
  int64_t t = dm_grad_arg_int(g, "fusion_type", 0);
  if (t != DM_CONV_FUSE_RELU)
    return dm_error(DM_ERR_UNSUPPORTED, "FCFusion has a gradient for fusion_type 1 (FC + "
                    "relu) only, not fusion_type %lld", (long long)t);
  return dm_fc_gradient_emit(g, "FCReluGradient", 1);
}

static const dm_arg_spec fc_fusion_args[] = {
    DM_FC_ARG_SPECS,
    {"fusion_type", DM_ARG_INT, 1, "1: FC + relu"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema fc_fusion_schema = {
    .type = "FCFusion",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = fc_fusion_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W (N x K), b (N) -> Y = relu(X W^T + b): FC with a fused Relu (inference; "
           "fusion_type 1); FC's axis and axis_w.",
    .infer = fc_fusion_infer,
    .cost = fc_fusion_cost,
    .gradient = fc_fusion_gradient,
    .layout = DM_LAYOUT_FLATTEN, .layout_inputs = 0x1,
};

/* ---- ConvReluGradient, FCReluGradient ----------------------------------------------- */

enum { GRAD_DY = 2, GRAD_Y = 3 };

/* The forward's Y (input 3) has dY's dtype and shape, and fusion_type is 1. */
static dm_status relu_grad_check(dm_op_ctx *ctx) {
  int64_t t = dm_op_arg_int(ctx, "fusion_type", DM_CONV_FUSE_RELU);
  if (t != DM_CONV_FUSE_RELU)
    return dm_op_error(ctx, DM_ERR_INVALID, "fusion_type is %lld; %s is the gradient of "
                       "fusion_type 1 (relu)", (long long)t, dm_op_type(ctx));
  const dm_tensor *dy = dm_op_input(ctx, GRAD_DY), *y = dm_op_input(ctx, GRAD_Y);
  char ds[96], ys[96];
  if (y->dtype != dy->dtype || !dm_tensor_same_shape(y, dy))
    return dm_op_error(ctx, DM_ERR_SHAPE, "Y is %s %s but dY is %s %s; they must match",
                       dm_dtype_name(y->dtype), dm_shape_str(y, ys, sizeof ys),
                       dm_dtype_name(dy->dtype), dm_shape_str(dy, ds, sizeof ds));
  return DM_OK;
}

static dm_status conv_relu_grad_infer(dm_op_ctx *ctx) {
  DM_TRY(relu_grad_check(ctx));
  return dm_conv_grad_infer(ctx);
}

static dm_status fc_relu_grad_infer(dm_op_ctx *ctx) {
  DM_TRY(relu_grad_check(ctx));
  return dm_fc_grad_infer(ctx);
}

/* The gradient's cost plus one pass over dY for the mask. */
static void conv_relu_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_conv_grad_cost(ctx, c);
  c->flops += (double)dm_op_input(ctx, GRAD_DY)->numel;
}

static void fc_relu_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_fc_grad_cost(ctx, c);
  c->flops += (double)dm_op_input(ctx, GRAD_DY)->numel;
}

/* dY masked by Y > 0 into a buffer (ReluGradient's loop), then `backward` on it. */
static dm_status relu_grad_run(dm_op_ctx *ctx, dm_status (*infer)(dm_op_ctx *),
                               dm_status (*backward)(dm_op_ctx *, const void *)) {
  DM_TRY(infer(ctx));
  const dm_tensor *dy = dm_op_input(ctx, GRAD_DY), *y = dm_op_input(ctx, GRAD_Y);
  size_t nbytes = dm_tensor_nbytes(dy);
  void *m = malloc(nbytes ? nbytes : 1);
  if (!m)
    return dm_op_error(ctx, DM_ERR_NOMEM, "no memory for the masked dY (%zu bytes)", nbytes);
  dm_relu_grad_buffer(dy->dtype, dm_tensor_data(y), dm_tensor_data(dy), m, dy->numel);
  dm_status s = backward(ctx, m);
  free(m);
  return s;
}

static dm_status conv_relu_grad_run(dm_op_ctx *ctx) {
  return relu_grad_run(ctx, conv_relu_grad_infer, dm_conv_backward_run);
}

static dm_status fc_relu_grad_run(dm_op_ctx *ctx) {
  return relu_grad_run(ctx, fc_relu_grad_infer, dm_fc_backward_run);
}

static const dm_arg_spec conv_relu_grad_args[] = {
    DM_CONV_ARG_SPECS,
    {"fusion_type", DM_ARG_INT, 0, "the forward's (1: relu)"},
    {"no_gradient_to_input", DM_ARG_INT, 0, "set by the gradient maker when dX is not needed"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema conv_relu_grad_schema = {
    .type = "ConvReluGradient",
    .min_inputs = 4,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 3,
    .args = conv_relu_grad_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W, dY, Y -> dW, db, [dX]; with no_bias: dW, [dX]. ConvFusion fusion_type 1's "
           "gradient: ConvGradient of dY masked where Y (the forward's output) > 0.",
    .infer = conv_relu_grad_infer,
    .cost = conv_relu_grad_cost,
    /* X, W, dY, Y -> dW, dX (db, 1-D, may take slot 1), as ConvGradient */
    .layout = DM_LAYOUT_FILTER, .layout_inputs = 0xf, .layout_outputs = 0x7,
    .grad_slots = dm_conv_grad_slots,
};

static const dm_op_schema fc_relu_grad_schema = {
    .type = "FCReluGradient",
    .min_inputs = 4,
    .max_inputs = 4,
    .min_outputs = 2,
    .max_outputs = 3,
    .args = fc_fusion_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W, dY, Y -> dW, db, [dX]: FCFusion fusion_type 1's gradient, FCGradient of dY "
           "masked where Y (the forward's output) > 0.",
    .infer = fc_relu_grad_infer,
    .cost = fc_relu_grad_cost,
    .layout = DM_LAYOUT_FLATTEN, .layout_inputs = 0x1, .layout_outputs = 0x4, /* X -> dX */
};

static const dm_op_schema *const schemas[] = {&conv_fusion_schema, &fc_fusion_schema,
                                              &conv_relu_grad_schema, &fc_relu_grad_schema,
                                              NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "ConvFusion", .device = DM_CPU, .init = conv_fusion_init, .run = conv_fusion_run,
     .fini = dm_scratch_fini},
    {.type = "FCFusion", .device = DM_CPU, .init = fc_fusion_init, .run = fc_fusion_run},
    {.type = "ConvReluGradient", .device = DM_CPU, .init = dm_conv_init,
     .run = conv_relu_grad_run, .fini = dm_scratch_fini},
    {.type = "FCReluGradient", .device = DM_CPU, .run = fc_relu_grad_run},
    {0},
};
const dm_op_family dm_family_conv_fusion = {schemas, kernels};
