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

#include "core/status.h"
#include "proto/caffe2.pb-c.h"
#include "proto/onnx.pb-c.h"

/* Translates `model`; `base_dir` is the folder external data paths are relative to
 * (NULL: the current one). On success *init and *predict are new NetDefs the caller
 * frees with protobuf_c_message_free_unpacked. */
DM_HIDDEN dm_status dm_onnx_import(const Onnx__ModelProto *model, const char *base_dir,
                                   Caffe2__NetDef **init, Caffe2__NetDef **predict);
/* Reads a .onnx file and translates it (external data beside the file). */
DM_HIDDEN dm_status dm_onnx_import_file(const char *path, Caffe2__NetDef **init,
                                        Caffe2__NetDef **predict);
/* Nonzero when `path` ends in ".onnx" (any case). */
DM_HIDDEN int dm_onnx_is_model_path(const char *path);

#endif
