/* test_plugin.c: loading plugins through the API: a good one (Swish, checked against a
 * double-precision reference) and each kind that must be refused with a clear message.
 * argv: swish.so wrong_version.so no_entry.so clash_builtin.so clash_swish.so failing.so
 *       long_engine.so bad_kernel.so direct.so */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Every schema and kernel in the registry, one line each (its entry's address, names and
 * functions), sorted. */
typedef struct {
  size_t n;
  char **lines;
} registry_snapshot;

static int cmp_line(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static registry_snapshot snapshot(void) {
  size_t ns = dm_schema_count(), nk = dm_kernel_count();
  registry_snapshot r = {0, calloc(ns + nk + 1, sizeof(char *))};
  assert_non_null(r.lines);
  for (size_t i = 0; i < ns; i++) {
    const dm_op_schema *s = dm_schema_at(i);
    assert_non_null(s);
    assert_true(asprintf(&r.lines[r.n++], "S %p %s %d %d %d %d", (const void *)s, s->type,
                         s->min_inputs, s->max_inputs, s->min_outputs, s->max_outputs) > 0);
  }
  for (size_t i = 0; i < nk; i++) {
    const dm_kernel_def *k = dm_kernel_at(i);
    assert_non_null(k);
    assert_true(asprintf(&r.lines[r.n++], "K %p %s %d '%s' %p", (const void *)k, k->type,
                         (int)k->device, k->engine ? k->engine : "",
                         *(void *const *)&k->run) > 0);
  }
  assert_null(dm_kernel_at(nk));
  qsort(r.lines, r.n, sizeof *r.lines, cmp_line);
  return r;
}

static void snapshot_free(registry_snapshot *r) {
  for (size_t i = 0; i < r->n; i++)
    free(r->lines[i]);
  free(r->lines);
}

static void assert_same_registry(registry_snapshot *before) {
  registry_snapshot after = snapshot();
  for (size_t i = 0; i < before->n && i < after.n; i++)
    if (strcmp(before->lines[i], after.lines[i]) != 0)
      fail_msg("the registry changed: '%s' became '%s'", before->lines[i], after.lines[i]);
  assert_int_equal(after.n, before->n);
  snapshot_free(&after);
  snapshot_free(before);
}

/* A refused plugin (its library closed again) leaves every schema and kernel as it was,
 * and its op is not found: no entry points into the unloaded library. */
static void refused_leaves_registry(const char *path, dm_status want, const char *op,
                                    const char *frag) {
  assert_ok(dm_init());
  registry_snapshot before = snapshot();
  assert_status_msg(dm_plugin_load(path), want, path, frag);
  assert_null(dm_schema_lookup(op));
  assert_false(dm_kernel_exists(op, DM_CPU, NULL));
  assert_same_registry(&before);
}

static void test_long_engine_refused(void **state) {
  (void)state;
  refused_leaves_registry(paths[7], DM_ERR_INVALID, "BadLongEngineOp", "engine name");
}

static void test_bad_kernel_refused(void **state) {
  (void)state;
  refused_leaves_registry(paths[8], DM_ERR_INVALID, "BadKernelOp", "device 7");
}

static void test_direct_registration_rolled_back(void **state) {
  (void)state;
  refused_leaves_registry(paths[9], DM_ERR_INVALID, "BadDirectOp", "dm_plugin_entry returned");
}

static void test_not_a_library(void **state) {
  (void)state;
  assert_status_msg(dm_plugin_load("/nonexistent/plugin.so"), DM_ERR_IO, "cannot load plugin");
}

int main(int argc, char **argv) {
  if (argc != 10) {
    fprintf(stderr, "usage: %s swish wrong_version no_entry clash_builtin clash_swish failing "
                    "long_engine bad_kernel direct\n",
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
      cmocka_unit_test(test_long_engine_refused),
      cmocka_unit_test(test_bad_kernel_refused),
      cmocka_unit_test(test_direct_registration_rolled_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
