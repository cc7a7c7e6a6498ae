/* data_parallel_pass.h: the data-parallel pass, NetDef -> NetDef (internal).
 *
 * Run on a training net after the gradient, mixed-precision and device passes: it adds
 * Allreduce ops (operators/allreduce.c, average 1) over the weight gradients <p>_grad, so
 * that each rank's update uses the mean of all ranks' gradients. A gradient is reduced
 * right after the last backward op that writes it (before the first op that is not a
 * backward op reads it: the mixed-precision pass's casts to the FP32 masters, the loss
 * scale's unscale-and-check, the updates), so
 *   - FP16 gradients are reduced in FP16 (the seed recipe), or FP32 with fp32_wire;
 *   - with loss scaling, an inf or NaN in one rank's gradient is in every rank's sum,
 *     so UnscaleAndCheck finds it on every rank and all ranks skip the same step with
 *     the same scale: no separate reduction of the overflow flag is needed;
 *   - with `overlap`, each group of gradients one backward op completes is reduced at
 *     once (an op per group: on a GPU its collective overlaps the rest of the backward
 *     pass); without it, one Allreduce after the last of them (fewest collectives, what
 *     a CPU, which runs one op at a time, wants).
 * Each Allreduce takes the device option of the op it follows. Readers that can shard
 * (their schema takes num_shards and shard_id) are told this rank's share. BN statistics stay per
 * rank (Caffe2's default): only <p>_grad of the given params is reduced.
 */
#ifndef DM_NET_DATA_PARALLEL_H
#define DM_NET_DATA_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

typedef struct dm_dp_opts {
  const char *const *params; /* the trainable parameters (borrowed) */
  size_t n_params;
  int64_t bucket_bytes; /* the Allreduce's bucket_bytes; 0: its default */
  int fp32_wire;        /* reduce FP16/BF16 gradients in FP32 */
  int overlap;          /* an Allreduce per completing backward op instead of one */
  /* With num_shards > 1: every op whose schema takes num_shards and shard_id (a DB
   * reader) gets these, so that rank shard_id reads its share of each global batch. */
  int num_shards, shard_id;
} dm_dp_opts;

typedef struct dm_dp_summary {
  size_t n_grads; /* gradients reduced */
  size_t n_ops;   /* Allreduce ops added */
} dm_dp_summary;

DM_HIDDEN dm_status dm_data_parallel_pass(Caffe2__NetDef *net, const dm_dp_opts *o,
                                          dm_dp_summary *sum);

#endif
