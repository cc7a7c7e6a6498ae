/* pipeline.c: the training-net pipeline (see pipeline.h): the passes in their one order,
 * the placement driver, and the passes' summaries. */
#include "pipeline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/netio.h"
#include "net/gradient.h"
#include "net/memory_pass.h"
#include "net/netdef_build.h"
#include "net/op_origin.h"

void dm_pipeline_opts_init(dm_pipeline_opts *o) {
  memset(o, 0, sizeof *o);
  o->gradient = DM_PIPELINE_GRAD_AUTO;
  dm_optimizer_opts_init(&o->optim);
  dm_mp_opts_init(&o->mp);
  dm_device_opts_init(&o->dev);
  o->layout = DM_LAYOUT_AUTO;
  o->layout_opts.pad_channels = DM_LAYOUT_PAD_AUTO;
}

void dm_pipeline_opts_init_training(dm_pipeline_opts *o, const char *const *losses,
                                    size_t n_losses, const char *const *exclude,
                                    size_t n_exclude) {
  dm_pipeline_opts_init(o);
  o->gradient = DM_PIPELINE_GRAD_ON;
  o->losses = losses;
  o->n_losses = n_losses;
  o->optimize = 1;
  o->optim.exclude = exclude;
  o->optim.n_exclude = n_exclude;
}

void dm_gpu_state_free(dm_gpu_state *g) {
  for (size_t i = 0; i < g->n; i++)
    free(g->names[i]);
  free(g->names);
  g->names = NULL;
  g->n = 0;
}

void dm_pipeline_result_free(dm_pipeline_result *r) {
  if (!r)
    return;
  dm_fusion_summary_free(&r->fusion);
  dm_train_fusion_summary_free(&r->train_fusion);
  dm_mp_summary_free(&r->mp);
  dm_layout_summary_free(&r->layout);
  dm_gpu_state_free(&r->gpu);
}

int dm_netdef_has_gradient_ops(const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++)
    if (net->op[i]->is_gradient_op)
      return 1;
  return 0;
}

/* Placement ----------------------------------------------------------------------- */

dm_status dm_device_place_net(Caffe2__NetDef *net, const dm_device_opts *o, FILE *log,
                              dm_gpu_state *gpu) {
  dm_device_summary sum;
  dm_status s = dm_device_pass(net, o, &sum);
  for (size_t i = 0; s == DM_OK && gpu && i < sum.n_gpu_state; i++)
    if (!dm_str_in_list(sum.gpu_state[i], (const char *const *)gpu->names, gpu->n))
      s = dm_strv_push(&gpu->names, &gpu->n, sum.gpu_state[i]);
  if (s == DM_OK && log && sum.already)
    fprintf(log, "device pass: '%s' is already placed; unchanged\n", net->name ? net->name : "");
  else if (s == DM_OK && log)
    fprintf(log,
            "device pass: %zu of %zu ops on CUDA:%d, %zu copies inserted; on the CPU: %zu "
            "without a CUDA kernel, %zu pinned, %zu by --cpu-ops\n%s",
            sum.ops_device, sum.ops_total, o->device_id, sum.copies, sum.kept_no_kernel,
            sum.kept_pinned, sum.kept_forced, sum.report ? sum.report : "");
  dm_device_summary_free(&sum);
  return s;
}

dm_status dm_device_place_init_net(Caffe2__NetDef *init, const dm_device_opts *o,
                                   const dm_gpu_state *gpu, FILE *log) {
  size_t copies = 0;
  DM_TRY(dm_device_place_init(init, o, (const char *const *)gpu->names, gpu->n, &copies));
  if (log && copies)
    fprintf(log, "device pass: init net '%s': %zu CPU-only fills copied to CUDA:%d\n",
            init->name ? init->name : "", copies, o->device_id);
  return DM_OK;
}

/* Summaries ----------------------------------------------------------------------- */

static void print_mp_summary(FILE *f, const dm_mp_summary *s) {
  if (s->already) {
    fprintf(f, "mixed precision: the net was already rewritten; nothing changed\n");
    return;
  }
  fprintf(f, "mixed precision: %zu of %zu ops in %s, %zu in FP32, %zu casts inserted\n",
          s->ops_fp16, s->ops_total, s->bf16 ? "BF16" : "FP16", s->ops_fp32, s->casts);
  if (s->report)
    fprintf(f, "kept in FP32:\n%s", s->report);
}

/* Silent for a net without SpatialBN (SqueezeNet, LeNet): nothing to report. */
static void print_fusion_summary(FILE *f, const dm_fusion_summary *s) {
  if (s->bn_total == 0 && s->post_total == 0)
    return;
  if (s->bn_total)
    fprintf(f, "fusion: %zu of %zu SpatialBN folded into their Conv\n", s->folded, s->bn_total);
  if (s->post_total)
    fprintf(f,
            "fusion: of %zu Relu/Sum/Add, %zu Conv+Relu, %zu Conv+Sum, %zu Conv+Sum+Relu and "
            "%zu FC+Relu fused\n",
            s->post_total, s->conv_relu, s->conv_sum, s->conv_sum_relu, s->fc_relu);
  if (s->report)
    fprintf(f, "not fused:\n%s", s->report);
}

/* The renamed weights are listed: a caller fetching or checkpointing one must know. */
static void print_layout_summary(FILE *f, const dm_layout_summary *s) {
  if (s->already) {
    fprintf(f, "layout pass: the net is already NHWC; unchanged\n");
    return;
  }
  fprintf(f, "layout pass: %zu of %zu ops NHWC, %zu transposes inserted, %zu weights re-laid "
             "by the init addition under new names:\n",
          s->ops_order, s->ops_total, s->transposes, s->n_renamed);
  for (size_t k = 0; k < s->n_renamed; k++)
    fprintf(f, "  %s -> %s (%s%s)\n", s->renamed[2 * k], s->renamed[2 * k + 1],
            s->fc[k] ? "FC columns in NHWC order" : "filter M x kH x kW x C",
            !s->fc[k] && s->pad[k] > 1 ? ", C zero-padded" : "");
  if (s->padded)
    fprintf(f, "layout pass: %zu input(s) enter with channels zero-padded (NCHW2NHWCPad)\n",
            s->padded);
}

/* The layout stage -------------------------------------------------------------- */

static dm_status layout_all(Caffe2__NetDef *net, const dm_pipeline_opts *o,
                            const dm_layout_opts *lo, Caffe2__NetDef *add,
                            dm_layout_summary *sum) {
  DM_TRY(dm_layout_pass(net, lo, add, sum));
  for (size_t i = 0; i < o->n_shared; i++)
    DM_TRY(dm_layout_pass(o->shared[i], lo, add, sum));
  return DM_OK;
}

/* AUTO: whether the pass converts every net, tried on copies (nothing changes). */
static int layout_converts(Caffe2__NetDef *net, const dm_pipeline_opts *o,
                           const dm_layout_opts *lo, const Caffe2__NetDef *add) {
  dm_pipeline_opts c = *o;
  Caffe2__NetDef *n = NULL, *a = NULL, **sh = calloc(o->n_shared + 1, sizeof *sh);
  dm_layout_summary sum = {0};
  dm_status s = sh ? DM_PB_CLONE(Caffe2__NetDef, net, &n) : DM_NOMEM("the layout trial");
  if (s == DM_OK)
    s = DM_PB_CLONE(Caffe2__NetDef, add, &a);
  for (size_t i = 0; s == DM_OK && i < o->n_shared; i++)
    s = DM_PB_CLONE(Caffe2__NetDef, o->shared[i], &sh[i]);
  c.shared = sh;
  if (s == DM_OK)
    s = layout_all(n, &c, lo, a, &sum);
  if (s != DM_OK && o->report)
    fprintf(o->report, "layout: the nets stay as written (%s)\n", dm_last_error());
  for (size_t i = 0; sh && i < o->n_shared; i++)
    if (sh[i])
      protobuf_c_message_free_unpacked(&sh[i]->base, NULL);
  free(sh);
  if (n)
    protobuf_c_message_free_unpacked(&n->base, NULL);
  if (a)
    protobuf_c_message_free_unpacked(&a->base, NULL);
  dm_layout_summary_free(&sum);
  return s == DM_OK;
}

static void print_train_fusion_summary(FILE *f, const dm_train_fusion_summary *s) {
  fprintf(f, "training fusion: of %zu training SpatialBN, %zu made SpatialBNRelu and %zu "
          "SpatialBNAddRelu\n", s->bn_total, s->bn_relu, s->bn_add_relu);
  fprintf(f, "training fusion: %zu Conv + Relu made ConvFusion, %zu FC + Relu made "
          "FCFusion\n", s->conv_relu, s->fc_relu);
  if (s->report)
    fprintf(f, "not fused:\n%s", s->report);
}

/* The training fusion pass, its keep list the losses and o->keep. */
static dm_status fuse_for_training(Caffe2__NetDef *net, const dm_pipeline_opts *o,
                                   dm_train_fusion_summary *sum) {
  const char **keep = calloc(o->n_losses + o->n_keep + 1, sizeof *keep);
  if (!keep)
    return DM_NOMEM("the keep list");
  for (size_t i = 0; i < o->n_losses + o->n_keep; i++)
    keep[i] = i < o->n_losses ? o->losses[i] : o->keep[i - o->n_losses];
  dm_train_fusion_opts f = {keep, o->n_losses + o->n_keep, o->optim.exclude, o->optim.n_exclude};
  dm_status s = dm_train_fusion_pass(net, &f, sum);
  free(keep);
  if (s == DM_OK && o->report)
    print_train_fusion_summary(o->report, sum);
  return s;
}

/* The memory stage -------------------------------------------------------------- */

/* Whether output k of `op` is one its kernel reuses from run to run (the schema says). */
static int reused_output(const Caffe2__OperatorDef *op, size_t k) {
  const dm_op_schema *schema = op->type ? dm_schema_lookup(op->type) : NULL;
  return schema && k < 64 && (schema->reused_outputs >> k & 1u);
}

/* Appends a borrowed name to the growable list (*v, *n, *cap). */
static dm_status push_name(const char ***v, size_t *n, size_t *cap, const char *name) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 64;
    const char **grown = realloc(*v, c * sizeof *grown);
    if (!grown)
      return DM_NOMEM("the keep list");
    *v = grown;
    *cap = c;
  }
  (*v)[(*n)++] = name;
  return DM_OK;
}

/* Appends the names of every op input and output of `net`: the blobs instantiating it
 * creates in a workspace. */
static dm_status push_blob_names(const Caffe2__NetDef *net, const char ***v, size_t *n,
                                 size_t *cap) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; k < op->n_input + op->n_output; k++)
      DM_TRY(push_name(v, n, cap, k < op->n_input ? op->input[k] : op->output[k - op->n_input]));
  }
  return DM_OK;
}

/* The memory pass on one net: keep = the losses, o->keep, the init blobs (given), and
 * with keep_reused_outputs the outputs whose buffers their kernels reuse (the DB input's
 * batches). */
static dm_status plan_memory(Caffe2__NetDef *net, const dm_pipeline_opts *o,
                             const char *const *init_blobs, size_t n_init) {
  const char **keep = NULL;
  size_t n = 0, cap = 0;
  dm_status s = DM_OK;
  for (size_t i = 0; s == DM_OK && i < o->n_losses + o->n_keep + n_init; i++)
    s = push_name(&keep, &n, &cap,
                  i < o->n_losses ? o->losses[i]
                  : i < o->n_losses + o->n_keep ? o->keep[i - o->n_losses]
                  : init_blobs[i - o->n_losses - o->n_keep]);
  for (size_t i = 0; s == DM_OK && o->keep_reused_outputs && i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; s == DM_OK && k < op->n_output; k++)
      if (reused_output(op, k))
        s = push_name(&keep, &n, &cap, op->output[k]);
  }
  dm_memory_summary sum;
  if (s == DM_OK)
    s = dm_memory_pass(net, keep, n, &sum);
  if (s == DM_OK && o->report && sum.already)
    fprintf(o->report, "memory pass: the net already frees its blobs; unchanged\n");
  else if (s == DM_OK && o->report)
    fprintf(o->report, "memory pass: %zu blobs freed after their last use by %zu Free ops\n",
            sum.blobs_freed, sum.free_ops);
  free(keep);
  return s;
}

/* The pipeline ------------------------------------------------------------------ */

static dm_status new_init_add(Caffe2__NetDef **init_add) {
  return *init_add ? DM_OK : dm_netdef_new(DM_PIPELINE_INIT_ADD_NAME, init_add);
}

dm_status dm_pipeline_run(Caffe2__NetDef *net, const dm_pipeline_opts *o,
                          Caffe2__NetDef **init_add, dm_pipeline_result *r) {
  dm_pipeline_result local = {0};
  if (!r)
    r = &local;
  memset(r, 0, sizeof *r);
  *init_add = NULL;
  if (!net || !o)
    return dm_error(DM_ERR_INVALID, "dm_pipeline_run: NULL argument");
  const char **init_blobs = NULL;
  size_t n_init_blobs = 0, cap_init_blobs = 0;
  /* errors name ops as the user wrote them (op_origin.h) */
  dm_status s = dm_origin_stamp(net);
  for (size_t i = 0; s == DM_OK && i < o->n_shared; i++)
    s = dm_origin_stamp(o->shared[i]);
  if (s != DM_OK)
    return s;

  /* training fusion, then 1. gradient, 2. optimizer */
  if (o->fuse_train && ((s = fuse_for_training(net, o, &r->train_fusion)) != DM_OK ||
                       (s = dm_origin_mark_added(net, "training fusion")) != DM_OK)) {
    dm_pipeline_result_free(&local);
    return s;
  }
  r->gradient = o->gradient == DM_PIPELINE_GRAD_ON ||
                (o->gradient == DM_PIPELINE_GRAD_AUTO && !dm_netdef_has_gradient_ops(net));
  if (r->gradient && o->n_losses == 0)
    return dm_error(DM_ERR_INVALID, "the gradient pass needs a loss blob");
  if (r->gradient) {
    DM_TRY(dm_add_gradient_ops(net, o->losses, o->n_losses));
    DM_TRY(dm_origin_mark_added(net, "gradient"));
  }
  if (r->gradient && o->optimize) {
    DM_TRY(new_init_add(init_add));
    /* multi_tensor AUTO: one update launch where launches cost (a net placed on CUDA);
     * CPU nets keep their per-parameter ops unless asked. */
    dm_optimizer_opts optim = o->optim;
    if (optim.multi_tensor == DM_OPTIM_MULTI_AUTO)
      optim.multi_tensor = o->device ? DM_OPTIM_MULTI_ON : DM_OPTIM_MULTI_OFF;
    s = dm_add_optimizer_ops(net, NULL, 0, &optim, *init_add);
    r->optimizer = s == DM_OK;
    if (s == DM_OK)
      s = dm_origin_mark_added(net, "optimizer");
  }

  /* fusion (inference only) */
  if (s == DM_OK && o->fuse && r->gradient)
    s = dm_error(DM_ERR_INVALID, "the fusion pass is for inference; it cannot follow the "
                 "gradient pass");
  if (s == DM_OK && o->fuse && (s = new_init_add(init_add)) == DM_OK) {
    s = dm_fusion_pass(net, &o->fuse_opts, *init_add, &r->fusion);
    if (s == DM_OK)
      s = dm_origin_mark_added(net, "fusion");
    if (s == DM_OK && o->report)
      print_fusion_summary(o->report, &r->fusion);
  }

  /* 3. mixed precision */
  const char **params = NULL;
  if (s == DM_OK && o->mixed_precision && (s = new_init_add(init_add)) == DM_OK) {
    dm_mp_opts mp = o->mp;
    mp.exclude = o->optim.exclude;
    mp.n_exclude = o->optim.n_exclude;
    /* The folded weights are state too: the casts of a given params list include them. */
    if (mp.params && r->fusion.n_new_params) {
      size_t n = mp.n_params + r->fusion.n_new_params;
      if (!(params = malloc(n * sizeof *params)))
        s = DM_NOMEM("the weights' names");
      for (size_t i = 0; s == DM_OK && i < n; i++)
        params[i] = i < mp.n_params ? mp.params[i] : r->fusion.new_params[i - mp.n_params];
      mp.params = params;
      mp.n_params = n;
    }
    if (s == DM_OK)
      s = dm_mixed_precision_pass(net, &mp, *init_add, &r->mp);
    if (s == DM_OK)
      s = dm_origin_mark_added(net, "mixed-precision");
    if (s == DM_OK && o->report)
      print_mp_summary(o->report, &r->mp);
  }

  /* layout: the training net, then the nets reading its weights */
  int nhwc = o->layout == DM_LAYOUT_NHWC ||
             (o->layout == DM_LAYOUT_AUTO && o->device && o->mixed_precision && r->gradient);
  dm_layout_opts lo = o->layout_opts;
  lo.fed = o->optim.exclude;
  lo.n_fed = o->optim.n_exclude;
  if (lo.pad_channels == DM_LAYOUT_PAD_AUTO) /* tensor cores: on a GPU only */
    lo.pad_channels = o->device ? 8 : 0;
  if (s == DM_OK && nhwc && (s = new_init_add(init_add)) == DM_OK &&
      (o->layout == DM_LAYOUT_NHWC || layout_converts(net, o, &lo, *init_add))) {
    s = layout_all(net, o, &lo, *init_add, &r->layout);
    for (size_t i = 0; s == DM_OK && i <= o->n_shared; i++)
      s = dm_origin_mark_added(i ? o->shared[i - 1] : net, "layout");
    if (s == DM_OK && o->report)
      print_layout_summary(o->report, &r->layout);
  }

  /* 4. device: the training net, the nets sharing its weights, then the init nets for
   * the GPU state of them all. */
  if (s == DM_OK && o->device) {
    dm_device_opts dev = o->dev;
    dev.host_blobs = o->optim.exclude;
    dev.n_host_blobs = o->optim.n_exclude;
    s = dm_device_place_net(net, &dev, o->report, &r->gpu);
    for (size_t i = 0; s == DM_OK && i < o->n_shared; i++)
      s = dm_device_place_net(o->shared[i], &dev, o->report, &r->gpu);
    for (size_t i = 0; s == DM_OK && i < o->n_inits; i++)
      s = dm_device_place_init_net(o->inits[i], &dev, &r->gpu, o->report);
    if (s == DM_OK && *init_add)
      s = dm_device_place_init_net(*init_add, &dev, &r->gpu, o->report);
    for (size_t i = 0; s == DM_OK && i <= o->n_shared; i++)
      s = dm_origin_mark_added(i ? o->shared[i - 1] : net, "device");
  }

  /* data parallel: the params as the gradient pass left them (the mixed-precision pass
   * reads them through casts, which keeps them inputs of the forward part) */
  if (s == DM_OK && o->data_parallel) {
    char **names = NULL;
    size_t n = 0;
    s = dm_find_trainable_params(net, o->optim.exclude, o->optim.n_exclude, &names, &n);
    /* Weights the layout pass renamed keep their gradients' names (<old>_grad). */
    for (size_t k = 0; s == DM_OK && k < r->layout.n_renamed; k++)
      s = dm_strv_push(&names, &n, r->layout.renamed[2 * k]);
    if (s == DM_OK) {
      dm_dp_opts dp = o->dp;
      dp.params = (const char *const *)names;
      dp.n_params = n;
      s = dm_data_parallel_pass(net, &dp, &r->dp);
      if (s == DM_OK)
        s = dm_origin_mark_added(net, "data-parallel");
    }
    dm_optimizer_free_names(names, n);
    if (s == DM_OK && o->report)
      fprintf(o->report, "data parallel: %zu weight gradients averaged over the ranks by %zu "
                         "Allreduce op(s)\n", r->dp.n_grads, r->dp.n_ops);
  }

  /* 5. memory, last */
  for (size_t i = 0; s == DM_OK && o->memory && o->keep_init_blobs && i < o->n_inits; i++)
    s = push_blob_names(o->inits[i], &init_blobs, &n_init_blobs, &cap_init_blobs);
  if (s == DM_OK && o->memory && o->keep_init_blobs && *init_add)
    s = push_blob_names(*init_add, &init_blobs, &n_init_blobs, &cap_init_blobs);
  if (s == DM_OK && o->memory)
    s = plan_memory(net, o, init_blobs, n_init_blobs);
  for (size_t i = 0; s == DM_OK && o->memory && i < o->n_shared; i++)
    s = plan_memory(o->shared[i], o, init_blobs, n_init_blobs);
  for (size_t i = 0; s == DM_OK && o->memory && i <= o->n_shared; i++)
    s = dm_origin_mark_added(i ? o->shared[i - 1] : net, "memory");
  free(init_blobs);
  free(params);
  dm_pipeline_result_free(&local);
  return s;
}

/* Writing ----------------------------------------------------------------------- */

dm_status dm_netdef_write_atomic(const Caffe2__NetDef *net, const char *path) {
  if (!net || !path)
    return dm_error(DM_ERR_INVALID, "dm_netdef_write_atomic: NULL argument");
  uint8_t *bytes = NULL;
  size_t len = 0;
  dm_file_format fmt = dm_format_guess(path, NULL, 0); /* by extension; else binary */
  Caffe2__NetDef *bare = NULL; /* the net without its origin stamps (op_origin.h) */
  if (dm_origin_any(net)) {
    DM_TRY(dm_pb_clone(&net->base, (ProtobufCMessage **)&bare));
    dm_origin_strip(bare);
  }
  dm_status s = dm_message_serialize(bare ? &bare->base : &net->base, fmt, &bytes, &len);
  if (bare)
    protobuf_c_message_free_unpacked(&bare->base, NULL);
  if (s != DM_OK)
    return dm_error_prefix(s, "%s", path);
  s = dm_write_file_atomic(path, bytes, len); /* core/fileio.c: temp file, fsync, rename */
  free(bytes);
  return s;
}
