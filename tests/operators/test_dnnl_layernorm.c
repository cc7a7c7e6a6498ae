/* test_dnnl_layernorm.c: the oneDNN engine's LayerNorm and LayerNormGradient
 * (operators/dnnl/layernorm.c) against the reference kernels on the same inputs, FP32
 * and BF16, and its refusals (FP16, dX in dY's blob) that leave the op to the reference.
 *
 * Each op runs in two workspaces fed alike: one on the default engine (DNNL), one set to
 * "REFERENCE"; dm_op_probe_kernel says which kernel runs.
 *
 * Tolerances. oneDNN sums a row's D values, and then its squared deviations, in FP32:
 * the mean errs by at most D u32 max|x| and the variance by (D + 2) u32 of its terms, so
 * xhat = (x - mean) / std errs by (2D + 8) u32 (|xhat| + max|x| / std); y = xhat gamma +
 * beta adds u32 |y|, and each of dx's two row means the same D-term bound over |g| and
 * |g xhat|. The reference (double sums, one rounding) errs by u32 |y| itself. A BF16
 * output is rounded once by each: 2 u_bf16 |y| more. dgamma and dbeta: N-term FP32 sums.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "core/workspace.h"
#include "net/net.h"
#include "net/netdef_build.h"
#include "dnnl_test_util.h"
#include "op_test_util.h"
#include "operators/dnnl/dnnl_common.h"

DTU_TWO_WORKSPACES /* wd: DNNL (the default), wr: REFERENCE */


/* An op: type, inputs, outputs (NULL-ended), elementwise_affine and axis. */
typedef struct spec {
  const char *type;
  const char *in[7], *out[4];
  int affine;
  int64_t axis;
} spec;

static int count(const char *const *names, int cap) {
  int n = 0;
  while (n < cap && names[n])
    n++;
  return n;
}

static void run_in(dm_workspace *ws, const spec *s) {
  opt_op *op = opt_new(s->type);
  for (int i = 0; i < count(s->in, 7); i++)
    opt_in(op, s->in[i]);
  for (int i = 0; i < count(s->out, 4); i++)
    opt_out(op, s->out[i]);
  if (s->affine)
    opt_arg_int(op, "elementwise_affine", 1);
  opt_arg_int(op, "axis", s->axis);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s: %s", s->type, dm_last_error());
}

/* The engine of the kernel ws would run s with ("" for the reference's). */
static const char *engine_of(dm_workspace *ws, const spec *s) {
  Caffe2__OperatorDef *def;
  assert_int_equal(dm_opdef_new(s->type, &def), DM_OK);
  for (int i = 0; i < count(s->in, 7); i++)
    assert_int_equal(dm_opdef_add_input(def, s->in[i]), DM_OK);
  for (int i = 0; i < count(s->out, 4); i++)
    assert_int_equal(dm_opdef_add_output(def, s->out[i]), DM_OK);
  if (s->affine)
    assert_int_equal(dm_opdef_set_arg_int(def, "elementwise_affine", 1), DM_OK);
  assert_int_equal(dm_opdef_set_arg_int(def, "axis", s->axis), DM_OK);
  const dm_kernel_def *k = NULL;
  dm_status st = dm_op_probe_kernel(ws, def, DM_CPU, 0, &k);
  protobuf_c_message_free_unpacked(&def->base, NULL);
  assert_int_equal(st, DM_OK);
  return k->engine ? k->engine : "";
}

static void feed_both(const char *name, int mode, int ndim, const int64_t *d, const double *v) {
  opt_feed_mode(wd, name, mode, ndim, d, v);
  opt_feed_mode(wr, name, mode, ndim, d, v);
}

static double at(const dm_tensor *t, int64_t k) {
  if (t->dtype == DM_BFLOAT16)
    return dm_bf16_to_float(((const uint16_t *)dm_tensor_data(t))[k]);
  return ((const float *)dm_tensor_data(t))[k];
}

/* Output `name` of both workspaces, element k of row i (rows of D): |a - b| <= tol_k,
 * tol_k = c * (rel |b| + abs_k) for the row's abs_k. */
static double compare(const char *name, int64_t n, double rel, const double *abs_term,
                      int64_t per) {
  const dm_tensor *a = dm_workspace_tensor(wd, name), *b = dm_workspace_tensor(wr, name);
  assert_non_null(a), assert_non_null(b);
  assert_int_equal(a->numel, n);
  double worst = 0;
  for (int64_t k = 0; k < n; k++) {
    double va = at(a, k), vb = at(b, k), tol = rel * fabs(vb) + abs_term[k / per] + 0x1p-140;
    if (!(fabs(va - vb) <= tol))
      fail_msg("%s[%lld]: oneDNN %.9g, reference %.9g, tolerance %.3g", name, (long long)k, va,
               vb, tol);
    worst = fmax(worst, fabs(va - vb) / tol);
  }
  return worst;
}

static void check(int ndim, const int64_t *d, int axis, int affine, int mode, uint64_t seed) {
  dm_dtype t = opt_mode_dtype(mode);
  if (!dm_dnnl_can(DM_DNNL_LNORM, t) || !dm_dnnl_can(DM_DNNL_LNORM_BWD, t)) {
    print_message("oneDNN builds no %s layer normalization here: skipped\n", opt_mode_name(mode));
    return;
  }
  int64_t N = 1, D = 1;
  for (int i = 0; i < ndim; i++)
    *(i < axis ? &N : &D) *= d[i];
  double *x = opt_draw(N * D, -3, 3, mode, &seed), *dy = opt_draw(N * D, -1, 1, mode, &seed);
  double *g = opt_draw(D, 0.5, 1.5, 0, &seed), *b = opt_draw(D, -1, 1, 0, &seed);
  feed_both("X", mode, ndim, d, x);
  feed_both("dY", mode, ndim, d, dy);
  feed_both("gamma", 0, 1, &D, g);
  feed_both("beta", 0, 1, &D, b);
  spec f = {"LayerNorm", {"X", "gamma", "beta"}, {"Y", "mean", "std"}, affine, axis};
  if (!affine)
    f.in[1] = f.in[2] = NULL;
  spec gs = {"LayerNormGradient", {"dY", "Y", "mean", "std", "X", "gamma"}, {"dX", "dg", "db"},
             affine, axis};
  if (!affine)
    gs.in[5] = gs.out[1] = gs.out[2] = NULL;
  assert_string_equal(engine_of(wd, &f), "DNNL");
  assert_string_equal(engine_of(wd, &gs), "DNNL");
  assert_string_equal(engine_of(wr, &f), "");
  run_in(wd, &f), run_in(wr, &f);
  /* the gradient in both from the reference's statistics, so only the kernel differs */
  const char *const moved[] = {"Y", "mean", "std"};
  for (int i = 0; i < 3; i++) {
    const dm_tensor *m = dm_workspace_tensor(wr, moved[i]);
    assert_int_equal(dm_workspace_feed(wd, moved[i], m->dtype, m->ndim, m->dims,
                                       dm_tensor_data(m)), DM_OK);
  }
  run_in(wd, &gs), run_in(wr, &gs);
  /* per-row absolute terms of the bounds */
  const double u = OPT_U32, ub = mode ? 2 * opt_mode_u(mode) : 0;
  double *ay = malloc((size_t)N * sizeof *ay), *adx = malloc((size_t)N * sizeof *adx);
  double *ast = malloc((size_t)N * sizeof *ast), gmax = affine ? 1.5 : 1;
  const float *sd = dm_tensor_data(dm_workspace_tensor(wr, "std"));
  for (int64_t i = 0; i < N; i++) {
    double amax = 0, sgd = 0;
    for (int64_t j = 0; j < D; j++)
      amax = fmax(amax, fabs(x[i * D + j])), sgd += fabs(dy[i * D + j]) * gmax;
    double k = (2.0 * (double)D + 8) * u * (3 + amax / sd[i]);
    ay[i] = 2 * k * gmax;
    ast[i] = (double)(D + 4) * u * (amax + amax * amax / sd[i]) * 2;
    adx[i] = 2 * (2.0 * (double)D + 8) * u * (sgd / (double)D) * (4 + amax / sd[i]) / sd[i] * 3;
  }
  double r1 = compare("Y", N * D, 2 * u + ub, ay, D);
  double r2 = compare("mean", N, 2 * u, ast, 1);
  double r3 = compare("std", N, 4 * u, ast, 1);
  double r4 = compare("dX", N * D, 2 * u + ub, adx, D);
  double r5 = 0;
  if (affine) {
    /* N-term FP32 sums of |dy xhat| <= |dy| (3 + max|x| / std) and of |dy| */
    double s = 0;
    for (int64_t k = 0; k < N * D; k++)
      s += fabs(dy[k]) * 4;
    double *adg = malloc((size_t)D * sizeof *adg);
    for (int64_t j = 0; j < D; j++)
      adg[j] = 2 * ((double)N + 2) * u * s / (double)D * 8 + ub * s;
    r5 = fmax(compare("dg", D, 2 * u, adg, 1), compare("db", D, 2 * u, adg, 1));
    free(adg);
  }
  print_message("LayerNorm oneDNN %s N=%lld D=%lld affine=%d: Y %.2f mean %.2f std %.2f dX "
                "%.2f dgamma/dbeta %.2f of the bound\n", opt_mode_name(mode), (long long)N,
                (long long)D, affine, r1, r2, r3, r4, r5);
  free(x), free(dy), free(g), free(b), free(ay), free(adx), free(ast);
}

static void test_dnnl_layernorm_matches(void **state) {
  (void)state;
  int64_t d2[] = {16, 64}, d3[] = {2, 5, 48}, d4[] = {2, 3, 4, 7};
  for (int mode = 0; mode <= 2; mode += 2) {
    check(2, d2, 1, 1, mode, 1 + mode);
    check(3, d3, 2, 1, mode, 2 + mode);
    check(3, d3, 2, 0, mode, 3 + mode);
    check(4, d4, 1, 1, mode, 4 + mode); /* D over several dims */
  }
}

/* FP16 and an in-place dX are the reference's. */
static void test_dnnl_layernorm_refusals(void **state) {
  (void)state;
  int64_t d[] = {4, 8}, D = 8;
  uint64_t seed = 9;
  double *x = opt_draw(32, -1, 1, 1, &seed), *g = opt_draw(8, 0.5, 1.5, 0, &seed);
  opt_feed_mode(wd, "Xh", 1, 2, d, x);
  opt_feed_mode(wd, "gh", 0, 1, &D, g);
  spec f = {"LayerNorm", {"Xh"}, {"Yh", "mh", "sh"}, 0, 1};
  assert_string_equal(engine_of(wd, &f), "");
  run_in(wd, &f);
  opt_feed_mode(wd, "Xf", 0, 2, d, x);
  spec f32 = {"LayerNorm", {"Xf"}, {"Yf", "mf", "sf"}, 0, 1};
  run_in(wd, &f32);
  opt_feed_mode(wd, "dYf", 0, 2, d, x);
  spec gi = {"LayerNormGradient", {"dYf", "Yf", "mf", "sf", "Xf"}, {"dYf"}, 0, 1};
  if (dm_dnnl_can(DM_DNNL_LNORM_BWD, DM_FLOAT))
    assert_string_equal(engine_of(wd, &gi), "");
  run_in(wd, &gi);
  free(x), free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dnnl_layernorm_matches),
      cmocka_unit_test(test_dnnl_layernorm_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
