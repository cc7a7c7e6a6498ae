/* loss_scale.h: UpdateLossScale's arguments, read and checked in one place for the CPU
 * kernel (loss_scale.c) and the CUDA kernel (gpu/loss_scale.c) (internal). */
#ifndef DM_OPERATORS_LOSS_SCALE_H
#define DM_OPERATORS_LOSS_SCALE_H

#include <stdint.h>

#include "demitasse_plugin.h"

typedef struct dm_loss_scale_params {
  int dynamic;
  double growth, backoff, min_scale, max_scale;
  int64_t interval;
} dm_loss_scale_params;

/* dynamic, growth_factor, backoff_factor, growth_interval, min_scale, max_scale with
 * their defaults; an error naming the argument when one is out of range. */
DM_HIDDEN dm_status dm_loss_scale_params_get(dm_op_ctx *ctx, dm_loss_scale_params *p);

#endif
