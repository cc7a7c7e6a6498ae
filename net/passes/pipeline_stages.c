/* pipeline_stages.c: the pipeline's stages (net/passes/pipeline.h), in their one order: each
 * runs its pass with the options the plan decided, hands on what a later stage reads
 * (the folded weights, the renamed weights) through the result, and prints its own
 * summary to the plan's report. dm_pipeline_run walks the table. */
#include <stdlib.h>
#include <string.h>

#include "net/passes/pipeline.h"

#include "core/slot_mask.h"
#include "net/passes/gradient_pass.h"
#include "net/passes/memory_pass.h"
#include "net/netdef_build.h"

static dm_status new_init_add(Caffe2__NetDef **init_add) {
  return *init_add ? DM_OK : dm_netdef_new(DM_PIPELINE_INIT_ADD_NAME, init_add);
}

/* 1. training fusion ------------------------------------------------------------ */

static int fuse_train_on(const dm_pipeline_plan *p) { return p->fuse_train; }

static void print_train_fusion_summary(FILE *f, const dm_train_fusion_summary *s) {
  fprintf(f, "training fusion: of %zu training SpatialBN, %zu made SpatialBNRelu and %zu "
          "SpatialBNAddRelu\n", s->bn_total, s->bn_relu, s->bn_add_relu);
  fprintf(f, "training fusion: %zu Conv + Relu made ConvFusion, %zu FC + Relu made "
          "FCFusion\n", s->conv_relu, s->fc_relu);
  if (s->report)
    fprintf(f, "not fused:\n%s", s->report);
}

static dm_status run_fuse_train(dm_pipeline_ctx *c) {
  DM_TRY(dm_train_fusion_pass(c->net, &c->plan->train_fusion, &c->r->train_fusion));
  if (c->plan->report)
    print_train_fusion_summary(c->plan->report, &c->r->train_fusion);
  return DM_OK;
}

/* 2. gradient ------------------------------------------------------------------- */

static int gradient_on(const dm_pipeline_plan *p) { return p->gradient; }

static dm_status run_gradient(dm_pipeline_ctx *c) {
  return dm_gradient_pass(c->net, &(dm_gradient_opts){c->plan->losses, c->plan->n_losses});
}

/* 3. optimizer ------------------------------------------------------------------ */

static int optimizer_on(const dm_pipeline_plan *p) { return p->optimize; }

static dm_status run_optimizer(dm_pipeline_ctx *c) {
  DM_TRY(new_init_add(c->init_add));
  DM_TRY(dm_optimizer_pass(c->net, &c->plan->optim, *c->init_add));
  c->r->optimizer = 1;
  return DM_OK;
}

/* 4. fusion (inference) --------------------------------------------------------- */

static int fusion_on(const dm_pipeline_plan *p) { return p->fuse; }

/* Silent for a net without SpatialBN (SqueezeNet, LeNet): nothing to report. */
static void print_fusion_summary(FILE *f, const dm_fusion_summary *s) {
  if (s->bn_total == 0 && s->post_total == 0 && s->act_total == 0)
    return;
  if (s->bn_total)
    fprintf(f, "fusion: %zu of %zu SpatialBN folded into their Conv\n", s->folded, s->bn_total);
  if (s->post_total)
    fprintf(f,
            "fusion: of %zu Relu/Sum/Add, %zu Conv+Relu, %zu Conv+Sum, %zu Conv+Sum+Relu and "
            "%zu FC+Relu fused\n",
            s->post_total, s->conv_relu, s->conv_sum, s->conv_sum_relu, s->fc_relu);
  if (s->act_total)
    fprintf(f, "fusion: of %zu other activations (Clip, Sigmoid, Swish, ...), %zu fused "
            "into their Conv\n", s->act_total, s->conv_act);
  if (s->report)
    fprintf(f, "not fused:\n%s", s->report);
}

static dm_status run_fusion(dm_pipeline_ctx *c) {
  DM_TRY(new_init_add(c->init_add));
  DM_TRY(dm_fusion_pass(c->net, &c->plan->fuse_opts, *c->init_add, &c->r->fusion));
  if (c->plan->report)
    print_fusion_summary(c->plan->report, &c->r->fusion);
  return DM_OK;
}

/* 5. mixed precision ------------------------------------------------------------ */

static int mp_on(const dm_pipeline_plan *p) { return p->mixed_precision; }

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

static dm_status run_mp(dm_pipeline_ctx *c) {
  DM_TRY(new_init_add(c->init_add));
  dm_mp_opts mp = c->plan->mp;
  const dm_fusion_summary *fu = &c->r->fusion;
  const char **params = NULL;
  /* The folded weights are state too: the casts of a given params list include them. */
  if (mp.params && fu->n_new_params) {
    size_t n = mp.n_params + fu->n_new_params;
    if (!(params = malloc(n * sizeof *params)))
      return DM_NOMEM("the weights' names");
    for (size_t i = 0; i < n; i++)
      params[i] = i < mp.n_params ? mp.params[i] : fu->new_params[i - mp.n_params];
    mp.params = params;
    mp.n_params = n;
  }
  dm_status s = dm_mixed_precision_pass(c->net, &mp, *c->init_add, &c->r->mp);
  if (s == DM_OK && c->plan->report)
    print_mp_summary(c->plan->report, &c->r->mp);
  free(params);
  return s;
}

/* 6. layout --------------------------------------------------------------------- */

static int layout_on(const dm_pipeline_plan *p) { return p->layout != DM_PLAN_LAYOUT_OFF; }

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

/* The training net, then the nets reading its weights (renamed the same way). */
static dm_status layout_all(Caffe2__NetDef *net, Caffe2__NetDef *const *shared, size_t n_shared,
                            const dm_layout_opts *lo, Caffe2__NetDef *add,
                            dm_layout_summary *sum) {
  DM_TRY(dm_layout_pass(net, lo, add, sum));
  for (size_t i = 0; i < n_shared; i++)
    DM_TRY(dm_layout_pass(shared[i], lo, add, sum));
  return DM_OK;
}

/* DM_PLAN_LAYOUT_TRIAL: whether the pass converts every net, tried on copies (nothing
 * changes); when not, the report says why. */
static int layout_converts(const dm_pipeline_ctx *c) {
  const dm_pipeline_plan *p = c->plan;
  Caffe2__NetDef *n = NULL, *a = NULL, **sh = calloc(p->n_shared + 1, sizeof *sh);
  dm_layout_summary sum = {0};
  dm_status s = sh ? DM_PB_CLONE(Caffe2__NetDef, c->net, &n) : DM_NOMEM("the layout trial");
  if (s == DM_OK)
    s = DM_PB_CLONE(Caffe2__NetDef, *c->init_add, &a);
  for (size_t i = 0; s == DM_OK && i < p->n_shared; i++)
    s = DM_PB_CLONE(Caffe2__NetDef, p->shared[i], &sh[i]);
  if (s == DM_OK)
    s = layout_all(n, sh, p->n_shared, &p->layout_opts, a, &sum);
  if (s != DM_OK && p->report)
    fprintf(p->report, "layout: the nets stay as written (%s)\n", dm_last_error());
  for (size_t i = 0; sh && i < p->n_shared; i++)
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

static dm_status run_layout(dm_pipeline_ctx *c) {
  const dm_pipeline_plan *p = c->plan;
  DM_TRY(new_init_add(c->init_add));
  if (p->layout == DM_PLAN_LAYOUT_TRIAL && !layout_converts(c))
    return DM_OK;
  DM_TRY(layout_all(c->net, p->shared, p->n_shared, &p->layout_opts, *c->init_add,
                    &c->r->layout));
  if (p->report)
    print_layout_summary(p->report, &c->r->layout);
  return DM_OK;
}

/* 7. device --------------------------------------------------------------------- */

static int device_on(const dm_pipeline_plan *p) { return p->device; }

/* The device pass on one net (o->host_blobs: what the caller feeds from the host), its
 * summary on `log` (NULL: none); the GPU state it reports is added to *gpu (may be
 * NULL), once per name. */
static dm_status place_net(Caffe2__NetDef *net, const dm_device_opts *o, FILE *log,
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

/* dm_device_place_init for the GPU state `gpu`; a line on `log` (NULL: none) when it
 * appended copies. */
static dm_status place_init_net(Caffe2__NetDef *init, const dm_device_opts *o,
                                const dm_gpu_state *gpu, FILE *log) {
  size_t copies = 0;
  DM_TRY(dm_device_place_init(init, o, (const char *const *)gpu->names, gpu->n, &copies));
  if (log && copies)
    fprintf(log, "device pass: init net '%s': %zu CPU-only fills copied to CUDA:%d\n",
            init->name ? init->name : "", copies, o->device_id);
  return DM_OK;
}

/* The training net, the nets sharing its weights, then the init nets for the GPU state
 * of them all (the placement driver prints each net's summary). */
static dm_status run_device(dm_pipeline_ctx *c) {
  const dm_pipeline_plan *p = c->plan;
  DM_TRY(place_net(c->net, &p->dev, p->report, &c->r->gpu));
  for (size_t i = 0; i < p->n_shared; i++)
    DM_TRY(place_net(p->shared[i], &p->dev, p->report, &c->r->gpu));
  for (size_t i = 0; i < p->n_inits; i++)
    DM_TRY(place_init_net(p->inits[i], &p->dev, &c->r->gpu, p->report));
  if (*c->init_add)
    DM_TRY(place_init_net(*c->init_add, &p->dev, &c->r->gpu, p->report));
  return DM_OK;
}

/* 8. data parallel -------------------------------------------------------------- */

static int dp_on(const dm_pipeline_plan *p) { return p->data_parallel; }

/* The params as the gradient pass left them (the mixed-precision pass reads them
 * through casts, which keeps them inputs of the forward part). */
static dm_status run_dp(dm_pipeline_ctx *c) {
  const dm_pipeline_plan *p = c->plan;
  const dm_layout_summary *lay = &c->r->layout;
  char **names = NULL;
  size_t n = 0;
  dm_status s = dm_find_trainable_params(c->net, p->optim.exclude, p->optim.n_exclude, &names,
                                         &n);
  /* Weights the layout pass renamed keep their gradients' names (<old>_grad). */
  for (size_t k = 0; s == DM_OK && k < lay->n_renamed; k++)
    s = dm_strv_push(&names, &n, lay->renamed[2 * k]);
  if (s == DM_OK) {
    dm_dp_opts dp = p->dp;
    dp.params = (const char *const *)names;
    dp.n_params = n;
    s = dm_data_parallel_pass(c->net, &dp, &c->r->dp);
  }
  dm_optimizer_free_names(names, n);
  if (s == DM_OK && p->report)
    fprintf(p->report, "data parallel: %zu weight gradients averaged over the ranks by %zu "
                       "Allreduce op(s)\n", c->r->dp.n_grads, c->r->dp.n_ops);
  return s;
}

/* 9. memory --------------------------------------------------------------------- */

static int memory_on(const dm_pipeline_plan *p) { return p->memory; }

/* Whether output k of `op` is one its kernel reuses from run to run (the schema says). */
static int reused_output(const Caffe2__OperatorDef *op, size_t k) {
  const dm_op_schema *schema = op->type ? dm_schema_lookup(op->type) : NULL;
  return schema && dm_slot_in(schema->reused_outputs, k);
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

/* The memory pass on one net: kept = the plan's keep list, the init blobs (given), and
 * with keep_reused_outputs the outputs whose buffers their kernels reuse (the DB
 * input's batches). */
static dm_status plan_memory(Caffe2__NetDef *net, const dm_pipeline_plan *p,
                             const char *const *init_blobs, size_t n_init) {
  const char **keep = NULL;
  size_t n = 0, cap = 0;
  dm_status s = DM_OK;
  for (size_t i = 0; s == DM_OK && i < p->n_keep + n_init; i++)
    s = push_name(&keep, &n, &cap, i < p->n_keep ? p->keep[i] : init_blobs[i - p->n_keep]);
  for (size_t i = 0; s == DM_OK && p->keep_reused_outputs && i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; s == DM_OK && k < op->n_output; k++)
      if (reused_output(op, k))
        s = push_name(&keep, &n, &cap, op->output[k]);
  }
  dm_memory_summary sum;
  if (s == DM_OK)
    s = dm_memory_pass(net, &(dm_memory_opts){keep, n}, &sum);
  if (s == DM_OK && p->report && sum.already)
    fprintf(p->report, "memory pass: the net already frees its blobs; unchanged\n");
  else if (s == DM_OK && p->report)
    fprintf(p->report, "memory pass: %zu blobs freed after their last use by %zu Free ops\n",
            sum.blobs_freed, sum.free_ops);
  free(keep);
  return s;
}

/* The training net, then the shared nets, each keeping every blob the init nets (the
 * caller's and the addition) create, with keep_init_blobs. */
static dm_status run_memory(dm_pipeline_ctx *c) {
  const dm_pipeline_plan *p = c->plan;
  const char **init_blobs = NULL;
  size_t n_init = 0, cap = 0;
  dm_status s = DM_OK;
  for (size_t i = 0; s == DM_OK && p->keep_init_blobs && i < p->n_inits; i++)
    s = push_blob_names(p->inits[i], &init_blobs, &n_init, &cap);
  if (s == DM_OK && p->keep_init_blobs && *c->init_add)
    s = push_blob_names(*c->init_add, &init_blobs, &n_init, &cap);
  if (s == DM_OK)
    s = plan_memory(c->net, p, init_blobs, n_init);
  for (size_t i = 0; s == DM_OK && i < p->n_shared; i++)
    s = plan_memory(p->shared[i], p, init_blobs, n_init);
  free(init_blobs);
  return s;
}

/* The table ------------------------------------------------------------------- */

const dm_pipeline_stage dm_pipeline_stages[] = {
    {"training fusion", fuse_train_on, run_fuse_train},
    {"gradient", gradient_on, run_gradient},
    {"optimizer", optimizer_on, run_optimizer},
    {"fusion", fusion_on, run_fusion},
    {"mixed precision", mp_on, run_mp},
    {"layout", layout_on, run_layout},
    {"device", device_on, run_device},
    {"data parallel", dp_on, run_dp},
    {"memory", memory_on, run_memory},
    {NULL, NULL, NULL},
};
