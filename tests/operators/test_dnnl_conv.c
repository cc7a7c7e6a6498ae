/* test_dnnl_conv.c: the oneDNN engine's Conv, ConvFusion and ConvGradient against the
 * reference kernels (engine "REFERENCE") on the same inputs, FP32 and BF16, over a
 * table of shapes (odd sizes, groups, dilations, strides, every pad spelling); chains of
 * engine ops that keep blocked layouts between them, run twice and with a new batch
 * size, against the same net on the reference engine; errors; forms the engine refuses.
 *
 * Tolerances follow from the arithmetic: both engines sum in FP32, in different orders,
 * so an output that sums L terms of magnitude sum S differs by at most 2 L u32 S
 * (u32 = 2^-24) plus one rounding each for the bias and S; inputs lie in [-1, 1], so S
 * is at most L (+1 per added term). BF16 outputs are rounded once from those FP32
 * values on each side: + u_bf16 (|a| + |b|) (u_bf16 = 2^-8).
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
#include "conv_case.h"
#include "op_test_util.h"
#include "operators/dnnl/dnnl_common.h"


static const conv_case cases[] = {
    {"basic 3x3", 2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"odd sizes, asymmetric pads", 1, 5, 9, 8, 7, 3, 2, 2, 1, 1, 1, {1, 0, 2, 1}, 1, 1},
    {"pads bigger than stride", 2, 2, 6, 5, 3, 3, 3, 1, 1, 1, 1, {2, 2, 2, 2}, 1, 0},
    {"depthwise", 2, 16, 7, 7, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 16, 1},
    {"depthwise x2, stride 2", 1, 3, 6, 5, 6, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 3, 1},
    {"group 2, stride 2", 3, 4, 6, 6, 6, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 2, 1},
    {"group 4, 32 channels", 2, 32, 5, 5, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 4, 0},
    {"stride > kernel", 1, 3, 10, 11, 2, 2, 2, 3, 3, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"dilation 2", 2, 3, 9, 9, 4, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 1, 1},
    {"dilation 2x1, 2x3 kernel", 1, 2, 8, 8, 3, 2, 3, 1, 2, 2, 1, {0, 1, 1, 0}, 1, 0},
    {"1x1 blocked", 2, 32, 6, 7, 48, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 stride 2", 2, 17, 5, 5, 20, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"3x3 blocked, odd C", 2, 19, 9, 9, 33, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"7x7 stride 2, 3 channels", 1, 3, 23, 21, 16, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, 1, 0},
    {"kernel = padded input", 2, 2, 3, 3, 2, 5, 5, 1, 1, 1, 1, {1, 1, 1, 1}, 1, 1},
    /* Conv and ConvGradient in FP32 take oneDNN's Winograd kernels for this one (3x3,
     * stride 1, output of at least 28x28), ConvFusion for the three below */
    {"3x3 Winograd, 28x29 output", 2, 8, 28, 29, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, 1},
    /* ConvFusion in FP32 takes oneDNN's Winograd kernel for these (3x3, stride 1, output
     * of at least 14x14): its transforms reorder the sums, within the same bound */
    {"3x3 Winograd, 16x15 output", 2, 16, 16, 15, 24, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"3x3 Winograd, odd C, no pad", 1, 7, 17, 16, 5, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0},
};

static double worst[2][3]; /* error / bound: [FP32, BF16][forward, fusion, gradient] */

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - (d * (k - 1) + 1)) / s + 1;
}

/* X's, W's and Y's dims for case c. */
static void case_dims(const conv_case *c, int64_t xd[4], int64_t wd[4], int64_t yd[4]) {
  const int64_t x[4] = {c->N, c->C, c->H, c->W}, w[4] = {c->M, c->C / c->group, c->kh, c->kw};
  const int64_t y[4] = {c->N, c->M, out_size(c->H, c->kh, c->sh, c->dh, c->pads[0], c->pads[2]),
                        out_size(c->W, c->kw, c->sw, c->dw, c->pads[1], c->pads[3])};
  memcpy(xd, x, sizeof x);
  memcpy(wd, w, sizeof w);
  memcpy(yd, y, sizeof y);
}

/* Feeds n uniform values in [-1, 1) of dtype t (BF16: rounded, as both engines see). */
static void feed_rand(dm_workspace *ws, const char *name, dm_dtype t, int ndim,
                      const int64_t *dims, uint64_t *seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  void *buf = malloc((size_t)(n ? n : 1) * 4);
  for (int64_t i = 0; i < n; i++) {
    float f = (float)opt_uniform(seed, -1, 1);
    if (t == DM_BFLOAT16)
      ((uint16_t *)buf)[i] = dm_float_to_bf16(f);
    else
      ((float *)buf)[i] = f;
  }
  opt_feed(ws, name, t, ndim, dims, buf);
  free(buf);
}

/* A blob's values as doubles (plain NCHW, whatever its layout inside). */
static double *values(dm_workspace *ws, const char *name, int64_t *n) {
  const dm_tensor *t = NULL;
  if (dm_workspace_fetch(ws, name, &t) != DM_OK)
    fail_msg("fetching %s: %s", name, dm_last_error());
  *n = dm_tensor_numel(t);
  double *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
  const void *d = dm_tensor_data(t);
  for (int64_t i = 0; i < *n; i++)
    v[i] = dm_tensor_dtype(t) == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)d)[i])
                                             : ((const float *)d)[i];
  return v;
}

/* Compares blobs a and b elementwise: |a - b| <= 2 L u32 S + (BF16) u_bf16 (|a| + |b|).
 * Returns the worst error / bound. */
static double compare(dm_workspace *ws, const char *a, const char *b, int bf16, double L,
                      double S, const char *what) {
  int64_t na, nb;
  double *va = values(ws, a, &na), *vb = values(ws, b, &nb);
  assert_int_equal(na, nb);
  double ratio = 0;
  for (int64_t i = 0; i < na; i++) {
    double bound = 2 * (L + 2) * OPT_U32 * S + 0x1p-130;
    if (bf16)
      bound += OPT_UBF16 * (fabs(va[i]) + fabs(vb[i]));
    double r = fabs(va[i] - vb[i]) / bound;
    if (!(r <= 1.0))
      fail_msg("%s: %s[%lld] = %.9g, %s = %.9g (bound %.3g)", what, a, (long long)i, va[i], b,
               vb[i], bound);
    if (r > ratio)
      ratio = r;
  }
  free(va);
  free(vb);
  return ratio;
}


static int is_plain(dm_workspace *ws, const char *name) {
  const dm_tensor *t = dm_workspace_tensor(ws, name);
  assert_non_null(t);
  return dm_tensor_is_plain(t);
}

/* Runs `type` on engine `engine` with inputs in[n_in] -> outputs out[n_out], case c's
 * arguments, and fusion_type (ConvFusion) or no_bias (ConvGradient) when >= 0. */
static dm_status run(dm_workspace *ws, const char *type, const char *engine, const conv_case *c,
                     int form, int n_in, const char *const *in, int n_out,
                     const char *const *out, const char *extra, int64_t extra_v) {
  opt_op *op = opt_new(type);
  opt_engine(op, engine);
  for (int i = 0; i < n_in; i++)
    opt_in(op, in[i]);
  for (int i = 0; i < n_out; i++)
    opt_out(op, out[i]);
  conv_case_args(op, c, 0, form);
  if (extra)
    opt_arg_int(op, extra, extra_v);
  return opt_run(op, ws);
}

#define RUN_OK(call)                                                                        \
  do {                                                                                      \
    dm_status st_ = (call);                                                                 \
    if (st_ != DM_OK)                                                                       \
      fail_msg("%s: %s", c->name, dm_last_error());                                         \
  } while (0)

static void test_conv_forward(void **state) {
  (void)state;
  uint64_t seed = 0x5eed;
  for (int mode = 0; mode < 2; mode++) {
    dm_dtype dt = mode ? DM_BFLOAT16 : DM_FLOAT;
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
      const conv_case *c = &cases[ci];
      dm_workspace *ws;
      assert_int_equal(dm_workspace_create(&ws), DM_OK);
      int64_t xd[4], wd[4], yd[4];
      case_dims(c, xd, wd, yd);
      feed_rand(ws, "X", dt, 4, xd, &seed);
      feed_rand(ws, "W", dt, 4, wd, &seed);
      /* BF16: b alternates between BF16 and FLOAT, both of which the reference takes */
      feed_rand(ws, "b", mode && ci % 2 ? DM_FLOAT : dt, 1, &c->M, &seed);
      feed_rand(ws, "S", dt, 4, yd, &seed);
      double K = (double)(wd[1] * c->kh * c->kw);
      const char *in[] = {"X", "W", "b"};
      int n = c->bias ? 3 : 2;
      /* Conv, twice on DNNL (the second run finds W in the primitive's layout) */
      RUN_OK(run(ws, "Conv", "DNNL", c, (int)ci, n, in, 1, (const char *[]){"Yd"}, NULL, 0));
      RUN_OK(run(ws, "Conv", "DNNL", c, (int)ci, n, in, 1, (const char *[]){"Yd"}, NULL, 0));
      if (c->M >= 16 && dm_dnnl_can(DM_DNNL_CONV, dt)) /* the engine ran, writing blocked */
        assert_false(is_plain(ws, "Yd"));
      RUN_OK(run(ws, "Conv", "REFERENCE", c, (int)ci, n, in, 1, (const char *[]){"Yr"}, NULL, 0));
      double r = compare(ws, "Yd", "Yr", mode, K + 1, K + 1, c->name);
      worst[mode][0] = fmax(worst[mode][0], r);
      /* ConvFusion, every type; sums onto a copy of S in place (Y over S) and apart */
      for (int ft = 1; ft <= 3; ft++) {
        const char *fin[] = {"X", "W", c->bias ? "b" : "S", "S"};
        int fn = (c->bias ? 3 : 2) + (ft > 1);
        RUN_OK(run(ws, "ConvFusion", "DNNL", c, (int)ci + ft, fn, fin, 1,
                   (const char *[]){"Fd"}, "fusion_type", ft));
        RUN_OK(run(ws, "ConvFusion", "REFERENCE", c, (int)ci + ft, fn, fin, 1,
                   (const char *[]){"Fr"}, "fusion_type", ft));
        r = compare(ws, "Fd", "Fr", mode, K + 2, K + 2, c->name);
        worst[mode][1] = fmax(worst[mode][1], r);
        if (ft == 1)
          continue;
        /* in place: S2 <- relu?(conv + S2), S2 a blocked engine output (Yd) or plain (S) */
        const char *src = ft == 2 ? "Yb" : "S";
        if (ft == 2) /* a fresh engine output (Yd was made plain by its fetch) */
          RUN_OK(run(ws, "Conv", "DNNL", c, (int)ci, n, in, 1, (const char *[]){"Yb"}, NULL, 0));
        const char *cin_d[] = {"X", "W", "b", "Sd"}, *cin_r[] = {"X", "W", "b", "Sr"};
        if (!c->bias)
          cin_d[2] = "Sd", cin_r[2] = "Sr";
        opt_op *cp = opt_new("Relu"); /* an engine op first: keeps Yd's layout in Sd */
        opt_engine(cp, ft == 2 ? "DNNL" : "REFERENCE");
        opt_in(cp, src);
        opt_out(cp, "Sd");
        RUN_OK(opt_run(cp, ws));
        cp = opt_new("Relu");
        opt_engine(cp, "REFERENCE");
        opt_in(cp, src);
        opt_out(cp, "Sr");
        RUN_OK(opt_run(cp, ws));
        if (ft == 2 && c->M >= 16 && dm_dnnl_can(DM_DNNL_CONV, dt))
          assert_false(is_plain(ws, "Sd"));
        RUN_OK(run(ws, "ConvFusion", "DNNL", c, (int)ci, fn, cin_d, 1, (const char *[]){"Sd"},
                   "fusion_type", ft));
        RUN_OK(run(ws, "ConvFusion", "REFERENCE", c, (int)ci, fn, cin_r, 1,
                   (const char *[]){"Sr"}, "fusion_type", ft));
        r = compare(ws, "Sd", "Sr", mode, K + 2, K + 2, c->name);
        worst[mode][1] = fmax(worst[mode][1], r);
      }
      dm_workspace_destroy(ws);
    }
  }
  printf("forward: worst error / bound FP32 %.3f BF16 %.3f; fusion FP32 %.3f BF16 %.3f\n",
         worst[0][0], worst[1][0], worst[0][1], worst[1][1]);
}

/* ConvFusion keeps the weights it transformed (for Winograd, or a grouped W no 4-D view
 * of its blob describes: 8 channels per group) while W is unchanged: a new W fed between
 * runs of its net, and a W another net's op rewrote in place, are transformed again (each
 * run checked against the reference on the W it sees). The cases are the first Winograd
 * one of the table and its group-4 one; the net is made once, so its op state lives
 * across runs. */
static const char halve_net[] =
    "name: 'halve' op { type: 'Scale' input: 'W' output: 'W' arg { name: 'scale' f: 0.5 } }";

static void weights_follow_w(const conv_case *c) {
  char wino_net[512];
  snprintf(wino_net, sizeof wino_net,
           "name: 'wino' op { type: 'ConvFusion' engine: 'DNNL' input: 'X' input: 'W'\n"
           "  input: 'b' output: 'Fd' arg { name: 'kernel' i: 3 } arg { name: 'pad' i: 1 }\n"
           "  arg { name: 'group' i: %d } arg { name: 'fusion_type' i: 1 } }", (int)c->group);
  uint64_t seed = 0x3a7;
  dm_workspace *ws;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  dm_net *conv, *halve;
  if (dm_workspace_create_net_bytes(ws, wino_net, strlen(wino_net), 1, &conv) != DM_OK ||
      dm_workspace_create_net_bytes(ws, halve_net, strlen(halve_net), 1, &halve) != DM_OK)
    fail_msg("%s", dm_last_error());
  int64_t xd[4], wd[4], yd[4];
  case_dims(c, xd, wd, yd);
  double K = (double)(wd[1] * c->kh * c->kw);
  feed_rand(ws, "X", DM_FLOAT, 4, xd, &seed);
  feed_rand(ws, "b", DM_FLOAT, 1, &c->M, &seed);
  const char *in[] = {"X", "W", "b"};
  for (int round = 0; round < 5; round++) {
    if (round < 2) /* rounds 0, 1: W fed anew */
      feed_rand(ws, "W", DM_FLOAT, 4, wd, &seed);
    else if (round < 4 && dm_net_run(halve) != DM_OK) /* rounds 2, 3: W halved in place */
      fail_msg("%s", dm_last_error());
    /* round 4: W as it was: the kept transform */
    if (dm_net_run(conv) != DM_OK)
      fail_msg("%s", dm_last_error());
    RUN_OK(run(ws, "ConvFusion", "REFERENCE", c, 0, 3, in, 1, (const char *[]){"Fr"},
               "fusion_type", 1));
    compare(ws, "Fd", "Fr", 0, K + 2, K + 2, c->name);
  }
  dm_workspace_destroy(ws);
}

static void test_winograd_weights_follow_w(void **state) {
  (void)state;
  weights_follow_w(&cases[sizeof cases / sizeof *cases - 2]); /* 3x3, pad 1, bias */
  const conv_case *g = &cases[6]; /* group 4, 32 channels, 3x3, pad 1 */
  assert_int_equal(g->group, 4);
  conv_case gb = *g;
  gb.bias = 1;
  weights_follow_w(&gb);
}

static void test_conv_gradient(void **state) {
  (void)state;
  uint64_t seed = 0x9ad;
  for (int mode = 0; mode < 2; mode++) {
    dm_dtype dt = mode ? DM_BFLOAT16 : DM_FLOAT;
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
      const conv_case *c = &cases[ci];
      dm_workspace *ws;
      assert_int_equal(dm_workspace_create(&ws), DM_OK);
      int64_t xd[4], wd[4], yd[4];
      case_dims(c, xd, wd, yd);
      const int64_t oh = yd[2], ow = yd[3];
      feed_rand(ws, "X", dt, 4, xd, &seed);
      feed_rand(ws, "W", dt, 4, wd, &seed);
      feed_rand(ws, "dY", dt, 4, yd, &seed);
      const char *in[] = {"X", "W", "dY"};
      double L = (double)(c->N * oh * ow), Kx = (double)(c->M / c->group * c->kh * c->kw);
      /* with a bias: dW, db, [dX]; without (no_bias): dW, [dX] */
      for (int with_dx = 0; with_dx < 2; with_dx++) {
        int nb = !c->bias;
        const char *od[3] = {"dWd", nb ? "dXd" : "dbd", "dXd"};
        const char *orf[3] = {"dWr", nb ? "dXr" : "dbr", "dXr"};
        int n_out = 1 + !nb + with_dx;
        RUN_OK(run(ws, "ConvGradient", "DNNL", c, (int)ci, 3, in, n_out, od, "no_bias", nb));
        RUN_OK(run(ws, "ConvGradient", "REFERENCE", c, (int)ci, 3, in, n_out, orf, "no_bias",
                   nb));
        if (with_dx && c->M >= 16 && c->C >= 16 && dm_dnnl_can(DM_DNNL_CONV_BWD_DATA, dt))
          assert_false(is_plain(ws, "dXd"));
        double r = compare(ws, "dWd", "dWr", mode, L, L, c->name);
        if (!nb)
          r = fmax(r, compare(ws, "dbd", "dbr", mode, L, L, c->name));
        if (with_dx)
          r = fmax(r, compare(ws, "dXd", "dXr", mode, Kx, Kx, c->name));
        worst[mode][2] = fmax(worst[mode][2], r);
      }
      dm_workspace_destroy(ws);
    }
  }
  printf("gradient: worst error / bound FP32 %.3f BF16 %.3f\n", worst[0][2], worst[1][2]);
}

/* Conv -> Relu -> Conv 1x1 -> ConvFusion (sum onto the Relu's output, in place, + relu)
 * -> MaxPool (a reference kernel: reads plain) -> grouped strided Conv, on the default
 * engine and on REFERENCE; intermediates stay blocked between the engine's ops and read
 * as plain NCHW when fetched. */
static const char chain_net[] =
    "name: 'chain'\n"
    "op { type: 'Conv' input: 'X' input: 'W1' input: 'b1' output: 'Y1'\n"
    "     arg { name: 'kernel' i: 3 } arg { name: 'pad' i: 1 } }\n"
    "op { type: 'Relu' input: 'Y1' output: 'R1' }\n"
    "op { type: 'Conv' input: 'R1' input: 'W2' output: 'Y2' arg { name: 'kernel' i: 1 } }\n"
    "op { type: 'ConvFusion' input: 'Y2' input: 'W3' input: 'b3' input: 'R1' output: 'R1'\n"
    "     arg { name: 'kernel' i: 3 } arg { name: 'pad' i: 1 } arg { name: 'fusion_type' i: 3 } }\n"
    "op { type: 'MaxPool' input: 'R1' output: 'P' arg { name: 'kernel' i: 2 }\n"
    "     arg { name: 'stride' i: 2 } }\n"
    "op { type: 'Conv' input: 'P' input: 'W4' output: 'Z' arg { name: 'kernel' i: 3 }\n"
    "     arg { name: 'stride' i: 2 } arg { name: 'pad' i: 1 } arg { name: 'group' i: 2 } }\n";

static void chain_feed(dm_workspace *ws, int64_t N, uint64_t seed) {
  int64_t x[4] = {N, 16, 11, 10}, w1[4] = {32, 16, 3, 3}, w2[4] = {24, 32, 1, 1},
          w3[4] = {32, 24, 3, 3}, w4[4] = {16, 16, 3, 3}, m32 = 32;
  feed_rand(ws, "X", DM_FLOAT, 4, x, &seed);
  if (N != 2)
    return; /* a new batch: the weights stay as they are */
  feed_rand(ws, "W1", DM_FLOAT, 4, w1, &seed);
  feed_rand(ws, "b1", DM_FLOAT, 1, &m32, &seed);
  feed_rand(ws, "W2", DM_FLOAT, 4, w2, &seed);
  feed_rand(ws, "W3", DM_FLOAT, 4, w3, &seed);
  feed_rand(ws, "b3", DM_FLOAT, 1, &m32, &seed);
  feed_rand(ws, "W4", DM_FLOAT, 4, w4, &seed);
}

static void test_chain(void **state) {
  (void)state;
  dm_workspace *wd, *wr;
  assert_int_equal(dm_workspace_create(&wd), DM_OK);
  assert_int_equal(dm_workspace_create(&wr), DM_OK);
  assert_int_equal(dm_workspace_set_engine(wr, "REFERENCE"), DM_OK);
  dm_net *nd, *nr;
  if (dm_workspace_create_net_bytes(wd, chain_net, strlen(chain_net), 1, &nd) != DM_OK ||
      dm_workspace_create_net_bytes(wr, chain_net, strlen(chain_net), 1, &nr) != DM_OK)
    fail_msg("%s", dm_last_error());
  static const int64_t batches[] = {2, 2, 3};
  for (int run_i = 0; run_i < 3; run_i++) {
    chain_feed(wd, batches[run_i], 77 + (uint64_t)run_i);
    chain_feed(wr, batches[run_i], 77 + (uint64_t)run_i);
    if (dm_net_run(nd) != DM_OK || dm_net_run(nr) != DM_OK)
      fail_msg("%s", dm_last_error());
    /* blocked where the engine wrote and read them */
    assert_false(is_plain(wd, "Y1"));
    assert_false(is_plain(wd, "Y2"));
    assert_true(is_plain(wr, "Y1"));
    /* Each layer sums at most 32*9 + 24*9 products of values below a few units: a
     * relative FP32 bound per layer of 2 * 600 u32, over 4 layers, on outputs of
     * magnitude up to ~100 (checked by the reference's values). */
    static const char *blobs[] = {"Z", "Y1", "Y2", "P"};
    for (int b = 0; b < 4; b++) {
      int64_t n1, n2;
      double *a = values(wd, blobs[b], &n1), *r = values(wr, blobs[b], &n2);
      assert_int_equal(n1, n2);
      double big = 0, err = 0;
      for (int64_t i = 0; i < n1; i++) {
        big = fmax(big, fabs(r[i]));
        err = fmax(err, fabs(a[i] - r[i]));
      }
      double bound = 4 * 2 * 600 * OPT_U32 * (big + 1) * 16;
      if (!(err <= bound))
        fail_msg("chain run %d: %s differs by %g (bound %g)", run_i, blobs[b], err, bound);
      free(a);
      free(r);
    }
    /* fetched, a blocked blob reads as NCHW: the shape the op declares */
    const dm_tensor *y1 = opt_fetch(wd, "Y1", DM_FLOAT, 4,
                                    (const int64_t[]){batches[run_i], 32, 11, 10});
    (void)y1;
  }
  dm_workspace_destroy(wd);
  dm_workspace_destroy(wr);
}

/* Shape errors read as the reference's; forms the engine refuses run on the reference. */
static void test_errors_and_refusals(void **state) {
  (void)state;
  dm_workspace *ws;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  uint64_t seed = 5;
  const conv_case *c = &cases[0];
  int64_t xd[4] = {2, 3, 7, 7}, wbad[4] = {4, 2, 3, 3}, wd[4] = {4, 3, 3, 3}, m = 4;
  feed_rand(ws, "X", DM_FLOAT, 4, xd, &seed);
  feed_rand(ws, "Wbad", DM_FLOAT, 4, wbad, &seed);
  feed_rand(ws, "W", DM_FLOAT, 4, wd, &seed);
  feed_rand(ws, "b", DM_FLOAT, 1, &m, &seed);
  const char *engines[] = {"DNNL", "REFERENCE"};
  for (int e = 0; e < 2; e++) {
    opt_expect_error(run(ws, "Conv", engines[e], c, 0, 2, (const char *[]){"X", "Wbad"}, 1,
                         (const char *[]){"Y"}, NULL, 0),
                     DM_ERR_SHAPE, "C/group must be 3, not 2", NULL);
    opt_expect_error(run(ws, "ConvFusion", engines[e], c, 0, 4,
                         (const char *[]){"X", "W", "b", "X"}, 1, (const char *[]){"F"},
                         "fusion_type", 2),
                     DM_ERR_SHAPE, "S must have Y's shape and dtype", NULL);
    opt_expect_error(run(ws, "ConvGradient", engines[e], c, 0, 3,
                         (const char *[]){"X", "W", "X"}, 2, (const char *[]){"dW", "db"},
                         NULL, 0),
                     DM_ERR_SHAPE, "dY is", NULL);
    opt_expect_error(run(ws, "ConvFusion", engines[e], c, 0, 2, (const char *[]){"X", "W"}, 1,
                         (const char *[]){"F"}, "fusion_type", 7),
                     DM_ERR_INVALID, "fusion_type is 7", NULL);
  }
  /* NHWC and FP16 ask for DNNL but run on the reference kernels */
  opt_op *op = opt_new("Conv");
  opt_engine(op, "DNNL");
  opt_in(op, "X"), opt_in(op, "W"), opt_out(op, "Ynhwc");
  opt_arg_int(op, "kernel", 3);
  opt_arg_string(op, "order", "NHWC");
  dm_status s = opt_run(op, ws); /* X read as (2, 3, 7, 7) NHWC: 7 channels, W has 3 */
  opt_expect_error(s, DM_ERR_SHAPE, "C/group must be 7", NULL);
  int64_t x16[4] = {1, 2, 5, 5}, w16[4] = {3, 2, 3, 3};
  uint16_t hx[50] = {0}, hw[54] = {0};
  opt_feed(ws, "X16", DM_FLOAT16, 4, x16, hx);
  opt_feed(ws, "W16", DM_FLOAT16, 4, w16, hw);
  op = opt_new("Conv");
  opt_engine(op, "DNNL");
  opt_in(op, "X16"), opt_in(op, "W16"), opt_out(op, "Y16");
  opt_arg_int(op, "kernel", 3);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  opt_fetch(ws, "Y16", DM_FLOAT16, 4, (const int64_t[]){1, 3, 3, 3});
  dm_workspace_destroy(ws);
}

/* Convolutions of nothing: N = 0 (empty Y and dX, zero dW and db); C = 0 is an error. */
static void test_empty(void **state) {
  (void)state;
  static const conv_case empty[] = {
      {"N = 0", 0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, 1},
  };
  for (int i = 0; i < 1; i++) {
    const conv_case *c = &empty[i];
    dm_workspace *ws;
    assert_int_equal(dm_workspace_create(&ws), DM_OK);
    uint64_t seed = 11;
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, c->C, c->kh, c->kw};
    int64_t yd[4] = {c->N, c->M, c->H, c->W};
    feed_rand(ws, "X", DM_FLOAT, 4, xd, &seed);
    feed_rand(ws, "W", DM_FLOAT, 4, wd, &seed);
    feed_rand(ws, "b", DM_FLOAT, 1, &c->M, &seed);
    feed_rand(ws, "S", DM_FLOAT, 4, yd, &seed);
    for (int e = 0; e < 2; e++) {
      const char *eng = e ? "REFERENCE" : "DNNL";
      const char *y = e ? "Yr" : "Yd", *f = e ? "Fr" : "Fd";
      RUN_OK(run(ws, "Conv", eng, c, 0, 3, (const char *[]){"X", "W", "b"}, 1,
                 (const char *[]){y}, NULL, 0));
      RUN_OK(run(ws, "ConvFusion", eng, c, 0, 4, (const char *[]){"X", "W", "b", "S"}, 1,
                 (const char *[]){f}, "fusion_type", 3));
      const char *g[] = {e ? "dWr" : "dWd", e ? "dbr" : "dbd", e ? "dXr" : "dXd"};
      RUN_OK(run(ws, "ConvGradient", eng, c, 0, 3, (const char *[]){"X", "W", "S"}, 3, g,
                 NULL, 0));
    }
    compare(ws, "Yd", "Yr", 0, 1, 1, c->name);
    compare(ws, "Fd", "Fr", 0, 2, 2, c->name);
    compare(ws, "dWd", "dWr", 0, 1, 1, c->name);
    compare(ws, "dbd", "dbr", 0, 50, 50, c->name);
    compare(ws, "dXd", "dXr", 0, 1, 1, c->name);
    dm_workspace_destroy(ws);
  }
}

int main(void) {
  dm_init();
  if (!dm_have_dnnl()) {
    printf("oneDNN cannot run on this CPU: nothing to compare\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_forward),
      cmocka_unit_test(test_winograd_weights_follow_w),
      cmocka_unit_test(test_conv_gradient),
      cmocka_unit_test(test_chain),
      cmocka_unit_test(test_errors_and_refusals),
      cmocka_unit_test(test_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
