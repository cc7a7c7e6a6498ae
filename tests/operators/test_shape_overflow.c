/* test_shape_overflow.c: shape arithmetic on hostile shapes (issue 12).
 *
 * A zero-element tensor may have huge other dims (0 x 2^62 x 2^62): its element count is
 * 0, but a product of its other dims (FC's K, Split's inner size, a pool's H*W) is not.
 * Such shapes are refused as DM_ERR_LIMIT where they are made (a feed, Reshape), and the
 * ops' own sums and products (Concat's and Split's sizes, Conv's and pools' padded sizes)
 * are checked: a clear error naming the op or blob, never a wrapped (UB) result. The
 * suite also runs under UBSan, which reports any overflow left here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "op_test_util.h"

#define P62 ((int64_t)1 << 62)

static dm_workspace *new_ws(void) {
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  return ws;
}

/* Feeding 0 x 2^62 x 2^62 (or 0 x (2^62+1) x 4, whose K wrapped to 4 in FC). */
static void test_feed(void **state) {
  (void)state;
  dm_workspace *ws = new_ws();
  int64_t a[3] = {0, P62, P62}, b[3] = {0, P62 + 1, 4}, ok[3] = {0, P62, 1};
  opt_expect_error(dm_workspace_feed(ws, "X", DM_FLOAT, 3, a, NULL), DM_ERR_LIMIT, "'X'",
                   "overflows 64 bits", NULL);
  opt_expect_error(dm_workspace_feed(ws, "X", DM_FLOAT, 3, b, NULL), DM_ERR_LIMIT, "'X'",
                   "overflows 64 bits", NULL);
  /* The other dims multiply within int64: an ordinary empty tensor. */
  assert_int_equal(dm_workspace_feed(ws, "X", DM_FLOAT, 3, ok, NULL), DM_OK);
  dm_workspace_destroy(ws);
}

/* Reshape of an empty X to [0, 2^62+1, 4], then FC: refused at the Reshape. */
static void test_reshape_fc(void **state) {
  (void)state;
  dm_workspace *ws = new_ws();
  int64_t zero[1] = {0}, wd[2] = {2, 4};
  float w[8] = {0}, bias[2] = {0};
  opt_feed(ws, "X", DM_FLOAT, 1, zero, NULL);
  opt_feed(ws, "W", DM_FLOAT, 2, wd, w);
  opt_feed(ws, "b", DM_FLOAT, 1, wd, bias);
  const char *text =
      "name: \"n\" op { input: \"X\" output: \"R\" type: \"Reshape\" "
      "arg { name: \"shape\" ints: 0 ints: 4611686018427387905 ints: 4 } } "
      "op { input: \"R\" input: \"W\" input: \"b\" output: \"Y\" type: \"FC\" "
      "arg { name: \"axis\" i: 2 } }";
  dm_net *net = NULL;
  dm_status s = dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net);
  if (s == DM_OK)
    s = dm_net_run(net);
  opt_expect_error(s, DM_ERR_LIMIT, "Reshape", "overflows 64 bits", NULL);

  opt_op *op = opt_new("Reshape");
  opt_in(op, "X");
  opt_out(op, "R2");
  opt_arg_ints(op, "shape", 3, (int64_t[]){0, P62, P62});
  opt_expect_error(opt_run(op, ws), DM_ERR_LIMIT, "Reshape", "overflows 64 bits", NULL);
  dm_workspace_destroy(ws);
}

/* Conv and MaxPool on a zero-batch X whose height is near 2^63: the padded size would
 * overflow. */
static void test_conv_pool(void **state) {
  (void)state;
  dm_workspace *ws = new_ws();
  int64_t xd[4] = {0, 1, INT64_MAX, 1}, wd[4] = {1, 1, 3, 1}, bd[1] = {1};
  float w[3] = {0}, bias[1] = {0};
  opt_feed(ws, "X", DM_FLOAT, 4, xd, NULL);
  opt_feed(ws, "W", DM_FLOAT, 4, wd, w);
  opt_feed(ws, "b", DM_FLOAT, 1, bd, bias);
  opt_op *op = opt_new("Conv");
  opt_in(op, "X");
  opt_in(op, "W");
  opt_in(op, "b");
  opt_out(op, "Y");
  opt_arg_int(op, "kernel_h", 3);
  opt_arg_int(op, "kernel_w", 1);
  opt_arg_int(op, "pad", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_LIMIT, "Conv", "2^40", NULL);

  const char *pools[] = {"MaxPool", "AveragePool"};
  for (int i = 0; i < 2; i++) {
    op = opt_new(pools[i]);
    opt_in(op, "X");
    opt_out(op, "Y");
    opt_arg_int(op, "kernel_h", 2);
    opt_arg_int(op, "kernel_w", 1);
    opt_arg_int(op, "pad", 1);
    opt_expect_error(opt_run(op, ws), DM_ERR_LIMIT, pools[i], "2^40", NULL);
  }
  /* A global pool (its kernel the input's size) over a zero-batch X of 2^40+1 rows. */
  int64_t gd[4] = {0, 1, ((int64_t)1 << 40) + 1, 1};
  opt_feed(ws, "G", DM_FLOAT, 4, gd, NULL);
  op = opt_new("MaxPool");
  opt_in(op, "G");
  opt_out(op, "Y");
  opt_arg_int(op, "global_pooling", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_LIMIT, "MaxPool", "2^40", NULL);
  dm_workspace_destroy(ws);
}

/* Concat of two 0 x 2^62 along dim 1: 2^63 does not fit. */
static void test_concat(void **state) {
  (void)state;
  dm_workspace *ws = new_ws();
  int64_t d[2] = {0, P62};
  opt_feed(ws, "A", DM_FLOAT, 2, d, NULL);
  opt_feed(ws, "B", DM_FLOAT, 2, d, NULL);
  opt_op *op = opt_new("Concat");
  opt_in(op, "A");
  opt_in(op, "B");
  opt_out(op, "Y");
  opt_out(op, "split_info");
  opt_arg_int(op, "axis", 1);
  opt_expect_error(opt_run(op, ws), DM_ERR_LIMIT, "Concat", "'B'", "add up", NULL);
  dm_workspace_destroy(ws);
}

/* Split sizes that wrap around to the dim (INT64_MAX + INT64_MAX + 6 = 4 mod 2^64). */
static void test_split(void **state) {
  (void)state;
  dm_workspace *ws = new_ws();
  int64_t d[2] = {0, 4};
  opt_feed(ws, "X", DM_FLOAT, 2, d, NULL);
  opt_op *op = opt_new("Split");
  opt_in(op, "X");
  opt_out(op, "Y0");
  opt_out(op, "Y1");
  opt_out(op, "Y2");
  opt_arg_int(op, "axis", 1);
  opt_arg_ints(op, "split", 3, (int64_t[]){INT64_MAX, INT64_MAX, 6});
  opt_expect_error(opt_run(op, ws), DM_ERR_LIMIT, "Split", "add up", NULL);
  dm_workspace_destroy(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_feed),       cmocka_unit_test(test_reshape_fc),
      cmocka_unit_test(test_conv_pool),  cmocka_unit_test(test_concat),
      cmocka_unit_test(test_split),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
