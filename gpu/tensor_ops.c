/* tensor_ops.c: the CUDA kernels (engine "") of the shape and layout ops: Reshape,
 * Flatten, ResizeLike, StopGradient, Concat, Split, Transpose and TransposeGradient. The
 * device code is tensor_ops.cu.
 *
 * Semantics are the CPU kernels' (operators/tensor_ops.c), and so is the host logic:
 * axes, new shapes, split sizes and permutations come from operators/tensor_ops.h, the
 * same functions the CPU kernels call. Each run function first runs the op's schema
 * inference (the CPU's own checks, outputs allocated on the op's GPU). Views (Reshape,
 * Flatten, ResizeLike) share X's storage exactly as on the CPU; no bytes move.
 *
 * Reshape's new_shape INPUT and Split's split INPUT are not supported (supports() says
 * no, so the device pass keeps such an op on the CPU; a run refuses them with
 * DM_ERR_UNSUPPORTED naming the blob): the output shapes depend on their values, which
 * live on the device (reading them would sync the host every run). The arguments work. Small host-side
 * results (Reshape's old_shape, Concat's split_info) are written with dmk_write_small,
 * whose bytes travel in the kernel launch: unlike a staged copy, it does not wait for an
 * earlier staged copy to finish, so a step keeps running ahead.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "operators/tensor_ops.h"

/* ---- views: Reshape, Flatten, ResizeLike; StopGradient ------------------------------ */

/* Reshape's new_shape and Split's split as a second input: their values decide the output
 * shapes and live on the device, so reading them would sync the host every run. This
 * kernel takes only the argument forms; the device pass leaves the others on the CPU. */
static int shape_from_args(const dm_op_ctx *ctx) {
  return dm_op_num_inputs(ctx) < 2 ||
         dm_op_refuse(ctx, "its input 1 ('%s') is read on the host (on a GPU, a sync per run)",
                      dm_op_input_name(ctx, 1));
}

/* The same refusal at run time, for a caller that did not ask supports(). */
static dm_status refuse_shape_input(dm_op_ctx *ctx, int i, const char *what) {
  return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                     "%s input %d '%s' would have to be read on the host (a sync per run); give "
                     "the '%s' argument instead, or run this %s on the CPU",
                     what, i, dm_op_input_name(ctx, i),
                     strcmp(dm_op_type(ctx), "Reshape") == 0 ? "shape" : "split",
                     dm_op_type(ctx));
}

/* X -> Y, [old_shape]: the `shape` argument (infer has checked it against X). */
static dm_status reshape_run(dm_op_ctx *ctx) {
  if (!shape_from_args(ctx))
    return refuse_shape_input(ctx, 1, "the new_shape");
  DM_TRY(dm_op_run_infer(ctx)); /* validates `shape`; old_shape is sized (INT64, X's ndim) */
  const dm_tensor *x = IN(0);
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dm_reshape_dims(ctx, &ndim, dims));
  if (dm_op_num_outputs(ctx) > 1) { /* before an in-place reshape changes X's dims */
    cudaStream_t s;
    DM_TRY(dm_gpu_op_stream(ctx, &s));
    DM_CUDA_TRY(dmk_write_small(s, MDATA(OUT(1)), x->dims, (size_t)x->ndim * sizeof(int64_t)));
  }
  dm_make_view(OUT(0), x, ndim, dims);
  return DM_OK;
}

static dm_status flatten_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx)); /* X numeric, axis in range */
  int64_t dims[2];
  DM_TRY(dm_flatten_dims(ctx, dims));
  dm_make_view(OUT(0), IN(0), 2, dims);
  return DM_OK;
}

static dm_status resize_like_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx)); /* same element count */
  const dm_tensor *like = IN(1);
  int64_t dims[DM_MAX_DIMS];
  const int ndim = like->ndim;
  memcpy(dims, like->dims, sizeof dims); /* like may be Y's blob */
  dm_make_view(OUT(0), IN(0), ndim, dims);
  return DM_OK;
}

static dm_status stop_gradient_run(dm_op_ctx *ctx) {
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  if (y == x)
    return DM_OK; /* in place: nothing to do */
  if (x->dtype == DM_STRING)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "cannot copy a STRING tensor on CUDA");
  DM_TRY(dm_op_run_infer(ctx));
  return dm_tensor_copy(y, x); /* device to device, on this thread's stream */
}

/* ---- Concat, Split ------------------------------------------------------------------ */

/* X0, X1, ... -> Y, [split_info (INT32)]: each input is one block copy of `outer` rows. */
static dm_status concat_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x0 = IN(0);
  const int n = dm_op_num_inputs(ctx), add = dm_op_arg_int(ctx, "add_axis", 0) != 0;
  int axis;
  DM_TRY(dm_concat_axis(ctx, x0->ndim + add, &axis));
  dm_tensor *y = OUT(0);
  const int es = (int)dm_dtype_size(x0->dtype);
  const int64_t outer = dm_dims_product(x0, 0, axis), row = y->numel / (outer ? outer : 1);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  int32_t *info = NULL;
  if (dm_op_num_outputs(ctx) > 1 && !(info = malloc((size_t)n * sizeof *info)))
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for split_info");
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    const dm_tensor *x = IN(i);
    const int64_t inner = outer ? x->numel / outer : 0; /* this input's part of one Y row */
    cudaError_t e = dmk_copy_blocks(s, DATA(x), MDATA(y), es, outer, inner, inner, 0, row, off);
    if (e != cudaSuccess) {
      free(info);
      return dm_cuda_error(e, "dmk_copy_blocks");
    }
    if (info)
      info[i] = (int32_t)(add ? 1 : x->dims[axis]);
    off += inner;
  }
  cudaError_t e = info ? dmk_write_small(s, MDATA(OUT(1)), info, (size_t)n * sizeof *info)
                       : cudaSuccess;
  free(info);
  if (e != cudaSuccess)
    return dm_cuda_error(e, "dmk_write_small");
  return DM_OK;
}

/* X -> Y0, Y1, ... cut along the axis by the `split` argument or in equal parts (infer
 * has checked the sizes against X). */
static dm_status split_run(dm_op_ctx *ctx) {
  if (!shape_from_args(ctx))
    return refuse_shape_input(ctx, 1, "the split");
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  int axis;
  int64_t *sizes;
  DM_TRY(dm_split_geometry(ctx, &axis, &sizes));
  const int es = (int)dm_dtype_size(x->dtype);
  const int64_t outer = dm_dims_product(x, 0, axis), inner = dm_dims_product(x, axis + 1, x->ndim);
  const int64_t row = x->dims[axis] * inner;
  cudaStream_t s;
  dm_status st = dm_gpu_op_stream(ctx, &s);
  int64_t off = 0;
  for (int i = 0; st == DM_OK && i < dm_op_num_outputs(ctx); i++) {
    const int64_t part = sizes[i] * inner;
    cudaError_t e = dmk_copy_blocks(s, DATA(x), MDATA(OUT(i)), es, outer, part, row, off, part, 0);
    if (e != cudaSuccess)
      st = dm_cuda_error(e, "dmk_copy_blocks");
    off += part;
  }
  free(sizes);
  return st;
}

/* ---- Transpose, TransposeGradient --------------------------------------------------- */

/* Y = X with dims permuted: Y's dim i is X's dim perm[i], perm from `axes` (default
 * reversed) or, for the gradient, its inverse. */
static dm_status transpose_as(dm_op_ctx *ctx, int inverse) {
  DM_TRY(dm_op_run_infer(ctx)); /* numeric X, a permutation, not in place; Y sized */
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  int perm[DM_MAX_DIMS];
  int64_t st[DM_MAX_DIMS];
  DM_TRY(dm_transpose_perm(ctx, inverse, perm));
  dm_transpose_steps(x, perm, st);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_transpose(s, DATA(x), MDATA(y), (int)dm_dtype_size(x->dtype), x->ndim, y->dims,
                            st, y->numel));
  return DM_OK;
}

static dm_status transpose_run(dm_op_ctx *ctx) { return transpose_as(ctx, 0); }
static dm_status transpose_grad_run(dm_op_ctx *ctx) { return transpose_as(ctx, 1); }

const dm_kernel_def dm_cuda_tensor_kernels[] = {
    GPU_KERNEL("Reshape", "", .run = reshape_run, .supports = shape_from_args, GRAPH_SAFE),
    GPU_KERNEL("Flatten", "", .run = flatten_run, GRAPH_SAFE),
    GPU_KERNEL("ResizeLike", "", .run = resize_like_run, GRAPH_SAFE),
    GPU_KERNEL("StopGradient", "", .run = stop_gradient_run, GRAPH_SAFE),
    GPU_KERNEL("Concat", "", .run = concat_run, GRAPH_SAFE),
    GPU_KERNEL("Split", "", .run = split_run, .supports = shape_from_args, GRAPH_SAFE),
    GPU_KERNEL("Transpose", "", .run = transpose_run, GRAPH_SAFE),
    GPU_KERNEL("TransposeGradient", "", .run = transpose_grad_run, GRAPH_SAFE),
    {0},
};
