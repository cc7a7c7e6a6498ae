/* infer.h: the inference pipeline (internal), shared by `demitasse run` and the public
 * dm_workspace_create_infer_net, so the CLI and the C API paint and place an inference
 * net the same way.
 *
 * It is the one pipeline (net/passes/pipeline.h) with the gradient and optimizer passes off: the
 * fusion pass when asked (BN folded into Conv, the folds in the init addition), the
 * mixed-precision pass in its inference mode (net/passes/mixed_precision_pass.h: painted by precision
 * class, the weights cast once in the init addition, the fetched outputs FP32), then the
 * device pass for the net, the caller's init nets and the addition. */
#ifndef DM_NET_INFER_H
#define DM_NET_INFER_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"
#include "net/passes/device_pass.h"
#include "net/passes/pipeline.h"
#include "proto/caffe2.pb-c.h"

/* The name of the init-net addition that folds (FoldBN) and casts the weights. */
#define DM_INFER_INIT_NAME "weight_casts"

typedef struct dm_infer_prep {
  dm_dtype precision;           /* DM_FLOAT (no painting), DM_FLOAT16 or DM_BFLOAT16 */
  const char *const *inputs;    /* fed from the host: not weights, homed on the CPU */
  size_t n_inputs;
  const char *const *params;    /* the state the init nets make (NULL: every blob read
                                   before written, less `inputs`) */
  size_t n_params;
  const char *const *fetch;     /* read by the caller after a run, besides the external
                                   outputs: FP32 at the end of the net */
  size_t n_fetch;
  int device;                   /* place on CUDA:dev.device_id */
  dm_device_opts dev;
  Caffe2__NetDef **inits;       /* the caller's init nets, placed for the net's GPU state */
  size_t n_inits;
  FILE *report;                 /* the passes' summaries (NULL: none) */
  int free_masters;             /* the addition then Frees the FP32 weights the net no
                                   longer reads (net/passes/mixed_precision_pass.h) */
  int fuse;                     /* the fusion pass first (net/passes/fusion_pass.h): test-mode
                                   SpatialBN folded into its Conv, the folds in the
                                   addition; `fetch` is never fused away */
  int post_ops;                 /* with fuse: the post-op fusions too (Conv + Sum + Relu,
                                   FC + Relu: CPU kernels only, so not with `device`) */
  dm_train_layout layout;       /* NHWC runs the layout pass (the
                                   weights' re-layouts in the addition; `fetch` is
                                   transposed back) */
  int pad_channels;             /* with layout NHWC: dm_layout_opts.pad_channels (init:
                                   DM_LAYOUT_PAD_AUTO, 8 on a GPU, else off) */
} dm_infer_prep;

/* Defaults: FP32, nothing fed, fetched or placed, no fusion, no report. */
DM_HIDDEN void dm_infer_prep_init(dm_infer_prep *o);
/* Rewrites `net` (and o->inits) in place; *init_add (NULL if none) gets the weights'
 * casts, to run once after the caller's init nets; the caller frees it. With `device`,
 * *gpu (may be NULL) gets the blobs the placed nets read on the GPU (free it with
 * dm_gpu_state_free). */
DM_HIDDEN dm_status dm_infer_pipeline(Caffe2__NetDef *net, const dm_infer_prep *o,
                                      Caffe2__NetDef **init_add, dm_gpu_state *gpu);
/* For a net made in `precision` FLOAT16 or BFLOAT16: every run must leave `outputs` (n
 * of them; 0: the net's external outputs, else its last op's) finite, or fails with
 * DM_ERR_NONFINITE naming the first op that overflowed (dm_net_require_finite), with
 * the fix in the words of `option` ("--precision", "dm_infer_options.precision").
 * Nothing for FLOAT: an FP32 model's inf/nan is its own. */
DM_HIDDEN dm_status dm_infer_require_finite(dm_net *net, dm_dtype precision,
                                            const char *const *outputs, size_t n,
                                            const char *option);

#endif
