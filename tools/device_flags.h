/* device_flags.h: --device cpu|cuda|cuda:N and --cpu-ops, shared by `run`, `train` and
 * `rewrite`, and the glue that applies the device pass to the nets a command runs. */
#ifndef DM_TOOLS_DEVICE_FLAGS_H
#define DM_TOOLS_DEVICE_FLAGS_H

#include <getopt.h>
#include <stdio.h>

#include "net/device_pass.h"

#define DM_DEVICE_FLAG_BASE 1200
#define DM_DEVICE_MAX_LIST 64

typedef struct dm_device_cli {
  int cuda;            /* --device cuda or cuda:N: place the nets on GPU opts.device_id */
  dm_device_opts opts; /* force_cpu points into cpu_ops */
  char *cpu_buf;       /* strdup'd --cpu-ops list, split in place */
  const char *cpu_ops[DM_DEVICE_MAX_LIST];
} dm_device_cli;

/* getopt values: DM_DEVICE_FLAG_BASE is --device, DM_DEVICE_FLAG_BASE + 1 --cpu-ops. */
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
/* The GPU state of the nets a command placed: names it owns (malloc'd). */
typedef struct dm_gpu_state {
  char **names;
  size_t n;
} dm_gpu_state;
void dm_gpu_state_free(dm_gpu_state *g);
/* The device pass on `net` (`host_blobs`: what the command feeds from the host), a
 * summary on `log` (NULL: none). The GPU state it reports is added to *gpu (once per
 * name), for the init nets. */
dm_status dm_device_place_net(Caffe2__NetDef *net, const dm_device_cli *d,
                              const char *const *host_blobs, size_t n_host, FILE *log,
                              dm_gpu_state *gpu);
/* dm_device_place_init with the GPU state collected by dm_device_place_net; a line on
 * `log` (NULL: none) when it appended copies. */
dm_status dm_device_place_init_net(Caffe2__NetDef *init, const dm_device_cli *d,
                                   const dm_gpu_state *gpu, FILE *log);

#endif
