/* tensor_ops.h: the host side of the shape and layout ops, shared by the CPU kernels
 * (tensor_ops.c) and the CUDA kernels (gpu/tensor_ops.c) (internal): the axes, shapes,
 * split sizes and permutations both compute from the same arguments and dims, and the
 * view both make. Each validates as the schema inference does.
 */
#ifndef DM_OPERATORS_TENSOR_OPS_H
#define DM_OPERATORS_TENSOR_OPS_H

#include <stdint.h>

#include "core/tensor.h"

/* Concat's and Split's axis: `axis` if given, else from `order` (NCHW -> 1, NHWC -> 3),
 * canonical for a result of `ndim` dims. */
DM_HIDDEN dm_status dm_concat_axis(dm_op_ctx *ctx, int ndim, int *out);
/* Split's axis and sizes along it (from the second input, `split`, or equal parts);
 * *sizes is malloc'ed (one per output), the caller frees it. */
DM_HIDDEN dm_status dm_split_geometry(dm_op_ctx *ctx, int *axis, int64_t **sizes);
/* Reshape's new shape (`shape` or the second input's values), validated against X. */
DM_HIDDEN dm_status dm_reshape_dims(dm_op_ctx *ctx, int *ndim, int64_t *dims);
/* Flatten's 2-D shape of X at `axis`. */
DM_HIDDEN dm_status dm_flatten_dims(dm_op_ctx *ctx, int64_t dims[2]);
/* Y becomes a view of X's storage with the given dims (in place: X's dims change). */
DM_HIDDEN void dm_make_view(dm_tensor *y, const dm_tensor *x, int ndim, const int64_t *dims);
/* perm[i]: the X dim that becomes Y's dim i, from `axes` (default reversed); inverse: its
 * inverse, for TransposeGradient. */
DM_HIDDEN dm_status dm_transpose_perm(dm_op_ctx *ctx, int inverse, int *perm);
/* st[i]: the step in X (row-major, in elements) for one step along Y's dim i. */
DM_HIDDEN void dm_transpose_steps(const dm_tensor *x, const int *perm, int64_t *st);

/* The gradient of a view op that keeps X's elements in order (Flatten, Squeeze,
 * ExpandDims): ResizeLike(dY, X) -> dX. */
DM_HIDDEN dm_status dm_resize_like_gradient(dm_grad_ctx *g);

#endif
