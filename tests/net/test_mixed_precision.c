/* test_mixed_precision.c: the mixed-precision pass on small training nets, run on the
 * CPU's tensor-core-faithful FP16 kernels:
 *   - the rewritten net's dtypes (FP16 compute, FP32 masters, FP32 loss), casts made
 *     once, determinism, idempotence, and that the result runs;
 *   - gradients small enough to flush to zero in FP16 stall training without loss
 *     scaling (the weights stay bit-identical) and train with it;
 *   - an injected overflow skips the step: parameters, momenta and the iteration count
 *     bit-identical, the scale halved, one skip counted, and training goes on;
 *   - ops of the test's own (no kernels needed) painted from their schemas alone: FP32
 *     and nonfloat slot masks, follow ops decided by their float inputs only, and the
 *     optimizer role with and without a skip input.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "net/api.h"
#include "core/netio.h"
#include "net/passes/mixed_precision_pass.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"
#include "netdef_test_util.h"
#include "test_util.h"

enum { BATCH = 8, IN = 16, CLASSES = 4 };

static const char *init_text =
    "op { output: 'W' type: 'XavierFill' arg { name: 'shape' ints: [4, 16] }"
    "     device_option { random_seed: 3 } }"
    "op { output: 'b' type: 'ConstantFill' arg { name: 'shape' ints: 4 } }";

/* FC + softmax loss; `extra` goes between the loss and the end (e.g. a tiny Scale). */
static const char *fc_net = "op { input: 'x' input: 'W' input: 'b' output: 'logits' type: 'FC' }"
                            "op { input: 'logits' input: 'label' output: 'softmax' output: "
                            "'%s' type: 'SoftmaxWithLoss' }%s";

typedef struct trainer {
  dm_workspace *ws;
  dm_net *step;
  Caffe2__NetDef *def; /* a copy of the rewritten net, for structural checks */
  dm_mp_summary sum;
} trainer;

/* The training net as `train` builds it (net/passes/pipeline.h): gradient pass, optimizer pass,
 * then (if fp16) the mixed-precision pass; no device or memory pass. */
static dm_dtype target = DM_FLOAT16; /* the reduced precision the tests ask for */

static void rewrite(Caffe2__NetDef *def, const char *loss, dm_optimizer kind, double lr,
                    int fp16, dm_loss_scale_mode scaling, Caffe2__NetDef **init_add,
                    dm_mp_summary *sum) {
  static const char *const data[] = {"x", "label"};
  dm_pipeline_opts p;
  dm_pipeline_opts_init_training(&p, &loss, 1, data, 2);
  p.optim.kind = kind;
  p.optim.lr = lr;
  p.mixed_precision = fp16;
  p.mp.scaling = scaling;
  p.mp.target = target;
  dm_pipeline_result r;
  assert_ok(dm_pipeline_run(def, &p, init_add, &r));
  assert_true(r.gradient && r.optimizer);
  assert_non_null(*init_add);
  *sum = r.mp; /* the caller frees it */
  memset(&r.mp, 0, sizeof r.mp);
  dm_pipeline_result_free(&r);
}

static void feed_batch(dm_workspace *ws, float magnitude) {
  float x[BATCH * IN];
  int32_t label[BATCH];
  for (int i = 0; i < BATCH * IN; i++)
    x[i] = magnitude * sinf(0.7f * (float)i + 0.3f);
  for (int i = 0; i < BATCH; i++)
    label[i] = i % CLASSES;
  int64_t xd[2] = {BATCH, IN}, ld = BATCH;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 2, xd, x));
  assert_ok(dm_workspace_feed(ws, "label", DM_INT32, 1, &ld, label));
}

static void trainer_open(trainer *t, const char *extra, const char *loss, dm_optimizer kind,
                         double lr, int fp16, dm_loss_scale_mode scaling) {
  char text[1024];
  snprintf(text, sizeof text, fc_net, extra[0] ? "loss0" : "loss", extra);
  Caffe2__NetDef *def = parse(text), *init_add = NULL;
  memset(&t->sum, 0, sizeof t->sum);
  rewrite(def, loss, kind, lr, fp16, scaling, &init_add, &t->sum);
  assert_ok(DM_PB_CLONE(Caffe2__NetDef, def, &t->def));
  assert_ok(dm_workspace_create(&t->ws));
  dm_net *n = NULL;
  assert_ok(net_from_text(t->ws, init_text, &n));
  assert_ok(dm_net_run(n));
  assert_ok(dm_workspace_create_net(t->ws, init_add, "init_add", &n));
  assert_ok(dm_net_run(n));
  feed_batch(t->ws, 1.0f);
  assert_ok(dm_workspace_create_net(t->ws, def, "train", &t->step));
}

static void trainer_close(trainer *t) {
  dm_workspace_destroy(t->ws);
  protobuf_c_message_free_unpacked(&t->def->base, NULL);
  dm_mp_summary_free(&t->sum);
}

static const dm_tensor *blob(trainer *t, const char *name) {
  const dm_tensor *x = NULL;
  assert_ok(dm_workspace_fetch(t->ws, name, &x));
  return x;
}

static double scalar(trainer *t, const char *name) {
  const dm_tensor *x = blob(t, name);
  switch (dm_tensor_dtype(x)) {
  case DM_FLOAT: return *(const float *)dm_tensor_data(x);
  case DM_INT64: return (double)*(const int64_t *)dm_tensor_data(x);
  default: fail_msg("%s: unexpected dtype %s", name, dm_dtype_name(dm_tensor_dtype(x)));
  }
  return 0;
}

/* A malloc'd copy of a blob's bytes. */
static void *snapshot(trainer *t, const char *name, size_t *n) {
  const dm_tensor *x = blob(t, name);
  *n = dm_tensor_nbytes(x);
  void *p = malloc(*n ? *n : 1);
  memcpy(p, dm_tensor_data(x), *n);
  return p;
}

static void test_dtypes_casts_and_runs(void **state) {
  (void)state;
  trainer t;
  trainer_open(&t, "", "loss", DM_OPTIMIZER_MOMENTUM, 0.1, 1, DM_LOSS_SCALE_DYNAMIC);
  /* FC forward and backward in FP16, the loss and its gradient in FP32. */
  assert_int_equal(t.sum.ops_fp16, 2);     /* FC, FCGradient */
  assert_int_equal(t.sum.ops_fp32, 2);     /* SoftmaxWithLoss and its gradient */
  assert_non_null(strstr(t.sum.report, "SoftmaxWithLoss"));
  /* Nothing is cast twice: no two casts share a source or a destination. (Updates may
   * then work in place on a cast copy, e.g. on W_grad_fp32.) */
  size_t casts = 0;
  for (size_t i = 0; i < t.def->n_op; i++) {
    const Caffe2__OperatorDef *op = t.def->op[i];
    if (strcmp(op->type, "FloatToHalf") && strcmp(op->type, "HalfToFloat"))
      continue;
    casts++;
    for (size_t j = i + 1; j < t.def->n_op; j++) {
      const Caffe2__OperatorDef *other = t.def->op[j];
      if (strcmp(other->type, "FloatToHalf") && strcmp(other->type, "HalfToFloat"))
        continue;
      assert_string_not_equal(other->output[0], op->output[0]);
      assert_string_not_equal(other->input[0], op->input[0]);
    }
  }
  assert_int_equal(casts, t.sum.casts);
  /* W, b masters + x cast to FP16; logits up; the logits' gradient down; dW, db up. */
  assert_int_equal(casts, 7);
  assert_ok(dm_net_run(t.step));
  assert_int_equal(dm_tensor_dtype(blob(&t, "W")), DM_FLOAT);
  assert_int_equal(dm_tensor_dtype(blob(&t, "W_fp16")), DM_FLOAT16);
  assert_int_equal(dm_tensor_dtype(blob(&t, "logits")), DM_FLOAT16);
  assert_int_equal(dm_tensor_dtype(blob(&t, "softmax")), DM_FLOAT);
  assert_int_equal(dm_tensor_dtype(blob(&t, "W_grad")), DM_FLOAT16);
  assert_int_equal(dm_tensor_dtype(blob(&t, "W_grad_fp32")), DM_FLOAT);
  assert_int_equal(dm_tensor_dtype(blob(&t, "W_momentum")), DM_FLOAT);
  assert_true(isfinite(scalar(&t, "loss")));
  assert_true(scalar(&t, DM_MP_SCALE_BLOB) == 65536.0);
  trainer_close(&t);
}

static void test_deterministic_and_idempotent(void **state) {
  (void)state;
  uint8_t *bytes[2];
  size_t len[2];
  for (int k = 0; k < 2; k++) {
    trainer t;
    trainer_open(&t, "", "loss", DM_OPTIMIZER_ADAM, 0.01, 1, DM_LOSS_SCALE_DYNAMIC);
    assert_ok(dm_message_serialize(&t.def->base, DM_FORMAT_BINARY, &bytes[k], &len[k]));
    if (k == 1) { /* the pass on its own output changes nothing */
      Caffe2__NetDef *again = NULL, *init_add = NULL;
      assert_ok(DM_PB_CLONE(Caffe2__NetDef, t.def, &again));
      assert_ok(dm_netdef_new("x", &init_add));
      dm_mp_opts mp;
      dm_mp_opts_init(&mp);
      dm_mp_summary sum;
      assert_ok(dm_mixed_precision_pass(again, &mp, init_add, &sum));
      assert_true(sum.already);
      assert_int_equal(init_add->n_op, 0);
      uint8_t *b2;
      size_t l2;
      assert_ok(dm_message_serialize(&again->base, DM_FORMAT_BINARY, &b2, &l2));
      assert_int_equal(l2, len[1]);
      assert_memory_equal(b2, bytes[1], l2);
      free(b2);
      dm_mp_summary_free(&sum);
      protobuf_c_message_free_unpacked(&again->base, NULL);
      protobuf_c_message_free_unpacked(&init_add->base, NULL);
    }
    trainer_close(&t);
  }
  assert_int_equal(len[0], len[1]);
  assert_memory_equal(bytes[0], bytes[1], len[0]);
  free(bytes[0]);
  free(bytes[1]);
}

/* The loss is multiplied by 1e-8 after the softmax loss: the logits' gradients
 * (1e-8 * (p - y) / 8 <= 1e-9) are far below half of FP16's smallest subnormal
 * (2^-25 ~ 3e-8) and round to zero. The learning rate makes up for the 1e-8, so the
 * FP32-equivalent step is an ordinary one (0.3). */
static void run_tiny_loss(int scaling, double *first, double *last, int *w_changed) {
  trainer t;
  trainer_open(&t, "op { input: 'loss0' output: 'loss' type: 'Scale' arg { name: 'scale' f: 1e-8 } }",
               "loss", DM_OPTIMIZER_SGD, 3e7, 1, scaling ? DM_LOSS_SCALE_DYNAMIC : DM_LOSS_SCALE_NONE);
  size_t n;
  void *w0 = snapshot(&t, "W", &n);
  for (int i = 0; i < 30; i++) {
    assert_ok(dm_net_run(t.step));
    if (i == 0)
      *first = scalar(&t, "loss0");
  }
  *last = scalar(&t, "loss0");
  *w_changed = memcmp(w0, dm_tensor_data(blob(&t, "W")), n) != 0;
  free(w0);
  trainer_close(&t);
}

static void test_underflow_needs_loss_scaling(void **state) {
  (void)state;
  double first, last;
  int changed;
  run_tiny_loss(0, &first, &last, &changed);
  assert_false(changed); /* every FP16 gradient flushed to zero: training stalls */
  assert_true(last == first);
  run_tiny_loss(1, &first, &last, &changed);
  assert_true(changed);
  assert_true(last < 0.8 * first); /* with S = 2^16 the same net trains */
}

static void test_injected_overflow_skips_the_step(void **state) {
  (void)state;
  trainer t;
  trainer_open(&t, "", "loss", DM_OPTIMIZER_MOMENTUM, 0.1, 1, DM_LOSS_SCALE_DYNAMIC);
  for (int i = 0; i < 3; i++)
    assert_ok(dm_net_run(t.step));
  static const char *const kept[] = {"W", "b", "W_momentum", "b_momentum", DM_OPTIM_ITER_BLOB};
  enum { K = sizeof kept / sizeof kept[0] };
  void *before[K];
  size_t n[K];
  for (int k = 0; k < K; k++)
    before[k] = snapshot(&t, kept[k], &n[k]);
  double scale = scalar(&t, DM_MP_SCALE_BLOB);
  feed_batch(t.ws, 1e6f); /* beyond FP16's 65504: the FP16 copy of x is inf */
  assert_ok(dm_net_run(t.step));
  assert_true(scalar(&t, DM_MP_FOUND_INF_BLOB) != 0);
  for (int k = 0; k < K; k++)
    if (memcmp(before[k], dm_tensor_data(blob(&t, kept[k])), n[k]) != 0)
      fail_msg("'%s' changed on a skipped step", kept[k]);
  assert_true(scalar(&t, DM_MP_SCALE_BLOB) == scale / 2);
  assert_true(scalar(&t, DM_MP_SKIPPED_BLOB) == 1);
  /* Training goes on with ordinary data. */
  feed_batch(t.ws, 1.0f);
  assert_ok(dm_net_run(t.step));
  assert_true(scalar(&t, DM_MP_FOUND_INF_BLOB) == 0);
  assert_true(isfinite(scalar(&t, "loss")));
  assert_true(memcmp(before[0], dm_tensor_data(blob(&t, "W")), n[0]) != 0);
  assert_true(scalar(&t, DM_MP_SKIPPED_BLOB) == 1);
  for (int k = 0; k < K; k++)
    free(before[k]);
  trainer_close(&t);
}

/* BF16: the same pass with Cast ops to and from BFLOAT16, no loss scaling; FC runs in
 * BF16, the loss in FP32, and the net trains. */
static void test_bf16(void **state) {
  (void)state;
  target = DM_BFLOAT16;
  trainer t;
  trainer_open(&t, "", "loss", DM_OPTIMIZER_MOMENTUM, 0.1, 1, DM_LOSS_SCALE_NONE);
  target = DM_FLOAT16;
  assert_true(t.sum.bf16);
  assert_int_equal(t.sum.ops_fp16, 2); /* FC, FCGradient */
  size_t casts = 0;
  for (size_t i = 0; i < t.def->n_op; i++) {
    const Caffe2__OperatorDef *op = t.def->op[i];
    assert_string_not_equal(op->type, "FloatToHalf");
    assert_string_not_equal(op->type, "UnscaleAndCheck");
    casts += strcmp(op->type, "Cast") == 0;
  }
  assert_int_equal(casts, t.sum.casts);
  double first = 0;
  for (int i = 0; i < 20; i++) {
    assert_ok(dm_net_run(t.step));
    if (i == 0)
      first = scalar(&t, "loss");
  }
  assert_int_equal(dm_tensor_dtype(blob(&t, "W_bf16")), DM_BFLOAT16);
  assert_int_equal(dm_tensor_dtype(blob(&t, "logits")), DM_BFLOAT16);
  assert_int_equal(dm_tensor_dtype(blob(&t, "W")), DM_FLOAT);
  assert_true(scalar(&t, "loss") < 0.5 * first);
  trainer_close(&t);
}

/* Schemas of the test's own: what the pass knows of them is what their schemas say. */
static const dm_op_schema mp_half = {DM_SCHEMA_SIZE, .type = "MpHalf", .min_inputs = 1,
                                     .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                     .precision = DM_PREC_FP16};
static const dm_op_schema mp_float = {DM_SCHEMA_SIZE, .type = "MpFloat", .min_inputs = 1,
                                      .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                      .precision = DM_PREC_FP32};
/* X, S (FP32 by design), I (integer) -> Y, Z (FP32 by design), M (integer) */
static const dm_op_schema mp_slots = {DM_SCHEMA_SIZE, .type = "MpSlots", .min_inputs = 3,
                                      .max_inputs = 3, .min_outputs = 3, .max_outputs = 3,
                                      .precision = DM_PREC_FOLLOW, .fp32_inputs = 0x2,
                                      .nonfloat_inputs = 0x4, .fp32_outputs = 0x2,
                                      .nonfloat_outputs = 0x4};
static const dm_op_schema mp_update = {DM_SCHEMA_SIZE, .type = "MpUpdate", .min_inputs = 2,
                                       .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
                                       .precision = DM_PREC_FP32, .role = DM_ROLE_OPTIMIZER,
                                       .skip_input = 1};
static const dm_op_schema mp_update_no_skip = {DM_SCHEMA_SIZE, .type = "MpUpdateNoSkip",
                                               .min_inputs = 1, .max_inputs = 1,
                                               .min_outputs = 1, .max_outputs = 1,
                                               .precision = DM_PREC_FP32,
                                               .role = DM_ROLE_OPTIMIZER};


static void test_schema_slots_and_roles(void **state) {
  (void)state;
  assert_ok(dm_init());
  assert_ok(dm_register_schema(&mp_half));
  assert_ok(dm_register_schema(&mp_float));
  assert_ok(dm_register_schema(&mp_slots));
  assert_ok(dm_register_schema(&mp_update));
  assert_ok(dm_register_schema(&mp_update_no_skip));
  Caffe2__NetDef *net = parse(
      "op { type: 'MpHalf' input: 'a' output: 'x' }"
      "op { type: 'MpHalf' input: 'a' output: 's' }"
      "op { type: 'MpHalf' input: 'a' output: 'i' }"
      /* FP16 (x); S cast to FP32, I never cast, however it was written */
      "op { type: 'MpSlots' input: 'x' input: 's' input: 'i' output: 'y' output: 'z' output: 'm' }"
      "op { type: 'MpHalf' input: 'y' output: 'y2' }"    /* y FP16: read as it is */
      "op { type: 'MpHalf' input: 'z' output: 'z2' }"    /* z FP32: cast */
      "op { type: 'MpFloat' input: 'm' output: 'm2' }"   /* m no float: not cast */
      /* only its FP32 and integer slots hold FP16: it follows X, FP32 */
      "op { type: 'MpSlots' input: 'a' input: 's' input: 'i' output: 'y3' output: 'z3' output: 'm3' }"
      "op { type: 'MpUpdate' input: 'y2' input: 'w' output: 'w' }"
      "op { type: 'MpUpdateNoSkip' input: 'w' output: 'w2' }");
  Caffe2__NetDef *init = NULL;
  assert_ok(dm_netdef_new(NULL, &init));
  dm_mp_opts mp;
  dm_mp_opts_init(&mp);
  dm_mp_summary sum;
  assert_ok(dm_mixed_precision_pass(net, &mp, init, &sum));
  char got[4096];
  op_list(net, OPL_OUTPUTS, got, sizeof got);
  assert_string_equal(
      got, "FloatToHalf(a)>a_fp16 MpHalf(a_fp16)>x MpHalf(a_fp16)>s MpHalf(a_fp16)>i "
           "HalfToFloat(s)>s_fp32 MpSlots(x,s_fp32,i)>y,z,m "
           "MpHalf(y)>y2 FloatToHalf(z)>z_fp16 MpHalf(z_fp16)>z2 MpFloat(m)>m2 "
           "MpSlots(a,s_fp32,i)>y3,z3,m3 "
           "UnscaleAndCheck(loss_scale)>found_inf UpdateLossScale(loss_scale,found_inf,"
           "loss_scale_good_steps,loss_scale_skipped)>loss_scale,loss_scale_good_steps,"
           "loss_scale_skipped "
           "HalfToFloat(y2)>y2_fp32 MpUpdate(y2_fp32,w,found_inf)>w MpUpdateNoSkip(w)>w2");
  assert_int_equal(sum.ops_total, 8); /* optimizer-role ops are not painted */
  assert_int_equal(sum.ops_fp16, 6); /* five MpHalf, the first MpSlots */
  assert_int_equal(sum.ops_fp32, 2);
  assert_non_null(strstr(sum.report, "op 7 (MpSlots) FP32: follows its FP32 inputs"));
  dm_mp_summary_free(&sum);
  protobuf_c_message_free_unpacked(&init->base, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtypes_casts_and_runs),
      cmocka_unit_test(test_deterministic_and_idempotent),
      cmocka_unit_test(test_underflow_needs_loss_scaling),
      cmocka_unit_test(test_injected_overflow_skips_the_step),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_schema_slots_and_roles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
