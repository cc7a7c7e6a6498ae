/* make_lm_db.c: writes a token LMDB in the record format `make-db --text` writes, for
 * the language-model tests (which must not depend on that command).
 *
 *   make_lm_db OUT_DIR RECORDS T V SEED
 *
 * Record i (key "%08d"): a TensorProtos of two INT32 tensors of dims [T], tokens then
 * targets, with targets[t] = tokens[t + 1] of one stream. The stream is a cycle through
 * a permutation of 0..V-1 (drawn from SEED), so the next token is a function of the
 * current one: a model that learns it reaches a loss near 0, and chance is ln V.
 * Record i starts at position i of the cycle, so every offset is seen.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "caffe2.pb-c.h"
#include "demitasse.h"
#include "db.h"

static int usage(void) {
  fprintf(stderr, "usage: make_lm_db OUT_DIR RECORDS T V SEED\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc != 6)
    return usage();
  long records = strtol(argv[2], NULL, 10), T = strtol(argv[3], NULL, 10);
  long V = strtol(argv[4], NULL, 10);
  unsigned long seed = strtoul(argv[5], NULL, 10);
  if (records < 1 || T < 1 || V < 2 || V > 1 << 20 || T > 1 << 20)
    return usage();
  int32_t *perm = malloc((size_t)V * sizeof *perm);
  int32_t *tok = malloc((size_t)T * sizeof *tok), *tgt = malloc((size_t)T * sizeof *tgt);
  uint8_t *buf = NULL;
  dm_db *db = NULL;
  dm_status s = DM_OK;
  int rc = 1;
  if (!perm || !tok || !tgt) {
    fprintf(stderr, "make_lm_db: out of memory\n");
    goto cleanup;
  }
  /* Fisher-Yates with a 64-bit LCG (Knuth's MMIX constants): the test needs a fixed
   * permutation, not a good generator */
  uint64_t r = seed * 2862933555777941757ull + 3037000493ull;
  for (long i = 0; i < V; i++)
    perm[i] = (int32_t)i;
  for (long i = V - 1; i > 0; i--) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    long j = (long)((r >> 33) % (uint64_t)(i + 1));
    int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int64_t dims[1] = {T};
  Caffe2__TensorProto tp = CAFFE2__TENSOR_PROTO__INIT, gp = CAFFE2__TENSOR_PROTO__INIT;
  tp.n_dims = gp.n_dims = 1;
  tp.dims = gp.dims = dims;
  tp.has_data_type = gp.has_data_type = 1;
  tp.data_type = gp.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32;
  tp.n_int32_data = gp.n_int32_data = (size_t)T;
  tp.int32_data = tok;
  gp.int32_data = tgt;
  Caffe2__TensorProto *protos[2] = {&tp, &gp};
  Caffe2__TensorProtos rec = CAFFE2__TENSOR_PROTOS__INIT;
  rec.n_protos = 2;
  rec.protos = protos;
  if ((s = dm_db_open_write(argv[1], &db)) != DM_OK)
    goto cleanup;
  for (long i = 0; i < records && s == DM_OK; i++) {
    for (long t = 0; t < T; t++) {
      tok[t] = perm[(i + t) % V];
      tgt[t] = perm[(i + t + 1) % V];
    }
    size_t n = protobuf_c_message_get_packed_size(&rec.base);
    uint8_t *nb = realloc(buf, n);
    if (!nb) {
      fprintf(stderr, "make_lm_db: out of memory\n");
      goto cleanup;
    }
    buf = nb;
    protobuf_c_message_pack(&rec.base, buf);
    char key[32];
    int klen = snprintf(key, sizeof key, "%08ld", i);
    s = dm_db_put(db, key, (size_t)klen, buf, n);
  }
  if (s == DM_OK)
    s = dm_db_commit(db);
  if (s == DM_OK)
    rc = 0;
cleanup:
  if (s != DM_OK)
    fprintf(stderr, "make_lm_db: %s\n", dm_last_error());
  dm_db_close(db);
  free(buf);
  free(perm);
  free(tok);
  free(tgt);
  return rc;
}
