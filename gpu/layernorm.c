/* layernorm.c: the CUDA kernels (engine "") of LayerNorm and LayerNormGradient, X FLOAT,
 * FLOAT16 or BFLOAT16 with FP32 gamma, beta and statistics; the checks are the schema's
 * (operators/layernorm.c), the device code layernorm.cu (FP32 statistics, one rounding
 * per output).
 */
#include "kernels.h"

/* X as N x D at `axis` (the CPU's view; the schema's checks have passed). */
static dm_status ln_view(dm_op_ctx *ctx, const dm_tensor *x, int64_t *N, int64_t *D) {
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  *N = dm_dims_product(x, 0, axis), *D = dm_dims_product(x, axis, x->ndim);
  return DM_OK;
}

/* X [, gamma, beta] -> Y, mean, std */
static dm_status ln_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  const int affine = dm_op_num_inputs(ctx) == 3;
  int64_t N, D;
  DM_TRY(ln_view(ctx, x, &N, &D));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_layernorm(s, x->dtype, DATA(x), affine ? DATA(IN(1)) : NULL,
                            affine ? DATA(IN(2)) : NULL, MDATA(OUT(0)), MDATA(OUT(1)),
                            MDATA(OUT(2)), dm_op_arg_float(ctx, "epsilon", 1e-5f), N, D));
  return DM_OK;
}

/* dY, Y, mean, std, X [, gamma] -> dX [, dgamma, dbeta] */
static dm_status ln_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(4);
  const int affine = dm_op_num_inputs(ctx) == 6;
  int64_t N, D;
  DM_TRY(ln_view(ctx, x, &N, &D));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_layernorm_grad(s, x->dtype, DATA(IN(0)), DATA(x), DATA(IN(2)), DATA(IN(3)),
                                 affine ? DATA(IN(5)) : NULL, MDATA(OUT(0)),
                                 affine ? MDATA(OUT(1)) : NULL, affine ? MDATA(OUT(2)) : NULL,
                                 N, D));
  return DM_OK;
}

const dm_kernel_def dm_cuda_layernorm_kernels[] = {
    GPU_KERNEL("LayerNorm", "", .run = ln_run, GRAPH_SAFE),
    GPU_KERNEL("LayerNormGradient", "", .run = ln_grad_run, GRAPH_SAFE),
    {0},
};
