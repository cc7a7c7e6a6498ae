/* common.h: small helpers the CPU operator files share (internal). */
#ifndef DM_OPERATORS_COMMON_H
#define DM_OPERATORS_COMMON_H

#include "core/tensor.h"

/* Canonical axis in [0, ndim] (end_ok: ndim itself allowed, as for flattening) from a
 * possibly negative one; DM_ERR_INVALID naming `what` when out of range. */
DM_HIDDEN dm_status dm_op_canonical_axis(dm_op_ctx *ctx, const char *what, int64_t axis,
                                         int ndim, int end_ok, int *out);
/* Product of dims[lo..hi). The tensor's numel is already overflow-checked. */
DM_HIDDEN int64_t dm_dims_product(const dm_tensor *t, int lo, int hi);
/* Nonzero when a and b share storage (so writing one changes the other). */
DM_HIDDEN int dm_tensors_alias(const dm_tensor *a, const dm_tensor *b);

#endif
