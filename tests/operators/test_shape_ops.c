/* test_shape_ops.c: Shape, Gather, Squeeze, ExpandDims and Slice against references
 * written here by index arithmetic (each output element's source index computed from
 * its multi-index), in FP32, FP16 (bit patterns) and INT64. These ops move values
 * without arithmetic, so results must match bit for bit; and each error path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* Row-major multi-index of flat k in dims. */
static void unflat(int64_t k, int nd, const int64_t *dims, int64_t *idx) {
  for (int d = nd; d-- > 0;) {
    idx[d] = k % dims[d];
    k /= dims[d];
  }
}

static int64_t flat(int nd, const int64_t *dims, const int64_t *idx) {
  int64_t k = 0;
  for (int d = 0; d < nd; d++)
    k = k * dims[d] + idx[d];
  return k;
}

static void test_shape(void **state) {
  dm_workspace *ws = *state;
  int64_t d[4] = {2, 3, 5, 7};
  float x[210] = {0};
  opt_feed(ws, "x", DM_FLOAT, 4, d, x);
  opt_op *op = opt_new("Shape");
  opt_in(op, "x"), opt_out(op, "s");
  assert_int_equal(opt_run(op, ws), DM_OK);
  int64_t four = 4, three = 3;
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "s", DM_INT64, 1, &four)), d, sizeof d);
  int64_t axes[3] = {3, -3, 0}, want[3] = {7, 3, 2};
  op = opt_new("Shape");
  opt_in(op, "x"), opt_out(op, "s");
  opt_arg_ints(op, "axes", 3, axes);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "s", DM_INT64, 1, &three)), want, sizeof want);
  axes[0] = 4;
  op = opt_new("Shape");
  opt_in(op, "x"), opt_out(op, "s");
  opt_arg_ints(op, "axes", 1, axes);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "axes", NULL);
}

/* Gather of a (4, 3, 5) DATA along `axis` with a (2, 3) INDICES (negative ones wrapped),
 * in dtype t (elements of `es` bytes, compared as bytes). */
static void gather_case(dm_workspace *ws, dm_dtype t, size_t es, int axis) {
  int64_t xd[3] = {4, 3, 5}, id[2] = {2, 3};
  uint8_t x[60 * 8];
  for (size_t i = 0; i < sizeof x; i++)
    x[i] = (uint8_t)(i * 37 + 11);
  int64_t along = xd[axis], idx[6] = {0, along - 1, -1, 1, -along, 2 % along};
  opt_feed(ws, "x", t, 3, xd, x);
  opt_feed(ws, "i", DM_INT64, 2, id, idx);
  opt_op *op = opt_new("Gather");
  opt_in(op, "x"), opt_in(op, "i"), opt_out(op, "y");
  opt_arg_int(op, "axis", axis);
  opt_arg_int(op, "wrap_indices", 1);
  assert_int_equal(opt_run(op, ws), DM_OK);
  int64_t yd[4];
  int r = 0;
  for (int d = 0; d < axis; d++)
    yd[r++] = xd[d];
  yd[r++] = 2, yd[r++] = 3;
  for (int d = axis + 1; d < 3; d++)
    yd[r++] = xd[d];
  const uint8_t *y = dm_tensor_data(opt_fetch(ws, "y", t, 4, yd));
  int64_t n = yd[0] * yd[1] * yd[2] * yd[3], yi[4], xi[3];
  for (int64_t k = 0; k < n; k++) {
    unflat(k, 4, yd, yi);
    /* y[..., i0, i1, ...] = x[..., idx[i0][i1], ...] */
    for (int d = 0; d < 3; d++)
      xi[d] = d < axis ? yi[d] : d == axis ? idx[yi[axis] * 3 + yi[axis + 1]] : yi[d + 1];
    if (xi[axis] < 0)
      xi[axis] += along;
    int64_t src = flat(3, xd, xi);
    if (memcmp(y + k * (int64_t)es, x + src * (int64_t)es, es) != 0)
      fail_msg("%s axis %d: y[%lld] differs from x[%lld]", dm_dtype_name(t), axis,
               (long long)k, (long long)src);
  }
}

static void test_gather(void **state) {
  dm_workspace *ws = *state;
  for (int axis = 0; axis < 3; axis++) {
    gather_case(ws, DM_FLOAT, 4, axis);
    gather_case(ws, DM_FLOAT16, 2, axis);
    gather_case(ws, DM_INT64, 8, axis);
  }
  /* INT32 indices, no wrap: a negative index is an error naming the fix */
  int64_t xd[1] = {5}, id[1] = {2};
  float x[5] = {1, 2, 3, 4, 5};
  int32_t idx[2] = {4, 0};
  opt_feed(ws, "x", DM_FLOAT, 1, xd, x);
  opt_feed(ws, "i", DM_INT32, 1, id, idx);
  opt_op *op = opt_new("Gather");
  opt_in(op, "x"), opt_in(op, "i"), opt_out(op, "y");
  assert_int_equal(opt_run(op, ws), DM_OK);
  const float *y = dm_tensor_data(opt_fetch(ws, "y", DM_FLOAT, 1, id));
  assert_true(y[0] == 5 && y[1] == 1);
  idx[1] = -1;
  opt_feed(ws, "i", DM_INT32, 1, id, idx);
  op = opt_new("Gather");
  opt_in(op, "x"), opt_in(op, "i"), opt_out(op, "y");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "INDICES[1] = -1", "wrap_indices", NULL);
  idx[1] = 5;
  opt_feed(ws, "i", DM_INT32, 1, id, idx);
  op = opt_new("Gather");
  opt_in(op, "x"), opt_in(op, "i"), opt_out(op, "y");
  opt_arg_int(op, "wrap_indices", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "out of range", NULL);
  float fi[2] = {0, 1};
  opt_feed(ws, "i", DM_FLOAT, 1, id, fi);
  op = opt_new("Gather");
  opt_in(op, "x"), opt_in(op, "i"), opt_out(op, "y");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "INDICES is FLOAT", NULL);
}

/* Squeeze and ExpandDims keep the values in order and change only the dims. */
static void test_squeeze_expand_dims(void **state) {
  dm_workspace *ws = *state;
  int64_t d[5] = {1, 3, 1, 4, 1};
  uint16_t x[12];
  for (int i = 0; i < 12; i++)
    x[i] = dm_float_to_half((float)i - 5.5f);
  opt_feed(ws, "x", DM_FLOAT16, 5, d, x);
  int64_t dims[2] = {-1, 0}, sd[3] = {3, 1, 4};
  opt_op *op = opt_new("Squeeze");
  opt_in(op, "x"), opt_out(op, "y");
  opt_arg_ints(op, "dims", 2, dims);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "y", DM_FLOAT16, 3, sd)), x, sizeof x);
  /* ExpandDims at 0 and -1 of the (3, 1, 4) result: (1, 3, 1, 4, 1) again */
  op = opt_new("ExpandDims");
  opt_in(op, "y"), opt_out(op, "z");
  opt_arg_ints(op, "dims", 2, (int64_t[]){4, 0});
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "z", DM_FLOAT16, 5, d)), x, sizeof x);
  op = opt_new("Squeeze");
  opt_in(op, "x"), opt_out(op, "y");
  opt_arg_ints(op, "dims", 1, (int64_t[]){1});
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "X dim 1 is 3", NULL);
  op = opt_new("ExpandDims");
  opt_in(op, "x"), opt_out(op, "y");
  opt_arg_ints(op, "dims", 2, (int64_t[]){2, 2});
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "dim 2 twice", NULL);
  op = opt_new("ExpandDims");
  opt_in(op, "x"), opt_out(op, "y");
  opt_arg_ints(op, "dims", 4, (int64_t[]){0, 1, 2, 3});
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "(0 to 8)", NULL);
}

/* Caffe2's bound: negative counts from one past the end; clamped to the dim. */
static int64_t c2_bound(int64_t v, int64_t dim) {
  v = v < 0 ? dim + 1 + v : v;
  return v > dim ? dim : v;
}

/* Slice of a (3, 4, 5) X by starts/ends given as arguments or as inputs of type it. */
static void slice_case(dm_workspace *ws, dm_dtype t, size_t es, int n, const int64_t *st,
                       const int64_t *en, dm_dtype as_inputs) {
  int64_t xd[3] = {3, 4, 5}, lo[3] = {0, 0, 0}, yd[3] = {3, 4, 5};
  uint8_t x[60 * 8];
  for (size_t i = 0; i < sizeof x; i++)
    x[i] = (uint8_t)(i * 13 + 7);
  opt_feed(ws, "x", t, 3, xd, x);
  for (int d = 0; d < n; d++) {
    lo[d] = c2_bound(st[d], xd[d]);
    yd[d] = c2_bound(en[d], xd[d]) - lo[d];
  }
  opt_op *op = opt_new("Slice");
  opt_in(op, "x"), opt_out(op, "y");
  if (as_inputs) {
    int64_t nn = n;
    int32_t s32[3], e32[3];
    for (int d = 0; d < n; d++)
      s32[d] = (int32_t)st[d], e32[d] = (int32_t)en[d];
    opt_feed(ws, "st", as_inputs, 1, &nn, as_inputs == DM_INT32 ? (void *)s32 : (void *)st);
    opt_feed(ws, "en", as_inputs, 1, &nn, as_inputs == DM_INT32 ? (void *)e32 : (void *)en);
    opt_in(op, "st"), opt_in(op, "en");
  } else {
    opt_arg_ints(op, "starts", (size_t)n, st);
    opt_arg_ints(op, "ends", (size_t)n, en);
  }
  assert_int_equal(opt_run(op, ws), DM_OK);
  const uint8_t *y = dm_tensor_data(opt_fetch(ws, "y", t, 3, yd));
  int64_t yi[3], xi[3];
  for (int64_t k = 0; k < yd[0] * yd[1] * yd[2]; k++) {
    unflat(k, 3, yd, yi);
    for (int d = 0; d < 3; d++)
      xi[d] = lo[d] + yi[d];
    int64_t src = flat(3, xd, xi);
    if (memcmp(y + k * (int64_t)es, x + src * (int64_t)es, es) != 0)
      fail_msg("%s: y[%lld] differs from x[%lld]", dm_dtype_name(t), (long long)k,
               (long long)src);
  }
}

static void test_slice(void **state) {
  dm_workspace *ws = *state;
  const dm_dtype types[3] = {DM_FLOAT, DM_FLOAT16, DM_INT64};
  const size_t sizes[3] = {4, 2, 8};
  for (int k = 0; k < 3; k++) {
    slice_case(ws, types[k], sizes[k], 1, (int64_t[]){1}, (int64_t[]){3}, 0);
    slice_case(ws, types[k], sizes[k], 2, (int64_t[]){0, 1}, (int64_t[]){-1, -2}, 0);
    slice_case(ws, types[k], sizes[k], 3, (int64_t[]){-3, 2, 4}, (int64_t[]){100, 3, -1},
               DM_INT64);
    slice_case(ws, types[k], sizes[k], 3, (int64_t[]){2, 0, 1}, (int64_t[]){3, 4, 5}, DM_INT32);
    slice_case(ws, types[k], sizes[k], 2, (int64_t[]){0, 2}, (int64_t[]){3, 2}, 0); /* empty */
  }
  int64_t xd[2] = {3, 4};
  float x[12] = {0};
  opt_feed(ws, "x", DM_FLOAT, 2, xd, x);
  opt_op *op = opt_new("Slice");
  opt_in(op, "x"), opt_out(op, "y");
  opt_arg_ints(op, "starts", 1, (int64_t[]){2});
  opt_arg_ints(op, "ends", 1, (int64_t[]){1});
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "dim 0 (of size 3): start 2, end 1", NULL);
  op = opt_new("Slice");
  opt_in(op, "x"), opt_out(op, "y");
  opt_arg_ints(op, "starts", 3, (int64_t[]){0, 0, 0});
  opt_arg_ints(op, "ends", 3, (int64_t[]){1, 1, 1});
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "one pair per leading dim", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gather, setup, teardown),
      cmocka_unit_test_setup_teardown(test_squeeze_expand_dims, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slice, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
