/* test_elementwise.c: Sum against a reference summed here (double for floating types,
 * exact modular arithmetic for integers), in place on X0, and its shape/type errors.
 *
 * Bounds: n inputs summed left to right in FP32 err by at most (n - 1) u32 sum|x|;
 * FP16 inputs are summed the same way in FP32, then rounded once: + u16 |ref| + 2^-25.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "op_test_util.h"

enum { NIN = 4, LEN = 2500 }; /* more than one 1024-element block, with a tail */

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static const char *const names[NIN] = {"a", "b", "c", "d"};

static dm_status run_sum(dm_workspace *ws, int n, const char *out) {
  opt_op *op = opt_new("Sum");
  for (int i = 0; i < n; i++)
    opt_in(op, names[i]);
  opt_out(op, out);
  return opt_run(op, ws);
}

static void test_sum_floating(void **state) {
  dm_workspace *ws = *state;
  static float xf[NIN][LEN];
  static uint16_t xh[NIN][LEN];
  static double xd[NIN][LEN];
  int64_t dims[] = {50, 50};
  uint64_t seed = 3;
  for (int k = 0; k < NIN; k++)
    for (int i = 0; i < LEN; i++) {
      xd[k][i] = opt_uniform(&seed, -100, 100);
      xf[k][i] = (float)xd[k][i];
      xh[k][i] = dm_float_to_half(xf[k][i]);
    }
  for (int type = 0; type < 3; type++) /* FLOAT, FLOAT16, DOUBLE */
    for (int inplace = 0; inplace < 2; inplace++) {
      dm_dtype t = type == 0 ? DM_FLOAT : type == 1 ? DM_FLOAT16 : DM_DOUBLE;
      for (int k = 0; k < NIN; k++)
        opt_feed(ws, names[k], t, 2, dims, type == 0 ? (void *)xf[k] : type == 1 ? (void *)xh[k] : (void *)xd[k]);
      const char *out = inplace ? "a" : "y";
      assert_int_equal(run_sum(ws, NIN, out), DM_OK);
      const dm_tensor *y = opt_fetch(ws, out, t, 2, dims);
      for (int i = 0; i < LEN; i++) {
        double ref = 0, S = 0;
        for (int k = 0; k < NIN; k++) {
          double v = type == 0 ? xf[k][i] : type == 1 ? dm_half_to_float(xh[k][i]) : xd[k][i];
          ref += v, S += fabs(v);
        }
        double u = type == 2 ? 0x1p-53 : OPT_U32;
        double tol = (NIN - 1) * u * S + (type == 1 ? OPT_U16 * fabs(ref) + 0x1p-25 : 0);
        double got = type == 0   ? ((const float *)dm_tensor_data(y))[i]
                     : type == 1 ? dm_half_to_float(((const uint16_t *)dm_tensor_data(y))[i])
                                 : ((const double *)dm_tensor_data(y))[i];
        if (!(fabs(got - ref) <= tol))
          fail_msg("type %d in place %d: y[%d] = %.17g, reference %.17g", type, inplace, i, got,
                   ref);
      }
    }
}

static void test_sum_integers(void **state) {
  dm_workspace *ws = *state;
  static int32_t a32[NIN][LEN];
  static int64_t a64[NIN][LEN];
  int64_t dims[] = {LEN};
  uint64_t seed = 5;
  for (int k = 0; k < NIN; k++)
    for (int i = 0; i < LEN; i++) {
      a32[k][i] = (int32_t)opt_uniform(&seed, -1e9, 1e9); /* sums overflow: wrap */
      a64[k][i] = (int64_t)opt_uniform(&seed, -4e18, 4e18);
    }
  for (int k = 0; k < NIN; k++)
    opt_feed(ws, names[k], DM_INT32, 1, dims, a32[k]);
  assert_int_equal(run_sum(ws, NIN, "a"), DM_OK);
  const int32_t *y32 = dm_tensor_data(opt_fetch(ws, "a", DM_INT32, 1, dims));
  for (int i = 0; i < LEN; i++) {
    uint32_t r = 0;
    for (int k = 0; k < NIN; k++)
      r += (uint32_t)a32[k][i];
    assert_int_equal((uint32_t)y32[i], r);
  }
  for (int k = 0; k < NIN; k++)
    opt_feed(ws, names[k], DM_INT64, 1, dims, a64[k]);
  assert_int_equal(run_sum(ws, NIN, "y"), DM_OK);
  const int64_t *y64 = dm_tensor_data(opt_fetch(ws, "y", DM_INT64, 1, dims));
  for (int i = 0; i < LEN; i++) {
    uint64_t r = 0;
    for (int k = 0; k < NIN; k++)
      r += (uint64_t)a64[k][i];
    assert_true((uint64_t)y64[i] == r);
  }
  /* one input: a copy */
  assert_int_equal(run_sum(ws, 1, "y1"), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "y1", DM_INT64, 1, dims)), a64[0],
                      sizeof a64[0]);
}

static void test_sum_errors(void **state) {
  dm_workspace *ws = *state;
  double z[8] = {0}; /* big enough for every dtype fed below */
  int64_t d23[] = {2, 3}, d24[] = {2, 4};
  opt_feed(ws, "a", DM_FLOAT, 2, d23, z);
  opt_feed(ws, "b", DM_FLOAT, 2, d24, z);
  opt_expect_error(run_sum(ws, 2, "y"), DM_ERR_SHAPE, "op 0 (Sum)",
                   "input 1 'b' is 2x4, but X0 'a' is 2x3", NULL);
  opt_feed(ws, "b", DM_DOUBLE, 2, d23, z);
  opt_expect_error(run_sum(ws, 2, "y"), DM_ERR_TYPE, "input 1 'b' is DOUBLE, but X0 is FLOAT",
                   NULL);
  opt_feed(ws, "a", DM_UINT8, 2, d23, z);
  opt_expect_error(run_sum(ws, 1, "y"), DM_ERR_TYPE, "X0 is UINT8", NULL);
  opt_feed(ws, "b", DM_FLOAT, 2, d23, z);
  opt_op *op = opt_new("Sum");
  opt_in(op, "a"), opt_in(op, "b"), opt_out(op, "b"); /* only X0 may be overwritten */
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "cannot run in place", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sum_floating),
      cmocka_unit_test(test_sum_integers),
      cmocka_unit_test(test_sum_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
