/* infer.h: the inference pipeline (internal), shared by `demitasse run`, `demitasse
 * rewrite` and the public dm_workspace_create_infer_net through one translator from the
 * public dm_infer_options, so the CLI and the C API paint and place an inference net the
 * same way.
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
#include "demitasse.h"
#include "net/passes/device_pass.h"
#include "net/passes/pipeline.h"
#include "proto/caffe2.pb-c.h"

/* The name of the init-net addition that folds (FoldBN) and casts the weights. */
#define DM_INFER_INIT_NAME "weight_casts"

/* The pipeline's options from the public dm_infer_options (demitasse.h; complete, as
 * dm_infer_options_init leaves them), borrowing their lists: the gradient and optimizer
 * passes off, the painting in inference mode, fusion, layout and placement as the
 * fields say. The one translator, and the one place that refuses what the options get
 * wrong (naming the field): dm_workspace_create_infer_net, `demitasse run` and
 * `demitasse rewrite` (inference) all call it. What the options cannot say the caller
 * adds to *p: the weights (dm_infer_set_weights), the caller's init nets (`inits`), the
 * report, mp.free_masters (the addition Frees the FP32 weights the net no longer reads:
 * only where nothing else uses the workspace) and layout_opts.pad_channels. */
DM_HIDDEN dm_status dm_pipeline_opts_from_infer(const dm_infer_options *o, dm_pipeline_opts *p);
/* The state the init nets make (the painting casts it, the fusion folds it); without a
 * list every blob read before written, less the fed ones, is a weight. Borrowed. */
DM_HIDDEN void dm_infer_set_weights(dm_pipeline_opts *p, const char *const *params, size_t n);
/* Rewrites `net` (and p->inits) in place with the options dm_pipeline_opts_from_infer
 * made; *init_add (NULL if none) gets the weights' folds and casts, named
 * DM_INFER_INIT_NAME, to run once after the caller's init nets; the caller frees it.
 * With p->device, *gpu (may be NULL) gets the blobs the placed nets read on the GPU
 * (free it with dm_gpu_state_free). */
DM_HIDDEN dm_status dm_infer_pipeline(Caffe2__NetDef *net, const dm_pipeline_opts *p,
                                      Caffe2__NetDef **init_add, dm_gpu_state *gpu);
/* For a net made in `precision` FP16 or BF16: every run must leave `outputs` (n
 * of them; 0: the net's external outputs, else its last op's) finite, or fails with
 * DM_ERR_NONFINITE naming the first op that overflowed (dm_net_require_finite), with
 * the fix in the words of `option` ("--precision", "dm_infer_options.precision").
 * Nothing for FP32: an FP32 model's inf/nan is its own. */
DM_HIDDEN dm_status dm_infer_require_finite(dm_net *net, dm_precision precision,
                                            const char *const *outputs, size_t n,
                                            const char *option);

#endif
