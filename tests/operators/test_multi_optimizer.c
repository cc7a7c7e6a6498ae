/* test_multi_optimizer.c: MultiMomentumSGDUpdate, MultiAdam and MultiWeightedSum against
 * their definition, the composition of the single-tensor ops (MomentumSGDUpdate, Adam,
 * WeightedSum; themselves tested against double references in test_optimizer.c): one
 * multi op over n tensors must leave
 * every parameter and optimizer state BIT-identical (memcmp) to n single ops, over
 * several steps with fresh random gradients, for plain and Nesterov momentum, Adam and
 * the weighted sum (an SGD step, a weight decay),
 * with lists of mixed sizes (empty tensors, one element, 2-D, a tensor past the
 * kernels' threading threshold), with a skip input that is zero, nonzero or NaN, and
 * with outputs in other blobs (a skipped step copies). Then the errors: counts, dtypes,
 * shapes, scalars, and the in-place rules, each message naming the op and the blob.
 * (The single ops take FLOAT only, so FP32 is the one dtype to compare.)
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

#include "op_test_util.h"

enum { STEPS = 4, MAXT = 8 };

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* The tensors' shapes: empty, one element, 2-D, odd, larger than the CPU kernels'
 * threading threshold (1 << 16), empty 3-D, and a small one last. */
typedef struct shape {
  int ndim;
  int64_t dims[3];
} shape;
static const shape shapes[] = {{1, {0}},    {1, {1}},       {2, {3, 5}},  {1, {300}},
                               {1, {70001}}, {3, {2, 0, 3}}, {1, {17}}};
static const int NT = (int)(sizeof shapes / sizeof shapes[0]);

static int64_t numel(const shape *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++)
    n *= s->dims[d];
  return n;
}

static char *name(char *buf, const char *set, const char *role, int k) {
  snprintf(buf, 64, "%s_%s%d", set, role, k);
  return buf;
}

/* Feeds set's blob role_k with random values in [lo, hi) (the same values for every set
 * fed from the same seed state). */
static void feed_random(dm_workspace *ws, const char *set, const char *role, int k,
                        uint64_t *seed, double lo, double hi) {
  const shape *s = &shapes[k];
  int64_t n = numel(s);
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++)
    v[i] = (float)opt_uniform(seed, lo, hi);
  char b[64];
  opt_feed(ws, name(b, set, role, k), DM_FLOAT, s->ndim, s->dims, v);
  free(v);
}

/* Feeds role_k of sets "s" and "m", every k, with the same random values. */
static void feed_both(dm_workspace *ws, const char *role, uint64_t *seed, double lo, double hi) {
  for (int k = 0; k < NT; k++) {
    uint64_t b = *seed;
    feed_random(ws, "s", role, k, seed, lo, hi);
    feed_random(ws, "m", role, k, &b, lo, hi);
  }
}

static void feed_scalar(dm_workspace *ws, const char *blob, float v) {
  static const int64_t one[1] = {1};
  opt_feed(ws, blob, DM_FLOAT, 1, one, &v);
}

/* memcmp of set a's and set b's role_k. */
static void expect_same(dm_workspace *ws, const char *a, const char *b, const char *role, int k,
                        const char *what, int step) {
  char na[64], nb[64];
  const shape *s = &shapes[k];
  const dm_tensor *x = opt_fetch(ws, name(na, a, role, k), DM_FLOAT, s->ndim, s->dims);
  const dm_tensor *y = opt_fetch(ws, name(nb, b, role, k), DM_FLOAT, s->ndim, s->dims);
  size_t bytes = (size_t)numel(s) * sizeof(float);
  if (bytes && memcmp(dm_tensor_data(x), dm_tensor_data(y), bytes) != 0) {
    const float *fx = dm_tensor_data(x), *fy = dm_tensor_data(y);
    for (int64_t i = 0; i < numel(s); i++)
      if (memcmp(&fx[i], &fy[i], sizeof(float)) != 0)
        fail_msg("%s step %d: %s [%lld]: single %.9g, multi %.9g", what, step, na, (long long)i,
                 fx[i], fy[i]);
  }
}

/* ---- MultiMomentumSGDUpdate ----------------------------------------------------------- */

/* One step of n MomentumSGDUpdate ops on set "s" and one MultiMomentumSGDUpdate on set
 * "m"; outputs into set out_s / out_m ("s", "m": in place). */
static void momentum_step(dm_workspace *ws, int nesterov, const char *skip, const char *out_s,
                          const char *out_m) {
  char b[64];
  for (int k = 0; k < NT; k++) {
    opt_op *op = opt_new("MomentumSGDUpdate");
    opt_in(op, name(b, "s", "g", k));
    opt_in(op, name(b, "s", "m", k));
    opt_in(op, "lr");
    opt_in(op, name(b, "s", "p", k));
    if (skip)
      opt_in(op, skip);
    opt_out(op, name(b, out_s, "g", k));
    opt_out(op, name(b, out_s, "m", k));
    opt_out(op, name(b, out_s, "p", k));
    opt_arg_float(op, "momentum", 0.9f);
    opt_arg_int(op, "nesterov", nesterov);
    assert_int_equal(opt_run(op, ws), DM_OK);
  }
  opt_op *op = opt_new("MultiMomentumSGDUpdate");
  for (int k = 0; k < NT; k++)
    opt_in(op, name(b, "m", "g", k));
  for (int k = 0; k < NT; k++)
    opt_in(op, name(b, "m", "m", k));
  opt_in(op, "lr");
  for (int k = 0; k < NT; k++)
    opt_in(op, name(b, "m", "p", k));
  if (skip)
    opt_in(op, skip);
  static const char *const roles[3] = {"g", "m", "p"};
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < NT; k++)
      opt_out(op, name(b, out_m, roles[r], k));
  opt_arg_float(op, "momentum", 0.9f);
  opt_arg_int(op, "nesterov", nesterov);
  assert_int_equal(opt_run(op, ws), DM_OK);
}

static void run_momentum(dm_workspace *ws, int nesterov) {
  uint64_t seed = 0x5eed + (uint64_t)nesterov;
  static const int64_t one[1] = {1};
  feed_both(ws, "p", &seed, -1, 1);
  feed_both(ws, "m", &seed, -0.1, 0.1);
  feed_scalar(ws, "lr", 0.05f);
  const char *what = nesterov ? "nesterov momentum" : "momentum";
  /* skip: none, 0, 1, NaN, then none again. */
  for (int step = 0; step < STEPS + 3; step++) {
    feed_both(ws, "g", &seed, -2, 2);
    const char *skip = NULL;
    if (step >= 1 && step <= 3) {
      float v = step == 1 ? 0.0f : step == 2 ? 1.0f : NAN;
      opt_feed(ws, "skip", DM_FLOAT, 1, one, &v);
      skip = "skip";
    }
    momentum_step(ws, nesterov, skip, "s", "m");
    for (int k = 0; k < NT; k++) {
      expect_same(ws, "s", "m", "g", k, what, step);
      expect_same(ws, "s", "m", "m", k, what, step);
      expect_same(ws, "s", "m", "p", k, what, step);
    }
  }
  /* Outputs in other blobs: a skipped step copies the inputs there, an applied one
   * writes the update. */
  for (int v = 1; v >= 0; v--) {
    uint8_t flag = (uint8_t)v;
    opt_feed(ws, "bskip", DM_BOOL, 1, one, &flag);
    momentum_step(ws, nesterov, "bskip", "so", "mo");
    for (int k = 0; k < NT; k++)
      for (int r = 0; r < 3; r++)
        expect_same(ws, "so", "mo", (const char *[]){"g", "m", "p"}[r], k, what, 100 + v);
  }
}

static void test_momentum(void **state) { run_momentum(*state, 0); }
static void test_nesterov(void **state) { run_momentum(*state, 1); }

/* ---- MultiAdam ------------------------------------------------------------------------- */

static void adam_step(dm_workspace *ws, const char *skip) {
  char b[64];
  for (int k = 0; k < NT; k++) {
    opt_op *op = opt_new("Adam");
    opt_in(op, name(b, "s", "p", k));
    opt_in(op, name(b, "s", "m", k));
    opt_in(op, name(b, "s", "v", k));
    opt_in(op, name(b, "s", "g", k));
    opt_in(op, "lr");
    opt_in(op, "iter");
    if (skip)
      opt_in(op, skip);
    opt_out(op, name(b, "s", "p", k));
    opt_out(op, name(b, "s", "m", k));
    opt_out(op, name(b, "s", "v", k));
    opt_arg_float(op, "beta1", 0.8f);
    opt_arg_float(op, "beta2", 0.99f);
    opt_arg_float(op, "epsilon", 1e-6f);
    assert_int_equal(opt_run(op, ws), DM_OK);
  }
  opt_op *op = opt_new("MultiAdam");
  static const char *const roles[4] = {"p", "m", "v", "g"};
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < NT; k++)
      opt_in(op, name(b, "m", roles[r], k));
  opt_in(op, "lr");
  opt_in(op, "iter");
  if (skip)
    opt_in(op, skip);
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < NT; k++)
      opt_out(op, name(b, "m", roles[r], k));
  opt_arg_float(op, "beta1", 0.8f);
  opt_arg_float(op, "beta2", 0.99f);
  opt_arg_float(op, "epsilon", 1e-6f);
  assert_int_equal(opt_run(op, ws), DM_OK);
}

static void test_adam(void **state) {
  dm_workspace *ws = *state;
  uint64_t seed = 0xada;
  static const int64_t one[1] = {1};
  feed_both(ws, "p", &seed, -1, 1);
  feed_both(ws, "m", &seed, -0.1, 0.1);
  feed_both(ws, "v", &seed, 0, 0.01);
  feed_scalar(ws, "lr", -0.01f);
  for (int step = 0; step < STEPS + 2; step++) {
    int64_t it = step + 1;
    opt_feed(ws, "iter", DM_INT64, 1, one, &it);
    feed_both(ws, "g", &seed, -2, 2);
    const char *skip = NULL;
    if (step == 1 || step == 2) {
      int32_t v = step == 2; /* 0: applied, 1: skipped */
      opt_feed(ws, "skip", DM_INT32, 1, one, &v);
      skip = "skip";
    }
    adam_step(ws, skip);
    for (int k = 0; k < NT; k++) {
      expect_same(ws, "s", "m", "p", k, "adam", step);
      expect_same(ws, "s", "m", "m", k, "adam", step);
      expect_same(ws, "s", "m", "v", k, "adam", step);
    }
  }
}

/* ---- MultiWeightedSum ------------------------------------------------------------------- */

/* x_k = w0 x_k + w1 z_k by n WeightedSums on set "s" and one MultiWeightedSum on set "m";
 * outputs into set out_s / out_m. */
static void wsum_step(dm_workspace *ws, const char *skip, const char *out_s, const char *out_m) {
  char b[64];
  for (int k = 0; k < NT; k++) {
    opt_op *op = opt_new("WeightedSum");
    opt_in(op, name(b, "s", "x", k));
    opt_in(op, "w0");
    opt_in(op, name(b, "s", "z", k));
    opt_in(op, "w1");
    if (skip)
      opt_in(op, skip);
    opt_out(op, name(b, out_s, "x", k));
    assert_int_equal(opt_run(op, ws), DM_OK);
  }
  opt_op *op = opt_new("MultiWeightedSum");
  for (int k = 0; k < NT; k++)
    opt_in(op, name(b, "m", "x", k));
  opt_in(op, "w0");
  for (int k = 0; k < NT; k++)
    opt_in(op, name(b, "m", "z", k));
  opt_in(op, "w1");
  if (skip)
    opt_in(op, skip);
  for (int k = 0; k < NT; k++)
    opt_out(op, name(b, out_m, "x", k));
  assert_int_equal(opt_run(op, ws), DM_OK);
}

static void test_weighted_sum(void **state) {
  dm_workspace *ws = *state;
  uint64_t seed = 0x3e5;
  static const int64_t one[1] = {1};
  feed_both(ws, "x", &seed, -1, 1);
  feed_scalar(ws, "w0", 1.0f);
  feed_scalar(ws, "w1", -0.03f);
  for (int step = 0; step < STEPS + 2; step++) {
    feed_both(ws, "z", &seed, -2, 2);
    const char *skip = NULL;
    if (step == 1 || step == 2) {
      int64_t v = step == 2;
      opt_feed(ws, "skip", DM_INT64, 1, one, &v);
      skip = "skip";
    }
    wsum_step(ws, skip, "s", "m");
    for (int k = 0; k < NT; k++)
      expect_same(ws, "s", "m", "x", k, "weighted sum", step);
  }
  for (int v = 1; v >= 0; v--) {
    uint8_t flag = (uint8_t)v;
    opt_feed(ws, "bskip", DM_BOOL, 1, one, &flag);
    wsum_step(ws, "bskip", "so", "mo");
    for (int k = 0; k < NT; k++)
      expect_same(ws, "so", "mo", "x", k, "weighted sum", 100 + v);
  }
}

/* ---- errors ------------------------------------------------------------------------------ */

/* Two tensors a (3) and b (4) with grads, moments, lr, iter. */
static void feed_small(dm_workspace *ws) {
  static const int64_t d3[1] = {3}, d4[1] = {4}, one[1] = {1}, two[1] = {2};
  static const float v[4] = {1, 2, 3, 4};
  static const uint16_t h[3] = {0x3c00, 0x3c00, 0x3c00};
  static const char *const blobs[] = {"a", "a_g", "a_m", "a_v", "b", "b_g", "b_m", "b_v"};
  for (int i = 0; i < 8; i++)
    opt_feed(ws, blobs[i], DM_FLOAT, 1, i < 4 ? d3 : d4, v);
  opt_feed(ws, "b_m3", DM_FLOAT, 1, d3, v);
  opt_feed(ws, "a_g16", DM_FLOAT16, 1, d3, h);
  float lr = 0.1f;
  int64_t it = 1;
  opt_feed(ws, "lr", DM_FLOAT, 1, one, &lr);
  opt_feed(ws, "lr2", DM_FLOAT, 1, two, v);
  opt_feed(ws, "iter", DM_INT64, 1, one, &it);
  opt_feed(ws, "fiter", DM_FLOAT, 1, one, &lr);
}

/* MultiMomentumSGDUpdate over (a, b) with the given inputs and outputs (NULL-ended). */
static dm_status momentum_op(dm_workspace *ws, const char *const *in, const char *const *out) {
  opt_op *op = opt_new("MultiMomentumSGDUpdate");
  for (; *in; in++)
    opt_in(op, *in);
  for (; *out; out++)
    opt_out(op, *out);
  return opt_run(op, ws);
}

static void test_errors(void **state) {
  dm_workspace *ws = *state;
  feed_small(ws);
  /* The good form runs. */
  const char *in_ok[] = {"a_g", "b_g", "a_m", "b_m", "lr", "a", "b", NULL};
  const char *out_ok[] = {"a_g", "b_g", "a_m", "b_m", "a", "b", NULL};
  assert_int_equal(momentum_op(ws, in_ok, out_ok), DM_OK);
  /* Counts. */
  const char *out5[] = {"a_g", "b_g", "a_m", "b_m", "a", NULL};
  opt_expect_error(momentum_op(ws, in_ok, out5), DM_ERR_INVALID, "MultiMomentumSGDUpdate",
                   "5 outputs", "3 per tensor", NULL);
  const char *in6[] = {"a_g", "b_g", "a_m", "b_m", "lr", "a", NULL};
  opt_expect_error(momentum_op(ws, in6, out_ok), DM_ERR_INVALID, "2 tensors", "needs 7 inputs",
                   "it has 6", NULL);
  /* Dtype, shape, lr. */
  const char *in_h[] = {"a_g16", "b_g", "a_m", "b_m", "lr", "a", "b", NULL};
  const char *out_h[] = {"a_g16", "b_g", "a_m", "b_m", "a", "b", NULL};
  opt_expect_error(momentum_op(ws, in_h, out_h), DM_ERR_TYPE, "grad 1", "'a_g16'", "FLOAT16",
                   NULL);
  const char *in_s[] = {"a_g", "b_g", "a_m", "b_m3", "lr", "a", "b", NULL};
  const char *out_s[] = {"a_g", "b_g", "a_m", "b_m3", "a", "b", NULL};
  opt_expect_error(momentum_op(ws, in_s, out_s), DM_ERR_SHAPE, "moment 2", "'b_m3'", "'b_g'",
                   NULL);
  const char *in_l[] = {"a_g", "b_g", "a_m", "b_m", "lr2", "a", "b", NULL};
  opt_expect_error(momentum_op(ws, in_l, out_ok), DM_ERR_SHAPE, "lr", "'lr2'", NULL);
  /* In place only on its own input; no output twice. */
  const char *out_x[] = {"a_m", "b_g", "new_m", "b_m", "a", "b", NULL};
  opt_expect_error(momentum_op(ws, in_ok, out_x), DM_ERR_INVALID, "output 0 'a_m'", "grad 1",
                   "is input 2", NULL);
  const char *out_d[] = {"a_g", "b_g", "a_m", "b_m", "x", "x", NULL};
  opt_expect_error(momentum_op(ws, in_ok, out_d), DM_ERR_INVALID, "outputs 4 and 5", "'x'",
                   NULL);
  /* MultiAdam: iter's dtype, the skip scalar, the counts. */
  opt_op *op = opt_new("MultiAdam");
  static const char *const adam_in[] = {"a", "a_m", "a_v", "a_g", "lr", "fiter"};
  for (int i = 0; i < 6; i++)
    opt_in(op, adam_in[i]);
  opt_out(op, "a");
  opt_out(op, "a_m");
  opt_out(op, "a_v");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "MultiAdam", "iter", "'fiter'", NULL);
  op = opt_new("MultiAdam");
  for (int i = 0; i < 5; i++)
    opt_in(op, adam_in[i]);
  opt_in(op, "iter");
  opt_in(op, "lr2"); /* a two-element skip */
  opt_out(op, "a");
  opt_out(op, "a_m");
  opt_out(op, "a_v");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "skip", "'lr2'", NULL);
  op = opt_new("MultiAdam");
  for (int i = 0; i < 5; i++)
    opt_in(op, adam_in[i]);
  opt_in(op, "iter");
  opt_in(op, "lr");
  opt_in(op, "lr");
  opt_out(op, "a");
  opt_out(op, "a_m");
  opt_out(op, "a_v");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "MultiAdam", "needs 6 inputs",
                   "7 with a skip input", "it has 8", NULL);
  /* MultiWeightedSum: z's shape, w1 a scalar, the counts. */
  op = opt_new("MultiWeightedSum");
  opt_in(op, "a");
  opt_in(op, "lr");
  opt_in(op, "b_g");
  opt_in(op, "lr");
  opt_out(op, "a");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "MultiWeightedSum", "z 1", "'b_g'", "'a'",
                   NULL);
  op = opt_new("MultiWeightedSum");
  opt_in(op, "a");
  opt_in(op, "lr");
  opt_in(op, "a_g");
  opt_in(op, "lr2");
  opt_out(op, "a");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "w1", "'lr2'", NULL);
  op = opt_new("MultiWeightedSum");
  opt_in(op, "a");
  opt_in(op, "lr");
  opt_in(op, "a_g");
  opt_in(op, "lr");
  opt_out(op, "a");
  opt_out(op, "b");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "2 tensors", "needs 6 inputs", "it has 4",
                   NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_momentum, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nesterov, setup, teardown),
      cmocka_unit_test_setup_teardown(test_adam, setup, teardown),
      cmocka_unit_test_setup_teardown(test_weighted_sum, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
