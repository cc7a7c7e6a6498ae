/* test_fill.c: ConstantFill and GivenTensor*Fill: shapes from arguments or an input,
 * dtypes and values (references written out here), and argument errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static void test_constant_fill(void **state) {
  dm_workspace *ws = *state;
  int64_t shape[] = {2, 3};
  opt_op *op = opt_new("ConstantFill");
  opt_out(op, "Y");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_float(op, "value", 2.5f);
  assert_int_equal(opt_run(op, ws), DM_OK);
  const float *y = dm_tensor_data(opt_fetch(ws, "Y", DM_FLOAT, 2, shape));
  for (int i = 0; i < 6; i++)
    assert_true(y[i] == 2.5f);

  /* an int value without dtype gives INT64 (Caffe2's inference) */
  op = opt_new("ConstantFill");
  opt_out(op, "I");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_int(op, "value", (1LL << 60) + 1);
  assert_int_equal(opt_run(op, ws), DM_OK);
  const int64_t *iv = dm_tensor_data(opt_fetch(ws, "I", DM_INT64, 2, shape));
  for (int i = 0; i < 6; i++)
    assert_true(iv[i] == (1LL << 60) + 1);

  /* FLOAT16 by number and by name; 0.1 -> 0x2e66 (0.0999755859375) */
  for (int byname = 0; byname < 2; byname++) {
    op = opt_new("ConstantFill");
    opt_out(op, "H");
    opt_arg_ints(op, "shape", 1, shape);
    opt_arg_float(op, "value", 0.1f);
    if (byname)
      opt_arg_string(op, "dtype", "FLOAT16");
    else
      opt_arg_int(op, "dtype", DM_FLOAT16);
    assert_int_equal(opt_run(op, ws), DM_OK);
    const uint16_t *h = dm_tensor_data(opt_fetch(ws, "H", DM_FLOAT16, 1, shape));
    assert_int_equal(h[0], 0x2e66);
  }

  /* default: a FLOAT scalar 0 */
  op = opt_new("ConstantFill");
  opt_out(op, "S");
  assert_int_equal(opt_run(op, ws), DM_OK);
  const dm_tensor *s = opt_fetch(ws, "S", DM_FLOAT, 0, NULL);
  assert_int_equal(dm_tensor_numel(s), 1);
  assert_true(*(const float *)dm_tensor_data(s) == 0.0f);

  /* BOOL and INT32 from a float value */
  op = opt_new("ConstantFill");
  opt_out(op, "B");
  opt_arg_ints(op, "shape", 1, shape);
  opt_arg_float(op, "value", -7.9f);
  opt_arg_int(op, "dtype", DM_INT32);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_int_equal(*(const int32_t *)dm_tensor_data(opt_fetch(ws, "B", DM_INT32, 1, shape)), -7);
}

static void test_constant_fill_input_shape(void **state) {
  dm_workspace *ws = *state;
  float x[24] = {0};
  int64_t xd[] = {2, 3, 4};
  opt_feed(ws, "X", DM_FLOAT, 3, xd, x);
  int64_t extra[] = {5};
  opt_op *op = opt_new("ConstantFill");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_ints(op, "extra_shape", 1, extra);
  opt_arg_float(op, "value", 1.0f);
  assert_int_equal(opt_run(op, ws), DM_OK);
  int64_t want[] = {2, 3, 4, 5};
  opt_fetch(ws, "Y", DM_FLOAT, 4, want);

  int64_t shp[] = {4, 2}, sd[] = {2};
  opt_feed(ws, "shape", DM_INT64, 1, sd, shp);
  op = opt_new("ConstantFill");
  opt_in(op, "shape"), opt_out(op, "Y");
  opt_arg_int(op, "input_as_shape", 1);
  opt_arg_ints(op, "extra_shape", 1, extra);
  assert_int_equal(opt_run(op, ws), DM_OK);
  int64_t want2[] = {4, 2, 5};
  opt_fetch(ws, "Y", DM_FLOAT, 3, want2);
}

static void test_constant_fill_errors(void **state) {
  dm_workspace *ws = *state;
  int64_t shape[] = {2}, extra[] = {3};
  opt_op *op = opt_new("ConstantFill");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_ints(op, "shape", 1, shape);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "op 0 (ConstantFill)",
                   "cannot set the 'shape' argument and pass in an input", NULL);
  op = opt_new("ConstantFill");
  opt_out(op, "Y");
  opt_arg_ints(op, "extra_shape", 1, extra);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "'extra_shape' needs an input", NULL);
  op = opt_new("ConstantFill");
  opt_out(op, "Y");
  opt_arg_int(op, "dtype", 77);
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "unknown 'dtype' data type 77", NULL);
  float x[2] = {0};
  opt_feed(ws, "F", DM_FLOAT, 1, shape, x);
  op = opt_new("ConstantFill");
  opt_in(op, "F"), opt_out(op, "Y");
  opt_arg_int(op, "input_as_shape", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "1-D INT64", "1-d FLOAT", NULL);
  int64_t neg[] = {2, -1};
  op = opt_new("ConstantFill");
  opt_out(op, "Y");
  opt_arg_ints(op, "shape", 2, neg);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "'shape' dim 1 is negative", NULL);
}

static void test_given_fills(void **state) {
  dm_workspace *ws = *state;
  int64_t shape[] = {2, 3};
  float fv[] = {1.5f, -2, 3, 4, 5, 6.25f};
  opt_op *op = opt_new("GivenTensorFill");
  opt_out(op, "F");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_floats(op, "values", 6, fv);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "F", DM_FLOAT, 2, shape)), fv, sizeof fv);

  op = opt_new("GivenTensorDoubleFill");
  opt_out(op, "D");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_floats(op, "values", 6, fv);
  assert_int_equal(opt_run(op, ws), DM_OK);
  const double *dv = dm_tensor_data(opt_fetch(ws, "D", DM_DOUBLE, 2, shape));
  for (int i = 0; i < 6; i++)
    assert_true(dv[i] == (double)fv[i]);

  int64_t iv[] = {1, -2, 3, 0, (1LL << 40), 7};
  op = opt_new("GivenTensorInt64Fill");
  opt_out(op, "L");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_ints(op, "values", 6, iv);
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "L", DM_INT64, 2, shape)), iv, sizeof iv);

  op = opt_new("GivenTensorBoolFill");
  opt_out(op, "B");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_ints(op, "values", 6, iv);
  assert_int_equal(opt_run(op, ws), DM_OK);
  uint8_t bw[] = {1, 1, 1, 0, 1, 1};
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "B", DM_BOOL, 2, shape)), bw, 6);

  int64_t small[] = {1, -2, 3, 0, 5, 7};
  op = opt_new("GivenTensorIntFill");
  opt_out(op, "I");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_ints(op, "values", 6, small);
  assert_int_equal(opt_run(op, ws), DM_OK);
  int32_t iw[] = {1, -2, 3, 0, 5, 7};
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "I", DM_INT32, 2, shape)), iw, sizeof iw);

  const char *sv[] = {"a", "bc", "", "d", "e", "f"};
  op = opt_new("GivenTensorStringFill");
  opt_out(op, "S");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_strings(op, "values", 6, sv);
  assert_int_equal(opt_run(op, ws), DM_OK);
  char *const *s = dm_tensor_data(opt_fetch(ws, "S", DM_STRING, 2, shape));
  for (int i = 0; i < 6; i++)
    assert_string_equal(s[i], sv[i]);

  /* shape from an input */
  opt_op *op2 = opt_new("GivenTensorFill");
  opt_in(op2, "I"), opt_out(op2, "G");
  opt_arg_floats(op2, "values", 6, fv);
  assert_int_equal(opt_run(op2, ws), DM_OK);
  opt_fetch(ws, "G", DM_FLOAT, 2, shape);
}

static void test_given_fill_errors(void **state) {
  dm_workspace *ws = *state;
  int64_t shape[] = {2, 3};
  float fv[] = {1, 2, 3, 4, 5};
  opt_op *op = opt_new("GivenTensorFill");
  opt_out(op, "F");
  opt_arg_ints(op, "shape", 2, shape);
  opt_arg_floats(op, "values", 5, fv);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "op 0 (GivenTensorFill)",
                   "'values' has 5 elements, but shape 2x3 needs 6", NULL);
  op = opt_new("GivenTensorFill");
  opt_out(op, "F");
  opt_arg_ints(op, "shape", 2, shape);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "missing required argument 'values'", NULL);
  op = opt_new("GivenTensorFill");
  opt_out(op, "F");
  opt_arg_floats(op, "values", 5, fv);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "'shape' is required when there is no input",
                   NULL);
  int64_t big[] = {1LL << 40};
  int64_t one[] = {1};
  op = opt_new("GivenTensorIntFill");
  opt_out(op, "F");
  opt_arg_ints(op, "shape", 1, one);
  opt_arg_ints(op, "values", 1, big);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "does not fit INT32", NULL);
  /* the count against an input's shape is checked when it runs */
  float x[4] = {0};
  int64_t xd[] = {4};
  opt_feed(ws, "X", DM_FLOAT, 1, xd, x);
  op = opt_new("GivenTensorFill");
  opt_in(op, "X"), opt_out(op, "F");
  opt_arg_floats(op, "values", 5, fv);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "'values' has 5 elements, but shape 4 needs 4",
                   NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_constant_fill),        cmocka_unit_test(test_constant_fill_input_shape),
      cmocka_unit_test(test_constant_fill_errors), cmocka_unit_test(test_given_fills),
      cmocka_unit_test(test_given_fill_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
