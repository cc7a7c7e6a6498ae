/* cast.c: FloatToHalf, HalfToFloat, Cast (to any numeric dtype) and Copy.
 *
 * Cast goes element by element through one of two carriers: int64 for integer and BOOL
 * sources (so INT64 values above 2^53 survive), double for floating sources (exact for
 * all of them). Each conversion into the destination then rounds at most once:
 * float -> FLOAT16/BFLOAT16 round to nearest even (dm_double_to_half rounds a double
 * once, not twice through float). Rules where C leaves things undefined, shared with the
 * CUDA kernel through cast_rules.h: floating -> integer truncates toward zero, saturates
 * at the type's range and maps NaN to 0; integer -> narrower integer wraps (two's
 * complement, as numpy's astype); anything -> BOOL is (x != 0), so NaN is true.
 *
 * Gradients: FloatToHalf and HalfToFloat are each other's; Copy's is Copy. Cast's is
 * CastLike(dY, X) -> dX, which casts dY to X's dtype: a gradient maker sees blob names,
 * not dtypes, and Caffe2's way (a `from_type` argument the net must carry) breaks on
 * nets that lack it. CastLike reads only X's dtype, never its values.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "cast_rules.h"
#include "common.h"
#include "core/half.h"

#define BLOCK 1024

/* ---- schemas ------------------------------------------------------------------- */

static dm_status float_to_half_infer(dm_op_ctx *ctx);
static dm_status half_to_float_infer(dm_op_ctx *ctx);
static dm_status cast_infer(dm_op_ctx *ctx);
static dm_status cast_like_infer(dm_op_ctx *ctx);
static dm_status copy_infer(dm_op_ctx *ctx);
static void cast_cost(dm_op_ctx *ctx, dm_op_cost *c);
static void copy_cost(dm_op_ctx *ctx, dm_op_cost *c);
static dm_status float_to_half_gradient(dm_grad_ctx *g);
static dm_status half_to_float_gradient(dm_grad_ctx *g);
static dm_status cast_gradient(dm_grad_ctx *g);
static dm_status copy_gradient(dm_grad_ctx *g);

static const dm_op_schema float_to_half_schema = {
    .type = "FloatToHalf", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .precision = DM_PREC_NONE,
    .doc = "X (FLOAT) -> Y (FLOAT16), round to nearest even.", .infer = float_to_half_infer,
    .cost = cast_cost, .gradient = float_to_half_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1,
    .value_copy = 1};

static const dm_op_schema half_to_float_schema = {
    .type = "HalfToFloat", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .precision = DM_PREC_NONE, .doc = "X (FLOAT16) -> Y (FLOAT), exact.",
    .infer = half_to_float_infer, .cost = cast_cost, .gradient = half_to_float_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1,
    .value_copy = 1};

static const dm_arg_spec cast_args[] = {
    {"to", DM_ARG_ANY, 1, "target DataType: its number (FLOAT = 1, ...) or name (\"FLOAT16\")"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema cast_schema = {
    .type = "Cast", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .args = cast_args, .precision = DM_PREC_NONE,
    .doc = "X -> Y converted to `to` (any numeric dtype incl. FLOAT16, BFLOAT16, BOOL).",
    .infer = cast_infer, .cost = cast_cost, .gradient = cast_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1,
    .value_copy = 1};

static const dm_op_schema cast_like_schema = {
    .type = "CastLike", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .precision = DM_PREC_NONE,
    .doc = "X, like -> Y = X converted to like's dtype (like's values are not read); "
           "Cast's gradient.",
    .infer = cast_like_infer, .cost = cast_cost, .gradient = cast_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1};

static const dm_op_schema copy_schema = {
    .type = "Copy", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .precision = DM_PREC_FOLLOW, .doc = "X -> Y, a deep copy (any dtype).",
    .infer = copy_infer, .cost = copy_cost, .gradient = copy_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1};

/* ---- element conversion -------------------------------------------------------- */

static int is_floating(dm_dtype t) {
  return t == DM_FLOAT || t == DM_DOUBLE || t == DM_FLOAT16 || t == DM_BFLOAT16;
}

static int is_numeric(dm_dtype t) {
  switch (t) {
  case DM_FLOAT: case DM_INT32: case DM_BOOL: case DM_UINT8: case DM_INT8: case DM_UINT16:
  case DM_INT16: case DM_INT64: case DM_FLOAT16: case DM_DOUBLE: case DM_BFLOAT16:
    return 1;
  default:
    return 0;
  }
}

static void load_real(dm_dtype t, const void *src, int64_t i0, int64_t n, double *out) {
  for (int64_t j = 0; j < n; j++) {
    int64_t i = i0 + j;
    switch (t) {
    case DM_FLOAT: out[j] = ((const float *)src)[i]; break;
    case DM_DOUBLE: out[j] = ((const double *)src)[i]; break;
    case DM_FLOAT16: out[j] = dm_half_to_float(((const uint16_t *)src)[i]); break;
    default: out[j] = dm_bf16_to_float(((const uint16_t *)src)[i]); break;
    }
  }
}

#define LOAD_INT_(DT, T, U, lo, hi)                                                         \
  case DM_##DT: out[j] = ((const T *)src)[i]; break;
static void load_int(dm_dtype t, const void *src, int64_t i0, int64_t n, int64_t *out) {
  for (int64_t j = 0; j < n; j++) {
    int64_t i = i0 + j;
    switch (t) {
    DM_CAST_NARROW_INTS(LOAD_INT_)
    case DM_INT64: out[j] = ((const int64_t *)src)[i]; break;
    case DM_BOOL: out[j] = ((const uint8_t *)src)[i] != 0; break;
    default: out[j] = 0; break; /* not numeric: refused before */
    }
  }
}

#define STORE_REAL_(DT, T, U, lo, hi)                                                       \
  case DM_##DT: ((T *)dst)[i] = (T)dm_cast_real_to_int(d, lo, hi); break;
static void store_real(dm_dtype t, void *dst, int64_t i0, int64_t n, const double *in) {
  for (int64_t j = 0; j < n; j++) {
    int64_t i = i0 + j;
    double d = in[j];
    switch (t) {
    case DM_FLOAT: ((float *)dst)[i] = (float)d; break;
    case DM_DOUBLE: ((double *)dst)[i] = d; break;
    case DM_FLOAT16: ((uint16_t *)dst)[i] = dm_double_to_half(d); break;
    case DM_BFLOAT16: ((uint16_t *)dst)[i] = dm_double_to_bf16(d); break;
    case DM_BOOL: ((uint8_t *)dst)[i] = d != 0; break;
    DM_CAST_NARROW_INTS(STORE_REAL_)
    case DM_INT64: ((int64_t *)dst)[i] = dm_cast_real_to_int64(d); break;
    default: break;
    }
  }
}

/* Narrowing wraps: the unsigned conversion is defined, the signed one is modular on every
 * compiler we build with. */
#define STORE_INT_(DT, T, U, lo, hi)                                                        \
  case DM_##DT: ((T *)dst)[i] = (T)(U)v; break;
static void store_int(dm_dtype t, void *dst, int64_t i0, int64_t n, const int64_t *in) {
  for (int64_t j = 0; j < n; j++) {
    int64_t i = i0 + j, v = in[j];
    switch (t) {
    case DM_FLOAT: ((float *)dst)[i] = (float)v; break; /* one rounding from int64 */
    case DM_DOUBLE: ((double *)dst)[i] = (double)v; break;
    case DM_FLOAT16: ((uint16_t *)dst)[i] = dm_double_to_half(dm_cast_int_to_double_odd(v)); break;
    case DM_BFLOAT16: ((uint16_t *)dst)[i] = dm_double_to_bf16(dm_cast_int_to_double_odd(v)); break;
    case DM_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
    DM_CAST_NARROW_INTS(STORE_INT_)
    case DM_INT64: ((int64_t *)dst)[i] = v; break;
    default: break;
    }
  }
}

/* Converts all of x into y (already sized, dtype `to`). Elements are read block by block
 * before they are written, so y may share x's storage when the sizes match. */
static void convert(const dm_tensor *x, dm_tensor *y, dm_dtype to) {
  const void *src = dm_tensor_data(x);
  void *dst = dm_tensor_mutable_data(y);
  int64_t n = x->numel;
  if (x->dtype == to) {
    if (src != dst)
      memmove(dst, src, (size_t)n * dm_dtype_size(to));
    return;
  }
  if (x->dtype == DM_FLOAT && to == DM_FLOAT16 && src != dst) {
    dm_float_to_half_array(src, dst, (size_t)n);
    return;
  }
  if (x->dtype == DM_FLOAT16 && to == DM_FLOAT && src != dst) {
    dm_half_to_float_array(src, dst, (size_t)n);
    return;
  }
  if (x->dtype == DM_FLOAT && to == DM_BFLOAT16 && src != dst) {
    dm_float_to_bf16_array(src, dst, (size_t)n);
    return;
  }
  if (x->dtype == DM_BFLOAT16 && to == DM_FLOAT && src != dst) {
    dm_bf16_to_float_array(src, dst, (size_t)n);
    return;
  }
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    if (is_floating(x->dtype)) {
      double buf[BLOCK];
      load_real(x->dtype, src, i0, m, buf);
      store_real(to, dst, i0, m, buf);
    } else {
      int64_t buf[BLOCK];
      load_int(x->dtype, src, i0, m, buf);
      store_int(to, dst, i0, m, buf);
    }
  }
}

/* Casts x into y; when they share storage but the element size changes, the result is
 * built aside first (a resize would free what is still to be read). */
static dm_status cast_to(dm_op_ctx *ctx, dm_dtype to) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (!is_numeric(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "cannot cast X of type %s (numeric types only)",
                       dm_dtype_name(x->dtype));
  if (dm_tensors_alias(y, x) && dm_dtype_size(to) != dm_dtype_size(x->dtype)) {
    dm_tensor *tmp = dm_tensor_new(y->limit);
    if (!tmp)
      return DM_NOMEM("a cast result");
    dm_status s = dm_tensor_resize(tmp, to, x->ndim, x->dims);
    if (s == DM_OK) {
      convert(x, tmp, to);
      dm_tensor_share(y, tmp);
    }
    dm_tensor_free(tmp);
    return s;
  }
  DM_TRY(dm_tensor_resize(y, to, x->ndim, x->dims));
  convert(x, y, to);
  return DM_OK;
}

/* ---- inference ----------------------------------------------------------------- */

/* Declares Y as X's shape in dtype `to`. In place with a different element size the
 * kernel resizes after converting (the old bytes are still to be read). */
static dm_status declare_cast(dm_op_ctx *ctx, const dm_tensor *x, dm_dtype to) {
  if (!is_numeric(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "cannot cast X of type %s (numeric types only)",
                       dm_dtype_name(x->dtype));
  dm_tensor *y = dm_op_output(ctx, 0);
  if (!dm_op_shape_only(ctx) && dm_tensors_alias(y, x) &&
      dm_dtype_size(to) != dm_dtype_size(x->dtype))
    return DM_OK;
  return dm_op_set_output(ctx, 0, to, x->ndim, x->dims);
}

static dm_status float_to_half_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (x->dtype != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; FloatToHalf takes FLOAT",
                       dm_dtype_name(x->dtype));
  return declare_cast(ctx, x, DM_FLOAT16);
}

static dm_status half_to_float_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (x->dtype != DM_FLOAT16)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; HalfToFloat takes FLOAT16",
                       dm_dtype_name(x->dtype));
  return declare_cast(ctx, x, DM_FLOAT);
}

/* `to` as a DataType number or name. */
static dm_status cast_target(dm_op_ctx *ctx, dm_dtype *out) {
  dm_dtype to;
  const char *name = dm_op_arg_string(ctx, "to", NULL);
  if (name) {
    if (dm_dtype_from_name(name, &to) != DM_OK)
      return dm_op_error(ctx, DM_ERR_TYPE, "unknown 'to' data type '%s'", name);
  } else if (dm_op_has_arg(ctx, "to") && dm_op_arg_int(ctx, "to", -1) >= 0) {
    int64_t v = dm_op_arg_int(ctx, "to", -1);
    if (v > 1000 || !dm_dtype_is_valid((int)v))
      return dm_op_error(ctx, DM_ERR_TYPE, "unknown 'to' data type %lld", (long long)v);
    to = (dm_dtype)v == DM_BYTE ? DM_UINT8 : (dm_dtype)v;
  } else {
    return dm_op_error(ctx, DM_ERR_TYPE, "'to' must be a DataType number or name");
  }
  if (!is_numeric(to))
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "cannot cast to %s (numeric types only)",
                       dm_dtype_name(to));
  *out = to;
  return DM_OK;
}

static dm_status cast_infer(dm_op_ctx *ctx) {
  dm_dtype to;
  DM_TRY(cast_target(ctx, &to));
  return declare_cast(ctx, dm_op_input(ctx, 0), to);
}

static dm_status cast_like_infer(dm_op_ctx *ctx) {
  const dm_tensor *like = dm_op_input(ctx, 1);
  if (!is_numeric(like->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "cannot cast to %s (numeric types only)",
                       dm_dtype_name(like->dtype));
  return declare_cast(ctx, dm_op_input(ctx, 0), like->dtype);
}

static dm_status copy_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

/* One conversion per element. */
static void cast_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = (double)dm_op_output(ctx, 0)->numel;
}

static void copy_cost(dm_op_ctx *ctx, dm_op_cost *c) { dm_cost_io(ctx, c); }

/* ---- gradient makers ------------------------------------------------------------- */

static dm_status emit1(dm_grad_ctx *g, const char *type, int with_x) {
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_input(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  DM_TRY(dm_grad_emit(g, type, with_x ? 2 : 1, in, 1, out));
  dm_grad_clear_args(g);
  return DM_OK;
}

static dm_status float_to_half_gradient(dm_grad_ctx *g) { return emit1(g, "HalfToFloat", 0); }
static dm_status half_to_float_gradient(dm_grad_ctx *g) { return emit1(g, "FloatToHalf", 0); }
static dm_status cast_gradient(dm_grad_ctx *g) { return emit1(g, "CastLike", 1); }
static dm_status copy_gradient(dm_grad_ctx *g) { return emit1(g, "Copy", 0); }

/* ---- kernels ------------------------------------------------------------------- */

static dm_status float_to_half_run(dm_op_ctx *ctx) {
  DM_TRY(float_to_half_infer(ctx));
  return cast_to(ctx, DM_FLOAT16);
}

static dm_status half_to_float_run(dm_op_ctx *ctx) {
  DM_TRY(half_to_float_infer(ctx));
  return cast_to(ctx, DM_FLOAT);
}

dm_status dm_cast_init(dm_op_ctx *ctx, void **state) {
  dm_dtype to;
  DM_TRY(cast_target(ctx, &to));
  *state = (void *)(intptr_t)to;
  return DM_OK;
}

static dm_status cast_run(dm_op_ctx *ctx) {
  dm_dtype to = (dm_dtype)(intptr_t)dm_op_state(ctx);
  DM_TRY(declare_cast(ctx, dm_op_input(ctx, 0), to));
  return cast_to(ctx, to);
}

static dm_status cast_like_run(dm_op_ctx *ctx) {
  DM_TRY(cast_like_infer(ctx));
  return cast_to(ctx, dm_op_input(ctx, 1)->dtype);
}

static dm_status copy_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_tensors_alias(y, x)) /* a view of X: make Y its own copy */
    dm_tensor_reset(y);
  DM_TRY(copy_infer(ctx));
  return dm_tensor_copy(y, x);
}

static const dm_op_schema *const schemas[] = {&float_to_half_schema, &half_to_float_schema,
                                              &cast_schema, &cast_like_schema,
                                              &copy_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "FloatToHalf", .device = DM_CPU, .run = float_to_half_run},
    {.type = "HalfToFloat", .device = DM_CPU, .run = half_to_float_run},
    {.type = "Cast", .device = DM_CPU, .init = dm_cast_init, .run = cast_run},
    {.type = "CastLike", .device = DM_CPU, .run = cast_like_run},
    {.type = "Copy", .device = DM_CPU, .run = copy_run},
    {0},
};
const dm_op_family dm_family_cast = {schemas, kernels};
