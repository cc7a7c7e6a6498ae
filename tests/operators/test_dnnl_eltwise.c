/* test_dnnl_eltwise.c: the oneDNN engine's forwards of the unary family (operators/dnnl/
 * eltwise.c: Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid, HardSwish, Erf, Sqrt, Gelu) and
 * its Add, Sub, Mul and Div (operators/dnnl/sum.c: equal shapes, per-channel broadcasts,
 * other broadcasts) against the reference kernels on the same inputs, FP32 and BF16, on
 * plain inputs and blocked ones (nChw16c, nChw8c, made by relayout as a convolution's
 * output would be) with padded channel blocks (20 channels).
 *
 * Two workspaces: one on the default engine (DNNL), one set to REFERENCE. Every result is
 * the reference's bit for bit (NaN where it is NaN), except Sigmoid's, whose e^x is
 * vmath.h's: that one within 2 units in the last place of e^x (1 from exp, 0.5 from
 * glibc's expf, and a half for the rounding that then differs), which 1 / (1 + e) and
 * e / (1 + e) do not amplify, so |d - r| <= 4 u32 |r| + 2^-125 (u32 = 2^-24; the absolute
 * term for X below -87, where the engine's Y is e^-87 / (1 + e^-87)), plus one BF16
 * rounding (2^-8 |r|) in BF16. The outputs' layouts (blocked in, blocked out), their
 * padding (zeros), in place runs, and the reference's errors from the engine's kernels.
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
#include "operators/dnnl/kernels.h"
#include "operators/dnnl/vmath.h"

DTU_TWO_WORKSPACES /* wd: DNNL (the default), wr: REFERENCE */
static uint64_t seed = 11;

/* The values X starts with in every case: the formulas' edges and IEEE's specials. */
static const float specials[] = {NAN,   INFINITY, -INFINITY, 0.0f,  -0.0f, 1e-40f, -1e-40f,
                                 -3.0f, 3.0f,     6.0f,      -6.0f, 100.f, -100.f, 88.5f,
                                 -88.5f, -87.5f,  20.5f,     -20.5f};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

/* Feeds `name` of dims d (numel <= 4096) to both workspaces: the specials first (when
 * `edges`), then uniform values in [lo, hi), rounded to t. */
static void feed(const char *name, dm_dtype t, int ndim, const int64_t *d, int edges, double lo,
                 double hi) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= d[i];
  static float v[4096];
  static uint16_t h[4096];
  assert_true(n <= 4096);
  for (int64_t i = 0; i < n; i++) {
    v[i] = edges && i < (int64_t)N_SPECIALS ? specials[i] : (float)opt_uniform(&seed, lo, hi);
    /* oneDNN 2.6's BF16 reorder below AVX-512 ("simple:any") flushes subnormals and
     * makes -0 +0, so a blocked BF16 input made by one would not hold them: the
     * smallest normal and +0 instead */
    if (t == DM_BFLOAT16 && v[i] != 0 && fabsf(v[i]) < 0x1p-126f)
      v[i] = copysignf(0x1p-126f, v[i]);
    if (t == DM_BFLOAT16 && v[i] == 0)
      v[i] = 0.0f;
    h[i] = dm_float_to_bf16(v[i]);
  }
  const void *p = t == DM_BFLOAT16 ? (const void *)h : (const void *)v;
  opt_feed(wd, name, t, ndim, d, p);
  opt_feed(wr, name, t, ndim, d, p);
}

static void make_blocked(const char *name, int blk) { dtu_make_blocked(wd, name, blk); }

static int is_blocked(const char *name) {
  return !dm_tensor_is_plain(dm_workspace_tensor(wd, name));
}

/* The padding of a blocked 4-D blob of the DNNL workspace (channels C .. the block's
 * end) is zeros, as oneDNN's primitives expect of their inputs. */
static void expect_zero_padding(const char *name) {
  const dm_tensor *t = dm_workspace_tensor(wd, name);
  dnnl_memory_desc_t md;
  assert_int_equal(dm_dnnl_md_of(t, &md), DM_OK);
  dm_dnnl_flat4 f;
  assert_true(dm_dnnl_flat4_of(&md, &f));
  const unsigned char *raw = dm_tensor_raw_data(t);
  size_t es = dm_dtype_size(t->dtype);
  for (int64_t n = 0; n < t->dims[0]; n++)
    for (int64_t c = t->dims[1]; c < md.padded_dims[1]; c++)
      for (int64_t h = 0; h < t->dims[2]; h++)
        for (int64_t w = 0; w < t->dims[3]; w++) {
          int64_t o = dm_dnnl_flat4_plane(&f, n, c) + h * f.s[2] + w * f.s[3];
          for (size_t b = 0; b < es; b++)
            if (raw[(size_t)o * es + b])
              fail_msg("%s: padding channel %lld of image %lld is not zero", name,
                       (long long)c, (long long)n);
        }
}

/* Blob `name` of both workspaces: |d - r| <= rel |r| + abs_tol, NaN where NaN; rel = 0,
 * abs_tol = 0: the same value (and the same sign of zero). BF16: a subnormal may read as
 * 0 and -0 as +0 (abs_tol at least 2^-126), since the comparison reads a blocked result
 * through oneDNN's reorder, which flushes BF16 subnormals below AVX-512 (see feed). */
static void compare(const char *what, const char *name, double rel, double abs_tol) {
  const dm_tensor *d = dm_workspace_tensor(wd, name), *r = dm_workspace_tensor(wr, name);
  dtu_expect_alike(d, r);
  if (dm_tensor_dtype(d) == DM_BFLOAT16 && abs_tol < 0x1p-126)
    abs_tol = 0x1p-126;
  for (int64_t i = 0; i < d->numel; i++) {
    double a = dtu_val(d, i), b = dtu_val(r, i);
    if (isnan(b) || isnan(a)) {
      if (!(isnan(a) && isnan(b)))
        fail_msg("%s: %s[%lld] = %.9g, reference %.9g", what, name, (long long)i, a, b);
      continue;
    }
    int same = a == b && (signbit(a) == signbit(b) || abs_tol > 0);
    if (!same && !(fabs(a - b) <= rel * fabs(b) + abs_tol))
      fail_msg("%s: %s[%lld] = %.9g, reference %.9g (bound %.3g)", what, name, (long long)i, a,
               b, rel * fabs(b) + abs_tol);
  }
}

/* ---- e^x ------------------------------------------------------------------------- */

/* vmath.h's bound: within 1 unit in the last place of exp, on a sample of [-87, 88]. */
static void test_vexp(void **state) {
  (void)state;
  double worst = 0;
  for (float x = DM_VEXP_LO; x <= DM_VEXP_HI; x = nextafterf(x + 0.000937f, INFINITY)) {
    double e = exp((double)x), ulp = ldexp(1.0, ilogb(e) - 23);
    double err = fabs((double)dm_vexpf(x) - e) / ulp;
    if (err > worst)
      worst = err;
    if (err > 1.0)
      fail_msg("dm_vexpf(%.9g) = %.9g, exp = %.17g: %.3f units in the last place", x,
               dm_vexpf(x), e, err);
  }
  printf("dm_vexpf: at most %.3f units in the last place of exp on the sample\n", worst);
  assert_true(isnan(dm_vexpf(NAN)));
}

/* ---- the unary family ------------------------------------------------------------ */

typedef struct unary_case {
  const char *type;
  const char *arg[2];
  float val[2];
} unary_case;

static const unary_case unary_cases[] = {
    {"Sigmoid", {NULL}, {0}},
    {"Tanh", {NULL}, {0}},
    {"LeakyRelu", {"alpha", NULL}, {0.1f}},
    {"Clip", {"min", "max"}, {0.0f, 6.0f}}, /* ReLU6 */
    {"Clip", {"min", "max"}, {0.25f, 0.5f}}, /* Clip(0) is not 0: padding rewritten */
    {"HardSigmoid", {"alpha", "beta"}, {0.2f, 0.5f}},
    {"HardSwish", {NULL}, {0}},
    {"Erf", {NULL}, {0}},
    {"Sqrt", {NULL}, {0}},
    {"Gelu", {NULL}, {0}},
    {"Gelu", {"fast_gelu", NULL}, {1}},
};

static opt_op *unary_op(const unary_case *c, const char *x, const char *y) {
  opt_op *op = opt_new(c->type);
  opt_in(op, x);
  opt_out(op, y);
  for (int i = 0; i < 2 && c->arg[i]; i++)
    if (strcmp(c->arg[i], "fast_gelu") == 0)
      opt_arg_int(op, c->arg[i], (int64_t)c->val[i]);
    else
      opt_arg_float(op, c->arg[i], c->val[i]);
  return op;
}

/* The layout conversions the last DNNL run of run_both made. */
static uint64_t dnnl_reorders;

static void run_both(opt_op *(*make)(const void *, const char *, const char *), const void *arg,
                     const char *x, const char *y) {
  uint64_t before = dm_layout_reorders().count;
  dm_status s = opt_run(make(arg, x, y), wd);
  dnnl_reorders = dm_layout_reorders().count - before;
  if (s != DM_OK)
    fail_msg("DNNL: %s", dm_last_error());
  s = opt_run(make(arg, x, y), wr);
  if (s != DM_OK)
    fail_msg("REFERENCE: %s", dm_last_error());
}

static opt_op *make_unary(const void *arg, const char *x, const char *y) {
  return unary_op(arg, x, y);
}

static void test_unary(void **state) {
  (void)state;
  const int64_t d[4] = {2, 20, 5, 3};
  static const int blks[] = {0, 16, 8};
  for (size_t k = 0; k < sizeof unary_cases / sizeof unary_cases[0]; k++) {
    const unary_case *c = &unary_cases[k];
    int sig = strcmp(c->type, "Sigmoid") == 0;
    for (int m = 0; m < 2; m++) {
      dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
      double rel = sig ? 4 * 0x1p-24 + (m ? 0x1p-8 : 0) : 0, abs_tol = sig ? 0x1p-125 : 0;
      for (int b = 0; b < 3; b++) {
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", c->type, m ? "BF16" : "FP32",
                 blks[b] == 16 ? "nChw16c" : blks[b] == 8 ? "nChw8c" : "plain");
        feed("X", t, 4, d, 1, -8, 8);
        if (blks[b])
          make_blocked("X", blks[b]);
        run_both(make_unary, c, "X", "Y");
        assert_int_equal(is_blocked("Y"), blks[b] != 0); /* the engine ran, in X's layout */
        if (blks[b])
          expect_zero_padding("Y");
        compare(what, "Y", rel, abs_tol);
        /* in place, where the schema allows it (the gradient reads Y) */
        if (strcmp(c->type, "HardSwish") && strcmp(c->type, "Erf") && strcmp(c->type, "Gelu")) {
          if (blks[b])
            make_blocked("X", blks[b]);
          run_both(make_unary, c, "X", "X");
          if (blks[b])
            expect_zero_padding("X");
          compare(what, "X", rel, abs_tol);
        }
      }
    }
  }
  /* other ranks and an empty tensor, plain */
  const int64_t e3[3] = {3, 0, 7}, e1[1] = {1001};
  feed("X", DM_FLOAT, 3, e3, 0, -1, 1);
  run_both(make_unary, &unary_cases[0], "X", "Y");
  compare("Sigmoid empty", "Y", 0, 0);
  feed("X", DM_FLOAT, 1, e1, 1, -90, 90);
  run_both(make_unary, &unary_cases[3], "X", "Y");
  compare("Clip 1-D", "Y", 0, 0);
}

/* A layout with two inner blocks and padding (a Conv's weights, OIhw16i16o, of 20 x 20
 * channels: padded to 32 x 32) takes the generic zeroing (dnnl_common.c's reorder through
 * plain): the raw buffer's sum, padding included, equals the plain values' sum, which a
 * Sigmoid's 0.5 left in the padding would break. */
static void test_unary_padded_weights(void **state) {
  (void)state;
  const int64_t d[4] = {20, 20, 3, 3};
  feed("X", DM_FLOAT, 4, d, 0, -3, 3);
  dm_tensor *t = (dm_tensor *)dm_workspace_tensor(wd, "X");
  dnnl_memory_desc_t md;
  dnnl_dims_t dd = {20, 20, 3, 3};
  assert_int_equal(dnnl_memory_desc_init_by_tag(&md, 4, dd, dnnl_f32, dnnl_OIhw16i16o),
                   dnnl_success);
  assert_int_equal(dm_dnnl_relayout(t, &md), DM_OK);
  run_both(make_unary, &unary_cases[0], "X", "Y"); /* Sigmoid */
  const dm_tensor *y = dm_workspace_tensor(wd, "Y");
  assert_false(dm_tensor_is_plain(y));
  const size_t n = dnnl_memory_desc_get_size(&md) / sizeof(float);
  assert_true(n > (size_t)y->numel); /* there is padding */
  double raw = 0, plain = 0;
  const float *r = dm_tensor_raw_data(y);
  for (size_t i = 0; i < n; i++)
    raw += r[i];
  for (int64_t i = 0; i < y->numel; i++)
    plain += dtu_val(y, i); /* converts Y to plain in its blob */
  if (fabs(raw - plain) > 1e-9 * fabs(plain))
    fail_msg("the padding is not zeros: raw sum %.12g, values' sum %.12g", raw, plain);
  compare("Sigmoid OIhw16i16o", "Y", 4 * 0x1p-24, 0x1p-125);
}

/* The reference's errors, in its words, from the engine's kernel. */
static void test_unary_errors(void **state) {
  (void)state;
  const int64_t d[4] = {1, 20, 2, 2};
  feed("X", DM_FLOAT, 4, d, 0, -1, 1);
  make_blocked("X", 16);
  const unary_case bad = {"Clip", {"min", "max"}, {2.0f, 1.0f}};
  opt_expect_error(opt_run(unary_op(&bad, "X", "Y"), wd), DM_ERR_INVALID,
                   "Clip's min 2 is above its max 1", NULL);
  opt_expect_error(opt_run(unary_op(&bad, "X", "Y"), wr), DM_ERR_INVALID,
                   "Clip's min 2 is above its max 1", NULL);
}

/* ---- Add, Sub, Mul, Div ---------------------------------------------------------- */

static const char *const binary_types[] = {"Add", "Sub", "Mul", "Div"};

static opt_op *make_binary(const void *arg, const char *a, const char *c) {
  opt_op *op = opt_new(arg);
  opt_in(op, a);
  opt_in(op, "B");
  opt_out(op, c);
  return op;
}

/* A of dims da, B of dims db, each plain or blocked (16 or 8; a 4-D one only), C = A op
 * B on both engines, C's padding checked; returns whether C was left blocked (looked at
 * before the comparison, which reads it plain). */
static int binary_case(const char *type, dm_dtype t, int na, const int64_t *da, int blk_a,
                        int nb, const int64_t *db, int blk_b, const char *out) {
  char what[128];
  snprintf(what, sizeof what, "%s %s A %dD%s B %dD%s", type, t == DM_FLOAT ? "FP32" : "BF16",
           na, blk_a ? " blocked" : "", nb, blk_b ? " blocked" : "");
  feed("A", t, na, da, 1, -4, 4);
  feed("B", t, nb, db, 1, -4, 4);
  if (blk_a)
    make_blocked("A", blk_a);
  if (blk_b)
    make_blocked("B", blk_b);
  run_both(make_binary, type, "A", out);
  int blocked = is_blocked(out);
  if (blocked)
    expect_zero_padding(out);
  compare(what, out, 0, 0);
  return blocked;
}

static void test_binary(void **state) {
  (void)state;
  const int64_t big[4] = {2, 20, 5, 3}, ch3[3] = {20, 1, 1}, ch4[4] = {1, 20, 1, 1},
                chn[4] = {2, 20, 1, 1}, last[1] = {3};
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    for (int k = 0; k < 4; k++) {
      const char *ty = binary_types[k];
      /* equal shapes: both blocked (C stays so), mixed, both plain */
      assert_true(binary_case(ty, t, 4, big, 16, 4, big, 16, "C"));
      assert_false(binary_case(ty, t, 4, big, 8, 4, big, 0, "C")); /* B's plain layout */
      assert_false(binary_case(ty, t, 4, big, 0, 4, big, 16, "C"));
      assert_false(binary_case(ty, t, 4, big, 0, 4, big, 0, "C"));
      /* in place on A, blocked */
      assert_true(binary_case(ty, t, 4, big, 16, 4, big, 16, "A"));
      /* per-channel broadcasts: B of [C,1,1], [1,C,1,1], [N,C,1,1] (SE's, blocked too),
       * onto a blocked or plain A, and the other way round (A per-channel) */
      for (int blk = 0; blk <= 16; blk += 8) {
        assert_int_equal(binary_case(ty, t, 4, big, blk, 3, ch3, 0, "C"), blk != 0);
        assert_int_equal(binary_case(ty, t, 4, big, blk, 4, ch4, 0, "C"), blk != 0);
        assert_int_equal(binary_case(ty, t, 4, big, blk, 4, chn, 0, "C"), blk != 0);
        assert_int_equal(binary_case(ty, t, 4, big, blk, 4, chn, 16, "C"), blk != 0);
        /* the blocked [N,C,1,1] operand is read where it is: no conversion */
        assert_int_equal(dnnl_reorders, 0);
        /* in place on the 4-D operand */
        assert_int_equal(binary_case(ty, t, 4, big, blk, 4, chn, 8, "A"), blk != 0);
        feed("A", t, 4, chn, 1, -4, 4); /* A per-channel, B 4-D */
        feed("B", t, 4, big, 1, -4, 4);
        if (blk)
          make_blocked("B", blk);
        run_both(make_binary, ty, "A", "C");
        assert_int_equal(is_blocked("C"), blk != 0);
        compare("per-channel A", "C", 0, 0);
        /* any other broadcast: the reference's kernel, a blocked A converted first */
        assert_false(binary_case(ty, t, 4, big, blk, 1, last, 0, "C"));
      }
    }
  }
}

/* Div's 0 / 0 and x / 0 where the engine writes Y blocked: NaN and infinities in the
 * data, zeros in the padding. */
static void test_div_specials(void **state) {
  (void)state;
  const int64_t d[4] = {1, 20, 2, 2};
  float z[80] = {0};
  for (int i = 0; i < 80; i++)
    z[i] = i % 3 == 0 ? 0.0f : (float)(i - 40);
  opt_feed(wd, "A", DM_FLOAT, 4, d, z);
  opt_feed(wr, "A", DM_FLOAT, 4, d, z);
  memset(z, 0, sizeof z);
  opt_feed(wd, "B", DM_FLOAT, 4, d, z);
  opt_feed(wr, "B", DM_FLOAT, 4, d, z);
  make_blocked("A", 16);
  make_blocked("B", 16);
  run_both(make_binary, "Div", "A", "C");
  assert_true(is_blocked("C"));
  expect_zero_padding("C"); /* the data has NaN and infinities */
  compare("Div by zeros", "C", 0, 0);
}

/* The reference's shape errors, in its words, from the engine's kernel. */
static void test_binary_errors(void **state) {
  (void)state;
  const int64_t a[4] = {2, 20, 5, 3}, b[4] = {2, 19, 1, 1};
  feed("A", DM_FLOAT, 4, a, 0, -1, 1);
  feed("B", DM_FLOAT, 4, b, 0, -1, 1);
  make_blocked("A", 16);
  dm_status want = opt_run(make_binary("Mul", "A", "C"), wr);
  assert_int_equal(want, DM_ERR_SHAPE);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", dm_last_error());
  assert_int_equal(opt_run(make_binary("Mul", "A", "C"), wd), want);
  assert_string_equal(dm_last_error(), msg);
}

int main(void) {
  if (!dm_have_dnnl()) {
    printf("oneDNN cannot run here: skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vexp),          cmocka_unit_test(test_unary),
      cmocka_unit_test(test_unary_padded_weights),
      cmocka_unit_test(test_unary_errors),  cmocka_unit_test(test_binary),
      cmocka_unit_test(test_div_specials),  cmocka_unit_test(test_binary_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
