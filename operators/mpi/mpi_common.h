/* mpi_common.h: the library's use of MPI (internal), for the data-parallel ops and the
 * C API's dm_dist_* calls (net/dist_api.c). Built only where MPI is found (DM_HAVE_MPI).
 *
 * One communicator, MPI_COMM_WORLD: a rank is a process that `mpirun` started, on this
 * host or another. MPI is initialised by dm_dist_init (the CLI's `--data-parallel`, or a
 * host application), never behind the user's back by an op: an Allreduce outside an
 * initialised MPI fails with a message that says so.
 *
 * Never a hang: every collective is started non-blocking (MPI_Iallreduce, MPI_Ibcast)
 * and waited for with MPI_Test up to a timeout; a rank that died or stopped makes the
 * others' collective fail with an error that names the timeout and the operation, and
 * the caller (the CLI) then ends the job with MPI_Abort. Errors return
 * (MPI_ERRORS_RETURN), so a failed MPI call is a dm_status with MPI's own message too.
 */
#ifndef DM_OPERATORS_MPI_COMMON_H
#define DM_OPERATORS_MPI_COMMON_H

#include <stddef.h>

#include "core/status.h"
#include "demitasse_plugin.h"

/* Seconds a collective waits for the other ranks before it fails (dm_dist_set_timeout). */
#define DM_MPI_DEFAULT_TIMEOUT_S 300.0

/* MPI_Init_thread (FUNNELED) unless MPI is initialised already; rank and size out. */
DM_HIDDEN dm_status dm_mpi_init(int *rank, int *size);
/* MPI_Finalize if dm_mpi_init initialised it and it is not finalised yet; first a note
 * to every other rank that this one finished normally, so that a rank still waiting for
 * it in a collective fails within seconds saying so, instead of "lost or stopped" after
 * the timeout. */
DM_HIDDEN dm_status dm_mpi_finalize(void);
/* Nonzero when MPI is initialised and not finalised: collectives may run. */
DM_HIDDEN int dm_mpi_ready(void);
DM_HIDDEN int dm_mpi_rank(void);
DM_HIDDEN int dm_mpi_size(void);
/* The collectives' timeout, seconds (> 0). */
DM_HIDDEN void dm_mpi_set_timeout(double seconds);
DM_HIDDEN double dm_mpi_timeout(void);
/* Ends every rank of the job (MPI_Abort), with `code`. */
DM_HIDDEN void dm_mpi_abort(int code);

/* Sums `count` elements of `dtype` (FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT32, INT64) over
 * the ranks, in place. FLOAT16 and BFLOAT16 are summed in their own precision (each
 * pairwise sum rounded, as an FP16 NCCL all-reduce does). `what` names the data in
 * errors. */
DM_HIDDEN dm_status dm_mpi_allreduce_sum(void *buf, size_t count, dm_dtype dtype,
                                         const char *what);
/* The largest of `count` doubles over the ranks, in place. */
DM_HIDDEN dm_status dm_mpi_allreduce_max(double *buf, size_t count, const char *what);
/* Registers the MPI kernels (Allreduce, engine MPI and the plain CPU kernel). */
DM_HIDDEN dm_status dm_register_mpi_ops(void);

/* `bytes` bytes from rank `root` to every rank. */
DM_HIDDEN dm_status dm_mpi_bcast(void *buf, size_t bytes, int root, const char *what);

#endif
