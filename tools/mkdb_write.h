/* mkdb_write.h: the LMDBs that `make-db` writes, for the MNIST and the text mode alike:
 * records keyed "%08d" (the record's number within its DB), each value a serialised
 * Caffe2 TensorProtos, every DB built in a temporary directory beside its target and
 * renamed into place only when all of them are complete (core/fileio.h), so a failed
 * make-db (a full disk) leaves no half-written DB and nothing in the way of the next try.
 */
#ifndef DM_TOOLS_MKDB_WRITE_H
#define DM_TOOLS_MKDB_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

/* Record i of [0, n) of a DB -> *rec, a message the callback owns (it may reuse one,
 * changing its data pointers each call). */
typedef dm_status (*dm_mkdb_fill_fn)(void *ctx, int64_t i, const Caffe2__TensorProtos **rec);

typedef struct dm_mkdb_out {
  const char *path;     /* the DB directory; it must not exist, or be an empty directory */
  int64_t n;            /* the number of records */
  dm_mkdb_fill_fn fill;
  void *ctx;
  /* a file written into the DB directory beside LMDB's (vocab.txt); NULL: none */
  const char *extra_name;
  const void *extra;
  size_t extra_len;
} dm_mkdb_out;

/* DM_ERR_EXISTS naming `path` when a DB would not be made there: it exists and is not
 * an empty directory (for a check before the inputs are read). */
dm_status dm_mkdb_refuse_existing(const char *path);

/* Makes the n DBs of outs, all or none: each output that exists already is refused
 * before anything is written; an error names the DB (and "disk full" when it is). */
dm_status dm_mkdb_write(const dm_mkdb_out *outs, size_t n);

#endif
