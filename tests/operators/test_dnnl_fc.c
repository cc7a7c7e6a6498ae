/* test_dnnl_fc.c: the oneDNN engine's FC, FCFusion, FCGradient, Sum, Add and Concat
 * (operators/dnnl/) against the reference kernels on the same inputs, FP32 and BF16.
 *
 * Each op runs in two workspaces fed alike: one on the default engine (DNNL), one set to
 * "REFERENCE". Blocked inputs are made in the DNNL workspace by reordering a fed blob
 * into nChw16c (dm_dnnl_relayout), as a convolution would leave it; the reference
 * workspace holds the same values plain. dm_op_probe_kernel checks which kernel runs.
 *
 * Tolerances. FC/FCGradient: both kernels accumulate K (M, N) products in FP32, each
 * erring by at most len u32 S (S = the sum of |products| and |b|, u32 = 2^-24), so they
 * differ by twice that; BF16 outputs are each rounded once more (u = 2^-8 relative).
 * db, Sum, Add and Concat do the reference's arithmetic exactly: compared bit for bit.
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
#include "core/workspace.h"
#include "net/net.h"
#include "net/netdef_build.h"
#include "dnnl_test_util.h"
#include "op_test_util.h"
#include "operators/dnnl/dnnl_common.h"

#define MAXN 16384

DTU_TWO_WORKSPACES /* wd: DNNL (the default), wr: REFERENCE */
static uint64_t seed = 7;

static int64_t numel(int ndim, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= d[i];
  return n;
}

/* Fills v with uniform values in [lo, hi), rounds them to t's precision (in v, so the
 * test knows the stored values) and feeds them to both workspaces. */
static void feed(const char *name, dm_dtype t, int ndim, const int64_t *d, float *v, double lo,
                 double hi) {
  int64_t n = numel(ndim, d);
  assert_true(n <= MAXN);
  static uint16_t h[MAXN];
  for (int64_t i = 0; i < n; i++) {
    v[i] = (float)opt_uniform(&seed, lo, hi);
    if (t == DM_BFLOAT16) {
      h[i] = dm_float_to_bf16(v[i]);
      v[i] = dm_bf16_to_float(h[i]);
    }
  }
  const void *p = t == DM_BFLOAT16 ? (const void *)h : (const void *)v;
  opt_feed(wd, name, t, ndim, d, p);
  opt_feed(wr, name, t, ndim, d, p);
}

/* Reorders blob `name` of the DNNL workspace into nChw16c, as a convolution writes. */
static void make_blocked(const char *name) { dtu_make_blocked(wd, name, 16); }

static int is_blocked(dm_workspace *ws, const char *name) {
  const dm_tensor *t = dm_workspace_tensor(ws, name);
  assert_non_null(t);
  return !dm_tensor_is_plain(t);
}

/* An op: type, inputs, outputs, int args (names[i] = vals[i]) and one string arg. */
typedef struct spec {
  const char *type;
  const char *in[8], *out[4];
  const char *iarg[4];
  int64_t ival[4];
  const char *sarg, *sval;
} spec;

static int count(const char *const *names, int cap) {
  int n = 0;
  while (n < cap && names[n])
    n++;
  return n;
}

static dm_status run_in(dm_workspace *ws, const spec *s) {
  opt_op *op = opt_new(s->type);
  for (int i = 0; i < count(s->in, 8); i++)
    opt_in(op, s->in[i]);
  for (int i = 0; i < count(s->out, 4); i++)
    opt_out(op, s->out[i]);
  for (int i = 0; i < count(s->iarg, 4); i++)
    opt_arg_int(op, s->iarg[i], s->ival[i]);
  if (s->sarg)
    opt_arg_string(op, s->sarg, s->sval);
  return opt_run(op, ws);
}

/* The engine of the kernel ws would run s with ("" for the reference's). */
static const char *engine_of(dm_workspace *ws, const spec *s) {
  Caffe2__OperatorDef *def;
  assert_int_equal(dm_opdef_new(s->type, &def), DM_OK);
  for (int i = 0; i < count(s->in, 8); i++)
    assert_int_equal(dm_opdef_add_input(def, s->in[i]), DM_OK);
  for (int i = 0; i < count(s->out, 4); i++)
    assert_int_equal(dm_opdef_add_output(def, s->out[i]), DM_OK);
  for (int i = 0; i < count(s->iarg, 4); i++)
    assert_int_equal(dm_opdef_set_arg_int(def, s->iarg[i], s->ival[i]), DM_OK);
  if (s->sarg)
    assert_int_equal(dm_opdef_set_arg_string(def, s->sarg, s->sval), DM_OK);
  const dm_kernel_def *k = NULL;
  dm_status st = dm_op_probe_kernel(ws, def, DM_CPU, 0, &k);
  protobuf_c_message_free_unpacked(&def->base, NULL);
  assert_int_equal(st, DM_OK);
  return k->engine ? k->engine : "";
}

/* Whether oneDNN builds the primitives s's DNNL kernel needs for its inputs' dtype on
 * this CPU (caps.c's trials: no BFLOAT16 inner products below AVX-512); Sum and Add run
 * their own loops. */
static int dnnl_builds(const spec *s) {
  dm_dtype t = dm_workspace_tensor(wd, s->in[0])->dtype;
  if (strcmp(s->type, "Concat") == 0)
    return dm_dnnl_can(DM_DNNL_CONCAT, t);
  if (strcmp(s->type, "FCGradient") == 0)
    return dm_dnnl_can(DM_DNNL_IP, t) && dm_dnnl_can(DM_DNNL_IP_BWD_WEIGHTS, t) &&
           dm_dnnl_can(DM_DNNL_IP_BWD_DATA, t);
  if (strncmp(s->type, "FC", 2) == 0)
    return dm_dnnl_can(DM_DNNL_IP, t);
  return 1;
}

/* Runs s in both workspaces, the DNNL one on a DNNL kernel (dnnl = 1, where oneDNN
 * builds it here; else the reference's, which the DNNL workspace falls back to) or not. */
static void run_both(const spec *s, int dnnl) {
  assert_string_equal(engine_of(wd, s), dnnl && dnnl_builds(s) ? DM_ENGINE_DNNL : "");
  if (run_in(wd, s) != DM_OK)
    fail_msg("%s on DNNL: %s", s->type, dm_last_error());
  if (run_in(wr, s) != DM_OK)
    fail_msg("%s on REFERENCE: %s", s->type, dm_last_error());
}

/* Blob `name` of ws as floats (plain, widened), n of them. */
static void get(dm_workspace *ws, const char *name, float *out, int64_t n) {
  const dm_tensor *t = dm_workspace_tensor(ws, name);
  assert_non_null(t);
  assert_int_equal(t->numel, n);
  const void *p = dm_tensor_data(t);
  for (int64_t i = 0; i < n; i++)
    out[i] = t->dtype == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)p)[i])
                                     : ((const float *)p)[i];
}

/* Both workspaces' blob `name` (same dtype and shape) bit for bit. */
static void expect_same_bits(const char *name) {
  const dm_tensor *a = dm_workspace_tensor(wd, name), *b = dm_workspace_tensor(wr, name);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(a->dtype, b->dtype);
  assert_true(dm_tensor_same_shape(a, b));
  size_t bytes = (size_t)a->numel * dm_dtype_size(a->dtype);
  if (bytes && memcmp(dm_tensor_data(a), dm_tensor_data(b), bytes) != 0)
    fail_msg("%s differs from the reference", name);
}

/* Compares `name` (n values) with the reference's, |d - r| <= tol[i]; returns the worst
 * error as a fraction of its bound. */
static double expect_close(const char *name, int64_t n, const double *tol) {
  static float a[MAXN], b[MAXN];
  get(wd, name, a, n);
  get(wr, name, b, n);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]);
    if (!(e <= tol[i]))
      fail_msg("%s[%lld] = %.9g, reference %.9g, tolerance %.3g", name, (long long)i, a[i], b[i],
               tol[i]);
    worst = fmax(worst, tol[i] > 0 ? e / tol[i] : 0);
  }
  return worst;
}

static double u_of(dm_dtype t) { return t == DM_BFLOAT16 ? 0x1p-8 : 0; }

/* ---- FC, FCFusion ---------------------------------------------------------------- */

/* FC (or FCFusion) of X (ndim dims xd, flattened at axis) and W (N x K) in dtype t, bias
 * in bt; X made blocked first when `blocked`. */
static void check_fc(const char *type, dm_dtype t, dm_dtype bt, int ndim, const int64_t *xd,
                     int axis, int64_t N, int blocked) {
  static float x[MAXN], w[MAXN], b[MAXN];
  static double tol[MAXN];
  int64_t M = numel(axis, xd), K = numel(ndim - axis, xd + axis);
  int64_t wd2[2] = {N, K};
  feed("X", t, ndim, xd, x, -2, 2);
  feed("W", t, 2, wd2, w, -1, 1);
  feed("b", bt, 1, &N, b, -1, 1);
  if (blocked)
    make_blocked("X");
  int fusion = !strcmp(type, "FCFusion");
  spec s = {.type = type, .in = {"X", "W", "b"}, .out = {"Y"}, .iarg = {"axis", "fusion_type"},
            .ival = {axis, 1}};
  if (!fusion)
    s.iarg[1] = NULL;
  for (int pass = 0; pass < 2; pass++) { /* the second run: cached primitive, W ready */
    run_both(&s, 1);
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = 0; j < N; j++) {
        double S = fabs(b[j]), y = b[j];
        for (int64_t k = 0; k < K; k++)
          S += fabs((double)x[m * K + k] * w[j * K + k]), y += (double)x[m * K + k] * w[j * K + k];
        tol[m * N + j] = 2 * (K + 1) * 0x1p-24 * S + 2.5 * u_of(t) * fabs(y) + 0x1p-133;
      }
    double worst = expect_close("Y", M * N, tol);
    if (pass == 0)
      printf("%s %s M=%lld N=%lld K=%lld%s: worst %.2f of the bound\n", type, dm_dtype_name(t),
             (long long)M, (long long)N, (long long)K, blocked ? " (X nChw16c)" : "", worst);
    if (blocked && dnnl_builds(&s)) /* the reference's converts it in its blob */
      assert_true(is_blocked(wd, "X")); /* fed as it was, not converted */
  }
  if (fusion) { /* the relu: no negative outputs, and zeros where the reference has them */
    static float y[MAXN], r[MAXN];
    get(wd, "Y", y, M * N);
    get(wr, "Y", r, M * N);
    int zeros = 0;
    for (int64_t i = 0; i < M * N; i++) {
      assert_true(y[i] >= 0);
      if (r[i] == 0) {
        assert_true(y[i] == 0);
        zeros++;
      }
    }
    assert_true(zeros > 0);
  }
}

static void test_fc(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    int64_t a[2] = {5, 7}, b[2] = {33, 301}, c[2] = {1, 1}, d[4] = {3, 5, 7, 2}, e[3] = {2, 3, 11};
    check_fc("FC", t, t, 2, a, 1, 3, 0);
    check_fc("FC", t, t, 2, b, 1, 13, 0);
    check_fc("FC", t, t, 2, c, 1, 1, 0);
    check_fc("FC", t, t, 4, d, 1, 6, 0);  /* plain 4-D X: the 2-D view */
    check_fc("FC", t, t, 3, e, 2, 9, 0);  /* axis 2 */
    check_fc("FC", t, DM_FLOAT, 2, a, 1, 4, 0); /* FP32 bias (BF16 X, W) */
  }
}

static void test_fc_blocked_x(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    int64_t a[4] = {2, 19, 5, 3}, b[4] = {3, 32, 2, 2}, c[4] = {1, 5, 1, 1};
    check_fc("FC", t, t, 4, a, 1, 7, 1);
    check_fc("FC", t, t, 4, b, 1, 10, 1);
    check_fc("FC", t, t, 4, c, 1, 3, 1);
    check_fc("FC", t, t, 4, a, 2, 5, 1); /* axis 2: X converted, the 2-D view */
    /* more rows than outputs: the 4-D view, X fed blocked (fewer: X converted) */
    int64_t e[4] = {12, 19, 3, 3};
    check_fc("FC", t, t, 4, e, 1, 7, 1);
  }
}

static void test_fc_fusion(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    int64_t a[2] = {9, 23}, d[4] = {2, 19, 3, 3};
    check_fc("FCFusion", t, t, 2, a, 1, 11, 0);
    check_fc("FCFusion", t, t, 4, d, 1, 6, 1);
    int64_t e[4] = {9, 19, 3, 3};
    check_fc("FCFusion", t, t, 4, e, 1, 6, 1);
  }
  /* fusion_type other than 1: refused here, the reference's error at instantiation */
  int64_t a[2] = {2, 3}, n = 4, wd2[2] = {4, 3};
  static float v[MAXN];
  feed("X", DM_FLOAT, 2, a, v, -1, 1);
  feed("W", DM_FLOAT, 2, wd2, v, -1, 1);
  feed("b", DM_FLOAT, 1, &n, v, -1, 1);
  spec s = {.type = "FCFusion", .in = {"X", "W", "b"}, .out = {"Y"}, .iarg = {"fusion_type"},
            .ival = {2}};
  opt_expect_error(run_in(wd, &s), DM_ERR_INVALID, "FCFusion takes 1", NULL);
}

static void test_fc_errors(void **state) {
  (void)state;
  int64_t a[2] = {4, 6}, wd2[2] = {3, 5}, n = 3;
  static float v[MAXN];
  feed("X", DM_FLOAT, 2, a, v, -1, 1);
  feed("W", DM_FLOAT, 2, wd2, v, -1, 1);
  feed("b", DM_FLOAT, 1, &n, v, -1, 1);
  spec s = {.type = "FC", .in = {"X", "W", "b"}, .out = {"Y"}};
  assert_string_equal(engine_of(wd, &s), DM_ENGINE_DNNL);
  opt_expect_error(run_in(wd, &s), DM_ERR_SHAPE, "K differs", NULL);
  int64_t n2 = 2;
  feed("W", DM_FLOAT, 2, (int64_t[]){3, 6}, v, -1, 1);
  feed("b", DM_FLOAT, 1, &n2, v, -1, 1);
  opt_expect_error(run_in(wd, &s), DM_ERR_SHAPE, "b has 2 elements", NULL);
  feed("b", DM_BFLOAT16, 1, &n, v, -1, 1); /* FLOAT X with a BFLOAT16 bias */
  opt_expect_error(run_in(wd, &s), DM_ERR_TYPE, "X, W, b are FLOAT, FLOAT, BFLOAT16", NULL);
  /* FLOAT16 stays on the reference kernel */
  static uint16_t h[64] = {0};
  opt_feed(wd, "X", DM_FLOAT16, 2, a, h);
  opt_feed(wd, "W", DM_FLOAT16, 2, (int64_t[]){3, 6}, h);
  opt_feed(wd, "b", DM_FLOAT16, 1, &n, h);
  assert_string_equal(engine_of(wd, &s), "");
}

/* ---- FCGradient ------------------------------------------------------------------ */

static void check_fc_grad(dm_dtype t, int ndim, const int64_t *xd, int64_t N, int with_dx,
                          int blocked) {
  static float x[MAXN], w[MAXN], g[MAXN];
  static double tol[MAXN];
  int64_t M = xd[0], K = numel(ndim - 1, xd + 1), wd2[2] = {N, K}, gd[2] = {M, N};
  feed("X", t, ndim, xd, x, -2, 2);
  feed("W", t, 2, wd2, w, -1, 1);
  feed("dY", t, 2, gd, g, -1, 1);
  if (blocked)
    make_blocked("X");
  spec s = {.type = "FCGradient", .in = {"X", "W", "dY"}, .out = {"dW", "db", "dX"}};
  if (!with_dx)
    s.out[2] = NULL;
  run_both(&s, 1);
  expect_same_bits("db"); /* the reference's double sums, rounded once */
  for (int64_t j = 0; j < N; j++)
    for (int64_t k = 0; k < K; k++) {
      double S = 0, y = 0;
      for (int64_t m = 0; m < M; m++)
        S += fabs((double)g[m * N + j] * x[m * K + k]), y += (double)g[m * N + j] * x[m * K + k];
      tol[j * K + k] = 2 * M * 0x1p-24 * S + 2.5 * u_of(t) * fabs(y) + 0x1p-133;
    }
  double w1 = expect_close("dW", N * K, tol), w2 = 0;
  if (with_dx) {
    for (int64_t m = 0; m < M; m++)
      for (int64_t k = 0; k < K; k++) {
        double S = 0, y = 0;
        for (int64_t j = 0; j < N; j++)
          S += fabs((double)g[m * N + j] * w[j * K + k]), y += (double)g[m * N + j] * w[j * K + k];
        tol[m * K + k] = 2 * N * 0x1p-24 * S + 2.5 * u_of(t) * fabs(y) + 0x1p-133;
      }
    w2 = expect_close("dX", M * K, tol);
    assert_int_equal(dm_workspace_tensor(wd, "dX")->ndim, ndim);
  }
  printf("FCGradient %s M=%lld N=%lld K=%lld%s: worst dW %.2f, dX %.2f of the bound\n",
         dm_dtype_name(t), (long long)M, (long long)N, (long long)K,
         blocked ? " (X nChw16c)" : "", w1, w2);
}

static void test_fc_gradient(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    int64_t a[2] = {6, 35}, b[2] = {1, 1}, c[4] = {3, 17, 2, 3}, d[2] = {40, 9};
    check_fc_grad(t, 2, a, 7, 1, 0);
    check_fc_grad(t, 2, a, 7, 0, 0);
    check_fc_grad(t, 2, b, 1, 1, 0);
    check_fc_grad(t, 2, d, 21, 1, 0);
    check_fc_grad(t, 4, c, 5, 1, 0);
    check_fc_grad(t, 4, c, 5, 1, 1);
  }
}

/* ---- Sum, Add -------------------------------------------------------------------- */

static void test_sum_add(void **state) {
  (void)state;
  static float v[MAXN];
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    int64_t d[4] = {2, 21, 3, 5}, e[3] = {7, 1, 13};
    /* plain, three inputs, odd 3-D shape */
    feed("A", t, 3, e, v, -3, 3);
    feed("B", t, 3, e, v, -3, 3);
    feed("C", t, 3, e, v, -3, 3);
    spec sum3 = {.type = "Sum", .in = {"A", "B", "C"}, .out = {"Y"}};
    run_both(&sum3, 1);
    expect_same_bits("Y");
    /* blocked inputs: Y stays blocked when both are; with one plain input, plain
     * (checked before the comparison reads it plain) */
    for (int lay = 0; lay < 4; lay++) { /* which of A, B is blocked: bit 0 A, bit 1 B */
      feed("A", t, 4, d, v, -3, 3);
      feed("B", t, 4, d, v, -3, 3);
      if (lay & 1)
        make_blocked("A");
      if (lay & 2)
        make_blocked("B");
      spec sum2 = {.type = "Sum", .in = {"A", "B"}, .out = {"Y"}};
      run_both(&sum2, 1);
      assert_int_equal(is_blocked(wd, "Y"), lay == 3);
      expect_same_bits("Y");
      spec add = {.type = "Add", .in = {"A", "B"}, .out = {"Y"}};
      run_both(&add, 1);
      assert_int_equal(is_blocked(wd, "Y"), lay == 3);
      expect_same_bits("Y");
    }
    /* in place: Sum on A's blob, Add on B's, blocked */
    feed("A", t, 4, d, v, -3, 3);
    feed("B", t, 4, d, v, -3, 3);
    make_blocked("A");
    make_blocked("B");
    spec sum_ip = {.type = "Sum", .in = {"A", "B"}, .out = {"A"}};
    run_both(&sum_ip, 1);
    assert_true(is_blocked(wd, "A"));
    spec add_ip = {.type = "Add", .in = {"A", "B"}, .out = {"B"}};
    run_both(&add_ip, 1);
    assert_true(is_blocked(wd, "B"));
    expect_same_bits("A");
    expect_same_bits("B");
    /* Add in place on B, B in another layout than A */
    feed("A", t, 4, d, v, -3, 3);
    feed("B", t, 4, d, v, -3, 3);
    make_blocked("B");
    run_both(&add_ip, 1);
    expect_same_bits("B");
    /* broadcast: the reference kernel runs it */
    int64_t c1 = 21;
    feed("A", t, 4, d, v, -3, 3);
    feed("B", t, 1, &c1, v, -3, 3);
    spec addb = {.type = "Add", .in = {"A", "B"}, .out = {"Y"}, .iarg = {"broadcast", "axis"},
                 .ival = {1, 1}};
    run_both(&addb, 0);
    expect_same_bits("Y");
  }
  /* the reference's errors */
  int64_t a[2] = {2, 3}, b[2] = {3, 2};
  feed("A", DM_FLOAT, 2, a, v, -1, 1);
  feed("B", DM_FLOAT, 2, b, v, -1, 1);
  spec sum2 = {.type = "Sum", .in = {"A", "B"}, .out = {"Y"}};
  opt_expect_error(run_in(wd, &sum2), DM_ERR_SHAPE, "input 1 'B' is 3x2, but X0 'A' is 2x3", NULL);
  spec add = {.type = "Add", .in = {"A", "B"}, .out = {"Y"}};
  dm_status want = run_in(wr, &add);
  assert_int_not_equal(want, DM_OK);
  assert_int_equal(run_in(wd, &add), want);
  feed("B", DM_BFLOAT16, 2, a, v, -1, 1);
  opt_expect_error(run_in(wd, &sum2), DM_ERR_TYPE, "input 1 'B' is BFLOAT16, but X0 is FLOAT",
                   NULL);
  /* INT32 stays on the reference */
  static const int32_t iv[6] = {1, 2, 3, 4, 5, 6};
  opt_feed(wd, "A", DM_INT32, 2, a, iv);
  opt_feed(wd, "B", DM_INT32, 2, a, iv);
  assert_string_equal(engine_of(wd, &sum2), "");
}

/* ---- Concat ---------------------------------------------------------------------- */

static void check_split_info(int n, const int32_t *want) {
  const dm_tensor *t = dm_workspace_tensor(wd, "info");
  assert_int_equal(t->dtype, DM_INT32);
  assert_int_equal(t->numel, n);
  assert_memory_equal(dm_tensor_data(t), want, (size_t)n * sizeof *want);
  expect_same_bits("info");
}

static void test_concat(void **state) {
  (void)state;
  static float v[MAXN];
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    /* plain: 2-D axis 1, 3-D axis 2 (by `axis`), 4-D NHWC (by `order`) */
    int64_t a[2] = {3, 5}, b[2] = {3, 1};
    feed("A", t, 2, a, v, -1, 1);
    feed("B", t, 2, b, v, -1, 1);
    spec c2 = {.type = "Concat", .in = {"A", "B"}, .out = {"Y", "info"}};
    run_both(&c2, 1);
    expect_same_bits("Y");
    check_split_info(2, (const int32_t[]){5, 1});
    int64_t p[3] = {2, 3, 4}, q[3] = {2, 3, 7};
    feed("A", t, 3, p, v, -1, 1);
    feed("B", t, 3, q, v, -1, 1);
    feed("C", t, 3, p, v, -1, 1);
    spec c3 = {.type = "Concat", .in = {"A", "B", "C"}, .out = {"Y"}, .iarg = {"axis"},
               .ival = {2}};
    run_both(&c3, 1);
    expect_same_bits("Y");
    int64_t h1[4] = {2, 3, 2, 4}, h2[4] = {2, 3, 2, 3};
    feed("A", t, 4, h1, v, -1, 1);
    feed("B", t, 4, h2, v, -1, 1);
    spec cn = {.type = "Concat", .in = {"A", "B"}, .out = {"Y", "info"}, .sarg = "order",
               .sval = "NHWC"};
    run_both(&cn, 1);
    expect_same_bits("Y");
    check_split_info(2, (const int32_t[]){4, 3});
    /* blocked channel concat (SqueezeNet's fire modules): Y stays blocked */
    const int64_t chans[][3] = {{16, 32, 0}, {5, 7, 0}, {16, 5, 20}, {3, 0, 9}};
    for (int c = 0; c < 4; c++) {
      const char *names[3] = {"A", "B", "C"};
      spec cc = {.type = "Concat", .in = {"A", "B", "C"}, .out = {"Y", "info"}};
      int n = chans[c][2] ? 3 : 2;
      if (n == 2)
        cc.in[2] = NULL;
      int32_t info[3];
      for (int i = 0; i < n; i++) {
        int64_t d[4] = {2, chans[c][i], 3, 5};
        feed(names[i], t, 4, d, v, -1, 1);
        if (d[1] && (i != 1 || c != 2)) /* {16, 5, 20}: B left plain (mixed layouts) */
          make_blocked(names[i]);
        info[i] = (int32_t)d[1];
      }
      run_both(&cc, 1);
      assert_true(is_blocked(wd, "Y"));
      expect_same_bits("Y");
      check_split_info(n, info);
    }
    /* the result read by an FC, still blocked: Concat -> FC */
    int64_t d1[4] = {2, 16, 3, 3}, d2[4] = {2, 5, 3, 3}, wd2[2] = {4, 21 * 9}, n4 = 4;
    feed("A", t, 4, d1, v, -1, 1);
    feed("B", t, 4, d2, v, -1, 1);
    make_blocked("A");
    make_blocked("B");
    spec cat = {.type = "Concat", .in = {"A", "B"}, .out = {"X"}};
    run_both(&cat, 1);
    assert_true(is_blocked(wd, "X"));
    static float w[MAXN], b4[4];
    feed("W", t, 2, wd2, w, -1, 1);
    feed("b", t, 1, &n4, b4, -1, 1);
    spec fc = {.type = "FC", .in = {"X", "W", "b"}, .out = {"Y"}};
    run_both(&fc, 1);
    if (dnnl_builds(&fc))
      assert_true(is_blocked(wd, "X"));
    static double tol[8];
    for (int i = 0; i < 8; i++)
      tol[i] = 1e-4 + 4 * u_of(t) * 10;
    expect_close("Y", 8, tol);
    expect_same_bits("X"); /* the blocked intermediate reads as plain NCHW */
  }
  /* add_axis: the reference runs it; mismatched dims: the reference's error */
  int64_t a[2] = {3, 5}, b[2] = {3, 4};
  feed("A", DM_FLOAT, 2, a, v, -1, 1);
  feed("B", DM_FLOAT, 2, a, v, -1, 1);
  spec st = {.type = "Concat", .in = {"A", "B"}, .out = {"Y"}, .iarg = {"add_axis"}, .ival = {1}};
  run_both(&st, 0);
  expect_same_bits("Y");
  feed("B", DM_FLOAT, 2, b, v, -1, 1);
  spec c0 = {.type = "Concat", .in = {"A", "B"}, .out = {"Y"}, .iarg = {"axis"}, .ival = {0}};
  opt_expect_error(run_in(wd, &c0), DM_ERR_SHAPE, "they may differ only in dim 0", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fc),          cmocka_unit_test(test_fc_blocked_x),
      cmocka_unit_test(test_fc_fusion),   cmocka_unit_test(test_fc_errors),
      cmocka_unit_test(test_fc_gradient), cmocka_unit_test(test_sum_add),
      cmocka_unit_test(test_concat),
  };
  if (!dm_have_dnnl()) {
    printf("oneDNN cannot run on this CPU: skipped\n");
    return 77;
  }
  return cmocka_run_group_tests(tests, setup, teardown);
}
