/* broadcast.c: the legacy (pre, n, post) broadcast geometry; see broadcast.h. */
#include "broadcast.h"

dm_status dm_bcast_legacy(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b, int broadcast,
                          int64_t axis, dm_bcast *out) {
  char as[96], bs[96];
  dm_shape_str(a, as, sizeof as);
  dm_shape_str(b, bs, sizeof bs);
  if (!broadcast) {
    if (!dm_tensor_same_shape(a, b))
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "A is %s and B is %s: shapes must be equal unless broadcast=1", as, bs);
    *out = (dm_bcast){1, a->numel, 1, 0};
    return DM_OK;
  }
  if (b->ndim > a->ndim)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "A is %s and B is %s: B may not have more dims than A to broadcast", as,
                       bs);
  int64_t ax = axis == -1 ? a->ndim - b->ndim : axis;
  if (ax < 0 || ax > a->ndim - b->ndim)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "broadcast axis %lld is out of range [0, %d] for A %s and B %s",
                       (long long)axis, a->ndim - b->ndim, as, bs);
  int lo = 0, hi = b->ndim - 1; /* B's dims without leading and trailing 1s */
  while (lo < b->ndim && b->dims[lo] == 1)
    lo++;
  while (hi >= lo && b->dims[hi] == 1)
    hi--;
  int64_t pre = 1, n = 1, post = 1;
  for (int i = 0; i < ax + lo; i++)
    pre *= a->dims[i];
  for (int i = lo; i <= hi; i++) {
    if (a->dims[ax + i] != b->dims[i])
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "A is %s and B is %s: B's dim %d (%lld) does not match A's dim %lld "
                         "(%lld) at broadcast axis %lld",
                         as, bs, i, (long long)b->dims[i], (long long)(ax + i),
                         (long long)a->dims[ax + i], (long long)ax);
    n *= b->dims[i];
  }
  for (int i = (int)ax + hi + 1; i < a->ndim; i++)
    post *= a->dims[i];
  *out = (dm_bcast){pre, n, post, !dm_tensor_same_shape(a, b)};
  return DM_OK;
}

dm_status dm_bcast_from_args(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b,
                             dm_bcast *out) {
  return dm_bcast_legacy(ctx, a, b, dm_op_arg_int(ctx, "broadcast", 0) != 0,
                         dm_op_arg_int(ctx, "axis", -1), out);
}
