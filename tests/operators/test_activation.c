/* test_activation.c: Relu against max(x, 0) computed here, FP32 and FP16, in place. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static dm_status run_relu(dm_workspace *ws, const char *in, const char *out) {
  opt_op *op = opt_new("Relu");
  opt_in(op, in), opt_out(op, out);
  return opt_run(op, ws);
}

/* The reference: positive values and NaN pass, everything else (-0, -inf too) is +0. */
static double ref_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0.0; }

static void test_relu_fp32(void **state) {
  dm_workspace *ws = *state;
  enum { N = 1000 };
  float x[N];
  uint64_t seed = 7;
  for (int i = 0; i < N; i++)
    x[i] = (float)opt_uniform(&seed, -10, 10);
  x[0] = -0.0f, x[1] = NAN, x[2] = -INFINITY, x[3] = INFINITY, x[4] = 1e-40f, x[5] = -1e-40f;
  int64_t d[] = {10, 100};
  for (int inplace = 0; inplace < 2; inplace++) {
    opt_feed(ws, "X", DM_FLOAT, 2, d, x);
    assert_int_equal(run_relu(ws, "X", inplace ? "X" : "Y"), DM_OK);
    const float *y = dm_tensor_data(opt_fetch(ws, inplace ? "X" : "Y", DM_FLOAT, 2, d));
    for (int i = 0; i < N; i++) {
      double r = ref_relu(x[i]);
      if (isnan(r) ? !isnan(y[i]) : (y[i] != r || signbit(y[i])))
        fail_msg("Relu(%a) = %a", (double)x[i], (double)y[i]);
    }
  }
}

static void test_relu_fp16(void **state) {
  dm_workspace *ws = *state;
  /* every FP16 pattern */
  static uint16_t x[65536];
  for (uint32_t i = 0; i < 65536; i++)
    x[i] = (uint16_t)i;
  int64_t d[] = {65536};
  for (int inplace = 0; inplace < 2; inplace++) {
    opt_feed(ws, "X", DM_FLOAT16, 1, d, x);
    assert_int_equal(run_relu(ws, "X", inplace ? "X" : "Y"), DM_OK);
    const uint16_t *y = dm_tensor_data(opt_fetch(ws, inplace ? "X" : "Y", DM_FLOAT16, 1, d));
    for (uint32_t i = 0; i < 65536; i++) {
      double r = ref_relu(dm_half_to_float(x[i]));
      double got = dm_half_to_float(y[i]);
      int ok = isnan(r) ? y[i] == x[i] : (got == r && !signbit(got));
      if (!ok)
        fail_msg("Relu(half %04x) = %04x", x[i], y[i]);
    }
  }
}

static void test_relu_type_error(void **state) {
  dm_workspace *ws = *state;
  int32_t v[2] = {1, -1};
  int64_t d[] = {2};
  opt_feed(ws, "I", DM_INT32, 1, d, v);
  opt_expect_error(run_relu(ws, "I", "Y"), DM_ERR_TYPE, "X is INT32", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_relu_fp32),
      cmocka_unit_test(test_relu_fp16),
      cmocka_unit_test(test_relu_type_error),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
