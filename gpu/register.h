/* register.h: registration of the CUDA kernels (internal; only with DM_HAVE_CUDA).
 *
 * Called from net/init.c (dm_init), the one place outside gpu/ that knows whether the
 * CUDA backend is built.
 */
#ifndef DM_GPU_REGISTER_H
#define DM_GPU_REGISTER_H

#include "core/registry.h"

/* Registers the CUDA kernels for the built-in schemas. Works without a usable GPU:
 * registration only fills tables; running a CUDA op is what needs the device. */
DM_HIDDEN dm_status dm_register_cuda_ops(void);

#endif
