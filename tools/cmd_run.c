/* cmd_run.c: `demitasse run`, the CLI's inference loop: plugins, init net, .npy inputs,
 * N timed runs of the net, outputs to .npy or a summary on stdout. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_util.h"
#include "core/api.h"
#include "core/half.h"
#include "core/npy.h"
#include "gpu/device_info.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse run --net NET [--init INIT] [--input NAME=FILE.npy]...\n"
          "                     [--output NAME=FILE.npy]... [--iters N] [--plugin LIB]...\n"
          "                     [--device cpu|cuda] [--precision fp32|fp16]\n\n"
          "Runs INIT once (it fills the weights), feeds the inputs, then runs NET N times\n"
          "and prints the time per iteration. Nets are .pb (binary) or .pbtxt (text).\n"
          "Without --output, prints each external output of NET (shape, type, first values).\n\n"
          "  -n, --net FILE          the net to run (required)\n"
          "  -i, --init FILE         an init net, run once first\n"
          "  -I, --input NAME=FILE   feed blob NAME from a .npy file (repeatable)\n"
          "  -o, --output NAME=FILE  write blob NAME to a .npy file after the last run\n"
          "  -N, --iters N           run the net N times (default 1)\n"
          "  -p, --plugin LIB        load an operator plugin (repeatable)\n"
          "  -d, --device DEV        cpu (default) or cuda: place both nets on GPU 0\n"
          "  -P, --precision P       fp32 (default) or fp16: after the init net and the\n"
          "                          inputs, every FLOAT blob becomes FLOAT16, so the net\n"
          "                          runs its FP16 kernels (FP32 accumulation inside)\n"
          "  -h, --help              this text\n");
}

typedef struct run_opts {
  const char *net, *init, *device;
  int fp16;
  dm_strlist inputs, outputs, plugins;
  long iters;
} run_opts;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Places the net and every op that names its own device on CUDA GPU 0. An op's own
 * device_option wins over the net's, so both are set. */
static dm_status place_on_cuda(Caffe2__NetDef *def) {
  if (!def->device_option) {
    def->device_option = malloc(sizeof *def->device_option);
    if (!def->device_option)
      return dm_error(DM_ERR_NOMEM, "out of memory");
    caffe2__device_option__init(def->device_option);
  }
  def->device_option->has_device_type = 1;
  def->device_option->device_type = DM_CUDA;
  for (size_t i = 0; i < def->n_op; i++)
    if (def->op[i]->device_option) {
      def->op[i]->device_option->has_device_type = 1;
      def->op[i]->device_option->device_type = DM_CUDA;
    }
  return DM_OK;
}

static dm_status load_net(dm_workspace *ws, const char *path, int cuda, dm_net **out) {
  Caffe2__NetDef *def = NULL;
  DM_TRY(dm_netdef_read(path, &def));
  if (cuda) {
    dm_status s = place_on_cuda(def);
    if (s != DM_OK) {
      protobuf_c_message_free_unpacked(&def->base, NULL);
      return s;
    }
  }
  return dm_workspace_create_net(ws, def, path, out); /* takes def */
}

static dm_status feed_inputs(dm_workspace *ws, const dm_strlist *inputs) {
  for (size_t i = 0; i < inputs->n; i++) {
    char *name = NULL;
    const char *path = NULL;
    dm_cli_split_binding(inputs->items[i], &name, &path); /* checked when parsing */
    if (!name)
      return dm_error(DM_ERR_NOMEM, "out of memory");
    dm_blob *b = NULL;
    dm_status s = dm_workspace_get_or_create(ws, name, &b);
    if (s == DM_OK && (s = dm_npy_load(path, b->tensor)) != DM_OK)
      dm_error_prefix(s, "input '%s'", name);
    free(name);
    DM_TRY(s);
  }
  return DM_OK;
}

static dm_status write_outputs(dm_workspace *ws, const dm_strlist *outputs) {
  for (size_t i = 0; i < outputs->n; i++) {
    char *name = NULL;
    const char *path = NULL;
    dm_cli_split_binding(outputs->items[i], &name, &path);
    if (!name)
      return dm_error(DM_ERR_NOMEM, "out of memory");
    const dm_tensor *t = NULL;
    dm_status s = dm_workspace_fetch(ws, name, &t);
    if (s == DM_OK && t->dtype == DM_UNDEFINED)
      s = dm_error(DM_ERR_NOT_FOUND, "blob '%s' was never written", name);
    if (s == DM_OK)
      s = dm_npy_save(path, t);
    if (s != DM_OK)
      dm_error_prefix(s, "output '%s'", name);
    else
      printf("wrote %s to %s\n", name, path);
    free(name);
    DM_TRY(s);
  }
  return DM_OK;
}

/* Every FLOAT blob to FLOAT16 (rounded to nearest even), for --precision fp16. */
static dm_status blobs_to_half(dm_workspace *ws) {
  for (dm_blob *b = ws->blobs; b; b = b->hh.next) {
    dm_tensor *t = b->tensor;
    if (t->dtype != DM_FLOAT)
      continue;
    dm_tensor *h = dm_tensor_new(t->limit);
    if (!h)
      return dm_error(DM_ERR_NOMEM, "out of memory");
    dm_status s = dm_tensor_resize(h, DM_FLOAT16, t->ndim, t->dims);
    if (s == DM_OK) {
      dm_float_to_half_array(dm_tensor_data(t), dm_tensor_mutable_data(h), (size_t)t->numel);
      dm_tensor_share(t, h);
    }
    dm_tensor_free(h);
    if (s != DM_OK)
      return dm_error_prefix(s, "blob '%s' to FLOAT16", b->name);
  }
  return DM_OK;
}

/* The net's external outputs, or the last op's outputs when it declares none. */
static void print_summary(dm_workspace *ws, const dm_net *net) {
  const Caffe2__NetDef *def = net->def;
  char **names = def->external_output;
  size_t n = def->n_external_output;
  if (n == 0 && def->n_op) {
    names = def->op[def->n_op - 1]->output;
    n = def->op[def->n_op - 1]->n_output;
  }
  for (size_t i = 0; i < n; i++) {
    const dm_tensor *t = NULL;
    if (dm_workspace_fetch(ws, names[i], &t) == DM_OK)
      dm_cli_print_tensor(stdout, names[i], t, 10);
    else
      printf("%s: (no such blob)\n", names[i]);
  }
}

static dm_status run(const run_opts *o) {
  dm_status s;
  dm_workspace *ws = NULL;
  dm_net *net = NULL;
  int cuda = strcmp(o->device, "cuda") == 0;
  if (cuda) {
    char why[512];
    if (!dm_cuda_available(why, sizeof why))
      return dm_error(DM_ERR_UNSUPPORTED, "--device cuda: %s", why);
  }
  DM_TRY(dm_init());
  for (size_t i = 0; i < o->plugins.n; i++)
    DM_TRY(dm_plugin_load(o->plugins.items[i]));
  DM_TRY(dm_workspace_create(&ws));
  if (o->init) {
    dm_net *init = NULL;
    if ((s = load_net(ws, o->init, cuda, &init)) != DM_OK || (s = dm_net_run(init)) != DM_OK)
      goto cleanup;
  }
  if ((s = feed_inputs(ws, &o->inputs)) != DM_OK ||
      (o->fp16 && (s = blobs_to_half(ws)) != DM_OK) ||
      (s = load_net(ws, o->net, cuda, &net)) != DM_OK)
    goto cleanup;
  double total = 0, best = 0;
  for (long it = 0; it < o->iters; it++) {
    double t0 = now_ms();
    if ((s = dm_net_run(net)) != DM_OK)
      goto cleanup;
    double dt = now_ms() - t0;
    total += dt;
    if (it == 0 || dt < best)
      best = dt;
  }
  printf("ran '%s' %ld time%s: %.3f ms/iter (min %.3f ms)\n",
         *dm_net_name(net) ? dm_net_name(net) : o->net, o->iters, o->iters == 1 ? "" : "s",
         total / (double)o->iters, best);
  if (o->outputs.n)
    s = write_outputs(ws, &o->outputs);
  else
    print_summary(ws, net);
cleanup:
  dm_workspace_destroy(ws);
  return s;
}

int dm_cmd_run(int argc, char **argv) {
  static const struct option opts[] = {
      {"net", required_argument, NULL, 'n'},    {"init", required_argument, NULL, 'i'},
      {"input", required_argument, NULL, 'I'},  {"output", required_argument, NULL, 'o'},
      {"iters", required_argument, NULL, 'N'},  {"plugin", required_argument, NULL, 'p'},
      {"device", required_argument, NULL, 'd'}, {"help", no_argument, NULL, 'h'},
      {"precision", required_argument, NULL, 'P'},
      {NULL, 0, NULL, 0}};
  run_opts o = {.device = "cpu", .iters = 1};
  int c, rc = DM_EXIT_OK;
  optind = 0;
  opterr = 0;
  while (rc == DM_EXIT_OK && (c = getopt_long(argc, argv, "n:i:I:o:N:p:d:P:h", opts, NULL)) != -1) {
    char *name = NULL;
    const char *path;
    switch (c) {
    case 'n': o.net = optarg; break;
    case 'i': o.init = optarg; break;
    case 'I':
    case 'o':
      if (!dm_cli_split_binding(optarg, &name, &path))
        rc = dm_cli_usage_error("run", "--%s wants NAME=FILE.npy, got '%s'",
                                c == 'I' ? "input" : "output", optarg);
      else if (!dm_strlist_push(c == 'I' ? &o.inputs : &o.outputs, optarg))
        rc = dm_cli_failf("out of memory");
      free(name);
      break;
    case 'N':
      if (!dm_cli_parse_long(optarg, 1, 1000000000L, &o.iters))
        rc = dm_cli_usage_error("run", "--iters wants a positive integer, got '%s'", optarg);
      break;
    case 'p':
      if (!dm_strlist_push(&o.plugins, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'd':
      if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0)
        rc = dm_cli_usage_error("run", "--device wants cpu or cuda, got '%s'", optarg);
      o.device = optarg;
      break;
    case 'P':
      if (strcmp(optarg, "fp32") != 0 && strcmp(optarg, "fp16") != 0)
        rc = dm_cli_usage_error("run", "--precision wants fp32 or fp16, got '%s'", optarg);
      o.fp16 = strcmp(optarg, "fp16") == 0;
      break;
    case 'h': help(stdout); goto done;
    default: rc = dm_cli_bad_option("run", argv);
    }
  }
  if (rc != DM_EXIT_OK)
    goto done;
  if (optind < argc)
    rc = dm_cli_usage_error("run", "unexpected argument '%s' (the net is given with --net)",
                            argv[optind]);
  else if (!o.net)
    rc = dm_cli_usage_error("run", "--net is required");
  else if (run(&o) != DM_OK)
    rc = dm_cli_fail();
done:
  dm_strlist_free(&o.inputs);
  dm_strlist_free(&o.outputs);
  dm_strlist_free(&o.plugins);
  return rc;
}
