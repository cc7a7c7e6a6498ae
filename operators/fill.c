/* fill.c: ConstantFill and the GivenTensor*Fill family.
 *
 * The output shape follows Caffe2's FillerOp: with no input it is `shape`; with an input
 * X it is X's shape, or X's values when `input_as_shape` is set (X then 1-D integer),
 * followed by `extra_shape`. Giving both `shape` and an input is an error, as are
 * `extra_shape` or `input_as_shape` without an input. ConstantFill's `dtype` defaults to
 * FLOAT, or to INT64/STRING when only an integer/string `value` is given (as in Caffe2).
 * Argument errors that do not depend on inputs are found at instantiation; the rest in
 * `infer`, which the kernels call first. Fills pass no gradient back (no_gradient).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/half.h"
#include "builtin.h"

/* ---- shape ---------------------------------------------------------------------- */

const char *dm_fill_reads_input_values(const dm_op_ctx *ctx) {
  if (dm_op_num_inputs(ctx) > 0 && dm_op_arg_int(ctx, "input_as_shape", 0))
    return "input_as_shape reads its input's values on the host";
  return NULL;
}

/* Instantiation-time checks of the shape arguments. */
dm_status dm_fill_check_shape_args(dm_op_ctx *ctx, int shape_required) {
  size_t n;
  if (dm_op_num_inputs(ctx) > 0) {
    if (dm_op_has_arg(ctx, "shape"))
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "cannot set the 'shape' argument and pass in an input at the same time");
    return DM_OK;
  }
  if (dm_op_arg_ints(ctx, "extra_shape", &n) && n > 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "'extra_shape' needs an input to extend");
  if (dm_op_arg_int(ctx, "input_as_shape", 0))
    return dm_op_error(ctx, DM_ERR_INVALID, "'input_as_shape' is set but there is no input");
  if (shape_required && !dm_op_has_arg(ctx, "shape"))
    return dm_op_error(ctx, DM_ERR_INVALID, "'shape' is required when there is no input");
  const int64_t *dims = dm_op_arg_ints(ctx, "shape", &n);
  if (n > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_SHAPE, "'shape' has %zu dims (at most %d)", n, DM_MAX_DIMS);
  for (size_t i = 0; i < n; i++)
    if (dims[i] < 0)
      return dm_op_error(ctx, DM_ERR_SHAPE, "'shape' dim %zu is negative (%lld)", i,
                         (long long)dims[i]);
  return DM_OK;
}

/* The output shape, per run (the input may change between runs). */
dm_status dm_fill_shape(dm_op_ctx *ctx, int *ndim, int64_t *dims) {
  size_t n = 0;
  const int64_t *d;
  int k = 0;
  if (dm_op_num_inputs(ctx) == 0) {
    d = dm_op_arg_ints(ctx, "shape", &n);
    for (size_t i = 0; i < n; i++)
      dims[k++] = d[i];
    *ndim = k;
    return DM_OK;
  }
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (dm_op_arg_int(ctx, "input_as_shape", 0)) {
    DM_TRY(dm_op_need_values(ctx, 0, "input_as_shape"));
    if (x->ndim != 1 || (x->dtype != DM_INT64 && x->dtype != DM_INT32))
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "with input_as_shape the input must be a 1-D INT64 (or INT32) "
                         "tensor, but it is %d-d %s",
                         x->ndim, dm_dtype_name(x->dtype));
    if (x->numel > DM_MAX_DIMS)
      return dm_op_error(ctx, DM_ERR_SHAPE, "the shape input has %lld dims (at most %d)",
                         (long long)x->numel, DM_MAX_DIMS);
    for (int64_t i = 0; i < x->numel; i++)
      dims[k++] = x->dtype == DM_INT64 ? ((const int64_t *)dm_tensor_data(x))[i]
                                       : ((const int32_t *)dm_tensor_data(x))[i];
  } else {
    for (int i = 0; i < x->ndim; i++)
      dims[k++] = x->dims[i];
  }
  d = dm_op_arg_ints(ctx, "extra_shape", &n);
  if ((size_t)k + n > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_SHAPE, "the shape with extra_shape has %zu dims (at most %d)",
                       (size_t)k + n, DM_MAX_DIMS);
  for (size_t i = 0; i < n; i++)
    dims[k++] = d[i];
  *ndim = k;
  return DM_OK;
}

dm_status dm_fill_set_output(dm_op_ctx *ctx, dm_dtype dtype, dm_tensor **out) {
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dm_fill_shape(ctx, &ndim, dims));
  dm_tensor *y = dm_op_output(ctx, 0);
  if (!dm_op_shape_only(ctx) && dm_op_num_inputs(ctx) > 0 && dm_tensors_alias(y, dm_op_input(ctx, 0)))
    dm_tensor_reset(y); /* Y replaces X in its blob (or a view of it): do not write into X */
  DM_TRY(dm_op_set_output(ctx, 0, dtype, ndim, dims));
  *out = y;
  return DM_OK;
}

/* Whether argument `name` holds an int (i): the public API has no direct query, but an
 * absent i is the only case where two different defaults come back. */
int dm_op_arg_is_int(const dm_op_ctx *ctx, const char *name) {
  return dm_op_arg_int(ctx, name, 0) == dm_op_arg_int(ctx, name, 1);
}

/* ---- ConstantFill ------------------------------------------------------------------ */

static dm_status constant_fill_infer(dm_op_ctx *ctx);
static void fill_cost(dm_op_ctx *ctx, dm_op_cost *c);

static const dm_arg_spec constant_fill_args[] = {
    DM_FILL_SHAPE_ARGS,
    {"value", DM_ARG_ANY, 0, "the fill value (float, int or string; default 0)"},
    {"dtype", DM_ARG_ANY, 0, "output DataType (number or name); default from value, else FLOAT"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema constant_fill_schema = {
    .type = "ConstantFill", .min_inputs = 0, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .args = constant_fill_args, .precision = DM_PREC_NONE,
    .doc = "[X] -> Y filled with `value`, of shape `shape` (or X's, see input_as_shape).",
    .infer = constant_fill_infer, .cost = fill_cost, .no_gradient = 1};

dm_status dm_constant_fill_dtype(dm_op_ctx *ctx, dm_dtype *out) {
  dm_dtype dflt = DM_FLOAT;
  if (dm_op_arg_string(ctx, "value", NULL))
    dflt = DM_STRING;
  else if (dm_op_has_arg(ctx, "value") && dm_op_arg_is_int(ctx, "value"))
    dflt = DM_INT64;
  dm_dtype t;
  DM_TRY(dm_op_dtype_arg(ctx, "dtype", dflt, &t));
  if ((t == DM_STRING) != (dm_op_arg_string(ctx, "value", NULL) != NULL) &&
      dm_op_has_arg(ctx, "value"))
    return dm_op_error(ctx, DM_ERR_TYPE, "'value' is %s but dtype is %s",
                       t == DM_STRING ? "a number" : "a string", dm_dtype_name(t));
  *out = t;
  return DM_OK;
}

dm_status dm_constant_fill_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  DM_TRY(dm_fill_check_shape_args(ctx, 0));
  dm_dtype t;
  return dm_constant_fill_dtype(ctx, &t);
}

static dm_status constant_fill_infer(dm_op_ctx *ctx) {
  dm_dtype t;
  dm_tensor *y;
  DM_TRY(dm_constant_fill_dtype(ctx, &t));
  return dm_fill_set_output(ctx, t, &y);
}

/* Fills write every output element once. */
static void fill_cost(dm_op_ctx *ctx, dm_op_cost *c) { dm_cost_io(ctx, c); }

static dm_status constant_fill_run(dm_op_ctx *ctx) {
  DM_TRY(constant_fill_infer(ctx));
  dm_tensor *y = dm_op_output(ctx, 0);
  dm_dtype t = y->dtype;
  int64_t n = y->numel;
  void *p = dm_tensor_mutable_data(y);
  if (t == DM_STRING) {
    const char *v = dm_op_arg_string(ctx, "value", "");
    char **s = p;
    for (int64_t i = 0; i < n; i++) {
      free(s[i]);
      if (!(s[i] = strdup(v)))
        return DM_NOMEM("a string element");
    }
    return DM_OK;
  }
  uint64_t bits;
  DM_TRY(dm_constant_fill_bits(ctx, t, "", &bits));
  switch (dm_dtype_size(t)) {
#define FILL(T)                   \
  for (int64_t i = 0; i < n; i++) \
    ((T *)p)[i] = (T)bits;        \
  break
  case 1: FILL(uint8_t);
  case 2: FILL(uint16_t);
  case 4: FILL(uint32_t);
  default: FILL(uint64_t); /* 8: the bits of a numeric dtype fit the element */
#undef FILL
  }
  return DM_OK;
}

dm_status dm_constant_fill_bits(dm_op_ctx *ctx, dm_dtype t, const char *where, uint64_t *bits) {
  int is_int = dm_op_has_arg(ctx, "value") && dm_op_arg_is_int(ctx, "value");
  int64_t iv = dm_op_arg_int(ctx, "value", 0);
  double dv = is_int ? (double)iv : (double)dm_op_arg_float(ctx, "value", 0.0f);
  int floating = t == DM_FLOAT || t == DM_DOUBLE || t == DM_FLOAT16 || t == DM_BFLOAT16;
  if (!is_int && !floating && t != DM_BOOL && (dv != dv || dv >= 0x1p63 || dv < -0x1p63))
    return dm_op_error(ctx, DM_ERR_INVALID, "'value' %g does not fit %s", dv, dm_dtype_name(t));
  /* Integer targets take an int value exactly, a float one truncated toward zero. */
  int64_t ival = is_int || floating || t == DM_BOOL ? iv : (int64_t)dv;
  float f;
  uint32_t u32;
  switch (t) {
  case DM_FLOAT:
    f = (float)dv;
    memcpy(&u32, &f, sizeof u32);
    *bits = u32;
    break;
  case DM_DOUBLE: memcpy(bits, &dv, sizeof *bits); break;
  case DM_FLOAT16: *bits = dm_double_to_half(dv); break;
  case DM_BFLOAT16: *bits = dm_double_to_bf16(dv); break;
  case DM_BOOL: *bits = dv != 0; break;
  case DM_INT8: *bits = (uint8_t)(int8_t)ival; break;
  case DM_UINT8: *bits = (uint8_t)ival; break;
  case DM_INT16: *bits = (uint16_t)(int16_t)ival; break;
  case DM_UINT16: *bits = (uint16_t)ival; break;
  case DM_INT32: *bits = (uint32_t)(int32_t)ival; break;
  case DM_INT64: *bits = (uint64_t)ival; break;
  default:
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "cannot fill a %s tensor%s", dm_dtype_name(t),
                       where);
  }
  return DM_OK;
}

/* ---- GivenTensor*Fill ------------------------------------------------------------ */

typedef enum values_kind { V_FLOATS, V_INTS, V_STRINGS } values_kind;

typedef struct given_fill {
  const char *type;
  dm_dtype dtype;
  values_kind kind;
} given_fill;

static const given_fill given_fills[] = {
    {"GivenTensorFill", DM_FLOAT, V_FLOATS},    {"GivenTensorDoubleFill", DM_DOUBLE, V_FLOATS},
    {"GivenTensorIntFill", DM_INT32, V_INTS},   {"GivenTensorInt64Fill", DM_INT64, V_INTS},
    {"GivenTensorBoolFill", DM_BOOL, V_INTS},   {"GivenTensorStringFill", DM_STRING, V_STRINGS},
};
#define N_GIVEN (sizeof given_fills / sizeof given_fills[0])

static const given_fill *given_of(dm_op_ctx *ctx) {
  for (size_t i = 0; i < N_GIVEN; i++)
    if (strcmp(given_fills[i].type, dm_op_type(ctx)) == 0)
      return &given_fills[i];
  return NULL;
}

/* The count of `values` (floats may be written as ints in a hand-made net). */
static size_t values_count(dm_op_ctx *ctx, values_kind kind) {
  size_t n = 0;
  if (kind == V_STRINGS)
    dm_op_arg_strings(ctx, "values", &n);
  else if (kind == V_INTS || !dm_op_arg_floats(ctx, "values", &n) || n == 0)
    dm_op_arg_ints(ctx, "values", &n);
  return n;
}

static dm_status check_count(dm_op_ctx *ctx, size_t have, int ndim, const int64_t *dims) {
  int64_t need;
  DM_TRY(dm_shape_numel(ndim, dims, &need));
  if ((uint64_t)need == have)
    return DM_OK;
  char shape[128] = "scalar";
  size_t used = 0;
  for (int i = 0; i < ndim && used < sizeof shape; i++)
    used += (size_t)snprintf(shape + used, sizeof shape - used, i ? "x%lld" : "%lld",
                             (long long)dims[i]);
  return dm_op_error(ctx, DM_ERR_SHAPE, "'values' has %zu element%s, but shape %s needs %lld",
                     have, have == 1 ? "" : "s", shape, (long long)need);
}

static dm_status given_fill_init(dm_op_ctx *ctx, void **state) {
  const given_fill *g = given_of(ctx);
  if (!g)
    return dm_op_error(ctx, DM_ERR_INVALID, "no GivenTensor fill named '%s'", dm_op_type(ctx));
  DM_TRY(dm_fill_check_shape_args(ctx, 1));
  size_t n = values_count(ctx, g->kind);
  if (g->kind == V_INTS) {
    const int64_t *v = dm_op_arg_ints(ctx, "values", &n);
    for (size_t i = 0; g->dtype == DM_INT32 && i < n; i++)
      if (v[i] < INT32_MIN || v[i] > INT32_MAX)
        return dm_op_error(ctx, DM_ERR_INVALID, "values[%zu] = %lld does not fit INT32", i,
                           (long long)v[i]);
  }
  if (dm_op_num_inputs(ctx) == 0) { /* the shape is known now: check the count once */
    size_t nd;
    const int64_t *dims = dm_op_arg_ints(ctx, "shape", &nd);
    DM_TRY(check_count(ctx, n, (int)nd, dims));
  }
  *state = (void *)(intptr_t)(g - given_fills + 1);
  return DM_OK;
}

static dm_status given_fill_infer(dm_op_ctx *ctx) {
  const given_fill *g = given_of(ctx);
  if (!g)
    return dm_op_error(ctx, DM_ERR_INVALID, "no GivenTensor fill named '%s'", dm_op_type(ctx));
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dm_fill_shape(ctx, &ndim, dims));
  DM_TRY(check_count(ctx, values_count(ctx, g->kind), ndim, dims));
  dm_tensor *y;
  return dm_fill_set_output(ctx, g->dtype, &y);
}

static dm_status given_fill_run(dm_op_ctx *ctx) {
  const given_fill *g = &given_fills[(intptr_t)dm_op_state(ctx) - 1];
  size_t n = values_count(ctx, g->kind);
  DM_TRY(given_fill_infer(ctx));
  dm_tensor *y = dm_op_output(ctx, 0);
  void *p = dm_tensor_mutable_data(y);
  size_t nf = 0, ni = 0, ns = 0;
  const float *fv = dm_op_arg_floats(ctx, "values", &nf);
  const int64_t *iv = dm_op_arg_ints(ctx, "values", &ni);
  const char *const *sv = dm_op_arg_strings(ctx, "values", &ns);
  for (size_t i = 0; i < n; i++) {
    switch (g->dtype) {
    case DM_FLOAT: ((float *)p)[i] = nf ? fv[i] : (float)iv[i]; break;
    case DM_DOUBLE: ((double *)p)[i] = nf ? (double)fv[i] : (double)iv[i]; break;
    case DM_INT32: ((int32_t *)p)[i] = (int32_t)iv[i]; break; /* range checked at init */
    case DM_INT64: ((int64_t *)p)[i] = iv[i]; break;
    case DM_BOOL: ((uint8_t *)p)[i] = iv[i] != 0; break;
    default: { /* STRING */
      char **s = p;
      free(s[i]);
      if (!(s[i] = strdup(sv[i])))
        return DM_NOMEM("a string element");
    }
    }
  }
  return DM_OK;
}

#define GIVEN_SCHEMA(var, name, vtype, docstr)                                               \
  static const dm_arg_spec var##_args[] = {                                              \
      DM_FILL_SHAPE_ARGS, {"values", vtype, 1, "the values, row-major; count = shape product"}, \
      {NULL, 0, 0, NULL}};                                                               \
  static const dm_op_schema var##_schema = {                                             \
      .type = name, .min_inputs = 0, .max_inputs = 1, .min_outputs = 1,                  \
      .max_outputs = 1, .args = var##_args, .precision = DM_PREC_NONE, .doc = docstr,    \
      .infer = given_fill_infer, .cost = fill_cost, .no_gradient = 1}

GIVEN_SCHEMA(given_float, "GivenTensorFill", DM_ARG_FLOATS, "-> Y (FLOAT) from `values`.");
GIVEN_SCHEMA(given_double, "GivenTensorDoubleFill", DM_ARG_FLOATS,
             "-> Y (DOUBLE) from `values` (stored as floats, as Caffe2 does).");
GIVEN_SCHEMA(given_int, "GivenTensorIntFill", DM_ARG_INTS, "-> Y (INT32) from `values`.");
GIVEN_SCHEMA(given_int64, "GivenTensorInt64Fill", DM_ARG_INTS, "-> Y (INT64) from `values`.");
GIVEN_SCHEMA(given_bool, "GivenTensorBoolFill", DM_ARG_INTS, "-> Y (BOOL) from `values` (0/1).");
GIVEN_SCHEMA(given_string, "GivenTensorStringFill", DM_ARG_STRINGS,
             "-> Y (STRING) from `values`.");


static const dm_op_schema *const schemas[] = {
    &constant_fill_schema, &given_float_schema, &given_double_schema, &given_int_schema,
    &given_int64_schema,   &given_bool_schema,  &given_string_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
#define GIVEN_KERNEL(name) \
  {.type = name, .device = DM_CPU, .init = given_fill_init, .run = given_fill_run}
static const dm_kernel_def kernels[] = {
    {.type = "ConstantFill", .device = DM_CPU, .init = dm_constant_fill_init,
     .run = constant_fill_run},
    GIVEN_KERNEL("GivenTensorFill"),
    GIVEN_KERNEL("GivenTensorDoubleFill"),
    GIVEN_KERNEL("GivenTensorIntFill"),
    GIVEN_KERNEL("GivenTensorInt64Fill"),
    GIVEN_KERNEL("GivenTensorBoolFill"),
    GIVEN_KERNEL("GivenTensorStringFill"),
    {0},
};
const dm_op_family dm_family_fill = {schemas, kernels};
