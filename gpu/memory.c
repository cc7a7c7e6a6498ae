/* memory.c: the CUDA entry of core's device table: memory from the device's stream-ordered
 * pool, copies through pinned staging or, for host buffers core has page-locked, by DMA
 * without waiting, and whether a device is usable.
 *
 * cudaMallocAsync/cudaFreeAsync on the calling thread's context stream draw from the
 * device's default memory pool. Its release threshold is raised to "never" once per
 * context, so blocks a step frees (the memory pass frees every activation after its last
 * use) go back to the pool, not to the driver, and the next step reuses them without a
 * device synchronisation.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "device_info.h"
#include "kernels.h"

static dm_status raise_pool_threshold(dm_gpu_context *c) {
  if (c->pool_ready)
    return DM_OK;
  cudaMemPool_t pool;
  DM_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, c->device));
  uint64_t keep = UINT64_MAX;
  DM_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  c->pool_ready = 1;
  return DM_OK;
}

static dm_status cuda_alloc(int id, size_t nbytes, void **out) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_context_get(id, &c));
  DM_TRY(raise_pool_threshold(c));
  cudaError_t e = cudaMallocAsync(out, nbytes, c->stream);
  if (e == cudaErrorMemoryAllocation)
    return dm_error(DM_ERR_NOMEM, "out of GPU memory on CUDA:%d allocating %zu bytes", id,
                    nbytes);
  return e == cudaSuccess ? DM_OK : dm_cuda_error(e, "cudaMallocAsync");
}

/* Stream-ordered on this thread's stream of the device: the block returns to the pool
 * after the work already queued there, which is the work that used it. */
static void cuda_free(int id, void *p) {
  dm_gpu_context *c;
  if (dm_gpu_context_get(id, &c) == DM_OK)
    cudaFreeAsync(p, c->stream);
  else
    cudaFree(p);
}

/* A pinned buffer of at least n bytes whose last send is done: the first free one of
 * the ring from next_staging on, or, when all are still sending, the oldest once its
 * send completes. */
static dm_status staging(dm_gpu_context *c, size_t n, struct dm_gpu_staging **out) {
  struct dm_gpu_staging *b = NULL;
  for (int k = 0; k < DM_GPU_STAGING && !b; k++) {
    struct dm_gpu_staging *t = &c->staging[(c->next_staging + k) % DM_GPU_STAGING];
    cudaError_t e = cudaEventQuery(t->sent); /* success also for a never-recorded event */
    if (e == cudaSuccess)
      b = t;
    else if (e != cudaErrorNotReady)
      return dm_cuda_error(e, "cudaEventQuery");
  }
  if (!b) {
    b = &c->staging[c->next_staging];
    DM_CUDA_TRY(cudaEventSynchronize(b->sent));
  }
  c->next_staging = (int)(b - c->staging + 1) % DM_GPU_STAGING;
  if (n > b->bytes) {
    if (b->ptr)
      DM_CUDA_TRY(cudaFreeHost(b->ptr));
    b->ptr = NULL;
    b->bytes = 0;
    DM_CUDA_TRY(cudaMallocHost(&b->ptr, n));
    b->bytes = n;
  }
  *out = b;
  return DM_OK;
}

/* host -> device: stage, send, return at once; the caller may reuse src. */
dm_status dm_gpu_upload(dm_gpu_context *c, void *dst, const void *src, size_t n) {
  struct dm_gpu_staging *buf;
  if (n == 0)
    return DM_OK;
  DM_TRY(staging(c, n, &buf));
  memcpy(buf->ptr, src, n);
  cudaStream_t s = c->upload_stream ? c->upload_stream : c->stream;
  DM_CUDA_TRY(cudaMemcpyAsync(dst, buf->ptr, n, cudaMemcpyHostToDevice, s));
  DM_CUDA_TRY(cudaEventRecord(buf->sent, s));
  return DM_OK;
}

static dm_status cuda_copy(dm_device_type dst_dev, int dst_id, void *dst, dm_device_type src_dev,
                           int src_id, const void *src, size_t n) {
  dm_gpu_context *c;
  struct dm_gpu_staging *buf;
  if (n == 0)
    return DM_OK;
  if (src_dev == DM_CPU && dst_dev == DM_CUDA) {
    DM_TRY(dm_gpu_context_get(dst_id, &c));
    return dm_gpu_upload(c, dst, src, n);
  }
  if (src_dev == DM_CUDA && dst_dev == DM_CPU) {
    /* device -> host: the host reads dst next, so wait for the stream here (the one
     * synchronisation a step needs, where the host asks for a value) */
    DM_TRY(dm_gpu_context_get(src_id, &c));
    DM_TRY(staging(c, n, &buf));
    DM_CUDA_TRY(cudaMemcpyAsync(buf->ptr, src, n, cudaMemcpyDeviceToHost, c->stream));
    DM_CUDA_TRY(cudaStreamSynchronize(c->stream));
    memcpy(dst, buf->ptr, n);
    return DM_OK;
  }
  if (src_dev == DM_CUDA && dst_dev == DM_CUDA) {
    DM_TRY(dm_gpu_context_get(dst_id, &c));
    if (src_id == dst_id)
      DM_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, c->stream));
    else
      DM_CUDA_TRY(cudaMemcpyPeerAsync(dst, dst_id, src, src_id, n, c->stream));
    return DM_OK;
  }
  return dm_error(DM_ERR_INVALID, "the CUDA backend cannot copy between device types %d and %d",
                  (int)src_dev, (int)dst_dev);
}

/* Which GPUs there are does not change while the process runs, and asking the driver
 * (device properties included) costs milliseconds; every CUDA op asks at instantiation,
 * so the answer is taken once. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probed_gpus;
static char probed_why[512];

static void probe(void) {
  dm_cuda_info info;
  dm_cuda_info_get(&info);
  probed_gpus = info.n_gpus;
  snprintf(probed_why, sizeof probed_why, "%s", info.n_gpus ? "" : info.why);
}

static int cuda_usable(int id, char *why, size_t cap) {
  pthread_once(&probe_once, probe);
  if (probed_gpus == 0) {
    snprintf(why, cap, "%s", probed_why);
    return 0;
  }
  if (id >= probed_gpus) {
    snprintf(why, cap, "there are %d usable GPUs (ids 0 to %d)", probed_gpus, probed_gpus - 1);
    return 0;
  }
  return 1;
}

static dm_status cuda_synchronize(int id) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_context_get(id, &c));
  DM_CUDA_TRY(cudaStreamSynchronize(c->stream));
  return DM_OK;
}

/* Uploads straight from page-locked host memory (core/device.h). The fence is an event
 * recorded on the uploading context's stream after the copy; an event belongs to one
 * device, so a buffer next uploaded to another GPU gets a new one (once the old one's
 * copy is done). Portable registration: any GPU may DMA from it. */
typedef struct cuda_fence {
  cudaEvent_t event;
  int device;
} cuda_fence;

/* A failure here is not fatal (core then stages the buffer), but the runtime would keep
 * it as this thread's last error, and the next kernel launch, which checks
 * cudaGetLastError, would report it as its own: so it is taken off. Likewise for the
 * calls whose errors are ignored below. */
static dm_status cuda_host_register(void *p, size_t n) {
  cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterPortable);
  if (e == cudaSuccess)
    return DM_OK;
  (void)cudaGetLastError();
  return dm_cuda_error(e, "cudaHostRegister");
}

static void cuda_host_unregister(void *p) {
  if (cudaHostUnregister(p) != cudaSuccess)
    (void)cudaGetLastError();
}

/* The DB input's prefetch thread waits here too: with the fence's device made current
 * first, so that the runtime does not set up a context on GPU 0 for that thread. */
static dm_status cuda_fence_wait(void *fence) {
  cuda_fence *f = fence;
  DM_CUDA_TRY(cudaSetDevice(f->device));
  DM_CUDA_TRY(cudaEventSynchronize(f->event));
  return DM_OK;
}

static void cuda_fence_free(void *fence) {
  cuda_fence *f = fence;
  if (cudaEventDestroy(f->event) != cudaSuccess) /* released once a pending record completes */
    (void)cudaGetLastError();
  free(f);
}

static dm_status cuda_upload_async(int id, void *dst, const void *src, size_t n, void **fence) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_context_get(id, &c)); /* makes device id current, for the event */
  cuda_fence *f = *fence;
  if (f && f->device != id) {
    DM_TRY(cuda_fence_wait(f));
    cuda_fence_free(f);
    *fence = f = NULL;
  }
  if (!f) {
    if (!(f = calloc(1, sizeof *f)))
      return DM_NOMEM("an upload fence");
    cudaError_t e = cudaEventCreateWithFlags(&f->event, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      free(f);
      return dm_cuda_error(e, "cudaEventCreateWithFlags");
    }
    f->device = id;
    *fence = f;
  }
  if (n == 0)
    return DM_OK;
  cudaStream_t s = c->upload_stream ? c->upload_stream : c->stream;
  DM_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
  DM_CUDA_TRY(cudaEventRecord(f->event, s));
  return DM_OK;
}

/* For plugin kernels (dm_op_cuda_stream and friends): the calling thread's context. */
static void *cuda_handle(int id, dm_device_handle which) {
  dm_gpu_context *c = NULL;
  if (dm_gpu_context_get(id, &c) != DM_OK)
    return NULL;
  switch (which) {
  case DM_HANDLE_STREAM: return (void *)c->stream;
  case DM_HANDLE_CUBLAS: return (void *)c->cublas;
  case DM_HANDLE_CUBLASLT: return (void *)c->cublaslt;
  case DM_HANDLE_CUDNN: return (void *)c->cudnn;
  }
  return NULL;
}

const dm_device_ops dm_cuda_device_ops = {
    .name = "CUDA",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .usable = cuda_usable,
    .synchronize = cuda_synchronize,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .upload_async = cuda_upload_async,
    .fence_wait = cuda_fence_wait,
    .fence_free = cuda_fence_free,
    .handle = cuda_handle,
    .capture_begin = dm_cuda_capture_begin,
    .capture_end = dm_cuda_capture_end,
    .graph_launch = dm_cuda_graph_launch,
    .graph_free = dm_cuda_graph_free,
    .private_epoch = dm_gpu_private_epoch,
};
