/* loss.c: the CUDA kernels (engine "") of SoftmaxWithLoss (logits FLOAT or FLOAT16),
 * LabelCrossEntropy, AveragedLoss, their gradients, and Accuracy; FP32 otherwise. The
 * device code is loss.cu; the row geometry is operators/loss.h's, as on the CPU.
 *
 * A label outside [0, D), which the CPU reports as an error, lives on the device here;
 * reading it would cost a host sync per step, so it makes the row's loss, gradient or
 * accuracy NaN instead.
 */
#include "kernels.h"
#include "operators/loss.h"

/* The CUDA kernels take FLOAT or FLOAT16 logits and count every row: ignore_label and
 * BF16 logits stay on the CPU kernel, which runs them. */
static int swl_supports(const dm_op_ctx *ctx) {
  if (dm_op_has_arg(ctx, "ignore_label"))
    return dm_op_refuse(ctx, "ignore_label has no CUDA kernel yet");
  if (dm_op_input_dtype(ctx, 0) == DM_BFLOAT16)
    return dm_op_refuse(ctx, "BFLOAT16 logits have no CUDA kernel yet");
  return 1;
}

/* logits, labels, [weights] -> softmax, avg_loss */
static dm_status swl_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0), *l = IN(1);
  const int has_w = dm_op_num_inputs(ctx) == 3, prob = dm_op_arg_int(ctx, "label_prob", 0) != 0;
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, x, dm_op_arg_int(ctx, "axis", 1), &N, &D));
  double *rowloss;
  DM_TRY(dm_gpu_op_scratch(ctx, (size_t)N * sizeof(double), (void **)&rowloss));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_softmax_loss(s, x->dtype, DATA(x), prob ? NULL : DATA(l), prob ? DATA(l) : NULL,
                               has_w ? DATA(IN(2)) : NULL, MDATA(OUT(0)), rowloss, MDATA(OUT(1)),
                               dm_op_arg_float(ctx, "scale", 1.0f), N, D));
  return DM_OK;
}

/* logits, labels, [weights], softmax, d_avg_loss -> dX */
static dm_status swl_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const int n = dm_op_num_inputs(ctx), has_w = n == 5;
  const int prob = dm_op_arg_int(ctx, "label_prob", 0) != 0;
  const dm_tensor *x = IN(0), *l = IN(1);
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, x, dm_op_arg_int(ctx, "axis", 1), &N, &D));
  double *kbuf;
  DM_TRY(dm_gpu_op_scratch(ctx, sizeof(double), (void **)&kbuf));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_softmax_loss_grad(s, x->dtype, prob ? NULL : DATA(l), prob ? DATA(l) : NULL,
                                    has_w ? DATA(IN(2)) : NULL, DATA(IN(n - 2)), DATA(IN(n - 1)),
                                    kbuf, MDATA(OUT(0)), dm_op_arg_float(ctx, "scale", 1.0f), N,
                                    D));
  return DM_OK;
}

static dm_status lce_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, IN(0), 1, &N, &D));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_label_xent(s, DATA(IN(0)), DATA(IN(1)), MDATA(OUT(0)), N, D));
  return DM_OK;
}

static dm_status lce_grad_run(dm_op_ctx *ctx) { /* X, label, dY -> dX */
  DM_TRY(dm_op_run_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, IN(0), 1, &N, &D));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_label_xent_grad(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), MDATA(OUT(0)), N, D));
  return DM_OK;
}

static dm_status avg_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_averaged_loss(s, DATA(IN(0)), MDATA(OUT(0)), IN(0)->numel));
  return DM_OK;
}

static dm_status avg_grad_run(dm_op_ctx *ctx) { /* X, dY -> dX */
  DM_TRY(dm_op_run_infer(ctx));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_averaged_loss_grad(s, DATA(IN(1)), MDATA(OUT(0)), IN(0)->numel));
  return DM_OK;
}

/* The CUDA kernel counts every row: ignore_label (a masked LM's accuracy) stays on the CPU
 * kernel, as SoftmaxWithLoss's does. */
static int accuracy_supports(const dm_op_ctx *ctx) {
  if (dm_op_has_arg(ctx, "ignore_label"))
    return dm_op_refuse(ctx, "ignore_label has no CUDA kernel yet");
  return 1;
}

static dm_status accuracy_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, IN(0), 1, &N, &D));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_accuracy(s, DATA(IN(0)), DATA(IN(1)), MDATA(OUT(0)),
                           dm_op_arg_int(ctx, "top_k", 1), N, D));
  return DM_OK;
}

const dm_kernel_def dm_cuda_loss_kernels[] = {
    GPU_KERNEL("SoftmaxWithLoss", "", .run = swl_run, .supports = swl_supports, GRAPH_SAFE),
    GPU_KERNEL("SoftmaxWithLossGradient", "", .run = swl_grad_run, .supports = swl_supports,
               GRAPH_SAFE),
    GPU_KERNEL("LabelCrossEntropy", "", .run = lce_run, GRAPH_SAFE),
    GPU_KERNEL("LabelCrossEntropyGradient", "", .run = lce_grad_run, GRAPH_SAFE),
    GPU_KERNEL("AveragedLoss", "", .run = avg_run, GRAPH_SAFE),
    GPU_KERNEL("AveragedLossGradient", "", .run = avg_grad_run, GRAPH_SAFE),
    GPU_KERNEL("Accuracy", "", .run = accuracy_run, .supports = accuracy_supports,
               GRAPH_SAFE),
    {0},
};
