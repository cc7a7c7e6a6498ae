/* broadcast.h: the two broadcast rules of the elementwise ops (internal).
 *
 * Numpy's (multidirectional) rule, Caffe2's modern one, for Add/Sub/Mul/Div without
 * `broadcast`, Pow, Max/Min/Mean and SumReduceLike without `axis`: shapes are aligned at
 * their last dims, and each pair of dims must be equal or one of them 1; the result has
 * the larger dim. Kernels walk the result in rows of its last dim, each input read at
 * the offset of the row (dm_bcast_row_offset) with a stride of 0 or 1 along the row.
 *
 * Caffe2's legacy broadcast of B onto A (`broadcast`=1, SumReduceLike with `axis`), as a
 * (pre, n, post) geometry:
 *
 * B's dims, after dropping its leading and trailing 1s, must equal a contiguous run of
 * A's dims starting at `axis` (+ the number of leading 1s dropped); axis -1 (the
 * default) aligns B with A's trailing dims. Then A is viewed as (pre, n, post) and B as
 * (n): element (p, j, q) of A pairs with B[j]. A B with one element is a scalar
 * (n = 1). With broadcast = 0 the shapes must be identical (pre = post = 1).
 */
#ifndef DM_OPERATORS_BROADCAST_H
#define DM_OPERATORS_BROADCAST_H

#include "core/tensor.h"

typedef struct dm_bcast {
  int64_t pre, n, post;
  int broadcasting; /* B's shape differs from A's */
} dm_bcast;

/* The geometry for A and B; DM_ERR_SHAPE / DM_ERR_INVALID with both shapes named. */
DM_HIDDEN dm_status dm_bcast_legacy(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b,
                                    int broadcast, int64_t axis, dm_bcast *out);
/* The same with `broadcast` (default 0) and `axis` (default -1) read from the op. */
DM_HIDDEN dm_status dm_bcast_from_args(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b,
                                       dm_bcast *out);

/* The reference CPU kernel of Add/Sub/Mul/Div (elementwise.c), for an engine that runs
 * equal shapes only and hands it numpy's broadcasts of plain buffers. */
DM_HIDDEN dm_status dm_binary_run_reference(dm_op_ctx *ctx);

/* ---- numpy's rule ------------------------------------------------------------------ */

/* The broadcast shape of n tensors (rank up to DM_MAX_DIMS); DM_ERR_SHAPE naming the
 * first pair of inputs whose dims clash by their slot names (`slots`, one per input, as
 * the schema's doc names them; NULL: X0, X1, ...). */
DM_HIDDEN dm_status dm_bcast_numpy_shape(dm_op_ctx *ctx, int n, const dm_tensor *const *in,
                                         const char *const *slots, int *ndim, int64_t *dims);
/* The same for an op's output 0, which may be an input's blob only when that input has
 * the output's shape (each element is then read before it is written, at its index). */
DM_HIDDEN dm_status dm_bcast_numpy_output_shape(dm_op_ctx *ctx, int n,
                                                const dm_tensor *const *in,
                                                const char *const *slots, int *ndim,
                                                int64_t *dims);
/* t's element strides over the result's dims (0 along a broadcast or missing dim); a
 * rank-0 result is taken as rank 1 of one element by the callers (ndim >= 1 here). */
DM_HIDDEN void dm_bcast_numpy_strides(const dm_tensor *t, int ndim, const int64_t *dims,
                                      int64_t *strides);
/* The offset, in an input with `strides`, of the first element of row r of the result
 * (rows: the result's elements grouped by its last dim). */
static inline int64_t dm_bcast_row_offset(int ndim, const int64_t *dims, const int64_t *strides,
                                          int64_t r) {
  int64_t off = 0;
  for (int d = ndim - 2; d >= 0; d--) {
    off += (r % dims[d]) * strides[d];
    r /= dims[d];
  }
  return off;
}

#endif
