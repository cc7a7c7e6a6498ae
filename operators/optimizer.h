/* optimizer.h: what the single-tensor update ops (optimizer.c) share with their
 * multi-tensor forms (multi_optimizer.c), internal. The element loops exist once, so a
 * MultiMomentumSGDUpdate, MultiAdam or MultiWeightedSum over n tensors computes, bit for
 * bit, what n MomentumSGDUpdate, Adam or WeightedSum ops compute; the checks exist once,
 * so their messages agree.
 */
#ifndef DM_OPERATORS_OPTIMIZER_H
#define DM_OPERATORS_OPTIMIZER_H

#include <stdint.h>

#include "common.h"

/* Input i must be a one-element tensor; float_only: FLOAT, else any numeric dtype a
 * skip input may have. `what` names it in the message ("lr", "skip"). */
DM_HIDDEN dm_status dm_update_check_scalar(dm_op_ctx *ctx, int i, const char *what,
                                           int float_only);
/* Whether the optional skip input at index i is present and nonzero (NaN counts). */
DM_HIDDEN int dm_update_skip_requested(dm_op_ctx *ctx, int i);

/* A skipped step: each output out[k] not in its input in[k]'s blob gets a copy. */
DM_HIDDEN dm_status dm_update_skip_outputs(dm_op_ctx *ctx, int n, const int *in, const int *out);

/* WeightedSum over n FP32 elements: y = w[0] x[0] + ... + w[np-1] x[np-1]; y may be x[0]. */
DM_HIDDEN void dm_weighted_sum_f32(const float *const *x, const float *w, int np, float *y,
                                   int64_t n);
/* Caffe2's momentum_sgd_update over n FP32 elements; each output may be its input. */
DM_HIDDEN void dm_momentum_sgd_f32(const float *g, const float *m, const float *p, float *ng,
                                   float *nm, float *np, int64_t n, float lr, float mu,
                                   int nesterov);
/* Adam's bias correction sqrt(1 - b2^t) / (1 - b1^t) at step t, in double: Caffe2's Adam
 * has t = iter + 1, AdamW torch's t = iter (the step the Iter op before it counted). */
DM_HIDDEN float dm_adam_correction(float b1, float b2, int64_t t);
/* Caffe2's Adam step over n FP32 elements, param first multiplied by `decay` (AdamW's
 * decoupled weight decay; 1 for Adam); each output may be its input. */
DM_HIDDEN void dm_adamw_f32(const float *w, const float *m, const float *v, const float *g,
                            float *nw, float *nm, float *nv, int64_t n, float lr, float corr,
                            float b1, float b2, float eps, float decay);
static inline void dm_adam_f32(const float *w, const float *m, const float *v, const float *g,
                               float *nw, float *nm, float *nv, int64_t n, float lr, float corr,
                               float b1, float b2, float eps) {
  dm_adamw_f32(w, m, v, g, nw, nm, nv, n, lr, corr, b1, b2, eps, 1.0f);
}
/* AdamW's constants for step t from torch's (lr negative, as Adam's): decay = 1 + lr wd,
 * and torch's epsilon as the one Adam's loop adds, eps sqrt(1 - b2^t). */
DM_HIDDEN void dm_adamw_constants(float lr, float wd, float b2, float eps, int64_t t,
                                  float *decay, float *eps_in);

#endif
