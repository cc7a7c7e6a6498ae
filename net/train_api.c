/* train_api.c: the public training calls of demitasse.h (dm_train_options_init,
 * dm_workspace_create_train_net, dm_rewrite_train_net): the options turned into the
 * pipeline's (net/passes/pipeline.h), so the C API builds exactly the nets `demitasse train`
 * and `rewrite` build from the same options. */
#include <float.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse.h"

#include "api.h"
#include "core/device.h"
#include "core/workspace.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"
#include "net/sized_options.h"

static const char *const default_losses[] = {"loss"};
static const char *const default_data[] = {"data", "label"};
static const char *const default_keep[] = {"accuracy", "data"};

/* The size of the first dm_train_options layout: nothing smaller is valid. Fields are
 * only appended after it (see "ABI growth" in demitasse.h). */
static const dm_sized_layout layout = {
    "dm_train_options", offsetof(dm_train_options, n_keep) + sizeof(size_t),
    sizeof(dm_train_options)};

static void defaults(dm_train_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->losses = default_losses;
  o->n_losses = 1;
  o->data_blobs = default_data;
  o->n_data_blobs = 2;
  dm_optimizer_opts opt;
  dm_optimizer_opts_init(&opt);
  o->optimizer = DM_OPTIMIZER_MOMENTUM;
  o->lr = opt.lr;
  o->momentum = opt.momentum;
  o->beta1 = opt.beta1;
  o->beta2 = opt.beta2;
  o->epsilon = opt.epsilon;
  o->gamma = opt.gamma;
  o->power = opt.power;
  o->warmup_start = opt.warmup_start;
  o->stepsize = opt.stepsize;
  o->max_iter = opt.max_iter;
  dm_mp_opts mp;
  dm_mp_opts_init(&mp);
  o->precision = DM_PRECISION_FP32;
  o->loss_scale = DM_LOSS_SCALE_AUTO;
  o->init_scale = mp.init_scale;
  o->growth_interval = mp.growth_interval;
  o->memory = 1;
  o->keep = default_keep;
  o->n_keep = 2;
}

/* `size` is the caller's sizeof (the dm_train_options_init macro passes it): only that
 * many bytes are written, the defaults of the fields the caller's header has. */
dm_status dm_train_options_init_sized(dm_train_options *o, size_t size) {
  dm_train_options d;
  defaults(&d);
  return dm_sized_init(&layout, o, size, &d);
}

/* The caller's options over the defaults: the fields its struct_size covers. A larger
 * struct (a newer header) is accepted only if the fields this library does not know are
 * zero, as plugin structs are (demitasse_plugin.h). */
static dm_status take_options(const dm_train_options *in, dm_train_options *o) {
  defaults(o);
  return dm_sized_take(&layout, in, o);
}

/* A borrowed list of names: each present and non-empty. */
static dm_status check_names(const char *field, const char *const *v, size_t n) {
  return dm_sized_check_names(&layout, field, v, n);
}

/* "cpu", "cuda", "cuda:N" -> *cuda, *id; `what` names the field in the message. */
dm_status dm_api_parse_device(const char *what, const char *dev, int *cuda, int *id) {
  *cuda = 0;
  *id = 0;
  if (!dev || strcmp(dev, "cpu") == 0)
    return DM_OK;
  if (strcmp(dev, "cuda") == 0) {
    *cuda = 1;
    return DM_OK;
  }
  char *end = NULL;
  long n = strncmp(dev, "cuda:", 5) == 0 && dev[5] >= '0' && dev[5] <= '9'
               ? strtol(dev + 5, &end, 10) : -1;
  if (n < 0 || n > 1023 || !end || *end)
    return dm_error(DM_ERR_INVALID, "%s: wants \"cpu\", \"cuda\" or \"cuda:N\", got '%s'",
                    what, dev);
  *cuda = 1;
  *id = (int)n;
  return DM_OK;
}

/* The pipeline's options from the public ones (borrowing their lists): the one
 * translator, for the C API and `demitasse train` (net/passes/pipeline.h). */
/* Everything but the loss: dm_pipeline_opts_from_train and _from_train_forward. */
static dm_status from_train(const dm_train_options *o, dm_pipeline_opts *p) {
  dm_pipeline_opts_init(p);
  DM_TRY(check_names("losses", o->losses, o->n_losses));
  DM_TRY(check_names("data_blobs", o->data_blobs, o->n_data_blobs));
  DM_TRY(check_names("fp32_ops", o->fp32_ops, o->n_fp32_ops));
  DM_TRY(check_names("fp16_ops", o->fp16_ops, o->n_fp16_ops));
  DM_TRY(check_names("cpu_ops", o->cpu_ops, o->n_cpu_ops));
  DM_TRY(check_names("keep", o->keep, o->n_keep));
  p->gradient = DM_SWITCH_AUTO;
  p->losses = o->losses;
  p->n_losses = o->n_losses;
  p->optimize = 1;
  dm_optimizer_opts *opt = &p->optim;
  if (o->optimizer != DM_OPTIMIZER_SGD && o->optimizer != DM_OPTIMIZER_MOMENTUM &&
      o->optimizer != DM_OPTIMIZER_ADAM && o->optimizer != DM_OPTIMIZER_ADAMW)
    return dm_error(DM_ERR_INVALID, "dm_train_options.optimizer: unknown value %d",
                    (int)o->optimizer);
  opt->kind = o->optimizer;
  opt->lr = o->lr;
  opt->momentum = o->momentum;
  opt->nesterov = o->nesterov;
  opt->beta1 = o->beta1;
  opt->beta2 = o->beta2;
  opt->epsilon = o->epsilon;
  opt->weight_decay = o->weight_decay;
  opt->decay_all = o->decay_all;
  opt->policy = o->lr_policy;
  opt->stepsize = o->stepsize;
  opt->gamma = o->gamma;
  opt->power = o->power;
  opt->max_iter = o->max_iter;
  opt->warmup_iter = o->warmup_iter;
  opt->warmup_start = o->warmup_start;
  opt->clip_norm = o->clip_norm;
  opt->exclude = o->data_blobs;
  opt->n_exclude = o->data_blobs ? o->n_data_blobs : 0;
  if (o->precision != DM_PRECISION_FP32 && o->precision != DM_PRECISION_FP16 &&
      o->precision != DM_PRECISION_BF16)
    return dm_error(DM_ERR_INVALID, "dm_train_options.precision: unknown value %d",
                    (int)o->precision);
  p->mixed_precision = o->precision != DM_PRECISION_FP32;
  p->mp.target = o->precision == DM_PRECISION_BF16 ? DM_BFLOAT16 : DM_FLOAT16;
  if (o->loss_scale < DM_LOSS_SCALE_AUTO || o->loss_scale > DM_LOSS_SCALE_DYNAMIC)
    return dm_error(DM_ERR_INVALID, "dm_train_options.loss_scale: unknown value %d",
                    (int)o->loss_scale);
  /* AUTO: the plan decides (BF16 has FP32's exponent range: none; FP16: dynamic) */
  p->mp.scaling = o->loss_scale;
  if (!(o->init_scale > 0 && o->init_scale <= FLT_MAX) || o->growth_interval < 1)
    return dm_error(DM_ERR_INVALID, "dm_train_options: init_scale must be finite and > 0 "
                                    "(a float), and growth_interval >= 1");
  p->mp.init_scale = o->init_scale;
  p->mp.growth_interval = (long)o->growth_interval;
  p->mp.force_fp32 = o->fp32_ops;
  p->mp.n_force_fp32 = o->fp32_ops ? o->n_fp32_ops : 0;
  p->mp.force_fp16 = o->fp16_ops;
  p->mp.n_force_fp16 = o->fp16_ops ? o->n_fp16_ops : 0;
  DM_TRY(dm_api_parse_device("dm_train_options.device", o->device, &p->device,
                             &p->dev.device_id));
  p->dev.force_cpu = o->cpu_ops;
  p->dev.n_force_cpu = o->cpu_ops ? o->n_cpu_ops : 0;
  p->memory = o->memory != 0;
  p->keep = o->keep;
  p->n_keep = o->keep ? o->n_keep : 0;
  p->keep_init_blobs = 1;
  p->keep_reused_outputs = 1;
  /* data parallelism: this process's rank (dm_dist_init) reads its share of each batch */
  p->data_parallel = o->data_parallel != 0;
  if (o->dp_bucket_bytes < 0)
    return dm_error(DM_ERR_INVALID, "dm_train_options.dp_bucket_bytes: negative");
  p->dp.bucket_bytes = o->dp_bucket_bytes;
  p->dp.fp32_wire = o->dp_fp32 != 0;
  p->dp.overlap = p->device; /* a GPU overlaps each group's collective with the backward */
  p->dp.num_shards = dm_dist_size();
  p->dp.shard_id = dm_dist_rank();
  p->fuse_train = o->fuse_train != 0;
  if (o->multi_tensor != DM_SWITCH_AUTO && o->multi_tensor != DM_SWITCH_OFF &&
      o->multi_tensor != DM_SWITCH_ON)
    return dm_error(DM_ERR_INVALID, "dm_train_options.multi_tensor: unknown value %d",
                    (int)o->multi_tensor);
  p->optim.multi_tensor = o->multi_tensor;
  if (o->layout < DM_TRAIN_LAYOUT_AUTO || o->layout > DM_TRAIN_LAYOUT_NHWC)
    return dm_error(DM_ERR_INVALID, "dm_train_options.layout: unknown value %d",
                    (int)o->layout);
  p->layout = o->layout;
  return DM_OK;
}

dm_status dm_pipeline_opts_from_train(const dm_train_options *o, dm_pipeline_opts *p) {
  if (o->n_losses == 0 || !o->losses) {
    dm_pipeline_opts_init(p);
    return dm_error(DM_ERR_INVALID, "dm_train_options: no loss blob");
  }
  return from_train(o, p);
}

dm_status dm_pipeline_opts_from_train_forward(const dm_train_options *o, dm_pipeline_opts *p) {
  DM_TRY(from_train(o, p));
  p->gradient = DM_SWITCH_OFF;
  return DM_OK;
}

/* Whether the schema of `type` declares a string argument `name` (a DB reader's "db"). */
static int takes_string_arg(const char *type, const char *name) {
  const dm_op_schema *schema = type ? dm_schema_lookup(type) : NULL;
  for (const dm_arg_spec *a = schema ? schema->args : NULL; a && a->name; a++)
    if (strcmp(a->name, name) == 0 && a->type == DM_ARG_STRING)
      return 1;
  return 0;
}

/* Reads the forward net and points the ops that read a DB (their schema takes a "db"
 * argument) at o->db. */
static dm_status read_net(const char *path, const dm_train_options *o, Caffe2__NetDef **out) {
  Caffe2__NetDef *net = NULL;
  DM_TRY(dm_netdef_read(path, &net));
  dm_status s = DM_OK;
  for (size_t i = 0; o->db && s == DM_OK && i < net->n_op; i++)
    if (takes_string_arg(net->op[i]->type, "db"))
      s = dm_opdef_set_arg_string(net->op[i], "db", o->db);
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&net->base, NULL);
    return s;
  }
  *out = net;
  return DM_OK;
}

/* The GPU state already in `ws` (the caller's init net ran on the host) goes to the GPU
 * in place, as dm_device_place_init's copies would have put it: one
 * CopyCPUToGPU(X) -> X per such blob. */
dm_status dm_api_state_to_gpu(dm_workspace *ws, char *const *names, size_t n, int id) {
  Caffe2__NetDef *def = NULL;
  DM_TRY(dm_netdef_new("state_to_gpu", &def));
  dm_status s = DM_OK;
  for (size_t i = 0; s == DM_OK && i < n; i++) {
    dm_blob *b = dm_workspace_find(ws, names[i]);
    int at = 0;
    if (!b || !b->tensor->storage || dm_tensor_device(b->tensor, &at) != DM_CPU)
      continue;
    Caffe2__OperatorDef *op = NULL;
    if ((s = dm_opdef_new("CopyCPUToGPU", &op)) != DM_OK)
      break;
    if ((s = dm_opdef_add_input(op, names[i])) == DM_OK &&
        (s = dm_opdef_add_output(op, names[i])) == DM_OK &&
        !(op->device_option = malloc(sizeof *op->device_option)))
      s = DM_NOMEM("a device option");
    if (s == DM_OK) {
      caffe2__device_option__init(op->device_option);
      op->device_option->has_device_type = 1;
      op->device_option->device_type = DM_CUDA;
      op->device_option->has_device_id = 1;
      op->device_option->device_id = id;
    }
    if (s == DM_OK)
      s = dm_netdef_append_op(def, op); /* takes op */
    else
      protobuf_c_message_free_unpacked(&op->base, NULL);
  }
  if (s != DM_OK || def->n_op == 0) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return s;
  }
  dm_net *net = NULL;
  DM_TRY(dm_workspace_create_net(ws, def, "state_to_gpu", &net));
  return dm_net_run(net);
}

static dm_status create_train_net_entered(dm_workspace *ws, const char *net_path,
                                        const dm_train_options *opts, dm_net **out) {
  if (!ws || !net_path || !out)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create_train_net: NULL %s",
                    !ws ? "ws" : !net_path ? "net_path" : "out");
  *out = NULL;
  dm_train_options o;
  dm_pipeline_opts p;
  DM_TRY(take_options(opts, &o));
  DM_TRY(dm_pipeline_opts_from_train(&o, &p));
  dm_workspace_mark mark = dm_workspace_get_mark(ws);
  if (p.device) { /* before anything else: no GPU, no training */
    dm_status s = dm_device_check(DM_CUDA, p.dev.device_id);
    if (s != DM_OK)
      return dm_error_prefix(s, "dm_train_options.device '%s'", o.device);
  }
  /* What the workspace holds now is state (the weights from the caller's init net):
   * kept by the memory pass, as `train` keeps what its init nets created. */
  size_t n_ws = dm_workspace_blob_count(ws);
  const char **keep = malloc((p.n_keep + n_ws + 1) * sizeof *keep);
  if (!keep)
    return DM_NOMEM("the keep list");
  for (size_t i = 0; i < p.n_keep; i++)
    keep[i] = p.keep[i];
  for (size_t i = 0; i < n_ws; i++)
    keep[p.n_keep + i] = dm_workspace_blob_name(ws, i);
  p.keep = keep;
  p.n_keep += n_ws;
  Caffe2__NetDef *net = NULL, *init_add = NULL;
  dm_pipeline_result r = {0};
  dm_status s = read_net(net_path, &o, &net);
  if (s == DM_OK)
    s = dm_pipeline_run(net, &p, &init_add, &r);
  if (s == DM_OK && p.device)
    s = dm_api_state_to_gpu(ws, r.gpu.names, r.gpu.n, p.dev.device_id);
  dm_net *init = NULL;
  if (s == DM_OK && init_add) {
    s = dm_workspace_create_net(ws, init_add, "optimizer_init", &init); /* takes init_add */
    init_add = NULL;
    if (s == DM_OK)
      s = dm_net_run(init);
  }
  if (s == DM_OK) {
    s = dm_workspace_create_net(ws, net, net_path, out); /* takes net */
    net = NULL;
  }
  if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  if (net)
    protobuf_c_message_free_unpacked(&net->base, NULL);
  dm_pipeline_result_free(&r);
  free(keep);
  if (s != DM_OK) /* the state and nets this call created go again */
    dm_workspace_rollback(ws, mark);
  return s;
}

dm_status dm_workspace_create_train_net(dm_workspace *ws, const char *net_path,
                                        const dm_train_options *opts, dm_net **out) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create_train_net: NULL ws");
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_create_train_net"));
  return dm_workspace_leave_with(ws, create_train_net_entered(ws, net_path, opts, out));
}

dm_status dm_rewrite_train_net(const char *net_path, const dm_train_options *opts,
                               const char *out_net_path, const char *out_init_path) {
  if (!net_path || !out_net_path)
    return dm_error(DM_ERR_INVALID, "dm_rewrite_train_net: NULL %s",
                    net_path ? "out_net_path" : "net_path");
  dm_train_options o;
  dm_pipeline_opts p;
  DM_TRY(dm_init()); /* the passes read the op schemas */
  DM_TRY(take_options(opts, &o));
  DM_TRY(dm_pipeline_opts_from_train(&o, &p));
  Caffe2__NetDef *net = NULL, *init_add = NULL;
  dm_status s = read_net(net_path, &o, &net);
  if (s == DM_OK)
    s = dm_pipeline_run(net, &p, &init_add, NULL);
  if (s == DM_OK && out_init_path && !init_add)
    s = dm_netdef_new(DM_PIPELINE_INIT_ADD_NAME, &init_add);
  if (s == DM_OK)
    s = dm_netdef_write_atomic(net, out_net_path);
  if (s == DM_OK && out_init_path)
    s = dm_netdef_write_atomic(init_add, out_init_path);
  if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  if (net)
    protobuf_c_message_free_unpacked(&net->base, NULL);
  return s;
}
