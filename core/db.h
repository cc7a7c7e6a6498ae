/* db.h: a small LMDB wrapper for the data and checkpoint ops (internal).
 *
 * A dm_db is one LMDB environment (a directory holding data.mdb and lock.mdb, as Caffe2
 * writes them) opened either for reading or for writing, never both:
 *
 *  - read: one read-only transaction is opened with the DB and kept until it is closed,
 *    so every value pointer handed out (dm_db_get, dm_db_iter_next) stays valid, and
 *    unchanged, for the DB's lifetime (LMDB values are views into the memory map).
 *    MDB_NOTLS lets that transaction be used from another thread (a prefetch thread),
 *    one thread at a time.
 *  - write: puts go into one write transaction, committed by dm_db_commit; writes are
 *    not synced as they happen (MDB_NOSYNC) because dm_db_commit forces one sync of
 *    the whole file at the end, which is all an atomic checkpoint needs.
 *
 * Errors name the DB's path and, where there is one, the key.
 */
#ifndef DM_CORE_DB_H
#define DM_CORE_DB_H

#include <stddef.h>

#include "status.h"

typedef struct dm_db dm_db;

/* LMDB keys are at most 511 bytes (its compile-time default). */
#define DM_DB_MAX_KEY 511

/* Opens the LMDB directory `path` for reading (DM_ERR_IO naming the path if it is not
 * one). */
DM_HIDDEN dm_status dm_db_open_read(const char *path, dm_db **out);
/* Creates the directory `path` (it must not exist yet, or be empty) and opens it for
 * writing. */
DM_HIDDEN dm_status dm_db_open_write(const char *path, dm_db **out);
/* Closes; an uncommitted write transaction is discarded. NULL is fine. */
DM_HIDDEN void dm_db_close(dm_db *db);
DM_HIDDEN const char *dm_db_path(const dm_db *db);

/* Number of records (read mode). */
DM_HIDDEN size_t dm_db_count(const dm_db *db);
/* The value of `key` (read mode): borrowed until dm_db_close. DM_ERR_NOT_FOUND naming the
 * key if absent. */
DM_HIDDEN dm_status dm_db_get(dm_db *db, const char *key, const void **val, size_t *len);

/* Adds or replaces a record (write mode). */
DM_HIDDEN dm_status dm_db_put(dm_db *db, const void *key, size_t klen, const void *val,
                              size_t vlen);
/* Commits the write transaction and forces the data to disk (mdb_env_sync(force=1)). */
DM_HIDDEN dm_status dm_db_commit(dm_db *db);

/* Iteration in key order (read mode). Key and value are borrowed until dm_db_close. */
typedef struct dm_db_iter dm_db_iter;
DM_HIDDEN dm_status dm_db_iter_open(dm_db *db, dm_db_iter **out);
/* *done is set (and nothing else) after the last record. */
DM_HIDDEN dm_status dm_db_iter_next(dm_db_iter *it, const void **key, size_t *klen,
                                    const void **val, size_t *vlen, int *done);
DM_HIDDEN void dm_db_iter_close(dm_db_iter *it);

/* A key as printable text for messages ("00000042", or hex escapes for binary keys). */
DM_HIDDEN const char *dm_db_key_str(const void *key, size_t klen, char *buf, size_t cap);

#endif
