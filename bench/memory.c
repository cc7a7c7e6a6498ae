/* memory.c: bytes of activations and gradients of one training step, FP32 beside mixed
 * precision, for LeNet (models/mnist), ResNet-50 (models/resnet50) or the GPT
 * (models/gpt; BATCH windows of its context, token ids fed).
 *
 * Two figures per precision:
 *   - peak: the training net after the memory pass (net/passes/memory_pass.c: a Free op after
 *     each step-local blob's last use), as `demitasse train` runs it; the most tensor
 *     storage allocated at once during the step, above what existed before it (the
 *     parameters and optimizer state), read from the allocator's own counter
 *     (dm_memory_usage). This is the step's real peak of activations and gradients.
 *   - sum: the same net without the memory pass, where every blob of the step lives to
 *     its end; the sum over those blobs, listed by kind (below).
 *
 * The training net is built the way `demitasse train` builds it (bench/train_net.c,
 * shared with gpu_train_step.c): the gradient pass on 'loss', the optimizer pass
 * (momentum) with its init-net addition, and for FP16 the mixed-precision pass with
 * dynamic loss scaling. After the init net and the additions have run, what exists is
 * persistent (parameters, momenta, the iteration, the loss-scale state); the step's
 * memory is every other blob after ONE step: the fed data and labels, forward outputs
 * (FP16 cast copies of weights and activations included), the gradients (blobs that an
 * is_gradient_op op writes, FP32 casts of weight gradients included) and the optimizer's
 * scratch (lr, found_inf). There is no memory planner: no blob is freed
 * or reused within a step, so this sum IS the step's peak for these blobs. A storage
 * shared by two blobs (Reshape, aliases) is counted once.
 *
 * usage: memory lenet|resnet50|gpt BATCH [-v N] [-d MODELS_DIR] [-p fp16|bf16] [-o TYPES]
 *   prints "model batch fp32_peak fp16_peak ratio fp32_sum fp16_sum ratio" and a
 *   breakdown as '#' lines ("fp16" stands for the reduced precision, BF16 with -p bf16);
 *   -v N lists the N largest blobs of each precision; -o A,B forces op types A and B to the
 *   reduced precision (`train --fp16-ops A,B`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/api.h"
#include "core/workspace.h"
#include "net/passes/memory_pass.h"
#include "net/passes/mixed_precision_pass.h"
#include "net/netdef_build.h"
#include "net/passes/optimizer_pass.h"
#include "train_net.h"

enum { K_ACT, K_GRAD, K_OTHER, N_KINDS };
static const char *const kind_name[N_KINDS] = {"activations", "gradients", "other"};

/* One non-persistent blob after the step. */
typedef struct blob_bytes {
  const char *name; /* borrowed from the workspace */
  size_t bytes;
  dm_dtype dtype;
  int kind;
} blob_bytes;

/* The step's figures in one precision. */
typedef struct step_mem {
  size_t peak;  /* allocator peak during the step above the bytes before it */
  size_t total; /* sum of the step's blobs (meaningful without the memory pass) */
  size_t by_kind[N_KINDS];
  size_t by_kind_f16[N_KINDS]; /* the part of by_kind held in FLOAT16 */
  double seconds;              /* the one step, for the record */
} step_mem;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_ptr(const void *a, const void *b) {
  const void *x = *(const void *const *)a, *y = *(const void *const *)b;
  return (x > y) - (x < y);
}

static int cmp_bytes_desc(const void *a, const void *b) {
  size_t x = ((const blob_bytes *)a)->bytes, y = ((const blob_bytes *)b)->bytes;
  return (x < y) - (x > y);
}

static int in_sorted(char **names, size_t n, const char *name) {
  return n && bsearch(&name, names, n, sizeof *names, cmp_str) != NULL;
}

static void free_names(char **names, size_t n) {
  for (size_t i = 0; names && i < n; i++)
    free(names[i]);
  free(names);
}

/* The outputs of the net's gradient ops, sorted, malloc'd: the gradient blobs. Taken
 * from the NetDef because the workspace does not say which op wrote a blob. */
static dm_status gradient_blobs(const Caffe2__NetDef *def, char ***out, size_t *n_out) {
  size_t n = 0;
  for (size_t i = 0; i < def->n_op; i++)
    n += def->op[i]->is_gradient_op ? def->op[i]->n_output : 0;
  char **names = calloc(n + 1, sizeof *names);
  if (!names)
    return DM_NOMEM("blob names");
  size_t k = 0;
  for (size_t i = 0; i < def->n_op; i++)
    for (size_t o = 0; def->op[i]->is_gradient_op && o < def->op[i]->n_output; o++)
      if (!(names[k++] = strdup(def->op[i]->output[o]))) {
        free_names(names, k);
        return DM_NOMEM("blob names");
      }
  qsort(names, k, sizeof *names, cmp_str);
  *out = names;
  *n_out = k;
  return DM_OK;
}

/* The memory pass as `demitasse train` applies it: the state (what exists after the init
 * nets), the loss, the accuracy and the fed input are kept. */
static dm_status plan_memory(const bench_model *m, Caffe2__NetDef *def, char **persistent,
                             size_t n_persistent) {
  const char **keep = malloc((n_persistent + 3) * sizeof *keep);
  if (!keep)
    return DM_NOMEM("the keep list");
  size_t n = 0;
  for (size_t i = 0; i < n_persistent; i++)
    keep[n++] = persistent[i];
  keep[n++] = "loss";
  keep[n++] = "accuracy";
  keep[n++] = m->fed[0];
  dm_memory_summary sum;
  dm_status s = dm_memory_pass(def, &(dm_memory_opts){keep, n}, &sum);
  free(keep);
  return s;
}

/* Builds, runs one step and measures it in one precision, with or without the memory
 * pass; lists the `top` largest blobs. */
/* The reduced precision measured beside FP32 (-p): FLOAT16 unless BFLOAT16; and the op
 * types forced to it (-o, as `train --fp16-ops`). */
static dm_dtype half_dtype = DM_FLOAT16;
static const char *fp16_ops;

static dm_status measure(const bench_model *m, const char *dir, int64_t batch, int fp16,
                         int plan, int top, step_mem *res) {
  dm_workspace *ws = NULL;
  Caffe2__NetDef *def = NULL, *init_add = NULL;
  char **persistent = NULL, **grads = NULL;
  size_t n_persistent = 0, n_grads = 0, n_blobs = 0;
  const void **seen = NULL; /* storages counted or persistent */
  blob_bytes *blobs = NULL;
  dm_net *net = NULL;
  memset(res, 0, sizeof *res);
  dm_status s = dm_workspace_create(&ws);
  if (s != DM_OK)
    goto cleanup;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, m->init);
  s = dm_workspace_run_net_file(ws, path);
  if (s == DM_OK)
    s = dm_netdef_new("optimizer_init", &init_add);
  if (s == DM_OK)
    s = bench_build_train_net(m, dir, fp16 ? half_dtype : 0, 0, fp16_ops, &def, init_add);
  if (s == DM_OK) {
    s = dm_workspace_create_net(ws, init_add, "optimizer_init", &net);
    init_add = NULL; /* the workspace owns it now, even on failure */
  }
  if (s == DM_OK)
    s = dm_net_run(net);
  if (s != DM_OK)
    goto cleanup;
  /* What exists now is persistent, as `demitasse train` decides what a checkpoint holds. */
  n_persistent = dm_workspace_blob_count(ws);
  persistent = calloc(n_persistent + 1, sizeof *persistent);
  if (!persistent) {
    s = DM_NOMEM("blob names");
    goto cleanup;
  }
  for (size_t i = 0; i < n_persistent; i++)
    if (!(persistent[i] = strdup(dm_workspace_blob_name(ws, i)))) {
      n_persistent = i;
      s = DM_NOMEM("blob names");
      goto cleanup;
    }
  qsort(persistent, n_persistent, sizeof *persistent, cmp_str);
  if ((s = gradient_blobs(def, &grads, &n_grads)) != DM_OK ||
      (plan && (s = plan_memory(m, def, persistent, n_persistent)) != DM_OK))
    goto cleanup;
  size_t before, peak;
  dm_memory_usage(DM_CPU, &before, &peak);
  dm_memory_reset_peak(DM_CPU);
  if ((s = bench_feed_batch(ws, m, batch)) != DM_OK)
    goto cleanup;
  s = dm_workspace_create_net(ws, def, m->name, &net);
  def = NULL;
  double t0 = bench_now();
  if (s != DM_OK || (s = dm_net_run(net)) != DM_OK)
    goto cleanup;
  res->seconds = bench_now() - t0;
  dm_memory_usage(DM_CPU, &peak, &peak);
  res->peak = peak - before;

  /* Persistent storages first, so an alias of a parameter is not counted as step memory. */
  size_t n = dm_workspace_blob_count(ws), n_seen = 0;
  seen = calloc(n + 1, sizeof *seen);
  blobs = calloc(n + 1, sizeof *blobs);
  if (!seen || !blobs) {
    s = DM_NOMEM("the blob table");
    goto cleanup;
  }
  for (size_t i = 0; i < n; i++) {
    const dm_blob *b = dm_workspace_find(ws, dm_workspace_blob_name(ws, i));
    if (b && b->tensor->storage && in_sorted(persistent, n_persistent, b->name))
      seen[n_seen++] = b->tensor->storage;
  }
  qsort(seen, n_seen, sizeof *seen, cmp_ptr);
  size_t n_persistent_seen = n_seen;
  for (size_t i = 0; i < n; i++) {
    const dm_blob *b = dm_workspace_find(ws, dm_workspace_blob_name(ws, i));
    if (!b || !b->tensor->storage || in_sorted(persistent, n_persistent, b->name))
      continue;
    const void *st = b->tensor->storage;
    int dup = bsearch(&st, seen, n_persistent_seen, sizeof *seen, cmp_ptr) != NULL;
    for (size_t j = n_persistent_seen; j < n_seen && !dup; j++)
      dup = seen[j] == st; /* the few non-persistent aliases: a linear scan is fine */
    if (dup)
      continue;
    seen[n_seen++] = st;
    blob_bytes *e = &blobs[n_blobs++];
    e->name = b->name;
    e->bytes = dm_tensor_nbytes(b->tensor);
    e->dtype = b->tensor->dtype;
    /* Gradient ops' outputs; the rest written in the step is forward (and the fed
     * inputs) unless an optimizer or loss-scale op wrote it (lr, found_inf). */
    e->kind = in_sorted(grads, n_grads, b->name) ? K_GRAD
            : strcmp(b->name, DM_OPTIM_LR_BLOB) == 0 ||
                      strcmp(b->name, DM_MP_FOUND_INF_BLOB) == 0
                ? K_OTHER
                : K_ACT;
    res->total += e->bytes;
    res->by_kind[e->kind] += e->bytes;
    if (e->dtype == DM_FLOAT16)
      res->by_kind_f16[e->kind] += e->bytes;
  }
  if (top > 0 && !plan) {
    qsort(blobs, n_blobs, sizeof *blobs, cmp_bytes_desc);
    printf("# %s %s: the %d largest of %zu step blobs\n", m->name, fp16 ? "fp16" : "fp32", top,
           n_blobs);
    for (size_t i = 0; i < n_blobs && i < (size_t)top; i++)
      printf("#   %-36s %-8s %-11s %12zu\n", blobs[i].name, dm_dtype_name(blobs[i].dtype),
             kind_name[blobs[i].kind], blobs[i].bytes);
  }

cleanup:
  free(blobs);
  free(seen);
  free_names(persistent, n_persistent);
  free_names(grads, n_grads);
  if (def)
    protobuf_c_message_free_unpacked(&def->base, NULL);
  if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  dm_workspace_destroy(ws);
  return s;
}

static void print_breakdown(const char *prec, const step_mem *r) {
  printf("# %s without the memory pass: %zu bytes in %.1f s:", prec, r->total, r->seconds);
  for (int k = 0; k < N_KINDS; k++)
    printf(" %s %zu (fp16 %zu, fp32 %zu)%s", kind_name[k], r->by_kind[k], r->by_kind_f16[k],
           r->by_kind[k] - r->by_kind_f16[k], k + 1 < N_KINDS ? ";" : "\n");
}

static int usage(void) {
  fprintf(stderr, "usage: memory lenet|resnet50|gpt BATCH [-v N] [-d MODELS_DIR] "
                  "[-p fp16|bf16] [-o TYPES]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3)
    return usage();
  const bench_model *m = bench_model_find(argv[1]);
  char *end = NULL;
  long batch = strtol(argv[2], &end, 10);
  const char *dir = "models";
  int top = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-v") == 0)
      top = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-d") == 0)
      dir = argv[i + 1];
    else if (strcmp(argv[i], "-o") == 0)
      fp16_ops = argv[i + 1];
    else if (strcmp(argv[i], "-p") == 0 && strcmp(argv[i + 1], "bf16") == 0)
      half_dtype = DM_BFLOAT16;
    else if (strcmp(argv[i], "-p") != 0 || strcmp(argv[i + 1], "fp16") != 0)
      return usage();
  }
  if (!m || !*argv[2] || *end || batch <= 0 || argc % 2 == 0)
    return usage();
  step_mem r32, r16, p32, p16;
  if (measure(m, dir, batch, 0, 0, top, &r32) != DM_OK ||
      measure(m, dir, batch, 1, 0, top, &r16) != DM_OK ||
      measure(m, dir, batch, 0, 1, 0, &p32) != DM_OK ||
      measure(m, dir, batch, 1, 1, 0, &p16) != DM_OK) {
    fprintf(stderr, "memory: %s\n", dm_last_error());
    return 1;
  }
  printf("# bytes of activations and gradients of one training step (and the optimizer's\n"
         "# scratch; not parameters, momenta or loss-scale state). peak: with the memory\n"
         "# pass, measured by the allocator; sum: without it, every blob of the step.\n");
  print_breakdown("fp32", &r32);
  print_breakdown("fp16", &r16);
  printf("# allocator peak without the memory pass: fp32 %zu, fp16 %zu (the sums plus "
         "copies made on the way)\n",
         r32.peak, r16.peak);
  printf("%s %ld %zu %zu %.3f %zu %zu %.3f\n", m->name, batch, p32.peak, p16.peak,
         (double)p16.peak / (double)p32.peak, r32.total, r16.total,
         (double)r16.total / (double)r32.total);
  return 0;
}
