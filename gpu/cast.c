/* cast.c: the CUDA kernels (engine "") of FloatToHalf, HalfToFloat, Cast, CastLike and
 * Copy, with operators/cast.c's conversion rules (the device code is elementwise.cu's
 * dmk_cast). Cast's target dtype is the CPU kernel's, resolved once at instantiation by
 * the same init (dm_cast_init). Each run first runs the op's schema inference (the CPU's
 * checks, outputs allocated on the op's GPU).
 *
 * A cast in place to another element size computes into the context's scratch, then
 * resizes the output and copies: every step is stream-ordered, so the input's old storage
 * is read before it is freed.
 */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* X into Y as dtype `to` (infer has run). In place with another element size the result
 * is built in scratch first: the resize would replace storage still to be read. */
static dm_status cast_to(dm_op_ctx *ctx, dm_dtype to) {
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  const int64_t n = x->numel;
  const dm_dtype from = x->dtype;
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  if (dm_tensors_alias(y, x) && dm_dtype_size(to) != dm_dtype_size(from)) {
    const size_t bytes = (size_t)n * dm_dtype_size(to);
    void *tmp;
    DM_TRY(dm_gpu_op_scratch(ctx, bytes, &tmp));
    DM_CUDA_TRY(dmk_cast(s, from, to, DATA(x), tmp, n));
    return dm_gpu_output_from_scratch(ctx, to, x, tmp, bytes, s);
  }
  if (from == to) {
    if (n && DATA(x) != DATA(y))
      DM_CUDA_TRY(cudaMemcpyAsync(MDATA(y), DATA(x), (size_t)n * dm_dtype_size(to),
                                  cudaMemcpyDeviceToDevice, s));
    return DM_OK;
  }
  DM_CUDA_TRY(dmk_cast(s, from, to, DATA(x), MDATA(y), n));
  return DM_OK;
}

static dm_status float_to_half_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return cast_to(ctx, DM_FLOAT16);
}

static dm_status half_to_float_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return cast_to(ctx, DM_FLOAT);
}

static dm_status cast_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return cast_to(ctx, (dm_dtype)(intptr_t)dm_op_state(ctx)); /* dm_cast_init's `to` */
}

static dm_status cast_like_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return cast_to(ctx, IN(1)->dtype);
}

static dm_status copy_run(dm_op_ctx *ctx) {
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  if (dm_tensors_alias(y, x)) /* a view of X: make Y its own copy */
    dm_tensor_reset(y);
  if (x->dtype == DM_STRING)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "cannot copy a STRING tensor on CUDA");
  DM_TRY(dm_op_run_infer(ctx));
  const size_t bytes = dm_tensor_nbytes(x);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  if (bytes)
    DM_CUDA_TRY(cudaMemcpyAsync(MDATA(y), DATA(x), bytes, cudaMemcpyDeviceToDevice, s));
  return DM_OK;
}

const dm_kernel_def dm_cuda_cast_kernels[] = {
    GPU_KERNEL("FloatToHalf", "", .run = float_to_half_run, GRAPH_SAFE),
    GPU_KERNEL("HalfToFloat", "", .run = half_to_float_run, GRAPH_SAFE),
    GPU_KERNEL("Cast", "", .init = dm_cast_init, .run = cast_run, GRAPH_SAFE),
    GPU_KERNEL("CastLike", "", .run = cast_like_run, GRAPH_SAFE),
    GPU_KERNEL("Copy", "", .run = copy_run, GRAPH_SAFE),
    {0},
};
