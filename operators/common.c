/* common.c: helpers shared by the CPU operator files. */
#include "common.h"

dm_status dm_op_canonical_axis(dm_op_ctx *ctx, const char *what, int64_t axis, int ndim,
                               int end_ok, int *out) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a > ndim || (a == ndim && !end_ok))
    return dm_op_error(ctx, DM_ERR_INVALID, "%s %lld is out of range for a %d-d tensor", what,
                       (long long)axis, ndim);
  *out = (int)a;
  return DM_OK;
}

int64_t dm_dims_product(const dm_tensor *t, int lo, int hi) {
  int64_t p = 1;
  for (int i = lo; i < hi; i++)
    p *= t->dims[i];
  return p;
}

int dm_tensors_alias(const dm_tensor *a, const dm_tensor *b) {
  return a == b || (a->storage && a->storage == b->storage);
}
