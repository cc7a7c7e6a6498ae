/* test_bn_fusion.c: the fused training ops SpatialBNRelu and SpatialBNAddRelu and their
 * gradients (operators/bn_fusion.c), on the reference engine:
 *   - forward and gradient against the unfused sequences run here as separate ops
 *     (SpatialBN then Relu; SpatialBN, Sum or Add, Relu; ReluGradient then
 *     SpatialBNGradient, dZ being ReluGradient's output): FP32, FP16 and BF16, NCHW and
 *     NHWC, Y over Z and dX over dY in place. The fused kernels run the same loops in the
 *     same order (SpatialBN's double sums, one rounding per output, the Sum/Add kernels'
 *     FP32 addition and one rounding, Relu's bit rules), so the tolerance is zero: every
 *     output must be bit-identical, statistics included;
 *   - the gradient against central finite differences of a double-precision forward
 *     written here (Y = relu(scale (x - mean) / sqrt(var + eps) + bias [+ Z]), biased
 *     batch variance), with the loss L = sum r Y, dY = r. Bound (derived): the kernel
 *     computes in double from FP32 inputs and the FP32 saved statistics (each rounded once,
 *     relative 2^-24), so each dX element is off by at most a few units of 2^-24 in the
 *     magnitudes it sums: tol = 8 u32 (|k| (|g| + mean|g| + |xhat| mean|g xhat|)) with
 *     k = scale inv_std, g the masked dY, plus the difference quotient's error in double
 *     (h = 1e-4: truncation h^2 |f'''| / 6 and rounding 2^-52 |L| / h, under 1e-9 here);
 *     the data keep every pre-activation at least 0.02 from Relu's kink, far more than a
 *     step of h moves it;
 *   - errors: the schema's input and output counts, test mode, Z or Y of another shape
 *     or dtype, a bias not like scale, a reserve input that is not UINT8, dX and dZ on
 *     one blob (refused by the instantiator).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "demitasse_plugin.h"
#include "op_test_util.h"

static int setup(void **state) {
  return dm_workspace_create((dm_workspace **)state) != DM_OK ||
         dm_workspace_set_engine(*state, "REFERENCE") != DM_OK;
}
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static void ok(dm_status s) {
  if (s != DM_OK)
    fail_msg("%s: %s", dm_status_name(s), dm_last_error());
}

enum { SUM_OP = 0, ADD_OP = 1 };

typedef struct fcase {
  int64_t N, C, H, W;
  int nhwc, mode; /* mode: 0 FP32, 1 FP16, 2 BF16 */
  int add;        /* 0: SpatialBNRelu; 1: SpatialBNAddRelu */
  int add_op;     /* the unfused sum: SUM_OP or ADD_OP */
  uint64_t seed;
} fcase;

static int64_t numel(const fcase *c) { return c->N * c->C * c->H * c->W; }

/* Feeds `name` with n values from u(lo, hi) (X's dtype for the mode). */
static void feed_act(dm_workspace *ws, const fcase *c, const char *name, uint64_t *rng, double lo,
                     double hi) {
  int64_t n = numel(c);
  int64_t dims[4] = {c->N, c->nhwc ? c->H : c->C, c->nhwc ? c->W : c->H, c->nhwc ? c->C : c->W};
  float *f = malloc((size_t)n * sizeof *f);
  uint16_t *h = malloc((size_t)n * sizeof *h);
  assert_true(f && h);
  for (int64_t i = 0; i < n; i++) {
    f[i] = (float)opt_uniform(rng, lo, hi);
    h[i] = opt_narrow(c->mode, f[i]);
  }
  opt_feed(ws, name, opt_mode_dtype(c->mode), 4, dims, c->mode ? (const void *)h : f);
  free(f);
  free(h);
}

static void feed_param(dm_workspace *ws, const fcase *c, const char *name, uint64_t *rng,
                       double lo, double hi) {
  float *p = malloc((size_t)c->C * sizeof *p);
  assert_non_null(p);
  for (int64_t i = 0; i < c->C; i++)
    p[i] = (float)opt_uniform(rng, lo, hi);
  opt_feed(ws, name, DM_FLOAT, 1, &c->C, p);
  free(p);
}

static void expect_same(dm_workspace *ws, const char *got, const char *want) {
  const dm_tensor *a = NULL, *b = NULL;
  ok(dm_workspace_fetch(ws, got, &a));
  ok(dm_workspace_fetch(ws, want, &b));
  assert_int_equal(dm_tensor_dtype(a), dm_tensor_dtype(b));
  assert_int_equal(dm_tensor_nbytes(a), dm_tensor_nbytes(b));
  if (memcmp(dm_tensor_data(a), dm_tensor_data(b), dm_tensor_nbytes(a)) != 0)
    fail_msg("'%s' differs from the unfused '%s'", got, want);
}

static void bn_args(opt_op *op, const fcase *c) {
  opt_arg_int(op, "is_test", 0);
  opt_arg_float(op, "epsilon", 1e-3f);
  opt_arg_float(op, "momentum", 0.8f);
  if (c->nhwc)
    opt_arg_string(op, "order", "NHWC");
}

static void fused_forward(dm_workspace *ws, const fcase *c, const char *z, const char *y) {
  opt_op *op = opt_new(c->add ? "SpatialBNAddRelu" : "SpatialBNRelu");
  opt_in(op, "X"), opt_in(op, "s"), opt_in(op, "b"), opt_in(op, "m"), opt_in(op, "v");
  if (c->add)
    opt_in(op, z);
  opt_out(op, y), opt_out(op, "f_rm"), opt_out(op, "f_rv"), opt_out(op, "f_sm"),
      opt_out(op, "f_si"), opt_out(op, "f_res");
  bn_args(op, c);
  ok(opt_run(op, ws));
}

static void unfused_forward(dm_workspace *ws, const fcase *c) {
  opt_op *op = opt_new("SpatialBN");
  opt_in(op, "X"), opt_in(op, "s"), opt_in(op, "b"), opt_in(op, "m"), opt_in(op, "v");
  opt_out(op, "u_t"), opt_out(op, "u_rm"), opt_out(op, "u_rv"), opt_out(op, "u_sm"),
      opt_out(op, "u_si");
  bn_args(op, c);
  ok(opt_run(op, ws));
  const char *pre = "u_t";
  if (c->add) {
    op = opt_new(c->add_op == ADD_OP ? "Add" : "Sum");
    opt_in(op, "u_t"), opt_in(op, "Z"), opt_out(op, "u_s");
    ok(opt_run(op, ws));
    pre = "u_s";
  }
  op = opt_new("Relu");
  opt_in(op, pre), opt_out(op, "u_y");
  ok(opt_run(op, ws));
}

static void check_case(dm_workspace *ws, const fcase *c) {
  uint64_t rng = c->seed;
  feed_act(ws, c, "X", &rng, -1.5, 2.5);
  feed_act(ws, c, "Z", &rng, -1, 1);
  feed_act(ws, c, "dY", &rng, -1, 1);
  feed_param(ws, c, "s", &rng, 0.5, 1.5);
  feed_param(ws, c, "b", &rng, -0.5, 0.5);
  feed_param(ws, c, "m", &rng, -0.2, 0.2);
  feed_param(ws, c, "v", &rng, 0.5, 2);
  fused_forward(ws, c, "Z", "f_y");
  unfused_forward(ws, c);
  expect_same(ws, "f_y", "u_y");
  expect_same(ws, "f_rm", "u_rm");
  expect_same(ws, "f_rv", "u_rv");
  expect_same(ws, "f_sm", "u_sm");
  expect_same(ws, "f_si", "u_si");
  const dm_tensor *res = NULL;
  ok(dm_workspace_fetch(ws, "f_res", &res));
  assert_int_equal(dm_tensor_dtype(res), DM_UINT8);
  assert_int_equal(dm_tensor_numel(res), 0);
  /* Y over Z: the same bits (Z is read after BN(X) is formed in a temporary). */
  if (c->add) {
    const dm_tensor *z = NULL;
    ok(dm_workspace_fetch(ws, "Z", &z));
    opt_feed(ws, "Zy", dm_tensor_dtype(z), dm_tensor_ndim(z), dm_tensor_dims(z),
             dm_tensor_data(z));
    fused_forward(ws, c, "Zy", "Zy");
    expect_same(ws, "Zy", "u_y");
  }

  /* Gradients: the fused op from the fused forward's Y and statistics. */
  opt_op *op = opt_new(c->add ? "SpatialBNAddReluGradient" : "SpatialBNReluGradient");
  opt_in(op, "X"), opt_in(op, "s"), opt_in(op, "dY"), opt_in(op, "f_sm"), opt_in(op, "f_si"),
      opt_in(op, "f_y"), opt_in(op, "b"), opt_in(op, "f_res");
  opt_out(op, "f_dx"), opt_out(op, "f_ds"), opt_out(op, "f_db");
  if (c->add)
    opt_out(op, "f_dz");
  bn_args(op, c);
  ok(opt_run(op, ws));
  op = opt_new("ReluGradient");
  opt_in(op, "u_y"), opt_in(op, "dY"), opt_out(op, "u_dt");
  ok(opt_run(op, ws));
  op = opt_new("SpatialBNGradient");
  opt_in(op, "X"), opt_in(op, "s"), opt_in(op, "u_dt"), opt_in(op, "u_sm"), opt_in(op, "u_si");
  opt_out(op, "u_dx"), opt_out(op, "u_ds"), opt_out(op, "u_db");
  bn_args(op, c);
  ok(opt_run(op, ws));
  expect_same(ws, "f_dx", "u_dx");
  expect_same(ws, "f_ds", "u_ds");
  expect_same(ws, "f_db", "u_db");
  if (c->add)
    expect_same(ws, "f_dz", "u_dt");
  /* In place over dY (dZ for the Add form, else dX), without the reserve input. */
  const dm_tensor *dy = NULL;
  ok(dm_workspace_fetch(ws, "dY", &dy));
  opt_feed(ws, "dYc", dm_tensor_dtype(dy), dm_tensor_ndim(dy), dm_tensor_dims(dy),
           dm_tensor_data(dy));
  op = opt_new(c->add ? "SpatialBNAddReluGradient" : "SpatialBNReluGradient");
  opt_in(op, "X"), opt_in(op, "s"), opt_in(op, "dYc"), opt_in(op, "f_sm"), opt_in(op, "f_si"),
      opt_in(op, "f_y"), opt_in(op, "b");
  opt_out(op, c->add ? "i_dx" : "dYc"), opt_out(op, "i_ds"), opt_out(op, "i_db");
  if (c->add)
    opt_out(op, "dYc");
  bn_args(op, c);
  ok(opt_run(op, ws));
  expect_same(ws, c->add ? "i_dx" : "dYc", "u_dx");
  expect_same(ws, "i_ds", "u_ds");
  if (c->add)
    expect_same(ws, "dYc", "u_dt");
}

static void test_against_unfused(void **state) {
  dm_workspace *ws = *state;
  int n = 0;
  for (int mode = 0; mode < 3; mode++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      for (int form = 0; form < 3; form++) { /* Relu; Sum + Relu; Add + Relu */
        /* 600 values per channel: several of the kernels' 512-value blocks */
        fcase c = {nhwc ? 3 : 2, 5, 10, nhwc ? 20 : 30, nhwc, mode, form > 0,
                   form == 2 ? ADD_OP : SUM_OP, 1000u + 17u * (uint64_t)n++};
        check_case(ws, &c);
      }
}

/* ---- finite differences in double ------------------------------------------------ */

typedef struct ref {
  int64_t N, C, HW;
  int nhwc, add;
  double eps;
  const double *scale, *bias, *z, *r;
} ref;

static int64_t at(const ref *f, int64_t n, int64_t c, int64_t hw) {
  return f->nhwc ? (n * f->HW + hw) * f->C + c : (n * f->C + c) * f->HW + hw;
}

/* L = sum r Y for Y = relu(BN(x) [+ z]), all in double; *min_pre: the smallest |pre-activation|. */
static double ref_loss(const ref *f, const double *x, double *min_pre) {
  double L = 0;
  for (int64_t c = 0; c < f->C; c++) {
    double M = (double)(f->N * f->HW), s = 0, ss = 0;
    for (int64_t n = 0; n < f->N; n++)
      for (int64_t p = 0; p < f->HW; p++)
        s += x[at(f, n, c, p)];
    double mean = s / M;
    for (int64_t n = 0; n < f->N; n++)
      for (int64_t p = 0; p < f->HW; p++)
        ss += (x[at(f, n, c, p)] - mean) * (x[at(f, n, c, p)] - mean);
    double inv = 1 / sqrt(ss / M + f->eps);
    for (int64_t n = 0; n < f->N; n++)
      for (int64_t p = 0; p < f->HW; p++) {
        int64_t i = at(f, n, c, p);
        double v = f->scale[c] * (x[i] - mean) * inv + f->bias[c] + (f->add ? f->z[i] : 0);
        if (min_pre)
          *min_pre = fmin(*min_pre, fabs(v));
        L += f->r[i] * (v > 0 ? v : 0);
      }
  }
  return L;
}

static void check_fd(dm_workspace *ws, int nhwc, int add) {
  enum { N = 2, C = 3, H = 3, W = 4, NE = N * C * H * W };
  ref f = {N, C, H * W, nhwc, add, 1e-3, NULL, NULL, NULL, NULL};
  double x[NE], z[NE], r[NE], scale[C], bias[C];
  float xf[NE], zf[NE], rf[NE], sf[C], bf[C], zeros[C] = {0}, ones[C] = {1, 1, 1};
  uint64_t rng = 77 + (uint64_t)(2 * nhwc + add);
  /* Each channel's values are +-(0.4 .. 2) in equal numbers with a small offset, so the
   * normalised values stay at least ~0.3 from 0; bias and Z are small, and
   * pre-activations stay away from the kink (asserted below). */
  for (int64_t c = 0; c < C; c++) {
    sf[c] = (float)opt_uniform(&rng, 0.5, 1.5);
    bf[c] = (float)opt_uniform(&rng, -0.05, 0.05);
    scale[c] = sf[c], bias[c] = bf[c];
    for (int64_t k = 0; k < N * H * W; k++) {
      int64_t i = at(&f, k / (H * W), c, k % (H * W));
      double mag = opt_uniform(&rng, 0.4, 2);
      xf[i] = (float)((k % 2 ? mag : -mag) + 0.1 * (double)c);
    }
  }
  for (int64_t i = 0; i < NE; i++) {
    zf[i] = (float)opt_uniform(&rng, -0.05, 0.05);
    rf[i] = (float)opt_uniform(&rng, -1, 1);
    x[i] = xf[i], z[i] = zf[i], r[i] = rf[i];
  }
  f.scale = scale, f.bias = bias, f.z = z, f.r = r;
  double min_pre = INFINITY;
  ref_loss(&f, x, &min_pre);
  assert_true(min_pre > 0.02);

  int64_t dims[4] = {N, nhwc ? H : C, nhwc ? W : H, nhwc ? C : W}, cd = C;
  opt_feed(ws, "X", DM_FLOAT, 4, dims, xf);
  opt_feed(ws, "Z", DM_FLOAT, 4, dims, zf);
  opt_feed(ws, "dY", DM_FLOAT, 4, dims, rf);
  opt_feed(ws, "s", DM_FLOAT, 1, &cd, sf);
  opt_feed(ws, "b", DM_FLOAT, 1, &cd, bf);
  opt_feed(ws, "m", DM_FLOAT, 1, &cd, zeros);
  opt_feed(ws, "v", DM_FLOAT, 1, &cd, ones);
  fcase c = {N, C, H, W, nhwc, 0, add, SUM_OP, 0};
  fused_forward(ws, &c, "Z", "f_y");
  opt_op *op = opt_new(add ? "SpatialBNAddReluGradient" : "SpatialBNReluGradient");
  opt_in(op, "X"), opt_in(op, "s"), opt_in(op, "dY"), opt_in(op, "f_sm"), opt_in(op, "f_si"),
      opt_in(op, "f_y"), opt_in(op, "b");
  opt_out(op, "f_dx"), opt_out(op, "f_ds"), opt_out(op, "f_db");
  if (add)
    opt_out(op, "f_dz");
  bn_args(op, &c);
  ok(opt_run(op, ws));
  const dm_tensor *t_dx, *t_ds, *t_db, *t_dz = NULL, *t_y, *t_si;
  ok(dm_workspace_fetch(ws, "f_dx", &t_dx));
  ok(dm_workspace_fetch(ws, "f_ds", &t_ds));
  ok(dm_workspace_fetch(ws, "f_db", &t_db));
  ok(dm_workspace_fetch(ws, "f_y", &t_y));
  ok(dm_workspace_fetch(ws, "f_si", &t_si));
  if (add)
    ok(dm_workspace_fetch(ws, "f_dz", &t_dz));
  const float *dx = dm_tensor_data(t_dx), *ds = dm_tensor_data(t_ds), *db = dm_tensor_data(t_db);
  const float *y = dm_tensor_data(t_y), *si = dm_tensor_data(t_si);

  /* Per channel: the magnitudes behind the bound (g = masked dY). */
  double A[C] = {0}, B[C] = {0}, xh_abs_max[C] = {0};
  for (int64_t ch = 0; ch < C; ch++) {
    double s = 0;
    for (int64_t k = 0; k < N * H * W; k++)
      s += x[at(&f, k / (H * W), ch, k % (H * W))];
    double mean = s / (N * H * W);
    for (int64_t k = 0; k < N * H * W; k++) {
      int64_t i = at(&f, k / (H * W), ch, k % (H * W));
      double g = y[i] > 0 ? r[i] : 0, xh = (x[i] - mean) * si[ch];
      A[ch] += fabs(g) / (N * H * W);
      B[ch] += fabs(g * xh) / (N * H * W);
      xh_abs_max[ch] = fmax(xh_abs_max[ch], fabs(xh));
    }
  }
  const double h = 1e-4, fd_err = 1e-9;
  double worst = 0;
  for (int64_t i = 0; i < NE; i++) {
    int64_t ch = nhwc ? i % C : (i / (H * W)) % C;
    double xp[NE], xm[NE];
    memcpy(xp, x, sizeof x);
    memcpy(xm, x, sizeof x);
    xp[i] += h, xm[i] -= h;
    double want = (ref_loss(&f, xp, NULL) - ref_loss(&f, xm, NULL)) / (2 * h);
    double k = scale[ch] * si[ch], g = y[i] > 0 ? r[i] : 0;
    double tol = 8 * OPT_U32 * fabs(k) * (fabs(g) + A[ch] + xh_abs_max[ch] * B[ch]) + fd_err;
    worst = fmax(worst, fabs(dx[i] - want) / tol);
    if (!(fabs(dx[i] - want) <= tol))
      fail_msg("%s %s: dX[%lld] = %.9g, finite differences %.9g, tolerance %.3g",
               add ? "SpatialBNAddRelu" : "SpatialBNRelu", nhwc ? "NHWC" : "NCHW", (long long)i,
               dx[i], want, tol);
    if (add) { /* dL/dz = g exactly: the masked dY, copied */
      double zp = z[i];
      z[i] = zp + h;
      double lp = ref_loss(&f, x, NULL);
      z[i] = zp - h;
      double lm = ref_loss(&f, x, NULL);
      z[i] = zp;
      assert_true(fabs(((const float *)dm_tensor_data(t_dz))[i] - (lp - lm) / (2 * h)) <= fd_err);
    }
  }
  printf("# %s %s: worst dX error / tolerance %.3f\n", add ? "SpatialBNAddRelu" : "SpatialBNRelu",
         nhwc ? "NHWC" : "NCHW", worst);
  for (int64_t ch = 0; ch < C; ch++) {
    double sp = scale[ch], bp = bias[ch], lp, lm;
    scale[ch] = sp + h, lp = ref_loss(&f, x, NULL);
    scale[ch] = sp - h, lm = ref_loss(&f, x, NULL);
    scale[ch] = sp;
    /* dscale = sum g xhat, dbias = sum g: double sums of FP32-rounded terms */
    double tol_s = 4 * OPT_U32 * B[ch] * (N * H * W) + fd_err;
    assert_true(fabs(ds[ch] - (lp - lm) / (2 * h)) <= tol_s);
    bias[ch] = bp + h, lp = ref_loss(&f, x, NULL);
    bias[ch] = bp - h, lm = ref_loss(&f, x, NULL);
    bias[ch] = bp;
    assert_true(fabs(db[ch] - (lp - lm) / (2 * h)) <= 4 * OPT_U32 * A[ch] * (N * H * W) + fd_err);
  }
}

static void test_finite_differences(void **state) {
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int add = 0; add < 2; add++)
      check_fd(*state, nhwc, add);
}

/* ---- errors ---------------------------------------------------------------------- */

static void run_fused(dm_workspace *ws, const char *type, int nin, const char *z, int nout,
                      int is_test, dm_status want, const char *frag) {
  opt_op *op = opt_new(type);
  static const char *ins[] = {"X", "s", "b", "m", "v"};
  static const char *outs[] = {"Y", "rm", "rv", "sm", "si", "res"};
  for (int i = 0; i < nin && i < 5; i++)
    opt_in(op, ins[i]);
  if (nin > 5)
    opt_in(op, z);
  for (int i = 0; i < nout; i++)
    opt_out(op, outs[i]);
  opt_arg_int(op, "is_test", is_test);
  opt_expect_error(opt_run(op, ws), want, frag, NULL);
}

static void test_errors(void **state) {
  dm_workspace *ws = *state;
  float x[2 * 4 * 3] = {0}, p[4] = {1, 1, 1, 1};
  uint16_t h[2 * 4 * 3] = {0};
  int64_t dx[] = {2, 4, 3}, dz[] = {2, 4, 2}, dp[] = {4};
  opt_feed(ws, "X", DM_FLOAT, 3, dx, x);
  opt_feed(ws, "Zshape", DM_FLOAT, 3, dz, x);
  opt_feed(ws, "Zhalf", DM_FLOAT16, 3, dx, h);
  opt_feed(ws, "s", DM_FLOAT, 1, dp, p);
  opt_feed(ws, "b", DM_FLOAT, 1, dp, p);
  opt_feed(ws, "m", DM_FLOAT, 1, dp, p);
  opt_feed(ws, "v", DM_FLOAT, 1, dp, p);
  run_fused(ws, "SpatialBNRelu", 4, NULL, 5, 0, DM_ERR_INVALID, "takes 5 inputs, got 4");
  run_fused(ws, "SpatialBNAddRelu", 5, NULL, 5, 0, DM_ERR_INVALID, "takes 6 inputs, got 5");
  run_fused(ws, "SpatialBNRelu", 5, NULL, 1, 0, DM_ERR_INVALID, "takes 5 to 6 outputs, got 1");
  run_fused(ws, "SpatialBNRelu", 5, NULL, 5, 1, DM_ERR_INVALID,
            "SpatialBNRelu is a training op (is_test=0)");
  run_fused(ws, "SpatialBNAddRelu", 6, "Zshape", 5, 0, DM_ERR_SHAPE,
            "Z is FLOAT 2x4x2 but X is FLOAT 2x4x3; they must match");
  run_fused(ws, "SpatialBNAddRelu", 6, "Zhalf", 5, 0, DM_ERR_SHAPE,
            "Z is FLOAT16 2x4x3 but X is FLOAT 2x4x3");
  /* SpatialBN's own checks, in its words */
  opt_feed(ws, "s", DM_FLOAT, 1, (int64_t[]){2}, p);
  run_fused(ws, "SpatialBNRelu", 5, NULL, 5, 0, DM_ERR_SHAPE,
            "scale has 2 elements but X has 4 channels (NCHW)");
  opt_feed(ws, "s", DM_FLOAT, 1, dp, p);
  /* The gradients */
  opt_feed(ws, "Yshape", DM_FLOAT, 3, dz, x);
  opt_feed(ws, "res", DM_FLOAT, 1, dp, p);
  const char *grad_in[] = {"X", "s", "X", "m", "v", "Yshape", "b"};
  opt_op *op = opt_new("SpatialBNReluGradient");
  for (int i = 0; i < 7; i++)
    opt_in(op, grad_in[i]);
  opt_out(op, "dX"), opt_out(op, "ds"), opt_out(op, "db");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "Y is FLOAT 2x4x2 but X is FLOAT 2x4x3", NULL);
  op = opt_new("SpatialBNReluGradient");
  for (int i = 0; i < 5; i++)
    opt_in(op, grad_in[i]);
  opt_in(op, "X"), opt_in(op, "b"), opt_in(op, "res");
  opt_out(op, "dX"), opt_out(op, "ds"), opt_out(op, "db");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "reserve is FLOAT; expected UINT8", NULL);
  opt_feed(ws, "b2", DM_FLOAT, 1, (int64_t[]){2}, p);
  op = opt_new("SpatialBNReluGradient");
  for (int i = 0; i < 5; i++)
    opt_in(op, grad_in[i]);
  opt_in(op, "X"), opt_in(op, "b2");
  opt_out(op, "dX"), opt_out(op, "ds"), opt_out(op, "db");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE,
                   "bias is FLOAT with 2 elements; expected FLOAT with scale's 4", NULL);
  op = opt_new("SpatialBNAddReluGradient");
  for (int i = 0; i < 5; i++)
    opt_in(op, grad_in[i]);
  opt_in(op, "X"), opt_in(op, "b");
  opt_out(op, "dX"), opt_out(op, "ds"), opt_out(op, "db"), opt_out(op, "dX");
  /* the instantiator's rule, which the kernel's masking into dZ relies on */
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "outputs 0 and 3 are both 'dX'", NULL);
  op = opt_new("SpatialBNAddReluGradient");
  for (int i = 0; i < 5; i++)
    opt_in(op, grad_in[i]);
  opt_in(op, "X"), opt_in(op, "b");
  opt_out(op, "dX"), opt_out(op, "ds"), opt_out(op, "db");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "takes 4 outputs, got 3", NULL);
  op = opt_new("SpatialBNAddReluGradient");
  for (int i = 0; i < 5; i++)
    opt_in(op, grad_in[i]);
  opt_out(op, "dX"), opt_out(op, "ds"), opt_out(op, "db"), opt_out(op, "dZ");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "takes 7 to 8 inputs, got 5", NULL);
}

/* The schemas: SpatialBN's FP32 slots, the reserve never cast, gradients made. */
static void test_schema(void **state) {
  (void)state;
  static const char *const types[] = {"SpatialBNRelu", "SpatialBNAddRelu",
                                      "SpatialBNReluGradient", "SpatialBNAddReluGradient"};
  for (int i = 0; i < 4; i++) {
    const dm_op_schema *s = dm_schema_lookup(types[i]);
    assert_non_null(s);
    assert_int_equal(s->precision, DM_PREC_FOLLOW);
    assert_int_equal(s->fp32_inputs, i < 2 ? 0x1e : 0x5a);
    assert_int_equal(s->fp32_outputs, i < 2 ? 0x1e : 0x06);
    assert_int_equal(i < 2 ? s->nonfloat_outputs : s->nonfloat_inputs, i < 2 ? 0x20 : 0x80);
    assert_true(i < 2 ? s->gradient != NULL : s->gradient == NULL);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_unfused),
      cmocka_unit_test(test_finite_differences),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_schema),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
