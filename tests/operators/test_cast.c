/* test_cast.c: FloatToHalf, HalfToFloat, Cast and Copy.
 *
 * References: the compiler's _Float16 conversion where it has one (an independent
 * implementation; else the value rule checked exhaustively in tests/core/test_half.c),
 * and for Cast the documented rules written out here per element: truncation toward
 * zero with saturation and NaN -> 0 for floating -> integer, wrap-around between
 * integers, x != 0 for BOOL.
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
#include "core/netio.h"
#include "grad_check.h"
#include "net/passes/gradient_pass.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static uint16_t ref_half(float f) {
#if defined(__FLT16_MAX__)
  __extension__ _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
#else
  return dm_float_to_half(f);
#endif
}

static double ref_h2d(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return h & 0x8000 ? -v : v;
}

static dm_status run1(dm_workspace *ws, const char *type, const char *in, const char *out) {
  opt_op *op = opt_new(type);
  opt_in(op, in), opt_out(op, out);
  return opt_run(op, ws);
}

static void test_float_half(void **state) {
  dm_workspace *ws = *state;
  enum { N = 3001 }; /* not a multiple of 8: the vector path's tail */
  static float x[N];
  uint64_t seed = 9;
  for (int i = 0; i < N; i++)
    x[i] = (float)ldexp(opt_uniform(&seed, -1, 1), (int)opt_uniform(&seed, -30, 18));
  x[0] = 65520.0f, x[1] = -0.0f, x[2] = NAN, x[3] = 1e-8f, x[4] = INFINITY;
  int64_t d[] = {N};
  opt_feed(ws, "X", DM_FLOAT, 1, d, x);
  assert_int_equal(run1(ws, "FloatToHalf", "X", "H"), DM_OK);
  const uint16_t *h = dm_tensor_data(opt_fetch(ws, "H", DM_FLOAT16, 1, d));
  for (int i = 0; i < N; i++)
    if (h[i] != ref_half(x[i]))
      fail_msg("FloatToHalf(%a) = %04x, want %04x", (double)x[i], h[i], ref_half(x[i]));
  assert_int_equal(run1(ws, "HalfToFloat", "H", "F"), DM_OK);
  const float *f = dm_tensor_data(opt_fetch(ws, "F", DM_FLOAT, 1, d));
  for (int i = 0; i < N; i++) /* exact: the half's value, decoded here in double */
    if (isnan(ref_h2d(h[i])) ? !isnan(f[i]) : (double)f[i] != ref_h2d(h[i]) ||
                                                   !signbit(f[i]) != !signbit(ref_h2d(h[i])))
      fail_msg("HalfToFloat(%04x) = %a, want %a", h[i], (double)f[i], ref_h2d(h[i]));
  opt_expect_error(run1(ws, "FloatToHalf", "H", "Z"), DM_ERR_TYPE, "X is FLOAT16", NULL);
  opt_expect_error(run1(ws, "HalfToFloat", "X", "Z"), DM_ERR_TYPE, "X is FLOAT;", NULL);
}

static dm_status run_cast(dm_workspace *ws, const char *in, const char *out, int to_int,
                          const char *to_name) {
  opt_op *op = opt_new("Cast");
  opt_in(op, in), opt_out(op, out);
  if (to_name)
    opt_arg_string(op, "to", to_name);
  else if (to_int >= 0)
    opt_arg_int(op, "to", to_int);
  return opt_run(op, ws);
}

static void test_cast_float_to_ints(void **state) {
  dm_workspace *ws = *state;
  float x[] = {1.5f, -2.7f, NAN, 1e10f, -1e10f, 0.0f, 255.9f, -128.5f, 3e9f};
  int64_t d[] = {9};
  opt_feed(ws, "X", DM_FLOAT, 1, d, x);
  assert_int_equal(run_cast(ws, "X", "Y", DM_INT32, NULL), DM_OK);
  const int32_t *i32 = dm_tensor_data(opt_fetch(ws, "Y", DM_INT32, 1, d));
  int32_t want32[] = {1, -2, 0, INT32_MAX, INT32_MIN, 0, 255, -128, INT32_MAX};
  assert_memory_equal(i32, want32, sizeof want32);
  assert_int_equal(run_cast(ws, "X", "Y", -1, "UINT8"), DM_OK);
  uint8_t want8[] = {1, 0, 0, 255, 0, 0, 255, 0, 255};
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "Y", DM_UINT8, 1, d)), want8, 9);
  assert_int_equal(run_cast(ws, "X", "Y", DM_BOOL, NULL), DM_OK);
  uint8_t wantb[] = {1, 1, 1, 1, 1, 0, 1, 1, 1};
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "Y", DM_BOOL, 1, d)), wantb, 9);
  assert_int_equal(run_cast(ws, "X", "Y", DM_INT64, NULL), DM_OK);
  const int64_t *i64 = dm_tensor_data(opt_fetch(ws, "Y", DM_INT64, 1, d));
  int64_t want64[] = {1, -2, 0, 10000000000, -10000000000, 0, 255, -128, 3000000000};
  assert_memory_equal(i64, want64, sizeof want64);
  assert_int_equal(run_cast(ws, "X", "Y", DM_INT8, NULL), DM_OK);
  int8_t wanti8[] = {1, -2, 0, 127, -128, 0, 127, -128, 127};
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "Y", DM_INT8, 1, d)), wanti8, 9);
}

/* Every numeric type and back: small integers survive every type that can hold them. */
static void test_cast_round_trips(void **state) {
  dm_workspace *ws = *state;
  static const dm_dtype types[] = {DM_FLOAT, DM_INT32,  DM_BOOL,   DM_UINT8,
                                   DM_INT8,  DM_UINT16, DM_INT16,  DM_INT64,
                                   DM_FLOAT16, DM_DOUBLE, DM_BFLOAT16};
  double x[64];
  for (int i = 0; i < 64; i++)
    x[i] = i - 20; /* -20 .. 43: exact in every floating type */
  int64_t d[] = {8, 8};
  opt_feed(ws, "X", DM_DOUBLE, 2, d, x);
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    assert_int_equal(run_cast(ws, "X", "M", types[t], NULL), DM_OK);
    opt_fetch(ws, "M", types[t], 2, d);
    assert_int_equal(run_cast(ws, "M", "B", DM_DOUBLE, NULL), DM_OK);
    const double *b = dm_tensor_data(opt_fetch(ws, "B", DM_DOUBLE, 2, d));
    for (int i = 0; i < 64; i++) {
      double v = x[i], want = v;
      if (types[t] == DM_BOOL)
        want = v != 0;
      else if (types[t] == DM_UINT8 || types[t] == DM_UINT16)
        want = v < 0 ? 0 : v; /* saturation of a floating source */
      if (b[i] != want)
        fail_msg("DOUBLE %g -> %s -> DOUBLE gave %g, want %g", v, dm_dtype_name(types[t]), b[i],
                 want);
    }
  }
}

static void test_cast_precision(void **state) {
  dm_workspace *ws = *state;
  /* INT64 beyond 2^53 keeps every bit into INT64 and rounds once into FLOAT */
  int64_t big[] = {(1LL << 60) + 1, -(1LL << 60) - 3, INT64_MAX, (1LL << 24) + 1};
  int64_t d[] = {4};
  opt_feed(ws, "I", DM_INT64, 1, d, big);
  assert_int_equal(run_cast(ws, "I", "F", DM_FLOAT, NULL), DM_OK);
  const float *f = dm_tensor_data(opt_fetch(ws, "F", DM_FLOAT, 1, d));
  assert_true(f[0] == 0x1p60f && f[1] == -0x1p60f && f[2] == 0x1p63f && f[3] == 16777216.0f);
  assert_int_equal(run_cast(ws, "I", "J", DM_INT32, NULL), DM_OK); /* wraps */
  const int32_t *j = dm_tensor_data(opt_fetch(ws, "J", DM_INT32, 1, d));
  assert_int_equal(j[0], 1);
  assert_int_equal(j[3], (1 << 24) + 1);
  /* BF16 midpoints: the ulp at 2^31 is 2^24, so 2^31 + 2^23 ties (to even: down) and
   * one more rounds up; at 2^62 the same, where (double)v itself would round onto the
   * midpoint and a conversion through double would then round down. */
  int64_t mids[] = {(1LL << 31) + (1LL << 23) + 1, (1LL << 31) + (1LL << 23),
                    (1LL << 62) + (1LL << 54) + 1, 65519};
  opt_feed(ws, "I", DM_INT64, 1, d, mids);
  assert_int_equal(run_cast(ws, "I", "B", DM_BFLOAT16, NULL), DM_OK);
  const uint16_t *b = dm_tensor_data(opt_fetch(ws, "B", DM_BFLOAT16, 1, d));
  assert_int_equal(b[0], 0x4f01); /* 2^31 * (1 + 1/128) */
  assert_int_equal(b[1], 0x4f00);
  assert_int_equal(b[2], 0x5e81); /* (double) would have rounded onto the midpoint */
  assert_int_equal(run_cast(ws, "I", "H", -1, "half"), DM_OK);
  const uint16_t *h = dm_tensor_data(opt_fetch(ws, "H", DM_FLOAT16, 1, d));
  assert_int_equal(h[0], 0x7c00);
  assert_int_equal(h[3], 0x7bff); /* 65519 < 65520: the largest finite half */
}

static void test_cast_errors(void **state) {
  dm_workspace *ws = *state;
  float x[2] = {1, 2};
  int64_t d[] = {2};
  opt_feed(ws, "X", DM_FLOAT, 1, d, x);
  opt_expect_error(run_cast(ws, "X", "Y", 99, NULL), DM_ERR_TYPE, "op 0 (Cast)",
                   "unknown 'to' data type 99", NULL);
  opt_expect_error(run_cast(ws, "X", "Y", -1, "quaternion"), DM_ERR_TYPE,
                   "unknown 'to' data type 'quaternion'", NULL);
  opt_expect_error(run_cast(ws, "X", "Y", -1, NULL), DM_ERR_INVALID,
                   "missing required argument 'to'", NULL);
  opt_expect_error(run_cast(ws, "X", "Y", DM_STRING, NULL), DM_ERR_UNSUPPORTED,
                   "cannot cast to STRING", NULL);
  opt_expect_error(run_cast(ws, "X", "X", DM_INT32, NULL), DM_ERR_INVALID,
                   "cannot run in place", NULL);
}

static void test_copy(void **state) {
  dm_workspace *ws = *state;
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t d[] = {2, 3};
  opt_feed(ws, "X", DM_FLOAT, 2, d, x);
  assert_int_equal(run1(ws, "Copy", "X", "Y"), DM_OK);
  const dm_tensor *y = opt_fetch(ws, "Y", DM_FLOAT, 2, d), *xt = NULL;
  assert_memory_equal(dm_tensor_data(y), x, sizeof x);
  assert_int_equal(dm_workspace_fetch(ws, "X", &xt), DM_OK);
  assert_ptr_not_equal(dm_tensor_data(y), dm_tensor_data(xt)); /* a deep copy */
}

/* CastLike converts to the second input's dtype with Cast's rules; the gradients of
 * FloatToHalf/HalfToFloat/Cast/Copy are emitted as documented and give back dY's values
 * in the forward input's dtype. */
static void test_cast_like_and_gradients(void **state) {
  dm_workspace *ws = *state;
  float x[4] = {1.0f, -2.5f, 65504.0f, 1e6f};
  uint16_t like[1] = {0};
  int64_t d = 4, one = 1;
  opt_feed(ws, "X", DM_FLOAT, 1, &d, x);
  opt_feed(ws, "L", DM_FLOAT16, 1, &one, like);
  opt_op *op = opt_new("CastLike");
  opt_in(op, "X"), opt_in(op, "L"), opt_out(op, "Z");
  assert_int_equal(opt_run(op, ws), DM_OK);
  const uint16_t *h = dm_tensor_data(opt_fetch(ws, "Z", DM_FLOAT16, 1, &d));
  assert_true(h[0] == 0x3c00 && h[1] == 0xc100 && h[2] == 0x7bff && h[3] == 0x7c00);

  ProtobufCMessage *m = NULL;
  const char *text = "op { type: 'FloatToHalf' input: 'x' output: 'h' }"
                     "op { type: 'Cast' input: 'h' output: 'd' arg { name: 'to' s: 'DOUBLE' } }"
                     "op { type: 'Copy' input: 'd' output: 'c' }"
                     "op { type: 'Cast' input: 'c' output: 'f' arg { name: 'to' i: 1 } }"
                     "op { type: 'HalfToFloat' input: 'h' output: 'g' }"
                     "op { type: 'Sum' input: 'f' input: 'g' output: 'loss' }";
  assert_int_equal(dm_text_parse(text, strlen(text), "t", &caffe2__net_def__descriptor, &m), DM_OK);
  Caffe2__NetDef *net = (Caffe2__NetDef *)m;
  const char *loss = "loss";
  assert_int_equal(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}), DM_OK);
  /* each maker's ops, in whatever order the pass walks them */
  const char *want[] = {"CastLike", "Copy", "FloatToHalf", "HalfToFloat"};
  const size_t count[] = {2, 1, 1, 1};
  for (size_t w = 0; w < 4; w++) {
    size_t c = 0;
    for (size_t i = 6; i < net->n_op; i++)
      c += strcmp(net->op[i]->type, want[w]) == 0;
    if (c != count[w])
      fail_msg("%zu %s ops in the backward pass, expected %zu", c, want[w], count[w]);
  }
  dm_net *n = NULL;
  assert_int_equal(dm_workspace_feed(ws, "x", DM_FLOAT, 1, &d, x), DM_OK);
  /* run forward + backward: x_grad = 2 (one path through each branch), FLOAT like x */
  uint8_t *buf = malloc(protobuf_c_message_get_packed_size(&net->base));
  size_t len = protobuf_c_message_pack(&net->base, buf);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  assert_int_equal(dm_workspace_create_net_bytes(ws, buf, len, 0, &n), DM_OK);
  free(buf);
  assert_int_equal(dm_net_run(n), DM_OK);
  const float *gx = dm_tensor_data(opt_fetch(ws, "x_grad", DM_FLOAT, 1, &d));
  for (int i = 0; i < 4; i++)
    assert_true(gx[i] == 2.0f);

  static float v[30];
  uint64_t seed = 3;
  for (int i = 0; i < 30; i++)
    v[i] = (float)opt_uniform(&seed, -2, 2);
  gc_input in[] = {{"X", 2, {5, 6}, v, 1, 0}};
  gc_check("type: 'Cast' input: 'X' output: 'Y' arg { name: 'to' s: 'FLOAT' }", in, 1, 1, 1);
  gc_check("type: 'Copy' input: 'X' output: 'Y'", in, 1, 1, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_float_half),       cmocka_unit_test(test_cast_float_to_ints),
      cmocka_unit_test(test_cast_round_trips), cmocka_unit_test(test_cast_precision),
      cmocka_unit_test(test_cast_errors),      cmocka_unit_test(test_copy),
      cmocka_unit_test(test_cast_like_and_gradients),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
