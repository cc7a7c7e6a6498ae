/* pipeline.h: the one pipeline from a forward net (with its loss) to the net a training
 * step runs and the init-net addition that creates its state (internal).
 *
 * `demitasse train`, `demitasse rewrite`, the C API (dm_workspace_create_train_net,
 * dm_rewrite_train_net) and the tests all build training nets here, so the same options
 * give the same net byte for byte whichever way it is asked for.
 *
 * dm_pipeline_run is a plan and a table of stages. dm_pipeline_plan_build turns the
 * options into a dm_pipeline_plan: which stages run (gradient AUTO against the net,
 * the optimizer only after the gradient), every AUTO decided (multi_tensor, layout,
 * pad_channels) and the lists each pass reads set from the options' one copy (the fed
 * blobs, the keep list). Then each stage of dm_pipeline_stages whose `enabled` says so
 * runs, in this order, and prints its own summary to `report`:
 *
 *   1. training fusion  dm_train_fusion_pass (with fuse_train): SpatialBN (+ Sum/Add)
 *                       + Relu made the fused ops whose gradients the next pass emits
 *   2. gradient         dm_gradient_pass for `losses`
 *   3. optimizer        dm_optimizer_pass; its state fills go to the init addition
 *   4. fusion           dm_fusion_pass (inference only: refused with the gradient pass);
 *                       the folds (FoldBN) go to the init addition, before the casts
 *                       the mixed-precision pass appends, which then cast the folded
 *                       weights (they join mp.params when that list is given)
 *   5. mixed precision  dm_mixed_precision_pass; loss-scale state to the init addition
 *   6. layout           dm_layout_pass (NHWC), on the training net then the `shared`
 *                       nets (the same weights renamed the same way): after the casts,
 *                       before placement, so the device pass sees the layout the
 *                       engines run; the weights' re-layouts go to the init addition
 *   7. device           dm_device_pass on the training net, then on the `shared` nets
 *                       (test nets reading the same weights), then dm_device_place_init
 *                       on the caller's `inits` and the init addition, for the GPU state
 *                       all of them read
 *   8. data parallel    dm_data_parallel_pass on the placed training net: Allreduce of
 *                       the weight gradients between the backward ops and the updates,
 *                       on the devices they run on
 *   9. memory           dm_memory_pass on the training net and the `shared` nets, last
 *
 * Each pass is the one declared in its own header, called with the plan's options; the
 * pipeline adds nothing of its own to the nets. What a stage hands to a later one (the
 * folded weights to 5, the renamed weights to 8) goes through dm_pipeline_result.
 */
#ifndef DM_NET_PIPELINE_H
#define DM_NET_PIPELINE_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"
#include "net/passes/data_parallel_pass.h"
#include "net/passes/device_pass.h"
#include "net/passes/fusion_pass.h"
#include "net/passes/layout_pass.h"
#include "net/passes/mixed_precision_pass.h"
#include "net/passes/optimizer_pass.h"
#include "net/passes/train_fusion_pass.h"
#include "proto/caffe2.pb-c.h"

/* The name of the init-net addition the pipeline makes (optimizer and loss-scale state). */
#define DM_PIPELINE_INIT_ADD_NAME "optimizer_init_additions"

typedef struct dm_pipeline_opts {
  /* 1. training fusion, before the gradient pass (net/passes/train_fusion_pass.h); its keep list is
   * `losses` and `keep`, its fed list optim.exclude. Off by default: meant for GPUs. */
  int fuse_train;
  /* 2. gradient */
  dm_switch gradient; /* ON: the gradient pass (and the optimizer pass if `optimize`);
                         OFF: neither; AUTO: as ON unless the net has gradient ops
                         already (a net from `rewrite`): then neither, as it is */
  const char *const *losses; /* the loss blobs (borrowed) */
  size_t n_losses;
  /* 3. optimizer: runs when the gradient pass runs and `optimize` is set. optim.exclude
   * (the net inputs that are not parameters: data, labels) is also the mixed-precision
   * pass's exclude list, the layout pass's fed list and the device pass's host blobs.
   * optim.multi_tensor AUTO is ON when `device` is set, else OFF. */
  int optimize;
  dm_optimizer_opts optim;
  /* 4. fusion (inference): fold test-mode SpatialBN into the Conv before it; fuse.keep
   * are the blobs the caller fetches (never fused away). */
  int fuse;
  dm_fusion_opts fuse_opts;
  /* 5. mixed precision (mp.exclude is set from optim.exclude) */
  int mixed_precision;
  dm_mp_opts mp;
  /* 6. layout: DM_TRAIN_LAYOUT_NHWC runs the layout pass, AUTO (the default) as
   * net/passes/layout_pass.h
   * says (layout_opts.fed is set from optim.exclude; layout_opts.keep: blobs the caller
   * fetches, transposed back; layout_opts.pad_channels AUTO: 8 with `device`, else 0) */
  dm_train_layout layout;
  dm_layout_opts layout_opts;
  /* 7. device: place the nets on CUDA:dev.device_id (dev.host_blobs is set from
   * optim.exclude). Needs no GPU: it only rewrites. */
  int device;
  dm_device_opts dev;
  /* 8. data parallel (after device): Allreduce of the weight gradients over the ranks;
   * dp.params is found here (the trainable params, as the optimizer pass finds them). */
  int data_parallel;
  dm_dp_opts dp;
  /* 9. memory: Free after last use. Kept, besides what the pass always keeps (state read
   * before written, the nets' external inputs and outputs): the losses, `keep`, with
   * keep_init_blobs every blob an op of the init nets (the caller's `inits` and the
   * addition) reads or writes (what instantiating and running them creates in a
   * workspace: the state `train` checkpoints; a blob a Load op creates at run time with
   * load_all is not seen), and with keep_reused_outputs the outputs whose schema marks
   * them reused (the DB input's batches: a batch buffer that lives across steps is
   * allocated once, and with a GPU page-locked once). */
  int memory;
  const char *const *keep; /* borrowed */
  size_t n_keep;
  int keep_init_blobs;
  int keep_reused_outputs;
  /* Nets around the training net, rewritten in place (borrowed):
   * `shared`: nets reading the training net's weights (test nets): placed after it and
   *   memory-planned like it (with their own reused outputs); no other pass;
   * `inits`: the caller's init nets, run before the addition: placed for the GPU state
   *   of all the nets (device), their blobs kept (keep_init_blobs). */
  Caffe2__NetDef **shared;
  size_t n_shared;
  Caffe2__NetDef **inits;
  size_t n_inits;
  /* Where the passes' summaries go (mixed precision, device, memory); NULL: nowhere. */
  FILE *report;
} dm_pipeline_opts;

/* The layout stage as decided. */
typedef enum dm_plan_layout {
  DM_PLAN_LAYOUT_OFF = 0,  /* no layout pass */
  DM_PLAN_LAYOUT_NHWC = 1, /* the pass, asked for: a net it cannot convert is an error */
  DM_PLAN_LAYOUT_TRIAL = 2 /* layout AUTO for a painted training net on a GPU: the pass
                              tried on copies of the nets first; when it cannot convert
                              them all they stay as written (the reason in the report) */
} dm_plan_layout;

/* What dm_pipeline_run will do, decided from the options and the net before any pass
 * runs: each stage's switch, and each pass's options with every AUTO decided and the
 * shared lists set. The lists are the options' (borrowed), but for `keep` (owned). */
typedef struct dm_pipeline_plan {
  int fuse_train;                   /* 1. */
  dm_train_fusion_opts train_fusion; /*   keep: `keep` below; fed: optim.exclude */
  int gradient;                     /* 2. ON, or AUTO on a net without gradient ops */
  const char *const *losses;
  size_t n_losses;
  int optimize;                     /* 3. with the gradient pass only */
  dm_optimizer_opts optim;          /*   multi_tensor ON or OFF (AUTO: ON with device) */
  int fuse;                         /* 4. */
  dm_fusion_opts fuse_opts;
  int mixed_precision;              /* 5. */
  dm_mp_opts mp;                    /*   exclude: optim.exclude */
  dm_plan_layout layout;            /* 6. */
  dm_layout_opts layout_opts;       /*   fed: optim.exclude; pad_channels decided */
  int device;                       /* 7. */
  dm_device_opts dev;               /*   host_blobs: optim.exclude */
  int data_parallel;                /* 8. */
  dm_dp_opts dp;                    /*   params: found by the stage */
  int memory;                       /* 9. */
  const char **keep;                /* the losses, then the options' `keep` (owned array,
                                       borrowed names): kept by 1. and 9. */
  size_t n_keep;
  int keep_init_blobs;
  int keep_reused_outputs;
  Caffe2__NetDef **shared; /* the nets around (borrowed), as in the options */
  size_t n_shared;
  Caffe2__NetDef **inits;
  size_t n_inits;
  FILE *report;
} dm_pipeline_plan;

/* The plan for `net` (only read: gradient AUTO looks for gradient ops) and `o`; refuses
 * what no stage can do (the gradient pass without a loss, the fusion pass with the
 * gradient pass) before anything runs. Free it with dm_pipeline_plan_free (also after a
 * failure). */
DM_HIDDEN dm_status dm_pipeline_plan_build(const Caffe2__NetDef *net, const dm_pipeline_opts *o,
                                           dm_pipeline_plan *plan);
DM_HIDDEN void dm_pipeline_plan_free(dm_pipeline_plan *plan);

/* The GPU state of placed nets: the blobs (read before written) homed on a GPU, which
 * the init nets must put there. Owned names (malloc'd). */
typedef struct dm_gpu_state {
  char **names;
  size_t n;
} dm_gpu_state;
DM_HIDDEN void dm_gpu_state_free(dm_gpu_state *g);

typedef struct dm_pipeline_result {
  int gradient;     /* the gradient pass ran (0: off, or AUTO found gradient ops) */
  int optimizer;    /* the optimizer pass ran */
  dm_fusion_summary fusion; /* with fuse: the pass's summary */
  dm_train_fusion_summary train_fusion; /* with fuse_train: the pass's summary */
  dm_mp_summary mp;  /* with mixed precision: the pass's summary */
  dm_layout_summary layout; /* with layout NHWC: the pass's summary */
  dm_gpu_state gpu; /* with device: the GPU state of all the nets placed */
  dm_dp_summary dp; /* with data parallel: the pass's summary */
} dm_pipeline_result;

/* Defaults: gradient AUTO with no losses, no optimizer (its options Caffe2's defaults),
 * no mixed precision, no device, no memory pass, nothing around, no report. */
DM_HIDDEN void dm_pipeline_opts_init(dm_pipeline_opts *o);
/* dm_pipeline_opts_init, then the common training case: the gradient pass (ON) for
 * `losses` and the optimizer pass (its defaults) with `exclude` the net inputs that are
 * not parameters (all borrowed). */
DM_HIDDEN void dm_pipeline_opts_init_training(dm_pipeline_opts *o, const char *const *losses,
                                              size_t n_losses, const char *const *exclude,
                                              size_t n_exclude);
/* What a stage works on: the nets, its plan, the init addition (made by the first stage
 * that adds to it) and the result, where it leaves its summary. */
typedef struct dm_pipeline_ctx {
  Caffe2__NetDef *net;
  const dm_pipeline_plan *plan;
  Caffe2__NetDef **init_add;
  dm_pipeline_result *r;
} dm_pipeline_ctx;

/* A stage: its pass run when `enabled` says so for the plan; `run` prints the pass's
 * summary to plan->report. dm_pipeline_stages lists them in their order, ending in a
 * zero entry (net/passes/pipeline_stages.c). */
typedef struct dm_pipeline_stage {
  const char *name;
  int (*enabled)(const dm_pipeline_plan *plan);
  dm_status (*run)(dm_pipeline_ctx *c);
} dm_pipeline_stage;
DM_HIDDEN extern const dm_pipeline_stage dm_pipeline_stages[];

/* The pipeline's options from the public dm_train_options (demitasse.h; complete, as
 * dm_train_options_init leaves them), borrowing their lists; what they cannot say (the
 * nets around, the report, pad_channels) the caller adds. The one translator: the C
 * API's training calls and `demitasse train` both call it, and it refuses what the
 * options get wrong, naming the field. (net/train_api.c) */
DM_HIDDEN dm_status dm_pipeline_opts_from_train(const dm_train_options *o, dm_pipeline_opts *p);
/* The same for a training net that gets no gradient pass (`rewrite` without --grad:
 * the device, fusion or memory pass alone): no loss needed, gradient off. */
DM_HIDDEN dm_status dm_pipeline_opts_from_train_forward(const dm_train_options *o,
                                                        dm_pipeline_opts *p);
/* Rewrites `net` (and the shared and init nets) in place: the plan, then the stages. `*init_add` gets a new init
 * addition when the optimizer or mixed-precision pass ran (NULL otherwise); the caller
 * frees it. `r` (may be NULL) says what ran; free it with dm_pipeline_result_free (also
 * after a failure). On failure the nets may hold part of the passes. */
DM_HIDDEN dm_status dm_pipeline_run(Caffe2__NetDef *net, const dm_pipeline_opts *o,
                                    Caffe2__NetDef **init_add, dm_pipeline_result *r);
DM_HIDDEN void dm_pipeline_result_free(dm_pipeline_result *r);

/* Nonzero if some op of `net` is a gradient op. */
DM_HIDDEN int dm_netdef_has_gradient_ops(const Caffe2__NetDef *net);
/* Writes `net` to `path`, text or binary by its extension, replacing the file atomically
 * (a temporary file beside it, renamed over it). */
DM_HIDDEN dm_status dm_netdef_write_atomic(const Caffe2__NetDef *net, const char *path);

#endif
