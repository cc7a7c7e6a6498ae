/* test_conv_fusion.c: ConvFusion and FCFusion (operators/conv_fusion.c) against direct
 * double-precision loops computing conv + bias + S and the relu, for every fusion_type,
 * with and without a bias, with Y written over S in place, NCHW and NHWC, grouped,
 * strided and 1x1 shapes, FP32, FP16 and BF16; FCFusion likewise; the argument and
 * shape errors.
 *
 * Tolerances follow from the arithmetic (as test_conv.c): with T the sum of |terms|
 * behind one output (the products, |b| and |S|) and L their number, FP32 errs by at most
 * L u32 T; the 16-bit types round the FP32 result once more: + u |y| + half the smallest
 * subnormal. The relu is 1-Lipschitz, so the same bound holds after it.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "op_test_util.h"

typedef struct fcase {
  const char *name;
  int64_t N, C, H, W, M, kh, kw, stride, pad, group;
} fcase;

static const fcase cases[] = {
    {"3x3 pad 1", 2, 4, 6, 6, 6, 3, 3, 1, 1, 1},
    {"3x2 stride 2 group 2", 3, 6, 5, 7, 4, 3, 2, 2, 0, 2},
    {"1x1", 2, 5, 4, 3, 3, 1, 1, 1, 0, 1},
};

static double worst[3];

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static double fetch_at(const dm_tensor *t, int mode, int64_t i) {
  return mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(t))[i])
              : ((const float *)dm_tensor_data(t))[i];
}

/* |got - ref| within L u32 T (+ the 16-bit rounding); returns the fraction of the bound. */
static double check(const char *what, int64_t i, double got, double ref, double T, int64_t L,
                    int mode) {
  double acc = (double)L * OPT_U32 * T;
  double tol = mode ? acc + opt_mode_u(mode) * (fabs(ref) + acc) + opt_mode_tiny(mode) : acc;
  if (!(fabs(got - ref) <= tol))
    fail_msg("%s (%s): [%lld] = %.9g, reference %.9g, tolerance %.3g", what,
             opt_mode_name(mode), (long long)i, got, ref, tol);
  return tol > 0 ? fabs(got - ref) / tol : 0;
}

/* NCHW index of (n, m, i, j) in the layout (NHWC when nhwc). */
static int64_t at(int nhwc, int64_t n, int64_t m, int64_t i, int64_t j, int64_t M, int64_t H,
                  int64_t W) {
  return nhwc ? ((n * H + i) * W + j) * M + m : ((n * M + m) * H + i) * W + j;
}

/* One ConvFusion: type ft, bias or not, Y over S (in place) or not. */
static void run_conv(dm_workspace *ws, const fcase *c, int nhwc, int mode, int ft, int bias,
                     int in_place) {
  uint64_t seed = 0x9e3779b9ull * (uint64_t)(ft + 4 * bias + 8 * mode + 32 * nhwc + 1);
  int64_t Cg = c->C / c->group, Mg = c->M / c->group, K = Cg * c->kh * c->kw;
  int64_t oh = (c->H + 2 * c->pad - c->kh) / c->stride + 1;
  int64_t ow = (c->W + 2 * c->pad - c->kw) / c->stride + 1;
  int64_t nx = c->N * c->C * c->H * c->W, ny = c->N * c->M * oh * ow;
  /* x, w, S in the layout fed; w is (M, Cg, kh, kw) or (M, kh, kw, Cg) */
  double *x = opt_draw(nx, -2, 2, mode, &seed), *w = opt_draw(c->M * K, -1, 1, mode, &seed);
  double *b = opt_draw(c->M, -1, 1, mode, &seed), *sv = opt_draw(ny, -3, 3, mode, &seed);
  int sum = ft != 1, relu = ft != 2;
  int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, Cg, c->kh, c->kw}, bd[1] = {c->M};
  int64_t yd[4] = {c->N, c->M, oh, ow};
  if (nhwc) {
    xd[1] = c->H, xd[2] = c->W, xd[3] = c->C;
    wd[1] = c->kh, wd[2] = c->kw, wd[3] = Cg;
    yd[1] = oh, yd[2] = ow, yd[3] = c->M;
  }
  opt_feed_mode(ws, "X", mode, 4, xd, x);
  opt_feed_mode(ws, "W", mode, 4, wd, w);
  opt_feed_mode(ws, "b", mode, 1, bd, b);
  const char *y_name = sum && in_place ? "S" : "Y";
  if (sum)
    opt_feed_mode(ws, "S", mode, 4, yd, sv);
  opt_op *op = opt_new("ConvFusion");
  opt_in(op, "X"), opt_in(op, "W");
  if (bias)
    opt_in(op, "b");
  if (sum)
    opt_in(op, "S");
  opt_out(op, y_name);
  opt_arg_int(op, "fusion_type", ft);
  opt_arg_int(op, "kernel_h", c->kh), opt_arg_int(op, "kernel_w", c->kw);
  opt_arg_int(op, "stride", c->stride), opt_arg_int(op, "pad", c->pad);
  if (c->group != 1)
    opt_arg_int(op, "group", c->group);
  if (nhwc)
    opt_arg_string(op, "order", "NHWC");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s type %d: %s", c->name, ft, dm_last_error());
  const dm_tensor *y = opt_fetch(ws, y_name, opt_mode_dtype(mode), 4, yd);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          int64_t o = at(nhwc, n, m, i, j, c->M, oh, ow);
          double acc = bias ? b[m] : 0, T = bias ? fabs(b[m]) : 0;
          for (int64_t cg = 0; cg < Cg; cg++)
            for (int64_t u = 0; u < c->kh; u++)
              for (int64_t v = 0; v < c->kw; v++) {
                int64_t ih = i * c->stride - c->pad + u, iw = j * c->stride - c->pad + v;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
                  continue;
                int64_t ci = m / Mg * Cg + cg;
                double t = x[at(nhwc, n, ci, ih, iw, c->C, c->H, c->W)] *
                           w[nhwc ? ((m * c->kh + u) * c->kw + v) * Cg + cg
                                  : ((m * Cg + cg) * c->kh + u) * c->kw + v];
                acc += t, T += fabs(t);
              }
          if (sum)
            acc += sv[o], T += fabs(sv[o]);
          double ref = relu && acc < 0 ? 0 : acc;
          worst[mode] = fmax(worst[mode], check(c->name, o, fetch_at(y, mode, o), ref, T,
                                                K + 2, mode));
        }
  free(x), free(w), free(b), free(sv);
}

static void conv_all(void **state, int mode) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      for (int ft = 1; ft <= 3; ft++)
        for (int bias = 0; bias < 2; bias++)
          for (int in_place = 0; in_place < (ft == 1 ? 1 : 2); in_place++)
            run_conv(*state, &cases[i], nhwc, mode, ft, bias, in_place);
  print_message("ConvFusion %s: worst error %.3f of the bound\n", opt_mode_name(mode),
                worst[mode]);
}

static void test_conv_fusion_fp32(void **state) { conv_all(state, 0); }
static void test_conv_fusion_fp16(void **state) { conv_all(state, 1); }
static void test_conv_fusion_bf16(void **state) { conv_all(state, 2); }

/* FCFusion: X (2, 3, 7) flattened at axis 2 -> (6, 7), W (4, 7), b (4) -> Y (2, 3, 4). */
static void test_fc_fusion(void **state) {
  dm_workspace *ws = *state;
  for (int mode = 0; mode < 3; mode++) {
    uint64_t seed = 77 + (uint64_t)mode;
    const int64_t Mr = 6, N = 4, K = 7;
    double *x = opt_draw(Mr * K, -2, 2, mode, &seed), *w = opt_draw(N * K, -1, 1, mode, &seed);
    double *b = opt_draw(N, -1, 1, mode, &seed);
    int64_t xd[3] = {2, 3, K}, wd[2] = {N, K}, bd[1] = {N}, yd[3] = {2, 3, N};
    opt_feed_mode(ws, "X", mode, 3, xd, x);
    opt_feed_mode(ws, "W", mode, 2, wd, w);
    opt_feed_mode(ws, "b", mode, 1, bd, b);
    opt_op *op = opt_new("FCFusion");
    opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
    opt_arg_int(op, "fusion_type", 1);
    opt_arg_int(op, "axis", 2);
    if (opt_run(op, ws) != DM_OK)
      fail_msg("FCFusion %s: %s", opt_mode_name(mode), dm_last_error());
    const dm_tensor *y = opt_fetch(ws, "Y", opt_mode_dtype(mode), 3, yd);
    int negatives = 0;
    for (int64_t i = 0; i < Mr; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = b[j], T = fabs(b[j]);
        for (int64_t k = 0; k < K; k++)
          acc += x[i * K + k] * w[j * K + k], T += fabs(x[i * K + k] * w[j * K + k]);
        negatives += acc < 0;
        check("FCFusion", i * N + j, fetch_at(y, mode, i * N + j), acc < 0 ? 0 : acc, T,
              K + 1, mode);
      }
    assert_true(negatives > 0); /* the relu had something to do */
    free(x), free(w), free(b);
  }
}

/* Errors: a bad fusion_type, the wrong arity for it, Y as b, S of the wrong shape. */
static void test_errors(void **state) {
  dm_workspace *ws = *state;
  double v[64] = {0};
  int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 1}, bd[1] = {2}, sd[4] = {1, 2, 3, 2};
  opt_feed_mode(ws, "X", 0, 4, xd, v), opt_feed_mode(ws, "W", 0, 4, wd, v), opt_feed_mode(ws, "b", 0, 1, bd, v);
  opt_feed_mode(ws, "S", 0, 4, xd, v), opt_feed_mode(ws, "S2", 0, 4, sd, v);
  static const struct {
    int ft;
    const char *in[4];
    const char *out;
    dm_status want;
    const char *msg;
  } bad[] = {
      {4, {"X", "W"}, "Y", DM_ERR_INVALID, "fusion_type is 4"},
      {1, {"X", "W", "b", "S"}, "Y", DM_ERR_INVALID, "fusion_type 1 (conv + relu) takes X, W, [b]"},
      {2, {"X", "W"}, "Y", DM_ERR_INVALID, "takes X, W, [b], S"},
      {2, {"X", "W", "b", "S2"}, "Y", DM_ERR_SHAPE, "S must have Y's shape"},
      {2, {"X", "W", "b", "S"}, "b", DM_ERR_INVALID, "only S (input 3) may be Y's blob"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    opt_op *op = opt_new("ConvFusion");
    for (int k = 0; k < 4 && bad[i].in[k]; k++)
      opt_in(op, bad[i].in[k]);
    opt_out(op, bad[i].out);
    opt_arg_int(op, "fusion_type", bad[i].ft);
    opt_arg_int(op, "kernel", 1);
    opt_expect_error(opt_run(op, ws), bad[i].want, bad[i].msg, NULL);
  }
  opt_op *op = opt_new("FCFusion");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "b"), opt_out(op, "Y");
  opt_arg_int(op, "fusion_type", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "FCFusion takes 1", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_conv_fusion_fp32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conv_fusion_fp16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conv_fusion_bf16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fc_fusion, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  if (dm_init() != DM_OK)
    return 1;
  return cmocka_run_group_tests(tests, NULL, NULL);
}
