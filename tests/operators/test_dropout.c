/* test_dropout.c: Dropout and DropoutGrad: the mask and scaling against a double
 * reference (FP32 and FP16), ratio 0, is_test (copy and in place), the keep rate,
 * reproducibility (two workspaces, one seed: the same masks; another seed or the next
 * run: different ones), the gradient, and bad arguments.
 *
 * Bound: a kept element is x / (1 - ratio) formed in double and rounded once, so
 * |y - ref| <= u_out |ref| + s_out (u32 or u16; s_out half the subnormal spacing).
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

#include "core/half.h"
#include "demitasse_plugin.h"
#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static double val(const dm_tensor *t, int64_t i) {
  return dm_tensor_dtype(t) == DM_FLOAT16
             ? dm_half_to_float(((const uint16_t *)dm_tensor_data(t))[i])
             : ((const float *)dm_tensor_data(t))[i];
}

/* Feeds X (n values in [-4, 4)) in the dtype; returns the values as the op sees them. */
static double *feed_x(dm_workspace *ws, const char *name, int fp16, int64_t n, uint64_t seed) {
  double *x = malloc((size_t)n * sizeof *x);
  float *xf = malloc((size_t)n * sizeof *xf);
  uint16_t *xh = malloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++) {
    xf[i] = (float)opt_uniform(&seed, -4, 4);
    xh[i] = dm_float_to_half(xf[i]);
    x[i] = fp16 ? dm_half_to_float(xh[i]) : xf[i];
  }
  int64_t d[] = {n};
  opt_feed(ws, name, fp16 ? DM_FLOAT16 : DM_FLOAT, 1, d, fp16 ? (void *)xh : (void *)xf);
  free(xf), free(xh);
  return x;
}

static void check_train(dm_workspace *ws, int fp16, float ratio, int64_t n, uint64_t seed) {
  double *x = feed_x(ws, "X", fp16, n, seed);
  opt_op *op = opt_new("Dropout");
  opt_in(op, "X"), opt_out(op, "Y"), opt_out(op, "M");
  opt_arg_float(op, "ratio", ratio);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  int64_t d[] = {n};
  const dm_tensor *y = opt_fetch(ws, "Y", fp16 ? DM_FLOAT16 : DM_FLOAT, 1, d);
  const uint8_t *m = dm_tensor_data(opt_fetch(ws, "M", DM_BOOL, 1, d));
  double scale = 1.0 / (1.0 - (double)ratio), u = fp16 ? OPT_U16 : OPT_U32;
  double sub = fp16 ? 0x1p-25 : 0x1p-150, worst = 0;
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) {
    assert_true(m[i] == 0 || m[i] == 1);
    kept += m[i];
    double ref = m[i] ? x[i] * scale : 0, tol = u * fabs(ref) + sub;
    if (!(fabs(val(y, i) - ref) <= tol))
      fail_msg("Y[%lld] = %.9g, reference %.9g (mask %d)", (long long)i, val(y, i), ref, m[i]);
    worst = fmax(worst, fabs(val(y, i) - ref) / tol);
  }
  /* The keep count is Binomial(n, 1 - ratio): allow 6 standard deviations. */
  double mean = (double)n * (1 - ratio), sd = sqrt((double)n * ratio * (1 - ratio));
  if (!(fabs((double)kept - mean) <= 6 * sd))
    fail_msg("kept %lld of %lld with ratio %g", (long long)kept, (long long)n, (double)ratio);
  if (ratio == 0.0f)
    assert_int_equal(kept, n);

  /* DropoutGrad with the same mask: dX = dY * mask * scale. */
  double *dy = feed_x(ws, "dY", fp16, n, seed + 100);
  op = opt_new("DropoutGrad");
  opt_in(op, "dY"), opt_in(op, "M"), opt_out(op, "dX");
  opt_arg_float(op, "ratio", ratio);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *dx = opt_fetch(ws, "dX", fp16 ? DM_FLOAT16 : DM_FLOAT, 1, d);
  for (int64_t i = 0; i < n; i++) {
    double ref = m[i] ? dy[i] * scale : 0, tol = u * fabs(ref) + sub;
    if (!(fabs(val(dx, i) - ref) <= tol))
      fail_msg("dX[%lld] = %.9g, reference %.9g", (long long)i, val(dx, i), ref);
    worst = fmax(worst, fabs(val(dx, i) - ref) / tol);
  }
  print_message("Dropout %s ratio %g n=%lld: kept %lld, worst error %.2f of the bound\n",
                fp16 ? "FP16" : "FP32", (double)ratio, (long long)n, (long long)kept, worst);
  free(x), free(dy);
}

static void test_train(void **state) {
  dm_workspace *ws = *state;
  check_train(ws, 0, 0.5f, 10000, 1);
  check_train(ws, 0, 0.3f, 4001, 2);
  check_train(ws, 0, 0.0f, 999, 3);
  check_train(ws, 1, 0.5f, 10000, 4);
  check_train(ws, 1, 0.2f, 333, 5);
  check_train(ws, 0, 0.5f, 1, 6);
}

static void test_is_test(void **state) {
  dm_workspace *ws = *state;
  for (int fp16 = 0; fp16 < 2; fp16++)
    for (int inplace = 0; inplace < 2; inplace++) {
      double *x = feed_x(ws, "X", fp16, 37, 10 + (uint64_t)fp16);
      const dm_tensor *xt = opt_fetch(ws, "X", fp16 ? DM_FLOAT16 : DM_FLOAT, 1, (int64_t[]){37});
      size_t bytes = dm_tensor_nbytes(xt);
      void *orig = malloc(bytes);
      memcpy(orig, dm_tensor_data(xt), bytes);
      opt_op *op = opt_new("Dropout");
      opt_in(op, "X"), opt_out(op, inplace ? "X" : "Y");
      opt_arg_int(op, "is_test", 1);
      opt_arg_float(op, "ratio", 0.7f);
      if (opt_run(op, ws) != DM_OK)
        fail_msg("%s", dm_last_error());
      const dm_tensor *y = opt_fetch(ws, inplace ? "X" : "Y", fp16 ? DM_FLOAT16 : DM_FLOAT, 1,
                                     (int64_t[]){37});
      assert_memory_equal(dm_tensor_data(y), orig, bytes); /* bit-identical, unscaled */
      free(orig), free(x);
    }
}

/* Runs a one-Dropout net twice in a fresh workspace; copies the two masks out. */
static void two_runs(int has_seed, uint32_t seed, uint8_t *m1, uint8_t *m2, int64_t n) {
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  float *x = calloc((size_t)n, sizeof *x);
  opt_feed(ws, "X", DM_FLOAT, 1, &n, x);
  char text[512];
  snprintf(text, sizeof text,
           "name: 'drop' op { type: 'Dropout' input: 'X' output: 'Y' output: 'M' "
           "arg { name: 'ratio' f: 0.5 } %s }",
           has_seed ? "device_option { random_seed: SEED }" : "");
  char *p = strstr(text, "SEED");
  if (p) {
    char tail[256];
    snprintf(tail, sizeof tail, "%s", p + 4);
    snprintf(p, sizeof text - (size_t)(p - text), "%u%s", (unsigned)seed, tail);
  }
  dm_net *net = NULL;
  if (dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net) != DM_OK)
    fail_msg("%s", dm_last_error());
  for (int r = 0; r < 2; r++) {
    if (dm_net_run(net) != DM_OK)
      fail_msg("%s", dm_last_error());
    const dm_tensor *m = opt_fetch(ws, "M", DM_BOOL, 1, &n);
    memcpy(r ? m2 : m1, dm_tensor_data(m), (size_t)n);
  }
  free(x);
  dm_workspace_destroy(ws);
}

static void test_determinism(void **state) {
  (void)state;
  enum { n = 4096 };
  static uint8_t a1[n], a2[n], b1[n], b2[n], c1[n], c2[n], d1[n], d2[n];
  two_runs(1, 42, a1, a2, n);
  two_runs(1, 42, b1, b2, n);
  two_runs(1, 43, c1, c2, n);
  two_runs(0, 0, d1, d2, n);
  /* Same seed, two workspaces: the same masks run by run. */
  assert_memory_equal(a1, b1, n);
  assert_memory_equal(a2, b2, n);
  /* The next run and another seed draw new bits. */
  assert_memory_not_equal(a1, a2, n);
  assert_memory_not_equal(a1, c1, n);
  assert_memory_not_equal(c1, c2, n);
  /* Without a seed the masks are still reproducible, and differ from run to run. */
  uint8_t e1[n], e2[n];
  two_runs(0, 0, e1, e2, n);
  assert_memory_equal(d1, e1, n);
  assert_memory_not_equal(d1, d2, n);
}

static void test_gradient(void **state) {
  (void)state;
  /* ratio 0 keeps every element, so the forward is deterministic and finite differences
   * apply: this checks the maker (DropoutGrad on the mask) end to end. */
  float x[24];
  uint64_t s = 61;
  for (int i = 0; i < 24; i++)
    x[i] = (float)opt_uniform(&s, -1, 1);
  gc_input in[] = {{"X", 2, {4, 6}, x, 1, 0}};
  double r = gc_check("type: 'Dropout' input: 'X' output: 'Y' output: 'M' "
                      "arg { name: 'ratio' f: 0 }", in, 1, 1, 1);
  print_message("Dropout gradient (ratio 0): worst %.2f of the tolerance\n", r);
  const dm_op_schema *sc = dm_schema_lookup("Dropout");
  assert_non_null(sc);
  assert_non_null(sc->gradient);
  assert_int_equal(sc->precision, DM_PREC_FOLLOW);
}

static void test_errors(void **state) {
  dm_workspace *ws = *state;
  float z[6] = {0};
  int64_t d[] = {6}, d5[] = {5};
  opt_feed(ws, "X", DM_FLOAT, 1, d, z);
  opt_op *op = opt_new("Dropout");
  opt_in(op, "X"), opt_out(op, "Y"), opt_out(op, "M");
  opt_arg_float(op, "ratio", 1.5f);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "ratio is 1.5", "[0, 1]", NULL);
  op = opt_new("Dropout");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "needs the mask output", NULL);
  uint8_t m5[5] = {0};
  opt_feed(ws, "M5", DM_BOOL, 1, d5, m5);
  op = opt_new("DropoutGrad");
  opt_in(op, "X"), opt_in(op, "M5"), opt_out(op, "dX");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "mask is BOOL 5; expected BOOL 6", NULL);
  int32_t iz[6] = {0};
  opt_feed(ws, "I", DM_INT32, 1, d, iz);
  op = opt_new("Dropout");
  opt_in(op, "I"), opt_out(op, "Y"), opt_out(op, "M");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "X is INT32", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train),       cmocka_unit_test(test_is_test),
      cmocka_unit_test(test_determinism), cmocka_unit_test(test_gradient),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
