/* test_elementwise.c: Sum against a reference summed here (double for floating types,
 * exact modular arithmetic for integers), in place on X0, and its shape/type errors;
 * Add/Sub/Mul/Div with the legacy broadcast (trailing, axis, (1,C,1,1), scalar, equal
 * shapes) against a double reference that indexes B by its own dims; Scale,
 * SumReduceLike; every gradient by finite differences (grad_check.h).
 *
 * Binary ops: one correctly rounded FP32 operation errs by u32 |ref|; FP16 computes in
 * FP32 and rounds once more: + u16 |ref| + 2^-25 (half the smallest subnormal). Integer
 * results are exact (modular). SumReduceLike accumulates in double and rounds once.
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
#include "grad_check.h"
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

/* ---- Add / Sub / Mul / Div ---------------------------------------------------- */

typedef struct bcase {
  int bn;
  int64_t bd[4];
  int broadcast, axis; /* axis -2: not given */
} bcase;

static const int64_t AD[4] = {2, 3, 4, 5};
static const bcase bcases[] = {
    {4, {2, 3, 4, 5}, 0, -2}, {2, {4, 5}, 1, -2}, {1, {3}, 1, 1},
    {4, {1, 3, 1, 1}, 1, -2}, {1, {1}, 1, -2},    {2, {3, 4}, 1, 1},
};

/* B's flat index for A's element k: B's dims sit at A's dims axis.. (axis -1 or absent:
 * the trailing ones); B dims of size 1 always index 0. */
static int64_t b_index(const bcase *c, int64_t k) {
  int64_t ia[4], r = k;
  for (int d = 3; d >= 0; d--)
    ia[d] = r % AD[d], r /= AD[d];
  int axis = c->axis < 0 || !c->broadcast ? 4 - c->bn : c->axis, off = 0;
  for (int j = 0; j < c->bn; j++)
    off = off * (int)c->bd[j] + (c->bd[j] == 1 ? 0 : (int)ia[axis + j]);
  return off;
}

static double ref_op(char op, double a, double b) {
  return op == 'A' ? a + b : op == 'S' ? a - b : op == 'M' ? a * b : a / b;
}

static dm_status run_bin(dm_workspace *ws, const char *type, const bcase *c, const char *out) {
  opt_op *op = opt_new(type);
  opt_in(op, "A"), opt_in(op, "B"), opt_out(op, out);
  if (c->broadcast)
    opt_arg_int(op, "broadcast", 1);
  if (c->axis != -2)
    opt_arg_int(op, "axis", c->axis);
  return opt_run(op, ws);
}

static void test_binary_float(void **state) {
  dm_workspace *ws = *state;
  const char *types[] = {"Add", "Sub", "Mul", "Div"};
  static float af[120], bf[120];
  static uint16_t ah[120], bh[120];
  uint64_t seed = 11;
  for (int i = 0; i < 120; i++) {
    af[i] = (float)opt_uniform(&seed, -4, 4);
    double b = opt_uniform(&seed, 0.25, 4);
    bf[i] = (float)(i % 2 ? b : -b); /* away from 0 for Div */
    ah[i] = dm_float_to_half(af[i]), bh[i] = dm_float_to_half(bf[i]);
  }
  for (size_t ci = 0; ci < sizeof bcases / sizeof bcases[0]; ci++)
    for (int t = 0; t < 4; t++)
      for (int half = 0; half < 2; half++)
        for (int inplace = 0; inplace < 2; inplace++) {
          const bcase *c = &bcases[ci];
          dm_dtype dt = half ? DM_FLOAT16 : DM_FLOAT;
          opt_feed(ws, "A", dt, 4, AD, half ? (void *)ah : (void *)af);
          opt_feed(ws, "B", dt, c->bn, c->bd, half ? (void *)bh : (void *)bf);
          const char *out = inplace ? "A" : "C";
          assert_int_equal(run_bin(ws, types[t], c, out), DM_OK);
          const void *y = dm_tensor_data(opt_fetch(ws, out, dt, 4, AD));
          for (int64_t k = 0; k < 120; k++) {
            int64_t j = b_index(c, k);
            double a = half ? dm_half_to_float(ah[k]) : af[k];
            double b = half ? dm_half_to_float(bh[j]) : bf[j];
            double ref = ref_op(types[t][0], a, b);
            double got = half ? dm_half_to_float(((const uint16_t *)y)[k]) : ((const float *)y)[k];
            double tol = OPT_U32 * fabs(ref) + (half ? OPT_U16 * fabs(ref) + 0x1p-25 : 0);
            if (!(fabs(got - ref) <= tol))
              fail_msg("%s case %zu half %d: C[%lld] = %.9g, reference %.9g", types[t], ci, half,
                       (long long)k, got, ref);
          }
        }
}

static void test_binary_int(void **state) {
  dm_workspace *ws = *state;
  int32_t a[120], b[20];
  for (int i = 0; i < 120; i++)
    a[i] = i % 3 ? (int32_t)(i * 1000003) : INT32_MIN + i;
  for (int i = 0; i < 20; i++)
    b[i] = i == 3 ? -1 : (i - 10) * 77777 + (i == 10);
  const bcase c = {2, {4, 5}, 1, -2};
  const char *types[] = {"Add", "Sub", "Mul", "Div"};
  for (int t = 0; t < 4; t++) {
    opt_feed(ws, "A", DM_INT32, 4, AD, a);
    opt_feed(ws, "B", DM_INT32, 2, c.bd, b);
    assert_int_equal(run_bin(ws, types[t], &c, "C"), DM_OK);
    const int32_t *y = dm_tensor_data(opt_fetch(ws, "C", DM_INT32, 4, AD));
    for (int k = 0; k < 120; k++) {
      int64_t x = a[k], v = b[b_index(&c, k)];
      /* reference in int64, wrapped to 32 bits the way two's complement does */
      int64_t r = t == 0 ? x + v : t == 1 ? x - v : t == 2 ? x * v : x / v;
      int32_t want = (int32_t)(uint32_t)(uint64_t)r;
      if (y[k] != want)
        fail_msg("%s: C[%d] = %d, want %d", types[t], k, y[k], want);
    }
  }
  int64_t a64[3] = {INT64_MAX, 5, -7}, b64[3] = {1, 2, 3}, three = 3;
  opt_feed(ws, "A", DM_INT64, 1, &three, a64);
  opt_feed(ws, "B", DM_INT64, 1, &three, b64);
  const bcase same = {1, {3}, 0, -2};
  assert_int_equal(run_bin(ws, "Add", &same, "C"), DM_OK);
  const int64_t *y64 = dm_tensor_data(opt_fetch(ws, "C", DM_INT64, 1, &three));
  assert_true(y64[0] == INT64_MIN && y64[1] == 7 && y64[2] == -4);
  b64[1] = 0;
  opt_feed(ws, "B", DM_INT64, 1, &three, b64);
  opt_expect_error(run_bin(ws, "Div", &same, "C"), DM_ERR_INVALID, "op 0 (Div)",
                   "integer division by zero: B[1] is 0", NULL);
}

static void test_binary_errors(void **state) {
  dm_workspace *ws = *state;
  float x[120] = {0};
  opt_feed(ws, "A", DM_FLOAT, 4, AD, x);
  int64_t bd[2] = {4, 6}, b5[1] = {5}, big[5] = {1, 2, 3, 4, 5};
  opt_feed(ws, "B", DM_FLOAT, 1, b5, x);
  const bcase ax = {1, {5}, 1, 1}, ax9 = {1, {5}, 1, 9};
  opt_expect_error(run_bin(ws, "Mul", &ax, "C"), DM_ERR_SHAPE, "B's dim 0 (5) does not match "
                   "A's dim 1 (3) at broadcast axis 1", NULL);
  opt_expect_error(run_bin(ws, "Sub", &ax9, "C"), DM_ERR_INVALID,
                   "broadcast axis 9 is out of range [0, 3]", NULL);
  opt_feed(ws, "B", DM_FLOAT, 2, bd, x);
  const bcase nob = {2, {4, 6}, 0, -2}; /* numpy's rule: 5 against 6 */
  opt_expect_error(run_bin(ws, "Add", &nob, "C"), DM_ERR_SHAPE,
                   "A is 2x3x4x5 and B is 4x6: dims 5 and 6 (1 from the end)", NULL);
  const bcase tr = {2, {4, 6}, 1, -2};
  opt_expect_error(run_bin(ws, "Div", &tr, "C"), DM_ERR_SHAPE, "B's dim 1 (6) does not match", NULL);
  opt_feed(ws, "B", DM_FLOAT, 5, big, x);
  opt_expect_error(run_bin(ws, "Add", &tr, "C"), DM_ERR_SHAPE, "B may not have more dims than A", NULL);
  opt_feed(ws, "B", DM_FLOAT, 1, b5, x);
  const bcase okb = {1, {5}, 1, -2};
  opt_expect_error(run_bin(ws, "Add", &okb, "B"), DM_ERR_INVALID, "B is broadcast", NULL);
  int32_t i5[5] = {0};
  opt_feed(ws, "B", DM_INT32, 1, b5, i5);
  opt_expect_error(run_bin(ws, "Add", &okb, "C"), DM_ERR_TYPE, "A, B are FLOAT, INT32", NULL);
}

static void test_scale_and_reduce_like(void **state) {
  dm_workspace *ws = *state;
  static float xf[120];
  static uint16_t xh[120];
  uint64_t seed = 17;
  for (int i = 0; i < 120; i++)
    xf[i] = (float)opt_uniform(&seed, -3, 3), xh[i] = dm_float_to_half(xf[i]);
  for (int half = 0; half < 2; half++) {
    dm_dtype dt = half ? DM_FLOAT16 : DM_FLOAT;
    opt_feed(ws, "X", dt, 4, AD, half ? (void *)xh : (void *)xf);
    opt_op *op = opt_new("Scale");
    opt_in(op, "X"), opt_out(op, "Y"), opt_arg_float(op, "scale", -1.7f);
    assert_int_equal(opt_run(op, ws), DM_OK);
    const void *y = dm_tensor_data(opt_fetch(ws, "Y", dt, 4, AD));
    for (int k = 0; k < 120; k++) {
      double x = half ? dm_half_to_float(xh[k]) : xf[k], ref = (double)-1.7f * x;
      double got = half ? dm_half_to_float(((const uint16_t *)y)[k]) : ((const float *)y)[k];
      assert_true(fabs(got - ref) <= OPT_U32 * fabs(ref) + (half ? OPT_U16 * fabs(ref) + 0x1p-25 : 0));
    }
    /* SumReduceLike onto (3, 4) at axis 1: sums over dims 0 and 3 (10 terms) */
    int64_t bd[2] = {3, 4};
    opt_feed(ws, "B", dt, 2, bd, half ? (void *)xh : (void *)xf);
    op = opt_new("SumReduceLike");
    opt_in(op, "X"), opt_in(op, "B"), opt_out(op, "X"), opt_arg_int(op, "axis", 1); /* in place */
    assert_int_equal(opt_run(op, ws), DM_OK);
    const void *r = dm_tensor_data(opt_fetch(ws, "X", dt, 2, bd));
    for (int j = 0; j < 12; j++) {
      double ref = 0;
      for (int n = 0; n < 2; n++)
        for (int q = 0; q < 5; q++) {
          int k = (n * 12 + j) * 5 + q;
          ref += half ? dm_half_to_float(xh[k]) : xf[k];
        }
      double got = half ? dm_half_to_float(((const uint16_t *)r)[j]) : ((const float *)r)[j];
      double tol = (half ? OPT_U16 : OPT_U32) * fabs(ref) + (half ? 0x1p-25 : 0) + 1e-12;
      if (!(fabs(got - ref) <= tol))
        fail_msg("SumReduceLike half %d: C[%d] = %.9g, reference %.9g", half, j, got, ref);
    }
  }
}

/* Gradients. A-side gradients of Add/Sub are dC itself (no op, so not fetched here). */
static void test_binary_gradients(void **state) {
  (void)state;
  static float a[120], b[120];
  uint64_t seed = 23;
  for (int i = 0; i < 120; i++) {
    a[i] = (float)opt_uniform(&seed, -1, 1);
    double v = opt_uniform(&seed, 1, 2);
    b[i] = (float)(i % 2 ? v : -v);
  }
  const char *hdr[] = {"type: 'Add'", "type: 'Sub'", "type: 'Mul'", "type: 'Div'"};
  const char *args[] = {"", "arg { name: 'broadcast' i: 1 }",
                        "arg { name: 'broadcast' i: 1 } arg { name: 'axis' i: 1 }"};
  const gc_input bsh[3] = {{"B", 4, {2, 3, 4, 5}, b, 1, 0}, {"B", 2, {4, 5}, b, 1, 0},
                           {"B", 1, {3}, b, 1, 0}};
  for (int t = 0; t < 4; t++)
    for (int k = 0; k < 3; k++) {
      char text[512];
      snprintf(text, sizeof text, "%s input: 'A' input: 'B' output: 'C' %s", hdr[t], args[k]);
      gc_input in[2] = {{"A", 4, {2, 3, 4, 5}, a, t >= 2, 0}, bsh[k]};
      if (t == 0 && k == 0)
        continue; /* Add without broadcast: both gradients are aliases of dC */
      gc_check(text, in, 2, 1, 1);
    }
  gc_input x[1] = {{"A", 4, {2, 3, 4, 5}, a, 1, 0}};
  gc_check("type: 'Scale' input: 'A' output: 'C' arg { name: 'scale' f: -2.5 }", x, 1, 1, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sum_floating),
      cmocka_unit_test(test_sum_integers),
      cmocka_unit_test(test_binary_float),
      cmocka_unit_test(test_binary_int),
      cmocka_unit_test(test_binary_errors),
      cmocka_unit_test(test_scale_and_reduce_like),
      cmocka_unit_test(test_binary_gradients),
      cmocka_unit_test(test_sum_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
