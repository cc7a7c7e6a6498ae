/* init.c: dm_init, the library's one init function: registers the built-in operator
 * families (operators/builtin.c) and, when built with CUDA, the CUDA backend's kernels.
 *
 * It sits above core, operators and gpu because it names them all; the registry in core
 * only holds what it is given. This is the one C file outside gpu/ that tests
 * DM_HAVE_CUDA. Registration runs once per process (pthread_once); every later call
 * returns its outcome.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/registry.h"
#include "dm_config.h"
#include "operators/builtin.h"

#if DM_HAVE_CUDA
#include "gpu/register.h"
#endif
#if DM_HAVE_MPI
#include "operators/mpi/mpi_common.h"
#endif
#if DM_HAVE_DNNL
#include "operators/dnnl/dnnl_common.h"
#else
int dm_have_dnnl(void) { return 0; }
#endif

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static dm_status init_status = DM_OK;
static char init_message[512];

static dm_status register_builtins(void) {
  DM_TRY(dm_register_builtin_ops());
#if DM_HAVE_MPI
  DM_TRY(dm_register_mpi_ops());
#else
  DM_TRY(dm_register_kernel_table(dm_allreduce_no_mpi_kernels));
#endif
#if DM_HAVE_DNNL
  DM_TRY(dm_register_dnnl_ops());
#endif
#if DM_HAVE_CUDA
  DM_TRY(dm_register_cuda_ops());
#endif
  return DM_OK;
}

static void init_builtins(void) {
  init_status = register_builtins();
  if (init_status != DM_OK)
    snprintf(init_message, sizeof init_message, "%s", dm_last_error());
  /* The registry lives as long as the process; freeing it at exit keeps leak checkers
   * quiet about what is really static data. */
  atexit(dm_registry_free);
}

dm_status dm_init(void) {
  pthread_once(&init_once, init_builtins);
  if (init_status != DM_OK)
    return dm_error(init_status, "registering built-in operators: %s", init_message);
  return DM_OK;
}
