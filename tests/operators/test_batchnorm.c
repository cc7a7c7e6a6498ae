/* test_batchnorm.c: the reference kernels' SpatialBN (train and test, NCHW and NHWC, FP32
 * and FP16 X) and SpatialBNGradient against double-precision references; gradients by
 * finite differences. The workspace runs the REFERENCE engine (the CPU's default, oneDNN,
 * sums in FP32 and is held to looser bounds against the reference in test_dnnl_pool.c).
 *
 * Bounds (derived): the kernel forms every per-channel sum of M = N*H*W terms in double
 * and each output in double, then rounds once to the output dtype. A double sum of M
 * terms is off by at most (M + 8) 2^-53 times the sum of the terms' magnitudes, so with
 * d = (M + 8) 2^-52 (a factor 2 for the second pass and the few operations after it):
 *   Y:      u_out |ref| + d (|a| (|x| + mean|x|) + |bias|) + s_out,  a = scale * inv_std
 *   mean:   u32 |ref| + d mean|x|;   var terms: d mean(x^2)
 *   inv_std: u32 |ref| + |ref| d mean(x^2) / (var + eps)  (half of the relative error of
 *           var + eps, doubled for the square root's own rounding in double)
 * where u_out is 2^-24 (FP32), 2^-11 (FP16) or 2^-8 (BF16) and s_out half the output's
 * subnormal spacing (2^-150, 2^-25, 2^-134). The gradient's bounds follow the same pattern (below).
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
#include "grad_check.h"
#include "op_test_util.h"

/* The reference engine's kernels (operators/batchnorm.c), which these bounds are for; the
 * oneDNN engine's (FP32 sums) are tested against them in test_dnnl_pool.c. */
static int setup(void **state) {
  return dm_workspace_create((dm_workspace **)state) != DM_OK ||
         dm_workspace_set_engine(*state, "REFERENCE") != DM_OK;
}
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

typedef struct bn_case {
  int64_t N, C, H, W;
  int nhwc, fp16, is_test;
  uint64_t seed;
} bn_case;

static int64_t at(const bn_case *c, int64_t n, int64_t ch, int64_t hw) {
  int64_t HW = c->H * c->W;
  return c->nhwc ? (n * HW + hw) * c->C + ch : (n * c->C + ch) * HW + hw;
}

static double got_at(const dm_tensor *t, int64_t k) {
  dm_dtype d = dm_tensor_dtype(t);
  return d == DM_FLOAT16    ? dm_half_to_float(((const uint16_t *)dm_tensor_data(t))[k])
         : d == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)dm_tensor_data(t))[k])
                            : ((const float *)dm_tensor_data(t))[k];
}

static double worst_seen;

static void expect_close(const char *what, int64_t k, double got, double ref, double tol) {
  if (!(fabs(got - ref) <= tol))
    fail_msg("%s[%lld] = %.9g, reference %.9g, tolerance %.3g", what, (long long)k, got, ref,
             tol);
  worst_seen = fmax(worst_seen, fabs(got - ref) / tol);
}

/* Inputs X (as the op sees them), scale, bias, mean, var; the X blob is fed in c's dtype. */
typedef struct bn_data {
  double *x;
  float *xf, *scale, *bias, *mean, *var;
  uint16_t *xh;
  int64_t dims[4], n;
} bn_data;

static bn_data make_data(dm_workspace *ws, const bn_case *c, double lo, double hi) {
  bn_data d;
  d.n = c->N * c->C * c->H * c->W;
  int64_t nchw[] = {c->N, c->C, c->H, c->W}, nhwc[] = {c->N, c->H, c->W, c->C};
  memcpy(d.dims, c->nhwc ? nhwc : nchw, sizeof d.dims);
  d.x = malloc((size_t)d.n * sizeof *d.x);
  d.xf = malloc((size_t)d.n * sizeof *d.xf);
  d.xh = malloc((size_t)d.n * 2);
  d.scale = malloc((size_t)c->C * sizeof(float)), d.bias = malloc((size_t)c->C * sizeof(float));
  d.mean = malloc((size_t)c->C * sizeof(float)), d.var = malloc((size_t)c->C * sizeof(float));
  uint64_t s = c->seed;
  for (int64_t i = 0; i < d.n; i++) {
    d.xf[i] = (float)opt_uniform(&s, lo, hi);
    d.xh[i] = opt_narrow(c->fp16, d.xf[i]);
    d.x[i] = c->fp16 ? opt_widen(c->fp16, d.xh[i]) : d.xf[i];
  }
  for (int64_t ch = 0; ch < c->C; ch++) {
    d.scale[ch] = (float)opt_uniform(&s, 0.5, 2);
    d.bias[ch] = (float)opt_uniform(&s, -1, 1);
    d.mean[ch] = (float)opt_uniform(&s, -1, 1);
    d.var[ch] = (float)opt_uniform(&s, 0.5, 3);
  }
  int64_t dc[] = {c->C};
  opt_feed(ws, "X", opt_mode_dtype(c->fp16), 4, d.dims,
           c->fp16 ? (void *)d.xh : (void *)d.xf);
  opt_feed(ws, "scale", DM_FLOAT, 1, dc, d.scale);
  opt_feed(ws, "bias", DM_FLOAT, 1, dc, d.bias);
  opt_feed(ws, "rm", DM_FLOAT, 1, dc, d.mean);
  opt_feed(ws, "rv", DM_FLOAT, 1, dc, d.var);
  return d;
}

static void free_data(bn_data *d) {
  free(d->x), free(d->xf), free(d->xh), free(d->scale), free(d->bias), free(d->mean),
      free(d->var);
}

static void check_forward(dm_workspace *ws, bn_case c) {
  bn_data d = make_data(ws, &c, -2, 3);
  opt_op *op = opt_new("SpatialBN");
  const char *ins[] = {"X", "scale", "bias", "rm", "rv"};
  for (int i = 0; i < 5; i++)
    opt_in(op, ins[i]);
  opt_out(op, "Y");
  if (!c.is_test) /* running statistics in place, as Caffe2 nets write them */
    opt_out(op, "rm"), opt_out(op, "rv"), opt_out(op, "sm"), opt_out(op, "si");
  opt_arg_int(op, "is_test", c.is_test);
  if (c.nhwc)
    opt_arg_string(op, "order", "NHWC");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *y = opt_fetch(ws, "Y", opt_mode_dtype(c.fp16), 4, d.dims);
  int64_t HW = c.H * c.W, M = c.N * HW, dc[] = {c.C};
  double delta = (double)(M + 8) * 0x1p-52, u = c.fp16 ? opt_mode_u(c.fp16) : OPT_U32;
  double sub = c.fp16 ? opt_mode_tiny(c.fp16) : 0x1p-150, eps = (double)1e-5f, mom = (double)0.9f;
  worst_seen = 0;
  for (int64_t ch = 0; ch < c.C; ch++) {
    double s = 0, sa = 0, ss = 0, sq = 0;
    for (int64_t n = 0; n < c.N; n++)
      for (int64_t hw = 0; hw < HW; hw++) {
        double v = d.x[at(&c, n, ch, hw)];
        s += v, sa += fabs(v), sq += v * v;
      }
    double mean = s / (double)M;
    for (int64_t n = 0; n < c.N; n++)
      for (int64_t hw = 0; hw < HW; hw++) {
        double v = d.x[at(&c, n, ch, hw)] - mean;
        ss += v * v;
      }
    double var = ss / (double)M, mabs = sa / (double)M, msq = sq / (double)M;
    double m = c.is_test ? d.mean[ch] : mean, vv = c.is_test ? d.var[ch] : var;
    double inv = 1 / sqrt(vv + eps), a = d.scale[ch] * inv;
    for (int64_t n = 0; n < c.N; n++)
      for (int64_t hw = 0; hw < HW; hw++) {
        int64_t k = at(&c, n, ch, hw);
        double ref = (d.x[k] - m) * a + d.bias[ch];
        double tol = u * fabs(ref) + delta * (fabs(a) * (fabs(d.x[k]) + mabs) + fabs(d.bias[ch])) +
                     sub;
        expect_close("Y", k, got_at(y, k), ref, tol);
      }
    if (c.is_test)
      continue;
    const float *rm = dm_tensor_data(opt_fetch(ws, "rm", DM_FLOAT, 1, dc));
    const float *rv = dm_tensor_data(opt_fetch(ws, "rv", DM_FLOAT, 1, dc));
    const float *sm = dm_tensor_data(opt_fetch(ws, "sm", DM_FLOAT, 1, dc));
    const float *si = dm_tensor_data(opt_fetch(ws, "si", DM_FLOAT, 1, dc));
    double ref_rm = d.mean[ch] * mom + mean * (1 - mom);
    double ref_rv = d.var[ch] * mom + var * (1 - mom); /* the biased batch variance */
    expect_close("running_mean", ch, rm[ch], ref_rm, OPT_U32 * fabs(ref_rm) + delta * mabs);
    expect_close("running_var", ch, rv[ch], ref_rv, OPT_U32 * fabs(ref_rv) + delta * msq);
    expect_close("saved_mean", ch, sm[ch], mean, OPT_U32 * fabs(mean) + delta * mabs);
    expect_close("saved_inv_std", ch, si[ch], inv,
                 OPT_U32 * inv + 2 * inv * delta * msq / (var + eps));
  }
  print_message("SpatialBN %s %s %s N=%lld C=%lld %lldx%lld: worst error %.2f of the bound\n",
                c.is_test ? "test" : "train", c.nhwc ? "NHWC" : "NCHW", opt_mode_name(c.fp16),
                (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W, worst_seen);
  free_data(&d);
}

static void test_forward_fp32(void **state) {
  dm_workspace *ws = *state;
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int t = 0; t < 2; t++) {
      check_forward(ws, (bn_case){2, 3, 4, 5, nhwc, 0, t, 1});
      check_forward(ws, (bn_case){1, 7, 3, 3, nhwc, 0, t, 2}); /* batch 1, odd channels */
      check_forward(ws, (bn_case){4, 16, 8, 8, nhwc, 0, t, 3});
    }
  check_forward(ws, (bn_case){1, 5, 1, 1, 0, 0, 0, 4}); /* one value per channel: var 0 */
}

static void test_forward_fp16(void **state) {
  dm_workspace *ws = *state;
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int t = 0; t < 2; t++) {
      check_forward(ws, (bn_case){2, 3, 4, 5, nhwc, 1, t, 11});
      check_forward(ws, (bn_case){8, 9, 7, 7, nhwc, 1, t, 12});
    }
}

static void test_forward_bf16(void **state) {
  dm_workspace *ws = *state;
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int t = 0; t < 2; t++) {
      check_forward(ws, (bn_case){2, 3, 4, 5, nhwc, 2, t, 21});
      check_forward(ws, (bn_case){8, 9, 7, 7, nhwc, 2, t, 22});
    }
}

/* Y in place on X gives what a separate Y gives. */
static void test_inplace(void **state) {
  dm_workspace *ws = *state;
  bn_case c = {2, 3, 2, 2, 0, 0, 0, 21};
  bn_data d = make_data(ws, &c, -1, 1);
  int64_t dc[] = {3};
  for (int inplace = 0; inplace < 2; inplace++) {
    opt_feed(ws, "X", DM_FLOAT, 4, d.dims, d.xf);
    opt_feed(ws, "rm", DM_FLOAT, 1, dc, d.mean);
    opt_feed(ws, "rv", DM_FLOAT, 1, dc, d.var);
    opt_op *op = opt_new("SpatialBN");
    const char *ins[] = {"X", "scale", "bias", "rm", "rv"};
    for (int i = 0; i < 5; i++)
      opt_in(op, ins[i]);
    opt_out(op, inplace ? "X" : "Y0"), opt_out(op, "rm"), opt_out(op, "rv");
    opt_out(op, "sm"), opt_out(op, "si");
    if (opt_run(op, ws) != DM_OK)
      fail_msg("%s", dm_last_error());
  }
  const dm_tensor *a = opt_fetch(ws, "Y0", DM_FLOAT, 4, d.dims), *b = opt_fetch(ws, "X", DM_FLOAT, 4, d.dims);
  assert_memory_equal(dm_tensor_data(a), dm_tensor_data(b), (size_t)d.n * sizeof(float));
  free_data(&d);
}

static const char *bn_text(int nhwc, int is_test) {
  static char buf[512];
  snprintf(buf, sizeof buf,
           "type: 'SpatialBN' input: 'X' input: 'scale' input: 'bias' input: 'rm' input: 'rv' "
           "output: 'Y' %s arg { name: 'is_test' i: %d } arg { name: 'order' s: '%s' }",
           is_test ? "" : "output: 'rm_out' output: 'rv_out' output: 'sm' output: 'si'", is_test,
           nhwc ? "NHWC" : "NCHW");
  return buf;
}

static void test_gradient(void **state) {
  (void)state;
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int t = 0; t < 2; t++) {
      int64_t N = 2, C = 3, H = 3, W = 2, n = N * C * H * W;
      float *x = malloc((size_t)n * sizeof *x), p[4][3];
      uint64_t s = 31 + (uint64_t)(2 * nhwc + t);
      for (int64_t i = 0; i < n; i++)
        x[i] = (float)opt_uniform(&s, -2, 2);
      for (int k = 0; k < 4; k++)
        for (int ch = 0; ch < 3; ch++)
          p[k][ch] = (float)opt_uniform(&s, k == 3 ? 0.5 : -1, k == 3 ? 2 : 1.5);
      gc_input in[] = {{"X", 4, {N, nhwc ? H : C, nhwc ? W : H, nhwc ? C : W}, x, 1, 0},
                       {"scale", 1, {C}, p[0], 1, 0},
                       {"bias", 1, {C}, p[1], 1, 0},
                       {"rm", 1, {C}, p[2], 0, 0},
                       {"rv", 1, {C}, p[3], 0, 0}};
      double r = gc_check(bn_text(nhwc, t), in, 5, 1, N * H * W);
      print_message("SpatialBN gradient %s %s: worst %.2f of the tolerance\n",
                    t ? "test" : "train", nhwc ? "NHWC" : "NCHW", r);
      free(x);
    }
}

/* SpatialBNGradient (train) directly against the double formula, FP32 and FP16:
 *   dbias = sum dy, dscale = sum dy xhat, dx = scale inv (dy - dbias/M - xhat dscale/M).
 * With d as above: dbias, dscale: u32 |ref| + d sum|term|; dx: u_out |ref| + d |scale inv|
 * (|dy| + (sum|dy| + |xhat| sum|dy xhat|) / M) + s_out. */
static void check_grad_op(dm_workspace *ws, int nhwc, int fp16, uint64_t seed) {
  bn_case c = {3, 5, 4, 3, nhwc, fp16, 0, seed};
  bn_data d = make_data(ws, &c, -2, 2);
  double *dy = malloc((size_t)d.n * sizeof *dy);
  float *dyf = malloc((size_t)d.n * sizeof *dyf), sm[5], si[5];
  uint16_t *dyh = malloc((size_t)d.n * 2);
  uint64_t s = seed * 7;
  for (int64_t i = 0; i < d.n; i++) {
    dyf[i] = (float)opt_uniform(&s, -1, 1);
    dyh[i] = opt_narrow(fp16, dyf[i]);
    dy[i] = fp16 ? opt_widen(fp16, dyh[i]) : dyf[i];
  }
  for (int ch = 0; ch < 5; ch++)
    sm[ch] = (float)opt_uniform(&s, -0.5, 0.5), si[ch] = (float)opt_uniform(&s, 0.5, 2);
  int64_t dc[] = {5};
  opt_feed(ws, "dY", opt_mode_dtype(fp16), 4, d.dims, fp16 ? (void *)dyh : (void *)dyf);
  opt_feed(ws, "sm", DM_FLOAT, 1, dc, sm);
  opt_feed(ws, "si", DM_FLOAT, 1, dc, si);
  opt_op *op = opt_new("SpatialBNGradient");
  opt_in(op, "X"), opt_in(op, "scale"), opt_in(op, "dY"), opt_in(op, "sm"), opt_in(op, "si");
  opt_out(op, "dX"), opt_out(op, "dscale"), opt_out(op, "dbias");
  if (nhwc)
    opt_arg_string(op, "order", "NHWC");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *dx = opt_fetch(ws, "dX", opt_mode_dtype(fp16), 4, d.dims);
  const float *dscale = dm_tensor_data(opt_fetch(ws, "dscale", DM_FLOAT, 1, dc));
  const float *dbias = dm_tensor_data(opt_fetch(ws, "dbias", DM_FLOAT, 1, dc));
  int64_t HW = c.H * c.W, M = c.N * HW;
  double delta = (double)(M + 8) * 0x1p-52, u = fp16 ? opt_mode_u(fp16) : OPT_U32;
  double sub = fp16 ? opt_mode_tiny(fp16) : 0x1p-150;
  worst_seen = 0;
  for (int64_t ch = 0; ch < 5; ch++) {
    double sdy = 0, sdyx = 0, ady = 0, adyx = 0;
    for (int64_t n = 0; n < c.N; n++)
      for (int64_t hw = 0; hw < HW; hw++) {
        int64_t k = at(&c, n, ch, hw);
        double xhat = (d.x[k] - sm[ch]) * si[ch];
        sdy += dy[k], ady += fabs(dy[k]), sdyx += dy[k] * xhat, adyx += fabs(dy[k] * xhat);
      }
    expect_close("dbias", ch, dbias[ch], sdy, OPT_U32 * fabs(sdy) + delta * ady);
    expect_close("dscale", ch, dscale[ch], sdyx, OPT_U32 * fabs(sdyx) + delta * adyx);
    double kk = d.scale[ch] * (double)si[ch];
    for (int64_t n = 0; n < c.N; n++)
      for (int64_t hw = 0; hw < HW; hw++) {
        int64_t k = at(&c, n, ch, hw);
        double xhat = (d.x[k] - sm[ch]) * si[ch];
        double ref = kk * (dy[k] - sdy / (double)M - xhat * sdyx / (double)M);
        double tol = u * fabs(ref) +
                     delta * fabs(kk) * (fabs(dy[k]) + (ady + fabs(xhat) * adyx) / (double)M) + sub;
        expect_close("dX", k, got_at(dx, k), ref, tol);
      }
  }
  print_message("SpatialBNGradient %s %s: worst error %.2f of the bound\n",
                nhwc ? "NHWC" : "NCHW", opt_mode_name(fp16), worst_seen);
  free(dy), free(dyf), free(dyh);
  free_data(&d);
}

static void test_gradient_op(void **state) {
  for (int nhwc = 0; nhwc < 2; nhwc++)
    for (int fp16 = 0; fp16 < 3; fp16++) /* the mode: FP32, FP16, BF16 */
      check_grad_op(*state, nhwc, fp16, fp16 < 2 ? 41 + (uint64_t)(2 * nhwc + fp16) : 51 + (uint64_t)nhwc);
}

static void test_schema(void **state) {
  (void)state;
  const dm_op_schema *s = dm_schema_lookup("SpatialBN");
  assert_non_null(s);
  assert_int_equal(s->precision, DM_PREC_FOLLOW);
  assert_non_null(s->gradient);
  assert_non_null(s->infer);
  assert_non_null(s->cost);
  int found = 0;
  for (const dm_inplace_pair *p = s->inplace; p && p->in >= 0; p++)
    found += (p->in == 3 && p->out == 1) + (p->in == 4 && p->out == 2);
  assert_int_equal(found, 2);
}

static void run_bn(dm_workspace *ws, const char *x, const char *scale, int nout, int is_test,
                   const char *order, dm_status want, const char *frag) {
  opt_op *op = opt_new("SpatialBN");
  opt_in(op, x), opt_in(op, scale), opt_in(op, "b"), opt_in(op, "m"), opt_in(op, "v");
  static const char *outs[] = {"Y", "m", "v", "sm", "si"};
  for (int i = 0; i < nout; i++)
    opt_out(op, outs[i]);
  opt_arg_int(op, "is_test", is_test);
  if (order)
    opt_arg_string(op, "order", order);
  opt_expect_error(opt_run(op, ws), want, frag, NULL);
}

static void test_errors(void **state) {
  dm_workspace *ws = *state;
  float z[2 * 16 * 4] = {0}, p16[16] = {0}, p8[8] = {0};
  uint16_t h16[16] = {0};
  int64_t dx[] = {2, 16, 2, 2}, d16[] = {16}, d8[] = {8};
  opt_feed(ws, "X", DM_FLOAT, 4, dx, z);
  opt_feed(ws, "s8", DM_FLOAT, 1, d8, p8);
  opt_feed(ws, "h16", DM_FLOAT16, 1, d16, h16);
  opt_feed(ws, "s16", DM_FLOAT, 1, d16, p16);
  opt_feed(ws, "b", DM_FLOAT, 1, d16, p16);
  opt_feed(ws, "m", DM_FLOAT, 1, d16, p16);
  opt_feed(ws, "v", DM_FLOAT, 1, d16, p16);
  run_bn(ws, "X", "s8", 1, 1, NULL, DM_ERR_SHAPE, "scale has 8 elements but X has 16 channels (NCHW)");
  run_bn(ws, "X", "s8", 1, 1, "NHWC", DM_ERR_SHAPE, "scale has 8 elements but X has 2 channels (NHWC)");
  run_bn(ws, "X", "h16", 1, 1, NULL, DM_ERR_TYPE, "scale is FLOAT16; expected FLOAT");
  run_bn(ws, "X", "s16", 1, 1, "NCWH", DM_ERR_INVALID, "order is 'NCWH'");
  run_bn(ws, "X", "s16", 5, 1, NULL, DM_ERR_INVALID, "is_test=1 takes 1 output");
  run_bn(ws, "X", "s16", 1, 0, NULL, DM_ERR_INVALID, "training (is_test=0) takes 5 outputs");
  int32_t iz[2 * 16 * 4] = {0};
  opt_feed(ws, "I", DM_INT32, 4, dx, iz);
  run_bn(ws, "I", "s16", 1, 1, NULL, DM_ERR_TYPE, "X is INT32");
  /* The gradient: dY must match X. */
  int64_t dy_dims[] = {2, 16, 2, 1};
  opt_feed(ws, "dY", DM_FLOAT, 4, dy_dims, z);
  opt_op *op = opt_new("SpatialBNGradient");
  opt_in(op, "X"), opt_in(op, "s16"), opt_in(op, "dY"), opt_in(op, "m"), opt_in(op, "v");
  opt_out(op, "dX"), opt_out(op, "ds"), opt_out(op, "db");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "dY is FLOAT 2x16x2x1 but X is FLOAT 2x16x2x2",
                   NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_fp32), cmocka_unit_test(test_forward_fp16),
      cmocka_unit_test(test_forward_bf16),
      cmocka_unit_test(test_inplace),      cmocka_unit_test(test_gradient),
      cmocka_unit_test(test_gradient_op),  cmocka_unit_test(test_schema),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
