/* batchnorm.c: SpatialBN (test and train mode) and SpatialBNGradient, NCHW and NHWC,
 * FP32 X/Y, or FP16 or BF16 X/Y with FP32 scale, bias and statistics.
 *
 * X is (N, C, spatial...) for NCHW or (N, spatial..., C) for NHWC; each channel is
 * normalised over its M = N * HW values. Per-channel sums (mean, the two-pass variance,
 * the gradient's reductions) are accumulated in double and every output element is
 * computed in double and rounded once to its dtype, so an FP16 (BF16) Y or dX carries a
 * single FP16 (BF16) rounding, as a tensor-core kernel with FP32 accumulation would.
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
#include <string.h>

#include "dm_config.h"

#include "batchnorm.h"
#include "builtin.h"
#include "common.h"
#include "core/half.h"

const dm_arg_spec dm_bn_args[] = {
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

static dm_status bn_geometry(dm_op_ctx *ctx, const dm_tensor *x, bn_geom *g) {
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  if (strcmp(order, "NCHW") != 0 && strcmp(order, "NHWC") != 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "order is '%s'; expected NCHW or NHWC", order);
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; %s takes FLOAT, FLOAT16 or BFLOAT16",
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  char xs[96];
  if (x->ndim < 2)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s; expected at least 2 dims (N, C, ...)",
                       dm_shape_str(x, xs, sizeof xs));
  g->nhwc = order[1] == 'H';
  dm_channel_view(x, g->nhwc, &g->N, &g->C, &g->HW);
  g->M = g->N * g->HW;
  return DM_OK;
}

/* A per-channel FP32 vector (scale, bias, mean, var, saved statistics). */
static dm_status bn_param(dm_op_ctx *ctx, const dm_tensor *t, const char *what, const bn_geom *g) {
  if (t->dtype != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; expected FLOAT (statistics and parameters "
                       "stay FP32 even for an FP16 or BF16 X)", what, dm_dtype_name(t->dtype));
  if (t->numel != g->C)
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s has %lld elements but X has %lld channels (%s)",
                       what, (long long)t->numel, (long long)g->C, g->nhwc ? "NHWC" : "NCHW");
  return DM_OK;
}

dm_status dm_bn_infer_outputs(dm_op_ctx *ctx, int nout) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  bn_geom g;
  DM_TRY(bn_geometry(ctx, x, &g));
  static const char *const names[] = {"X", "scale", "bias", "mean", "var"};
  for (int i = 1; i < 5; i++)
    DM_TRY(bn_param(ctx, dm_op_input(ctx, i), names[i], &g));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
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

static dm_status bn_infer(dm_op_ctx *ctx) {
  return dm_bn_infer_outputs(ctx, dm_op_num_outputs(ctx));
}

/* X, scale, dY, saved_mean, saved_inv_std (or mean, var when is_test) -> dX, dscale, dbias. */
dm_status dm_bn_grad_infer(dm_op_ctx *ctx) {
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
  /* dm_bn_backward reads X again after writing dX; dY block by block before */
  DM_TRY(dm_op_check_grad_alias(ctx, 0, 2, 1u << 0, (const char *const[]){"X", "scale", "dY"}));
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
    .args = dm_bn_args,
    .inplace = bn_inplace,
    .precision = DM_PREC_FOLLOW, /* FP16 X/Y with FP32 parameters and statistics */
    /* scale, bias, mean, var and the four statistics outputs stay FP32 (as cuDNN) */
    .fp32_inputs = 0x1e,
    .fp32_outputs = 0x1e,
    .doc = "X, scale, bias, mean, var -> Y (is_test=1); or -> Y, running_mean (in place "
           "with mean), running_var (in place with var), saved_mean, saved_inv_std.",
    .infer = bn_infer,
    .cost = bn_cost,
    .gradient = bn_gradient,
    .layout = DM_LAYOUT_ORDER, .layout_inputs = 0x1, .layout_outputs = 0x1, /* X -> Y */
};

static const dm_op_schema bn_grad_schema = {
    .type = "SpatialBNGradient",
    .min_inputs = 5,
    .max_inputs = 5,
    .min_outputs = 3,
    .max_outputs = 3,
    .args = dm_bn_args,
    .precision = DM_PREC_FOLLOW,
    .fp32_inputs = 0x1a,  /* scale, saved_mean, saved_inv_std */
    .fp32_outputs = 0x06, /* dscale, dbias */
    .doc = "X, scale, dY, saved_mean, saved_inv_std -> dX, dscale, dbias (is_test=1: the "
           "running mean and var in place of the saved statistics).",
    .infer = dm_bn_grad_infer,
    .cost = bn_grad_cost,
    .layout = DM_LAYOUT_ORDER, .layout_inputs = 0x5, .layout_outputs = 0x1, /* X, dY -> dX */
};

/* The kernels walk one channel at a time in blocks of at most BN_BLOCK values: a channel
 * is N runs of HW contiguous values (NCHW) or one run of M values C apart (NHWC). FP16
 * and BF16 blocks are widened into a float scratch buffer with the array conversion; FP32 blocks
 * of a contiguous run are read in place. Outputs are computed in double into a block
 * buffer and then rounded once (dm_double_to_half_array, dm_double_to_bf16, or a cast
 * to float). The
 * per-element arithmetic and the order of every sum are those of a plain element loop,
 * so the blocking changes no bit. */
#define BN_BLOCK 512

typedef struct bn_run_pos {
  int64_t base, stride, len; /* element base + j * stride, j < len */
} bn_run_pos;

static inline int64_t bn_runs(const bn_geom *g) { return g->nhwc ? 1 : g->N; }

static inline bn_run_pos bn_run_at(const bn_geom *g, int64_t c, int64_t r) {
  bn_run_pos p;
  if (g->nhwc)
    p.base = c, p.stride = g->C, p.len = g->M;
  else
    p.base = (r * g->C + c) * g->HW, p.stride = 1, p.len = g->HW;
  return p;
}

/* Values j0 .. j0 + n of run p of an FP32, FP16 or BF16 (t) tensor as floats: a pointer
 * into the data where it can, else widened into buf (n <= BN_BLOCK). */
static inline const float *bn_load(const void *data, dm_dtype t, bn_run_pos p, int64_t j0,
                                   int64_t n, float *buf) {
  int64_t i0 = p.base + j0 * p.stride;
  int r16 = dm_is_reduced_float(t);
  if (p.stride == 1) {
    if (!r16)
      return (const float *)data + i0;
    dm_widen(t, (const uint16_t *)data + i0, buf, (size_t)n);
  } else if (r16) {
    for (int64_t j = 0; j < n; j++)
      buf[j] = dm_reduced_to_float(t, ((const uint16_t *)data)[i0 + j * p.stride]);
  } else {
    for (int64_t j = 0; j < n; j++)
      buf[j] = ((const float *)data)[i0 + j * p.stride];
  }
  return buf;
}

/* Rounds the doubles v[0 .. n) once into values j0 .. j0 + n of run p. */
static inline void bn_store(void *data, dm_dtype t, bn_run_pos p, int64_t j0, int64_t n,
                            const double *v) {
  int64_t i0 = p.base + j0 * p.stride;
  int r16 = dm_is_reduced_float(t);
  if (p.stride == 1 && t == DM_FLOAT16) {
    dm_double_to_half_array(v, (uint16_t *)data + i0, (size_t)n);
  } else if (p.stride == 1 && r16) {
    uint16_t *y = (uint16_t *)data + i0;
    for (int64_t j = 0; j < n; j++)
      y[j] = dm_double_to_bf16(v[j]);
  } else if (p.stride == 1) {
    float *y = (float *)data + i0;
    for (int64_t j = 0; j < n; j++)
      y[j] = (float)v[j];
  } else {
    for (int64_t j = 0; j < n; j++) {
      if (r16)
        ((uint16_t *)data)[i0 + j * p.stride] = dm_double_to_reduced(t, v[j]);
      else
        ((float *)data)[i0 + j * p.stride] = (float)v[j];
    }
  }
}

/* Loops over the blocks of channel c: r is the run, p its position, j0 and n the block. */
#define BN_FOR_BLOCKS(g, c, r, p, j0, n)                                                 \
  for (int64_t r = 0; r < bn_runs(g); r++)                                               \
    for (bn_run_pos p = bn_run_at(g, c, r); p.len; p.len = 0)                            \
      for (int64_t j0 = 0, n = p.len < BN_BLOCK ? p.len : BN_BLOCK; j0 < p.len;          \
           j0 += n, n = p.len - j0 < BN_BLOCK ? p.len - j0 : BN_BLOCK)

dm_status dm_bn_forward(dm_op_ctx *ctx, void *py) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  bn_geom g;
  DM_TRY(bn_geometry(ctx, x, &g));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  const dm_dtype t = x->dtype;
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  double mom = dm_op_arg_float(ctx, "momentum", 0.9f);
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1)); /* (C) */
  const float *bias = dm_tensor_data(dm_op_input(ctx, 2));  /* (C) */
  const float *rmean = dm_tensor_data(dm_op_input(ctx, 3)); /* (C); may be output 1 */
  const float *rvar = dm_tensor_data(dm_op_input(ctx, 4));  /* (C); may be output 2 */
  const void *px = dm_tensor_data(x); /* (N, C, HW) or (N, HW, C), FP32, FP16 or BF16 */
  /* Y (py) may be X (in place): each block of X is read (or widened) before the same
   * block of Y is written, and the statistics are complete by then. */
  float *out_rm = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 1));
  float *out_rv = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 2));
  float *saved_mean = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 3));
  float *saved_inv = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 4));
#if DM_HAVE_OPENMP
#pragma omp parallel for if (x->numel > (1 << 15))
#endif
  for (int64_t c = 0; c < g.C; c++) {
    float xbuf[BN_BLOCK];
    double ybuf[BN_BLOCK];
    double mean, var;
    if (is_test) {
      mean = rmean[c], var = rvar[c];
    } else {
      double s = 0, ss = 0;
      BN_FOR_BLOCKS(&g, c, r, p, j0, n) {
        const float *xb = bn_load(px, t, p, j0, n, xbuf);
        for (int64_t j = 0; j < n; j++)
          s += xb[j];
      }
      mean = s / (double)g.M;
      BN_FOR_BLOCKS(&g, c, r, p, j0, n) {
        const float *xb = bn_load(px, t, p, j0, n, xbuf);
        for (int64_t j = 0; j < n; j++) {
          double d = xb[j] - mean;
          ss += d * d;
        }
      }
      var = ss / (double)g.M;
    }
    double inv = 1.0 / sqrt(var + eps), a = scale[c] * inv, b = bias[c];
    BN_FOR_BLOCKS(&g, c, r, p, j0, n) {
      const float *xb = bn_load(px, t, p, j0, n, xbuf);
      if (t == DM_FLOAT && p.stride == 1) { /* FP32 NCHW: straight into Y (xb may be Y itself) */
        float *yb = (float *)py + p.base + j0;
        for (int64_t j = 0; j < n; j++)
          yb[j] = (float)((xb[j] - mean) * a + b);
        continue;
      }
      for (int64_t j = 0; j < n; j++)
        ybuf[j] = (xb[j] - mean) * a + b;
      bn_store(py, t, p, j0, n, ybuf);
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
  return DM_OK;
}

static dm_status bn_run(dm_op_ctx *ctx) {
  DM_TRY(bn_infer(ctx));
  return dm_bn_forward(ctx, dm_tensor_mutable_data(dm_op_output(ctx, 0)));
}

dm_status dm_bn_backward(dm_op_ctx *ctx, const void *pdy) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  bn_geom g;
  DM_TRY(bn_geometry(ctx, x, &g));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  const dm_dtype t = x->dtype;
  double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1)); /* (C) */
  const float *s_mean = dm_tensor_data(dm_op_input(ctx, 3)); /* (C) */
  const float *s_inv = dm_tensor_data(dm_op_input(ctx, 4));  /* (C) inv_std, or var */
  const void *px = dm_tensor_data(x); /* dY (pdy): layout as X */
  /* dX is not X (dm_bn_grad_infer checks). It may be dY's buffer (the fused gradients
   * of bn_fusion.c mask dY into dX first): each channel's first pass only reads, and the
   * second loads a block of dY before it stores the same block of dX. */
  void *pdx = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  float *dscale = dm_tensor_mutable_data(dm_op_output(ctx, 1)); /* (C) */
  float *dbias = dm_tensor_mutable_data(dm_op_output(ctx, 2));  /* (C) */
#if DM_HAVE_OPENMP
#pragma omp parallel for if (x->numel > (1 << 15))
#endif
  for (int64_t c = 0; c < g.C; c++) {
    float xbuf[BN_BLOCK], dybuf[BN_BLOCK];
    double dxbuf[BN_BLOCK];
    double mean = s_mean[c];
    double inv = is_test ? 1.0 / sqrt((double)s_inv[c] + eps) : s_inv[c];
    double sdy = 0, sdyx = 0; /* sum dY, sum dY * xhat */
    BN_FOR_BLOCKS(&g, c, r, p, j0, n) {
      const float *xb = bn_load(px, t, p, j0, n, xbuf);
      const float *dyb = bn_load(pdy, t, p, j0, n, dybuf);
      for (int64_t j = 0; j < n; j++) {
        sdy += dyb[j];
        sdyx += dyb[j] * ((xb[j] - mean) * inv);
      }
    }
    dbias[c] = (float)sdy;
    dscale[c] = (float)sdyx;
    double k = scale[c] * inv;
    /* Train: Y depends on X through the batch mean and variance too, whence the two
     * correction terms; is_test: mean and var are constants. */
    double m1 = is_test || g.M == 0 ? 0 : sdy / (double)g.M;
    double m2 = is_test || g.M == 0 ? 0 : sdyx / (double)g.M;
    BN_FOR_BLOCKS(&g, c, r, p, j0, n) {
      const float *xb = bn_load(px, t, p, j0, n, xbuf);
      const float *dyb = bn_load(pdy, t, p, j0, n, dybuf);
      for (int64_t j = 0; j < n; j++)
        dxbuf[j] = k * (dyb[j] - m1 - (xb[j] - mean) * inv * m2);
      bn_store(pdx, t, p, j0, n, dxbuf);
    }
  }
  return DM_OK;
}

static dm_status bn_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_bn_grad_infer(ctx));
  return dm_bn_backward(ctx, dm_tensor_data(dm_op_input(ctx, 2)));
}

static const dm_op_schema *const schemas[] = {&bn_schema, &bn_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "SpatialBN", .device = DM_CPU, .run = bn_run},
    {.type = "SpatialBNGradient", .device = DM_CPU, .run = bn_grad_run},
    {0},
};
const dm_op_family dm_family_batchnorm = {schemas, kernels};
