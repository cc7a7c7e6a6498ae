/* cmd_rewrite.c: `demitasse rewrite`, the net passes from the command line: the gradient
 * pass (--grad) and then, optionally, the optimizer pass (--optimizer), the
 * mixed-precision pass (--fp16/--bf16), the device pass (--device cuda: works without a
 * GPU, since it only rewrites) and the memory pass (--free, always last),
 * printing the rewritten net as .pbtxt so a user can read and diff exactly what the
 * passes added.
 * The optimizer's state fills (momenta, the iteration counter) go to a second net,
 * --init-out, to run after the user's init net. The passes run through the one pipeline
 * (net/passes/pipeline.h) that `train` and the C API use, so the same options print the net
 * they run. Without --grad, --fp16/--bf16 paint an inference net instead, as `run
 * --precision` does (net/infer.h): the net printed is the one `run` runs, and --init-out
 * gets the weights' casts. --layout nhwc makes an NCHW net NHWC (net/passes/layout_pass.h):
 * --init-out gets the weights' re-layouts.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "core/fileio.h"
#include "core/netio.h"
#include "net/infer.h"
#include "net/passes/pipeline.h"
#include "net/op_origin.h"
#include "device_flags.h"
#include "dist_flags.h"
#include "mp_flags.h"
#include "optim_flags.h"
#include "proto/caffe2.pb-c.h"
#include "train_flags.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse rewrite --grad --loss LOSS [options] NET [-o OUT]\n"
          "       demitasse rewrite --device cuda [options] NET [-o OUT]\n"
          "       demitasse rewrite --fp16|--bf16 [--data NAME]... NET [-o OUT] (inference)\n\n"
          "Rewrites a forward net (.pb or .pbtxt) with the passes asked for and prints it\n"
          "as .pbtxt (or writes OUT: text or binary by its extension).\n\n"
          "  --grad               add the backward pass (the gradient of X is X_grad)\n"
          "  --loss LOSS          a loss blob (repeatable; required with --grad)\n"
          "  --optimizer KIND     then add the updates (needs --grad); its flags:\n");
  dm_optim_help(f);
  fprintf(f,
          "  --data NAME          a net input that is not a parameter (repeatable; default\n"
          "                       'data' and 'label')\n"
          "  --init-out FILE      write the optimizer's state fills (an init-net addition,\n"
          "                       run after the model's init net) to FILE\n"
          "  -o, --output OUT     write the net to OUT instead of stdout\n"
          "  --fp16 and its flags: the mixed-precision pass, after the others:\n");
  dm_mp_help(f);
  fprintf(f, "  the device pass, after those (the state fills of --init-out are placed too):\n");
  dm_device_help(f);
  fprintf(f, "  the data-parallel pass, after those (the net of one rank; `train` adds the\n"
             "  DB readers' shards for its rank):\n");
  dm_dist_help(f);
  fprintf(f,
          "  --fuse               inference: fold each test-mode SpatialBN into the Conv\n"
          "                       before it, as `run` does; --init-out gets the FoldBN ops\n"
          "                       (the fold, run once after the model's init net); --keep\n"
          "                       BLOB: a blob you fetch, never fused away. Without --cuda\n"
          "                       also Conv + Sum/Add + Relu -> ConvFusion and FC + Relu ->\n"
          "                       FCFusion (CPU kernels)\n");
  fprintf(f,
          "  --layout nhwc|nchw   after --fp16: the net made NHWC (order NHWC on Conv, pool,\n"
          "                       BN, LRN; one Transpose where data enters and before each\n"
          "                       4-D external output); the weights are re-laid once by\n"
          "                       --init-out, under new names (listed on stderr). Default\n"
          "                       as train's: nhwc for --grad --fp16/--bf16 --device cuda\n"
          "                       when the net converts, else as written\n"
          "  --pad-channels N     with the layout pass: image channels read by Convs\n"
          "                       zero-padded to a multiple of N (conv1's 3 -> 8, for\n"
          "                       tensor cores; NCHW2NHWCPad for the data and the filter);\n"
          "                       0: off. Default 8 with --device cuda, else off\n");
  fprintf(f,
          "  --fuse-train         training: before --grad (or alone, to see the fused forward\n"
          "                       net), SpatialBN (+ Sum/Add) + Relu, Conv + Relu and\n"
          "                       FC + Relu as one op each whose gradient --grad emits\n"
          "                       (cuDNN's fused kernels on a GPU; meant for --device cuda)\n");
  fprintf(f,
          "  --free               the memory pass, last: a Free op after each blob's last\n"
          "                       use, so a step's peak memory is what is live at once\n"
          "                       (state, net inputs and outputs, the losses and the\n"
          "                       buffers a kernel reuses every run, such as the uploads'\n"
          "                       to the GPU, are kept)\n"
          "  --keep BLOB          with --free: do not free BLOB either (repeatable)\n"
          "  --plugin LIB         load an operator plugin first (repeatable): the passes\n"
          "                       treat its ops as built-ins, from their schemas and kernels\n"
          "  -h, --help           this text\n"
          "Without --grad, --fp16 or --bf16 paints an inference net as `run --precision`\n"
          "does: Conv/FC reduced, softmax FP32, BN parameters FP32, the outputs cast back\n"
          "to FP32; the weights (read before written, less --data) are cast once by the\n"
          "--init-out net, run after the model's init net.\n");
}

enum { O_GRAD = 256, O_LOSS, O_DATA, O_INIT, O_FREE, O_KEEP, O_PLUGIN, O_FUSE, O_FUSE_TRAIN,
       O_LAYOUT };

static dm_status write_net(const Caffe2__NetDef *net, const char *path) {
  if (path)
    return dm_netdef_write_atomic(net, path);
  char *text = NULL;
  size_t len = 0;
  DM_TRY(dm_text_print(&net->base, &text, &len));
  dm_status s = fwrite(text, 1, len, stdout) == len ? DM_OK
                                                     : dm_error(DM_ERR_IO, "writing to standard output failed: %s", dm_errno_text(errno));
  free(text);
  return s;
}

typedef struct rewrite_job {
  const char *in, *out, *init_out;
  int grad, optimize, free_memory, fuse, fuse_train;
  dm_train_layout layout; /* --layout; AUTO: not given (the pipeline's default) */
  int pad_channels; /* --pad-channels; DM_LAYOUT_PAD_AUTO: not given */
  dm_strlist losses, keep, plugins;
  dm_optimizer_opts opts;
  dm_mp_cli mp;
  dm_device_cli dev;
  dm_dist_cli dist; /* --data-parallel: the Allreduce ops as one rank's net has them */
} rewrite_job;

/* Training (--grad, or the device, fusion or memory pass alone): the flags as `train`'s,
 * as the C API's dm_train_options, then its translator, so the net printed is the one
 * `train` runs for the same flags. */
static dm_status train_pipeline_opts(const rewrite_job *j, dm_pipeline_opts *p) {
  dm_train_options t;
  DM_TRY(dm_train_options_init(&t));
  dm_cli_device_name device;
  dm_cli_train_options(&j->opts, &j->mp, &j->dev, &j->dist, &device, &t);
  t.losses = j->losses.items;
  t.n_losses = j->losses.n;
  t.memory = j->free_memory;
  t.keep = j->keep.items;
  t.n_keep = j->keep.n;
  t.fuse_train = j->fuse_train;
  t.layout = j->layout; /* AUTO: the pipeline's default, as train's */
  DM_TRY(j->grad ? dm_pipeline_opts_from_train(&t, p)
                 : dm_pipeline_opts_from_train_forward(&t, p));
  p->gradient = j->grad ? DM_SWITCH_ON : DM_SWITCH_OFF;
  p->optimize = j->optimize; /* train always updates; rewrite only with --optimizer */
  p->layout_opts.pad_channels = j->pad_channels; /* no C API field */
  p->report = stderr;
  return DM_OK;
}

/* Inference (no --grad): the flags as `run`'s, as the C API's dm_infer_options, then
 * its translator, so the net printed is the one `run` runs. */
static dm_status infer_pipeline_opts(const rewrite_job *j, dm_pipeline_opts *p) {
  dm_infer_options io;
  DM_TRY(dm_infer_options_init(&io));
  char device[32];
  snprintf(device, sizeof device, "cuda:%d", j->dev.opts.device_id);
  io.precision = !j->mp.enabled ? DM_PRECISION_FP32
                 : j->mp.opts.target == DM_BFLOAT16 ? DM_PRECISION_BF16 : DM_PRECISION_FP16;
  io.data_blobs = j->opts.exclude;
  io.n_data_blobs = j->opts.n_exclude;
  io.outputs = j->keep.items; /* --keep: fetched by the user, never fused away */
  io.n_outputs = j->keep.n;
  io.device = j->dev.cuda ? device : NULL;
  io.cpu_ops = j->dev.opts.force_cpu;
  io.n_cpu_ops = j->dev.opts.n_force_cpu;
  io.fuse = j->fuse;
  io.layout = j->layout;
  DM_TRY(dm_pipeline_opts_from_infer(&io, p));
  p->layout_opts.pad_channels = j->pad_channels; /* no C API field */
  p->mp.free_masters = 1; /* as run does */
  p->report = stderr;
  return DM_OK;
}

/* The pipeline with the passes asked for; summaries on stderr. */
static dm_status rewrite(rewrite_job *j) {
  DM_TRY(dm_init()); /* the passes read the op schemas */
  for (size_t i = 0; i < j->plugins.n; i++)
    DM_TRY(dm_plugin_load(j->plugins.items[i]));
  ProtobufCMessage *m = NULL;
  DM_TRY(dm_message_read_file(j->in, &caffe2__net_def__descriptor, DM_FORMAT_AUTO, &m));
  Caffe2__NetDef *net = (Caffe2__NetDef *)m, *init = NULL;
  dm_pipeline_opts p;
  dm_status s;
  if (!j->grad && (j->mp.enabled || j->fuse)) { /* inference: run's pipeline */
    s = infer_pipeline_opts(j, &p);
    if (s == DM_OK)
      s = dm_infer_pipeline(net, &p, &init, NULL);
  } else {
    s = train_pipeline_opts(j, &p);
    if (s == DM_OK)
      s = dm_pipeline_run(net, &p, &init, NULL);
  }
  dm_origin_strip(net); /* stamps for error messages only (net/op_origin.h) */
  if (s == DM_OK)
    s = write_net(net, j->out);
  if (s == DM_OK && init && j->init_out)
    s = dm_netdef_write_atomic(init, j->init_out);
  if (s == DM_OK && init && !j->init_out)
    fprintf(stderr, "demitasse rewrite: the init-net addition (%zu ops) was not written: "
                    "use --init-out FILE\n", init->n_op);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  return s;
}

int dm_cmd_rewrite(int argc, char **argv) {
  static const struct option own[] = {
      {"grad", no_argument, NULL, O_GRAD},        {"loss", required_argument, NULL, O_LOSS},
      {"data", required_argument, NULL, O_DATA},  {"init-out", required_argument, NULL, O_INIT},
      {"free", no_argument, NULL, O_FREE},        {"keep", required_argument, NULL, O_KEEP},
      {"output", required_argument, NULL, 'o'},   {"help", no_argument, NULL, 'h'},
      {"plugin", required_argument, NULL, O_PLUGIN}, {"fuse", no_argument, NULL, O_FUSE},
      {"fuse-train", no_argument, NULL, O_FUSE_TRAIN},
      {"layout", required_argument, NULL, O_LAYOUT}, DM_PAD_CHANNELS_OPTION};
  struct option *opt_opts = dm_optim_merge_opts(own, sizeof own / sizeof own[0]);
  struct option *mp_opts = opt_opts ? dm_mp_merge_opts(opt_opts) : NULL;
  struct option *dev_opts = mp_opts ? dm_device_merge_opts(mp_opts) : NULL;
  struct option *opts = dev_opts ? dm_dist_merge_opts(dev_opts) : NULL;
  free(opt_opts);
  free(mp_opts);
  free(dev_opts);
  if (!opts)
    return dm_cli_failf("out of memory");
  rewrite_job j = {.layout = DM_TRAIN_LAYOUT_AUTO, .pad_channels = DM_LAYOUT_PAD_AUTO};
  dm_strlist data = {0};
  dm_optimizer_opts_init(&j.opts);
  dm_mp_cli_init(&j.mp);
  dm_device_cli_init(&j.dev);
  dm_dist_cli_init(&j.dist);
  int rc = DM_EXIT_OK, c;
  optind = 0;
  opterr = 0;
  while (rc == DM_EXIT_OK && (c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
    if (dm_optim_flag("rewrite", c, optarg, &j.opts, &j.optimize, &rc) ||
        dm_mp_flag("rewrite", c, optarg, &j.mp, &rc) ||
        dm_device_flag("rewrite", c, optarg, &j.dev, &rc) ||
        dm_dist_flag("rewrite", c, optarg, &j.dist, &rc))
      continue;
    switch (c) {
    case O_GRAD: j.grad = 1; break;
    case O_LOSS:
      if (!dm_strlist_push(&j.losses, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case O_DATA:
      if (!dm_strlist_push(&data, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case O_INIT: j.init_out = optarg; break;
    case O_FREE: j.free_memory = 1; break;
    case O_FUSE: j.fuse = 1; break;
    case O_LAYOUT: rc = dm_cli_layout_flag("rewrite", optarg, &j.layout); break;
    case DM_PAD_CHANNELS_FLAG:
      rc = dm_cli_pad_channels_flag("rewrite", optarg, &j.pad_channels);
      break;
    case O_FUSE_TRAIN: j.fuse_train = 1; break;
    case O_PLUGIN:
      if (!dm_strlist_push(&j.plugins, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case O_KEEP:
      if (!dm_strlist_push(&j.keep, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'o': j.out = optarg; break;
    case 'h':
      help(stdout);
      rc = -1;
      break;
    default: rc = dm_cli_bad_option("rewrite", argv); break;
    }
  }
  if (rc == DM_EXIT_OK && argc - optind != 1)
    rc = dm_cli_usage_error("rewrite", "wants one net file (got %d)", argc - optind);
  if (rc == DM_EXIT_OK && !j.grad && j.optimize)
    rc = dm_cli_usage_error("rewrite", "--optimizer needs --grad --loss LOSS (the updates "
                                       "read the weight gradients the gradient pass adds)");
  if (rc == DM_EXIT_OK && j.fuse_train && (j.fuse || (!j.grad && j.mp.enabled)))
    rc = dm_cli_usage_error("rewrite", "--fuse-train is for training nets: not with --fuse, "
                                       "and with --fp16/--bf16 only with --grad");
  if (rc == DM_EXIT_OK && j.grad && j.fuse)
    rc = dm_cli_usage_error("rewrite", "--fuse is for inference nets; it cannot be used with "
                                       "--grad");
  if (rc == DM_EXIT_OK && !j.grad && !j.dev.cuda && !j.mp.enabled && !j.fuse &&
      !j.fuse_train && j.layout != DM_TRAIN_LAYOUT_NHWC)
    rc = dm_cli_usage_error("rewrite", "no pass asked for: use --grad or --device cuda "
                                       "(--grad --loss LOSS, then --optimizer, --fp16, --free; "
                                       "or --fp16 / --bf16 / --fuse / --layout nhwc alone for an "
                                       "inference net)");
  if (rc == DM_EXIT_OK && !j.grad && (j.mp.enabled || j.fuse) && j.free_memory)
    rc = dm_cli_usage_error("rewrite", "--free needs --grad (inference painting has no "
                                       "memory pass)");
  /* `rewrite --fp16 NET` is a valid request (the inference painting `run --precision`
   * runs), but a user who meant the mixed-precision training net forgot --grad: say so. */
  if (rc == DM_EXIT_OK && !j.grad && j.mp.enabled)
    fprintf(stderr, "rewrite: no --grad: painting an inference net, as run --precision does "
                    "(for the mixed-precision training net add --grad --loss LOSS)\n");
  if (rc == DM_EXIT_OK && j.grad && j.losses.n == 0)
    rc = dm_cli_usage_error("rewrite", "--grad needs --loss LOSS (the blob to differentiate)");
  if (rc == DM_EXIT_OK && j.keep.n && !j.free_memory && !j.fuse)
    rc = dm_cli_usage_error("rewrite", "--keep needs --free or --fuse");
  if (rc == DM_EXIT_OK && j.init_out && !j.optimize && !j.mp.enabled && !j.fuse &&
      j.layout != DM_TRAIN_LAYOUT_NHWC)
    rc = dm_cli_usage_error("rewrite", "--init-out needs --optimizer, --fp16, --fuse or "
                                       "--layout");
  dm_mp_cli_finish(&j.mp);
  static const char *const default_data[] = {"data", "label"};
  j.opts.exclude = data.n ? data.items : default_data;
  j.opts.n_exclude = data.n ? data.n : 2;
  if (rc == DM_EXIT_OK) {
    j.in = argv[optind];
    const dm_cli_file outs[] = {DM_CLI_FILE("-o", j.out), DM_CLI_FILE("--init-out", j.init_out),
                                DM_CLI_FILES_END},
                      ins[] = {DM_CLI_FILE("NET", j.in), DM_CLI_LIST("--plugin", &j.plugins, 0),
                               DM_CLI_FILES_END};
    if (dm_cli_check_outputs("rewrite", outs, ins) != DM_OK || rewrite(&j) != DM_OK)
      rc = dm_cli_fail();
  }
  dm_strlist_free(&j.losses);
  dm_strlist_free(&j.keep);
  dm_strlist_free(&j.plugins);
  dm_strlist_free(&data);
  dm_mp_cli_free(&j.mp);
  dm_device_cli_free(&j.dev);
  free(opts);
  return rc < 0 ? DM_EXIT_OK : rc;
}
