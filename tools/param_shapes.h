/* param_shapes.h: shapes of a predict net's parameters from its input shapes and a table
 * of output-channel counts (shared by `inspect --out-channels` and `init-net`).
 *
 * A Caffe2 predict net names its weights but does not record how many output channels a
 * Conv or FC weight has: that lives in the weights. Given those counts (a table of
 * "blob count" lines, '#' comments), every other parameter shape follows from the ops:
 * Conv W (M, C/group, kH, kW) (NHWC: (M, kH, kW, C/group)), b (M); FC W (N, K), b (N);
 * SpatialBN scale/bias/mean/var (C).
 */
#ifndef DM_TOOLS_PARAM_SHAPES_H
#define DM_TOOLS_PARAM_SHAPES_H

#include "core/workspace.h"
#include "net/shape_infer.h"

typedef struct dm_param_entry {
  char *blob;
  int64_t channels;
  int line;
  int used;
} dm_param_entry;

typedef struct dm_param_table {
  const char *path;
  dm_param_entry *e;
  size_t n;
  /* Parameters given shapes, in the order the net first uses them (for init-net). */
  char **params;
  const char **param_op_type; /* the op type that reads it */
  int *param_role;            /* 0 weight, 1 bias, 2 BN scale, 3 BN bias, 4 BN mean, 5 BN var */
  size_t n_params;
} dm_param_table;

DM_HIDDEN dm_status dm_param_table_load(const char *path, dm_param_table *t);
DM_HIDDEN void dm_param_table_free(dm_param_table *t);
/* A dm_infer_hook (user = the table): gives shapes to parameters of the op about to be
 * inferred. With a NULL path (no table) only BN parameters can be derived. */
DM_HIDDEN dm_status dm_param_shapes_hook(void *user, dm_workspace *ws,
                                         const Caffe2__OperatorDef *op, int index);
/* After inference: a table entry no op used is an error naming it. */
DM_HIDDEN dm_status dm_param_table_check_used(const dm_param_table *t);

/* Parses "name=1,3,227,227" or "name=1,3,227,227:float16" into a shape-only blob. A blob
 * that already has a shape in ws is refused (the same --input given twice). */
DM_HIDDEN dm_status dm_parse_input_shape(dm_workspace *ws, const char *spec);

#endif
