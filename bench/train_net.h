/* train_net.h: what the training benchmarks (bench/memory.c, bench/gpu_train_step.c)
 * share: the models they know, the training net built the way `demitasse train` builds
 * it, and a synthetic input batch.
 *
 * The training net is the model's own train net file without its data-input op (the
 * benchmarks feed its two outputs themselves: an image model's `data` and `label`, the
 * GPT's `tokens` and `targets`), then the gradient pass on 'loss', the optimizer pass
 * (momentum; the optimizer only adds persistent state, which no benchmark counts) with
 * its init-net addition and, for FP16, the mixed-precision pass with dynamic loss
 * scaling; the fed blobs are inputs, not parameters, to both the optimizer and the
 * mixed-precision pass (as in tools/cmd_train.c). Each program
 * adds its own specifics (memory.c's memory pass, gpu_train_step.c's device placement).
 */
#ifndef DM_BENCH_TRAIN_NET_H
#define DM_BENCH_TRAIN_NET_H

#include <stdint.h>

#include "net/api.h"

/* The blobs a benchmark feeds from the host: the input and the labels. */
enum { BENCH_N_FED_BLOBS = 2 };

/* A model: its net files under the models folder and the shape of its input. */
typedef struct bench_model {
  const char *name;
  /* an image model's one image (C, H, W); a language model's context {T, 0, 0} */
  int64_t chw[3];
  int32_t classes; /* the labels' range: classes, or a language model's vocabulary */
  const char *init, *train; /* relative to the models folder */
  /* fed[0]: FLOAT (batch, C, H, W) and fed[1]: INT32 (batch), or for a language model
   * (`tokens`) both INT32 (batch, T) */
  const char *fed[BENCH_N_FED_BLOBS];
  int tokens;
} bench_model;

/* The model called `name` ("lenet", "resnet50", "resnet50_nhwc", "gpt"), or NULL. */
const bench_model *bench_model_find(const char *name);

/* Reads `m`'s train net from `dir` and applies the training passes (see the header
 * comment), with mixed precision in `half` (DM_FLOAT16, dynamic loss scaling;
 * DM_BFLOAT16, none, as `train --bf16`; 0: FP32); with `for_gpu`, the optimizer as
 * `train --device cuda` makes it (one multi-tensor update for all parameters); with
 * `fp16_ops` (comma-separated op types, or NULL), those types forced to the reduced
 * precision, as `train --fp16-ops`. The
 * optimizer's and the mixed-precision pass's init-net additions go to `init_add`. *out
 * is the caller's on success; on failure nothing is left to free. */
dm_status bench_build_train_net(const bench_model *m, const char *dir, dm_dtype half,
                                int for_gpu, const char *fp16_ops, Caffe2__NetDef **out,
                                Caffe2__NetDef *init_add);

/* Feeds a deterministic batch: data (batch, C, H, W) FLOAT of small, smooth values (a
 * finite loss, so an FP16 step is not skipped on overflow) and label (batch) INT32; or a
 * language model's tokens and targets (batch, T) INT32 in [0, V), targets the next
 * token. */
dm_status bench_feed_batch(dm_workspace *ws, const bench_model *m, int64_t batch);

/* A monotonic clock, in seconds. */
double bench_now(void);

#endif
