/* save_load.c: Save and Load, checkpoints in LMDB (Caffe2's ops and record format).
 *
 * Records are Caffe2's: key "<blob>#%<chunk>", value a serialised BlobProto {name, type
 * "Tensor", tensor} whose TensorProto carries name, dims, data_type, segment {begin,
 * end} (the chunk's element range) and the values in Caffe2's field for the dtype:
 * FLOAT float_data, DOUBLE double_data, INT32 int32_data, INT64 int64_data, STRING
 * string_data, and BOOL/UINT8/INT8/UINT16/INT16 and FLOAT16 (and our BFLOAT16) as one
 * int32_data value each (FLOAT16 as its 16-bit pattern), which is what Caffe2 writes by
 * default. Tensors are cut into chunks of `chunk_size` elements (Caffe2's default
 * 1,000,000) so no single message grows without bound. Load also reads whole-tensor
 * records under the plain blob name, byte_data for FLOAT16/BYTE/UINT8, and raw_data.
 * Strings are NUL-terminated here, so a string with a NUL byte is cut at it.
 *
 * Checksums. Each record Save writes ends in one more BlobProto field that Caffe2's
 * schema does not have: field 1000, wire type fixed32 (the bytes C5 3E, then 4 bytes
 * little-endian), holding the CRC-32 (zlib's) of every byte of the record before it.
 * A protobuf parser that does not know a field skips it (Caffe2's C++ proto2 parser
 * keeps it among the unknown fields, which DeserializeBlob never reads; protoc --decode
 * prints it as `1000: 0x...`), so Caffe2's Load, load_all included, reads these
 * these checkpoints: the keys are unchanged and no extra record is written. Load here
 * checks it and refuses a record whose bytes changed after Save wrote them (a damaged
 * disk, a stray write), naming the checkpoint, the key and the blob: without the sum,
 * flipped bytes inside a blob's values would load as garbage without a word. A record
 * without it (Caffe2's own) loads unchecked. A checksummed
 * record must also carry its key's blob name. An unknown fixed32 field other than 1000
 * is read as a damaged checksum tag (no Caffe2 BlobProto field is fixed32), so a flip in
 * the tag bytes cannot pass the record off as an unchecked one.
 *
 * Paths: `db` is used as given (relative to the current directory). `absolute_path` is
 * accepted and changes nothing: Caffe2 prefixes a workspace root folder unless it is
 * set, and that root is empty by default. Only db_type "lmdb" exists; `keep_device` is
 * accepted (tensors load to the CPU, the only place they live here).
 *
 * Atomic saves. LMDB is a directory, and rename() cannot replace a non-empty directory,
 * so `<db>` is a symbolic link to a version directory `<db>.v<k>` beside it:
 *   1. leftovers of interrupted saves (`<db>.v<j>`, j not the current k) are removed;
 *   2. the blobs are written into a fresh `<db>.v<k+1>`, committed and fsync'd (data,
 *      then the directory entry);
 *   3. a temporary link `<db>.lnk-<pid>` -> `<db base>.v<k+1>` is renamed over `<db>`
 *      (rename replaces a link atomically) and the parent directory is fsync'd;
 *   4. `<db>.v<k>` is removed.
 * A crash before the rename in 3 leaves `<db>` pointing at the complete old version; one
 * after it, at the complete new one; so a Load always sees every blob of one save. The
 * link's target is relative, so the checkpoint folder can be moved. Load resolves the
 * link once and opens that version directly (LMDB opens two files; resolving once keeps
 * them from two different versions), and also opens plain LMDB directories (Caffe2's).
 * Save refuses to replace a plain directory or file at `<db>`. Two processes saving to
 * the same `db` at once are not supported.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "builtin.h"
#include "common.h"
#include "core/db.h"
#include "core/netio.h"
#include "core/workspace.h"
#include "proto/caffe2.pb-c.h"

#define DEFAULT_CHUNK 1000000
#define CHUNK_SEP "#%"

/* ---- the version directory scheme ------------------------------------------------- */

typedef struct ckpt_path {
  char dir[PATH_MAX];  /* the folder holding <db> */
  char base[NAME_MAX + 1];
} ckpt_path;

static dm_status split_path(const char *db, ckpt_path *p) {
  char tmp[PATH_MAX];
  if (!*db || strlen(db) >= sizeof tmp)
    return dm_error(DM_ERR_INVALID, "db path '%s' is empty or too long", db);
  strcpy(tmp, db);
  size_t n = strlen(tmp);
  while (n > 1 && tmp[n - 1] == '/')
    tmp[--n] = '\0';
  char *slash = strrchr(tmp, '/');
  const char *base = slash ? slash + 1 : tmp;
  if (strlen(base) + 32 > sizeof p->base || !strcmp(base, ".") || !strcmp(base, ".."))
    return dm_error(DM_ERR_INVALID, "db path '%s' does not end in a usable name", db);
  strcpy(p->base, base);
  if (!slash)
    strcpy(p->dir, ".");
  else if (slash == tmp)
    strcpy(p->dir, "/");
  else {
    *slash = '\0';
    strcpy(p->dir, tmp);
  }
  return DM_OK;
}

/* k when `name` is "<base>.v<k>", else -1. */
static long version_of(const ckpt_path *p, const char *name) {
  size_t bl = strlen(p->base);
  if (strncmp(name, p->base, bl) != 0 || strncmp(name + bl, ".v", 2) != 0)
    return -1;
  const char *d = name + bl + 2;
  if (!*d || strlen(d) > 9)
    return -1;
  for (const char *c = d; *c; c++)
    if (!isdigit((unsigned char)*c))
      return -1;
  return atol(d);
}

static dm_status fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return dm_error(DM_ERR_IO, "cannot fsync '%s': %s", path, strerror(e));
  }
  close(fd);
  return DM_OK;
}

/* Removes an LMDB version directory (flat: data.mdb, lock.mdb). */
static void remove_version(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    char f[PATH_MAX];
    for (struct dirent *e; (e = readdir(d));)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
          snprintf(f, sizeof f, "%s/%s", path, e->d_name) < (int)sizeof f)
        unlink(f);
    closedir(d);
  }
  rmdir(path);
}

/* The current version k of `db` (0: none yet). Fails when `db` is not a link we made. */
static dm_status current_version(const char *db, const ckpt_path *p, long *k) {
  struct stat st;
  *k = 0;
  if (lstat(db, &st) != 0) {
    if (errno == ENOENT)
      return DM_OK;
    return dm_error(DM_ERR_IO, "db '%s': %s", db, strerror(errno));
  }
  char target[PATH_MAX];
  ssize_t n = S_ISLNK(st.st_mode) ? readlink(db, target, sizeof target - 1) : -1;
  if (n >= 0) {
    target[n] = '\0';
    *k = version_of(p, target);
  }
  if (*k <= 0)
    return dm_error(DM_ERR_EXISTS,
                    "db '%s' exists and is not a checkpoint link made by Save (-> %s.v<k>); "
                    "remove it or save elsewhere",
                    db, p->base);
  return DM_OK;
}

/* Removes the leftovers of interrupted saves: versions other than `keep`, our stale
 * temporary links. */
static void remove_leftovers(const ckpt_path *p, long keep) {
  DIR *d = opendir(p->dir);
  if (!d)
    return;
  char f[PATH_MAX], lnk[NAME_MAX + 1];
  if (snprintf(lnk, sizeof lnk, "%s.lnk-", p->base) >= (int)sizeof lnk) {
    closedir(d);
    return;
  }
  for (struct dirent *e; (e = readdir(d));) {
    long v = version_of(p, e->d_name);
    if (snprintf(f, sizeof f, "%s/%s", p->dir, e->d_name) >= (int)sizeof f)
      continue;
    if (v > 0 && v != keep)
      remove_version(f);
    else if (strncmp(e->d_name, lnk, strlen(lnk)) == 0) {
      struct stat st;
      if (lstat(f, &st) == 0 && S_ISLNK(st.st_mode))
        unlink(f);
    }
  }
  closedir(d);
}

typedef dm_status (*write_fn)(dm_db *db, void *user);

/* Steps 1 to 4 above, with `fill` writing the records. */
static dm_status atomic_save(const char *db_path, write_fn fill, void *user) {
  ckpt_path p;
  long cur;
  DM_TRY(split_path(db_path, &p));
  DM_TRY(current_version(db_path, &p, &cur));
  remove_leftovers(&p, cur);
  char ver[PATH_MAX], target[NAME_MAX + 1], lnk[PATH_MAX], old[PATH_MAX];
  if (snprintf(target, sizeof target, "%s.v%ld", p.base, cur + 1) >= (int)sizeof target ||
      snprintf(old, sizeof old, "%s/%s.v%ld", p.dir, p.base, cur) >= (int)sizeof old ||
      snprintf(ver, sizeof ver, "%s/%s", p.dir, target) >= (int)sizeof ver ||
      snprintf(lnk, sizeof lnk, "%s/%s.lnk-%ld", p.dir, p.base, (long)getpid()) >=
          (int)sizeof lnk)
    return dm_error(DM_ERR_INVALID, "db path '%s' is too long", db_path);

  dm_db *db = NULL;
  dm_status s = dm_db_open_write(ver, &db);
  if (s != DM_OK) { /* e.g. a full disk: its lock file could not be allocated */
    remove_version(ver);
    return dm_error_prefix(s, "Save to '%s'", db_path);
  }
  s = fill(db, user);
  if (s == DM_OK)
    s = dm_db_commit(db);
  dm_db_close(db);
  if (s == DM_OK)
    s = fsync_path(ver);
  if (s != DM_OK) {
    remove_version(ver);
    return dm_error_prefix(s, "Save to '%s'", db_path);
  }
  if (symlink(target, lnk) != 0 || rename(lnk, db_path) != 0) {
    s = dm_error(DM_ERR_IO, "Save to '%s': cannot point it at %s: %s", db_path, target,
                 strerror(errno));
    unlink(lnk);
    remove_version(ver);
    return s;
  }
  DM_TRY(fsync_path(p.dir));
  if (cur > 0)
    remove_version(old);
  return DM_OK;
}

/* Opens `db` for reading: through the link to its current version, or a plain LMDB. */
static dm_status open_checkpoint(const char *db_path, dm_db **out) {
  for (int attempt = 0;; attempt++) {
    char target[PATH_MAX], resolved[2 * PATH_MAX];
    ssize_t n = readlink(db_path, target, sizeof target - 1);
    const char *path = db_path;
    if (n >= 0) {
      target[n] = '\0';
      ckpt_path p;
      DM_TRY(split_path(db_path, &p));
      if (target[0] == '/')
        snprintf(resolved, sizeof resolved, "%s", target);
      else
        snprintf(resolved, sizeof resolved, "%s/%s", p.dir, target);
      path = resolved;
    }
    dm_status s = dm_db_open_read(path, out);
    /* A save in another process may have just replaced the version we resolved. */
    if (s != DM_ERR_NOT_FOUND || n < 0 || attempt > 0)
      return s;
  }
}

/* ---- record checksums (see the header) -------------------------------------------------- */

#define CKSUM_FIELD 1000u
#define CKSUM_BYTES 6 /* the tag (varint of 1000 << 3 | 5: C5 3E), then the CRC */
static const uint8_t cksum_tag[2] = {0xc5, 0x3e};

static uint32_t crc_of(const uint8_t *p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  for (; n > 0;) { /* zlib takes a uInt length */
    uInt step = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, p, step);
    p += step, n -= step;
  }
  return (uint32_t)c;
}

/* Appends the checksum field to the `len` bytes at buf (which has room for it). */
static void put_checksum(uint8_t *buf, size_t len) {
  uint32_t c = crc_of(buf, len);
  memcpy(buf + len, cksum_tag, 2);
  for (int i = 0; i < 4; i++)
    buf[len + 2 + i] = (uint8_t)(c >> (8 * i));
}

/* DM_OK when the record `val` (parsed as `bp`) has no checksum, or a matching one. */
static dm_status check_checksum(const Caffe2__BlobProto *bp, const uint8_t *val, size_t vlen,
                                const char *blob, size_t blen, const char *where) {
  const ProtobufCMessage *m = &bp->base;
  for (unsigned i = 0; i < m->n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
    if (u->wire_type != PROTOBUF_C_WIRE_TYPE_32BIT)
      continue;
    if (u->tag != CKSUM_FIELD || vlen < CKSUM_BYTES ||
        memcmp(val + vlen - CKSUM_BYTES, cksum_tag, 2) != 0 ||
        memcmp(val + vlen - 4, u->data, 4) != 0)
      return dm_error(DM_ERR_PARSE,
                      "%s: blob '%.*s': the record's checksum field is damaged (field %u, "
                      "expected field %u at its end): the checkpoint is corrupted",
                      where, (int)blen, blob, u->tag, CKSUM_FIELD);
    uint32_t want = (uint32_t)u->data[0] | (uint32_t)u->data[1] << 8 |
                    (uint32_t)u->data[2] << 16 | (uint32_t)u->data[3] << 24;
    uint32_t got = crc_of(val, vlen - CKSUM_BYTES);
    if (want != got)
      return dm_error(DM_ERR_PARSE,
                      "%s: blob '%.*s' is corrupted: the record's bytes give checksum %08x, "
                      "Save wrote %08x (the checkpoint changed after it was written; use "
                      "another checkpoint or train from the start)",
                      where, (int)blen, blob, (unsigned)got, (unsigned)want);
    if (!bp->name || strlen(bp->name) != blen || memcmp(bp->name, blob, blen) != 0)
      return dm_error(DM_ERR_PARSE, "%s: the record holds blob '%s', not '%.*s': the "
                      "checkpoint is corrupted", where, bp->name ? bp->name : "", (int)blen,
                      blob);
    return DM_OK;
  }
  return DM_OK;
}

/* ---- tensors <-> TensorProto --------------------------------------------------------- */

/* Whether dtype t is carried as one int32_data value per element. */
static int in_int32_data(dm_dtype t) {
  return t == DM_BOOL || t == DM_UINT8 || t == DM_INT8 || t == DM_UINT16 || t == DM_INT16 ||
         t == DM_FLOAT16 || t == DM_BFLOAT16;
}

static int32_t small_to_int32(dm_dtype t, const void *d, int64_t i) {
  switch (t) {
  case DM_BOOL:
  case DM_UINT8: return ((const uint8_t *)d)[i];
  case DM_INT8: return ((const int8_t *)d)[i];
  case DM_INT16: return ((const int16_t *)d)[i];
  default: return ((const uint16_t *)d)[i]; /* UINT16, FLOAT16, BFLOAT16 patterns */
  }
}

/* Elements [b, e) of t as a packed BlobProto ending in its checksum. *out is malloc'd. */
static dm_status pack_chunk(const dm_tensor *t, const char *name, int64_t b, int64_t e,
                            uint8_t **out, size_t *len) {
  Caffe2__BlobProto bp = CAFFE2__BLOB_PROTO__INIT;
  Caffe2__TensorProto tp = CAFFE2__TENSOR_PROTO__INIT;
  Caffe2__TensorProto__Segment seg = CAFFE2__TENSOR_PROTO__SEGMENT__INIT;
  int64_t dims[DM_MAX_DIMS];
  size_t n = (size_t)(e - b);
  int32_t *ints = NULL;
  ProtobufCBinaryData *strs = NULL;
  /* An empty tensor may have no buffer: point at nothing rather than NULL + b. */
  const char *d = n ? dm_tensor_data(t) : NULL;

  bp.name = (char *)name;
  bp.type = "Tensor";
  bp.tensor = &tp;
  tp.name = (char *)name;
  memcpy(dims, t->dims, sizeof dims);
  tp.n_dims = (size_t)t->ndim;
  tp.dims = dims;
  tp.has_data_type = 1;
  tp.data_type = (Caffe2__TensorProto__DataType)t->dtype;
  seg.begin = b;
  seg.end = e;
  tp.segment = &seg;
  switch (t->dtype) {
  case DM_FLOAT: tp.n_float_data = n, tp.float_data = n ? (float *)d + b : NULL; break;
  case DM_DOUBLE: tp.n_double_data = n, tp.double_data = n ? (double *)d + b : NULL; break;
  case DM_INT32: tp.n_int32_data = n, tp.int32_data = n ? (int32_t *)d + b : NULL; break;
  case DM_INT64: tp.n_int64_data = n, tp.int64_data = n ? (int64_t *)d + b : NULL; break;
  case DM_STRING:
    if (n && !(strs = calloc(n, sizeof *strs)))
      return DM_NOMEM("a string chunk");
    for (size_t i = 0; i < n; i++) {
      const char *s = ((char *const *)d)[b + (int64_t)i];
      strs[i].data = (uint8_t *)(s ? s : "");
      strs[i].len = s ? strlen(s) : 0;
    }
    tp.n_string_data = n, tp.string_data = strs;
    break;
  default:
    if (!in_int32_data(t->dtype))
      return dm_error(DM_ERR_TYPE, "blob '%s': cannot save a %s tensor", name,
                      dm_dtype_name(t->dtype));
    if (n && !(ints = malloc(n * sizeof *ints)))
      return DM_NOMEM("a chunk");
    for (size_t i = 0; i < n; i++)
      ints[i] = small_to_int32(t->dtype, d, b + (int64_t)i);
    tp.n_int32_data = n, tp.int32_data = ints;
  }
  size_t plen = protobuf_c_message_get_packed_size(&bp.base);
  *len = plen + CKSUM_BYTES;
  dm_status s = DM_OK;
  if (!(*out = malloc(*len)))
    s = DM_NOMEM("a record");
  else {
    protobuf_c_message_pack(&bp.base, *out);
    put_checksum(*out, plen);
  }
  free(ints);
  free(strs);
  return s;
}

/* Range checks for values carried in int32_data. */
static int int32_fits(dm_dtype t, int32_t v) {
  switch (t) {
  case DM_BOOL: return v == 0 || v == 1;
  case DM_UINT8: return v >= 0 && v <= 255;
  case DM_INT8: return v >= -128 && v <= 127;
  case DM_INT16: return v >= -32768 && v <= 32767;
  default: return v >= 0 && v <= 65535;
  }
}

static void store_small(dm_dtype t, void *d, int64_t i, int32_t v) {
  switch (dm_dtype_size(t)) {
  case 1: ((uint8_t *)d)[i] = (uint8_t)v; break;
  default: ((uint16_t *)d)[i] = (uint16_t)v; break;
  }
}

/* Writes a record's values into elements [b, e) of t (allocated with the full shape).
 * `where` names the record in errors. */
static dm_status unpack_values(const Caffe2__TensorProto *tp, dm_tensor *t, int64_t b,
                               int64_t e, const char *where) {
  size_t n = (size_t)(e - b), es = dm_dtype_size(t->dtype);
  if (n == 0)
    return DM_OK; /* an empty tensor (which may have no buffer at all) */
  uint8_t *d = dm_tensor_mutable_data(t);
  if (t->dtype == DM_STRING) {
    if (tp->n_string_data != n)
      return dm_error(DM_ERR_PARSE, "%s: %zu string_data values for %zu elements", where,
                      tp->n_string_data, n);
    char **s = (char **)d;
    for (size_t i = 0; i < n; i++) {
      free(s[b + (int64_t)i]); /* set already if records overlap (an error found later) */
      const ProtobufCBinaryData *v = &tp->string_data[i]; /* data may be NULL when empty */
      if (!(s[b + (int64_t)i] = strndup(v->len ? (const char *)v->data : "", v->len)))
        return DM_NOMEM("a string element");
    }
    return DM_OK;
  }
  uint8_t *dst = d + (size_t)b * es;
  if (tp->has_raw_data && tp->raw_data.len == n * es) {
    memcpy(dst, tp->raw_data.data, n * es);
    return DM_OK;
  }
  const void *src = NULL;
  size_t have = 0;
  switch (t->dtype) {
  case DM_FLOAT: src = tp->float_data, have = tp->n_float_data; break;
  case DM_DOUBLE: src = tp->double_data, have = tp->n_double_data; break;
  case DM_INT32: src = tp->int32_data, have = tp->n_int32_data; break;
  case DM_INT64: src = tp->int64_data, have = tp->n_int64_data; break;
  default: /* int32_data (Caffe2's default), or byte_data: es little-endian bytes each */
    if (tp->n_int32_data == n) {
      for (size_t i = 0; i < n; i++) {
        if (!int32_fits(t->dtype, tp->int32_data[i]))
          return dm_error(DM_ERR_PARSE, "%s: int32_data value %zu (%d) does not fit %s",
                          where, i, (int)tp->int32_data[i], dm_dtype_name(t->dtype));
        store_small(t->dtype, dst, (int64_t)i, tp->int32_data[i]);
      }
      return DM_OK;
    }
    have = tp->n_int32_data;
    if (tp->has_byte_data && tp->byte_data.len == n * es) {
      src = tp->byte_data.data, have = n;
      for (size_t i = 0; t->dtype == DM_BOOL && i < n; i++)
        if (((const uint8_t *)src)[i] > 1)
          return dm_error(DM_ERR_PARSE, "%s: BOOL value %zu is %d", where, i,
                          ((const uint8_t *)src)[i]);
    }
  }
  if (have != n)
    return dm_error(DM_ERR_PARSE,
                    "%s: a %s record of %zu elements carries %zu values (float_data %zu, "
                    "int32_data %zu, int64_data %zu, double_data %zu, byte_data %zu bytes)",
                    where, dm_dtype_name(t->dtype), n, have, tp->n_float_data,
                    tp->n_int32_data, tp->n_int64_data, tp->n_double_data,
                    tp->has_byte_data ? tp->byte_data.len : 0);
  memcpy(dst, src, n * es);
  return DM_OK;
}

/* ---- Save ------------------------------------------------------------------------------ */

static const dm_arg_spec save_args[] = {
    {"db", DM_ARG_STRING, 1, "the checkpoint path (a link to <db>.v<k>, see save_load.c)"},
    {"db_type", DM_ARG_STRING, 0, "\"lmdb\" (the only one)"},
    {"absolute_path", DM_ARG_INT, 0, "accepted; paths are used as given"},
    {"blob_name_overrides", DM_ARG_STRINGS, 0, "names to save the inputs under"},
    {"chunk_size", DM_ARG_INT, 0, "elements per record (default 1000000; <= 0: one record)"},
    {NULL, 0, 0, NULL},
};

static dm_status check_db_type(dm_op_ctx *ctx) {
  const char *t = dm_op_arg_string(ctx, "db_type", "lmdb");
  if (strcmp(t, "lmdb") != 0)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "db_type '%s': only \"lmdb\" is supported", t);
  return DM_OK;
}

/* The name input i is saved under. */
static const char *save_name(const dm_op_ctx *ctx, int i) {
  size_t n;
  const char *const *o = dm_op_arg_strings(ctx, "blob_name_overrides", &n);
  return o ? o[i] : dm_op_input_name(ctx, i);
}

static dm_status save_init(dm_op_ctx *ctx, void **state) {
  (void)state;
  DM_TRY(check_db_type(ctx));
  size_t n;
  int nin = dm_op_num_inputs(ctx);
  if (dm_op_arg_strings(ctx, "blob_name_overrides", &n) && n != (size_t)nin)
    return dm_op_error(ctx, DM_ERR_INVALID, "blob_name_overrides has %zu names for %d inputs", n,
                       nin);
  for (int i = 0; i < nin; i++) {
    const char *a = save_name(ctx, i);
    if (!*a || strlen(a) + 12 > DM_DB_MAX_KEY || strstr(a, CHUNK_SEP))
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "cannot save under the name '%s' (empty, too long, or with \"#%%\")",
                         a);
    for (int j = 0; j < i; j++)
      if (strcmp(a, save_name(ctx, j)) == 0)
        return dm_op_error(ctx, DM_ERR_INVALID, "two inputs are saved under the name '%s'", a);
  }
  return DM_OK;
}

/* Writes one tensor's records: chunks of `chunk` elements (all of it when <= 0). */
static dm_status save_tensor(dm_db *db, const dm_tensor *t, const char *name, int64_t chunk) {
  int64_t step = chunk > 0 ? chunk : (t->numel > 0 ? t->numel : 1);
  int64_t id = 0, b = 0;
  do { /* one record at least, even for an empty tensor */
    int64_t e = t->numel - b > step ? b + step : t->numel;
    uint8_t *buf = NULL;
    size_t len = 0;
    char key[DM_DB_MAX_KEY + 1];
    int klen = snprintf(key, sizeof key, "%s#%%%lld", name, (long long)id++);
    DM_TRY(pack_chunk(t, name, b, e, &buf, &len));
    dm_status s = dm_db_put(db, key, (size_t)klen, buf, len);
    free(buf);
    DM_TRY(s);
    b = e;
  } while (b < t->numel);
  return DM_OK;
}

static dm_status save_fill(dm_db *db, void *user) {
  dm_op_ctx *ctx = user;
  int64_t chunk = dm_op_arg_int(ctx, "chunk_size", DEFAULT_CHUNK);
  for (int i = 0; i < dm_op_num_inputs(ctx); i++) {
    const dm_tensor *t = dm_op_input(ctx, i);
    if (dm_tensor_device(t, NULL) == DM_CPU) {
      DM_TRY(save_tensor(db, t, save_name(ctx, i), chunk));
      continue;
    }
    /* a GPU-resident blob (parameters of a net placed on the GPU) is saved through a
     * host copy; checkpoints are device-independent */
    dm_tensor *host = dm_tensor_new(t->limit);
    if (!host)
      return DM_NOMEM("a host copy");
    dm_status s = dm_tensor_copy_to(host, DM_CPU, 0, t);
    if (s == DM_OK)
      s = save_tensor(db, host, save_name(ctx, i), chunk);
    dm_tensor_free(host);
    DM_TRY(s);
  }
  return DM_OK;
}

static dm_status save_run(dm_op_ctx *ctx) {
  for (int i = 0; i < dm_op_num_inputs(ctx); i++) {
    const dm_tensor *t = dm_op_input(ctx, i);
    if (t->dtype == DM_UNDEFINED)
      return dm_op_error(ctx, DM_ERR_NOT_FOUND, "input '%s' has never been written",
                         dm_op_input_name(ctx, i));
  }
  dm_status s = atomic_save(dm_op_arg_string(ctx, "db", ""), save_fill, ctx);
  return s == DM_OK ? s : dm_op_error(ctx, s, "%s", dm_last_error());
}

/* ---- Load ------------------------------------------------------------------------------ */

static const dm_arg_spec load_args[] = {
    {"db", DM_ARG_STRING, 1, "the checkpoint path (or a plain LMDB directory)"},
    {"db_type", DM_ARG_STRING, 0, "\"lmdb\" (the only one)"},
    {"absolute_path", DM_ARG_INT, 0, "accepted; paths are used as given"},
    {"load_all", DM_ARG_INT, 0, "1: load every blob of the DB (outputs are ignored)"},
    {"keep_device", DM_ARG_INT, 0, "accepted; a blob on a GPU is loaded back onto it"},
    {"allow_incomplete", DM_ARG_INT, 0, "1: outputs missing from the DB are skipped"},
    {NULL, 0, 0, NULL},
};

/* A blob being assembled from its records. */
typedef struct pending {
  char *name;
  dm_tensor *t;        /* NULL until its first record */
  int64_t (*seg)[2];   /* the [begin, end) ranges seen */
  size_t n_seg, cap_seg;
  int whole;           /* a record without segment */
} pending;

typedef struct load_job {
  dm_op_ctx *ctx;
  const char *db;
  pending *p;
  size_t n, cap;
  int all;
} load_job;

static void free_job(load_job *j) {
  for (size_t i = 0; i < j->n; i++) {
    free(j->p[i].name);
    dm_tensor_free(j->p[i].t);
    free(j->p[i].seg);
  }
  free(j->p);
}

static dm_status job_add(load_job *j, const char *name, size_t len) {
  if (j->n == j->cap) {
    size_t cap = j->cap ? 2 * j->cap : 16;
    pending *p = realloc(j->p, cap * sizeof *p);
    if (!p)
      return DM_NOMEM("the blob list");
    j->p = p, j->cap = cap;
  }
  pending *p = &j->p[j->n];
  memset(p, 0, sizeof *p);
  if (!(p->name = strndup(name, len)))
    return DM_NOMEM("a blob name");
  j->n++;
  return DM_OK;
}

/* The pending blob of `name` (records are in key order, so chunks of one blob follow
 * each other: look at the last one first), or NULL if it is not wanted. */
static pending *job_find(load_job *j, const char *name, size_t len) {
  for (size_t k = j->n; k-- > 0;)
    if (strlen(j->p[k].name) == len && memcmp(j->p[k].name, name, len) == 0)
      return &j->p[k];
  return NULL;
}

static dm_status tensor_shape(const Caffe2__TensorProto *tp, const char *where, dm_dtype *dt,
                              int64_t *numel) {
  int t = tp->has_data_type ? (int)tp->data_type : DM_FLOAT;
  if (t == DM_BYTE)
    t = DM_UINT8;
  if (!dm_dtype_is_valid(t) || t == DM_UNDEFINED)
    return dm_error(DM_ERR_TYPE, "%s: data_type %d is not supported", where, t);
  if (tp->n_dims > DM_MAX_DIMS)
    return dm_error(DM_ERR_SHAPE, "%s: %zu dims (at most %d)", where, tp->n_dims, DM_MAX_DIMS);
  dm_status s = dm_shape_numel((int)tp->n_dims, tp->dims, numel);
  if (s != DM_OK)
    return dm_error_prefix(s, "%s", where);
  *dt = (dm_dtype)t;
  return DM_OK;
}

static dm_status load_record(load_job *j, pending *p, const Caffe2__BlobProto *bp,
                             const char *where) {
  const Caffe2__TensorProto *tp = bp->tensor;
  if ((bp->type && strcmp(bp->type, "Tensor") != 0) || !tp)
    return dm_error(DM_ERR_UNSUPPORTED, "%s: blob type '%s' is not a Tensor", where,
                    bp->type ? bp->type : "");
  dm_dtype dt = DM_UNDEFINED;
  int64_t numel = 0;
  DM_TRY(tensor_shape(tp, where, &dt, &numel));
  if (!p->t) {
    if (!(p->t = dm_tensor_new(dm_op_workspace(j->ctx)->tensor_limit)))
      return DM_NOMEM("a tensor");
    dm_status s = dm_tensor_resize(p->t, dt, (int)tp->n_dims, tp->dims);
    if (s != DM_OK)
      return dm_error_prefix(s, "%s", where);
  } else if (p->t->dtype != dt || p->t->ndim != (int)tp->n_dims ||
             (tp->n_dims && memcmp(p->t->dims, tp->dims, tp->n_dims * sizeof *tp->dims) != 0)) {
    return dm_error(DM_ERR_SHAPE, "%s: dtype or shape differs from the blob's other records",
                    where);
  }
  int64_t b = 0, e = numel;
  if (tp->segment) {
    b = tp->segment->begin, e = tp->segment->end;
    if (b < 0 || b > e || e > numel)
      return dm_error(DM_ERR_PARSE, "%s: segment [%lld, %lld) outside the %lld elements", where,
                      (long long)b, (long long)e, (long long)numel);
  } else {
    p->whole = 1;
  }
  if (p->n_seg == p->cap_seg) {
    size_t cap = p->cap_seg ? 2 * p->cap_seg : 4;
    int64_t(*seg)[2] = realloc(p->seg, cap * sizeof *seg);
    if (!seg)
      return DM_NOMEM("segments");
    p->seg = seg, p->cap_seg = cap;
  }
  p->seg[p->n_seg][0] = b, p->seg[p->n_seg][1] = e;
  p->n_seg++;
  return unpack_values(tp, p->t, b, e, where);
}

static int seg_cmp(const void *a, const void *b) {
  int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
  return (x > y) - (x < y);
}

/* Every element written exactly once: the ranges, sorted, tile [0, numel). */
static dm_status check_complete(const load_job *j, pending *p) {
  qsort(p->seg, p->n_seg, sizeof *p->seg, seg_cmp);
  int64_t at = 0;
  for (size_t i = 0; i < p->n_seg; i++) {
    if (p->seg[i][0] != at)
      break;
    at = p->seg[i][1];
  }
  if (at != p->t->numel || (p->whole && p->n_seg > 1) ||
      (p->n_seg > 1 && p->seg[p->n_seg - 1][1] != p->t->numel))
    return dm_error(DM_ERR_PARSE,
                    "db '%s': blob '%s': its %zu records do not cover its %lld elements "
                    "exactly once",
                    j->db, p->name, p->n_seg, (long long)p->t->numel);
  return DM_OK;
}

static dm_status load_scan(load_job *j, dm_db *db) {
  dm_db_iter *it = NULL;
  DM_TRY(dm_db_iter_open(db, &it));
  dm_status s = DM_OK;
  for (;;) {
    const void *key, *val;
    size_t klen, vlen;
    int done;
    if ((s = dm_db_iter_next(it, &key, &klen, &val, &vlen, &done)) != DM_OK || done)
      break;
    /* The blob name is the key up to "#%" (Caffe2's chunk separator). */
    size_t nlen = 0;
    while (nlen < klen && !(nlen + 1 < klen && memcmp((const char *)key + nlen, CHUNK_SEP, 2) == 0))
      nlen++;
    pending *p = job_find(j, key, nlen);
    if (!p && j->all && (s = job_add(j, key, nlen)) == DM_OK)
      p = &j->p[j->n - 1];
    if (s != DM_OK)
      break;
    if (!p)
      continue;
    char ks[128], where[PATH_MAX + 160];
    snprintf(where, sizeof where, "db '%s' key '%s'", j->db,
             dm_db_key_str(key, klen, ks, sizeof ks));
    ProtobufCMessage *msg = NULL;
    if ((s = dm_message_parse(val, vlen, where, &caffe2__blob_proto__descriptor,
                              DM_FORMAT_BINARY, &msg)) != DM_OK)
      break;
    s = check_checksum((const Caffe2__BlobProto *)msg, val, vlen, key, nlen, where);
    if (s == DM_OK)
      s = load_record(j, p, (const Caffe2__BlobProto *)msg, where);
    protobuf_c_message_free_unpacked(msg, NULL);
    if (s != DM_OK)
      break;
  }
  dm_db_iter_close(it);
  return s;
}

static dm_status load_init(dm_op_ctx *ctx, void **state) {
  (void)state;
  return check_db_type(ctx);
}

static dm_status load_run(dm_op_ctx *ctx) {
  load_job j = {.ctx = ctx, .db = dm_op_arg_string(ctx, "db", ""),
                .all = dm_op_arg_int(ctx, "load_all", 0) != 0};
  dm_db *db = NULL;
  dm_status s = DM_OK;
  for (int i = 0; !j.all && i < dm_op_num_outputs(ctx) && s == DM_OK; i++)
    if (!job_find(&j, dm_op_output_name(ctx, i), strlen(dm_op_output_name(ctx, i))))
      s = job_add(&j, dm_op_output_name(ctx, i), strlen(dm_op_output_name(ctx, i)));
  if (s == DM_OK && (s = open_checkpoint(j.db, &db)) == DM_OK)
    s = load_scan(&j, db);
  int incomplete_ok = dm_op_arg_int(ctx, "allow_incomplete", 0) != 0;
  for (size_t i = 0; s == DM_OK && i < j.n; i++) {
    if (!j.p[i].t && !incomplete_ok)
      s = dm_error(DM_ERR_NOT_FOUND, "blob '%s' is not in db '%s'", j.p[i].name, j.db);
    else if (j.p[i].t)
      s = check_complete(&j, &j.p[i]);
  }
  /* All or nothing: the workspace changes only once every blob has been read. */
  for (size_t i = 0; s == DM_OK && i < j.n; i++) {
    dm_blob *b = NULL;
    if (!j.p[i].t || (s = dm_workspace_get_or_create(dm_op_workspace(ctx), j.p[i].name, &b)) != DM_OK)
      continue;
    /* a blob that lives on a GPU (a placed net's parameter) is loaded back onto it */
    int id;
    dm_device_type dev = dm_tensor_device(b->tensor, &id);
    if (dev == DM_CPU)
      dm_tensor_share(b->tensor, j.p[i].t);
    else
      s = dm_tensor_copy_to(b->tensor, dev, id, j.p[i].t);
  }
  dm_db_close(db);
  free_job(&j);
  return s == DM_OK ? s : dm_op_error(ctx, s, "%s", dm_last_error());
}

static const dm_op_schema save_schema = {
    .type = "Save", .min_inputs = 1, .max_inputs = -1, .min_outputs = 0, .max_outputs = 0,
    .args = save_args, .precision = DM_PREC_NONE, .no_gradient = 1,
    .doc = "blobs -> (a checkpoint at `db`, replaced atomically)."};
static const dm_op_schema load_schema = {
    .type = "Load", .min_inputs = 0, .max_inputs = 0, .min_outputs = 0, .max_outputs = -1,
    .args = load_args, .precision = DM_PREC_NONE, .no_gradient = 1,
    .doc = "-> blobs read from the checkpoint (or LMDB) at `db`; all or nothing."};
/* cross_device: Save reads GPU-resident blobs through host copies (save_fill). */

static const dm_op_schema *const schemas[] = {&save_schema, &load_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Save", .device = DM_CPU, .cross_device = 1, .init = save_init, .run = save_run},
    {.type = "Load", .device = DM_CPU, .init = load_init, .run = load_run},
    {0},
};
const dm_op_family dm_family_save_load = {schemas, kernels};
