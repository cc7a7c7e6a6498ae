/* lrn.c: LRN (cross-channel local response normalisation, Caffe2's) and LRNGradient,
 * NCHW and NHWC, computed in FP32 (FP16 X is widened and Y rounded once).
 *
 *   scale_c = bias + (alpha / size) * sum_{c' in W(c)} x_c'^2,   y_c = x_c * scale_c^-beta
 *
 * with the window W(c) = [c - (size-1)/2, c - (size-1)/2 + size - 1] clipped to [0, C):
 * Caffe2 pads the squares with (size-1)/2 zeros in front. Per position, the window sums
 * and the gradient's sums are accumulated in double.
 *
 * LRNGradient: X, Y, dY, [scale] -> dX with
 *   dx_j = dy_j scale_j^-beta - (2 alpha beta / size) x_j sum_{c: j in W(c)} dy_c y_c / scale_c.
 * The gradient maker passes the forward's scale output when the op has one; without it
 * the kernel recomputes scale from X.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "common.h"
#include "core/half.h"
#include "builtin.h"

static const dm_arg_spec lrn_args[] = {
    {"size", DM_ARG_INT, 1, "number of channels in the window (odd, >= 1)"},
    {"alpha", DM_ARG_FLOAT, 0, "scale of the sum of squares, divided by size (default 0)"},
    {"beta", DM_ARG_FLOAT, 0, "exponent (default 0)"},
    {"bias", DM_ARG_FLOAT, 0, "added to the scaled sum (default 1)"},
    {"order", DM_ARG_STRING, 0, "NCHW (default) or NHWC"},
    {NULL, 0, 0, NULL},
};

/* Positions are (n, hw); a position's C channels sit `cs` apart from `base`. */
typedef struct lrn_geom {
  int nhwc;
  int64_t N, C, HW;
} lrn_geom;

typedef struct lrn_params {
  int size, pre; /* pre = (size - 1) / 2 zeros padded in front */
  double alpha_n, beta, bias;
} lrn_params;

static dm_status lrn_geometry(dm_op_ctx *ctx, const dm_tensor *x, const char *what,
                              lrn_geom *g) {
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  if (strcmp(order, "NCHW") != 0 && strcmp(order, "NHWC") != 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "order is '%s'; expected NCHW or NHWC", order);
  if (x->dtype != DM_FLOAT && x->dtype != DM_FLOAT16)
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; %s takes FLOAT or FLOAT16", what,
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  char xs[96];
  if (x->ndim < 2)
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s; expected at least 2 dims (N, C, ...)",
                       what, dm_shape_str(x, xs, sizeof xs));
  g->nhwc = order[1] == 'H';
  dm_channel_view(x, g->nhwc, &g->N, &g->C, &g->HW);
  return DM_OK;
}

static dm_status lrn_params_of(dm_op_ctx *ctx, lrn_params *p) {
  int64_t size = dm_op_arg_int(ctx, "size", 0);
  if (size < 1 || size % 2 == 0 || size > (1 << 20))
    return dm_op_error(ctx, DM_ERR_INVALID, "size is %lld; it must be a positive odd number",
                       (long long)size);
  p->size = (int)size;
  p->pre = (p->size - 1) / 2;
  p->alpha_n = (double)dm_op_arg_float(ctx, "alpha", 0.0f) / (double)size;
  p->beta = dm_op_arg_float(ctx, "beta", 0.0f);
  p->bias = dm_op_arg_float(ctx, "bias", 1.0f);
  return DM_OK;
}

/* Same dtype and shape as X, or an error naming both. */
static dm_status like_x(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *t, const char *what,
                        dm_dtype want) {
  char xs[96], ts[96];
  if (t->dtype != want || !dm_tensor_same_shape(x, t))
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s %s; expected %s %s like X", what,
                       dm_dtype_name(t->dtype), dm_shape_str(t, ts, sizeof ts),
                       dm_dtype_name(want), dm_shape_str(x, xs, sizeof xs));
  return DM_OK;
}

static dm_status lrn_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  lrn_geom g;
  lrn_params p;
  DM_TRY(lrn_geometry(ctx, x, "X", &g));
  DM_TRY(lrn_params_of(ctx, &p));
  DM_TRY(dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims));
  /* scale stays FP32: it feeds the gradient, which wants it unrounded. */
  if (dm_op_num_outputs(ctx) > 1)
    DM_TRY(dm_op_set_output(ctx, 1, DM_FLOAT, x->ndim, x->dims));
  return DM_OK;
}

static dm_status lrn_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  lrn_geom g;
  lrn_params p;
  DM_TRY(lrn_geometry(ctx, x, "X", &g));
  DM_TRY(lrn_params_of(ctx, &p));
  DM_TRY(like_x(ctx, x, dm_op_input(ctx, 1), "Y", x->dtype));
  DM_TRY(like_x(ctx, x, dm_op_input(ctx, 2), "dY", x->dtype));
  if (dm_op_num_inputs(ctx) > 3)
    DM_TRY(like_x(ctx, x, dm_op_input(ctx, 3), "scale", DM_FLOAT));
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static void lrn_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  double n = (double)x->numel, size = (double)dm_op_arg_int(ctx, "size", 1);
  c->flops = n * (2 * size + 4); /* window of squares, then pow and multiply */
  c->bytes_read = (double)dm_tensor_nbytes(x);
  c->bytes_written = (double)dm_tensor_nbytes(x) * (dm_op_num_outputs(ctx) > 1 ? 2 : 1);
}

static void lrn_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  double n = (double)x->numel, size = (double)dm_op_arg_int(ctx, "size", 1);
  c->flops = n * (4 * size + 8);
  c->bytes_read = 3 * (double)dm_tensor_nbytes(x);
  c->bytes_written = (double)dm_tensor_nbytes(x);
}

static dm_status lrn_gradient(dm_grad_ctx *g) {
  int has_scale = dm_grad_num_outputs(g) > 1;
  const char *in[] = {dm_grad_input(g, 0), dm_grad_output(g, 0), dm_grad_output_grad(g, 0),
                      has_scale ? dm_grad_output(g, 1) : NULL};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "LRNGradient", has_scale ? 4 : 3, in, 1, out);
}

static const dm_op_schema lrn_schema = {
    .type = "LRN",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 2,
    .args = lrn_args,
    .precision = DM_PREC_FP32,
    .doc = "X -> Y = X * scale^-beta, [scale = bias + alpha/size * (sum of squares over a "
           "window of size channels)]; FLOAT, or FLOAT16 computed in FP32.",
    .infer = lrn_infer,
    .cost = lrn_cost,
    .gradient = lrn_gradient,
    .layout = DM_LAYOUT_ORDER, .layout_inputs = 0x1, .layout_outputs = 0x3, /* X -> Y, scale */
};

static const dm_op_schema lrn_grad_schema = {
    .type = "LRNGradient",
    .min_inputs = 3,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = lrn_args,
    .precision = DM_PREC_FP32,
    .doc = "X, Y, dY, [scale (the forward's, FLOAT)] -> dX; scale is recomputed when absent.",
    .infer = lrn_grad_infer,
    .cost = lrn_grad_cost,
    .layout = DM_LAYOUT_ORDER, .layout_inputs = 0xf, .layout_outputs = 0x1,
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

static inline void put(void *p, int fp16, int64_t i, double v) {
  if (fp16)
    ((uint16_t *)p)[i] = dm_double_to_half(v);
  else
    ((float *)p)[i] = (float)v;
}

/* Where position q's channels start and how far apart they are. */
static inline void lrn_pos(const lrn_geom *g, int64_t q, int64_t *base, int64_t *cs) {
  int64_t n = q / g->HW, hw = q % g->HW;
  *base = g->nhwc ? q * g->C : n * g->C * g->HW + hw;
  *cs = g->nhwc ? 1 : g->HW;
}

/* scale at one position, all C channels, into s (C doubles). */
static void lrn_scale(const lrn_params *p, const float *x, int64_t cs, int64_t C, double *s) {
  for (int64_t c = 0; c < C; c++) {
    int64_t lo = c - p->pre, hi = lo + p->size - 1;
    lo = lo < 0 ? 0 : lo;
    hi = hi >= C ? C - 1 : hi;
    double sum = 0;
    for (int64_t k = lo; k <= hi; k++)
      sum += (double)x[k * cs] * x[k * cs];
    s[c] = p->bias + p->alpha_n * sum;
  }
}

/* What one position's row needs: the geometry, the parameters, the FP32 inputs (X; for
 * the gradient also Y, dY and maybe the forward's scale) and the outputs (Y or dX, FLOAT or
 * FLOAT16, and the forward's FP32 scale). */
typedef struct lrn_rows {
  const lrn_geom *g;
  const lrn_params *p;
  const float *x, *y, *dy, *scale;
  void *out;
  float *scale_out;
  int fp16;
} lrn_rows;

/* LRN at position q; s: the thread's C doubles. */
static void lrn_row(void *arg, void *scratch, int64_t q) {
  const lrn_rows *r = arg;
  const int64_t C = r->g->C;
  double *s = scratch;
  int64_t base, cs;
  lrn_pos(r->g, q, &base, &cs);
  lrn_scale(r->p, r->x + base, cs, C, s);
  for (int64_t c = 0; c < C; c++) {
    int64_t i = base + c * cs;
    put(r->out, r->fp16, i, r->x[i] * pow(s[c], -r->p->beta));
    if (r->scale_out)
      r->scale_out[i] = (float)s[c];
  }
}

/* LRNGradient at position q; s: the thread's 2 C doubles (scale, dy y / scale). */
static void lrn_grad_row(void *arg, void *scratch, int64_t q) {
  const lrn_rows *r = arg;
  const lrn_params *p = r->p;
  const int64_t C = r->g->C;
  double *s = scratch, *d = s + C;
  int64_t base, cs;
  lrn_pos(r->g, q, &base, &cs);
  if (r->scale)
    for (int64_t c = 0; c < C; c++)
      s[c] = r->scale[base + c * cs];
  else
    lrn_scale(p, r->x + base, cs, C, s);
  for (int64_t c = 0; c < C; c++)
    d[c] = (double)r->dy[base + c * cs] * r->y[base + c * cs] / s[c];
  /* j is in W(c) exactly when c is in [j - size + 1 + pre, j + pre]. */
  for (int64_t j = 0; j < C; j++) {
    int64_t lo = j - p->size + 1 + p->pre, hi = j + p->pre;
    lo = lo < 0 ? 0 : lo;
    hi = hi >= C ? C - 1 : hi;
    double acc = 0;
    for (int64_t c = lo; c <= hi; c++)
      acc += d[c];
    int64_t i = base + j * cs;
    put(r->out, r->fp16, i,
        r->dy[i] * pow(s[j], -p->beta) - 2 * p->alpha_n * p->beta * r->x[i] * acc);
  }
}

static dm_status lrn_run(dm_op_ctx *ctx) {
  DM_TRY(lrn_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  lrn_geom g;
  lrn_params p;
  DM_TRY(lrn_geometry(ctx, x, "X", &g));
  DM_TRY(lrn_params_of(ctx, &p));
  int fp16 = x->dtype == DM_FLOAT16;
  float *owned;
  const float *px = as_f32(x, &owned);
  if (!px)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory widening the FP16 X");
  void *py = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  float *ps = dm_op_num_outputs(ctx) > 1 ? dm_tensor_mutable_data(dm_op_output(ctx, 1)) : NULL;
  const lrn_rows r = {&g, &p, px, NULL, NULL, NULL, py, ps, fp16};
  dm_status st = dm_parallel_rows(ctx, g.N * g.HW, x->numel > (1 << 14),
                                  (size_t)(g.C ? g.C : 1) * sizeof(double), "the channels",
                                  lrn_row, (void *)&r);
  free(owned);
  return st;
}

static dm_status lrn_grad_run(dm_op_ctx *ctx) {
  DM_TRY(lrn_grad_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  lrn_geom g;
  lrn_params p;
  DM_TRY(lrn_geometry(ctx, x, "X", &g));
  DM_TRY(lrn_params_of(ctx, &p));
  int fp16 = x->dtype == DM_FLOAT16;
  float *ox, *oy, *ody;
  const float *px = as_f32(x, &ox), *py = as_f32(dm_op_input(ctx, 1), &oy);
  const float *pdy = as_f32(dm_op_input(ctx, 2), &ody);
  const float *pscale = dm_op_num_inputs(ctx) > 3 ? dm_tensor_data(dm_op_input(ctx, 3)) : NULL;
  if (!px || !py || !pdy) {
    free(ox), free(oy), free(ody);
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory widening FP16 inputs");
  }
  void *pdx = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  const lrn_rows r = {&g, &p, px, py, pdy, pscale, pdx, NULL, fp16};
  dm_status st = dm_parallel_rows(ctx, g.N * g.HW, x->numel > (1 << 14),
                                  2 * (size_t)(g.C ? g.C : 1) * sizeof(double), "the channels",
                                  lrn_grad_row, (void *)&r);
  free(ox), free(oy), free(ody);
  return st;
}

static const dm_op_schema *const schemas[] = {&lrn_schema, &lrn_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "LRN", .device = DM_CPU, .run = lrn_run},
    {.type = "LRNGradient", .device = DM_CPU, .run = lrn_grad_run},
    {0},
};
const dm_op_family dm_family_lrn = {schemas, kernels};
