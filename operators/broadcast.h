/* broadcast.h: Caffe2's legacy broadcast of B onto A (Add/Sub/Mul/Div with `broadcast`=1,
 * SumReduceLike), as a (pre, n, post) geometry (internal).
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

#endif
