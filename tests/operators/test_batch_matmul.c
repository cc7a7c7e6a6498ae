/* test_batch_matmul.c: the reference kernels of BatchMatMul and MatMul (and
 * BatchMatMulGradient, MatMulGradient) against the double-precision reference of
 * bmm_reference.h, FP32, FP16 and BF16; the gradient makers by finite differences; the
 * ops' errors on hostile inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bmm_reference.h"
#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static void run_cases(void **state, int mode) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_case(*state, &cases[i], mode, 100 + i, "REFERENCE", 1);
}
static void test_fp32(void **state) { run_cases(state, 0); }
static void test_fp16(void **state) { run_cases(state, 1); }
static void test_bf16(void **state) { run_cases(state, 2); }

/* Long sums, where FP32 accumulation (not 16-bit) matters, and empty ones. */
static void test_long_and_empty(void **state) {
  const mm_case big = {"BatchMatMul", S(2, 3, 700), S(2, 700, 4), NONE, NONE, S(2, 3, 4), 0, 0, 0, 0, 0};
  const mm_case big_bc = {"BatchMatMul", S(3, 2, 300), S(5, 1, 300, 2), NONE, NONE, S(5, 3, 2, 2), 0, 0, 1, 0, 0};
  const mm_case k0 = {"BatchMatMul", S(2, 3, 0), S(2, 0, 4), NONE, NONE, S(2, 3, 4), 0, 0, 0, 0, 0};
  const mm_case b0 = {"BatchMatMul", S(0, 3, 2), S(1, 2, 4), NONE, NONE, S(0, 3, 4), 0, 0, 1, 0, 0};
  for (int mode = 0; mode < 3; mode++) {
    check_case(*state, &big, mode, 7, "REFERENCE", 1);
    check_case(*state, &big_bc, mode, 8, "REFERENCE", 1);
    check_case(*state, &k0, mode, 9, "REFERENCE", 1);
    check_case(*state, &b0, mode, 10, "REFERENCE", 1);
  }
}

/* FP16 out of range as on a tensor core: 300 * 300 overflows FP16 though FP32 holds it. */
static void test_fp16_overflow(void **state) {
  dm_workspace *ws = *state;
  int64_t d[] = {1, 1, 1};
  uint16_t a = dm_float_to_half(300.0f), b = dm_float_to_half(-300.0f);
  opt_feed(ws, "A", DM_FLOAT16, 3, d, &a);
  opt_feed(ws, "B", DM_FLOAT16, 3, d, &b);
  opt_op *op = opt_new("BatchMatMul");
  opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "Y");
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_int_equal(*(const uint16_t *)dm_tensor_data(opt_fetch(ws, "Y", DM_FLOAT16, 3, d)), 0xfc00);
}

static dm_status run2(dm_workspace *ws, const char *type, const char *arg, int64_t v) {
  opt_op *op = opt_new(type);
  opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "Y");
  if (arg)
    opt_arg_int(op, arg, v);
  return opt_run(op, ws);
}

static void feed2(dm_workspace *ws, dm_dtype ta, int an, const int64_t *ad, dm_dtype tb, int bn,
                  const int64_t *bd) {
  static float z[256];
  opt_feed(ws, "A", ta, an, ad, z);
  opt_feed(ws, "B", tb, bn, bd, z);
}

/* Hostile shapes, arguments and dtypes: a status and a message naming op and blob. */
static void test_errors(void **state) {
  dm_workspace *ws = *state;
  int64_t a[] = {2, 3, 4}, b[] = {2, 5, 6}, b2[] = {3, 4, 6}, v[] = {4}, m[] = {4, 6};
  static float z[256];
  opt_feed(ws, "q", DM_FLOAT, 3, a, z);
  opt_feed(ws, "k", DM_FLOAT, 3, b, z);
  /* an M x N beyond int64 from inputs that are not (zero-sized ones) */
  int64_t wide_a[] = {0, (int64_t)1 << 40, 1}, wide_b[] = {0, 1, (int64_t)1 << 40};
  opt_feed(ws, "A", DM_FLOAT, 3, wide_a, z);
  opt_feed(ws, "B", DM_FLOAT, 3, wide_b, z);
  opt_expect_error(run2(ws, "BatchMatMul", NULL, 0), DM_ERR_LIMIT, "more than 2^63 elements",
                   NULL);
  opt_op *op = opt_new("BatchMatMul");
  opt_in(op, "q"), opt_in(op, "k"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "op 0 (BatchMatMul)",
                   "A is 2x3x4 and B is 2x5x6", "K = 4 columns but op(B) has 5 rows",
                   "A is blob 'q'", "B is blob 'k'", NULL);
  feed2(ws, DM_FLOAT, 3, a, DM_FLOAT, 3, b2);
  opt_expect_error(run2(ws, "BatchMatMul", NULL, 0), DM_ERR_SHAPE, "batch dims",
                   "set broadcast=1", NULL);
  opt_expect_error(run2(ws, "BatchMatMul", "broadcast", 1), DM_ERR_SHAPE,
                   "batch dims 2 and 3", "do not broadcast", NULL);
  feed2(ws, DM_FLOAT, 3, a, DM_FLOAT, 2, m);
  opt_expect_error(run2(ws, "BatchMatMul", NULL, 0), DM_ERR_SHAPE, "batch dims", NULL);
  feed2(ws, DM_FLOAT, 1, v, DM_FLOAT, 2, m);
  opt_expect_error(run2(ws, "BatchMatMul", NULL, 0), DM_ERR_SHAPE,
                   "A is 4 (1-d); BatchMatMul needs at least 2 dims without broadcast=1", NULL);
  feed2(ws, DM_FLOAT, 0, v, DM_FLOAT, 2, m);
  opt_expect_error(run2(ws, "BatchMatMul", "broadcast", 1), DM_ERR_SHAPE, "A is scalar", NULL);
  feed2(ws, DM_FLOAT16, 2, m, DM_FLOAT, 2, m);
  opt_expect_error(run2(ws, "BatchMatMul", "trans_a", 1), DM_ERR_TYPE,
                   "A, B are FLOAT16, FLOAT; expected both FLOAT", NULL);
  feed2(ws, DM_INT32, 2, m, DM_INT32, 2, m);
  opt_expect_error(run2(ws, "MatMul", "trans_a", 1), DM_ERR_TYPE, "op 0 (MatMul)",
                   "A, B are INT32, INT32", NULL);
  feed2(ws, DM_FLOAT, 2, m, DM_FLOAT, 2, m);
  opt_expect_error(run2(ws, "MatMul", NULL, 0), DM_ERR_SHAPE, "K differs (6 vs 4)", NULL);
  opt_expect_error(run2(ws, "MatMul", "axis_a", 2), DM_ERR_INVALID, "axis_a 2 is out of range",
                   NULL);
  op = opt_new("BatchMatMul");
  opt_in(op, "A"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "takes 2 inputs, got 1", NULL);
  op = opt_new("MatMul");
  opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "Y");
  opt_arg_float(op, "trans_a", 1.5f);
  assert_int_not_equal(opt_run(op, ws), DM_OK);
  /* the gradient op: dY of another shape, dA and dB one blob */
  int64_t y[] = {4, 5};
  opt_feed(ws, "dY", DM_FLOAT, 2, y, (float[20]){0});
  op = opt_new("BatchMatMulGradient");
  opt_in(op, "A"), opt_in(op, "B"), opt_in(op, "dY"), opt_out(op, "dA"), opt_out(op, "dB");
  opt_arg_int(op, "trans_b", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "dY is 4x5; the forward's Y is 4x4", NULL);
  op = opt_new("MatMulGradient");
  opt_in(op, "A"), opt_in(op, "B"), opt_in(op, "dY"), opt_out(op, "dA"), opt_out(op, "dA");
  opt_arg_int(op, "trans_b", 1);
  opt_arg_int(op, "trans_a", 1);
  assert_int_not_equal(opt_run(op, ws), DM_OK);
}

/* The makers (BatchMatMul -> BatchMatMuls, or BatchMatMulGradient with broadcast; MatMul
 * -> MatMulGradient) against finite differences of the forward, FP32. */
static void test_gradient_fd(void **state) {
  (void)state;
  static float a[240], b[240];
  uint64_t seed = 41;
  for (int i = 0; i < 240; i++)
    a[i] = (float)opt_uniform(&seed, -1, 1), b[i] = (float)opt_uniform(&seed, -1, 1);
  static const char *const trans[] = {"", " arg { name: 'trans_a' i: 1 }",
                                      " arg { name: 'trans_b' i: 1 }",
                                      " arg { name: 'trans_a' i: 1 } arg { name: 'trans_b' i: 1 }"};
  char text[512];
  for (int t = 0; t < 4; t++) { /* equal batch dims: the emitted BatchMatMuls */
    gc_input in[] = {{"A", 3, {2, 4, 5}, a, 1, 0}, {"B", 3, {2, 5, 4}, b, 1, 0}};
    if (t & 1)
      in[0].dims[1] = 5, in[0].dims[2] = 4;
    if (t & 2)
      in[1].dims[1] = 4, in[1].dims[2] = 5;
    snprintf(text, sizeof text, "type: 'BatchMatMul' input: 'A' input: 'B' output: 'Y'%s", trans[t]);
    gc_check(text, in, 2, 1, 5);
  }
  for (int t = 0; t < 4; t++) { /* broadcast batch dims: BatchMatMulGradient sums them */
    gc_input in[] = {{"A", 4, {3, 1, 4, 5}, a, 1, 0}, {"B", 3, {2, 5, 3}, b, 1, 0}};
    if (t & 1)
      in[0].dims[2] = 5, in[0].dims[3] = 4;
    if (t & 2)
      in[1].dims[1] = 3, in[1].dims[2] = 5;
    snprintf(text, sizeof text,
             "type: 'BatchMatMul' input: 'A' input: 'B' output: 'Y' arg { name: 'broadcast' i: 1 }%s",
             trans[t]);
    gc_check(text, in, 2, 1, 5);
  }
  gc_input v[] = {{"A", 1, {5}, a, 1, 0}, {"B", 3, {2, 5, 3}, b, 1, 0}};
  gc_check("type: 'BatchMatMul' input: 'A' input: 'B' output: 'Y' arg { name: 'broadcast' i: 1 }",
           v, 2, 1, 5);
  gc_input w[] = {{"A", 3, {2, 3, 5}, a, 1, 0}, {"B", 1, {5}, b, 1, 0}};
  gc_check("type: 'BatchMatMul' input: 'A' input: 'B' output: 'Y' arg { name: 'broadcast' i: 1 }"
           " arg { name: 'trans_b' i: 1 }",
           w, 2, 1, 5);
  gc_input mm[] = {{"A", 3, {2, 3, 4}, a, 1, 0}, {"B", 3, {5, 1, 2}, b, 1, 0}};
  gc_check("type: 'MatMul' input: 'A' input: 'B' output: 'Y' arg { name: 'trans_a' i: 1 }"
           " arg { name: 'trans_b' i: 1 }",
           mm, 2, 1, 2);
  gc_input mm2[] = {{"A", 3, {2, 3, 4}, a, 1, 0}, {"B", 2, {4, 5}, b, 1, 0}};
  gc_check("type: 'MatMul' input: 'A' input: 'B' output: 'Y' arg { name: 'axis_a' i: 2 }", mm2,
           2, 1, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32),
      cmocka_unit_test(test_fp16),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_long_and_empty),
      cmocka_unit_test(test_fp16_overflow),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_gradient_fd),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
