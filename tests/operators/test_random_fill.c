/* test_random_fill.c: GaussianFill, UniformFill, XavierFill, MSRAFill.
 *
 * The generator is checked against Philox4x32-10's published known answers (Random123
 * kat_vectors). Statistics: with n draws of standard deviation s, the sample mean errs
 * by s / sqrt(n) (one standard error) and the sample standard deviation by about
 * s sqrt((kurtosis - 1) / 4n) <= s / sqrt(2n) for the normal and uniform laws; we allow
 * 5 standard errors (a false failure has probability < 1e-6 per check), and the draws
 * are deterministic anyway, so a pass is reproducible. Determinism: the same seed gives
 * identical bytes in a fresh workspace; another seed, another output name or another
 * run gives different values.
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
#include "op_test_util.h"
#include "operators/common.h"

static void test_philox_known_answers(void **state) {
  (void)state;
  const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                              {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                              {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu}, {0xa4093822u, 0x299f31d0u}};
  const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                               {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                               {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    dm_philox4x32_10(ctr[t], key[t], out);
    for (int i = 0; i < 4; i++)
      if (out[i] != want[t][i])
        fail_msg("vector %d word %d: %08x, want %08x", t, i, out[i], want[t][i]);
  }
}

/* Runs `text` (a one-op net writing blob y) in a fresh workspace; returns a malloc'd copy
 * of y as doubles, its count in *n, and (if raw) its bytes. */
static double *run_fill(const char *text, int64_t *n, void **raw, size_t *raw_len) {
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  dm_net *net = NULL;
  dm_status s = dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net);
  if (s == DM_OK)
    s = dm_net_run(net);
  if (s != DM_OK)
    fail_msg("%s: %s", text, dm_last_error());
  const dm_tensor *y = NULL;
  assert_int_equal(dm_workspace_fetch(ws, "y", &y), DM_OK);
  *n = dm_tensor_numel(y);
  double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
  for (int64_t i = 0; i < *n; i++)
    v[i] = dm_tensor_dtype(y) == DM_FLOAT16
               ? dm_half_to_float(((const uint16_t *)dm_tensor_data(y))[i])
               : ((const float *)dm_tensor_data(y))[i];
  if (raw) {
    *raw_len = dm_tensor_nbytes(y);
    *raw = malloc(*raw_len);
    memcpy(*raw, dm_tensor_data(y), *raw_len);
  }
  dm_workspace_destroy(ws);
  return v;
}

static void moments(const double *v, int64_t n, double *mean, double *sd, double *lo, double *hi) {
  double s = 0, q = 0;
  *lo = INFINITY, *hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    s += v[i];
    *lo = fmin(*lo, v[i]), *hi = fmax(*hi, v[i]);
  }
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++)
    q += (v[i] - *mean) * (v[i] - *mean);
  *sd = sqrt(q / (double)(n - 1));
}

/* mean and sd within 5 standard errors of the law's mu and sigma */
static void check_stats(const char *what, const double *v, int64_t n, double mu, double sigma) {
  double mean, sd, lo, hi;
  moments(v, n, &mean, &sd, &lo, &hi);
  double se_mean = sigma / sqrt((double)n), se_sd = sigma / sqrt(2.0 * (double)n);
  if (fabs(mean - mu) > 5 * se_mean || fabs(sd - sigma) > 5 * se_sd)
    fail_msg("%s: mean %.6g (law %.6g, 5 SE %.3g), sd %.6g (law %.6g, 5 SE %.3g)", what, mean,
             mu, 5 * se_mean, sd, sigma, 5 * se_sd);
}

static void test_gaussian(void **state) {
  (void)state;
  int64_t n;
  for (int half = 0; half < 2; half++) {
    char text[256];
    snprintf(text, sizeof text,
             "op { type: 'GaussianFill' output: 'y' arg { name: 'shape' ints: 200 ints: 500 } "
             "arg { name: 'mean' f: 2 } arg { name: 'std' f: 3 } %s }",
             half ? "arg { name: 'dtype' s: 'FLOAT16' }" : "");
    double *v = run_fill(text, &n, NULL, NULL);
    assert_int_equal(n, 100000);
    check_stats(half ? "GaussianFill FP16" : "GaussianFill", v, n, 2.0, 3.0);
    free(v);
  }
}

static void test_uniform(void **state) {
  (void)state;
  int64_t n;
  double *v = run_fill("op { type: 'UniformFill' output: 'y' arg { name: 'shape' ints: 100000 } "
                       "arg { name: 'min' f: -1 } arg { name: 'max' f: 3 } }",
                       &n, NULL, NULL);
  double mean, sd, lo, hi;
  moments(v, n, &mean, &sd, &lo, &hi);
  assert_true(lo >= -1 && hi <= 3);
  assert_true(lo < -1 + 1e-3 && hi > 3 - 1e-3); /* the whole range is used */
  check_stats("UniformFill", v, n, 1.0, 4.0 / sqrt(12.0));
  free(v);
}

static void test_xavier_msra(void **state) {
  (void)state;
  int64_t n;
  /* Xavier on (64, 3, 5, 5): fan_in = 75, bound sqrt(3/75) = 0.2 */
  double *v = run_fill("op { type: 'XavierFill' output: 'y' "
                       "arg { name: 'shape' ints: 64 ints: 3 ints: 5 ints: 5 } }",
                       &n, NULL, NULL);
  double mean, sd, lo, hi, bound = sqrt(3.0 / 75.0);
  moments(v, n, &mean, &sd, &lo, &hi);
  assert_true(lo >= -bound && hi <= bound);
  assert_true(lo < -0.99 * bound && hi > 0.99 * bound);
  check_stats("XavierFill", v, n, 0.0, bound / sqrt(3.0));
  free(v);
  /* MSRA on (64, 32, 3, 3): fan_out = 64 * 9 = 576, std sqrt(2/576) */
  v = run_fill("op { type: 'MSRAFill' output: 'y' "
               "arg { name: 'shape' ints: 64 ints: 32 ints: 3 ints: 3 } }",
               &n, NULL, NULL);
  check_stats("MSRAFill", v, n, 0.0, sqrt(2.0 / 576.0));
  free(v);
}

static void test_determinism(void **state) {
  (void)state;
  const char *fmt = "op { type: '%s' output: '%s' arg { name: 'shape' ints: 1000 } %s }";
  const char *types[] = {"GaussianFill", "UniformFill", "XavierFill"};
  for (int t = 0; t < 3; t++) {
    char a[256], b[256], c[256], d[256];
    snprintf(a, sizeof a, fmt, types[t], "y", "device_option { random_seed: 7 }");
    snprintf(b, sizeof b, fmt, types[t], "y", "device_option { random_seed: 8 }");
    snprintf(c, sizeof c, fmt, types[t], "y", "");
    snprintf(d, sizeof d, "op { type: '%s' output: 'w' arg { name: 'shape' ints: 1000 } } "
                          "op { type: 'Copy' input: 'w' output: 'y' }", types[t]);
    int64_t n;
    void *ra, *ra2, *rb, *rc, *rc2, *rd;
    size_t la, lb, lc, ld;
    free(run_fill(a, &n, &ra, &la));
    free(run_fill(a, &n, &ra2, &la));
    free(run_fill(b, &n, &rb, &lb));
    free(run_fill(c, &n, &rc, &lc));
    free(run_fill(c, &n, &rc2, &lc));
    free(run_fill(d, &n, &rd, &ld));
    assert_memory_equal(ra, ra2, la);       /* same seed: same bytes */
    assert_memory_equal(rc, rc2, lc);       /* the default seed is fixed */
    assert_memory_not_equal(ra, rb, la);    /* another seed */
    assert_memory_not_equal(ra, rc, la);    /* the default is not seed 7 */
    assert_memory_not_equal(rc, rd, la);    /* another output name */
    free(ra), free(ra2), free(rb), free(rc), free(rc2), free(rd);
  }
  /* a second run of the same op draws fresh values */
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  const char *text = "op { type: 'GaussianFill' output: 'y' arg { name: 'shape' ints: 64 } }";
  dm_net *net = NULL;
  assert_int_equal(dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net), DM_OK);
  assert_int_equal(dm_net_run(net), DM_OK);
  const dm_tensor *y = NULL;
  float first[64];
  assert_int_equal(dm_workspace_fetch(ws, "y", &y), DM_OK);
  memcpy(first, dm_tensor_data(y), sizeof first);
  assert_int_equal(dm_net_run(net), DM_OK);
  assert_int_equal(dm_workspace_fetch(ws, "y", &y), DM_OK);
  assert_memory_not_equal(first, dm_tensor_data(y), sizeof first);
  dm_workspace_destroy(ws);
}

static void test_shapes_and_errors(void **state) {
  (void)state;
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  int64_t two = 2, shape[2] = {3, 4}, d2[3] = {3, 4, 5};
  opt_feed(ws, "s", DM_INT64, 1, &two, shape);
  opt_op *op = opt_new("UniformFill"); /* input_as_shape + extra_shape */
  opt_in(op, "s"), opt_out(op, "y");
  opt_arg_int(op, "input_as_shape", 1);
  const int64_t extra[1] = {5};
  opt_arg_ints(op, "extra_shape", 1, extra);
  assert_int_equal(opt_run(op, ws), DM_OK);
  opt_fetch(ws, "y", DM_FLOAT, 3, d2);
  op = opt_new("UniformFill");
  opt_out(op, "y"), opt_arg_ints(op, "shape", 2, shape);
  opt_arg_float(op, "min", 2), opt_arg_float(op, "max", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "min 2 is greater than max 1", NULL);
  op = opt_new("MSRAFill");
  opt_out(op, "y"), opt_arg_ints(op, "shape", 1, shape);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "MSRAFill needs at least 2 dims", NULL);
  op = opt_new("GaussianFill");
  opt_out(op, "y"), opt_arg_ints(op, "shape", 1, shape), opt_arg_string(op, "dtype", "INT32");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "fills FLOAT or FLOAT16", NULL);
  dm_workspace_destroy(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_philox_known_answers), cmocka_unit_test(test_gaussian),
      cmocka_unit_test(test_uniform),              cmocka_unit_test(test_xavier_msra),
      cmocka_unit_test(test_determinism),          cmocka_unit_test(test_shapes_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
