/* bn_fusion.c: the fused training ops SpatialBNRelu (Y = relu(BN(X))) and SpatialBNAddRelu
 * (Y = relu(BN(X) + Z), ResNet's residual join), with their gradients, FP32, FP16 or
 * BF16 X/Y/Z with FP32 parameters and statistics, as SpatialBN.
 *
 * They exist for the GPU: cuDNN runs each as one kernel (its batch-norm Ex functions with
 * CUDNN_BATCHNORM_OPS_BN_ACTIVATION / _BN_ADD_ACTIVATION, gpu/batchnorm_cudnn.c), which saves a
 * pass over the activation per op it takes in; net/passes/train_fusion_pass.c makes them from
 * SpatialBN (+ Sum/Add) + Relu before the gradient pass. The CPU kernels here are the
 * reference: they run SpatialBN's own loops (batchnorm.h), the Sum/Add kernels' rule for
 * the addition (FP32 math, one rounding) and Relu's loops (activation.h), so they compute
 * the same bits as the unfused sequence. Training mode only (is_test=0): an inference net
 * folds BN into its Conv instead (net/passes/fusion_pass.c).
 *
 * The gradients read the forward's Y (Relu's output) to mask dY, as ReluGradient does
 * (and the BN's bias, which only cuDNN's fused backward reads):
 * SpatialBNReluGradient masks dY into dX's buffer and runs SpatialBN's backward on it in
 * place; SpatialBNAddReluGradient masks dY into dZ (the residual's gradient is the masked
 * dY itself) and runs the backward from there.
 *
 * `reserve` (optional last output of the forward, input of the gradient) carries cuDNN's
 * reserve space from the fused forward to the fused backward on a GPU; the CPU kernels
 * leave it empty (UINT8, 0 elements) and ignore it.
 */
#include "activation.h"
#include "batchnorm.h"
#include "builtin.h"
#include "common.h"

/* Output slot of `reserve` in the forward ops, input slot in the gradients. */
enum { FWD_RESERVE = 5, GRAD_Y = 5, GRAD_BIAS = 6, GRAD_RESERVE = 7 };

static int has_z(dm_op_ctx *ctx) { return dm_op_num_inputs(ctx) == 6; }

/* The fused ops are training ops: test mode is SpatialBN's (or the inference fusion's). */
static dm_status train_only(dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "is_test", 0) != 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "%s is a training op (is_test=0); in test mode run "
                       "SpatialBN and Relu", dm_op_type(ctx));
  return DM_OK;
}

/* `what` (Z, Y) has X's dtype and shape. */
static dm_status same_as_x(dm_op_ctx *ctx, const dm_tensor *t, const char *what) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  char xs[96], ts[96];
  if (t->dtype != x->dtype || !dm_tensor_same_shape(x, t))
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s %s but X is %s %s; they must match", what,
                       dm_dtype_name(t->dtype), dm_shape_str(t, ts, sizeof ts),
                       dm_dtype_name(x->dtype), dm_shape_str(x, xs, sizeof xs));
  return DM_OK;
}

/* X, scale, bias, mean, var, [Z] -> Y, running_mean, running_var, saved_mean,
 * saved_inv_std, [reserve]. */
static dm_status fused_infer(dm_op_ctx *ctx) {
  DM_TRY(train_only(ctx));
  int nout = dm_op_num_outputs(ctx);
  if (nout < 5)
    return dm_op_error(ctx, DM_ERR_INVALID, "%s takes 5 or 6 outputs (Y, running_mean, "
                       "running_var, saved_mean, saved_inv_std, [reserve]), not %d",
                       dm_op_type(ctx), nout);
  DM_TRY(dm_bn_infer_outputs(ctx, 5));
  if (has_z(ctx))
    DM_TRY(same_as_x(ctx, dm_op_input(ctx, 5), "Z"));
  /* The reserve: declared empty where nothing sized it yet. The kernels size it after the
   * inference (the CPU's leave it empty), so that a GPU kernel keeps its buffer from run
   * to run instead of a resize to 0 and back reallocating it. */
  const dm_tensor *r = nout > FWD_RESERVE ? dm_op_output(ctx, FWD_RESERVE) : NULL;
  if (r && (dm_op_shape_only(ctx) || r->dtype != DM_UINT8 || r->ndim != 1))
    DM_TRY(dm_op_set_output(ctx, FWD_RESERVE, DM_UINT8, 1, &(int64_t){0}));
  return DM_OK;
}

/* X, scale, dY, saved_mean, saved_inv_std, Y, bias, [reserve] -> dX, dscale, dbias, [dZ]. */
static dm_status fused_grad_infer(dm_op_ctx *ctx) {
  DM_TRY(train_only(ctx));
  DM_TRY(dm_bn_grad_infer(ctx));
  DM_TRY(same_as_x(ctx, dm_op_input(ctx, GRAD_Y), "Y"));
  const dm_tensor *bias = dm_op_input(ctx, GRAD_BIAS), *scale = dm_op_input(ctx, 1);
  if (bias->dtype != DM_FLOAT || bias->numel != scale->numel)
    return dm_op_error(ctx, DM_ERR_SHAPE, "bias is %s with %lld elements; expected FLOAT with "
                       "scale's %lld", dm_dtype_name(bias->dtype), (long long)bias->numel,
                       (long long)scale->numel);
  if (dm_op_num_inputs(ctx) > GRAD_RESERVE && dm_op_input(ctx, GRAD_RESERVE)->dtype != DM_UINT8)
    return dm_op_error(ctx, DM_ERR_TYPE, "reserve is %s; expected UINT8 (the forward's "
                       "reserve output)", dm_dtype_name(dm_op_input(ctx, GRAD_RESERVE)->dtype));
  /* dX and dZ are not Y, nor each other: the instantiator refuses both (no pair). */
  const dm_tensor *x = dm_op_input(ctx, 0);
  return dm_op_num_outputs(ctx) > 3 ? dm_op_set_output(ctx, 3, x->dtype, x->ndim, x->dims)
                                    : DM_OK;
}

/* Reads X twice and Z once, writes Y: SpatialBN's training cost plus an elementwise op or
 * two, with the activation passes the fusion saves not counted. */
static void fused_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = (has_z(ctx) ? 7 : 6) * (double)dm_op_input(ctx, 0)->numel;
}

static void fused_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = 9 * (double)dm_op_input(ctx, 0)->numel;
}

/* Gradient makers: the fused backward op, reading Y and the saved statistics. */
static dm_status fused_gradient(dm_grad_ctx *g) {
  int add = dm_grad_num_inputs(g) == 6, nout = dm_grad_num_outputs(g);
  if (dm_grad_arg_int(g, "is_test", 0) != 0 || nout < 5)
    return dm_error(DM_ERR_INVALID, "%s needs is_test=0 and its saved_mean and saved_inv_std "
                    "outputs for the gradient", add ? "SpatialBNAddRelu" : "SpatialBNRelu");
  const char *in[] = {dm_grad_input(g, 0),  dm_grad_input(g, 1),  dm_grad_output_grad(g, 0),
                      dm_grad_output(g, 3), dm_grad_output(g, 4), dm_grad_output(g, 0),
                      dm_grad_input(g, 2),
                      nout > FWD_RESERVE ? dm_grad_output(g, FWD_RESERVE) : NULL};
  const char *out[] = {dm_grad_input_grad(g, 0), dm_grad_input_grad(g, 1),
                       dm_grad_input_grad(g, 2), add ? dm_grad_input_grad(g, 5) : NULL};
  return dm_grad_emit(g, add ? "SpatialBNAddReluGradient" : "SpatialBNReluGradient",
                      nout > FWD_RESERVE ? 8 : 7, in, add ? 4 : 3, out);
}

/* The forward's in-place pairs are SpatialBN's, and for the Add form Y over Z. */
static const dm_inplace_pair relu_inplace[] = {{0, 0}, {3, 1}, {4, 2}, {-1, -1}};
static const dm_inplace_pair add_inplace[] = {{0, 0}, {3, 1}, {4, 2}, {5, 0}, {-1, -1}};
/* The gradients may mask dY in place: dX over dY, dZ over dY. */
static const dm_inplace_pair relu_grad_inplace[] = {{2, 0}, {-1, -1}};
static const dm_inplace_pair add_grad_inplace[] = {{2, 3}, {-1, -1}};

/* LAYOUT_IN/OUT: the slots in `order` for the layout pass (X, Z, dY, Y, dX, dZ). */
#define FUSED_SCHEMA(TYPE, NIN, INPLACE, LAYOUT_IN, DOC)                                \
  {.type = TYPE, .min_inputs = NIN, .max_inputs = NIN, .min_outputs = 5, .max_outputs = 6, \
   .args = dm_bn_args, .inplace = INPLACE, .precision = DM_PREC_FOLLOW,                 \
   .fp32_inputs = 0x1e, .fp32_outputs = 0x1e, .nonfloat_outputs = 1u << FWD_RESERVE,   \
   .doc = DOC, .infer = fused_infer, .cost = fused_cost, .gradient = fused_gradient,    \
   .layout = DM_LAYOUT_ORDER, .layout_inputs = LAYOUT_IN, .layout_outputs = 0x1}
#define FUSED_GRAD_SCHEMA(TYPE, NOUT, INPLACE, LAYOUT_OUT, DOC)                         \
  {.type = TYPE, .min_inputs = 7, .max_inputs = 8, .min_outputs = NOUT,                 \
   .max_outputs = NOUT, .args = dm_bn_args, .inplace = INPLACE,                         \
   .precision = DM_PREC_FOLLOW, .fp32_inputs = 0x5a, .fp32_outputs = 0x06,              \
   .nonfloat_inputs = 1u << GRAD_RESERVE, .doc = DOC, .infer = fused_grad_infer,        \
   .cost = fused_grad_cost, .layout = DM_LAYOUT_ORDER, .layout_inputs = 0x25,           \
   .layout_outputs = LAYOUT_OUT}

static const dm_op_schema bn_relu_schema = FUSED_SCHEMA(
    "SpatialBNRelu", 5, relu_inplace, 0x1,
    "X, scale, bias, mean, var -> Y, running_mean (in place with mean), running_var (in "
    "place with var), saved_mean, saved_inv_std, [reserve]: Y = relu(SpatialBN(X)); "
    "training only (is_test=0), SpatialBN's arguments.");
static const dm_op_schema bn_add_relu_schema = FUSED_SCHEMA(
    "SpatialBNAddRelu", 6, add_inplace, 0x21,
    "X, scale, bias, mean, var, Z -> Y, running_mean (in place with mean), running_var (in "
    "place with var), saved_mean, saved_inv_std, [reserve]: Y = relu(SpatialBN(X) + Z), Z "
    "as X; training only (is_test=0), SpatialBN's arguments.");
static const dm_op_schema bn_relu_grad_schema = FUSED_GRAD_SCHEMA(
    "SpatialBNReluGradient", 3, relu_grad_inplace, 0x1,
    "X, scale, dY, saved_mean, saved_inv_std, Y, bias, [reserve] -> dX, dscale, dbias: "
    "SpatialBNGradient of dY masked where Y > 0.");
static const dm_op_schema bn_add_relu_grad_schema = FUSED_GRAD_SCHEMA(
    "SpatialBNAddReluGradient", 4, add_grad_inplace, 0x9,
    "X, scale, dY, saved_mean, saved_inv_std, Y, bias, [reserve] -> dX, dscale, dbias, dZ: "
    "dZ = dY masked where Y > 0, and SpatialBNGradient of dZ.");

/* ---- CPU kernels ---------------------------------------------------------------- */

/* y = a + b over n elements: FP32 math, one rounding for FLOAT16 and BFLOAT16, the Sum and
 * Add kernels' rule (operators/elementwise.c), so the bits are theirs. y may be a or b. */
#define ADD_BLOCK 1024
static void add_buffer(dm_dtype t, const void *a, const void *b, void *y, int64_t n) {
  if (t == DM_FLOAT) {
    const float *pa = a, *pb = b;
    float *py = y;
    for (int64_t i = 0; i < n; i++)
      py[i] = pa[i] + pb[i];
    return;
  }
  float fa[ADD_BLOCK], fb[ADD_BLOCK];
  for (int64_t i0 = 0; i0 < n; i0 += ADD_BLOCK) {
    size_t m = (size_t)(n - i0 < ADD_BLOCK ? n - i0 : ADD_BLOCK);
    dm_widen(t, (const uint16_t *)a + i0, fa, m);
    dm_widen(t, (const uint16_t *)b + i0, fb, m);
    for (size_t j = 0; j < m; j++)
      fa[j] += fb[j];
    dm_narrow(t, fa, (uint16_t *)y + i0, m);
  }
}

static dm_status fused_run(dm_op_ctx *ctx) {
  DM_TRY(fused_infer(ctx));
  if (dm_op_num_outputs(ctx) > FWD_RESERVE)
    DM_TRY(dm_op_set_output(ctx, FWD_RESERVE, DM_UINT8, 1, &(int64_t){0}));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (!has_z(ctx)) {
    DM_TRY(dm_bn_forward(ctx, dm_tensor_mutable_data(y)));
    dm_relu_buffer(x->dtype, dm_tensor_data(y), dm_tensor_mutable_data(y), x->numel);
    return DM_OK;
  }
  /* Y over Z (in place): BN(X) goes to a temporary first, Z being read after it. */
  const dm_tensor *z = dm_op_input(ctx, 5);
  dm_tensor *tmp = NULL;
  if (dm_tensors_alias(y, z)) {
    if (!(tmp = dm_tensor_new(y->limit)))
      return DM_NOMEM("SpatialBNAddRelu's temporary");
    dm_status s = dm_tensor_resize(tmp, x->dtype, x->ndim, x->dims);
    if (s != DM_OK) {
      dm_tensor_free(tmp);
      return dm_op_error(ctx, s, "no memory for a temporary of X's size (Y is Z's blob)");
    }
  }
  dm_status s = dm_bn_forward(ctx, dm_tensor_mutable_data(tmp ? tmp : y));
  if (s == DM_OK) {
    void *py = dm_tensor_mutable_data(y);
    add_buffer(x->dtype, dm_tensor_data(tmp ? tmp : y), dm_tensor_data(z), py, x->numel);
    dm_relu_buffer(x->dtype, py, py, x->numel);
  }
  dm_tensor_free(tmp);
  return s;
}

static dm_status fused_grad_run(dm_op_ctx *ctx) {
  DM_TRY(fused_grad_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  /* The masked dY goes to dZ (Add) or to dX, whose buffer the backward then reads as its
   * dY and overwrites block by block (batchnorm.h allows it). */
  dm_tensor *m = dm_op_output(ctx, dm_op_num_outputs(ctx) > 3 ? 3 : 0);
  dm_relu_grad_buffer(x->dtype, dm_tensor_data(dm_op_input(ctx, GRAD_Y)),
                      dm_tensor_data(dm_op_input(ctx, 2)), dm_tensor_mutable_data(m), x->numel);
  return dm_bn_backward(ctx, dm_tensor_data(m));
}

static const dm_op_schema *const schemas[] = {&bn_relu_schema, &bn_add_relu_schema,
                                              &bn_relu_grad_schema, &bn_add_relu_grad_schema,
                                              NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "SpatialBNRelu", .device = DM_CPU, .run = fused_run},
    {.type = "SpatialBNAddRelu", .device = DM_CPU, .run = fused_run},
    {.type = "SpatialBNReluGradient", .device = DM_CPU, .run = fused_grad_run},
    {.type = "SpatialBNAddReluGradient", .device = DM_CPU, .run = fused_grad_run},
    {0},
};
const dm_op_family dm_family_bn_fusion = {schemas, kernels};
