/* bench_step.c: times one training step (forward + backward) of LeNet or a ResNet-50
 * bottleneck block on the CPU, in FP32, FP16 or BF16 (16-bit activations and weights,
 * FP32 accumulation, the loss in FP32; FP16 runs on the reference kernels, BF16 and FP32
 * on the default engine, oneDNN where built). ENGINE, when given, goes to
 * dm_workspace_set_engine (REFERENCE: the reference kernels for all). Prints one line
 * "model precision batch ms_per_step". bench/run.sh runs it beside the same models in
 * PyTorch and prints the ratios.
 *
 * usage: bench_step lenet|bottleneck fp32|fp16|bf16 BATCH ITERS [ENGINE]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/api.h"
#include "net/passes/gradient_pass.h"
#include "net/net.h"

/* The nets: "%s" takes the FP16 variant's HalfToFloat before the loss, then its input. */
static const char *lenet_init =
    "op { output: 'conv1_w' type: 'XavierFill' arg { name: 'shape' ints: [20, 1, 5, 5] } }\n"
    "op { output: 'conv1_b' type: 'ConstantFill' arg { name: 'shape' ints: 20 } }\n"
    "op { output: 'conv2_w' type: 'XavierFill' arg { name: 'shape' ints: [50, 20, 5, 5] } }\n"
    "op { output: 'conv2_b' type: 'ConstantFill' arg { name: 'shape' ints: 50 } }\n"
    "op { output: 'fc3_w' type: 'XavierFill' arg { name: 'shape' ints: [500, 800] } }\n"
    "op { output: 'fc3_b' type: 'ConstantFill' arg { name: 'shape' ints: 500 } }\n"
    "op { output: 'pred_w' type: 'XavierFill' arg { name: 'shape' ints: [10, 500] } }\n"
    "op { output: 'pred_b' type: 'ConstantFill' arg { name: 'shape' ints: 10 } }\n";
static const char *lenet_params[] = {"conv1_w", "conv1_b", "conv2_w", "conv2_b",
                                     "fc3_w",   "fc3_b",   "pred_w",  "pred_b", NULL};
static const char *lenet_net =
    "op { input: 'data' input: 'conv1_w' input: 'conv1_b' output: 'conv1' type: 'Conv' "
    "     arg { name: 'kernel' i: 5 } }\n"
    "op { input: 'conv1' output: 'pool1' type: 'MaxPool' arg { name: 'kernel' i: 2 } "
    "     arg { name: 'stride' i: 2 } }\n"
    "op { input: 'pool1' input: 'conv2_w' input: 'conv2_b' output: 'conv2' type: 'Conv' "
    "     arg { name: 'kernel' i: 5 } }\n"
    "op { input: 'conv2' output: 'pool2' type: 'MaxPool' arg { name: 'kernel' i: 2 } "
    "     arg { name: 'stride' i: 2 } }\n"
    "op { input: 'pool2' input: 'fc3_w' input: 'fc3_b' output: 'fc3' type: 'FC' }\n"
    "op { input: 'fc3' output: 'fc3' type: 'Relu' }\n"
    "op { input: 'fc3' input: 'pred_w' input: 'pred_b' output: 'pred' type: 'FC' }\n"
    "%s"
    "op { input: '%s' input: 'label' output: 'softmax' output: 'loss' "
    "     type: 'SoftmaxWithLoss' }\n";

static const char *bneck_init =
    "op { output: 'w1' type: 'MSRAFill' arg { name: 'shape' ints: [64, 256, 1, 1] } }\n"
    "op { output: 'w2' type: 'MSRAFill' arg { name: 'shape' ints: [64, 64, 3, 3] } }\n"
    "op { output: 'w3' type: 'MSRAFill' arg { name: 'shape' ints: [256, 64, 1, 1] } }\n"
    "op { output: 's1' type: 'ConstantFill' arg { name: 'shape' ints: 64 } arg { name: 'value' f: 1 } }\n"
    "op { output: 'b1' type: 'ConstantFill' arg { name: 'shape' ints: 64 } }\n"
    "op { output: 's2' type: 'ConstantFill' arg { name: 'shape' ints: 64 } arg { name: 'value' f: 1 } }\n"
    "op { output: 'b2' type: 'ConstantFill' arg { name: 'shape' ints: 64 } }\n"
    "op { output: 's3' type: 'ConstantFill' arg { name: 'shape' ints: 256 } arg { name: 'value' f: 1 } }\n"
    "op { output: 'b3' type: 'ConstantFill' arg { name: 'shape' ints: 256 } }\n"
    "op { output: 'rm1' type: 'ConstantFill' arg { name: 'shape' ints: 64 } }\n"
    "op { output: 'rv1' type: 'ConstantFill' arg { name: 'shape' ints: 64 } arg { name: 'value' f: 1 } }\n"
    "op { output: 'rm2' type: 'ConstantFill' arg { name: 'shape' ints: 64 } }\n"
    "op { output: 'rv2' type: 'ConstantFill' arg { name: 'shape' ints: 64 } arg { name: 'value' f: 1 } }\n"
    "op { output: 'rm3' type: 'ConstantFill' arg { name: 'shape' ints: 256 } }\n"
    "op { output: 'rv3' type: 'ConstantFill' arg { name: 'shape' ints: 256 } arg { name: 'value' f: 1 } }\n";
/* Only the conv weights change dtype in FP16; BN parameters stay FP32. */
static const char *bneck_params[] = {"w1", "w2", "w3", NULL};
#define BN(i, x, y)                                                                        \
  "op { input: '" x "' input: 's" #i "' input: 'b" #i "' input: 'rm" #i "' input: 'rv" #i \
  "' output: '" y "' output: 'rm" #i "' output: 'rv" #i "' output: 'sm" #i                \
  "' output: 'siv" #i "' type: 'SpatialBN' }\n"
static const char *bneck_net =
    "op { input: 'data' input: 'w1' output: 'c1' type: 'Conv' arg { name: 'kernel' i: 1 } }\n"
    BN(1, "c1", "n1")
    "op { input: 'n1' output: 'n1' type: 'Relu' }\n"
    "op { input: 'n1' input: 'w2' output: 'c2' type: 'Conv' arg { name: 'kernel' i: 3 }"
    "     arg { name: 'pad' i: 1 } }\n"
    BN(2, "c2", "n2")
    "op { input: 'n2' output: 'n2' type: 'Relu' }\n"
    "op { input: 'n2' input: 'w3' output: 'c3' type: 'Conv' arg { name: 'kernel' i: 1 } }\n"
    BN(3, "c3", "n3")
    "op { input: 'n3' input: 'data' output: 'sum' type: 'Sum' }\n"
    "op { input: 'sum' output: 'out' type: 'Relu' }\n"
    "%s"
    "op { input: '%s' output: 'loss' type: 'AveragedLoss' }\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int check(dm_status s) {
  if (s != DM_OK)
    fprintf(stderr, "bench_step: %s\n", dm_last_error());
  return s != DM_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: bench_step lenet|bottleneck fp32|fp16|bf16 BATCH ITERS [ENGINE]\n");
    return 2;
  }
  int lenet = strcmp(argv[1], "lenet") == 0;
  /* 16-bit: the compute dtype's number for Cast's `to` (FLOAT16 12, BFLOAT16 20). */
  int half = strcmp(argv[2], "fp16") == 0 ? DM_FLOAT16 : strcmp(argv[2], "bf16") == 0 ? DM_BFLOAT16 : 0;
  const int fp16 = half != 0;
  long batch = atol(argv[3]), iters = atol(argv[4]);
  if (batch <= 0 || iters <= 0 || (!lenet && strcmp(argv[1], "bottleneck") != 0) ||
      (!fp16 && strcmp(argv[2], "fp32") != 0))
    return 2;
  dm_workspace *ws = NULL;
  if (check(dm_workspace_create(&ws)) ||
      check(dm_workspace_set_engine(ws, argc == 6 ? argv[5] : NULL)))
    return 1;
  /* Init net, then in FP16 cast the parameters the compute uses. */
  char init[8192];
  size_t used = (size_t)snprintf(init, sizeof init, "%s", lenet ? lenet_init : bneck_init);
  const char **params = lenet ? lenet_params : bneck_params;
  /* A cast cannot run in place (the dtype changes): cast, then copy back. */
  for (const char **p = params; fp16 && *p; p++)
    used += (size_t)snprintf(init + used, sizeof init - used,
                             "op { input: '%s' output: '%s_h' type: 'Cast' arg { name: 'to' i: %d } }\n"
                             "op { input: '%s_h' output: '%s' type: 'Copy' }\n",
                             *p, *p, half, *p, *p);
  dm_net *init_net = NULL;
  if (check(dm_workspace_create_net_bytes(ws, init, strlen(init), 1, &init_net)) ||
      check(dm_net_run(init_net)))
    return 1;
  /* Input data (and labels for LeNet). */
  int64_t dims[4] = {batch, lenet ? 1 : 256, lenet ? 28 : 56, lenet ? 28 : 56};
  int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; i++)
    x[i] = (float)sin(0.01 * (double)i);
  if (check(dm_workspace_feed(ws, "data", DM_FLOAT, 4, dims, x)))
    return 1;
  free(x);
  if (lenet) {
    int32_t *label = malloc((size_t)batch * sizeof *label);
    for (long i = 0; i < batch; i++)
      label[i] = (int32_t)(i % 10);
    int64_t ld = batch;
    if (check(dm_workspace_feed(ws, "label", DM_INT32, 1, &ld, label)))
      return 1;
    free(label);
  }
  /* The step: (FloatToHalf data), forward, loss in FP32, gradient ops. */
  char text[8192], pre[256] = "", cast[256] = "";
  if (fp16) {
    snprintf(pre, sizeof pre,
             "op { input: 'data' output: 'data_h' type: 'Cast' arg { name: 'to' i: %d } }\n"
             "op { input: 'data_h' output: 'data' type: 'Copy' }\n",
             half);
    snprintf(cast, sizeof cast,
             "op { input: '%s' output: '%s_fp32' type: 'Cast' arg { name: 'to' i: 1 } }\n",
             lenet ? "pred" : "out", lenet ? "pred" : "out");
  }
  const char *last = fp16 ? (lenet ? "pred_fp32" : "out_fp32") : (lenet ? "pred" : "out");
  snprintf(text, sizeof text, lenet ? lenet_net : bneck_net, cast, last);
  ProtobufCMessage *m = NULL;
  if (check(dm_text_parse(text, strlen(text), "bench", &caffe2__net_def__descriptor, &m)))
    return 1;
  Caffe2__NetDef *def = (Caffe2__NetDef *)m;
  const char *loss = "loss";
  if (check(dm_gradient_pass(def, &(dm_gradient_opts){&loss, 1})))
    return 1;
  dm_net *pre_net = NULL, *step = NULL;
  if (fp16 && (check(dm_workspace_create_net_bytes(ws, pre, strlen(pre), 1, &pre_net)) ||
               check(dm_net_run(pre_net))))
    return 1;
  if (check(dm_workspace_create_net(ws, def, "bench", &step)))
    return 1;
  for (int i = 0; i < 3; i++) /* warm-up: first-touch allocations, caches */
    if (check(dm_net_run(step)))
      return 1;
  /* DM_BENCH_PROFILE=1: the time of each op type (and its engine) over the timed steps. */
  const char *prof = getenv("DM_BENCH_PROFILE");
  if (prof && *prof == '1' && check(dm_net_set_profile(step, 1)))
    return 1;
  double *t = malloc((size_t)iters * sizeof *t);
  for (long i = 0; i < iters; i++) {
    double t0 = now();
    if (check(dm_net_run(step)))
      return 1;
    t[i] = now() - t0;
  }
  qsort(t, (size_t)iters, sizeof *t, cmp_double);
  printf("%s %s %ld %.3f\n", argv[1], argv[2], batch, 1e3 * t[iters / 2]);
  if (prof && *prof == '1')
    dm_net_print_profile(step, stdout);
  free(t);
  dm_workspace_destroy(ws);
  return 0;
}
