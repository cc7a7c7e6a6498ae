/* test_activation.c: Relu against max(x, 0) computed here, FP32 and FP16, in place. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "grad_check.h"
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

/* Relu on every 16-bit pattern of a reduced float type (FP16 or BF16), out of place and
 * in place: zero for negatives and -0, the input otherwise, nan passed through. */
static void check_relu_16bit(dm_workspace *ws, dm_dtype t, float (*widen)(uint16_t)) {
  static uint16_t x[65536];
  for (uint32_t i = 0; i < 65536; i++)
    x[i] = (uint16_t)i;
  int64_t d[] = {65536};
  for (int inplace = 0; inplace < 2; inplace++) {
    opt_feed(ws, "X", t, 1, d, x);
    assert_int_equal(run_relu(ws, "X", inplace ? "X" : "Y"), DM_OK);
    const uint16_t *y = dm_tensor_data(opt_fetch(ws, inplace ? "X" : "Y", t, 1, d));
    for (uint32_t i = 0; i < 65536; i++) {
      double r = ref_relu(widen(x[i]));
      double got = widen(y[i]);
      int ok = isnan(r) ? y[i] == x[i] : (got == r && !signbit(got));
      if (!ok)
        fail_msg("Relu(%s %04x) = %04x", dm_dtype_name(t), x[i], y[i]);
    }
  }
}

static void test_relu_fp16(void **state) { check_relu_16bit(*state, DM_FLOAT16, dm_half_to_float); }

static void test_relu_bf16(void **state) { check_relu_16bit(*state, DM_BFLOAT16, dm_bf16_to_float); }

static void test_relu_type_error(void **state) {
  dm_workspace *ws = *state;
  int32_t v[2] = {1, -1};
  int64_t d[] = {2};
  opt_feed(ws, "I", DM_INT32, 1, d, v);
  opt_expect_error(run_relu(ws, "I", "Y"), DM_ERR_TYPE, "X is INT32", NULL);
}

/* ReluGradient: dX = dY where Y > 0, exactly (a selection), FP32, FP16 and BF16, in place on
 * dY; and the maker + kernel against finite differences of Relu. */
static void test_relu_gradient(void **state) {
  dm_workspace *ws = *state;
  float y[8] = {1, 0, -0.0f, 2.5f, NAN, INFINITY, 0x1p-149f, 3};
  float g[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const float want[8] = {1, 0, 0, 4, 0, 6, 7, 8};
  uint16_t yh[8], gh[8];
  int64_t d = 8;
  for (int half = 0; half < 3; half++) { /* the mode: FP32, FP16, BF16 */
    dm_dtype t = opt_mode_dtype(half);
    for (int i = 0; i < 8; i++)
      yh[i] = opt_narrow(half, y[i]), gh[i] = opt_narrow(half, g[i]);
    yh[6] = 1; /* the smallest subnormal: > 0 */
    opt_feed(ws, "Y", t, 1, &d, half ? (void *)yh : (void *)y);
    opt_feed(ws, "dY", t, 1, &d, half ? (void *)gh : (void *)g);
    opt_op *op = opt_new("ReluGradient");
    opt_in(op, "Y"), opt_in(op, "dY"), opt_out(op, "dY");
    assert_int_equal(opt_run(op, ws), DM_OK);
    const void *dx = dm_tensor_data(opt_fetch(ws, "dY", t, 1, &d));
    for (int i = 0; i < 8; i++) {
      double got = half ? opt_widen(half, ((const uint16_t *)dx)[i]) : ((const float *)dx)[i];
      if (got != want[i])
        fail_msg("half %d: dX[%d] = %g, want %g", half, i, got, want[i]);
    }
  }
  static float x[60];
  uint64_t seed = 41;
  for (int i = 0; i < 60; i++) { /* |x| >= 0.05, away from the kink at 0 */
    double v = opt_uniform(&seed, 0.05, 2);
    x[i] = (float)(i % 3 ? v : -v);
  }
  gc_input in[] = {{"X", 3, {3, 4, 5}, x, 1, 0}};
  gc_check("type: 'Relu' input: 'X' output: 'Y'", in, 1, 1, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_relu_fp32),
      cmocka_unit_test(test_relu_fp16),
      cmocka_unit_test(test_relu_bf16),
      cmocka_unit_test(test_relu_type_error),
      cmocka_unit_test(test_relu_gradient),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
