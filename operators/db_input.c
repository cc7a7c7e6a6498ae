/* db_input.c: TensorProtosDBInput, batches from an LMDB of TensorProtos records.
 *
 * Each record is a serialised TensorProtos (what `demitasse make-db` and Caffe2's
 * make_mnist_db write); output k stacks tensor k of `batch_size` records: shape
 * (batch_size, dims of the record's tensor). Caffe2's op reads through a DBReader blob;
 * ours opens `db` itself (args db, db_type "lmdb", batch_size, shuffle, seed, scale).
 *
 * Dtypes: UINT8 (or Caffe2's BYTE) and FLOAT tensors come out FLOAT, multiplied by
 * `scale` (default 1; 1/256 maps pixels into [0, 1) as the Caffe2 MNIST tutorial's Scale
 * op did), so a net needs no cast op; INT32 and INT64 come out as stored (labels).
 *
 * Which records: batch b holds the records at stream positions p = b*batch_size + j,
 * j < batch_size (with num_shards S and shard_id r, data parallelism's ranks: p =
 * (b*S + r)*batch_size + j, rank r's slice of global batch b of S*batch_size records, so
 * the S ranks together read exactly what one reader of S*batch_size does); position p is record r = p mod N of epoch e = p div N, and with
 * shuffle=1 record r of epoch e is perm_e(r), a Fisher-Yates permutation drawn from
 * (seed, e) alone. So every record appears once per epoch, and batch b is a function of
 * b: with the optional input `iter` (the INT64 iteration blob, which checkpoints carry)
 * b is its value, so a run resumed from a checkpoint reads exactly the batches the
 * uninterrupted run would have. Without `iter`, b counts this op's runs from 0.
 *
 * Prefetch: a thread decodes batch b+1 while the net uses batch b; a run waits only
 * when the batch it needs is not ready yet (the first run, or a jump in `iter`). The
 * decoded batch is handed to the output by exchanging buffers, not copied: at ResNet
 * sizes a copy would cost the step milliseconds (77 MB at batch 128), and the two
 * buffers it alternates between stay the same, so a GPU run page-locks them once and
 * uploads them by DMA (core/tensor.c); decoding into a buffer waits for its upload. The
 * thread starts on the first run (not at instantiation, which shape inference also
 * does) and is joined in fini. The records are read straight from LMDB's memory map
 * through one read transaction held for the op's life, so the thread makes no LMDB
 * calls. Shapes come from the first record, read at instantiation; a record that
 * differs, or does not parse, is an error naming the DB and the record's key.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "core/db.h"
#include "core/netio.h"
#include "proto/caffe2.pb-c.h"

#define MAX_OUT 8

typedef struct out_spec {
  dm_dtype stored, out;
  int ndim; /* of one record's tensor */
  int64_t dims[DM_MAX_DIMS];
  int64_t numel;
} out_spec;

typedef struct dbi_state {
  dm_db *db;
  const char *path; /* the DB's, owned by db */
  size_t n;         /* records */
  const void **key, **val; /* (n) views into the memory map */
  size_t *klen, *vlen;
  int n_out;
  out_spec spec[MAX_OUT];
  int64_t batch;
  int64_t shards, shard; /* num_shards, shard_id */
  int shuffle;
  uint64_t seed;
  float scale;
  int64_t runs; /* without `iter`: the next batch */

  /* Worker-only: permutations of two epochs (epoch e in slot e & 1). */
  uint32_t *perm[2];
  int64_t perm_epoch[2];

  /* Prefetch; everything below mu is guarded by it. */
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t req;   /* batch asked for, -1: none */
  int64_t ready; /* batch in slot, -1: none */
  int busy, stop;
  dm_status status; /* of the ready batch */
  char err[1024];
  /* (batch, dims) in the output dtype; handed to the output by exchanging storages
   * (dm_tensor_swap_storage), so the slot then holds the output's previous buffer */
  dm_tensor *slot[MAX_OUT];
} dbi_state;

static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A uniform integer in [0, bound) from a splitmix64 stream, without modulo bias. */
static uint64_t bounded(uint64_t *s, uint64_t bound) {
  uint64_t threshold = -bound % bound;
  for (;;) {
    uint64_t x = mix64(*s += 0x9E3779B97F4A7C15ull);
    if (x >= threshold)
      return x % bound;
  }
}

static const uint32_t *epoch_perm(dbi_state *st, int64_t e) {
  int k = (int)(e & 1);
  if (st->perm_epoch[k] != e) {
    uint32_t *p = st->perm[k];
    uint64_t s = mix64(st->seed ^ 0x5DEECE66Dull) ^ mix64((uint64_t)e + 1);
    for (size_t i = 0; i < st->n; i++)
      p[i] = (uint32_t)i;
    for (size_t i = st->n; i > 1; i--) {
      size_t j = (size_t)bounded(&s, i);
      uint32_t t = p[i - 1];
      p[i - 1] = p[j];
      p[j] = t;
    }
    st->perm_epoch[k] = e;
  }
  return st->perm[k];
}

static const char *key_of(const dbi_state *st, size_t r, char *buf, size_t cap) {
  return dm_db_key_str(st->key[r], st->klen[r], buf, cap);
}

/* The output dtype for a stored one (UNDEFINED: not supported). */
static dm_dtype out_dtype(dm_dtype stored) {
  switch (stored) {
  case DM_UINT8:
  case DM_FLOAT: return DM_FLOAT;
  case DM_INT32: return DM_INT32;
  case DM_INT64: return DM_INT64;
  default: return DM_UNDEFINED;
  }
}

/* Parses record r; the caller frees *out. */
static dm_status parse_record(const dbi_state *st, size_t r, Caffe2__TensorProtos **out) {
  char ks[96], where[1200];
  snprintf(where, sizeof where, "db '%s' key '%s'", st->path, key_of(st, r, ks, sizeof ks));
  ProtobufCMessage *m = NULL;
  DM_TRY(dm_message_parse(st->val[r], st->vlen[r], where, &caffe2__tensor_protos__descriptor,
                          DM_FORMAT_BINARY, &m));
  *out = (Caffe2__TensorProtos *)m;
  return DM_OK;
}

static dm_dtype proto_dtype(const Caffe2__TensorProto *tp) {
  int t = tp->has_data_type ? (int)tp->data_type : DM_FLOAT;
  return t == DM_BYTE ? DM_UINT8 : (dm_dtype)t;
}

/* Writes tensor k of record r into slot buffer `slot` at batch row j, after checking it. */
static dm_status decode_one(dbi_state *st, size_t r, int k, const Caffe2__TensorProto *tp,
                            int64_t j, void *slot) {
  const out_spec *sp = &st->spec[k];
  char ks[96];
  int same = proto_dtype(tp) == sp->stored && (int)tp->n_dims == sp->ndim;
  for (int d = 0; same && d < sp->ndim; d++)
    same = tp->dims[d] == sp->dims[d];
  if (!same)
    return dm_error(DM_ERR_SHAPE,
                    "db '%s' key '%s': tensor %d is %s with %zu dims, unlike the first "
                    "record's %s with %d",
                    st->path, key_of(st, r, ks, sizeof ks), k, dm_dtype_name(proto_dtype(tp)),
                    tp->n_dims, dm_dtype_name(sp->stored), sp->ndim);
  size_t n = (size_t)sp->numel, have = 0;
  const void *src = NULL;
  switch (sp->stored) {
  case DM_UINT8:
    if (tp->has_byte_data)
      src = tp->byte_data.data, have = tp->byte_data.len;
    else /* Caffe2's UINT8 layout: one int32 each */
      have = tp->n_int32_data;
    break;
  case DM_FLOAT: src = tp->float_data, have = tp->n_float_data; break;
  case DM_INT32: src = tp->int32_data, have = tp->n_int32_data; break;
  default: src = tp->int64_data, have = tp->n_int64_data; break;
  }
  if (have != n)
    return dm_error(DM_ERR_PARSE, "db '%s' key '%s': tensor %d holds %zu values, not %zu",
                    st->path, key_of(st, r, ks, sizeof ks), k, have, n);
  if (n == 0)
    return DM_OK;
  if (sp->out == DM_FLOAT) {
    float *o = (float *)slot + (size_t)j * n, scale = st->scale;
    if (sp->stored == DM_FLOAT) {
      for (size_t i = 0; i < n; i++)
        o[i] = ((const float *)src)[i] * scale;
    } else if (src) {
      for (size_t i = 0; i < n; i++)
        o[i] = (float)((const uint8_t *)src)[i] * scale;
    } else {
      for (size_t i = 0; i < n; i++) {
        int32_t v = tp->int32_data[i];
        if (v < 0 || v > 255)
          return dm_error(DM_ERR_PARSE, "db '%s' key '%s': UINT8 value %zu is %d", st->path,
                          key_of(st, r, ks, sizeof ks), i, (int)v);
        o[i] = (float)v * scale;
      }
    }
  } else {
    size_t es = dm_dtype_size(sp->out);
    memcpy((char *)slot + (size_t)j * n * es, src, n * es);
  }
  return DM_OK;
}

/* Decodes batch b into the slot (worker thread, or init for nothing). */
static dm_status decode_batch(dbi_state *st, int64_t b) {
  /* A slot buffer was the output's until the last run: if it was uploaded to a GPU since,
   * dm_tensor_mutable_data waits here for that upload to finish reading it. */
  void *slot[MAX_OUT];
  for (int k = 0; k < st->n_out; k++)
    slot[k] = dm_tensor_mutable_data(st->slot[k]);
  for (int64_t j = 0; j < st->batch; j++) {
    uint64_t p = ((uint64_t)b * (uint64_t)st->shards + (uint64_t)st->shard) * (uint64_t)st->batch +
                 (uint64_t)j;
    int64_t e = (int64_t)(p / st->n);
    size_t r = (size_t)(p % st->n);
    if (st->shuffle)
      r = epoch_perm(st, e)[r];
    Caffe2__TensorProtos *rec = NULL;
    DM_TRY(parse_record(st, r, &rec));
    dm_status s = DM_OK;
    char ks[96];
    if (rec->n_protos != (size_t)st->n_out)
      s = dm_error(DM_ERR_SHAPE, "db '%s' key '%s': %zu tensors, unlike the first record's %d",
                   st->path, key_of(st, r, ks, sizeof ks), rec->n_protos, st->n_out);
    for (int k = 0; s == DM_OK && k < st->n_out; k++)
      s = decode_one(st, r, k, rec->protos[k], j, slot[k]);
    protobuf_c_message_free_unpacked(&rec->base, NULL);
    DM_TRY(s);
  }
  return DM_OK;
}

static void *worker(void *arg) {
  dbi_state *st = arg;
  pthread_mutex_lock(&st->mu);
  for (;;) {
    while (!st->stop && st->req < 0)
      pthread_cond_wait(&st->cv, &st->mu);
    if (st->stop)
      break;
    int64_t b = st->req;
    st->req = -1;
    st->busy = 1;
    pthread_mutex_unlock(&st->mu);
    dm_status s = decode_batch(st, b); /* the slot is ours while busy */
    pthread_mutex_lock(&st->mu);
    st->busy = 0;
    st->ready = b;
    st->status = s;
    if (s != DM_OK)
      snprintf(st->err, sizeof st->err, "%s", dm_last_error());
    pthread_cond_broadcast(&st->cv);
  }
  pthread_mutex_unlock(&st->mu);
  return NULL;
}

static void dbi_fini(void *state) {
  dbi_state *st = state;
  if (!st)
    return;
  if (st->started) {
    pthread_mutex_lock(&st->mu);
    st->stop = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->thread, NULL);
  }
  pthread_mutex_destroy(&st->mu);
  pthread_cond_destroy(&st->cv);
  for (int k = 0; k < MAX_OUT; k++)
    dm_tensor_free(st->slot[k]);
  free(st->perm[0]);
  free(st->perm[1]);
  free(st->key);
  free(st->val);
  free(st->klen);
  free(st->vlen);
  dm_db_close(st->db);
  free(st);
}

/* Indexes every record (views into the map) and takes the shapes from the first. */
static dm_status index_db(dm_op_ctx *ctx, dbi_state *st) {
  st->n = dm_db_count(st->db);
  if (st->n == 0)
    return dm_error(DM_ERR_INVALID, "db '%s' has no records", st->path);
  if (st->n > UINT32_MAX)
    return dm_error(DM_ERR_LIMIT, "db '%s' has %zu records (at most 2^32 - 1)", st->path, st->n);
  st->key = calloc(st->n, sizeof *st->key);
  st->val = calloc(st->n, sizeof *st->val);
  st->klen = calloc(st->n, sizeof *st->klen);
  st->vlen = calloc(st->n, sizeof *st->vlen);
  if (!st->key || !st->val || !st->klen || !st->vlen)
    return DM_NOMEM("the record index");
  dm_db_iter *it = NULL;
  DM_TRY(dm_db_iter_open(st->db, &it));
  dm_status s = DM_OK;
  size_t i = 0;
  for (int done = 0; s == DM_OK && i < st->n; i++) {
    s = dm_db_iter_next(it, &st->key[i], &st->klen[i], &st->val[i], &st->vlen[i], &done);
    if (s == DM_OK && done)
      s = dm_error(DM_ERR_IO, "db '%s': %zu records announced, %zu found", st->path, st->n, i);
  }
  dm_db_iter_close(it);
  DM_TRY(s);

  Caffe2__TensorProtos *rec = NULL;
  DM_TRY(parse_record(st, 0, &rec));
  char ks[96];
  if (rec->n_protos != (size_t)st->n_out)
    s = dm_error(DM_ERR_SHAPE, "db '%s' key '%s': records hold %zu tensors but the op has %d "
                 "outputs", st->path, key_of(st, 0, ks, sizeof ks), rec->n_protos, st->n_out);
  for (int k = 0; s == DM_OK && k < st->n_out; k++) {
    const Caffe2__TensorProto *tp = rec->protos[k];
    out_spec *sp = &st->spec[k];
    sp->stored = proto_dtype(tp);
    sp->out = out_dtype(sp->stored);
    if (sp->out == DM_UNDEFINED)
      s = dm_error(DM_ERR_UNSUPPORTED,
                   "db '%s' key '%s': tensor %d is %s (UINT8, FLOAT, INT32, INT64 supported)",
                   st->path, key_of(st, 0, ks, sizeof ks), k, dm_dtype_name(sp->stored));
    else if (tp->n_dims + 1 > DM_MAX_DIMS)
      s = dm_error(DM_ERR_SHAPE, "db '%s' key '%s': tensor %d has %zu dims", st->path,
                   key_of(st, 0, ks, sizeof ks), k, tp->n_dims);
    else if ((s = dm_shape_numel((int)tp->n_dims, tp->dims, &sp->numel)) == DM_OK) {
      sp->ndim = (int)tp->n_dims;
      if (tp->n_dims) /* a scalar's dims may be NULL */
        memcpy(sp->dims, tp->dims, tp->n_dims * sizeof *tp->dims);
      int64_t dims[DM_MAX_DIMS];
      dims[0] = st->batch;
      memcpy(dims + 1, sp->dims, (size_t)sp->ndim * sizeof *dims);
      if (!(st->slot[k] = dm_tensor_new(dm_op_output(ctx, k)->limit)))
        s = DM_NOMEM("a prefetch buffer");
      else
        s = dm_tensor_resize(st->slot[k], sp->out, sp->ndim + 1, dims);
    }
  }
  protobuf_c_message_free_unpacked(&rec->base, NULL);
  return s;
}

static dm_status dbi_init(dm_op_ctx *ctx, void **state) {
  const char *type = dm_op_arg_string(ctx, "db_type", "lmdb");
  if (strcmp(type, "lmdb") != 0)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "db_type '%s': only \"lmdb\" is supported", type);
  int64_t batch = dm_op_arg_int(ctx, "batch_size", 0);
  if (batch <= 0 || batch > (1 << 24))
    return dm_op_error(ctx, DM_ERR_INVALID, "batch_size must be in [1, 2^24], not %lld",
                       (long long)batch);
  int64_t shards = dm_op_arg_int(ctx, "num_shards", 1), shard = dm_op_arg_int(ctx, "shard_id", 0);
  if (shards < 1 || shards > (1 << 20) || shard < 0 || shard >= shards)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "num_shards %lld and shard_id %lld: need 1 <= num_shards <= 2^20 and 0 "
                       "<= shard_id < num_shards",
                       (long long)shards, (long long)shard);
  if (dm_op_num_outputs(ctx) > MAX_OUT)
    return dm_op_error(ctx, DM_ERR_INVALID, "at most %d outputs", MAX_OUT);
  dbi_state *st = calloc(1, sizeof *st);
  if (!st)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory");
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->cv, NULL);
  st->req = st->ready = -1;
  st->perm_epoch[0] = st->perm_epoch[1] = -1;
  st->n_out = dm_op_num_outputs(ctx);
  st->batch = batch;
  st->shards = dm_op_arg_int(ctx, "num_shards", 1);
  st->shard = dm_op_arg_int(ctx, "shard_id", 0);
  st->shuffle = dm_op_arg_int(ctx, "shuffle", 0) != 0;
  st->seed = (uint64_t)dm_op_arg_int(ctx, "seed", dm_op_random_seed(ctx, 0));
  st->scale = dm_op_arg_float(ctx, "scale", 1.0f);
  dm_status s = dm_db_open_read(dm_op_arg_string(ctx, "db", ""), &st->db);
  if (s == DM_OK) {
    st->path = dm_db_path(st->db);
    s = index_db(ctx, st);
  }
  if (s == DM_OK && st->shuffle &&
      (!(st->perm[0] = malloc(st->n * sizeof(uint32_t))) ||
       !(st->perm[1] = malloc(st->n * sizeof(uint32_t)))))
    s = DM_NOMEM("the shuffle permutations");
  if (s != DM_OK) {
    dbi_fini(st);
    return dm_op_error(ctx, s, "%s", dm_last_error());
  }
  *state = st;
  return DM_OK;
}

static dm_status dbi_infer(dm_op_ctx *ctx) {
  dbi_state *st = dm_op_state(ctx);
  if (dm_op_num_inputs(ctx) > 0)
    DM_TRY(dm_op_iteration_input(ctx, 0, NULL));
  if (!st)
    return dm_op_error(ctx, DM_ERR_INVALID, "the DB was not opened");
  for (int k = 0; k < st->n_out; k++) {
    int64_t dims[DM_MAX_DIMS];
    dims[0] = st->batch;
    memcpy(dims + 1, st->spec[k].dims, (size_t)st->spec[k].ndim * sizeof *dims);
    DM_TRY(dm_op_set_output(ctx, k, st->spec[k].out, st->spec[k].ndim + 1, dims));
  }
  return DM_OK;
}

static dm_status dbi_run(dm_op_ctx *ctx) {
  DM_TRY(dbi_infer(ctx));
  dbi_state *st = dm_op_state(ctx);
  int64_t b = st->runs;
  if (dm_op_num_inputs(ctx) > 0) {
    DM_TRY(dm_op_iteration_input(ctx, 0, &b));
    if ((uint64_t)b > UINT64_MAX / 2 / (uint64_t)st->batch)
      return dm_op_error(ctx, DM_ERR_INVALID, "iteration %lld is out of range", (long long)b);
  }
  if (!st->started) {
    if (pthread_create(&st->thread, NULL, worker, st) != 0)
      return dm_op_error(ctx, DM_ERR_NOMEM, "cannot start the prefetch thread");
    st->started = 1;
  }
  pthread_mutex_lock(&st->mu);
  if (st->ready != b || st->busy || st->req >= 0) {
    /* Not prefetched (first run, or `iter` jumped): ask for b once the thread is idle. */
    while (st->busy || st->req >= 0)
      pthread_cond_wait(&st->cv, &st->mu);
    if (st->ready != b) {
      st->req = b;
      pthread_cond_broadcast(&st->cv);
      while (st->ready != b || st->busy || st->req >= 0)
        pthread_cond_wait(&st->cv, &st->mu);
    }
  }
  /* The batch goes to the output without a copy: the slot takes the output's buffer for
   * the next batch. (The executor has already detached an output that shared its buffer
   * with a view; the copy is for a buffer still shared all the same.) */
  dm_status s = st->status;
  if (s == DM_OK)
    for (int k = 0; k < st->n_out; k++) {
      dm_tensor *y = dm_op_output(ctx, k);
      if (dm_tensor_nbytes(y) && !dm_tensor_swap_storage(y, st->slot[k]))
        memcpy(dm_tensor_mutable_data(y), dm_tensor_data(st->slot[k]), dm_tensor_nbytes(y));
    }
  else
    dm_op_error(ctx, s, "%s", st->err);
  /* The slot is handed over: decode the next batch while the net runs. */
  st->ready = -1;
  st->req = b + 1;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
  st->runs = b + 1;
  return s;
}

static const dm_arg_spec dbi_args[] = {
    {"db", DM_ARG_STRING, 1, "the LMDB directory"},
    {"db_type", DM_ARG_STRING, 0, "\"lmdb\" (the only one)"},
    {"batch_size", DM_ARG_INT, 1, "records per batch"},
    {"shuffle", DM_ARG_INT, 0, "1: a fresh permutation of the records each epoch"},
    {"seed", DM_ARG_INT, 0, "the shuffle seed (default device_option.random_seed, else 0)"},
    {"scale", DM_ARG_FLOAT, 0, "UINT8 and FLOAT tensors come out FLOAT times this (default 1)"},
    {"num_shards", DM_ARG_INT, 0, "readers sharing each global batch (data parallelism: the ranks)"},
    {"shard_id", DM_ARG_INT, 0, "this reader's share of the global batch, in [0, num_shards)"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema dbi_schema = {
    .type = "TensorProtosDBInput", .min_inputs = 0, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = MAX_OUT, .args = dbi_args, .precision = DM_PREC_NONE, .no_gradient = 1,
    .nonfloat_inputs = 0x1, /* the INT64 iteration */
    .reused_outputs = UINT64_MAX, /* every batch tensor alternates between two buffers */
    .infer = dbi_infer,
    .doc = "[iter] -> one batch per record tensor (data FLOAT scaled, labels INT32) from `db`."};

static const dm_op_schema *const schemas[] = {&dbi_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "TensorProtosDBInput", .device = DM_CPU, .init = dbi_init, .run = dbi_run, .fini = dbi_fini},
    {0},
};
const dm_op_family dm_family_db_input = {schemas, kernels};
