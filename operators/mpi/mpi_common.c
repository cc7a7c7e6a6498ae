/* mpi_common.c: MPI for the data-parallel ops (see mpi_common.h): initialisation, and
 * collectives that fail after a timeout instead of waiting forever for a lost rank.
 */
#include "mpi_common.h"

#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/half.h"

/* The tag of the note a rank that finishes normally sends every other rank (see
 * dm_mpi_finalize and wait_for). */
#define TAG_FINISHED 7177

static int we_initialised;
static double timeout_s = DM_MPI_DEFAULT_TIMEOUT_S;
/* Sums of 16-bit floats: MPI has no such type; ours are user ops over MPI_UINT16_T. */
static MPI_Op op_sum_f16 = MPI_OP_NULL, op_sum_bf16 = MPI_OP_NULL;

static dm_status mpi_failed(int rc, const char *call, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    len = 0;
  msg[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
  return dm_error(DM_ERR_IO, "MPI: %s of %s failed on rank %d: %s", call, what, dm_mpi_rank(),
                  len ? msg : "(no message)");
}

/* Each pairwise sum rounded to 16 bits, as the other side of an FP16 all-reduce would. */
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    b[i] = dm_float_to_half(dm_half_to_float(a[i]) + dm_half_to_float(b[i]));
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    b[i] = dm_float_to_bf16(dm_bf16_to_float(a[i]) + dm_bf16_to_float(b[i]));
}

dm_status dm_mpi_init(int *rank, int *size) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized)
    return dm_error(DM_ERR_INVALID, "MPI was finalised already: it cannot start again in "
                                    "this process");
  if (!inited) {
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS)
      return dm_error(DM_ERR_IO, "MPI: MPI_Init_thread failed (error %d); start the ranks "
                                 "with mpirun", rc);
    we_initialised = 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (op_sum_f16 == MPI_OP_NULL &&
      (MPI_Op_create(sum_f16, 1, &op_sum_f16) != MPI_SUCCESS ||
       MPI_Op_create(sum_bf16, 1, &op_sum_bf16) != MPI_SUCCESS))
    return dm_error(DM_ERR_IO, "MPI: creating the FP16 and BF16 sum operations failed");
  if (rank)
    *rank = dm_mpi_rank();
  if (size)
    *size = dm_mpi_size();
  return DM_OK;
}

/* Tells every other rank that this one finished normally, so that a rank still waiting
 * for it in a collective says so instead of calling it lost (wait_for). Small sends,
 * complete locally (eager); one nobody receives is dropped at MPI_Finalize. */
static void notify_finished(void) {
  static int64_t me; /* the send buffer outlives the call */
  me = dm_mpi_rank();
  for (int r = 0; r < dm_mpi_size(); r++) {
    MPI_Request req;
    if (r != me && MPI_Isend(&me, 1, MPI_INT64_T, r, TAG_FINISHED, MPI_COMM_WORLD, &req) ==
                       MPI_SUCCESS)
      MPI_Request_free(&req);
  }
}

dm_status dm_mpi_finalize(void) {
  if (!dm_mpi_ready())
    return DM_OK;
  notify_finished();
  if (op_sum_f16 != MPI_OP_NULL)
    MPI_Op_free(&op_sum_f16);
  if (op_sum_bf16 != MPI_OP_NULL)
    MPI_Op_free(&op_sum_bf16);
  if (we_initialised && MPI_Finalize() != MPI_SUCCESS)
    return dm_error(DM_ERR_IO, "MPI: MPI_Finalize failed");
  return DM_OK;
}

int dm_mpi_ready(void) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  return inited && !finalized && op_sum_f16 != MPI_OP_NULL;
}

int dm_mpi_rank(void) {
  int r = -1;
  if (dm_mpi_ready())
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int dm_mpi_size(void) {
  int n = 1;
  if (dm_mpi_ready())
    MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void dm_mpi_set_timeout(double seconds) { timeout_s = seconds > 0 ? seconds : timeout_s; }
double dm_mpi_timeout(void) { return timeout_s; }

void dm_mpi_abort(int code) {
  if (dm_mpi_ready())
    MPI_Abort(MPI_COMM_WORLD, code);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds a collective waits before it looks for a finished rank's note, and how long
 * it goes on after seeing one (the collective may still be completing: a rank sends it
 * only after its own last collective, which MPI_Test may not have finished here yet). */
#define FINISHED_LOOK_S 0.5
#define FINISHED_GRACE_S 2.0

static dm_status finished_error(const char *call, const char *what, int rank, double waited) {
  return dm_error(DM_ERR_IO,
                  "MPI: %s of %s on rank %d (after %.1f s): rank %d finished its run normally "
                  "while this rank still needs it: the ranks ran different numbers of steps "
                  "(give every rank the same net, options and --iters)",
                  call, what, dm_mpi_rank(), waited, rank);
}

/* Waits for `req` up to the timeout: spinning on MPI_Test for the first millisecond (a
 * collective between ready ranks ends within it), then testing every 100 us; after
 * FINISHED_LOOK_S it also looks for another rank's note that it finished. */
static dm_status wait_for(MPI_Request *req, const char *call, const char *what) {
  double start = now_s(), finished_at = -1, last_look = 0;
  int finished_rank = -1;
  for (long spins = 0;; spins++) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      return mpi_failed(rc, call, what);
    if (done)
      return DM_OK;
    double waited = now_s() - start;
    if (finished_rank < 0 && waited > FINISHED_LOOK_S && waited - last_look > 0.1) {
      int flag = 0;
      MPI_Status st;
      last_look = waited;
      if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_FINISHED, MPI_COMM_WORLD, &flag, &st) ==
              MPI_SUCCESS && flag) {
        finished_rank = st.MPI_SOURCE; /* left unreceived: later waits see it too */
        finished_at = waited;
      }
    }
    if (finished_rank >= 0 && (waited - finished_at > FINISHED_GRACE_S || waited > timeout_s))
      return finished_error(call, what, finished_rank, waited);
    if (waited > timeout_s)
      return dm_error(DM_ERR_IO,
                      "MPI: %s of %s on rank %d waited %.0f s for the other %d rank(s): one "
                      "of them is lost or stopped (the timeout is %.0f s)",
                      call, what, dm_mpi_rank(), waited, dm_mpi_size() - 1, timeout_s);
    if (waited > 1e-3) {
      struct timespec nap = {0, 100000};
      nanosleep(&nap, NULL);
    }
  }
}

/* The largest element count one MPI call takes (its counts are ints). */
#define CHUNK ((size_t)1 << 30)

static dm_status allreduce(void *buf, size_t count, MPI_Datatype type, size_t elem, MPI_Op op,
                           const char *what) {
  if (!dm_mpi_ready())
    return dm_error(DM_ERR_INVALID, "MPI: all-reduce of %s: MPI is not initialised (run "
                                    "under mpirun with `train --data-parallel`, or call "
                                    "dm_dist_init first)", what);
  for (size_t done = 0; done < count; done += CHUNK) {
    size_t n = count - done < CHUNK ? count - done : CHUNK;
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + done * elem, (int)n, type, op,
                            MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
      return mpi_failed(rc, "MPI_Iallreduce", what);
    DM_TRY(wait_for(&req, "all-reduce", what));
  }
  return DM_OK;
}

dm_status dm_mpi_allreduce_sum(void *buf, size_t count, dm_dtype dtype, const char *what) {
  switch (dtype) {
  case DM_FLOAT: return allreduce(buf, count, MPI_FLOAT, 4, MPI_SUM, what);
  case DM_DOUBLE: return allreduce(buf, count, MPI_DOUBLE, 8, MPI_SUM, what);
  case DM_INT32: return allreduce(buf, count, MPI_INT32_T, 4, MPI_SUM, what);
  case DM_INT64: return allreduce(buf, count, MPI_INT64_T, 8, MPI_SUM, what);
  case DM_FLOAT16: return allreduce(buf, count, MPI_UINT16_T, 2, op_sum_f16, what);
  case DM_BFLOAT16: return allreduce(buf, count, MPI_UINT16_T, 2, op_sum_bf16, what);
  default:
    return dm_error(DM_ERR_TYPE, "MPI: all-reduce of %s: cannot sum %s", what,
                    dm_dtype_name(dtype));
  }
}

dm_status dm_mpi_allreduce_max(double *buf, size_t count, const char *what) {
  return allreduce(buf, count, MPI_DOUBLE, 8, MPI_MAX, what);
}

dm_status dm_mpi_bcast(void *buf, size_t bytes, int root, const char *what) {
  if (!dm_mpi_ready())
    return dm_error(DM_ERR_INVALID, "MPI: broadcast of %s: MPI is not initialised", what);
  for (size_t done = 0; done < bytes; done += CHUNK) {
    size_t n = bytes - done < CHUNK ? bytes - done : CHUNK;
    MPI_Request req;
    int rc = MPI_Ibcast((char *)buf + done, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
      return mpi_failed(rc, "MPI_Ibcast", what);
    DM_TRY(wait_for(&req, "broadcast", what));
  }
  return DM_OK;
}
