/* test_net.c: instantiation and execution of nets: arity, arguments, in-place rules,
 * missing inputs, size limits, engine fallback, and the context in error messages.
 * The ops used here are registered by the test itself through the public registration
 * calls, so these checks do not depend on any built-in kernel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/registry.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "demitasse_plugin.h"
#include "test_util.h"

/* TestScale: Y = X * scale (+ offset); FP32 only. */
static dm_status scale_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (dm_tensor_dtype(x) != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "X must be FLOAT, got %s",
                       dm_dtype_name(dm_tensor_dtype(x)));
  float scale = dm_op_arg_float(ctx, "scale", 1.0f);
  float offset = dm_op_arg_float(ctx, "offset", 0.0f);
  dm_tensor *y = dm_op_output(ctx, 0);
  DM_TRY(dm_tensor_resize_like(y, x));
  const float *px = dm_tensor_data(x);
  float *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < dm_tensor_numel(x); i++)
    py[i] = px[i] * scale + offset;
  return DM_OK;
}

/* TestFill: Y of shape `shape`, every element `value`. */
static dm_status fill_run(dm_op_ctx *ctx) {
  size_t n;
  const int64_t *shape = dm_op_arg_ints(ctx, "shape", &n);
  if (n > DM_MAX_DIMS)
    return dm_op_error(ctx, DM_ERR_SHAPE, "too many dimensions");
  dm_tensor *y = dm_op_output(ctx, 0);
  DM_TRY(dm_tensor_resize(y, DM_FLOAT, (int)n, shape));
  float *py = dm_tensor_mutable_data(y);
  float v = dm_op_arg_float(ctx, "value", 0.0f);
  for (int64_t i = 0; i < dm_tensor_numel(y); i++)
    py[i] = v;
  return DM_OK;
}

/* TestAdd: C = A + B, shapes must match. */
static dm_status add_run(dm_op_ctx *ctx) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  if (dm_tensor_numel(a) != dm_tensor_numel(b))
    return dm_op_error(ctx, DM_ERR_SHAPE, "A has %lld elements but B has %lld",
                       (long long)dm_tensor_numel(a), (long long)dm_tensor_numel(b));
  dm_tensor *c = dm_op_output(ctx, 0);
  DM_TRY(dm_tensor_resize_like(c, a));
  const float *pa = dm_tensor_data(a), *pb = dm_tensor_data(b);
  float *pc = dm_tensor_mutable_data(c);
  for (int64_t i = 0; i < dm_tensor_numel(a); i++)
    pc[i] = pa[i] + pb[i];
  return DM_OK;
}

/* An engine-specific TestScale that adds 1000 so a test can see which kernel ran. */
static dm_status scale_fast_run(dm_op_ctx *ctx) {
  DM_TRY(scale_run(ctx));
  float *py = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  for (int64_t i = 0; i < dm_tensor_numel(dm_op_output(ctx, 0)); i++)
    py[i] += 1000.0f;
  return DM_OK;
}

/* An engine's TestScale that refuses every op when it runs (as oneDNN's kernels do for a
 * primitive it has no implementation of), counting its tries; and one that fails with
 * DM_ERR_UNSUPPORTED without refusing (an error, not a refusal). */
static int shy_tries;
static dm_status scale_shy_run(dm_op_ctx *ctx) {
  shy_tries++;
  dm_op_refuse(ctx, "no implementation for these shapes");
  return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "refused");
}
static dm_status scale_broken_run(dm_op_ctx *ctx) {
  return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "broken engine");
}

static const dm_arg_spec scale_args[] = {
    {"scale", DM_ARG_FLOAT, 1, "multiplier"}, {"offset", DM_ARG_FLOAT, 0, "added"}, {NULL, 0, 0, NULL}};
static const dm_inplace_pair scale_inplace[] = {{0, 0}, {-1, -1}};
static const dm_op_schema scale_schema = {DM_SCHEMA_SIZE, .type = "TestScale", .min_inputs = 1, .max_inputs = 1,
                                          .min_outputs = 1, .max_outputs = 1, .args = scale_args,
                                          .inplace = scale_inplace};
static const dm_arg_spec fill_args[] = {{"shape", DM_ARG_INTS, 1, ""},
                                        {"value", DM_ARG_FLOAT, 0, ""}, {NULL, 0, 0, NULL}};
static const dm_op_schema fill_schema = {DM_SCHEMA_SIZE, .type = "TestFill", .min_outputs = 1,
                                         .max_outputs = 1, .args = fill_args,
                                         .precision = DM_PREC_NONE};
static const dm_op_schema add_schema = {DM_SCHEMA_SIZE, .type = "TestAdd", .min_inputs = 2, .max_inputs = 2,
                                        .min_outputs = 1, .max_outputs = 1};
/* TestArgTypes records dm_op_arg_type of the arguments named in arg_names. */
static const char *const arg_names[] = {"f", "i", "s", "fs", "is", "ss", "absent"};
static dm_arg_type seen_types[7];
static dm_status arg_types_run(dm_op_ctx *ctx) {
  for (int k = 0; k < 7; k++)
    seen_types[k] = dm_op_arg_type(ctx, arg_names[k]);
  return DM_OK;
}
static const dm_op_schema arg_types_schema = {DM_SCHEMA_SIZE, .type = "TestArgTypes",
                                              .max_inputs = -1, .max_outputs = -1};

static const dm_kernel_def kernels[] = {
    {DM_KERNEL_SIZE, "TestArgTypes", DM_CPU, NULL, NULL, arg_types_run, NULL, 0},
    {DM_KERNEL_SIZE, "TestScale", DM_CPU, "", NULL, scale_run, NULL, 0},
    {DM_KERNEL_SIZE, "TestScale", DM_CPU, "FAST", NULL, scale_fast_run, NULL, 0},
    {DM_KERNEL_SIZE, "TestScale", DM_CPU, "SHY", NULL, scale_shy_run, NULL, 0},
    {DM_KERNEL_SIZE, "TestScale", DM_CPU, "BROKEN", NULL, scale_broken_run, NULL, 0},
    {DM_KERNEL_SIZE, "TestFill", DM_CPU, NULL, NULL, fill_run, NULL, 0},
    {DM_KERNEL_SIZE, "TestAdd", DM_CPU, NULL, NULL, add_run, NULL, 0},
};

static int setup_registry(void **state) {
  (void)state;
  if (dm_init() != DM_OK)
    return -1;
  if (dm_register_schema(&scale_schema) || dm_register_schema(&fill_schema) ||
      dm_register_schema(&add_schema) || dm_register_schema(&arg_types_schema))
    return -1;
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
    if (dm_register_kernel(&kernels[i]))
      return -1;
  return 0;
}

static int ws_setup(void **state) { return dm_workspace_create((dm_workspace **)state); }
static int ws_teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static const float *fetch_floats(dm_workspace *ws, const char *name, int64_t *n) {
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &t));
  assert_int_equal(dm_tensor_dtype(t), DM_FLOAT);
  *n = dm_tensor_numel(t);
  return dm_tensor_data(t);
}

static void test_runs_in_order_and_in_place(void **state) {
  dm_workspace *ws = *state;
  assert_ok(run_text(ws, "name: 'n' "
                         "op { output: 'x' type: 'TestFill' arg { name: 'shape' ints: [2, 3] } "
                         "     arg { name: 'value' f: 2 } } "
                         "op { input: 'x' output: 'x' type: 'TestScale' arg { name: 'scale' f: 3 } } "
                         "op { input: 'x' input: 'x' output: 'y' type: 'TestAdd' }"));
  int64_t n;
  const float *y = fetch_floats(ws, "y", &n);
  assert_int_equal(n, 6);
  for (int i = 0; i < 6; i++)
    assert_true(y[i] == 12.0f);
}

static void test_unknown_op(void **state) {
  assert_status_msg(run_text(*state, "op { input: 'x' output: 'y' name: 'b' type: 'Bogus' }"),
                    DM_ERR_NOT_FOUND, "op 0 (Bogus 'b')", "unknown operator type 'Bogus'",
                    "--plugin LIB.so");
}

static void test_wrong_arity(void **state) {
  assert_status_msg(run_text(*state, "op { output: 'x' type: 'TestFill' arg { name: 'shape' ints: 1 } }"
                                     "op { input: 'x' output: 'y' type: 'TestAdd' }"),
                    DM_ERR_INVALID, "op 1 (TestAdd)", "takes 2 inputs, got 1");
  assert_status_msg(run_text(*state, "op { output: 'a' output: 'b' type: 'TestFill' "
                                     "arg { name: 'shape' ints: 1 } }"),
                    DM_ERR_INVALID, "op 0 (TestFill)", "takes 1 output, got 2");
}

static void test_missing_required_arg(void **state) {
  assert_status_msg(run_text(*state, "op { input: 'x' output: 'y' name: 's' type: 'TestScale' }"),
                    DM_ERR_INVALID, "op 0 (TestScale 's')", "missing required argument 'scale'");
}

static void test_wrong_arg_type(void **state) {
  assert_status_msg(run_text(*state, "op { input: 'x' output: 'y' type: 'TestScale' "
                                     "arg { name: 'scale' s: 'big' } }"),
                    DM_ERR_TYPE, "argument 'scale' must be float", "a string (s)");
  assert_status_msg(run_text(*state, "op { output: 'y' type: 'TestFill' "
                                     "arg { name: 'shape' f: 2.5 } }"),
                    DM_ERR_TYPE, "argument 'shape' must be ints");
}

static void test_duplicate_arg(void **state) {
  assert_status_msg(run_text(*state, "op { input: 'x' output: 'y' type: 'TestScale' "
                                     "arg { name: 'scale' f: 1 } arg { name: 'scale' f: 2 } }"),
                    DM_ERR_INVALID, "argument 'scale' is given twice");
}

static void test_in_place_refused(void **state) {
  assert_status_msg(run_text(*state, "op { input: 'x' input: 'z' output: 'x' type: 'TestAdd' }"),
                    DM_ERR_INVALID, "output 0 'x' is input 0 too", "cannot run in place");
}

static void test_missing_input_named(void **state) {
  assert_status_msg(run_text(*state, "name: 'predict' "
                                     "op { input: 'data' output: 'y' name: 'sc' type: 'TestScale' "
                                     "arg { name: 'scale' f: 1 } }"),
                    DM_ERR_NOT_FOUND, "net 'predict'", "op 0 (TestScale 'sc')",
                    "input 0 'data' has no data");
}

static void test_inconsistent_shapes(void **state) {
  assert_status_msg(
      run_text(*state, "op { output: 'a' type: 'TestFill' arg { name: 'shape' ints: [2, 2] } }"
                       "op { output: 'b' type: 'TestFill' arg { name: 'shape' ints: [3] } }"
                       "op { input: 'a' input: 'b' output: 'c' name: 'add' type: 'TestAdd' }"),
      DM_ERR_SHAPE, "op 2 (TestAdd 'add')", "A has 4 elements but B has 3");
}

static void test_shape_overflow_and_limit(void **state) {
  dm_workspace *ws = *state;
  assert_status_msg(run_text(ws, "op { output: 'a' type: 'TestFill' "
                                 "arg { name: 'shape' ints: [4294967296, 4294967296] } }"),
                    DM_ERR_LIMIT, "overflows");
  dm_workspace_set_tensor_limit(ws, 1 << 20);
  assert_status_msg(run_text(ws, "op { output: 'b' type: 'TestFill' "
                                 "arg { name: 'shape' ints: [1024, 1024] } }"),
                    DM_ERR_LIMIT, "exceeds the limit of 1048576 bytes");
  assert_status_msg(run_text(ws, "op { output: 'c' type: 'TestFill' "
                                 "arg { name: 'shape' ints: [2, -3] } }"),
                    DM_ERR_SHAPE, "negative");
  int64_t dims[2] = {INT64_MAX, 2};
  float one = 1;
  assert_status_msg(dm_workspace_feed(ws, "big", DM_FLOAT, 2, dims, &one), DM_ERR_LIMIT,
                    "feeding blob 'big'");
}

static void test_engine_preference(void **state) {
  dm_workspace *ws = *state;
  float x = 1;
  int64_t one = 1;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, &one, &x));
  /* Preference list: an unknown engine falls through to the next, then to plain. */
  assert_ok(run_text(ws, "op { input: 'x' output: 'a' type: 'TestScale' engine: 'NOPE,FAST' "
                         "arg { name: 'scale' f: 2 } }"
                         "op { input: 'x' output: 'b' type: 'TestScale' engine: 'NOPE' "
                         "arg { name: 'scale' f: 2 } }"));
  int64_t n;
  assert_true(fetch_floats(ws, "a", &n)[0] == 1002.0f);
  assert_true(fetch_floats(ws, "b", &n)[0] == 2.0f);
}

/* A kernel that refuses the op while running gives way to the plain kernel, which runs it
 * then and in every later run; an engine's plain error stays an error. */
static void test_refusal_at_run_falls_back(void **state) {
  dm_workspace *ws = *state;
  float x = 3;
  int64_t one = 1, n;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, &one, &x));
  dm_net *net = NULL;
  shy_tries = 0;
  assert_ok(net_from_text(ws, "op { input: 'x' output: 'y' type: 'TestScale' engine: 'SHY' "
                              "arg { name: 'scale' f: 2 } }", &net));
  assert_ok(dm_net_run(net));
  assert_true(fetch_floats(ws, "y", &n)[0] == 6.0f);
  assert_ok(dm_net_run(net));
  assert_int_equal(shy_tries, 1); /* asked once, then the plain kernel for good */
  assert_status_msg(run_text(ws, "op { input: 'x' output: 'z' type: 'TestScale' engine: "
                                 "'BROKEN' arg { name: 'scale' f: 2 } }"),
                    DM_ERR_UNSUPPORTED, "broken engine");
}

static void test_no_kernel_for_device(void **state) {
  assert_status_msg(run_text(*state, "op { input: 'x' output: 'y' type: 'TestScale' "
                                     "device_option { device_type: 1 } arg { name: 'scale' f: 1 } }"),
                    DM_ERR_NOT_FOUND, "no kernel for device CUDA");
}

static void test_feed_fetch_and_blob_names(void **state) {
  dm_workspace *ws = *state;
  int64_t dims[2] = {2, 2};
  int32_t v[4] = {1, 2, 3, 4};
  assert_ok(dm_workspace_feed(ws, "b", DM_INT32, 2, dims, v));
  assert_ok(dm_workspace_feed(ws, "a", DM_INT32, 2, dims, v));
  assert_int_equal(dm_workspace_blob_count(ws), 2);
  assert_string_equal(dm_workspace_blob_name(ws, 0), "a");
  assert_string_equal(dm_workspace_blob_name(ws, 1), "b");
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, "a", &t));
  assert_memory_equal(dm_tensor_data(t), v, sizeof v);
  assert_status_msg(dm_workspace_fetch(ws, "zz", &t), DM_ERR_NOT_FOUND, "'zz'");
}

static void test_registration_refusals(void **state) {
  (void)state;
  assert_status_msg(dm_register_schema(&scale_schema), DM_ERR_EXISTS, "'TestScale'");
  static const dm_kernel_def orphan = {DM_KERNEL_SIZE, .type = "NoSuchOp", .device = DM_CPU, .run = scale_run};
  assert_status_msg(dm_register_kernel(&orphan), DM_ERR_NOT_FOUND, "no schema");
  assert_status_msg(dm_register_kernel(&kernels[0]), DM_ERR_EXISTS, "already exists");
  /* Arity that no op could meet, and devices that do not exist: refused, not registered. */
  static const dm_op_schema bad_schemas[] = {
      {DM_SCHEMA_SIZE, .type = "BadArityIn", .min_inputs = 3, .max_inputs = 2, .max_outputs = -1},
      {DM_SCHEMA_SIZE, .type = "BadArityOut", .max_inputs = -1, .min_outputs = 2, .max_outputs = 1},
      {DM_SCHEMA_SIZE, .type = "BadNegIn", .min_inputs = -1, .max_inputs = -1, .max_outputs = -1},
      {DM_SCHEMA_SIZE, .type = "BadNegOut", .max_inputs = -1, .min_outputs = -2, .max_outputs = 1},
      {DM_SCHEMA_SIZE, .type = "BadMaxIn", .max_inputs = -2, .max_outputs = -1},
  };
  static const char *const why[] = {"min_inputs 3 is more than max_inputs 2",
                                    "min_outputs 2 is more than max_outputs 1",
                                    "min_inputs -1 is negative", "min_outputs -2 is negative",
                                    "max_inputs -2 is negative"};
  for (size_t i = 0; i < sizeof bad_schemas / sizeof bad_schemas[0]; i++) {
    assert_status_msg(dm_register_schema(&bad_schemas[i]), DM_ERR_INVALID, bad_schemas[i].type,
                      why[i]);
    assert_null(dm_schema_lookup(bad_schemas[i].type));
  }
  static const dm_op_schema unbounded = {DM_SCHEMA_SIZE, .type = "TestUnbounded", .min_inputs = 2,
                                         .max_inputs = -1, .min_outputs = 1, .max_outputs = -1};
  assert_ok(dm_register_schema(&unbounded));
  static const dm_kernel_def bad_device[] = {
      {DM_KERNEL_SIZE, .type = "TestScale", .device = (dm_device_type)2, .engine = "DEV2",
       .run = scale_run},
      {DM_KERNEL_SIZE, .type = "TestScale", .device = (dm_device_type)-1, .engine = "DEVM1",
       .run = scale_run},
  };
  assert_status_msg(dm_register_kernel(&bad_device[0]), DM_ERR_INVALID, "'TestScale'",
                    "device 2 does not exist");
  assert_false(dm_kernel_exists("TestScale", (dm_device_type)2, "DEV2"));
  assert_status_msg(dm_register_kernel(&bad_device[1]), DM_ERR_INVALID, "device -1 does not exist");
  assert_false(dm_kernel_exists("TestScale", (dm_device_type)-1, "DEVM1"));
}

/* Writing an output must not change another blob that shares its storage. */
static void test_shared_storage_detached(void **state) {
  dm_workspace *ws = *state;
  float v = 5;
  int64_t one = 1;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, &one, &v));
  dm_blob *bx = dm_workspace_find(ws, "x"), *by = NULL;
  assert_ok(dm_workspace_get_or_create(ws, "y", &by));
  dm_tensor_share(by->tensor, bx->tensor); /* y is a view of x, as Reshape makes */
  assert_ok(run_text(ws, "op { input: 'x' output: 'y' type: 'TestScale' arg { name: 'scale' f: 2 } }"));
  int64_t n;
  assert_true(fetch_floats(ws, "x", &n)[0] == 5.0f);
  assert_true(fetch_floats(ws, "y", &n)[0] == 10.0f);
  /* In place on a view: the view gets its own copy first (copy-on-write). */
  dm_tensor_share(by->tensor, bx->tensor);
  assert_ok(run_text(ws, "op { input: 'y' output: 'y' type: 'TestScale' arg { name: 'scale' f: 3 } }"));
  assert_true(fetch_floats(ws, "x", &n)[0] == 5.0f);
  assert_true(fetch_floats(ws, "y", &n)[0] == 15.0f);
}

/* An op that names one blob twice among its outputs is refused at instantiation (each
 * of these wrote past a buffer, or freed one twice, when it ran). The first net is the
 * 79-byte reproducer from issue 12. */
static void test_duplicate_outputs_refused(void **state) {
  dm_workspace *ws = *state;
  assert_status_msg(run_text(ws, "op { output: 'x' type: 'ConstantFill' arg { name: 'shape' ints: 10 "
                                 "ints: 10 } arg { name: 'value' f: 1 } } "
                                 "op { input: 'x' output: 'p' output: 'p' type: 'Dropout' "
                                 "arg { name: 'is_test' i: 1 } }"),
                    DM_ERR_INVALID, "op 1 (Dropout)", "outputs 0 and 1 are both 'p'");
  static const struct {
    const char *op, *want;
  } cases[] = {
      {"op { input: 'x' output: 'a' output: 'b' output: 'a' name: 'sp' type: 'Split' "
       "arg { name: 'axis' i: 0 } }",
       "op 1 (Split 'sp')"},
      {"op { input: 'x' input: 'x' output: 'c' output: 'c' type: 'Concat' "
       "arg { name: 'axis' i: 0 } }",
       "op 1 (Concat)"},
      {"op { input: 'x4' input: 's' input: 's' input: 's' input: 's' output: 'y' "
       "output: 's2' output: 'm' output: 'm' output: 'v' type: 'SpatialBN' "
       "arg { name: 'is_test' i: 0 } }",
       "op 1 (SpatialBN)"},
      {"op { input: 'x' input: 'lab' output: 'sm' output: 'sm' type: 'SoftmaxWithLoss' }",
       "op 1 (SoftmaxWithLoss)"},
      {"op { input: 'x4' input: 'w' input: 'x4' output: 'g' output: 'h' output: 'g' "
       "type: 'ConvGradient' arg { name: 'kernel' i: 1 } }",
       "op 1 (ConvGradient)"},
      {"op { input: 'x' output: 'p' output: 'p' type: 'Dropout' arg { name: 'is_test' i: 0 } }",
       "op 1 (Dropout)"},
  };
  const char *fill = "op { output: 'x' type: 'ConstantFill' arg { name: 'shape' ints: [4, 10] } "
                     "arg { name: 'value' f: 1 } } ";
  char text[1024];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(text, sizeof text, "%s%s", fill, cases[i].op);
    assert_status_msg(run_text(ws, text), DM_ERR_INVALID, cases[i].want, "are both",
                      "may not name one blob twice among its outputs");
  }
}

/* The typed argument query names the kind of value each argument holds. */
static void test_arg_types(void **state) {
  assert_ok(run_text(*state, "op { type: 'TestArgTypes' arg { name: 'f' f: 1.5 } "
                             "arg { name: 'i' i: 3 } arg { name: 's' s: 'x' } "
                             "arg { name: 'fs' floats: 1 floats: 2 } arg { name: 'is' ints: 4 } "
                             "arg { name: 'ss' strings: 'a' } }"));
  const dm_arg_type want[7] = {DM_ARG_FLOAT, DM_ARG_INT,     DM_ARG_STRING, DM_ARG_FLOATS,
                               DM_ARG_INTS,  DM_ARG_STRINGS, 0};
  for (int k = 0; k < 7; k++)
    assert_int_equal(seen_types[k], want[k]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_arg_types, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_runs_in_order_and_in_place, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_unknown_op, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_wrong_arity, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_missing_required_arg, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_wrong_arg_type, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_arg, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_in_place_refused, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_missing_input_named, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_inconsistent_shapes, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_shape_overflow_and_limit, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_engine_preference, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_refusal_at_run_falls_back, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_no_kernel_for_device, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_feed_fetch_and_blob_names, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_registration_refusals, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_shared_storage_detached, ws_setup, ws_teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_outputs_refused, ws_setup, ws_teardown),
  };
  return cmocka_run_group_tests(tests, setup_registry, NULL);
}
