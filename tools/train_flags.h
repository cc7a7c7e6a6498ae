/* train_flags.h: the training flags of `train` and `rewrite --grad` as the C API's
 * dm_train_options, so that both commands reach the pipeline through the translator
 * the C API uses (dm_pipeline_opts_from_train) and print or run the same net for the
 * same flags. */
#ifndef DM_TOOLS_TRAIN_FLAGS_H
#define DM_TOOLS_TRAIN_FLAGS_H

#include "core/demitasse.h"
#include "device_flags.h"
#include "dist_flags.h"
#include "mp_flags.h"
#include "net/passes/optimizer_pass.h"

/* The device string dm_train_options.device points at ("cuda:N"). */
typedef struct dm_cli_device_name {
  char s[32];
} dm_cli_device_name;

/* Fills t (after dm_train_options_init) from the optimizer, mixed-precision, device and
 * data-parallel flags; t borrows their lists and `dev_name`'s text. The caller sets
 * what is its own (losses, keep, memory, fuse_train, layout). */
void dm_cli_train_options(const dm_optimizer_opts *opt, const dm_mp_cli *mp,
                          const dm_device_cli *dev, const dm_dist_cli *dist,
                          dm_cli_device_name *dev_name, dm_train_options *t);

#endif
