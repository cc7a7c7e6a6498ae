/* test_loss_scale.c: the dynamic loss-scaling ops.
 *
 * UnscaleAndCheck against g / S computed here in double, for FP32 and FP16 gradients, one
 * and three tensors of different shapes, in place and into new blobs; found_inf for
 * +inf, -inf and NaN at the first, a middle and the last element of each tensor (FP16
 * inf, quiet and signalling NaN bit patterns too), and for overflow caused by the
 * unscale itself when S < 1. UpdateLossScale as a state machine over step sequences:
 * growth after exactly growth_interval clean steps (the default 2000 too), backoff on an
 * overflow, clamping at min_scale and max_scale, static mode, the counters. Argument,
 * dtype and naming errors with their status and message fragments.
 *
 * Tolerances: the kernel rounds 1/S to float (error <= u32 relative) and the product
 * (<= u32), so FP32 results are within 2 u32 |g/S| (+ half the smallest subnormal);
 * for a power-of-two S both roundings are exact and the result must equal g/S. FP16
 * adds one rounding to FP16: u16 |g/S| + 2^-25 (half the smallest FP16 subnormal).
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
#include "demitasse_plugin.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static const int64_t one_dim[1] = {1};

static void feed_f32(dm_workspace *ws, const char *name, float v) {
  opt_feed(ws, name, DM_FLOAT, 1, one_dim, &v);
}
static void feed_i64(dm_workspace *ws, const char *name, int64_t v) {
  opt_feed(ws, name, DM_INT64, 1, one_dim, &v);
}
static float fetch_f32(dm_workspace *ws, const char *name) {
  return *(const float *)dm_tensor_data(opt_fetch(ws, name, DM_FLOAT, 1, one_dim));
}
static int64_t fetch_i64(dm_workspace *ws, const char *name) {
  return *(const int64_t *)dm_tensor_data(opt_fetch(ws, name, DM_INT64, 1, one_dim));
}

/* ---- UnscaleAndCheck ----------------------------------------------------------------- */

/* The gradients of one test: up to three tensors of different shapes. */
enum { MAXG = 3, MAXN = 400 };
typedef struct grads {
  int n;
  dm_dtype dtype[MAXG];
  int ndim[MAXG];
  int64_t dims[MAXG][2];
  int64_t numel[MAXG];
  float f[MAXG][MAXN];     /* FP32 values (for FP16, the exact widening) */
  uint16_t h[MAXG][MAXN];  /* FP16 bits */
} grads;

static const char *const gname[MAXG] = {"g1", "g2", "g3"};

/* Random gradients of magnitude up to `mag` (as a scaled loss's gradients are). */
static void make_grads(grads *g, int n, const dm_dtype *dtypes, double mag, uint64_t seed) {
  static const int64_t shapes[MAXG][2] = {{300, 0}, {7, 5}, {1, 0}};
  static const int ndims[MAXG] = {1, 2, 1};
  memset(g, 0, sizeof *g);
  g->n = n;
  for (int k = 0; k < n; k++) {
    g->dtype[k] = dtypes[k];
    g->ndim[k] = ndims[k];
    memcpy(g->dims[k], shapes[k], sizeof shapes[k]);
    g->numel[k] = shapes[k][0] * (ndims[k] == 2 ? shapes[k][1] : 1);
    for (int64_t i = 0; i < g->numel[k]; i++) {
      /* Log-uniform magnitudes over many binades, both signs, so rounding is exercised. */
      double e = opt_uniform(&seed, -20, 0), sign = opt_uniform(&seed, -1, 1) < 0 ? -1 : 1;
      double v = sign * mag * pow(2.0, e);
      g->h[k][i] = dm_double_to_half(v);
      g->f[k][i] = dtypes[k] == DM_FLOAT16 ? dm_half_to_float(g->h[k][i]) : (float)v;
    }
  }
}

static void feed_grads(dm_workspace *ws, const grads *g) {
  for (int k = 0; k < g->n; k++)
    opt_feed(ws, gname[k], g->dtype[k], g->ndim[k], g->dims[k],
             g->dtype[k] == DM_FLOAT16 ? (const void *)g->h[k] : (const void *)g->f[k]);
}

/* Runs UnscaleAndCheck(S, g_1..g_n) -> outs (NULL: in place), found. */
static dm_status run_unscale(dm_workspace *ws, int n, const char *const *outs, const char *found) {
  opt_op *op = opt_new("UnscaleAndCheck");
  opt_in(op, "S");
  for (int k = 0; k < n; k++)
    opt_in(op, gname[k]);
  for (int k = 0; k < n; k++)
    opt_out(op, outs ? outs[k] : gname[k]);
  opt_out(op, found);
  return opt_run(op, ws);
}

/* Element i of a FLOAT or FLOAT16 tensor, as double. */
static double elem(const dm_tensor *t, int64_t i) {
  if (dm_tensor_dtype(t) == DM_FLOAT16)
    return dm_half_to_float(((const uint16_t *)dm_tensor_data(t))[i]);
  return ((const float *)dm_tensor_data(t))[i];
}

static void check_unscaled(dm_workspace *ws, const grads *g, const char *const *outs, float s,
                           int exact) {
  for (int k = 0; k < g->n; k++) {
    const char *name = outs ? outs[k] : gname[k];
    const dm_tensor *t = opt_fetch(ws, name, g->dtype[k], g->ndim[k], g->dims[k]);
    const int half = g->dtype[k] == DM_FLOAT16;
    for (int64_t i = 0; i < g->numel[k]; i++) {
      const double ref = (double)g->f[k][i] / (double)s, got = elem(t, i);
      double tol = 2 * OPT_U32 * fabs(ref) + 0x1p-150;
      if (half)
        tol += OPT_U16 * fabs(ref) + 0x1p-25;
      else if (exact)
        tol = 0;
      if (!(fabs(got - ref) <= tol))
        fail_msg("%s[%lld] = %.9g, reference %.9g (S %g, tol %.3g)", name, (long long)i, got,
                 ref, (double)s, tol);
    }
  }
}

static void unscale_case(dm_workspace *ws, int n, const dm_dtype *dtypes, float s, int exact,
                         uint64_t seed) {
  grads g;
  make_grads(&g, n, dtypes, dtypes[0] == DM_FLOAT16 ? 6e4 : 1e6, seed);
  feed_f32(ws, "S", s);
  feed_grads(ws, &g);
  assert_int_equal(run_unscale(ws, n, NULL, "found"), DM_OK);
  check_unscaled(ws, &g, NULL, s, exact);
  assert_true(fetch_f32(ws, "found") == 0.0f);
}

static void test_unscale_fp32(void **state) {
  static const dm_dtype f1[1] = {DM_FLOAT}, f3[3] = {DM_FLOAT, DM_FLOAT, DM_FLOAT};
  unscale_case(*state, 1, f1, 65536.0f, 1, 1);
  unscale_case(*state, 3, f3, 65536.0f, 1, 2);
  unscale_case(*state, 3, f3, 1024.0f, 1, 3);
  unscale_case(*state, 1, f1, 3000.0f, 0, 4); /* 1/S inexact: within 2 u32 */
  unscale_case(*state, 3, f3, 12345.678f, 0, 5);
  unscale_case(*state, 3, f3, 0.25f, 1, 6); /* S < 1 without overflow */
}

static void test_unscale_fp16(void **state) {
  static const dm_dtype h1[1] = {DM_FLOAT16}, h3[3] = {DM_FLOAT16, DM_FLOAT16, DM_FLOAT16};
  static const dm_dtype mixed[3] = {DM_FLOAT16, DM_FLOAT, DM_FLOAT16};
  unscale_case(*state, 1, h1, 256.0f, 0, 11);
  unscale_case(*state, 3, h3, 65536.0f, 0, 12); /* many results are FP16 subnormals */
  unscale_case(*state, 3, h3, 3000.0f, 0, 13);
  unscale_case(*state, 3, mixed, 1024.0f, 0, 14);
}

/* Into new blobs: the outputs are unscaled, the inputs untouched. */
static void test_unscale_out_of_place(void **state) {
  dm_workspace *ws = *state;
  static const dm_dtype mixed[3] = {DM_FLOAT, DM_FLOAT16, DM_FLOAT};
  static const char *const outs[3] = {"u1", "u2", "u3"};
  grads g;
  make_grads(&g, 3, mixed, 1e4, 21);
  feed_f32(ws, "S", 128.0f);
  feed_grads(ws, &g);
  assert_int_equal(run_unscale(ws, 3, outs, "found"), DM_OK);
  check_unscaled(ws, &g, outs, 128.0f, 0);
  check_unscaled(ws, &g, NULL, 1.0f, 1); /* inputs unchanged: g / 1 */
  assert_true(fetch_f32(ws, "found") == 0.0f);
}

/* A non-finite value at each position of each tensor is found, and only then. */
static void test_unscale_detects_nonfinite(void **state) {
  dm_workspace *ws = *state;
  static const dm_dtype f3[3] = {DM_FLOAT, DM_FLOAT, DM_FLOAT};
  static const dm_dtype h3[3] = {DM_FLOAT16, DM_FLOAT16, DM_FLOAT16};
  static const dm_dtype mixed[3] = {DM_FLOAT16, DM_FLOAT, DM_FLOAT16};
  const dm_dtype *sets[3] = {f3, h3, mixed};
  const float bad_f[3] = {INFINITY, -INFINITY, NAN};
  /* +inf, -inf, quiet NaN, signalling NaN, negative NaN, all-ones NaN */
  static const uint16_t bad_h[6] = {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00, 0xffff};
  for (int set = 0; set < 3; set++)
    for (int k = 0; k < 3; k++) {
      const int half = sets[set][k] == DM_FLOAT16;
      const int nbad = half ? 6 : 3;
      for (int b = 0; b < nbad; b++)
        for (int where = 0; where < 3; where++) {
          grads g;
          make_grads(&g, 3, sets[set], 100.0, 31 + (uint64_t)b);
          const int64_t i = where == 0 ? 0 : where == 1 ? g.numel[k] / 2 : g.numel[k] - 1;
          if (half) {
            g.h[k][i] = bad_h[b];
          } else {
            g.f[k][i] = bad_f[b];
          }
          feed_f32(ws, "S", 1024.0f);
          feed_grads(ws, &g);
          assert_int_equal(run_unscale(ws, 3, NULL, "found"), DM_OK);
          if (fetch_f32(ws, "found") != 1.0f)
            fail_msg("set %d tensor %d bad value %d at element %lld not found", set, k, b,
                     (long long)i);
        }
    }
}

/* Dividing by S < 1 multiplies: a finite gradient can overflow, and that counts. */
static void test_unscale_small_scale_overflow(void **state) {
  dm_workspace *ws = *state;
  static const dm_dtype f1[1] = {DM_FLOAT}, h1[1] = {DM_FLOAT16};
  struct {
    const dm_dtype *dt;
    double v;
    float found;
  } cases[] = {
      {f1, 3e38, 1.0f},   /* * 2 > FLT_MAX */
      {f1, 1e38, 0.0f},   /* * 2 fits */
      {h1, 40000, 1.0f},  /* * 2 = 80000 > 65504: FP16 inf, although FP32 would hold it */
      {h1, 30000, 0.0f},  /* * 2 = 60000 fits FP16 */
      {h1, -40000, 1.0f}, /* -inf */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    grads g;
    make_grads(&g, 1, cases[c].dt, 1.0, 41);
    g.h[0][150] = dm_double_to_half(cases[c].v);
    g.f[0][150] = cases[c].dt[0] == DM_FLOAT16 ? dm_half_to_float(g.h[0][150]) : (float)cases[c].v;
    feed_f32(ws, "S", 0.5f);
    feed_grads(ws, &g);
    assert_int_equal(run_unscale(ws, 1, NULL, "found"), DM_OK);
    if (fetch_f32(ws, "found") != cases[c].found)
      fail_msg("case %zu: found_inf %g, expected %g", c, (double)fetch_f32(ws, "found"),
               (double)cases[c].found);
    if (cases[c].found == 0.0f)
      check_unscaled(ws, &g, NULL, 0.5f, 1);
  }
  /* A subnormal S: 1/S overflows float, so every gradient reads as overflowed. */
  grads g;
  make_grads(&g, 1, f1, 1.0, 42);
  feed_f32(ws, "S", 1e-40f);
  feed_grads(ws, &g);
  assert_int_equal(run_unscale(ws, 1, NULL, "found"), DM_OK);
  assert_true(fetch_f32(ws, "found") == 1.0f);
}

/* A large tensor takes the OpenMP path (over 2^16 elements); the flag and values hold. */
static void test_unscale_large(void **state) {
  dm_workspace *ws = *state;
  enum { BIG = 200003 };
  static float f[BIG];
  static uint16_t h[BIG];
  const int64_t dims[1] = {BIG};
  for (int i = 0; i < BIG; i++) {
    f[i] = (float)(i % 1000) * 8.0f;
    h[i] = dm_float_to_half((float)(i % 1000) * 8.0f);
  }
  for (int bad = 0; bad < 2; bad++) {
    if (bad)
      h[BIG - 7] = 0x7c00;
    feed_f32(ws, "S", 8.0f);
    opt_feed(ws, "g1", DM_FLOAT, 1, dims, f);
    opt_feed(ws, "g2", DM_FLOAT16, 1, dims, h);
    assert_int_equal(run_unscale(ws, 2, NULL, "found"), DM_OK);
    assert_true(fetch_f32(ws, "found") == (bad ? 1.0f : 0.0f));
    const float *y = dm_tensor_data(opt_fetch(ws, "g1", DM_FLOAT, 1, dims));
    const uint16_t *yh = dm_tensor_data(opt_fetch(ws, "g2", DM_FLOAT16, 1, dims));
    for (int i = 0; i < BIG; i++) {
      assert_true(y[i] == (float)(i % 1000));
      if (!(bad && i == BIG - 7))
        assert_true(dm_half_to_float(yh[i]) == (float)(i % 1000));
    }
  }
}

static void test_unscale_errors(void **state) {
  dm_workspace *ws = *state;
  const float g[4] = {1, 2, 3, 4};
  const int32_t gi[4] = {1, 2, 3, 4};
  const int64_t d4[1] = {4}, d2[1] = {2};
  const double sd = 2.0;
  const float s2[2] = {2, 2};
  opt_feed(ws, "g1", DM_FLOAT, 1, d4, g);
  opt_feed(ws, "g2", DM_FLOAT, 1, d4, g);
  opt_feed(ws, "gi", DM_INT32, 1, d4, gi);
  feed_f32(ws, "S", 2.0f);

  opt_op *op = opt_new("UnscaleAndCheck"); /* no found_inf */
  opt_in(op, "S"), opt_in(op, "g1"), opt_in(op, "g2");
  opt_out(op, "g1"), opt_out(op, "g2");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "2 gradient input(s) but 2 output(s)",
                   "found_inf last", NULL);

  op = opt_new("UnscaleAndCheck"); /* a gradient twice */
  opt_in(op, "S"), opt_in(op, "g1"), opt_in(op, "g1");
  opt_out(op, "a"), opt_out(op, "b"), opt_out(op, "found");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "'g1' is listed twice", NULL);

  op = opt_new("UnscaleAndCheck"); /* outputs swapped */
  opt_in(op, "S"), opt_in(op, "g1"), opt_in(op, "g2");
  opt_out(op, "g2"), opt_out(op, "g1"), opt_out(op, "found");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "output 0 'g2' is input 2",
                   "input k + 1", NULL);

  op = opt_new("UnscaleAndCheck"); /* found_inf over the scale */
  opt_in(op, "S"), opt_in(op, "g1");
  opt_out(op, "g1"), opt_out(op, "S");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "found_inf (output 1 'S')",
                   "must not be an input", NULL);

  op = opt_new("UnscaleAndCheck"); /* two outputs with one name */
  opt_in(op, "S"), opt_in(op, "g1"), opt_in(op, "g2");
  opt_out(op, "x"), opt_out(op, "g2"), opt_out(op, "x");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "outputs 0 and 2 are both 'x'", NULL);

  op = opt_new("UnscaleAndCheck");
  opt_in(op, "S"), opt_in(op, "g1"), opt_in(op, "gi");
  opt_out(op, "g1"), opt_out(op, "gi"), opt_out(op, "found");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "gradient 2 (input 2 'gi') is INT32",
                   "FLOAT or FLOAT16", NULL);

  opt_feed(ws, "Sd", DM_DOUBLE, 1, one_dim, &sd);
  op = opt_new("UnscaleAndCheck");
  opt_in(op, "Sd"), opt_in(op, "g1");
  opt_out(op, "g1"), opt_out(op, "found");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "loss_scale (input 0 'Sd') is DOUBLE",
                   "FLOAT with one element", NULL);

  opt_feed(ws, "S2", DM_FLOAT, 1, d2, s2);
  op = opt_new("UnscaleAndCheck");
  opt_in(op, "S2"), opt_in(op, "g1");
  opt_out(op, "g1"), opt_out(op, "found");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "loss_scale (input 0 'S2')", "FLOAT 2",
                   NULL);

  const float bad_s[4] = {0.0f, -1.0f, NAN, INFINITY};
  for (int i = 0; i < 4; i++) {
    feed_f32(ws, "S", bad_s[i]);
    op = opt_new("UnscaleAndCheck");
    opt_in(op, "S"), opt_in(op, "g1");
    opt_out(op, "g1"), opt_out(op, "found");
    opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "loss_scale 'S' is",
                     "must be positive and finite", NULL);
  }
}

/* ---- UpdateLossScale ------------------------------------------------------------------ */

typedef struct scaler {
  float s;
  int64_t good, skipped;
} scaler;

/* Named arguments for one run; a negative or zero field is "absent". */
typedef struct update_args {
  int has_dynamic;
  int64_t dynamic;
  float growth, backoff, min_scale, max_scale;
  int64_t interval;
} update_args;

static dm_status run_update(dm_workspace *ws, const update_args *a, float found) {
  feed_f32(ws, "found", found);
  opt_op *op = opt_new("UpdateLossScale");
  opt_in(op, "S"), opt_in(op, "found"), opt_in(op, "good"), opt_in(op, "skipped");
  opt_out(op, "S"), opt_out(op, "good"), opt_out(op, "skipped");
  if (a) {
    if (a->has_dynamic)
      opt_arg_int(op, "dynamic", a->dynamic);
    if (a->growth != 0)
      opt_arg_float(op, "growth_factor", a->growth);
    if (a->backoff != 0)
      opt_arg_float(op, "backoff_factor", a->backoff);
    if (a->min_scale != 0)
      opt_arg_float(op, "min_scale", a->min_scale);
    if (a->max_scale != 0)
      opt_arg_float(op, "max_scale", a->max_scale);
    if (a->interval != 0)
      opt_arg_int(op, "growth_interval", a->interval);
  }
  return opt_run(op, ws);
}

static void feed_scaler(dm_workspace *ws, scaler st) {
  feed_f32(ws, "S", st.s);
  feed_i64(ws, "good", st.good);
  feed_i64(ws, "skipped", st.skipped);
}

static void expect_scaler(dm_workspace *ws, int step, scaler want) {
  scaler got = {fetch_f32(ws, "S"), fetch_i64(ws, "good"), fetch_i64(ws, "skipped")};
  if (got.s != want.s || got.good != want.good || got.skipped != want.skipped)
    fail_msg("step %d: S %g good %lld skipped %lld; expected S %g good %lld skipped %lld", step,
             (double)got.s, (long long)got.good, (long long)got.skipped, (double)want.s,
             (long long)want.good, (long long)want.skipped);
}

/* The reference state machine, in double, written from the contract. */
static scaler ref_step(scaler st, const update_args *a, int found) {
  const int dynamic = a->has_dynamic ? (int)a->dynamic : 1;
  const double growth = a->growth ? a->growth : 2, backoff = a->backoff ? a->backoff : 0.5;
  const double lo = a->min_scale ? a->min_scale : 1, hi = a->max_scale ? a->max_scale : 16777216;
  const int64_t interval = a->interval ? a->interval : 2000;
  if (found) {
    st.skipped++;
    st.good = 0;
    if (dynamic)
      st.s = (float)fmax((double)st.s * backoff, lo);
    return st;
  }
  st.good++;
  if (dynamic && st.good >= interval) {
    st.s = (float)fmin((double)st.s * growth, hi);
    st.good = 0;
  }
  return st;
}

/* Runs a found/clean pattern through the op and the reference, comparing every step. */
static void run_sequence(dm_workspace *ws, const update_args *a, scaler st, const char *pattern) {
  feed_scaler(ws, st);
  for (int i = 0; pattern[i]; i++) {
    const int found = pattern[i] == 'x';
    assert_int_equal(run_update(ws, a, found ? 1.0f : 0.0f), DM_OK);
    st = ref_step(st, a, found);
    expect_scaler(ws, i, st);
  }
}

static void test_update_growth_and_backoff(void **state) {
  dm_workspace *ws = *state;
  const update_args a = {.interval = 5};
  /* Growth after exactly 5 clean steps, not 4; an overflow resets the run of clean steps. */
  feed_scaler(ws, (scaler){65536.0f, 0, 0});
  for (int i = 0; i < 4; i++) {
    assert_int_equal(run_update(ws, &a, 0.0f), DM_OK);
    expect_scaler(ws, i, (scaler){65536.0f, i + 1, 0});
  }
  assert_int_equal(run_update(ws, &a, 0.0f), DM_OK);
  expect_scaler(ws, 4, (scaler){131072.0f, 0, 0});
  assert_int_equal(run_update(ws, &a, 1.0f), DM_OK);
  expect_scaler(ws, 5, (scaler){65536.0f, 0, 1});
  for (int i = 0; i < 3; i++)
    assert_int_equal(run_update(ws, &a, 0.0f), DM_OK);
  assert_int_equal(run_update(ws, &a, 1.0f), DM_OK);
  expect_scaler(ws, 9, (scaler){32768.0f, 0, 2});
  assert_int_equal(run_update(ws, &a, NAN), DM_OK); /* NaN found_inf counts */
  expect_scaler(ws, 10, (scaler){16384.0f, 0, 3});

  run_sequence(ws, &a, (scaler){1024.0f, 0, 0}, "....x.....x..x.........xxx.....");
  const update_args b = {.interval = 3, .growth = 4.0f, .backoff = 0.25f};
  run_sequence(ws, &b, (scaler){256.0f, 1, 7}, "..x...x....xx...........");
}

/* The defaults: growth after 2000 clean steps (started near the end), factors 2 and 0.5. */
static void test_update_defaults(void **state) {
  dm_workspace *ws = *state;
  feed_scaler(ws, (scaler){32768.0f, 1998, 5});
  assert_int_equal(run_update(ws, NULL, 0.0f), DM_OK);
  expect_scaler(ws, 0, (scaler){32768.0f, 1999, 5});
  assert_int_equal(run_update(ws, NULL, 0.0f), DM_OK);
  expect_scaler(ws, 1, (scaler){65536.0f, 0, 5});
  assert_int_equal(run_update(ws, NULL, 1.0f), DM_OK);
  expect_scaler(ws, 2, (scaler){32768.0f, 0, 6});
}

static void test_update_bounds(void **state) {
  dm_workspace *ws = *state;
  /* At max_scale 2^24 (the default) growth stays there; good_steps still resets. */
  const update_args a = {.interval = 2};
  run_sequence(ws, &a, (scaler){8388608.0f, 0, 0}, "......");
  expect_scaler(ws, 6, (scaler){16777216.0f, 0, 0});
  /* At min_scale 1 (the default) backoff stays there; a scale between halves to min. */
  run_sequence(ws, &a, (scaler){1.5f, 1, 0}, "xxx");
  expect_scaler(ws, 3, (scaler){1.0f, 0, 3});
  /* Custom bounds, and a scale above max brought down by the next growth. */
  const update_args c = {.interval = 1, .min_scale = 0.125f, .max_scale = 1024.0f};
  run_sequence(ws, &c, (scaler){4096.0f, 0, 0}, ".xxxxxxxxxxxxxxxx..............");
  feed_scaler(ws, (scaler){0.25f, 0, 0});
  assert_int_equal(run_update(ws, &c, 1.0f), DM_OK);
  expect_scaler(ws, 0, (scaler){0.125f, 0, 1});
}

static void test_update_static(void **state) {
  dm_workspace *ws = *state;
  const update_args a = {.has_dynamic = 1, .dynamic = 0, .interval = 3};
  run_sequence(ws, &a, (scaler){512.0f, 0, 0}, "........x..x.xx.........");
  /* S never moves; good_steps runs past the interval; skipped counts every overflow. */
  expect_scaler(ws, 24, (scaler){512.0f, 9, 4});
  /* Out-of-place outputs work too and leave the inputs alone. */
  feed_scaler(ws, (scaler){8.0f, 2, 3});
  feed_f32(ws, "found", 1.0f);
  opt_op *op = opt_new("UpdateLossScale");
  opt_in(op, "S"), opt_in(op, "found"), opt_in(op, "good"), opt_in(op, "skipped");
  opt_out(op, "S_new"), opt_out(op, "good_new"), opt_out(op, "skipped_new");
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_true(fetch_f32(ws, "S_new") == 4.0f);
  assert_int_equal(fetch_i64(ws, "good_new"), 0);
  assert_int_equal(fetch_i64(ws, "skipped_new"), 4);
  expect_scaler(ws, 0, (scaler){8.0f, 2, 3});
}

static void test_update_errors(void **state) {
  dm_workspace *ws = *state;
  feed_scaler(ws, (scaler){1024.0f, 0, 0});
  struct {
    update_args a;
    const char *frag;
  } bad[] = {
      {{.backoff = 1.0f}, "backoff_factor must be in (0, 1), got 1"},
      {{.backoff = -0.5f}, "backoff_factor must be in (0, 1), got -0.5"},
      {{.backoff = NAN}, "backoff_factor must be in (0, 1), got nan"},
      {{.growth = 1.0f}, "growth_factor must be finite and > 1, got 1"},
      {{.growth = INFINITY}, "growth_factor must be finite and > 1, got inf"},
      {{.interval = -3}, "growth_interval must be >= 1, got -3"},
      {{.min_scale = -1.0f}, "0 < min_scale <= max_scale"},
      {{.min_scale = 8.0f, .max_scale = 4.0f}, "got min_scale 8, max_scale 4"},
      {{.max_scale = INFINITY}, "max_scale < inf"},
      {{.has_dynamic = 1, .dynamic = 2}, "dynamic must be 0 or 1, got 2"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    opt_expect_error(run_update(ws, &bad[i].a, 0.0f), DM_ERR_INVALID, bad[i].frag, NULL);
  /* growth_interval 0 is "absent" in update_args; pass it explicitly. */
  opt_op *op = opt_new("UpdateLossScale");
  opt_in(op, "S"), opt_in(op, "found"), opt_in(op, "good"), opt_in(op, "skipped");
  opt_out(op, "S"), opt_out(op, "good"), opt_out(op, "skipped");
  opt_arg_int(op, "growth_interval", 0);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "growth_interval must be >= 1, got 0", NULL);
  expect_scaler(ws, 0, (scaler){1024.0f, 0, 0}); /* nothing ran */

  /* Dtypes and shapes. */
  feed_i64(ws, "good", 0);
  feed_f32(ws, "goodf", 0.0f);
  op = opt_new("UpdateLossScale");
  opt_in(op, "S"), opt_in(op, "found"), opt_in(op, "goodf"), opt_in(op, "skipped");
  opt_out(op, "S"), opt_out(op, "goodf"), opt_out(op, "skipped");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "good_steps (input 2 'goodf') is FLOAT",
                   "expected INT64 with one element", NULL);
  feed_i64(ws, "found_i", 1);
  op = opt_new("UpdateLossScale");
  opt_in(op, "S"), opt_in(op, "found_i"), opt_in(op, "good"), opt_in(op, "skipped");
  opt_out(op, "S"), opt_out(op, "good"), opt_out(op, "skipped");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "found_inf (input 1 'found_i') is INT64",
                   "expected FLOAT", NULL);
  /* Not in place the wrong way round: found_inf cannot be overwritten by loss_scale. */
  op = opt_new("UpdateLossScale");
  opt_in(op, "S"), opt_in(op, "found"), opt_in(op, "good"), opt_in(op, "skipped");
  opt_out(op, "found"), opt_out(op, "good"), opt_out(op, "skipped");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "cannot run in place", NULL);

  /* Bad state. */
  feed_scaler(ws, (scaler){1024.0f, -1, 0});
  opt_expect_error(run_update(ws, NULL, 0.0f), DM_ERR_INVALID, "must not be negative", NULL);
  feed_scaler(ws, (scaler){0.0f, 0, 0});
  opt_expect_error(run_update(ws, NULL, 0.0f), DM_ERR_INVALID, "loss_scale 'S' is 0",
                   "positive and finite", NULL);
}

/* Neither op can be differentiated; the painting pass must leave UnscaleAndCheck in FP32. */
static void test_schemas(void **state) {
  (void)state;
  const dm_op_schema *u = dm_schema_lookup("UnscaleAndCheck");
  const dm_op_schema *s = dm_schema_lookup("UpdateLossScale");
  assert_non_null(u);
  assert_non_null(s);
  assert_int_equal(u->precision, DM_PREC_FP32);
  assert_int_equal(s->precision, DM_PREC_NONE);
  assert_null(u->gradient);
  assert_null(s->gradient);
  assert_int_equal(u->no_gradient, 0);
  assert_int_equal(s->no_gradient, 0);
  assert_non_null(u->infer);
  assert_non_null(s->infer);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unscale_fp32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unscale_fp16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unscale_out_of_place, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unscale_detects_nonfinite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unscale_small_scale_overflow, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unscale_large, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unscale_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_growth_and_backoff, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_bounds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_static, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_schemas, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
