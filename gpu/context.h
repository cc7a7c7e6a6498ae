/* context.h: one GPU's execution context, for the CUDA kernels in gpu/ (internal; only
 * with DM_HAVE_CUDA, and only gpu/ includes it: CUDA types stay inside gpu/).
 *
 * A context is one device's stream with the cuBLAS, cuBLASLt and cuDNN handles bound to
 * it and a scratch buffer (cuDNN and cuBLASLt workspaces). Every CUDA kernel of a thread
 * runs on its context's stream, so ops execute in net order without host
 * synchronisation; only copies to the host wait (in the copy itself). Contexts are per
 * thread and device, created on first use and destroyed at thread exit, so two
 * workspaces in two threads never share a stream or a scratch buffer.
 *
 * Memory comes from the device's default stream-ordered pool (cudaMallocAsync on the
 * context stream) whose release threshold is raised so freed blocks are kept for reuse
 * rather than returned to the driver each step (gpu/memory.c).
 */
#ifndef DM_GPU_CONTEXT_H
#define DM_GPU_CONTEXT_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stddef.h>

#include "core/status.h"
#include "demitasse_plugin.h"

#define DM_GPU_STAGING 4
/* cuBLAS's workspace: NVIDIA's recommendation for Hopper is 32 MiB. */
#define DM_CUBLAS_WORKSPACE ((size_t)32 << 20)

typedef struct dm_gpu_context {
  int device;
  cudaStream_t stream;
  cublasHandle_t cublas;     /* on `stream`, tensor-op math allowed */
  cublasLtHandle_t cublaslt;
  cudnnHandle_t cudnn;       /* on `stream` */
  void *cublas_ws;           /* cuBLAS's workspace (cublasSetWorkspace) */
  void *scratch;             /* device scratch, grown on demand */
  size_t scratch_bytes;
  /* Pinned host staging for copies (memory.c): host data is copied into a buffer and sent
   * with cudaMemcpyAsync, so the caller's memory is free at once and the host runs on.
   * A small ring, each buffer with an event recorded after its send: the next upload
   * takes a buffer whose send is done (cudaEventQuery) and waits only when all are busy,
   * so an upload in the middle of a step does not stall behind the queued work. */
  struct dm_gpu_staging {
    void *ptr;
    size_t bytes;
    cudaEvent_t sent;
  } staging[DM_GPU_STAGING];
  int next_staging;
  int pool_ready; /* the device pool's release threshold has been raised */
  /* A second stream for uploads that overlap compute (device_copy.c's double-buffered
   * input), created on first use; and where uploads go while a kernel asks for it
   * (NULL: `stream`). */
  cudaStream_t copy_stream;
  cudaStream_t upload_stream;
  /* Bumped when the context replaces memory of its own that recorded graphs may point
   * into (the scratch): the backend's private_epoch (core/device.h). */
  unsigned long private_epoch;
} dm_gpu_context;

/* The calling thread's context for `device`, created on first use. DM_ERR_UNSUPPORTED
 * when the device is not usable (the reason in the message), DM_ERR_DEVICE when a CUDA
 * call fails. */
DM_HIDDEN dm_status dm_gpu_context_get(int device, dm_gpu_context **out);
/* Device scratch of at least n bytes, valid until the next call on this context (kernels
 * use it within one run). */
DM_HIDDEN dm_status dm_gpu_scratch(dm_gpu_context *c, size_t n, void **out);

/* Says that c replaced memory of its own that graphs recorded on it may point into:
 * those graphs are not replayed again (net/graph_exec.h). */
DM_HIDDEN void dm_gpu_note_private_realloc(dm_gpu_context *c);
/* The calling thread's context epoch for `device` (0 while it has no context there): the
 * CUDA backend's private_epoch hook (memory.c). */
DM_HIDDEN unsigned long dm_gpu_private_epoch(int device);

/* The context's copy stream, created on first use. */
DM_HIDDEN dm_status dm_gpu_copy_stream(dm_gpu_context *c, cudaStream_t *out);

/* n bytes from host memory src to device memory dst, on c's stream through the pinned
 * staging ring: returns once src is copied (the caller may reuse it), without waiting
 * for the device (memory.c). */
DM_HIDDEN dm_status dm_gpu_upload(dm_gpu_context *c, void *dst, const void *src, size_t n);

/* A CUDA, cuBLAS or cuDNN failure as DM_ERR_DEVICE with the call and the library's own
 * name and text for the code, e.g. "cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM". */
DM_HIDDEN dm_status dm_cuda_error(cudaError_t e, const char *call);
DM_HIDDEN dm_status dm_cublas_error(cublasStatus_t e, const char *call);
DM_HIDDEN dm_status dm_cudnn_error(cudnnStatus_t e, const char *call);

#define DM_CUDA_TRY(call)                               \
  do {                                                  \
    cudaError_t e_ = (call);                            \
    if (e_ != cudaSuccess)                              \
      return dm_cuda_error(e_, #call);                  \
  } while (0)
#define DM_CUBLAS_TRY(call)                             \
  do {                                                  \
    cublasStatus_t e_ = (call);                         \
    if (e_ != CUBLAS_STATUS_SUCCESS)                    \
      return dm_cublas_error(e_, #call);                \
  } while (0)
#define DM_CUDNN_TRY(call)                              \
  do {                                                  \
    cudnnStatus_t e_ = (call);                          \
    if (e_ != CUDNN_STATUS_SUCCESS)                     \
      return dm_cudnn_error(e_, #call);                 \
  } while (0)

/* The context for the op's device (dm_op_device_id); for kernels' run functions. */
DM_HIDDEN dm_status dm_gpu_op_context(dm_op_ctx *ctx, dm_gpu_context **out);
/* That context's stream, and its scratch (at least 1 byte; dm_gpu_scratch's lifetime). */
DM_HIDDEN dm_status dm_gpu_op_stream(dm_op_ctx *ctx, cudaStream_t *s);
DM_HIDDEN dm_status dm_gpu_op_scratch(dm_op_ctx *ctx, size_t n, void **p);
/* The last step of an op computed into scratch because its output is its input's blob
 * and smaller or of another element size: output 0 becomes dtype t with `like`'s shape
 * (read first: like may be output 0 itself), then gets `bytes` from tmp on stream s. */
DM_HIDDEN dm_status dm_gpu_output_from_scratch(dm_op_ctx *ctx, dm_dtype t, const dm_tensor *like,
                                               const void *tmp, size_t bytes, cudaStream_t s);

#endif
