/* fileio.c: atomic file replacement, writes in place to devices and FIFOs, and reads
 * that open only regular files (see fileio.h). */
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

const char *dm_file_kind(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO (named pipe)"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

/* The file a symlink at `link` points to: its target, taken relative to the link's
 * folder when it is relative (malloc'd; NULL with errno set on failure). */
static char *link_target(const char *link, off_t size_hint) {
  size_t cap = size_hint > 0 && size_hint < PATH_MAX ? (size_t)size_hint + 1 : PATH_MAX;
  const char *slash = strrchr(link, '/');
  size_t dir = slash ? (size_t)(slash - link) + 1 : 0;
  char *out = malloc(dir + cap + 1);
  if (!out)
    return NULL;
  ssize_t n = readlink(link, out + dir, cap);
  if (n < 0 || (size_t)n >= cap) { /* a link that grew since lstat: give up on it */
    free(out);
    if (n >= 0)
      errno = ENAMETOOLONG;
    return NULL;
  }
  out[dir + (size_t)n] = '\0';
  if (out[dir] == '/')
    memmove(out, out + dir, (size_t)n + 1);
  else
    memcpy(out, link, dir);
  return out;
}

/* Where a write to `path` goes (malloc'd in *dest): a symlink is followed to the file it
 * names, which need not exist yet, so that the target is replaced and the link stays;
 * *in_place is set when what is there is a device, a FIFO or a socket, which are written
 * as they are, never replaced by a regular file. A directory is refused. */
static dm_status resolve_dest(const char *path, char **dest, int *in_place) {
  char *cur = strdup(path);
  *in_place = 0;
  for (int hops = 0; cur; hops++) {
    struct stat st;
    if (lstat(cur, &st) != 0)
      break; /* nothing there yet (or the temporary file's creation will say why not) */
    if (S_ISLNK(st.st_mode)) {
      if (hops == 40) {
        free(cur);
        return dm_error(DM_ERR_IO, "%s: cannot write it: %s", path, strerror(ELOOP));
      }
      char *next = link_target(cur, st.st_size);
      if (!next) {
        int err = errno;
        free(cur);
        return err == ENOMEM ? DM_NOMEM("a file name")
                             : dm_error(DM_ERR_IO, "%s: cannot read the symlink: %s", path,
                                        strerror(err));
      }
      free(cur);
      cur = next;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      free(cur);
      return dm_error(DM_ERR_IO, "%s: is a directory; give a file name", path);
    }
    *in_place = !S_ISREG(st.st_mode);
    break;
  }
  if (!cur)
    return DM_NOMEM("a file name");
  *dest = cur;
  return DM_OK;
}

/* Opens what a write to `path` goes to: a temporary file beside *dest (path, or the
 * file its symlinks lead to) in *tmp, or, for a device, FIFO or socket, the thing itself
 * (*tmp NULL). A FIFO's open waits for its reader, as a shell's redirection does. */
static dm_status open_dest(const char *path, int *fd, char **dest, char **tmp) {
  int in_place = 0;
  *tmp = NULL;
  DM_TRY(resolve_dest(path, dest, &in_place));
  if (!in_place) {
    dm_status s = make_temp(*dest, "file", make_file, fd, tmp);
    if (s != DM_OK) {
      free(*dest);
      *dest = NULL;
    }
    return s;
  }
  struct stat st;
  *fd = open(*dest, O_WRONLY | O_CLOEXEC | O_NOCTTY);
  int err = *fd < 0 ? errno : fstat(*fd, &st) != 0 ? errno : 0;
  if (!err && S_ISREG(st.st_mode))
    err = EAGAIN; /* replaced by a regular file since lstat: not ours to overwrite */
  if (!err)
    return DM_OK;
  if (*fd >= 0)
    close(*fd);
  free(*dest);
  *dest = NULL;
  return dm_error(DM_ERR_IO, "%s: cannot open it for writing: %s", path,
                  err == EAGAIN ? "it changed while being opened" : dm_errno_text(err));
}

/* The end of every write: for a file replaced, fsync (a crash leaves the old file or
 * the whole new one, never an empty one), close and rename the temporary file over
 * `dest` (removed on failure); for one written in place (tmp NULL), close. `path` is
 * the name the caller gave, for the messages. */
static dm_status finish(int fd, dm_status s, const char *tmp, const char *dest,
                        const char *path) {
  if (s == DM_OK && tmp && fsync(fd) != 0)
    s = dm_error(DM_ERR_IO, "%s: write failed: %s", path, dm_errno_text(errno));
  if (close(fd) != 0 && s == DM_OK)
    s = dm_error(DM_ERR_IO, "%s: write failed: %s", path, dm_errno_text(errno));
  if (s == DM_OK && tmp && rename(tmp, dest) != 0)
    s = dm_error(DM_ERR_IO, "%s: cannot replace it: %s", path, dm_errno_text(errno));
  if (s != DM_OK && tmp)
    unlink(tmp);
  return s;
}

dm_status dm_write_file_atomic(const char *path, const void *data, size_t len) {
  if (!path || (!data && len))
    return dm_error(DM_ERR_INVALID, "dm_write_file_atomic: missing argument");
  char *tmp = NULL, *dest = NULL;
  int fd = -1;
  DM_TRY(open_dest(path, &fd, &dest, &tmp));
  dm_status s = dm_write_fd_all(fd, data, len, path);
  s = finish(fd, s, tmp, dest, path);
  free(tmp);
  free(dest);
  return s;
}

static void atomic_free(dm_atomic_file *af) {
  free(af->tmp);
  free(af->path);
  free(af->dest);
  memset(af, 0, sizeof *af);
}

dm_status dm_atomic_open(dm_atomic_file *af, const char *path) {
  memset(af, 0, sizeof *af);
  if (!path)
    return dm_error(DM_ERR_INVALID, "dm_atomic_open: no path");
  int fd = -1;
  DM_TRY(open_dest(path, &fd, &af->dest, &af->tmp));
  if (!(af->path = strdup(path)) || !(af->f = fdopen(fd, "w"))) {
    close(fd);
    if (af->tmp)
      unlink(af->tmp);
    atomic_free(af);
    return DM_NOMEM("a file");
  }
  return DM_OK;
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
    if (af->tmp)
      unlink(af->tmp);
  } else {
    s = finish(fd, s, af->tmp, af->dest, af->path);
  }
  atomic_free(af);
  return s;
}

void dm_atomic_abort(dm_atomic_file *af) {
  if (af->f) {
    fclose(af->f);
    if (af->tmp)
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

dm_status dm_open_regular(const char *path, const char *hint, int *fd, struct stat *st) {
  *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (*fd < 0)
    return dm_error(errno == ENOENT ? DM_ERR_NOT_FOUND : DM_ERR_IO, "%s: cannot open: %s", path,
                    strerror(errno));
  int flags = -1, err = 0;
  if (fstat(*fd, st) != 0 || (S_ISREG(st->st_mode) && (flags = fcntl(*fd, F_GETFL)) < 0) ||
      (flags >= 0 && fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) != 0))
    err = errno;
  dm_status s = err                       ? dm_error(DM_ERR_IO, "%s: cannot open: %s", path,
                                                     strerror(err))
                : !S_ISREG(st->st_mode) ? dm_error(DM_ERR_IO, "%s: is %s; %s", path,
                                                     dm_file_kind(st->st_mode), hint)
                                          : DM_OK;
  if (s != DM_OK) {
    close(*fd);
    *fd = -1;
  }
  return s;
}

int dm_fs_full(const char *path) {
  struct statvfs v;
  return statvfs(path, &v) == 0 && v.f_bavail == 0;
}
