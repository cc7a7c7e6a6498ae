/* conv_fusion_cudnn.c: the CUDA kernels of the training fusion's ops (operators/
 * conv_fusion.c): ConvFusion fusion_type 1 and ConvReluGradient on cuDNN (engine
 * "CUDNN", as Conv), FCFusion fusion_type 1 and FCReluGradient on cuBLAS (plain engine,
 * as FC).
 *
 * They run the Conv and FC kernels' own code (conv_cudnn.c, fc_cublas.c, through
 * kernels.h), so their semantics, descriptors and algorithm choices are those kernels':
 *   - ConvFusion: cuDNN's ConvolutionBiasActivationForward (relu, IMPLICIT_PRECOMP_GEMM,
 *     a zero bias of Y's dtype kept in the state when the op has none), one rounding of
 *     a 16-bit Y as on the CPU; with an FP32 bias of FP16 data, or BF16, the Conv kernel
 *     and then the elementwise relu.
 *   - FCFusion: the FC kernel, then the relu in place on its rounded Y (they commute).
 *   - ConvReluGradient, FCReluGradient: dY masked where Y > 0 by ReluGradient's kernel
 *     (elementwise.cu) into a temporary of dY's size, then the ConvGradient / FCGradient
 *     kernel on it; the temporary goes back to the stream-ordered pool after them (kept
 *     in the state, one per op, it would hold every layer's dY at once).
 * Only fusion_type 1 has a kernel here: the supports hook keeps ConvFusion's sum forms
 * (2, 3) on the CPU, with the reason.
 *
 * All four are GRAPH_SAFE as the Conv and FC kernels are (kernels.h): their work is on
 * the op's stream and depends on shapes only (the fused-or-fallback choice included);
 * the zero bias is sized at the first run of a shape and kept; the masked dY is
 * allocated and freed on the stream, which a graph records as its own nodes.
 */
#include <stdlib.h>
#include <string.h>

#include "cudnn_common.h"

/* ConvFusion fusion_type 1 with its relu (FCFusion has only it; its schema refuses
 * others). */
static int conv_fusion_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "fusion_type", 0) != 1)
    return dm_op_refuse(ctx, "the CUDA ConvFusion kernel runs fusion_type 1 (conv + relu) "
                        "only; the sum forms run on the CPU");
  const char *act = dm_op_arg_string(ctx, "activation", "Relu");
  if (strcmp(act, "Relu") != 0)
    return dm_op_refuse(ctx, "the CUDA ConvFusion kernel fuses Relu only, not %s; it runs "
                        "on the CPU", act);
  return 1;
}

static dm_status conv_fusion_run(dm_op_ctx *ctx) {
  return dm_cuda_conv_forward(ctx, dm_op_state(ctx), 1);
}

static dm_status fc_fusion_run(dm_op_ctx *ctx) {
  DM_TRY(dm_cuda_fc_forward(ctx));
  dm_tensor *y = OUT(0);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  if (y->numel)
    DM_CUDA_TRY(dmk_relu(s, y->dtype, DATA(y), MDATA(y), y->numel));
  return DM_OK;
}

/* ---- the gradients: the masked dY in the state -------------------------------------- */

typedef struct relu_grad_state {
  void *conv; /* conv_cudnn.c's state (ConvReluGradient), else NULL */
} relu_grad_state;

static void relu_grad_fini(void *state) {
  relu_grad_state *s = state;
  if (!s)
    return;
  dm_cuda_conv_fini(s->conv);
  free(s);
}

static dm_status relu_grad_init(dm_op_ctx *ctx, void **state, int conv) {
  *state = NULL;
  relu_grad_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for %s's state", dm_op_type(ctx));
  dm_status st = conv ? dm_cuda_conv_init(ctx, &s->conv) : DM_OK;
  if (st != DM_OK) {
    free(s);
    return st;
  }
  *state = s;
  return DM_OK;
}

static dm_status conv_relu_grad_init(dm_op_ctx *ctx, void **state) {
  return relu_grad_init(ctx, state, 1);
}

static dm_status fc_relu_grad_init(dm_op_ctx *ctx, void **state) {
  return relu_grad_init(ctx, state, 0);
}

/* dY (input 2) masked by Y (input 3) into a new temporary *mask (the caller frees it,
 * after queueing its readers: the free is stream-ordered). */
static dm_status mask_dy(dm_op_ctx *ctx, dm_tensor **mask) {
  DM_TRY(dm_op_run_infer(ctx)); /* Y checked against dY */
  const dm_tensor *dy = IN(2), *y = IN(3);
  if (!(*mask = dm_tensor_new(dy->limit)))
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the masked dY");
  DM_TRY(dm_tensor_resize_on(*mask, DM_CUDA, dm_op_device_id(ctx), dy->dtype, dy->ndim,
                             dy->dims));
  if (dy->numel) {
    cudaStream_t st;
    DM_TRY(dm_gpu_op_stream(ctx, &st));
    DM_CUDA_TRY(dmk_relu_grad(st, dy->dtype, DATA(y), DATA(dy), MDATA(*mask), dy->numel));
  }
  return DM_OK;
}

static dm_status conv_relu_grad_run(dm_op_ctx *ctx) {
  relu_grad_state *s = dm_op_state(ctx);
  dm_tensor *mask = NULL;
  dm_status st = mask_dy(ctx, &mask);
  if (st == DM_OK)
    st = dm_cuda_conv_backward(ctx, s->conv, DATA(mask));
  dm_tensor_free(mask);
  return st;
}

static dm_status fc_relu_grad_run(dm_op_ctx *ctx) {
  dm_tensor *mask = NULL;
  dm_status st = mask_dy(ctx, &mask);
  if (st == DM_OK)
    st = dm_cuda_fc_backward(ctx, DATA(mask));
  dm_tensor_free(mask);
  return st;
}

const dm_kernel_def dm_cuda_conv_fusion_kernels[] = {
    GPU_KERNEL("ConvFusion", "CUDNN", .init = dm_cuda_conv_init, .run = conv_fusion_run,
               .fini = dm_cuda_conv_fini, .supports = conv_fusion_supports, GRAPH_SAFE),
    GPU_KERNEL("ConvReluGradient", "CUDNN", .init = conv_relu_grad_init,
               .run = conv_relu_grad_run, .fini = relu_grad_fini, GRAPH_SAFE),
    GPU_KERNEL("FCFusion", "", .run = fc_fusion_run, GRAPH_SAFE),
    GPU_KERNEL("FCReluGradient", "", .init = fc_relu_grad_init, .run = fc_relu_grad_run,
               .fini = relu_grad_fini, GRAPH_SAFE),
    {0},
};
