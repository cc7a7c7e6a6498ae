/* test_masked_softmax.c: MaskedSoftmax and MaskedSoftmaxGradient against a double-precision
 * reference (FP32, FP16, BF16; causal, additive masks broadcast over batch and heads,
 * fully masked rows), finite differences of the gradient, and hostile inputs.
 *
 * Bound per kept key (derived from the kernel): the logit z = scale * x + mask is formed
 * in FP32 with two roundings, an error a_j <= u32 (|scale x_j| + |z_j|) (1 + u32); the
 * softmax is invariant to a common shift, so the result's relative error is at most
 * a_j + max_k a_k from the logits, plus Softmax's own (|z_j - max| + Tk + 4) u32 (see
 * test_softmax.c), plus 2^-149 for the roundings that can land in FP32's subnormals. A
 * 16-bit Y adds one rounding, u16 (|y| + tol) + its half subnormal. Masked keys must be
 * exactly 0, and so must every key of a fully masked row.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/half.h"
#include "demitasse_plugin.h"
#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static double value_at(int mode, const dm_tensor *t, size_t k) {
  return mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(t))[k])
              : ((const float *)dm_tensor_data(t))[k];
}

/* One case: X 4-D d, a mask of mnd dims md (mnd 0: none) in mask_mode, with a share
 * `pinf` of -inf entries. */
typedef struct ms_case {
  int64_t d[4];
  int mnd;
  int64_t md[4];
  int mask_mode;
  double pinf;
  int causal;
  float scale;
  double lo, hi;
} ms_case;

static void check_ms(dm_workspace *ws, const ms_case *c, int mode, uint64_t seed) {
  const int64_t *d = c->d, Tq = d[2], Tk = d[3], R = d[0] * d[1] * d[2];
  double *x = opt_draw(R * Tk, c->lo, c->hi, mode, &seed);
  int64_t mn = 1;
  for (int k = 0; k < c->mnd; k++)
    mn *= c->md[k];
  double *m = opt_draw(mn, -2, 2, c->mask_mode, &seed);
  for (int64_t k = 0; k < mn; k++)
    if (opt_uniform(&seed, 0, 1) < c->pinf)
      m[k] = -INFINITY;
  opt_feed_mode(ws, "X", mode, 4, d, x);
  opt_op *op = opt_new("MaskedSoftmax");
  opt_in(op, "X");
  if (c->mnd) {
    opt_feed_mode(ws, "M", c->mask_mode, c->mnd, c->md, m);
    opt_in(op, "M");
  }
  opt_out(op, "Y");
  if (c->causal)
    opt_arg_int(op, "causal", 1);
  if (c->scale != 1.0f)
    opt_arg_float(op, "scale", c->scale);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *y = opt_fetch(ws, "Y", opt_mode_dtype(mode), 4, d);
  double *z = malloc((size_t)Tk * sizeof *z), *a = malloc((size_t)Tk * sizeof *a);
  int *kept = malloc((size_t)Tk * sizeof *kept);
  double worst = 0;
  int64_t empty = 0;
  for (int64_t r = 0; r < R; r++) {
    const int64_t q = r % Tq, h = (r / Tq) % d[1], b = r / (Tq * d[1]);
    double mx = -INFINITY, amax = 0, sum = 0;
    for (int64_t j = 0; j < Tk; j++) {
      /* the mask element broadcast to (b, h, q, j) from the trailing dims */
      int64_t idx[4] = {b, h, q, j}, off = 0;
      for (int k = 0; k < c->mnd; k++)
        off = off * c->md[k] + (c->md[k] == 1 ? 0 : idx[4 - c->mnd + k]);
      double sx = (double)c->scale * x[r * Tk + j], mv = c->mnd ? m[off] : 0;
      z[j] = sx + mv;
      kept[j] = !(c->causal && j > q + (Tk - Tq)) && z[j] != -INFINITY;
      if (kept[j]) {
        a[j] = OPT_U32 * (fabs(sx) + fabs(z[j])) * (1 + OPT_U32);
        mx = fmax(mx, z[j]), amax = fmax(amax, a[j]);
      }
    }
    for (int64_t j = 0; j < Tk; j++)
      if (kept[j])
        sum += exp(z[j] - mx);
    empty += sum == 0;
    for (int64_t j = 0; j < Tk; j++) {
      double got = value_at(mode, y, (size_t)(r * Tk + j));
      if (!kept[j]) {
        if (got != 0)
          fail_msg("%s Y[%lld,%lld] = %.9g for a masked key", opt_mode_name(mode),
                   (long long)r, (long long)j, got);
        continue;
      }
      double ref = exp(z[j] - mx) / sum;
      double tol = ref * ((fabs(z[j] - mx) + (double)Tk + 4) * OPT_U32 + a[j] + amax) + 0x1p-149;
      if (mode)
        tol += opt_mode_u(mode) * (ref + tol) + opt_mode_tiny(mode);
      if (!(fabs(got - ref) <= tol))
        fail_msg("%s Y[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", opt_mode_name(mode),
                 (long long)r, (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
    }
  }
  print_message("MaskedSoftmax %s %lldx%lldx%lldx%lld causal=%d mask=%d: %lld fully masked "
                "rows, worst error %.2f of the bound\n", opt_mode_name(mode), (long long)d[0],
                (long long)d[1], (long long)Tq, (long long)Tk, c->causal, c->mnd,
                (long long)empty, worst);
  free(x), free(m), free(z), free(a), free(kept);
}

static void test_masked_softmax_forward(void **state) {
  const ms_case cases[] = {
      /* plain, scaled */
      {{2, 3, 4, 9}, 0, {0}, 0, 0, 0, 0.125f, -8, 8},
      /* causal with cached keys (Tk > Tq), a [Tq, Tk] mask with -inf entries */
      {{2, 2, 5, 7}, 2, {5, 7}, 0, 0.2, 1, 0.5f, -4, 4},
      /* key padding [B, 1, 1, Tk], the mask in X's dtype */
      {{3, 2, 4, 6}, 4, {3, 1, 1, 6}, -1, 0.3, 0, 1.0f, -4, 4},
      /* Tq > Tk: the first queries see no key at all and give zeros */
      {{1, 2, 6, 3}, 0, {0}, 0, 0, 1, 1.0f, -4, 4},
      /* long rows */
      {{1, 2, 3, 700}, 1, {700}, 0, 0.01, 0, 0.0625f, -30, 30},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int mode = 0; mode < 3; mode++) {
      ms_case c = cases[i];
      if (c.mask_mode < 0)
        c.mask_mode = mode;
      check_ms(*state, &c, mode, 100 * i + mode + 1);
    }
}

/* FP16 logits near FP16's top with scale 2: scale * x would be inf in FP16 (and the
 * softmax NaN); formed in FP32 it is finite. A mask of -inf rows gives zeros. */
static void test_masked_softmax_fp16_overflow(void **state) {
  const ms_case big = {{2, 2, 4, 16}, 0, {0}, 0, 0, 1, 2.0f, 40000, 65504};
  check_ms(*state, &big, 1, 7);
  const ms_case near = {{1, 1, 8, 8}, 2, {8, 8}, 1, 0.9, 0, 4.0f, 16000, 16400};
  check_ms(*state, &near, 1, 8);
}

/* MaskedSoftmaxGradient on given Y, dY against scale * y (dy - <dy, y>). */
static void check_ms_grad(dm_workspace *ws, int64_t R, int64_t Tk, float scale, int mode,
                          uint64_t seed) {
  double *y = opt_draw(R * Tk, 0, 1, mode, &seed), *dy = opt_draw(R * Tk, -2, 2, mode, &seed);
  for (int64_t k = 0; k < R * Tk; k += 3)
    y[k] = 0; /* masked keys */
  int64_t d[] = {R, Tk};
  opt_feed_mode(ws, "gY", mode, 2, d, y);
  opt_feed_mode(ws, "gdY", mode, 2, d, dy);
  opt_op *op = opt_new("MaskedSoftmaxGradient");
  opt_in(op, "gY"), opt_in(op, "gdY"), opt_out(op, "gdY"); /* in place, as allowed */
  opt_arg_float(op, "scale", scale);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *dx = opt_fetch(ws, "gdY", opt_mode_dtype(mode), 2, d);
  double worst = 0;
  for (int64_t i = 0; i < R; i++) {
    double dot = 0, S = 0;
    for (int64_t j = 0; j < Tk; j++)
      dot += dy[i * Tk + j] * y[i * Tk + j], S += fabs(dy[i * Tk + j] * y[i * Tk + j]);
    for (int64_t j = 0; j < Tk; j++) {
      size_t k = (size_t)(i * Tk + j);
      double ref = scale * y[k] * (dy[k] - dot);
      /* Softmax's gradient bound (test_softmax.c) and one more FP32 rounding for the scale */
      double tol = fabs(scale) * fabs(y[k]) *
                       (2 * OPT_U32 * (fabs(dy[k]) + fabs(dot)) + (double)(Tk + 2) * 0x1p-53 * S) +
                   2 * OPT_U32 * fabs(ref) + 0x1p-149;
      if (mode)
        tol += opt_mode_u(mode) * (fabs(ref) + tol) + opt_mode_tiny(mode);
      double got = value_at(mode, dx, k);
      if (y[k] == 0 && got != 0)
        fail_msg("dX[%lld,%lld] = %.9g for a masked key", (long long)i, (long long)j, got);
      if (!(fabs(got - ref) <= tol))
        fail_msg("%s dX[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", opt_mode_name(mode),
                 (long long)i, (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
    }
  }
  print_message("MaskedSoftmaxGradient %s R=%lld Tk=%lld: worst error %.2f of the bound\n",
                opt_mode_name(mode), (long long)R, (long long)Tk, worst);
  free(y), free(dy);
}

static void test_masked_softmax_gradient_op(void **state) {
  for (int mode = 0; mode < 3; mode++) {
    check_ms_grad(*state, 8, 10, 0.25f, mode, 51 + mode);
    check_ms_grad(*state, 3, 1000, 1.0f, mode, 54 + mode);
  }
}

static void test_masked_softmax_gradient_fd(void **state) {
  (void)state;
  float x[2 * 2 * 3 * 5], m[3 * 5];
  uint64_t s = 61;
  for (int i = 0; i < 60; i++)
    x[i] = (float)opt_uniform(&s, -3, 3);
  for (int i = 0; i < 15; i++)
    m[i] = i % 4 == 1 ? -INFINITY : (float)opt_uniform(&s, -1, 1);
  gc_input in[] = {{"X", 4, {2, 2, 3, 5}, x, 1, 0}, {"M", 2, {3, 5}, m, 0, 0}};
  double r1 = gc_check("type: 'MaskedSoftmax' input: 'X' input: 'M' output: 'Y' "
                       "arg { name: 'causal' i: 1 } arg { name: 'scale' f: 0.5 }", in, 2, 1, 5);
  double r2 = gc_check("type: 'MaskedSoftmax' input: 'X' output: 'Y' "
                       "arg { name: 'scale' f: 2 }", in, 1, 1, 5);
  print_message("MaskedSoftmax gradient: worst %.2f / %.2f of the tolerance\n", r1, r2);
  const dm_op_schema *sc = dm_schema_lookup("MaskedSoftmax");
  assert_non_null(sc->gradient);
  assert_int_equal(sc->precision, DM_PREC_FP32);
}

static void test_masked_softmax_errors(void **state) {
  dm_workspace *ws = *state;
  float z[24] = {0};
  int64_t d[] = {2, 3, 4}, bad[] = {2, 4}, one[] = {24};
  int32_t iz[24] = {0};
  double dz[24] = {0};
  opt_feed(ws, "X", DM_FLOAT, 3, d, z);
  opt_feed(ws, "X1", DM_FLOAT, 1, one, z);
  opt_feed(ws, "Xi", DM_INT32, 3, d, iz);
  opt_feed(ws, "Mbad", DM_FLOAT, 2, bad, z);
  opt_feed(ws, "Md", DM_DOUBLE, 3, d, dz);
  struct {
    const char *x, *m;
    int64_t causal;
    float scale;
    dm_status want;
    const char *msg;
  } cases[] = {
      {"X1", NULL, 0, 1, DM_ERR_SHAPE, "X is 24; expected at least 2 dims"},
      {"Xi", NULL, 0, 1, DM_ERR_TYPE, "X is INT32"},
      {"X", "Mbad", 0, 1, DM_ERR_SHAPE, "mask 2x4 does not broadcast to X 2x3x4"},
      {"X", "Md", 0, 1, DM_ERR_TYPE, "mask is DOUBLE; expected FLOAT or X's dtype FLOAT"},
      {"X", NULL, 2, 1, DM_ERR_INVALID, "causal is 2"},
      {"X", NULL, 0, INFINITY, DM_ERR_INVALID, "scale is inf"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    opt_op *op = opt_new("MaskedSoftmax");
    opt_in(op, cases[c].x);
    if (cases[c].m)
      opt_in(op, cases[c].m);
    opt_out(op, "Y");
    if (cases[c].causal)
      opt_arg_int(op, "causal", cases[c].causal);
    if (cases[c].scale != 1)
      opt_arg_float(op, "scale", cases[c].scale);
    opt_expect_error(opt_run(op, ws), cases[c].want, "MaskedSoftmax", cases[c].msg, NULL);
  }
  opt_op *op = opt_new("MaskedSoftmaxGradient");
  opt_in(op, "X"), opt_in(op, "Mbad"), opt_out(op, "dX");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "MaskedSoftmaxGradient",
                   "Y is FLOAT 2x3x4 but dY is FLOAT 2x4", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_masked_softmax_forward),
      cmocka_unit_test(test_masked_softmax_fp16_overflow),
      cmocka_unit_test(test_masked_softmax_gradient_op),
      cmocka_unit_test(test_masked_softmax_gradient_fd),
      cmocka_unit_test(test_masked_softmax_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
