/* test_shared_checks.c: the checks the reference and engine kernels share
 * (operators/common.c, conv_args.c) say the same words on every engine: Conv's checks
 * on the reference and the default engine, and an FP16 Softmax over enough rows to run on dm_parallel_rows' threads. */
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

/* The engines a test runs an op on: the workspace's default (oneDNN where built) and the
 * reference. */
static const char *const engines[] = {NULL, "REFERENCE"};

/* Conv's shared checks: a b of the wrong size and a ConvFusion whose Y is an input other
 * than S, refused in the reference's words on every engine. */
static void test_conv_checks(void **state) {
  dm_workspace *ws = *state;
  static float x[2 * 3 * 5 * 5], w[4 * 3 * 3 * 3], b[5];
  int64_t xd[4] = {2, 3, 5, 5}, wd[4] = {4, 3, 3, 3}, bd = 5, sd[4] = {2, 4, 3, 3};
  static float sv[2 * 4 * 3 * 3];
  for (int e = 0; e < 2; e++) {
    opt_feed(ws, "X", DM_FLOAT, 4, xd, x);
    opt_feed(ws, "W", DM_FLOAT, 4, wd, w);
    opt_feed(ws, "b", DM_FLOAT, 1, &bd, b);
    opt_op *op = opt_new("Conv");
    if (engines[e])
      opt_engine(op, engines[e]);
    opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
    opt_arg_int(op, "kernel", 3);
    opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "b must hold M = 4 values", NULL);

    opt_feed(ws, "S", DM_FLOAT, 4, sd, sv);
    op = opt_new("ConvFusion");
    if (engines[e])
      opt_engine(op, engines[e]);
    opt_feed(ws, "b4", DM_FLOAT, 1, &wd[0], b);
    opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b4"), opt_in(op, "S"), opt_out(op, "b4");
    opt_arg_int(op, "kernel", 3), opt_arg_int(op, "fusion_type", 2);
    opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "only S (input 3) may be Y's blob", NULL);
  }
}

/* FP16 Softmax over 64 rows of 1024 (above the threads' threshold): every row sums to 1
 * within FP16's rounding (each row's FP32 scratch is its thread's own). */
static void test_softmax_fp16_rows(void **state) {
  dm_workspace *ws = *state;
  enum { N = 64, D = 1024 };
  static uint16_t x[N * D];
  for (int i = 0; i < N * D; i++)
    x[i] = dm_float_to_half((float)((i * 37 % 101) - 50) / 25.0f);
  int64_t d[2] = {N, D};
  opt_feed(ws, "X", DM_FLOAT16, 2, d, x);
  opt_op *op = opt_new("Softmax");
  opt_in(op, "X"), opt_out(op, "Y");
  assert_int_equal(opt_run(op, ws), DM_OK);
  const uint16_t *y = dm_tensor_data(opt_fetch(ws, "Y", DM_FLOAT16, 2, d));
  for (int i = 0; i < N; i++) {
    double s = 0;
    for (int j = 0; j < D; j++)
      s += dm_half_to_float(y[i * D + j]);
    if (fabs(s - 1) > 1e-2)
      fail_msg("row %d sums to %.6f", i, s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_conv_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_softmax_fp16_rows, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
