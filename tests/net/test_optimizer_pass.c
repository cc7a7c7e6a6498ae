/* test_optimizer_pass.c: the optimizer pass on a tiny net (FC + SoftmaxWithLoss) after the
 * gradient pass: which blobs it finds to train, the ops and fills it emits, one SGD step
 * with weight decay against the same step computed here in double, the loss decreasing
 * over a few steps for SGD, momentum and Adam, the rewritten net's text round trip, its
 * errors, and (given the CLI's path as argv[1]) `demitasse rewrite` end to end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "core/netio.h"
#include "net/passes/gradient_pass.h"
#include "net/netdef_build.h"
#include "net/passes/optimizer_pass.h"
#include "netdef_test_util.h"
#include "test_util.h"

static const char *cli_path; /* the demitasse executable, or NULL */

enum { NB = 4, K = 3, C = 3 }; /* batch, features, classes */

static const char *const forward_text =
    "name: \"tiny\"\n"
    "op { type: \"FC\" input: \"data\" input: \"fc_w\" input: \"fc_b\" output: \"logits\" }\n"
    "op { type: \"SoftmaxWithLoss\" input: \"logits\" input: \"label\" output: \"softmax\" "
    "output: \"loss\" }\n"
    "external_input: \"data\" external_input: \"fc_w\" external_input: \"fc_b\" "
    "external_input: \"label\"\n";

static const float X[NB][K] = {{1, 0.5f, -1}, {0.2f, -0.3f, 0.8f}, {-1, 1, 0.25f}, {0.5f, 0.5f, 0.5f}};
static const int32_t LABEL[NB] = {0, 2, 1, 2};
static const float W0[C][K] = {{0.1f, -0.2f, 0.3f}, {0.0f, 0.4f, -0.1f}, {-0.3f, 0.2f, 0.05f}};
static const float B0[C] = {0.1f, -0.1f, 0.0f};
static const char *const data_inputs[] = {"data", "label"};

/* The forward net with gradient and optimizer ops; *init gets the fill additions. */
static Caffe2__NetDef *train_net(const dm_optimizer_opts *o, Caffe2__NetDef **init) {
  Caffe2__NetDef *net = parse(forward_text);
  const char *loss = "loss";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  assert_ok(dm_netdef_new("init_additions", init));
  assert_ok(dm_optimizer_pass(net, o, *init));
  return net;
}

static void feed_problem(dm_workspace *ws) {
  const int64_t xd[2] = {NB, K}, wd[2] = {C, K}, bd[1] = {C}, ld[1] = {NB};
  assert_ok(dm_workspace_feed(ws, "data", DM_FLOAT, 2, xd, X));
  assert_ok(dm_workspace_feed(ws, "label", DM_INT32, 1, ld, LABEL));
  assert_ok(dm_workspace_feed(ws, "fc_w", DM_FLOAT, 2, wd, W0));
  assert_ok(dm_workspace_feed(ws, "fc_b", DM_FLOAT, 1, bd, B0));
}

/* Instantiates `net` through its text form (what a user's file would be). */
static dm_net *instantiate(dm_workspace *ws, const Caffe2__NetDef *def) {
  char *text = print(def);
  dm_net *net = NULL;
  assert_ok(net_from_text(ws, text, &net));
  free(text);
  return net;
}

static float fetch_scalar(dm_workspace *ws, const char *name) {
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &t));
  assert_int_equal(dm_tensor_numel(t), 1);
  return *(const float *)dm_tensor_data(t);
}

static void test_find_params(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(forward_text);
  const char *loss = "loss";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  char **names = NULL;
  size_t n = 0;
  assert_ok(dm_find_trainable_params(net, data_inputs, 2, &names, &n));
  assert_int_equal(n, 2);
  assert_string_equal(names[0], "fc_w");
  assert_string_equal(names[1], "fc_b");
  dm_optimizer_free_names(names, n);
  /* Without external_input the forward ops' first reads are the inputs. */
  for (size_t i = 0; i < net->n_external_input; i++)
    free(net->external_input[i]);
  free(net->external_input);
  net->external_input = NULL;
  net->n_external_input = 0;
  const char *just_data = "data";
  assert_ok(dm_find_trainable_params(net, &just_data, 1, &names, &n));
  assert_int_equal(n, 2);
  assert_string_equal(names[0], "fc_w");
  dm_optimizer_free_names(names, n);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* The loss gradients at W0, B0 in double: logits = X W^T + b; p = softmax; dlogits =
 * (p - onehot) / N. */
static void ref_grads(double gw[C][K], double gb[C]) {
  for (int n = 0; n < NB; n++) {
    double z[C], mx = -INFINITY, sum = 0;
    for (int c = 0; c < C; c++) {
      z[c] = B0[c];
      for (int k = 0; k < K; k++)
        z[c] += (double)X[n][k] * W0[c][k];
      mx = fmax(mx, z[c]);
    }
    for (int c = 0; c < C; c++)
      sum += exp(z[c] - mx);
    for (int c = 0; c < C; c++) {
      double d = (exp(z[c] - mx) / sum - (c == LABEL[n])) / NB;
      gb[c] += d;
      for (int k = 0; k < K; k++)
        gw[c][k] += d * X[n][k];
    }
  }
}

/* One SGD step with weight decay on fc_w (not fc_b), against double arithmetic. */
static void test_sgd_step(void **state) {
  (void)state;
  dm_optimizer_opts o;
  dm_optimizer_opts_init(&o);
  o.lr = 0.5;
  o.weight_decay = 0.1;
  o.exclude = data_inputs;
  o.n_exclude = 2;
  Caffe2__NetDef *init = NULL, *net = train_net(&o, &init);
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  feed_problem(ws);
  assert_ok(dm_net_run(instantiate(ws, init)));
  assert_ok(dm_net_run(instantiate(ws, net)));
  double gw[C][K] = {{0}}, gb[C] = {0};
  ref_grads(gw, gb);
  const dm_tensor *w = NULL, *b = NULL;
  assert_ok(dm_workspace_fetch(ws, "fc_w", &w));
  assert_ok(dm_workspace_fetch(ws, "fc_b", &b));
  const float *pw = dm_tensor_data(w), *pb = dm_tensor_data(b);
  const double lr = (double)(float)0.5, wd = (double)(float)0.1;
  for (int c = 0; c < C; c++) {
    double want_b = B0[c] - lr * gb[c];
    assert_true(fabs(pb[c] - want_b) <= 1e-6);
    for (int k = 0; k < K; k++) {
      double want = W0[c][k] - lr * (gw[c][k] + wd * W0[c][k]);
      if (!(fabs(pw[c * K + k] - want) <= 1e-6))
        fail_msg("fc_w[%d][%d] = %.9g, reference %.9g", c, k, pw[c * K + k], want);
    }
  }
  /* Caffe2's sign: WeightedSum adds lr * grad, so lr is negative; Iter ran once. */
  assert_true(fetch_scalar(ws, "lr") == -0.5f);
  const dm_tensor *it = NULL;
  assert_ok(dm_workspace_fetch(ws, DM_OPTIM_ITER_BLOB, &it));
  assert_int_equal(*(const int64_t *)dm_tensor_data(it), 1);
  dm_workspace_destroy(ws);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&init->base, NULL);
}

/* One AdamW step with the gradients clipped to a global norm below theirs, against
 * torch's rules in double: g *= clip / (|g| + 1e-6) (clip_grad_norm_), then p -= lr wd p
 * for fc_w only (a *_w param) and p -= lr m^ / (sqrt(v^) + eps) (torch.optim.AdamW). */
static void test_adamw_clip_step(void **state) {
  (void)state;
  dm_optimizer_opts o;
  dm_optimizer_opts_init(&o);
  o.kind = DM_OPTIMIZER_ADAMW;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.clip_norm = 0.05;
  o.exclude = data_inputs;
  o.n_exclude = 2;
  Caffe2__NetDef *init = NULL, *net = train_net(&o, &init);
  long clip = -1, upd = -1, wsum = 0; /* the first of each op */
  for (size_t i = 0; i < net->n_op; i++) {
    if (clip < 0 && strcmp(net->op[i]->type, "ClipByGlobalNorm") == 0)
      clip = (long)i;
    if (upd < 0 && strcmp(net->op[i]->type, "AdamW") == 0)
      upd = (long)i;
    wsum += strcmp(net->op[i]->type, "WeightedSum") == 0;
  }
  assert_true(clip >= 0 && upd > clip); /* clipped before any update */
  assert_int_equal(wsum, 0);            /* no L2 WeightedSum: the decay is decoupled */
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  feed_problem(ws);
  assert_ok(dm_net_run(instantiate(ws, init)));
  assert_ok(dm_net_run(instantiate(ws, net)));
  double gw[C][K] = {{0}}, gb[C] = {0}, sq = 0;
  ref_grads(gw, gb);
  for (int c = 0; c < C; c++) {
    sq += gb[c] * gb[c];
    for (int k = 0; k < K; k++)
      sq += gw[c][k] * gw[c][k];
  }
  const double clip_n = (double)(float)0.05, scale = clip_n / (sqrt(sq) + 1e-6);
  assert_true(scale < 0.5); /* the case clips */
  const double lr = (double)(float)0.01, wd = (double)(float)0.1, eps = (double)(float)1e-5;
  const dm_tensor *w = NULL, *b = NULL;
  assert_ok(dm_workspace_fetch(ws, "fc_w", &w));
  assert_ok(dm_workspace_fetch(ws, "fc_b", &b));
  const float *pw = dm_tensor_data(w), *pb = dm_tensor_data(b);
  /* step 1: m^ = g, v^ = g^2 after the bias corrections */
  for (int c = 0; c < C; c++) {
    double g = gb[c] * scale, want_b = B0[c] - lr * g / (fabs(g) + eps);
    if (!(fabs(pb[c] - want_b) <= 1e-6))
      fail_msg("fc_b[%d] = %.9g, reference %.9g", c, pb[c], want_b);
    for (int k = 0; k < K; k++) {
      double gk = gw[c][k] * scale;
      double want = W0[c][k] * (1 - lr * wd) - lr * gk / (fabs(gk) + eps);
      if (!(fabs(pw[c * K + k] - want) <= 1e-6))
        fail_msg("fc_w[%d][%d] = %.9g, reference %.9g", c, k, pw[c * K + k], want);
    }
  }
  dm_workspace_destroy(ws);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&init->base, NULL);
}

/* A few steps of each optimizer lower the loss; the LR blob has Caffe2's sign. */
static void test_loss_decreases(void **state) {
  (void)state;
  const char *kinds[] = {"sgd", "momentum", "adam", "adamw"};
  for (int k = 0; k < 4; k++) {
    dm_optimizer_opts o;
    dm_optimizer_opts_init(&o);
    assert_ok(dm_optimizer_kind_from_name(kinds[k], &o.kind));
    o.lr = k >= 2 ? 0.05 : 0.3;
    o.weight_decay = k == 3 ? 0.01 : 0;
    o.nesterov = 1;
    o.policy = "step";
    o.stepsize = 5;
    o.gamma = 0.9;
    o.warmup_iter = 3;
    o.warmup_start = 0.5;
    o.exclude = data_inputs;
    o.n_exclude = 2;
    Caffe2__NetDef *init = NULL, *net = train_net(&o, &init);
    dm_workspace *ws = NULL;
    assert_ok(dm_workspace_create(&ws));
    feed_problem(ws);
    assert_ok(dm_net_run(instantiate(ws, init)));
    dm_net *train = instantiate(ws, net);
    float first = 0, last = 0;
    for (int step = 0; step < 20; step++) {
      assert_ok(dm_net_run(train));
      last = fetch_scalar(ws, "loss");
      if (step == 0)
        first = last;
    }
    if (!(last < 0.8f * first))
      fail_msg("%s: loss %g after 20 steps, %g at the first", kinds[k], last, first);
    float lr = fetch_scalar(ws, "lr");
    assert_true(k == 1 ? lr > 0 : lr < 0);
    dm_workspace_destroy(ws);
    protobuf_c_message_free_unpacked(&net->base, NULL);
    protobuf_c_message_free_unpacked(&init->base, NULL);
  }
}

/* The rewritten nets print, parse back and print the same. */
static void test_round_trip(void **state) {
  (void)state;
  dm_optimizer_opts o;
  dm_optimizer_opts_init(&o);
  o.kind = DM_OPTIMIZER_ADAM;
  o.weight_decay = 1e-4;
  o.exclude = data_inputs;
  o.n_exclude = 2;
  Caffe2__NetDef *init = NULL, *net = train_net(&o, &init);
  for (int which = 0; which < 2; which++) {
    char *a = print(which ? init : net);
    Caffe2__NetDef *back = parse(a);
    char *b = print(back);
    assert_string_equal(a, b);
    if (!which) {
      assert_non_null(strstr(a, "type: \"Adam\""));
      assert_non_null(strstr(a, "fc_w_second_moment"));
    } else {
      assert_non_null(strstr(a, "optimizer_iteration"));
    }
    free(a);
    free(b);
    protobuf_c_message_free_unpacked(&back->base, NULL);
  }
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&init->base, NULL);
}

static void test_errors(void **state) {
  (void)state;
  dm_optimizer_opts o;
  dm_optimizer_opts_init(&o);
  o.exclude = data_inputs;
  o.n_exclude = 2;
  Caffe2__NetDef *init = NULL, *net = parse(forward_text);
  assert_ok(dm_netdef_new("init", &init));
  /* No gradient pass yet: nothing to train. */
  assert_status_msg(dm_optimizer_pass(net, &o, init), DM_ERR_INVALID,
                    "no trainable parameters");
  const char *p = "fc_w";
  o.params = &p;
  o.n_params = 1;
  assert_status_msg(dm_optimizer_pass(net, &o, init), DM_ERR_INVALID, "'fc_w_grad'");
  o.lr = -1;
  assert_status_msg(dm_optimizer_pass(net, &o, init), DM_ERR_INVALID, "learning rate");
  o.lr = 0.1;
  o.policy = "step";
  assert_status_msg(dm_optimizer_pass(net, &o, init), DM_ERR_INVALID, "'stepsize'");
  o.policy = NULL;
  o.clip_norm = -1;
  assert_status_msg(dm_optimizer_pass(net, &o, init), DM_ERR_INVALID, "clip norm");
  o.clip_norm = 0;
  o.kind = DM_OPTIMIZER_ADAMW;
  o.multi_tensor = DM_SWITCH_ON;
  assert_status_msg(dm_optimizer_pass(net, &o, init), DM_ERR_UNSUPPORTED, "MultiAdamW");
  o.kind = DM_OPTIMIZER_SGD;
  o.multi_tensor = DM_SWITCH_AUTO;
  o.params = NULL; /* found again from here on */
  o.n_params = 0;
  assert_status_msg(dm_optimizer_kind_from_name("rmsprop", &o.kind), DM_ERR_INVALID, "'rmsprop'");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  /* A name the pass creates is taken. */
  net = parse("op { type: \"FC\" input: \"data\" input: \"fc_w\" input: \"fc_b\" output: \"lr\" }\n"
              "op { type: \"SoftmaxWithLoss\" input: \"lr\" input: \"label\" output: \"softmax\" "
              "output: \"loss\" }\n");
  const char *loss = "loss";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  assert_status_msg(dm_optimizer_pass(net, &o, init), DM_ERR_EXISTS, "'lr'");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&init->base, NULL);
}

/* Reads a whole stream into a malloc'd string. */
static char *slurp(FILE *f) {
  size_t cap = 4096, n = 0;
  char *s = malloc(cap);
  size_t got;
  while (s && (got = fread(s + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n < 2) {
      char *t = realloc(s, cap *= 2);
      if (!t)
        free(s);
      s = t;
    }
  }
  if (s)
    s[n] = 0;
  return s;
}

static void test_cli_rewrite(void **state) {
  (void)state;
  if (!cli_path)
    skip();
  char dir[] = "/tmp/dm_rewrite_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char in[256], init_out[256], cmd[1024];
  snprintf(in, sizeof in, "%s/train.pbtxt", dir);
  snprintf(init_out, sizeof init_out, "%s/init_add.pbtxt", dir);
  assert_ok(dm_write_file(in, forward_text, strlen(forward_text)));
  snprintf(cmd, sizeof cmd,
           "'%s' rewrite --grad --loss loss --optimizer momentum --lr 0.1 --momentum 0.9 "
           "--weight-decay 1e-4 --policy step --stepsize 10 --gamma 0.5 --data data "
           "--data label --init-out '%s' '%s'",
           cli_path, init_out, in);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  char *out = slurp(f);
  assert_int_equal(pclose(f), 0);
  assert_non_null(out);
  Caffe2__NetDef *net = parse(out);
  char *again = print(net);
  assert_string_equal(out, again);
  assert_non_null(strstr(out, "MomentumSGDUpdate"));
  assert_non_null(strstr(out, "fc_w_grad"));
  free(out);
  free(again);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  ProtobufCMessage *m = NULL;
  assert_ok(dm_message_read_file(init_out, &caffe2__net_def__descriptor, DM_FORMAT_TEXT, &m));
  assert_true(((Caffe2__NetDef *)m)->n_op == 5); /* iteration, one, wd, two momenta */
  protobuf_c_message_free_unpacked(m, NULL);
  /* --fp16 with loss scaling needs the update ops to skip: without --optimizer it is an
   * error (exit 1), with it the rewrite succeeds. */
  snprintf(cmd, sizeof cmd, "'%s' rewrite --grad --loss loss --fp16 '%s' >/dev/null 2>&1",
           cli_path, in);
  int rc = system(cmd);
  assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
  snprintf(cmd, sizeof cmd,
           "'%s' rewrite --grad --loss loss --optimizer sgd --fp16 '%s' >/dev/null 2>&1",
           cli_path, in);
  rc = system(cmd);
  assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  remove(in);
  remove(init_out);
  remove(dir);
}

int main(int argc, char **argv) {
  cli_path = argc > 1 ? argv[1] : NULL;
  if (dm_init() != DM_OK) /* the passes read the op schemas */
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_params), cmocka_unit_test(test_sgd_step),
      cmocka_unit_test(test_loss_decreases), cmocka_unit_test(test_adamw_clip_step),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_errors), cmocka_unit_test(test_cli_rewrite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
