/* multi_tensor.c: the CUDA kernels (engine "") of MultiMomentumSGDUpdate, MultiAdam and
 * MultiWeightedSum
 * (schemas and CPU kernels in operators/multi_optimizer.c), one launch per op for all its
 * tensors, and the table upload they share with UnscaleAndCheck (loss_scale.c). Device
 * code in multi_tensor.cu.
 *
 * Each run builds the table of tensors and chunks (cuda_kernels.h) on the host, sends it
 * through the context's pinned staging ring on the op's stream into the context's
 * scratch, and launches: no host synchronisation (the ring waits only when all its
 * buffers are still in flight), and the skip flag, lr and iter are read on the device.
 * The blobs' pointers may change between runs (the memory pass frees gradients), so the
 * table is rebuilt every run; it is small (72 bytes a tensor, 8 a chunk).
 */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "operators/multi_optimizer.h"

dm_status dm_gpu_mt_upload(dm_op_ctx *ctx, const dmk_mt_tensor *ts, int nt,
                           const dmk_mt_tensor **dts, const dmk_mt_chunk **dcs,
                           int64_t *nchunks) {
  int64_t nc = 0;
  for (int k = 0; k < nt; k++) {
    if (ts[k].n / DMK_MT_CHUNK >= INT32_MAX) /* the chunk index is 32-bit */
      return dm_op_error(ctx, DM_ERR_LIMIT, "tensor %d of the list has too many elements (%lld)",
                         k, (long long)ts[k].n);
    nc += (ts[k].n + DMK_MT_CHUNK - 1) / DMK_MT_CHUNK;
  }
  *nchunks = nc;
  *dts = NULL;
  *dcs = NULL;
  if (nc == 0)
    return DM_OK;
  const size_t tbytes = (size_t)nt * sizeof *ts, bytes = tbytes + (size_t)nc * sizeof **dcs;
  char *host = malloc(bytes);
  if (!host)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the table of %d tensors", nt);
  memcpy(host, ts, tbytes);
  dmk_mt_chunk *c = (dmk_mt_chunk *)(host + tbytes);
  for (int k = 0; k < nt; k++)
    for (int64_t j = 0; j * DMK_MT_CHUNK < ts[k].n; j++)
      *c++ = (dmk_mt_chunk){.tensor = k, .chunk = (int32_t)j};
  dm_gpu_context *gc;
  void *dev = NULL;
  dm_status s = dm_gpu_op_context(ctx, &gc);
  if (s == DM_OK)
    s = dm_gpu_scratch(gc, bytes, &dev);
  if (s == DM_OK)
    s = dm_gpu_upload(gc, dev, host, bytes);
  free(host);
  DM_TRY(s);
  *dts = dev;
  *dcs = (const dmk_mt_chunk *)((char *)dev + tbytes);
  return DM_OK;
}

/* The op's tensors as a table: entry k holds list r's tensor k at p[r] for the input
 * lists, then the outputs at p[lists + j]. Malloc'd. */
static dm_status op_table(dm_op_ctx *ctx, const dm_multi_layout *l, dmk_mt_tensor **out) {
  const int lists = l->lists;
  dmk_mt_tensor *t = calloc((size_t)l->n, sizeof *t);
  if (!t)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the table of %d tensors", l->n);
  for (int k = 0; k < l->n; k++) {
    const dm_tensor *x = IN(dm_multi_input(l, 0, k));
    t[k].n = x->numel;
    for (int r = 0; r < lists; r++)
      t[k].p[r] = (void *)DATA(IN(dm_multi_input(l, r, k)));
    for (int j = 0; j < l->outs; j++)
      t[k].p[lists + j] = MDATA(OUT(j * l->n + k));
  }
  *out = t;
  return DM_OK;
}

/* Infer (every output sized), then the table uploaded. */
static dm_status prepare(dm_op_ctx *ctx, dm_multi_kind kind, dm_multi_layout *l,
                         const dmk_mt_tensor **dts, const dmk_mt_chunk **dcs, int64_t *nc) {
  DM_TRY(dm_op_run_infer(ctx));
  DM_TRY(dm_multi_layout_get(ctx, kind, l));
  dmk_mt_tensor *t = NULL;
  DM_TRY(op_table(ctx, l, &t));
  dm_status s = dm_gpu_mt_upload(ctx, t, l->n, dts, dcs, nc);
  free(t);
  return s;
}

/* One launch for the op's tensors; lr, iter and skip are read on the device. */
static dm_status multi_run(dm_op_ctx *ctx, dm_multi_kind kind) {
  dm_multi_layout l;
  const dmk_mt_tensor *t;
  const dmk_mt_chunk *c;
  int64_t nc;
  DM_TRY(prepare(ctx, kind, &l, &t, &c, &nc));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  const void *skip = l.skip >= 0 ? DATA(IN(l.skip)) : NULL;
  const int st = l.skip >= 0 ? (int)IN(l.skip)->dtype : DM_UNDEFINED;
  if (kind == DM_MULTI_WSUM) /* w0, w1 at lr's and iter's places */
    DM_CUDA_TRY(dmk_multi_weighted_sum(s, t, c, nc, DATA(IN(l.lr)), DATA(IN(l.iter)), skip, st));
  else if (kind == DM_MULTI_ADAM)
    DM_CUDA_TRY(dmk_multi_adam(s, t, c, nc, DATA(IN(l.lr)), DATA(IN(l.iter)),
                               dm_op_arg_float(ctx, "beta1", 0.9f),
                               dm_op_arg_float(ctx, "beta2", 0.999f),
                               dm_op_arg_float(ctx, "epsilon", 1e-5f), skip, st));
  else
    DM_CUDA_TRY(dmk_multi_momentum_sgd(s, t, c, nc, DATA(IN(l.lr)),
                                       dm_op_arg_float(ctx, "momentum", 0),
                                       dm_op_arg_int(ctx, "nesterov", 0) != 0, skip, st));
  return DM_OK;
}

static dm_status momentum_run(dm_op_ctx *ctx) { return multi_run(ctx, DM_MULTI_MOMENTUM); }
static dm_status wsum_run(dm_op_ctx *ctx) { return multi_run(ctx, DM_MULTI_WSUM); }
static dm_status adam_run(dm_op_ctx *ctx) { return multi_run(ctx, DM_MULTI_ADAM); }

const dm_kernel_def dm_cuda_multi_tensor_kernels[] = {
    GPU_KERNEL("MultiMomentumSGDUpdate", "", .init = dm_multi_momentum_init,
               .run = momentum_run),
    GPU_KERNEL("MultiAdam", "", .init = dm_multi_adam_init, .run = adam_run),
    GPU_KERNEL("MultiWeightedSum", "", .init = dm_multi_wsum_init, .run = wsum_run),
    {0},
};
