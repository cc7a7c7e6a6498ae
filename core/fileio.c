/* fileio.c: atomic file replacement (see fileio.h). */
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

const char *dm_errno_text(int err) {
  if (err == ENOSPC)
    return "disk full (no space left on device)";
#ifdef EDQUOT
  if (err == EDQUOT)
    return "disk full (disk quota exceeded)";
#endif
  return strerror(err);
}

dm_status dm_write_fd_all(int fd, const void *data, size_t len, const char *name) {
  const unsigned char *p = data;
  for (size_t done = 0; done < len;) {
    ssize_t w = write(fd, p + done, len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) /* 0 for a non-empty write: the device took nothing; call it full */
      return dm_error(DM_ERR_IO, "%s: write failed: %s", name,
                      dm_errno_text(w < 0 ? errno : ENOSPC));
    done += (size_t)w;
  }
  return DM_OK;
}

/* A fresh name beside `path` for a temporary file or directory, unique to this process
 * and call; `make` creates it (failing with EEXIST when it is taken). */
static dm_status make_temp(const char *path, const char *what, int (*make)(const char *, void *),
                           void *arg, char **out) {
  static _Atomic unsigned counter;
  size_t cap = strlen(path) + 48;
  char *tmp = malloc(cap);
  if (!tmp)
    return DM_NOMEM("a file name");
  for (int tries = 0;; tries++) {
    snprintf(tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
    if (make(tmp, arg) == 0)
      break;
    if (errno != EEXIST || tries == 100) {
      int err = errno;
      free(tmp);
      return dm_error(DM_ERR_IO, "%s: cannot create a temporary %s beside it: %s", path, what,
                      dm_errno_text(err));
    }
  }
  *out = tmp;
  return DM_OK;
}

static int make_file(const char *tmp, void *fd) {
  *(int *)fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  return *(int *)fd < 0 ? -1 : 0;
}

static int make_dir(const char *tmp, void *unused) {
  (void)unused;
  return mkdir(tmp, 0775);
}

/* The end of every atomic write: fsync (a crash leaves the old file or the whole new
 * one, never an empty one), close, rename; the temporary file is removed on failure. */
static dm_status finish(int fd, dm_status s, const char *tmp, const char *path) {
  if (s == DM_OK && fsync(fd) != 0)
    s = dm_error(DM_ERR_IO, "%s: write failed: %s", path, dm_errno_text(errno));
  if (close(fd) != 0 && s == DM_OK)
    s = dm_error(DM_ERR_IO, "%s: write failed: %s", path, dm_errno_text(errno));
  if (s == DM_OK && rename(tmp, path) != 0)
    s = dm_error(DM_ERR_IO, "%s: cannot replace it: %s", path, dm_errno_text(errno));
  if (s != DM_OK)
    unlink(tmp);
  return s;
}

dm_status dm_write_file_atomic(const char *path, const void *data, size_t len) {
  if (!path || (!data && len))
    return dm_error(DM_ERR_INVALID, "dm_write_file_atomic: missing argument");
  char *tmp = NULL;
  int fd = -1;
  DM_TRY(make_temp(path, "file", make_file, &fd, &tmp));
  dm_status s = dm_write_fd_all(fd, data, len, path);
  s = finish(fd, s, tmp, path);
  free(tmp);
  return s;
}

dm_status dm_atomic_open(dm_atomic_file *af, const char *path) {
  memset(af, 0, sizeof *af);
  if (!path)
    return dm_error(DM_ERR_INVALID, "dm_atomic_open: no path");
  int fd = -1;
  DM_TRY(make_temp(path, "file", make_file, &fd, &af->tmp));
  if (!(af->path = strdup(path)) || !(af->f = fdopen(fd, "w"))) {
    close(fd);
    unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    memset(af, 0, sizeof *af);
    return DM_NOMEM("a file");
  }
  return DM_OK;
}

static void atomic_free(dm_atomic_file *af) {
  free(af->tmp);
  free(af->path);
  memset(af, 0, sizeof *af);
}

dm_status dm_atomic_commit(dm_atomic_file *af) {
  if (!af->f)
    return dm_error(DM_ERR_INVALID, "dm_atomic_commit: no file open");
  dm_status s = DM_OK;
  /* A failed write sets the stream's error flag; the flush retries what is buffered and
   * so says why (ENOSPC) even when the errno of the first failure is long gone. */
  errno = 0;
  if (fflush(af->f) != 0 || ferror(af->f) || af->err)
    s = dm_error(DM_ERR_IO, "%s: write failed: %s", af->path,
                 dm_errno_text(af->err ? af->err : errno ? errno : EIO));
  int fd = dup(fileno(af->f));
  fclose(af->f); /* flushed above: nothing left to fail */
  af->f = NULL;
  if (fd < 0) {
    if (s == DM_OK)
      s = dm_error(DM_ERR_IO, "%s: write failed: %s", af->path, dm_errno_text(errno));
    unlink(af->tmp);
  } else {
    s = finish(fd, s, af->tmp, af->path);
  }
  atomic_free(af);
  return s;
}

void dm_atomic_abort(dm_atomic_file *af) {
  if (af->f) {
    fclose(af->f);
    unlink(af->tmp);
  }
  atomic_free(af);
}

dm_status dm_atomic_dir_create(const char *path, char **tmp) {
  *tmp = NULL;
  if (!path)
    return dm_error(DM_ERR_INVALID, "dm_atomic_dir_create: no path");
  return make_temp(path, "directory", make_dir, NULL, tmp);
}

/* fsyncs the plain files in `dir` and `dir` itself */
static int sync_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  int rc = 0;
  for (struct dirent *e; rc == 0 && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fsync(fd) != 0)
      rc = -1;
    if (fd >= 0)
      close(fd);
  }
  if (rc == 0 && fsync(dirfd(d)) != 0)
    rc = -1;
  int err = errno;
  closedir(d);
  errno = err;
  return rc;
}

dm_status dm_atomic_dir_commit(const char *tmp, const char *path) {
  if (sync_dir(tmp) != 0)
    return dm_error(DM_ERR_IO, "%s: write failed: %s", path, dm_errno_text(errno));
  if (rename(tmp, path) != 0) {
    int err = errno;
    if (err == ENOTEMPTY || err == EEXIST)
      return dm_error(DM_ERR_EXISTS, "%s already exists (and is not an empty directory)", path);
    return dm_error(DM_ERR_IO, "%s: cannot put it in place: %s", path, dm_errno_text(err));
  }
  return DM_OK;
}

void dm_atomic_dir_remove(const char *tmp) {
  if (!tmp)
    return;
  DIR *d = opendir(tmp);
  if (d) {
    for (struct dirent *e; (e = readdir(d));)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
  }
  rmdir(tmp);
}

int dm_fs_full(const char *path) {
  struct statvfs v;
  return statvfs(path, &v) == 0 && v.f_bavail == 0;
}
