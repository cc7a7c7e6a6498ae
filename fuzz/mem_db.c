/* mem_db.c: core/db.h served from memory (see mem_db.h). Opening any path yields the
 * one global record set; iteration is in LMDB's key order (bytewise, shorter first on
 * a common prefix), which Load's chunk handling may depend on. */
#include "mem_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/db.h"

#define MAX_RECORDS 256

typedef struct rec {
  const void *key, *val;
  size_t klen, vlen;
} rec;

static rec recs[MAX_RECORDS];
static size_t n_recs;

struct dm_db {
  char *path;
};

struct dm_db_iter {
  size_t next;
};

static int key_cmp(const void *a, size_t al, const void *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c : (al > bl) - (al < bl);
}

void fz_memdb_clear(void) { n_recs = 0; }

int fz_memdb_add(const void *key, size_t klen, const void *val, size_t vlen) {
  size_t i = 0;
  while (i < n_recs && key_cmp(recs[i].key, recs[i].klen, key, klen) < 0)
    i++;
  if (i < n_recs && key_cmp(recs[i].key, recs[i].klen, key, klen) == 0) {
    recs[i].val = val, recs[i].vlen = vlen;
    return 1;
  }
  if (n_recs == MAX_RECORDS)
    return 0;
  memmove(&recs[i + 1], &recs[i], (n_recs - i) * sizeof *recs);
  recs[i] = (rec){key, val, klen, vlen};
  n_recs++;
  return 1;
}

dm_status dm_db_open_read(const char *path, dm_db **out) {
  *out = NULL;
  dm_db *db = calloc(1, sizeof *db);
  if (!db || !(db->path = strdup(path))) {
    free(db);
    return DM_NOMEM("a db");
  }
  *out = db;
  return DM_OK;
}

dm_status dm_db_open_write(const char *path, dm_db **out) {
  *out = NULL;
  return dm_error(DM_ERR_UNSUPPORTED, "db '%s': the fuzzing DB is read-only", path);
}

void dm_db_close(dm_db *db) {
  if (db)
    free(db->path);
  free(db);
}

const char *dm_db_path(const dm_db *db) { return db->path; }
size_t dm_db_count(const dm_db *db) { return n_recs; }

dm_status dm_db_get(dm_db *db, const char *key, const void **val, size_t *len) {
  for (size_t i = 0; i < n_recs; i++)
    if (key_cmp(recs[i].key, recs[i].klen, key, strlen(key)) == 0) {
      *val = recs[i].val, *len = recs[i].vlen;
      return DM_OK;
    }
  return dm_error(DM_ERR_NOT_FOUND, "db '%s': no key '%s'", db->path, key);
}

dm_status dm_db_put(dm_db *db, const void *key, size_t klen, const void *val, size_t vlen) {
  return dm_error(DM_ERR_UNSUPPORTED, "db '%s': the fuzzing DB is read-only", db->path);
}

dm_status dm_db_commit(dm_db *db) {
  return dm_error(DM_ERR_UNSUPPORTED, "db '%s': the fuzzing DB is read-only", db->path);
}

dm_status dm_db_iter_open(dm_db *db, dm_db_iter **out) {
  if (!(*out = calloc(1, sizeof **out)))
    return DM_NOMEM("a db iterator");
  return DM_OK;
}

dm_status dm_db_iter_next(dm_db_iter *it, const void **key, size_t *klen, const void **val,
                          size_t *vlen, int *done) {
  *done = it->next >= n_recs;
  if (!*done) {
    const rec *r = &recs[it->next++];
    *key = r->key, *klen = r->klen, *val = r->val, *vlen = r->vlen;
  }
  return DM_OK;
}

void dm_db_iter_close(dm_db_iter *it) { free(it); }

/* core/db.c's text for keys, copied so messages read alike. */
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
