/* pipeline.c: the training-net pipeline (see net/passes/pipeline.h): the plan built from the
 * options, the loop over the stages (net/passes/pipeline_stages.c), the placement driver. */
#include "net/passes/pipeline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/netio.h"
#include "net/netdef_build.h"
#include "net/op_origin.h"

void dm_pipeline_opts_init(dm_pipeline_opts *o) {
  memset(o, 0, sizeof *o);
  o->gradient = DM_SWITCH_AUTO;
  dm_optimizer_opts_init(&o->optim);
  dm_mp_opts_init(&o->mp);
  dm_device_opts_init(&o->dev);
  o->layout = DM_TRAIN_LAYOUT_AUTO;
  o->layout_opts.pad_channels = DM_LAYOUT_PAD_AUTO;
}

void dm_pipeline_opts_init_training(dm_pipeline_opts *o, const char *const *losses,
                                    size_t n_losses, const char *const *exclude,
                                    size_t n_exclude) {
  dm_pipeline_opts_init(o);
  o->gradient = DM_SWITCH_ON;
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

/* The plan ---------------------------------------------------------------------- */

dm_status dm_pipeline_plan_build(const Caffe2__NetDef *net, const dm_pipeline_opts *o,
                                 dm_pipeline_plan *p) {
  memset(p, 0, sizeof *p);
  if (!net || !o)
    return dm_error(DM_ERR_INVALID, "dm_pipeline_plan_build: NULL argument");
  const char *const *fed = o->optim.exclude; /* the net inputs that are not parameters */
  size_t n_fed = o->optim.n_exclude;
  p->shared = o->shared;
  p->n_shared = o->n_shared;
  p->inits = o->inits;
  p->n_inits = o->n_inits;
  p->report = o->report;
  p->losses = o->losses;
  p->n_losses = o->n_losses;
  p->keep_init_blobs = o->keep_init_blobs;
  p->keep_reused_outputs = o->keep_reused_outputs;
  /* the keep list of the training fusion and the memory pass: the losses, then `keep` */
  if (!(p->keep = calloc(o->n_losses + o->n_keep + 1, sizeof *p->keep)))
    return DM_NOMEM("the keep list");
  for (size_t i = 0; i < o->n_losses + o->n_keep; i++)
    p->keep[i] = i < o->n_losses ? o->losses[i] : o->keep[i - o->n_losses];
  p->n_keep = o->n_losses + o->n_keep;

  /* 1. training fusion */
  p->fuse_train = o->fuse_train != 0;
  p->train_fusion = (dm_train_fusion_opts){p->keep, p->n_keep, fed, n_fed};
  /* 2. gradient, 3. optimizer */
  p->gradient = o->gradient == DM_SWITCH_ON ||
                (o->gradient == DM_SWITCH_AUTO && !dm_netdef_has_gradient_ops(net));
  if (p->gradient && o->n_losses == 0)
    return dm_error(DM_ERR_INVALID, "the gradient pass needs a loss blob");
  p->optimize = p->gradient && o->optimize;
  p->optim = o->optim;
  /* multi_tensor AUTO: one update launch where launches cost (a net placed on CUDA);
   * CPU nets keep their per-parameter ops unless asked, and so does AdamW (no
   * multi-tensor form). */
  if (p->optim.multi_tensor == DM_SWITCH_AUTO)
    p->optim.multi_tensor = o->device && p->optim.kind != DM_OPTIMIZER_ADAMW ? DM_SWITCH_ON
                                                                           : DM_SWITCH_OFF;
  /* 4. fusion */
  p->fuse = o->fuse != 0;
  p->fuse_opts = o->fuse_opts;
  if (p->fuse && p->gradient)
    return dm_error(DM_ERR_INVALID, "the fusion pass is for inference; it cannot follow the "
                    "gradient pass");
  /* 5. mixed precision */
  p->mixed_precision = o->mixed_precision != 0;
  p->mp = o->mp;
  p->mp.scaling = dm_mp_loss_scaling(o->mp.scaling, o->mp.target);
  p->mp.exclude = fed;
  p->mp.n_exclude = n_fed;
  /* 6. layout: AUTO is NHWC for a painted training net placed on a GPU, if it converts */
  p->layout = o->layout == DM_TRAIN_LAYOUT_NHWC ? DM_PLAN_LAYOUT_NHWC
              : o->layout == DM_TRAIN_LAYOUT_AUTO && o->device && o->mixed_precision && p->gradient
                  ? DM_PLAN_LAYOUT_TRIAL
                  : DM_PLAN_LAYOUT_OFF;
  p->layout_opts = o->layout_opts;
  p->layout_opts.fed = fed;
  p->layout_opts.n_fed = n_fed;
  if (p->layout_opts.pad_channels == DM_LAYOUT_PAD_AUTO) /* tensor cores: on a GPU only */
    p->layout_opts.pad_channels = o->device ? 8 : 0;
  /* 7. device */
  p->device = o->device != 0;
  p->dev = o->dev;
  p->dev.host_blobs = fed;
  p->dev.n_host_blobs = n_fed;
  /* 8. data parallel */
  p->data_parallel = o->data_parallel != 0;
  p->dp = o->dp;
  /* 9. memory */
  p->memory = o->memory != 0;
  return DM_OK;
}

void dm_pipeline_plan_free(dm_pipeline_plan *p) {
  if (!p)
    return;
  free(p->keep);
  p->keep = NULL;
  p->n_keep = 0;
}

/* The pipeline ------------------------------------------------------------------ */

dm_status dm_pipeline_run(Caffe2__NetDef *net, const dm_pipeline_opts *o,
                          Caffe2__NetDef **init_add, dm_pipeline_result *r) {
  dm_pipeline_result local = {0};
  if (!r)
    r = &local;
  memset(r, 0, sizeof *r);
  if (!init_add)
    return dm_error(DM_ERR_INVALID, "dm_pipeline_run: NULL argument");
  *init_add = NULL;
  dm_pipeline_plan plan;
  dm_status s = dm_pipeline_plan_build(net, o, &plan);
  /* errors name ops as the user wrote them: each op stamped with its place before the
   * passes, and each op a stage adds with that stage (op_origin.h) */
  for (size_t i = 0; s == DM_OK && i <= o->n_shared; i++)
    s = dm_origin_stamp(i ? o->shared[i - 1] : net);
  r->gradient = plan.gradient;
  dm_pipeline_ctx c = {net, &plan, init_add, r};
  for (const dm_pipeline_stage *st = dm_pipeline_stages; s == DM_OK && st->name; st++)
    if (st->enabled(&plan)) {
      s = st->run(&c);
      for (size_t i = 0; s == DM_OK && i <= o->n_shared; i++)
        s = dm_origin_mark_added(i ? o->shared[i - 1] : net, st->name);
    }
  dm_pipeline_plan_free(&plan);
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
