/* test_op_message.c: op errors name the blobs, not only the schema's slot letters.
 * Each case feeds blobs with names unlike the slots (X, W, b, A, B, scale, ...) into a
 * built-in op with a wrong shape or dtype, and checks that the message says which blob:
 * Conv, FC, SpatialBN, Concat, Mul with broadcast, Softmax, Reshape, and the NumPy hint
 * for a float64 or int64 input where a float is wanted. */
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

static int ws_setup(void **state) {
  dm_workspace *ws = NULL;
  if (dm_init() != DM_OK || dm_workspace_create(&ws) != DM_OK)
    return -1;
  *state = ws;
  return 0;
}

static int ws_teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* Feeds a FLOAT blob of the given shape, filled with 0.5. */
static void feed(dm_workspace *ws, const char *name, int ndim, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  float *v = calloc((size_t)(n ? n : 1), sizeof *v);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++)
    v[i] = 0.5f;
  assert_ok(dm_workspace_feed(ws, name, DM_FLOAT, ndim, dims, v));
  free(v);
}

static void test_conv_names_filter(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "image", 4, (int64_t[]){1, 3, 8, 8});
  feed(ws, "conv1_filter", 3, (int64_t[]){2, 3, 3}); /* 3-D: wrong */
  assert_status_msg(run_text(ws, "op { input: 'image' input: 'conv1_filter' output: 'y' "
                                 "type: 'Conv' arg { name: 'kernel' i: 3 } }"),
                    DM_ERR_SHAPE, "W is 2x3x3", "(W is blob 'conv1_filter')");
}

static void test_fc_names_input_and_weight(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "features", 2, (int64_t[]){2, 5});
  feed(ws, "fc_weight", 2, (int64_t[]){3, 4}); /* K = 4, but the input has 5 */
  feed(ws, "fc_bias", 1, (int64_t[]){3});
  assert_status_msg(run_text(ws, "op { input: 'features' input: 'fc_weight' input: 'fc_bias' "
                                 "output: 'y' type: 'FC' }"),
                    DM_ERR_SHAPE, "X is 2x5",
                    "(X is blob 'features', W is blob 'fc_weight')");
}

static void test_spatial_bn_names_scale(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "act", 4, (int64_t[]){1, 4, 2, 2});
  feed(ws, "gamma", 1, (int64_t[]){3}); /* 3 values for 4 channels */
  feed(ws, "beta", 1, (int64_t[]){4});
  feed(ws, "mu", 1, (int64_t[]){4});
  feed(ws, "sigma2", 1, (int64_t[]){4});
  assert_status_msg(run_text(ws, "op { input: 'act' input: 'gamma' input: 'beta' input: 'mu' "
                                 "input: 'sigma2' output: 'y' type: 'SpatialBN' "
                                 "arg { name: 'is_test' i: 1 } }"),
                    DM_ERR_SHAPE, "scale has 3 elements",
                    "(scale is blob 'gamma', X is blob 'act')");
}

static void test_concat_names_first_input(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "left", 3, (int64_t[]){1, 2, 3});
  feed(ws, "right", 3, (int64_t[]){1, 5, 4}); /* differs in dims 1 and 2 */
  assert_status_msg(run_text(ws, "op { input: 'left' input: 'right' output: 'y' "
                                 "output: 'y_info' type: 'Concat' arg { name: 'axis' i: 1 } }"),
                    DM_ERR_SHAPE, "'right'", "X0 is blob 'left'");
}

static void test_mul_broadcast_names_both(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "big", 2, (int64_t[]){2, 3});
  feed(ws, "small", 1, (int64_t[]){4});
  assert_status_msg(run_text(ws, "op { input: 'big' input: 'small' output: 'prod' type: 'Mul' "
                                 "arg { name: 'broadcast' i: 1 } }"),
                    DM_ERR_SHAPE, "A is 2x3 and B is 4",
                    "(A is blob 'big', B is blob 'small')");
}

static void test_add_without_broadcast_names_both(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "lhs", 2, (int64_t[]){2, 3});
  feed(ws, "rhs", 2, (int64_t[]){3, 2});
  assert_status_msg(run_text(ws, "op { input: 'lhs' input: 'rhs' output: 'sum' type: 'Add' }"),
                    DM_ERR_SHAPE, "(A is blob 'lhs', B is blob 'rhs')");
}

static void test_softmax_names_input_and_hints_float32(void **state) {
  dm_workspace *ws = *state;
  double v[6] = {0};
  assert_ok(dm_workspace_feed(ws, "logits", DM_DOUBLE, 2, (int64_t[]){2, 3}, v));
  assert_status_msg(run_text(ws, "op { input: 'logits' output: 'prob' type: 'Softmax' }"),
                    DM_ERR_TYPE, "X is DOUBLE", "(X is blob 'logits')",
                    "x.astype(np.float32)");
}

static void test_reshape_names_input(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "vec", 1, (int64_t[]){6});
  assert_status_msg(run_text(ws, "op { input: 'vec' output: 'mat' type: 'Reshape' "
                                 "arg { name: 'shape' ints: 4 ints: 2 } }"),
                    DM_ERR_SHAPE, "cannot reshape X 6", "(X is blob 'vec')");
}

static void test_fc_int64_input_hints_float32(void **state) {
  dm_workspace *ws = *state;
  int64_t x[4] = {1, 2, 3, 4};
  assert_ok(dm_workspace_feed(ws, "pixels", DM_INT64, 2, (int64_t[]){1, 4}, x));
  feed(ws, "w", 2, (int64_t[]){3, 4});
  feed(ws, "bias", 1, (int64_t[]){3});
  assert_status_msg(run_text(ws, "op { input: 'pixels' input: 'w' input: 'bias' output: 'y' "
                                 "type: 'FC' }"),
                    DM_ERR_TYPE, "X is blob 'pixels'", "blob 'pixels' is INT64",
                    "x.astype(np.float32)");
}

/* A message that names a blob already ("X0 'a'") gets no second naming of it. */
static void test_named_already_left_alone(void **state) {
  dm_workspace *ws = *state;
  feed(ws, "a", 2, (int64_t[]){2, 2});
  feed(ws, "b", 1, (int64_t[]){3});
  assert_status_msg(run_text(ws, "op { input: 'a' input: 'b' output: 's' type: 'Sum' }"),
                    DM_ERR_SHAPE, "X0 'a' is 2x2");
  assert_null(strstr(dm_last_error(), "is blob 'a'"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_conv_names_filter, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_fc_names_input_and_weight, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_spatial_bn_names_scale, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_concat_names_first_input, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_mul_broadcast_names_both, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_add_without_broadcast_names_both, ws_setup,
                                      ws_teardown),
      cmocka_unit_test_setup_teardown(test_softmax_names_input_and_hints_float32, ws_setup,
                                      ws_teardown),
      cmocka_unit_test_setup_teardown(test_reshape_names_input, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_fc_int64_input_hints_float32, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_named_already_left_alone, ws_setup, ws_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
