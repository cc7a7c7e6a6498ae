/* text_db_dump.c: prints every record of an LMDB of TensorProtos, one line each, for
 * the text-DB check (text_db_check.py), which decodes them against the text itself:
 *   KEY <TAB> name dtype dims : int32 values <TAB> (the next tensor) ...
 * dims as "4" or "1x28x28" ("-" for none); values only for int32_data.
 * Usage: text_db_dump DB_DIR. Exits 1 with the error on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "core/db.h"
#include "proto/caffe2.pb-c.h"

static void print_proto(const Caffe2__TensorProto *p) {
  printf("\t%s %d ", p->name ? p->name : "-", p->has_data_type ? (int)p->data_type : -1);
  if (!p->n_dims)
    printf("-");
  for (size_t d = 0; d < p->n_dims; d++)
    printf(d ? "x%lld" : "%lld", (long long)p->dims[d]);
  printf(" :");
  for (size_t i = 0; i < p->n_int32_data; i++)
    printf(" %d", (int)p->int32_data[i]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: text_db_dump DB_DIR\n");
    return 2;
  }
  dm_db *db = NULL;
  dm_db_iter *it = NULL;
  dm_status s = dm_db_open_read(argv[1], &db);
  if (s == DM_OK)
    s = dm_db_iter_open(db, &it);
  for (int done = 0; s == DM_OK;) {
    const void *key, *val;
    size_t klen, vlen;
    if ((s = dm_db_iter_next(it, &key, &klen, &val, &vlen, &done)) != DM_OK || done)
      break;
    Caffe2__TensorProtos *rec = caffe2__tensor_protos__unpack(NULL, vlen, val);
    if (!rec) {
      s = dm_error(DM_ERR_PARSE, "%s: a record is not a TensorProtos", argv[1]);
      break;
    }
    printf("%.*s", (int)klen, (const char *)key);
    for (size_t i = 0; i < rec->n_protos; i++)
      print_proto(rec->protos[i]);
    printf("\n");
    caffe2__tensor_protos__free_unpacked(rec, NULL);
  }
  dm_db_iter_close(it);
  dm_db_close(db);
  if (s != DM_OK)
    fprintf(stderr, "text_db_dump: %s\n", dm_last_error());
  return s == DM_OK ? 0 : 1;
}
