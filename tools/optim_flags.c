/* optim_flags.c: parsing of the optimizer flags (--optimizer, --lr, --momentum, ...). */
#include "optim_flags.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"

enum {
  O_OPT = DM_OPTIM_FLAG_BASE, O_LR, O_MOM, O_NEST, O_B1, O_B2, O_EPS, O_WD, O_DECAY_ALL,
  O_POLICY, O_STEP, O_GAMMA, O_POWER, O_MAXIT, O_WU_IT, O_WU_START, O_MULTI, O_NO_MULTI, O_CLIP
};

const struct option dm_optim_long_opts[] = {
    {"optimizer", required_argument, NULL, O_OPT},  {"lr", required_argument, NULL, O_LR},
    {"momentum", required_argument, NULL, O_MOM},   {"nesterov", no_argument, NULL, O_NEST},
    {"beta1", required_argument, NULL, O_B1},       {"beta2", required_argument, NULL, O_B2},
    {"epsilon", required_argument, NULL, O_EPS},    {"weight-decay", required_argument, NULL, O_WD},
    {"decay-all", no_argument, NULL, O_DECAY_ALL},  {"policy", required_argument, NULL, O_POLICY},
    {"stepsize", required_argument, NULL, O_STEP},  {"gamma", required_argument, NULL, O_GAMMA},
    {"power", required_argument, NULL, O_POWER},    {"max-iter", required_argument, NULL, O_MAXIT},
    {"warmup-iter", required_argument, NULL, O_WU_IT},
    {"warmup-start", required_argument, NULL, O_WU_START},
    {"multi-tensor", no_argument, NULL, O_MULTI},
    {"no-multi-tensor", no_argument, NULL, O_NO_MULTI},
    {"clip-norm", required_argument, NULL, O_CLIP},
    {NULL, 0, NULL, 0}};

struct option *dm_optim_merge_opts(const struct option *own, size_t n_own) {
  return dm_cli_merge_options(own, (long)n_own, dm_optim_long_opts);
}

static int parse_double(const char *s, double *out) {
  return dm_cli_parse_double(s, -HUGE_VAL, HUGE_VAL, out);
}

static const char *flag_name(int c) {
  for (const struct option *o = dm_optim_long_opts; o->name; o++)
    if (o->val == c)
      return o->name;
  return "?";
}

int dm_optim_flag(const char *cmd, int c, const char *arg, dm_optimizer_opts *o, int *optimize,
                  int *rc) {
  if (c < O_OPT || c > O_CLIP)
    return 0;
  *rc = DM_EXIT_OK;
  double v = 0;
  long n = 0;
  int is_real = c == O_LR || c == O_MOM || c == O_B1 || c == O_B2 || c == O_EPS || c == O_WD ||
                c == O_GAMMA || c == O_POWER || c == O_WU_START || c == O_CLIP;
  int is_int = c == O_STEP || c == O_MAXIT || c == O_WU_IT;
  if (is_real && !parse_double(arg, &v)) {
    *rc = dm_cli_usage_error(cmd, "--%s wants a number, got '%s'", flag_name(c), arg);
    return 1;
  }
  if (is_int && !dm_cli_parse_long(arg, 0, 1L << 62, &n)) {
    *rc = dm_cli_usage_error(cmd, "--%s wants a non-negative integer, got '%s'", flag_name(c), arg);
    return 1;
  }
  switch (c) {
  case O_OPT:
    if (dm_optimizer_kind_from_name(arg, &o->kind) != DM_OK)
      *rc = dm_cli_usage_error(cmd, "--optimizer wants sgd, momentum, adam or adamw, got '%s'",
                               arg);
    *optimize = 1;
    break;
  case O_LR: o->lr = v; break;
  case O_MOM: o->momentum = v; break;
  case O_NEST: o->nesterov = 1; break;
  case O_B1: o->beta1 = v; break;
  case O_B2: o->beta2 = v; break;
  case O_EPS: o->epsilon = v; break;
  case O_WD: o->weight_decay = v; break;
  case O_DECAY_ALL: o->decay_all = 1; break;
  case O_POLICY: o->policy = arg; break;
  case O_STEP: o->stepsize = n; break;
  case O_GAMMA: o->gamma = v; break;
  case O_POWER: o->power = v; break;
  case O_MAXIT: o->max_iter = n; break;
  case O_WU_IT: o->warmup_iter = n; break;
  case O_WU_START: o->warmup_start = v; break;
  case O_MULTI: o->multi_tensor = DM_SWITCH_ON; break;
  case O_NO_MULTI: o->multi_tensor = DM_SWITCH_OFF; break;
  case O_CLIP: o->clip_norm = v; break;
  }
  return 1;
}

void dm_optim_help(FILE *f) {
  fprintf(f,
          "  --optimizer KIND     sgd, momentum, adam or adamw (Adam with decoupled weight\n"
          "                       decay, torch.optim.AdamW's)\n"
          "  --lr X               step size, > 0 (default 0.01); base_lr gets Caffe2's sign:\n"
          "                       -X for sgd, adam and adamw, +X for momentum\n"
          "  --momentum M         momentum (default 0.9)    --nesterov   Nesterov momentum\n"
          "  --beta1 B --beta2 B --epsilon E   Adam (defaults 0.9, 0.999, 1e-5)\n"
          "  --weight-decay W     L2 decay added to the gradients of params named *_w\n"
          "                       (adamw: its decoupled decay of those params)\n"
          "  --decay-all          decay every param, biases too\n"
          "  --policy P           fixed (default), step, exp, inv, poly\n"
          "  --stepsize N --gamma G --power P --max-iter N   the policy's parameters\n"
          "  --warmup-iter N --warmup-start F   linear warmup from F * lr over N iterations\n"
          "  --clip-norm C        scale the gradients together so that their global L2 norm\n"
          "                       is at most C, before the updates (after the loss scale\n"
          "                       is divided out; a skipped step is not clipped)\n"
          "  --multi-tensor / --no-multi-tensor   one multi-tensor update (and weight decay)\n"
          "                       for all params, one GPU launch, instead of one op per param\n"
          "                       (default: on with --device cuda, else off)\n");
}
