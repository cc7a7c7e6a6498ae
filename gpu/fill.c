/* fill.c: the CUDA kernel (engine "") of ConstantFill. Its instantiation checks, output
 * dtype and element value are the CPU kernel's own (operators/fill.c, through common.h's
 * dm_constant_fill_*): the value's bit pattern is computed once per run on the host and
 * written by elementwise.cu's dmk_fill. The shape from an input's values
 * (input_as_shape) would need them on the host (a sync per run): not supported.
 */
#include "kernels.h"

/* The shape from X's values (input_as_shape) would need them on the host, a sync per
 * run: not this kernel's form (the device pass leaves it on the CPU). The rule is the
 * CPU kernel's own (operators/fill.c). */
static int constant_fill_supports(const dm_op_ctx *ctx) {
  const char *why = dm_fill_reads_input_values(ctx);
  return why ? dm_op_refuse(ctx, "%s", why) : 1;
}

static dm_status constant_fill_run(dm_op_ctx *ctx) {
  const char *why = dm_fill_reads_input_values(ctx);
  if (why)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "%s; run this ConstantFill on the CPU", why);
  DM_TRY(dm_op_run_infer(ctx));
  dm_tensor *y = OUT(0);
  uint64_t bits = 0;
  DM_TRY(dm_constant_fill_bits(ctx, y->dtype, " on CUDA", &bits));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_fill(s, MDATA(y), (int)dm_dtype_size(y->dtype), bits, y->numel));
  return DM_OK;
}

const dm_kernel_def dm_cuda_fill_kernels[] = {
    GPU_KERNEL("ConstantFill", "", .init = dm_constant_fill_init, .run = constant_fill_run,
               .supports = constant_fill_supports, GRAPH_SAFE),
    {0},
};
