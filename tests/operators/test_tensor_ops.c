/* test_tensor_ops.c: Concat/Split (round trips in NCHW and NHWC, add_axis, split_info),
 * Reshape (0, -1, bad shapes), Flatten, Transpose (against an index-arithmetic reference)
 * and StopGradient, and every gradient against finite differences (grad_check.h).
 * These ops move values without arithmetic, so results must match bit for bit.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static void fill_seq(float *x, int64_t n, float base) {
  for (int64_t i = 0; i < n; i++)
    x[i] = base + (float)i;
}

/* Concat of a (2,3,4,5) and b (2,1,4,5) on `axis` via `order`, checked element by
 * element, then Split with split_info gives back exactly a and b. */
static void round_trip(dm_workspace *ws, const char *order, int axis) {
  int64_t da[4] = {2, 3, 4, 5}, db[4] = {2, 3, 4, 5}, dy[4] = {2, 3, 4, 5};
  da[axis] = 3, db[axis] = 1, dy[axis] = 4;
  int64_t na = 2 * 3 * 4 * 5 / (axis == 1 ? 3 : 5) * 3, nb = na / 3, ny = na + nb; /* a, b, y */
  float a[120], b[40];
  fill_seq(a, na, 0), fill_seq(b, nb, 1000);
  opt_feed(ws, "a", DM_FLOAT, 4, da, a);
  opt_feed(ws, "b", DM_FLOAT, 4, db, b);
  opt_op *op = opt_new("Concat");
  opt_in(op, "a"), opt_in(op, "b"), opt_out(op, "y"), opt_out(op, "info");
  opt_arg_string(op, "order", order);
  assert_int_equal(opt_run(op, ws), DM_OK);
  const float *y = dm_tensor_data(opt_fetch(ws, "y", DM_FLOAT, 4, dy));
  int64_t two = 2;
  const int32_t *info = dm_tensor_data(opt_fetch(ws, "info", DM_INT32, 1, &two));
  assert_int_equal(info[0], 3);
  assert_int_equal(info[1], 1);
  /* reference: walk y's multi-index; the axis coordinate picks a or b */
  int64_t idx[4];
  for (int64_t k = 0; k < ny; k++) {
    int64_t r = k;
    for (int d = 3; d >= 0; d--)
      idx[d] = r % dy[d], r /= dy[d];
    const float *src = idx[axis] < 3 ? a : b;
    const int64_t *ds = idx[axis] < 3 ? da : db;
    if (idx[axis] >= 3)
      idx[axis] -= 3;
    int64_t off = ((idx[0] * ds[1] + idx[1]) * ds[2] + idx[2]) * ds[3] + idx[3];
    if (y[k] != src[off])
      fail_msg("%s: y[%lld] = %g, expected %g", order, (long long)k, y[k], src[off]);
  }
  op = opt_new("Split");
  opt_in(op, "y"), opt_in(op, "info"), opt_out(op, "a2"), opt_out(op, "b2");
  opt_arg_string(op, "order", order);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "a2", DM_FLOAT, 4, da)), a,
                      (size_t)na * sizeof *a);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "b2", DM_FLOAT, 4, db)), b,
                      (size_t)nb * sizeof *b);
}

static void test_concat_split_round_trip(void **state) {
  round_trip(*state, "NCHW", 1);
  round_trip(*state, "NHWC", 3);
}

static void test_concat_add_axis_and_split_arg(void **state) {
  dm_workspace *ws = *state;
  int64_t d[2] = {2, 3};
  float a[6], b[6];
  fill_seq(a, 6, 0), fill_seq(b, 6, 10);
  opt_feed(ws, "a", DM_FLOAT, 2, d, a);
  opt_feed(ws, "b", DM_FLOAT, 2, d, b);
  opt_op *op = opt_new("Concat");
  opt_in(op, "a"), opt_in(op, "b"), opt_out(op, "y");
  opt_arg_int(op, "axis", 1), opt_arg_int(op, "add_axis", 1);
  assert_int_equal(opt_run(op, ws), DM_OK);
  int64_t dy[3] = {2, 2, 3};
  const float *y = dm_tensor_data(opt_fetch(ws, "y", DM_FLOAT, 3, dy));
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 3; k++)
      assert_true(y[i * 6 + k] == a[i * 3 + k] && y[i * 6 + 3 + k] == b[i * 3 + k]);
  /* Split with add_axis drops the axis again; the `split` argument, INT64 dtype */
  op = opt_new("Split");
  opt_in(op, "y"), opt_out(op, "a2"), opt_out(op, "b2");
  opt_arg_int(op, "axis", 1), opt_arg_int(op, "add_axis", 1);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "a2", DM_FLOAT, 2, d)), a, sizeof a);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "b2", DM_FLOAT, 2, d)), b, sizeof b);
  int64_t v[6] = {1, 2, 3, 4, 5, 6}, d6 = 6;
  opt_feed(ws, "v", DM_INT64, 1, &d6, v);
  op = opt_new("Split");
  opt_in(op, "v"), opt_out(op, "p"), opt_out(op, "q");
  const int64_t sp[2] = {4, 2};
  opt_arg_ints(op, "split", 2, sp), opt_arg_int(op, "axis", 0);
  assert_int_equal(opt_run(op, ws), DM_OK);
  int64_t d4 = 4, d2 = 2;
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "p", DM_INT64, 1, &d4)), v, 32);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "q", DM_INT64, 1, &d2)), v + 4, 16);
}

static void test_concat_split_errors(void **state) {
  dm_workspace *ws = *state;
  int64_t d1[2] = {2, 3}, d2[2] = {3, 3};
  float x[9] = {0};
  opt_feed(ws, "a", DM_FLOAT, 2, d1, x);
  opt_feed(ws, "b", DM_FLOAT, 2, d2, x);
  opt_op *op = opt_new("Concat");
  opt_in(op, "a"), opt_in(op, "b"), opt_out(op, "y");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "input 1 'b' is 3x3 and X0 is 2x3",
                   "may differ only in dim 1", NULL);
  op = opt_new("Concat");
  opt_in(op, "a"), opt_in(op, "b"), opt_out(op, "y");
  opt_arg_string(op, "order", "NHWC"); /* axis 3 of a 2-d tensor */
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "out of range for a 2-d tensor", NULL);
  op = opt_new("Split");
  opt_in(op, "a"), opt_out(op, "p"), opt_out(op, "q");
  opt_arg_int(op, "axis", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "dim 1 (3) does not split into 2 equal", NULL);
  op = opt_new("Split");
  opt_in(op, "a"), opt_out(op, "p"), opt_out(op, "q");
  const int64_t sp[2] = {1, 1};
  opt_arg_ints(op, "split", 2, sp), opt_arg_int(op, "axis", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "add up to 2, but dim 1 is 3", NULL);
}

static const dm_tensor *reshape(dm_workspace *ws, size_t n, const int64_t *shape, dm_status want) {
  opt_op *op = opt_new("Reshape");
  opt_in(op, "x"), opt_out(op, "y"), opt_out(op, "old");
  opt_arg_ints(op, "shape", n, shape);
  dm_status s = opt_run(op, ws);
  assert_int_equal(s, want);
  const dm_tensor *y = NULL;
  return s == DM_OK && dm_workspace_fetch(ws, "y", &y) == DM_OK ? y : NULL;
}

static void test_reshape(void **state) {
  dm_workspace *ws = *state;
  int64_t d[3] = {2, 3, 4};
  float x[24];
  fill_seq(x, 24, 0);
  opt_feed(ws, "x", DM_FLOAT, 3, d, x);
  const int64_t s1[] = {0, -1}, s2[] = {4, 0, 2}, s3[] = {-1}, s4[] = {24, 1, 1};
  const dm_tensor *y = reshape(ws, 2, s1, DM_OK);
  assert_int_equal(dm_tensor_ndim(y), 2);
  assert_int_equal(dm_tensor_dims(y)[0], 2);
  assert_int_equal(dm_tensor_dims(y)[1], 12);
  assert_memory_equal(dm_tensor_data(y), x, sizeof x);
  int64_t three = 3;
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "old", DM_INT64, 1, &three)), d, sizeof d);
  y = reshape(ws, 3, s2, DM_OK); /* 0 keeps X's dim 1 (3): 4 x 3 x 2 */
  assert_int_equal(dm_tensor_dims(y)[1], 3);
  y = reshape(ws, 1, s3, DM_OK);
  assert_int_equal(dm_tensor_dims(y)[0], 24);
  y = reshape(ws, 3, s4, DM_OK);
  assert_int_equal(dm_tensor_ndim(y), 3);
  /* new_shape as an INT32 input, in place */
  int32_t ns[2] = {6, -1};
  int64_t two = 2;
  opt_feed(ws, "ns", DM_INT32, 1, &two, ns);
  opt_op *op = opt_new("Reshape");
  opt_in(op, "x"), opt_in(op, "ns"), opt_out(op, "x");
  assert_int_equal(opt_run(op, ws), DM_OK);
  int64_t d64[2] = {6, 4};
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "x", DM_FLOAT, 2, d64)), x, sizeof x);
  opt_feed(ws, "x", DM_FLOAT, 3, d, x);
  const int64_t b1[] = {5, -1}, b2[] = {-1, -1}, b3[] = {7, 4}, b4[] = {0, 0, 0, 0}, b5[] = {-2, 12};
  reshape(ws, 2, b1, DM_ERR_SHAPE);
  opt_expect_error(DM_ERR_SHAPE, DM_ERR_SHAPE, "with a -1 dim: the other dims multiply to 5", NULL);
  reshape(ws, 2, b2, DM_ERR_SHAPE);
  opt_expect_error(DM_ERR_SHAPE, DM_ERR_SHAPE, "both -1", NULL);
  reshape(ws, 2, b3, DM_ERR_SHAPE);
  opt_expect_error(DM_ERR_SHAPE, DM_ERR_SHAPE, "cannot reshape X 2x3x4 (24 elements) to a shape "
                   "of 28 elements", NULL);
  reshape(ws, 4, b4, DM_ERR_SHAPE);
  opt_expect_error(DM_ERR_SHAPE, DM_ERR_SHAPE, "dim 3 is 0 (keep X's), but X 2x3x4 has only 3",
                   NULL);
  reshape(ws, 2, b5, DM_ERR_SHAPE);
  opt_expect_error(DM_ERR_SHAPE, DM_ERR_SHAPE, "dim 0 is -2", NULL);
  /* An empty 'shape' makes a scalar of one element (fuzz_net found it copied from the
   * arg's NULL array: undefined behaviour, caught by the ASan+UBSan build). */
  int64_t one = 1;
  opt_feed(ws, "x", DM_FLOAT, 1, &one, x);
  y = reshape(ws, 0, NULL, DM_OK);
  assert_int_equal(dm_tensor_ndim(y), 0);
  assert_int_equal(dm_tensor_numel(y), 1);
}

static void test_flatten(void **state) {
  dm_workspace *ws = *state;
  int64_t d[4] = {2, 3, 4, 5};
  float x[120];
  fill_seq(x, 120, 0);
  opt_feed(ws, "x", DM_FLOAT, 4, d, x);
  for (int axis = 0; axis <= 4; axis++) {
    opt_op *op = opt_new("Flatten");
    opt_in(op, "x"), opt_out(op, "y"), opt_arg_int(op, "axis", axis);
    assert_int_equal(opt_run(op, ws), DM_OK);
    int64_t m = 1;
    for (int i = 0; i < axis; i++)
      m *= d[i];
    int64_t dy[2] = {m, 120 / m};
    assert_memory_equal(dm_tensor_data(opt_fetch(ws, "y", DM_FLOAT, 2, dy)), x, sizeof x);
  }
}

/* Transpose against y[i0..] = x[permuted index], for FLOAT16 (2-byte path) and FLOAT,
 * element by element and in runs of trailing dims that stay in place. */
static void test_transpose(void **state) {
  dm_workspace *ws = *state;
  int64_t d[4] = {2, 3, 4, 5};
  float x[120];
  uint16_t h[120];
  fill_seq(x, 120, 0);
  for (int i = 0; i < 120; i++)
    h[i] = (uint16_t)(i * 7);
  /* the last three keep trailing dims in place (copied as runs of 20, 5 and 120) */
  const int64_t perms[6][4] = {{0, 2, 3, 1}, {3, 2, 1, 0}, {1, 0, 3, 2},
                               {1, 0, 2, 3}, {0, 2, 1, 3}, {0, 1, 2, 3}};
  for (int p = 0; p < 7; p++)
    for (int half = 0; half < 2; half++) {
      opt_feed(ws, "x", half ? DM_FLOAT16 : DM_FLOAT, 4, d, half ? (void *)h : (void *)x);
      opt_op *op = opt_new("Transpose");
      opt_in(op, "x"), opt_out(op, "y");
      const int64_t *perm = perms[p == 6 ? 1 : p];
      if (p < 6)
        opt_arg_ints(op, "axes", 4, perm); /* p == 6: no axes, the default reversal */
      assert_int_equal(opt_run(op, ws), DM_OK);
      int64_t dy[4];
      for (int i = 0; i < 4; i++)
        dy[i] = d[perm[i]];
      const void *y = dm_tensor_data(opt_fetch(ws, "y", half ? DM_FLOAT16 : DM_FLOAT, 4, dy));
      for (int64_t k = 0; k < 120; k++) {
        int64_t iy[4], ix[4], r = k;
        for (int i = 3; i >= 0; i--)
          iy[i] = r % dy[i], r /= dy[i];
        for (int i = 0; i < 4; i++)
          ix[perm[i]] = iy[i];
        int64_t off = ((ix[0] * 3 + ix[1]) * 4 + ix[2]) * 5 + ix[3];
        if (half ? ((const uint16_t *)y)[k] != h[off] : ((const float *)y)[k] != x[off])
          fail_msg("perm %d half %d: y[%lld] wrong", p, half, (long long)k);
      }
    }
  opt_feed(ws, "x", DM_FLOAT, 4, d, x);
  opt_op *op = opt_new("Transpose");
  opt_in(op, "x"), opt_out(op, "y");
  const int64_t bad[4] = {0, 1, 1, 2};
  opt_arg_ints(op, "axes", 4, bad);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "not a permutation of 0..3", NULL);
}

static void test_stop_gradient(void **state) {
  dm_workspace *ws = *state;
  int64_t d = 4;
  float x[4] = {1, 2, 3, 4};
  opt_feed(ws, "x", DM_FLOAT, 1, &d, x);
  opt_op *op = opt_new("StopGradient");
  opt_in(op, "x"), opt_out(op, "y");
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "y", DM_FLOAT, 1, &d)), x, sizeof x);
  op = opt_new("StopGradient");
  opt_in(op, "x"), opt_out(op, "x");
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "x", DM_FLOAT, 1, &d)), x, sizeof x);
}

/* Gradients: these ops are linear with no rounding, so reduce_len 1 suffices. */
static void test_gradients(void **state) {
  (void)state;
  float a[120], b[40];
  uint64_t seed = 5;
  for (int i = 0; i < 120; i++)
    a[i] = (float)opt_uniform(&seed, -1, 1);
  for (int i = 0; i < 40; i++)
    b[i] = (float)opt_uniform(&seed, -1, 1);
  gc_input cat[] = {{"a", 4, {2, 4, 5, 3}, a, 1, 0}, {"b", 4, {2, 4, 5, 1}, b, 1, 0}};
  gc_check("type: 'Concat' input: 'a' input: 'b' output: 'y' output: 'info' "
           "arg { name: 'order' s: 'NHWC' }", cat, 2, 1, 1);
  gc_input one[] = {{"a", 4, {2, 3, 4, 5}, a, 1, 0}};
  gc_check("type: 'Split' input: 'a' output: 'p' output: 'q' output: 'r' "
           "arg { name: 'split' ints: 1 ints: 2 ints: 1 } arg { name: 'axis' i: 2 }",
           one, 1, 3, 1);
  gc_check("type: 'Reshape' input: 'a' output: 'y' output: 'old' "
           "arg { name: 'shape' ints: -1 ints: 0 }", one, 1, 1, 1);
  gc_check("type: 'Reshape' input: 'a' output: 'y' arg { name: 'shape' ints: 6 ints: 20 }",
           one, 1, 1, 1);
  gc_check("type: 'Flatten' input: 'a' output: 'y' arg { name: 'axis' i: 2 }", one, 1, 1, 1);
  gc_check("type: 'Transpose' input: 'a' output: 'y' "
           "arg { name: 'axes' ints: 2 ints: 0 ints: 3 ints: 1 }", one, 1, 1, 1);
  gc_check("type: 'Transpose' input: 'a' output: 'y'", one, 1, 1, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concat_split_round_trip),
      cmocka_unit_test(test_concat_add_axis_and_split_arg),
      cmocka_unit_test(test_concat_split_errors),
      cmocka_unit_test(test_reshape),
      cmocka_unit_test(test_flatten),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_stop_gradient),
      cmocka_unit_test(test_gradients),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
