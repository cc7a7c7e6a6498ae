/* train_net.h: what the training benchmarks (bench/memory.c, bench/gpu_train_step.c)
 * share: the models they know, the training net built the way `demitasse train` builds
 * it, and a synthetic input batch.
 *
 * The training net is the model's own train net file without its data-input op (the
 * benchmarks feed `data` and `label` themselves), then the gradient pass on 'loss', the
 * optimizer pass (momentum) with its init-net addition and, for FP16, the mixed-precision
 * pass with dynamic loss scaling; `data` and `label` are inputs, not parameters, to both
 * the optimizer and the mixed-precision pass (as in tools/cmd_train.c). Each program
 * adds its own specifics (memory.c's memory pass, gpu_train_step.c's device placement).
 */
#ifndef DM_BENCH_TRAIN_NET_H
#define DM_BENCH_TRAIN_NET_H

#include <stdint.h>

#include "net/api.h"

/* A model: its net files under the models folder and the shape of its input. */
typedef struct bench_model {
  const char *name;
  int64_t chw[3]; /* one image: (C, H, W) */
  int32_t classes;
  const char *init, *train; /* relative to the models folder */
} bench_model;

/* The blobs the benchmarks feed from the host: "data" and "label". */
enum { BENCH_N_FED_BLOBS = 2 };
extern const char *const bench_fed_blobs[BENCH_N_FED_BLOBS];

/* The model called `name` ("lenet", "resnet50", "resnet50_nhwc"), or NULL. */
const bench_model *bench_model_find(const char *name);

/* Reads `m`'s train net from `dir` and applies the training passes (see the header
 * comment), with mixed precision in `half` (DM_FLOAT16, dynamic loss scaling;
 * DM_BFLOAT16, none, as `train --bf16`; 0: FP32); with `for_gpu`, the optimizer as
 * `train --device cuda` makes it (one multi-tensor update for all parameters). The
 * optimizer's and the mixed-precision pass's init-net additions go to `init_add`. *out
 * is the caller's on success; on failure nothing is left to free. */
dm_status bench_build_train_net(const bench_model *m, const char *dir, dm_dtype half,
                                int for_gpu, Caffe2__NetDef **out, Caffe2__NetDef *init_add);

/* Feeds a deterministic batch: data (batch, C, H, W) FLOAT of small, smooth values (a
 * finite loss, so an FP16 step is not skipped on overflow) and label (batch) INT32. */
dm_status bench_feed_batch(dm_workspace *ws, const bench_model *m, int64_t batch);

/* A monotonic clock, in seconds. */
double bench_now(void);

#endif
