/* mp_flags.h: the mixed-precision flags (--fp16, loss scaling, overrides), shared by
 * `rewrite` and `train`. */
#ifndef DM_TOOLS_MP_FLAGS_H
#define DM_TOOLS_MP_FLAGS_H

#include <getopt.h>
#include <stdio.h>

#include "net/passes/mixed_precision_pass.h"

#define DM_MP_FLAG_BASE 1100
#define DM_MP_MAX_LIST 64

typedef struct dm_mp_cli {
  int enabled;          /* --fp16 or --bf16 */
  dm_mp_opts opts;
  char *fp32_buf, *fp16_buf; /* strdup'd lists, split in place */
  const char *fp32[DM_MP_MAX_LIST], *fp16[DM_MP_MAX_LIST];
} dm_mp_cli;

extern const struct option dm_mp_long_opts[];
void dm_mp_cli_init(dm_mp_cli *m);
void dm_mp_cli_free(dm_mp_cli *m);
/* Settles defaults that depend on several flags (call after parsing). */
void dm_mp_cli_finish(dm_mp_cli *m);
/* Like dm_optim_flag: 1 if `c` was a mixed-precision flag (*rc set). */
int dm_mp_flag(const char *cmd, int c, const char *arg, dm_mp_cli *m, int *rc);
void dm_mp_help(FILE *f);
/* What train's warning about steps skipped in a row on overflow says after the numbers:
 * the likely cause and the fix. With dynamic scaling the scale fell and the gradients
 * still overflow (a diverging loss, an op that needs FP32); a static scale never falls,
 * so it is named as the cause (one past FP16's largest value, 65504, overflows every
 * step), with a smaller --init-scale to try. Writes into buf (cap bytes); returns buf. */
const char *dm_mp_skip_advice(const dm_mp_opts *o, double scale, char *buf, size_t cap);
/* A malloc'd copy of the zero-terminated table `base` with the mixed-precision options
 * appended. */
struct option *dm_mp_merge_opts(const struct option *base);

#endif
