/* layernorm.c: LayerNorm and LayerNormGradient (Caffe2's semantics); X FLOAT, FLOAT16 or
 * BFLOAT16, gamma, beta, mean and std FLOAT.
 *
 * X is viewed as N x D at `axis` (N = product of the dims before it). Per row:
 * mean = sum(x) / D, var = sum((x - mean)^2) / D (two passes, biased, as Caffe2),
 * std = sqrt(var + epsilon), y = (x - mean) / std [* gamma + beta]. mean and std are
 * Caffe2's shape, X's dims before `axis` followed by 1 (N elements), and FP32 whatever
 * X's dtype: the mixed-precision pass keeps them, gamma and beta (the FP32 slot masks)
 * as FP32 masters. The row sums are accumulated in double and each y computed in
 * double from them and rounded once to X's dtype, so a 16-bit Y carries a single
 * rounding, as a kernel with FP32 statistics and one final rounding would.
 *
 * LayerNormGradient, Caffe2's signature: dY, Y, mean, std, X [, gamma] -> dX [, dgamma,
 * dbeta]. With xhat = (x - mean) / std and g = dy [* gamma]:
 * dx = (g - mean_j(g) - xhat * mean_j(g * xhat)) / std, dgamma = sum_rows(dy * xhat),
 * dbeta = sum_rows(dy). Y is part of the signature only (the kernel reads X).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"

static const dm_arg_spec ln_args[] = {
    {"axis", DM_ARG_INT, 0, "X is N x D with D the product of dims [axis, ndim) (default "
                            "1); negative counts from the end"},
    {"epsilon", DM_ARG_FLOAT, 0, "added to the variance (default 1e-5)"},
    {"elementwise_affine", DM_ARG_INT, 0, "1: inputs 1 and 2 are gamma and beta (D FP32 "
                                          "values each); default 0"},
    {NULL, 0, 0, NULL},
};

/* X's row view and the checks every LayerNorm op shares. */
typedef struct ln_geom {
  int axis;
  int64_t N, D;
} ln_geom;

static dm_status ln_geometry(dm_op_ctx *ctx, const dm_tensor *x, ln_geom *g) {
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; %s takes FLOAT, FLOAT16 or BFLOAT16",
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0,
                              &g->axis));
  g->N = dm_dims_product(x, 0, g->axis);
  g->D = dm_dims_product(x, g->axis, x->ndim);
  char xs[96];
  if (g->D == 0 && g->N > 0)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s: its rows from axis %d are empty, so they "
                       "have no mean", dm_shape_str(x, xs, sizeof xs), g->axis);
  float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  if (!(eps >= 0.0f) || isinf(eps))
    return dm_op_error(ctx, DM_ERR_INVALID, "epsilon is %g; it must be finite and >= 0",
                       (double)eps);
  return DM_OK;
}

/* An FP32 tensor of n elements (gamma, beta: D; mean, std: N). */
static dm_status ln_fp32_vec(dm_op_ctx *ctx, const dm_tensor *t, const char *what, int64_t n,
                             const char *of) {
  if (t->dtype != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; expected FLOAT (LayerNorm's parameters "
                       "and statistics stay FP32 beside an FP16 or BF16 X)", what,
                       dm_dtype_name(t->dtype));
  if (t->numel != n)
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s has %lld elements; expected %lld (%s)", what,
                       (long long)t->numel, (long long)n, of);
  return DM_OK;
}

/* elementwise_affine against the number of inputs: `with` inputs with gamma (and beta). */
static dm_status ln_affine(dm_op_ctx *ctx, int base, int with, int *affine) {
  int64_t a = dm_op_arg_int(ctx, "elementwise_affine", 0);
  int n = dm_op_num_inputs(ctx);
  if (a != 0 && a != 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "elementwise_affine is %lld; expected 0 or 1",
                       (long long)a);
  if (n != (a ? with : base))
    return dm_op_error(ctx, DM_ERR_INVALID, "elementwise_affine=%lld takes %d inputs, not %d",
                       (long long)a, a ? with : base, n);
  *affine = (int)a;
  return DM_OK;
}

/* mean and std: X's dims before axis, then 1 (Caffe2's moments shape). */
static dm_status ln_set_moments(dm_op_ctx *ctx, const dm_tensor *x, const ln_geom *g, int o) {
  int64_t d[DM_MAX_DIMS];
  int nd = g->axis + 1;
  if (nd > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_SHAPE, "mean would have %d dims, past the limit %d", nd,
                       DM_MAX_DIMS);
  memcpy(d, x->dims, (size_t)g->axis * sizeof *d);
  d[g->axis] = 1;
  DM_TRY(dm_op_set_output(ctx, o, DM_FLOAT, nd, d));
  return dm_op_set_output(ctx, o + 1, DM_FLOAT, nd, d);
}

static dm_status ln_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  ln_geom g;
  int affine;
  DM_TRY(ln_geometry(ctx, x, &g));
  DM_TRY(ln_affine(ctx, 1, 3, &affine));
  if (affine) {
    DM_TRY(ln_fp32_vec(ctx, dm_op_input(ctx, 1), "gamma", g.D, "X's row length D"));
    DM_TRY(ln_fp32_vec(ctx, dm_op_input(ctx, 2), "beta", g.D, "X's row length D"));
  }
  DM_TRY(dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims));
  return ln_set_moments(ctx, x, &g, 1);
}

/* dY, Y, mean, std, X [, gamma] -> dX [, dgamma, dbeta] */
static dm_status ln_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 4);
  ln_geom g;
  int affine;
  DM_TRY(ln_geometry(ctx, x, &g));
  DM_TRY(ln_affine(ctx, 5, 6, &affine));
  if (dm_op_num_outputs(ctx) != (affine ? 3 : 1))
    return dm_op_error(ctx, DM_ERR_INVALID, "elementwise_affine=%d takes %d outputs, not %d",
                       affine, affine ? 3 : 1, dm_op_num_outputs(ctx));
  static const char *const names[] = {"dY", "Y"};
  char xs[96], os[96];
  for (int i = 0; i < 2; i++) {
    const dm_tensor *t = dm_op_input(ctx, i);
    if (t->dtype != x->dtype || !dm_tensor_same_shape(t, x))
      return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s %s but X is %s %s; they must match",
                         names[i], dm_dtype_name(t->dtype), dm_shape_str(t, os, sizeof os),
                         dm_dtype_name(x->dtype), dm_shape_str(x, xs, sizeof xs));
  }
  DM_TRY(ln_fp32_vec(ctx, dm_op_input(ctx, 2), "mean", g.N, "X's row count N"));
  DM_TRY(ln_fp32_vec(ctx, dm_op_input(ctx, 3), "std", g.N, "X's row count N"));
  if (affine)
    DM_TRY(ln_fp32_vec(ctx, dm_op_input(ctx, 5), "gamma", g.D, "X's row length D"));
  /* a row of dY and X is read into scratch before that row of dX is written, Y is never
   * read; the statistics and gamma are read for every row */
  DM_TRY(dm_op_check_grad_alias(ctx, 0, 0, 0x2cu,
                                (const char *const[]){"dY", "Y", "mean", "std", "X", "gamma"}));
  DM_TRY(dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims));
  if (affine) {
    const dm_tensor *gm = dm_op_input(ctx, 5);
    DM_TRY(dm_op_set_output(ctx, 1, DM_FLOAT, gm->ndim, gm->dims));
    DM_TRY(dm_op_set_output(ctx, 2, DM_FLOAT, gm->ndim, gm->dims));
  }
  return DM_OK;
}

static void ln_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  double n = (double)dm_op_input(ctx, 0)->numel;
  c->flops = 7 * n; /* sum, squared deviation (2), subtract, scale, affine FMA (2) */
  dm_cost_io(ctx, c);
}

static void ln_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  double n = (double)dm_op_input(ctx, 0)->numel;
  c->flops = 12 * n;
  dm_cost_io(ctx, c);
}

static dm_status ln_gradient(dm_grad_ctx *g) {
  if (dm_grad_num_outputs(g) < 3)
    return dm_error(DM_ERR_INVALID, "LayerNorm needs its mean and std outputs for the "
                    "gradient");
  int affine = dm_grad_num_inputs(g) == 3;
  if (!dm_grad_output_grad(g, 0))
    return dm_error(DM_ERR_INVALID, "LayerNorm's gradient needs Y's gradient; only mean or "
                    "std has one");
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_output(g, 0), dm_grad_output(g, 1),
                      dm_grad_output(g, 2), dm_grad_input(g, 0),
                      affine ? dm_grad_input(g, 1) : NULL};
  const char *out[] = {dm_grad_input_grad(g, 0), affine ? dm_grad_input_grad(g, 1) : NULL,
                       affine ? dm_grad_input_grad(g, 2) : NULL};
  return dm_grad_emit(g, "LayerNormGradient", affine ? 6 : 5, in, affine ? 3 : 1, out);
}

static const dm_op_schema ln_schema = {
    .type = "LayerNorm",
    .min_inputs = 1,
    .max_inputs = 3,
    .min_outputs = 3,
    .max_outputs = 3,
    .args = ln_args,
    .precision = DM_PREC_FOLLOW, /* 16-bit X and Y with FP32 parameters and statistics */
    .fp32_inputs = 0x6,          /* gamma, beta */
    .fp32_outputs = 0x6,         /* mean, std */
    .doc = "X [, gamma, beta] -> Y, mean, std: each row of X (N x D at `axis`) normalised "
           "to (x - mean) / std with std = sqrt(biased var + epsilon), then * gamma + beta "
           "when elementwise_affine=1. mean and std are FP32, shaped X's dims before axis "
           "then 1.",
    .infer = ln_infer,
    .cost = ln_cost,
    .gradient = ln_gradient,
};

static const dm_inplace_pair ln_grad_inplace[] = {{0, 0}, {-1, -1}};

static const dm_op_schema ln_grad_schema = {
    .type = "LayerNormGradient",
    .min_inputs = 5,
    .max_inputs = 6,
    .min_outputs = 1,
    .max_outputs = 3,
    .args = ln_args,
    .inplace = ln_grad_inplace,
    .precision = DM_PREC_FOLLOW,
    .fp32_inputs = 0x2c,  /* mean, std, gamma */
    .fp32_outputs = 0x06, /* dgamma, dbeta */
    .doc = "dY, Y, mean, std, X [, gamma] -> dX [, dgamma, dbeta] (gamma and its two "
           "gradients with elementwise_affine=1).",
    .infer = ln_grad_infer,
    .cost = ln_grad_cost,
};

/* The rows of one run. */
typedef struct ln_rows {
  dm_dtype t;
  int64_t D;
  double eps;
  const void *x, *dy;        /* (N, D) */
  const float *gamma, *beta; /* (D) or NULL */
  const float *mean, *sd;    /* (N), the gradient's inputs */
  void *y;                   /* (N, D): Y or dX */
  float *omean, *osd;        /* (N), the forward's outputs */
} ln_rows;

/* Element j of an output row, computed in double, rounded once to the row's dtype. */
static inline void ln_store(const ln_rows *r, int64_t k, double v) {
  if (r->t == DM_FLOAT)
    ((float *)r->y)[k] = (float)v;
  else
    ((uint16_t *)r->y)[k] = dm_double_to_reduced(r->t, v);
}

/* Row i of LayerNorm: X's row widened into the scratch, statistics in double. */
static void ln_row(void *arg, void *scratch, int64_t i) {
  const ln_rows *r = arg;
  const int64_t D = r->D;
  float *xr = scratch; /* (D) */
  dm_load_f32(r->t, r->x, i * D, D, xr);
  double s = 0;
  for (int64_t j = 0; j < D; j++)
    s += xr[j];
  double mean = s / (double)D, v = 0;
  for (int64_t j = 0; j < D; j++)
    v += ((double)xr[j] - mean) * ((double)xr[j] - mean);
  double sd = sqrt(v / (double)D + r->eps), inv = 1.0 / sd;
  for (int64_t j = 0; j < D; j++) {
    double h = ((double)xr[j] - mean) * inv;
    ln_store(r, i * D + j, r->gamma ? h * r->gamma[j] + r->beta[j] : h);
  }
  r->omean[i] = (float)mean, r->osd[i] = (float)sd;
}

static dm_status ln_run(dm_op_ctx *ctx) {
  DM_TRY(ln_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  ln_geom g;
  DM_TRY(ln_geometry(ctx, x, &g));
  int affine = dm_op_num_inputs(ctx) == 3;
  if (g.N == 0)
    return DM_OK;
  const ln_rows r = {
      .t = x->dtype, .D = g.D, .eps = dm_op_arg_float(ctx, "epsilon", 1e-5f),
      .x = dm_tensor_data(x),
      .gamma = affine ? dm_tensor_data(dm_op_input(ctx, 1)) : NULL,
      .beta = affine ? dm_tensor_data(dm_op_input(ctx, 2)) : NULL,
      .y = dm_tensor_mutable_data(dm_op_output(ctx, 0)),
      .omean = dm_tensor_mutable_data(dm_op_output(ctx, 1)),
      .osd = dm_tensor_mutable_data(dm_op_output(ctx, 2)),
  };
  return dm_parallel_rows(ctx, g.N, g.N * g.D > (1 << 15), (size_t)g.D * sizeof(float),
                          "an FP32 row", ln_row,
                          (void *)&r);
}

/* Row i of LayerNormGradient: dx from the saved statistics; with gamma, the row's
 * dy * xhat and dy go to the dgamma, dbeta partial sums of the row's block. */
static void ln_grad_row(const ln_rows *r, float *xr, float *dr, double *pg, double *pb,
                        int64_t i) {
  const int64_t D = r->D;
  dm_load_f32(r->t, r->x, i * D, D, xr);
  dm_load_f32(r->t, r->dy, i * D, D, dr);
  const double mean = r->mean[i], inv = 1.0 / (double)r->sd[i];
  double sg = 0, sgh = 0;
  for (int64_t j = 0; j < D; j++) {
    double h = ((double)xr[j] - mean) * inv, gj = r->gamma ? (double)dr[j] * r->gamma[j] : dr[j];
    sg += gj, sgh += gj * h;
    if (pg)
      pg[j] += (double)dr[j] * h, pb[j] += dr[j];
  }
  sg /= (double)D, sgh /= (double)D;
  for (int64_t j = 0; j < D; j++) {
    double h = ((double)xr[j] - mean) * inv, gj = r->gamma ? (double)dr[j] * r->gamma[j] : dr[j];
    ln_store(r, i * D + j, (gj - sg - h * sgh) * inv);
  }
}

/* The gradient in blocks of rows: block b sums its dgamma, dbeta into its own slice, and
 * the slices are added in block order, so the result does not depend on the threads. */
#define LN_BLOCKS 16

static dm_status ln_grad_run(dm_op_ctx *ctx) {
  DM_TRY(ln_grad_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 4);
  ln_geom g;
  DM_TRY(ln_geometry(ctx, x, &g));
  int affine = dm_op_num_inputs(ctx) == 6;
  const int64_t N = g.N, D = g.D;
  float *dgo = affine ? dm_tensor_mutable_data(dm_op_output(ctx, 1)) : NULL;
  float *dbo = affine ? dm_tensor_mutable_data(dm_op_output(ctx, 2)) : NULL;
  if (affine)
    for (int64_t j = 0; j < D; j++)
      dgo[j] = dbo[j] = 0.0f;
  if (N == 0 || D == 0)
    return DM_OK;
  const ln_rows r = {
      .t = x->dtype, .D = D, .x = dm_tensor_data(x), .dy = dm_tensor_data(dm_op_input(ctx, 0)),
      .gamma = affine ? dm_tensor_data(dm_op_input(ctx, 5)) : NULL,
      .mean = dm_tensor_data(dm_op_input(ctx, 2)), .sd = dm_tensor_data(dm_op_input(ctx, 3)),
      .y = dm_tensor_mutable_data(dm_op_output(ctx, 0)),
  };
  const int64_t nb = N < LN_BLOCKS ? N : LN_BLOCKS;
  size_t rowb = 2 * (size_t)D * sizeof(float);
  size_t sums = affine ? 2 * (size_t)nb * (size_t)D * sizeof(double) : 0;
  char *buf = malloc((size_t)nb * rowb + sums);
  if (!buf)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for LayerNormGradient's %lld x %lld "
                       "scratch", (long long)nb, (long long)D);
  double *part = (double *)(buf + (size_t)nb * rowb); /* (nb, 2, D) */
  if (affine)
    memset(part, 0, sums);
#if DM_HAVE_OPENMP
#pragma omp parallel for if (N * D > (1 << 15))
#endif
  for (int64_t b = 0; b < nb; b++) {
    float *xr = (float *)(buf + (size_t)b * rowb), *dr = xr + D;
    double *pg = affine ? part + b * 2 * D : NULL, *pb = affine ? pg + D : NULL;
    for (int64_t i = N * b / nb; i < N * (b + 1) / nb; i++)
      ln_grad_row(&r, xr, dr, pg, pb, i);
  }
  if (affine)
    for (int64_t j = 0; j < D; j++) {
      double sg = 0, sb = 0;
      for (int64_t b = 0; b < nb; b++)
        sg += part[b * 2 * D + j], sb += part[b * 2 * D + D + j];
      dgo[j] = (float)sg, dbo[j] = (float)sb;
    }
  free(buf);
  return DM_OK;
}

static const dm_op_schema *const schemas[] = {&ln_schema, &ln_grad_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "LayerNorm", .device = DM_CPU, .run = ln_run},
    {.type = "LayerNormGradient", .device = DM_CPU, .run = ln_grad_run},
    {0},
};
const dm_op_family dm_family_layernorm = {schemas, kernels};
