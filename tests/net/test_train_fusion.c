/* test_train_fusion.c: the training fusion pass (net/passes/train_fusion_pass.h) and the fused ops it
 * makes:
 *   - the exact op lists it makes: SpatialBN + Relu (in place, as Caffe2's ResNet writes
 *     it) -> SpatialBNRelu; SpatialBN + Sum/Add + Relu -> SpatialBNAddRelu with Z last,
 *     either operand order, the Relu's output over Z; the fused op where the Relu was,
 *     the BN's arguments and name carried, a fresh reserve output; then the gradient pass
 *     emits SpatialBNReluGradient / SpatialBNAddReluGradient;
 *   - the patterns left alone, each with its reason in the report: Y with another reader,
 *     fetched (external output or kept), fed; Y read first by another op; a broadcast Add;
 *     an op between that writes a BN input, reads a statistics output, or writes Z after
 *     the Sum; the Relu writing a BN input; test-mode BN not counted; a net with
 *     gradient ops refused;
 *   - training: a small ResNet-style net (Conv + BN + Relu, a BN + Sum + Relu identity
 *     join, a BN + Add + Relu join, FC, softmax loss) trained 4 steps with momentum SGD
 *     through the pipeline with and without fuse_train, FP32 and with FP16 mixed
 *     precision (dynamic loss scaling), on the reference engine: the fused kernels run
 *     the unfused ops' own loops, so the tolerance is zero: every step's loss and, after
 *     every step, every blob of the state (weights, momenta, BN statistics) must be
 *     bit-identical;
 *   - Conv + Relu (bias or not, Relu in place or not) -> ConvFusion and FC + Relu ->
 *     FCFusion (fusion_type 1), the patterns left alone with the reason, and the gradient
 *     pass emitting ConvReluGradient / FCReluGradient; ConvFusion's sum forms refused a
 *     gradient;
 *   - ConvReluGradient and FCReluGradient against their independent composition
 *     ReluGradient + ConvGradient / FCGradient (each tested against references in
 *     tests/operators), bit for bit, FP32, FP16 and BF16, NaN, -0 and +inf planted in Y,
 *     bias or not, with or without dX, groups and strides; and the mask shown to matter;
 *   - LeNet (its DB input dropped, data and label fed), the zoo SqueezeNet and ResNet-50
 *     (batch 2, 64 x 64) stepped with and without the pass through dm_pipeline_run on the
 *     reference engine, FP32 and FP16 mixed precision: every state blob and the loss
 *     bit-identical, the pass having fused something; one ulp in one parameter shows
 *     (the comparison can fail). Usage: the six model files (tests/net/meson.build).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/half.h"
#include "net/api.h"
#include "net/passes/gradient_pass.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"
#include "net/passes/train_fusion_pass.h"
#include "netdef_test_util.h"
#include "test_util.h"

static void expect_ops(const Caffe2__NetDef *net, const char *want) {
  char got[4096];
  op_list(net, OPL_OUTPUTS, got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("ops\n  got:  %s\n  want: %s", got, want);
}

/* A training BN named `name` on x writing y (statistics name_rm, name_riv, ...). */
static char *bn(char *buf, size_t cap, const char *name, const char *x, const char *y) {
  snprintf(buf, cap,
           "op { name: \"%s\" type: \"SpatialBN\" input: \"%s\" input: \"%s_s\" input: \"%s_b\" "
           "input: \"%s_rm\" input: \"%s_riv\" output: \"%s\" output: \"%s_rm\" output: "
           "\"%s_riv\" output: \"%s_sm\" output: \"%s_siv\" arg { name: \"is_test\" i: 0 } "
           "arg { name: \"epsilon\" f: 0.001 } }\n",
           name, x, name, name, name, name, y, name, name, name, name);
  return buf;
}

/* Runs the pass on `text` (keep, fed may be NULL); returns the net, *report the report. */
static Caffe2__NetDef *fuse(const char *text, const char *const *keep, size_t n_keep,
                            const char *const *fed, size_t n_fed,
                            dm_train_fusion_summary *sum) {
  Caffe2__NetDef *net = parse(text);
  dm_train_fusion_opts o = {keep, n_keep, fed, n_fed};
  assert_ok(dm_train_fusion_pass(net, &o, sum));
  return net;
}

static void test_fused_nets(void **state) {
  (void)state;
  char a[1024], b[1024], c[1024], text[8192];
  /* Caffe2's ResNet form: the Relu in place over Y, the sum in a new blob, Relu in place. */
  snprintf(text, sizeof text,
           "%s"
           "op { type: \"Relu\" input: \"t1\" output: \"t1\" }\n"
           "op { type: \"Conv\" input: \"t1\" input: \"w\" output: \"c2\" }\n"
           "%s"
           "op { type: \"Sum\" input: \"t2\" input: \"t1\" output: \"s2\" }\n"
           "op { type: \"Relu\" input: \"s2\" output: \"s2\" }\n"
           "op { type: \"Conv\" input: \"s2\" input: \"w\" output: \"c3\" }\n"
           "%s"
           "op { type: \"Add\" input: \"s2\" input: \"t3\" output: \"s2\" }\n"
           "op { type: \"Relu\" input: \"s2\" output: \"s2\" }\n"
           "external_input: \"x\"\nexternal_output: \"s2\"\n",
           bn(a, sizeof a, "bn1", "x", "t1"), bn(b, sizeof b, "bn2", "c2", "t2"),
           bn(c, sizeof c, "bn3", "c3", "t3"));
  dm_train_fusion_summary sum;
  Caffe2__NetDef *net = fuse(text, NULL, 0, NULL, 0, &sum);
  expect_ops(net,
             "SpatialBNRelu(x,bn1_s,bn1_b,bn1_rm,bn1_riv)>t1,bn1_rm,bn1_riv,bn1_sm,bn1_siv,"
             "t1_reserve "
             "Conv(t1,w)>c2 "
             "SpatialBNAddRelu(c2,bn2_s,bn2_b,bn2_rm,bn2_riv,t1)>s2,bn2_rm,bn2_riv,bn2_sm,"
             "bn2_siv,t2_reserve "
             "Conv(s2,w)>c3 "
             "SpatialBNAddRelu(c3,bn3_s,bn3_b,bn3_rm,bn3_riv,s2)>s2,bn3_rm,bn3_riv,bn3_sm,"
             "bn3_siv,t3_reserve");
  assert_int_equal(sum.bn_total, 3);
  assert_int_equal(sum.bn_relu, 1);
  assert_int_equal(sum.bn_add_relu, 2);
  assert_null(sum.report);
  /* The BN's name and arguments carried. */
  assert_string_equal(net->op[0]->name, "bn1");
  const Caffe2__Argument *eps = dm_opdef_find_arg(net->op[2], "epsilon");
  assert_non_null(eps);
  assert_true(eps->has_f && fabsf(eps->f - 0.001f) == 0);
  /* A reserve name already taken gets a suffix. */
  dm_train_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  snprintf(text, sizeof text,
           "%sop { type: \"Relu\" input: \"t1\" output: \"y\" }\n"
           "op { type: \"Relu\" input: \"t1_reserve\" output: \"q\" }\n",
           bn(a, sizeof a, "bn1", "x", "t1"));
  net = fuse(text, NULL, 0, NULL, 0, &sum);
  expect_ops(net, "SpatialBNRelu(x,bn1_s,bn1_b,bn1_rm,bn1_riv)>y,bn1_rm,bn1_riv,bn1_sm,bn1_siv,"
                  "t1_reserve_1 Relu(t1_reserve)>q");
  dm_train_fusion_summary_free(&sum);
  /* The gradient pass then emits the fused backward ops. */
  const char *loss = "y";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  char got[4096];
  op_list(net, 0, got, sizeof got);
  if (!strstr(got, "SpatialBNReluGradient(x,bn1_s,y_autogen_grad,bn1_sm,bn1_siv,y,bn1_b,t1_reserve_1)"))
    fail_msg("no fused gradient in %s", got);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* One BN + Relu pattern made unfusable by `extra` (ops around it): the report names `why`. */
static void expect_refused(const char *before, const char *between, const char *after,
                           const char *const *keep, size_t n_keep, const char *const *fed,
                           size_t n_fed, const char *why) {
  char a[1024], text[8192];
  snprintf(text, sizeof text, "%s%s%sop { type: \"Relu\" input: \"t\" output: \"y\" }\n%s",
           before, bn(a, sizeof a, "bn", "x", "t"), between, after);
  dm_train_fusion_summary sum;
  Caffe2__NetDef *net = fuse(text, keep, n_keep, fed, n_fed, &sum);
  assert_int_equal(sum.bn_total, 1);
  assert_int_equal(sum.bn_relu + sum.bn_add_relu, 0);
  assert_non_null(sum.report);
  if (!strstr(sum.report, why) || !strstr(sum.report, "op 0 SpatialBN 'bn' (t): not fused"))
    fail_msg("report\n%s\nlacks '%s'", sum.report, why);
  Caffe2__NetDef *orig = parse(text);
  char x1[4096], x2[4096];
  op_list(orig, OPL_OUTPUTS, x1, sizeof x1);
  op_list(net, OPL_OUTPUTS, x2, sizeof x2);
  assert_string_equal(x1, x2); /* unchanged */
  protobuf_c_message_free_unpacked(&orig->base, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  dm_train_fusion_summary_free(&sum);
}

static void test_left_alone(void **state) {
  (void)state;
  static const char *const t[] = {"t"};
  expect_refused("", "", "op { type: \"FC\" input: \"t\" input: \"w\" input: \"b\" output: \"f\" }\n",
                 NULL, 0, NULL, 0, "an intermediate blob (the BN's Y or the sum) has another "
                 "reader or writer");
  expect_refused("", "", "external_output: \"t\"\n", NULL, 0, NULL, 0, "is fetched");
  expect_refused("", "", "", t, 1, NULL, 0, "is fetched");
  expect_refused("", "", "", NULL, 0, t, 1, "is fed at each run");
  expect_refused("", "op { type: \"Conv\" input: \"t\" input: \"w\" output: \"c\" }\n", "", NULL,
                 0, NULL, 0, "Y is read first by an op other than a Relu, Sum or Add");
  expect_refused("", "op { type: \"Relu\" input: \"q\" output: \"bn_s\" }\n", "", NULL, 0, NULL,
                 0, "an op between the BN and the Relu writes one of the BN's inputs");
  expect_refused("", "op { type: \"Relu\" input: \"bn_sm\" output: \"q\" }\n", "", NULL, 0,
                 NULL, 0, "reads or writes one of the BN's statistics outputs");
  expect_refused("", "op { type: \"Relu\" input: \"y\" output: \"q\" }\n", "", NULL, 0, NULL, 0,
                 "an op between the BN and the Relu reads or writes the Relu's output");
  /* The Relu writing the BN's X (the BN's gradient reads X) */
  char a[1024], text[4096];
  snprintf(text, sizeof text, "%sop { type: \"Relu\" input: \"t\" output: \"x\" }\n",
           bn(a, sizeof a, "bn", "x", "t"));
  dm_train_fusion_summary sum;
  Caffe2__NetDef *net = fuse(text, NULL, 0, NULL, 0, &sum);
  assert_non_null(strstr(sum.report, "the Relu's output is one of the BN's inputs"));
  protobuf_c_message_free_unpacked(&net->base, NULL);
  dm_train_fusion_summary_free(&sum);
  /* Sum/Add forms: a broadcast Add; Z written between the Sum and the Relu; a Sum of Y
   * with itself. */
  const char *const sums[][2] = {
      {"op { type: \"Add\" input: \"t\" input: \"z\" output: \"s\" arg { name: \"broadcast\" "
       "i: 1 } }\nop { type: \"Relu\" input: \"s\" output: \"s\" }\n",
       "the Add reading Y broadcasts"},
      {"op { type: \"Sum\" input: \"z\" input: \"t\" output: \"s\" }\n"
       "op { type: \"Relu\" input: \"q\" output: \"z\" }\n"
       "op { type: \"Relu\" input: \"s\" output: \"s\" }\n",
       "an op between the Sum/Add and the Relu writes Z"},
      {"op { type: \"Sum\" input: \"t\" input: \"t\" output: \"s\" }\n"
       "op { type: \"Relu\" input: \"s\" output: \"s\" }\n",
       "the Sum/Add adds Y to itself"},
      {"op { type: \"Sum\" input: \"t\" input: \"z\" output: \"s\" }\n"
       "op { type: \"Conv\" input: \"s\" input: \"w\" output: \"s2\" }\n",
       "the sum is read first by an op other than a Relu"},
  };
  for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++) {
    snprintf(text, sizeof text, "%s%s", bn(a, sizeof a, "bn", "x", "t"), sums[i][0]);
    net = fuse(text, NULL, 0, NULL, 0, &sum);
    assert_int_equal(sum.bn_add_relu + sum.bn_relu, 0);
    if (!sum.report || !strstr(sum.report, sums[i][1]))
      fail_msg("case %zu: report '%s' lacks '%s'", i, sum.report ? sum.report : "",
               sums[i][1]);
    protobuf_c_message_free_unpacked(&net->base, NULL);
    dm_train_fusion_summary_free(&sum);
  }
  /* Test mode: not a training BN, not counted. */
  net = fuse("op { type: \"SpatialBN\" input: \"x\" input: \"s\" input: \"b\" input: \"m\" "
             "input: \"v\" output: \"t\" arg { name: \"is_test\" i: 1 } }\n"
             "op { type: \"Relu\" input: \"t\" output: \"t\" }\n",
             NULL, 0, NULL, 0, &sum);
  assert_int_equal(sum.bn_total, 0);
  assert_int_equal(net->n_op, 2);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  dm_train_fusion_summary_free(&sum);
  /* A net with gradient ops. */
  net = parse("op { type: \"Relu\" input: \"x\" output: \"y\" }\n"
              "op { type: \"ReluGradient\" input: \"y\" input: \"dy\" output: \"dx\" "
              "is_gradient_op: true }\n");
  dm_status s = dm_train_fusion_pass(net, NULL, &sum);
  assert_status_msg(s, DM_ERR_INVALID, "runs before the gradient pass, and op 1 "
                    "('ReluGradient') is a gradient op");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  dm_train_fusion_summary_free(&sum);
}

/* ---- Conv + Relu, FC + Relu -------------------------------------------------------- */

static void test_conv_fc_relu(void **state) {
  (void)state;
  /* Conv with a bias, Relu in place; Conv without, Relu to a new blob; FC + Relu; a Conv
   * whose Y a BN reads and a Conv whose Y is fetched are left alone (the latter reported). */
  const char *text =
      "op { name: \"c1\" type: \"Conv\" input: \"x\" input: \"w1\" input: \"b1\" output: \"t1\" "
      "arg { name: \"kernel\" i: 3 } arg { name: \"pad\" i: 1 } }\n"
      "op { type: \"Relu\" input: \"t1\" output: \"t1\" }\n"
      "op { type: \"Conv\" input: \"t1\" input: \"w2\" output: \"t2\" arg { name: \"kernel\" i: 1 } }\n"
      "op { type: \"Relu\" input: \"t2\" output: \"r2\" }\n"
      "op { type: \"Conv\" input: \"r2\" input: \"w3\" output: \"t3\" arg { name: \"kernel\" i: 1 } }\n"
      "op { type: \"Relu\" input: \"t3\" output: \"r3\" }\n"
      "op { type: \"FC\" input: \"r3\" input: \"fw\" input: \"fb\" output: \"f\" }\n"
      "op { type: \"Relu\" input: \"f\" output: \"f\" }\n"
      "op { type: \"Conv\" input: \"r3\" input: \"w4\" output: \"t4\" arg { name: \"kernel\" i: 1 } }\n"
      "external_output: \"t3\"\nexternal_output: \"f\"\nexternal_output: \"t4\"\n";
  dm_train_fusion_summary sum;
  Caffe2__NetDef *net = fuse(text, NULL, 0, NULL, 0, &sum);
  expect_ops(net, "ConvFusion(x,w1,b1)>t1 ConvFusion(t1,w2)>r2 Conv(r2,w3)>t3 Relu(t3)>r3 "
                  "FCFusion(r3,fw,fb)>f Conv(r3,w4)>t4");
  assert_int_equal(sum.conv_relu, 2);
  assert_int_equal(sum.fc_relu, 1);
  assert_int_equal(sum.bn_total, 0);
  assert_non_null(sum.report);
  if (!strstr(sum.report, "op 2 Conv '' (t3): not fused with its Relu: an intermediate blob (Y) "
                          "is fetched"))
    fail_msg("report: %s", sum.report);
  /* The Conv's name and arguments carried, fusion_type 1 added. */
  assert_string_equal(net->op[0]->name, "c1");
  assert_int_equal(dm_opdef_arg_int(net->op[0], "pad", 0), 1);
  assert_int_equal(dm_opdef_arg_int(net->op[0], "fusion_type", 0), 1);
  assert_int_equal(dm_opdef_arg_int(net->op[4], "fusion_type", 0), 1);
  dm_train_fusion_summary_free(&sum);
  /* The gradient pass emits one fused backward op each, reading the fused op's Y. */
  const char *loss = "f";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  char got[8192];
  op_list(net, OPL_OUTPUTS, got, sizeof got);
  static const char *const want[] = {
      "FCReluGradient(r3,fw,f_autogen_grad,f)>fw_grad,fb_grad,r3_grad",
      "ConvReluGradient(t1,w2,r2_grad,r2)>w2_grad,t1_grad",
      "ConvReluGradient(x,w1,t1_grad,t1)>w1_grad,b1_grad,x_grad",
      "ReluGradient(r3,r3_grad)>t3_grad ConvGradient(r2,w3,t3_grad)>w3_grad,r2_grad"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(got, want[i]))
      fail_msg("no '%s' in %s", want[i], got);
  if (strstr(got, " ReluGradient(f,") || strstr(got, " ReluGradient(r2,") ||
      strstr(got, " ReluGradient(t1,") || strstr(got, "FCGradient"))
    fail_msg("an unfused backward op in %s", got);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  /* The Relu writing the Conv's input; an op between writing W. */
  net = fuse("op { type: \"Conv\" input: \"x\" input: \"w\" output: \"t\" }\n"
             "op { type: \"Relu\" input: \"t\" output: \"x\" }\n", NULL, 0, NULL, 0, &sum);
  assert_int_equal(sum.conv_relu, 0);
  assert_non_null(strstr(sum.report, "the Relu's output is one of the Conv's inputs"));
  dm_train_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  net = fuse("op { type: \"FC\" input: \"x\" input: \"w\" input: \"b\" output: \"t\" }\n"
             "op { type: \"Relu\" input: \"q\" output: \"w\" }\n"
             "op { type: \"Relu\" input: \"t\" output: \"y\" }\n", NULL, 0, NULL, 0, &sum);
  assert_int_equal(sum.fc_relu, 0);
  assert_non_null(strstr(sum.report, "an op between the FC and the Relu writes one of the "
                                     "FC's inputs"));
  dm_train_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  /* Fed Y */
  static const char *const t[] = {"t"};
  net = fuse("op { type: \"Conv\" input: \"x\" input: \"w\" output: \"t\" }\n"
             "op { type: \"Relu\" input: \"t\" output: \"y\" }\n", NULL, 0, t, 1, &sum);
  assert_int_equal(sum.conv_relu, 0);
  assert_non_null(strstr(sum.report, "an intermediate blob (Y) is fed at each run"));
  dm_train_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  /* ConvFusion with a sum (fusion_type 2, 3) has no gradient: refused with the reason. */
  for (int type = 2; type <= 3; type++) {
    char buf[512];
    snprintf(buf, sizeof buf, "op { type: \"ConvFusion\" input: \"x\" input: \"w\" input: \"s\" "
             "output: \"y\" arg { name: \"fusion_type\" i: %d } }\n", type);
    net = parse(buf);
    loss = "y";
    assert_status_msg(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}), DM_ERR_UNSUPPORTED,
                      "ConvFusion has a gradient for fusion_type 1");
    protobuf_c_message_free_unpacked(&net->base, NULL);
  }
}

/* ---- ConvReluGradient, FCReluGradient against ReluGradient + Conv/FCGradient ---------- */

static void feed_typed(dm_workspace *ws, const char *name, dm_dtype t, int ndim,
                       const int64_t *dims, uint64_t *rng, double lo, double hi) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  uint16_t *h = malloc((size_t)n * sizeof *h);
  assert_true(v && h);
  for (int64_t i = 0; i < n; i++) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (float)(lo + (hi - lo) * (double)(*rng >> 11) * 0x1p-53);
  }
  if (t == DM_FLOAT) {
    assert_ok(dm_workspace_feed(ws, name, DM_FLOAT, ndim, dims, v));
  } else {
    for (int64_t i = 0; i < n; i++)
      h[i] = t == DM_BFLOAT16 ? dm_f32_to_bf16(v[i]) : dm_float_to_half(v[i]);
    assert_ok(dm_workspace_feed(ws, name, t, ndim, dims, h));
  }
  free(v);
  free(h);
}

/* Blobs a and b hold the same bits. */
static int same_bits(dm_workspace *ws, const char *a, const char *b) {
  const dm_tensor *x = NULL, *y = NULL;
  assert_ok(dm_workspace_fetch(ws, a, &x));
  assert_ok(dm_workspace_fetch(ws, b, &y));
  assert_int_equal(dm_tensor_dtype(x), dm_tensor_dtype(y));
  assert_int_equal(dm_tensor_nbytes(x), dm_tensor_nbytes(y));
  return memcmp(dm_tensor_data(x), dm_tensor_data(y), dm_tensor_nbytes(x)) == 0;
}

/* Y (the forward's output, through ConvFusion/FCFusion, so with exact zeros) gets a NaN,
 * a -0 and a +inf planted: the mask must treat them as ReluGradient does. */
static void plant_specials(dm_workspace *ws, const char *name) {
  const dm_tensor *y = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &y));
  dm_dtype t = dm_tensor_dtype(y);
  int64_t n = dm_tensor_numel(y);
  assert_true(n >= 3);
  void *d = malloc(dm_tensor_nbytes(y));
  assert_non_null(d);
  memcpy(d, dm_tensor_data(y), dm_tensor_nbytes(y));
  if (t == DM_FLOAT) {
    float *f = d;
    f[0] = NAN, f[1] = -0.0f, f[n - 1] = INFINITY;
  } else {
    uint16_t *h = d;
    h[0] = t == DM_BFLOAT16 ? 0x7fc0 : 0x7e00;
    h[1] = 0x8000;
    h[n - 1] = t == DM_BFLOAT16 ? 0x7f80 : 0x7c00;
  }
  assert_ok(dm_workspace_feed(ws, name, t, dm_tensor_ndim(y), dm_tensor_dims(y), d));
  free(d);
}

static void check_conv_relu_grad(dm_dtype t, int k, const char *conv_args, int bias, int dx,
                                 int group) {
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  assert_ok(dm_workspace_set_engine(ws, "REFERENCE"));
  uint64_t rng = 777;
  const int64_t xd[] = {3, 4, 7, 6}, wd[] = {6, 4 / group, k, k}, bd[] = {6};
  feed_typed(ws, "x", t, 4, xd, &rng, -1, 1);
  feed_typed(ws, "w", t, 4, wd, &rng, -0.4, 0.4);
  feed_typed(ws, "b", t, 1, bd, &rng, -0.2, 0.2);
  char text[2048];
  snprintf(text, sizeof text,
           "op { type: 'ConvFusion' input: ['x', 'w'%s] output: 'y' %s "
           "arg { name: 'kernel' i: %d } arg { name: 'group' i: %d } "
           "arg { name: 'fusion_type' i: 1 } }",
           bias ? ", 'b'" : "", conv_args, k, group);
  assert_ok(run_text(ws, text));
  plant_specials(ws, "y");
  const dm_tensor *y = NULL;
  assert_ok(dm_workspace_fetch(ws, "y", &y));
  feed_typed(ws, "dy", t, 4, dm_tensor_dims(y), &rng, -1, 1);
  const char *outs = bias ? (dx ? "'dw', 'db', 'dx'" : "'dw', 'db'") : (dx ? "'dw', 'dx'" : "'dw'");
  const char *outs2 = bias ? (dx ? "'dw2', 'db2', 'dx2'" : "'dw2', 'db2'")
                           : (dx ? "'dw2', 'dx2'" : "'dw2'");
  char extra[256];
  snprintf(extra, sizeof extra, "%s arg { name: 'kernel' i: %d } arg { name: 'group' i: %d } "
           "%s %s", conv_args, k, group,
           bias ? "" : "arg { name: 'no_bias' i: 1 }",
           dx ? "" : "arg { name: 'no_gradient_to_input' i: 1 }");
  snprintf(text, sizeof text,
           "op { type: 'ConvReluGradient' input: ['x', 'w', 'dy', 'y'] output: [%s] %s "
           "arg { name: 'fusion_type' i: 1 } }"
           "op { type: 'ReluGradient' input: ['y', 'dy'] output: 'm' }"
           "op { type: 'ConvGradient' input: ['x', 'w', 'm'] output: [%s] %s }"
           "op { type: 'ConvGradient' input: ['x', 'w', 'dy'] output: ['dw3'] %s "
           "arg { name: 'kernel' i: %d } arg { name: 'group' i: %d } "
           "arg { name: 'no_bias' i: 1 } arg { name: 'no_gradient_to_input' i: 1 } }",
           outs, extra, outs2, extra, conv_args, k, group);
  assert_ok(run_text(ws, text));
  if (!same_bits(ws, "dw", "dw2") || (bias && !same_bits(ws, "db", "db2")) ||
      (dx && !same_bits(ws, "dx", "dx2")))
    fail_msg("%s ConvReluGradient (%s, bias %d, dx %d, group %d) differs from ReluGradient + "
             "ConvGradient", dm_dtype_name(t), conv_args, bias, dx, group);
  assert_false(same_bits(ws, "dw", "dw3")); /* the mask matters */
  dm_workspace_destroy(ws);
}

static void check_fc_relu_grad(dm_dtype t, int dx) {
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  assert_ok(dm_workspace_set_engine(ws, "REFERENCE"));
  uint64_t rng = 99;
  const int64_t xd[] = {5, 3, 2, 2}, wd[] = {7, 12}, bd[] = {7};
  feed_typed(ws, "x", t, 4, xd, &rng, -1, 1);
  feed_typed(ws, "w", t, 2, wd, &rng, -0.5, 0.5);
  feed_typed(ws, "b", t, 1, bd, &rng, -0.2, 0.2);
  assert_ok(run_text(ws, "op { type: 'FCFusion' input: ['x', 'w', 'b'] output: 'y' "
                         "arg { name: 'fusion_type' i: 1 } }"));
  plant_specials(ws, "y");
  const dm_tensor *y = NULL;
  assert_ok(dm_workspace_fetch(ws, "y", &y));
  feed_typed(ws, "dy", t, 2, dm_tensor_dims(y), &rng, -1, 1);
  char text[1024];
  snprintf(text, sizeof text,
           "op { type: 'FCReluGradient' input: ['x', 'w', 'dy', 'y'] output: ['dw', 'db'%s] "
           "arg { name: 'fusion_type' i: 1 } }"
           "op { type: 'ReluGradient' input: ['y', 'dy'] output: 'm' }"
           "op { type: 'FCGradient' input: ['x', 'w', 'm'] output: ['dw2', 'db2'%s] }"
           "op { type: 'FCGradient' input: ['x', 'w', 'dy'] output: ['dw3', 'db3'] }",
           dx ? ", 'dx'" : "", dx ? ", 'dx2'" : "");
  assert_ok(run_text(ws, text));
  if (!same_bits(ws, "dw", "dw2") || !same_bits(ws, "db", "db2") ||
      (dx && !same_bits(ws, "dx", "dx2")))
    fail_msg("%s FCReluGradient (dx %d) differs from ReluGradient + FCGradient",
             dm_dtype_name(t), dx);
  assert_false(same_bits(ws, "db", "db3")); /* the mask matters */
  /* Y of another shape than dY is refused. */
  assert_status_msg(run_text(ws, "op { type: 'FCReluGradient' input: ['x', 'w', 'dy', 'x'] "
                                 "output: ['dw', 'db'] arg { name: 'fusion_type' i: 1 } }"),
                    DM_ERR_SHAPE, "but dY is");
  dm_workspace_destroy(ws);
}

static void test_relu_grad_ops(void **state) {
  (void)state;
  static const dm_dtype types[] = {DM_FLOAT, DM_FLOAT16, DM_BFLOAT16};
  for (size_t i = 0; i < 3; i++) {
    check_conv_relu_grad(types[i], 3, "arg { name: 'pad' i: 1 }", 1, 1, 1);
    check_conv_relu_grad(types[i], 3, "arg { name: 'stride' i: 2 }", 0, 1, 2);
    check_conv_relu_grad(types[i], 1, "", 1, 0, 1);
    check_fc_relu_grad(types[i], 1);
    check_fc_relu_grad(types[i], 0);
  }
}

/* ---- training with and without the pass ------------------------------------------ */

enum { NB = 4, CIN = 3, HW = 6, CH = 8, CLS = 5, STEPS = 4 };

static const char *const block_net =
    "op { type: \"Conv\" input: \"data\" input: \"w1\" input: \"b1\" output: \"c1\" "
    "arg { name: \"kernel\" i: 3 } arg { name: \"pad\" i: 1 } }\n"
    "op { type: \"SpatialBN\" input: \"c1\" input: \"s1\" input: \"o1\" input: \"rm1\" "
    "input: \"rv1\" output: \"t1\" output: \"rm1\" output: \"rv1\" output: \"sm1\" output: "
    "\"si1\" arg { name: \"is_test\" i: 0 } arg { name: \"momentum\" f: 0.9 } }\n"
    "op { type: \"Relu\" input: \"t1\" output: \"t1\" }\n"
    "op { type: \"Conv\" input: \"t1\" input: \"w2\" output: \"c2\" arg { name: \"kernel\" i: 1 } }\n"
    "op { type: \"SpatialBN\" input: \"c2\" input: \"s2\" input: \"o2\" input: \"rm2\" "
    "input: \"rv2\" output: \"t2\" output: \"rm2\" output: \"rv2\" output: \"sm2\" output: "
    "\"si2\" arg { name: \"is_test\" i: 0 } }\n"
    "op { type: \"Sum\" input: \"t2\" input: \"t1\" output: \"u2\" }\n"
    "op { type: \"Relu\" input: \"u2\" output: \"u2\" }\n"
    "op { type: \"Conv\" input: \"u2\" input: \"w3\" output: \"c3\" arg { name: \"kernel\" i: 3 } "
    "arg { name: \"pad\" i: 1 } }\n"
    "op { type: \"SpatialBN\" input: \"c3\" input: \"s3\" input: \"o3\" input: \"rm3\" "
    "input: \"rv3\" output: \"t3\" output: \"rm3\" output: \"rv3\" output: \"sm3\" output: "
    "\"si3\" arg { name: \"is_test\" i: 0 } }\n"
    "op { type: \"Add\" input: \"u2\" input: \"t3\" output: \"u3\" }\n"
    "op { type: \"Relu\" input: \"u3\" output: \"u3\" }\n"
    "op { type: \"FC\" input: \"u3\" input: \"fw\" input: \"fb\" output: \"pred\" }\n"
    "op { type: \"SoftmaxWithLoss\" input: \"pred\" input: \"label\" output: \"softmax\" "
    "output: \"loss\" }\n"
    "external_input: \"data\"\nexternal_input: \"label\"\nexternal_output: \"loss\"\n";

static void feed_rand(dm_workspace *ws, const char *name, int ndim, const int64_t *dims,
                      uint64_t *rng, double lo, double hi) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (float)(lo + (hi - lo) * (double)(*rng >> 11) * 0x1p-53);
  }
  assert_ok(dm_workspace_feed(ws, name, DM_FLOAT, ndim, dims, v));
  free(v);
}

typedef struct trainer {
  dm_workspace *ws;
  dm_net *net;
  char **state;
  size_t n_state;
} trainer;

static void trainer_init(trainer *t, int fuse_train, int fp16) {
  memset(t, 0, sizeof *t);
  assert_ok(dm_workspace_create(&t->ws));
  assert_ok(dm_workspace_set_engine(t->ws, "REFERENCE"));
  uint64_t rng = 12345;
  const int64_t w1[] = {CH, CIN, 3, 3}, w2[] = {CH, CH, 1, 1}, w3[] = {CH, CH, 3, 3},
                c[] = {CH}, fw[] = {CLS, CH * HW * HW}, fb[] = {CLS},
                xd[] = {NB, CIN, HW, HW}, ld[] = {NB};
  feed_rand(t->ws, "w1", 4, w1, &rng, -0.3, 0.3);
  feed_rand(t->ws, "b1", 1, c, &rng, -0.1, 0.1);
  feed_rand(t->ws, "w2", 4, w2, &rng, -0.3, 0.3);
  feed_rand(t->ws, "w3", 4, w3, &rng, -0.2, 0.2);
  feed_rand(t->ws, "fw", 2, fw, &rng, -0.05, 0.05);
  feed_rand(t->ws, "fb", 1, fb, &rng, -0.1, 0.1);
  for (int k = 1; k <= 3; k++) {
    char n[8];
    snprintf(n, sizeof n, "s%d", k), feed_rand(t->ws, n, 1, c, &rng, 0.8, 1.2);
    snprintf(n, sizeof n, "o%d", k), feed_rand(t->ws, n, 1, c, &rng, -0.1, 0.1);
    snprintf(n, sizeof n, "rm%d", k), feed_rand(t->ws, n, 1, c, &rng, -0.1, 0.1);
    snprintf(n, sizeof n, "rv%d", k), feed_rand(t->ws, n, 1, c, &rng, 0.9, 1.1);
  }
  feed_rand(t->ws, "data", 4, xd, &rng, -1, 1);
  int32_t label[NB];
  for (int i = 0; i < NB; i++)
    label[i] = (i * 3) % CLS;
  assert_ok(dm_workspace_feed(t->ws, "label", DM_INT32, 1, ld, label));
  Caffe2__NetDef *def = parse(block_net), *add = NULL;
  const char *loss = "loss";
  static const char *const data_blobs[] = {"data", "label"};
  dm_pipeline_opts p;
  dm_pipeline_opts_init_training(&p, &loss, 1, data_blobs, 2);
  p.optim.kind = DM_OPTIMIZER_MOMENTUM;
  p.fuse_train = fuse_train;
  p.mixed_precision = fp16;
  p.mp.scaling = DM_LOSS_SCALE_DYNAMIC;
  dm_pipeline_result r;
  assert_ok(dm_pipeline_run(def, &p, &add, &r));
  if (fuse_train) {
    assert_int_equal(r.train_fusion.bn_relu, 1);
    assert_int_equal(r.train_fusion.bn_add_relu, 2);
  }
  dm_pipeline_result_free(&r);
  dm_net *init_net = NULL;
  assert_ok(dm_workspace_create_net(t->ws, add, "init_add", &init_net));
  assert_ok(dm_net_run(init_net));
  t->n_state = dm_workspace_blob_count(t->ws);
  t->state = calloc(t->n_state, sizeof *t->state);
  assert_non_null(t->state);
  for (size_t i = 0; i < t->n_state; i++)
    t->state[i] = strdup(dm_workspace_blob_name(t->ws, i));
  assert_ok(dm_workspace_create_net(t->ws, def, "train", &t->net));
  /* the workspace owns def and add now */
}

static void trainer_free(trainer *t) {
  for (size_t i = 0; i < t->n_state; i++)
    free(t->state[i]);
  free(t->state);
  dm_workspace_destroy(t->ws);
}

static void check_training(int fp16) {
  trainer plain, fused;
  trainer_init(&plain, 0, fp16);
  trainer_init(&fused, 1, fp16);
  assert_int_equal(plain.n_state, fused.n_state);
  double first = 0, last = 0;
  for (int step = 0; step < STEPS; step++) {
    assert_ok(dm_net_run(plain.net));
    assert_ok(dm_net_run(fused.net));
    for (size_t i = 0; i <= plain.n_state; i++) {
      const char *name = i < plain.n_state ? plain.state[i] : "loss";
      const dm_tensor *x = NULL, *y = NULL;
      assert_ok(dm_workspace_fetch(plain.ws, name, &x));
      assert_ok(dm_workspace_fetch(fused.ws, name, &y));
      assert_int_equal(dm_tensor_nbytes(x), dm_tensor_nbytes(y));
      if (memcmp(dm_tensor_data(x), dm_tensor_data(y), dm_tensor_nbytes(x)) != 0)
        fail_msg("%s: '%s' differs after step %d", fp16 ? "fp16" : "fp32", name, step + 1);
      if (i == plain.n_state)
        *(step == 0 ? &first : &last) = *(const float *)dm_tensor_data(x);
    }
  }
  printf("# %s: loss %.6f -> %.6f, identical with and without the pass\n",
         fp16 ? "fp16" : "fp32", first, last);
  assert_true(last < first); /* it trains */
  trainer_free(&plain);
  trainer_free(&fused);
}

static void test_training_fp32(void **state) {
  (void)state;
  check_training(0);
}

static void test_training_fp16(void **state) {
  (void)state;
  check_training(1);
}

/* ---- model training steps with and without the pass ------------------------------ */

static const char *lenet_init, *lenet_train, *squeeze_init, *squeeze_train, *resnet_init,
    *resnet_train;

typedef struct model {
  const char *name, **init, **train;
  int64_t batch, channels, side;
} model;

typedef struct stepped {
  dm_workspace *ws;
  char **state; /* the init net's and the init addition's outputs: parameters, momenta */
  size_t n_state;
  dm_train_fusion_summary fused;
} stepped;

static void push_outputs(stepped *s, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++)
    for (size_t k = 0; k < net->op[i]->n_output; k++)
      assert_ok(dm_strv_push(&s->state, &s->n_state, net->op[i]->output[k]));
}

/* `steps` momentum-SGD steps of model m on the reference kernels (fp16: mixed precision,
 * FP16), the training fusion pass on or off; sabotage: one parameter one ulp up first. */
static void model_steps(const model *m, int fuse_train, int fp16, int steps, int sabotage,
                        stepped *out) {
  memset(out, 0, sizeof *out);
  assert_ok(dm_workspace_create(&out->ws));
  assert_ok(dm_workspace_set_engine(out->ws, "REFERENCE"));
  assert_ok(dm_workspace_run_net_file(out->ws, *m->init));
  Caffe2__NetDef *init = NULL;
  assert_ok(dm_netdef_read(*m->init, &init));
  push_outputs(out, init);
  protobuf_c_message_free_unpacked(&init->base, NULL);
  const char *loss = "loss";
  dm_pipeline_opts p;
  model_step_opts(&p, &loss, fp16);
  p.fuse_train = fuse_train;
  Caffe2__NetDef *net = NULL, *add = NULL;
  assert_ok(dm_netdef_read(*m->train, &net));
  drop_ops(net, "TensorProtosDBInput");
  dm_pipeline_result r;
  assert_ok(dm_pipeline_run(net, &p, &add, &r));
  out->fused = r.train_fusion;
  r.train_fusion = (dm_train_fusion_summary){0};
  dm_pipeline_result_free(&r);
  push_outputs(out, add);
  dm_net *n = NULL;
  assert_ok(dm_workspace_create_net(out->ws, add, "init_add", &n));
  assert_ok(dm_net_run(n));
  if (sabotage) {
    const dm_tensor *w = NULL;
    assert_ok(dm_workspace_fetch(out->ws, out->state[0], &w));
    assert_int_equal(dm_tensor_dtype(w), DM_FLOAT);
    float *v = malloc(dm_tensor_nbytes(w));
    assert_non_null(v);
    memcpy(v, dm_tensor_data(w), dm_tensor_nbytes(w));
    v[0] = nextafterf(v[0], INFINITY);
    assert_ok(dm_workspace_feed(out->ws, out->state[0], DM_FLOAT, dm_tensor_ndim(w),
                                dm_tensor_dims(w), v));
    free(v);
  }
  int64_t numel = m->batch * m->channels * m->side * m->side;
  float *x = malloc((size_t)numel * sizeof *x);
  assert_non_null(x);
  uint64_t rng = 0x853c49e6748fea9bull;
  for (int64_t i = 0; i < numel; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(rng >> 40) / 16777216.0);
  }
  const int64_t xd[4] = {m->batch, m->channels, m->side, m->side}, ld[1] = {m->batch};
  int32_t labels[8] = {3, 8, 0, 5, 1, 2, 7, 9};
  assert_ok(dm_workspace_feed(out->ws, "data", DM_FLOAT, 4, xd, x));
  assert_ok(dm_workspace_feed(out->ws, "label", DM_INT32, 1, ld, labels));
  free(x);
  assert_ok(dm_workspace_create_net(out->ws, net, "train", &n));
  for (int i = 0; i < steps; i++) {
    assert_ok(dm_net_run(n));
    if (fp16) { /* the step was taken, not skipped for an overflow */
      const dm_tensor *f = NULL;
      assert_ok(dm_workspace_fetch(out->ws, "found_inf", &f));
      assert_true(*(const float *)dm_tensor_data(f) == 0.0f);
    }
  }
  assert_ok(dm_strv_push(&out->state, &out->n_state, "loss"));
}

static void stepped_free(stepped *s) {
  for (size_t i = 0; i < s->n_state; i++)
    free(s->state[i]);
  free(s->state);
  dm_train_fusion_summary_free(&s->fused);
  dm_workspace_destroy(s->ws);
}

/* The state blobs (and the loss) that differ in any bit; the first named in *first. */
static size_t differing(const stepped *a, const stepped *b, const char **first) {
  assert_int_equal(a->n_state, b->n_state);
  size_t n = 0;
  *first = NULL;
  for (size_t i = 0; i < a->n_state; i++) {
    /* the same names, maybe in another order (the optimizer follows the gradient ops) */
    assert_true(dm_str_in_list(a->state[i], (const char *const *)b->state, b->n_state));
    const dm_tensor *x = NULL, *y = NULL;
    assert_ok(dm_workspace_fetch(a->ws, a->state[i], &x));
    assert_ok(dm_workspace_fetch(b->ws, a->state[i], &y));
    assert_int_equal(dm_tensor_nbytes(x), dm_tensor_nbytes(y));
    if (memcmp(dm_tensor_data(x), dm_tensor_data(y), dm_tensor_nbytes(x)) != 0 && n++ == 0)
      *first = a->state[i];
  }
  return n;
}

/* Steps m with and without the pass and compares every state blob and the loss bit for
 * bit; sabotage: the fused run's first parameter one ulp up, which must show. */
static void check_model(const model *m, int fp16, int steps, int sabotage) {
  stepped plain, fused;
  model_steps(m, 0, fp16, steps, 0, &plain);
  model_steps(m, 1, fp16, steps, sabotage, &fused);
  const dm_train_fusion_summary *f = &fused.fused;
  size_t made = f->bn_relu + f->bn_add_relu + f->conv_relu + f->fc_relu;
  printf("# %s %s%s: fused %zu Conv+Relu, %zu FC+Relu, %zu BN+Relu, %zu BN+Add+Relu; ",
         m->name, fp16 ? "fp16" : "fp32", sabotage ? " (one parameter one ulp up)" : "",
         f->conv_relu, f->fc_relu, f->bn_relu, f->bn_add_relu);
  assert_true(made > 0); /* the pass changed the net */
  const char *first;
  size_t n = differing(&plain, &fused, &first);
  const dm_tensor *l = NULL;
  assert_ok(dm_workspace_fetch(fused.ws, "loss", &l));
  printf("%zu state blobs and the loss (%.6f) after %d step(s): %zu differ%s%s\n",
         plain.n_state - 1, *(const float *)dm_tensor_data(l), steps, n,
         first ? ", first " : "", first ? first : "");
  if (sabotage)
    assert_true(n > 0);
  else if (n)
    fail_msg("%s %s: %zu blobs differ with the pass, '%s' first", m->name,
             fp16 ? "fp16" : "fp32", n, first);
  stepped_free(&plain);
  stepped_free(&fused);
}

static const model lenet = {"LeNet", &lenet_init, &lenet_train, 2, 1, 28};
static const model squeeze = {"SqueezeNet", &squeeze_init, &squeeze_train, 2, 3, 64};
static const model resnet = {"ResNet-50", &resnet_init, &resnet_train, 2, 3, 64};

static void test_lenet(void **state) {
  (void)state;
  check_model(&lenet, 0, 2, 0);
  check_model(&lenet, 1, 2, 0);
}

/* The comparison can fail. */
static void test_lenet_can_fail(void **state) {
  (void)state;
  check_model(&lenet, 0, 1, 1);
}

static void test_squeezenet(void **state) {
  (void)state;
  check_model(&squeeze, 0, 2, 0);
  check_model(&squeeze, 1, 2, 0);
}

static void test_resnet50(void **state) {
  (void)state;
  check_model(&resnet, 0, 1, 0);
  check_model(&resnet, 1, 1, 0);
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s lenet_init lenet_train squeezenet_init squeezenet_train "
            "resnet50_init resnet50_train\n", argv[0]);
    return 2;
  }
  lenet_init = argv[1], lenet_train = argv[2], squeeze_init = argv[3];
  squeeze_train = argv[4], resnet_init = argv[5], resnet_train = argv[6];
  assert_int_equal(dm_init(), DM_OK);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fused_nets),
      cmocka_unit_test(test_left_alone),
      cmocka_unit_test(test_conv_fc_relu),
      cmocka_unit_test(test_relu_grad_ops),
      cmocka_unit_test(test_training_fp32),
      cmocka_unit_test(test_training_fp16),
      cmocka_unit_test(test_lenet),
      cmocka_unit_test(test_lenet_can_fail),
      cmocka_unit_test(test_squeezenet),
      cmocka_unit_test(test_resnet50),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
