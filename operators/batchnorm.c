/* batchnorm.c: SpatialBN (test and train mode) and SpatialBNGradient, NCHW and NHWC,
 * FP32 X/Y or FP16 X/Y with FP32 scale, bias and statistics.
 *
 * X is (N, C, spatial...) for NCHW or (N, spatial..., C) for NHWC; each channel is
 * normalised over its M = N * HW values. Per-channel sums (mean, the two-pass variance,
 * the gradient's reductions) are accumulated in double and every output element is
 * computed in double and rounded once to its dtype, so an FP16 Y or dX carries a
 * single FP16 rounding, as a tensor-core kernel with FP32 accumulation would.
 *
 * Running statistics: running = running * momentum + batch * (1 - momentum), where the
 * batch variance is the biased one (sum of squares / M), as Caffe2's CPU SpatialBN
 * does; cuDNN's training call instead folds in the unbiased M/(M-1) variance, so a GPU
 * backend built on it differs there by that factor. saved_mean and saved_inv_std are
 * the batch mean and 1/sqrt(biased var + epsilon), what the gradient needs.
 *
 * The gradient of a train-mode op (the usual case) uses the saved batch statistics;
 * that of an is_test op treats mean and var as constants (dX = dY * scale * inv_std)
 * and reads them from the forward's inputs 3 and 4.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "common.h"
#include "core/half.h"
#include "builtin.h"

static const dm_arg_spec bn_args[] = {
    {"is_test", DM_ARG_INT, 0, "1: normalise with the given mean and var (default 0)"},
    {"epsilon", DM_ARG_FLOAT, 0, "added to the variance (default 1e-5)"},
    {"momentum", DM_ARG_FLOAT, 0, "running = running * momentum + batch * (1 - momentum) "
                                  "(default 0.9)"},
    {"order", DM_ARG_STRING, 0, "NCHW (default) or NHWC"},
    {NULL, 0, 0, NULL},
};

/* X is N blocks of C channels x HW positions, laid out as `order` says. */
typedef struct bn_geom {
  int nhwc;
  int64_t N, C, HW, M; /* M = N * HW values per channel */
} bn_geom;

static inline int64_t bn_at(const bn_geom *g, int64_t n, int64_t c, int64_t hw) {
  return g->nhwc ? (n * g->HW + hw) * g->C + c : (n * g->C + c) * g->HW + hw;
}

static dm_status bn_geometry(dm_op_ctx *ctx, const dm_tensor *x, bn_geom *g) {
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  if (strcmp(order, "NCHW") != 0 && strcmp(order, "NHWC") != 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "order is '%s'; expected NCHW or NHWC", order);
  if (x->dtype != DM_FLOAT && x->dtype != DM_FLOAT16)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; %s takes FLOAT or FLOAT16",
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  char xs[96];
  if (x->ndim < 2)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s; expected at least 2 dims (N, C, ...)",
                       dm_shape_str(x, xs, sizeof xs));
  g->nhwc = order[1] == 'H';
  g->N = x->dims[0];
  g->C = g->nhwc ? x->dims[x->ndim - 1] : x->dims[1];
  g->HW = g->nhwc ? dm_dims_product(x, 1, x->ndim - 1) : dm_dims_product(x, 2, x->ndim);
  g->M = g->N * g->HW;
  return DM_OK;
}

/* A per-channel FP32 vector (scale, bias, mean, var, saved statistics). */
static dm_status bn_param(dm_op_ctx *ctx, const dm_tensor *t, const char *what, const bn_geom *g) {
  if (t->dtype != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; expected FLOAT (statistics and parameters "
                       "stay FP32 even for an FP16 X)", what, dm_dtype_name(t->dtype));
  if (t->numel != g->C)
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s has %lld elements but X has %lld channels (%s)",
                       what, (long long)t->numel, (long long)g->C, g->nhwc ? "NHWC" : "NCHW");
  return DM_OK;
}

static dm_status bn_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  bn_geom g;
  DM_TRY(bn_geometry(ctx, x, &g));
  static const char *const names[] = {"X", "scale", "bias", "mean", "var"};
  for (int i = 1; i < 5; i++)
    DM_TRY(bn_param(ctx, dm_op_input(ctx, i), names[i], &g));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0, nout = dm_op_num_outputs(ctx);
  if (is_test && nout != 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "is_test=1 takes 1 output (Y), not %d", nout);
  if (!is_test && nout != 5)
    return dm_op_error(ctx, DM_ERR_INVALID, "training (is_test=0) takes 5 outputs (Y, "
                       "running_mean, running_var, saved_mean, saved_inv_std), not %d", nout);
  float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  if (!(eps >= 0.0f) || isinf(eps))
    return dm_op_error(ctx, DM_ERR_INVALID, "epsilon is %g; it must be finite and >= 0",
                       (double)eps);
  if (!is_test && g.M == 0)
    return dm_op_error(ctx, DM_ERR_SHAPE, "training needs at least one value per channel; "
                       "X has none");
  DM_TRY(dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims));
  for (int o = 1; o < nout; o++)
    DM_TRY(dm_op_set_output(ctx, o, DM_FLOAT, 1, &g.C));
  return DM_OK;
}

/* X, scale, dY, saved_mean, saved_inv_std (or mean, var when is_test) -> dX, dscale, dbias. */
static dm_status bn_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  bn_geom g;
  DM_TRY(bn_geometry(ctx, x, &g));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  DM_TRY(bn_param(ctx, dm_op_input(ctx, 1), "scale", &g));
  DM_TRY(bn_param(ctx, dm_op_input(ctx, 3), is_test ? "mean" : "saved_mean", &g));
  DM_TRY(bn_param(ctx, dm_op_input(ctx, 4), is_test ? "var" : "saved_inv_std", &g));
  char xs[96], ds[96];
  if (dy->dtype != x->dtype || !dm_tensor_same_shape(x, dy))
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY is %s %s but X is %s %s; they must match",
                       dm_dtype_name(dy->dtype), dm_shape_str(dy, ds, sizeof ds),
                       dm_dtype_name(x->dtype), dm_shape_str(x, xs, sizeof xs));
  DM_TRY(dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims));
  DM_TRY(dm_op_set_output(ctx, 1, DM_FLOAT, 1, &g.C));
  return dm_op_set_output(ctx, 2, DM_FLOAT, 1, &g.C);
}

static void bn_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  double n = (double)x->numel, C = (double)dm_op_input(ctx, 1)->numel;
  int train = dm_op_arg_int(ctx, "is_test", 0) == 0;
  c->flops = (train ? 5 : 2) * n; /* statistics: sum, then squared deviations; apply: FMA */
  c->bytes_read = (train ? 2 : 1) * (double)dm_tensor_nbytes(x) + 4 * 4 * C;
  c->bytes_written = (double)dm_tensor_nbytes(x) + (train ? 4 * 4 * C : 0);
}

static void bn_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  double n = (double)x->numel, C = (double)dm_op_input(ctx, 1)->numel;
  c->flops = 8 * n;
  c->bytes_read = 4 * (double)dm_tensor_nbytes(x) + 3 * 4 * C; /* X and dY, twice each */
  c->bytes_written = (double)dm_tensor_nbytes(x) + 2 * 4 * C;
}

static dm_status bn_gradient(dm_grad_ctx *g) {
  int is_test = dm_grad_arg_int(g, "is_test", 0) != 0;
  if (!is_test && dm_grad_num_outputs(g) < 5)
    return dm_error(DM_ERR_INVALID, "SpatialBN in training mode needs its saved_mean and "
                    "saved_inv_std outputs for the gradient");
  const char *in[] = {dm_grad_input(g, 0), dm_grad_input(g, 1), dm_grad_output_grad(g, 0),
                      is_test ? dm_grad_input(g, 3) : dm_grad_output(g, 3),
                      is_test ? dm_grad_input(g, 4) : dm_grad_output(g, 4)};
  /* The statistics inputs (and the running outputs) get no gradient. */
  const char *out[] = {dm_grad_input_grad(g, 0), dm_grad_input_grad(g, 1),
                       dm_grad_input_grad(g, 2)};
  return dm_grad_emit(g, "SpatialBNGradient", 5, in, 3, out);
}

static const dm_inplace_pair bn_inplace[] = {{0, 0}, {3, 1}, {4, 2}, {-1, -1}};

static const dm_op_schema bn_schema = {
    .type = "SpatialBN",
    .min_inputs = 5,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 5,
    .args = bn_args,
    .inplace = bn_inplace,
    .precision = DM_PREC_FOLLOW, /* FP16 X/Y with FP32 parameters and statistics */
    .doc = "X, scale, bias, mean, var -> Y (is_test=1); or -> Y, running_mean (in place "
           "with mean), running_var (in place with var), saved_mean, saved_inv_std.",
    .infer = bn_infer,
    .cost = bn_cost,
    .gradient = bn_gradient,
};

static const dm_op_schema bn_grad_schema = {
    .type = "SpatialBNGradient",
    .min_inputs = 5,
    .max_inputs = 5,
    .min_outputs = 3,
    .max_outputs = 3,
    .args = bn_args,
    .precision = DM_PREC_FOLLOW,
    .doc = "X, scale, dY, saved_mean, saved_inv_std -> dX, dscale, dbias (is_test=1: the "
           "running mean and var in place of the saved statistics).",
    .infer = bn_grad_infer,
    .cost = bn_grad_cost,
};

/* A copy of x as FP32 when it is FP16, else x's own data; *owned is what to free. */
static const float *as_f32(const dm_tensor *x, float **owned) {
  *owned = NULL;
  if (x->dtype == DM_FLOAT)
    return dm_tensor_data(x);
  *owned = malloc((size_t)(x->numel ? x->numel : 1) * sizeof(float));
  if (*owned)
    dm_half_to_float_array(dm_tensor_data(x), *owned, (size_t)x->numel);
  return *owned;
}

/* Writes a double into element i of an FP32 or FP16 buffer, rounding once. */
static inline void put(void *p, int fp16, int64_t i, double v) {
  if (fp16)
    ((uint16_t *)p)[i] = dm_double_to_half(v);
  else
    ((float *)p)[i] = (float)v;
}

static dm_status bn_run(dm_op_ctx *ctx) {
  DM_TRY(bn_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  bn_geom g;
  DM_TRY(bn_geometry(ctx, x, &g));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0, fp16 = x->dtype == DM_FLOAT16;
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  double mom = dm_op_arg_float(ctx, "momentum", 0.9f);
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1)); /* (C) */
  const float *bias = dm_tensor_data(dm_op_input(ctx, 2));  /* (C) */
  const float *rmean = dm_tensor_data(dm_op_input(ctx, 3)); /* (C); may be output 1 */
  const float *rvar = dm_tensor_data(dm_op_input(ctx, 4));  /* (C); may be output 2 */
  float *owned;
  const float *px = as_f32(x, &owned); /* (N, C, HW) or (N, HW, C) */
  if (!px)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory widening the FP16 X");
  /* Y may be X (in place): px is then either a widened copy or read before written,
   * element by element, in the apply loop below (statistics are complete by then). */
  void *py = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  float *out_rm = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 1));
  float *out_rv = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 2));
  float *saved_mean = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 3));
  float *saved_inv = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 4));
#if DM_HAVE_OPENMP
#pragma omp parallel for if (x->numel > (1 << 15))
#endif
  for (int64_t c = 0; c < g.C; c++) {
    double mean, var;
    if (is_test) {
      mean = rmean[c], var = rvar[c];
    } else {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < g.N; n++)
        for (int64_t hw = 0; hw < g.HW; hw++)
          s += px[bn_at(&g, n, c, hw)];
      mean = s / (double)g.M;
      for (int64_t n = 0; n < g.N; n++)
        for (int64_t hw = 0; hw < g.HW; hw++) {
          double d = px[bn_at(&g, n, c, hw)] - mean;
          ss += d * d;
        }
      var = ss / (double)g.M;
    }
    double inv = 1.0 / sqrt(var + eps), a = scale[c] * inv, b = bias[c];
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t hw = 0; hw < g.HW; hw++) {
        int64_t i = bn_at(&g, n, c, hw);
        put(py, fp16, i, (px[i] - mean) * a + b);
      }
    if (!is_test) {
      /* The running inputs are read before the (possibly in-place) outputs are written. */
      double rm = rmean[c], rv = rvar[c];
      out_rm[c] = (float)(rm * mom + mean * (1 - mom));
      out_rv[c] = (float)(rv * mom + var * (1 - mom));
      saved_mean[c] = (float)mean;
      saved_inv[c] = (float)inv;
    }
  }
  free(owned);
  return DM_OK;
}

static dm_status bn_grad_run(dm_op_ctx *ctx) {
  DM_TRY(bn_grad_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  bn_geom g;
  DM_TRY(bn_geometry(ctx, x, &g));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0, fp16 = x->dtype == DM_FLOAT16;
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1)); /* (C) */
  const float *s_mean = dm_tensor_data(dm_op_input(ctx, 3)); /* (C) */
  const float *s_inv = dm_tensor_data(dm_op_input(ctx, 4));  /* (C) inv_std, or var */
  float *owned_x, *owned_dy;
  const float *px = as_f32(x, &owned_x);     /* layout as X */
  const float *pdy = as_f32(dy, &owned_dy);  /* layout as X */
  if (!px || !pdy) {
    free(owned_x), free(owned_dy);
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory widening FP16 X and dY");
  }
  void *pdx = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  float *dscale = dm_tensor_mutable_data(dm_op_output(ctx, 1)); /* (C) */
  float *dbias = dm_tensor_mutable_data(dm_op_output(ctx, 2));  /* (C) */
#if DM_HAVE_OPENMP
#pragma omp parallel for if (x->numel > (1 << 15))
#endif
  for (int64_t c = 0; c < g.C; c++) {
    double mean = s_mean[c];
    double inv = is_test ? 1.0 / sqrt((double)s_inv[c] + eps) : s_inv[c];
    double sdy = 0, sdyx = 0; /* sum dY, sum dY * xhat */
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t hw = 0; hw < g.HW; hw++) {
        int64_t i = bn_at(&g, n, c, hw);
        sdy += pdy[i];
        sdyx += pdy[i] * ((px[i] - mean) * inv);
      }
    dbias[c] = (float)sdy;
    dscale[c] = (float)sdyx;
    double k = scale[c] * inv;
    /* Train: Y depends on X through the batch mean and variance too, whence the two
     * correction terms; is_test: mean and var are constants. */
    double m1 = is_test || g.M == 0 ? 0 : sdy / (double)g.M;
    double m2 = is_test || g.M == 0 ? 0 : sdyx / (double)g.M;
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t hw = 0; hw < g.HW; hw++) {
        int64_t i = bn_at(&g, n, c, hw);
        put(pdx, fp16, i, k * (pdy[i] - m1 - (px[i] - mean) * inv * m2));
      }
  }
  free(owned_x), free(owned_dy);
  return DM_OK;
}

static const dm_kernel_def bn_cpu = {.type = "SpatialBN", .device = DM_CPU, .run = bn_run};
static const dm_kernel_def bn_grad_cpu = {.type = "SpatialBNGradient", .device = DM_CPU,
                                          .run = bn_grad_run};

static const dm_op_schema *const schemas[] = {&bn_schema, &bn_grad_schema, NULL};
static const dm_kernel_def *const kernels[] = {&bn_cpu, &bn_grad_cpu, NULL};
const dm_op_family dm_family_batchnorm = {schemas, kernels};
