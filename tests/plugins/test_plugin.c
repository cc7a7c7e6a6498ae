/* test_plugin.c: loading plugins through the API: a good one (Swish, checked against a
 * double-precision reference) and each kind that must be refused with a clear message.
 * argv: swish.so wrong_version.so no_entry.so clash_builtin.so clash_swish.so failing.so */
#include <math.h>
#include <stdio.h>

#include "core/registry.h"
#include "test_util.h"

static char **paths;

static void test_swish_loads_and_runs(void **state) {
  (void)state;
  assert_ok(dm_plugin_load(paths[1]));
  assert_non_null(dm_schema_lookup("Swish"));
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  float x[7] = {-30.0f, -2.5f, -1e-3f, 0.0f, 0.5f, 3.0f, 20.0f};
  int64_t n = 7;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, &n, x));
  assert_ok(run_text(ws, "op { input: 'x' output: 'y' type: 'Swish' }"));
  const dm_tensor *y = NULL;
  assert_ok(dm_workspace_fetch(ws, "y", &y));
  const float *py = dm_tensor_data(y);
  for (int i = 0; i < 7; i++) {
    double ref = x[i] / (1.0 + exp(-(double)x[i]));
    /* a few float roundings: exp, add, divide */
    assert_true(fabs(py[i] - ref) <= 4 * 0x1p-24 * fabs(ref) + 1e-30);
  }
  dm_workspace_destroy(ws);
}

static void test_wrong_version(void **state) {
  (void)state;
  assert_status_msg(dm_plugin_load(paths[2]), DM_ERR_VERSION, paths[2], "version 999",
                    "rebuild the plugin");
  assert_null(dm_schema_lookup("BadPluginOp"));
}

static void test_missing_entry(void **state) {
  (void)state;
  assert_status_msg(dm_plugin_load(paths[3]), DM_ERR_NOT_FOUND, "dm_plugin_entry");
}

static void test_clash_with_builtin(void **state) {
  (void)state;
  assert_status_msg(dm_plugin_load(paths[4]), DM_ERR_EXISTS, "'Relu'", "already exists");
}

static void test_clash_with_plugin(void **state) {
  (void)state;
  assert_status_msg(dm_plugin_load(paths[5]), DM_ERR_EXISTS, "'Swish'");
  assert_status_msg(dm_plugin_load(paths[1]), DM_ERR_EXISTS, "'Swish'");
}

static void test_failing_entry_registers_nothing(void **state) {
  (void)state;
  assert_status_msg(dm_plugin_load(paths[6]), DM_ERR_INVALID, "dm_plugin_entry returned");
  assert_null(dm_schema_lookup("BadPluginOp"));
}

static void test_not_a_library(void **state) {
  (void)state;
  assert_status_msg(dm_plugin_load("/nonexistent/plugin.so"), DM_ERR_IO, "cannot load plugin");
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s swish wrong_version no_entry clash_builtin clash_swish failing\n",
            argv[0]);
    return 2;
  }
  paths = argv;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_swish_loads_and_runs),
      cmocka_unit_test(test_wrong_version),
      cmocka_unit_test(test_missing_entry),
      cmocka_unit_test(test_clash_with_builtin),
      cmocka_unit_test(test_clash_with_plugin),
      cmocka_unit_test(test_failing_entry_registers_nothing),
      cmocka_unit_test(test_not_a_library),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
