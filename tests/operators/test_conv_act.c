/* test_conv_act.c: ConvFusion's `activation` (operators/conv_fusion.c, conv_args.c): the
 * reference kernel against the unfused ops it replaces, and the oneDNN engine's post-ops
 * (operators/dnnl/conv.c) against the reference kernel, for every activation the fusion
 * pass fuses (Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu in both
 * forms, Swish) and Erf, which the engine leaves to the reference kernel, with
 * fusion_type 1 and 3 (S), plain and blocked X; and the errors.
 *
 * Reference: the fused epilogue computes the unfused ops' formulas on the same FP32
 * values (the conv's result, then the activation's; Swish is Y * Sigmoid(Y) as Sigmoid
 * then Mul), so in FP32 it is the unfused pair bit for bit.
 *
 * Engine: its convolution sums the same terms in another order, each side erring by at
 * most L u32 T (T the sum of |terms| behind an output, bounded here by K max|x| max|w| +
 * |b| + |S|, L = K + 2 of them, u32 = 2^-24), so the two convolutions differ by 2 L u32 T;
 * the activations pass that on times their largest slope (1.5: HardSwish's at 3; Gelu's
 * and Swish's are under 1.13), and oneDNN's approximations of the transcendental ones
 * add a few units in the last place (16 u32 |y|, and 16 u32 absolute near 0). BF16: each
 * side's Y rounded once more (2^-8 |y| each), from inputs that are the same BF16 values.
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
#include "op_test_util.h"
#if DM_TEST_DNNL
#include "dnnl_test_util.h"
#endif

static dm_workspace *ws_ref; /* REFERENCE: the fused op against the unfused ones */
static uint64_t seed = 5;

typedef struct act_case {
  const char *name;          /* ConvFusion's activation */
  const char *arg[2];        /* its arguments */
  float val[2];
} act_case;

static const act_case acts[] = {
    {"Relu", {NULL}, {0}},
    {"Clip", {"min", "max"}, {0.0f, 6.0f}},
    {"Clip", {"min", "max"}, {-0.5f, 0.25f}},
    {"LeakyRelu", {"alpha", NULL}, {0.1f}},
    {"Sigmoid", {NULL}, {0}},
    {"Tanh", {NULL}, {0}},
    {"HardSigmoid", {"alpha", "beta"}, {0.2f, 0.5f}},
    {"HardSwish", {NULL}, {0}},
    {"Gelu", {NULL}, {0}},
    {"Gelu", {"fast_gelu", NULL}, {1}},
    {"Swish", {NULL}, {0}},
    {"Erf", {NULL}, {0}}, /* no oneDNN post-op: the engine leaves it to the reference */
};
#define N_ACTS (sizeof acts / sizeof acts[0])

static void set_args(opt_op *op, const act_case *a) {
  for (int i = 0; i < 2 && a->arg[i]; i++)
    if (strcmp(a->arg[i], "fast_gelu") == 0)
      opt_arg_int(op, a->arg[i], (int64_t)a->val[i]);
    else
      opt_arg_float(op, a->arg[i], a->val[i]);
}

static void conv_args(opt_op *op) {
  opt_arg_int(op, "kernel", 3);
  opt_arg_int(op, "pad", 1);
  opt_arg_int(op, "stride", 1);
}

/* ConvFusion(X, W, b, [S]) -> out with activation a (fusion_type 1, or 3 with S). */
static opt_op *fused(const act_case *a, int with_s, const char *out) {
  opt_op *op = opt_new("ConvFusion");
  opt_in(op, "X");
  opt_in(op, "W");
  opt_in(op, "b");
  if (with_s)
    opt_in(op, "S");
  opt_out(op, out);
  conv_args(op);
  opt_arg_int(op, "fusion_type", with_s ? 3 : 1);
  opt_arg_string(op, "activation", a->name);
  set_args(op, a);
  return op;
}

static void run_ok(opt_op *op, dm_workspace *ws, const char *who) {
  dm_status s = opt_run(op, ws);
  if (s != DM_OK)
    fail_msg("%s: %s", who, dm_last_error());
}

/* The unfused ops on the reference: Conv (+ Add S), then the activation's op (Swish:
 * Sigmoid and Mul) -> "U". */
static void unfused(const act_case *a, int with_s) {
  opt_op *c = opt_new("Conv");
  opt_in(c, "X");
  opt_in(c, "W");
  opt_in(c, "b");
  opt_out(c, "C");
  conv_args(c);
  run_ok(c, ws_ref, "Conv");
  if (with_s) {
    opt_op *add = opt_new("Add");
    opt_in(add, "C");
    opt_in(add, "S");
    opt_out(add, "C");
    run_ok(add, ws_ref, "Add");
  }
  int swish = strcmp(a->name, "Swish") == 0;
  opt_op *f = opt_new(swish ? "Sigmoid" : a->name);
  opt_in(f, "C");
  opt_out(f, swish ? "G" : "U");
  set_args(f, a);
  run_ok(f, ws_ref, a->name);
  if (swish) {
    opt_op *m = opt_new("Mul");
    opt_in(m, "C");
    opt_in(m, "G");
    opt_out(m, "U");
    run_ok(m, ws_ref, "Mul");
  }
}

static const int64_t xd[4] = {2, 20, 6, 5}, wd_[4] = {24, 20, 3, 3}, bd[1] = {24},
                     yd[4] = {2, 24, 6, 5};

/* Feeds X, W, b, S to ws (FP32 or BF16), the same values every time it is called after
 * the same seed. */
static void feed_all(dm_workspace *ws, dm_dtype t, uint64_t s0) {
  static float v[8192];
  static uint16_t h[8192];
  const int64_t *dims[4] = {xd, wd_, bd, yd};
  const int nd[4] = {4, 4, 1, 4};
  const char *names[4] = {"X", "W", "b", "S"};
  const double scale[4] = {2, 0.25, 1, 1};
  uint64_t sd = s0;
  for (int k = 0; k < 4; k++) {
    int64_t n = 1;
    for (int i = 0; i < nd[k]; i++)
      n *= dims[k][i];
    assert_true(n <= 8192);
    for (int64_t i = 0; i < n; i++) {
      v[i] = (float)opt_uniform(&sd, -scale[k], scale[k]);
      h[i] = dm_float_to_bf16(v[i]);
      if (t == DM_BFLOAT16)
        v[i] = dm_bf16_to_float(h[i]);
    }
    opt_feed(ws, names[k], t, nd[k], dims[k], t == DM_BFLOAT16 ? (const void *)h : v);
  }
}

static void test_reference_vs_unfused(void **state) {
  (void)state;
  for (size_t k = 0; k < N_ACTS; k++)
    for (int with_s = 0; with_s < 2; with_s++) {
      feed_all(ws_ref, DM_FLOAT, seed + k);
      run_ok(fused(&acts[k], with_s, "Y"), ws_ref, "ConvFusion");
      unfused(&acts[k], with_s);
      const dm_tensor *y = dm_workspace_tensor(ws_ref, "Y"), *u = dm_workspace_tensor(ws_ref, "U");
      assert_int_equal(y->numel, u->numel);
      const float *py = dm_tensor_data(y), *pu = dm_tensor_data(u);
      for (int64_t i = 0; i < y->numel; i++)
        if (memcmp(&py[i], &pu[i], sizeof(float)) != 0)
          fail_msg("%s%s: Y[%lld] = %.9g, unfused %.9g", acts[k].name, with_s ? " + S" : "",
                   (long long)i, py[i], pu[i]);
    }
}

/* The activation's argument errors, as the reference words them. */
static void test_errors(void **state) {
  (void)state;
  feed_all(ws_ref, DM_FLOAT, seed);
  const act_case bad_name = {"Softplus", {NULL}, {0}}, bad_clip = {"Clip", {"min", "max"}, {1, 0}};
  opt_expect_error(opt_run(fused(&bad_name, 0, "Y"), ws_ref), DM_ERR_INVALID,
                   "activation 'Softplus' is not Relu, Swish or an op of the unary family",
                   NULL);
  opt_expect_error(opt_run(fused(&bad_clip, 0, "Y"), ws_ref), DM_ERR_INVALID,
                   "Clip's min 1 is above its max 0", NULL);
  opt_op *op = opt_new("ConvFusion"); /* a sum without an activation, given one */
  opt_in(op, "X");
  opt_in(op, "W");
  opt_in(op, "b");
  opt_in(op, "S");
  opt_out(op, "Y");
  conv_args(op);
  opt_arg_int(op, "fusion_type", 2);
  opt_arg_string(op, "activation", "Clip");
  opt_expect_error(opt_run(op, ws_ref), DM_ERR_INVALID,
                   "activation 'Clip' with fusion_type 2, which has none", NULL);
}

#if DM_TEST_DNNL
/* The engine's post-ops against the reference kernel. */
static void test_engine(void **state) {
  (void)state;
  dm_workspace *wd, *wr;
  assert_int_equal(dtu_two_workspaces(&wd, &wr), 0);
  const double u32 = 0x1p-24, K = 20 * 9, L = K + 2, T = K * 2 * 0.25 + 1 + 1;
  for (int m = 0; m < 2; m++) {
    dm_dtype t = m ? DM_BFLOAT16 : DM_FLOAT;
    if (m && !dm_dnnl_can(DM_DNNL_CONV, DM_BFLOAT16))
      continue; /* no BF16 convolutions below AVX-512 in oneDNN 2.6: the reference runs */
    for (size_t k = 0; k < N_ACTS; k++)
      for (int v = 0; v < 3; v++) { /* plain X; blocked X; with S */
        feed_all(wd, t, seed + k);
        feed_all(wr, t, seed + k);
        if (v == 1)
          dtu_make_blocked(wd, "X", 16);
        run_ok(fused(&acts[k], v == 2, "Y"), wd, "DNNL");
        run_ok(fused(&acts[k], v == 2, "Y"), wr, "REFERENCE");
        const dm_tensor *d = dm_workspace_tensor(wd, "Y"), *r = dm_workspace_tensor(wr, "Y");
        dtu_expect_alike(d, r);
        for (int64_t i = 0; i < d->numel; i++) {
          double a = dtu_val(d, i), b = dtu_val(r, i);
          double tol = 1.5 * 2 * L * u32 * T + 16 * u32 * (fabs(b) + 1);
          if (m)
            tol += 2 * 0x1p-8 * (fabs(b) + 1.5 * 2 * L * u32 * T);
          if (!(fabs(a - b) <= tol))
            fail_msg("%s %s%s: Y[%lld] = %.9g, reference %.9g (bound %.3g)", acts[k].name,
                     m ? "BF16" : "FP32", v == 1 ? " blocked" : v == 2 ? " + S" : "",
                     (long long)i, a, b, tol);
        }
      }
  }
  dtu_destroy_two(wd, wr);
}
#endif

static int setup(void **state) {
  (void)state;
  if (dm_workspace_create(&ws_ref) != DM_OK)
    return 1;
  return dm_workspace_set_engine(ws_ref, "REFERENCE") != DM_OK;
}

static int teardown(void **state) {
  (void)state;
  dm_workspace_destroy(ws_ref);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_vs_unfused),
      cmocka_unit_test(test_errors),
#if DM_TEST_DNNL
      cmocka_unit_test(test_engine),
#endif
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
