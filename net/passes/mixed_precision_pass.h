/* mixed_precision_pass.h: the mixed-precision pass, NetDef -> NetDef (internal).
 *
 * Takes an FP32 training net (forward ops, the gradient pass's ops, then the optimizer
 * pass's updates) and returns one that computes in FP16 with FP32 master weights:
 *   - each trainable weight p stays the FP32 master (the blob the optimizer updates and
 *     checkpoints save); FloatToHalf(p) -> p_fp16 at the top of the net is the compute
 *     copy, so it is refreshed from the master after every update;
 *   - each op is painted from its schema's precision class: FP16 ops (Conv, FC and their
 *     gradients) run in FP16; FP32 ops (softmax, losses) in FP32; follow ops (Relu,
 *     pooling, Sum, reshapes) take FP16 when an input already is FP16, else FP32, so no
 *     follow op becomes an FP16 island between two casts; overrides by op type or by a
 *     per-op argument `precision: "fp16" | "fp32"` in the net file;
 *   - one cast per precision boundary (X -> X_fp16 or X_fp32), shared by every later
 *     consumer until X is written again; nothing is cast twice;
 *   - slots the schema marks fp32_* stay FP32 whatever the op runs in (SpatialBN's
 *     scale, bias and statistics beside FP16 X and Y), slots marked nonfloat_* (shapes,
 *     masks, counters) are never cast, and neither decides a follow op's precision;
 *   - loss scaling as ordinary ops: Mul(loss_autogen_grad, loss_scale) scales the seed;
 *     before the updates, the weight gradients are cast to FP32 and one UnscaleAndCheck
 *     op divides them all by S and sets found_inf; UpdateLossScale halves S on overflow
 *     and doubles it after N clean steps (dynamic), or keeps it (static); ops whose
 *     schema's role is DM_ROLE_OPTIMIZER run in FP32 after that, and those with a
 *     skip_input (the updates, Iter) get found_inf as it, so a step with an overflow
 *     leaves parameters, momenta and the iteration count bit-identical.
 * The state (loss_scale, loss_scale_good_steps, loss_scale_skipped) is created by fills
 * appended to an init-net addition, so checkpoints carry it. The pass marks the net with
 * an argument `mixed_precision`; a marked net is returned unchanged (idempotence).
 *
 * Inference (opts.inference): the same painter on a forward net with no gradients, no
 * optimizer and no loss scaling (`scaling` is ignored). Two things differ, because an
 * inference net runs many times on weights that do not change:
 *   - the state the init net made (weights, BN statistics: `params`, or when that is
 *     NULL every blob read before written that is not on `exclude`) is cast once: the
 *     FloatToHalf(w) -> w_fp16 casts go to `init_add`, run once after the caller's init
 *     net, not at the top of every run;
 *   - the net's external outputs and the `fp32_outputs` hold FP32 after the net: the op
 *     that writes such a blob X last, in the reduced precision, writes X_fp16 instead,
 *     and one cast X_fp16 -> X follows (or is X's first FP32 use, when a later op reads X
 *     in FP32, such as Softmax reading its FC's logits), so the caller fetches FLOAT;
 *   - with free_masters, a Free op after the casts drops the FP32 weights nothing reads
 *     any more, so the weights take their reduced size, not both sizes.
 */
#ifndef DM_NET_MIXED_PRECISION_H
#define DM_NET_MIXED_PRECISION_H

#include <stddef.h>

#include "core/status.h"
#include "demitasse.h"
#include "proto/caffe2.pb-c.h"

#define DM_MP_SCALE_BLOB "loss_scale"
#define DM_MP_GOOD_BLOB "loss_scale_good_steps"
#define DM_MP_SKIPPED_BLOB "loss_scale_skipped"
#define DM_MP_FOUND_INF_BLOB "found_inf"

/* `scaling` is demitasse.h's dm_loss_scale_mode; AUTO (dynamic for FP16, none for BF16,
 * whose range needs none) is decided by the pipeline's plan, and by the pass alone the
 * same way (dm_mp_loss_scaling). */

typedef struct dm_mp_opts {
  /* The reduced precision: DM_FLOAT16 (default; loss scaling recommended) or DM_BFLOAT16
   * (FP32's exponent range: no loss scaling needed). Casts are FloatToHalf/HalfToFloat
   * for FP16 (Caffe2's names) and Cast(to) for BF16; copies are named X_fp16 / X_bf16. */
  dm_dtype target;
  dm_loss_scale_mode scaling;
  double init_scale;        /* default 65536 */
  long growth_interval;     /* default 2000 */
  double growth_factor;     /* default 2 */
  double backoff_factor;    /* default 0.5 */
  double min_scale, max_scale; /* default 1, 2^24 */
  const char *const *force_fp32; /* op types kept FP32 */
  size_t n_force_fp32;
  const char *const *force_fp16; /* op types forced FP16 */
  size_t n_force_fp16;
  const char *const *exclude; /* net inputs that are not parameters (data, labels) */
  size_t n_exclude;
  /* Inference mode (see above); all borrowed. */
  int inference;
  const char *const *params;       /* the init net's state; NULL: read-before-written */
  size_t n_params;
  const char *const *fp32_outputs; /* besides the external outputs: blobs fetched as FP32 */
  size_t n_fp32_outputs;
  int free_masters; /* after the casts, Free the FP32 weights the painted net no longer
                       reads (neither fetched): their reduced copies replace them */
} dm_mp_opts;

/* One line of the summary per op kept in FP32 (or forced), with the reason. */
typedef struct dm_mp_summary {
  size_t ops_total;     /* forward and backward ops considered */
  size_t ops_fp16;      /* painted to the reduced precision (FP16 or BF16) */
  int bf16;             /* the reduced precision was BF16 */
  size_t ops_fp32;      /* painted FP32 */
  size_t casts;         /* FloatToHalf / HalfToFloat inserted (param copies included) */
  int already;          /* the net was already rewritten: nothing done */
  char *report;         /* malloc'd text: FP32-kept ops and why */
} dm_mp_summary;

DM_HIDDEN void dm_mp_opts_init(dm_mp_opts *o);
/* Rewrites `net` in place; state fills (training) or the weights' casts (inference) go to
 * `init_add`. */
DM_HIDDEN dm_status dm_mixed_precision_pass(Caffe2__NetDef *net, const dm_mp_opts *o,
                                            Caffe2__NetDef *init_add, dm_mp_summary *summary);
/* Loss scaling `mode` with AUTO decided for `target`: DYNAMIC for FP16, NONE for BF16. */
DM_HIDDEN dm_loss_scale_mode dm_mp_loss_scaling(dm_loss_scale_mode mode, dm_dtype target);
DM_HIDDEN void dm_mp_summary_free(dm_mp_summary *s);

#endif
