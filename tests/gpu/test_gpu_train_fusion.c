/* test_gpu_train_fusion.c: the training fusion on the GPU: a small NHWC ResNet-style net
 * (Conv + BN + Relu, a BN + Sum + Relu identity join, a BN + Add + Relu join, FC, softmax
 * loss; 8 channels, the multiple cuDNN's NHWC batch-norm kernels want) trained STEPS
 * steps with momentum SGD in FP16 mixed precision on CUDA:0, through the pipeline with
 * and without fuse_train. FP16 NHWC in training is where cuDNN runs the fused batch
 * norm (gpu/batchnorm_cudnn.c), so this exercises its fused forward and backward, the reserve
 * carried between them; the test reports whether cuDNN took the fused path (a non-empty
 * reserve) or the fallback.
 *
 * Bound (derived): the fused kernels skip FP16 roundings the unfused sequence makes (the
 * BN output, and the sum, before the Relu: relative 2^-11 each) and cuDNN's fused
 * kernels may sum in another order; with 3 fused ops of 2 roundings each the first loss
 * may move by about 6 * 2^-11 = 3e-3 relative, and the updates carry the differences on,
 * so each step's loss must agree within 1e-2 relative (and both runs must train).
 *
 * Exits 77 without a usable GPU. With DM_GPU_TEST_SELF=1 the same nets run on the CPU's
 * reference kernels (no device pass), where the fused ops compute the unfused bits: the
 * losses must then be identical, which checks the test itself everywhere.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "net/api.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"
#include "netdef_test_util.h"
#include "test_util.h"

enum { NB = 4, HW = 6, CH = 8, CLS = 5, STEPS = 5 };

#define NHWC "arg { name: 'order' s: 'NHWC' } "
#define BN_OP(i, x)                                                                        \
  "op { type: 'SpatialBN' input: '" x "' input: 's" i "' input: 'o" i "' input: 'rm" i "' " \
  "input: 'rv" i "' output: 't" i "' output: 'rm" i "' output: 'rv" i "' output: 'sm" i "' " \
  "output: 'si" i "' arg { name: 'is_test' i: 0 } " NHWC "}\n"

static const char *const block_net =
    "op { type: 'Conv' input: 'data' input: 'w1' input: 'b1' output: 'c1' "
    "arg { name: 'kernel' i: 3 } arg { name: 'pad' i: 1 } " NHWC "}\n" BN_OP("1", "c1")
    "op { type: 'Relu' input: 't1' output: 't1' }\n"
    "op { type: 'Conv' input: 't1' input: 'w2' output: 'c2' arg { name: 'kernel' i: 1 } " NHWC
    "}\n" BN_OP("2", "c2")
    "op { type: 'Sum' input: 't2' input: 't1' output: 'u2' }\n"
    "op { type: 'Relu' input: 'u2' output: 'u2' }\n"
    "op { type: 'Conv' input: 'u2' input: 'w3' output: 'c3' arg { name: 'kernel' i: 3 } "
    "arg { name: 'pad' i: 1 } " NHWC "}\n" BN_OP("3", "c3")
    "op { type: 'Add' input: 'u2' input: 't3' output: 'u3' }\n"
    "op { type: 'Relu' input: 'u3' output: 'u3' }\n"
    "op { type: 'FC' input: 'u3' input: 'fw' input: 'fb' output: 'pred' }\n"
    "op { type: 'SoftmaxWithLoss' input: 'pred' input: 'label' output: 'softmax' "
    "output: 'loss' }\n"
    "external_input: 'data'\nexternal_input: 'label'\nexternal_output: 'loss'\n";

static double next_u(uint64_t *rng) {
  *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*rng >> 11) * 0x1p-53;
}

/* Appends a GivenTensorFill of `name` (shape dims) with values from u(lo, hi). */
static void add_fill(char **text, size_t *len, const char *name, int ndim, const int64_t *dims,
                     uint64_t *rng, double lo, double hi) {
  int64_t n = 1;
  dm_text_appendf(text, len, "op { type: 'GivenTensorFill' output: '%s' arg { name: 'shape'",
                  name);
  for (int i = 0; i < ndim; i++) {
    dm_text_appendf(text, len, " ints: %lld", (long long)dims[i]);
    n *= dims[i];
  }
  dm_text_appendf(text, len, " } arg { name: 'values'");
  for (int64_t i = 0; i < n; i++)
    dm_text_appendf(text, len, " floats: %.9g", lo + (hi - lo) * next_u(rng));
  dm_text_appendf(text, len, " } }\n");
}

static char *init_text(void) {
  char *t = NULL;
  size_t len = 0;
  uint64_t rng = 4242;
  const int64_t w1[] = {CH, 3, 3, CH}, w2[] = {CH, 1, 1, CH}, w3[] = {CH, 3, 3, CH}, c[] = {CH},
                fw[] = {CLS, HW * HW * CH}, fb[] = {CLS};
  add_fill(&t, &len, "w1", 4, w1, &rng, -0.2, 0.2);
  add_fill(&t, &len, "b1", 1, c, &rng, -0.1, 0.1);
  add_fill(&t, &len, "w2", 4, w2, &rng, -0.3, 0.3);
  add_fill(&t, &len, "w3", 4, w3, &rng, -0.15, 0.15);
  add_fill(&t, &len, "fw", 2, fw, &rng, -0.05, 0.05);
  add_fill(&t, &len, "fb", 1, fb, &rng, -0.1, 0.1);
  for (int k = 1; k <= 3; k++) {
    char n[8];
    snprintf(n, sizeof n, "s%d", k), add_fill(&t, &len, n, 1, c, &rng, 0.8, 1.2);
    snprintf(n, sizeof n, "o%d", k), add_fill(&t, &len, n, 1, c, &rng, -0.1, 0.1);
    snprintf(n, sizeof n, "rm%d", k), add_fill(&t, &len, n, 1, c, &rng, -0.1, 0.1);
    snprintf(n, sizeof n, "rv%d", k), add_fill(&t, &len, n, 1, c, &rng, 0.9, 1.1);
  }
  return t;
}

static void feed_batch(dm_workspace *ws) {
  static float x[NB * HW * HW * CH];
  uint64_t rng = 99;
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
    x[i] = (float)(2 * next_u(&rng) - 1);
  int32_t label[NB];
  for (int i = 0; i < NB; i++)
    label[i] = (i * 3) % CLS;
  const int64_t xd[] = {NB, HW, HW, CH}, ld[] = {NB};
  assert_ok(dm_workspace_feed(ws, "data", DM_FLOAT, 4, xd, x));
  assert_ok(dm_workspace_feed(ws, "label", DM_INT32, 1, ld, label));
}

/* A blob's first element as a double, through a host copy when it lives on a device;
 * *numel its element count. */
static double read_first(dm_workspace *ws, const char *name, int64_t *numel) {
  const dm_tensor *t = dm_workspace_tensor(ws, name);
  assert_non_null(t);
  *numel = dm_tensor_numel(t);
  if (*numel == 0 || dm_tensor_dtype(t) != DM_FLOAT)
    return 0;
  dm_tensor *host = NULL;
  int id = 0;
  if (dm_tensor_device(t, &id) != DM_CPU) {
    assert_non_null(host = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT));
    assert_ok(dm_tensor_copy_to(host, DM_CPU, 0, t));
    t = host;
  }
  double v = *(const float *)dm_tensor_data(t);
  dm_tensor_free(host);
  return v;
}

/* Trains STEPS steps; losses[] gets each step's loss; returns the reserve's bytes after
 * the last (fused runs; 0 otherwise). */
static int64_t train(int fuse_train, int device, double *losses) {
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  if (!device)
    assert_ok(dm_workspace_set_engine(ws, "REFERENCE"));
  char *it = init_text();
  Caffe2__NetDef *init = parse(it), *def = parse(block_net), *add = NULL;
  free(it);
  const char *loss = "loss";
  static const char *const data_blobs[] = {"data", "label"};
  dm_pipeline_opts p;
  dm_pipeline_opts_init_training(&p, &loss, 1, data_blobs, 2);
  p.optim.kind = DM_OPTIMIZER_MOMENTUM;
  p.fuse_train = fuse_train;
  p.mixed_precision = 1;
  p.mp.scaling = DM_LOSS_SCALE_DYNAMIC;
  p.device = device;
  p.inits = &init;
  p.n_inits = 1;
  dm_pipeline_result r;
  assert_ok(dm_pipeline_run(def, &p, &add, &r));
  if (fuse_train)
    assert_int_equal(r.train_fusion.bn_relu + r.train_fusion.bn_add_relu, 3);
  dm_pipeline_result_free(&r);
  dm_net *net = NULL;
  assert_ok(dm_workspace_create_net(ws, init, "init", &net)); /* the workspace owns the nets */
  assert_ok(dm_net_run(net));
  assert_ok(dm_workspace_create_net(ws, add, "init_add", &net));
  assert_ok(dm_net_run(net));
  feed_batch(ws);
  assert_ok(dm_workspace_create_net(ws, def, "train", &net));
  for (int s = 0; s < STEPS; s++) {
    assert_ok(dm_net_run(net));
    int64_t n;
    losses[s] = read_first(ws, "loss", &n);
  }
  int64_t reserve = 0;
  if (fuse_train)
    read_first(ws, "t1_reserve", &reserve);
  dm_workspace_destroy(ws);
  return reserve;
}

static void test_train(void **state) {
  int self = *(int *)*state;
  double plain[STEPS], fused[STEPS];
  train(0, !self, plain);
  int64_t reserve = train(1, !self, fused);
  if (self)
    printf("# CPU: the reference kernels (fused and unfused compute the same bits)\n");
  else
    printf("# CUDA: fused batch norm %s (reserve %lld bytes)\n",
           reserve ? "taken by cuDNN" : "not taken: the unfused kernels ran", (long long)reserve);
  for (int s = 0; s < STEPS; s++) {
    double tol = self ? 0 : 1e-2 * fabs(plain[s]);
    printf("# step %d: loss %.6f unfused, %.6f fused\n", s + 1, plain[s], fused[s]);
    if (!(fabs(plain[s] - fused[s]) <= tol))
      fail_msg("step %d: loss %.9g fused, %.9g unfused, tolerance %.3g", s + 1, fused[s],
               plain[s], tol);
  }
  assert_true(plain[STEPS - 1] < plain[0] && fused[STEPS - 1] < fused[0]);
}

int main(void) {
  const char *env = getenv("DM_GPU_TEST_SELF");
  static int self;
  self = env && !strcmp(env, "1");
  if (dm_init() != DM_OK) {
    printf("dm_init: %s\n", dm_last_error());
    return 1;
  }
  if (!self && dm_device_check(DM_CUDA, 0) != DM_OK) {
    printf("SKIP: %s\n", dm_last_error());
    return 77;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test_prestate(test_train, &self)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
