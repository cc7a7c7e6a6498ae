/* threads.c: one call sets how many CPU threads the kernels use (OpenMP, OpenBLAS,
 * oneDNN), and the default: the cores this process may run on.
 *
 * Why one place: our kernels' OpenMP loops, OpenBLAS (its OpenMP build, meson.build) and
 * oneDNN (Debian's is built on OpenMP) each have a thread count; set apart, one of them
 * runs at the machine's full count beside a `--threads 1` run, or oversubscribes a
 * container whose affinity mask is smaller than the machine. oneDNN's OpenMP runtime
 * reads omp_set_num_threads' setting, so there is no separate oneDNN call.
 */
#include <sched.h>
#include <unistd.h>

#include "demitasse.h"
#include "dm_config.h"
#include "status.h"

#if DM_HAVE_OPENMP
#include <omp.h>
#endif
#if DM_HAVE_OPENBLAS
/* Declared here rather than through <cblas.h>, whose OpenBLAS extras vary by version. */
void openblas_set_num_threads(int n);
#endif

int dm_num_threads_default(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0)
      return n < DM_MAX_THREADS ? n : DM_MAX_THREADS;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n < DM_MAX_THREADS ? (int)n : DM_MAX_THREADS;
}

dm_status dm_set_num_threads(int n) {
  if (n < 1 || n > DM_MAX_THREADS)
    return dm_error(DM_ERR_INVALID, "dm_set_num_threads: %d threads, needs 1..%d", n,
                    DM_MAX_THREADS);
#if DM_HAVE_OPENMP
  omp_set_num_threads(n);
#endif
#if DM_HAVE_OPENBLAS
  openblas_set_num_threads(n);
#endif
  return DM_OK;
}

int dm_get_num_threads(void) {
#if DM_HAVE_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
