/* fileio.h: files are replaced, never overwritten; writers own only what they write;
 * readers read only regular files.
 *
 * Every file the library and the CLI write goes to a temporary file beside its target
 * (same directory, so the same file system), created with O_EXCL under a name unique to
 * the process and call ("<path>.tmp.<pid>.<n>"), written, fsync'd and renamed over the
 * target. A failed write leaves the old file as it was and removes the temporary one; a
 * crash leaves the old file or the whole new one (and at worst a stray .tmp file).
 * Directories (make-db's LMDBs) are built the same way: in a temporary directory beside
 * the target, renamed into place when complete.
 *
 * The target is what lstat finds at the path: a symlink is followed to the file it
 * names, and that file is replaced in its own folder (the link stays a link); a
 * character or block device, a FIFO or a socket is written in place (a FIFO's reader
 * gets the data, /dev/full says "disk full"), never replaced by a regular file; a
 * directory is refused.
 *
 * Errors say "disk full" when the file system is (ENOSPC) or the quota is (EDQUOT).
 */
#ifndef DM_FILEIO_H
#define DM_FILEIO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include "status.h"

/* strerror(err), except "disk full (...)" for ENOSPC and EDQUOT. */
DM_HIDDEN const char *dm_errno_text(int err);

/* Writes all `len` bytes to `fd`, retrying short writes and EINTR; `name` names the
 * file in the error ("<name>: write failed: disk full (...)"). */
DM_HIDDEN dm_status dm_write_fd_all(int fd, const void *data, size_t len, const char *name);

/* `len` bytes to `path`, atomically (above). Created 0666 less the umask, as fopen would. */
DM_HIDDEN dm_status dm_write_file_atomic(const char *path, const void *data, size_t len);

/* The same through stdio, for writers that print: dm_atomic_open gives `f`, a FILE on
 * the temporary file; dm_atomic_commit flushes, fsyncs and renames it into place (or
 * removes it, when any write to `f` failed) and dm_atomic_abort removes it. Either one
 * ends it, and both accept a zeroed or already-ended struct. */
typedef struct dm_atomic_file {
  FILE *f;
  char *path; /* the name the caller gave, for messages */
  char *dest; /* what is replaced: path, or the file its symlinks lead to */
  char *tmp;  /* the temporary file; NULL when written in place (a device, a FIFO) */
  int err;    /* a writer that saw a write to f fail may keep its errno here: stdio's
                 error flag outlives the errno, which commit would otherwise not know */
} dm_atomic_file;

DM_HIDDEN dm_status dm_atomic_open(dm_atomic_file *af, const char *path);
DM_HIDDEN dm_status dm_atomic_commit(dm_atomic_file *af);
DM_HIDDEN void dm_atomic_abort(dm_atomic_file *af);

/* Directories: creates an empty temporary directory beside `path` and returns its name
 * (malloc'd) in *tmp; dm_atomic_dir_commit fsyncs its files and renames it to `path`
 * (which must not exist, or be an empty directory); dm_atomic_dir_remove removes it and
 * the plain files in it (what LMDB writes), for a failed build. */
DM_HIDDEN dm_status dm_atomic_dir_create(const char *path, char **tmp);
DM_HIDDEN dm_status dm_atomic_dir_commit(const char *tmp, const char *path);
DM_HIDDEN void dm_atomic_dir_remove(const char *tmp);

/* What a file of mode `m` that is not a regular one is, in words, for a refusal ("a
 * FIFO (named pipe)", "a directory", ...). */
DM_HIDDEN const char *dm_file_kind(mode_t m);

/* Opens `path` for reading (*fd, close-on-exec) and fills *st, refusing anything but a
 * regular file: a FIFO, a directory or a device ("<path>: is a FIFO (named pipe);
 * <hint>"). The open is non-blocking, so a FIFO without a writer is refused at once
 * instead of waiting for one forever; *fd is blocking again on return. ENOENT gives
 * DM_ERR_NOT_FOUND, other failures DM_ERR_IO. */
DM_HIDDEN dm_status dm_open_regular(const char *path, const char *hint, int *fd,
                                    struct stat *st);

/* Nonzero when the file system holding `path` has no block left for us: for writers
 * (LMDB) that report a short write on a full disk as EIO. */
DM_HIDDEN int dm_fs_full(const char *path);

#endif
