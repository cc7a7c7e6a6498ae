/* loss.h: the row view the loss ops share, for the CPU kernels (loss.c) and the CUDA
 * kernels (gpu/loss.c) (internal). */
#ifndef DM_OPERATORS_LOSS_H
#define DM_OPERATORS_LOSS_H

#include <stdint.h>

#include "demitasse_plugin.h"

/* X as N rows of D: split at `axis_arg` (canonicalised; a 1-d X is one row of D). */
DM_HIDDEN dm_status dm_loss_rows(dm_op_ctx *ctx, const dm_tensor *x, int64_t axis_arg,
                                 int64_t *N, int64_t *D);

#endif
