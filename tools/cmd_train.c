/* cmd_train.c: `demitasse train`, the training loop: an init net, a training net (a
 * forward net with its loss) run for N iterations, a test net every K, a progress line,
 * a metrics CSV with an SVG of the curves beside it, and checkpoints (Save/Load ops,
 * written atomically) to resume from. The nets are built by the pipeline
 * (net/passes/pipeline.h), as `rewrite` and the C API build them: the gradient and optimizer
 * passes unless the net already has gradient ops, mixed precision, with --device cuda
 * the device pass on the training and test nets and the init nets for the GPU state,
 * and the memory pass last. --save-net/--save-init write what it made.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_util.h"
#include "net/api.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"
#include "core/tensor.h"
#include "device_flags.h"
#include "mp_flags.h"
#include "net/passes/mixed_precision_pass.h"
#include "optim_flags.h"
#include "train_checkpoint.h"
#include "train_flags.h"
#include "train_report.h"
#include "dist_flags.h"
#include "train_paths.h"

typedef struct train_opts {
  const char *net, *test_net, *loss, *accuracy, *csv, *checkpoint, *train_db, *test_db;
  const char *save_net, *save_init; /* --save-net, --save-init: the nets the passes made */
  int accuracy_given; /* -a: that blob must be in the nets (the default may be absent) */
  long iters, test_every, test_iters, checkpoint_every, log_every;
  int resume, optimize, explain_overflow, no_free, fuse_train;
  dm_train_layout layout; /* --layout; AUTO: not given (the pipeline's default) */
  int pad_channels; /* --pad-channels; DM_LAYOUT_PAD_AUTO: not given */
  size_t memory_limit; /* --memory-limit; 0: none */
  const char *engine;  /* --engine; NULL: the default */
  dm_optimizer_opts opt;
  dm_mp_cli mp;
  dm_device_cli dev;
  dm_dist_cli dist;
  dm_strlist plugins, inits;
} train_opts;

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse train --init INIT --net TRAIN_NET --iters N [options]\n\n"
          "Runs INIT once, then TRAIN_NET N times. TRAIN_NET is a forward net with a loss\n"
          "(and its data input op); unless it already has gradient ops, the gradient pass\n"
          "and the optimizer pass (flags below) are applied to it on the fly; a net that\n"
          "has them (from `demitasse rewrite`) runs as it is.\n\n"
          "  -i, --init FILE          the init net (weights); repeatable, run in order (e.g.\n"
          "                           the model's, then rewrite's --init-out)\n"
          "  -n, --net FILE           the training net\n"
          "  -N, --iters N            iterations in all (a resumed run continues to N; a step\n"
          "                           skipped on FP16 overflow is not one)\n"
          "  -l, --loss BLOB          the loss (default 'loss')\n"
          "  -a, --accuracy BLOB      an accuracy blob to report (default 'accuracy' if any)\n"
          "  -t, --test-net FILE      a test net sharing the weights\n"
          "  -e, --test-every K       run the test net every K iterations and at the end\n"
          "  -T, --test-iters M       batches per test pass (default 1)\n"
          "      --train-db PATH      the `db` of the training net's TensorProtosDBInput ops\n"
          "      --test-db PATH       the `db` of the test net's TensorProtosDBInput ops\n"
          "  -c, --csv FILE           metrics CSV; curves go to FILE with .svg\n"
          "  -k, --checkpoint PATH    checkpoint path (LMDB, replaced atomically)\n"
          "  -K, --checkpoint-every C save every C iterations and at the end\n"
          "  -r, --resume             load PATH first and continue from its iteration\n"
          "  -L, --log-every L        log lines every L iterations when not on a terminal\n"
          "  -p, --plugin LIB         load an operator plugin (repeatable)\n"
          "      --explain-overflow   on a skipped step, or a step whose loss is inf/nan\n"
          "                           (which stops the run), name the first op (index,\n"
          "                           type, name) whose output held inf/nan, and the blob\n"
          "                           (a run stopped without it names them by replaying\n"
          "                           the steps from its last checkpoint, or from the\n"
          "                           initial state)\n"
          "      --no-free            keep every blob a step writes (by default the memory\n"
          "                           pass frees each one after its last use, keeping the\n"
          "                           state, the loss, the accuracy and 'data')\n"
          "      --fuse-train         the training fusion pass before the gradient pass:\n"
          "                           SpatialBN (+ Sum/Add) + Relu, Conv + Relu and FC +\n"
          "                           Relu as one op each (cuDNN's fused kernels on a GPU;\n"
          "                           meant for --device cuda)\n"
          "      --save-net FILE      write the training net the passes made (what runs;\n"
          "                           .pbtxt text, else binary) before training\n"
          "      --save-init FILE     write their init addition (optimizer and loss-scale\n"
          "                           state fills, as placed) the same way; with --iters 0\n"
          "                           these two are written and nothing runs (no GPU needed)\n"
          "      --layout L           nchw (the net as written) or nhwc (the layout pass:\n"
          "                           NHWC inside, the weights re-laid once by the init\n"
          "                           addition under new names, listed); default nhwc with\n"
          "                           --device cuda and --fp16/--bf16 when the nets convert,\n"
          "                           else as written\n"
          DM_PAD_CHANNELS_HELP(" "));
  dm_optim_help(f);
  dm_mp_help(f);
  dm_device_help(f);
  dm_dist_help(f);
  fprintf(f, DM_MEMORY_LIMIT_HELP("  ") DM_THREADS_HELP(" ") DM_ENGINE_HELP(" ") "  -h, --help               this text\n");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A one-element blob as a double; NAN if absent or empty. A blob on a GPU is read
 * through a host copy of it. */
static double scalar(dm_workspace *ws, const char *name) {
  const dm_tensor *t = name ? dm_workspace_tensor(ws, name) : NULL;
  if (!t || dm_tensor_numel(t) < 1 || !dm_tensor_data(t))
    return NAN;
  dm_tensor *host = NULL;
  int id = 0;
  if (dm_tensor_device(t, &id) != DM_CPU) {
    if (!(host = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT)) ||
        dm_tensor_copy_to(host, DM_CPU, 0, t) != DM_OK) {
      dm_tensor_free(host);
      return NAN;
    }
    t = host;
  }
  const void *p = dm_tensor_data(t);
  double v;
  switch (dm_tensor_dtype(t)) {
  case DM_FLOAT: v = *(const float *)p; break;
  case DM_DOUBLE: v = *(const double *)p; break;
  case DM_INT64: v = (double)*(const int64_t *)p; break;
  case DM_INT32: v = *(const int32_t *)p; break;
  default: v = NAN; break;
  }
  dm_tensor_free(host);
  return v;
}

static int is_db_input(const Caffe2__OperatorDef *op) {
  return op->type && strcmp(op->type, "TensorProtosDBInput") == 0;
}

/* Points every TensorProtosDBInput of the net at `db`. */
static dm_status set_db(Caffe2__NetDef *def, const char *db) {
  for (size_t i = 0; db && i < def->n_op; i++)
    if (is_db_input(def->op[i]))
      DM_TRY(dm_opdef_set_arg_string(def->op[i], "db", db));
  return DM_OK;
}

/* db_flag: the option that sets db, named when the net's own DB is missing (NULL: the
 * DB is not read, as with --iters 0, so not checked). */
static dm_status read_net(const char *path, const char *db, const char *db_flag,
                          Caffe2__NetDef **out) {
  DM_TRY(dm_netdef_read(path, out));
  dm_status s = db        ? set_db(*out, db)
                : db_flag ? dm_cli_check_db_inputs(*out, path, db_flag)
                          : DM_OK;
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&(*out)->base, NULL);
    *out = NULL;
  }
  return s;
}

/* The test net's DB inputs read the batch this blob names (INT64 [1], fed before each
 * run): a function of the test pass's number, not of how many runs this process made,
 * so a resumed run tests on the batches an uninterrupted one does. */
#define TEST_BATCH_BLOB "test_batch"

/* Each TensorProtosDBInput of the test net without an `iter` input gets TEST_BATCH_BLOB,
 * fed 0 here so that the net instantiates. */
static dm_status wire_test_batches(dm_workspace *ws, Caffe2__NetDef *test) {
  int any = 0;
  for (size_t i = 0; i < test->n_op; i++)
    if (test->op[i]->type && strcmp(test->op[i]->type, "TensorProtosDBInput") == 0 &&
        test->op[i]->n_input == 0) {
      DM_TRY(dm_opdef_add_input(test->op[i], TEST_BATCH_BLOB));
      any = 1;
    }
  int64_t zero = 0, one = 1;
  return any ? dm_workspace_feed(ws, TEST_BATCH_BLOB, DM_INT64, 1, &one, &zero) : DM_OK;
}

/* Runs the test net `iters` times at iteration `done`; mean loss and accuracy. Pass k
 * (the k-th multiple of --test-every, or the last iteration) reads batches k*iters to
 * k*iters + iters - 1. */
static dm_status test_pass(dm_workspace *ws, dm_net *net, const train_opts *o, long done,
                           double *loss, double *acc) {
  double l = 0, a = 0;
  const long pass = (done + o->test_every - 1) / o->test_every - 1;
  for (long i = 0; i < o->test_iters; i++) {
    int64_t batch = (int64_t)pass * o->test_iters + i, one = 1;
    if (dm_workspace_has_blob(ws, TEST_BATCH_BLOB))
      DM_TRY(dm_workspace_feed(ws, TEST_BATCH_BLOB, DM_INT64, 1, &one, &batch));
    DM_TRY(dm_net_run(net));
    l += scalar(ws, o->loss);
    a += scalar(ws, o->accuracy);
  }
  *loss = l / (double)o->test_iters;
  *acc = a / (double)o->test_iters;
  return DM_OK;
}

typedef struct train_state {
  dm_workspace *ws;
  dm_net *train, *test, *save;
  char **persistent; /* blobs a checkpoint carries: what the init nets created */
  size_t n_persistent;
  dm_train_report report;
  int have_checkpoint;          /* this run saved one, or resumed from one */
  /* The init nets as run (placed by the pipeline), packed: a divergence before the first
   * checkpoint is replayed from fresh copies of them (a second run of the same fill ops
   * would draw new random values; new ops draw the first ones again). */
  ProtobufCBinaryData *init_nets;
  size_t n_init_nets;
  long last_skipped, skip_run; /* loss-scaling skips so far, and in a row */
  int64_t records;              /* records a step reads: its first DB input's batch_size */
  int warned_at_min;            /* this run of skips reached the minimum scale: said once */
} train_state;

/* Runs one init net (already placed by the pipeline); takes `def`. Keeps a packed copy
 * for replay_divergence first. */
static dm_status run_init(train_state *st, const char *source, Caffe2__NetDef *def) {
  ProtobufCBinaryData *kept = realloc(st->init_nets, (st->n_init_nets + 1) * sizeof *kept);
  size_t len = protobuf_c_message_get_packed_size(&def->base);
  uint8_t *bytes = kept ? malloc(len ? len : 1) : NULL;
  if (kept)
    st->init_nets = kept;
  if (!bytes) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return DM_NOMEM("a copy of an init net");
  }
  protobuf_c_message_pack(&def->base, bytes);
  st->init_nets[st->n_init_nets++] = (ProtobufCBinaryData){len, bytes};
  dm_net *net = NULL;
  DM_TRY(dm_workspace_create_net(st->ws, def, source, &net)); /* takes def */
  return dm_net_run(net);
}

/* The state the init nets made at the start of the run, made again by fresh copies of
 * them (for a replay from iteration 0). */
static dm_status rerun_inits(train_state *st) {
  for (size_t i = 0; i < st->n_init_nets; i++) {
    Caffe2__NetDef *def = caffe2__net_def__unpack(NULL, st->init_nets[i].len,
                                                  st->init_nets[i].data);
    dm_net *net = NULL;
    if (!def)
      return dm_error(DM_ERR_NOMEM, "unpacking a kept init net");
    DM_TRY(dm_workspace_create_net(st->ws, def, "init net (replay)", &net)); /* takes def */
    DM_TRY(dm_net_run(net));
  }
  return DM_OK;
}

/* The pipeline's options for this command (net/passes/pipeline.h): gradient and optimizer
 * unless the net has gradient ops already, mixed precision, device (the test net, which
 * shares the weights, placed too, and the init nets for the GPU state of both), and the
 * memory pass last on both nets. It keeps the state (every blob the init nets create,
 * which checkpoints save) and what is read after a step: the loss, the accuracy, and
 * 'data' (its first dimension is the batch the images/s figure uses). It also keeps
 * every DB input's outputs: freed, each step would allocate its batch afresh (77 MB at
 * ResNet-50's batch 128), and with --device cuda a buffer used once is never
 * page-locked for DMA uploads (core/tensor.c). */
static dm_status pipeline_opts(const train_opts *o, const char *const keep[2],
                               dm_pipeline_opts *p) {
  /* the flags as the C API's options, then the C API's translator */
  dm_train_options t;
  DM_TRY(dm_train_options_init(&t));
  dm_cli_device_name device;
  dm_cli_train_options(&o->opt, &o->mp, &o->dev, &o->dist, &device, &t);
  t.losses = &o->loss;
  t.n_losses = 1;
  t.memory = !o->no_free;
  t.keep = keep;
  t.n_keep = 2;
  t.fuse_train = o->fuse_train;
  t.layout = o->layout;
  DM_TRY(dm_pipeline_opts_from_train(&t, p));
  p->layout_opts.pad_channels = o->pad_channels; /* no C API field */
  p->report = stdout;
  return DM_OK;
}

static void free_nets(Caffe2__NetDef **nets, size_t n) {
  for (size_t i = 0; nets && i < n; i++)
    if (nets[i])
      protobuf_c_message_free_unpacked(&nets[i]->base, NULL);
  free(nets);
}

/* Reads the nets, runs the pipeline on them, and with --save-net/--save-init writes
 * the training net and the init addition. */
static dm_status build_nets(const train_opts *o, Caffe2__NetDef **def, Caffe2__NetDef **test,
                            Caffe2__NetDef ***inits, Caffe2__NetDef **init_add) {
  DM_TRY(read_net(o->net, o->train_db, o->iters > 0 ? "--train-db" : NULL, def));
  DM_TRY(dm_dist_cli_agree(&o->dist, *def, o->iters, o->mp.enabled ? o->mp.opts.target : DM_FLOAT,
                           o->mp.enabled ? (int)o->mp.opts.scaling : -1));
  if (o->test_net)
    DM_TRY(read_net(o->test_net, o->test_db, o->iters > 0 ? "--test-db" : NULL, test));
  if (o->accuracy_given)
    DM_TRY(dm_cli_check_blob_written("--accuracy", o->accuracy, *def, o->net, *test,
                                     o->test_net));
  if (!(*inits = calloc(o->inits.n + 1, sizeof **inits)))
    return DM_NOMEM("the init nets");
  for (size_t i = 0; i < o->inits.n; i++)
    DM_TRY(dm_netdef_read(o->inits.items[i], &(*inits)[i]));
  const char *const keep[2] = {o->accuracy, "data"};
  dm_pipeline_opts p;
  DM_TRY(pipeline_opts(o, keep, &p));
  p.shared = test;
  p.n_shared = *test ? 1 : 0;
  p.inits = *inits;
  p.n_inits = o->inits.n;
  DM_TRY(dm_pipeline_run(*def, &p, init_add, NULL));
  if (o->save_net)
    DM_TRY(dm_netdef_write_atomic(*def, o->save_net));
  if (o->save_init && *init_add)
    DM_TRY(dm_netdef_write_atomic(*init_add, o->save_init));
  if (o->save_init && !*init_add)
    printf("no init addition (the passes made no state): %s not written\n", o->save_init);
  return DM_OK;
}

static dm_status setup(train_state *st, train_opts *o) {
  for (size_t i = 0; i < o->plugins.n; i++)
    DM_TRY(dm_plugin_load(o->plugins.items[i]));
  DM_TRY(dm_workspace_create(&st->ws));
  DM_TRY(dm_workspace_set_memory_limit(st->ws, o->memory_limit));
  DM_TRY(dm_workspace_set_engine(st->ws, o->engine));
  Caffe2__NetDef *def = NULL, *init_add = NULL, *test = NULL, **inits = NULL;
  /* The nets are rewritten first: where the training net reads its state says where the
   * init nets must put it. The test net shares the weights, so its GPU state counts. */
  dm_status s = build_nets(o, &def, &test, &inits, &init_add);
  int run = o->iters > 0; /* --iters 0 (with --save-net): the nets are written; no run */
  for (size_t i = 0; s == DM_OK && run && i < o->inits.n; i++) {
    s = run_init(st, o->inits.items[i], inits[i]);
    inits[i] = NULL;
  }
  if (s == DM_OK && run && init_add) {
    s = run_init(st, "optimizer_init", init_add);
    init_add = NULL;
  }
  free_nets(inits, o->inits.n);
  if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  if (s != DM_OK || !run) {
    if (def)
      protobuf_c_message_free_unpacked(&def->base, NULL);
    if (test)
      protobuf_c_message_free_unpacked(&test->base, NULL);
    return s;
  }
  /* What exists now is the state a checkpoint must carry: parameters, momenta, the
   * iteration counter (and, with loss scaling, its scale and counters). */
  size_t n = dm_workspace_blob_count(st->ws);
  st->persistent = calloc(n + 1, sizeof *st->persistent);
  for (size_t i = 0; s == DM_OK && st->persistent && i < n; i++)
    if (!(st->persistent[st->n_persistent++] = strdup(dm_workspace_blob_name(st->ws, i))))
      s = DM_NOMEM("blob names");
  if (s == DM_OK && !st->persistent)
    s = DM_NOMEM("blob names");
  /* Data parallel: every rank starts from rank 0's state (a resumed run then loads the
   * same checkpoint on every rank). */
  if (s == DM_OK && o->dist.on)
    s = dm_workspace_broadcast(st->ws, (const char *const *)st->persistent, st->n_persistent, 0);
  if (s == DM_OK && o->resume)
    st->have_checkpoint =
        (s = dm_train_resume(st->ws, o->checkpoint, st->persistent, st->n_persistent)) == DM_OK;
  for (size_t i = 0; s == DM_OK && !st->records && i < def->n_op; i++)
    if (is_db_input(def->op[i]))
      st->records = dm_opdef_arg_int(def->op[i], "batch_size", 0);
  if (s == DM_OK) {
    s = dm_workspace_create_net(st->ws, def, o->net, &st->train);
    def = NULL;
  }
  if (s == DM_OK && o->explain_overflow)
    dm_net_set_check_finite(st->train, 1);
  if (s == DM_OK)
    s = dm_device_cli_apply(&o->dev, st->train);
  if (s == DM_OK && test)
    s = wire_test_batches(st->ws, test);
  if (s == DM_OK && test) {
    s = dm_workspace_create_net(st->ws, test, o->test_net, &st->test);
    test = NULL;
    if (s == DM_OK)
      s = dm_device_cli_apply(&o->dev, st->test);
  }
  if (def)
    protobuf_c_message_free_unpacked(&def->base, NULL);
  if (test)
    protobuf_c_message_free_unpacked(&test->base, NULL);
  if (s == DM_OK && o->checkpoint && o->dist.rank == 0) /* rank 0 alone writes */
    s = dm_train_checkpoint_net(st->ws, o->checkpoint, 1, st->persistent, st->n_persistent,
                                &st->save);
  return s;
}

/* Steps skipped in a row after which training stops with an error: far past the ~16
 * halvings that take the default scale to its minimum, so the gradients overflow at any
 * scale (and with skips not counted as iterations, --iters would never be reached). */
#define DM_TRAIN_MAX_SKIP_RUN 100

/* Whether this step was skipped (the skip counter rose). On a skipped step: which op
 * overflowed first (--explain-overflow); and a plain warning when the scale keeps
 * falling instead of training on silently. */
static int warn_overflow(train_state *st, const train_opts *o, long iter, long skipped,
                         double scale) {
  if (skipped <= st->last_skipped) {
    st->skip_run = 0;
    st->warned_at_min = 0;
    st->last_skipped = skipped;
    return 0;
  }
  st->skip_run += skipped - st->last_skipped;
  st->last_skipped = skipped;
  const dm_op_ctx *op = NULL;
  int out = 0;
  if (o->explain_overflow) {
    char what[256];
    if (dm_net_first_nonfinite(st->train, &op, &out))
      printf("%siteration %ld skipped (loss scale now %g): first inf/nan in %s, output %d '%s'\n",
             st->report.tty ? "\n" : "", iter, scale, dm_op_describe(op, what, sizeof what), out,
             dm_op_output_name(op, out));
    else
      printf("%siteration %ld skipped (loss scale now %g): no op output held inf/nan; the "
             "overflow was in the unscaled gradients\n", st->report.tty ? "\n" : "", iter, scale);
  }
  int at_min = st->skip_run >= 2 && scale <= o->mp.opts.min_scale && !st->warned_at_min;
  if (at_min)
    st->warned_at_min = 1;
  if (st->skip_run == 10 || at_min) {
    char advice[512];
    fprintf(stderr,
            "\ndemitasse train: warning: %ld steps in a row skipped on overflow (iteration %ld, "
            "loss scale %g%s): %s\n",
            st->skip_run, iter, scale, scale <= o->mp.opts.min_scale ? ", at its minimum" : "",
            dm_mp_skip_advice(&o->mp.opts, scale, advice, sizeof advice));
  }
  return 1;
}

/* Which op first produced an inf/nan in the step of iteration `bad`, which diverged, when
 * --explain-overflow (whose scan of every output costs each step some 10%) was not on:
 * the state of the last checkpoint this run saved or resumed from is loaded again (or,
 * before any, the init nets' state is made again), the steps from it to `bad` are
 * replayed (bit-identically: the data input reads batch number `optimizer_iteration`),
 * the last with the scan on. Nothing is saved. 0 when it cannot be told (no iteration
 * counter, or no divergence on replay: an op drawing random numbers in the training net,
 * Dropout say, draws others the second time). */
static int replay_divergence(train_state *st, const train_opts *o, long bad, long *from,
                             const dm_op_ctx **op, int *out) {
  if (st->have_checkpoint
          ? dm_train_resume(st->ws, o->checkpoint, st->persistent, st->n_persistent) != DM_OK
          : rerun_inits(st) != DM_OK)
    return 0;
  double it = scalar(st->ws, DM_OPTIM_ITER_BLOB);
  if (isnan(it) || (long)it >= bad)
    return 0;
  *from = (long)it;
  while ((long)it < bad - 1) {
    double next;
    if (dm_net_run(st->train) != DM_OK || isnan(next = scalar(st->ws, DM_OPTIM_ITER_BLOB)) ||
        next <= it)
      return 0;
    it = next;
  }
  dm_net_set_check_finite(st->train, 1);
  int found = dm_net_run(st->train) == DM_OK && !isfinite(scalar(st->ws, o->loss)) &&
              dm_net_first_nonfinite(st->train, op, out);
  dm_net_set_check_finite(st->train, 0);
  return found;
}

/* The outputs' folders, kinds and distinctness checked before anything runs
 * (train_paths.h); rank 0 alone writes them. */
static dm_status check_outputs(const train_opts *o) {
  if (o->dist.rank != 0)
    return DM_OK;
  char *svg = o->csv ? dm_report_svg_path(o->csv) : NULL;
  if (o->csv && !svg)
    return DM_NOMEM("a path");
  dm_train_paths p = {o->checkpoint, o->csv, svg};
  dm_status s = dm_train_check_paths(&p);
  free(svg);
  return s;
}

static dm_status train(train_opts *o) {
  train_state st = {0};
  if (o->iters > 0) /* before reading anything: no GPU, no training */
    DM_TRY(dm_device_cli_check(&o->dev));
  if (o->iters > 0) /* and no output path that fails at the first save */
    DM_TRY(check_outputs(o));
  dm_status s = setup(&st, o);
  if (s != DM_OK || o->iters == 0) /* --iters 0: the nets were written, nothing runs */
    goto cleanup;
  double sk = scalar(st.ws, DM_MP_SKIPPED_BLOB);
  st.last_skipped = isnan(sk) ? 0 : (long)sk;
  double it = scalar(st.ws, DM_OPTIM_ITER_BLOB);
  long start = isnan(it) ? 0 : (long)it;
  /* --resume: the CSV is cut back to the checkpoint's iteration, then continued */
  s = dm_report_open(&st.report, o->dist.rank == 0 ? o->csv : NULL, o->resume ? start : -1);
  if (s == DM_OK && start > 0 && start < o->iters)
    printf("resuming at iteration %ld\n", start);
  else if (s == DM_OK && start >= o->iters) /* not an error: the run is already done */
    printf("the checkpoint is already at iteration %ld >= --iters %ld: nothing to train\n",
           start, o->iters);
  double t_start = now_s(), t_last = t_start;
  long last_it = start, done = start;
  while (s == DM_OK && done < o->iters) {
    if ((s = dm_net_run(st.train)) != DM_OK)
      break;
    long prev = done;
    dm_train_point p = {prev + 1, scalar(st.ws, o->loss), scalar(st.ws, o->accuracy), NAN, NAN,
                        0, scalar(st.ws, DM_MP_SCALE_BLOB), -1};
    /* Data parallel: the means over the ranks, on every rank (so all of them see the
     * same divergence and stop together) */
    double means[2] = {p.loss, p.accuracy};
    if (o->dist.on && (s = dm_dist_mean(means, 2)) != DM_OK)
      break;
    p.loss = means[0];
    p.accuracy = means[1];
    double skipped = scalar(st.ws, DM_MP_SKIPPED_BLOB);
    int was_skipped = 0;
    if (!isnan(skipped)) {
      p.skipped = (long)skipped;
      was_skipped = warn_overflow(&st, o, prev + 1, p.skipped, p.loss_scale);
    }
    /* A non-finite loss on a step that was applied: the run diverged (its weights are
     * garbage now). Stop before anything is written for this iteration, so the last
     * checkpoint stays the last good state. With loss scaling the loss blob holds the
     * unscaled FP32 loss (only its gradient is scaled); a non-finite one makes the
     * gradients non-finite and the step is skipped, which the skip counting handles, so
     * this applies to FP32, BF16 and --loss-scale none, and to any applied step. */
    if (!was_skipped && dm_workspace_tensor(st.ws, o->loss) && !isfinite(p.loss)) {
      const dm_op_ctx *op = NULL;
      int out = 0;
      long from = 0;
      char what[256];
      if (o->explain_overflow && dm_net_first_nonfinite(st.train, &op, &out))
        s = dm_error(DM_ERR_INVALID,
                     "iteration %ld: the loss '%s' is non-finite (%g): the run diverged; first "
                     "inf/nan in %s, output %d '%s'; nothing saved for this iteration",
                     prev + 1, o->loss, p.loss, dm_op_describe(op, what, sizeof what), out,
                     dm_op_output_name(op, out));
      else if (!o->explain_overflow && replay_divergence(&st, o, prev + 1, &from, &op, &out))
        s = dm_error(DM_ERR_INVALID,
                     "iteration %ld: the loss '%s' is non-finite (%g): the run diverged (lower "
                     "--lr?); first inf/nan in %s, output %d '%s' (found by replaying the "
                     "steps from %s at iteration %ld); nothing saved for this iteration",
                     prev + 1, o->loss, p.loss, dm_op_describe(op, what, sizeof what), out,
                     dm_op_output_name(op, out),
                     st.have_checkpoint ? "the checkpoint" : "the initial state", from);
      else
        s = dm_error(DM_ERR_INVALID,
                     "iteration %ld: the loss '%s' is non-finite (%g): the run diverged (lower "
                     "--lr?); nothing saved for this iteration; re-run with --explain-overflow "
                     "to name the first op that produced an inf/nan",
                     prev + 1, o->loss, p.loss);
      break;
    }
    /* A step skipped on overflow leaves the iteration counter where it was (Iter takes
     * the skip), and the next step tries the same batch at the lower scale: iterations
     * are the steps applied. So --iters, the CSV, the checkpoints and --resume all count
     * the counter's iterations, and a resumed run ends where an uninterrupted one does.
     * A net without the counter counts every step. */
    double itv = scalar(st.ws, DM_OPTIM_ITER_BLOB);
    done = !isnan(itv) && (was_skipped || (long)itv != prev) ? (long)itv : prev + 1;
    if (done == prev) {
      if (st.skip_run >= DM_TRAIN_MAX_SKIP_RUN) {
        s = dm_error(DM_ERR_INVALID,
                     "%ld steps in a row skipped on overflow at iteration %ld (loss scale %g): "
                     "stopping, the model is not training",
                     st.skip_run, prev + 1, p.loss_scale);
        break;
      }
      continue;
    }
    p.iter = done;
    int test_now = st.test && o->test_every > 0 && (done % o->test_every == 0 || done == o->iters);
    int log_now = done % o->log_every == 0 || done == o->iters || test_now;
    if (test_now && (s = test_pass(st.ws, st.test, o, done, &p.test_loss, &p.test_accuracy)) != DM_OK)
      break;
    double test_means[2] = {p.test_loss, p.test_accuracy};
    if (test_now && o->dist.on && (s = dm_dist_mean(test_means, 2)) != DM_OK)
      break;
    p.test_loss = test_means[0];
    p.test_accuracy = test_means[1];
    double t = now_s();
    /* records per step: the DB input's batch (a language model's token windows too),
     * else the fed 'data' blob's first dim */
    const dm_tensor *data = dm_workspace_tensor(st.ws, "data");
    double batch = st.records > 0                       ? (double)st.records
                   : data && dm_tensor_ndim(data) ? (double)dm_tensor_dims(data)[0]
                                                       : 1;
    batch *= o->dist.size; /* the global batch */
    p.images_per_s = batch * (double)(done - last_it) / fmax(t - t_last, 1e-9);
    double eta = (t - t_start) / (double)(done - start) * (double)(o->iters - done);
    s = dm_report_add(&st.report, &p, o->iters, eta, log_now); /* every iteration: the plot */
    if (log_now || st.report.tty) { /* the rate over the iterations since the last row */
      t_last = t;
      last_it = done;
    }
    if (s == DM_OK && test_now)
      s = dm_report_write_svg(&st.report);
    if (s == DM_OK && st.save && (done % o->checkpoint_every == 0 || done == o->iters))
      st.have_checkpoint = (s = dm_net_run(st.save)) == DM_OK;
  }
  if (s == DM_OK) {
    s = dm_report_write_svg(&st.report);
    if (done > start) /* (on a terminal, below the progress line) */
      printf("%strained %ld iterations in %.1f s\n", st.report.tty ? "\n" : "", done - start,
             now_s() - t_start);
    dm_device_cli_report(stdout, st.train);
  }
  dm_report_close(&st.report);
cleanup:
  for (size_t i = 0; i < st.n_persistent; i++)
    free(st.persistent[i]);
  free(st.persistent);
  for (size_t i = 0; i < st.n_init_nets; i++)
    free(st.init_nets[i].data);
  free(st.init_nets);
  dm_workspace_destroy(st.ws);
  return s;
}

/* Refuses an output that is an input (--csv INIT, --save-init NET, --checkpoint on the
 * training DB, ...) before anything is read or run (tools/cli_util.h). */
static dm_status check_paths(const train_opts *o) {
  char *svg = o->csv ? dm_report_svg_path(o->csv) : NULL;
  if (o->csv && !svg)
    return DM_NOMEM("a path");
  const dm_cli_file outs[] = {DM_CLI_FILE("--csv", o->csv),
                              DM_CLI_FILE("--csv's plot", svg),
                              DM_CLI_FILE("--save-net", o->save_net),
                              DM_CLI_FILE("--save-init", o->save_init),
                              DM_CLI_FILE("--checkpoint", o->checkpoint),
                              DM_CLI_FILES_END},
                    ins[] = {DM_CLI_LIST("--init", &o->inits, 0),
                             DM_CLI_FILE("--net", o->net),
                             DM_CLI_FILE("--test-net", o->test_net),
                             DM_CLI_FILE("--train-db", o->train_db),
                             DM_CLI_FILE("--test-db", o->test_db),
                             DM_CLI_LIST("--plugin", &o->plugins, 0),
                             DM_CLI_FILES_END};
  dm_status s = dm_cli_check_outputs("train", outs, ins);
  free(svg);
  return s;
}

enum { O_TRAIN_DB = 300, O_TEST_DB, O_EXPLAIN, O_NO_FREE, O_SAVE_NET, O_SAVE_INIT, O_FUSE_TRAIN,
       O_LAYOUT };

int dm_cmd_train(int argc, char **argv) {
  static const struct option own[] = {
      {"init", required_argument, NULL, 'i'},      {"net", required_argument, NULL, 'n'},
      {"iters", required_argument, NULL, 'N'},     {"loss", required_argument, NULL, 'l'},
      {"accuracy", required_argument, NULL, 'a'},  {"test-net", required_argument, NULL, 't'},
      {"test-every", required_argument, NULL, 'e'}, {"test-iters", required_argument, NULL, 'T'},
      {"train-db", required_argument, NULL, O_TRAIN_DB},
      {"test-db", required_argument, NULL, O_TEST_DB},
      {"csv", required_argument, NULL, 'c'},       {"checkpoint", required_argument, NULL, 'k'},
      {"checkpoint-every", required_argument, NULL, 'K'},
      {"resume", no_argument, NULL, 'r'},          {"log-every", required_argument, NULL, 'L'},
      {"plugin", required_argument, NULL, 'p'},    {"help", no_argument, NULL, 'h'},
      {"explain-overflow", no_argument, NULL, O_EXPLAIN},
      {"no-free", no_argument, NULL, O_NO_FREE},
      {"fuse-train", no_argument, NULL, O_FUSE_TRAIN},
      {"save-net", required_argument, NULL, O_SAVE_NET},
      {"save-init", required_argument, NULL, O_SAVE_INIT}, DM_MEMORY_LIMIT_OPTION,
      {"layout", required_argument, NULL, O_LAYOUT}, DM_PAD_CHANNELS_OPTION,
      DM_THREADS_OPTION, DM_ENGINE_OPTION};
  struct option *opt_opts = dm_optim_merge_opts(own, sizeof own / sizeof own[0]);
  struct option *mp_opts = opt_opts ? dm_mp_merge_opts(opt_opts) : NULL;
  struct option *dev_opts = mp_opts ? dm_device_merge_opts(mp_opts) : NULL;
  struct option *opts = dev_opts ? dm_dist_merge_opts(dev_opts) : NULL;
  free(opt_opts);
  free(mp_opts);
  free(dev_opts);
  if (!opts)
    return dm_cli_failf("out of memory");
  train_opts o = {.loss = "loss", .accuracy = "accuracy", .test_iters = 1, .log_every = 100,
                  .layout = DM_TRAIN_LAYOUT_AUTO, .pad_channels = DM_LAYOUT_PAD_AUTO};
  dm_optimizer_opts_init(&o.opt);
  dm_mp_cli_init(&o.mp);
  dm_device_cli_init(&o.dev);
  dm_dist_cli_init(&o.dist);
  o.opt.kind = DM_OPTIMIZER_MOMENTUM;
  static const char *const data_blobs[] = {"data", "label"};
  o.opt.exclude = data_blobs;
  o.opt.n_exclude = 2;
  int rc = DM_EXIT_OK, c, iters_given = 0;
  optind = 0;
  opterr = 0;
  while (rc == DM_EXIT_OK && (c = getopt_long(argc, argv, "i:n:N:l:a:t:e:T:c:k:K:rL:p:h", opts,
                                              NULL)) != -1) {
    if (dm_optim_flag("train", c, optarg, &o.opt, &o.optimize, &rc) ||
        dm_mp_flag("train", c, optarg, &o.mp, &rc) ||
        dm_device_flag("train", c, optarg, &o.dev, &rc) ||
        dm_dist_flag("train", c, optarg, &o.dist, &rc))
      continue;
    long *num = c == 'N' ? &o.iters : c == 'e' ? &o.test_every : c == 'T' ? &o.test_iters
              : c == 'K' ? &o.checkpoint_every : c == 'L' ? &o.log_every : NULL;
    if (num) {
      if (!dm_cli_parse_long(optarg, c == 'N' ? 0 : 1, 1L << 40, num))
        rc = dm_cli_usage_error("train", "'%s' is not a %s integer", optarg,
                                c == 'N' ? "non-negative" : "positive");
      iters_given |= c == 'N';
      continue;
    }
    switch (c) {
    case 'i':
      if (!dm_strlist_push(&o.inits, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'n': o.net = optarg; break;
    case 'l': o.loss = optarg; break;
    case 'a': o.accuracy = optarg, o.accuracy_given = 1; break;
    case 't': o.test_net = optarg; break;
    case 'c': o.csv = optarg; break;
    case 'k': o.checkpoint = optarg; break;
    case 'r': o.resume = 1; break;
    case O_TRAIN_DB: o.train_db = optarg; break;
    case O_TEST_DB: o.test_db = optarg; break;
    case O_EXPLAIN: o.explain_overflow = 1; break;
    case O_NO_FREE: o.no_free = 1; break;
    case O_FUSE_TRAIN: o.fuse_train = 1; break;
    case O_SAVE_NET: o.save_net = optarg; break;
    case O_SAVE_INIT: o.save_init = optarg; break;
    case O_LAYOUT: rc = dm_cli_layout_flag("train", optarg, &o.layout); break;
    case DM_PAD_CHANNELS_FLAG:
      rc = dm_cli_pad_channels_flag("train", optarg, &o.pad_channels);
      break;
    case DM_MEMORY_LIMIT_FLAG:
      rc = dm_cli_memory_limit_flag("train", optarg, &o.memory_limit);
      break;
    case DM_THREADS_FLAG: rc = dm_cli_threads_flag("train", optarg); break;
    case DM_ENGINE_FLAG: rc = dm_cli_engine_flag("train", optarg, &o.engine); break;
    case 'p':
      if (!dm_strlist_push(&o.plugins, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'h': help(stdout); rc = -1; break;
    default: rc = dm_cli_bad_option("train", argv); break;
    }
  }
  dm_mp_cli_finish(&o.mp);
  if (rc == DM_EXIT_OK && optind != argc)
    rc = dm_cli_usage_error("train", "unexpected argument '%s'", argv[optind]);
  if (rc == DM_EXIT_OK && (!o.inits.n || !o.net || !iters_given))
    rc = dm_cli_usage_error("train", "needs --init, --net and --iters");
  if (rc == DM_EXIT_OK && !o.iters && !o.save_net && !o.save_init)
    rc = dm_cli_usage_error("train", "--iters 0 only with --save-net or --save-init");
  if (rc == DM_EXIT_OK && (o.checkpoint_every || o.resume) && !o.checkpoint)
    rc = dm_cli_usage_error("train", "--checkpoint-every and --resume need --checkpoint PATH");
  if (rc == DM_EXIT_OK && o.checkpoint && !o.checkpoint_every)
    o.checkpoint_every = o.iters;
  if (rc == DM_EXIT_OK && o.test_net && !o.test_every)
    o.test_every = o.iters;
  if (rc == DM_EXIT_OK && o.dist.on && !o.iters)
    rc = dm_cli_usage_error("train", "--data-parallel trains: it needs --iters N > 0");
  if (rc == DM_EXIT_OK && check_paths(&o) != DM_OK)
    rc = dm_cli_fail();
  if (rc == DM_EXIT_OK) {
    /* With --data-parallel: MPI first; a rank that fails ends every rank of the job */
    if (dm_dist_cli_start(&o.dist, o.dev.cuda, &o.dev.opts.device_id) != DM_OK ||
        train(&o) != DM_OK)
      rc = dm_cli_fail();
    dm_dist_cli_finish(&o.dist, rc != DM_EXIT_OK);
  }
  dm_strlist_free(&o.plugins);
  dm_strlist_free(&o.inits);
  dm_mp_cli_free(&o.mp);
  dm_device_cli_free(&o.dev);
  free(opts);
  return rc < 0 ? DM_EXIT_OK : rc;
}
