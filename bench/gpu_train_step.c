/* gpu_train_step.c: training throughput on one GPU: images/s of full training steps
 * (forward, backward, momentum update; mixed precision with dynamic loss scaling for
 * fp16) of ResNet-50 or LeNet at one batch size.
 *
 * The training net is built exactly as bench/memory.c builds it (gradient pass on 'loss',
 * momentum optimizer pass, for fp16 the mixed-precision pass), then placed on CUDA:0 by
 * the device pass (net/device_pass.h) with 'data' and 'label' homed on the host, as
 * `demitasse train --device cuda` does; the init nets are placed with
 * dm_device_place_init. Synthetic data is fed once (the first copy of each step moves it
 * to the GPU). A CopyGPUToCPU of the loss ends each step: the copy returns only once the
 * host can read it, so a step's time includes all of its GPU work, as PyTorch's
 * loss.item() does in bench/gpu_resnet50_torch.py.
 *
 * usage: gpu_train_step resnet50|lenet BATCH fp32|fp16 [STEPS [WARMUP [MODELS_DIR]]]
 *   prints "model batch precision images_per_s ms_per_step steps"; exits 77, saying why,
 *   when there is no usable GPU (or the build has no CUDA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/api.h"
#include "core/device.h"
#include "net/device_pass.h"
#include "net/gradient.h"
#include "net/mixed_precision.h"
#include "net/netdef_build.h"
#include "net/optimizer_pass.h"

typedef struct model {
  const char *name;
  int64_t chw[3];
  int32_t classes;
  const char *init, *train; /* relative to the models folder */
} model;

static const model models[] = {
    {"lenet", {1, 28, 28}, 10, "mnist/lenet_init.pbtxt", "mnist/lenet_train.pbtxt"},
    {"resnet50", {3, 224, 224}, 1000, "resnet50/resnet50_init.pbtxt",
     "resnet50/resnet50_train.pbtxt"}};

static const char *const host_blobs[] = {"data", "label"};

/* As bench/memory.c: this benchmark feeds data and label itself. */
static void drop_db_input(Caffe2__NetDef *def) {
  size_t k = 0;
  for (size_t i = 0; i < def->n_op; i++) {
    if (def->op[i]->type && strcmp(def->op[i]->type, "TensorProtosDBInput") == 0)
      protobuf_c_message_free_unpacked(&def->op[i]->base, NULL);
    else
      def->op[k++] = def->op[i];
  }
  def->n_op = k;
}

/* The passes of bench/memory.c's build_net, then the device pass. The GPU state blobs
 * go to *sum for placing the init nets. */
static dm_status build_net(Caffe2__NetDef *def, int fp16, Caffe2__NetDef *init_add,
                           const dm_device_opts *dev, dm_device_summary *sum) {
  const char *loss = "loss";
  dm_optimizer_opts opt;
  dm_optimizer_opts_init(&opt);
  opt.kind = DM_OPTIM_MOMENTUM;
  opt.exclude = host_blobs;
  opt.n_exclude = 2;
  drop_db_input(def);
  DM_TRY(dm_add_gradient_ops(def, &loss, 1));
  DM_TRY(dm_add_optimizer_ops(def, NULL, 0, &opt, init_add));
  if (fp16) {
    dm_mp_opts mp;
    dm_mp_opts_init(&mp);
    mp.scaling = DM_LS_DYNAMIC;
    mp.exclude = host_blobs;
    mp.n_exclude = 2;
    dm_mp_summary ms = {0};
    dm_status s = dm_mixed_precision_pass(def, &mp, init_add, &ms);
    dm_mp_summary_free(&ms);
    DM_TRY(s);
  }
  DM_TRY(dm_device_pass(def, dev, sum));
  /* The loss back to the host ends each step (see the header comment). */
  Caffe2__OperatorDef *op = NULL;
  DM_TRY(dm_opdef_new("CopyGPUToCPU", &op));
  dm_status s = dm_opdef_add_input(op, "loss");
  if (s == DM_OK)
    s = dm_opdef_add_output(op, "loss_host");
  Caffe2__DeviceOption *d = malloc(sizeof *d);
  if (s == DM_OK && !d)
    s = DM_NOMEM("a device option");
  if (s != DM_OK) {
    free(d);
    protobuf_c_message_free_unpacked(&op->base, NULL);
    return s;
  }
  caffe2__device_option__init(d);
  d->has_device_type = 1;
  d->device_type = DM_CUDA;
  d->has_device_id = 1;
  d->device_id = dev->device_id;
  op->device_option = d;
  return dm_netdef_append_op(def, op);
}

static dm_status feed(dm_workspace *ws, const model *m, int64_t batch) {
  int64_t dims[4] = {batch, m->chw[0], m->chw[1], m->chw[2]};
  int64_t n = batch * m->chw[0] * m->chw[1] * m->chw[2];
  float *x = malloc((size_t)n * sizeof *x);
  int32_t *label = malloc((size_t)batch * sizeof *label);
  dm_status s = x && label ? DM_OK : DM_NOMEM("the input batch");
  for (int64_t i = 0; s == DM_OK && i < n; i++) /* small values: a finite loss */
    x[i] = 0.5f * (float)((i * 7919) % 1000) / 1000.0f;
  for (int64_t i = 0; s == DM_OK && i < batch; i++)
    label[i] = (int32_t)(i % m->classes);
  if (s == DM_OK)
    s = dm_workspace_feed(ws, "data", DM_FLOAT, 4, dims, x);
  if (s == DM_OK)
    s = dm_workspace_feed(ws, "label", DM_INT32, 1, &batch, label);
  free(x);
  free(label);
  return s;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Instantiates `def` in ws (which takes it) and runs it once. */
static dm_status run_once(dm_workspace *ws, Caffe2__NetDef *def, const char *name) {
  dm_net *net = NULL;
  DM_TRY(dm_workspace_create_net(ws, def, name, &net));
  return dm_net_run(net);
}

static dm_status bench(const model *m, const char *dir, int64_t batch, int fp16, int steps,
                       int warmup) {
  char path[4096];
  Caffe2__NetDef *init = NULL, *train = NULL, *init_add = NULL;
  dm_workspace *ws = NULL;
  dm_device_summary sum = {0};
  dm_device_opts dev;
  dm_device_opts_init(&dev);
  dev.host_blobs = host_blobs;
  dev.n_host_blobs = 2;
  snprintf(path, sizeof path, "%s/%s", dir, m->init);
  dm_status s = dm_netdef_read(path, &init);
  snprintf(path, sizeof path, "%s/%s", dir, m->train);
  if (s == DM_OK)
    s = dm_netdef_read(path, &train);
  if (s == DM_OK)
    s = dm_netdef_new("optimizer_init", &init_add);
  if (s == DM_OK)
    s = build_net(train, fp16, init_add, &dev, &sum);
  const char *const *state = (const char *const *)sum.gpu_state;
  if (s == DM_OK)
    s = dm_device_place_init(init, &dev, state, sum.n_gpu_state, NULL);
  if (s == DM_OK)
    s = dm_device_place_init(init_add, &dev, state, sum.n_gpu_state, NULL);
  if (s == DM_OK)
    s = dm_workspace_create(&ws);
  /* the workspace owns each net from here, whatever the status */
  if (s == DM_OK)
    s = run_once(ws, init, "init"), init = NULL;
  if (s == DM_OK)
    s = run_once(ws, init_add, "optimizer_init"), init_add = NULL;
  if (s == DM_OK)
    s = feed(ws, m, batch);
  dm_net *net = NULL;
  if (s == DM_OK)
    s = dm_workspace_create_net(ws, train, m->name, &net), train = NULL;
  for (int i = 0; s == DM_OK && i < warmup; i++)
    s = dm_net_run(net);
  double t0 = now();
  for (int i = 0; s == DM_OK && i < steps; i++)
    s = dm_net_run(net);
  double dt = now() - t0;
  if (s == DM_OK)
    printf("%s %lld %s %.1f %.2f %d\n", m->name, (long long)batch, fp16 ? "fp16" : "fp32",
           (double)batch * steps / dt, 1e3 * dt / steps, steps);
  dm_workspace_destroy(ws);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  if (train)
    protobuf_c_message_free_unpacked(&train->base, NULL);
  if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  dm_device_summary_free(&sum);
  return s;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: gpu_train_step resnet50|lenet BATCH fp32|fp16 "
                    "[STEPS [WARMUP [MODELS_DIR]]]\n");
    return 2;
  }
  const model *m = NULL;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    if (!strcmp(argv[1], models[i].name))
      m = &models[i];
  int64_t batch = atoll(argv[2]);
  int fp16 = !strcmp(argv[3], "fp16");
  int steps = argc > 4 ? atoi(argv[4]) : 20, warmup = argc > 5 ? atoi(argv[5]) : 5;
  const char *dir = argc > 6 ? argv[6] : "models";
  if (!m || batch < 1 || steps < 1 || warmup < 0 || (!fp16 && strcmp(argv[3], "fp32"))) {
    fprintf(stderr, "gpu_train_step: bad arguments\n");
    return 2;
  }
  if (dm_init() != DM_OK || dm_device_check(DM_CUDA, 0) != DM_OK) {
    printf("SKIP: %s\n", dm_last_error());
    return 77;
  }
  if (bench(m, dir, batch, fp16, steps, warmup) != DM_OK) {
    fprintf(stderr, "gpu_train_step: %s\n", dm_last_error());
    return 1;
  }
  return 0;
}
