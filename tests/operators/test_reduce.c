/* test_reduce.c: ReduceSum, ReduceMean, ReduceMax (axes, keepdims) and LogSoftmax (and
 * its gradient) against references computed here in double, FP32, FP16 and BF16.
 *
 * Tolerances: the kernels accumulate in double and round once into the output dtype
 * (u |ref|, + one FP32 rounding of each widened input, which is exact); LogSoftmax
 * works in FP32 rows with a double sum: its error is a few FP32 roundings of the
 * magnitudes involved (|x| + |lse|), 8 u32 (|x| + |lse|), plus u |ref| for 16-bit.
 * The gradients (ReduceSum/Mean/Max and LogSoftmax) by finite differences (grad_check.h).
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
#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* X (2, 3, 4, 5) reduced over every subset of its dims (given as axes, some negative),
 * keepdims 0 and 1; and with no axes (all). */
static void test_reduce(void **state) {
  dm_workspace *ws = *state;
  enum { N = 120 };
  const int64_t xd[4] = {2, 3, 4, 5};
  static float x[N];
  static uint16_t xh[N];
  static double w[N];
  uint64_t seed = 8;
  for (int i = 0; i < N; i++)
    x[i] = (float)opt_uniform(&seed, -4, 4);
  static const char *const types[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
  for (int mode = 0; mode < 3; mode++) {
    dm_dtype t = opt_mode_dtype(mode);
    for (int i = 0; i < N; i++) {
      xh[i] = opt_narrow(mode, x[i]);
      w[i] = mode ? opt_widen(mode, xh[i]) : x[i];
    }
    for (int mask = 0; mask < 17; mask++) { /* 16: no axes argument */
      for (int keep = 0; keep < 2; keep++) {
        for (int ti = 0; ti < 3; ti++) {
          int red[4];
          int64_t axes[4];
          size_t na = 0;
          for (int d = 0; d < 4; d++) {
            red[d] = mask == 16 || (mask >> d & 1);
            if (mask != 16 && red[d])
              axes[na++] = d % 2 ? d - 4 : d; /* odd dims counted from the end */
          }
          opt_feed(ws, "X", t, 4, xd, mode ? (void *)xh : (void *)x);
          opt_op *op = opt_new(types[ti]);
          opt_in(op, "X"), opt_out(op, "Y");
          if (mask != 16)
            opt_arg_ints(op, "axes", na, axes);
          opt_arg_int(op, "keepdims", keep);
          assert_int_equal(opt_run(op, ws), DM_OK);
          int64_t yd[4], od[4], ostr[4];
          int yn = 0;
          for (int d = 0; d < 4; d++) {
            od[d] = red[d] ? 1 : xd[d];
            if (!red[d] || keep)
              yd[yn++] = od[d];
          }
          ostr[3] = 1;
          for (int d = 2; d >= 0; d--)
            ostr[d] = ostr[d + 1] * od[d + 1];
          double ref[N];
          int64_t cnt[N] = {0};
          for (int i = 0; i < N; i++)
            ref[i] = ti == 2 ? -INFINITY : 0;
          for (int i = 0; i < N; i++) {
            int64_t r = i, o = 0;
            for (int d = 3; d >= 0; d--) {
              int64_t id = r % xd[d];
              r /= xd[d];
              o += (red[d] ? 0 : id) * ostr[d];
            }
            ref[o] = ti == 2 ? fmax(ref[o], w[i]) : ref[o] + w[i];
            cnt[o]++;
          }
          const void *y = dm_tensor_data(opt_fetch(ws, "Y", t, yn, yd));
          int64_t ny = 1;
          for (int d = 0; d < 4; d++)
            ny *= od[d];
          for (int64_t i = 0; i < ny; i++) {
            double r = ti == 1 ? ref[i] / (double)cnt[i] : ref[i];
            double got = mode ? opt_widen(mode, ((const uint16_t *)y)[i]) : ((const float *)y)[i];
            double tol = (mode ? opt_mode_u(mode) : OPT_U32) * fabs(r) + 1e-12;
            if (fabs(got - r) > tol)
              fail_msg("%s %s mask %d keep %d: Y[%lld] = %.9g, reference %.9g", types[ti],
                       opt_mode_name(mode), mask, keep, (long long)i, got, r);
          }
        }
      }
    }
  }
  float f[2] = {1, 2};
  int64_t d2[] = {2}, bad[] = {0, 0};
  opt_feed(ws, "F", DM_FLOAT, 1, d2, f);
  opt_op *op = opt_new("ReduceSum");
  opt_in(op, "F"), opt_out(op, "Y");
  opt_arg_ints(op, "axes", 2, bad);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "twice", NULL);
  int64_t one[] = {3};
  op = opt_new("ReduceMax");
  opt_in(op, "F"), opt_out(op, "Y");
  opt_arg_ints(op, "axes", 1, one);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "axes", NULL);
}

/* LogSoftmax over rows from axis 1 and axis 2 (and -1), with large logits. */
static void test_log_softmax(void **state) {
  dm_workspace *ws = *state;
  enum { N = 2 * 3 * 20 };
  static float x[N];
  static uint16_t xh[N];
  static double w[N];
  uint64_t seed = 13;
  for (int i = 0; i < N; i++)
    x[i] = (float)opt_uniform(&seed, -10, 10);
  x[5] = 80, x[6] = -80; /* exp would overflow or underflow in FP32 */
  const int64_t d[] = {2, 3, 20};
  static const int axes[] = {1, 2, -1, 0};
  for (int mode = 0; mode < 3; mode++) {
    dm_dtype t = opt_mode_dtype(mode);
    for (int i = 0; i < N; i++) {
      xh[i] = opt_narrow(mode, x[i]);
      w[i] = mode ? opt_widen(mode, xh[i]) : x[i];
    }
    for (size_t ai = 0; ai < sizeof axes / sizeof axes[0]; ai++) {
      int axis = axes[ai] < 0 ? 3 + axes[ai] : axes[ai];
      int64_t D = 1;
      for (int k = axis; k < 3; k++)
        D *= d[k];
      for (int inplace = 0; inplace < 2; inplace++) {
        opt_feed(ws, "X", t, 3, d, mode ? (void *)xh : (void *)x);
        opt_op *op = opt_new("LogSoftmax");
        opt_in(op, "X"), opt_out(op, inplace ? "X" : "Y");
        opt_arg_int(op, "axis", axes[ai]);
        assert_int_equal(opt_run(op, ws), DM_OK);
        const void *y = dm_tensor_data(opt_fetch(ws, inplace ? "X" : "Y", t, 3, d));
        for (int64_t r = 0; r < N / D; r++) {
          double mx = -INFINITY, s = 0;
          for (int64_t j = 0; j < D; j++)
            mx = fmax(mx, w[r * D + j]);
          for (int64_t j = 0; j < D; j++)
            s += exp(w[r * D + j] - mx);
          double lse = mx + log(s);
          for (int64_t j = 0; j < D; j++) {
            int64_t i = r * D + j;
            double ref = w[i] - lse;
            double got = mode ? opt_widen(mode, ((const uint16_t *)y)[i]) : ((const float *)y)[i];
            double tol = (mode ? opt_mode_u(mode) : 0) * fabs(ref) +
                         8 * OPT_U32 * (fabs(w[i]) + fabs(lse));
            if (fabs(got - ref) > tol)
              fail_msg("LogSoftmax %s axis %d: Y[%lld] = %.9g, reference %.9g",
                       opt_mode_name(mode), axes[ai], (long long)i, got, ref);
          }
        }
      }
    }
  }
}

static void test_log_softmax_gradient(void **state) {
  (void)state;
  static float x[60];
  uint64_t seed = 23;
  for (int i = 0; i < 60; i++)
    x[i] = (float)opt_uniform(&seed, -3, 3);
  gc_input in[] = {{"X", 3, {3, 4, 5}, x, 1, 0}};
  gc_check("type: 'LogSoftmax' input: 'X' output: 'Y' arg { name: 'axis' i: 1 }", in, 1, 1, 20);
  gc_check("type: 'LogSoftmax' input: 'X' output: 'Y' arg { name: 'axis' i: 2 }", in, 1, 1, 5);
}

/* The gradient makers + kernels against finite differences (Max: distinct values, so no
 * ties within 2h). */
static void test_reduce_gradient(void **state) {
  (void)state;
  static float x[60];
  for (int i = 0; i < 60; i++) /* distinct, 0.05 apart */
    x[i] = (float)((i * 37 % 60) * 0.05 - 1.5);
  gc_input in[] = {{"X", 3, {3, 4, 5}, x, 1, 0}};
  static const char *const ops[] = {
      "type: 'ReduceSum' input: 'X' output: 'Y' arg { name: 'axes' ints: [0, 2] } "
      "arg { name: 'keepdims' i: 0 }",
      "type: 'ReduceMean' input: 'X' output: 'Y' arg { name: 'axes' ints: [-1] }",
      "type: 'ReduceMean' input: 'X' output: 'Y'",
      "type: 'ReduceMax' input: 'X' output: 'Y' arg { name: 'axes' ints: [1] } "
      "arg { name: 'keepdims' i: 0 }",
  };
  static const int64_t lens[] = {15, 5, 60, 1};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    gc_check(ops[k], in, 1, 1, lens[k]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_log_softmax),
      cmocka_unit_test(test_log_softmax_gradient),
      cmocka_unit_test(test_reduce_gradient),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
