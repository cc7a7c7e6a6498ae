/* unary_math.c: the elementwise activations beside Relu: Sigmoid, Tanh, LeakyRelu(alpha),
 * Clip(min, max), HardSigmoid(alpha, beta), HardSwish, and the gradients Caffe2 has
 * (SigmoidGradient, TanhGradient, LeakyReluGradient, ClipGradient, HardSigmoidGradient)
 * plus HardSwishGradient; FP32, FP16 and BF16.
 *
 * One kernel serves them all: a block of X is widened to FP32 (exact for the 16-bit
 * types), the function applied, and the block rounded back once, as the neighbours do
 * (elementwise.c's Scale). The gradients read Y (so the forward may run in place), as
 * Caffe2's do, except HardSwish's, whose derivative is not a function of Y: it reads X,
 * so HardSwish may not run in place. NaN passes through every forward.
 *
 * HardSwish is not a Caffe2 op: y = x * relu6(x + 3) / 6, ONNX's (and MobileNetV3's)
 * definition.
 */
#include <math.h>
#include <string.h>

#include "dm_config.h"

#include "builtin.h"
#include "common.h"
#include "unary_math.h"

#define BLOCK 1024

/* The forward type and its gradient's, by kind (the gradient's name is the forward's
 * with "Gradient"). */
static const char *const fwd_names[] = {"Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid",
                                        "HardSwish"};
static const char *const grad_names[] = {"SigmoidGradient", "TanhGradient",
                                         "LeakyReluGradient", "ClipGradient",
                                         "HardSigmoidGradient", "HardSwishGradient"};

dm_unary_kind dm_unary_kind_of(const char *type, int gradient) {
  const char *const *names = gradient ? grad_names : fwd_names;
  for (int k = 0; k < DM_UN_NONE; k++)
    if (strcmp(type, names[k]) == 0)
      return (dm_unary_kind)k;
  return DM_UN_NONE;
}

dm_unary_params dm_unary_params_of(dm_op_ctx *ctx, dm_unary_kind k) {
  dm_unary_params p = {0, 0, -INFINITY, INFINITY};
  if (k == DM_UN_LEAKY)
    p.alpha = dm_op_arg_float(ctx, "alpha", 0.01f);
  if (k == DM_UN_HSIG)
    p.alpha = dm_op_arg_float(ctx, "alpha", 0.2f), p.beta = dm_op_arg_float(ctx, "beta", 0.5f);
  if (k == DM_UN_CLIP)
    p.lo = dm_op_arg_float(ctx, "min", -INFINITY), p.hi = dm_op_arg_float(ctx, "max", INFINITY);
  return p;
}

static inline float sigmoidf(float x) { /* no overflow of exp for either sign */
  if (x >= 0)
    return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}

static inline float clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static void apply_forward(dm_unary_kind k, const dm_unary_params *p, float *v, int64_t m) {
  for (int64_t j = 0; j < m; j++) {
    float x = v[j];
    switch (k) {
    case DM_UN_SIGMOID: v[j] = sigmoidf(x); break;
    case DM_UN_TANH: v[j] = tanhf(x); break;
    case DM_UN_LEAKY: v[j] = x > 0 ? x : p->alpha * x; break;
    case DM_UN_CLIP: v[j] = x < p->lo ? p->lo : x > p->hi ? p->hi : x; break;
    case DM_UN_HSIG: v[j] = x != x ? x : clamp01(p->alpha * x + p->beta); break;
    case DM_UN_HSWISH: v[j] = x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x / 6.0f + 0.5f); break;
    case DM_UN_NONE: break;
    }
  }
}

/* dX from the saved value s (Y, or X for HardSwish) and dY, in place in g. */
static void apply_gradient(dm_unary_kind k, const dm_unary_params *p, const float *s, float *g, int64_t m) {
  for (int64_t j = 0; j < m; j++) {
    float y = s[j], dy = g[j];
    switch (k) {
    case DM_UN_SIGMOID: g[j] = dy * y * (1.0f - y); break;
    case DM_UN_TANH: g[j] = dy * (1.0f - y * y); break;
    case DM_UN_LEAKY: g[j] = y > 0 ? dy : p->alpha * dy; break;
    case DM_UN_CLIP: g[j] = y > p->lo && y < p->hi ? dy : 0.0f; break;
    case DM_UN_HSIG: g[j] = y > 0 && y < 1 ? p->alpha * dy : 0.0f; break;
    case DM_UN_HSWISH: g[j] = y < -3.0f ? 0.0f : y > 3.0f ? dy : dy * (2.0f * y + 3.0f) / 6.0f; break;
    case DM_UN_NONE: break;
    }
  }
}

static dm_status check_dtype(dm_op_ctx *ctx, const dm_tensor *t, const char *slot) {
  if (!dm_is_float_or_reduced(t->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "%s is %s: unsupported dtype; %s takes FLOAT, FLOAT16 or BFLOAT16", slot,
                       dm_dtype_name(t->dtype), dm_op_type(ctx));
  return DM_OK;
}

dm_status dm_unary_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(check_dtype(ctx, x, "X"));
  if (strcmp(dm_op_type(ctx), "Clip") == 0 &&
      dm_op_arg_float(ctx, "min", -INFINITY) > dm_op_arg_float(ctx, "max", INFINITY))
    return dm_op_error(ctx, DM_ERR_INVALID, "Clip's min %g is above its max %g",
                       (double)dm_op_arg_float(ctx, "min", -INFINITY),
                       (double)dm_op_arg_float(ctx, "max", INFINITY));
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static dm_status unary_run(dm_op_ctx *ctx) {
  DM_TRY(dm_unary_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const dm_unary_kind k = dm_unary_kind_of(dm_op_type(ctx), 0);
  const dm_unary_params p = dm_unary_params_of(ctx, k);
  const int64_t n = x->numel;
  const void *px = dm_tensor_data(x);
  void *py = dm_tensor_mutable_data(y);
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 15))
#endif
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    float buf[BLOCK];
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    dm_load_f32(x->dtype, px, i0, m, buf);
    apply_forward(k, &p, buf, m);
    dm_store_f32(x->dtype, py, i0, m, buf);
  }
  return DM_OK;
}

/* ---- the gradients: S (Y, or X for HardSwish), dY -> dX ---------------------------- */

dm_status dm_unary_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *s = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  const char *slot = strcmp(dm_op_type(ctx), "HardSwishGradient") == 0 ? "X" : "Y";
  char a[96], b[96];
  DM_TRY(check_dtype(ctx, s, slot));
  if (dy->dtype != s->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s but dY is %s; expected the same dtype", slot,
                       dm_dtype_name(s->dtype), dm_dtype_name(dy->dtype));
  if (!dm_tensor_same_shape(s, dy))
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s but dY is %s", slot,
                       dm_shape_str(s, a, sizeof a), dm_shape_str(dy, b, sizeof b));
  if (dm_op_output(ctx, 0) == s)
    return dm_op_error(ctx, DM_ERR_INVALID, "dX may be dY's blob, not %s's", slot);
  if (strcmp(dm_op_type(ctx), "LeakyReluGradient") == 0 && dm_op_arg_float(ctx, "alpha", 0.01f) < 0)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "alpha %g is negative: Y's sign then no longer tells X's (Caffe2's "
                       "LeakyReluGradient reads Y)", (double)dm_op_arg_float(ctx, "alpha", 0.01f));
  return dm_op_set_output(ctx, 0, s->dtype, s->ndim, s->dims);
}

static dm_status grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_unary_grad_infer(ctx));
  const dm_tensor *s = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  dm_tensor *dx = dm_op_output(ctx, 0);
  const dm_unary_kind k = dm_unary_kind_of(dm_op_type(ctx), 1);
  const dm_unary_params p = dm_unary_params_of(ctx, k);
  const int64_t n = s->numel;
  const void *ps = dm_tensor_data(s), *pdy = dm_tensor_data(dy);
  void *pdx = dm_tensor_mutable_data(dx);
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 15))
#endif
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    float sb[BLOCK], gb[BLOCK];
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    dm_load_f32(s->dtype, ps, i0, m, sb);
    dm_load_f32(s->dtype, pdy, i0, m, gb); /* both read before dX (maybe dY) is written */
    apply_gradient(k, &p, sb, gb, m);
    dm_store_f32(s->dtype, pdx, i0, m, gb);
  }
  return DM_OK;
}

/* Y, dY -> dX (X, dY for HardSwish); dm_grad_emit copies the forward's arguments (alpha,
 * beta, min, max) onto the gradient op. */
static dm_status emit_grad(dm_grad_ctx *g, const char *type, int reads_x) {
  const char *in[] = {reads_x ? dm_grad_input(g, 0) : dm_grad_output(g, 0),
                      dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, type, 2, in, 1, out);
}
static dm_status sigmoid_gradient(dm_grad_ctx *g) { return emit_grad(g, "SigmoidGradient", 0); }
static dm_status tanh_gradient(dm_grad_ctx *g) { return emit_grad(g, "TanhGradient", 0); }
static dm_status leaky_gradient(dm_grad_ctx *g) { return emit_grad(g, "LeakyReluGradient", 0); }
static dm_status clip_gradient(dm_grad_ctx *g) { return emit_grad(g, "ClipGradient", 0); }
static dm_status hsig_gradient(dm_grad_ctx *g) { return emit_grad(g, "HardSigmoidGradient", 0); }
static dm_status hswish_gradient(dm_grad_ctx *g) { return emit_grad(g, "HardSwishGradient", 1); }

static void unary_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = 4.0 * (double)dm_op_output(ctx, 0)->numel;
}

static const dm_inplace_pair fwd_inplace[] = {{0, 0}, {-1, -1}};
static const dm_inplace_pair grad_inplace[] = {{1, 0}, {-1, -1}};

static const dm_arg_spec leaky_args[] = {
    {"alpha", DM_ARG_FLOAT, 0, "the slope for x <= 0 (default 0.01)"},
    {NULL, 0, 0, NULL},
};
static const dm_arg_spec clip_args[] = {
    {"min", DM_ARG_FLOAT, 0, "the lower bound (default -inf)"},
    {"max", DM_ARG_FLOAT, 0, "the upper bound (default +inf)"},
    {NULL, 0, 0, NULL},
};
static const dm_arg_spec hsig_args[] = {
    {"alpha", DM_ARG_FLOAT, 0, "the slope (default 0.2)"},
    {"beta", DM_ARG_FLOAT, 0, "the offset (default 0.5)"},
    {NULL, 0, 0, NULL},
};

#define UNARY_SCHEMA(var, name, argv, inpl, grad, docstr)                                   \
  static const dm_op_schema var##_schema = {                                                \
      .type = name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,   \
      .args = argv, .inplace = inpl, .precision = DM_PREC_FOLLOW, .doc = docstr,            \
      .infer = dm_unary_infer, .cost = unary_cost, .gradient = grad,                           \
      .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1}
#define GRAD_SCHEMA(var, name, argv, docstr)                                                \
  static const dm_op_schema var##_schema = {                                                \
      .type = name, .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,   \
      .args = argv, .inplace = grad_inplace, .precision = DM_PREC_FOLLOW, .doc = docstr,    \
      .infer = dm_unary_grad_infer, .cost = unary_cost,                                              \
      .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x3, .layout_outputs = 0x1}

UNARY_SCHEMA(sigmoid, "Sigmoid", NULL, fwd_inplace, sigmoid_gradient,
             "X -> Y = 1 / (1 + exp(-X)); FLOAT, FLOAT16 or BFLOAT16; may run in place.");
UNARY_SCHEMA(tanh, "Tanh", NULL, fwd_inplace, tanh_gradient,
             "X -> Y = tanh(X); FLOAT, FLOAT16 or BFLOAT16; may run in place.");
UNARY_SCHEMA(leaky, "LeakyRelu", leaky_args, fwd_inplace, leaky_gradient,
             "X -> Y = X where X > 0, else alpha * X; may run in place.");
UNARY_SCHEMA(clip, "Clip", clip_args, fwd_inplace, clip_gradient,
             "X -> Y = min(max(X, min), max); NaN passes; may run in place.");
UNARY_SCHEMA(hsig, "HardSigmoid", hsig_args, fwd_inplace, hsig_gradient,
             "X -> Y = max(0, min(1, alpha * X + beta)); may run in place.");
UNARY_SCHEMA(hswish, "HardSwish", NULL, NULL, hswish_gradient,
             "X -> Y = X * max(0, min(1, X / 6 + 1/2)) = X * relu6(X + 3) / 6 (ONNX's "
             "HardSwish; not a Caffe2 op); not in place (the gradient reads X).");
GRAD_SCHEMA(sigmoid_grad, "SigmoidGradient", NULL, "Y, dY -> dX = dY * Y * (1 - Y); dX may be dY.");
GRAD_SCHEMA(tanh_grad, "TanhGradient", NULL, "Y, dY -> dX = dY * (1 - Y^2); dX may be dY.");
GRAD_SCHEMA(leaky_grad, "LeakyReluGradient", leaky_args,
            "Y, dY -> dX = dY where Y > 0, else alpha * dY; dX may be dY.");
GRAD_SCHEMA(clip_grad, "ClipGradient", clip_args,
            "Y, dY -> dX = dY where min < Y < max, else 0; dX may be dY.");
GRAD_SCHEMA(hsig_grad, "HardSigmoidGradient", hsig_args,
            "Y, dY -> dX = alpha * dY where 0 < Y < 1, else 0; dX may be dY.");
GRAD_SCHEMA(hswish_grad, "HardSwishGradient", NULL,
            "X, dY -> dX = dY * (0 below -3, 1 above 3, (2X + 3) / 6 between); dX may be dY.");

static const dm_op_schema *const schemas[] = {
    &sigmoid_schema,      &tanh_schema,      &leaky_schema,      &clip_schema,
    &hsig_schema,         &hswish_schema,    &sigmoid_grad_schema, &tanh_grad_schema,
    &leaky_grad_schema,   &clip_grad_schema, &hsig_grad_schema,  &hswish_grad_schema,
    NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Sigmoid", .device = DM_CPU, .run = unary_run},
    {.type = "Tanh", .device = DM_CPU, .run = unary_run},
    {.type = "LeakyRelu", .device = DM_CPU, .run = unary_run},
    {.type = "Clip", .device = DM_CPU, .run = unary_run},
    {.type = "HardSigmoid", .device = DM_CPU, .run = unary_run},
    {.type = "HardSwish", .device = DM_CPU, .run = unary_run},
    {.type = "SigmoidGradient", .device = DM_CPU, .run = grad_run},
    {.type = "TanhGradient", .device = DM_CPU, .run = grad_run},
    {.type = "LeakyReluGradient", .device = DM_CPU, .run = grad_run},
    {.type = "ClipGradient", .device = DM_CPU, .run = grad_run},
    {.type = "HardSigmoidGradient", .device = DM_CPU, .run = grad_run},
    {.type = "HardSwishGradient", .device = DM_CPU, .run = grad_run},
    {0},
};
const dm_op_family dm_family_unary_math = {schemas, kernels};
