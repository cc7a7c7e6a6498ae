/* test_pipeline_plan.c: dm_pipeline_plan_build (net/passes/pipeline.h) on its own: which
 * stages run, every AUTO decided (multi_tensor, layout, pad_channels, gradient, loss
 * scaling), the shared lists set from the options' one copy, the refusals made before
 * any pass runs; and the stage table's order (the numbering of net/passes/pipeline.h and
 * ARCHITECTURE.md). */
#include <stdio.h>
#include <string.h>

#include "net/passes/pipeline.h"
#include "netdef_test_util.h"
#include "test_util.h"

static const char *const losses[] = {"loss"};
static const char *const fed[] = {"data", "label"};
static const char *const keep[] = {"accuracy"};

static const char *forward =
    "name: 'f' op { input: 'data' input: 'w' input: 'b' output: 'y' type: 'FC' }"
    " op { input: 'y' input: 'label' output: 'p' output: 'loss' type: 'SoftmaxWithLoss' }"
    " external_input: 'data' external_input: 'w' external_input: 'b' external_input: 'label'";

static const char *with_gradient =
    "name: 'g' op { input: 'data' input: 'w' output: 'y' type: 'FC' }"
    " op { input: 'y' output: 'y_grad' type: 'FCGradient' is_gradient_op: true }";

static void training(dm_pipeline_opts *o) {
  dm_pipeline_opts_init_training(o, losses, 1, fed, 2);
  o->keep = keep;
  o->n_keep = 1;
}

static void test_defaults_cpu(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(forward);
  dm_pipeline_opts o;
  training(&o);
  dm_pipeline_plan p;
  assert_ok(dm_pipeline_plan_build(net, &o, &p));
  assert_true(p.gradient && p.optimize);
  assert_false(p.fuse_train || p.fuse || p.mixed_precision || p.device || p.data_parallel ||
               p.memory);
  assert_int_equal(p.optim.multi_tensor, DM_SWITCH_OFF); /* AUTO on the CPU */
  assert_int_equal(p.layout, DM_PLAN_LAYOUT_OFF);
  assert_int_equal(p.layout_opts.pad_channels, 0);
  /* one list of fed blobs for every pass */
  assert_ptr_equal(p.mp.exclude, fed);
  assert_ptr_equal(p.layout_opts.fed, fed);
  assert_ptr_equal(p.dev.host_blobs, fed);
  assert_ptr_equal(p.train_fusion.fed, fed);
  assert_int_equal(p.mp.n_exclude + p.layout_opts.n_fed + p.dev.n_host_blobs, 6);
  /* the keep list: the losses, then `keep` */
  assert_int_equal(p.n_keep, 2);
  assert_string_equal(p.keep[0], "loss");
  assert_string_equal(p.keep[1], "accuracy");
  assert_ptr_equal(p.train_fusion.keep, p.keep);
  dm_pipeline_plan_free(&p);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_auto_on_gpu(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(forward);
  dm_pipeline_opts o;
  training(&o);
  o.device = 1;
  dm_pipeline_plan p;
  assert_ok(dm_pipeline_plan_build(net, &o, &p));
  assert_int_equal(p.optim.multi_tensor, DM_SWITCH_ON);
  assert_int_equal(p.layout_opts.pad_channels, 8);
  assert_int_equal(p.layout, DM_PLAN_LAYOUT_OFF); /* not painted: as written */
  dm_pipeline_plan_free(&p);
  o.mixed_precision = 1; /* painted and placed: NHWC if the nets convert */
  assert_ok(dm_pipeline_plan_build(net, &o, &p));
  assert_int_equal(p.layout, DM_PLAN_LAYOUT_TRIAL);
  dm_pipeline_plan_free(&p);
  o.layout = DM_TRAIN_LAYOUT_NCHW;
  o.optim.multi_tensor = DM_SWITCH_OFF;
  o.layout_opts.pad_channels = 4;
  assert_ok(dm_pipeline_plan_build(net, &o, &p));
  assert_int_equal(p.layout, DM_PLAN_LAYOUT_OFF);
  assert_int_equal(p.optim.multi_tensor, DM_SWITCH_OFF);
  assert_int_equal(p.layout_opts.pad_channels, 4);
  dm_pipeline_plan_free(&p);
  o.layout = DM_TRAIN_LAYOUT_NHWC;
  o.device = 0;
  assert_ok(dm_pipeline_plan_build(net, &o, &p));
  assert_int_equal(p.layout, DM_PLAN_LAYOUT_NHWC);
  dm_pipeline_plan_free(&p);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_loss_scale_auto(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(forward);
  dm_pipeline_opts o;
  training(&o);
  o.mixed_precision = 1;
  o.mp.scaling = DM_LOSS_SCALE_AUTO;
  dm_pipeline_plan p;
  assert_ok(dm_pipeline_plan_build(net, &o, &p)); /* FP16: dynamic */
  assert_int_equal(p.mp.scaling, DM_LOSS_SCALE_DYNAMIC);
  dm_pipeline_plan_free(&p);
  o.mp.target = DM_BFLOAT16; /* FP32's range: none */
  assert_ok(dm_pipeline_plan_build(net, &o, &p));
  assert_int_equal(p.mp.scaling, DM_LOSS_SCALE_NONE);
  dm_pipeline_plan_free(&p);
  o.mp.scaling = DM_LOSS_SCALE_STATIC; /* asked for: kept */
  assert_ok(dm_pipeline_plan_build(net, &o, &p));
  assert_int_equal(p.mp.scaling, DM_LOSS_SCALE_STATIC);
  dm_pipeline_plan_free(&p);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_gradient_auto(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(with_gradient), *fwd = parse(forward);
  dm_pipeline_opts o;
  training(&o);
  o.gradient = DM_SWITCH_AUTO;
  o.mixed_precision = 1;
  o.device = 1;
  dm_pipeline_plan p;
  assert_ok(dm_pipeline_plan_build(net, &o, &p)); /* a net from `rewrite`: runs as it is */
  assert_false(p.gradient || p.optimize);
  assert_int_equal(p.layout, DM_PLAN_LAYOUT_OFF); /* not a net the pipeline trains */
  dm_pipeline_plan_free(&p);
  assert_ok(dm_pipeline_plan_build(fwd, &o, &p));
  assert_true(p.gradient && p.optimize);
  dm_pipeline_plan_free(&p);
  o.gradient = DM_SWITCH_OFF; /* no gradient: no optimizer either */
  assert_ok(dm_pipeline_plan_build(fwd, &o, &p));
  assert_false(p.gradient || p.optimize);
  dm_pipeline_plan_free(&p);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&fwd->base, NULL);
}

static void test_refusals(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(forward);
  dm_pipeline_opts o;
  training(&o);
  o.n_losses = 0;
  o.losses = NULL;
  dm_pipeline_plan p;
  assert_status_msg(dm_pipeline_plan_build(net, &o, &p), DM_ERR_INVALID, "needs a loss blob");
  dm_pipeline_plan_free(&p);
  training(&o);
  o.fuse = 1;
  assert_status_msg(dm_pipeline_plan_build(net, &o, &p), DM_ERR_INVALID, "for inference");
  dm_pipeline_plan_free(&p);
  /* refused before any pass: the net is unchanged */
  Caffe2__NetDef *add = NULL;
  assert_int_equal(dm_pipeline_run(net, &o, &add, NULL), DM_ERR_INVALID);
  assert_int_equal(net->n_op, 2);
  assert_null(add);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* The leak of issue 24: with r = NULL, the training fusion's summary was lost when a
 * later pass failed (the sanitizer builds see it). */
static void test_fuse_train_no_result(void **state) {
  (void)state;
  static const char *const missing[] = {"no_such_loss"};
  Caffe2__NetDef *net = parse(forward), *add = NULL;
  dm_pipeline_opts o;
  training(&o);
  o.fuse_train = 1;
  assert_ok(dm_pipeline_run(net, &o, &add, NULL));
  if (add)
    protobuf_c_message_free_unpacked(&add->base, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  net = parse(forward);
  add = NULL;
  o.losses = missing; /* the gradient pass fails after the training fusion ran */
  assert_int_not_equal(dm_pipeline_run(net, &o, &add, NULL), DM_OK);
  if (add)
    protobuf_c_message_free_unpacked(&add->base, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_stage_order(void **state) {
  (void)state;
  static const char *const want[] = {"training fusion", "gradient", "optimizer", "fusion",
                                     "mixed precision", "layout", "device", "data parallel",
                                     "memory", NULL};
  size_t i = 0;
  for (; dm_pipeline_stages[i].name; i++) {
    assert_non_null(want[i]);
    assert_string_equal(dm_pipeline_stages[i].name, want[i]);
    assert_non_null(dm_pipeline_stages[i].enabled);
    assert_non_null(dm_pipeline_stages[i].run);
  }
  assert_null(want[i]);
}

int main(void) {
  assert_ok(dm_init());
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_cpu),      cmocka_unit_test(test_auto_on_gpu),
      cmocka_unit_test(test_gradient_auto),     cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_loss_scale_auto),
      cmocka_unit_test(test_fuse_train_no_result), cmocka_unit_test(test_stage_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
