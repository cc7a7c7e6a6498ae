/* test_softmax.c: Softmax against a double-precision reference, FP32, FP16 and BF16.
 *
 * Bound per element (derived, see the kernel's three steps): x_j - max rounds with
 * relative error u, which exp turns into |x_j - max| u; expf adds at most 2 u; the
 * row sum of D terms at most D u; the division 2 u. So
 * |y - ref| <= ref (|x_j - max| + D + 4) u32 + 2^-149, the last term for the two
 * roundings (exp, then the scaling) that can land in FP32's subnormal range (2^-150
 * each). A 16-bit output adds u |y32| + half its smallest subnormal (FP16: u16 and 2^-25;
 * BF16: 2^-8 and 2^-134).
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

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* x: ndim dims d, softmax from axis (given as arg_axis, possibly negative). */
static void check_softmax(dm_workspace *ws, int ndim, const int64_t *d, int axis, int arg_axis,
                          int mode, double lo, double hi, uint64_t seed) {
  int64_t N = 1, D = 1;
  for (int i = 0; i < ndim; i++)
    *(i < axis ? &N : &D) *= d[i];
  size_t n = (size_t)(N * D);
  float *xf = malloc(n * sizeof *xf);
  uint16_t *xh = malloc(n * 2);
  double *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) {
    xf[i] = (float)opt_uniform(&seed, lo, hi);
    xh[i] = opt_narrow(mode, xf[i]);
    x[i] = mode ? opt_widen(mode, xh[i]) : xf[i];
  }
  dm_dtype t = opt_mode_dtype(mode);
  opt_feed(ws, "X", t, ndim, d, mode ? (void *)xh : (void *)xf);
  opt_op *op = opt_new("Softmax");
  opt_in(op, "X"), opt_out(op, "Y");
  if (arg_axis != 1)
    opt_arg_int(op, "axis", arg_axis);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *y = opt_fetch(ws, "Y", t, ndim, d);
  double worst = 0;
  for (int64_t i = 0; i < N; i++) {
    const double *r = x + i * D;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < D; j++)
      mx = fmax(mx, r[j]);
    for (int64_t j = 0; j < D; j++)
      sum += exp(r[j] - mx);
    for (int64_t j = 0; j < D; j++) {
      double ref = exp(r[j] - mx) / sum;
      double tol = ref * (fabs(r[j] - mx) + (double)D + 4) * OPT_U32 + 0x1p-149;
      if (mode)
        tol += opt_mode_u(mode) * (ref + tol) + opt_mode_tiny(mode);
      size_t k = (size_t)(i * D + j);
      double got = mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(y))[k])
                        : ((const float *)dm_tensor_data(y))[k];
      if (!(fabs(got - ref) <= tol))
        fail_msg("Y[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", (long long)i,
                 (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
    }
  }
  print_message("Softmax %s N=%lld D=%lld: worst error %.2f of the bound\n",
                opt_mode_name(mode), (long long)N, (long long)D, worst);
  free(xf), free(xh), free(x);
}

static void test_softmax_fp32(void **state) {
  int64_t d2[] = {8, 10}, d3[] = {2, 3, 50};
  check_softmax(*state, 2, d2, 1, 1, 0, -5, 5, 1);
  check_softmax(*state, 3, d3, 2, -1, 0, -5, 5, 2);
  check_softmax(*state, 3, d3, 1, 1, 0, -5, 5, 3);
  /* large logits: without the max subtraction expf would overflow */
  check_softmax(*state, 2, d2, 1, 1, 0, 900, 1000, 4);
  int64_t big[] = {64, 1000};
  check_softmax(*state, 2, big, 1, 1, 0, -10, 10, 5);
}

static void test_softmax_fp16(void **state) {
  int64_t d2[] = {8, 10}, d3[] = {2, 3, 50};
  check_softmax(*state, 2, d2, 1, 1, 1, -5, 5, 11);
  check_softmax(*state, 3, d3, 2, -1, 1, -5, 5, 12);
  check_softmax(*state, 2, d2, 1, 1, 1, 60000, 65504, 13); /* near FP16's top */
  int64_t big[] = {64, 1000};
  check_softmax(*state, 2, big, 1, 1, 1, -10, 10, 14);
}

static void test_softmax_bf16(void **state) {
  int64_t d2[] = {8, 10}, d3[] = {2, 3, 50}, d4[] = {2, 3, 4, 5};
  check_softmax(*state, 2, d2, 1, 1, 2, -5, 5, 15);
  check_softmax(*state, 3, d3, 2, -1, 2, -5, 5, 16);
  check_softmax(*state, 4, d4, 2, 2, 2, -5, 5, 17); /* a middle axis */
  check_softmax(*state, 2, d2, 1, 1, 2, 1e30, 3e30, 18); /* BF16 keeps FP32's range */
  int64_t big[] = {64, 1000};
  check_softmax(*state, 2, big, 1, 1, 2, -10, 10, 19);
}

static void test_softmax_errors(void **state) {
  dm_workspace *ws = *state;
  float z[4] = {0};
  int64_t d[] = {2, 2};
  opt_feed(ws, "X", DM_FLOAT, 2, d, z);
  opt_op *op = opt_new("Softmax");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_int(op, "axis", 3);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "axis 3 is out of range", NULL);
  double dz[4] = {0};
  opt_feed(ws, "D", DM_DOUBLE, 2, d, dz);
  op = opt_new("Softmax");
  opt_in(op, "D"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "X is DOUBLE", NULL);
}

static void test_softmax_gradient_fd(void **state) {
  (void)state;
  float x[2 * 3 * 5];
  uint64_t s = 21;
  for (int i = 0; i < 30; i++)
    x[i] = (float)opt_uniform(&s, -3, 3);
  gc_input in2[] = {{"X", 2, {6, 5}, x, 1, 0}};
  double r1 = gc_check("type: 'Softmax' input: 'X' output: 'Y'", in2, 1, 1, 5);
  gc_input in3[] = {{"X", 3, {2, 3, 5}, x, 1, 0}};
  double r2 = gc_check("type: 'Softmax' input: 'X' output: 'Y' arg { name: 'axis' i: 1 }", in3,
                       1, 1, 15);
  double r3 = gc_check("type: 'Softmax' input: 'X' output: 'Y' arg { name: 'axis' i: -1 }", in3,
                       1, 1, 5);
  gc_input in1[] = {{"X", 2, {1, 7}, x, 1, 0}}; /* batch 1 */
  double r4 = gc_check("type: 'Softmax' input: 'X' output: 'Y'", in1, 1, 1, 7);
  print_message("Softmax gradient: worst %.2f / %.2f / %.2f / %.2f of the tolerance\n", r1, r2,
                r3, r4);
  const dm_op_schema *sc = dm_schema_lookup("Softmax");
  assert_non_null(sc->gradient);
  assert_non_null(sc->infer);
  assert_non_null(sc->cost);
  assert_int_equal(dm_schema_lookup("SoftmaxGradient")->precision, DM_PREC_FP32);
}

/* SoftmaxGradient on given Y, dY (FP32 or FP16) against the double formula. */
static void check_softmax_grad(dm_workspace *ws, int64_t N, int64_t D, int mode, uint64_t seed) {
  size_t n = (size_t)(N * D);
  float *yf = malloc(n * sizeof *yf), *df = malloc(n * sizeof *df);
  uint16_t *yh = malloc(n * 2), *dh = malloc(n * 2);
  double *y = malloc(n * sizeof *y), *dy = malloc(n * sizeof *dy);
  for (size_t i = 0; i < n; i++) {
    yf[i] = (float)opt_uniform(&seed, 0, 1), df[i] = (float)opt_uniform(&seed, -2, 2);
    yh[i] = opt_narrow(mode, yf[i]), dh[i] = opt_narrow(mode, df[i]);
    y[i] = mode ? opt_widen(mode, yh[i]) : yf[i];
    dy[i] = mode ? opt_widen(mode, dh[i]) : df[i];
  }
  dm_dtype t = opt_mode_dtype(mode);
  int64_t d[] = {N, D};
  opt_feed(ws, "Yg", t, 2, d, mode ? (void *)yh : (void *)yf);
  opt_feed(ws, "dYg", t, 2, d, mode ? (void *)dh : (void *)df);
  opt_op *op = opt_new("SoftmaxGradient");
  opt_in(op, "Yg"), opt_in(op, "dYg"), opt_out(op, "dXg");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *dx = opt_fetch(ws, "dXg", t, 2, d);
  double worst = 0;
  for (int64_t i = 0; i < N; i++) {
    double dot = 0, S = 0;
    for (int64_t j = 0; j < D; j++)
      dot += dy[i * D + j] * y[i * D + j], S += fabs(dy[i * D + j] * y[i * D + j]);
    for (int64_t j = 0; j < D; j++) {
      size_t k = (size_t)(i * D + j);
      double ref = y[k] * (dy[k] - dot);
      double tol = fabs(y[k]) * (2 * OPT_U32 * (fabs(dy[k]) + fabs(dot)) + (double)(D + 2) * 0x1p-53 * S) +
                   OPT_U32 * fabs(ref) + 0x1p-149;
      if (mode)
        tol += opt_mode_u(mode) * (fabs(ref) + tol) + opt_mode_tiny(mode);
      double got = mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(dx))[k])
                        : ((const float *)dm_tensor_data(dx))[k];
      if (!(fabs(got - ref) <= tol))
        fail_msg("dX[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", (long long)i,
                 (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
    }
  }
  print_message("SoftmaxGradient %s N=%lld D=%lld: worst error %.2f of the bound\n",
                opt_mode_name(mode), (long long)N, (long long)D, worst);
  free(yf), free(df), free(yh), free(dh), free(y), free(dy);
}

static void test_softmax_gradient_op(void **state) {
  check_softmax_grad(*state, 8, 10, 0, 31);
  check_softmax_grad(*state, 3, 1000, 0, 32);
  check_softmax_grad(*state, 8, 10, 1, 33);
  check_softmax_grad(*state, 3, 1000, 1, 34);
  check_softmax_grad(*state, 8, 10, 2, 35);
  check_softmax_grad(*state, 3, 1000, 2, 36);
  dm_workspace *ws = *state;
  float z[6] = {0};
  int64_t a[] = {2, 3}, b[] = {3, 2};
  opt_feed(ws, "Ya", DM_FLOAT, 2, a, z);
  opt_feed(ws, "dYb", DM_FLOAT, 2, b, z);
  opt_op *op = opt_new("SoftmaxGradient");
  opt_in(op, "Ya"), opt_in(op, "dYb"), opt_out(op, "dX");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "Y is FLOAT 2x3 but dY is FLOAT 3x2", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_fp32),
      cmocka_unit_test(test_softmax_fp16),
      cmocka_unit_test(test_softmax_bf16),
      cmocka_unit_test(test_softmax_errors),
      cmocka_unit_test(test_softmax_gradient_fd),
      cmocka_unit_test(test_softmax_gradient_op),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
