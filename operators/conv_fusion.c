/* conv_fusion.c: ConvFusion and FCFusion, the fused inference ops the fusion pass
 * (net/fusion.c) makes of Conv + Relu, Conv + Sum (+ Relu) and FC + Relu. CPU reference
 * kernels only: Conv's and FC's own (operators/conv.c, fc.c) with the epilogue in the
 * same pass, FP32, FP16 and BF16.
 *
 * The op name, the argument name and its numbering are Caffe2's IDEEP backend's
 * (FUSION_CONV_RELU = 1, FUSION_CONV_SUM = 2, FUSION_CONV_SUM_RELU = 3), so a net fused
 * there reads the same here:
 *   ConvFusion fusion_type 1: X, W, [b]    -> Y = relu(conv(X, W) + b)
 *              fusion_type 2: X, W, [b], S -> Y = conv(X, W) + b + S
 *              fusion_type 3: X, W, [b], S -> Y = relu(conv(X, W) + b + S)
 *   S is always the last input (b is there iff there are 4 inputs), has Y's shape and
 *   dtype, and may be Y's own blob (the ResNet pattern: the residual sum written over the
 *   shortcut). Every Conv argument (kernel, pads, strides, dilations, group, order ...)
 *   means what it means for Conv.
 *   FCFusion fusion_type 1: X, W, b -> Y = relu(FC(X, W, b)), FC's axis and axis_w.
 * FP16 and BF16: FP32 accumulation, S widened exactly and added in FP32, and Y rounded
 * once, after the relu (relu and rounding commute, so FCFusion applies it to FC's
 * rounded output). The relu passes NaN through, as Relu does.
 */
#include "builtin.h"
#include "common.h"
#include "conv_args.h"
#include "fc.h"

enum { FUSION_CONV_RELU = 1, FUSION_CONV_SUM = 2, FUSION_CONV_SUM_RELU = 3 };

/* ---- ConvFusion ------------------------------------------------------------------ */

/* The epilogue fusion_type and the input count ask for. */
static dm_status conv_fusion_epilogue(dm_op_ctx *ctx, dm_conv_epilogue *e) {
  int64_t t = dm_op_arg_int(ctx, "fusion_type", 0);
  int n = dm_op_num_inputs(ctx);
  if (t == FUSION_CONV_RELU) {
    if (n > 3)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "fusion_type 1 (conv + relu) takes X, W, [b]; got %d inputs", n);
    *e = (dm_conv_epilogue){n == 3, -1, 1};
    return DM_OK;
  }
  if (t == FUSION_CONV_SUM || t == FUSION_CONV_SUM_RELU) {
    if (n < 3)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "fusion_type %lld (conv + sum) takes X, W, [b], S; got %d inputs",
                         (long long)t, n);
    *e = (dm_conv_epilogue){n == 4, n - 1, t == FUSION_CONV_SUM_RELU};
    return DM_OK;
  }
  return dm_op_error(ctx, DM_ERR_INVALID,
                     "fusion_type is %lld; ConvFusion takes 1 (conv + relu), 2 (conv + sum) "
                     "or 3 (conv + sum + relu)", (long long)t);
}

static dm_status conv_fusion_infer(dm_op_ctx *ctx) {
  dm_conv_epilogue e;
  DM_TRY(conv_fusion_epilogue(ctx, &e));
  return dm_conv_forward_infer(ctx, &e);
}

static dm_status conv_fusion_init(dm_op_ctx *ctx, void **state) {
  dm_conv_epilogue e; /* a bad fusion_type at instantiation, not at the first run */
  DM_TRY(conv_fusion_epilogue(ctx, &e));
  return dm_conv_init(ctx, state);
}

static dm_status conv_fusion_run(dm_op_ctx *ctx) {
  dm_conv_epilogue e;
  DM_TRY(conv_fusion_epilogue(ctx, &e));
  return dm_conv_forward_run(ctx, &e);
}

/* Conv's FLOPs, plus one per output for the sum and one for the relu. */
static void conv_fusion_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_conv_cost(ctx, c);
  int64_t t = dm_op_arg_int(ctx, "fusion_type", 0);
  double y = (double)dm_op_output(ctx, 0)->numel;
  c->flops += y * ((t == FUSION_CONV_SUM || t == FUSION_CONV_SUM_RELU) +
                   (t == FUSION_CONV_RELU || t == FUSION_CONV_SUM_RELU));
}

static const dm_arg_spec conv_fusion_args[] = {
    DM_CONV_ARG_SPECS,
    {"fusion_type", DM_ARG_INT, 1, "1 conv + relu, 2 conv + sum, 3 conv + sum + relu"},
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
           "b + S). S is last (b is there when 4 inputs are), has Y's shape and may be Y. "
           "Conv's arguments and layouts.",
    .infer = conv_fusion_infer,
    .cost = conv_fusion_cost,
    /* X, W, S (with b; S without b, at 2, is refused by the layout pass) -> Y */
    .layout = DM_LAYOUT_FILTER, .layout_inputs = 0xb, .layout_outputs = 0x1,
};

/* ---- FCFusion -------------------------------------------------------------------- */

static dm_status fc_fusion_check(dm_op_ctx *ctx) {
  int64_t t = dm_op_arg_int(ctx, "fusion_type", 0);
  if (t != FUSION_CONV_RELU)
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
    .layout = DM_LAYOUT_FLATTEN, .layout_inputs = 0x1,
};

static const dm_op_schema *const schemas[] = {&conv_fusion_schema, &fc_fusion_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "ConvFusion", .device = DM_CPU, .init = conv_fusion_init, .run = conv_fusion_run,
     .fini = dm_scratch_fini},
    {.type = "FCFusion", .device = DM_CPU, .init = fc_fusion_init, .run = fc_fusion_run},
    {0},
};
const dm_op_family dm_family_conv_fusion = {schemas, kernels};
