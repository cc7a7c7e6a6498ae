/* graph.c: the CUDA backend's device graphs (core/device.h's capture hooks; the executor's
 * side is net/graph_exec.c): stream capture on this thread's context stream, a graph
 * instantiated once, replayed with cudaGraphLaunch.
 *
 * Capture mode is thread-local: a call that would be unsafe while recording (a
 * synchronising cudaMalloc, a host wait) fails the capture, which the executor turns
 * into running op by op with the reason, rather than recording something that replays
 * wrongly. Allocations the ops make through the stream-ordered pool (cudaMallocAsync /
 * cudaFreeAsync, gpu/memory.c) become the graph's own allocation and free nodes; a block
 * allocated and not freed within the graph is freed again at the next launch
 * (AutoFreeOnLaunch), so a graph can always be relaunched. Those blocks come from the
 * graphs' memory, whose physical pages CUDA may share among graphs launched in order on
 * one stream (the two graphs of a double-buffered input need not double the footprint:
 * to be measured); once a graph exists, the default pool is trimmed of what the runs
 * before it cached.
 */
#include "context.h"
#include "kernels.h"

dm_status dm_cuda_capture_begin(int id) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_context_get(id, &c));
  DM_CUDA_TRY(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
  return DM_OK;
}

dm_status dm_cuda_capture_end(int id, void **graph, long *nodes) {
  *graph = NULL;
  *nodes = 0;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_context_get(id, &c));
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamEndCapture(c->stream, &g);
  if (e != cudaSuccess) {
    if (g)
      cudaGraphDestroy(g);
    (void)cudaGetLastError(); /* not the next kernel's error */
    return dm_cuda_error(e, "cudaStreamEndCapture");
  }
  size_t n = 0;
  e = cudaGraphGetNodes(g, NULL, &n);
  cudaGraphExec_t x = NULL;
  if (e == cudaSuccess)
    e = cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return dm_cuda_error(e, "cudaGraphInstantiateWithFlags");
  }
  /* From now on the graph's own pool holds a step's blocks; what the op-by-op runs
   * before it left cached in the device's default pool (its release threshold is raised:
   * memory.c) would otherwise stay reserved beside it, doubling the step's footprint. */
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, id) != cudaSuccess ||
      cudaMemPoolTrimTo(pool, 0) != cudaSuccess)
    (void)cudaGetLastError(); /* only a saving missed */
  *graph = x;
  *nodes = (long)n;
  return DM_OK;
}

dm_status dm_cuda_graph_launch(int id, void *graph) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_context_get(id, &c));
  DM_CUDA_TRY(cudaGraphLaunch((cudaGraphExec_t)graph, c->stream));
  return DM_OK;
}

void dm_cuda_graph_free(int id, void *graph) {
  dm_gpu_context *c;
  /* a replay still queued may be running it: destroy after the stream's work */
  if (dm_gpu_context_get(id, &c) == DM_OK)
    (void)cudaStreamSynchronize(c->stream);
  if (cudaGraphExecDestroy((cudaGraphExec_t)graph) != cudaSuccess)
    (void)cudaGetLastError();
}
