/* train_ranks_api.c: data-parallel mixed-precision training through the C API, as 2
 * ranks of `mpirun` (tests/dist/meson.build), with an overflow on one rank only.
 *
 * Rank 0 writes a small LMDB (FLOAT 1x4x4 images, INT32 labels): global batch b holds
 * records 4b..4b+3, rank r reads 4b+2r and 4b+2r+1. One record of rank 1's share of
 * batch 2 holds 1e6 everywhere, past FP16's range, so only rank 1's FP16 forward pass
 * overflows at step 3. Both ranks train a small FC net with FP16 compute, FP32 masters
 * and dynamic loss scaling (dm_train_options.data_parallel), and after every step check:
 *   - the overflow step is skipped on both ranks (loss_scale_skipped rises by one on
 *     each) and the loss scale is halved on both; the other steps are applied;
 *   - every parameter, momentum and the loss scale are bit-identical across the ranks
 *     (each rank hashes the bytes; the mean over the 2 ranks of each hash half equals
 *     its own on both ranks exactly when the two are equal).
 * Links the static library: it writes the DB through core/db.h.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/db.h"
#include "demitasse.h"
#include "proto/caffe2.pb-c.h"

static int rank, size, failures;

#define CHECK(cond, ...)                                                                    \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      failures++;                                                                           \
      fprintf(stderr, "rank %d: line %d: ", rank, __LINE__);                                \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fprintf(stderr, " [%s]\n", dm_last_error());                                          \
    }                                                                                       \
  } while (0)

enum { RECORDS = 32, BAD = 2 * 4 + 2 + 1 }; /* batch 2, rank 1's second record */

static dm_status write_db(const char *path) {
  dm_db *db = NULL;
  DM_TRY(dm_db_open_write(path, &db));
  float img[16];
  int64_t dims[3] = {1, 4, 4};
  int32_t label = 0;
  Caffe2__TensorProto ip = CAFFE2__TENSOR_PROTO__INIT, lp = CAFFE2__TENSOR_PROTO__INIT;
  ip.n_dims = 3;
  ip.dims = dims;
  ip.has_data_type = 1;
  ip.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__FLOAT;
  ip.n_float_data = 16;
  ip.float_data = img;
  lp.has_data_type = 1;
  lp.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32;
  lp.n_int32_data = 1;
  lp.int32_data = &label;
  Caffe2__TensorProto *protos[2] = {&ip, &lp};
  Caffe2__TensorProtos rec = CAFFE2__TENSOR_PROTOS__INIT;
  rec.n_protos = 2;
  rec.protos = protos;
  dm_status s = DM_OK;
  for (int i = 0; i < RECORDS && s == DM_OK; i++) {
    for (int k = 0; k < 16; k++)
      img[k] = i == BAD ? 1e6f : (float)sin(0.7 * i + 0.3 * k);
    label = i % 3;
    uint8_t buf[512];
    size_t n = protobuf_c_message_get_packed_size(&rec.base);
    char key[16];
    int klen = snprintf(key, sizeof key, "%08d", i);
    protobuf_c_message_pack(&rec.base, buf);
    s = dm_db_put(db, key, (size_t)klen, buf, n);
  }
  if (s == DM_OK)
    s = dm_db_commit(db);
  dm_db_close(db);
  return s;
}

/* The fills' seed is the rank's (%d): each rank draws its own weights. */
static const char init_net_fmt[] =
    "name: 'init' device_option { random_seed: %d }\n"
    "op { type: 'GaussianFill' output: 'fc_w' arg { name: 'shape' ints: 3 ints: 16 }\n"
    "     arg { name: 'std' f: 0.3 } }\n"
    "op { type: 'ConstantFill' output: 'fc_b' arg { name: 'shape' ints: 3 }\n"
    "     arg { name: 'value' f: 0.1 } }\n";
static const char train_net[] =
    "name: 'train'\n"
    "op { type: 'TensorProtosDBInput' output: 'data' output: 'label'\n"
    "     arg { name: 'db' s: 'set-by-the-options' } arg { name: 'batch_size' i: 2 } }\n"
    "op { type: 'FC' input: 'data' input: 'fc_w' input: 'fc_b' output: 'pred' }\n"
    "op { type: 'SoftmaxWithLoss' input: 'pred' input: 'label' output: 'softmax'\n"
    "     output: 'loss' }\n"
    "external_input: 'fc_w' external_input: 'fc_b'\n";

static double scalar(dm_workspace *ws, const char *name) {
  const dm_tensor *t = NULL;
  if (dm_workspace_fetch(ws, name, &t) != DM_OK || dm_tensor_numel(t) < 1)
    return NAN;
  const void *d = dm_tensor_data(t);
  switch (dm_tensor_dtype(t)) {
  case DM_FLOAT: return *(const float *)d;
  case DM_INT64: return (double)*(const int64_t *)d;
  case DM_INT32: return *(const int32_t *)d;
  default: return NAN;
  }
}

/* Whether blob `name` holds the same bytes on every rank (2 ranks: see the header). */
static int same_on_ranks(dm_workspace *ws, const char *name) {
  const dm_tensor *t = NULL;
  if (dm_workspace_fetch(ws, name, &t) != DM_OK)
    return 0;
  const unsigned char *p = dm_tensor_data(t);
  uint64_t h = 1469598103934665603u;
  for (size_t i = 0; i < dm_tensor_nbytes(t); i++)
    h = (h ^ p[i]) * 1099511628211u;
  double mine[2] = {(double)(h >> 32), (double)(h & 0xffffffffu)}, mean[2] = {mine[0], mine[1]};
  if (dm_dist_mean(mean, 2) != DM_OK)
    return 0;
  return mean[0] == mine[0] && mean[1] == mine[1];
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: train_ranks_api SCRATCH_DIR\n");
    return 2;
  }
  if (dm_dist_init(&rank, &size) != DM_OK) {
    fprintf(stderr, "dm_dist_init: %s\n", dm_last_error());
    return 1;
  }
  if (size != 2) {
    fprintf(stderr, "run me as 2 ranks, not %d\n", size);
    dm_dist_finalize();
    return 2;
  }
  char db[1024], net[1100];
  snprintf(db, sizeof db, "%s/overflow_db", argv[1]);
  snprintf(net, sizeof net, "%s/train_net_%d.pbtxt", argv[1], rank);
  dm_status s = rank == 0 ? write_db(db) : DM_OK;
  CHECK(s == DM_OK, "writing the DB");
  double ok = s == DM_OK; /* every rank waits for the DB (and learns whether it exists) */
  dm_dist_mean(&ok, 1);
  FILE *f = fopen(net, "w");
  if (f) {
    fputs(train_net, f);
    fclose(f);
  }
  dm_workspace *ws = NULL;
  dm_net *step = NULL;
  dm_net *init = NULL;
  CHECK(ok == 1 && f && dm_workspace_create(&ws) == DM_OK, "setup");
  if (failures)
    goto done;
  char init_net[512];
  snprintf(init_net, sizeof init_net, init_net_fmt, 11 + rank);
  CHECK(dm_workspace_create_net_bytes(ws, init_net, strlen(init_net), 1, &init) == DM_OK &&
            dm_net_run(init) == DM_OK,
        "init net");
  /* each rank drew its own weights (no seed): rank 0's go everywhere */
  CHECK(!same_on_ranks(ws, "fc_w"), "the ranks' random weights are equal before the broadcast");
  CHECK(dm_workspace_broadcast(ws, NULL, 0, 0) == DM_OK, "broadcast");
  CHECK(same_on_ranks(ws, "fc_w"), "fc_w differs after the broadcast");
  dm_train_options o;
  dm_train_options_init(&o);
  o.db = db;
  o.precision = DM_PRECISION_FP16;
  o.init_scale = 1024;
  o.data_parallel = 1;
  o.lr = 0.1;
  static const char *const data[] = {"data", "label"};
  o.data_blobs = data;
  o.n_data_blobs = 2;
  CHECK(dm_workspace_create_train_net(ws, net, &o, &step) == DM_OK, "the training net");
  if (failures)
    goto done;
  static const char *const state[] = {"fc_w", "fc_b", "fc_w_momentum", "fc_b_momentum",
                                      DM_TRAIN_LOSS_SCALE_BLOB, DM_TRAIN_ITERATION_BLOB};
  double scale0 = scalar(ws, DM_TRAIN_LOSS_SCALE_BLOB);
  for (int it = 1; it <= 5 && !failures; it++) {
    CHECK(dm_net_run(step) == DM_OK, "step %d", it);
    double skipped = scalar(ws, DM_TRAIN_SKIPPED_BLOB), scale = scalar(ws, DM_TRAIN_LOSS_SCALE_BLOB);
    /* step 3 reads global batch 2 (the iteration counter stays at 2 when it is skipped) */
    double want_skipped = it >= 3 ? 1 : 0;
    CHECK(skipped == want_skipped, "step %d: %g steps skipped, expected %g", it, skipped,
          want_skipped);
    CHECK(scale == (it >= 3 ? scale0 / 2 : scale0), "step %d: loss scale %g (it started at %g)",
          it, scale, scale0);
    for (size_t k = 0; k < sizeof state / sizeof *state; k++)
      CHECK(same_on_ranks(ws, state[k]), "step %d: '%s' differs between the ranks", it, state[k]);
  }
done:
  printf("rank %d of %d: %d failure(s)\n", rank, size, failures);
  dm_workspace_destroy(ws);
  remove(net);
  dm_dist_finalize();
  return failures ? 1 : 0;
}
