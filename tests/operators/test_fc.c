/* test_fc.c: FC against a double-precision reference, FP32, FP16 and BF16, and its errors.
 *
 * Tolerances follow from the arithmetic, not from tuning. With S = sum_k |x_k w_k| + |b|:
 * an FP32 accumulation of K products and the bias errs by at most (K + 1) u32 S
 * (u32 = 2^-24); the FP16 kernel then rounds once to FP16, adding u16 |y| (u16 = 2^-11)
 * plus half the smallest subnormal, 2^-25, in the subnormal range; the BF16 kernel the
 * same with u = 2^-8 and 2^-134.
 * FCGradient: dW sums M products, dX sums N, each errs by (len) u32 S (S the sum of
 * |products|) and the FP16 kernel adds one rounding; db is summed in double and rounded
 * once. FP32 gradients are also checked by finite differences (grad_check.h).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/half.h"
#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* Runs FC on random data: X dims xd (flattened at axis to M x K), W dims wd (at axis_w to
 * N x K); fp16 is the mode (0 FP32, 1 FP16, 2 BF16 X/W/b; bias FP32 if b32). Checks every
 * element. */
static void check_fc(dm_workspace *ws, int xn, const int64_t *xd, int axis, int wn,
                     const int64_t *wd, int axis_w, int fp16, int b32, uint64_t seed) {
  int64_t M = 1, K = 1, N = 1, Kw = 1;
  for (int i = 0; i < xn; i++)
    *(i < axis ? &M : &K) *= xd[i];
  for (int i = 0; i < wn; i++)
    *(i < axis_w ? &N : &Kw) *= wd[i];
  assert_int_equal(K, Kw);
  double *x = malloc(sizeof(double) * (size_t)(M * K)), *w = malloc(sizeof(double) * (size_t)(N * K));
  double *b = malloc(sizeof(double) * (size_t)N);
  float *xf = malloc(sizeof(float) * (size_t)(M * K)), *wf = malloc(sizeof(float) * (size_t)(N * K));
  float *bf = malloc(sizeof(float) * (size_t)N);
  uint16_t *xh = malloc(2 * (size_t)(M * K)), *wh = malloc(2 * (size_t)(N * K)), *bh = malloc(2 * (size_t)N);
  /* Values are drawn, then rounded to the storage type; the reference uses exactly the
   * stored values, so only the kernel's own arithmetic is measured. */
  for (int64_t i = 0; i < M * K; i++) {
    xf[i] = (float)opt_uniform(&seed, -2, 2);
    xh[i] = opt_narrow(fp16, xf[i]);
    x[i] = fp16 ? opt_widen(fp16, xh[i]) : xf[i];
  }
  for (int64_t i = 0; i < N * K; i++) {
    wf[i] = (float)opt_uniform(&seed, -1, 1);
    wh[i] = opt_narrow(fp16, wf[i]);
    w[i] = fp16 ? opt_widen(fp16, wh[i]) : wf[i];
  }
  for (int64_t i = 0; i < N; i++) {
    bf[i] = (float)opt_uniform(&seed, -1, 1);
    bh[i] = opt_narrow(fp16, bf[i]);
    b[i] = fp16 && !b32 ? opt_widen(fp16, bh[i]) : bf[i];
  }
  dm_dtype t = opt_mode_dtype(fp16);
  opt_feed(ws, "X", t, xn, xd, fp16 ? (void *)xh : (void *)xf);
  opt_feed(ws, "W", t, wn, wd, fp16 ? (void *)wh : (void *)wf);
  opt_feed(ws, "b", fp16 && !b32 ? t : DM_FLOAT, 1, &N, fp16 && !b32 ? (void *)bh : (void *)bf);
  opt_op *op = opt_new("FC");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
  if (axis != 1)
    opt_arg_int(op, "axis", axis == xn - 1 && xn > 2 ? -1 : axis); /* also a negative axis */
  if (axis_w != 1)
    opt_arg_int(op, "axis_w", axis_w);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  int64_t yd[9];
  for (int i = 0; i < axis; i++)
    yd[i] = xd[i];
  yd[axis] = N;
  const dm_tensor *y = opt_fetch(ws, "Y", t, axis + 1, yd);
  double worst = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double ref = b[j], S = fabs(b[j]);
      for (int64_t k = 0; k < K; k++) {
        ref += x[i * K + k] * w[j * K + k];
        S += fabs(x[i * K + k] * w[j * K + k]);
      }
      double acc = (double)(K + 1) * OPT_U32 * S;
      double tol = fp16 ? acc + opt_mode_u(fp16) * (fabs(ref) + acc) + opt_mode_tiny(fp16) : acc;
      double got = fp16 ? opt_widen(fp16, ((const uint16_t *)dm_tensor_data(y))[i * N + j])
                        : ((const float *)dm_tensor_data(y))[i * N + j];
      if (!(fabs(got - ref) <= tol))
        fail_msg("Y[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", (long long)i,
                 (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
    }
  print_message("FC %s M=%lld N=%lld K=%lld: worst error %.2f of the bound\n",
                opt_mode_name(fp16), (long long)M, (long long)N, (long long)K, worst);
  free(x), free(w), free(b), free(xf), free(wf), free(bf), free(xh), free(wh), free(bh);
}

static void test_fc_fp32(void **state) {
  int64_t xd[] = {5, 7}, wd[] = {3, 7};
  check_fc(*state, 2, xd, 1, 2, wd, 1, 0, 0, 1);
  int64_t xd2[] = {64, 300}, wd2[] = {50, 300};
  check_fc(*state, 2, xd2, 1, 2, wd2, 1, 0, 0, 2);
  int64_t xd3[] = {2, 3, 4, 5}, wd3[] = {6, 4, 5}; /* axis 2: M = 6, K = 20 */
  check_fc(*state, 4, xd3, 2, 3, wd3, 1, 0, 0, 3);
  int64_t xd4[] = {4, 2, 3}, wd4[] = {2, 3, 6};    /* axis_w 2: N = 6, K = 6 */
  check_fc(*state, 3, xd4, 1, 3, wd4, 2, 0, 0, 4);
  int64_t xd5[] = {3, 4, 5}, wd5[] = {2, 5};       /* axis -1 (= 2): M = 12, K = 5 */
  check_fc(*state, 3, xd5, 2, 2, wd5, 1, 0, 0, 5);
}

/* BF16: the same shapes, tolerances from BF16's unit roundoff 2^-8. */
static void test_fc_bf16(void **state) {
  int64_t xd[] = {5, 7}, wd[] = {3, 7};
  check_fc(*state, 2, xd, 1, 2, wd, 1, 2, 0, 21);
  int64_t xd2[] = {33, 1000}, wd2[] = {17, 1000};
  check_fc(*state, 2, xd2, 1, 2, wd2, 1, 2, 0, 22);
  check_fc(*state, 2, xd2, 1, 2, wd2, 1, 2, 1, 23); /* FP32 bias */
  int64_t xd3[] = {2, 3, 4, 5}, wd3[] = {6, 4, 5};
  check_fc(*state, 4, xd3, 2, 3, wd3, 1, 2, 0, 24);
}

static void test_fc_fp16(void **state) {
  int64_t xd[] = {5, 7}, wd[] = {3, 7};
  check_fc(*state, 2, xd, 1, 2, wd, 1, 1, 0, 11);
  int64_t xd2[] = {33, 1000}, wd2[] = {17, 1000};
  check_fc(*state, 2, xd2, 1, 2, wd2, 1, 1, 0, 12);
  check_fc(*state, 2, xd2, 1, 2, wd2, 1, 1, 1, 13); /* FP32 bias */
  int64_t xd3[] = {2, 3, 4, 5}, wd3[] = {6, 4, 5};
  check_fc(*state, 4, xd3, 2, 3, wd3, 1, 1, 0, 14);
}

/* FP16 out of range behaves as on a tensor core: 300 * 300 = 90000 > 65504 -> inf, even
 * though the FP32 accumulator holds it fine. */
static void test_fc_fp16_overflow(void **state) {
  dm_workspace *ws = *state;
  int64_t d11[] = {1, 1}, d1[] = {1};
  uint16_t x = dm_float_to_half(300.0f), w = dm_float_to_half(-300.0f), b = 0;
  opt_feed(ws, "X", DM_FLOAT16, 2, d11, &x);
  opt_feed(ws, "W", DM_FLOAT16, 2, d11, &w);
  opt_feed(ws, "b", DM_FLOAT16, 1, d1, &b);
  opt_op *op = opt_new("FC");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
  assert_int_equal(opt_run(op, ws), DM_OK);
  const dm_tensor *y = opt_fetch(ws, "Y", DM_FLOAT16, 2, d11);
  assert_int_equal(*(const uint16_t *)dm_tensor_data(y), 0xfc00); /* -inf */
}

static void test_fc_errors(void **state) {
  dm_workspace *ws = *state;
  float z[64] = {0};
  int64_t xd[] = {4, 3}, wd[] = {5, 7}, bd[] = {5}, bbad[] = {4};
  opt_feed(ws, "X", DM_FLOAT, 2, xd, z);
  opt_feed(ws, "W", DM_FLOAT, 2, wd, z);
  opt_feed(ws, "b", DM_FLOAT, 1, bd, z);
  opt_op *op = opt_new("FC");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "op 0 (FC)",
                   "X is 4x3 flattened at axis 1 to 4x3, but W is 5x7: K differs (3 vs 7)", NULL);

  int64_t wd2[] = {5, 3};
  opt_feed(ws, "W", DM_FLOAT, 2, wd2, z);
  opt_feed(ws, "b", DM_FLOAT, 1, bbad, z);
  op = opt_new("FC");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "b has 4 elements", "N = 5", NULL);

  opt_feed(ws, "b", DM_FLOAT, 1, bd, z);
  opt_feed(ws, "W", DM_FLOAT16, 2, wd2, z);
  op = opt_new("FC");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "FLOAT, FLOAT16, FLOAT", NULL);

  op = opt_new("FC");
  opt_in(op, "X"), opt_in(op, "W"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "takes 3 inputs, got 2", NULL);

  opt_feed(ws, "W", DM_FLOAT, 2, wd2, z);
  op = opt_new("FC");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
  opt_arg_int(op, "axis", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "axis 2 is out of range for a 2-d tensor",
                   NULL);
}

/* FCGradient against double sums of the stored values, FP32, FP16 and BF16. */
static void test_fc_gradient_reference(void **state) {
  dm_workspace *ws = *state;
  enum { M = 6, K = 35, N = 7 };
  static float xf[M * K], wf[N * K], gf[M * N];
  static uint16_t xh[M * K], wh[N * K], gh[M * N];
  uint64_t seed = 31;
  for (int i = 0; i < M * K; i++)
    xf[i] = (float)opt_uniform(&seed, -2, 2);
  for (int i = 0; i < N * K; i++)
    wf[i] = (float)opt_uniform(&seed, -1, 1);
  for (int i = 0; i < M * N; i++)
    gf[i] = (float)opt_uniform(&seed, -1, 1);
  int64_t xd[4] = {M, 5, 7, 1}, wd[2] = {N, K}, gd[2] = {M, N}, nd = N;
  for (int half = 0; half < 3; half++) { /* the mode: FP32, FP16, BF16 */
    dm_dtype t = opt_mode_dtype(half);
    for (int i = 0; i < M * K; i++)
      xh[i] = opt_narrow(half, xf[i]);
    for (int i = 0; i < N * K; i++)
      wh[i] = opt_narrow(half, wf[i]);
    for (int i = 0; i < M * N; i++)
      gh[i] = opt_narrow(half, gf[i]);
    opt_feed(ws, "X", t, 4, xd, half ? (void *)xh : (void *)xf);
    opt_feed(ws, "W", t, 2, wd, half ? (void *)wh : (void *)wf);
    opt_feed(ws, "dY", t, 2, gd, half ? (void *)gh : (void *)gf);
    opt_op *op = opt_new("FCGradient");
    opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "dY");
    opt_out(op, "dW"), opt_out(op, "db"), opt_out(op, "dX");
    assert_int_equal(opt_run(op, ws), DM_OK);
    const void *dw = dm_tensor_data(opt_fetch(ws, "dW", t, 2, wd));
    const void *db = dm_tensor_data(opt_fetch(ws, "db", t, 1, &nd));
    const void *dx = dm_tensor_data(opt_fetch(ws, "dX", t, 4, xd));
#define V(f, h, i) (half ? (double)opt_widen(half, h[i]) : (double)f[i])
#define GOT(p, i) (half ? (double)opt_widen(half, ((const uint16_t *)p)[i]) : (double)((const float *)p)[i])
    double r16 = half ? opt_mode_u(half) : 0, sub = half ? opt_mode_tiny(half) : 0;
    for (int n = 0; n < N; n++) {
      double ref = 0, S = 0;
      for (int m = 0; m < M; m++)
        ref += V(gf, gh, m * N + n), S += fabs(V(gf, gh, m * N + n));
      assert_true(fabs(GOT(db, n) - ref) <= 1e-12 * S + r16 * fabs(ref) + (half ? sub : OPT_U32 * fabs(ref)));
      for (int k = 0; k < K; k++) {
        ref = 0, S = 0;
        for (int m = 0; m < M; m++) {
          double p = V(gf, gh, m * N + n) * V(xf, xh, m * K + k);
          ref += p, S += fabs(p);
        }
        double tol = M * OPT_U32 * S + r16 * fabs(ref) + sub;
        if (!(fabs(GOT(dw, n * K + k) - ref) <= tol))
          fail_msg("half %d: dW[%d][%d] = %.9g, reference %.9g", half, n, k, GOT(dw, n * K + k), ref);
      }
    }
    for (int m = 0; m < M; m++)
      for (int k = 0; k < K; k++) {
        double ref = 0, S = 0;
        for (int n = 0; n < N; n++) {
          double p = V(gf, gh, m * N + n) * V(wf, wh, n * K + k);
          ref += p, S += fabs(p);
        }
        double tol = N * OPT_U32 * S + r16 * fabs(ref) + sub;
        if (!(fabs(GOT(dx, m * K + k) - ref) <= tol))
          fail_msg("half %d: dX[%d][%d] = %.9g, reference %.9g", half, m, k, GOT(dx, m * K + k), ref);
      }
#undef V
#undef GOT
  }
  /* mixed dtypes are refused */
  opt_feed(ws, "dY", DM_FLOAT, 2, gd, gf);
  opt_op *op = opt_new("FCGradient");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "dY");
  opt_out(op, "dW"), opt_out(op, "db"), opt_out(op, "dX");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "expected all FLOAT, all FLOAT16 or all BFLOAT16", NULL);
}

/* The maker (FC -> FCGradient) and kernel against finite differences of FC, FP32. */
static void test_fc_gradient_fd(void **state) {
  (void)state;
  static float x[4 * 60], w[6 * 60], b[6];
  uint64_t seed = 37;
  for (size_t i = 0; i < sizeof x / sizeof *x; i++)
    x[i] = (float)opt_uniform(&seed, -1, 1);
  for (size_t i = 0; i < sizeof w / sizeof *w; i++)
    w[i] = (float)opt_uniform(&seed, -1, 1);
  for (size_t i = 0; i < 6; i++)
    b[i] = (float)opt_uniform(&seed, -1, 1);
  gc_input in[] = {{"X", 4, {2, 3, 4, 5}, x, 1, 0}, {"W", 2, {6, 20}, w, 1, 0},
                   {"b", 1, {6}, b, 1, 0}};
  /* axis 2: X is 6 x 20 */
  gc_check("type: 'FC' input: 'X' input: 'W' input: 'b' output: 'Y' arg { name: 'axis' i: 2 }",
           in, 3, 1, 20);
  gc_input in2[] = {{"X", 2, {4, 60}, x, 1, 0}, {"W", 2, {6, 60}, w, 1, 0}, {"b", 1, {6}, b, 1, 0}};
  gc_check("type: 'FC' input: 'X' input: 'W' input: 'b' output: 'Y'", in2, 3, 1, 60);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fc_fp32),
      cmocka_unit_test(test_fc_fp16),
      cmocka_unit_test(test_fc_bf16),
      cmocka_unit_test(test_fc_fp16_overflow),
      cmocka_unit_test(test_fc_errors),
      cmocka_unit_test(test_fc_gradient_reference),
      cmocka_unit_test(test_fc_gradient_fd),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
