/* builtin.h: the built-in operator families and the one function that registers them. */
#ifndef DM_OPERATORS_BUILTIN_H
#define DM_OPERATORS_BUILTIN_H

#include "core/registry.h"

/* One table per family, defined in operators/<family>.c; listed in builtin.c. */

/* Registers every built-in family (and the CUDA kernels when built with CUDA). */
DM_HIDDEN dm_status dm_register_builtin_ops(void);

#endif
