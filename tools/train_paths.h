/* train_paths.h: `demitasse train`'s output paths (--checkpoint, --csv and its .svg)
 * checked before anything runs, so that a wrong one fails at once instead of at the
 * first save, possibly after the whole run. */
#ifndef DM_TOOLS_TRAIN_PATHS_H
#define DM_TOOLS_TRAIN_PATHS_H

#include <stddef.h>

#include "core/status.h"

typedef struct dm_train_paths {
  const char *checkpoint;     /* --checkpoint, or NULL */
  const char *csv;            /* --csv, or NULL */
  const char *svg;            /* the curves beside the CSV, or NULL */
} dm_train_paths;

/* Each output's folder exists and is writable; the CSV and the curves are not folders (an
 * LMDB is one) nor LMDB files; the checkpoint, where it exists, is an LMDB folder (its
 * data.mdb), never a file or another folder; the outputs are distinct from each other
 * (the same path, or the same file or folder by device and inode). That no output is an
 * input is dm_cli_check_outputs's check (tools/cli_util.h), made for every command.
 * DM_ERR_INVALID or DM_ERR_IO naming the flag, the path and the fix; nothing is
 * written. */
dm_status dm_train_check_paths(const dm_train_paths *p);

#endif
