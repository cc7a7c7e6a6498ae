/* masked_softmax.c: the CUDA kernels (engine "") of MaskedSoftmax and
 * MaskedSoftmaxGradient, FLOAT, FLOAT16 or BFLOAT16; the checks are the schema's and the
 * row geometry the CPU kernel's (operators/masked_softmax.h), the device code
 * masked_softmax.cu.
 */
#include <string.h>

#include "kernels.h"
#include "operators/masked_softmax.h"

/* X [, mask] -> Y */
static dm_status ms_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0), *m = dm_op_num_inputs(ctx) == 2 ? IN(1) : NULL;
  dmk_mask_geom g;
  memset(&g, 0, sizeof g);
  dm_masked_softmax_geom(x, m, &g.nd, g.lead, g.mstride);
  const int64_t Tq = x->dims[x->ndim - 2], Tk = x->dims[x->ndim - 1];
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_masked_softmax(s, x->dtype, DATA(x), m ? DATA(m) : NULL, m ? m->dtype : 0, g,
                                 MDATA(OUT(0)), dm_op_arg_float(ctx, "scale", 1.0f),
                                 dm_op_arg_int(ctx, "causal", 0) != 0,
                                 Tk ? x->numel / Tk : 0, Tq, Tk));
  return DM_OK;
}

/* Y, dY -> dX */
static dm_status ms_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *y = IN(0);
  const int64_t Tk = y->dims[y->ndim - 1];
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_masked_softmax_grad(s, y->dtype, DATA(y), DATA(IN(1)), MDATA(OUT(0)),
                                      dm_op_arg_float(ctx, "scale", 1.0f),
                                      Tk ? y->numel / Tk : 0, Tk));
  return DM_OK;
}

const dm_kernel_def dm_cuda_masked_softmax_kernels[] = {
    GPU_KERNEL("MaskedSoftmax", "", .run = ms_run, GRAPH_SAFE),
    GPU_KERNEL("MaskedSoftmaxGradient", "", .run = ms_grad_run, GRAPH_SAFE),
    {0},
};
