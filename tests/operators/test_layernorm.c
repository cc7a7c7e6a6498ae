/* test_layernorm.c: LayerNorm and LayerNormGradient against a double-precision reference
 * (FP32, FP16 and BF16 X), finite differences of the gradient, and hostile inputs.
 *
 * Bounds (derived from the kernel): the row sums are in double over D terms, so the
 * statistics carry a relative error of at most (D + 4) 2^-53 of the magnitudes summed,
 * which reaches y = xhat * gamma + beta as (2D + 8) 2^-53 (|xhat gamma| + |beta|) after
 * the division by std (whose own sqrt and divide add 2 ulps of double); y is then
 * rounded once to its dtype: u |y| plus half the dtype's smallest subnormal. mean and std
 * are rounded once to FP32. The gradient's two row means and dx add the same double
 * terms over |g| + |mean g| + |xhat| |mean g xhat|, and its FP32 dgamma, dbeta one FP32
 * rounding after N double terms.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/half.h"
#include "demitasse_plugin.h"
#include "grad_check.h"
#include "op_test_util.h"

/* The reference engine's kernels (operators/layernorm.c), which these bounds are for; the
 * oneDNN engine's (FP32 sums) are tested against them in test_dnnl_layernorm.c. */
static int setup(void **state) {
  return dm_workspace_create((dm_workspace **)state) != DM_OK ||
         dm_workspace_set_engine(*state, "REFERENCE") != DM_OK;
}
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

#define U53 0x1p-53

static double out_u(int mode) { return mode ? opt_mode_u(mode) : OPT_U32; }
static double out_tiny(int mode) { return mode ? opt_mode_tiny(mode) : 0x1p-150; }
static double value_at(int mode, const dm_tensor *t, size_t k) {
  return mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(t))[k])
              : ((const float *)dm_tensor_data(t))[k];
}

/* X of ndim dims d, normalised from `axis`; affine: random gamma, beta. */
static void check_ln(dm_workspace *ws, int ndim, const int64_t *d, int axis, int affine,
                     int mode, double lo, double hi, uint64_t seed) {
  int64_t N = 1, D = 1;
  for (int i = 0; i < ndim; i++)
    *(i < axis ? &N : &D) *= d[i];
  double *x = opt_draw(N * D, lo, hi, mode, &seed);
  double *gb = opt_draw(2 * D, -2, 2, 0, &seed); /* gamma, beta: FP32 values */
  opt_feed_mode(ws, "X", mode, ndim, d, x);
  opt_feed_mode(ws, "gamma", 0, 1, &D, gb);
  opt_feed_mode(ws, "beta", 0, 1, &D, gb + D);
  opt_op *op = opt_new("LayerNorm");
  opt_in(op, "X");
  if (affine)
    opt_in(op, "gamma"), opt_in(op, "beta"), opt_arg_int(op, "elementwise_affine", 1);
  opt_out(op, "Y"), opt_out(op, "mean"), opt_out(op, "std");
  if (axis != 1)
    opt_arg_int(op, "axis", axis - ndim); /* as a negative axis */
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *y = opt_fetch(ws, "Y", opt_mode_dtype(mode), ndim, d);
  int64_t md[DM_MAX_DIMS];
  for (int i = 0; i < axis; i++)
    md[i] = d[i];
  md[axis] = 1;
  const float *pm = dm_tensor_data(opt_fetch(ws, "mean", DM_FLOAT, axis + 1, md));
  const float *ps = dm_tensor_data(opt_fetch(ws, "std", DM_FLOAT, axis + 1, md));
  const double eps = (double)1e-5f, u = out_u(mode);
  double worst = 0;
  for (int64_t i = 0; i < N; i++) {
    const double *r = x + i * D;
    double mean = 0, var = 0, amax = 0;
    for (int64_t j = 0; j < D; j++)
      mean += r[j], amax = fmax(amax, fabs(r[j]));
    mean /= (double)D;
    for (int64_t j = 0; j < D; j++)
      var += (r[j] - mean) * (r[j] - mean);
    double sd = sqrt(var / (double)D + eps);
    double tm = OPT_U32 * fabs(mean) + (D + 4) * U53 * amax + 0x1p-150;
    double ts = OPT_U32 * sd + (2 * D + 8) * U53 * (sd + amax * amax / sd) + 0x1p-150;
    if (!(fabs(pm[i] - mean) <= tm) || !(fabs(ps[i] - sd) <= ts))
      fail_msg("row %lld: mean %.9g std %.9g, reference %.9g %.9g", (long long)i,
               (double)pm[i], (double)ps[i], mean, sd);
    for (int64_t j = 0; j < D; j++) {
      double h = (r[j] - mean) / sd, gm = affine ? gb[j] : 1, bt = affine ? gb[D + j] : 0;
      double ref = h * gm + bt;
      double tol = u * fabs(ref) + (2 * D + 8) * U53 * (fabs(h * gm) + fabs(bt) +
                   amax / sd * fabs(gm)) + out_tiny(mode);
      double got = value_at(mode, y, (size_t)(i * D + j));
      if (!(fabs(got - ref) <= tol))
        fail_msg("%s Y[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", opt_mode_name(mode),
                 (long long)i, (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
    }
  }
  print_message("LayerNorm %s N=%lld D=%lld affine=%d: worst error %.2f of the bound\n",
                opt_mode_name(mode), (long long)N, (long long)D, affine, worst);
  free(x), free(gb);
}

static void test_layernorm_forward(void **state) {
  int64_t d2[] = {8, 10}, d3[] = {2, 3, 50}, d4[] = {2, 4, 3, 64};
  for (int mode = 0; mode < 3; mode++) {
    check_ln(*state, 2, d2, 1, 0, mode, -3, 3, 1 + mode);
    check_ln(*state, 3, d3, 2, 1, mode, -5, 5, 4 + mode);
    check_ln(*state, 3, d3, 1, 1, mode, -5, 5, 7 + mode);
    check_ln(*state, 4, d4, 3, 1, mode, -1, 1, 10 + mode);
    /* a large common offset: the two-pass variance does not cancel it away */
    check_ln(*state, 2, d2, 1, 1, mode, 1000, 1001, 13 + mode);
  }
}

/* LayerNormGradient on given dY, X and the FP32 statistics, against the double formula. */
static void check_ln_grad(dm_workspace *ws, int64_t N, int64_t D, int affine, int mode,
                          uint64_t seed) {
  double *x = opt_draw(N * D, -3, 3, mode, &seed), *dy = opt_draw(N * D, -2, 2, mode, &seed);
  double *gm = opt_draw(D, -2, 2, 0, &seed);
  float *mean = malloc((size_t)N * sizeof *mean), *sd = malloc((size_t)N * sizeof *sd);
  for (int64_t i = 0; i < N; i++) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < D; j++)
      m += x[i * D + j];
    m /= (double)D;
    for (int64_t j = 0; j < D; j++)
      v += (x[i * D + j] - m) * (x[i * D + j] - m);
    mean[i] = (float)m, sd[i] = (float)sqrt(v / (double)D + 1e-5);
  }
  int64_t d[] = {N, D}, md[] = {N, 1};
  opt_feed_mode(ws, "gX", mode, 2, d, x);
  opt_feed_mode(ws, "gdY", mode, 2, d, dy);
  opt_feed_mode(ws, "gY", mode, 2, d, dy); /* not read by the kernel */
  opt_feed(ws, "gmean", DM_FLOAT, 2, md, mean);
  opt_feed(ws, "gstd", DM_FLOAT, 2, md, sd);
  opt_feed_mode(ws, "ggamma", 0, 1, &D, gm);
  opt_op *op = opt_new("LayerNormGradient");
  opt_in(op, "gdY"), opt_in(op, "gY"), opt_in(op, "gmean"), opt_in(op, "gstd"), opt_in(op, "gX");
  opt_out(op, "gdX");
  if (affine) {
    opt_in(op, "ggamma"), opt_out(op, "gdgamma"), opt_out(op, "gdbeta");
    opt_arg_int(op, "elementwise_affine", 1);
  }
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *dx = opt_fetch(ws, "gdX", opt_mode_dtype(mode), 2, d);
  double *rg = calloc((size_t)D, sizeof *rg), *rb = calloc((size_t)D, sizeof *rb);
  double *ag = calloc((size_t)D, sizeof *ag), *ab = calloc((size_t)D, sizeof *ab);
  double worst = 0, u = out_u(mode);
  for (int64_t i = 0; i < N; i++) {
    double inv = 1.0 / sd[i], sg = 0, sgh = 0, ag1 = 0, agh = 0;
    for (int64_t j = 0; j < D; j++) {
      double h = (x[i * D + j] - mean[i]) * inv, g = dy[i * D + j] * (affine ? gm[j] : 1);
      sg += g, sgh += g * h, ag1 += fabs(g), agh += fabs(g * h);
      rg[j] += dy[i * D + j] * h, ag[j] += fabs(dy[i * D + j] * h);
      rb[j] += dy[i * D + j], ab[j] += fabs(dy[i * D + j]);
    }
    sg /= (double)D, sgh /= (double)D, ag1 /= (double)D, agh /= (double)D;
    for (int64_t j = 0; j < D; j++) {
      double h = (x[i * D + j] - mean[i]) * inv, g = dy[i * D + j] * (affine ? gm[j] : 1);
      double ref = (g - sg - h * sgh) * inv;
      double tol = u * fabs(ref) +
                   (2 * D + 16) * U53 * (fabs(g) + ag1 + (fabs(h) + 1) * agh) * inv +
                   out_tiny(mode);
      double got = value_at(mode, dx, (size_t)(i * D + j));
      if (!(fabs(got - ref) <= tol))
        fail_msg("%s dX[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", opt_mode_name(mode),
                 (long long)i, (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
    }
  }
  if (affine) {
    const float *pg = dm_tensor_data(opt_fetch(ws, "gdgamma", DM_FLOAT, 1, &D));
    const float *pb = dm_tensor_data(opt_fetch(ws, "gdbeta", DM_FLOAT, 1, &D));
    for (int64_t j = 0; j < D; j++) {
      double tg = OPT_U32 * fabs(rg[j]) + (N + 8) * U53 * ag[j] * 4 + 0x1p-150;
      double tb = OPT_U32 * fabs(rb[j]) + (N + 8) * U53 * ab[j] * 4 + 0x1p-150;
      if (!(fabs(pg[j] - rg[j]) <= tg) || !(fabs(pb[j] - rb[j]) <= tb))
        fail_msg("dgamma[%lld] = %.9g, dbeta = %.9g; reference %.9g, %.9g", (long long)j,
                 (double)pg[j], (double)pb[j], rg[j], rb[j]);
    }
  }
  print_message("LayerNormGradient %s N=%lld D=%lld affine=%d: worst error %.2f of the bound\n",
                opt_mode_name(mode), (long long)N, (long long)D, affine, worst);
  free(x), free(dy), free(gm), free(mean), free(sd), free(rg), free(rb), free(ag), free(ab);
}

static void test_layernorm_gradient_op(void **state) {
  for (int mode = 0; mode < 3; mode++) {
    check_ln_grad(*state, 8, 10, 1, mode, 31 + mode);
    check_ln_grad(*state, 40, 257, 1, mode, 34 + mode); /* more rows than the kernel's blocks */
    check_ln_grad(*state, 5, 33, 0, mode, 37 + mode);
  }
}

static void test_layernorm_gradient_fd(void **state) {
  (void)state;
  float x[4 * 6], g[6], b[6];
  uint64_t s = 41;
  for (int i = 0; i < 24; i++)
    x[i] = (float)opt_uniform(&s, -2, 2);
  for (int i = 0; i < 6; i++)
    g[i] = (float)opt_uniform(&s, 0.5, 1.5), b[i] = (float)opt_uniform(&s, -1, 1);
  gc_input in[] = {{"X", 2, {4, 6}, x, 1, 0}, {"gamma", 1, {6}, g, 1, 0},
                   {"beta", 1, {6}, b, 1, 0}};
  double r1 = gc_check("type: 'LayerNorm' input: 'X' input: 'gamma' input: 'beta' output: 'Y' "
                       "output: 'mean' output: 'std' arg { name: 'elementwise_affine' i: 1 }",
                       in, 3, 1, 6);
  gc_input in3[] = {{"X", 3, {2, 2, 6}, x, 1, 0}};
  double r2 = gc_check("type: 'LayerNorm' input: 'X' output: 'Y' output: 'mean' output: 'std' "
                       "arg { name: 'axis' i: -1 }", in3, 1, 1, 6);
  double r3 = gc_check("type: 'LayerNorm' input: 'X' output: 'Y' output: 'mean' output: 'std' "
                       "arg { name: 'axis' i: 1 } arg { name: 'epsilon' f: 0.1 }", in3, 1, 1, 12);
  print_message("LayerNorm gradient: worst %.2f / %.2f / %.2f of the tolerance\n", r1, r2, r3);
  const dm_op_schema *sc = dm_schema_lookup("LayerNorm");
  assert_non_null(sc->gradient);
  assert_int_equal(sc->fp32_inputs, 0x6);
  assert_int_equal(sc->fp32_outputs, 0x6);
}

static void test_layernorm_errors(void **state) {
  dm_workspace *ws = *state;
  float z[12] = {0};
  int64_t d[] = {3, 4}, d3[] = {3}, d0[] = {3, 0};
  opt_feed(ws, "X", DM_FLOAT, 2, d, z);
  opt_feed(ws, "g3", DM_FLOAT, 1, d3, z);
  opt_feed(ws, "X0", DM_FLOAT, 2, d0, z);
  double dz[12] = {0};
  opt_feed(ws, "Xd", DM_DOUBLE, 2, d, dz);
  uint16_t hz[12] = {0};
  opt_feed(ws, "gh", DM_FLOAT16, 1, d + 1, hz);
  struct {
    const char *x, *g, *b;
    int affine;
    int64_t axis;
    float eps;
    dm_status want;
    const char *msg;
  } cases[] = {
      {"X", NULL, NULL, 0, 2, 1e-5f, DM_ERR_INVALID, "axis 2 is out of range"},
      {"Xd", NULL, NULL, 0, 1, 1e-5f, DM_ERR_TYPE, "X is DOUBLE"},
      {"X", "g3", "g3", 1, 1, 1e-5f, DM_ERR_SHAPE, "gamma has 3 elements; expected 4"},
      {"X", "gh", "gh", 1, 1, 1e-5f, DM_ERR_TYPE, "gamma is FLOAT16; expected FLOAT"},
      {"X", "g3", NULL, 1, 1, 1e-5f, DM_ERR_INVALID, "elementwise_affine=1 takes 3 inputs, not 2"},
      {"X", "g3", "g3", 0, 1, 1e-5f, DM_ERR_INVALID, "elementwise_affine=0 takes 1 inputs, not 3"},
      {"X", NULL, NULL, 0, 1, -1.0f, DM_ERR_INVALID, "epsilon is -1"},
      {"X0", NULL, NULL, 0, 1, 1e-5f, DM_ERR_SHAPE, "rows from axis 1 are empty"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    opt_op *op = opt_new("LayerNorm");
    opt_in(op, cases[c].x);
    if (cases[c].g)
      opt_in(op, cases[c].g);
    if (cases[c].b)
      opt_in(op, cases[c].b);
    opt_out(op, "Y"), opt_out(op, "m"), opt_out(op, "s");
    if (cases[c].affine)
      opt_arg_int(op, "elementwise_affine", 1);
    if (cases[c].axis != 1)
      opt_arg_int(op, "axis", cases[c].axis);
    if (cases[c].eps != 1e-5f)
      opt_arg_float(op, "epsilon", cases[c].eps);
    opt_expect_error(opt_run(op, ws), cases[c].want, "LayerNorm", cases[c].msg, NULL);
  }
  /* the gradient: dY's shape, the statistics' size, dX written over a statistic */
  int64_t d43[] = {4, 3}, m3[] = {3, 1};
  opt_feed(ws, "dY", DM_FLOAT, 2, d43, z);
  opt_feed(ws, "mu", DM_FLOAT, 2, m3, z);
  opt_op *op = opt_new("LayerNormGradient");
  opt_in(op, "dY"), opt_in(op, "X"), opt_in(op, "mu"), opt_in(op, "mu"), opt_in(op, "X");
  opt_out(op, "dX");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "LayerNormGradient",
                   "dY is FLOAT 4x3 but X is FLOAT 3x4", NULL);
  opt_feed(ws, "dY", DM_FLOAT, 2, d, z);
  opt_feed(ws, "m4", DM_FLOAT, 1, d + 1, z);
  op = opt_new("LayerNormGradient");
  opt_in(op, "dY"), opt_in(op, "X"), opt_in(op, "mu"), opt_in(op, "m4"), opt_in(op, "X");
  opt_out(op, "dX");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "std has 4 elements; expected 3", NULL);
  op = opt_new("LayerNormGradient");
  opt_in(op, "dY"), opt_in(op, "X"), opt_in(op, "mu"), opt_in(op, "mu"), opt_in(op, "X");
  opt_out(op, "mu");
  /* refused before the kernel runs: the schema allows dX in place of dY only */
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "LayerNormGradient", "'mu' is input 2",
                   "cannot run in place", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layernorm_forward),
      cmocka_unit_test(test_layernorm_gradient_op),
      cmocka_unit_test(test_layernorm_gradient_fd),
      cmocka_unit_test(test_layernorm_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
