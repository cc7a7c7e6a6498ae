/* train_paths.c: the checks of train_paths.h, made before the first iteration. */
#include "train_paths.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder `path` would be written in ("." for a bare name), in buf. */
static const char *folder_of(const char *path, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", path);
  return dirname(buf);
}

/* The path made absolute and free of "." / ".." / symlinks in its folder part, so that
 * two spellings of one output compare equal before either exists. */
static void normalise(const char *path, char *out, size_t cap) {
  char dir[4096], base[4096], real[4096];
  folder_of(path, dir, sizeof dir);
  snprintf(base, sizeof base, "%s", path);
  const char *name = basename(base);
  if (realpath(dir, real))
    snprintf(out, cap, "%s/%s", real, name);
  else
    snprintf(out, cap, "%s", path);
}

/* Whether a and b name one file or folder: the same normalised path, or (both
 * existing) the same device and inode. */
static int same_place(const char *a, const char *b) {
  char na[8192], nb[8192];
  normalise(a, na, sizeof na);
  normalise(b, nb, sizeof nb);
  if (strcmp(na, nb) == 0)
    return 1;
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

static dm_status check_folder(const char *flag, const char *path) {
  char buf[4096];
  const char *dir = folder_of(path, buf, sizeof buf);
  struct stat st;
  if (stat(dir, &st) != 0)
    return dm_error(DM_ERR_IO, "%s '%s': its folder '%s' cannot be used: %s (create it first)",
                    flag, path, dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return dm_error(DM_ERR_IO, "%s '%s': '%s' is not a folder", flag, path, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return dm_error(DM_ERR_IO, "%s '%s': its folder '%s' is not writable: %s", flag, path, dir,
                    strerror(errno));
  return DM_OK;
}

/* Whether `path` is named as LMDB names its files. */
static int lmdb_file_name(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  const char *b = basename(buf);
  return strcmp(b, "data.mdb") == 0 || strcmp(b, "lock.mdb") == 0;
}

/* A file output (CSV, curves): a regular file or nothing, not a folder (an LMDB is one),
 * not an LMDB's own file. */
static dm_status check_file_output(const char *flag, const char *path) {
  DM_TRY(check_folder(flag, path));
  struct stat st;
  if (lmdb_file_name(path))
    return dm_error(DM_ERR_INVALID, "%s '%s' is an LMDB's file: give a new .csv path", flag,
                    path);
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    char mdb[4096];
    snprintf(mdb, sizeof mdb, "%s/data.mdb", path);
    return dm_error(DM_ERR_INVALID, "%s '%s' is a folder%s: give a file path", flag, path,
                    access(mdb, F_OK) == 0 ? " (an LMDB: a checkpoint or a DB)" : "");
  }
  return DM_OK;
}

/* The checkpoint: an LMDB folder, existing (with its data.mdb) or new. */
static dm_status check_checkpoint(const char *path) {
  DM_TRY(check_folder("--checkpoint", path));
  struct stat st;
  if (stat(path, &st) != 0)
    return DM_OK; /* (a --resume without one says so when it loads) */
  if (!S_ISDIR(st.st_mode))
    return dm_error(DM_ERR_INVALID,
                    "--checkpoint '%s' is a file, not a checkpoint (an LMDB folder): it would "
                    "be replaced; give a new path or the folder of an earlier checkpoint",
                    path);
  char mdb[4096];
  snprintf(mdb, sizeof mdb, "%s/data.mdb", path);
  if (stat(mdb, &st) != 0)
    return DM_OK; /* an empty folder (mkdir first) is a new checkpoint's */
  if (access(path, W_OK | X_OK) != 0)
    return dm_error(DM_ERR_IO, "--checkpoint '%s' is not writable: %s", path, strerror(errno));
  return DM_OK;
}

dm_status dm_train_check_paths(const dm_train_paths *p) {
  const char *outs[3] = {p->checkpoint, p->csv, p->svg};
  static const char *const flags[3] = {"--checkpoint", "--csv", "--csv's curves (.svg)"};
  if (p->checkpoint)
    DM_TRY(check_checkpoint(p->checkpoint));
  for (int k = 1; k < 3; k++)
    if (outs[k])
      DM_TRY(check_file_output(flags[k], outs[k]));
  for (int a = 0; a < 3; a++) {
    for (int b = a + 1; b < 3 && outs[a]; b++)
      if (outs[b] && same_place(outs[a], outs[b]))
        return dm_error(DM_ERR_INVALID, "%s '%s' and %s '%s' are the same path: each output "
                        "needs its own", flags[a], outs[a], flags[b], outs[b]);
  }
  return DM_OK;
}
