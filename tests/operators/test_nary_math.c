/* test_nary_math.c: numpy's broadcast in Add/Sub/Mul/Div (every dtype) and their
 * gradients, SumReduceLike without `axis`, and Pow, Max, Min, Mean, against references
 * computed here in double with the broadcast index arithmetic written out (multi-index
 * of the output, each input's own row-major strides, 0 where it has a 1).
 *
 * Tolerances: 16-bit inputs are widened exactly, computed in FP32 (Add/Sub/Mul/Div, one
 * rounding) or double (Pow, Max, Min, Mean) and rounded once: |got - ref| <= u |ref|
 * (+ one FP32 rounding, + half a subnormal). FP32 results: one rounding of the exact
 * result (Mean's double sum: the division adds one more); Pow computes pow() in double,
 * so it is within one FP32 rounding too. Integers are exact (modular). The Max/Min
 * gradients by finite differences (grad_check.h).
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

typedef struct shape {
  int ndim;
  int64_t dims[8];
} shape;

static int64_t numel(const shape *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++)
    n *= s->dims[d];
  return n;
}

/* The element of input `in` that output element i (of out's shape) reads. */
static int64_t src_index(const shape *out, const shape *in, int64_t i) {
  int64_t idx[8];
  for (int d = out->ndim - 1; d >= 0; d--) {
    idx[d] = i % out->dims[d];
    i /= out->dims[d];
  }
  int64_t off = 0;
  for (int k = 0; k < in->ndim; k++) {
    int d = out->ndim - in->ndim + k;
    off = off * in->dims[k] + (in->dims[k] == 1 ? 0 : idx[d]);
  }
  return off;
}

static double ref_bin(char op, double x, double y) {
  return op == 'A' ? x + y : op == 'S' ? x - y : op == 'M' ? x * y : x / y;
}

/* Add/Sub/Mul/Div with numpy's broadcast: A (2, 1, 4), B (3, 1) -> C (2, 3, 4); and the
 * other way round, B (3, 4) against A (4), for FP32, FP16, BF16, DOUBLE, INT32, INT64. */
static void test_binary_numpy(void **state) {
  dm_workspace *ws = *state;
  static const char *const types[] = {"Add", "Sub", "Mul", "Div"};
  static const shape pairs[][3] = {
      {{3, {2, 1, 4}}, {2, {3, 1}}, {3, {2, 3, 4}}},
      {{1, {4}}, {2, {3, 4}}, {2, {3, 4}}},
      {{2, {3, 1}}, {0, {0}}, {2, {3, 1}}}, /* a rank-0 B */
  };
  static const dm_dtype dts[] = {DM_FLOAT, DM_FLOAT16, DM_BFLOAT16, DM_DOUBLE, DM_INT32, DM_INT64};
  uint64_t seed = 3;
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    const shape *sa = &pairs[p][0], *sb = &pairs[p][1], *sc = &pairs[p][2];
    double a[64], b[64];
    for (int64_t i = 0; i < numel(sa); i++)
      a[i] = round(opt_uniform(&seed, -20, 20));
    for (int64_t i = 0; i < numel(sb); i++) { /* nonzero divisors */
      b[i] = round(opt_uniform(&seed, 1, 9));
      b[i] = i % 2 ? -b[i] : b[i];
    }
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
      dm_dtype t = dts[di];
      union {
        float f[64];
        double d[64];
        uint16_t h[64];
        int32_t i32[64];
        int64_t i64[64];
      } ua, ub;
      for (int k = 0; k < 2; k++) {
        const double *src = k ? b : a;
        int64_t n = numel(k ? sb : sa);
        void *dst = k ? (void *)&ub : (void *)&ua;
        for (int64_t i = 0; i < n; i++) {
          if (t == DM_FLOAT) ((float *)dst)[i] = (float)src[i];
          if (t == DM_DOUBLE) ((double *)dst)[i] = src[i];
          if (t == DM_FLOAT16) ((uint16_t *)dst)[i] = dm_float_to_half((float)src[i]);
          if (t == DM_BFLOAT16) ((uint16_t *)dst)[i] = dm_float_to_bf16((float)src[i]);
          if (t == DM_INT32) ((int32_t *)dst)[i] = (int32_t)src[i];
          if (t == DM_INT64) ((int64_t *)dst)[i] = (int64_t)src[i];
        }
      }
      for (size_t k = 0; k < 4; k++) {
        opt_feed(ws, "A", t, sa->ndim, sa->dims, &ua);
        opt_feed(ws, "B", t, sb->ndim, sb->dims, &ub);
        opt_op *op = opt_new(types[k]);
        opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "C");
        assert_int_equal(opt_run(op, ws), DM_OK);
        const void *c = dm_tensor_data(opt_fetch(ws, "C", t, sc->ndim, sc->dims));
        for (int64_t i = 0; i < numel(sc); i++) {
          double x = a[src_index(sc, sa, i)], y = b[src_index(sc, sb, i)];
          double r = ref_bin(types[k][0], x, y), got = 0, tol = 0;
          if (t == DM_INT32 || t == DM_INT64) /* C's truncating division */
            r = types[k][0] == 'D' ? (double)((int64_t)x / (int64_t)y) : r;
          switch (t) {
          case DM_FLOAT: got = ((const float *)c)[i], tol = OPT_U32 * fabs(r); break;
          case DM_DOUBLE: got = ((const double *)c)[i]; break;
          case DM_FLOAT16:
            got = dm_half_to_float(((const uint16_t *)c)[i]);
            tol = (OPT_U16 + OPT_U32) * fabs(r);
            break;
          case DM_BFLOAT16:
            got = dm_bf16_to_float(((const uint16_t *)c)[i]);
            tol = (OPT_UBF16 + OPT_U32) * fabs(r);
            break;
          case DM_INT32: got = ((const int32_t *)c)[i]; break;
          case DM_INT64: got = (double)((const int64_t *)c)[i]; break;
          default: break;
          }
          if (fabs(got - r) > tol)
            fail_msg("%s %s pair %zu: C[%lld] = %.9g, reference %.9g", types[k],
                     dm_dtype_name(t), p, (long long)i, got, r);
        }
      }
    }
  }
  /* in place on A of C's shape, and a refused in place on a broadcast input */
  float x[12], y[4];
  for (int i = 0; i < 12; i++)
    x[i] = (float)i;
  for (int i = 0; i < 4; i++)
    y[i] = (float)(10 * i);
  int64_t dx[] = {3, 4}, dy[] = {4};
  opt_feed(ws, "X", DM_FLOAT, 2, dx, x);
  opt_feed(ws, "Y", DM_FLOAT, 1, dy, y);
  opt_op *op = opt_new("Add");
  opt_in(op, "Y"), opt_in(op, "X"), opt_out(op, "X");
  assert_int_equal(opt_run(op, ws), DM_OK);
  const float *px = dm_tensor_data(opt_fetch(ws, "X", DM_FLOAT, 2, dx));
  for (int i = 0; i < 12; i++)
    assert_true(px[i] == x[i] + y[i % 4]);
  op = opt_new("Add");
  opt_in(op, "X"), opt_in(op, "Y"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "B is broadcast", NULL);
  int64_t dz[] = {3};
  opt_feed(ws, "Z", DM_FLOAT, 1, dz, y);
  op = opt_new("Mul");
  opt_in(op, "X"), opt_in(op, "Z"), opt_out(op, "C");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "do not broadcast", "3x4", NULL);
}

/* Gradients of the numpy broadcast: both operands broadcast, by finite differences. */
static void test_binary_numpy_gradient(void **state) {
  (void)state;
  static float a[15], b[4];
  uint64_t seed = 9;
  for (int i = 0; i < 15; i++)
    a[i] = (float)opt_uniform(&seed, -2, 2);
  for (int i = 0; i < 4; i++) /* away from 0 for Div */
    b[i] = (float)(opt_uniform(&seed, 0.5, 2) * (i % 2 ? -1 : 1));
  gc_input in[] = {{"A", 3, {3, 1, 5}, a, 1, 0}, {"B", 2, {4, 1}, b, 1, 0}};
  static const char *const ops[] = {
      "type: 'Add' input: 'A' input: 'B' output: 'C'",
      "type: 'Sub' input: 'A' input: 'B' output: 'C'",
      "type: 'Mul' input: 'A' input: 'B' output: 'C'",
      "type: 'Div' input: 'A' input: 'B' output: 'C'",
  };
  for (size_t k = 0; k < 4; k++)
    gc_check(ops[k], in, 2, 1, 1);
  /* and the equal-shape case, where SumReduceLike copies */
  gc_input eq[] = {{"A", 2, {3, 5}, a, 1, 0}, {"B", 2, {3, 5}, a, 1, 0}};
  gc_check("type: 'Mul' input: 'A' input: 'B' output: 'C'", eq, 2, 1, 1);
}

/* SumReduceLike without axis: A (2, 3, 4) onto B (3, 1) and onto (1, 4), in double. */
static void test_sum_reduce_like_numpy(void **state) {
  dm_workspace *ws = *state;
  float a[24];
  uint64_t seed = 4;
  for (int i = 0; i < 24; i++)
    a[i] = (float)opt_uniform(&seed, -3, 3);
  shape sa = {3, {2, 3, 4}};
  static const shape bs[] = {{2, {3, 1}}, {2, {1, 4}}, {3, {2, 1, 4}}, {0, {0}}};
  for (size_t k = 0; k < sizeof bs / sizeof bs[0]; k++) {
    const shape *sb = &bs[k];
    float bz[24] = {0};
    opt_feed(ws, "A", DM_FLOAT, 3, sa.dims, a);
    opt_feed(ws, "B", DM_FLOAT, sb->ndim, sb->dims, bz);
    opt_op *op = opt_new("SumReduceLike");
    opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "C");
    assert_int_equal(opt_run(op, ws), DM_OK);
    const float *c = dm_tensor_data(opt_fetch(ws, "C", DM_FLOAT, sb->ndim, sb->dims));
    double ref[24] = {0};
    for (int64_t i = 0; i < 24; i++)
      ref[src_index(&sa, sb, i)] += a[i];
    for (int64_t j = 0; j < numel(sb); j++)
      if (fabs(c[j] - ref[j]) > OPT_U32 * fabs(ref[j]))
        fail_msg("SumReduceLike onto shape %zu: C[%lld] = %.9g, reference %.9g", k,
                 (long long)j, (double)c[j], ref[j]);
  }
}

/* Pow, Max, Min, Mean over broadcast inputs in every float mode. */
static void test_nary(void **state) {
  dm_workspace *ws = *state;
  static const shape in_shapes[] = {{3, {2, 3, 4}}, {2, {3, 1}}, {1, {4}}};
  const shape out = {3, {2, 3, 4}};
  static double v[3][24];
  uint64_t seed = 21;
  for (int k = 0; k < 3; k++)
    for (int64_t i = 0; i < numel(&in_shapes[k]); i++)
      v[k][i] = opt_uniform(&seed, 0.25, 3); /* positive bases for Pow */
  v[1][1] = NAN;
  static const char *const types[] = {"Max", "Min", "Mean", "Pow", "PowArg"};
  for (int mode = 0; mode < 3; mode++) {
    dm_dtype t = opt_mode_dtype(mode);
    static double w[3][24]; /* the values as fed */
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
      const char *type = types[ti];
      int nin = type[0] == 'P' ? (type[3] ? 1 : 2) : 3;
      const char *names[] = {"X0", "X1", "X2"};
      for (int k = 0; k < nin; k++) {
        const shape *s = &in_shapes[k];
        float f[24];
        uint16_t h[24];
        for (int64_t i = 0; i < numel(s); i++) {
          f[i] = (float)v[k][i], h[i] = opt_narrow(mode, f[i]);
          w[k][i] = mode ? opt_widen(mode, h[i]) : f[i];
        }
        opt_feed(ws, names[k], t, s->ndim, s->dims, mode ? (void *)h : (void *)f);
      }
      opt_op *op = opt_new(type[0] == 'P' ? "Pow" : type);
      for (int k = 0; k < nin; k++)
        opt_in(op, names[k]);
      opt_out(op, "Y");
      if (nin == 1)
        opt_arg_float(op, "exponent", 1.5f);
      assert_int_equal(opt_run(op, ws), DM_OK);
      const void *y = dm_tensor_data(opt_fetch(ws, "Y", t, out.ndim, out.dims));
      for (int64_t i = 0; i < numel(&out); i++) {
        double xs[3], r;
        for (int k = 0; k < nin; k++)
          xs[k] = w[k][src_index(&out, &in_shapes[k], i)];
        if (nin == 1)
          r = pow(xs[0], 1.5);
        else if (type[0] == 'P')
          r = pow(xs[0], xs[1]);
        else if (type[1] == 'e')
          r = (xs[0] + xs[1] + xs[2]) / 3;
        else {
          r = xs[0];
          for (int k = 1; k < 3; k++)
            r = isnan(r) || isnan(xs[k]) ? NAN : type[1] == 'a' ? fmax(r, xs[k]) : fmin(r, xs[k]);
        }
        double got = mode ? opt_widen(mode, ((const uint16_t *)y)[i]) : ((const float *)y)[i];
        double tol = (mode ? opt_mode_u(mode) : 0) * fabs(r) + 2 * OPT_U32 * fabs(r);
        int ok = isnan(r) ? isnan(got) : fabs(got - r) <= tol;
        if (!ok)
          fail_msg("%s %s: Y[%lld] = %.9g, reference %.9g", type, opt_mode_name(mode),
                   (long long)i, got, r);
      }
    }
  }
  /* Max and Min of integers (exact) and doubles; INT64 refused */
  static const dm_dtype its[] = {DM_INT32, DM_INT16, DM_UINT8, DM_DOUBLE};
  const int64_t d2[] = {2, 3}, d1[] = {3};
  const double av[6] = {5, -7, 100, 0, 12, -1}, bv[3] = {3, -2, 50};
  for (size_t ti = 0; ti < sizeof its / sizeof its[0]; ti++) {
    dm_dtype t = its[ti];
    union {
      int32_t i32[6];
      int16_t i16[6];
      uint8_t u8[6];
      double f64[6];
    } ua, ub;
    for (int i = 0; i < 6; i++) {
      double a = t == DM_UINT8 ? fabs(av[i]) : av[i];
      double b = t == DM_UINT8 ? fabs(bv[i % 3]) : bv[i % 3];
      if (t == DM_INT32) ua.i32[i] = (int32_t)a, ub.i32[i % 3] = (int32_t)b;
      if (t == DM_INT16) ua.i16[i] = (int16_t)a, ub.i16[i % 3] = (int16_t)b;
      if (t == DM_UINT8) ua.u8[i] = (uint8_t)a, ub.u8[i % 3] = (uint8_t)b;
      if (t == DM_DOUBLE) ua.f64[i] = a, ub.f64[i % 3] = b;
    }
    for (int mx = 0; mx < 2; mx++) {
      opt_feed(ws, "A", t, 2, d2, &ua);
      opt_feed(ws, "B", t, 1, d1, &ub);
      opt_op *op = opt_new(mx ? "Max" : "Min");
      opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "Y");
      assert_int_equal(opt_run(op, ws), DM_OK);
      const void *y = dm_tensor_data(opt_fetch(ws, "Y", t, 2, d2));
      for (int i = 0; i < 6; i++) {
        double a = t == DM_UINT8 ? fabs(av[i]) : av[i];
        double b = t == DM_UINT8 ? fabs(bv[i % 3]) : bv[i % 3];
        double r = mx ? fmax(a, b) : fmin(a, b);
        double got = t == DM_INT32   ? ((const int32_t *)y)[i]
                     : t == DM_INT16 ? ((const int16_t *)y)[i]
                     : t == DM_UINT8 ? ((const uint8_t *)y)[i]
                                     : ((const double *)y)[i];
        if (got != r)
          fail_msg("%s %s: Y[%d] = %g, reference %g", mx ? "Max" : "Min", dm_dtype_name(t), i,
                   got, r);
      }
    }
  }
  int64_t i64[3] = {1, 2, 3};
  opt_feed(ws, "L", DM_INT64, 1, d1, i64);
  opt_op *lop = opt_new("Max");
  opt_in(lop, "L"), opt_in(lop, "L"), opt_out(lop, "Y");
  opt_expect_error(opt_run(lop, ws), DM_ERR_TYPE, "X0 is INT64: unsupported dtype", NULL);

  /* an INT64 exponent with a FLOAT base */
  float base[3] = {2, -3, 0.5f};
  int64_t ex[3] = {3, 2, -1}, d3[] = {3};
  opt_feed(ws, "X", DM_FLOAT, 1, d3, base);
  opt_feed(ws, "E", DM_INT64, 1, d3, ex);
  opt_op *op = opt_new("Pow");
  opt_in(op, "X"), opt_in(op, "E"), opt_out(op, "Y");
  assert_int_equal(opt_run(op, ws), DM_OK);
  const float *y = dm_tensor_data(opt_fetch(ws, "Y", DM_FLOAT, 1, d3));
  assert_true(y[0] == 8 && y[1] == 9 && y[2] == 2);
  op = opt_new("Pow");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "exponent", NULL);
}

/* Max, Min (and Mean) gradients by finite differences (values distinct, 0.05 apart: no ties
 * within 2h), and the refusal of a broadcast input. */
static void test_select_gradient(void **state) {
  dm_workspace *ws = *state;
  static float x[3][24];
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 24; i++)
      x[k][i] = (float)(((i * 7 + k * 29) % 72) * 0.05 - 1.8);
  gc_input in[] = {{"A", 2, {4, 6}, x[0], 1, 0}, {"B", 2, {4, 6}, x[1], 1, 0},
                   {"C", 2, {4, 6}, x[2], 1, 0}};
  gc_check("type: 'Max' input: 'A' input: 'B' input: 'C' output: 'Y'", in, 3, 1, 1);
  gc_check("type: 'Min' input: 'A' input: 'B' output: 'Y'", in, 2, 1, 1);
  /* Mean: equal shapes, and a broadcast input whose gradient is summed */
  gc_check("type: 'Mean' input: 'A' input: 'B' input: 'C' output: 'Y'", in, 3, 1, 3);
  gc_input bc[] = {{"A", 2, {4, 6}, x[0], 1, 0}, {"B", 2, {4, 1}, x[1], 1, 0},
                   {"C", 1, {6}, x[2], 1, 0}};
  gc_check("type: 'Mean' input: 'A' input: 'B' input: 'C' output: 'Y'", bc, 3, 1, 3);
  int64_t d2[] = {4, 6}, d1[] = {6};
  opt_feed(ws, "Y", DM_FLOAT, 2, d2, x[0]);
  opt_feed(ws, "dY", DM_FLOAT, 2, d2, x[1]);
  opt_feed(ws, "X1", DM_FLOAT, 1, d1, x[2]);
  opt_op *op = opt_new("MaxGradient");
  opt_in(op, "Y"), opt_in(op, "dY"), opt_in(op, "Y"), opt_in(op, "X1");
  opt_out(op, "d0"), opt_out(op, "d1");
  opt_expect_error(opt_run(op, ws), DM_ERR_UNSUPPORTED, "input 3 is FLOAT 6",
                   "a broadcast input's would need summing", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binary_numpy),
      cmocka_unit_test(test_binary_numpy_gradient),
      cmocka_unit_test(test_sum_reduce_like_numpy),
      cmocka_unit_test(test_nary),
      cmocka_unit_test(test_select_gradient),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
