/* test_loss.c: SoftmaxWithLoss (and its gradient; also token-level: [N, T, V] logits at
 * axis 2 with [N, T] labels, ignore_label, FP16 and BF16 logits), LabelCrossEntropy,
 * AveragedLoss and Accuracy against double-precision references; gradients by finite
 * differences.
 *
 * Bounds (derived): the kernel's softmax is formed in double and rounded once to FP32,
 * so p = p_ref (1 + d), |d| <= u32 + (|x - max| + D + 4) 2^-53, plus 2^-149 for an FP32
 * subnormal. The loss takes log(max(p, 1e-20)) of that FP32 p, which moves each row's
 * term by at most u32 per unit of label mass c_i (1 for an integer label, sum_j |t_ij|
 * for label_prob), so |loss - ref| <= |scale| u32 sum_i |w_i| c_i / |sum_i w_i| plus
 * the final FP32 rounding u32 |ref|. The gradient k_i (p_j s_i - t_ij) inherits
 * |k_i| s_i u32 p_j from p and one rounding of its dtype (u32, or u16 and half of FP16's
 * subnormal spacing 2^-25 for FP16 logits, BF16's u and 2^-134 for BF16). An ignored
 * row's gradient is exactly 0.
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

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

typedef struct swl_case {
  int64_t N, D;
  int fp16, weights, prob;
  int bf16;   /* BF16 logits (instead of FP16 with fp16) */
  int64_t T;  /* > 0: logits [N, T, D] at axis 2 with [N, T] labels (N * T rows) */
  int ignore; /* every third row's label is ignore_label (-100) */
  float scale;
  double lo, hi;
  uint64_t seed;
} swl_case;

static double got_at(const dm_tensor *t, int64_t k) {
  dm_dtype d = dm_tensor_dtype(t);
  const uint16_t *h = dm_tensor_data(t);
  return d == DM_FLOAT16 ? dm_half_to_float(h[k]) : d == DM_BFLOAT16 ? dm_bf16_to_float(h[k])
                                                                     : ((const float *)dm_tensor_data(t))[k];
}

/* Forward and SoftmaxWithLossGradient (d_avg_loss = 0.75) against the references. */
static void check_swl(dm_workspace *ws, swl_case c) {
  int mode = c.bf16 ? 2 : c.fp16 ? 1 : 0;
  int64_t N = c.T > 0 ? c.N * c.T : c.N, D = c.D, nd = N * D;
  float *xf = malloc((size_t)nd * sizeof *xf), *t = malloc((size_t)nd * sizeof *t);
  uint16_t *xh = malloc((size_t)nd * 2);
  double *x = malloc((size_t)nd * sizeof *x), *p = malloc((size_t)nd * sizeof *p);
  int32_t *lab = malloc((size_t)N * sizeof *lab);
  float *w = malloc((size_t)N * sizeof *w);
  uint64_t s = c.seed;
  for (int64_t k = 0; k < nd; k++) {
    xf[k] = (float)opt_uniform(&s, c.lo, c.hi);
    xh[k] = mode ? opt_narrow(mode, xf[k]) : 0;
    x[k] = mode ? opt_widen(mode, xh[k]) : xf[k];
    t[k] = (float)opt_uniform(&s, 0, 1);
  }
  for (int64_t i = 0; i < N; i++) {
    lab[i] = (int32_t)opt_uniform(&s, 0, (double)D);
    w[i] = (float)opt_uniform(&s, 0.1, 2);
  }
  for (int64_t i = 1; c.ignore && i < N; i += 3)
    lab[i] = -100;
  /* the logits [N, D], or [N, T, D] with [N, T] labels and weights */
  int64_t dx2[] = {N, D}, dn[] = {N}, dx3[] = {c.N, c.T, D}, dnt[] = {c.N, c.T};
  int xnd = c.T > 0 ? 3 : 2, lnd = c.T > 0 ? 2 : 1;
  const int64_t *xd = c.T > 0 ? dx3 : dx2, *ld = c.T > 0 ? dnt : dn;
  opt_feed(ws, "X", opt_mode_dtype(mode), xnd, xd, mode ? (void *)xh : (void *)xf);
  if (c.prob)
    opt_feed(ws, "L", DM_FLOAT, 2, dx2, t);
  else
    opt_feed(ws, "L", DM_INT32, lnd, ld, lab);
  opt_feed(ws, "W", DM_FLOAT, lnd, ld, w);
  opt_op *op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X"), opt_in(op, "L");
  if (c.weights)
    opt_in(op, "W");
  opt_out(op, "P"), opt_out(op, "loss");
  opt_arg_float(op, "scale", c.scale);
  if (c.prob)
    opt_arg_int(op, "label_prob", 1);
  if (c.T > 0)
    opt_arg_int(op, "axis", 2);
  if (c.ignore)
    opt_arg_int(op, "ignore_label", -100);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *tp = opt_fetch(ws, "P", DM_FLOAT, xnd, xd);
  const dm_tensor *tl = opt_fetch(ws, "loss", DM_FLOAT, 0, NULL);

  /* References. */
  double loss = 0, tw = 0, mass = 0, worst = 0;
  for (int64_t i = 0; i < N; i++) {
    const double *r = x + i * D;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < D; j++)
      mx = fmax(mx, r[j]);
    for (int64_t j = 0; j < D; j++)
      sum += exp(r[j] - mx);
    double li = 0, ci = 0;
    for (int64_t j = 0; j < D; j++) {
      double ref = exp(r[j] - mx) / sum;
      p[i * D + j] = ref;
      double tol = ref * (OPT_U32 + (fabs(r[j] - mx) + (double)D + 4) * 0x1p-53) + 0x1p-149;
      double got = got_at(tp, i * D + j);
      if (!(fabs(got - ref) <= tol))
        fail_msg("P[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", (long long)i,
                 (long long)j, got, ref, tol);
      worst = fmax(worst, fabs(got - ref) / tol);
      if (c.prob)
        li -= t[i * D + j] * log(fmax(ref, 1e-20)), ci += fabs(t[i * D + j]);
    }
    if (!c.prob && lab[i] == -100)
      continue; /* ignored: no loss, no weight */
    if (!c.prob)
      li = -log(fmax(p[i * D + lab[i]], 1e-20)), ci = 1;
    double wi = c.weights ? w[i] : 1;
    loss += wi * li, tw += wi, mass += fabs(wi) * ci;
  }
  double ref = tw != 0 ? c.scale * loss / tw : 0;
  double tol = (tw != 0 ? fabs(c.scale) * OPT_U32 * mass / fabs(tw) : 0) + OPT_U32 * fabs(ref) +
               0x1p-149;
  double got = got_at(tl, 0);
  if (!(fabs(got - ref) <= tol))
    fail_msg("loss = %.9g, reference %.9g, tolerance %.3g", got, ref, tol);
  worst = fmax(worst, fabs(got - ref) / tol);

  /* The gradient op, fed the kernel's own softmax. */
  float dl = 0.75f;
  opt_feed(ws, "dl", DM_FLOAT, 0, NULL, &dl);
  op = opt_new("SoftmaxWithLossGradient");
  opt_in(op, "X"), opt_in(op, "L");
  if (c.weights)
    opt_in(op, "W");
  opt_in(op, "P"), opt_in(op, "dl"), opt_out(op, "dX");
  opt_arg_float(op, "scale", c.scale);
  if (c.prob)
    opt_arg_int(op, "label_prob", 1);
  if (c.T > 0)
    opt_arg_int(op, "axis", 2);
  if (c.ignore)
    opt_arg_int(op, "ignore_label", -100);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *tdx = opt_fetch(ws, "dX", opt_mode_dtype(mode), xnd, xd);
  for (int64_t i = 0; i < N; i++) {
    if (!c.prob && lab[i] == -100) {
      for (int64_t j = 0; j < D; j++)
        if (got_at(tdx, i * D + j) != 0)
          fail_msg("dX[%lld,%lld] = %.9g in an ignored row", (long long)i, (long long)j,
                   got_at(tdx, i * D + j));
      continue;
    }
    double k = (double)c.scale * dl * (c.weights ? (double)w[i] : 1.0) / tw, si = 0;
    for (int64_t j = 0; j < D; j++)
      si += c.prob ? t[i * D + j] : (j == lab[i]);
    for (int64_t j = 0; j < D; j++) {
      double tj = c.prob ? t[i * D + j] : (j == lab[i]);
      double gref = k * (p[i * D + j] * si - tj);
      double gtol = fabs(k) * si * (OPT_U32 * p[i * D + j] + 0x1p-149) + 0x1p-50 * fabs(k);
      gtol += mode ? opt_mode_u(mode) * (fabs(gref) + gtol) + opt_mode_tiny(mode)
                   : OPT_U32 * (fabs(gref) + gtol);
      double g = got_at(tdx, i * D + j);
      if (!(fabs(g - gref) <= gtol))
        fail_msg("dX[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g", (long long)i,
                 (long long)j, g, gref, gtol);
      worst = fmax(worst, fabs(g - gref) / gtol);
    }
  }
  print_message("SoftmaxWithLoss %s N=%lld D=%lld%s%s%s%s: worst error %.2f of the bound\n",
                opt_mode_name(mode), (long long)N, (long long)D, c.weights ? " weights" : "",
                c.prob ? " label_prob" : "", c.T > 0 ? " [N, T, V] axis 2" : "",
                c.ignore ? " ignore_label" : "", worst);
  free(xf), free(t), free(xh), free(x), free(p), free(lab), free(w);
}

static void test_swl_forward(void **state) {
  dm_workspace *ws = *state;
  check_swl(ws, (swl_case){.N = 6, .D = 7, .scale = 1, .lo = -5, .hi = 5, .seed = 1});
  check_swl(ws, (swl_case){.N = 1, .D = 10, .scale = 1, .lo = -5, .hi = 5, .seed = 2});
  check_swl(ws, (swl_case){.N = 9, .D = 5, .weights = 1, .scale = 2, .lo = -3, .hi = 3,
                           .seed = 3});
  check_swl(ws, (swl_case){.N = 4, .D = 6, .prob = 1, .scale = 0.5f, .lo = -4, .hi = 4,
                           .seed = 4});
  check_swl(ws, (swl_case){.N = 4, .D = 6, .prob = 1, .weights = 1, .scale = 1, .lo = -4,
                           .hi = 4, .seed = 5});
  /* Huge logits: p underflows to 0 in most places, the floor keeps the loss finite. */
  check_swl(ws, (swl_case){.N = 8, .D = 9, .scale = 1, .lo = -1e4, .hi = 1e4, .seed = 6});
  check_swl(ws, (swl_case){.N = 64, .D = 1000, .scale = 1, .lo = -10, .hi = 10, .seed = 7});
}

static void test_swl_fp16(void **state) {
  dm_workspace *ws = *state;
  check_swl(ws, (swl_case){.N = 6, .D = 7, .fp16 = 1, .scale = 1, .lo = -5, .hi = 5, .seed = 11});
  check_swl(ws, (swl_case){.N = 5, .D = 33, .fp16 = 1, .weights = 1, .prob = 1, .scale = 1,
                           .lo = -8, .hi = 8, .seed = 12});
  check_swl(ws, (swl_case){.N = 4, .D = 5, .fp16 = 1, .scale = 1, .lo = 60000, .hi = 65504,
                           .seed = 13});
}

/* Token-level: [N, T, V] logits at axis 2 with [N, T] labels, ignored tokens, 16-bit. */
static void test_swl_tokens(void **state) {
  dm_workspace *ws = *state;
  for (int m = 0; m < 3; m++) {
    int fp16 = m == 1, bf16 = m == 2;
    check_swl(ws, (swl_case){.N = 3, .T = 5, .D = 11, .fp16 = fp16, .bf16 = bf16, .scale = 1,
                             .lo = -6, .hi = 6, .seed = 61 + (uint64_t)m});
    check_swl(ws, (swl_case){.N = 2, .T = 8, .D = 9, .fp16 = fp16, .bf16 = bf16, .ignore = 1,
                             .scale = 1, .lo = -6, .hi = 6, .seed = 64 + (uint64_t)m});
    check_swl(ws, (swl_case){.N = 4, .T = 3, .D = 6, .fp16 = fp16, .bf16 = bf16, .ignore = 1,
                             .weights = 1, .scale = 0.5f, .lo = -4, .hi = 4,
                             .seed = 67 + (uint64_t)m});
  }
  check_swl(ws, (swl_case){.N = 10, .D = 7, .ignore = 1, .scale = 1, .lo = -3, .hi = 3,
                           .seed = 70}); /* ignore_label on 2-D logits */
  check_swl(ws, (swl_case){.N = 6, .D = 7, .bf16 = 1, .scale = 1, .lo = -5, .hi = 5,
                           .seed = 71});
  /* Every token ignored: the loss is 0 and the gradient zero (not 0/0). */
  float x[2 * 3 * 4];
  uint64_t sd = 72;
  for (int i = 0; i < 24; i++)
    x[i] = (float)opt_uniform(&sd, -2, 2);
  int32_t lab[6] = {-1, -1, -1, -1, -1, -1};
  int64_t d3[] = {2, 3, 4}, d2[] = {2, 3};
  opt_feed(ws, "X", DM_FLOAT, 3, d3, x);
  opt_feed(ws, "L", DM_INT32, 2, d2, lab);
  float one = 1;
  opt_feed(ws, "dl", DM_FLOAT, 0, NULL, &one);
  opt_op *op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X"), opt_in(op, "L"), opt_out(op, "P"), opt_out(op, "loss");
  opt_arg_int(op, "axis", 2), opt_arg_int(op, "ignore_label", -1);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_true(*(const float *)dm_tensor_data(opt_fetch(ws, "loss", DM_FLOAT, 0, NULL)) == 0);
  op = opt_new("SoftmaxWithLossGradient");
  opt_in(op, "X"), opt_in(op, "L"), opt_in(op, "P"), opt_in(op, "dl"), opt_out(op, "dX");
  opt_arg_int(op, "axis", 2), opt_arg_int(op, "ignore_label", -1);
  assert_int_equal(opt_run(op, ws), DM_OK);
  const float *dx = dm_tensor_data(opt_fetch(ws, "dX", DM_FLOAT, 3, d3));
  for (int i = 0; i < 24; i++)
    assert_true(dx[i] == 0);
}

/* Random FLOAT data in [lo, hi). */
static float *randf(int64_t n, double lo, double hi, uint64_t seed) {
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++)
    v[i] = (float)opt_uniform(&seed, lo, hi);
  return v;
}

static void test_swl_gradient(void **state) {
  (void)state;
  float *x = randf(5 * 6, -3, 3, 21), *t = randf(5 * 6, 0, 1, 22), *w = randf(5, 0.2, 2, 23);
  int32_t lab[5] = {0, 5, 2, 3, 5};
  /* Both outputs seeded: the loss's gradient and, summed, the softmax output's. */
  gc_input in[] = {{"X", 2, {5, 6}, x, 1, 0}, {"L", 1, {5}, lab, 0, DM_INT32}};
  double r1 = gc_check("type: 'SoftmaxWithLoss' input: 'X' input: 'L' output: 'P' "
                       "output: 'loss' arg { name: 'scale' f: 1.5 }", in, 2, 2, 6);
  gc_input inw[] = {{"X", 2, {5, 6}, x, 1, 0}, {"L", 1, {5}, lab, 0, DM_INT32},
                    {"W", 1, {5}, w, 0, 0}};
  double r2 = gc_check("type: 'SoftmaxWithLoss' input: 'X' input: 'L' input: 'W' output: 'P' "
                       "output: 'loss'", inw, 3, 2, 6);
  gc_input inp[] = {{"X", 2, {5, 6}, x, 1, 0}, {"L", 2, {5, 6}, t, 0, 0}, {"W", 1, {5}, w, 0, 0}};
  double r3 = gc_check("type: 'SoftmaxWithLoss' input: 'X' input: 'L' input: 'W' output: 'P' "
                       "output: 'loss' arg { name: 'label_prob' i: 1 }", inp, 3, 2, 6);
  /* token-level: [2, 3, 6] logits at axis 2, [2, 3] labels, two tokens ignored */
  int32_t tl[6] = {1, -100, 4, 0, 5, -100};
  float *x3 = randf(2 * 3 * 6, -3, 3, 24);
  gc_input int3[] = {{"X", 3, {2, 3, 6}, x3, 1, 0}, {"L", 2, {2, 3}, tl, 0, DM_INT32}};
  double r4 = gc_check("type: 'SoftmaxWithLoss' input: 'X' input: 'L' output: 'P' "
                       "output: 'loss' arg { name: 'axis' i: 2 } "
                       "arg { name: 'ignore_label' i: -100 }", int3, 2, 2, 6);
  print_message("SoftmaxWithLoss gradient: worst %.2f / %.2f / %.2f / %.2f of the tolerance\n",
                r1, r2, r3, r4);
  free(x), free(t), free(w), free(x3);
}

static void test_label_cross_entropy(void **state) {
  dm_workspace *ws = *state;
  float *x = randf(4 * 5, 0.5, 1, 31); /* f''' = 2/x^3 stays small for h = 1e-2 */
  x[1 * 5 + 2] = 0; /* below the floor: -log(1e-20) */
  int32_t lab[4] = {1, 2, 4, 0};
  int64_t d[] = {4, 5}, dn[] = {4};
  opt_feed(ws, "X", DM_FLOAT, 2, d, x);
  opt_feed(ws, "L", DM_INT32, 1, dn, lab);
  opt_op *op = opt_new("LabelCrossEntropy");
  opt_in(op, "X"), opt_in(op, "L"), opt_out(op, "Y");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const float *y = dm_tensor_data(opt_fetch(ws, "Y", DM_FLOAT, 1, dn));
  for (int i = 0; i < 4; i++) {
    double ref = -log(fmax(x[i * 5 + lab[i]], 1e-20));
    assert_true(fabs(y[i] - ref) <= OPT_U32 * fabs(ref) + 0x1p-149);
  }
  /* A NaN probability (a diverged net) gives a NaN loss, not the floor's 46.0517. */
  x[2 * 5 + 4] = NAN;
  opt_feed(ws, "X", DM_FLOAT, 2, d, x);
  op = opt_new("LabelCrossEntropy");
  opt_in(op, "X"), opt_in(op, "L"), opt_out(op, "Y");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  y = dm_tensor_data(opt_fetch(ws, "Y", DM_FLOAT, 1, dn));
  assert_true(isnan(y[2]) && isfinite(y[0]));
  x[2 * 5 + 4] = 0.75f;
  x[1 * 5 + 2] = 0.5f; /* the gradient check wants the smooth part */
  gc_input in[] = {{"X", 2, {4, 5}, x, 1, 0}, {"L", 1, {4}, lab, 0, DM_INT32}};
  double r = gc_check("type: 'LabelCrossEntropy' input: 'X' input: 'L' output: 'Y'", in, 2, 1, 1);
  print_message("LabelCrossEntropy gradient: worst %.2f of the tolerance\n", r);
  free(x);
}

static void test_averaged_loss(void **state) {
  dm_workspace *ws = *state;
  float *x = randf(3 * 7 * 5, -2, 2, 41);
  int64_t d[] = {3, 7, 5};
  opt_feed(ws, "X", DM_FLOAT, 3, d, x);
  opt_op *op = opt_new("AveragedLoss");
  opt_in(op, "X"), opt_out(op, "Y");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  double ref = 0, l1 = 0;
  for (int i = 0; i < 105; i++)
    ref += x[i], l1 += fabs(x[i]);
  ref /= 105, l1 /= 105;
  /* Summed in double (error ~ n 2^-53 of the l1 mean), then one FP32 rounding. */
  double got = *(const float *)dm_tensor_data(opt_fetch(ws, "Y", DM_FLOAT, 0, NULL));
  assert_true(fabs(got - ref) <= OPT_U32 * fabs(ref) + 107 * 0x1p-53 * l1 + 0x1p-149);
  gc_input in[] = {{"X", 3, {3, 7, 5}, x, 1, 0}};
  double r = gc_check("type: 'AveragedLoss' input: 'X' output: 'Y'", in, 1, 1, 105);
  print_message("AveragedLoss gradient: worst %.2f of the tolerance\n", r);
  free(x);
}

/* Accuracy: a row is correct when fewer than top_k entries exceed the label's; with
 * `ignore` (non-NULL: ignore_label), rows labelled *ignore are not counted. */
static void check_accuracy_ignoring(dm_workspace *ws, const float *x, const int32_t *lab,
                                    int64_t N, int64_t D, int top_k, const int32_t *ignore) {
  int64_t d[] = {N, D}, dn[] = {N};
  opt_feed(ws, "X", DM_FLOAT, 2, d, x);
  opt_feed(ws, "L", DM_INT32, 1, dn, lab);
  opt_op *op = opt_new("Accuracy");
  opt_in(op, "X"), opt_in(op, "L"), opt_out(op, "A");
  if (top_k != 1)
    opt_arg_int(op, "top_k", top_k);
  if (ignore)
    opt_arg_int(op, "ignore_label", *ignore);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  int correct = 0, counted = 0;
  for (int64_t i = 0; i < N; i++) {
    if (ignore && lab[i] == *ignore)
      continue;
    counted++;
    int greater = 0, nan = 0;
    for (int64_t j = 0; j < D; j++) {
      greater += x[i * D + j] > x[i * D + lab[i]];
      nan |= isnan(x[i * D + j]);
    }
    correct += !nan && greater < top_k; /* a row with a NaN is wrong (issue 12) */
  }
  float got = *(const float *)dm_tensor_data(opt_fetch(ws, "A", DM_FLOAT, 0, NULL));
  assert_true(got == (counted ? (float)((double)correct / (double)counted) : 0.0f));
}

static void check_accuracy(dm_workspace *ws, const float *x, const int32_t *lab, int64_t N,
                           int64_t D, int top_k) {
  check_accuracy_ignoring(ws, x, lab, N, D, top_k, NULL);
}

static void test_accuracy(void **state) {
  dm_workspace *ws = *state;
  /* Row 0: label is the max; row 1: second; row 2: tied with the max (counts as correct);
   * row 3: third. */
  float x[] = {0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f, 0.4f, 0.4f, 0.2f, 0.1f, 0.3f, 0.6f};
  int32_t lab[] = {1, 2, 0, 0};
  check_accuracy(ws, x, lab, 4, 3, 1);
  check_accuracy(ws, x, lab, 4, 3, 2);
  check_accuracy(ws, x, lab, 4, 3, 3);
  float *r = randf(50 * 11, 0, 1, 51);
  int32_t rl[50];
  uint64_t s = 52;
  for (int i = 0; i < 50; i++)
    rl[i] = (int32_t)opt_uniform(&s, 0, 11);
  for (int k = 1; k <= 5; k++)
    check_accuracy(ws, r, rl, 50, 11, k);
  /* NaN predictions are wrong: at the label (row 0, where nothing compares greater), in
   * another column (row 1, the label otherwise the max), the whole row (row 2); row 3 is
   * clean and correct. A diverged net's all-NaN output scored 1.000 before. */
  float xn[] = {0.1f, NAN, 0.2f, NAN, 0.9f, 0.0f, NAN, NAN, NAN, 0.1f, 0.8f, 0.1f};
  int32_t ln[] = {1, 1, 2, 1};
  for (int k = 1; k <= 3; k++)
    check_accuracy(ws, xn, ln, 4, 3, k);
  assert_true(*(const float *)dm_tensor_data(opt_fetch(ws, "A", DM_FLOAT, 0, NULL)) == 0.25f);
  const float *a = dm_tensor_data(opt_fetch(ws, "A", DM_FLOAT, 0, NULL));
  (void)a;
  /* ignore_label (a masked LM's accuracy): the rows labelled -1 are not counted; with
   * every row ignored the accuracy is 0, not 0/0. Out of the label range is still an
   * error for any other label. */
  int32_t mlm[50], minus1 = -1, seven = 7;
  for (int i = 0; i < 50; i++)
    mlm[i] = i % 3 ? -1 : rl[i];
  for (int k = 1; k <= 3; k++)
    check_accuracy_ignoring(ws, r, mlm, 50, 11, k, &minus1);
  int32_t all_ignored[4] = {-1, -1, -1, -1};
  check_accuracy_ignoring(ws, x, all_ignored, 4, 3, 1, &minus1);
  check_accuracy_ignoring(ws, x, lab, 4, 3, 1, &seven); /* an ignore_label no row has */
  int64_t d43[] = {4, 3}, d4[] = {4};
  int32_t stray[4] = {-1, 0, -2, 1};
  opt_feed(ws, "X", DM_FLOAT, 2, d43, x);
  opt_feed(ws, "L", DM_INT32, 1, d4, stray);
  opt_op *op = opt_new("Accuracy");
  opt_in(op, "X"), opt_in(op, "L"), opt_out(op, "A");
  opt_arg_int(op, "ignore_label", -1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "label -2 in row 2 is out of range",
                   "and is not ignore_label", NULL);
  op = opt_new("Accuracy");
  opt_in(op, "X"), opt_in(op, "L"), opt_out(op, "A");
  opt_arg_int(op, "ignore_label", 1LL << 40);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "is not an INT32 label", NULL);
  free(r);
  /* The schema: no gradient, and asking for one is an error rather than "none". */
  const dm_op_schema *sc = dm_schema_lookup("Accuracy");
  assert_non_null(sc);
  assert_null(sc->gradient);
  assert_int_equal(sc->no_gradient, 0);
}

static void test_schemas(void **state) {
  (void)state;
  static const char *const fp32[] = {"Softmax", "SoftmaxGradient", "SoftmaxWithLoss",
                                     "SoftmaxWithLossGradient", "LabelCrossEntropy",
                                     "AveragedLoss", "Accuracy"};
  for (size_t i = 0; i < sizeof fp32 / sizeof fp32[0]; i++) {
    const dm_op_schema *sc = dm_schema_lookup(fp32[i]);
    assert_non_null(sc);
    assert_int_equal(sc->precision, DM_PREC_FP32);
    assert_non_null(sc->infer);
    assert_non_null(sc->cost);
  }
  assert_non_null(dm_schema_lookup("SoftmaxWithLoss")->gradient);
  assert_non_null(dm_schema_lookup("LabelCrossEntropy")->gradient);
  assert_non_null(dm_schema_lookup("AveragedLoss")->gradient);
}

static void test_loss_errors(void **state) {
  dm_workspace *ws = *state;
  float x[12] = {0};
  int32_t bad[] = {0, 1, 7, 2};
  int64_t d[] = {4, 3}, dn[] = {4}, d3[] = {3};
  opt_feed(ws, "X", DM_FLOAT, 2, d, x);
  opt_feed(ws, "bad", DM_INT32, 1, dn, bad);
  static const char *const types[] = {"SoftmaxWithLoss", "LabelCrossEntropy", "Accuracy"};
  for (int k = 0; k < 3; k++) {
    opt_op *op = opt_new(types[k]);
    opt_in(op, "X"), opt_in(op, "bad"), opt_out(op, "Y");
    if (k == 0)
      opt_out(op, "loss");
    opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "label 7 in row 2", "[0, 3)", NULL);
  }
  int32_t neg[] = {0, -1, 0, 0};
  opt_feed(ws, "neg", DM_INT32, 1, dn, neg);
  opt_op *op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X"), opt_in(op, "neg"), opt_out(op, "P"), opt_out(op, "loss");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "label -1 in row 1", NULL);
  /* Wrong label dtype, count; weights count; label_prob with integer labels. */
  float fl[4] = {0};
  opt_feed(ws, "fl", DM_FLOAT, 1, dn, fl);
  op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X"), opt_in(op, "fl"), opt_out(op, "P"), opt_out(op, "loss");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "labels are FLOAT", "INT32", NULL);
  int32_t three[] = {0, 0, 0};
  opt_feed(ws, "three", DM_INT32, 1, d3, three);
  op = opt_new("LabelCrossEntropy");
  opt_in(op, "X"), opt_in(op, "three"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "labels are 3 but X has 4 rows", NULL);
  opt_feed(ws, "w3", DM_FLOAT, 1, d3, fl);
  op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X"), opt_in(op, "bad"), opt_in(op, "w3"), opt_out(op, "P"), opt_out(op, "loss");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "weights have 3 elements", "4 rows", NULL);
  op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X"), opt_in(op, "bad"), opt_out(op, "P"), opt_out(op, "loss");
  opt_arg_int(op, "label_prob", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "label_prob=1 takes FLOAT", NULL);
  op = opt_new("Accuracy");
  opt_in(op, "X"), opt_in(op, "neg"), opt_out(op, "A");
  opt_arg_int(op, "top_k", 0);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "top_k is 0", NULL);
  /* token-level: labels neither (rows) nor the logits' leading dims; ignore_label with
   * label_prob; a label out of range that is not ignore_label */
  float x3[2 * 3 * 4] = {0};
  int64_t d3x[] = {2, 3, 4}, d32[] = {3, 2}, d23[] = {2, 3};
  int32_t l6[6] = {0, 1, 2, 3, 0, -7};
  opt_feed(ws, "X3", DM_FLOAT, 3, d3x, x3);
  opt_feed(ws, "L32", DM_INT32, 2, d32, l6);
  op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X3"), opt_in(op, "L32"), opt_out(op, "P"), opt_out(op, "loss");
  opt_arg_int(op, "axis", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "labels are 3x2", "6 rows",
                   "or 2x3 (the logits' dims before axis 2)", "'L32'", NULL);
  opt_feed(ws, "L23", DM_INT32, 2, d23, l6);
  op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X3"), opt_in(op, "L23"), opt_out(op, "P"), opt_out(op, "loss");
  opt_arg_int(op, "axis", 2), opt_arg_int(op, "ignore_label", -100);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "label -7 in row 5", "not ignore_label",
                   NULL);
  op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X"), opt_in(op, "fl"), opt_out(op, "P"), opt_out(op, "loss");
  opt_arg_int(op, "label_prob", 1), opt_arg_int(op, "ignore_label", 0);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "ignore_label needs integer labels", NULL);
  op = opt_new("SoftmaxWithLoss");
  opt_in(op, "X3"), opt_in(op, "L23"), opt_out(op, "P"), opt_out(op, "loss");
  opt_arg_int(op, "axis", 2), opt_arg_int(op, "ignore_label", (int64_t)1 << 40);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "ignore_label 1099511627776 is not an INT32",
                   NULL);
  double dd[12] = {0};
  opt_feed(ws, "D", DM_DOUBLE, 2, d, dd);
  op = opt_new("AveragedLoss");
  opt_in(op, "D"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "X is DOUBLE", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_swl_forward),
      cmocka_unit_test(test_swl_fp16),
      cmocka_unit_test(test_swl_tokens),
      cmocka_unit_test(test_swl_gradient),
      cmocka_unit_test(test_label_cross_entropy),
      cmocka_unit_test(test_averaged_loss),
      cmocka_unit_test(test_accuracy),
      cmocka_unit_test(test_schemas),
      cmocka_unit_test(test_loss_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
