/* test_gather.c: Gather on FP16/BF16 embedding tables, and GatherGradient (the dense
 * scatter-add) against a double-precision reference, by finite differences through the
 * gradient maker, and with hostile inputs. (Gather's FP32 forms and argument errors are
 * test_shape_ops.c's.)
 *
 * Bounds (derived): Gather copies, so its output is bit-exact in every dtype. dDATA sums,
 * per table entry, the k dY values whose index is that row, in FP32 in index order, from
 * dY values widened exactly: a sum of k terms rounded k - 1 times errs by at most
 * (k - 1) u32 sum |terms| (no 16-bit rounding: dDATA is FP32 for every dtype).
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

#include "demitasse_plugin.h"
#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

enum { V = 11, C = 5, NB = 3, T = 7 };

/* A [V, C] table in each mode gathered by [NB, T] token ids: bit-exact rows. */
static void test_gather_16bit(void **state) {
  dm_workspace *ws = *state;
  int32_t ids[NB * T];
  uint64_t s = 1;
  for (int i = 0; i < NB * T; i++)
    ids[i] = (int32_t)opt_uniform(&s, 0, V);
  int64_t dt[] = {V, C}, di[] = {NB, T}, dy[] = {NB, T, C};
  opt_feed(ws, "ids", DM_INT32, 2, di, ids);
  for (int mode = 0; mode < 3; mode++) {
    double *tab = opt_draw(V * C, -3, 3, mode, &s);
    opt_feed_mode(ws, "E", mode, 2, dt, tab);
    opt_op *op = opt_new("Gather");
    opt_in(op, "E"), opt_in(op, "ids"), opt_out(op, "Y");
    if (opt_run(op, ws) != DM_OK)
      fail_msg("%s", dm_last_error());
    const dm_tensor *y = opt_fetch(ws, "Y", opt_mode_dtype(mode), 3, dy);
    for (int i = 0; i < NB * T; i++)
      for (int c = 0; c < C; c++) {
        double ref = tab[ids[i] * C + c];
        double got = mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(y))[i * C + c])
                          : ((const float *)dm_tensor_data(y))[i * C + c];
        if (got != ref)
          fail_msg("%s Y[%d,%d] = %.9g, table row %d has %.9g", opt_mode_name(mode), i, c, got,
                   ids[i], ref);
      }
    free(tab);
  }
}

/* GatherGradient of DATA [A, B, R] gathered along `axis` by `n` indices (repeats
 * included, negative ones with wrap) against the double scatter-add. */
static void check_grad(dm_workspace *ws, int mode, int axis, int wrap, uint64_t seed) {
  int64_t dd[3] = {4, 6, 3}, nidx = 9;
  int64_t along = dd[axis];
  int64_t idx[9];
  uint64_t s = seed;
  for (int j = 0; j < nidx; j++) {
    idx[j] = (int64_t)opt_uniform(&s, 0, (double)along);
    if (wrap && j % 3 == 0)
      idx[j] -= along; /* the same row, counted from the end */
  }
  idx[1] = idx[0] < 0 ? idx[0] + along : idx[0]; /* a repeat, written both ways under wrap */
  int64_t dyd[4], r = 0;
  for (int d = 0; d < axis; d++)
    dyd[r++] = dd[d];
  dyd[r++] = nidx;
  for (int d = axis + 1; d < 3; d++)
    dyd[r++] = dd[d];
  int64_t outer = 1, row = 1;
  for (int d = 0; d < axis; d++)
    outer *= dd[d];
  for (int d = axis + 1; d < 3; d++)
    row *= dd[d];
  int64_t ny = outer * nidx * row, nx = dd[0] * dd[1] * dd[2];
  double *g = opt_draw(ny, -2, 2, mode, &s);
  double *ref = calloc((size_t)nx, sizeof *ref), *mass = calloc((size_t)nx, sizeof *mass);
  int *k = calloc((size_t)nx, sizeof *k);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < nidx; j++) {
      int64_t q = idx[j] < 0 ? idx[j] + along : idx[j];
      for (int64_t c = 0; c < row; c++) {
        int64_t at = (o * along + q) * row + c;
        double v = g[(o * nidx + j) * row + c];
        ref[at] += v, mass[at] += fabs(v), k[at]++;
      }
    }
  float data[72] = {0};
  opt_feed(ws, "D", opt_mode_dtype(mode), 3, dd, data); /* its values are never read */
  int64_t di[1] = {nidx};
  opt_feed(ws, "I", DM_INT64, 1, di, idx);
  opt_feed_mode(ws, "dY", mode, r, dyd, g);
  opt_op *op = opt_new("GatherGradient");
  opt_in(op, "D"), opt_in(op, "I"), opt_in(op, "dY"), opt_out(op, "dD");
  opt_arg_int(op, "axis", axis);
  if (wrap)
    opt_arg_int(op, "wrap_indices", 1);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const float *got = dm_tensor_data(opt_fetch(ws, "dD", DM_FLOAT, 3, dd));
  for (int64_t i = 0; i < nx; i++) {
    double tol = (k[i] > 1 ? k[i] - 1 : 0) * OPT_U32 * mass[i];
    if (!(fabs(got[i] - ref[i]) <= tol))
      fail_msg("%s axis %d: dD[%lld] = %.9g, reference %.9g (%d rows, tolerance %.3g)",
               opt_mode_name(mode), axis, (long long)i, got[i], ref[i], k[i], tol);
  }
  /* deterministic: a second run is bit-identical */
  float *first = malloc((size_t)nx * sizeof *first);
  memcpy(first, got, (size_t)nx * sizeof *first);
  op = opt_new("GatherGradient");
  opt_in(op, "D"), opt_in(op, "I"), opt_in(op, "dY"), opt_out(op, "dD");
  opt_arg_int(op, "axis", axis);
  if (wrap)
    opt_arg_int(op, "wrap_indices", 1);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(first, dm_tensor_data(opt_fetch(ws, "dD", DM_FLOAT, 3, dd)),
                      (size_t)nx * sizeof *first);
  free(first), free(g), free(ref), free(mass), free(k);
}

static void test_gather_gradient(void **state) {
  dm_workspace *ws = *state;
  for (int mode = 0; mode < 3; mode++)
    for (int axis = 0; axis < 3; axis++)
      check_grad(ws, mode, axis, axis == 1, 10 + (uint64_t)(mode * 3 + axis));
  /* through the gradient maker, by finite differences: an embedding lookup with repeats */
  uint64_t s = 7;
  float tab[V * C];
  for (int i = 0; i < V * C; i++)
    tab[i] = (float)opt_uniform(&s, -1, 1);
  int32_t ids[NB * T];
  for (int i = 0; i < NB * T; i++)
    ids[i] = (int32_t)opt_uniform(&s, 0, 4); /* few rows: most ids repeat */
  gc_input in[] = {{"E", 2, {V, C}, tab, 1, 0}, {"ids", 2, {NB, T}, ids, 0, DM_INT32}};
  double w = gc_check("type: 'Gather' input: 'E' input: 'ids' output: 'Y'", in, 2, 1, 1);
  print_message("Gather gradient: worst %.2f of the tolerance\n", w);
}

static void test_gather_gradient_errors(void **state) {
  dm_workspace *ws = *state;
  float d[12] = {0}, g[6] = {0};
  int64_t dd[] = {4, 3}, di[] = {2}, dg[] = {2, 3}, dbad[] = {3, 3};
  int32_t bad[] = {1, 4}, neg[] = {-1, 0}, ok[] = {0, 3};
  opt_feed(ws, "D", DM_FLOAT, 2, dd, d);
  opt_feed(ws, "dY", DM_FLOAT, 2, dg, g);
  opt_feed(ws, "bad", DM_INT32, 1, di, bad);
  opt_feed(ws, "neg", DM_INT32, 1, di, neg);
  opt_feed(ws, "ok", DM_INT32, 1, di, ok);
  /* a pre-existing dD stays as it was when an index is out of range */
  float keep[12];
  for (int i = 0; i < 12; i++)
    keep[i] = (float)i;
  opt_feed(ws, "dD", DM_FLOAT, 2, dd, keep);
  static const char *const idx_blobs[] = {"bad", "neg"};
  static const char *const want[] = {"INDICES[1] = 4 is out of range for DATA dim 0 of size 4",
                                     "INDICES[0] = -1 is out of range"};
  for (int k = 0; k < 2; k++) {
    opt_op *op = opt_new("GatherGradient");
    opt_in(op, "D"), opt_in(op, idx_blobs[k]), opt_in(op, "dY"), opt_out(op, "dD");
    opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, want[k], idx_blobs[k], NULL);
    assert_memory_equal(dm_tensor_data(opt_fetch(ws, "dD", DM_FLOAT, 2, dd)), keep, sizeof keep);
  }
  /* dY of the wrong shape, dY of an integer dtype, float indices, dD into dY */
  opt_feed(ws, "dYbad", DM_FLOAT, 2, dbad, d);
  opt_op *op = opt_new("GatherGradient");
  opt_in(op, "D"), opt_in(op, "ok"), opt_in(op, "dYbad"), opt_out(op, "dD");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "dY is 3x3", "'dYbad'", NULL);
  int32_t gi[6] = {0};
  opt_feed(ws, "dYint", DM_INT32, 2, dg, gi);
  op = opt_new("GatherGradient");
  opt_in(op, "D"), opt_in(op, "ok"), opt_in(op, "dYint"), opt_out(op, "dD");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "dY is INT32", NULL);
  opt_feed(ws, "fi", DM_FLOAT, 1, di, g);
  op = opt_new("GatherGradient");
  opt_in(op, "D"), opt_in(op, "fi"), opt_in(op, "dY"), opt_out(op, "dD");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "INDICES is FLOAT", NULL);
  op = opt_new("GatherGradient");
  opt_in(op, "D"), opt_in(op, "ok"), opt_in(op, "dY"), opt_out(op, "dY");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "cannot run in place", NULL);
  op = opt_new("GatherGradient");
  opt_in(op, "D"), opt_in(op, "ok"), opt_in(op, "dY"), opt_out(op, "dD");
  opt_arg_int(op, "axis", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "axis", NULL);
  /* the forward's own range check names the blob too (an out-of-range token id) */
  op = opt_new("Gather");
  opt_in(op, "D"), opt_in(op, "bad"), opt_out(op, "Y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "INDICES[1] = 4", "'bad'", NULL);
  const dm_op_schema *sc = dm_schema_lookup("GatherGradient");
  assert_non_null(sc);
  assert_int_equal(sc->fp32_outputs, 0x1);
  assert_non_null(dm_schema_lookup("Gather")->gradient);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_gather_16bit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gather_gradient, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gather_gradient_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
