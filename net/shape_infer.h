/* shape_infer.h: dtype and shape of every blob of a net, from its input shapes (internal).
 *
 * Runs each op's schema `infer` in order over shape-only tensors (no data is allocated
 * or read), so the checks are the kernels' own. Used by `demitasse inspect --input`, by
 * `demitasse init-net`, and by passes that need shapes.
 */
#ifndef DM_NET_SHAPE_INFER_H
#define DM_NET_SHAPE_INFER_H

#include "core/workspace.h"
#include "proto/caffe2.pb-c.h"

/* Called before each op is inferred (e.g. to give parameters shapes); may be NULL. */
typedef dm_status (*dm_infer_hook)(void *user, dm_workspace *ws, const Caffe2__OperatorDef *op,
                                   int index);

/* Infers every blob of `def` in `ws`, whose blobs already holding a dtype are the known
 * inputs (shape-only tensors: set them with dm_tensor_set_shape). `costs` (optional)
 * receives one entry per op. */
DM_HIDDEN dm_status dm_infer_net_shapes(dm_workspace *ws, const Caffe2__NetDef *def,
                                        const char *source, dm_infer_hook hook, void *user,
                                        dm_op_cost *costs);

#endif
