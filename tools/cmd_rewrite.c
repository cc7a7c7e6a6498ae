/* cmd_rewrite.c: `demitasse rewrite`, the net passes from the command line: the gradient
 * pass (--grad) and then, optionally, the optimizer pass (--optimizer), printing the
 * rewritten net as .pbtxt so a user can read and diff exactly what the passes added.
 * The optimizer's state fills (momenta, the iteration counter) go to a second net,
 * --init-out, to run after the user's init net.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "core/netio.h"
#include "net/gradient.h"
#include "net/netdef_build.h"
#include "net/optimizer_pass.h"
#include "proto/caffe2.pb-c.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse rewrite --grad --loss LOSS [options] NET [-o OUT]\n\n"
          "Rewrites a forward net (.pb or .pbtxt) with the passes asked for and prints it\n"
          "as .pbtxt (or writes OUT: text or binary by its extension).\n\n"
          "  --grad               add the backward pass (the gradient of X is X_grad)\n"
          "  --loss LOSS          a loss blob (repeatable; required with --grad)\n"
          "  --optimizer KIND     then add updates: sgd, momentum or adam (needs --grad)\n"
          "  --lr X               step size, > 0 (default 0.01); base_lr gets Caffe2's sign:\n"
          "                       -X for sgd and adam, +X for momentum\n"
          "  --momentum M         momentum (default 0.9)    --nesterov   Nesterov momentum\n"
          "  --beta1 B --beta2 B --epsilon E   Adam (defaults 0.9, 0.999, 1e-5)\n"
          "  --weight-decay W     L2 decay added to the gradients of params named *_w\n"
          "  --decay-all          decay every param, biases too\n"
          "  --policy P           fixed (default), step, exp, inv, poly\n"
          "  --stepsize N --gamma G --power P --max-iter N   the policy's parameters\n"
          "  --warmup-iter N --warmup-start F   linear warmup from F * lr over N iterations\n"
          "  --data NAME          a net input that is not a parameter (repeatable; default\n"
          "                       'data' and 'label')\n"
          "  --init-out FILE      write the optimizer's state fills (an init-net addition,\n"
          "                       run after the model's init net) to FILE\n"
          "  -o, --output OUT     write the net to OUT instead of stdout\n"
          "  --fp16               mixed precision (not yet available)\n"
          "  -h, --help           this text\n");
}

enum {
  O_GRAD = 256, O_LOSS, O_OPT, O_LR, O_MOM, O_NEST, O_B1, O_B2, O_EPS, O_WD, O_DECAY_ALL,
  O_POLICY, O_STEP, O_GAMMA, O_POWER, O_MAXIT, O_WU_IT, O_WU_START, O_DATA, O_INIT, O_FP16
};

static int parse_double(const char *s, double *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (!*s || *end || !isfinite(v))
    return 0;
  *out = v;
  return 1;
}

static dm_status write_net(const Caffe2__NetDef *net, const char *path) {
  if (path)
    return dm_message_write_file(path, &net->base, DM_FORMAT_AUTO);
  char *text = NULL;
  size_t len = 0;
  DM_TRY(dm_text_print(&net->base, &text, &len));
  dm_status s = fwrite(text, 1, len, stdout) == len ? DM_OK
                                                     : dm_error(DM_ERR_IO, "writing to stdout failed");
  free(text);
  return s;
}

typedef struct rewrite_job {
  const char *in, *out, *init_out;
  int grad, optimize;
  dm_strlist losses;
  dm_optimizer_opts opts;
} rewrite_job;

static dm_status rewrite(rewrite_job *j) {
  DM_TRY(dm_init()); /* the passes read the op schemas */
  ProtobufCMessage *m = NULL;
  DM_TRY(dm_message_read_file(j->in, &caffe2__net_def__descriptor, DM_FORMAT_AUTO, &m));
  Caffe2__NetDef *net = (Caffe2__NetDef *)m, *init = NULL;
  dm_status s = dm_add_gradient_ops(net, j->losses.items, j->losses.n);
  if (s == DM_OK && j->optimize) {
    s = dm_netdef_new("optimizer_init_additions", &init);
    if (s == DM_OK)
      s = dm_add_optimizer_ops(net, NULL, 0, &j->opts, init);
  }
  if (s == DM_OK)
    s = write_net(net, j->out);
  if (s == DM_OK && init && j->init_out)
    s = dm_message_write_file(j->init_out, &init->base, DM_FORMAT_AUTO);
  if (s == DM_OK && init && !j->init_out)
    fprintf(stderr, "demitasse rewrite: the optimizer's state fills (%zu ops) were not written: "
                    "use --init-out FILE\n", init->n_op);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  return s;
}

int dm_cmd_rewrite(int argc, char **argv) {
  static const struct option opts[] = {
      {"grad", no_argument, NULL, O_GRAD},          {"loss", required_argument, NULL, O_LOSS},
      {"optimizer", required_argument, NULL, O_OPT}, {"lr", required_argument, NULL, O_LR},
      {"momentum", required_argument, NULL, O_MOM}, {"nesterov", no_argument, NULL, O_NEST},
      {"beta1", required_argument, NULL, O_B1},     {"beta2", required_argument, NULL, O_B2},
      {"epsilon", required_argument, NULL, O_EPS},  {"weight-decay", required_argument, NULL, O_WD},
      {"decay-all", no_argument, NULL, O_DECAY_ALL}, {"policy", required_argument, NULL, O_POLICY},
      {"stepsize", required_argument, NULL, O_STEP}, {"gamma", required_argument, NULL, O_GAMMA},
      {"power", required_argument, NULL, O_POWER},  {"max-iter", required_argument, NULL, O_MAXIT},
      {"warmup-iter", required_argument, NULL, O_WU_IT},
      {"warmup-start", required_argument, NULL, O_WU_START},
      {"data", required_argument, NULL, O_DATA},    {"init-out", required_argument, NULL, O_INIT},
      {"output", required_argument, NULL, 'o'},     {"fp16", no_argument, NULL, O_FP16},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
  rewrite_job j = {0};
  dm_strlist data = {0};
  dm_optimizer_opts_init(&j.opts);
  int rc = DM_EXIT_OK, c;
  optind = 0;
  opterr = 0;
  while (rc == DM_EXIT_OK && (c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
    double v = 0;
    long n = 0;
    int is_real = c == O_LR || c == O_MOM || c == O_B1 || c == O_B2 || c == O_EPS ||
                  c == O_WD || c == O_GAMMA || c == O_POWER || c == O_WU_START;
    int is_int = c == O_STEP || c == O_MAXIT || c == O_WU_IT;
    if (is_real && !parse_double(optarg, &v)) {
      const struct option *o = opts;
      while (o->name && o->val != c)
        o++;
      rc = dm_cli_usage_error("rewrite", "--%s wants a number, got '%s'", o->name, optarg);
      break;
    }
    if (is_int && !dm_cli_parse_long(optarg, 0, 1L << 62, &n)) {
      rc = dm_cli_usage_error("rewrite", "'%s' is not a non-negative integer", optarg);
      break;
    }
    switch (c) {
    case O_GRAD: j.grad = 1; break;
    case O_LOSS:
      if (!dm_strlist_push(&j.losses, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case O_OPT:
      if (dm_optimizer_kind_from_name(optarg, &j.opts.kind) != DM_OK)
        rc = dm_cli_usage_error("rewrite", "--optimizer wants sgd, momentum or adam, got '%s'",
                                optarg);
      j.optimize = 1;
      break;
    case O_LR: j.opts.lr = v; break;
    case O_MOM: j.opts.momentum = v; break;
    case O_NEST: j.opts.nesterov = 1; break;
    case O_B1: j.opts.beta1 = v; break;
    case O_B2: j.opts.beta2 = v; break;
    case O_EPS: j.opts.epsilon = v; break;
    case O_WD: j.opts.weight_decay = v; break;
    case O_DECAY_ALL: j.opts.decay_all = 1; break;
    case O_POLICY: j.opts.policy = optarg; break;
    case O_STEP: j.opts.stepsize = n; break;
    case O_GAMMA: j.opts.gamma = v; break;
    case O_POWER: j.opts.power = v; break;
    case O_MAXIT: j.opts.max_iter = n; break;
    case O_WU_IT: j.opts.warmup_iter = n; break;
    case O_WU_START: j.opts.warmup_start = v; break;
    case O_DATA:
      if (!dm_strlist_push(&data, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case O_INIT: j.init_out = optarg; break;
    case 'o': j.out = optarg; break;
    case O_FP16:
      rc = dm_cli_usage_error("rewrite", "--fp16 (the mixed-precision pass) is not available yet");
      break;
    case 'h':
      help(stdout);
      rc = -1;
      break;
    default: rc = dm_cli_bad_option("rewrite", argv); break;
    }
  }
  if (rc == DM_EXIT_OK && argc - optind != 1)
    rc = dm_cli_usage_error("rewrite", "wants one net file (got %d)", argc - optind);
  if (rc == DM_EXIT_OK && !j.grad)
    rc = dm_cli_usage_error("rewrite", "no pass asked for: use --grad");
  if (rc == DM_EXIT_OK && j.losses.n == 0)
    rc = dm_cli_usage_error("rewrite", "--grad needs --loss LOSS");
  if (rc == DM_EXIT_OK && j.init_out && !j.optimize)
    rc = dm_cli_usage_error("rewrite", "--init-out needs --optimizer");
  static const char *const default_data[] = {"data", "label"};
  j.opts.exclude = data.n ? data.items : default_data;
  j.opts.n_exclude = data.n ? data.n : 2;
  if (rc == DM_EXIT_OK) {
    j.in = argv[optind];
    if (rewrite(&j) != DM_OK)
      rc = dm_cli_fail();
  }
  dm_strlist_free(&j.losses);
  dm_strlist_free(&data);
  return rc < 0 ? DM_EXIT_OK : rc;
}
