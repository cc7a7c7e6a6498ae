/* cmd_run.c: `demitasse run`, the CLI's inference loop: plugins, init net, .npy inputs,
 * N timed runs of the net, outputs to .npy or a summary on stdout. The flags fill the
 * public dm_infer_options, which the C API's translator turns into the pipeline's
 * options (net/infer.h), so `run` and dm_workspace_create_infer_net make the same net: with --precision fp16|bf16 the
 * mixed-precision pass paints the net by precision class (the init net's weights cast
 * once, the outputs read back FP32); with --device cuda the device pass places the net
 * (the --input blobs stay homed on the host, copied in by the net) and the init nets
 * (the weights the net reads on the GPU go there). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_util.h"
#include "net/api.h"
#include "net/infer.h"
#include "net/passes/layout_pass.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "device_flags.h"
#include "run_inputs.h"
#include "net/net.h"
#include "net/netdef_build.h"
#include "net/onnx/import.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse run --net NET [--init INIT] [--input NAME=FILE.npy]...\n"
          "                     [--output NAME=FILE.npy]... [--iters N] [--plugin LIB]...\n"
          "                     [--device cpu|cuda|cuda:N] [--precision fp32|fp16|bf16]\n\n"
          "Runs INIT once (it fills the weights), feeds the inputs, then runs NET N times\n"
          "and prints the time per iteration. Nets are .pb (binary) or .pbtxt (text).\n"
          "Without --output, prints each external output of NET (shape, type, first values).\n\n"
          "  -n, --net FILE          the net to run (required); a .onnx model is imported\n"
          "                          first and brings its weights (no --init)\n"
          "  -i, --init FILE         an init net, run once first\n"
          "  -I, --input NAME=FILE   feed blob NAME from a .npy file (repeatable)\n"
          "  -o, --output NAME=FILE  write blob NAME to a .npy file after the last run\n"
          "  -N, --iters N           run the net N times (default 1)\n"
          "      --profile           print the time of each op type to stderr (over the\n"
          "                          runs after the first, which sets up the kernels)\n"
          "                          and the layout conversions (reorders) per run\n"
          "  -p, --plugin LIB        load an operator plugin (repeatable)\n"
          "  -d, --device DEV        cpu (default), cuda or cuda:N: the device pass puts\n"
          "                          every op with a CUDA kernel on GPU N, with copies\n"
          "                          where a blob crosses; the init net's weights follow\n"
          "      --cpu-ops T1,T2     with --device cuda: keep these op types on the CPU\n"
          "      --no-graph          with --device cuda: no CUDA graph (by default the\n"
          "                          longest run of GPU ops is recorded once its shapes\n"
          "                          settle, then replayed with one launch per run)\n"
          "  -P, --precision P       fp32 (default), fp16 or bf16: the mixed-precision pass\n"
          "                          paints the net as for training: Conv/FC in P (FP32\n"
          "                          accumulation inside), softmax and losses in FP32,\n"
          "                          others follow their inputs, BN's scale, bias and\n"
          "                          statistics FP32; one cast per boundary. The init\n"
          "                          net's weights are cast to P once, before the runs;\n"
          "                          inputs are fed FP32, and the external outputs and\n"
          "                          --output blobs are FP32. Works with --device cuda.\n"
          "                          `rewrite --fp16 NET` prints the painted net\n"
          "      --no-fuse           run the net as written; by default each test-mode\n"
          "                          SpatialBN is folded into the Conv before it (once,\n"
          "                          after the init net) and, on the CPU, Conv (+ Sum/Add)\n"
          "                          + Relu and FC + Relu become ConvFusion/FCFusion ops\n"
          "                          (`rewrite --fuse NET` prints the fused net)\n"
          "      --layout nhwc       run an NCHW net as NHWC (the layout pass: inputs and\n"
          "                          outputs stay NCHW; `rewrite --layout nhwc` prints it)\n"
          DM_PAD_CHANNELS_HELP("")
          DM_MEMORY_LIMIT_HELP(" ")
          DM_THREADS_HELP("")
          DM_ENGINE_HELP("")
          "  -h, --help              this text\n");
}

typedef struct run_opts {
  const char *net, *init;
  dm_precision precision; /* --precision */
  dm_device_cli dev;
  dm_strlist inputs, outputs, plugins;
  long iters;
  int profile; /* --profile: time per op type, after the first run */
  size_t memory_limit; /* --memory-limit; 0: none */
  const char *engine;  /* --engine; NULL: the default */
  int no_fuse;         /* --no-fuse: BN not folded into Conv */
  dm_train_layout layout; /* --layout nhwc: DM_TRAIN_LAYOUT_NHWC (AUTO: as written) */
  int pad_channels;    /* --pad-channels; DM_LAYOUT_PAD_AUTO: not given */
} run_opts;

/* --precision's words for the public enum. */
static int parse_precision(const char *arg, dm_precision *out) {
  static const struct { const char *name; dm_precision v; } words[] = {
      {"fp32", DM_PRECISION_FP32}, {"fp16", DM_PRECISION_FP16}, {"bf16", DM_PRECISION_BF16}};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strcmp(arg, words[i].name) == 0) {
      *out = words[i].v;
      return 1;
    }
  return 0;
}

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

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
}

/* The blobs the run reads back: the --output names, else the net's external outputs (or
 * its last op's outputs when it declares none), copied before the passes rename any. */
static dm_status fetched_names(const run_opts *o, const Caffe2__NetDef *def, char ***names,
                               size_t *n) {
  for (size_t i = 0; i < o->outputs.n; i++) {
    char *name = NULL;
    const char *path = NULL;
    dm_cli_split_binding(o->outputs.items[i], &name, &path); /* checked when parsing */
    dm_status s = name ? dm_strv_push(names, n, name) : DM_NOMEM("an output name");
    free(name);
    DM_TRY(s);
  }
  if (o->outputs.n)
    return DM_OK;
  char **list = def->external_output;
  size_t k = def->n_external_output;
  if (k == 0 && def->n_op) {
    list = def->op[def->n_op - 1]->output;
    k = def->op[def->n_op - 1]->n_output;
  }
  for (size_t i = 0; i < k; i++)
    DM_TRY(dm_strv_push(names, n, list[i]));
  return DM_OK;
}

/* The init net's outputs: the weights, whose reduced copies are cast once. */
static dm_status init_outputs(const Caffe2__NetDef *init, char ***names, size_t *n) {
  for (size_t i = 0; init && i < init->n_op; i++)
    for (size_t k = 0; k < init->op[i]->n_output; k++)
      if (!dm_str_in_list(init->op[i]->output[k], (const char *const *)*names, *n))
        DM_TRY(dm_strv_push(names, n, init->op[i]->output[k]));
  return DM_OK;
}

/* The flags as the C API's dm_infer_options, then the C API's translator (which checks
 * them); what the options cannot say is added beside: the report, and the FP32 weights
 * freed once cast (nothing but this net uses the workspace). */
static dm_status pipeline_opts(const run_opts *o, const char *const *inputs, size_t n_inputs,
                               char *const *fetch, size_t n_fetch, dm_pipeline_opts *p) {
  dm_infer_options io;
  DM_TRY(dm_infer_options_init(&io));
  char device[32];
  snprintf(device, sizeof device, "cuda:%d", o->dev.opts.device_id);
  io.precision = o->precision;
  io.data_blobs = inputs;
  io.n_data_blobs = n_inputs;
  io.outputs = (const char *const *)fetch;
  io.n_outputs = n_fetch;
  io.device = o->dev.cuda ? device : NULL;
  io.cpu_ops = o->dev.opts.force_cpu;
  io.n_cpu_ops = o->dev.opts.n_force_cpu;
  io.fuse = !o->no_fuse;
  io.layout = o->layout;
  DM_TRY(dm_pipeline_opts_from_infer(&io, p));
  p->layout_opts.pad_channels = o->pad_channels; /* no C API field */
  p->mp.free_masters = 1;
  p->report = stderr;
  return DM_OK;
}

/* Reads the nets and passes them through the inference pipeline (net/infer.h): painted
 * for --precision, placed for --device; summaries on stderr. *init_add (or NULL) gets
 * the weights' casts, to run once after the init net. */
static dm_status prepare(const run_opts *o, char *const *fetch, size_t n_fetch,
                         Caffe2__NetDef *def, Caffe2__NetDef **init, Caffe2__NetDef **init_add,
                         char *hint, size_t hint_cap) {
  char **inputs = NULL, **params = NULL;
  size_t n_inputs = 0, n_params = 0;
  dm_status s = o->init ? dm_netdef_read(o->init, init) : DM_OK;
  if (s == DM_OK)
    s = input_names(&o->inputs, &inputs, &n_inputs);
  if (s == DM_OK)
    s = init_outputs(*init, &params, &n_params);
  dm_pipeline_opts p;
  if (s == DM_OK)
    s = pipeline_opts(o, (const char *const *)inputs, n_inputs, fetch, n_fetch, &p);
  if (s == DM_OK && *init) { /* without one every weight is an --input, so
                                read-before-written works */
    dm_infer_set_weights(&p, (const char *const *)params, n_params);
    p.inits = init;
    p.n_inits = 1;
  }
  if (s == DM_OK)
    s = dm_infer_pipeline(def, &p, init_add, NULL);
  /* before anything runs: a misspelt --input; and the fix for a missing --init, should
   * the run find an input empty */
  const Caffe2__NetDef *const makers[] = {*init, *init_add};
  if (s == DM_OK)
    s = dm_run_check_fed(def, makers, 2, (const char *const *)inputs, n_inputs);
  if (s == DM_OK)
    dm_run_missing_hint(def, makers, 2, (const char *const *)inputs, n_inputs, hint, hint_cap);
  free_names(inputs, n_inputs);
  free_names(params, n_params);
  return s;
}

/* The net, and for an ONNX model (.onnx) its init net too: the model is imported
 * (net/onnx/import.h) and holds its own weights. */
static dm_status read_net(const run_opts *o, Caffe2__NetDef **def, Caffe2__NetDef **init) {
  if (!dm_onnx_is_model_path(o->net))
    return dm_netdef_read(o->net, def);
  if (o->init)
    return dm_error(DM_ERR_INVALID, "--init is not used with an ONNX model: %s holds its weights",
                    o->net);
  return dm_onnx_import_file(o->net, init, def);
}

/* Instantiates `def` (taken) in `ws` and runs it once: the init net and the casts. */
static dm_status run_once(dm_workspace *ws, Caffe2__NetDef *def, const char *source) {
  dm_net *net = NULL;
  DM_TRY(dm_workspace_create_net(ws, def, source, &net));
  return dm_net_run(net);
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

/* The fetched names (the net's external outputs, or its last op's outputs). */
static void print_summary(dm_workspace *ws, char *const *names, size_t n) {
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
  Caffe2__NetDef *def = NULL, *init = NULL, *init_add = NULL;
  char **fetch = NULL, hint[512] = "";
  size_t n_fetch = 0;
  DM_TRY(dm_device_cli_check(&o->dev)); /* before reading anything: no GPU, no run */
  DM_TRY(dm_init());
  for (size_t i = 0; i < o->plugins.n; i++)
    DM_TRY(dm_plugin_load(o->plugins.items[i]));
  /* the main net is painted and placed first: that says which weights the init net and
   * the casts put on the GPU */
  if ((s = read_net(o, &def, &init)) != DM_OK ||
      (s = fetched_names(o, def, &fetch, &n_fetch)) != DM_OK ||
      (s = prepare(o, fetch, n_fetch, def, &init, &init_add, hint, sizeof hint)) != DM_OK ||
      (s = dm_workspace_create(&ws)) != DM_OK ||
      (s = dm_workspace_set_memory_limit(ws, o->memory_limit)) != DM_OK ||
      (s = dm_workspace_set_engine(ws, o->engine)) != DM_OK)
    goto cleanup;
  s = init ? run_once(ws, init, o->init ? o->init : o->net) : DM_OK; /* takes init */
  init = NULL;
  if (s == DM_OK && init_add)
    s = run_once(ws, init_add, "weight casts"); /* takes init_add */
  init_add = NULL;
  if (s != DM_OK || (s = feed_inputs(ws, &o->inputs)) != DM_OK)
    goto cleanup;
  s = dm_workspace_create_net(ws, def, o->net, &net); /* takes def */
  def = NULL;
  if (s != DM_OK || (s = dm_device_cli_apply(&o->dev, net)) != DM_OK ||
      (s = dm_infer_require_finite(net, o->precision, (const char *const *)fetch, n_fetch,
                                   "--precision")) != DM_OK)
    goto cleanup;
  double total = 0, best = 0, first = 0;
  for (long it = 0; it < o->iters; it++) {
    /* The first run makes primitives and lays out weights: profile the others. */
    if (o->profile && it == (o->iters > 1 ? 1 : 0) && (s = dm_net_set_profile(net, 1)) != DM_OK)
      goto cleanup;
    double t0 = now_ms();
    if ((s = dm_net_run(net)) != DM_OK) {
      if (s == DM_ERR_NOT_FOUND && hint[0]) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", dm_last_error());
        dm_error(s, "%s; %s", msg, hint);
      }
      goto cleanup;
    }
    double dt = now_ms() - t0;
    if (it == 0) { /* it makes primitives and lays out weights: timed apart */
      first = dt;
      continue;
    }
    total += dt;
    if (it == 1 || dt < best)
      best = dt;
  }
  const char *name = *dm_net_name(net) ? dm_net_name(net) : o->net;
  if (o->iters == 1)
    printf("ran '%s' once: %.3f ms, setup included (primitives, weight layouts: --iters 10 "
           "times the runs after it)\n", name, first);
  else
    printf("ran '%s' %ld times: %.3f ms/iter (min %.3f ms) over the %ld after the first "
           "(%.3f ms, setup included)\n", name, o->iters, total / (double)(o->iters - 1), best,
           o->iters - 1, first);
  if (o->profile)
    dm_net_print_profile(net, stderr);
  dm_device_cli_report(stderr, net);
  if (o->outputs.n)
    s = write_outputs(ws, &o->outputs);
  else
    print_summary(ws, fetch, n_fetch);
cleanup:
  if (def)
    protobuf_c_message_free_unpacked(&def->base, NULL);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  free_names(fetch, n_fetch);
  dm_workspace_destroy(ws);
  return s;
}

int dm_cmd_run(int argc, char **argv) {
  static const struct option opts[] = {
      {"net", required_argument, NULL, 'n'},    {"init", required_argument, NULL, 'i'},
      {"input", required_argument, NULL, 'I'},  {"output", required_argument, NULL, 'o'},
      {"iters", required_argument, NULL, 'N'},  {"profile", no_argument, NULL, 1303},  {"plugin", required_argument, NULL, 'p'},
      {"device", required_argument, NULL, 'd'}, {"help", no_argument, NULL, 'h'},
      {"precision", required_argument, NULL, 'P'},
      {"cpu-ops", required_argument, NULL, DM_DEVICE_FLAG_BASE + 1},
      {"no-graph", no_argument, NULL, DM_DEVICE_FLAG_BASE + 2},
      {"no-fuse", no_argument, NULL, 'F'},
      {"layout", required_argument, NULL, 1304},
      DM_PAD_CHANNELS_OPTION,
      DM_MEMORY_LIMIT_OPTION,
      DM_THREADS_OPTION,
      DM_ENGINE_OPTION,
      {NULL, 0, NULL, 0}};
  run_opts o = {.iters = 1, .precision = DM_PRECISION_FP32, .pad_channels = DM_LAYOUT_PAD_AUTO};
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
    case 1303: o.profile = 1; break;
    case 'N':
      if (!dm_cli_parse_long(optarg, 1, 1000000000L, &o.iters))
        rc = dm_cli_usage_error("run", "--iters wants a positive integer, got '%s'", optarg);
      break;
    case 'p':
      if (!dm_strlist_push(&o.plugins, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'P':
      if (!parse_precision(optarg, &o.precision))
        rc = dm_cli_usage_error("run", "--precision wants fp32, fp16 or bf16, got '%s'", optarg);
      break;
    case DM_MEMORY_LIMIT_FLAG:
      rc = dm_cli_memory_limit_flag("run", optarg, &o.memory_limit);
      break;
    case 'F': o.no_fuse = 1; break;
    case 1304: rc = dm_cli_layout_flag("run", optarg, &o.layout); break;
    case DM_PAD_CHANNELS_FLAG: rc = dm_cli_pad_channels_flag("run", optarg, &o.pad_channels); break;
    case DM_THREADS_FLAG: rc = dm_cli_threads_flag("run", optarg); break;
    case DM_ENGINE_FLAG: rc = dm_cli_engine_flag("run", optarg, &o.engine); break;
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
  else {
    const dm_cli_file outs[] = {DM_CLI_LIST("--output", &o.outputs, 1), DM_CLI_FILES_END},
                      ins[] = {DM_CLI_FILE("--net", o.net),
                               DM_CLI_FILE("--init", o.init),
                               DM_CLI_LIST("--input", &o.inputs, 1),
                               DM_CLI_LIST("--plugin", &o.plugins, 0),
                               DM_CLI_FILES_END};
    if (dm_cli_check_outputs("run", outs, ins) != DM_OK || run(&o) != DM_OK)
      rc = dm_cli_fail();
  }
done:
  dm_strlist_free(&o.inputs);
  dm_strlist_free(&o.outputs);
  dm_strlist_free(&o.plugins);
  dm_device_cli_free(&o.dev);
  return rc;
}
