/* emit.h: what the ONNX exporter's translators share (internal).
 *
 * The exporter (net/onnx/export.c) walks the predict net in order and hands each op to the
 * translator its type names (net/onnx/export_ops.c). A translator reads the op's arguments,
 * the shapes known for its inputs and the constants among them, and appends one or more
 * nodes (and constant initializers) to the graph, or refuses with a reason (ex_refuse),
 * which the exporter collects so that one error lists every op it cannot export.
 * The builders (net/onnx/emit.c) keep the first allocation failure in e->s and do nothing
 * after it.
 */
#ifndef DM_NET_ONNX_EMIT_H
#define DM_NET_ONNX_EMIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "proto/caffe2.pb-c.h"
#include "proto/onnx.pb-c.h"

/* A translator's verdict when it cannot translate an op: e->why says why. */
#define EX_REFUSED DM_ERR_UNSUPPORTED

/* What is known of a value: nothing (known 0), or its dtype and shape. */
typedef struct ex_shape {
  int known;
  dm_dtype dtype;
  int ndim;
  int64_t dims[DM_MAX_DIMS];
} ex_shape;

/* A constant: an initializer's name, dtype, shape and (little-endian) bytes. */
typedef struct ex_const {
  const char *name;
  dm_dtype dtype;
  int ndim;
  const int64_t *dims;
  const void *data;
  int64_t numel;
} ex_const;

typedef struct ex_names ex_names; /* the exporter's name table (net/onnx/export.c) */

typedef struct oxe {
  Onnx__GraphProto *g;
  dm_status s;          /* the first builder failure (out of memory) */
  ex_names *names;      /* every name in use, Caffe2's and the ones made here */
  ex_const *consts;     /* the initializers, by name */
  size_t n_consts, cap_consts;
  char **pool;          /* names made here (freed at the end) */
  size_t n_pool, cap_pool;
  char why[320];        /* a translator's reason for refusing an op */
} oxe;

/* The op being translated: its inputs under their current ONNX names, its outputs under
 * the names they get, what is known of each input, and whether each output is read
 * later (or is a graph output): an unread output may be dropped. */
typedef struct ex_op {
  const Caffe2__OperatorDef *def;
  size_t index;
  const char *const *in;
  const char *const *out;
  const ex_shape *in_shape;
  const int *out_used;
  const int *in_param_missing; /* input k is an external input the init net never fills */
} ex_op;

typedef dm_status (*ex_fn)(oxe *e, const ex_op *o);

/* Caffe2 op type -> translator; the table ends with {NULL, NULL}. */
typedef struct ex_translator {
  const char *type;
  ex_fn fn;
} ex_translator;

extern DM_HIDDEN const ex_translator ex_ops[];
extern DM_HIDDEN const ex_translator ex_ops_math[]; /* net/onnx/export_math.c */
extern DM_HIDDEN const ex_translator ex_ops_seq[];  /* net/onnx/export_seq.c */

/* Records the first failure s in e->s; ex_grow makes room for one more element of arr
 * (n now, each `size` bytes) and ex_dup copies a string (NULL as ""), NULL after a
 * failure. */
DM_HIDDEN void ex_fail(oxe *e, dm_status s);
DM_HIDDEN void *ex_grow(oxe *e, void *arr, size_t n, size_t size);
DM_HIDDEN char *ex_dup(oxe *e, const char *s);
/* Refuses the op: e->why gets the formatted reason; returns EX_REFUSED. */
DM_HIDDEN dm_status ex_refuse(oxe *e, const char *fmt, ...) DM_PRINTF(2, 3);
/* A new name "<base><suffix>" (then "_1", "_2"... until unused), owned by e. */
DM_HIDDEN const char *ex_fresh(oxe *e, const char *base, const char *suffix);
/* The constant named `name` (an initializer), or NULL. */
DM_HIDDEN const ex_const *ex_const_find(const oxe *e, const char *name);

/* Appends a node of `type` named `name` (NULL or "": none). */
DM_HIDDEN Onnx__NodeProto *ex_node(oxe *e, const char *type, const char *name);
/* One-input and two-input nodes x -> y, (a, b) -> y; Reshape(x, constant dims) -> y. */
DM_HIDDEN Onnx__NodeProto *ex_unary(oxe *e, const char *type, const char *name, const char *x,
                                    const char *y);
DM_HIDDEN Onnx__NodeProto *ex_binary(oxe *e, const char *type, const char *name, const char *a,
                                     const char *b, const char *y);
DM_HIDDEN void ex_reshape_const(oxe *e, const char *x, const int64_t *dims, int ndim,
                                const char *y, const char *name);
DM_HIDDEN void ex_in(oxe *e, Onnx__NodeProto *n, const char *name);
DM_HIDDEN void ex_out(oxe *e, Onnx__NodeProto *n, const char *name);
DM_HIDDEN void ex_attr_int(oxe *e, Onnx__NodeProto *n, const char *name, int64_t v);
DM_HIDDEN void ex_attr_float(oxe *e, Onnx__NodeProto *n, const char *name, float v);
DM_HIDDEN void ex_attr_str(oxe *e, Onnx__NodeProto *n, const char *name, const char *v);
DM_HIDDEN void ex_attr_ints(oxe *e, Onnx__NodeProto *n, const char *name, const int64_t *v,
                            size_t k);
/* A new initializer named `name` of `dtype` and shape (ndim, dims) holding `data`
 * (host-order elements, written little-endian); recorded as a constant. */
DM_HIDDEN void ex_initializer(oxe *e, const char *name, dm_dtype dtype, int ndim,
                              const int64_t *dims, const void *data);
/* A new 1-D INT64 initializer "<base><suffix>..." of the k values; returns its name. */
DM_HIDDEN const char *ex_const_i64(oxe *e, const char *base, const char *suffix,
                                   const int64_t *v, size_t k);
/* Op arguments: an int, or a float (an int argument read as a float). */
DM_HIDDEN int64_t ex_arg_i(const ex_op *o, const char *name, int64_t def);
DM_HIDDEN float ex_arg_f(const ex_op *o, const char *name, float def);
/* A node of `type` on the op's inputs [0, n_in) writing its output 0, named as the op. */
DM_HIDDEN Onnx__NodeProto *ex_node_io(oxe *e, const ex_op *o, const char *type, size_t n_in);
/* Softmax or LogSoftmax (`type`) with Caffe2's axis rule, as ONNX opset 13 writes it. */
DM_HIDDEN dm_status ex_softmax_like(oxe *e, const ex_op *o, const char *type);
/* The ONNX TensorProto data type of a dm dtype (0: none). */
DM_HIDDEN int32_t ex_onnx_dtype(dm_dtype t);

#endif
