/* test_save_load_protoc.c: our checkpoint records as Caffe2 reads them. protoc (the C++
 * protobuf library Caffe2's Load parses BlobProtos with) decodes each record Save wrote,
 * FLOAT, FLOAT16, INT64 and a chunked tensor: it must accept it, show the tensor Caffe2
 * deserialises (name, dims, data_type, the values in Caffe2's field for the dtype,
 * segment) and the checksum as an unknown field 1000 that it skips; encoding its text
 * again (less that field, which protoc's text format cannot encode) must give our
 * record's bytes back but the checksum's 6 (so nothing in it is lost or misread).
 * Skipped (77) without protoc.
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

#include <cmocka.h>

#include "../proto/protoc_run.h"
#include "core/db.h"
#include "core/workspace.h"
#include "op_test_util.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* protoc --decode of record `key`, checked for each fragment, and encoded back. */
static void check_record(dm_db *db, const char *key, const char *const *frags) {
  const void *val;
  size_t len, tlen, blen;
  assert_int_equal(dm_db_get(db, key, &val, &len), DM_OK);
  uint8_t *text = NULL, *bin = NULL;
  char *err = NULL;
  if (pt_protoc_run("decode", "caffe2.BlobProto", val, len, &text, &tlen, &err) != 0)
    fail_msg("protoc --decode of %s: %s", key, err);
  free(err);
  for (const char *const *f = frags; *f; f++)
    if (!strstr((const char *)text, *f))
      fail_msg("record %s: no '%s' in protoc's view:\n%s", key, *f, text);
  /* protoc's text format cannot encode an unknown field: drop its line (the last) */
  char *unk = strstr((char *)text, "\n1000: 0x");
  assert_non_null(unk);
  unk[1] = '\0';
  tlen = strlen((char *)text);
  err = NULL;
  if (pt_protoc_run("encode", "caffe2.BlobProto", text, tlen, &bin, &blen, &err) != 0)
    fail_msg("protoc --encode of %s: %s", key, err);
  assert_int_equal(blen + 6, len); /* the checksum field: 2 bytes of tag, 4 of CRC */
  assert_memory_equal(bin, val, blen);
  free(err);
  free(text);
  free(bin);
}

static void test_caffe2_reads_records(void **state) {
  (void)state;
  if (!pt_protoc())
    skip();
  char dir[] = "/tmp/dm_save_protoc_XXXXXX", path[64], ver[80];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/ckpt", dir);
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  int64_t d2[2] = {2, 2}, d1[1] = {2}, d5[1] = {5};
  float f[4] = {1.5f, -2, 0.25f, 3};
  uint16_t h[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 */
  int64_t i[2] = {-7, 1LL << 40};
  float c[5] = {1, 2, 3, 4, 5};
  opt_feed(ws, "f", DM_FLOAT, 2, d2, f);
  opt_feed(ws, "h", DM_FLOAT16, 1, d1, h);
  opt_feed(ws, "i", DM_INT64, 1, d1, i);
  opt_feed(ws, "c", DM_FLOAT, 1, d5, c);
  opt_op *op = opt_new("Save");
  opt_in(op, "f");
  opt_in(op, "h");
  opt_in(op, "i");
  opt_arg_string(op, "db", path);
  assert_int_equal(opt_run(op, ws), DM_OK);
  snprintf(ver, sizeof ver, "%s.v1", path);
  op = opt_new("Save"); /* a chunked one, elsewhere */
  opt_in(op, "c");
  char path2[80];
  snprintf(path2, sizeof path2, "%s/chunked", dir);
  opt_arg_string(op, "db", path2);
  opt_arg_int(op, "chunk_size", 3);
  assert_int_equal(opt_run(op, ws), DM_OK);

  dm_db *db = NULL;
  assert_int_equal(dm_db_open_read(ver, &db), DM_OK);
  check_record(db, "f#%0",
               (const char *const[]){"name: \"f\"", "type: \"Tensor\"", "dims: 2", "data_type: FLOAT",
                                     "float_data: 1.5", "float_data: -2", "float_data: 0.25",
                                     "begin: 0", "end: 4", "\n1000: 0x", NULL});
  check_record(db, "h#%0",
               (const char *const[]){"data_type: FLOAT16", "int32_data: 15360",
                                     "int32_data: 49152", "\n1000: 0x", NULL});
  check_record(db, "i#%0",
               (const char *const[]){"data_type: INT64", "int64_data: -7",
                                     "int64_data: 1099511627776", "\n1000: 0x", NULL});
  dm_db_close(db);
  snprintf(ver, sizeof ver, "%s/chunked.v1", dir);
  assert_int_equal(dm_db_open_read(ver, &db), DM_OK);
  check_record(db, "c#%1",
               (const char *const[]){"dims: 5", "float_data: 4", "float_data: 5", "begin: 3",
                                     "end: 5", "\n1000: 0x", NULL});
  dm_db_close(db);
  dm_workspace_destroy(ws);
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_caffe2_reads_records)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
