/* import_tensor.c: ONNX translators for Identity, Flatten, Concat, Reshape, Transpose, Cast, Split, Where: ops that move, retype or select data. */
#include <stdlib.h>
#include <string.h>

#include "net/onnx/translate.h"

static dm_status tr_identity(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_plain(c, n, b, "Copy", 1);
}


static dm_status tr_flatten(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "Flatten", 1));
  int64_t axis = ox_attr_int(n, "axis", 1);
  int rank = ox_rank_of(c, ox_in_name(n, 0));
  if (axis < 0 && rank >= 0)
    axis += rank; /* opset 11 counts a negative axis from the end */
  if (axis < 0)
    return ox_refuse(c, "a negative axis on a tensor of unknown rank");
  dm_opb_arg_int(b, "axis", axis);
  c->out_rank = 2;
  return DM_OK;
}

static dm_status tr_concat(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  const Onnx__AttributeProto *a = ox_attr(n, "axis");
  if (!a || !a->has_i)
    return ox_refuse(c, "no axis");
  for (size_t i = 0; i < n->n_input; i++)
    if (!ox_in_name(n, i))
      return ox_refuse(c, "an empty input name");
  int64_t axis = a->i;
  int rank = ox_rank_of(c, ox_in_name(n, 0));
  if (axis < 0 && rank >= 0)
    axis += rank;
  if (axis < 0)
    return ox_refuse(c, "a negative axis on tensors of unknown rank");
  ox_start(b, "Concat", n, n->n_input);
  dm_opb_arg_int(b, "axis", axis);
  return DM_OK;
}


static dm_status tr_reshape(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0))
    return ox_refuse(c, "no data input");
  int64_t *shape = NULL;
  size_t ns = 0;
  if (c->opset < 5) {
    const int64_t *s = ox_attr_ints(n, "shape", &ns);
    ox_start(b, "Reshape", n, 1);
    dm_opb_arg_ints(b, "shape", s, ns);
    c->out_rank = (int)ns;
    return DM_OK;
  }
  if (!ox_in_name(n, 1))
    return ox_refuse(c, "no shape input");
  const Onnx__TensorProto *t = ox_const_find(c, ox_in_name(n, 1));
  if (!t)
    return ox_refuse(c, "the shape is computed in the graph from values not known at import "
                        "(only a constant shape is supported)");
  DM_TRY(ox_const_ints(c, t, &shape, &ns));
  int zero = 0;
  for (size_t i = 0; i < ns; i++)
    zero |= shape[i] == 0;
  if (zero && ox_attr_int(n, "allowzero", 0) != 0) {
    free(shape);
    return ox_refuse(c, "allowzero with a 0 in the shape");
  }
  ox_start(b, "Reshape", n, 1); /* the shape goes in as an argument; 0 keeps a dim in both */
  dm_opb_arg_ints(b, "shape", shape, ns);
  free(shape);
  c->out_rank = (int)ns;
  return DM_OK;
}

static dm_status tr_transpose(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "Transpose", 1));
  size_t k;
  const int64_t *perm = ox_attr_ints(n, "perm", &k);
  if (perm)
    dm_opb_arg_ints(b, "axes", perm, k); /* absent: reversed, in both */
  return DM_OK;
}


static dm_status tr_cast(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "Cast", 1));
  /* The element types both sides know, by the name the Cast op reads. */
  static const int32_t ok[] = {
      ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
      ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
      ONNX__TENSOR_PROTO__DATA_TYPE__INT64, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
      ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, ONNX__TENSOR_PROTO__DATA_TYPE__INT8};
  int64_t to = ox_attr_int(n, "to", -1);
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (to == ok[i]) {
      dm_opb_arg_string(b, "to", ox_dtype_name(ok[i]));
      return DM_OK;
    }
  return ox_refuse(c, "to %s", ox_dtype_name((int32_t)to));
}

static dm_status tr_split(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  size_t n_out = ox_n_outputs_used(n);
  if (!ox_in_name(n, 0) || n_out == 0)
    return ox_refuse(c, "no input or no outputs");
  for (size_t i = 0; i < n_out; i++)
    if (!n->output[i][0])
      return ox_refuse(c, "an empty output name");
  int64_t *sizes = NULL;
  size_t ns = 0;
  if (c->opset < 13) {
    const int64_t *v = ox_attr_ints(n, "split", &ns);
    if (v) {
      sizes = malloc(ns * sizeof *sizes + 1);
      if (!sizes)
        return DM_NOMEM("split sizes");
      memcpy(sizes, v, ns * sizeof *sizes);
    }
  } else if (ox_in_name(n, 1)) {
    const Onnx__TensorProto *t = ox_const_find(c, ox_in_name(n, 1));
    if (!t)
      return ox_refuse(c, "the split sizes are computed in the graph");
    DM_TRY(ox_const_ints(c, t, &sizes, &ns));
  } else if (ox_attr(n, "num_outputs") && ox_attr_int(n, "num_outputs", 0) != (int64_t)n_out) {
    return ox_refuse(c, "num_outputs differs from the outputs given");
  }
  if (sizes && ns != n_out) {
    free(sizes);
    return ox_refuse(c, "%zu split sizes for %zu outputs", ns, n_out);
  }
  int64_t axis = ox_attr_int(n, "axis", 0);
  int rank = ox_rank_of(c, ox_in_name(n, 0));
  if (axis < 0 && rank >= 0)
    axis += rank;
  if (axis < 0) {
    free(sizes);
    return ox_refuse(c, "a negative axis on a tensor of unknown rank");
  }
  ox_start(b, "Split", n, 1); /* without sizes, both cut into equal parts */
  dm_opb_arg_int(b, "axis", axis);
  if (sizes)
    dm_opb_arg_ints(b, "split", sizes, ns);
  free(sizes);
  return DM_OK;
}

/* Where(C, X, Y): operators/where.c's op, numpy's broadcasting in both (where all three
 * are constants, net/onnx/fold.c has folded it instead). */
static dm_status tr_where(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_plain(c, n, b, "Where", 3);
}

const ox_translator ox_ops_tensor[] = {
    {"Identity", tr_identity},
    {"Flatten", tr_flatten},
    {"Concat", tr_concat},
    {"Reshape", tr_reshape},
    {"Transpose", tr_transpose},
    {"Cast", tr_cast},
    {"Split", tr_split},
    {"Where", tr_where},
    {NULL, NULL},
};
