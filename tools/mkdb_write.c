/* mkdb_write.c: make-db's LMDB output, shared by its MNIST and text modes (see
 * mkdb_write.h). */
#include "mkdb_write.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/db.h"
#include "core/fileio.h"

/* Writes the records of `o` into a fresh LMDB at `path` (o's temporary directory). */
static dm_status write_db(const char *path, const dm_mkdb_out *o) {
  /* LMDB maps its lock file and writes into the map: on a full disk that is a SIGBUS,
   * not an error. Its blocks are allocated here first, so a full disk is refused. */
  size_t plen = strlen(path);
  char *lock = malloc(plen + 16);
  if (!lock)
    return DM_NOMEM("a path");
  snprintf(lock, plen + 16, "%s/lock.mdb", path);
  int fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0664);
  int err = fd < 0 ? errno : posix_fallocate(fd, 0, 64 << 10);
  if (fd >= 0)
    close(fd);
  free(lock);
  if (err)
    return dm_error(DM_ERR_IO, "db '%s': cannot create its lock file: %s", path,
                    dm_errno_text(err));
  dm_db *db = NULL;
  DM_TRY(dm_db_open_write(path, &db));
  dm_status s = DM_OK;
  uint8_t *buf = NULL;
  size_t cap = 0;
  for (int64_t i = 0; i < o->n && s == DM_OK; i++) {
    const Caffe2__TensorProtos *rec = NULL;
    if ((s = o->fill(o->ctx, i, &rec)) != DM_OK)
      break;
    size_t n = protobuf_c_message_get_packed_size(&rec->base);
    if (n > cap) { /* varint-packed records differ in size */
      uint8_t *grown = realloc(buf, n);
      if (!grown) {
        s = DM_NOMEM("a record");
        break;
      }
      buf = grown;
      cap = n;
    }
    char key[32];
    int klen = snprintf(key, sizeof key, "%08lld", (long long)i);
    protobuf_c_message_pack(&rec->base, buf);
    s = dm_db_put(db, key, (size_t)klen, buf, n);
  }
  free(buf);
  if (s == DM_OK)
    s = dm_db_commit(db);
  dm_db_close(db);
  return s;
}

/* LMDB reports a short write (a full disk) as EIO: say "disk full" when it is. */
static dm_status db_failed(dm_status s, const char *out, const char *tmp) {
  if (s == DM_ERR_IO && dm_fs_full(tmp) && !strstr(dm_last_error(), "disk full"))
    return dm_error_prefix(s, "%s: disk full", out);
  return dm_error_prefix(s, "%s", out);
}

dm_status dm_mkdb_refuse_existing(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return errno == ENOENT ? DM_OK
                           : dm_error(DM_ERR_IO, "db '%s': %s", path, dm_errno_text(errno));
  int empty = 1;
  for (struct dirent *e; empty && (e = readdir(d));)
    empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
  closedir(d);
  return empty ? DM_OK
               : dm_error(DM_ERR_EXISTS, "db '%s' already exists (and is not an empty directory)",
                          path);
}

/* The records, then the extra file: LMDB wants an empty directory to start in, and the
 * directory becomes visible with both at once when it is renamed into place. */
static dm_status build(const dm_mkdb_out *o, const char *tmp) {
  dm_status s = write_db(tmp, o);
  if (s == DM_OK && o->extra_name) {
    size_t n = strlen(tmp) + strlen(o->extra_name) + 2;
    char *path = malloc(n);
    if (!path)
      return DM_NOMEM("a path");
    snprintf(path, n, "%s/%s", tmp, o->extra_name);
    s = dm_write_file_atomic(path, o->extra, o->extra_len);
    free(path);
  }
  return s == DM_OK ? s : db_failed(s, o->path, tmp);
}

dm_status dm_mkdb_write(const dm_mkdb_out *outs, size_t n) {
  char **tmp = calloc(n ? n : 1, sizeof *tmp);
  if (!tmp)
    return DM_NOMEM("the output paths");
  dm_status s = DM_OK;
  for (size_t i = 0; i < n && s == DM_OK; i++) {
    s = dm_mkdb_refuse_existing(outs[i].path);
    for (size_t j = 0; j < i && s == DM_OK; j++)
      if (strcmp(outs[i].path, outs[j].path) == 0) /* the second rename would fail */
        s = dm_error(DM_ERR_INVALID, "db '%s' is given for two outputs", outs[i].path);
  }
  for (size_t i = 0; i < n && s == DM_OK; i++)
    s = dm_atomic_dir_create(outs[i].path, &tmp[i]);
  for (size_t i = 0; i < n && s == DM_OK; i++)
    s = build(&outs[i], tmp[i]);
  for (size_t i = 0; i < n && s == DM_OK; i++)
    if ((s = dm_atomic_dir_commit(tmp[i], outs[i].path)) == DM_OK) {
      free(tmp[i]);
      tmp[i] = NULL;
    }
  for (size_t i = 0; i < n; i++) {
    dm_atomic_dir_remove(tmp[i]);
    free(tmp[i]);
  }
  free(tmp);
  return s;
}
