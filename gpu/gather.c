/* gather.c: the CUDA kernels (engine "") of Gather (any dtype: elements moved by size) and
 * GatherGradient (dDATA FLOAT from FLOAT, FLOAT16 or BFLOAT16 dY); the device code is
 * gather.cu. Semantics are operators/shape_ops.c's, except that an out-of-range index,
 * which the CPU reports, lives on the device here: Gather writes its row as NaN (zeros
 * for integer data) and GatherGradient drops it; no access leaves the tensors. The
 * gradient's FP32 atomics make its sums non-deterministic in their last bits.
 */
#include "kernels.h"
#include "operators/common.h"

/* Both kernels' start: the schema's checks, the (outer, along, row) geometry of DATA at
 * `axis`, and the op's stream. */
static dm_status gather_prepare(dm_op_ctx *ctx, int64_t *outer, int64_t *along, int64_t *row,
                                cudaStream_t *s) {
  DM_TRY(dm_op_run_infer(ctx));
  DM_TRY(dm_gpu_op_stream(ctx, s));
  const dm_tensor *x = IN(0);
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 0), x->ndim, 0, &axis));
  *outer = dm_dims_product(x, 0, axis);
  *along = x->dims[axis];
  *row = dm_dims_product(x, axis + 1, x->ndim);
  return DM_OK;
}

/* A NaN of a float dtype's width, as the row an out-of-range index reads. */
static uint64_t bad_bits(dm_dtype t) {
  switch (t) {
  case DM_FLOAT: return 0x7fc00000u;
  case DM_FLOAT16: return 0x7e00u;
  case DM_BFLOAT16: return 0x7fc0u;
  case DM_DOUBLE: return 0x7ff8000000000000ull;
  default: return 0;
  }
}

static dm_status gather_run(dm_op_ctx *ctx) { /* DATA, INDICES -> OUTPUT */
  int64_t outer, along, row;
  cudaStream_t s;
  DM_TRY(gather_prepare(ctx, &outer, &along, &row, &s));
  const dm_tensor *x = IN(0), *idx = IN(1);
  DM_CUDA_TRY(dmk_gather(s, DATA(x), DATA(idx), idx->dtype == DM_INT64, MDATA(OUT(0)), outer,
                         along, idx->numel, row, (int)dm_dtype_size(x->dtype),
                         bad_bits(x->dtype), dm_op_arg_int(ctx, "wrap_indices", 0) != 0));
  return DM_OK;
}

static dm_status gather_grad_run(dm_op_ctx *ctx) { /* DATA, INDICES, dY -> dDATA */
  int64_t outer, along, row;
  cudaStream_t s;
  DM_TRY(gather_prepare(ctx, &outer, &along, &row, &s));
  const dm_tensor *idx = IN(1), *dy = IN(2);
  DM_CUDA_TRY(dmk_gather_grad(s, DATA(idx), idx->dtype == DM_INT64, DATA(dy), dy->dtype,
                              MDATA(OUT(0)), OUT(0)->numel, outer, along, idx->numel, row,
                              dm_op_arg_int(ctx, "wrap_indices", 0) != 0));
  return DM_OK;
}

const dm_kernel_def dm_cuda_gather_kernels[] = {
    GPU_KERNEL("Gather", "", .run = gather_run, GRAPH_SAFE),
    GPU_KERNEL("GatherGradient", "", .run = gather_grad_run, GRAPH_SAFE),
    {0},
};
