/* fuzz_lmdb_record.c: libFuzzer target for the decoding of LMDB records: checkpoint
 * records (BlobProto, chunked by segment, every dtype) read by the Load op, and
 * training records (TensorProtos) read by TensorProtosDBInput. Both ops run for real,
 * in a net in a workspace, over an in-memory DB (mem_db.c stands in for core/db.c), so
 * everything from the record bytes to the blobs the net sees is covered, while LMDB's
 * own file format, which is LMDB's to check, is not.
 *
 * Input: one mode byte, then records until the input ends, each
 *   u8 key length (mod 32), the key, u16 value length (little-endian), the value.
 * Mode bit 0: 0 Load, 1 TensorProtosDBInput.
 *   Load: bit 1 load_all, bit 2 allow_incomplete, bit 3 a second output "b" beside "w".
 *   DB input: bits 1-2 batch_size - 1, bit 3 shuffle, bit 4 a second output, bit 5
 *   scale 1/256, bit 6 an `iter` input whose value is the next byte.
 * A clean error status is fine; a crash, leak, sanitizer report or timeout is a bug. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/workspace.h"
#include "fuzz_input.h"
#include "mem_db.h"
#include "net/api.h"
#include "net/netdef_build.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Per tensor: enough for any record a 64 KiB input can carry, and a fast refusal of the
 * shapes a record can claim without carrying. */
#define LIMIT ((uint64_t)64 << 20)

static void fail(const char *what) {
  fprintf(stderr, "fuzz_lmdb_record: %s: %s\n", what, dm_last_error());
  __builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  /* One OpenMP thread: the fuzzer is one process per core already. */
  setenv("OMP_NUM_THREADS", "1", 0);
  if (dm_init() != DM_OK)
    fail("dm_init");
  return 0;
}

/* The op that reads the DB, from the mode byte. */
static dm_status build_op(fz_in *in, uint8_t mode, dm_workspace *ws, Caffe2__NetDef *net) {
  dm_opb b;
  if (!(mode & 1)) {
    dm_opb_start(&b, "Load");
    dm_opb_arg_string(&b, "db", "fuzz-db");
    dm_opb_arg_string(&b, "db_type", "lmdb");
    dm_opb_arg_int(&b, "load_all", (mode >> 1) & 1);
    dm_opb_arg_int(&b, "allow_incomplete", (mode >> 2) & 1);
    if (!((mode >> 1) & 1)) {
      dm_opb_output(&b, "w");
      if ((mode >> 3) & 1)
        dm_opb_output(&b, "b");
    }
    return dm_opb_append(&b, net);
  }
  dm_opb_start(&b, "TensorProtosDBInput");
  dm_opb_arg_string(&b, "db", "fuzz-db");
  dm_opb_arg_string(&b, "db_type", "lmdb");
  dm_opb_arg_int(&b, "batch_size", 1 + ((mode >> 1) & 3));
  dm_opb_arg_int(&b, "shuffle", (mode >> 3) & 1);
  if ((mode >> 5) & 1)
    dm_opb_arg_float(&b, "scale", 1.0f / 256);
  dm_opb_output(&b, "data");
  if ((mode >> 4) & 1)
    dm_opb_output(&b, "label");
  if ((mode >> 6) & 1) {
    int64_t it = fz_u8(in);
    DM_TRY(dm_workspace_feed(ws, "iter", DM_INT64, 0, NULL, &it));
    dm_opb_input(&b, "iter");
  }
  return dm_opb_append(&b, net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size};
  uint8_t mode = fz_u8(&in);
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    fail("dm_workspace_create");
  dm_workspace_set_tensor_limit(ws, LIMIT);
  Caffe2__NetDef *net = NULL;
  if (dm_netdef_new("fuzz", &net) != DM_OK)
    fail("dm_netdef_new");
  dm_status s = build_op(&in, mode, ws, net);

  fz_memdb_clear();
  while (in.n) {
    size_t klen, vlen;
    const uint8_t *key = fz_bytes(&in, fz_u8(&in) % 32, &klen);
    const uint8_t *val = fz_bytes(&in, fz_u16(&in), &vlen);
    if (!fz_memdb_add(key, klen, val, vlen))
      break;
  }

  dm_net *n = NULL;
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&net->base, NULL);
  } else if ((s = dm_workspace_create_net(ws, net, "fuzz", &n)) == DM_OK) { /* takes net */
    /* Three runs: a DB input op decodes ahead on its thread, wraps epochs, reshuffles. */
    for (int r = 0; r < 3 && s == DM_OK; r++)
      s = dm_net_run(n);
  }
  if (getenv("FUZZ_VERBOSE")) /* to check that a seed gets as far as it should */
    fprintf(stderr, "status %s: %s\n", dm_status_name(s), s == DM_OK ? "" : dm_last_error());
  dm_workspace_destroy(ws);
  return 0;
}
