/* run_inputs.h: `demitasse run`'s checks of what it feeds against what the net reads, in
 * words that say the fix. */
#ifndef DM_TOOLS_RUN_INPUTS_H
#define DM_TOOLS_RUN_INPUTS_H

#include <stddef.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

/* Before anything runs: each fed name (n_fed of them) must be a blob of `net` (one an op
 * reads or writes, or an external input); else DM_ERR_NOT_FOUND naming the inputs to
 * feed instead (a misspelt --input): the blobs an op reads before any op writes them,
 * less those one of the n_inits nets (NULL entries skipped) makes. */
DM_HIDDEN dm_status dm_run_check_fed(const Caffe2__NetDef *net,
                                     const Caffe2__NetDef *const *inits, size_t n_inits,
                                     const char *const *fed, size_t n_fed);
/* After a run failed with DM_ERR_NOT_FOUND: the likely fix, into buf ("" if none seen):
 * the first input (as above) that is neither made by an init net nor fed, and "pass
 * --init" when there is no init net. Ops that write blobs they do not declare (Load with
 * load_all) make such a list a guess, so this is a hint beside the executor's error,
 * not a check of its own. */
DM_HIDDEN void dm_run_missing_hint(const Caffe2__NetDef *net, const Caffe2__NetDef *const *inits,
                                   size_t n_inits, const char *const *fed, size_t n_fed,
                                   char *buf, size_t cap);

#endif
