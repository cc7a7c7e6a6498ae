/* test_save_load.c: Save and Load. Every dtype round-trips bit for bit (NaN payloads,
 * -0, FP16/BF16 patterns, integer extremes, strings, empty and 0-d tensors), in one
 * record or in chunks; a second save replaces the first and leaves one version
 * directory; load_all, blob_name_overrides, allow_incomplete; a plain Caffe2-style LMDB
 * (whole-tensor records, byte_data FLOAT16) loads; errors: a missing blob and a corrupt
 * record are named, a failed Load changes nothing, Save will not replace a plain
 * directory; records carry checksums (a flipped byte in data.mdb is refused, naming the
 * blob) that a parser without the field skips.
 */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/db.h"
#include "core/workspace.h"
#include "op_test_util.h"
#include "proto/caffe2.pb-c.h"

typedef struct fixture {
  char dir[64];
  char db[128];
} fixture;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  strcpy(f->dir, "/tmp/dm_save_load_XXXXXX");
  if (!f || !mkdtemp(f->dir))
    return 1;
  snprintf(f->db, sizeof f->db, "%s/ckpt", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

static dm_workspace *new_ws(void) {
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  return ws;
}

static dm_status run_save(dm_workspace *ws, const char *db, int n, const char *const *names,
                          int64_t chunk) {
  opt_op *op = opt_new("Save");
  for (int i = 0; i < n; i++)
    opt_in(op, names[i]);
  opt_arg_string(op, "db", db);
  opt_arg_string(op, "db_type", "lmdb");
  if (chunk)
    opt_arg_int(op, "chunk_size", chunk);
  return opt_run(op, ws);
}

static dm_status run_load(dm_workspace *ws, const char *db, int n, const char *const *names,
                          int load_all, int allow_incomplete) {
  opt_op *op = opt_new("Load");
  for (int i = 0; i < n; i++)
    opt_out(op, names[i]);
  opt_arg_string(op, "db", db);
  if (load_all)
    opt_arg_int(op, "load_all", 1);
  if (allow_incomplete)
    opt_arg_int(op, "allow_incomplete", 1);
  return opt_run(op, ws);
}

/* Feeds a tensor whose bytes are a deterministic pattern valid for its dtype. */
static void feed_pattern(dm_workspace *ws, const char *name, dm_dtype t, int ndim,
                         const int64_t *dims, uint64_t seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  size_t es = dm_dtype_size(t);
  uint8_t *buf = malloc((size_t)n * es + 8);
  for (size_t i = 0; i < (size_t)n * es; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    buf[i] = (uint8_t)(seed >> 56);
  }
  if (t == DM_BOOL)
    for (int64_t i = 0; i < n; i++)
      buf[i] &= 1;
  /* Values that trip careless conversions, where there is room. */
  if (t == DM_FLOAT && n >= 4) {
    uint32_t special[4] = {0x7fc01234u /* NaN with payload */, 0x80000000u /* -0 */,
                           0xff800000u /* -inf */, 0x00000001u /* smallest subnormal */};
    memcpy(buf, special, sizeof special);
  }
  if (t == DM_INT64 && n >= 2) {
    int64_t ext[2] = {INT64_MIN, INT64_MAX};
    memcpy(buf, ext, sizeof ext);
  }
  if (t == DM_INT32 && n >= 2) {
    int32_t ext[2] = {INT32_MIN, INT32_MAX};
    memcpy(buf, ext, sizeof ext);
  }
  opt_feed(ws, name, t, ndim, dims, buf);
  free(buf);
}

static void feed_strings(dm_workspace *ws, const char *name, int64_t n) {
  dm_blob *b = NULL;
  assert_int_equal(dm_workspace_get_or_create(ws, name, &b), DM_OK);
  assert_int_equal(dm_tensor_resize(b->tensor, DM_STRING, 1, &n), DM_OK);
  char **s = dm_tensor_mutable_data(b->tensor);
  for (int64_t i = 0; i < n; i++) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "string \xc3\xa9 %lld", (long long)i);
    if (i % 3 == 0)
      tmp[0] = '\0'; /* empty strings too */
    s[i] = strdup(tmp);
  }
}

/* Bit-exact equality of two blobs (strings by content). */
static void assert_same(const dm_tensor *a, const dm_tensor *b, const char *name) {
  if (dm_tensor_dtype(a) != dm_tensor_dtype(b) || dm_tensor_ndim(a) != dm_tensor_ndim(b) ||
      dm_tensor_numel(a) != dm_tensor_numel(b))
    fail_msg("%s: dtype or shape differs", name);
  for (int i = 0; i < dm_tensor_ndim(a); i++)
    assert_int_equal(dm_tensor_dims(a)[i], dm_tensor_dims(b)[i]);
  if (dm_tensor_dtype(a) == DM_STRING) {
    for (int64_t i = 0; i < dm_tensor_numel(a); i++)
      assert_string_equal(((char *const *)dm_tensor_data(a))[i],
                          ((char *const *)dm_tensor_data(b))[i]);
  } else if (dm_tensor_numel(a) &&
             memcmp(dm_tensor_data(a), dm_tensor_data(b), dm_tensor_nbytes(a)) != 0) {
    fail_msg("%s: the bytes differ", name);
  }
}

static const struct {
  const char *name;
  dm_dtype t;
  int ndim;
  int64_t dims[3];
} cases[] = {
    {"f32", DM_FLOAT, 2, {7, 5, 0}},    {"f16", DM_FLOAT16, 1, {300, 0, 0}},
    {"bf16", DM_BFLOAT16, 1, {33, 0, 0}}, {"f64", DM_DOUBLE, 3, {2, 3, 4}},
    {"i32", DM_INT32, 1, {50, 0, 0}},   {"i64", DM_INT64, 1, {9, 0, 0}},
    {"bool", DM_BOOL, 2, {4, 4, 0}},    {"u8", DM_UINT8, 1, {256, 0, 0}},
    {"i8", DM_INT8, 1, {64, 0, 0}},     {"u16", DM_UINT16, 1, {40, 0, 0}},
    {"i16", DM_INT16, 1, {40, 0, 0}},   {"scalar", DM_FLOAT, 0, {0, 0, 0}},
    {"empty", DM_INT32, 2, {3, 0, 0}},  {"gpu_0/conv1_w", DM_FLOAT, 1, {1000, 0, 0}},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static void feed_all(dm_workspace *ws, const char **names, uint64_t seed) {
  for (size_t i = 0; i < N_CASES; i++) {
    feed_pattern(ws, cases[i].name, cases[i].t, cases[i].ndim, cases[i].dims, seed + i);
    names[i] = cases[i].name;
  }
  feed_strings(ws, "str", 10);
  names[N_CASES] = "str";
}

static void round_trip(fixture *f, int64_t chunk) {
  const char *names[N_CASES + 1];
  dm_workspace *a = new_ws(), *b = new_ws();
  feed_all(a, names, 42);
  if (run_save(a, f->db, N_CASES + 1, names, chunk) != DM_OK)
    fail_msg("save: %s", dm_last_error());
  if (run_load(b, f->db, N_CASES + 1, names, 0, 0) != DM_OK)
    fail_msg("load: %s", dm_last_error());
  for (size_t i = 0; i < N_CASES + 1; i++) {
    const dm_tensor *x, *y;
    assert_int_equal(dm_workspace_fetch(a, names[i], &x), DM_OK);
    assert_int_equal(dm_workspace_fetch(b, names[i], &y), DM_OK);
    assert_same(x, y, names[i]);
  }
  dm_workspace_destroy(a);
  dm_workspace_destroy(b);
}

static void test_round_trip(void **state) { round_trip(*state, 0); }
/* Chunks of 7 elements: many records per blob, keys "name#%10" sorting before "#%2". */
static void test_round_trip_chunked(void **state) { round_trip(*state, 7); }

static int count_versions(const fixture *f) {
  char path[256];
  int n = 0;
  for (int k = 1; k < 20; k++) {
    snprintf(path, sizeof path, "%s.v%d", f->db, k);
    n += access(path, F_OK) == 0;
  }
  return n;
}

static void test_replace(void **state) {
  fixture *f = *state;
  const char *names[] = {"w"};
  int64_t dims[1] = {3};
  dm_workspace *ws = new_ws();
  for (int v = 0; v < 3; v++) {
    float w[3] = {(float)v, 1, 2};
    opt_feed(ws, "w", DM_FLOAT, 1, dims, w);
    assert_int_equal(run_save(ws, f->db, 1, names, 0), DM_OK);
    assert_int_equal(count_versions(f), 1);
  }
  dm_workspace *b = new_ws();
  assert_int_equal(run_load(b, f->db, 1, names, 0, 0), DM_OK);
  const dm_tensor *t = opt_fetch(b, "w", DM_FLOAT, 1, dims);
  assert_true(((const float *)dm_tensor_data(t))[0] == 2.0f);
  /* A leftover of an interrupted save is removed by the next one. */
  char stale[256];
  snprintf(stale, sizeof stale, "%s.v9", f->db);
  assert_int_equal(mkdir(stale, 0775), 0);
  assert_int_equal(run_save(ws, f->db, 1, names, 0), DM_OK);
  assert_int_equal(access(stale, F_OK), -1);
  assert_int_equal(count_versions(f), 1);
  dm_workspace_destroy(ws);
  dm_workspace_destroy(b);
}

static void test_load_all_and_overrides(void **state) {
  fixture *f = *state;
  dm_workspace *a = new_ws(), *b = new_ws();
  int64_t dims[1] = {2};
  float x[2] = {1, 2};
  opt_feed(a, "x", DM_FLOAT, 1, dims, x);
  opt_feed(a, "y", DM_FLOAT, 1, dims, x);
  opt_op *op = opt_new("Save");
  opt_in(op, "x");
  opt_in(op, "y");
  const char *over[] = {"renamed_x", "renamed_y"};
  opt_arg_strings(op, "blob_name_overrides", 2, over);
  opt_arg_string(op, "db", f->db);
  assert_int_equal(opt_run(op, a), DM_OK);
  assert_int_equal(run_load(b, f->db, 0, NULL, 1, 0), DM_OK);
  assert_true(dm_workspace_has_blob(b, "renamed_x"));
  assert_true(dm_workspace_has_blob(b, "renamed_y"));
  assert_false(dm_workspace_has_blob(b, "x"));
  /* allow_incomplete skips what is missing and loads the rest. */
  const char *want[] = {"renamed_x", "nope"};
  dm_workspace *c = new_ws();
  assert_int_equal(run_load(c, f->db, 2, want, 0, 1), DM_OK);
  assert_true(dm_workspace_has_blob(c, "renamed_x"));
  dm_workspace_destroy(a);
  dm_workspace_destroy(b);
  dm_workspace_destroy(c);
}

static void test_missing_blob(void **state) {
  fixture *f = *state;
  dm_workspace *a = new_ws();
  int64_t dims[1] = {2};
  float x[2] = {1, 2}, old[2] = {7, 7};
  opt_feed(a, "x", DM_FLOAT, 1, dims, x);
  const char *names[] = {"x"};
  assert_int_equal(run_save(a, f->db, 1, names, 0), DM_OK);
  dm_workspace *b = new_ws();
  opt_feed(b, "x", DM_FLOAT, 1, dims, old);
  const char *want[] = {"x", "fc_w"};
  opt_expect_error(run_load(b, f->db, 2, want, 0, 0), DM_ERR_NOT_FOUND, "fc_w", f->db, NULL);
  /* all or nothing: x keeps its value */
  const dm_tensor *t = opt_fetch(b, "x", DM_FLOAT, 1, dims);
  assert_true(((const float *)dm_tensor_data(t))[0] == 7.0f);
  char nodb[256];
  snprintf(nodb, sizeof nodb, "%s/none", f->dir);
  opt_expect_error(run_load(b, nodb, 1, names, 0, 0), DM_ERR_NOT_FOUND, nodb, NULL);
  dm_workspace_destroy(a);
  dm_workspace_destroy(b);
}

/* Writes records into a plain LMDB directory, as Caffe2 would have. */
static void write_plain(const char *path, int n, const char *const *keys, const void *const *vals,
                        const size_t *lens) {
  dm_db *db = NULL;
  assert_int_equal(dm_db_open_write(path, &db), DM_OK);
  for (int i = 0; i < n; i++)
    assert_int_equal(dm_db_put(db, keys[i], strlen(keys[i]), vals[i], lens[i]), DM_OK);
  assert_int_equal(dm_db_commit(db), DM_OK);
  dm_db_close(db);
}

static void test_plain_lmdb_and_corrupt(void **state) {
  fixture *f = *state;
  /* A whole-tensor record keyed by the plain name, FLOAT16 in byte_data. */
  Caffe2__BlobProto bp = CAFFE2__BLOB_PROTO__INIT;
  Caffe2__TensorProto tp = CAFFE2__TENSOR_PROTO__INIT;
  int64_t dims[1] = {2};
  uint8_t half[4] = {0x00, 0x3c, 0x00, 0xc0}; /* 1.0, -2.0 */
  bp.name = "h";
  bp.type = "Tensor";
  bp.tensor = &tp;
  tp.n_dims = 1, tp.dims = dims;
  tp.has_data_type = 1, tp.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__FLOAT16;
  tp.has_byte_data = 1, tp.byte_data.data = half, tp.byte_data.len = 4;
  size_t len = caffe2__blob_proto__get_packed_size(&bp);
  uint8_t *buf = malloc(len);
  caffe2__blob_proto__pack(&bp, buf);
  const char *keys[] = {"bad", "h"};
  const void *vals[] = {"\x0a\xff\x01", buf};
  size_t lens[] = {3, len};
  char plain[256];
  snprintf(plain, sizeof plain, "%s/plain", f->dir);
  write_plain(plain, 2, keys, vals, lens);
  free(buf);

  dm_workspace *ws = new_ws();
  const char *h[] = {"h"};
  if (run_load(ws, plain, 1, h, 0, 0) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *t = opt_fetch(ws, "h", DM_FLOAT16, 1, dims);
  assert_memory_equal(dm_tensor_data(t), half, 4);
  /* The corrupt record is named when it is wanted. */
  const char *bad[] = {"bad"};
  opt_expect_error(run_load(ws, plain, 1, bad, 0, 0), DM_ERR_PARSE, "key 'bad'", plain, NULL);
  opt_expect_error(run_load(ws, plain, 0, NULL, 1, 0), DM_ERR_PARSE, "key 'bad'", NULL);

  /* Save will not replace a directory it did not make. */
  const char *names[] = {"h"};
  opt_expect_error(run_save(ws, plain, 1, names, 0), DM_ERR_EXISTS, plain, NULL);
  dm_workspace_destroy(ws);
}

/* Flips one byte of the first run of 16 floats equal to v in `path` (in place, as a
 * damaged disk would): 1 if found. */
static int flip_in_file(const char *path, float v) {
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  uint8_t *d = malloc((size_t)n), pat[64];
  rewind(fp);
  assert_int_equal(fread(d, 1, (size_t)n, fp), (size_t)n);
  for (int i = 0; i < 16; i++)
    memcpy(pat + 4 * i, &v, 4);
  int found = 0;
  for (long i = 0; i + 64 <= n && !found; i++)
    if (memcmp(d + i, pat, 64) == 0) {
      uint8_t b = d[i + 4] ^ 0x01; /* the low mantissa bit of the second value */
      fseek(fp, i + 4, SEEK_SET);
      found = fwrite(&b, 1, 1, fp) == 1;
    }
  fclose(fp);
  free(d);
  return found;
}

/* The raw record `key` of the checkpoint at db (malloc'd). */
static uint8_t *read_record(const char *db, const char *key, size_t *len) {
  dm_db *d = NULL;
  const void *v;
  assert_int_equal(dm_db_open_read(db, &d), DM_OK);
  assert_int_equal(dm_db_get(d, key, &v, len), DM_OK);
  uint8_t *out = malloc(*len);
  memcpy(out, v, *len);
  dm_db_close(d);
  return out;
}

/* Records carry checksums: a byte flipped inside a blob's values in data.mdb is refused,
 * naming the checkpoint and the blob, and the workspace is left as it was; a damaged
 * checksum tag or a record under another blob's key are refused too. A record parsed by
 * protobuf-c's own unpacker (which knows nothing of the field) still gives the tensor. */
static void test_checksum(void **state) {
  fixture *f = *state;
  const char *names[] = {"w", "x"};
  int64_t dims[1] = {64};
  float w[64], x[64];
  for (int i = 0; i < 64; i++)
    w[i] = 1.5f, x[i] = (float)i;
  dm_workspace *ws = new_ws();
  opt_feed(ws, "w", DM_FLOAT, 1, dims, w);
  opt_feed(ws, "x", DM_FLOAT, 1, dims, x);
  assert_int_equal(run_save(ws, f->db, 2, names, 0), DM_OK);

  /* An unknown-field-tolerant parser reads the record as a plain BlobProto. */
  char ver[256];
  snprintf(ver, sizeof ver, "%s.v1", f->db);
  size_t len;
  uint8_t *rec = read_record(ver, "w#%0", &len);
  Caffe2__BlobProto *bp = caffe2__blob_proto__unpack(NULL, len, rec);
  assert_non_null(bp);
  assert_string_equal(bp->name, "w");
  assert_int_equal(bp->tensor->n_float_data, 64);
  assert_memory_equal(bp->tensor->float_data, w, sizeof w);
  assert_int_equal(bp->base.n_unknown_fields, 1);
  assert_int_equal(bp->base.unknown_fields[0].tag, 1000);
  caffe2__blob_proto__free_unpacked(bp, NULL);

  /* Garbage in the values: refused, naming checkpoint and blob; nothing loaded. */
  char mdb[300];
  snprintf(mdb, sizeof mdb, "%s/data.mdb", f->db);
  assert_true(flip_in_file(mdb, 1.5f));
  dm_workspace *b = new_ws();
  opt_expect_error(run_load(b, f->db, 2, names, 0, 0), DM_ERR_PARSE, f->db, "blob 'w'",
                   "corrupted", NULL);
  for (int i = 0; i < 2; i++) { /* the op's outputs exist, never written */
    const dm_tensor *t0 = dm_workspace_tensor(b, names[i]);
    assert_true(!t0 || dm_tensor_dtype(t0) == DM_UNDEFINED);
  }
  opt_expect_error(run_load(b, f->db, 0, NULL, 1, 0), DM_ERR_PARSE, "blob 'w'", NULL);

  /* A damaged checksum tag (field 1001), and a good record under another key. */
  uint8_t *tag = malloc(len);
  memcpy(tag, rec, len);
  tag[len - 6] ^= 0x08; /* 0xC5 -> 0xCD: field 1001 */
  char plain[256];
  snprintf(plain, sizeof plain, "%s/plain", f->dir);
  const char *keys[] = {"v#%0", "w#%0"};
  const void *vals[] = {rec, tag};
  size_t lens[] = {len, len};
  write_plain(plain, 2, keys, vals, lens);
  const char *v[] = {"v"};
  opt_expect_error(run_load(b, plain, 1, v, 0, 0), DM_ERR_PARSE, "holds blob 'w', not 'v'",
                   NULL);
  opt_expect_error(run_load(b, plain, 1, names, 0, 0), DM_ERR_PARSE, "blob 'w'",
                   "checksum field is damaged", NULL);
  /* The same record without its checksum (as Caffe2 writes it) loads. */
  char plain2[256];
  snprintf(plain2, sizeof plain2, "%s/plain2", f->dir);
  lens[1] = len - 6;
  vals[1] = rec;
  write_plain(plain2, 1, keys + 1, vals + 1, lens + 1);
  if (run_load(b, plain2, 1, names, 0, 0) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *t = opt_fetch(b, "w", DM_FLOAT, 1, dims);
  assert_memory_equal(dm_tensor_data(t), w, sizeof w);
  free(tag);
  free(rec);
  dm_workspace_destroy(ws);
  dm_workspace_destroy(b);
}

static void test_bad_args(void **state) {
  fixture *f = *state;
  dm_workspace *ws = new_ws();
  int64_t dims[1] = {1};
  float x = 1;
  opt_feed(ws, "x", DM_FLOAT, 1, dims, &x);
  opt_op *op = opt_new("Save");
  opt_in(op, "x");
  opt_arg_string(op, "db", f->db);
  opt_arg_string(op, "db_type", "leveldb");
  opt_expect_error(opt_run(op, ws), DM_ERR_UNSUPPORTED, "leveldb", NULL);
  op = opt_new("Save");
  opt_in(op, "never_written");
  opt_arg_string(op, "db", f->db);
  opt_expect_error(opt_run(op, ws), DM_ERR_NOT_FOUND, "never_written", NULL);
  op = opt_new("Save");
  opt_in(op, "x");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "db", NULL);
  dm_workspace_destroy(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_chunked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_replace, setup, teardown),
      cmocka_unit_test_setup_teardown(test_load_all_and_overrides, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_blob, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plain_lmdb_and_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_checksum, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
