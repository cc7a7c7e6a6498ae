/* dropout.h: the host side of Dropout shared by the CPU kernel (dropout.c) and the CUDA
 * kernel (gpu/dropout.c) (internal), so the two draw the same mask from the same key.
 *
 * The bits of element i of a run are mix64(key + i * DM_DROPOUT_GOLDEN) >> 11 (53 uniform
 * bits; kept when >= ratio), key = dm_dropout_next_key(state): a hash of the op's seed
 * (device_option.random_seed, else a fixed default), its first output's name and the run
 * count.
 */
#ifndef DM_OPERATORS_DROPOUT_H
#define DM_OPERATORS_DROPOUT_H

#include <stdint.h>

#include "demitasse_plugin.h"

#define DM_DROPOUT_GOLDEN 0x9E3779B97F4A7C15ull

/* The kernel state: seed and stream mixed, and the runs so far. */
typedef struct dm_dropout_state {
  uint64_t key;
  uint64_t iter;
} dm_dropout_state;

/* splitmix64's finaliser. */
static inline uint64_t dm_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Kernel init and fini: a dm_dropout_state keyed by the seed and first output name. */
DM_HIDDEN dm_status dm_dropout_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN void dm_dropout_fini(void *state);
/* This run's key (advances the run count). */
static inline uint64_t dm_dropout_next_key(dm_dropout_state *s) {
  return dm_mix64(s->key ^ dm_mix64(s->iter++));
}
/* The `ratio` argument, checked to lie in [0, 1] (default 0.5). */
DM_HIDDEN dm_status dm_dropout_ratio(dm_op_ctx *ctx, float *ratio);
/* 1 / (1 - ratio), and 0 when everything is dropped (no 1/0). */
static inline double dm_dropout_keep_scale(float ratio) {
  return ratio < 1.0f ? 1.0 / (1.0 - ratio) : 0.0;
}

#endif
