/* device.h: where tensor storage lives, and the table a backend fills (internal).
 *
 * Core knows devices only as (dm_device_type, id) and reaches device memory through the
 * functions a backend registers here, so no CUDA type or call appears outside gpu/. The
 * CPU needs no entry: host memory is aligned_alloc/free. gpu/ registers DM_CUDA at
 * dm_init when the build has CUDA (whether or not a GPU is present: the functions then
 * fail with the reason, e.g. the driver's error 35).
 */
#ifndef DM_CORE_DEVICE_H
#define DM_CORE_DEVICE_H

#include <stddef.h>

#include "demitasse_plugin.h"
#include "status.h"

/* The per-thread library objects of a device a CUDA kernel may need. */
typedef enum dm_device_handle {
  DM_HANDLE_STREAM = 0, /* cudaStream_t */
  DM_HANDLE_CUBLAS = 1, /* cublasHandle_t */
  DM_HANDLE_CUBLASLT = 2, /* cublasLtHandle_t */
  DM_HANDLE_CUDNN = 3   /* cudnnHandle_t */
} dm_device_handle;

typedef struct dm_device_ops {
  const char *name; /* "CUDA", for messages */
  /* n bytes on device `id` (stream-ordered pools, not a cudaMalloc per tensor). */
  dm_status (*alloc)(int id, size_t nbytes, void **out);
  void (*free)(int id, void *p);
  /* n bytes from (src_dev, src_id, src) to (dst_dev, dst_id, dst); either side may be
   * the host (DM_CPU). Returns once the host may read dst (device -> host) and reuse src
   * (host -> device); device -> device copies are ordered on the device's stream. */
  dm_status (*copy)(dm_device_type dst_dev, int dst_id, void *dst, dm_device_type src_dev,
                    int src_id, const void *src, size_t n);
  /* Whether device `id` can run kernels; the reason in why otherwise. */
  int (*usable)(int id, char *why, size_t cap);
  /* Waits until the work this thread queued on device `id` is done (profiling only: a
   * net never needs it to be correct). */
  dm_status (*synchronize)(int id);
  /* Optional (NULL where a backend has none): uploads without the staging copy. A batch
   * uploaded every step is the one large host-to-device copy of a training step; staged,
   * the host first copies it into pinned memory while the device waits. So core
   * page-locks a host buffer that is uploaded again and again (host_register, undone by
   * host_unregister before the buffer is freed) and sends it by DMA straight from there:
   * upload_async queues the copy on device dst_id's stream and returns at once,
   * recording in *fence (created when NULL) the copy's end. Until fence_wait returns the
   * host must not write src; core waits before any host write of that storage
   * (dm_tensor_mutable_data, feeds, host copies into it, freeing it). fence_free
   * releases a fence. */
  dm_status (*host_register)(void *p, size_t n);
  void (*host_unregister)(void *p);
  dm_status (*upload_async)(int dst_id, void *dst, const void *src, size_t n, void **fence);
  dm_status (*fence_wait)(void *fence);
  void (*fence_free)(void *fence);
  /* Optional: the calling thread's stream or library handle on device `id` (created on
   * first use), or NULL when there is none (for dm_op_cuda_stream and friends). */
  void *(*handle)(int id, dm_device_handle which);
  /* Optional: device graphs (CUDA graphs; net/graph_exec.h). capture_begin makes this
   * thread's stream of device `id` record the work queued on it instead of running it;
   * capture_end stops recording and returns the work as an executable graph (*graph)
   * with how many operations it holds (kernels, copies, memory operations). When a
   * call made in between failed, or the recording cannot be made a graph, capture_end
   * still ends the recording, discards it and says why (*graph NULL). graph_launch
   * queues one replay of it on the same stream; graph_free releases it. */
  dm_status (*capture_begin)(int id);
  dm_status (*capture_end)(int id, void **graph, long *nodes);
  dm_status (*graph_launch)(int id, void *graph);
  void (*graph_free)(int id, void *graph);
  /* Optional: how often the calling thread's context on device `id` has replaced memory
   * of its own that recorded graphs may point into (a scratch it grew, a buffer it
   * reallocated). The epoch is the context's, so one net growing its context's scratch
   * retires only the graphs recorded on that context (dm_device_private_epoch). */
  unsigned long (*private_epoch)(int id);
} dm_device_ops;

/* Host synchronisations with devices made by this thread so far: device-to-host copies
 * and waits for an asynchronous upload before the host rewrites its buffer (core counts
 * them where it makes them). A steady training step on a GPU should make none. */
DM_HIDDEN long dm_device_host_syncs(void);
DM_HIDDEN void dm_device_note_host_sync(void);
/* The epoch the executor mixes into the signature of a graph recorded on (dev, id)
 * (net/graph_exec.c): the backend's context epoch (private_epoch above) plus the calling
 * thread's count of dm_device_note_private_realloc. A graph recorded before the epoch
 * moved is not replayed, since it may point into the replaced memory. */
DM_HIDDEN unsigned long dm_device_private_epoch(const dm_device_ops *dev, int id);
/* For a kernel that replaces memory of its own (op state a graph may point into) without
 * its backend's context at hand: moves the calling thread's epoch, which retires the
 * graphs this thread's nets recorded, and no other thread's. A kernel with the context
 * says so to it instead (gpu/context.h, dm_gpu_note_private_realloc), which retires
 * fewer graphs. */
DM_HIDDEN void dm_device_note_private_realloc(void);

/* Registers the backend of `type` (DM_CUDA); the table must outlive the process. */
DM_HIDDEN void dm_device_register(dm_device_type type, const dm_device_ops *ops);
/* The backend of `type`, or NULL when none is built (always NULL for DM_CPU). */
DM_HIDDEN const dm_device_ops *dm_device_ops_for(dm_device_type type);
/* "CPU", "CUDA:0", ... into buf. */
DM_HIDDEN const char *dm_device_str(dm_device_type type, int id, char *buf, size_t cap);
/* DM_OK if ops can be placed on (type, id): always for the CPU; for CUDA, a backend must
 * be built and the device usable. Otherwise DM_ERR_UNSUPPORTED naming the device and
 * why ("built without CUDA", "no usable GPU: cudaGetDeviceCount failed: ... (35)"). */
DM_HIDDEN dm_status dm_device_check(dm_device_type type, int id);

#endif
