/* gpu_train_step.c: training throughput on one GPU: images/s of full training steps
 * (forward, backward, momentum update; mixed precision with dynamic loss scaling for
 * fp16) of ResNet-50 or LeNet at one batch size.
 *
 * The training net is built exactly as bench/memory.c builds it (bench/train_net.c:
 * gradient pass on 'loss', momentum optimizer pass, for fp16 the mixed-precision pass),
 * then placed on CUDA:0 by the device pass (net/passes/device_pass.h) with 'data' and 'label'
 * homed on the host, as `demitasse train --device cuda` does; the init nets are placed
 * with dm_device_place_init. Synthetic data is fed once (the first copy of each step moves it
 * to the GPU). A CopyGPUToCPU of the loss ends each step: the copy returns only once the
 * host can read it, so a step's time includes all of its GPU work, as PyTorch's
 * loss.item() does in bench/gpu_resnet50_torch.py.
 *
 * resnet50_layout is the NCHW-written resnet50 made NHWC by the layout pass
 * (net/passes/layout_pass.h) after the mixed-precision pass, as `demitasse train --device cuda
 * --fp16` does by default: the weights' re-layouts run first in the init addition, and
 * conv1's 3 input channels are zero-padded to DM_BENCH_PAD (default 8; 0: off).
 *
 * usage: gpu_train_step resnet50|resnet50_nhwc|resnet50_layout|lenet BATCH fp32|fp16
 *                       [STEPS [WARMUP [MODELS_DIR]]]
 *   (DM_BENCH_EXHAUSTIVE=1 sets exhaustive_search on every Conv and ConvGradient;
 *   DM_BENCH_PROFILE=1 prints a per-op-type profile of further steps as '#' lines;
 *   DM_BENCH_NO_GRAPH=1 turns the CUDA graph off. Before the result line, two '#' lines:
 *   the device graph (what is replayed, or why nothing is) and, per timed step, the ops
 *   launched one by one, the graph launches and the host syncs)
 *   prints "model batch precision images_per_s ms_per_step steps"; exits 77, saying why,
 *   when there is no usable GPU (or the build has no CUDA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/api.h"
#include "core/device.h"
#include "net/passes/device_pass.h"
#include "net/passes/layout_pass.h"
#include "net/net.h"
#include "net/netdef_build.h"
#include "train_net.h"

/* Places the training net on the GPU, as `demitasse train --device cuda` does: the device
 * pass, then the copy of the loss to the host that ends each step. The GPU state blobs go
 * to *sum for placing the init nets. */
static dm_status place_net(Caffe2__NetDef *def, const dm_device_opts *dev,
                           dm_device_summary *sum) {
  DM_TRY(dm_device_pass(def, dev, sum));
  /* DM_BENCH_EXHAUSTIVE=1: Caffe2's exhaustive_search on every convolution, so cuDNN
   * benchmarks its algorithms once per shape (as PyTorch's cudnn.benchmark) instead of
   * taking its heuristics' choice. */
  const char *ex = getenv("DM_BENCH_EXHAUSTIVE");
  for (size_t i = 0; ex && *ex == '1' && i < def->n_op; i++)
    if (strcmp(def->op[i]->type, "Conv") == 0 || strcmp(def->op[i]->type, "ConvGradient") == 0)
      DM_TRY(dm_opdef_set_arg_int(def->op[i], "exhaustive_search", 1));
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

/* Instantiates `def` in ws (which takes it) and runs it once. */
static dm_status run_once(dm_workspace *ws, Caffe2__NetDef *def, const char *name) {
  dm_net *net = NULL;
  DM_TRY(dm_workspace_create_net(ws, def, name, &net));
  return dm_net_run(net);
}

/* The layout pass on the training net, as the pipeline runs it (net/passes/pipeline.c): data and
 * label fed, the re-layouts at the front of the init addition; its summary on stderr. */
static dm_status make_nhwc(const bench_model *m, Caffe2__NetDef *train,
                           Caffe2__NetDef *init_add) {
  const char *pad = getenv("DM_BENCH_PAD");
  dm_layout_opts o = {.fed = m->fed, .n_fed = BENCH_N_FED_BLOBS,
                      .pad_channels = pad ? atoi(pad) : 8};
  dm_layout_summary sum = {0};
  dm_status s = dm_layout_pass(train, &o, init_add, &sum);
  if (s == DM_OK)
    fprintf(stderr, "layout pass: %zu of %zu ops NHWC, %zu transposes, %zu weights re-laid, "
                    "%zu input(s) channel-padded to %d\n", sum.ops_order, sum.ops_total,
            sum.transposes, sum.n_renamed, sum.padded, o.pad_channels);
  dm_layout_summary_free(&sum);
  return s;
}

static dm_status bench(const bench_model *m, const char *name, int layout, const char *dir,
                       int64_t batch, int fp16, int steps, int warmup) {
  char path[4096];
  Caffe2__NetDef *init = NULL, *train = NULL, *init_add = NULL;
  dm_workspace *ws = NULL;
  dm_device_summary sum = {0};
  dm_device_opts dev;
  dm_device_opts_init(&dev);
  dev.host_blobs = m->fed;
  dev.n_host_blobs = BENCH_N_FED_BLOBS;
  snprintf(path, sizeof path, "%s/%s", dir, m->init);
  dm_status s = dm_netdef_read(path, &init);
  if (s == DM_OK)
    s = dm_netdef_new("optimizer_init", &init_add);
  if (s == DM_OK)
    s = bench_build_train_net(m, dir, fp16 ? DM_FLOAT16 : 0, 1, NULL, &train, init_add);
  if (s == DM_OK && layout)
    s = make_nhwc(m, train, init_add);
  if (s == DM_OK)
    s = place_net(train, &dev, &sum);
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
    s = bench_feed_batch(ws, m, batch);
  dm_net *net = NULL;
  if (s == DM_OK)
    s = dm_workspace_create_net(ws, train, m->name, &net), train = NULL;
  /* DM_BENCH_NO_GRAPH=1: no CUDA graph, every op launched one by one */
  const char *no_graph = getenv("DM_BENCH_NO_GRAPH");
  if (s == DM_OK && no_graph && *no_graph == '1')
    s = dm_net_set_device_graphs(net, 0);
  for (int i = 0; s == DM_OK && i < warmup; i++)
    s = dm_net_run(net);
  dm_run_counts c0 = {0}, c1 = {0};
  if (s == DM_OK)
    dm_net_run_counts(net, &c0);
  double t0 = bench_now();
  for (int i = 0; s == DM_OK && i < steps; i++)
    s = dm_net_run(net);
  double dt = bench_now() - t0;
  if (s == DM_OK) { /* what a timed step cost the host: launches and waits */
    char line[512];
    dm_net_run_counts(net, &c1);
    dm_net_graph_status(net, line, sizeof line);
    double n = steps > 0 ? steps : 1;
    printf("# %s\n# per step: %.1f ops launched one by one, %.2f graph launches (%.0f device "
           "operations each), %.2f host syncs\n",
           line, (double)(c1.device_ops - c0.device_ops) / n,
           (double)(c1.graph_launches - c0.graph_launches) / n,
           c1.graph_launches > c0.graph_launches
               ? (double)(c1.graph_nodes - c0.graph_nodes) /
                     (double)(c1.graph_launches - c0.graph_launches)
               : 0.0,
           (double)(c1.host_syncs - c0.host_syncs) / n);
  }
  /* DM_BENCH_PROFILE=1: then as many profiled steps, each op waited for, by op type
   * (after the timed steps, so the figure above is not slowed by it) */
  const char *prof = getenv("DM_BENCH_PROFILE");
  if (s == DM_OK && prof && *prof == '1') {
    s = dm_net_set_profile(net, 1);
    for (int i = 0; s == DM_OK && i < steps; i++)
      s = dm_net_run(net);
    if (s == DM_OK)
      dm_net_print_profile(net, stdout);
  }
  if (s == DM_OK)
    printf("%s %lld %s %.1f %.2f %d\n", name, (long long)batch, fp16 ? "fp16" : "fp32",
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
    fprintf(stderr, "usage: gpu_train_step resnet50|resnet50_nhwc|resnet50_layout|lenet BATCH "
                    "fp32|fp16 [STEPS [WARMUP [MODELS_DIR]]]\n");
    return 2;
  }
  int layout = !strcmp(argv[1], "resnet50_layout");
  const bench_model *m = bench_model_find(layout ? "resnet50" : argv[1]);
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
  if (bench(m, argv[1], layout, dir, batch, fp16, steps, warmup) != DM_OK) {
    fprintf(stderr, "gpu_train_step: %s\n", dm_last_error());
    return 1;
  }
  return 0;
}
