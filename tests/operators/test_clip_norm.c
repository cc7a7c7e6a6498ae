/* test_clip_norm.c: ClipByGlobalNorm against torch.nn.utils.clip_grad_norm_'s rule
 * computed here in double: several gradients of different shapes, clipped and not, the
 * norm output, a non-finite norm (gradients left bit-identical), and refusals.
 *
 * Bounds (derived): the kernel sums squares in double (relative error below n 2^-53, far
 * under FP32's), so its norm is the reference's rounded once to FP32: within u32 |norm|.
 * The coefficient clip / (norm + 1e-6) is formed in double and rounded once to FP32, and
 * each g is multiplied by it in FP32: two roundings, so |g' - ref| <= 3 u32 |ref|.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "demitasse_plugin.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

enum { NG = 3 };
static const int64_t g_n[NG] = {7, 12, 30};
static const char *const g_names[NG] = {"g0", "g1", "g2"};

/* Feeds the gradients g_k (values in [-a, a)) and keeps them in f. */
static void feed_grads(dm_workspace *ws, float f[NG][30], double a, uint64_t seed) {
  for (int k = 0; k < NG; k++) {
    for (int64_t i = 0; i < g_n[k]; i++)
      f[k][i] = (float)opt_uniform(&seed, -a, a);
    int64_t d2[2] = {g_n[k] / 2 > 1 ? 2 : 1, g_n[k] / (g_n[k] / 2 > 1 ? 2 : 1)};
    if (k == 0)
      opt_feed(ws, g_names[k], DM_FLOAT, 1, &g_n[k], f[k]);
    else
      opt_feed(ws, g_names[k], DM_FLOAT, 2, d2, f[k]);
  }
}

static dm_status run_clip(dm_workspace *ws, float clip, int with_norm) {
  opt_op *op = opt_new("ClipByGlobalNorm");
  for (int k = 0; k < NG; k++)
    opt_in(op, g_names[k]);
  for (int k = 0; k < NG; k++)
    opt_out(op, g_names[k]);
  if (with_norm)
    opt_out(op, "norm");
  opt_arg_float(op, "clip_norm", clip);
  return opt_run(op, ws);
}

static const float *grad_data(dm_workspace *ws, int k) {
  const dm_tensor *t = NULL;
  assert_int_equal(dm_workspace_fetch(ws, g_names[k], &t), DM_OK);
  assert_int_equal(dm_tensor_dtype(t), DM_FLOAT);
  assert_int_equal(dm_tensor_numel(t), g_n[k]);
  return dm_tensor_data(t);
}

static void check_case(dm_workspace *ws, double a, float clip, uint64_t seed, int expect_clip) {
  float f[NG][30];
  feed_grads(ws, f, a, seed);
  double ss = 0;
  for (int k = 0; k < NG; k++)
    for (int64_t i = 0; i < g_n[k]; i++)
      ss += (double)f[k][i] * f[k][i];
  double norm = sqrt(ss), coef = fmin(1.0, (double)clip / (norm + 1e-6));
  assert_int_equal(coef < 1, expect_clip);
  assert_int_equal(run_clip(ws, clip, 1), DM_OK);
  double got = *(const float *)dm_tensor_data(opt_fetch(ws, "norm", DM_FLOAT, 0, NULL));
  if (!(fabs(got - norm) <= OPT_U32 * norm))
    fail_msg("norm %.9g, reference %.9g", got, norm);
  double worst = 0;
  for (int k = 0; k < NG; k++) {
    const float *g = grad_data(ws, k);
    for (int64_t i = 0; i < g_n[k]; i++) {
      double ref = coef * f[k][i], tol = 3 * OPT_U32 * fabs(ref);
      if (!(fabs(g[i] - ref) <= tol))
        fail_msg("g%d[%lld] = %.9g, reference %.9g (tolerance %.3g)", k, (long long)i, g[i],
                 ref, tol);
      worst = fmax(worst, tol > 0 ? fabs(g[i] - ref) / tol : 0);
    }
  }
  /* the clipped global norm is clip_norm (up to the 1e-6 and roundings) */
  if (expect_clip) {
    double s2 = 0;
    for (int k = 0; k < NG; k++)
      for (int64_t i = 0; i < g_n[k]; i++)
        s2 += (double)grad_data(ws, k)[i] * grad_data(ws, k)[i];
    assert_true(fabs(sqrt(s2) - clip) <= 1e-5 * clip + 1e-6);
  }
  print_message("ClipByGlobalNorm norm %.4g clip %.4g: worst %.2f of the bound\n", norm,
                (double)clip, worst);
}

static void test_clip(void **state) {
  dm_workspace *ws = *state;
  check_case(ws, 1, 0.5f, 1, 1);     /* norm about 4: scaled down to 0.5 */
  check_case(ws, 1, 100.0f, 2, 0);   /* under the bound: unchanged */
  check_case(ws, 1e-3, 1e-4f, 3, 1); /* small gradients, smaller bound */
  check_case(ws, 1e20, 1.0f, 4, 1);  /* squares past FP32's range sum in double */
  /* unclipped: bit-identical, and the op without the norm output works too */
  float f[NG][30];
  feed_grads(ws, f, 1, 5);
  assert_int_equal(run_clip(ws, 1e3f, 0), DM_OK);
  for (int k = 0; k < NG; k++)
    assert_memory_equal(grad_data(ws, k), f[k], (size_t)g_n[k] * sizeof(float));
}

static void test_nonfinite(void **state) {
  dm_workspace *ws = *state;
  const float bad[] = {INFINITY, NAN};
  for (int b = 0; b < 2; b++) {
    float f[NG][30];
    feed_grads(ws, f, 1, 10 + (uint64_t)b);
    f[1][3] = bad[b];
    int64_t d2[2] = {2, 6};
    opt_feed(ws, "g1", DM_FLOAT, 2, d2, f[1]);
    assert_int_equal(run_clip(ws, 0.1f, 1), DM_OK);
    for (int k = 0; k < NG; k++)
      assert_memory_equal(grad_data(ws, k), f[k], (size_t)g_n[k] * sizeof(float));
    float norm = *(const float *)dm_tensor_data(opt_fetch(ws, "norm", DM_FLOAT, 0, NULL));
    assert_true(b ? isnan(norm) : isinf(norm));
  }
}

static void test_errors(void **state) {
  dm_workspace *ws = *state;
  float f[NG][30];
  feed_grads(ws, f, 1, 20);
  opt_expect_error(run_clip(ws, 0, 0), DM_ERR_INVALID, "clip_norm is 0", NULL);
  opt_expect_error(run_clip(ws, -1, 0), DM_ERR_INVALID, "positive", NULL);
  /* not in place */
  opt_op *op = opt_new("ClipByGlobalNorm");
  opt_in(op, "g0"), opt_out(op, "other");
  opt_arg_float(op, "clip_norm", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "scales in place", NULL);
  /* output count */
  op = opt_new("ClipByGlobalNorm");
  opt_in(op, "g0"), opt_in(op, "g1"), opt_out(op, "g0");
  opt_arg_float(op, "clip_norm", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "2 gradients and 1 outputs", NULL);
  /* a gradient twice; the norm into a gradient */
  op = opt_new("ClipByGlobalNorm");
  opt_in(op, "g0"), opt_in(op, "g0"), opt_out(op, "g0"), opt_out(op, "g0");
  opt_arg_float(op, "clip_norm", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "both 'g0'", NULL);
  op = opt_new("ClipByGlobalNorm");
  opt_in(op, "g0"), opt_in(op, "g1"), opt_out(op, "g0"), opt_out(op, "g1"), opt_out(op, "g1");
  opt_arg_float(op, "clip_norm", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "both 'g1'", NULL);
  /* FP16 gradients are refused: the clip runs on the FP32 masters */
  uint16_t h[4] = {0};
  int64_t d4[1] = {4};
  opt_feed(ws, "h", DM_FLOAT16, 1, d4, h);
  op = opt_new("ClipByGlobalNorm");
  opt_in(op, "h"), opt_out(op, "h");
  opt_arg_float(op, "clip_norm", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "gradient 0 'h' is FLOAT16", NULL);
  /* the schema: an optimizer-role FP32 op with no gradient */
  const dm_op_schema *sc = dm_schema_lookup("ClipByGlobalNorm");
  assert_non_null(sc);
  assert_int_equal(sc->precision, DM_PREC_FP32);
  assert_int_equal(sc->role, DM_ROLE_OPTIMIZER);
  assert_null(sc->gradient);
  assert_int_equal(sc->no_gradient, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_clip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nonfinite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
