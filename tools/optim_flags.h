/* optim_flags.h: the optimizer's command-line flags, shared by `rewrite` and `train`. */
#ifndef DM_TOOLS_OPTIM_FLAGS_H
#define DM_TOOLS_OPTIM_FLAGS_H

#include <getopt.h>
#include <stdio.h>

#include "net/passes/optimizer_pass.h"

/* getopt_long values of the flags (>= DM_OPTIM_FLAG_BASE; callers use smaller ones). */
#define DM_OPTIM_FLAG_BASE 1000
/* The long options, ending in a zero entry; callers append them to their own table. */
extern const struct option dm_optim_long_opts[];
/* Number of entries before the zero entry. */
/* Handles getopt value `c` if it is an optimizer flag: returns 1 and sets *rc (an exit
 * code: DM_EXIT_OK, or a usage error already printed). Returns 0 for other values.
 * `*optimize` is set when --optimizer is given. */
int dm_optim_flag(const char *cmd, int c, const char *arg, dm_optimizer_opts *o, int *optimize,
                  int *rc);
/* The flags' lines for a --help text. */
void dm_optim_help(FILE *f);
/* Builds "own options + optimizer options + zero entry" into a malloc'd table. */
struct option *dm_optim_merge_opts(const struct option *own, size_t n_own);

#endif
