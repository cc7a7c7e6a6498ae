/* test_plugin_abi.c: the plugin ABI grows without breaking plugins (see "How the ABI
 * grows" in demitasse_plugin.h).
 * - A plugin built against the frozen ABI 3.0 headers (shorter structs) loads, its
 *   registered structs read the appended fields as zero, and its op runs.
 * - A struct from a newer header (longer than this library's) registers when the fields
 *   this library does not know are zero, and is refused, saying why, when one is set.
 * - A struct_size below the first ABI 3 layout (e.g. 0: not filled in) is refused.
 * argv: frozen_plugin.so */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "demitasse_plugin.h"
#include "test_util.h"

static char **paths;

static void test_frozen_plugin_loads_after_growth(void **state) {
  (void)state;
  void *lib = dlopen(paths[1], RTLD_NOW | RTLD_LOCAL);
  assert_non_null(lib);
  const size_t *schema_size = dlsym(lib, "frozen_schema_size");
  const size_t *kernel_size = dlsym(lib, "frozen_kernel_size");
  assert_non_null(schema_size);
  assert_non_null(kernel_size);
  /* the premise: fields were appended since the plugin was built */
  assert_true(*schema_size < sizeof(dm_op_schema));
  assert_true(*kernel_size < sizeof(dm_kernel_def));
  /* every appended block starts past the old struct, never in its tail padding */
  assert_true(offsetof(dm_op_schema, fp32_inputs) >= *schema_size);
  assert_true(offsetof(dm_kernel_def, supports) >= *kernel_size);
  assert_ok(dm_plugin_load(paths[1]));
  /* registered from freed heap structs with garbage padding: copied in the call, and
   * nothing of the padding read as a field */
  const dm_op_schema *h = dm_schema_lookup("TwiceHeap");
  assert_non_null(h);
  assert_int_equal(h->fp32_inputs | h->fp32_outputs | h->nonfloat_inputs | h->nonfloat_outputs |
                       h->host_inputs | h->reused_outputs | h->layout_inputs | h->layout_outputs,
                   0);
  assert_int_equal(h->layout, DM_LAYOUT_REFUSE); /* ABI 3.2's: refused by the layout pass */
  assert_int_equal(h->value_copy, 0); /* ABI 3.4's: not a copy, no gradient slots */
  assert_null(h->grad_slots);
  /* ABI 3.4's block starts past 3.2's last field, never in its tail padding */
  assert_true(offsetof(dm_op_schema, value_copy) >=
              offsetof(dm_op_schema, layout) + sizeof(dm_layout_rule));
  assert_int_equal(h->role, 0);
  assert_int_equal(h->skip_input, 0);
  assert_int_equal(h->max_inputs, 1);
  const dm_op_schema *s = dm_schema_lookup("Twice");
  assert_non_null(s);
  assert_int_equal(s->struct_size, sizeof(dm_op_schema));
  assert_int_equal(s->max_outputs, 1);
  assert_int_equal(s->fp32_inputs | s->fp32_outputs | s->nonfloat_inputs | s->nonfloat_outputs |
                       s->host_inputs | s->reused_outputs,
                   0);
  assert_int_equal(s->role, DM_ROLE_COMPUTE);
  assert_int_equal(s->skip_input, 0);
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  float x[3] = {1.5f, -2.0f, 0.25f};
  int64_t n = 3;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, &n, x));
  assert_ok(run_text(ws, "op { input: 'x' output: 'y' type: 'Twice' }"));
  assert_ok(run_text(ws, "op { input: 'y' output: 'z' type: 'TwiceHeap' }"));
  const dm_tensor *z = NULL;
  assert_ok(dm_workspace_fetch(ws, "z", &z));
  for (int i = 0; i < 3; i++)
    assert_true(((const float *)dm_tensor_data(z))[i] == 4 * x[i]);
  const dm_tensor *y = NULL;
  assert_ok(dm_workspace_fetch(ws, "y", &y));
  const float *py = dm_tensor_data(y);
  for (int i = 0; i < 3; i++)
    assert_true(py[i] == 2 * x[i]);
  dm_workspace_destroy(ws);
  dlclose(lib);
}

static dm_status noop_run(dm_op_ctx *ctx) {
  (void)ctx;
  return DM_OK;
}

/* A schema as a newer header would lay it out: this library's fields, then one more. */
typedef struct future_schema {
  dm_op_schema known;
  int64_t appended_later;
} future_schema;

static void test_newer_struct(void **state) {
  (void)state;
  assert_ok(dm_init());
  future_schema f;
  memset(&f, 0, sizeof f);
  f.known.struct_size = sizeof f;
  f.known.type = "FutureOp";
  f.known.max_inputs = f.known.max_outputs = -1;
  f.appended_later = 7;
  assert_status_msg(dm_register_schema(&f.known), DM_ERR_VERSION, "'FutureOp'",
                    "fields this library does not know");
  assert_null(dm_schema_lookup("FutureOp"));
  f.appended_later = 0; /* left at its default: fine */
  assert_ok(dm_register_schema(&f.known));
  const dm_op_schema *s = dm_schema_lookup("FutureOp");
  assert_non_null(s);
  assert_int_equal(s->struct_size, sizeof(dm_op_schema));
}

static void test_unset_struct_size(void **state) {
  (void)state;
  assert_ok(dm_init());
  static const dm_op_schema no_size = {.type = "NoSizeOp", .max_inputs = -1, .max_outputs = -1};
  assert_status_msg(dm_register_schema(&no_size), DM_ERR_VERSION, "'NoSizeOp'",
                    "set .struct_size = sizeof(dm_op_schema)");
  assert_null(dm_schema_lookup("NoSizeOp"));
  dm_op_schema garbage = no_size;
  garbage.struct_size = (size_t)1 << 40; /* not a size: refused before reading past it */
  assert_status_msg(dm_register_schema(&garbage), DM_ERR_VERSION, "'NoSizeOp'",
                    "is not a struct size");
  static const dm_kernel_def no_kernel_size = {.type = "Relu", .engine = "NOSIZE",
                                               .run = noop_run};
  assert_status_msg(dm_register_kernel(&no_kernel_size), DM_ERR_VERSION, "'Relu'",
                    "set .struct_size = sizeof(dm_kernel_def)");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s frozen_plugin.so\n", argv[0]);
    return 2;
  }
  paths = argv;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frozen_plugin_loads_after_growth),
      cmocka_unit_test(test_newer_struct),
      cmocka_unit_test(test_unset_struct_size),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
