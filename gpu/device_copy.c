/* device_copy.c: the CUDA kernels of CopyCPUToGPU and CopyGPUToCPU (schemas in
 * operators/device_copy.c).
 *
 * Both copies run as GPU ops, as in Caffe2, and are cross_device: the executor lets
 * their input live on either side. The transfer itself is core's dm_tensor_copy_to,
 * which goes through memory.c's pinned staging (or DMA from page-locked host memory):
 * to the GPU it returns at once, to the host it waits for the stream, since the host
 * reads the result next.
 *
 * A host-to-device copy into another blob (the batch a training step uploads) is double
 * buffered, so that the upload leaves the critical path: it goes on the context's copy
 * stream into one of two device buffers in turn, and the compute stream waits for it
 * (an event) only where the step begins. While step k computes on one buffer, the host,
 * running ahead, queues step k+1's upload into the other, which the copy engine moves
 * at once. A buffer is written again only after the step that read it two runs ago is
 * done: an event recorded on the compute stream when the next run starts (by then that
 * step's ops are all queued) gates the upload into it. The output blob is a view of the
 * buffer (the schema's reused_outputs: the memory pass keeps it), so the step's device
 * graph (net/graph_exec.h) sees two addresses in turn and keeps a graph for each.
 * An in-place copy (CopyCPUToGPU(w) -> w, a weight moved once) goes the plain way.
 */
#include "context.h"
#include "kernels.h"

#include "core/tensor.h"
#include "core/workspace.h"

typedef struct to_gpu_state {
  dm_tensor *buf[2];
  int used[2];            /* handed out at least once */
  int released_set[2];    /* released[k] recorded since */
  cudaEvent_t released[2]; /* on the compute stream: the step that read buf[k] is queued before it */
  cudaEvent_t uploaded;   /* on the copy stream: the upload is done */
  cudaEvent_t queued;     /* on the compute stream: all work so far */
  int have_events;
  int next;
} to_gpu_state;

static void to_gpu_fini(void *state) {
  to_gpu_state *st = state;
  if (!st)
    return;
  dm_tensor_free(st->buf[0]);
  dm_tensor_free(st->buf[1]);
  if (st->have_events) { /* released once pending records complete */
    cudaEventDestroy(st->released[0]);
    cudaEventDestroy(st->released[1]);
    cudaEventDestroy(st->uploaded);
    cudaEventDestroy(st->queued);
  }
  free(st);
}

static dm_status to_gpu_init(dm_op_ctx *ctx, void **state) {
  to_gpu_state *st = calloc(1, sizeof *st);
  dm_workspace *ws = dm_op_workspace(ctx);
  if (st && ws) {
    st->buf[0] = dm_tensor_new(ws->tensor_limit);
    st->buf[1] = dm_tensor_new(ws->tensor_limit);
  }
  if (!st || !st->buf[0] || !st->buf[1]) {
    to_gpu_fini(st);
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the upload buffers");
  }
  *state = st;
  return DM_OK;
}

static dm_status make_events(to_gpu_state *st) {
  cudaEvent_t *e[] = {&st->released[0], &st->released[1], &st->uploaded, &st->queued};
  for (int k = 0; k < 4; k++)
    DM_CUDA_TRY(cudaEventCreateWithFlags(e[k], cudaEventDisableTiming));
  st->have_events = 1;
  return DM_OK;
}

/* The upload into buffer t on the copy stream, after `gate` (an event on the compute
 * stream); the compute stream then waits for it. */
static dm_status upload_into(dm_gpu_context *c, to_gpu_state *st, int t, const dm_tensor *x,
                             int id) {
  dm_tensor *b = st->buf[t];
  const void *before = b->storage ? b->storage->data : NULL;
  DM_TRY(dm_tensor_resize_on(b, DM_CUDA, id, x->dtype, x->ndim, x->dims));
  cudaStream_t cs;
  DM_TRY(dm_gpu_copy_stream(c, &cs));
  if (b->storage->data != before || !st->released_set[t]) {
    /* new memory (made in the compute stream's order) or a buffer never released:
     * after everything queued so far */
    DM_CUDA_TRY(cudaEventRecord(st->queued, c->stream));
    DM_CUDA_TRY(cudaStreamWaitEvent(cs, st->queued, 0));
  } else {
    DM_CUDA_TRY(cudaStreamWaitEvent(cs, st->released[t], 0));
  }
  c->upload_stream = cs;
  dm_status s = dm_tensor_copy_to(b, DM_CUDA, id, x);
  c->upload_stream = NULL;
  DM_TRY(s);
  DM_CUDA_TRY(cudaEventRecord(st->uploaded, cs));
  DM_CUDA_TRY(cudaStreamWaitEvent(c->stream, st->uploaded, 0));
  return DM_OK;
}

static dm_status to_gpu_run(dm_op_ctx *ctx) {
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  int id = dm_op_device_id(ctx);
  to_gpu_state *st = dm_op_state(ctx);
  if (x == y || dm_tensor_device(x, NULL) != DM_CPU || x->dtype == DM_UNDEFINED ||
      x->dtype == DM_STRING || !dm_tensor_is_plain(x))
    return dm_tensor_copy_to(y, DM_CUDA, id, x);
  dm_gpu_context *c;
  DM_TRY(dm_gpu_context_get(id, &c));
  if (!st->have_events)
    DM_TRY(make_events(st));
  int t = st->next, prev = 1 - t;
  if (st->used[prev]) { /* the step that read buf[prev] is queued by now */
    DM_CUDA_TRY(cudaEventRecord(st->released[prev], c->stream));
    st->released_set[prev] = 1;
  }
  DM_TRY(upload_into(c, st, t, x, id));
  st->used[t] = 1;
  st->next = prev;
  dm_tensor_reset(y);
  dm_tensor_share(y, st->buf[t]);
  return DM_OK;
}

static dm_status to_cpu_run(dm_op_ctx *ctx) {
  return dm_tensor_copy_to(dm_op_output(ctx, 0), DM_CPU, 0, dm_op_input(ctx, 0));
}

const dm_kernel_def dm_cuda_copy_kernels[] = {
    GPU_KERNEL("CopyCPUToGPU", NULL, .init = to_gpu_init, .run = to_gpu_run,
               .fini = to_gpu_fini, .cross_device = 1),
    GPU_KERNEL("CopyGPUToCPU", NULL, .run = to_cpu_run, .cross_device = 1),
    {0},
};
