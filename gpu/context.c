/* context.c: per-thread, per-device GPU contexts (see context.h). */
#include "context.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/tensor.h"
#include "demitasse_plugin.h"
#include "device_info.h"

/* The contexts of one thread, one slot per device; freed by the key's destructor when
 * the thread exits. */
typedef struct context_set {
  dm_gpu_context *dev[DM_MAX_GPUS];
} context_set;

static pthread_key_t set_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void context_destroy(dm_gpu_context *c) {
  if (!c)
    return;
  cudaSetDevice(c->device);
  if (c->stream)
    cudaStreamSynchronize(c->stream); /* nothing may still use what is freed below */
  if (c->scratch)
    cudaFree(c->scratch);
  if (c->cublas_ws)
    cudaFree(c->cublas_ws);
  for (int i = 0; i < DM_GPU_STAGING; i++) {
    if (c->staging[i].ptr)
      cudaFreeHost(c->staging[i].ptr);
    if (c->staging[i].sent)
      cudaEventDestroy(c->staging[i].sent);
  }
  if (c->cudnn)
    cudnnDestroy(c->cudnn);
  if (c->cublaslt)
    cublasLtDestroy(c->cublaslt);
  if (c->cublas)
    cublasDestroy(c->cublas);
  if (c->copy_stream) {
    cudaStreamSynchronize(c->copy_stream);
    cudaStreamDestroy(c->copy_stream);
  }
  if (c->stream)
    cudaStreamDestroy(c->stream);
  free(c);
}

static void set_destroy(void *p) {
  context_set *set = p;
  for (int i = 0; i < DM_MAX_GPUS; i++)
    context_destroy(set->dev[i]);
  free(set);
}

static void make_key(void) { key_ok = pthread_key_create(&set_key, set_destroy) == 0; }

dm_status dm_cuda_error(cudaError_t e, const char *call) {
  return dm_error(DM_ERR_DEVICE, "%s: %s (%s, %d)", call, cudaGetErrorString(e),
                  cudaGetErrorName(e), (int)e);
}

dm_status dm_cublas_error(cublasStatus_t e, const char *call) {
  return dm_error(DM_ERR_DEVICE, "%s: %s (%s)", call, cublasGetStatusString(e),
                  cublasGetStatusName(e));
}

dm_status dm_cudnn_error(cudnnStatus_t e, const char *call) {
  return dm_error(DM_ERR_DEVICE, "%s: %s", call, cudnnGetErrorString(e));
}

/* The library handles, bound to the context's stream. */
static dm_status create_handles(dm_gpu_context *c) {
  DM_CUBLAS_TRY(cublasCreate(&c->cublas));
  DM_CUBLAS_TRY(cublasSetStream(c->cublas, c->stream));
  /* FP32 GEMMs stay FP32 (no TF32), so they match the CPU at FP32 tolerance; FP16
   * GEMMs with FP32 compute use tensor cores whatever the math mode. */
  DM_CUBLAS_TRY(cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH));
  /* cuBLAS's own workspace, given rather than left to cuBLAS to allocate when it first
   * needs one: an allocation then, during a graph capture, would fail the capture. */
  DM_CUDA_TRY(cudaMalloc(&c->cublas_ws, DM_CUBLAS_WORKSPACE));
  DM_CUBLAS_TRY(cublasSetWorkspace(c->cublas, c->cublas_ws, DM_CUBLAS_WORKSPACE));
  DM_CUBLAS_TRY(cublasLtCreate(&c->cublaslt));
  DM_CUDNN_TRY(cudnnCreate(&c->cudnn));
  DM_CUDNN_TRY(cudnnSetStream(c->cudnn, c->stream));
  return DM_OK;
}

static dm_status context_create(int device, dm_gpu_context **out) {
  dm_gpu_context *c = calloc(1, sizeof *c);
  if (!c)
    return DM_NOMEM("a GPU context");
  c->device = device;
  dm_status s = DM_OK;
  cudaError_t e;
  if ((e = cudaSetDevice(device)) != cudaSuccess)
    s = dm_cuda_error(e, "cudaSetDevice");
  else if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
    s = dm_cuda_error(e, "cudaStreamCreateWithFlags");
  for (int i = 0; s == DM_OK && i < DM_GPU_STAGING; i++)
    if ((e = cudaEventCreateWithFlags(&c->staging[i].sent, cudaEventDisableTiming)) !=
        cudaSuccess)
      s = dm_cuda_error(e, "cudaEventCreateWithFlags");
  if (s == DM_OK)
    s = create_handles(c);
  if (s != DM_OK) {
    context_destroy(c);
    return dm_error_prefix(s, "creating the context of CUDA:%d", device);
  }
  *out = c;
  return DM_OK;
}

dm_status dm_gpu_context_get(int device, dm_gpu_context **out) {
  if (device < 0 || device >= DM_MAX_GPUS)
    return dm_error(DM_ERR_INVALID, "CUDA device id %d is out of range", device);
  pthread_once(&key_once, make_key);
  if (!key_ok)
    return dm_error(DM_ERR_NOMEM, "no thread key for GPU contexts");
  context_set *set = pthread_getspecific(set_key);
  if (!set) {
    if (!(set = calloc(1, sizeof *set)))
      return DM_NOMEM("the GPU context table");
    if (pthread_setspecific(set_key, set) != 0) {
      free(set);
      return DM_NOMEM("the GPU context table");
    }
  }
  if (!set->dev[device]) {
    DM_TRY(dm_device_check(DM_CUDA, device));
    DM_TRY(context_create(device, &set->dev[device]));
  }
  /* kernels and library calls go to this device's stream: make it current */
  DM_CUDA_TRY(cudaSetDevice(device));
  *out = set->dev[device];
  return DM_OK;
}

void dm_gpu_note_private_realloc(dm_gpu_context *c) { c->private_epoch++; }

unsigned long dm_gpu_private_epoch(int device) {
  if (device < 0 || device >= DM_MAX_GPUS)
    return 0;
  pthread_once(&key_once, make_key);
  if (!key_ok)
    return 0;
  const context_set *set = pthread_getspecific(set_key);
  return set && set->dev[device] ? set->dev[device]->private_epoch : 0;
}

dm_status dm_gpu_copy_stream(dm_gpu_context *c, cudaStream_t *out) {
  if (!c->copy_stream)
    DM_CUDA_TRY(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
  *out = c->copy_stream;
  return DM_OK;
}

dm_status dm_gpu_scratch(dm_gpu_context *c, size_t n, void **out) {
  if (n > c->scratch_bytes) {
    /* Recorded into a device graph, the swap would free memory the graph did not
     * allocate (the capture then fails anyway): say why instead. Graphs recorded before
     * point into the old buffer: the epoch keeps them from being replayed. */
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(c->stream, &cap) == cudaSuccess &&
        cap != cudaStreamCaptureStatusNone)
      return dm_error(DM_ERR_DEVICE, "the GPU scratch must grow to %zu bytes while a graph is "
                                     "being recorded",
                      n);
    dm_gpu_note_private_realloc(c);
    /* stream-ordered: the old buffer is released after the work queued before it */
    if (c->scratch)
      DM_CUDA_TRY(cudaFreeAsync(c->scratch, c->stream));
    c->scratch = NULL;
    c->scratch_bytes = 0;
    DM_CUDA_TRY(cudaMallocAsync(&c->scratch, n, c->stream));
    c->scratch_bytes = n;
  }
  *out = c->scratch;
  return DM_OK;
}

dm_status dm_gpu_op_context(dm_op_ctx *ctx, dm_gpu_context **out) {
  dm_status s = dm_gpu_context_get(dm_op_device_id(ctx), out);
  return s == DM_OK ? DM_OK : dm_error_prefix(s, "the op's GPU");
}

dm_status dm_gpu_op_stream(dm_op_ctx *ctx, cudaStream_t *s) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  *s = c->stream;
  return DM_OK;
}

dm_status dm_gpu_op_scratch(dm_op_ctx *ctx, size_t n, void **p) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  return dm_gpu_scratch(c, n ? n : 1, p);
}

dm_status dm_gpu_output_from_scratch(dm_op_ctx *ctx, dm_dtype t, const dm_tensor *like,
                                     const void *tmp, size_t bytes, cudaStream_t s) {
  int64_t dims[DM_MAX_DIMS];
  const int ndim = like->ndim;
  memcpy(dims, like->dims, sizeof dims);
  DM_TRY(dm_op_set_output(ctx, 0, t, ndim, dims));
  if (bytes)
    DM_CUDA_TRY(cudaMemcpyAsync(dm_tensor_mutable_data(dm_op_output(ctx, 0)), tmp, bytes,
                                cudaMemcpyDeviceToDevice, s));
  return DM_OK;
}
