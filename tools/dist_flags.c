/* dist_flags.c: `train --data-parallel` and its flags (see dist_flags.h). */
#include "dist_flags.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "demitasse.h"
#include "net/api.h"
#include "net/netdef_build.h"

enum { O_DP = DM_DIST_FLAG_BASE, O_DP_BUCKET, O_DP_FP32, O_DP_TIMEOUT };

static const struct option dist_long_opts[] = {
    {"data-parallel", no_argument, NULL, O_DP},
    {"dp-bucket-mb", required_argument, NULL, O_DP_BUCKET},
    {"dp-fp32", no_argument, NULL, O_DP_FP32},
    {"dp-timeout", required_argument, NULL, O_DP_TIMEOUT},
    {NULL, 0, NULL, 0}};

struct option *dm_dist_merge_opts(const struct option *base) {
  return dm_cli_merge_options(base, -1, dist_long_opts);
}

void dm_dist_cli_init(dm_dist_cli *d) {
  memset(d, 0, sizeof *d);
  d->size = 1;
}

int dm_dist_flag(const char *cmd, int c, const char *arg, dm_dist_cli *d, int *rc) {
  long v = 0;
  char *end = NULL;
  switch (c) {
  case O_DP: d->on = 1; break;
  case O_DP_FP32: d->fp32 = 1; break;
  case O_DP_BUCKET:
    if (!dm_cli_parse_long(arg, 1, 1L << 20, &v)) {
      *rc = dm_cli_usage_error(cmd, "--dp-bucket-mb wants a whole number of MiB in [1, "
                                    "2^20], got '%s'", arg);
      return 1;
    }
    d->bucket_bytes = (int64_t)v << 20;
    break;
  case O_DP_TIMEOUT:
    d->timeout_s = strtod(arg, &end);
    if (!*arg || *end || !(d->timeout_s > 0 && d->timeout_s <= 1e6)) {
      *rc = dm_cli_usage_error(cmd, "--dp-timeout wants seconds in (0, 1e6], got '%s'", arg);
      return 1;
    }
    break;
  default: return 0;
  }
  *rc = DM_EXIT_OK;
  return 1;
}

void dm_dist_help(FILE *f) {
  fprintf(f,
          "  --data-parallel          run as one rank of `mpirun -np N demitasse train ...`:\n"
          "                           rank 0's initial weights go to every rank, each reads\n"
          "                           its share of every global batch (the net's batch_size\n"
          "                           per rank), the weight gradients are averaged over the\n"
          "                           ranks (Allreduce ops after the backward ops), the loss\n"
          "                           and accuracy logged are means over the ranks, and rank\n"
          "                           0 alone prints and writes the CSV, the curves and the\n"
          "                           checkpoints (every rank reads --resume's checkpoint)\n"
          "  --dp-bucket-mb N         MiB per all-reduce call (default 25)\n"
          "  --dp-fp32                sum FP16 gradients in FP32 (default: in FP16)\n"
          "  --dp-timeout S           seconds a rank waits for the others in a collective\n"
          "                           before the job ends with an error (default 300)\n");
}

dm_status dm_dist_cli_start(dm_dist_cli *d, int cuda, int *cuda_id) {
  if (!d->on)
    return DM_OK;
  DM_TRY(dm_dist_init(&d->rank, &d->size));
  if (d->timeout_s > 0)
    DM_TRY(dm_dist_set_timeout(d->timeout_s));
  /* One GPU per rank on a host: OpenMPI names the rank's index on its host. */
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (cuda && cuda_id && *cuda_id == 0 && local)
    *cuda_id = atoi(local);
  if (d->rank != 0 && !freopen("/dev/null", "w", stdout))
    return dm_error(DM_ERR_IO, "rank %d: silencing stdout", d->rank);
  return DM_OK;
}

/* The net's ops, packed, with every `db` argument's string left out. */
static uint64_t net_fingerprint(Caffe2__NetDef *net) {
  uint64_t h = 0;
  for (size_t i = 0; i < net->n_op; i++) {
    Caffe2__Argument *db = dm_opdef_find_arg(net->op[i], "db");
    char *saved = db ? db->s.data ? (char *)db->s.data : NULL : NULL;
    size_t saved_len = db ? db->s.len : 0;
    if (db) {
      db->s.data = NULL;
      db->s.len = 0;
    }
    size_t n = protobuf_c_message_get_packed_size(&net->op[i]->base);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf) {
      protobuf_c_message_pack(&net->op[i]->base, buf);
      h = dm_fingerprint(h, buf, n);
    }
    free(buf);
    if (db) {
      db->s.data = (uint8_t *)saved;
      db->s.len = saved_len;
    }
  }
  return h;
}

/* The batch_size of the net's first op that has one (its data input), or 0. */
static int64_t net_batch(const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__Argument *a = dm_opdef_find_arg(net->op[i], "batch_size");
    if (a && a->has_i)
      return a->i;
  }
  return 0;
}

dm_status dm_dist_cli_agree(const dm_dist_cli *d, Caffe2__NetDef *net, long iters,
                            int precision, int scaling) {
  if (!d->on || d->size < 2)
    return DM_OK;
  const dm_dist_fact facts[] = {
      {"the training net (fingerprint of its ops)", (int64_t)net_fingerprint(net), 1},
      {"batch size (batch_size)", net_batch(net), 0},
      {"--iters", iters, 0},
      {"precision (dtype number: 1 FP32, 12 FP16, 20 BF16)", precision, 0},
      {"loss scaling (--loss-scale)", scaling, 0},
      {"--dp-fp32", d->fp32, 0},
      {"--dp-bucket-mb (bytes)", d->bucket_bytes, 0},
  };
  return dm_dist_agree("what they train", facts, sizeof facts / sizeof facts[0]);
}

void dm_dist_cli_pass_opts(const dm_dist_cli *d, int overlap, dm_dp_opts *o) {
  memset(o, 0, sizeof *o);
  o->bucket_bytes = d->bucket_bytes;
  o->fp32_wire = d->fp32;
  o->overlap = overlap;
  o->num_shards = d->size;
  o->shard_id = d->rank;
}

/* After MPI_Abort, the most a rank waits to be ended by it (seconds): OpenMPI's abort
 * goes through mpirun, which on a network partition keeps trying to reach the lost host
 * and may never come back to end this rank. */
#define DM_DIST_ABORT_GRACE_S 15

static void abort_grace_over(int sig) {
  (void)sig;
  static const char msg[] = "demitasse train: MPI_Abort has not ended this rank after "
                            "15 s (mpirun cannot reach a host?): exiting by itself\n";
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)w;
  _exit(1);
}

void dm_dist_cli_finish(dm_dist_cli *d, int failed) {
  if (!d->on)
    return;
  if (failed && d->size > 1) {
    fprintf(stderr, "demitasse train: rank %d of %d failed: ending every rank\n", d->rank,
            d->size);
    fflush(NULL);
    /* The CLI's own watchdog (the library never exits): this process ends even if the
     * abort never returns. */
    signal(SIGALRM, abort_grace_over);
    alarm(DM_DIST_ABORT_GRACE_S);
    dm_dist_abort(1);
  }
  dm_dist_finalize();
}
