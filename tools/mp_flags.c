/* mp_flags.c: parsing of --fp16, --loss-scale, --init-scale, --growth-interval,
 * --fp32-ops and --fp16-ops. */
#include "mp_flags.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"

enum { O_FP16 = DM_MP_FLAG_BASE, O_BF16, O_SCALING, O_INIT_SCALE, O_GROWTH, O_FP32_OPS, O_FP16_OPS };

const struct option dm_mp_long_opts[] = {
    {"fp16", no_argument, NULL, O_FP16},
    {"bf16", no_argument, NULL, O_BF16},
    {"loss-scale", required_argument, NULL, O_SCALING},
    {"init-scale", required_argument, NULL, O_INIT_SCALE},
    {"growth-interval", required_argument, NULL, O_GROWTH},
    {"fp32-ops", required_argument, NULL, O_FP32_OPS},
    {"fp16-ops", required_argument, NULL, O_FP16_OPS},
    {NULL, 0, NULL, 0}};

struct option *dm_mp_merge_opts(const struct option *base) {
  return dm_cli_merge_options(base, -1, dm_mp_long_opts);
}

void dm_mp_cli_init(dm_mp_cli *m) {
  memset(m, 0, sizeof *m);
  dm_mp_opts_init(&m->opts);
  m->opts.scaling = DM_LOSS_SCALE_AUTO; /* until --loss-scale: by the precision */
}

void dm_mp_cli_free(dm_mp_cli *m) {
  free(m->fp32_buf);
  free(m->fp16_buf);
  m->fp32_buf = m->fp16_buf = NULL;
}

/* Splits a comma-separated list in place into `items`. */
static size_t split(char *buf, const char **items) {
  size_t n = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < DM_MP_MAX_LIST;
       t = strtok_r(NULL, ",", &save))
    items[n++] = t;
  return n;
}

int dm_mp_flag(const char *cmd, int c, const char *arg, dm_mp_cli *m, int *rc) {
  if (c < O_FP16 || c > O_FP16_OPS)
    return 0;
  *rc = DM_EXIT_OK;
  char *end = NULL;
  switch (c) {
  case O_FP16:
  case O_BF16:
    if (m->enabled && m->opts.target != (c == O_BF16 ? DM_BFLOAT16 : DM_FLOAT16))
      *rc = dm_cli_usage_error(cmd, "--fp16 and --bf16 exclude each other");
    m->enabled = 1;
    m->opts.target = c == O_BF16 ? DM_BFLOAT16 : DM_FLOAT16;
    break;
  case O_SCALING:
    if (strcmp(arg, "dynamic") == 0)
      m->opts.scaling = DM_LOSS_SCALE_DYNAMIC;
    else if (strcmp(arg, "static") == 0)
      m->opts.scaling = DM_LOSS_SCALE_STATIC;
    else if (strcmp(arg, "none") == 0)
      m->opts.scaling = DM_LOSS_SCALE_NONE;
    else
      *rc = dm_cli_usage_error(cmd, "--loss-scale wants dynamic, static or none, got '%s'", arg);
    break;
  case O_INIT_SCALE:
    m->opts.init_scale = strtod(arg, &end);
    if (!*arg || *end || !(m->opts.init_scale > 0) || !(m->opts.init_scale <= FLT_MAX))
      *rc = dm_cli_usage_error(cmd, "--init-scale wants a positive number no larger than "
                                    "FLT_MAX (3.4e38: the scale is a float), got '%s'", arg);
    break;
  case O_GROWTH:
    if (!dm_cli_parse_long(arg, 1, 1L << 40, &m->opts.growth_interval))
      *rc = dm_cli_usage_error(cmd, "--growth-interval wants a positive integer, got '%s'", arg);
    break;
  case O_FP32_OPS:
  case O_FP16_OPS: {
    char **buf = c == O_FP32_OPS ? &m->fp32_buf : &m->fp16_buf;
    free(*buf);
    if (!(*buf = strdup(arg))) {
      *rc = dm_cli_failf("out of memory");
      break;
    }
    if (c == O_FP32_OPS) {
      m->opts.n_force_fp32 = split(*buf, m->fp32);
      m->opts.force_fp32 = m->fp32;
    } else {
      m->opts.n_force_fp16 = split(*buf, m->fp16);
      m->opts.force_fp16 = m->fp16;
    }
    break;
  }
  }
  return 1;
}

void dm_mp_cli_finish(dm_mp_cli *m) {
  /* AUTO as the pipeline decides it: BF16 has FP32's exponent range, so gradients do
   * not underflow and need no scaling unless asked for; FP16 scales dynamically. */
  m->opts.scaling = dm_mp_loss_scaling(m->opts.scaling, m->opts.target);
}

const char *dm_mp_skip_advice(const dm_mp_opts *o, double scale, char *buf, size_t cap) {
  static const double fp16_max = 65504;
  /* a power of two 256 times smaller (a step of 2^8 in the gradients' range), at least 1 */
  double smaller = fmax(1, exp2(floor(log2(scale / 256))));
  if (o->scaling == DM_LOSS_SCALE_STATIC && scale > fp16_max)
    snprintf(buf, cap, "the static loss scale %g is too large: past FP16's largest value "
             "(%g), every scaled gradient overflows and the model is not training. Give a "
             "smaller one, --init-scale 1024 say, or --loss-scale dynamic (which finds one "
             "itself).", scale, fp16_max);
  else if (o->scaling == DM_LOSS_SCALE_STATIC)
    snprintf(buf, cap, "the gradients overflow FP16 at the static loss scale %g, which never "
             "falls, so the model is not training. Give a smaller --init-scale (%g, say) or "
             "--loss-scale dynamic; --explain-overflow names the op.", scale, smaller);
  else
    snprintf(buf, cap, "the gradients overflow FP16 even at a small scale, so the model is not "
             "training. Likely a diverging loss (lower --lr), or an op that needs FP32 "
             "(--fp32-ops TYPE); --explain-overflow names the op.");
  return buf;
}

void dm_mp_help(FILE *f) {
  fprintf(f,
          "  --fp16               mixed precision: FP16 compute, FP32 master weights, loss\n"
          "                       scaling, overflow check and skipped steps (the pass's\n"
          "                       ops are ordinary ops: see `demitasse rewrite --fp16`)\n"
          "  --bf16               the same with BFLOAT16 (FP32's range: no loss scaling\n"
          "                       unless --loss-scale is given)\n"
          "  --loss-scale MODE    dynamic (default: from 2^16, halve on overflow, double\n"
          "                       after --growth-interval clean steps), static, or none\n"
          "  --init-scale S       the initial (or static) loss scale (default 65536)\n"
          "  --growth-interval N  clean steps before the scale doubles (default 2000)\n"
          "  --fp32-ops A,B       op types kept in FP32   --fp16-ops A,B  forced to FP16\n"
          "                       (one op: give it an argument precision: \"fp32\")\n");
}
