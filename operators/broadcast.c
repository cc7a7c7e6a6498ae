/* broadcast.c: numpy's broadcast shape and strides, and the legacy (pre, n, post)
 * geometry; see broadcast.h. */
#include "broadcast.h"

#include <stdio.h>

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

/* Input k's slot name from `slots` ("A,B" style: one name per input), else "Xk". */
static const char *slot_name(const char *const *slots, int k, char *buf, size_t len) {
  if (slots)
    return slots[k];
  snprintf(buf, len, "X%d", k);
  return buf;
}

dm_status dm_bcast_numpy_shape(dm_op_ctx *ctx, int n, const dm_tensor *const *in,
                               const char *const *slots, int *ndim, int64_t *dims) {
  int r = 0, setter[DM_MAX_DIMS]; /* setter: the input that gave dims[d] */
  for (int k = 0; k < n; k++)
    r = in[k]->ndim > r ? in[k]->ndim : r;
  for (int d = 0; d < r; d++)
    dims[d] = 1, setter[d] = 0;
  for (int k = 0; k < n; k++) {
    const dm_tensor *t = in[k];
    for (int i = 0; i < t->ndim; i++) {
      int d = r - t->ndim + i;
      int64_t v = t->dims[i];
      if (v == dims[d] || v == 1)
        continue;
      if (dims[d] == 1) {
        dims[d] = v, setter[d] = k;
        continue;
      }
      int j = setter[d];
      char as[96], bs[96], n1[16], n2[16];
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "%s is %s and %s is %s: dims %lld and %lld (%d from the end) neither "
                         "match nor are 1, so they do not broadcast (numpy's rule)",
                         slot_name(slots, j, n1, sizeof n1), dm_shape_str(in[j], as, sizeof as),
                         slot_name(slots, k, n2, sizeof n2), dm_shape_str(t, bs, sizeof bs),
                         (long long)dims[d], (long long)v, r - d);
    }
  }
  *ndim = r;
  return DM_OK;
}

void dm_bcast_numpy_strides(const dm_tensor *t, int ndim, const int64_t *dims,
                            int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    int i = t->ndim - (ndim - d);
    if (i < 0 || t->dims[i] == 1 || dims[d] == 1) {
      strides[d] = 0;
    } else {
      strides[d] = s;
      s *= t->dims[i];
    }
  }
}

dm_status dm_bcast_numpy_output_shape(dm_op_ctx *ctx, int n, const dm_tensor *const *in,
                                      const char *const *slots, int *ndim, int64_t *dims) {
  DM_TRY(dm_bcast_numpy_shape(ctx, n, in, slots, ndim, dims));
  const dm_tensor *c = dm_op_output(ctx, 0);
  for (int k = 0; k < n; k++) {
    int same = in[k]->ndim == *ndim;
    for (int d = 0; same && d < *ndim; d++)
      same = in[k]->dims[d] == dims[d];
    char nm[16];
    if (c == in[k] && !same)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "the output is %s's blob, but %s is broadcast (smaller than the "
                         "output): run in place on an input of the output's shape",
                         slot_name(slots, k, nm, sizeof nm), slot_name(slots, k, nm, sizeof nm));
  }
  return DM_OK;
}
