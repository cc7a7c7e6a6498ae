/* device_flags.c: parsing of --device and --cpu-ops, and the early GPU check. (The
 * device pass itself runs as the pipeline's device stage, net/passes/pipeline_stages.c.) */
#include "device_flags.h"

#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "core/device.h"
#include "net/net.h"

enum { O_DEVICE = DM_DEVICE_FLAG_BASE, O_CPU_OPS, O_NO_GRAPH };

const struct option dm_device_long_opts[] = {
    {"device", required_argument, NULL, O_DEVICE},
    {"cpu-ops", required_argument, NULL, O_CPU_OPS},
    {"no-graph", no_argument, NULL, O_NO_GRAPH},
    {NULL, 0, NULL, 0}};

struct option *dm_device_merge_opts(const struct option *base) {
  return dm_cli_merge_options(base, -1, dm_device_long_opts);
}

void dm_device_cli_init(dm_device_cli *d) {
  memset(d, 0, sizeof *d);
  dm_device_opts_init(&d->opts);
}

void dm_device_cli_free(dm_device_cli *d) {
  free(d->cpu_buf);
  d->cpu_buf = NULL;
}

/* "cpu", "cuda" (GPU 0) or "cuda:N". */
static int parse_device(const char *arg, dm_device_cli *d) {
  if (strcmp(arg, "cpu") == 0) {
    d->cuda = 0;
    return 1;
  }
  if (strcmp(arg, "cuda") == 0) {
    d->cuda = 1;
    d->opts.device_id = 0;
    return 1;
  }
  long id = 0;
  if (strncmp(arg, "cuda:", 5) == 0 && dm_cli_parse_long(arg + 5, 0, 1023, &id)) {
    d->cuda = 1;
    d->opts.device_id = (int)id;
    return 1;
  }
  return 0;
}

int dm_device_flag(const char *cmd, int c, const char *arg, dm_device_cli *d, int *rc) {
  if (c == O_DEVICE) {
    *rc = parse_device(arg, d) ? DM_EXIT_OK
                               : dm_cli_usage_error(cmd, "--device wants cpu or cuda (or cuda:N), "
                                                         "got '%s'", arg);
    return 1;
  }
  if (c == O_NO_GRAPH) {
    d->no_graph = 1;
    *rc = DM_EXIT_OK;
    return 1;
  }
  if (c != O_CPU_OPS)
    return 0;
  free(d->cpu_buf);
  d->opts.n_force_cpu = 0;
  if (!(d->cpu_buf = strdup(arg))) {
    *rc = dm_cli_failf("out of memory");
    return 1;
  }
  size_t n = 0;
  for (char *save = NULL, *t = strtok_r(d->cpu_buf, ",", &save); t;
       t = strtok_r(NULL, ",", &save)) {
    if (n == DM_DEVICE_MAX_LIST) {
      *rc = dm_cli_usage_error(cmd, "--cpu-ops lists more than %d types", DM_DEVICE_MAX_LIST);
      return 1;
    }
    d->cpu_ops[n++] = t;
  }
  d->opts.force_cpu = d->cpu_ops;
  d->opts.n_force_cpu = n;
  *rc = DM_EXIT_OK;
  return 1;
}

void dm_device_help(FILE *f) {
  fprintf(f,
          "  --device DEV             cpu (default), cuda or cuda:N: the device pass puts\n"
          "                           every op with a CUDA kernel on GPU N and inserts\n"
          "                           CopyCPUToGPU/CopyGPUToCPU where a blob crosses\n"
          "  --cpu-ops T1,T2          with --device cuda: keep these op types on the CPU\n"
          "  --no-graph               (run, train) no CUDA graphs: every op is launched\n"
          "                           one by one (by default the longest run of GPU ops\n"
          "                           is recorded once its shapes settle and replayed)\n");
}

dm_status dm_device_cli_apply(const dm_device_cli *d, dm_net *net) {
  return d->no_graph ? dm_net_set_device_graphs(net, 0) : DM_OK;
}

void dm_device_cli_report(FILE *f, const dm_net *net) {
  dm_run_counts c;
  dm_net_run_counts(net, &c);
  if (c.runs == 0 || (c.device_ops == 0 && c.graph_launches == 0))
    return;
  char line[512];
  dm_net_graph_status(net, line, sizeof line);
  double r = (double)c.runs;
  fprintf(f, "# %s\n# per run (%ld runs): %.1f device ops launched one by one, %.2f graph "
             "replays (%.0f device operations each), %.2f host syncs\n",
          line, c.runs, (double)c.device_ops / r, (double)c.graph_launches / r,
          c.graph_launches ? (double)c.graph_nodes / (double)c.graph_launches : 0.0,
          (double)c.host_syncs / r);
}

dm_status dm_device_cli_check(const dm_device_cli *d) {
  if (!d->cuda)
    return DM_OK;
  DM_TRY(dm_init()); /* registers the CUDA backend, if built */
  dm_status s = dm_device_check(DM_CUDA, d->opts.device_id);
  if (s != DM_OK && d->opts.device_id)
    dm_error_prefix(s, "--device cuda:%d", d->opts.device_id);
  else if (s != DM_OK)
    dm_error_prefix(s, "--device cuda");
  return s;
}
