/* elementwise.c: the CUDA kernels (engine "") of the elementwise ops: Add, Sub, Mul, Div
 * (equal shapes and the legacy broadcast; numpy's broadcast is refused at run time), Sum,
 * Scale, SumReduceLike, Relu and ReluGradient, and the activations of
 * operators/unary_family.h and their gradients (a kernel per row, with the CPU kernels'
 * init, which resolves the kind and arguments once, and their checks through
 * operators/unary_math.h). The device code is elementwise.cu.
 *
 * Every run function first runs the op's schema inference (dm_op_run_infer: the CPU
 * kernels' own checks, outputs allocated on the op's GPU), then launches on the calling
 * thread's context stream. Semantics are the CPU kernels' (operators/elementwise.c,
 * activation.c, unary_math.c), except that an integer x / 0 gives 0 instead of an error (the divisor
 * lives on the device; reading it would cost a host sync per step).
 *
 * SumReduceLike in place on A (its output is smaller) computes into the context's
 * scratch, then resizes the output and copies: every step is stream-ordered, so A's old
 * storage is read before it is freed.
 */
#include <string.h>

#include "kernels.h"
#include "operators/broadcast.h"
#include "operators/unary_math.h"

/* ---- Add / Sub / Mul / Div, Sum, Scale, SumReduceLike ----------------------------- */

static dm_status binary_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *a = IN(0), *b = IN(1);
  if (dm_op_arg_int(ctx, "broadcast", 0) == 0 && !dm_tensor_same_shape(a, b)) {
    char as[96], bs[96];
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "A is %s and B is %s: the CUDA kernel runs equal shapes and the legacy "
                       "broadcast (broadcast=1) only; numpy's broadcast runs on the CPU",
                       dm_shape_str(a, as, sizeof as), dm_shape_str(b, bs, sizeof bs));
  }
  dm_bcast g;
  DM_TRY(dm_bcast_from_args(ctx, a, b, &g));
  const char *t = dm_op_type(ctx);
  int op = t[0] == 'A' ? DMK_ADD : t[0] == 'S' ? DMK_SUB : t[0] == 'M' ? DMK_MUL : DMK_DIV;
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_binary(s, op, a->dtype, DATA(a), DATA(b), MDATA(OUT(0)), g.pre, g.n, g.post));
  return DM_OK;
}

/* Up to DMK_MAX_TERMS inputs per launch, in input order; 16-bit sums of more inputs keep
 * their FP32 running sum in scratch so that they are rounded once. */
static dm_status sum_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const int nin = dm_op_num_inputs(ctx);
  const dm_tensor *x0 = IN(0);
  const int64_t n = x0->numel;
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  float *acc = NULL;
  if (dm_is_reduced_float(x0->dtype) && nin > DMK_MAX_TERMS)
    DM_TRY(dm_gpu_op_scratch(ctx, (size_t)n * sizeof(float), (void **)&acc));
  void *y = MDATA(OUT(0));
  for (int j0 = 0; j0 < nin; j0 += DMK_MAX_TERMS) {
    const void *x[DMK_MAX_TERMS];
    int k = nin - j0 < DMK_MAX_TERMS ? nin - j0 : DMK_MAX_TERMS;
    for (int j = 0; j < k; j++)
      x[j] = DATA(IN(j0 + j));
    DM_CUDA_TRY(dmk_sum(s, x0->dtype, x, k, j0 == 0, j0 + k == nin, acc, y, n));
  }
  return DM_OK;
}

static dm_status scale_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_scale(s, x->dtype, DATA(x), MDATA(OUT(0)), dm_op_arg_float(ctx, "scale", 1.0f),
                        x->numel));
  return DM_OK;
}

static dm_status reduce_like_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *a = IN(0), *b = IN(1);
  dm_tensor *c = OUT(0);
  dm_bcast g; /* numpy's rule (no `axis`) is the legacy one where the legacy applies */
  if (dm_bcast_legacy(ctx, a, b, 1, dm_op_arg_int(ctx, "axis", -1), &g) != DM_OK)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "the CUDA SumReduceLike runs the legacy broadcast only (B's dims, "
                       "without leading and trailing 1s, a run of A's); this numpy broadcast "
                       "runs on the CPU");
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  const dm_dtype t = a->dtype;
  if (!dm_tensors_alias(c, a)) { /* infer has sized C */
    DM_CUDA_TRY(dmk_sum_reduce_like(s, t, DATA(a), MDATA(c), g.pre, g.n, g.post));
    return DM_OK;
  }
  /* In place on A: reduce aside, then C takes B's shape (A has been read by then). */
  const size_t bytes = (size_t)g.n * dm_dtype_size(t);
  void *tmp;
  DM_TRY(dm_gpu_op_scratch(ctx, bytes, &tmp));
  DM_CUDA_TRY(dmk_sum_reduce_like(s, t, DATA(a), tmp, g.pre, g.n, g.post));
  return dm_gpu_output_from_scratch(ctx, t, b, tmp, bytes, s);
}

/* ---- Relu ------------------------------------------------------------------------ */

static dm_status relu_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_relu(s, x->dtype, DATA(x), MDATA(OUT(0)), x->numel));
  return DM_OK;
}

static dm_status relu_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *y = IN(0), *dy = IN(1);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_relu_grad(s, y->dtype, DATA(y), DATA(dy), MDATA(OUT(0)), y->numel));
  return DM_OK;
}

/* ---- the activations of operators/unary_family.h ----------------------------------- */

/* The state is the CPU kernels' (dm_unary_init: the kind and arguments, resolved once). */
static dm_status unary_run(dm_op_ctx *ctx) {
  const dm_unary_op *u = dm_op_state(ctx);
  DM_TRY(dm_unary_check(ctx, u));
  const dm_tensor *x = IN(0);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_unary(s, x->dtype, u->kind, u->p, DATA(x), MDATA(OUT(0)), x->numel));
  return DM_OK;
}

static dm_status unary_grad_run(dm_op_ctx *ctx) {
  const dm_unary_op *u = dm_op_state(ctx);
  DM_TRY(dm_unary_check(ctx, u));
  const dm_tensor *sv = IN(0), *dy = IN(1);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_unary_grad(s, sv->dtype, u->kind, u->p, DATA(sv), DATA(dy), MDATA(OUT(0)),
                             sv->numel));
  return DM_OK;
}

#define UNARY_KERNEL_(Name, ...)                                                            \
  GPU_KERNEL(#Name, "", .init = dm_unary_init, .run = unary_run, .fini = dm_unary_fini,     \
             GRAPH_SAFE),
#define UNARY_GRAD_KERNEL_(Name, ...)                                                       \
  GPU_KERNEL(#Name "Gradient", "", .init = dm_unary_init, .run = unary_grad_run,            \
             .fini = dm_unary_fini, GRAPH_SAFE),

const dm_kernel_def dm_cuda_elementwise_kernels[] = {
    GPU_KERNEL("Add", "", .run = binary_run, GRAPH_SAFE),
    GPU_KERNEL("Sub", "", .run = binary_run, GRAPH_SAFE),
    GPU_KERNEL("Mul", "", .run = binary_run, GRAPH_SAFE),
    GPU_KERNEL("Div", "", .run = binary_run, GRAPH_SAFE),
    GPU_KERNEL("Sum", "", .run = sum_run, GRAPH_SAFE),
    GPU_KERNEL("Scale", "", .run = scale_run, GRAPH_SAFE),
    GPU_KERNEL("SumReduceLike", "", .run = reduce_like_run, GRAPH_SAFE),
    GPU_KERNEL("Relu", "", .run = relu_run, GRAPH_SAFE),
    GPU_KERNEL("ReluGradient", "", .run = relu_grad_run, GRAPH_SAFE),
    DM_UNARY_OPS(UNARY_KERNEL_) DM_UNARY_OPS(UNARY_GRAD_KERNEL_)
    {0},
};
