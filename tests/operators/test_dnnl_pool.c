/* test_dnnl_pool.c: the oneDNN engine's pools and batch normalization (operators/dnnl/
 * pool.c, bn.c) against the reference kernels on the same inputs: MaxPool, AveragePool
 * and their gradients, SpatialBN (test and training mode, running statistics) and its
 * gradient; FP32 and BF16; odd shapes, pads, strides, global pooling, ceil mode
 * (legacy_pad 3); plain inputs and blocked ones (nChw16c, nChw8c, made by relayout as a
 * convolution's output would be); chains that stay blocked between engine ops.
 *
 * Two workspaces: one on the default engine (DNNL), one set to REFERENCE. Bounds, from
 * the dtype: a maximum and MaxPoolGradient (the same sums in the same order) are exact;
 * an average of L values is off by at most (L + 2) u32 S / L each side (S = sum |x|, as
 * test_pool.c derives), plus one BF16 rounding (2^-8 |y|) each side in BF16.
 *
 * BN: oneDNN sums a channel's M = N*H*W values in FP32 where the reference sums in double,
 * so its statistics carry K u32 relative to the terms' magnitudes, K = 4 (sqrt(M) + 2)
 * (rounding errors of a sum of M terms grow as sqrt(M) in practice; M u32 is the worst
 * case), and every output inherits them (bn_case below spells out each bound, from the
 * largest |x|, |dY|, inv_std, |scale|, |bias|). A BF16 Y or dX is rounded once on each
 * side from values that differ by that much: at most one BF16 ulp apart, 2^-7 |y|.
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
#include "core/tensor.h"
#include "core/workspace.h"
#include "dnnl_test_util.h"
#include "op_test_util.h"
#include "operators/dnnl/dnnl_common.h"

typedef struct two_ws {
  dm_workspace *d, *r; /* DNNL (the default), REFERENCE */
} two_ws;

static int setup(void **state) {
  two_ws *w = calloc(1, sizeof *w);
  if (!w || dtu_two_workspaces(&w->d, &w->r))
    return 1;
  *state = w;
  return 0;
}

static int teardown(void **state) {
  two_ws *w = *state;
  dtu_destroy_two(w->d, w->r);
  free(w);
  return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* n values: uniform in [-2, 2), or with `ties`, small integers (many equal maxima). */
static double *values(int64_t n, int ties) {
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    v[i] = ties ? floor(opt_uniform(&rng, -3, 4)) : opt_uniform(&rng, -2, 2);
  return v;
}

static void feed_both(two_ws *w, const char *name, dm_dtype t, int ndim, const int64_t *dims,
                      const double *v) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  void *buf = malloc((size_t)(n ? n : 1) * 4);
  for (int64_t i = 0; i < n; i++)
    if (t == DM_BFLOAT16)
      ((uint16_t *)buf)[i] = dm_double_to_bf16(v[i]);
    else
      ((float *)buf)[i] = (float)v[i];
  opt_feed(w->d, name, t, ndim, dims, buf);
  opt_feed(w->r, name, t, ndim, dims, buf);
  free(buf);
}

/* Puts the DNNL workspace's blob in a channel-blocked layout (nChw16c or nChw8c), as a
 * convolution would leave it. */
static void make_blocked(two_ws *w, const char *name, int blk) {
  dtu_make_blocked(w->d, name, blk);
}

static int is_blocked(two_ws *w, const char *name) {
  return !dm_tensor_is_plain(dm_workspace_tensor(w->d, name));
}

static double worst[2]; /* the largest error seen relative to its bound: FP32, BF16 */
static double max_abs_err[2];

/* Compares blob `name` of both workspaces: |d - r| <= abs_tol + rel * |r|. */
static void compare(two_ws *w, const char *what, const char *name, double abs_tol, double rel) {
  const dm_tensor *d = dm_workspace_tensor(w->d, name), *r = dm_workspace_tensor(w->r, name);
  dtu_expect_alike(d, r);
  int bf = dm_tensor_dtype(d) == DM_BFLOAT16;
  for (int64_t i = 0; i < d->numel; i++) {
    double a = dtu_val(d, i), b = dtu_val(r, i), tol = abs_tol + rel * fabs(b);
    if (!(fabs(a - b) <= tol))
      fail_msg("%s: %s[%lld] = %.9g, reference %.9g, tolerance %.3g", what, name, (long long)i,
               a, b, tol);
    if (tol > 0)
      worst[bf] = fmax(worst[bf], fabs(a - b) / tol);
    max_abs_err[bf] = fmax(max_abs_err[bf], fabs(a - b));
  }
}

static void run_both(two_ws *w, opt_op *(*make)(const void *), const void *arg) {
  dm_status s = opt_run(make(arg), w->d);
  if (s != DM_OK)
    fail_msg("DNNL: %s", dm_last_error());
  s = opt_run(make(arg), w->r);
  if (s != DM_OK)
    fail_msg("REFERENCE: %s", dm_last_error());
}

/* Pools -------------------------------------------------------------------------- */

typedef struct pool_case {
  const char *name;
  int64_t N, C, H, W, kh, kw, sh, sw;
  int64_t pads[4]; /* t, l, b, r */
  int legacy, global;
} pool_case;

static const pool_case cases[] = {
    {"k3 s2", 2, 3, 7, 7, 3, 3, 2, 2, {0, 0, 0, 0}, 0, 0},
    {"odd, asymmetric pads", 1, 5, 8, 9, 3, 2, 2, 1, {1, 0, 1, 1}, 0, 0},
    {"pads, stride 1", 2, 17, 6, 5, 3, 3, 1, 1, {2, 2, 2, 2}, 0, 0},
    {"stride > kernel", 1, 2, 10, 11, 2, 2, 3, 3, {0, 0, 0, 0}, 0, 0},
    {"global 13x11", 2, 20, 13, 11, 0, 0, 1, 1, {0, 0, 0, 0}, 0, 1},
    {"legacy 3 (ceil), k3 s2 p1", 2, 3, 6, 5, 3, 3, 2, 2, {1, 1, 1, 1}, 3, 0},
    {"legacy 3 drops a window", 1, 2, 5, 7, 2, 2, 2, 2, {1, 1, 1, 1}, 3, 0},
    {"legacy 3, 27x27 k3 s2", 2, 16, 27, 27, 3, 3, 2, 2, {0, 0, 0, 0}, 3, 0},
    {"legacy 1 (VALID)", 1, 2, 7, 8, 3, 3, 2, 2, {0, 0, 0, 0}, 1, 0},
    {"legacy 2 (SAME)", 2, 9, 7, 8, 3, 3, 2, 2, {0, 0, 0, 0}, 2, 0},
};

static void pool_args(opt_op *op, const pool_case *c) {
  if (c->global) {
    opt_arg_int(op, "global_pooling", 1);
  } else {
    opt_arg_int(op, "kernel_h", c->kh);
    opt_arg_int(op, "kernel_w", c->kw);
    int64_t s[2] = {c->sh, c->sw};
    opt_arg_ints(op, "strides", 2, s);
    if (c->pads[0] || c->pads[1] || c->pads[2] || c->pads[3])
      opt_arg_ints(op, "pads", 4, c->pads);
  }
  if (c->legacy)
    opt_arg_int(op, "legacy_pad", c->legacy);
}

typedef struct pool_run {
  const pool_case *c;
  const char *type, *in[3], *out;
} pool_run;

static opt_op *make_pool(const void *arg) {
  const pool_run *p = arg;
  opt_op *op = opt_new(p->type);
  for (int i = 0; i < 3 && p->in[i]; i++)
    opt_in(op, p->in[i]);
  opt_out(op, p->out);
  pool_args(op, p->c);
  return op;
}

static int64_t window_len(const pool_case *c) { return c->global ? c->H * c->W : c->kh * c->kw; }

/* Forward and gradient of one case: X (plain or blocked by blk), Y = pool(X), dX. */
static void pool_case_run(two_ws *w, const pool_case *c, int is_max, dm_dtype t, int blk,
                          int ties) {
  char what[160];
  snprintf(what, sizeof what, "%s %s %s %s", is_max ? "MaxPool" : "AveragePool", c->name,
           t == DM_FLOAT ? "FP32" : "BF16", blk ? (blk == 16 ? "nChw16c" : "nChw8c") : "plain");
  const int64_t xd[4] = {c->N, c->C, c->H, c->W}, n = c->N * c->C * c->H * c->W;
  double *x = values(n, ties);
  feed_both(w, "X", t, 4, xd, x);
  if (blk)
    make_blocked(w, "X", blk);
  pool_run fwd = {c, is_max ? "MaxPool" : "AveragePool", {"X", NULL, NULL}, "Y"};
  run_both(w, make_pool, &fwd);
  if (blk && dm_dnnl_can(DM_DNNL_POOL, t)) /* the engine ran, and kept the layout */
    assert_true(is_blocked(w, "Y"));
  const int64_t L = window_len(c);
  const int bf = t == DM_BFLOAT16;
  /* |x| < 4: S <= 4 L. */
  double acc = is_max ? 0 : (double)(L + 2) * OPT_U32 * 4.0;
  compare(w, what, "Y", acc * 2 + (bf ? 1e-30 : 0), bf ? 2 * OPT_UBF16 : 0);
  /* Gradient: X and Y as the forward left them, dY in X's layout (as an engine's
   * gradient upstream would leave it; AveragePoolGradient writes dX in dY's). */
  const dm_tensor *y = dm_workspace_tensor(w->r, "Y");
  double *dy = values(y->numel, 0);
  feed_both(w, "dY", t, 4, y->dims, dy);
  if (blk)
    make_blocked(w, "dY", blk);
  pool_run bwd = {c, is_max ? "MaxPoolGradient" : "AveragePoolGradient", {"X", "Y", "dY"}, "dX"};
  run_both(w, make_pool, &bwd);
  if (blk && dm_dnnl_can(DM_DNNL_POOL, t)) /* else the forward's reference made X plain */
    assert_true(is_blocked(w, "dX"));
  /* MaxPoolGradient: the same sums in the same order. Average: each dX sums at most
   * ceil(k/s)^2 <= L terms dY/L'. */
  double g = is_max ? 0 : (double)(L + 2) * OPT_U32 * 2.0 * (double)L;
  strncat(what, " gradient", sizeof what - strlen(what) - 1);
  compare(w, what, "dX", g * 2 + (bf ? 1e-30 : 0), bf ? 2 * OPT_UBF16 : 0);
  free(x);
  free(dy);
}

static void test_pools(void **state) {
  two_ws *w = *state;
  static const int blks[] = {0, 16, 8};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int is_max = 0; is_max < 2; is_max++)
      for (int bf = 0; bf < 2; bf++)
        for (int b = 0; b < 3; b++)
          pool_case_run(w, &cases[i], is_max, bf ? DM_BFLOAT16 : DM_FLOAT, blks[b], 0);
  printf("pools: worst error %.2f of the bound (FP32), %.2f (BF16); max |error| %.3g, %.3g\n",
         worst[0], worst[1], max_abs_err[0], max_abs_err[1]);
}

/* Ties (small integers; BF16 makes them common): Caffe2's rule gives dY to every input
 * equal to the maximum, which oneDNN's backward (one argmax) would not. */
static void test_max_pool_gradient_ties(void **state) {
  two_ws *w = *state;
  for (int bf = 0; bf < 2; bf++)
    for (int b = 0; b < 2; b++) {
      pool_case_run(w, &cases[0], 1, bf ? DM_BFLOAT16 : DM_FLOAT, b ? 16 : 0, 1);
      pool_case_run(w, &cases[2], 1, bf ? DM_BFLOAT16 : DM_FLOAT, b ? 16 : 0, 1);
    }
  /* A tie was there to share: some dX holds two windows' or two tied inputs' shares. */
  const dm_tensor *dx = dm_workspace_tensor(w->r, "dX");
  int64_t nonzero = 0;
  for (int64_t i = 0; i < dx->numel; i++)
    nonzero += dtu_val(dx, i) != 0;
  assert_true(nonzero > dx->numel / 4);
}

typedef struct chain_op {
  const char *type, *in, *out;
  const pool_case *c;
} chain_op;

static opt_op *make_chain_op(const void *arg) {
  const chain_op *o = arg;
  opt_op *op = opt_new(o->type);
  opt_in(op, o->in);
  opt_out(op, o->out);
  if (o->c)
    pool_args(op, o->c);
  return op;
}

/* Dropout at inference, with its (all-true) mask: Y = X in X's layout. */
static opt_op *make_dropout(const void *arg) {
  (void)arg;
  opt_op *op = opt_new("Dropout");
  opt_in(op, "A");
  opt_out(op, "D");
  opt_out(op, "M");
  opt_arg_int(op, "is_test", 1);
  return op;
}

/* X (nChw16c) -> MaxPool -> Relu -> AveragePool -> Dropout (is_test): blocked all the
 * way; the intermediate fetched by the user reads as plain NCHW, equal to the
 * reference's. */
static void test_chain_blocked(void **state) {
  two_ws *w = *state;
  static const pool_case k3s2 = {"k3 s2 p1", 2, 20, 15, 13, 3, 3, 2, 2, {1, 1, 1, 1}, 0, 0};
  static const pool_case k2s1 = {"k2 s1", 0, 0, 0, 0, 2, 2, 1, 1, {0, 0, 1, 1}, 0, 0};
  for (int bf = 0; bf < 2; bf++) {
    dm_dtype t = bf ? DM_BFLOAT16 : DM_FLOAT;
    const int64_t xd[4] = {2, 20, 15, 13};
    double *x = values(2 * 20 * 15 * 13, 0);
    feed_both(w, "X", t, 4, xd, x);
    make_blocked(w, "X", 16);
    const chain_op ops[] = {{"MaxPool", "X", "P", &k3s2},
                            {"Relu", "P", "R", NULL},
                            {"AveragePool", "R", "A", &k2s1}};
    for (int i = 0; i < 3; i++)
      run_both(w, make_chain_op, &ops[i]);
    run_both(w, make_dropout, NULL);
    if (dm_dnnl_can(DM_DNNL_POOL, t)) { /* else the reference pools: plain from there on */
      assert_true(is_blocked(w, "D"));
      assert_true(is_blocked(w, "P"));
      assert_true(is_blocked(w, "R"));
      assert_true(is_blocked(w, "A"));
    }
    compare(w, "chain P", "P", 0, 0);
    compare(w, "chain R", "R", 0, 0);
    compare(w, "chain A", "A", 6 * OPT_U32 * 8.0 * 2, bf ? 2 * OPT_UBF16 : 0);
    compare(w, "chain D", "D", 6 * OPT_U32 * 8.0 * 2, bf ? 2 * OPT_UBF16 : 0);
    const dm_tensor *m = dm_workspace_tensor(w->d, "M");
    assert_int_equal(m->dtype, DM_BOOL);
    for (int64_t i = 0; i < m->numel; i++)
      assert_int_equal(((const uint8_t *)dm_tensor_data(m))[i], 1);
    /* The user's fetch: plain NCHW (the data converted), the values the reference's. */
    const int64_t pd[4] = {2, 20, 8, 7};
    const dm_tensor *p = opt_fetch(w->d, "P", t, 4, pd);
    const dm_tensor *pr = dm_workspace_tensor(w->r, "P");
    for (int64_t i = 0; i < p->numel; i++)
      assert_true(dtu_val(p, i) == dtu_val(pr, i));
    free(x);
  }
}

/* SpatialBN ------------------------------------------------------------------------ */

typedef struct bn_run {
  int is_test, in_place;
  const char *type;
} bn_run;

static opt_op *make_bn(const void *arg) {
  const bn_run *b = arg;
  opt_op *op = opt_new(b->type);
  if (strcmp(b->type, "SpatialBN") == 0) {
    const char *in[] = {"X", "scale", "bias", "mean", "var"};
    for (int i = 0; i < 5; i++)
      opt_in(op, in[i]);
    opt_out(op, b->in_place ? "X" : "Y");
    if (!b->is_test) {
      opt_out(op, "mean"); /* running statistics in place, as Caffe2's nets do */
      opt_out(op, "var");
      opt_out(op, "saved_mean");
      opt_out(op, "saved_inv_std");
    }
  } else {
    const char *in[] = {"X", "scale", "dY", b->is_test ? "mean" : "saved_mean",
                        b->is_test ? "var" : "saved_inv_std"};
    for (int i = 0; i < 5; i++)
      opt_in(op, in[i]);
    opt_out(op, "dX");
    opt_out(op, "dscale");
    opt_out(op, "dbias");
  }
  opt_arg_int(op, "is_test", b->is_test);
  opt_arg_float(op, "epsilon", 0.05f); /* large enough that forgetting it shows */
  opt_arg_float(op, "momentum", 0.8f);
  return op;
}

/* The largest |value| of blob `name` in the reference workspace. */
static double max_abs(two_ws *w, const char *name) {
  const dm_tensor *t = dm_workspace_tensor(w->r, name);
  double m = 0;
  for (int64_t i = 0; i < t->numel; i++)
    m = fmax(m, fabs(dtu_val(t, i)));
  return m;
}

static void bn_case(two_ws *w, int64_t N, int64_t C, int64_t H, int64_t W, dm_dtype t, int blk,
                    int is_test, int in_place) {
  char what[128];
  snprintf(what, sizeof what, "SpatialBN %s %lldx%lldx%lldx%lld %s %s%s",
           is_test ? "test" : "train", (long long)N, (long long)C, (long long)H, (long long)W,
           t == DM_FLOAT ? "FP32" : "BF16", blk ? "nChw16c" : "plain", in_place ? " in place" : "");
  const int64_t xd[4] = {N, C, H, W}, n = N * C * H * W, M = N * H * W;
  double *x = values(n, 0), *p = values(4 * C, 0), *dy = values(n, 0);
  for (int64_t i = 0; i < n; i++)
    x[i] = x[i] * 3 + 1.5; /* mean away from 0 */
  for (int64_t c = 0; c < C; c++)
    p[3 * C + c] = fabs(p[3 * C + c]) + 0.5; /* var > 0 */
  feed_both(w, "X", t, 4, xd, x);
  const char *pn[] = {"scale", "bias", "mean", "var"};
  for (int i = 0; i < 4; i++)
    feed_both(w, pn[i], DM_FLOAT, 1, &C, p + i * C);
  /* The inputs' magnitudes, before the (in-place) op changes them. */
  const double u = 0x1p-24, K = 4 * (sqrt((double)M) + 2), xm = max_abs(w, "X");
  const double sm = max_abs(w, "scale"), bm = max_abs(w, "bias");
  double mm = max_abs(w, "mean");
  double inv = 0; /* the largest inv_std: is_test's from var, else the batch's (below) */
  const dm_tensor *vt = dm_workspace_tensor(w->r, "var");
  for (int64_t c = 0; c < C; c++)
    inv = fmax(inv, 1 / sqrt(dtu_val(vt, c) + 0.05));
  if (blk)
    make_blocked(w, "X", blk);
  bn_run b = {is_test, in_place, "SpatialBN"};
  const char *y = in_place ? "X" : "Y";
  run_both(w, make_bn, &b);
  if (blk && dm_dnnl_can(DM_DNNL_BN, t))
    assert_true(is_blocked(w, y));
  const double ry = t == DM_BFLOAT16 ? 0x1p-7 : 4 * u; /* one output rounding each side */
  if (!is_test) {
    inv = max_abs(w, "saved_inv_std");
    mm = max_abs(w, "saved_mean");
    /* mean: K u max|x|; the variance's terms (x - mean)^2 <= (2 max|x|)^2: K u 4 max|x|^2;
     * inv_std = 1/sqrt(var + eps): half of var's error relative to var + eps (<= inv^2). */
    const double dm_ = K * u * xm, dv = K * u * 4 * xm * xm;
    compare(w, what, "saved_mean", dm_, 2 * u);
    compare(w, what, "mean", dm_, 4 * u); /* the running ones: (1 - momentum) of it */
    compare(w, what, "var", dv, 4 * u);
    compare(w, what, "saved_inv_std", 0, dv * inv * inv / 2 + 4 * u);
  }
  /* Y = (x - mean) scale inv + bias: mean's error, var's (relative to var + eps) times
   * |xhat| <= (max|x| + max|mean|) inv, and the few roundings of the terms. */
  const double xh = (xm + mm) * inv;
  const double ky = is_test ? 8 : K;
  compare(w, what, y, ky * u * (sm * inv * xm + sm * xh * (1 + 2 * xm * xm * inv * inv) + bm), ry);
  if (!in_place) {
    feed_both(w, "dY", t, 4, xd, dy);
    const double gm = max_abs(w, "dY");
    if (blk)
      make_blocked(w, "dY", 8); /* another layout than X's: reordered to it */
    bn_run g = {is_test, 0, "SpatialBNGradient"};
    run_both(w, make_bn, &g);
    if (blk && dm_dnnl_can(DM_DNNL_BN_BWD, t))
      assert_true(is_blocked(w, "dX"));
    strncat(what, " gradient", sizeof what - strlen(what) - 1);
    /* dbias = sum dY, dscale = sum dY xhat: FP32 sums of M terms (xhat from an inv_std a
     * few ulps off: the variance given back as 1/inv^2 - eps, then sqrt in FP32). */
    const double e_db = K * u * M * gm, e_ds = K * u * M * gm * xh;
    compare(w, what, "dbias", e_db, 0);
    compare(w, what, "dscale", e_ds, 0);
    /* dX = scale inv (dY - dbias/M - xhat dscale/M) (train; is_test: scale inv dY). */
    const double e_dx = is_test ? 8 * u * sm * inv * gm
                                : K * u * sm * inv * gm * (2 + 2 * xh + xh * xh) * 2;
    compare(w, what, "dX", e_dx, ry);
  }
  free(x);
  free(p);
  free(dy);
}

static void test_batchnorm(void **state) {
  two_ws *w = *state;
  worst[0] = worst[1] = max_abs_err[0] = max_abs_err[1] = 0;
  for (int bf = 0; bf < 2; bf++)
    for (int blk = 0; blk < 2; blk++)
      for (int is_test = 0; is_test < 2; is_test++)
        for (int in_place = 0; in_place < 2; in_place++) {
          dm_dtype t = bf ? DM_BFLOAT16 : DM_FLOAT;
          bn_case(w, 2, 3, 5, 7, t, blk ? 16 : 0, is_test, in_place);
          bn_case(w, 3, 20, 4, 3, t, blk ? 16 : 0, is_test, in_place);
          bn_case(w, 4, 5, 13, 11, t, blk ? 16 : 0, is_test, in_place); /* M = 572 */
        }
  printf("batch normalization: worst error %.2f of the bound (FP32), %.2f (BF16); max |error| "
         "%.3g, %.3g\n", worst[0], worst[1], max_abs_err[0], max_abs_err[1]);
}

/* Errors: the reference's checks and words, from the engine's kernels. */
static void test_errors(void **state) {
  two_ws *w = *state;
  const int64_t xd[4] = {1, 2, 3, 3};
  double x[18] = {0};
  feed_both(w, "X", DM_FLOAT, 4, xd, x);
  static const pool_case big = {"k5", 1, 2, 3, 3, 5, 5, 1, 1, {0, 0, 0, 0}, 0, 0};
  pool_run fwd = {&big, "MaxPool", {"X", NULL, NULL}, "Y"};
  for (int e = 0; e < 2; e++) {
    dm_status s = opt_run(make_pool(&fwd), e ? w->r : w->d);
    assert_int_equal(s, DM_ERR_SHAPE);
  }
  const int64_t two = 2, three = 3;
  double p[3] = {1, 1, 1};
  feed_both(w, "scale", DM_FLOAT, 1, &three, p);
  feed_both(w, "bias", DM_FLOAT, 1, &two, p);
  feed_both(w, "mean", DM_FLOAT, 1, &two, p);
  feed_both(w, "var", DM_FLOAT, 1, &two, p);
  bn_run b = {1, 0, "SpatialBN"};
  char msg[2][512];
  for (int e = 0; e < 2; e++) {
    dm_status s = opt_run(make_bn(&b), e ? w->r : w->d);
    assert_int_equal(s, DM_ERR_SHAPE);
    snprintf(msg[e], sizeof msg[e], "%s", dm_last_error());
  }
  assert_string_equal(msg[0], msg[1]);
  assert_non_null(strstr(msg[0], "scale has 3 elements"));
}

int main(void) {
  if (!dm_have_dnnl()) {
    printf("oneDNN cannot run here: nothing to test\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pools),
      cmocka_unit_test(test_max_pool_gradient_ties),
      cmocka_unit_test(test_chain_blocked),
      cmocka_unit_test(test_batchnorm),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
