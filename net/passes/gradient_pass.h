/* gradient_pass.h: the gradient pass, NetDef -> NetDef (internal).
 *
 * Appends to a forward net the backward ops its schemas' gradient makers emit, the
 * Caffe2 way: the loss gradient is seeded by ConstantFill(loss) -> <loss>_autogen_grad
 * with value 1; the gradient of X is X_grad; where a blob (at one version) feeds several
 * ops, the partial gradients are written to _X_grad_autosplit_<k> and summed into X_grad;
 * no-gradient ops stop the flow; in-place ops are handled through blob versions.
 */
#ifndef DM_NET_GRADIENT_H
#define DM_NET_GRADIENT_H

#include "proto/caffe2.pb-c.h"
#include "core/status.h"

typedef struct dm_gradient_opts {
  const char *const *losses; /* the blobs whose gradient is seeded with 1. Borrowed. */
  size_t n_losses;
} dm_gradient_opts;

/* Appends the backward pass for o->losses to `net` (modified in place). */
DM_HIDDEN dm_status dm_gradient_pass(Caffe2__NetDef *net, const dm_gradient_opts *o);
/* Builds the gradient ops of the single op `op` given the names of its outputs'
 * gradients (NULL where none) into `out` (appended); used by gradient checks. */
DM_HIDDEN dm_status dm_op_gradient_ops(const Caffe2__OperatorDef *op,
                                       const char *const *output_grads, Caffe2__NetDef *out);

#endif
