/* lr_policy.c: the learning-rate policies of lr_policy.h, in double so that the rate
 * is the same on every build and thread count. */
#include "lr_policy.h"

#include <math.h>
#include <string.h>

static const char *const kind_names[] = {"fixed", "step", "exp", "inv", "poly"};

dm_status dm_lr_kind_from_name(const char *name, dm_lr_kind *out) {
  for (int k = 0; k < (int)(sizeof kind_names / sizeof *kind_names); k++)
    if (strcmp(name, kind_names[k]) == 0) {
      *out = (dm_lr_kind)k;
      return DM_OK;
    }
  return dm_error(DM_ERR_INVALID, "unknown learning-rate policy '%s' (fixed, step, exp, inv, poly)",
                  name);
}

dm_status dm_lr_policy_check(const dm_lr_policy *p, int have_stepsize, int have_gamma,
                             int have_power, int have_max_iter) {
  const char *name = kind_names[p->kind];
  int need_gamma = p->kind == DM_LR_STEP || p->kind == DM_LR_EXP || p->kind == DM_LR_INV;
  int need_power = p->kind == DM_LR_INV || p->kind == DM_LR_POLY;
  if (p->kind == DM_LR_STEP && (!have_stepsize || p->stepsize <= 0))
    return dm_error(DM_ERR_INVALID, "policy 'step' needs 'stepsize' > 0");
  if (p->kind == DM_LR_POLY && (!have_max_iter || p->max_iter <= 0))
    return dm_error(DM_ERR_INVALID, "policy 'poly' needs 'max_iter' > 0");
  if (need_gamma && (!have_gamma || !isfinite(p->gamma)))
    return dm_error(DM_ERR_INVALID, "policy '%s' needs a finite 'gamma'", name);
  if (need_power && (!have_power || !isfinite(p->power)))
    return dm_error(DM_ERR_INVALID, "policy '%s' needs a finite 'power'", name);
  if (p->warmup_iter < 0)
    return dm_error(DM_ERR_INVALID, "'warmup_iter' is negative (%lld)", (long long)p->warmup_iter);
  if (!(p->warmup_start >= 0 && p->warmup_start <= 1))
    return dm_error(DM_ERR_INVALID, "'warmup_start' must be in [0, 1] (it is %g)", p->warmup_start);
  return DM_OK;
}

double dm_lr_multiplier(const dm_lr_policy *p, int64_t iter) {
  double it = (double)iter, m = 1;
  switch (p->kind) {
  case DM_LR_FIXED: m = 1; break;
  case DM_LR_STEP: m = pow(p->gamma, (double)(iter / p->stepsize)); break;
  case DM_LR_EXP: m = pow(p->gamma, it); break;
  case DM_LR_INV: m = pow(1 + p->gamma * it, -p->power); break;
  case DM_LR_POLY: m = iter >= p->max_iter ? 0 : pow(1 - it / (double)p->max_iter, p->power); break;
  }
  if (iter < p->warmup_iter)
    m *= p->warmup_start + (1 - p->warmup_start) * it / (double)p->warmup_iter;
  return m;
}

dm_status dm_lr_policy_from_args(dm_op_ctx *ctx, dm_lr_policy *p) {
  memset(p, 0, sizeof *p);
  dm_status s = dm_lr_kind_from_name(dm_op_arg_string(ctx, "policy", "fixed"), &p->kind);
  if (s != DM_OK)
    return s;
  p->stepsize = dm_op_arg_int(ctx, "stepsize", 0);
  p->gamma = dm_op_arg_float(ctx, "gamma", 0);
  p->power = dm_op_arg_float(ctx, "power", 0);
  p->max_iter = dm_op_arg_int(ctx, "max_iter", 0);
  p->warmup_iter = dm_op_arg_int(ctx, "warmup_iter", 0);
  p->warmup_start = dm_op_arg_float(ctx, "warmup_start", 0);
  return dm_lr_policy_check(p, dm_op_has_arg(ctx, "stepsize"), dm_op_has_arg(ctx, "gamma"),
                            dm_op_has_arg(ctx, "power"), dm_op_has_arg(ctx, "max_iter"));
}

dm_status dm_lr_args(dm_op_ctx *ctx, dm_lr_policy *p, float *base_lr) {
  DM_TRY(dm_lr_policy_from_args(ctx, p));
  *base_lr = dm_op_arg_float(ctx, "base_lr", 0);
  if (!isfinite(*base_lr))
    return dm_op_error(ctx, DM_ERR_INVALID, "base_lr is not finite");
  return DM_OK;
}
