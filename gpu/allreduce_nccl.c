/* allreduce_nccl.c: Allreduce's CUDA kernel (schema: operators/allreduce.c), through
 * NCCL, where the build has both NCCL and MPI: registered for the plain CUDA kernel and
 * engine "NCCL".
 *
 * One communicator per workspace (each rank drives one GPU), made by its first Allreduce
 * and destroyed with it: rank 0's ncclGetUniqueId broadcast over MPI
 * (operators/mpi/mpi_common.h), then ncclCommInitRank on the op's GPU. Every blob is reduced in place on the op's stream,
 * all of them in one NCCL group (NCCL packs them into its own buffers: bucket_bytes has
 * nothing to add here); `average` is ncclAvg. NCCL sums in the blobs' own dtype (FP16
 * gradients in FP16, the seed recipe); a wire_dtype other than that is refused (the CPU
 * kernel converts, this one does not yet).
 *
 * Not measured: this kernel has never run on a GPU (none was available when it was
 * written), and one H200 cannot host two NCCL ranks (NCCL refuses two ranks on one GPU).
 * The timeout of the CPU collectives does not cover it: a lost rank leaves the NCCL
 * kernel waiting on the stream (ncclCommGetAsyncError and ncclCommAbort would end it).
 */
#include "dm_config.h"
#include "kernels.h"

#if DM_HAVE_NCCL && DM_HAVE_MPI
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "core/workspace.h"
#include "operators/mpi/mpi_common.h"

static dm_status nccl_failed(dm_op_ctx *ctx, ncclResult_t r, const char *call) {
  return dm_op_error(ctx, DM_ERR_DEVICE, "NCCL: %s failed on rank %d: %s", call, dm_mpi_rank(),
                     ncclGetErrorString(r));
}

/* A workspace's communicator: made by its first Allreduce, owned by the workspace (no
 * process-wide static, so two workspaces never race to make one, and it goes with the
 * workspace that used it). A workspace runs one public call at a time, so its first
 * Allreduce makes it alone. */
typedef struct nccl_comm {
  ncclComm_t comm;
  int device;
} nccl_comm;

static void comm_destroy(void *p) {
  nccl_comm *c = p;
  if (c->comm) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    ncclCommFinalize(c->comm); /* waits for the reductions still queued */
#endif
    ncclCommDestroy(c->comm);
  }
  free(c);
}

static dm_status comm_create(dm_op_ctx *ctx, int device, nccl_comm *c) {
  if (!dm_mpi_ready())
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "MPI is not initialised: NCCL's ranks find each other through it "
                       "(`train --data-parallel`, or dm_dist_init)");
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  ncclResult_t r = dm_mpi_rank() == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
  if (r != ncclSuccess)
    return nccl_failed(ctx, r, "ncclGetUniqueId");
  DM_TRY(dm_mpi_bcast(&id, sizeof id, 0, "NCCL's unique id"));
  DM_CUDA_TRY(cudaSetDevice(device));
  if ((r = ncclCommInitRank(&c->comm, dm_mpi_size(), id, dm_mpi_rank())) != ncclSuccess)
    return nccl_failed(ctx, r, "ncclCommInitRank");
  c->device = device;
  return DM_OK;
}

/* The op's workspace's communicator, on GPU `device` (every Allreduce of the workspace
 * on it), made on first use. */
static dm_status get_comm(dm_op_ctx *ctx, int device, ncclComm_t *out) {
  dm_workspace *ws = dm_op_workspace(ctx);
  nccl_comm *c = dm_workspace_find_owned(ws, comm_destroy);
  if (c && device != c->device)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "NCCL: this rank's communicator is on GPU %d, the op on GPU %d: one "
                       "GPU per rank",
                       c->device, device);
  if (!c) {
    if (!(c = calloc(1, sizeof *c)))
      return DM_NOMEM("an NCCL communicator");
    dm_status s = comm_create(ctx, device, c);
    if (s == DM_OK)
      s = dm_workspace_adopt(ws, c, comm_destroy);
    if (s != DM_OK) {
      comm_destroy(c);
      return s;
    }
  }
  *out = c->comm;
  return DM_OK;
}

static int nccl_type(dm_dtype t, ncclDataType_t *out) {
  switch (t) {
  case DM_FLOAT: *out = ncclFloat32; return 1;
  case DM_FLOAT16: *out = ncclFloat16; return 1;
  case DM_BFLOAT16: *out = ncclBfloat16; return 1;
  case DM_DOUBLE: *out = ncclFloat64; return 1;
  default: return 0;
  }
}

static dm_status nccl_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_check_shapes(ctx));
  const char *wire = dm_op_arg_string(ctx, "wire_dtype", "");
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  ncclComm_t cm = NULL;
  DM_TRY(get_comm(ctx, c->device, &cm));
  const ncclRedOp_t op = dm_op_arg_int(ctx, "average", 0) ? ncclAvg : ncclSum;
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; r == ncclSuccess && i < dm_op_num_inputs(ctx); i++) {
    dm_tensor *x = OUT(i);
    ncclDataType_t t;
    if (!nccl_type(x->dtype, &t) || (wire && *wire && strcmp(wire, dm_dtype_name(x->dtype)) != 0)) {
      ncclGroupEnd();
      return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                         "'%s' is %s: NCCL's Allreduce sums FLOAT, FLOAT16, BFLOAT16 or DOUBLE "
                         "in the blob's own dtype (wire_dtype '%s' needs the CPU kernel)",
                         dm_op_input_name(ctx, i), dm_dtype_name(x->dtype), wire ? wire : "");
    }
    void *d = MDATA(x);
    r = ncclAllReduce(d, d, (size_t)x->numel, t, op, cm, c->stream);
  }
  ncclResult_t e = ncclGroupEnd();
  if (r != ncclSuccess)
    return nccl_failed(ctx, r, "ncclAllReduce");
  return e == ncclSuccess ? DM_OK : nccl_failed(ctx, e, "ncclGroupEnd");
}

const dm_kernel_def dm_cuda_allreduce_kernels[] = {
    GPU_KERNEL("Allreduce", "", .run = nccl_run),
    GPU_KERNEL("Allreduce", "NCCL", .run = nccl_run),
    {0},
};
#else
/* Without NCCL or MPI there is no CUDA Allreduce: the device pass keeps the op on the
 * CPU, where the MPI kernel (if any) reduces host copies. */
const dm_kernel_def dm_cuda_allreduce_kernels[] = {{0}};
#endif
