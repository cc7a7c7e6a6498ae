/* inspect_shapes.h: shape inference and costs for `demitasse inspect --input`. */
#ifndef DM_TOOLS_INSPECT_SHAPES_H
#define DM_TOOLS_INSPECT_SHAPES_H

#include "param_shapes.h"

/* Prints every blob's dtype and shape and each op's FLOPs and bytes. `inputs` are
 * "name=d0,d1,..[:dtype]" specs; `init` (optional) an init net whose fills give the
 * parameter shapes; `table_path` (optional) an output-channels table instead. */
DM_HIDDEN dm_status dm_inspect_shapes(const Caffe2__NetDef *def, const char *path,
                                      const char *init, const char *table_path,
                                      const char *const *inputs, size_t n_inputs);

#endif
