/* nary_math.c: Pow, Max, Min and Mean, elementwise over inputs broadcast numpy's way
 * (broadcast.h); FLOAT, FLOAT16, BFLOAT16 and DOUBLE, and for Max and Min the integers
 * up to 32 bits too (each exact in double, and Max/Min return one of their inputs).
 *
 * Pow: X [, E] -> Y = X ^ E, with E either the `exponent` argument (Caffe2's form) or a
 * second input of any numeric dtype (ONNX lets the exponent's type differ from the
 * base's). Max, Min: N inputs, NaN propagated (numpy's maximum/minimum). Mean: the sum
 * of N inputs in double over N, rounded once. Each output element is computed in double
 * from the widened inputs and rounded once into Y's dtype (X0's).
 *
 * The output is walked in rows of its last dim, in blocks; every input's block is read
 * before the block of Y is written, so Y may be an input of Y's shape.
 *
 * MaxGradient, MinGradient (Caffe2's): Y, dY, X0, X1, ... -> dX0, dX1, ...: dXi = dY
 * where Xi equals Y (every tied input alike), else 0. An input the forward broadcast
 * would need its gradient summed back: refused at run time, saying so. Mean's gradient
 * is made of existing ops: dXi = SumReduceLike(Scale(dY, 1/N), Xi) (numpy's rule, so a
 * broadcast input gets its sum). Pow has no gradient.
 */
#include <math.h>
#include <string.h>

#include "dm_config.h"

#include "broadcast.h"
#include "builtin.h"
#include "common.h"

#define BLOCK 256

typedef enum nary_kind { N_POW, N_MAX, N_MIN, N_MEAN } nary_kind;

static nary_kind kind_of(dm_op_ctx *ctx) {
  const char *t = dm_op_type(ctx);
  return t[0] == 'P' ? N_POW : strcmp(t, "Max") == 0 ? N_MAX : strcmp(t, "Min") == 0 ? N_MIN
                                                                                    : N_MEAN;
}

/* Element i of a numeric tensor's data, as a double. */
static inline double load_elem(dm_dtype t, const void *p, int64_t i) {
  switch (t) {
  case DM_FLOAT: return ((const float *)p)[i];
  case DM_DOUBLE: return ((const double *)p)[i];
  case DM_FLOAT16:
  case DM_BFLOAT16: return dm_reduced_to_float(t, ((const uint16_t *)p)[i]);
  case DM_INT32: return ((const int32_t *)p)[i];
  case DM_INT64: return (double)((const int64_t *)p)[i];
  case DM_INT16: return ((const int16_t *)p)[i];
  case DM_UINT16: return ((const uint16_t *)p)[i];
  case DM_INT8: return ((const int8_t *)p)[i];
  case DM_UINT8: return ((const uint8_t *)p)[i];
  default: return 0;
  }
}

/* v (exact in t for the integers: Max and Min return an input) into element i. */
static inline void store_elem(dm_dtype t, void *p, int64_t i, double v) {
  switch (t) {
  case DM_FLOAT: ((float *)p)[i] = (float)v; break;
  case DM_DOUBLE: ((double *)p)[i] = v; break;
  case DM_FLOAT16:
  case DM_BFLOAT16: ((uint16_t *)p)[i] = dm_double_to_reduced(t, v); break; /* once */
  case DM_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
  case DM_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
  case DM_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
  case DM_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
  case DM_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  default: break;
  }
}

/* The dtypes of X0 (and Y): floats for all, and the integers exact in double for Max
 * and Min (INT64 is not: a value past 2^53 would come back changed). */
static int dtype_ok(nary_kind k, dm_dtype t) {
  if (dm_is_float_or_reduced(t) || t == DM_DOUBLE)
    return 1;
  return (k == N_MAX || k == N_MIN) && (t == DM_INT32 || t == DM_INT16 || t == DM_UINT16 ||
                                        t == DM_INT8 || t == DM_UINT8);
}

static int exponent_dtype_ok(dm_dtype t) {
  return dm_is_float_or_reduced(t) || t == DM_DOUBLE || t == DM_INT32 || t == DM_INT64;
}

static dm_status nary_infer(dm_op_ctx *ctx) {
  const int nin = dm_op_num_inputs(ctx);
  const nary_kind k = kind_of(ctx);
  const dm_tensor *in[64];
  if (nin > (int)(sizeof in / sizeof in[0]))
    return dm_op_error(ctx, DM_ERR_INVALID, "%d inputs; %s takes at most %d", nin,
                       dm_op_type(ctx), (int)(sizeof in / sizeof in[0]));
  const dm_dtype t = dm_op_input(ctx, 0)->dtype;
  if (!dtype_ok(k, t))
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s: unsupported dtype; %s takes FLOAT, FLOAT16, "
                       "BFLOAT16, DOUBLE%s", k == N_POW ? "X" : "X0", dm_dtype_name(t),
                       dm_op_type(ctx),
                       k == N_MAX || k == N_MIN ? " and integers up to 32 bits" : "");
  for (int i = 0; i < nin; i++) {
    in[i] = dm_op_input(ctx, i);
    if (k == N_POW && i == 1) {
      if (!exponent_dtype_ok(in[1]->dtype))
        return dm_op_error(ctx, DM_ERR_TYPE,
                           "E is %s: unsupported dtype for the exponent (FLOAT, FLOAT16, "
                           "BFLOAT16, DOUBLE, INT32 or INT64)",
                           dm_dtype_name(in[1]->dtype));
    } else if (in[i]->dtype != t) {
      return dm_op_error(ctx, DM_ERR_TYPE, "X%d is %s but X0 is %s; expected the same dtype",
                         i, dm_dtype_name(in[i]->dtype), dm_dtype_name(t));
    }
  }
  if (k == N_POW && nin == 1 && !dm_op_has_arg(ctx, "exponent"))
    return dm_op_error(ctx, DM_ERR_INVALID, "Pow needs the `exponent` argument or a 2nd input E");
  if (k == N_POW && nin == 2 && dm_op_has_arg(ctx, "exponent"))
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "Pow takes the `exponent` argument or a 2nd input E, not both");
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  static const char *const pow_slots[] = {"X", "E"};
  DM_TRY(dm_bcast_numpy_output_shape(ctx, nin, in, k == N_POW ? pow_slots : NULL, &ndim, dims));
  return dm_op_set_output(ctx, 0, t, ndim, dims);
}

static inline double combine(nary_kind k, double acc, double v) {
  switch (k) {
  case N_POW: return pow(acc, v);
  case N_MAX: return acc != acc || v != v ? NAN : acc > v ? acc : v;
  case N_MIN: return acc != acc || v != v ? NAN : acc < v ? acc : v;
  case N_MEAN: return acc + v;
  }
  return acc;
}

static dm_status nary_run(dm_op_ctx *ctx) {
  DM_TRY(nary_infer(ctx));
  const int nin = dm_op_num_inputs(ctx);
  const nary_kind k = kind_of(ctx);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (y->numel == 0)
    return DM_OK;
  const int nd = y->ndim > 0 ? y->ndim : 1;
  int64_t dims[DM_MAX_DIMS] = {1};
  for (int d = 0; d < y->ndim; d++)
    dims[d] = y->dims[d];
  int64_t strides[64][DM_MAX_DIMS];
  for (int i = 0; i < nin; i++)
    dm_bcast_numpy_strides(dm_op_input(ctx, i), nd, dims, strides[i]);
  const double expo = dm_op_arg_float(ctx, "exponent", 1.0f);
  const int64_t len = dims[nd - 1], rows = y->numel / len;
  const dm_dtype t = y->dtype;
  void *py = dm_tensor_mutable_data(y);
#if DM_HAVE_OPENMP
#pragma omp parallel for if (y->numel > (1 << 15))
#endif
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
      double acc[BLOCK];
      const int64_t m = len - j0 < BLOCK ? len - j0 : BLOCK;
      for (int i = 0; i < nin; i++) {
        const dm_tensor *x = dm_op_input(ctx, i);
        const void *px = dm_tensor_data(x);
        const int64_t off = dm_bcast_row_offset(nd, dims, strides[i], r);
        const int64_t step = strides[i][nd - 1];
        for (int64_t j = 0; j < m; j++) {
          double v = load_elem(x->dtype, px, off + (j0 + j) * step);
          acc[j] = i == 0 ? v : combine(k, acc[j], v);
        }
      }
      if (k == N_POW && nin == 1)
        for (int64_t j = 0; j < m; j++)
          acc[j] = pow(acc[j], expo);
      if (k == N_MEAN)
        for (int64_t j = 0; j < m; j++)
          acc[j] /= nin;
      for (int64_t j = 0; j < m; j++)
        store_elem(t, py, r * len + j0 + j, acc[j]);
    }
  }
  return DM_OK;
}

/* ---- MaxGradient, MinGradient -------------------------------------------------------- */

static dm_status select_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  const int n = dm_op_num_inputs(ctx) - 2;
  char a[96], b[96];
  if (!dm_is_float_or_reduced(y->dtype) && y->dtype != DM_DOUBLE)
    return dm_op_error(ctx, DM_ERR_TYPE, "Y is %s: unsupported dtype; %s takes FLOAT, FLOAT16, "
                       "BFLOAT16 or DOUBLE", dm_dtype_name(y->dtype), dm_op_type(ctx));
  if (dm_op_num_outputs(ctx) != n)
    return dm_op_error(ctx, DM_ERR_INVALID, "%d outputs for %d inputs X; expected one each",
                       dm_op_num_outputs(ctx), n);
  for (int i = -1; i < n; i++) {
    const dm_tensor *t = i < 0 ? dy : dm_op_input(ctx, 2 + i);
    if (t->dtype != y->dtype || !dm_tensor_same_shape(t, y))
      return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                         "input %d is %s %s but Y is %s %s: the gradient runs inputs of Y's "
                         "shape and dtype only (a broadcast input's would need summing)",
                         i < 0 ? 1 : 2 + i, dm_dtype_name(t->dtype), dm_shape_str(t, a, sizeof a),
                         dm_dtype_name(y->dtype), dm_shape_str(y, b, sizeof b));
  }
  for (int i = 0; i < n; i++) {
    dm_tensor *o = dm_op_output(ctx, i);
    for (int j = 0; j < n + 2; j++)
      if (o == dm_op_input(ctx, j))
        return dm_op_error(ctx, DM_ERR_INVALID, "output %d is input %d's blob", i, j);
    DM_TRY(dm_op_set_output(ctx, i, y->dtype, y->ndim, y->dims));
  }
  return DM_OK;
}

static dm_status select_grad_run(dm_op_ctx *ctx) {
  DM_TRY(select_grad_infer(ctx));
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  const int n = dm_op_num_inputs(ctx) - 2;
  const dm_dtype t = y->dtype;
  for (int i = 0; i < n; i++) {
    const void *px = dm_tensor_data(dm_op_input(ctx, 2 + i));
    void *pd = dm_tensor_mutable_data(dm_op_output(ctx, i));
    for (int64_t j = 0; j < y->numel; j++) {
      double yv = load_elem(t, dm_tensor_data(y), j);
      store_elem(t, pd, j, load_elem(t, px, j) == yv ? load_elem(t, dm_tensor_data(dy), j) : 0.0);
    }
  }
  return DM_OK;
}

/* Y, dY, X0, X1, ... -> dX0, dX1, ... (the inputs whose gradient is not needed get one
 * all the same: the op writes every slot). */
static dm_status select_gradient(dm_grad_ctx *g, const char *type) {
  const int n = dm_grad_num_inputs(g);
  const char *in[66], *out[64];
  if (n > 64)
    return dm_error(DM_ERR_INVALID, "%s of %d inputs; at most 64", type, n);
  in[0] = dm_grad_output(g, 0), in[1] = dm_grad_output_grad(g, 0);
  for (int i = 0; i < n; i++)
    in[2 + i] = dm_grad_input(g, i), out[i] = dm_grad_input_grad(g, i);
  return dm_grad_emit(g, type, n + 2, in, n, out);
}
static dm_status max_gradient(dm_grad_ctx *g) { return select_gradient(g, "MaxGradient"); }

static dm_status mean_gradient(dm_grad_ctx *g) {
  const int n = dm_grad_num_inputs(g);
  for (int i = 0; i < n; i++) {
    if (!dm_grad_input_needed(g, i))
      continue;
    const char *dx = dm_grad_input_grad(g, i);
    const char *in1[] = {dm_grad_output_grad(g, 0)}, *out[] = {dx};
    DM_TRY(dm_grad_emit(g, "Scale", 1, in1, 1, out));
    dm_grad_clear_args(g);
    DM_TRY(dm_grad_set_arg_float(g, "scale", 1.0f / (float)n));
    const char *in2[] = {dx, dm_grad_input(g, i)};
    DM_TRY(dm_grad_emit(g, "SumReduceLike", 2, in2, 1, out)); /* in place, no axis */
    dm_grad_clear_args(g);
  }
  return DM_OK;
}
static dm_status min_gradient(dm_grad_ctx *g) { return select_gradient(g, "MinGradient"); }

static void nary_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = (double)dm_op_output(ctx, 0)->numel * dm_op_num_inputs(ctx);
}

static const dm_arg_spec pow_args[] = {
    {"exponent", DM_ARG_FLOAT, 0, "the exponent, when there is no input E"},
    {NULL, 0, 0, NULL},
};
static const dm_inplace_pair nary_inplace[] = {{0, 0}, {1, 0}, {-1, -1}};
/* Not on E's blob: E may have another dtype. */
static const dm_inplace_pair pow_inplace[] = {{0, 0}, {-1, -1}};

static const dm_op_schema pow_schema = {
    .type = "Pow", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .args = pow_args, .inplace = pow_inplace, .precision = DM_PREC_FOLLOW,
    .doc = "X, [E] -> Y = X ^ E (E: the `exponent` argument, or an input of any numeric "
           "dtype broadcast with X numpy's way); X FLOAT, FLOAT16, BFLOAT16 or DOUBLE.",
    .infer = nary_infer, .cost = nary_cost,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1};

#define NARY_SCHEMA(var, name, grad, docstr)                                                \
  static const dm_op_schema var##_schema = {                                                \
      .type = name, .min_inputs = 1, .max_inputs = 64, .min_outputs = 1, .max_outputs = 1,  \
      .inplace = nary_inplace, .precision = DM_PREC_FOLLOW, .doc = docstr,                  \
      .infer = nary_infer, .cost = nary_cost, .gradient = grad,                             \
      .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = UINT64_MAX, .layout_outputs = 0x1}
#define SELECT_GRAD_SCHEMA(var, name, docstr)                                               \
  static const dm_op_schema var##_schema = {                                                \
      .type = name, .min_inputs = 3, .max_inputs = 66, .min_outputs = 1, .max_outputs = 64, \
      .precision = DM_PREC_FOLLOW, .doc = docstr, .infer = select_grad_infer,               \
      .cost = nary_cost, .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = UINT64_MAX,      \
      .layout_outputs = UINT64_MAX}

NARY_SCHEMA(max, "Max", max_gradient,
            "X0, X1, ... -> Y = elementwise max (numpy broadcast, NaN propagated; floats, "
            "integers up to 32 bits).");
NARY_SCHEMA(min, "Min", min_gradient,
            "X0, X1, ... -> Y = elementwise min (numpy broadcast, NaN propagated; floats, "
            "integers up to 32 bits).");
NARY_SCHEMA(mean, "Mean", mean_gradient, "X0, X1, ... -> Y = elementwise mean (numpy broadcast).");

SELECT_GRAD_SCHEMA(max_grad, "MaxGradient",
                   "Y, dY, X0, X1, ... -> dX0, dX1, ...: dXi = dY where Xi == Y, else 0 (inputs "
                   "of Y's shape).");
SELECT_GRAD_SCHEMA(min_grad, "MinGradient",
                   "Y, dY, X0, X1, ... -> dX0, dX1, ...: dXi = dY where Xi == Y, else 0 (inputs "
                   "of Y's shape).");

static const dm_op_schema *const schemas[] = {&pow_schema,  &max_schema,      &min_schema,
                                              &mean_schema, &max_grad_schema, &min_grad_schema,
                                              NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Pow", .device = DM_CPU, .run = nary_run},
    {.type = "Max", .device = DM_CPU, .run = nary_run},
    {.type = "Min", .device = DM_CPU, .run = nary_run},
    {.type = "Mean", .device = DM_CPU, .run = nary_run},
    {.type = "MaxGradient", .device = DM_CPU, .run = select_grad_run},
    {.type = "MinGradient", .device = DM_CPU, .run = select_grad_run},
    {0},
};
const dm_op_family dm_family_nary_math = {schemas, kernels};
