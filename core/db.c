/* db.c: the LMDB wrapper (see db.h). */
#include "db.h"
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest a written DB may grow (Caffe2 uses 1 TiB too). It is address space, not
 * disk: data.mdb grows only as records are written. */
#define WRITE_MAP_SIZE ((size_t)1 << 40)

struct dm_db {
  MDB_env *env;
  MDB_dbi dbi;
  MDB_txn *txn; /* read: the one snapshot; write: the open write transaction or NULL */
  int write;
  size_t count;
  char *path;
};

struct dm_db_iter {
  dm_db *db;
  MDB_cursor *cur;
  int started;
};

static dm_status lmdb_fail(int rc, const char *path, const char *what) {
  /* LMDB turns a short write (a full disk) into EIO: say what it was */
  if (rc == EIO && dm_fs_full(path))
    rc = ENOSPC;
  return dm_error(rc == ENOENT ? DM_ERR_NOT_FOUND : DM_ERR_IO, "db '%s': %s: %s", path, what,
                  rc > 0 ? dm_errno_text(rc) : mdb_strerror(rc)); /* "disk full" for ENOSPC */
}

const char *dm_db_path(const dm_db *db) { return db->path; }
size_t dm_db_count(const dm_db *db) { return db->count; }

const char *dm_db_key_str(const void *key, size_t klen, char *buf, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *k = key;
  size_t o = 0;
  for (size_t i = 0; i < klen && o + 5 < cap; i++) {
    if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\') {
      buf[o++] = (char)k[i];
    } else {
      buf[o++] = '\\';
      buf[o++] = 'x';
      buf[o++] = hex[k[i] >> 4];
      buf[o++] = hex[k[i] & 15];
    }
  }
  if (cap)
    buf[o < cap ? o : cap - 1] = '\0';
  return buf;
}

static dm_status db_new(const char *path, int write, dm_db **out) {
  dm_db *db = calloc(1, sizeof *db);
  if (!db || !(db->path = strdup(path))) {
    free(db);
    return DM_NOMEM("a db handle");
  }
  db->write = write;
  int rc = mdb_env_create(&db->env);
  if (rc == 0 && write)
    rc = mdb_env_set_mapsize(db->env, WRITE_MAP_SIZE);
  if (rc != 0) {
    dm_db_close(db);
    return lmdb_fail(rc, path, "cannot create an LMDB environment");
  }
  *out = db;
  return DM_OK;
}

/* LMDB reads its pages through a memory map sized from the meta page, not from the file: a
 * page past the end of a truncated data.mdb is a SIGBUS when touched. mdb_env_open read the
 * two meta pages with pread (refusing a file too short for them, MDB_INVALID), so the meta
 * fields below are in the file; every page up to me_last_pgno must be too. */
static dm_status check_file_size(dm_db *db) {
  MDB_envinfo info;
  MDB_stat st;
  mdb_filehandle_t fd;
  struct stat fs;
  int rc = mdb_env_info(db->env, &info);
  if (rc == 0)
    rc = mdb_env_stat(db->env, &st);
  if (rc == 0)
    rc = mdb_env_get_fd(db->env, &fd);
  if (rc != 0)
    return lmdb_fail(rc, db->path, "cannot read its meta page");
  if (fstat(fd, &fs) != 0)
    return dm_error(DM_ERR_IO, "db '%s': cannot stat %s/data.mdb: %s", db->path, db->path,
                    strerror(errno));
  uint64_t need;
  if (__builtin_mul_overflow((uint64_t)info.me_last_pgno + 1, (uint64_t)st.ms_psize, &need) ||
      (uint64_t)fs.st_size < need)
    return dm_error(DM_ERR_PARSE,
                    "db '%s': %s/data.mdb is truncated: it is %lld bytes, but its meta page "
                    "says it holds %llu pages of %u bytes (%llu bytes)",
                    db->path, db->path, (long long)fs.st_size,
                    (unsigned long long)info.me_last_pgno + 1, st.ms_psize,
                    (unsigned long long)((uint64_t)info.me_last_pgno + 1) * st.ms_psize);
  return DM_OK;
}

/* LMDB sizes its lock file with ftruncate, maps it and writes its reader table into the
 * map: on a full disk (a sparse file whose pages cannot be allocated) that is a SIGBUS,
 * not an error. So the lock file's blocks are allocated here first: a new one gets 64 KiB
 * (LMDB's default 126 readers fit, and LMDB uses a larger file as it is), one that
 * exists its own size. 0, or the errno that stopped it. */
static int prepare_lock_file(const char *path) {
  char lock[4096];
  if (snprintf(lock, sizeof lock, "%s/lock.mdb", path) >= (int)sizeof lock)
    return ENAMETOOLONG;
  int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (fd < 0)
    return errno;
  struct stat st;
  int err = fstat(fd, &st) != 0 ? errno : 0;
  /* posix_fallocate returns its error; a file system without it (EOPNOTSUPP, EINVAL)
   * gets LMDB's own ftruncate */
  off_t want = st.st_size > 0 ? st.st_size : 64 << 10; /* a file in use keeps its size */
  if (!err && (off_t)st.st_blocks * 512 < want)
    err = posix_fallocate(fd, 0, want);
  close(fd);
  return err == EOPNOTSUPP || err == EINVAL ? 0 : err;
}

/* Read-only, LMDB answers a folder without data.mdb with ENOENT and an empty data.mdb
 * with EBADF (it would write the first meta pages): both say what is missing instead. */
static dm_status check_data_file(const char *path) {
  char data[4096];
  struct stat st;
  if (snprintf(data, sizeof data, "%s/data.mdb", path) >= (int)sizeof data)
    return dm_error(DM_ERR_IO, "db '%s': %s", path, strerror(ENAMETOOLONG));
  if (stat(data, &st) != 0 && errno == ENOENT)
    return dm_error(DM_ERR_NOT_FOUND, "db '%s': the folder holds no LMDB (no data.mdb in it): "
                    "not a database made by `demitasse make-db` or a checkpoint made by Save",
                    path);
  if (stat(data, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
    return dm_error(DM_ERR_PARSE, "db '%s': %s is empty (0 bytes): not an LMDB (an "
                    "interrupted write, or a placeholder file?)", path, data);
  return DM_OK; /* anything else: LMDB's own open says what is wrong */
}

dm_status dm_db_open_read(const char *path, dm_db **out) {
  *out = NULL;
  struct stat st;
  if (stat(path, &st) != 0)
    return dm_error(errno == ENOENT ? DM_ERR_NOT_FOUND : DM_ERR_IO, "db '%s': %s", path,
                    strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return dm_error(DM_ERR_IO, "db '%s': not an LMDB directory", path);
  DM_TRY(check_data_file(path));
  dm_db *db;
  DM_TRY(db_new(path, 0, &db));
  /* MDB_NOTLS: the snapshot may be read from a prefetch thread. A lock file that cannot
   * be allocated (a full disk; a read-only directory, below) is done without: its reader
   * table only matters when a writer shares the DB, and checkpoint versions and make-db's
   * DBs are complete before anything reads them. */
  int lock_err = prepare_lock_file(path);
  int rc = lock_err == ENOSPC || lock_err == EDQUOT
               ? EACCES
               : mdb_env_open(db->env, path, MDB_RDONLY | MDB_NOTLS, 0664);
  if (rc == EACCES || rc == EROFS) {
    /* A read-only directory cannot hold lock.mdb: read without the reader table, which
     * only matters when a writer shares the DB (then the directory is writable). */
    mdb_env_close(db->env);
    db->env = NULL;
    if ((rc = mdb_env_create(&db->env)) == 0)
      rc = mdb_env_open(db->env, path, MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0664);
  }
  const char *what = "cannot open";
  if (rc == MDB_INVALID) {
    dm_db_close(db);
    return dm_error(DM_ERR_PARSE, "db '%s': %s/data.mdb is not an LMDB data file (or is too "
                    "short to hold its meta pages): %s", path, path, mdb_strerror(rc));
  }
  if (rc == 0) {
    dm_status s = check_file_size(db);
    if (s != DM_OK) {
      dm_db_close(db);
      return s;
    }
  }
  if (rc == 0 && (rc = mdb_txn_begin(db->env, NULL, MDB_RDONLY, &db->txn)) != 0)
    what = "cannot begin a read transaction";
  if (rc == 0 && (rc = mdb_dbi_open(db->txn, NULL, 0, &db->dbi)) != 0)
    what = "cannot open the main database";
  MDB_stat ms;
  if (rc == 0 && (rc = mdb_stat(db->txn, db->dbi, &ms)) != 0)
    what = "cannot read its size";
  if (rc != 0) {
    dm_db_close(db);
    return lmdb_fail(rc, path, what);
  }
  db->count = ms.ms_entries;
  *out = db;
  return DM_OK;
}

/* Empty but for a lock file, which LMDB resets: make-db allocates one before LMDB maps
 * it, so that a full disk is an error there and not a SIGBUS in LMDB. */
static int dir_is_empty(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return 0;
  int empty = 1;
  for (struct dirent *e; empty && (e = readdir(d));)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
        strcmp(e->d_name, "lock.mdb") != 0)
      empty = 0;
  closedir(d);
  return empty;
}

dm_status dm_db_open_write(const char *path, dm_db **out) {
  *out = NULL;
  if (mkdir(path, 0775) != 0) {
    if (errno != EEXIST)
      return dm_error(DM_ERR_IO, "db '%s': cannot create the directory: %s", path,
                      strerror(errno));
    if (!dir_is_empty(path))
      return dm_error(DM_ERR_EXISTS, "db '%s' already exists (and is not an empty directory)",
                      path);
  }
  int err = prepare_lock_file(path);
  if (err)
    return dm_error(DM_ERR_IO, "db '%s': cannot create its lock file: %s", path,
                    dm_errno_text(err)); /* "disk full" for ENOSPC */
  dm_db *db;
  DM_TRY(db_new(path, 1, &db));
  int rc = mdb_env_open(db->env, path, MDB_NOSYNC | MDB_NOMETASYNC, 0664);
  const char *what = "cannot open for writing";
  if (rc == 0 && (rc = mdb_txn_begin(db->env, NULL, 0, &db->txn)) != 0)
    what = "cannot begin a write transaction";
  if (rc == 0 && (rc = mdb_dbi_open(db->txn, NULL, 0, &db->dbi)) != 0)
    what = "cannot open the main database";
  if (rc != 0) {
    dm_db_close(db);
    return lmdb_fail(rc, path, what);
  }
  *out = db;
  return DM_OK;
}

void dm_db_close(dm_db *db) {
  if (!db)
    return;
  if (db->txn)
    mdb_txn_abort(db->txn);
  if (db->env)
    mdb_env_close(db->env);
  free(db->path);
  free(db);
}

dm_status dm_db_get(dm_db *db, const char *key, const void **val, size_t *len) {
  size_t klen = strlen(key);
  if (db->write || !db->txn)
    return dm_error(DM_ERR_INVALID, "db '%s': not open for reading", db->path);
  if (klen == 0 || klen > DM_DB_MAX_KEY)
    return dm_error(DM_ERR_NOT_FOUND, "db '%s': no key '%s' (keys are 1 to %d bytes)", db->path,
                    key, DM_DB_MAX_KEY);
  MDB_val k = {klen, (void *)key}, v;
  int rc = mdb_get(db->txn, db->dbi, &k, &v);
  if (rc == MDB_NOTFOUND)
    return dm_error(DM_ERR_NOT_FOUND, "db '%s': no key '%s'", db->path, key);
  if (rc != 0)
    return dm_error(DM_ERR_IO, "db '%s': key '%s': %s", db->path, key, mdb_strerror(rc));
  *val = v.mv_data;
  *len = v.mv_size;
  return DM_OK;
}

dm_status dm_db_put(dm_db *db, const void *key, size_t klen, const void *val, size_t vlen) {
  char ks[96];
  if (!db->write || !db->txn)
    return dm_error(DM_ERR_INVALID, "db '%s': not open for writing", db->path);
  if (klen == 0 || klen > DM_DB_MAX_KEY)
    return dm_error(DM_ERR_LIMIT, "db '%s': key '%s' is %zu bytes (LMDB allows 1 to %d)",
                    db->path, dm_db_key_str(key, klen, ks, sizeof ks), klen, DM_DB_MAX_KEY);
  MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
  int rc = mdb_put(db->txn, db->dbi, &k, &v, 0);
  if (rc != 0)
    return dm_error(DM_ERR_IO, "db '%s': cannot write key '%s' (%zu bytes): %s", db->path,
                    dm_db_key_str(key, klen, ks, sizeof ks), vlen, mdb_strerror(rc));
  return DM_OK;
}

dm_status dm_db_commit(dm_db *db) {
  if (!db->write || !db->txn)
    return dm_error(DM_ERR_INVALID, "db '%s': no write transaction to commit", db->path);
  int rc = mdb_txn_commit(db->txn);
  db->txn = NULL; /* committed or freed either way */
  if (rc != 0)
    return lmdb_fail(rc, db->path, "cannot commit");
  /* The environment was opened MDB_NOSYNC: this is the one flush, data and meta page. */
  if ((rc = mdb_env_sync(db->env, 1)) != 0)
    return lmdb_fail(rc, db->path, "cannot sync to disk");
  return DM_OK;
}

dm_status dm_db_iter_open(dm_db *db, dm_db_iter **out) {
  *out = NULL;
  if (db->write || !db->txn)
    return dm_error(DM_ERR_INVALID, "db '%s': not open for reading", db->path);
  dm_db_iter *it = calloc(1, sizeof *it);
  if (!it)
    return DM_NOMEM("a db cursor");
  it->db = db;
  int rc = mdb_cursor_open(db->txn, db->dbi, &it->cur);
  if (rc != 0) {
    free(it);
    return lmdb_fail(rc, db->path, "cannot open a cursor");
  }
  *out = it;
  return DM_OK;
}

dm_status dm_db_iter_next(dm_db_iter *it, const void **key, size_t *klen, const void **val,
                          size_t *vlen, int *done) {
  MDB_val k, v;
  int rc = mdb_cursor_get(it->cur, &k, &v, it->started ? MDB_NEXT : MDB_FIRST);
  it->started = 1;
  *done = rc == MDB_NOTFOUND;
  if (*done)
    return DM_OK;
  if (rc != 0)
    return lmdb_fail(rc, it->db->path, "cannot read the next record");
  *key = k.mv_data;
  *klen = k.mv_size;
  *val = v.mv_data;
  *vlen = v.mv_size;
  return DM_OK;
}

void dm_db_iter_close(dm_db_iter *it) {
  if (!it)
    return;
  mdb_cursor_close(it->cur);
  free(it);
}
