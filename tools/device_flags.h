/* device_flags.h: --device cpu|cuda|cuda:N and --cpu-ops, shared by `run`, `train` and
 * `rewrite`. The device pass on the nets a command runs is net/passes/pipeline.h's. */
#ifndef DM_TOOLS_DEVICE_FLAGS_H
#define DM_TOOLS_DEVICE_FLAGS_H

#include <getopt.h>
#include <stdio.h>

#include "net/passes/pipeline.h"

#define DM_DEVICE_FLAG_BASE 1200
#define DM_DEVICE_MAX_LIST 64

typedef struct dm_device_cli {
  int cuda;            /* --device cuda or cuda:N: place the nets on GPU opts.device_id */
  int no_graph;        /* --no-graph: no CUDA graphs (run, train) */
  dm_device_opts opts; /* force_cpu points into cpu_ops */
  char *cpu_buf;       /* strdup'd --cpu-ops list, split in place */
  const char *cpu_ops[DM_DEVICE_MAX_LIST];
} dm_device_cli;

/* getopt values: DM_DEVICE_FLAG_BASE is --device, DM_DEVICE_FLAG_BASE + 1 --cpu-ops,
 * DM_DEVICE_FLAG_BASE + 2 --no-graph. */
extern const struct option dm_device_long_opts[];
void dm_device_cli_init(dm_device_cli *d);
void dm_device_cli_free(dm_device_cli *d);
/* Like dm_optim_flag: 1 if `c` was a device flag (*rc set to DM_EXIT_OK or a usage
 * error, already printed). */
int dm_device_flag(const char *cmd, int c, const char *arg, dm_device_cli *d, int *rc);
void dm_device_help(FILE *f);
/* A malloc'd copy of the zero-terminated table `base` with the device options appended. */
struct option *dm_device_merge_opts(const struct option *base);
/* With --device cuda: DM_OK if the GPU can run ops, else dm_device_check's error (which
 * names the device and why), so a command fails before it reads or runs anything. */
dm_status dm_device_cli_check(const dm_device_cli *d);
/* --no-graph on a net the command made. */
dm_status dm_device_cli_apply(const dm_device_cli *d, dm_net *net);
/* For a net that ran device ops: its device graph (what is replayed, or why nothing
 * is) and, per run, the device ops launched one by one, the graph replays and the host
 * synchronisations inside the net's runs; one '#' line each, to f. */
void dm_device_cli_report(FILE *f, const dm_net *net);

#endif
