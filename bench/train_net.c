/* train_net.c: the training benchmarks' shared models, training net and input batch
 * (see train_net.h). */
#include "train_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/netdef_build.h"
#include "net/passes/pipeline.h"

#define IMAGE_FED {"data", "label"}, 0

static const bench_model models[] = {
    {"lenet", {1, 28, 28}, 10, "mnist/lenet_init.pbtxt", "mnist/lenet_train.pbtxt", IMAGE_FED},
    {"resnet50", {3, 224, 224}, 1000, "resnet50/resnet50_init.pbtxt",
     "resnet50/resnet50_train.pbtxt", IMAGE_FED},
    /* the same model in NHWC: chw holds the image's dims as fed, (H, W, C) */
    {"resnet50_nhwc", {224, 224, 3}, 1000, "resnet50/resnet50_nhwc_init.pbtxt",
     "resnet50/resnet50_nhwc_train.pbtxt", IMAGE_FED},
    /* models/gpt's checked-in nets: context 128, V = 107 (models/gpt/README.md) */
    {"gpt", {128, 0, 0}, 107, "gpt/gpt_init.pbtxt", "gpt/gpt_train.pbtxt",
     {"tokens", "targets"}, 1}};

const bench_model *bench_model_find(const char *name) {
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    if (strcmp(name, models[i].name) == 0)
      return &models[i];
  return NULL;
}

/* Removes the net's data-input ops (TensorProtosDBInput): the benchmarks feed its
 * outputs themselves. */
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

dm_status bench_build_train_net(const bench_model *m, const char *dir, dm_dtype half,
                                int for_gpu, const char *fp16_ops, Caffe2__NetDef **out,
                                Caffe2__NetDef *init_add) {
  Caffe2__NetDef *def = NULL;
  char path[4096];
  enum { MAX_FORCED = 32 };
  const char *forced[MAX_FORCED];
  size_t n_forced = 0;
  char *types = fp16_ops ? strdup(fp16_ops) : NULL; /* `forced` points into it */
  if (fp16_ops && !types)
    return DM_NOMEM("the --fp16-ops list");
  for (char *save = NULL, *t = types ? strtok_r(types, ",", &save) : NULL; t;
       t = strtok_r(NULL, ",", &save))
    if (n_forced < MAX_FORCED)
      forced[n_forced++] = t;
  snprintf(path, sizeof path, "%s/%s", dir, m->train);
  dm_status rs = dm_netdef_read(path, &def);
  if (rs != DM_OK) {
    free(types);
    return rs;
  }
  drop_db_input(def);
  /* the pipeline as `train` runs it, without device and memory stages (the benchmarks
   * place and plan for themselves); its init addition is moved into the caller's */
  const char *loss = "loss";
  dm_pipeline_opts p;
  dm_pipeline_opts_init_training(&p, &loss, 1, m->fed, BENCH_N_FED_BLOBS);
  p.optim.kind = DM_OPTIMIZER_MOMENTUM;
  /* the pipeline's AUTO would see no device stage here */
  p.optim.multi_tensor = for_gpu ? DM_SWITCH_ON : DM_SWITCH_AUTO;
  p.mixed_precision = half != 0;
  p.mp.target = half ? half : DM_FLOAT16;
  /* BF16 has FP32's exponent range: no loss scaling (as `train --bf16`) */
  p.mp.scaling = half == DM_BFLOAT16 ? DM_LOSS_SCALE_NONE : DM_LOSS_SCALE_DYNAMIC;
  p.mp.force_fp16 = forced;
  p.mp.n_force_fp16 = n_forced;
  Caffe2__NetDef *add = NULL;
  dm_status s = dm_pipeline_run(def, &p, &add, NULL);
  free(types);
  size_t moved = 0;
  while (s == DM_OK && add && moved < add->n_op)
    s = dm_netdef_append_op(init_add, add->op[moved++]); /* takes the op, even on failure */
  if (add) {
    for (size_t i = moved; i < add->n_op; i++) /* the ops not moved stay to be freed */
      add->op[i - moved] = add->op[i];
    add->n_op -= moved;
    protobuf_c_message_free_unpacked(&add->base, NULL);
  }
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return s;
  }
  *out = def;
  return DM_OK;
}

/* A language model's batch: a token stream of a fixed pseudo-random walk over [0, V),
 * cut into `batch` windows of T, targets shifted by one. */
static dm_status feed_tokens(dm_workspace *ws, const bench_model *m, int64_t batch) {
  int64_t t = m->chw[0], dims[2] = {batch, t}, n = batch * t;
  int32_t *tok = malloc((size_t)(n + 1) * sizeof *tok);
  if (!tok)
    return DM_NOMEM("the token batch");
  for (int64_t i = 0; i <= n; i++)
    tok[i] = (int32_t)((i * 7919 + (i / 5) * 31) % m->classes);
  dm_status s = dm_workspace_feed(ws, m->fed[0], DM_INT32, 2, dims, tok);
  if (s == DM_OK)
    s = dm_workspace_feed(ws, m->fed[1], DM_INT32, 2, dims, tok + 1);
  free(tok);
  return s;
}

dm_status bench_feed_batch(dm_workspace *ws, const bench_model *m, int64_t batch) {
  if (m->tokens)
    return feed_tokens(ws, m, batch);
  int64_t dims[4] = {batch, m->chw[0], m->chw[1], m->chw[2]};
  int64_t n = batch * m->chw[0] * m->chw[1] * m->chw[2];
  float *x = malloc((size_t)n * sizeof *x);
  int32_t *label = malloc((size_t)batch * sizeof *label);
  dm_status s = x && label ? DM_OK : DM_NOMEM("the input batch");
  for (int64_t i = 0; s == DM_OK && i < n; i++)
    x[i] = 0.5f * (float)((i * 7919) % 1000) / 1000.0f;
  for (int64_t i = 0; s == DM_OK && i < batch; i++)
    label[i] = (int32_t)(i % m->classes);
  if (s == DM_OK)
    s = dm_workspace_feed(ws, m->fed[0], DM_FLOAT, 4, dims, x);
  if (s == DM_OK)
    s = dm_workspace_feed(ws, m->fed[1], DM_INT32, 1, &batch, label);
  free(x);
  free(label);
  return s;
}

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
