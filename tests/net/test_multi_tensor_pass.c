/* test_multi_tensor_pass.c: the optimizer pass's multi_tensor option through the pipeline
 * (net/passes/pipeline.h) on LeNet (models/mnist: argv[1] the init net, argv[2] the train net).
 *
 *  - What the pass emits: ON gives one MultiMomentumSGDUpdate / MultiAdam over all 8
 *    parameters and no per-parameter update; OFF gives 8 per-parameter ops; AUTO is OFF
 *    for a CPU net (the net is byte-identical to OFF's, so existing CPU nets do not
 *    change) and ON for a net placed on CUDA (placement needs no GPU); plain SGD gets a
 *    MultiWeightedSum, and the weight decay one more; with loss scaling, found_inf is the
 *    multi op's skip input.
 *  - The CLI (argv[3], the demitasse executable): `rewrite` with --multi-tensor,
 *    --no-multi-tensor and neither, on the CPU and with --device cuda.
 *  - What it computes: LeNet trained for several steps (fed random batches) with the
 *    multi ops and with per-parameter ops, for Nesterov momentum, Adam and SGD, all with
 *    weight decay (a MultiWeightedSum): every weight and optimizer state must be
 *    bit-identical (memcmp).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "net/api.h"
#include "net/passes/pipeline.h"
#include "test_util.h"

enum { B = 4, SIDE = 28, STEPS = 4, NP = 8 };

static const char *init_path, *train_path, *cli_path;
static const char *const params[NP] = {"conv1_w", "conv1_b", "conv2_w", "conv2_b",
                                       "fc3_w",   "fc3_b",   "pred_w",  "pred_b"};
static const char *const data_blobs[] = {"data", "label"};
static const char *const losses[] = {"loss"};

/* lenet_train.pbtxt; `fed`: without its DB input (data and label are fed). */
static Caffe2__NetDef *lenet(int fed) {
  Caffe2__NetDef *def = NULL;
  assert_ok(dm_netdef_read(train_path, &def));
  size_t kept = 0;
  for (size_t i = 0; i < def->n_op; i++) {
    if (fed && strcmp(def->op[i]->type, "TensorProtosDBInput") == 0)
      protobuf_c_message_free_unpacked(&def->op[i]->base, NULL);
    else
      def->op[kept++] = def->op[i];
  }
  def->n_op = kept;
  return def;
}

typedef struct build {
  dm_optimizer kind;
  dm_switch multi;
  int device, fp16, weight_decay, fed;
} build;

/* The training net the pipeline makes; *init_add its state fills. */
static Caffe2__NetDef *train(const build *b, Caffe2__NetDef **init_add) {
  Caffe2__NetDef *net = lenet(b->fed);
  dm_pipeline_opts o;
  dm_pipeline_opts_init_training(&o, losses, 1, data_blobs, 2);
  o.optim.kind = b->kind;
  o.optim.nesterov = 1;
  o.optim.lr = 0.05;
  if (b->weight_decay)
    o.optim.weight_decay = 1e-3;
  if (b->multi != DM_SWITCH_AUTO)
    o.optim.multi_tensor = b->multi;
  o.device = b->device;
  o.mixed_precision = b->fp16;
  dm_pipeline_result r;
  assert_ok(dm_pipeline_run(net, &o, init_add, &r));
  dm_pipeline_result_free(&r);
  return net;
}

static int count(const Caffe2__NetDef *net, const char *type) {
  int n = 0;
  for (size_t i = 0; i < net->n_op; i++)
    n += strcmp(net->op[i]->type, type) == 0;
  return n;
}

static const Caffe2__OperatorDef *find_op(const Caffe2__NetDef *net, const char *type) {
  for (size_t i = 0; i < net->n_op; i++)
    if (strcmp(net->op[i]->type, type) == 0)
      return net->op[i];
  return NULL;
}

static void free_nets(Caffe2__NetDef *net, Caffe2__NetDef *init) {
  protobuf_c_message_free_unpacked(&net->base, NULL);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
}

/* The serialised bytes of a net (malloc'd). */
static uint8_t *packed(const Caffe2__NetDef *net, size_t *n) {
  *n = protobuf_c_message_get_packed_size(&net->base);
  uint8_t *buf = malloc(*n ? *n : 1);
  assert_non_null(buf);
  assert_int_equal(protobuf_c_message_pack(&net->base, buf), *n);
  return buf;
}

static void test_emitted(void **state) {
  (void)state;
  static const char *const single[2] = {"MomentumSGDUpdate", "Adam"};
  static const char *const multi[2] = {"MultiMomentumSGDUpdate", "MultiAdam"};
  for (int a = 0; a < 2; a++) {
    dm_optimizer kind = a ? DM_OPTIMIZER_ADAM : DM_OPTIMIZER_MOMENTUM;
    Caffe2__NetDef *init = NULL, *net;
    /* ON: one multi op with 3 outputs per param, in the pass's order. */
    net = train(&(build){.kind = kind, .multi = DM_SWITCH_ON, .weight_decay = 1}, &init);
    assert_int_equal(count(net, multi[a]), 1);
    assert_int_equal(count(net, single[a]), 0);
    assert_int_equal(count(net, "MultiWeightedSum"), 1); /* the weight decay */
    assert_int_equal(count(net, "WeightedSum"), 0);
    const Caffe2__OperatorDef *op = find_op(net, multi[a]);
    assert_int_equal(op->n_output, 3 * NP);
    assert_int_equal(op->n_input, a ? 4 * NP + 2 : 3 * NP + 1);
    for (int k = 0; k < NP; k++) {
      char g[64];
      snprintf(g, sizeof g, "%s_grad", params[k]);
      assert_string_equal(op->output[a ? k : 2 * NP + k], params[k]);
      assert_string_equal(op->input[a ? 3 * NP + k : k], g);
    }
    free_nets(net, init);
    /* OFF: one op per parameter. */
    net = train(&(build){.kind = kind, .multi = DM_SWITCH_OFF}, &init);
    assert_int_equal(count(net, single[a]), NP);
    assert_int_equal(count(net, multi[a]), 0);
    size_t n_off, n_auto;
    uint8_t *off = packed(net, &n_off);
    free_nets(net, init);
    /* AUTO on the CPU: byte for byte OFF's net. */
    net = train(&(build){.kind = kind, .multi = DM_SWITCH_AUTO}, &init);
    uint8_t *aut = packed(net, &n_auto);
    assert_int_equal(n_off, n_auto);
    assert_memory_equal(off, aut, n_off);
    free(off);
    free(aut);
    free_nets(net, init);
    /* AUTO on CUDA: the multi op (placed; the device pass needs no GPU). */
    net = train(&(build){.kind = kind, .multi = DM_SWITCH_AUTO, .device = 1}, &init);
    assert_int_equal(count(net, multi[a]), 1);
    assert_int_equal(count(net, single[a]), 0);
#if DM_HAVE_CUDA /* placed where its CUDA kernel is built */
    op = find_op(net, multi[a]);
    assert_non_null(op->device_option);
    assert_int_equal(op->device_option->device_type, 1); /* CUDA */
#endif
    free_nets(net, init);
    /* OFF on CUDA: per parameter. */
    net = train(&(build){.kind = kind, .multi = DM_SWITCH_OFF, .device = 1}, &init);
    assert_int_equal(count(net, single[a]), NP);
    free_nets(net, init);
    /* Loss scaling: found_inf is the multi op's last (skip) input. */
    net = train(&(build){.kind = kind, .multi = DM_SWITCH_ON, .fp16 = 1}, &init);
    op = find_op(net, multi[a]);
    assert_non_null(op);
    assert_int_equal(op->n_input, (a ? 4 * NP + 2 : 3 * NP + 1) + 1);
    assert_string_equal(op->input[op->n_input - 1], DM_MP_FOUND_INF_BLOB);
    free_nets(net, init);
  }
  /* Plain SGD: one MultiWeightedSum (p = p + lr g); with weight decay one more before it
   * for the 4 weights (g = g + wd p); no WeightedSum left. */
  Caffe2__NetDef *init = NULL;
  Caffe2__NetDef *net = train(&(build){.kind = DM_OPTIMIZER_SGD, .multi = DM_SWITCH_ON}, &init);
  assert_int_equal(count(net, "MultiWeightedSum"), 1);
  assert_int_equal(count(net, "WeightedSum"), 0);
  free_nets(net, init);
  net = train(&(build){.kind = DM_OPTIMIZER_SGD, .multi = DM_SWITCH_ON, .weight_decay = 1},
              &init);
  assert_int_equal(count(net, "MultiWeightedSum"), 2);
  assert_int_equal(count(net, "WeightedSum"), 0);
  const Caffe2__OperatorDef *decay = find_op(net, "MultiWeightedSum");
  assert_int_equal(decay->n_output, 4);
  assert_string_equal(decay->output[0], "conv1_w_grad");
  assert_string_equal(decay->input[4], DM_OPTIM_ONE_BLOB);
  assert_string_equal(decay->input[9], DM_OPTIM_WD_BLOB);
  free_nets(net, init);
}

/* ---- training ---------------------------------------------------------------------------- */

static uint64_t rng = 0x1e4e7;
static double uniform(void) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng >> 11) * 0x1p-53;
}

/* LeNet trained STEPS steps in a fresh workspace; returns it. */
static dm_workspace *trained(const build *b, float (*pixels)[B * SIDE * SIDE],
                             int32_t (*labels)[B]) {
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  assert_ok(dm_workspace_run_net_file(ws, init_path));
  Caffe2__NetDef *init = NULL, *net = train(b, &init);
  dm_net *init_net = NULL, *step = NULL;
  assert_ok(dm_workspace_create_net(ws, init, "init_add", &init_net));
  assert_ok(dm_net_run(init_net));
  assert_ok(dm_workspace_create_net(ws, net, "lenet_train", &step));
  const int64_t xd[4] = {B, 1, SIDE, SIDE}, ld[1] = {B};
  for (int s = 0; s < STEPS; s++) {
    assert_ok(dm_workspace_feed(ws, "data", DM_FLOAT, 4, xd, pixels[s]));
    assert_ok(dm_workspace_feed(ws, "label", DM_INT32, 1, ld, labels[s]));
    assert_ok(dm_net_run(step));
  }
  return ws;
}

static void expect_same_blob(dm_workspace *a, dm_workspace *b, const char *name) {
  const dm_tensor *x = NULL, *y = NULL;
  assert_ok(dm_workspace_fetch(a, name, &x));
  assert_ok(dm_workspace_fetch(b, name, &y));
  assert_int_equal(dm_tensor_numel(x), dm_tensor_numel(y));
  assert_int_equal(dm_tensor_dtype(x), DM_FLOAT);
  const float *fx = dm_tensor_data(x), *fy = dm_tensor_data(y);
  for (int64_t i = 0; i < dm_tensor_numel(x); i++)
    if (memcmp(&fx[i], &fy[i], sizeof *fx) != 0)
      fail_msg("%s[%lld]: per-parameter %.9g, multi-tensor %.9g", name, (long long)i, fx[i],
               fy[i]);
}

static void test_training(void **state) {
  (void)state;
  static float pixels[STEPS][B * SIDE * SIDE];
  static int32_t labels[STEPS][B];
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < B * SIDE * SIDE; i++)
      pixels[s][i] = (float)uniform();
    for (int i = 0; i < B; i++)
      labels[s][i] = (int32_t)(uniform() * 10);
  }
  static const char *const suffixes[3][2] = {
      {"_momentum", NULL}, {"_first_moment", "_second_moment"}, {NULL, NULL}};
  static const dm_optimizer kinds[3] = {DM_OPTIMIZER_MOMENTUM, DM_OPTIMIZER_ADAM, DM_OPTIMIZER_SGD};
  for (int a = 0; a < 3; a++) {
    dm_optimizer kind = kinds[a];
    dm_workspace *per = trained(&(build){.kind = kind, .multi = DM_SWITCH_OFF,
                                         .weight_decay = 1, .fed = 1},
                                pixels, labels);
    dm_workspace *one = trained(&(build){.kind = kind, .multi = DM_SWITCH_ON,
                                         .weight_decay = 1, .fed = 1},
                                pixels, labels);
    /* The weights moved (the comparison is not of untouched init values). */
    const dm_tensor *w = NULL;
    assert_ok(dm_workspace_fetch(per, "pred_b", &w));
    assert_true(fabsf(((const float *)dm_tensor_data(w))[0]) > 0);
    for (int k = 0; k < NP; k++) {
      expect_same_blob(per, one, params[k]);
      for (int j = 0; j < 2 && suffixes[a][j]; j++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", params[k], suffixes[a][j]);
        expect_same_blob(per, one, name);
      }
    }
    dm_workspace_destroy(per);
    dm_workspace_destroy(one);
  }
}

/* ---- the CLI ----------------------------------------------------------------------------- */

/* How many ops of `type` `demitasse rewrite` prints for LeNet with momentum and `flags`. */
static int cli_count(const char *flags, const char *type) {
  char cmd[2048], line[512], want[128];
  snprintf(cmd, sizeof cmd,
           "'%s' rewrite --grad --loss loss --optimizer momentum --data data --data label %s "
           "'%s' 2>/dev/null",
           cli_path, flags, train_path);
  snprintf(want, sizeof want, "type: \"%s\"", type);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  int n = 0;
  while (fgets(line, sizeof line, f))
    n += strstr(line, want) != NULL;
  assert_int_equal(pclose(f), 0);
  return n;
}

static void test_cli(void **state) {
  (void)state;
  if (!cli_path)
    skip();
  assert_int_equal(cli_count("--multi-tensor", "MultiMomentumSGDUpdate"), 1);
  assert_int_equal(cli_count("--multi-tensor", "MomentumSGDUpdate"), 0);
  assert_int_equal(cli_count("", "MultiMomentumSGDUpdate"), 0);
  assert_int_equal(cli_count("", "MomentumSGDUpdate"), NP);
  assert_int_equal(cli_count("--device cuda", "MultiMomentumSGDUpdate"), 1);
  assert_int_equal(cli_count("--device cuda --no-multi-tensor", "MomentumSGDUpdate"), NP);
  assert_int_equal(cli_count("--device cuda --no-multi-tensor", "MultiMomentumSGDUpdate"), 0);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LENET_INIT LENET_TRAIN\n", argv[0]);
    return 2;
  }
  init_path = argv[1];
  train_path = argv[2];
  cli_path = argc > 3 ? argv[3] : NULL;
  if (dm_init() != DM_OK) /* the passes read the op schemas */
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_emitted),
      cmocka_unit_test(test_training),
      cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
