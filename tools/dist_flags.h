/* dist_flags.h: `train`'s data-parallel flags (--data-parallel, --dp-bucket-mb,
 * --dp-fp32, --dp-timeout) and what they do around a run: MPI started, this rank's GPU,
 * rank 0 alone talking and writing, and a failing rank ending the whole job. */
#ifndef DM_TOOLS_DIST_FLAGS_H
#define DM_TOOLS_DIST_FLAGS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "net/passes/data_parallel_pass.h"
#include "proto/caffe2.pb-c.h"

#define DM_DIST_FLAG_BASE 1400 /* (1300s: cli_util.h's flags) */

typedef struct dm_dist_cli {
  int on;                /* --data-parallel */
  int64_t bucket_bytes;  /* --dp-bucket-mb, in bytes (0: the op's default) */
  int fp32;              /* --dp-fp32 */
  double timeout_s;      /* --dp-timeout (0: the library's default) */
  int rank, size;        /* after dm_dist_cli_start */
} dm_dist_cli;

void dm_dist_cli_init(dm_dist_cli *d);
/* Handles a dist flag (1) or not (0); *rc as the other flag parsers. */
int dm_dist_flag(const char *cmd, int c, const char *arg, dm_dist_cli *d, int *rc);
void dm_dist_help(FILE *f);
/* A malloc'd copy of the zero-terminated table `base` with the dist options appended. */
struct option *dm_dist_merge_opts(const struct option *base);
/* With --data-parallel: starts MPI (rank, size), applies the timeout, and silences
 * stdout on ranks other than 0 (their errors still go to stderr, prefixed with the
 * rank). *cuda_id: with a GPU run, GPU "cuda" (no index) becomes this rank's local
 * rank on its host. */
dm_status dm_dist_cli_start(dm_dist_cli *d, int cuda, int *cuda_id);
/* With --data-parallel and 2+ ranks: every rank compares with the others what must be
 * the same on all of them (the training net's fingerprint, its batch size, --iters, the
 * precision and the all-reduce options) before anything is trained, and each fails alike
 * on a difference, naming the ranks and what differs. `net` is the training net as
 * read, before the passes (its `db` arguments, which may name each host's own copy,
 * are left out of the fingerprint). */
dm_status dm_dist_cli_agree(const dm_dist_cli *d, Caffe2__NetDef *net, long iters,
                            int precision, int scaling);
/* The pass's options for this rank. */
void dm_dist_cli_pass_opts(const dm_dist_cli *d, int overlap, dm_dp_opts *o);
/* The end of a run: MPI finalised after success; after a failure (`failed`), the error
 * printed with the rank, then every rank of the job ended (MPI_Abort), so none waits
 * for this one. */
void dm_dist_cli_finish(dm_dist_cli *d, int failed);

#endif
