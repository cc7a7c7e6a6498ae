/* export.h: a Caffe2 inference pair (init net + predict net) as an ONNX model
 * (proto/onnx.proto), the importer's inverse (internal).
 *
 * The init net is run once on the CPU, so that every fill (GivenTensor*Fill, ConstantFill,
 * the seeded Xavier/MSRA fills `demitasse init-net` writes, FoldBN...) gives exactly the
 * weights `demitasse run --init` would use; each blob it leaves that the predict net
 * reads becomes an initializer (raw_data, little-endian). The predict net's ops become
 * nodes with the blob names kept; its external inputs that the init net does not fill
 * become graph inputs, its external outputs graph outputs. A blob written more than once
 * (an in-place Relu) is single-assigned as ONNX requires: its last value keeps the name,
 * the earlier ones are "<name>__<k>". Ops with no translation fail the export with one
 * line per op (index, name, type, why); nothing is written then.
 */
#ifndef DM_NET_ONNX_EXPORT_H
#define DM_NET_ONNX_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "proto/caffe2.pb-c.h"
#include "proto/onnx.pb-c.h"

/* The default-domain opset written (13: Softmax along one axis, Split's and Unsqueeze's
 * sizes as inputs) and the IR version that goes with it. */
#define DM_ONNX_EXPORT_OPSET 13
#define DM_ONNX_EXPORT_IR_VERSION 7

/* One graph input's shape and dtype, as --input-shape gives them (dtype 0: FLOAT). */
typedef struct dm_onnx_input_shape {
  const char *name;
  int ndim;
  int64_t dims[8];
  dm_dtype dtype;
} dm_onnx_input_shape;

typedef struct dm_onnx_export_opts {
  /* Graph input shapes (optional). When every graph input has one, every blob's shape
   * is inferred, the outputs are declared with their shapes, and ops whose translation
   * depends on a rank (FC on a 4-D input, Softmax, a broadcast at an axis) take their
   * simplest form; without them the general forms are written. */
  const dm_onnx_input_shape *shapes;
  size_t n_shapes;
} dm_onnx_export_opts;

/* Translates the pair (init may be NULL: every external input is then a graph input);
 * `opts` may be NULL. *out is freed with protobuf_c_message_free_unpacked. */
DM_HIDDEN dm_status dm_onnx_export(const Caffe2__NetDef *init, const Caffe2__NetDef *pred,
                                   const dm_onnx_export_opts *opts, Onnx__ModelProto **out);
/* Writes `model` to `path` atomically (core/fileio.h): the old file stays on failure. */
DM_HIDDEN dm_status dm_onnx_model_write(const Onnx__ModelProto *model, const char *path);

#endif
