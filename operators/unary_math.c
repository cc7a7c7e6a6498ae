/* unary_math.c: the elementwise activations beside Relu, one row each in unary_family.h:
 * Sigmoid, Tanh, LeakyRelu(alpha), Clip(min, max), HardSigmoid(alpha, beta), HardSwish,
 * and their gradients (SigmoidGradient, ... as Caffe2 has them, plus HardSwishGradient);
 * FP32, FP16 and BF16. The schemas, the gradient makers and the kernel table are
 * expansions of that table; the formulas are unary_formulas.h's, shared with the CUDA
 * kernels.
 *
 * One kernel serves them all: a block of X is widened to FP32 (exact for the 16-bit
 * types), the function applied, and the block rounded back once, as the neighbours do
 * (elementwise.c's Scale). The kind and the arguments are resolved once, in the kernel's
 * init (dm_unary_init, which the CUDA kernels use too). The gradients read Y (so the
 * forward may run in place), as Caffe2's do, except where the derivative is not a
 * function of Y (the row's reads_x: HardSwish), which read X, so that forward may not run
 * in place. NaN passes through every forward.
 *
 * HardSwish is not a Caffe2 op: y = x * relu6(x + 3) / 6, ONNX's (and MobileNetV3's)
 * definition.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "builtin.h"
#include "common.h"
#include "unary_math.h"

#define BLOCK 1024

/* The forward types and their gradients', by kind. */
#define FWD_NAME_(Name, ...) #Name,
#define GRAD_NAME_(Name, ...) #Name "Gradient",
static const char *const fwd_names[] = {DM_UNARY_OPS(FWD_NAME_)};
static const char *const grad_names[] = {DM_UNARY_OPS(GRAD_NAME_)};
#define READS_X_(Name, args, reads_x, ...) reads_x,
static const int reads_x[] = {DM_UNARY_OPS(READS_X_)};

dm_unary_kind dm_unary_kind_of(const char *type, int gradient) {
  const char *const *names = gradient ? grad_names : fwd_names;
  for (int k = 0; k < DM_UN_NONE; k++)
    if (strcmp(type, names[k]) == 0)
      return (dm_unary_kind)k;
  return DM_UN_NONE;
}

/* The rows' arguments (their `args` lists): the defaults, then what the op sets. */
#define ARG_DEFAULT_(name, field, type, dflt, doc) p.field = (dflt);
#define ARG_READ_(name, field, type, dflt, doc) p.field = dm_op_arg_float(ctx, #name, p.field);
#define PARAMS_CASE_(Name, args, ...)                                                      \
  case DM_UN_##Name: args(ARG_DEFAULT_) args(ARG_READ_) break;
dm_unary_params dm_unary_params_of(dm_op_ctx *ctx, dm_unary_kind k) {
  dm_unary_params p = {0, 0, -INFINITY, INFINITY, 0};
  switch (k) {
    DM_UNARY_OPS(PARAMS_CASE_)
  default: break;
  }
  return p;
}

dm_status dm_unary_init(dm_op_ctx *ctx, void **state) {
  const char *type = dm_op_type(ctx);
  dm_unary_kind k = dm_unary_kind_of(type, 0);
  int gradient = k == DM_UN_NONE;
  if (gradient)
    k = dm_unary_kind_of(type, 1);
  if (k == DM_UN_NONE)
    return dm_op_error(ctx, DM_ERR_INVALID, "%s is not an op of unary_family.h", type);
  dm_unary_op *u = malloc(sizeof *u);
  if (!u)
    return DM_NOMEM("a unary op's state");
  u->kind = k, u->gradient = gradient, u->p = dm_unary_params_of(ctx, k);
  *state = u;
  return DM_OK;
}

void dm_unary_fini(void *state) { free(state); }

static void apply_forward(dm_unary_kind k, const dm_unary_params *p, float *v, int64_t m) {
  for (int64_t j = 0; j < m; j++)
    v[j] = dm_unary_forward(k, p, v[j]);
}

/* dX from the saved value s (Y, or X for HardSwish) and dY, in place in g. */
static void apply_gradient(dm_unary_kind k, const dm_unary_params *p, const float *s, float *g,
                           int64_t m) {
  for (int64_t j = 0; j < m; j++)
    g[j] = dm_unary_gradient(k, p, s[j], g[j]);
}

static dm_status check_dtype(dm_op_ctx *ctx, const dm_tensor *t, const char *slot) {
  if (!dm_is_float_or_reduced(t->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "%s is %s: unsupported dtype; %s takes FLOAT, FLOAT16 or BFLOAT16", slot,
                       dm_dtype_name(t->dtype), dm_op_type(ctx));
  return DM_OK;
}

dm_status dm_unary_check_params(dm_op_ctx *ctx, dm_unary_kind k, const dm_unary_params *p) {
  if (k == DM_UN_Clip && p->lo > p->hi)
    return dm_op_error(ctx, DM_ERR_INVALID, "Clip's min %g is above its max %g", (double)p->lo,
                       (double)p->hi);
  return DM_OK;
}

static dm_status forward_args_check(dm_op_ctx *ctx, dm_unary_kind k, const dm_unary_params *p) {
  DM_TRY(check_dtype(ctx, dm_op_input(ctx, 0), "X"));
  return dm_unary_check_params(ctx, k, p);
}

static dm_status forward_check(dm_op_ctx *ctx, dm_unary_kind k, const dm_unary_params *p) {
  DM_TRY(forward_args_check(ctx, k, p));
  const dm_tensor *x = dm_op_input(ctx, 0);
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

dm_status dm_unary_check_forward_args(dm_op_ctx *ctx, const dm_unary_op *u) {
  return forward_args_check(ctx, u->kind, &u->p);
}

/* S (Y, or X where the row's reads_x is 1), dY -> dX. */
static dm_status gradient_check(dm_op_ctx *ctx, dm_unary_kind k, const dm_unary_params *p) {
  const dm_tensor *s = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  const char *slot = k != DM_UN_NONE && reads_x[k] ? "X" : "Y";
  char a[96], b[96];
  DM_TRY(check_dtype(ctx, s, slot));
  if (dy->dtype != s->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s but dY is %s; expected the same dtype", slot,
                       dm_dtype_name(s->dtype), dm_dtype_name(dy->dtype));
  if (!dm_tensor_same_shape(s, dy))
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s but dY is %s", slot,
                       dm_shape_str(s, a, sizeof a), dm_shape_str(dy, b, sizeof b));
  DM_TRY(dm_op_check_grad_alias(ctx, 0, 1, 1u << 0, (const char *const[]){slot, "dY"}));
  if (k == DM_UN_LeakyRelu && p->alpha < 0)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "alpha %g is negative: Y's sign then no longer tells X's (Caffe2's "
                       "LeakyReluGradient reads Y)", (double)p->alpha);
  return dm_op_set_output(ctx, 0, s->dtype, s->ndim, s->dims);
}

dm_status dm_unary_check(dm_op_ctx *ctx, const dm_unary_op *u) {
  return u->gradient ? gradient_check(ctx, u->kind, &u->p) : forward_check(ctx, u->kind, &u->p);
}

/* The schemas' inference, which runs without a kernel's state: the kind by name. */
static dm_status unary_infer(dm_op_ctx *ctx) {
  const dm_unary_kind k = dm_unary_kind_of(dm_op_type(ctx), 0);
  const dm_unary_params p = dm_unary_params_of(ctx, k);
  return forward_check(ctx, k, &p);
}

static dm_status unary_grad_infer(dm_op_ctx *ctx) {
  const dm_unary_kind k = dm_unary_kind_of(dm_op_type(ctx), 1);
  const dm_unary_params p = dm_unary_params_of(ctx, k);
  return gradient_check(ctx, k, &p);
}

static dm_status unary_run(dm_op_ctx *ctx) {
  const dm_unary_op *u = dm_op_state(ctx);
  DM_TRY(forward_check(ctx, u->kind, &u->p));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const dm_unary_kind k = u->kind;
  const dm_unary_params p = u->p;
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

static dm_status grad_run(dm_op_ctx *ctx) {
  const dm_unary_op *u = dm_op_state(ctx);
  DM_TRY(gradient_check(ctx, u->kind, &u->p));
  const dm_tensor *s = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  dm_tensor *dx = dm_op_output(ctx, 0);
  const dm_unary_kind k = u->kind;
  const dm_unary_params p = u->p;
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

/* Y, dY -> dX (X, dY where the row's reads_x is 1); dm_grad_emit copies the forward's
 * arguments (alpha, beta, min, max) onto the gradient op. */
static dm_status emit_grad(dm_grad_ctx *g, const char *type, int x_in) {
  const char *in[] = {x_in ? dm_grad_input(g, 0) : dm_grad_output(g, 0),
                      dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, type, 2, in, 1, out);
}

static void unary_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = 4.0 * (double)dm_op_output(ctx, 0)->numel;
}

static const dm_inplace_pair fwd_inplace[] = {{0, 0}, {-1, -1}};
static const dm_inplace_pair grad_inplace[] = {{1, 0}, {-1, -1}};

/* Per row: its argument table, from its `args` list. */
#define ARG_SPEC_(name, field, type, dflt, doc) {#name, DM_ARG_##type, 0, doc},
#define ARG_TABLE_(Name, args, ...)                                                        \
  static const dm_arg_spec Name##_args[] = {args(ARG_SPEC_){NULL, 0, 0, NULL}};
DM_UNARY_OPS(ARG_TABLE_)

/* Per row: the gradient maker, the forward's schema and the gradient's. */
#define SCHEMAS_(Name, arglist, x_in, onnx, docstr, grad_docstr)                           \
  static dm_status Name##_gradient(dm_grad_ctx *g) {                                       \
    return emit_grad(g, #Name "Gradient", x_in);                                           \
  }                                                                                        \
  static const dm_op_schema Name##_schema = {                                              \
      .type = #Name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, \
      .args = Name##_args, .inplace = x_in ? NULL : fwd_inplace, .precision = DM_PREC_FOLLOW, \
      .doc = docstr, .infer = unary_infer, .cost = unary_cost, .gradient = Name##_gradient, \
      .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1};       \
  static const dm_op_schema Name##_grad_schema = {                                         \
      .type = #Name "Gradient", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,        \
      .max_outputs = 1, .args = Name##_args, .inplace = grad_inplace, .precision = DM_PREC_FOLLOW, \
      .doc = grad_docstr, .infer = unary_grad_infer, .cost = unary_cost,                   \
      .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x3, .layout_outputs = 0x1};
DM_UNARY_OPS(SCHEMAS_)

#define FWD_SCHEMA_(Name, ...) &Name##_schema,
#define GRAD_SCHEMA_(Name, ...) &Name##_grad_schema,
static const dm_op_schema *const schemas[] = {DM_UNARY_OPS(FWD_SCHEMA_)
                                                  DM_UNARY_OPS(GRAD_SCHEMA_) NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
#define FWD_KERNEL_(Name, ...)                                                             \
  {.type = #Name, .device = DM_CPU, .init = dm_unary_init, .run = unary_run,               \
   .fini = dm_unary_fini},
#define GRAD_KERNEL_(Name, ...)                                                            \
  {.type = #Name "Gradient", .device = DM_CPU, .init = dm_unary_init, .run = grad_run,     \
   .fini = dm_unary_fini},
static const dm_kernel_def kernels[] = {DM_UNARY_OPS(FWD_KERNEL_) DM_UNARY_OPS(GRAD_KERNEL_){0}};
const dm_op_family dm_family_unary_math = {schemas, kernels};
