/* cmd_run.c: `demitasse run`, the CLI's inference loop: plugins, init net, .npy inputs,
 * N timed runs of the net, outputs to .npy or a summary on stdout. With --device cuda
 * the device pass places the net (the --input blobs stay homed on the host, copied in
 * by the net) and the init net (the weights the net reads on the GPU go there). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_util.h"
#include "net/api.h"
#include "core/half.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "device_flags.h"
#include "net/netdef_build.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse run --net NET [--init INIT] [--input NAME=FILE.npy]...\n"
          "                     [--output NAME=FILE.npy]... [--iters N] [--plugin LIB]...\n"
          "                     [--device cpu|cuda|cuda:N] [--precision fp32|fp16]\n\n"
          "Runs INIT once (it fills the weights), feeds the inputs, then runs NET N times\n"
          "and prints the time per iteration. Nets are .pb (binary) or .pbtxt (text).\n"
          "Without --output, prints each external output of NET (shape, type, first values).\n\n"
          "  -n, --net FILE          the net to run (required)\n"
          "  -i, --init FILE         an init net, run once first\n"
          "  -I, --input NAME=FILE   feed blob NAME from a .npy file (repeatable)\n"
          "  -o, --output NAME=FILE  write blob NAME to a .npy file after the last run\n"
          "  -N, --iters N           run the net N times (default 1)\n"
          "  -p, --plugin LIB        load an operator plugin (repeatable)\n"
          "  -d, --device DEV        cpu (default), cuda or cuda:N: the device pass puts\n"
          "                          every op with a CUDA kernel on GPU N, with copies\n"
          "                          where a blob crosses; the init net's weights follow\n"
          "      --cpu-ops T1,T2     with --device cuda: keep these op types on the CPU\n"
          "  -P, --precision P       fp32 (default) or fp16: after the init net and the\n"
          "                          inputs, every FLOAT blob becomes FLOAT16, so the net\n"
          "                          runs its FP16 kernels (FP32 accumulation inside)\n"
          "  -h, --help              this text\n");
}

typedef struct run_opts {
  const char *net, *init;
  int fp16;
  dm_device_cli dev;
  dm_strlist inputs, outputs, plugins;
  long iters;
} run_opts;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The --input names, which the device pass homes on the host (they are fed there). */
static dm_status input_names(const dm_strlist *inputs, char ***names, size_t *n) {
  for (size_t i = 0; i < inputs->n; i++) {
    char *name = NULL;
    const char *path = NULL;
    dm_cli_split_binding(inputs->items[i], &name, &path); /* checked when parsing */
    dm_status s = name ? dm_strv_push(names, n, name) : DM_NOMEM("an input name");
    free(name);
    DM_TRY(s);
  }
  return DM_OK;
}

/* Reads the main net and, with --device cuda, places it; *gpu gets its GPU state. */
static dm_status read_main(const run_opts *o, Caffe2__NetDef **def, dm_gpu_state *gpu) {
  DM_TRY(dm_netdef_read(o->net, def));
  if (!o->dev.cuda)
    return DM_OK;
  char **host = NULL;
  size_t n_host = 0;
  dm_status s = input_names(&o->inputs, &host, &n_host);
  dm_device_opts dev = o->dev.opts;
  dev.host_blobs = (const char *const *)host;
  dev.n_host_blobs = n_host;
  if (s == DM_OK)
    s = dm_device_place_net(*def, &dev, stderr, gpu);
  for (size_t i = 0; i < n_host; i++)
    free(host[i]);
  free(host);
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&(*def)->base, NULL);
    *def = NULL;
  }
  return s;
}

/* Runs the init net once, placed for the main net's GPU state with --device cuda. */
static dm_status run_init(dm_workspace *ws, const run_opts *o, const dm_gpu_state *gpu) {
  Caffe2__NetDef *def = NULL;
  DM_TRY(dm_netdef_read(o->init, &def));
  dm_status s = o->dev.cuda ? dm_device_place_init_net(def, &o->dev.opts, gpu, stderr) : DM_OK;
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return s;
  }
  dm_net *init = NULL;
  DM_TRY(dm_workspace_create_net(ws, def, o->init, &init)); /* takes def */
  return dm_net_run(init);
}

/* The blob's tensor as the host can read it: itself on the CPU, else a host copy in
 * *tmp (the caller frees it with dm_tensor_free). */
static dm_status host_tensor(dm_workspace *ws, const char *name, dm_tensor **tmp,
                             const dm_tensor **out) {
  *tmp = NULL;
  dm_blob *b = dm_workspace_find(ws, name);
  int id = 0;
  if (!b || dm_tensor_device(b->tensor, &id) == DM_CPU)
    return dm_workspace_fetch(ws, name, out);
  if (!(*tmp = dm_tensor_new(b->tensor->limit)))
    return DM_NOMEM("a host copy");
  DM_TRY(dm_tensor_copy_to(*tmp, DM_CPU, 0, b->tensor));
  *out = *tmp;
  return DM_OK;
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
    dm_tensor *tmp = NULL;
    dm_status s = host_tensor(ws, name, &tmp, &t);
    if (s == DM_OK && t->dtype == DM_UNDEFINED)
      s = dm_error(DM_ERR_NOT_FOUND, "blob '%s' was never written", name);
    if (s == DM_OK)
      s = dm_npy_save(path, t);
    if (s != DM_OK)
      dm_error_prefix(s, "output '%s'", name);
    else
      printf("wrote %s to %s\n", name, path);
    dm_tensor_free(tmp);
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
    dm_tensor *tmp = NULL;
    if (host_tensor(ws, names[i], &tmp, &t) == DM_OK)
      dm_cli_print_tensor(stdout, names[i], t, 10);
    else
      printf("%s: %s\n", names[i], dm_last_error());
    dm_tensor_free(tmp);
  }
}

static dm_status run(const run_opts *o) {
  dm_status s;
  dm_workspace *ws = NULL;
  dm_net *net = NULL;
  Caffe2__NetDef *def = NULL;
  dm_gpu_state gpu = {0};
  DM_TRY(dm_device_cli_check(&o->dev)); /* before reading anything: no GPU, no run */
  DM_TRY(dm_init());
  for (size_t i = 0; i < o->plugins.n; i++)
    DM_TRY(dm_plugin_load(o->plugins.items[i]));
  /* the main net first: its placement says which weights the init net puts on the GPU */
  if ((s = read_main(o, &def, &gpu)) != DM_OK || (s = dm_workspace_create(&ws)) != DM_OK)
    goto cleanup;
  if (o->init && (s = run_init(ws, o, &gpu)) != DM_OK)
    goto cleanup;
  if ((s = feed_inputs(ws, &o->inputs)) != DM_OK ||
      (o->fp16 && (s = blobs_to_half(ws)) != DM_OK))
    goto cleanup;
  s = dm_workspace_create_net(ws, def, o->net, &net); /* takes def */
  def = NULL;
  if (s != DM_OK)
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
  if (def)
    protobuf_c_message_free_unpacked(&def->base, NULL);
  dm_gpu_state_free(&gpu);
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
      {"cpu-ops", required_argument, NULL, DM_DEVICE_FLAG_BASE + 1},
      {NULL, 0, NULL, 0}};
  run_opts o = {.iters = 1};
  dm_device_cli_init(&o.dev);
  int c, rc = DM_EXIT_OK;
  optind = 0;
  opterr = 0;
  while (rc == DM_EXIT_OK && (c = getopt_long(argc, argv, "n:i:I:o:N:p:d:P:h", opts, NULL)) != -1) {
    char *name = NULL;
    const char *path;
    if (dm_device_flag("run", c == 'd' ? DM_DEVICE_FLAG_BASE : c, optarg, &o.dev, &rc))
      continue;
    switch (c) {
    case 'n': o.net = optarg; break;
    case 'i': o.init = optarg; break;
    case 'I':
    case 'o':
      if (!dm_cli_split_binding(optarg, &name, &path))
        rc = dm_cli_usage_error("run", "--%s wants NAME=FILE.npy, got '%s'",
                                c == 'I' ? "input" : "output", optarg);
      else if (c == 'I' && dm_cli_binding_repeats(&o.inputs, optarg))
        rc = dm_cli_usage_error("run", "--input '%s' is given twice; feed each blob once",
                                name);
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
  else if (o.fp16 && o.dev.cuda)
    rc = dm_cli_usage_error("run", "--precision fp16 converts the blobs on the host, so not "
                                   "with --device cuda (use an FP16 net, from rewrite --fp16)");
  else if (run(&o) != DM_OK)
    rc = dm_cli_fail();
done:
  dm_strlist_free(&o.inputs);
  dm_strlist_free(&o.outputs);
  dm_strlist_free(&o.plugins);
  dm_device_cli_free(&o.dev);
  return rc;
}
