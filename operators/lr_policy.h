/* lr_policy.h: Caffe2's learning-rate policies plus a linear warmup, as a pure function
 * of the iteration (internal; used by the LearningRate op and checked by the optimizer
 * pass before it emits one).
 *
 * multiplier(iter) = policy(iter) * warmup(iter), computed in double:
 *   fixed  1
 *   step   gamma ^ floor(iter / stepsize)
 *   exp    gamma ^ iter
 *   inv    (1 + gamma * iter) ^ (-power)
 *   poly   (1 - iter / max_iter) ^ power, and 0 from iter >= max_iter on (Caffe2 lets the
 *          base go negative there, which gives NaN for a fractional power: a deviation)
 *   warmup warmup_start + (1 - warmup_start) * iter / warmup_iter while iter < warmup_iter,
 *          else 1 (Caffe2's linearWarmup), so the rate rises linearly from
 *          warmup_start * base_lr at iteration 0 and meets the policy at warmup_iter.
 * LearningRate's output is base_lr * multiplier(iter).
 */
#ifndef DM_OPERATORS_LR_POLICY_H
#define DM_OPERATORS_LR_POLICY_H

#include <stdint.h>

#include "core/status.h"
#include "demitasse_plugin.h"

typedef enum dm_lr_kind { DM_LR_FIXED, DM_LR_STEP, DM_LR_EXP, DM_LR_INV, DM_LR_POLY } dm_lr_kind;

typedef struct dm_lr_policy {
  dm_lr_kind kind;
  int64_t stepsize;     /* step: > 0 */
  double gamma;         /* step, exp, inv */
  double power;         /* inv, poly */
  int64_t max_iter;     /* poly: > 0 */
  int64_t warmup_iter;  /* 0: no warmup */
  double warmup_start;  /* multiplier at iteration 0 of the warmup, in [0, 1] */
} dm_lr_policy;

/* "fixed", "step", "exp", "inv", "poly" -> kind; DM_ERR_INVALID listing them otherwise. */
DM_HIDDEN dm_status dm_lr_kind_from_name(const char *name, dm_lr_kind *out);
/* Checks that the policy's own parameters are present and in range; `have_*` say which
 * were given (a required one missing is an error naming it). */
DM_HIDDEN dm_status dm_lr_policy_check(const dm_lr_policy *p, int have_stepsize, int have_gamma,
                                       int have_power, int have_max_iter);
/* LearningRate's policy arguments (policy, stepsize, gamma, power, max_iter, warmup_iter,
 * warmup_start) read and checked: shared by the CPU kernel and the CUDA kernel. */
DM_HIDDEN dm_status dm_lr_policy_from_args(dm_op_ctx *ctx, dm_lr_policy *p);
/* Those, and base_lr checked to be finite: what instantiation validates. */
DM_HIDDEN dm_status dm_lr_args(dm_op_ctx *ctx, dm_lr_policy *p, float *base_lr);
/* The multiplier at iteration `iter` (>= 0). */
DM_HIDDEN double dm_lr_multiplier(const dm_lr_policy *p, int64_t iter);

#endif
