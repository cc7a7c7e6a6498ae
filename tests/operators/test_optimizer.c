/* test_optimizer.c: the update ops against references computed here in double:
 * Iter (in place, the input-less form, skip), LearningRate (every policy at several
 * iterations, with and without warmup, argument errors), WeightedSum (SGD step, weight
 * decay, in place or not), MomentumSGDUpdate (several steps, plain and Nesterov, with
 * weight decay), Adam (several steps, Caffe2's bias correction from iter + 1), AdamW
 * (several steps against torch.optim.AdamW's update written out as torch writes it,
 * decoupled decay and epsilon in torch's place). A nonzero
 * skip input must leave every output bit-identical (memcmp), a zero one must not change
 * the result.
 *
 * Tolerances: each FP32 kernel step does a handful of correctly rounded operations, so
 * one step errs by a few u32 of the magnitudes involved; over S steps errors add up.
 * We allow 16 * S * u32 * (|ref| + scale), with scale the size of the terms summed.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "op_test_util.h"

enum { N = 300, STEPS = 5 };

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static const int64_t vec_dims[1] = {N};

static void feed_vec(dm_workspace *ws, const char *name, const float *v) {
  opt_feed(ws, name, DM_FLOAT, 1, vec_dims, v);
}
static void feed_scalar(dm_workspace *ws, const char *name, float v) {
  static const int64_t one[1] = {1};
  opt_feed(ws, name, DM_FLOAT, 1, one, &v);
}
static void feed_iter(dm_workspace *ws, const char *name, int64_t v) {
  static const int64_t one[1] = {1};
  opt_feed(ws, name, DM_INT64, 1, one, &v);
}
static const float *fetch_vec(dm_workspace *ws, const char *name) {
  return dm_tensor_data(opt_fetch(ws, name, DM_FLOAT, 1, vec_dims));
}
static int64_t fetch_iter(dm_workspace *ws, const char *name) {
  const dm_tensor *t = NULL;
  assert_int_equal(dm_workspace_fetch(ws, name, &t), DM_OK);
  assert_int_equal(dm_tensor_dtype(t), DM_INT64);
  assert_int_equal(dm_tensor_numel(t), 1);
  return *(const int64_t *)dm_tensor_data(t);
}

static void check_close(const char *what, int step, const float *got, const double *ref,
                        double scale, int steps) {
  for (int i = 0; i < N; i++) {
    double tol = 16.0 * steps * OPT_U32 * (fabs(ref[i]) + scale);
    if (!(fabs(got[i] - ref[i]) <= tol))
      fail_msg("%s step %d: [%d] = %.9g, reference %.9g (tol %.3g)", what, step, i, got[i],
               ref[i], tol);
  }
}

static void random_vec(uint64_t *seed, float *f, double *d, double lo, double hi) {
  for (int i = 0; i < N; i++) {
    f[i] = (float)opt_uniform(seed, lo, hi);
    if (d)
      d[i] = f[i];
  }
}

/* ---- Iter ------------------------------------------------------------------------------ */

static dm_status run_iter(dm_workspace *ws, const char *blob, const char *skip) {
  opt_op *op = opt_new("Iter");
  if (blob)
    opt_in(op, blob);
  if (skip)
    opt_in(op, skip);
  opt_out(op, blob ? blob : "fresh_iter");
  return opt_run(op, ws);
}

static void test_iter(void **state) {
  dm_workspace *ws = *state;
  feed_iter(ws, "it", 5);
  for (int k = 0; k < 3; k++)
    assert_int_equal(run_iter(ws, "it", NULL), DM_OK);
  assert_int_equal(fetch_iter(ws, "it"), 8);
  /* Input-less: an empty output starts at 0, then counts. */
  assert_int_equal(run_iter(ws, NULL, NULL), DM_OK);
  assert_int_equal(fetch_iter(ws, "fresh_iter"), 1);
  assert_int_equal(run_iter(ws, NULL, NULL), DM_OK);
  assert_int_equal(fetch_iter(ws, "fresh_iter"), 2);
  /* An empty (0-element) input starts at 0. */
  const int64_t zero[1] = {0};
  int64_t unused = 0;
  opt_feed(ws, "empty", DM_INT64, 1, zero, &unused);
  assert_int_equal(run_iter(ws, "empty", NULL), DM_OK);
  assert_int_equal(fetch_iter(ws, "empty"), 1);
  /* Skip: nonzero leaves the count, zero counts. */
  static const int64_t one[1] = {1};
  uint8_t yes = 1, no = 0;
  opt_feed(ws, "skip", DM_BOOL, 1, one, &yes);
  assert_int_equal(run_iter(ws, "it", "skip"), DM_OK);
  assert_int_equal(fetch_iter(ws, "it"), 8);
  opt_feed(ws, "skip", DM_BOOL, 1, one, &no);
  assert_int_equal(run_iter(ws, "it", "skip"), DM_OK);
  assert_int_equal(fetch_iter(ws, "it"), 9);
  opt_feed(ws, "skip", DM_BOOL, 1, one, &yes); /* skipped, an empty count reads 0 */
  opt_feed(ws, "empty", DM_INT64, 1, zero, &unused);
  assert_int_equal(run_iter(ws, "empty", "skip"), DM_OK);
  assert_int_equal(fetch_iter(ws, "empty"), 0);
  /* Errors: not in place; wrong dtype; overflow. */
  opt_op *op = opt_new("Iter");
  opt_in(op, "it");
  opt_out(op, "other");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "in place", NULL);
  feed_scalar(ws, "fl", 1);
  opt_expect_error(run_iter(ws, "fl", NULL), DM_ERR_TYPE, "INT64", NULL);
  feed_iter(ws, "big", INT64_MAX);
  opt_expect_error(run_iter(ws, "big", NULL), DM_ERR_LIMIT, "overflows", NULL);
}

/* ---- LearningRate -------------------------------------------------------------------- */

typedef struct lr_case {
  const char *policy;
  int64_t stepsize, max_iter, warmup_iter;
  double gamma, power, warmup_start;
} lr_case;

/* The policies written out independently of operators/lr_policy.c. */
static double lr_reference(const lr_case *c, double base, int64_t it) {
  double m;
  if (strcmp(c->policy, "fixed") == 0)
    m = 1;
  else if (strcmp(c->policy, "step") == 0)
    m = pow(c->gamma, floor((double)it / (double)c->stepsize));
  else if (strcmp(c->policy, "exp") == 0)
    m = pow(c->gamma, (double)it);
  else if (strcmp(c->policy, "inv") == 0)
    m = 1 / pow(1 + c->gamma * (double)it, c->power);
  else
    m = it >= c->max_iter ? 0 : pow((double)(c->max_iter - it) / (double)c->max_iter, c->power);
  if (it < c->warmup_iter) /* linear from warmup_start to 1 */
    m *= c->warmup_start + (1 - c->warmup_start) * (double)it / (double)c->warmup_iter;
  return base * m;
}

static dm_status run_lr(dm_workspace *ws, const lr_case *c, float base) {
  opt_op *op = opt_new("LearningRate");
  opt_in(op, "iter");
  opt_out(op, "lr");
  opt_arg_float(op, "base_lr", base);
  opt_arg_string(op, "policy", c->policy);
  if (c->stepsize)
    opt_arg_int(op, "stepsize", c->stepsize);
  if (c->max_iter)
    opt_arg_int(op, "max_iter", c->max_iter);
  if (c->gamma != 0)
    opt_arg_float(op, "gamma", (float)c->gamma);
  if (c->power != 0)
    opt_arg_float(op, "power", (float)c->power);
  if (c->warmup_iter) {
    opt_arg_int(op, "warmup_iter", c->warmup_iter);
    opt_arg_float(op, "warmup_start", (float)c->warmup_start);
  }
  return opt_run(op, ws);
}

static void test_learning_rate(void **state) {
  dm_workspace *ws = *state;
  /* gamma/power chosen exactly representable in FP32, so the reference sees the same
   * values the op does. */
  const lr_case cases[] = {
      {"fixed", 0, 0, 0, 0, 0, 0},        {"step", 10, 0, 0, 0.5, 0, 0},
      {"exp", 0, 0, 0, 0.9921875, 0, 0},  {"inv", 0, 0, 0, 0.0625, 0.75, 0},
      {"poly", 0, 100, 0, 0, 2, 0},       {"poly", 0, 100, 0, 0, 0.5, 0},
      {"fixed", 0, 0, 8, 0, 0, 0.25},     {"step", 10, 0, 20, 0.5, 0, 0},
      {"inv", 0, 0, 4, 0.0625, 0.75, 0.5},
  };
  const int64_t iters[] = {0, 1, 3, 4, 7, 9, 10, 19, 20, 21, 99, 100, 150, 1000};
  const float bases[] = {-0.1f, 0.25f};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (size_t b = 0; b < 2; b++)
      for (size_t k = 0; k < sizeof iters / sizeof *iters; k++) {
        feed_iter(ws, "iter", iters[k]);
        dm_status s = run_lr(ws, &cases[c], bases[b]);
        if (s != DM_OK)
          fail_msg("%s: %s", cases[c].policy, dm_last_error());
        const dm_tensor *t = opt_fetch(ws, "lr", DM_FLOAT, 0, NULL);
        double got = *(const float *)dm_tensor_data(t);
        double ref = lr_reference(&cases[c], bases[b], iters[k]);
        /* computed in double, rounded once to FLOAT */
        if (!(fabs(got - ref) <= 2 * OPT_U32 * fabs(ref)))
          fail_msg("case %zu (%s) base %g iter %lld: lr %.9g, reference %.9g", c, cases[c].policy,
                   bases[b], (long long)iters[k], got, ref);
      }
  /* Warmup at its start is warmup_start * base_lr, at its end the policy's value. */
  feed_iter(ws, "iter", 0);
  assert_int_equal(run_lr(ws, &cases[6], -0.5f), DM_OK);
  assert_true(*(const float *)dm_tensor_data(opt_fetch(ws, "lr", DM_FLOAT, 0, NULL)) == -0.125f);
  /* Errors, found when the op is instantiated. */
  const lr_case bad_step = {"step", 0, 0, 0, 0.5, 0, 0}, bad_poly = {"poly", 0, 0, 0, 0, 1, 0},
                bad_inv = {"inv", 0, 0, 0, 0.5, 0, 0}, bad_name = {"cosine", 0, 0, 0, 0, 0, 0};
  opt_expect_error(run_lr(ws, &bad_step, 1), DM_ERR_INVALID, "'stepsize'", NULL);
  opt_expect_error(run_lr(ws, &bad_poly, 1), DM_ERR_INVALID, "'max_iter'", NULL);
  opt_expect_error(run_lr(ws, &bad_inv, 1), DM_ERR_INVALID, "'power'", NULL);
  opt_expect_error(run_lr(ws, &bad_name, 1), DM_ERR_INVALID, "'cosine'", NULL);
  opt_op *op = opt_new("LearningRate");
  opt_in(op, "iter");
  opt_out(op, "lr");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "base_lr", NULL);
}

/* ---- WeightedSum ------------------------------------------------------------------------ */

static void test_weighted_sum(void **state) {
  dm_workspace *ws = *state;
  uint64_t seed = 11;
  float x[3][N];
  double xd[3][N], ref[N];
  const float w[3] = {1.0f, -0.03f, 0.7f};
  const char *xn[3] = {"x0", "x1", "x2"}, *wn[3] = {"w0", "w1", "w2"};
  for (int inplace = 0; inplace < 2; inplace++)
    for (int np = 1; np <= 3; np++) {
      for (int k = 0; k < 3; k++) {
        random_vec(&seed, x[k], xd[k], -2, 2);
        feed_vec(ws, xn[k], x[k]);
        feed_scalar(ws, wn[k], w[k]);
      }
      opt_op *op = opt_new("WeightedSum");
      for (int k = 0; k < np; k++) {
        opt_in(op, xn[k]);
        opt_in(op, wn[k]);
      }
      opt_out(op, inplace ? "x0" : "y");
      assert_int_equal(opt_run(op, ws), DM_OK);
      double scale = 0;
      for (int i = 0; i < N; i++) {
        ref[i] = 0;
        for (int k = 0; k < np; k++)
          ref[i] += (double)w[k] * xd[k][i];
      }
      for (int k = 0; k < np; k++)
        scale += 2 * fabs(w[k]);
      check_close("WeightedSum", np, fetch_vec(ws, inplace ? "x0" : "y"), ref, scale, 1);
    }
  /* Mismatched shapes, a weight with two elements. */
  static const int64_t two[1] = {2};
  float ww[2] = {1, 2};
  opt_feed(ws, "w2", DM_FLOAT, 1, two, ww);
  opt_op *op = opt_new("WeightedSum");
  opt_in(op, "x0");
  opt_in(op, "w0");
  opt_in(op, "x1");
  opt_in(op, "w2");
  opt_out(op, "y");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "one element", NULL);
  opt_feed(ws, "short", DM_FLOAT, 1, two, ww);
  op = opt_new("WeightedSum");
  opt_in(op, "x0");
  opt_in(op, "w0");
  opt_in(op, "short");
  opt_in(op, "w0");
  opt_out(op, "y");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "'short'", NULL);
}

/* ---- MomentumSGDUpdate (with weight decay through WeightedSum) ----------------------- */

static dm_status run_momentum(dm_workspace *ws, float mu, int nesterov, const char *skip,
                              int inplace) {
  opt_op *op = opt_new("MomentumSGDUpdate");
  opt_in(op, "g");
  opt_in(op, "m");
  opt_in(op, "lr");
  opt_in(op, "p");
  if (skip)
    opt_in(op, skip);
  opt_out(op, inplace ? "g" : "g_out");
  opt_out(op, inplace ? "m" : "m_out");
  opt_out(op, inplace ? "p" : "p_out");
  opt_arg_float(op, "momentum", mu);
  opt_arg_int(op, "nesterov", nesterov);
  return opt_run(op, ws);
}

static dm_status run_decay(dm_workspace *ws) {
  opt_op *op = opt_new("WeightedSum"); /* g = 1 * g + wd * p */
  opt_in(op, "g");
  opt_in(op, "one");
  opt_in(op, "p");
  opt_in(op, "wd");
  opt_out(op, "g");
  return opt_run(op, ws);
}

static void test_momentum(void **state) {
  dm_workspace *ws = *state;
  const float lr = 0.05f, mu = 0.9f, wd = 1e-2f;
  for (int nesterov = 0; nesterov < 2; nesterov++)
    for (int decay = 0; decay < 2; decay++) {
      uint64_t seed = 5 + (uint64_t)(2 * nesterov + decay);
      float p[N], m[N], g[N];
      double pd[N], md[N], gd[N];
      random_vec(&seed, p, pd, -1, 1);
      random_vec(&seed, m, md, -0.1, 0.1);
      feed_vec(ws, "p", p);
      feed_vec(ws, "m", m);
      feed_scalar(ws, "lr", lr);
      feed_scalar(ws, "one", 1);
      feed_scalar(ws, "wd", wd);
      for (int step = 1; step <= STEPS; step++) {
        random_vec(&seed, g, gd, -1, 1);
        feed_vec(ws, "g", g);
        if (decay) {
          assert_int_equal(run_decay(ws), DM_OK);
          for (int i = 0; i < N; i++)
            gd[i] += (double)wd * pd[i];
        }
        assert_int_equal(run_momentum(ws, mu, nesterov, NULL, 1), DM_OK);
        for (int i = 0; i < N; i++) { /* caffe2-ops.md's formulas */
          double adj;
          if (!nesterov) {
            adj = lr * gd[i] + (double)mu * md[i];
            md[i] = adj;
          } else {
            double mnew = (double)mu * md[i] + lr * gd[i];
            adj = (1 + (double)mu) * mnew - (double)mu * md[i];
            md[i] = mnew;
          }
          gd[i] = adj;
          pd[i] -= adj;
        }
        check_close("momentum m", step, fetch_vec(ws, "m"), md, 1, step);
        check_close("momentum g", step, fetch_vec(ws, "g"), gd, 1, step);
        check_close("momentum p", step, fetch_vec(ws, "p"), pd, 1, step);
      }
      /* Not in place: the same numbers land in the other blobs, inputs untouched. */
      random_vec(&seed, g, gd, -1, 1);
      feed_vec(ws, "g", g);
      float p0[N], m0[N];
      memcpy(p0, fetch_vec(ws, "p"), sizeof p0);
      memcpy(m0, fetch_vec(ws, "m"), sizeof m0);
      assert_int_equal(run_momentum(ws, mu, nesterov, NULL, 0), DM_OK);
      assert_memory_equal(fetch_vec(ws, "p"), p0, sizeof p0);
      assert_memory_equal(fetch_vec(ws, "g"), g, sizeof g);
      assert_int_equal(run_momentum(ws, mu, nesterov, NULL, 1), DM_OK);
      assert_memory_equal(fetch_vec(ws, "p_out"), fetch_vec(ws, "p"), sizeof p0);
      assert_memory_equal(fetch_vec(ws, "m_out"), fetch_vec(ws, "m"), sizeof m0);
      assert_memory_equal(fetch_vec(ws, "g_out"), fetch_vec(ws, "g"), sizeof g);
    }
  /* lr must be FLOAT with one element; shapes must agree. */
  static const int64_t two[1] = {2};
  float v2[2] = {1, 2};
  opt_feed(ws, "lr", DM_FLOAT, 1, two, v2);
  opt_expect_error(run_momentum(ws, 0.9f, 0, NULL, 1), DM_ERR_SHAPE, "lr", NULL);
  feed_scalar(ws, "lr", 0.1f);
  opt_feed(ws, "m", DM_FLOAT, 1, two, v2);
  opt_expect_error(run_momentum(ws, 0.9f, 0, NULL, 1), DM_ERR_SHAPE, "moment", NULL);
}

/* ---- Adam -------------------------------------------------------------------------------- */

static dm_status run_adam(dm_workspace *ws, const char *skip, int inplace) {
  opt_op *op = opt_new("Adam");
  const char *in[] = {"p", "m1", "m2", "g", "lr", "iter"};
  for (int k = 0; k < 6; k++)
    opt_in(op, in[k]);
  if (skip)
    opt_in(op, skip);
  opt_out(op, inplace ? "p" : "p_out");
  opt_out(op, inplace ? "m1" : "m1_out");
  opt_out(op, inplace ? "m2" : "m2_out");
  return opt_run(op, ws); /* Caffe2's defaults: beta1 0.9, beta2 0.999, epsilon 1e-5 */
}

static void test_adam(void **state) {
  dm_workspace *ws = *state;
  const double b1 = 0.9f, b2 = 0.999f, eps = 1e-5f; /* the FP32 values the op uses */
  const float lr = -0.01f;                           /* Caffe2's Adam adds lr * ... */
  uint64_t seed = 21;
  float p[N], g[N], zero[N] = {0};
  double pd[N], gd[N], m1[N] = {0}, m2[N] = {0};
  random_vec(&seed, p, pd, -1, 1);
  feed_vec(ws, "p", p);
  feed_vec(ws, "m1", zero);
  feed_vec(ws, "m2", zero);
  feed_scalar(ws, "lr", lr);
  for (int step = 1; step <= STEPS; step++) {
    int64_t iter = step - 1; /* the correction uses t = iter + 1 = step */
    feed_iter(ws, "iter", iter);
    random_vec(&seed, g, gd, -1, 1);
    feed_vec(ws, "g", g);
    assert_int_equal(run_adam(ws, NULL, 1), DM_OK);
    double t = (double)iter + 1;
    double corr = sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    for (int i = 0; i < N; i++) {
      m1[i] = b1 * m1[i] + (1 - b1) * gd[i];
      m2[i] = b2 * m2[i] + (1 - b2) * gd[i] * gd[i];
      pd[i] += lr * corr * m1[i] / (sqrt(m2[i]) + eps);
    }
    check_close("adam m1", step, fetch_vec(ws, "m1"), m1, 1, step);
    check_close("adam m2", step, fetch_vec(ws, "m2"), m2, 1, step);
    /* The step is lr * corr * m1 / sqrt(m2), about |lr| * corr; m2 near 0 makes the
     * quotient sensitive, so scale by the step size relative to p. */
    check_close("adam p", step, fetch_vec(ws, "p"), pd, 1, step);
  }
  /* The first step's bias correction makes it about |lr| per element in size (sign of
   * the gradient), not (1 - beta1) * |lr| as it would be uncorrected. */
  random_vec(&seed, p, pd, -1, 1);
  feed_vec(ws, "p", p);
  feed_vec(ws, "m1", zero);
  feed_vec(ws, "m2", zero);
  feed_iter(ws, "iter", 0);
  for (int i = 0; i < N; i++)
    g[i] = 0.5f;
  feed_vec(ws, "g", g);
  assert_int_equal(run_adam(ws, NULL, 1), DM_OK);
  const float *pn = fetch_vec(ws, "p");
  for (int i = 0; i < N; i++)
    assert_true(fabs((pn[i] - p[i]) - lr) < 2e-3 * fabs(lr));
  /* iter must be INT64. */
  feed_scalar(ws, "iter", 0);
  opt_expect_error(run_adam(ws, NULL, 1), DM_ERR_TYPE, "INT64", NULL);
}

/* ---- AdamW ------------------------------------------------------------------------------- */

static dm_status run_adamw(dm_workspace *ws, const char *skip, float wd) {
  opt_op *op = opt_new("AdamW");
  const char *in[] = {"p", "m1", "m2", "g", "lr", "iter"};
  for (int k = 0; k < 6; k++)
    opt_in(op, in[k]);
  if (skip)
    opt_in(op, skip);
  opt_out(op, "p"), opt_out(op, "m1"), opt_out(op, "m2");
  if (wd >= 0)
    opt_arg_float(op, "weight_decay", wd); /* else torch's default, 0.01 */
  return opt_run(op, ws); /* torch's defaults: beta1 0.9, beta2 0.999, epsilon 1e-8 */
}

static void test_adamw(void **state) {
  dm_workspace *ws = *state;
  const double b1 = 0.9f, b2 = 0.999f, eps = 1e-8f; /* the FP32 values the op uses */
  const float lr = -0.01f; /* Adam's sign: torch's lr is 0.01 */
  const double tlr = 0.01f;
  for (int variant = 0; variant < 2; variant++) {
    const double wd = variant ? 0.01f : 0.25f; /* default, and a strong decay */
    uint64_t seed = 31 + (uint64_t)variant;
    float p[N], g[N], zero[N] = {0};
    double pd[N], gd[N], m1[N] = {0}, m2[N] = {0};
    random_vec(&seed, p, pd, -1, 1);
    feed_vec(ws, "p", p), feed_vec(ws, "m1", zero), feed_vec(ws, "m2", zero);
    feed_scalar(ws, "lr", lr);
    for (int step = 1; step <= STEPS; step++) {
      feed_iter(ws, "iter", step); /* torch's state['step'] after += 1, as Iter counts */
      random_vec(&seed, g, gd, -1, 1);
      feed_vec(ws, "g", g);
      assert_int_equal(run_adamw(ws, NULL, variant ? -1 : (float)wd), DM_OK);
      /* torch.optim.AdamW (_single_tensor_adamw), in double */
      double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
      for (int i = 0; i < N; i++) {
        pd[i] *= 1 - tlr * wd;
        m1[i] = b1 * m1[i] + (1 - b1) * gd[i];
        m2[i] = b2 * m2[i] + (1 - b2) * gd[i] * gd[i];
        double denom = sqrt(m2[i]) / sqrt(bc2) + eps;
        pd[i] -= tlr / bc1 * m1[i] / denom;
      }
      check_close("adamw m1", step, fetch_vec(ws, "m1"), m1, 1, step);
      check_close("adamw m2", step, fetch_vec(ws, "m2"), m2, 1, step);
      check_close("adamw p", step, fetch_vec(ws, "p"), pd, 1, step);
    }
  }
  /* A zero gradient from zero moments: the step is 0 / (0 + eps), so only the decay moves
   * p, by exactly the FP32 factor 1 - |lr| wd. */
  uint64_t seed = 41;
  float p[N], zero[N] = {0};
  random_vec(&seed, p, NULL, -1, 1);
  feed_vec(ws, "p", p), feed_vec(ws, "m1", zero), feed_vec(ws, "m2", zero);
  feed_vec(ws, "g", zero);
  feed_iter(ws, "iter", 1);
  assert_int_equal(run_adamw(ws, NULL, 0.5f), DM_OK);
  const float *pn = fetch_vec(ws, "p");
  const float f = (float)(1 + (double)lr * 0.5f);
  for (int i = 0; i < N; i++)
    assert_true(pn[i] == p[i] * f);
  /* Step 0 (no Iter before) has no bias correction; INT64 only; shapes must agree. */
  feed_iter(ws, "iter", 0);
  opt_expect_error(run_adamw(ws, NULL, 0.5f), DM_ERR_INVALID, "iter 'iter' is 0", NULL);
  feed_scalar(ws, "iter", 0);
  opt_expect_error(run_adamw(ws, NULL, 0.5f), DM_ERR_TYPE, "INT64", NULL);
  feed_iter(ws, "iter", 1);
  static const int64_t d3[1] = {3};
  opt_feed(ws, "g", DM_FLOAT, 1, d3, zero);
  opt_expect_error(run_adamw(ws, NULL, 0.5f), DM_ERR_SHAPE, "grad 'g'", NULL);
}

/* ---- skip ---------------------------------------------------------------------------------- */

typedef struct snapshot {
  float p[N], m[N], m2[N], g[N];
} snapshot;

static void feed_state(dm_workspace *ws, uint64_t seed) {
  float v[N];
  random_vec(&seed, v, NULL, -1, 1);
  feed_vec(ws, "p", v);
  random_vec(&seed, v, NULL, -1, 1);
  feed_vec(ws, "g", v);
  random_vec(&seed, v, NULL, -1, 1);
  feed_vec(ws, "m", v);
  feed_vec(ws, "m1", v);
  random_vec(&seed, v, NULL, 0, 1);
  feed_vec(ws, "m2", v);
  feed_scalar(ws, "lr", -0.1f);
  feed_scalar(ws, "one", 1);
  feed_iter(ws, "iter", 3);
}

static void take(dm_workspace *ws, snapshot *s) {
  memcpy(s->p, fetch_vec(ws, "p"), sizeof s->p);
  memcpy(s->m, fetch_vec(ws, "m"), sizeof s->m);
  memcpy(s->m2, fetch_vec(ws, "m2"), sizeof s->m2);
  memcpy(s->g, fetch_vec(ws, "g"), sizeof s->g);
}

static dm_status run_sgd(dm_workspace *ws, const char *skip) {
  opt_op *op = opt_new("WeightedSum");
  opt_in(op, "p");
  opt_in(op, "one");
  opt_in(op, "g");
  opt_in(op, "lr");
  if (skip)
    opt_in(op, skip);
  opt_out(op, "p");
  return opt_run(op, ws);
}

/* Runs update `which` (0 SGD, 1 momentum, 2 Nesterov, 3 Adam, 4 AdamW) in place. */
static dm_status run_update(dm_workspace *ws, int which, const char *skip) {
  switch (which) {
  case 0: return run_sgd(ws, skip);
  case 1: return run_momentum(ws, 0.9f, 0, skip, 1);
  case 2: return run_momentum(ws, 0.9f, 1, skip, 1);
  case 3: return run_adam(ws, skip, 1); /* its moments are m1 (checked apart) and m2 */
  default: return run_adamw(ws, skip, 0.1f);
  }
}

static void test_skip(void **state) {
  dm_workspace *ws = *state;
  static const int64_t one[1] = {1};
  const uint8_t t8 = 1, f8 = 0;
  const int32_t t32 = 7;
  const float tf = 1.0f, nanf_ = NAN;
  const uint16_t th = 0x3c00; /* 1.0 in FP16 */
  struct {
    dm_dtype t;
    const void *v;
  } yes[] = {{DM_BOOL, &t8}, {DM_INT32, &t32}, {DM_FLOAT, &tf}, {DM_FLOAT, &nanf_},
             {DM_FLOAT16, &th}};
  for (int which = 0; which < 5; which++) {
    for (size_t k = 0; k < sizeof yes / sizeof *yes; k++) {
      feed_state(ws, 100 + (uint64_t)which);
      snapshot before, after;
      take(ws, &before);
      float m1[N];
      memcpy(m1, fetch_vec(ws, "m1"), sizeof m1);
      opt_feed(ws, "skip", yes[k].t, 1, one, yes[k].v);
      assert_int_equal(run_update(ws, which, "skip"), DM_OK);
      take(ws, &after);
      assert_memory_equal(&before, &after, sizeof before);
      assert_memory_equal(m1, fetch_vec(ws, "m1"), sizeof m1);
    }
    /* skip = 0 gives exactly the unskipped result. */
    snapshot plain, with0;
    feed_state(ws, 200 + (uint64_t)which);
    assert_int_equal(run_update(ws, which, NULL), DM_OK);
    take(ws, &plain);
    feed_state(ws, 200 + (uint64_t)which);
    opt_feed(ws, "skip", DM_BOOL, 1, one, &f8);
    assert_int_equal(run_update(ws, which, "skip"), DM_OK);
    take(ws, &with0);
    assert_memory_equal(&plain, &with0, sizeof plain);
    snapshot before;
    feed_state(ws, 200 + (uint64_t)which);
    take(ws, &before);
    assert_true(memcmp(&before, &plain, sizeof plain) != 0); /* the update did something */
  }
  /* Not in place and skipped: the outputs are copies of the inputs they would update. */
  feed_state(ws, 300);
  opt_feed(ws, "skip", DM_BOOL, 1, one, &t8);
  assert_int_equal(run_momentum(ws, 0.9f, 0, "skip", 0), DM_OK);
  assert_memory_equal(fetch_vec(ws, "p_out"), fetch_vec(ws, "p"), N * sizeof(float));
  assert_memory_equal(fetch_vec(ws, "m_out"), fetch_vec(ws, "m"), N * sizeof(float));
  assert_memory_equal(fetch_vec(ws, "g_out"), fetch_vec(ws, "g"), N * sizeof(float));
  /* A skip input with two elements, or a STRING, is refused. */
  static const int64_t two[1] = {2};
  const uint8_t b2[2] = {0, 1};
  opt_feed(ws, "skip", DM_BOOL, 1, two, b2);
  opt_expect_error(run_sgd(ws, "skip"), DM_ERR_SHAPE, "skip", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_iter, setup, teardown),
      cmocka_unit_test_setup_teardown(test_learning_rate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_weighted_sum, setup, teardown),
      cmocka_unit_test_setup_teardown(test_momentum, setup, teardown),
      cmocka_unit_test_setup_teardown(test_adam, setup, teardown),
      cmocka_unit_test_setup_teardown(test_adamw, setup, teardown),
      cmocka_unit_test_setup_teardown(test_skip, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
