/* dropout.c: the CUDA kernels (engine "") of Dropout and DropoutGrad; the device code is
 * dropout.cu.
 *
 * The mask is operators/dropout.c's counter-based hash of (seed, output name, run,
 * index), computed on the device from a key made by the CPU kernel's own host code
 * (operators/dropout.h: the same state, init and per-run key), so for the same op (same
 * seed, same first output name) and run the GPU's mask is the CPU's bit for bit.
 */
#include "kernels.h"
#include "operators/dropout.h"

/* is_test: Y = X (a copy unless in place). */
static dm_status copy_through(cudaStream_t s, const dm_tensor *x, dm_tensor *y) {
  if (x->numel && DATA(x) != DATA(y))
    DM_CUDA_TRY(cudaMemcpyAsync(MDATA(y), DATA(x), dm_tensor_nbytes(x), cudaMemcpyDeviceToDevice,
                                s));
  return DM_OK;
}

static dm_status dropout_run(dm_op_ctx *ctx) { /* X -> Y, [mask] */
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  const int64_t n = x->numel;
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  if (dm_op_arg_int(ctx, "is_test", 0)) {
    DM_TRY(copy_through(s, x, y));
    if (dm_op_num_outputs(ctx) > 1 && n) /* a mask, if asked for, keeps everything */
      DM_CUDA_TRY(cudaMemsetAsync(MDATA(OUT(1)), 1, (size_t)n, s));
    return DM_OK;
  }
  float ratio;
  DM_TRY(dm_dropout_ratio(ctx, &ratio));
  const uint64_t key = dm_dropout_next_key(dm_op_state(ctx));
  DM_CUDA_TRY(dmk_dropout(s, x->dtype, DATA(x), MDATA(y), MDATA(OUT(1)), key, ratio,
                          dm_dropout_keep_scale(ratio), n));
  return DM_OK;
}

static dm_status dropout_grad_run(dm_op_ctx *ctx) { /* dY, [mask] -> dX */
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *dy = IN(0);
  dm_tensor *dx = OUT(0);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  if (dm_op_arg_int(ctx, "is_test", 0))
    return copy_through(s, dy, dx);
  float ratio;
  DM_TRY(dm_dropout_ratio(ctx, &ratio));
  DM_CUDA_TRY(dmk_dropout_grad(s, dy->dtype, DATA(dy), DATA(IN(1)), MDATA(dx),
                               dm_dropout_keep_scale(ratio), dy->numel));
  return DM_OK;
}

const dm_kernel_def dm_cuda_dropout_kernels[] = {
    GPU_KERNEL("Dropout", "", .init = dm_dropout_init, .run = dropout_run,
               .fini = dm_dropout_fini),
    GPU_KERNEL("DropoutGrad", "", .run = dropout_grad_run, GRAPH_SAFE),
    {0},
};
