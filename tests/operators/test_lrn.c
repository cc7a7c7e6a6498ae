/* test_lrn.c: LRN and LRNGradient against a double-precision reference (NCHW and NHWC,
 * FP32 and FP16), the gradient by finite differences with and without the scale output.
 *
 * Bound (derived): the kernel sums the window's squares (size terms) and applies pow in
 * double, then rounds Y once; with d = (size + 8) 2^-52 the double error of scale is
 * d |scale| and of scale^-beta d (1 + |beta|) |.|, so
 *   |Y - ref| <= u_out |ref| + d (1 + |beta|) |ref| + s_out,
 * and the FP32 scale output u32 |ref| + d |ref|.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

typedef struct lrn_case {
  int64_t N, C, H, W;
  int nhwc, fp16, size;
  float alpha, beta, bias;
  uint64_t seed;
} lrn_case;

static void check_lrn(dm_workspace *ws, lrn_case c) {
  int64_t n = c.N * c.C * c.H * c.W, HW = c.H * c.W;
  int64_t nchw[] = {c.N, c.C, c.H, c.W}, nhwc[] = {c.N, c.H, c.W, c.C};
  const int64_t *dims = c.nhwc ? nhwc : nchw;
  float *xf = malloc((size_t)n * sizeof *xf);
  uint16_t *xh = malloc((size_t)n * 2);
  double *x = malloc((size_t)n * sizeof *x);
  uint64_t s = c.seed;
  for (int64_t i = 0; i < n; i++) {
    xf[i] = (float)opt_uniform(&s, -3, 3);
    xh[i] = dm_float_to_half(xf[i]);
    x[i] = c.fp16 ? dm_half_to_float(xh[i]) : xf[i];
  }
  dm_dtype t = c.fp16 ? DM_FLOAT16 : DM_FLOAT;
  opt_feed(ws, "X", t, 4, dims, c.fp16 ? (void *)xh : (void *)xf);
  opt_op *op = opt_new("LRN");
  opt_in(op, "X"), opt_out(op, "Y"), opt_out(op, "S");
  opt_arg_int(op, "size", c.size);
  opt_arg_float(op, "alpha", c.alpha);
  opt_arg_float(op, "beta", c.beta);
  opt_arg_float(op, "bias", c.bias);
  if (c.nhwc)
    opt_arg_string(op, "order", "NHWC");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *y = opt_fetch(ws, "Y", t, 4, dims);
  const float *ps = dm_tensor_data(opt_fetch(ws, "S", DM_FLOAT, 4, dims));
  double d = (c.size + 8) * 0x1p-52, u = c.fp16 ? OPT_U16 : OPT_U32;
  double sub = c.fp16 ? 0x1p-25 : 0x1p-150, worst = 0;
  int pre = (c.size - 1) / 2;
  for (int64_t b = 0; b < c.N; b++)
    for (int64_t hw = 0; hw < HW; hw++)
      for (int64_t ch = 0; ch < c.C; ch++) {
#define AT(cc) (c.nhwc ? (b * HW + hw) * c.C + (cc) : (b * c.C + (cc)) * HW + hw)
        double sq = 0;
        for (int64_t k = ch - pre; k < ch - pre + c.size; k++)
          if (k >= 0 && k < c.C)
            sq += x[AT(k)] * x[AT(k)];
        double sc = c.bias + (double)c.alpha / c.size * sq;
        int64_t i = AT(ch);
#undef AT
        double ref = x[i] * pow(sc, -(double)c.beta);
        double tol = u * fabs(ref) + d * (1 + fabs(c.beta)) * fabs(ref) + sub;
        double got = c.fp16 ? dm_half_to_float(((const uint16_t *)dm_tensor_data(y))[i])
                            : ((const float *)dm_tensor_data(y))[i];
        if (!(fabs(got - ref) <= tol))
          fail_msg("Y[%lld] = %.9g, reference %.9g, tolerance %.3g", (long long)i, got, ref, tol);
        double stol = OPT_U32 * sc + d * sc;
        if (!(fabs(ps[i] - sc) <= stol))
          fail_msg("scale[%lld] = %.9g, reference %.9g", (long long)i, (double)ps[i], sc);
        worst = fmax(worst, fmax(fabs(got - ref) / tol, fabs(ps[i] - sc) / stol));
      }
  print_message("LRN %s %s N=%lld C=%lld size %d: worst error %.2f of the bound\n",
                c.nhwc ? "NHWC" : "NCHW", c.fp16 ? "FP16" : "FP32", (long long)c.N,
                (long long)c.C, c.size, worst);
  free(xf), free(xh), free(x);
}

static void test_forward(void **state) {
  dm_workspace *ws = *state;
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int fp16 = 0; fp16 < 2; fp16++) {
      uint64_t s = 1 + (uint64_t)(4 * nhwc + 2 * fp16);
      check_lrn(ws, (lrn_case){2, 7, 3, 4, nhwc, fp16, 5, 1e-2f, 0.75f, 1, s});
      check_lrn(ws, (lrn_case){1, 5, 2, 2, nhwc, fp16, 3, 0.5f, 0.75f, 2, s + 10});
      check_lrn(ws, (lrn_case){1, 3, 1, 1, nhwc, fp16, 7, 1e-4f, 0.75f, 1, s + 20}); /* size > C */
      check_lrn(ws, (lrn_case){2, 16, 5, 5, nhwc, fp16, 5, 1e-4f, 0.75f, 1, s + 30});
    }
}

static void test_gradient(void **state) {
  (void)state;
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int with_scale = 0; with_scale < 2; with_scale++) {
      int64_t N = 2, C = 5, H = 2, W = 3, n = N * C * H * W;
      float *x = malloc((size_t)n * sizeof *x);
      uint64_t s = 11 + (uint64_t)(2 * nhwc + with_scale);
      for (int64_t i = 0; i < n; i++)
        x[i] = (float)opt_uniform(&s, -2, 2);
      char text[512];
      snprintf(text, sizeof text,
               "type: 'LRN' input: 'X' output: 'Y' %s arg { name: 'size' i: 3 } "
               "arg { name: 'alpha' f: 0.6 } arg { name: 'beta' f: 0.75 } "
               "arg { name: 'bias' f: 1.5 } arg { name: 'order' s: '%s' }",
               with_scale ? "output: 'S'" : "", nhwc ? "NHWC" : "NCHW");
      gc_input in[] = {{"X", 4, {N, nhwc ? H : C, nhwc ? W : H, nhwc ? C : W}, x, 1, 0}};
      double r = gc_check(text, in, 1, 1, 3);
      print_message("LRN gradient %s %s scale: worst %.2f of the tolerance\n",
                    nhwc ? "NHWC" : "NCHW", with_scale ? "with" : "without", r);
      free(x);
    }
}

static void test_errors(void **state) {
  dm_workspace *ws = *state;
  float z[2 * 4 * 3] = {0};
  int64_t d[] = {2, 4, 3};
  opt_feed(ws, "X", DM_FLOAT, 3, d, z);
  opt_op *op = opt_new("LRN");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_int(op, "size", 4);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "size is 4", "positive odd", NULL);
  op = opt_new("LRN");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "missing required argument 'size'", NULL);
  op = opt_new("LRN");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_int(op, "size", 3);
  opt_arg_string(op, "order", "CHWN");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "order is 'CHWN'", NULL);
  int32_t iz[24] = {0};
  opt_feed(ws, "I", DM_INT32, 3, d, iz);
  op = opt_new("LRN");
  opt_in(op, "I"), opt_out(op, "Y");
  opt_arg_int(op, "size", 3);
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "X is INT32", NULL);
  int64_t d2[] = {2, 4, 2};
  opt_feed(ws, "dY", DM_FLOAT, 3, d2, z);
  op = opt_new("LRNGradient");
  opt_in(op, "X"), opt_in(op, "X"), opt_in(op, "dY"), opt_out(op, "dX");
  opt_arg_int(op, "size", 3);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "dY is FLOAT 2x4x2; expected FLOAT 2x4x3", NULL);
  const dm_op_schema *s = dm_schema_lookup("LRN");
  assert_non_null(s);
  assert_int_equal(s->precision, DM_PREC_FP32);
  assert_non_null(s->gradient);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward),
      cmocka_unit_test(test_gradient),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
