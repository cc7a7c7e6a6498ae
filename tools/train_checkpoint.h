/* train_checkpoint.h: the checkpoints of `demitasse train`: the one-op nets that Save or
 * Load its state, and --resume, which checks what it loaded against what the init nets
 * made before training goes on with it. */
#ifndef DM_TOOLS_TRAIN_CHECKPOINT_H
#define DM_TOOLS_TRAIN_CHECKPOINT_H

#include <stddef.h>

#include "core/status.h"
#include "net/api.h"

/* A one-op net in ws: Save (save != 0) or Load of `blobs` at `path`. Load names them, so
 * a checkpoint that lacks one (another run's, or a partial one) is refused, naming it. */
dm_status dm_train_checkpoint_net(dm_workspace *ws, const char *path, int save,
                                  char *const *blobs, size_t n, dm_net **out);

/* --resume: loads `blobs` from the checkpoint at `path` into ws, where the init nets
 * have made them, and refuses a blob whose dtype or shape differs from the init nets',
 * naming the checkpoint and the blob (otherwise the first op to read it is blamed). */
dm_status dm_train_resume(dm_workspace *ws, const char *path, char *const *blobs, size_t n);

#endif
