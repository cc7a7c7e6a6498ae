/* test_unary_math.c: Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid, HardSwish, Erf, Sqrt and
 * Gelu (exact and fast_gelu) against their
 * definitions computed here in double, in FP32, FP16 and BF16 (out of place and in
 * place); their gradient ops against the derivatives in double, and each gradient maker
 * + kernel against finite differences of the forward (grad_check.h).
 *
 * Tolerances: the kernel widens X exactly, computes in FP32 (expf/tanhf: a few ulps; the
 * functions are well conditioned, |f'(x) x| <= |f(x)| + 1 here) and rounds once to the
 * output dtype, so |got - ref| <= u |ref| + 16 u32 (|ref| + 1) + the dtype's half
 * subnormal, with u the output dtype's unit roundoff (0 for FP32).
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

typedef struct ucase {
  const char *type;
  float alpha, beta, lo, hi; /* arguments written when nonzero (lo/hi: when finite) */
  int args;                  /* 1: alpha, 2: alpha + beta, 3: min + max, 4: fast_gelu 1 */
  int reads_x;               /* the gradient reads X, so the forward is not in place */
  double xmin;               /* the gradient ops' X is drawn from [xmin, 5] */
} ucase;

static const ucase cases[] = {
    {"Sigmoid", 0, 0, 0, 0, 0, 0, -5},
    {"Tanh", 0, 0, 0, 0, 0, 0, -5},
    {"LeakyRelu", 0.1f, 0, 0, 0, 1, 0, -5},
    {"LeakyRelu", 0, 0, 0, 0, 0, 0, -5}, /* the default alpha 0.01 */
    {"Clip", 0, 0, -1.5f, 2.25f, 3, 0, -5},
    {"HardSigmoid", 0.3f, 0.4f, 0, 0, 2, 0, -5},
    {"HardSigmoid", 0, 0, 0, 0, 0, 0, -5}, /* defaults 0.2, 0.5 */
    {"HardSwish", 0, 0, 0, 0, 0, 1, -5},
    {"Erf", 0, 0, 0, 0, 0, 1, -5},
    {"Sqrt", 0, 0, 0, 0, 0, 0, 0.05}, /* dX = dY / (2 Y): Y kept away from 0 */
    {"Gelu", 0, 0, 0, 0, 0, 1, -5},
    {"Gelu", 0, 0, 0, 0, 4, 1, -5}, /* fast_gelu */
};

static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static double ref_forward(const ucase *c, double x) {
  double alpha = c->args ? c->alpha : strcmp(c->type, "LeakyRelu") == 0 ? 0.01 : 0.2;
  double beta = c->args == 2 ? c->beta : 0.5;
  if (strcmp(c->type, "Sigmoid") == 0)
    return 1.0 / (1.0 + exp(-x));
  if (strcmp(c->type, "Tanh") == 0)
    return tanh(x);
  if (strcmp(c->type, "LeakyRelu") == 0)
    return x > 0 ? x : alpha * x;
  if (strcmp(c->type, "Clip") == 0)
    return isnan(x) ? x : x < c->lo ? c->lo : x > c->hi ? c->hi : x;
  if (strcmp(c->type, "HardSigmoid") == 0)
    return isnan(x) ? x : clamp01((double)(float)alpha * x + (double)(float)beta);
  if (strcmp(c->type, "Erf") == 0)
    return erf(x);
  if (strcmp(c->type, "Sqrt") == 0)
    return sqrt(x);
  if (strcmp(c->type, "Gelu") == 0) {
    if (isinf(x)) /* the limits: 0 at -inf, x at +inf */
      return x < 0 ? 0 : x;
    if (c->args == 4)
      return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * erfc(-x / sqrt(2));
  }
  return isnan(x) ? x : x <= -3 ? 0 : x * clamp01(x / 6 + 0.5); /* HardSwish */
}

/* The derivative of the forward at x (s = Y, or X where the op reads X) times g. */
static double ref_gradient(const ucase *c, double x, double y, double g) {
  double alpha = c->args ? c->alpha : strcmp(c->type, "LeakyRelu") == 0 ? 0.01 : 0.2;
  if (strcmp(c->type, "Sigmoid") == 0)
    return g * y * (1 - y);
  if (strcmp(c->type, "Tanh") == 0)
    return g * (1 - y * y);
  if (strcmp(c->type, "LeakyRelu") == 0)
    return y > 0 ? g : (double)(float)alpha * g;
  if (strcmp(c->type, "Clip") == 0)
    return y > c->lo && y < c->hi ? g : 0;
  if (strcmp(c->type, "HardSigmoid") == 0)
    return y > 0 && y < 1 ? (double)(float)alpha * g : 0;
  if (strcmp(c->type, "Erf") == 0)
    return g * 2 / sqrt(M_PI) * exp(-x * x);
  if (strcmp(c->type, "Sqrt") == 0)
    return g / (2 * y);
  if (strcmp(c->type, "Gelu") == 0 && c->args == 4) {
    double k = sqrt(2 / M_PI), t = tanh(k * (x + 0.044715 * x * x * x));
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
  }
  if (strcmp(c->type, "Gelu") == 0)
    return g * (0.5 * erfc(-x / sqrt(2)) + x * exp(-x * x / 2) / sqrt(2 * M_PI));
  return x < -3 ? 0 : x > 3 ? g : g * (2 * x + 3) / 6; /* HardSwish */
}

static void add_args(const ucase *c, opt_op *op) {
  if (c->args == 1 || c->args == 2)
    opt_arg_float(op, "alpha", c->alpha);
  if (c->args == 2)
    opt_arg_float(op, "beta", c->beta);
  if (c->args == 3)
    opt_arg_float(op, "min", c->lo), opt_arg_float(op, "max", c->hi);
  if (c->args == 4)
    opt_arg_int(op, "fast_gelu", 1);
}

static void check_forward(dm_workspace *ws, const ucase *c, int mode) {
  enum { N = 600 };
  static float x[N];
  static uint16_t xh[N];
  uint64_t seed = 11;
  for (int i = 0; i < N; i++)
    x[i] = (float)opt_uniform(&seed, -8, 8);
  x[0] = 0, x[1] = -0.0f, x[2] = NAN, x[3] = INFINITY, x[4] = -INFINITY, x[5] = 3, x[6] = -3;
  x[7] = 40, x[8] = -40, x[9] = 100, x[10] = -100;
  dm_dtype t = opt_mode_dtype(mode);
  for (int i = 0; i < N; i++) {
    xh[i] = opt_narrow(mode, x[i]);
    if (mode)
      x[i] = opt_widen(mode, xh[i]); /* the reference reads what the kernel reads */
  }
  int64_t d[] = {20, 30};
  double u = mode ? opt_mode_u(mode) : 0, tiny = mode ? opt_mode_tiny(mode) : 0x1p-149;
  int inplace_ok = !c->reads_x;
  for (int inplace = 0; inplace < 1 + inplace_ok; inplace++) {
    opt_feed(ws, "X", t, 2, d, mode ? (const void *)xh : (const void *)x);
    opt_op *op = opt_new(c->type);
    opt_in(op, "X"), opt_out(op, inplace ? "X" : "Y");
    add_args(c, op);
    assert_int_equal(opt_run(op, ws), DM_OK);
    const void *y = dm_tensor_data(opt_fetch(ws, inplace ? "X" : "Y", t, 2, d));
    for (int i = 0; i < N; i++) {
      double r = ref_forward(c, x[i]);
      double got = mode ? opt_widen(mode, ((const uint16_t *)y)[i]) : ((const float *)y)[i];
      double tol = u * fabs(r) + 16 * OPT_U32 * (fabs(r) + 1) + tiny;
      int ok = isnan(r) ? isnan(got) : isinf(r) ? got == r : fabs(got - r) <= tol;
      if (!ok)
        fail_msg("%s %s inplace %d: f(%a) = %.9g, reference %.9g", c->type, opt_mode_name(mode),
                 inplace, (double)x[i], got, r);
    }
  }
}

static void test_forward(void **state) {
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (int mode = 0; mode < 3; mode++)
      check_forward(*state, &cases[k], mode);
}

/* The gradient ops alone: dX from (Y or X, dY) against the derivative in double. */
static void test_gradient_ops(void **state) {
  dm_workspace *ws = *state;
  enum { N = 200 };
  static float x[N], y[N], g[N];
  static uint16_t sh[N], gh[N];
  uint64_t seed = 5;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const ucase *c = &cases[k];
    char gt[64];
    snprintf(gt, sizeof gt, "%sGradient", c->type);
    int reads_x = c->reads_x;
    for (int mode = 0; mode < 3; mode++) {
      dm_dtype t = opt_mode_dtype(mode);
      for (int i = 0; i < N; i++) {
        x[i] = (float)opt_uniform(&seed, c->xmin, 5);
        g[i] = (float)opt_uniform(&seed, -2, 2);
        y[i] = (float)ref_forward(c, x[i]);
        float s = reads_x ? x[i] : y[i];
        sh[i] = opt_narrow(mode, s), gh[i] = opt_narrow(mode, g[i]);
        if (mode) {
          s = opt_widen(mode, sh[i]), g[i] = opt_widen(mode, gh[i]);
          if (reads_x)
            x[i] = s;
          else
            y[i] = s;
        }
      }
      int64_t d = N;
      opt_feed(ws, "S", t, 1, &d, mode ? (const void *)sh : (const void *)(reads_x ? x : y));
      opt_feed(ws, "dY", t, 1, &d, mode ? (const void *)gh : (const void *)g);
      opt_op *op = opt_new(gt);
      opt_in(op, "S"), opt_in(op, "dY"), opt_out(op, "dY"); /* in place on dY */
      add_args(c, op);
      assert_int_equal(opt_run(op, ws), DM_OK);
      const void *dx = dm_tensor_data(opt_fetch(ws, "dY", t, 1, &d));
      for (int i = 0; i < N; i++) {
        double gg = g[i], r = ref_gradient(c, x[i], y[i], gg);
        double got = mode ? opt_widen(mode, ((const uint16_t *)dx)[i]) : ((const float *)dx)[i];
        double u = mode ? opt_mode_u(mode) : 0;
        double tol = u * fabs(r) + 16 * OPT_U32 * (fabs(gg) + 1) + (mode ? opt_mode_tiny(mode) : 0);
        if (fabs(got - r) > tol)
          fail_msg("%s %s [%d]: dX = %.9g, reference %.9g", gt, opt_mode_name(mode), i, got, r);
      }
    }
  }
}

/* Makers + kernels against finite differences: inputs kept 2h away from every kink. */
static void test_gradient_check(void **state) {
  (void)state;
  static float x[60];
  uint64_t seed = 17;
  static const char *const ops[] = {
      "type: 'Sigmoid' input: 'X' output: 'Y'",
      "type: 'Tanh' input: 'X' output: 'Y'",
      "type: 'LeakyRelu' input: 'X' output: 'Y' arg { name: 'alpha' f: 0.2 }",
      "type: 'Clip' input: 'X' output: 'Y' arg { name: 'min' f: -1 } arg { name: 'max' f: 1.5 }",
      ("type: 'HardSigmoid' input: 'X' output: 'Y' arg { name: 'alpha' f: 0.25 } "
       "arg { name: 'beta' f: 0.5 }"),
      "type: 'HardSwish' input: 'X' output: 'Y'",
      "type: 'Erf' input: 'X' output: 'Y'",
      "type: 'Gelu' input: 'X' output: 'Y'",
      "type: 'Gelu' input: 'X' output: 'Y' arg { name: 'fast_gelu' i: 1 }",
  };
  /* kinks: 0 (LeakyRelu), -1 and 1.5 (Clip), -2 and 2 (HardSigmoid), -3 and 3 (HardSwish) */
  static const double kinks[] = {0, -1, 1.5, -2, 2, -3, 3};
  for (int i = 0; i < 60; i++) {
    double v;
    int near;
    do {
      v = opt_uniform(&seed, -4, 4);
      near = 0;
      for (size_t k = 0; k < sizeof kinks / sizeof kinks[0]; k++)
        near |= fabs(v - kinks[k]) < 0.05;
    } while (near);
    x[i] = (float)v;
  }
  gc_input in[] = {{"X", 3, {3, 4, 5}, x, 1, 0}};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    gc_check(ops[k], in, 1, 1, 1);
  for (int i = 0; i < 60; i++) /* Sqrt's domain, away from its pole at 0 */
    x[i] = fabsf(x[i]) + 0.25f;
  gc_check("type: 'Sqrt' input: 'X' output: 'Y'", in, 1, 1, 1);
}

static void test_errors(void **state) {
  dm_workspace *ws = *state;
  int32_t v[2] = {1, -1};
  int64_t d[] = {2};
  opt_feed(ws, "I", DM_INT32, 1, d, v);
  opt_op *op = opt_new("Sigmoid");
  opt_in(op, "I"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "X is INT32", "unsupported dtype", NULL);
  float f[2] = {1, 2};
  opt_feed(ws, "F", DM_FLOAT, 1, d, f);
  op = opt_new("Clip");
  opt_in(op, "F"), opt_out(op, "Y");
  opt_arg_float(op, "min", 2), opt_arg_float(op, "max", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "min 2 is above its max 1", NULL);
  op = opt_new("LeakyReluGradient");
  opt_in(op, "F"), opt_in(op, "F"), opt_out(op, "G");
  opt_arg_float(op, "alpha", -0.5f);
  opt_expect_error(opt_run(op, ws), DM_ERR_UNSUPPORTED, "alpha -0.5 is negative", NULL);
  op = opt_new("HardSwish");
  opt_in(op, "F"), opt_out(op, "F");
  assert_int_not_equal(opt_run(op, ws), DM_OK); /* not in place: the gradient reads X */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward),
      cmocka_unit_test(test_gradient_ops),
      cmocka_unit_test(test_gradient_check),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
