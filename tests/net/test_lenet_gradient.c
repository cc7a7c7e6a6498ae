/* test_lenet_gradient.c: the gradient pass output for LeNet matches finite differences of
 * the whole net's loss.
 *
 * The net is models/mnist/lenet_train.pbtxt (its path is argv[2], the init net's argv[1])
 * with the data input op removed: `data` (4, 1, 28, 28) is fed with deterministic
 * pseudo-random pixels in [0, 1) and `label` (4) with fixed classes. dm_gradient_pass
 * on `loss` gives the training net without optimizer; it runs once and, for ~10 entries
 * spread over every parameter, <p>_grad is compared with the central difference
 * (L(p + h) - L(p - h)) / 2h where L is the FP32 loss of the forward net re-run with
 * that one entry changed.
 *
 * Kinks. LeNet is piecewise smooth: MaxPool switches its argmax and Relu its mask where
 * two inputs tie or a pre-activation crosses 0. conv1's weights are shared over 576
 * positions, so for its entries such switches lie within 1e-4 of almost any point, and
 * a difference quotient then measures the mean slope over [-h, h], not the slope at 0:
 * measured here, |D(h) - dL/dp| for conv1 shrinks only like sqrt(h), a few percent at
 * h = 1e-2, down to the rounding floor near h = 3e-4. So the quotient is compared with
 * what it exactly equals, the mean of the derivative over the interval (the mean value
 * theorem): the gradient pass is run at M + 1 points across [-h, h] and integrated by
 * the trapezoid rule. Where the net is smooth there, that mean is the gradient at 0 up
 * to O(h^2); the gradient pass output is compared either way.
 *
 * Tolerance (derived, in the spirit of tests/operators/grad_check.h; never tuned):
 *  - rounding of the loss: the FP32 loss op's own roundings (exp, the sum of 10
 *    classes, log, the subtraction, the mean of 4: at most 16 roundings of quantities of
 *    the loss's size) give e_L = 16 u |L| (u = 2^-24) per evaluation, so 2 e_L / 2h in D;
 *  - the trapezoid rule's error: on each piece of width dt over which the derivative
 *    moves monotonically from g_a to g_b it is at most dt |g_b - g_a| / 2, so the mean
 *    carries at most sum dt |g_b - g_a| / 2 / 2h;
 *  - the gradient ops' own FP32 rounding: lam sqrt(K) u times the largest |gradient| of
 *    that parameter (the scale of the terms they sum), lam = 4 as in Higham and Mary's
 *    probabilistic bound (SIAM J. Sci. Comput. 2019), K the longest path's summed
 *    reduction lengths.
 * The test also checks that it can fail: for most points with a nonzero gradient the
 * tolerance is below a quarter of |gradient|, so a gradient 25% off, or of the wrong
 * sign, is caught.
 *
 * The data gradient is not required: `data` has no producer and is not a parameter, and
 * the pass must still run (Conv may or may not emit data_grad; either is fine).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "net/api.h"
#include "net/passes/gradient_pass.h"
#include "net/netdef_build.h"
#include "test_util.h"
#include "netdef_test_util.h"

enum { B = 4, SIDE = 28, POINTS = 10 };
#define H 1e-2      /* the step: the rounding term e_L / H stays ~1% of a typical gradient */
#define M 8         /* trapezoid pieces across [-H, H] */
#define LAM 4.0     /* Higham-Mary's lambda */
#define U 0x1p-24   /* FP32 unit roundoff */
#define LOSS_ROUNDINGS 16.0
/* conv1 25 + conv2 500 + fc3 800 + pred 500 + the loss's 16: the longest path's summed
 * reduction lengths. */
#define K_PATH (25.0 + 500.0 + 800.0 + 500.0 + LOSS_ROUNDINGS)
#define CAUGHT 0.25 /* the relative gradient error most points must resolve */

static const char *init_path, *train_path;
static const char *const params[] = {"conv1_w", "conv1_b", "conv2_w", "conv2_b",
                                     "fc3_w",   "fc3_b",   "pred_w",  "pred_b"};
static const int32_t labels[B] = {3, 8, 0, 5};

/* lenet_train.pbtxt without its data input: data and label are fed. */
static Caffe2__NetDef *forward_def(void) {
  Caffe2__NetDef *def = NULL;
  assert_ok(dm_netdef_read(train_path, &def));
  assert_true(drop_ops(def, "TensorProtosDBInput") > 0); /* it still reads from a DB */
  return def;
}

static const dm_tensor *fetch(dm_workspace *ws, const char *name) {
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &t));
  assert_int_equal(dm_tensor_dtype(t), DM_FLOAT);
  return t;
}

static double loss_of(dm_workspace *ws) {
  return *(const float *)dm_tensor_data(fetch(ws, "loss"));
}

/* Sets entry k of parameter `name` (held in w) to w0 + t, runs `net`; returns the step
 * FP32 really took. */
static double set_entry(dm_workspace *ws, dm_net *net, const char *name, int ndim,
                        const int64_t *dims, float *w, int64_t k, float w0, double t) {
  w[k] = w0 + (float)t;
  double taken = (double)w[k] - w0;
  assert_ok(dm_workspace_feed(ws, name, DM_FLOAT, ndim, dims, w));
  assert_ok(dm_net_run(net));
  w[k] = w0;
  return taken;
}

static void test_lenet_gradient(void **state) {
  (void)state;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  assert_ok(dm_workspace_run_net_file(ws, init_path));
  static float x[B * SIDE * SIDE]; /* (B, 1, 28, 28) */
  uint64_t rng = 0x853c49e6748fea9bull;
  for (size_t i = 0; i < sizeof x / sizeof *x; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(rng >> 40) / 16777216.0); /* 24 bits: exact in FP32, < 1 */
  }
  const int64_t xd[4] = {B, 1, SIDE, SIDE}, ld[1] = {B};
  assert_ok(dm_workspace_feed(ws, "data", DM_FLOAT, 4, xd, x));
  assert_ok(dm_workspace_feed(ws, "label", DM_INT32, 1, ld, labels));

  /* The gradient pass must run though `data` and `label` get no gradient from anyone. */
  Caffe2__NetDef *train = forward_def();
  const char *loss = "loss";
  assert_ok(dm_gradient_pass(train, &(dm_gradient_opts){&loss, 1}));
  dm_net *fwd = NULL, *full = NULL;
  assert_ok(dm_workspace_create_net(ws, forward_def(), "lenet_forward", &fwd));
  assert_ok(dm_workspace_create_net(ws, train, "lenet_gradient", &full));
  assert_ok(dm_net_run(full));
  const double L0 = loss_of(ws);
  assert_true(isfinite(L0) && L0 > 0);
  const double e_loss = LOSS_ROUNDINGS * U * fabs(L0);
  print_message("loss %.7g; data_grad %s\n", L0,
                dm_workspace_has_blob(ws, "data_grad") ? "emitted" : "not emitted");

  for (size_t p = 0; p < sizeof params / sizeof *params; p++) {
    char gname[64];
    snprintf(gname, sizeof gname, "%s_grad", params[p]);
    /* The blobs hold the last perturbed run: run again with every parameter restored. */
    assert_ok(dm_net_run(full));
    if (loss_of(ws) != L0)
      fail_msg("the loss is not repeatable: %.9g, then %.9g", L0, loss_of(ws));
    const dm_tensor *t = fetch(ws, params[p]), *g = fetch(ws, gname);
    int64_t n = dm_tensor_numel(t);
    assert_int_equal(dm_tensor_numel(g), n);
    int ndim = dm_tensor_ndim(t);
    int64_t dims[DM_MAX_DIMS];
    memcpy(dims, dm_tensor_dims(t), (size_t)ndim * sizeof *dims);
    /* Copies: feeding the parameter below replaces the tensors t and g point into. */
    float *w = malloc((size_t)n * sizeof *w), *grad = malloc((size_t)n * sizeof *grad);
    assert_non_null(w);
    assert_non_null(grad);
    memcpy(w, dm_tensor_data(t), (size_t)n * sizeof *w);
    memcpy(grad, dm_tensor_data(g), (size_t)n * sizeof *grad);
    double gmax = 0;
    for (int64_t k = 0; k < n; k++)
      gmax = fmax(gmax, fabs(grad[k]));
    assert_true(gmax > 0); /* an all-zero gradient would match nothing but dead units */
    const double e_backward = LAM * sqrt(K_PATH) * U * gmax;

    int sharp = 0, nonzero = 0;
    double worst = 0;
    int64_t points = n < POINTS ? n : POINTS, span = n / points;
    for (int64_t i = 0; i < points; i++) {
      /* One entry per stretch of n/points at a pseudo-random offset: spread over the
       * tensor without lining up with its rows, as a fixed stride can (pred_w's 500
       * columns and a stride of 500 would test one fc3 unit ten times). */
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      int64_t k = i * span + (int64_t)((rng >> 33) % (uint64_t)span);
      float w0 = w[k];
      /* The central difference over [t_0, t_M] ... */
      double t_lo = set_entry(ws, fwd, params[p], ndim, dims, w, k, w0, -H);
      double l_lo = loss_of(ws);
      double t_hi = set_entry(ws, fwd, params[p], ndim, dims, w, k, w0, H);
      double central = (loss_of(ws) - l_lo) / (t_hi - t_lo);
      /* ... against the trapezoid mean of the gradient pass over the same interval. */
      double mean = 0, quad = 0, g_prev = 0, t_prev = 0;
      for (int j = 0; j <= M; j++) {
        double tj = set_entry(ws, full, params[p], ndim, dims, w, k, w0, -H + 2 * H * j / M);
        double gj = ((const float *)dm_tensor_data(fetch(ws, gname)))[k];
        if (j == M / 2 && gj != grad[k]) /* t = 0: the unperturbed run, exactly */
          fail_msg("%s[%lld]: the gradient pass is not repeatable: %.8g then %.8g",
                   params[p], (long long)k, grad[k], gj);
        if (j > 0) {
          mean += (tj - t_prev) * (gj + g_prev) / 2;
          quad += (tj - t_prev) * fabs(gj - g_prev) / 2;
        }
        g_prev = gj;
        t_prev = tj;
      }
      mean /= t_hi - t_lo;
      quad /= t_hi - t_lo;
      double tol = 2 * e_loss / (t_hi - t_lo) + quad + e_backward;
      double err = fabs(central - mean);
      worst = fmax(worst, err / tol);
      if (grad[k] != 0) {
        nonzero++;
        sharp += tol < CAUGHT * fabs(grad[k]);
      }
      if (err > tol)
        fail_msg("d loss / d %s[%lld] (value %.6g) over +-%.3g: gradient pass %.8g at 0, "
                 "%.8g on average; central difference %.8g; error %.3g > tolerance %.3g",
                 params[p], (long long)k, w0, H, grad[k], mean, central, err, tol);
    }
    assert_ok(dm_workspace_feed(ws, params[p], DM_FLOAT, ndim, dims, w)); /* restore */
    print_message("%-8s %lld entries, worst error/tolerance %.3f, %d of %d nonzero "
                  "gradients resolved to %.0f%%\n",
                  params[p], (long long)points, worst, sharp, nonzero, 100 * CAUGHT);
    /* The check must be able to fail: most gradients it compares are resolved. */
    if (2 * sharp <= nonzero)
      fail_msg("%s: the tolerance resolves only %d of %d nonzero gradients to %.0f%%",
               params[p], sharp, nonzero, 100 * CAUGHT);
    free(w);
    free(grad);
  }
  dm_workspace_destroy(ws);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LENET_INIT_NET LENET_TRAIN_NET\n", argv[0]);
    return 1;
  }
  init_path = argv[1];
  train_path = argv[2];
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_lenet_gradient)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
