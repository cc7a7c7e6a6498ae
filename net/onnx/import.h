/* import.h: an ONNX model (proto/onnx.proto) as a Caffe2 pair of nets (internal).
 *
 * The init net fills every initializer (and every Constant node's value) under its ONNX
 * name; the predict net holds the other nodes as Caffe2 ops, blob names kept from the
 * ONNX graph, the graph's inputs as external inputs and its outputs as external outputs.
 * A model with nodes the importer cannot translate fails before anything runs, with one
 * line per such node (index, name, op type, domain, opset, why).
 */
#ifndef DM_NET_ONNX_IMPORT_H
#define DM_NET_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"
#include "proto/onnx.pb-c.h"

/* Values for the graph inputs' symbolic dims (dim_param), by name, as ONNX Runtime's
 * free-dimension overrides: with "N" = 1, an input declared [N, 3, 224, 224] has that
 * static shape at import, so shape arithmetic on it (torch's x.view(x.size(0), ...))
 * folds into constant arguments, and the net imported runs at that size only. */
typedef struct dm_onnx_dim {
  const char *name; /* a dim_param of some graph input */
  int64_t value;    /* >= 1 */
} dm_onnx_dim;

typedef struct dm_onnx_import_options {
  const dm_onnx_dim *dims;
  size_t n_dims;
} dm_onnx_import_options;

/* Translates `model`; `base_dir` is the folder external data paths are relative to
 * (NULL: the current one); `opts` may be NULL (no overrides). An override that names no
 * graph input's dim, or a value below 1, is an error. On success *init and *predict are
 * new NetDefs the caller frees with protobuf_c_message_free_unpacked. */
DM_HIDDEN dm_status dm_onnx_import_with(const Onnx__ModelProto *model, const char *base_dir,
                                        const dm_onnx_import_options *opts,
                                        Caffe2__NetDef **init, Caffe2__NetDef **predict);
/* dm_onnx_import_with without options. */
DM_HIDDEN dm_status dm_onnx_import(const Onnx__ModelProto *model, const char *base_dir,
                                   Caffe2__NetDef **init, Caffe2__NetDef **predict);
/* Reads a .onnx file and translates it (external data beside the file); opts as above. */
DM_HIDDEN dm_status dm_onnx_import_file_with(const char *path, const dm_onnx_import_options *opts,
                                             Caffe2__NetDef **init, Caffe2__NetDef **predict);
DM_HIDDEN dm_status dm_onnx_import_file(const char *path, Caffe2__NetDef **init,
                                        Caffe2__NetDef **predict);
/* Nonzero when `path` ends in ".onnx" (any case). */
DM_HIDDEN int dm_onnx_is_model_path(const char *path);

#endif
