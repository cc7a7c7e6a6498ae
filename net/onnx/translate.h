/* translate.h: what the ONNX importer's translators share (internal).
 *
 * The importer (net/onnx/import.c) walks the graph in order and hands each node to the
 * translator its op type names. Translators live in import_*.c, one file per family,
 * each exporting a table; they read attributes and constant inputs through the helpers
 * below and either emit one Caffe2 op into the builder or refuse with a reason
 * (ox_refuse), which the importer collects so that one error lists every node it
 * cannot translate.
 */
#ifndef DM_NET_ONNX_TRANSLATE_H
#define DM_NET_ONNX_TRANSLATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/workspace.h"
#include "net/netdef_build.h"
#include "proto/caffe2.pb-c.h"
#include "proto/onnx.pb-c.h"

/* The default-domain opsets the importer claims: from 7 to the newest the onnx package
 * (1.23) defines. A newer opset may change an op's meaning, so it is refused. */
#define OX_OPSET_MIN 7
#define OX_OPSET_MAX 28
/* Largest element count one tensor may claim (its bytes must fit a file anyway). */
#define OX_NUMEL_MAX ((int64_t)1 << 31)

/* A translator's verdict when it cannot translate a node: c->why says why. */
#define OX_REFUSED DM_ERR_UNSUPPORTED

typedef struct imp {
  const Onnx__GraphProto *g;
  const char *base_dir;
  int64_t opset;
  Caffe2__NetDef *init, *pred;
  /* Tensors known at import time: initializers and Constant values, by name. */
  const Onnx__TensorProto **consts;
  const char **const_names;
  size_t n_consts, cap_consts;
  /* Tensors made here (ox_made_tensor): Constant's value_float(s)/value_int(s) and
   * folded values. The struct, dims and raw_data are owned here. */
  Onnx__TensorProto **made;
  size_t n_made;
  /* Every name a node may read (graph inputs, initializers, earlier outputs) and its
   * rank where known (-1: unknown); a translator sets out_rank for its outputs. */
  char **known;
  int *ranks;
  size_t n_known;
  int out_rank;
  /* Static shapes: a shape-only tensor (dtype and dims, no data) per name whose shape is
   * known at import: graph inputs with every dim_value given, constants, and the
   * outputs of each emitted op, by that op's own schema inference (ox_infer_op). A name
   * whose shape depends on an unknown dim has no tensor (or an UNDEFINED one) here. */
  dm_workspace *ws;
  /* Values for symbolic dims of the graph inputs (import-onnx --dim). */
  const struct dm_onnx_dim *dims;
  size_t n_dims;
  char why[256]; /* a translator's reason for refusing a node */
} imp;

/* Translates node `n` into builder `b` (started by the translator; left unstarted, the
 * node adds nothing to the predict net), or refuses. */
typedef dm_status (*ox_node_fn)(imp *c, const Onnx__NodeProto *n, dm_opb *b);

/* ONNX op type -> translator; a table ends with {NULL, NULL}. */
typedef struct ox_translator {
  const char *op_type;
  ox_node_fn fn;
} ox_translator;

/* The families' tables (import_*.c). */
extern DM_HIDDEN const ox_translator ox_ops_nn[];     /* conv, pools, FC, BN, softmax, LRN */
extern DM_HIDDEN const ox_translator ox_ops_tensor[]; /* reshape, concat, split, cast... */
extern DM_HIDDEN const ox_translator ox_ops_math[];   /* elementwise arithmetic */
extern DM_HIDDEN const ox_translator ox_ops_reduce[]; /* ReduceSum/Mean/Max, LogSoftmax */
extern DM_HIDDEN const ox_translator ox_ops_shape[];  /* Shape, Gather, Squeeze, Slice... */
extern DM_HIDDEN const ox_translator ox_ops_spatial[]; /* ConvTranspose, Resize, Upsample, Pad */
/* The static dims of `name` (ox_shape_of: a constant's, a graph input's declared shape
 * with every dim a value, or an earlier op's inferred output) into dims[max]
 * (net/onnx/import_spatial.c). Returns the rank, or -1 when unknown or above max. */
DM_HIDDEN int ox_static_dims(const imp *c, const char *name, int64_t *dims, int max);

/* ---- names and ranks --------------------------------------------------------------- */

/* The rank of a name already produced or fed (-1: unknown). */
DM_HIDDEN int ox_rank_of(const imp *c, const char *name);
DM_HIDDEN dm_status ox_known_add(imp *c, const char *name, int rank);
/* Refuses the node: c->why gets the formatted reason; returns OX_REFUSED. */
DM_HIDDEN dm_status ox_refuse(imp *c, const char *fmt, ...) DM_PRINTF(2, 3);

/* ---- static shapes and folding (net/onnx/fold.c) ----------------------------------- */

/* The DataType of an ONNX element type (DM_UNDEFINED: one we do not hold). */
DM_HIDDEN dm_dtype ox_dm_dtype(int32_t onnx_type);
/* The static shape of `name` into dims[DM_MAX_DIMS]: its rank, or -1 when not known. */
DM_HIDDEN int ox_shape_of(const imp *c, const char *name, int64_t *dims);
/* Records that `name` is a `dtype` tensor of static shape `dims`. */
DM_HIDDEN dm_status ox_shape_set(imp *c, const char *name, dm_dtype dtype, int rank,
                                 const int64_t *dims);
/* Infers the outputs of `op` (just emitted into the predict net) with its schema's own
 * shape inference over the static shapes of its inputs; outputs it cannot infer (an
 * unknown input shape, values read at run time) stay unknown. Refuses the node when any
 * of the op's own checks fails (its arguments, the static shapes or types, a kernel). */
DM_HIDDEN dm_status ox_infer_op(imp *c, const Caffe2__OperatorDef *op);
/* A tensor owned by `c` (freed by the importer), `bytes` of packed little-endian values. */
DM_HIDDEN dm_status ox_made_tensor(imp *c, int32_t onnx_type, int rank, const int64_t *dims,
                                   const void *data, size_t bytes, Onnx__TensorProto **out);
/* Evaluates node `n` at import when it is shape arithmetic on constants (or Shape of a
 * static shape): its outputs become constants (init-net fills, nothing in the predict
 * net) and *folded is set. Leaves *folded 0 for a node it does not fold. */
DM_HIDDEN dm_status ox_fold(imp *c, const Onnx__NodeProto *n, int *folded);

/* ---- attributes and inputs ---------------------------------------------------------- */

DM_HIDDEN const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name);
DM_HIDDEN int64_t ox_attr_int(const Onnx__NodeProto *n, const char *name, int64_t def);
DM_HIDDEN float ox_attr_float(const Onnx__NodeProto *n, const char *name, float def);
/* The ints of `name` (NULL, *count 0 if absent). */
DM_HIDDEN const int64_t *ox_attr_ints(const Onnx__NodeProto *n, const char *name, size_t *count);
/* Whether string attribute `name` equals `v` (absent: equals `def`). */
DM_HIDDEN int ox_attr_str_is(const Onnx__NodeProto *n, const char *name, const char *def,
                             const char *v);
/* Input i, or NULL when absent or "" (an omitted optional input). */
DM_HIDDEN const char *ox_in_name(const Onnx__NodeProto *n, size_t i);
/* One past the last non-empty output. */
DM_HIDDEN size_t ox_n_outputs_used(const Onnx__NodeProto *n);

/* ---- constants ---------------------------------------------------------------------- */

/* The constant (initializer, Constant value) named `name`, or NULL. */
DM_HIDDEN const Onnx__TensorProto *ox_const_find(const imp *c, const char *name);
DM_HIDDEN dm_status ox_const_add(imp *c, const char *name, const Onnx__TensorProto *t);
/* Element count from dims, or -1 (a negative dim, or more than OX_NUMEL_MAX). */
DM_HIDDEN int64_t ox_tensor_numel(const Onnx__TensorProto *t);
DM_HIDDEN const char *ox_dtype_name(int32_t t);
/* Bytes per element of the types the importer reads (0: another). */
DM_HIDDEN size_t ox_elem_size(int32_t t);
/* The tensor's bytes, little-endian and packed: from raw_data, the external file, or
 * the typed field. *owned is set when the caller must free *data. */
DM_HIDDEN dm_status ox_tensor_bytes(const imp *c, const Onnx__TensorProto *t, int64_t numel,
                                    const uint8_t **data, uint8_t **owned);
/* A GivenTensor*Fill of `t` into blob `name` in the init net. */
DM_HIDDEN dm_status ox_emit_fill(imp *c, const char *name, const Onnx__TensorProto *t);
/* The int64 values of a constant INT64/INT32 1-D input (malloc'd into *out). */
DM_HIDDEN dm_status ox_const_ints(imp *c, const Onnx__TensorProto *t, int64_t **out, size_t *n);

/* ---- building ops ------------------------------------------------------------------- */

/* Appends `name` to a string list unless it is there already. */
DM_HIDDEN dm_status ox_add_external(char ***arr, size_t *n, const char *name);
/* Starts op `type` with the node's first `n_in` inputs (those given) and its outputs. */
DM_HIDDEN void ox_start(dm_opb *b, const char *type, const Onnx__NodeProto *n, size_t n_in);
/* Refuses a node with no output or more than `max`. */
DM_HIDDEN dm_status ox_need_outputs(imp *c, const Onnx__NodeProto *n, size_t max);
/* An op that maps one to one with no arguments: exactly `n_in` inputs, one output. */
DM_HIDDEN dm_status ox_plain(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type,
                             size_t n_in);
/* Softmax or LogSoftmax (`type`) under the opset's axis rule (net/onnx/import_nn.c). */
DM_HIDDEN dm_status ox_softmax_like(imp *c, const Onnx__NodeProto *n, dm_opb *b,
                                   const char *type);
/* A new init-net blob "<base><suffix>" for a value the importer derives (its name in
 * *out, which the caller frees); also an external input of the predict net. */
DM_HIDDEN dm_status ox_derived_name(imp *c, const char *base, const char *suffix, char **out);
/* Fills init-net blob `name` with N zeros. */
DM_HIDDEN dm_status ox_fill_zeros(imp *c, const char *name, int64_t N);

#endif
