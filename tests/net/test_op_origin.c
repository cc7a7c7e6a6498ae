/* test_op_origin.c: errors name ops as the user wrote them (net/op_origin.h). A small FC
 * training net goes through the training pipeline with FP16 mixed precision; then:
 *   - the FC, moved by the casts, is named by its index and type as written, with the
 *     rewritten index beside it; its gradient op as the gradient of that op; a cast as
 *     the mixed-precision pass's and the loss gradient's fill as the gradient pass's;
 *   - an op where it was written (same index and type) is named plainly;
 *   - a user's own debug_info is kept and never read as a stamp;
 *   - a written net carries no stamp, and the in-memory one keeps them;
 *   - a run-time error of the rewritten net names the op as written. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/netio.h"
#include "net/netdef_build.h"
#include "net/op_origin.h"
#include "net/passes/pipeline.h"
#include "netdef_test_util.h"
#include "test_util.h"

static const char *net_text =
    "op { input: 'x' input: 'W' input: 'b' output: 'logits' name: 'fc1' type: 'FC' }"
    "op { input: 'logits' input: 'label' output: 'softmax' output: 'loss' "
    "     type: 'SoftmaxWithLoss' debug_info: 'made by my script' }";

static Caffe2__NetDef *training_net(void) {
  Caffe2__NetDef *def = parse(net_text);
  static const char *const data[] = {"x", "label"};
  const char *loss = "loss";
  dm_pipeline_opts p;
  dm_pipeline_opts_init_training(&p, &loss, 1, data, 2);
  p.mixed_precision = 1;
  p.mp.target = DM_FLOAT16;
  Caffe2__NetDef *init_add = NULL;
  assert_ok(dm_pipeline_run(def, &p, &init_add, NULL));
  protobuf_c_message_free_unpacked(&init_add->base, NULL);
  return def;
}

/* The index of the first op of `type`; fails the test without one. */
static size_t find(const Caffe2__NetDef *def, const char *type) {
  for (size_t i = 0; i < def->n_op; i++)
    if (strcmp(def->op[i]->type, type) == 0)
      return i;
  fail_msg("no %s op in the rewritten net", type);
  return 0;
}

static void expect_describe(const Caffe2__NetDef *def, size_t i, const char *want) {
  char got[512];
  dm_opdef_describe(def->op[i], i, got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("op %zu (%s): described as \"%s\", wanted \"%s\"", i, def->op[i]->type, got, want);
}

static void test_names_as_written(void **state) {
  (void)state;
  Caffe2__NetDef *def = training_net();
  char want[512];
  size_t fc = find(def, "FC");
  assert_true(fc > 0); /* the casts of x and W come first */
  snprintf(want, sizeof want, "op 0 (FC 'fc1') as written (op %zu, FC, in the rewritten net)",
           fc);
  expect_describe(def, fc, want);
  size_t g = find(def, "FCGradient");
  snprintf(want, sizeof want, "op %zu (FCGradient, the gradient of op 0 (FC 'fc1') as written)",
           g);
  expect_describe(def, g, want);
  size_t cast = find(def, "FloatToHalf");
  snprintf(want, sizeof want, "op %zu (FloatToHalf, added by the mixed precision pass)", cast);
  expect_describe(def, cast, want);
  size_t fill = find(def, "ConstantFill");
  snprintf(want, sizeof want, "op %zu (ConstantFill, added by the gradient pass)", fill);
  expect_describe(def, fill, want);
  /* the user's own debug_info: kept, and the op named plainly */
  size_t sm = find(def, "SoftmaxWithLoss");
  assert_string_equal(def->op[sm]->debug_info, "made by my script");
  snprintf(want, sizeof want, "op %zu (SoftmaxWithLoss)", sm);
  expect_describe(def, sm, want);
  protobuf_c_message_free_unpacked(&def->base, NULL);
}

static void test_plain_where_unmoved(void **state) {
  (void)state;
  Caffe2__NetDef *def = parse(net_text);
  assert_ok(dm_origin_stamp(def));
  expect_describe(def, 0, "op 0 (FC 'fc1')");
  assert_ok(dm_origin_mark_added(def, "test")); /* every op has a stamp or its own */
  expect_describe(def, 0, "op 0 (FC 'fc1')");
  dm_origin_strip(def);
  assert_null(def->op[0]->debug_info);
  assert_string_equal(def->op[1]->debug_info, "made by my script");
  protobuf_c_message_free_unpacked(&def->base, NULL);
}

static void test_written_without_stamps(void **state) {
  (void)state;
  Caffe2__NetDef *def = training_net();
  char path[] = "/tmp/dm_origin_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_ok(dm_netdef_write_atomic(def, path));
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_ok(dm_read_file(path, &bytes, &len));
  unlink(path);
  assert_true(len > 0);
  assert_null(memmem(bytes, len, DM_ORIGIN_PREFIX, strlen(DM_ORIGIN_PREFIX)));
  assert_non_null(memmem(bytes, len, "made by my script", 17));
  free(bytes);
  assert_true(dm_origin_any(def)); /* the caller's net keeps them */
  protobuf_c_message_free_unpacked(&def->base, NULL);
}

/* W of the wrong width: the FC fails at instantiation, named as written. */
static void test_error_names_op_as_written(void **state) {
  (void)state;
  Caffe2__NetDef *def = training_net();
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  assert_ok(run_text(ws, "op { output: 'x' type: 'ConstantFill' arg { name: 'shape' ints: [2, 3] } }"
                         "op { output: 'label' type: 'ConstantFill' arg { name: 'shape' ints: 2 }"
                         "     arg { name: 'dtype' i: 2 } }"
                         "op { output: 'W' type: 'ConstantFill' arg { name: 'shape' ints: [4, 5] } }"
                         "op { output: 'b' type: 'ConstantFill' arg { name: 'shape' ints: 4 } }"));
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_ok(dm_message_serialize(&def->base, DM_FORMAT_BINARY, &bytes, &len));
  dm_net *net = NULL;
  dm_status s = dm_workspace_create_net_bytes(ws, bytes, len, 0, &net);
  if (s == DM_OK)
    s = dm_net_run(net);
  assert_status_msg(s, DM_ERR_SHAPE, "op 0 (FC 'fc1') as written (op ");
  free(bytes);
  dm_workspace_destroy(ws);
  protobuf_c_message_free_unpacked(&def->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_as_written),
      cmocka_unit_test(test_plain_where_unmoved),
      cmocka_unit_test(test_written_without_stamps),
      cmocka_unit_test(test_error_names_op_as_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
