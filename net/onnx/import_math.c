/* import_math.c: ONNX translators for elementwise math: Add/Sub/Mul/Div and Sum, Max,
 * Min, Mean, Pow (numpy's broadcast), and the activations: Relu, the rows of
 * operators/unary_family.h marked PLAIN (Sigmoid, Tanh) from that table, and LeakyRelu,
 * HardSigmoid, HardSwish and Clip. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "operators/unary_family.h"
#include "net/onnx/translate.h"

static dm_status tr_relu(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_plain(c, n, b, "Relu", 1);
}

/* Elementwise binary ops. ONNX broadcasts numpy's way, as the Caffe2 ops do without
 * `broadcast`. Where Caffe2's legacy broadcast says the same (B a constant scalar, or a
 * constant of rank <= A's with no 1 inside the run of its dims, aligned at
 * rank(A) - rank(B); for Add and Mul a constant A is swapped to the B side), the legacy
 * form is written: engines and the fusion pass read it (an Add with broadcast=1 is
 * never fused into a Conv as a same-shape sum). */
static dm_status binary(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type,
                        int commutes) {
  if (ox_attr(n, "broadcast"))
    return ox_refuse(c, "the legacy broadcast attribute");
  DM_TRY(ox_need_outputs(c, n, 1));
  if (n->n_input != 2 || !ox_in_name(n, 0) || !ox_in_name(n, 1))
    return ox_refuse(c, "expected 2 inputs");
  const char *x = ox_in_name(n, 0), *y = ox_in_name(n, 1);
  const Onnx__TensorProto *ky = ox_const_find(c, y);
  if (commutes && !ky && ox_const_find(c, x)) {
    const char *t = x;
    x = y;
    y = t;
    ky = ox_const_find(c, y);
  }
  int ra = ox_rank_of(c, x), rb = ox_rank_of(c, y);
  c->out_rank = ra < 0 || rb < 0 ? -1 : ra > rb ? ra : rb;
  dm_opb_start(b, type);
  dm_opb_input(b, x);
  dm_opb_input(b, y);
  dm_opb_output(b, n->output[0]);
  if (ky && ox_tensor_numel(ky) == 1 && (rb == 0 || ra >= rb)) { /* a scalar, rank <= A's */
    dm_opb_arg_int(b, "broadcast", 1);
    return DM_OK;
  }
  if (ky && ra >= 0 && rb <= ra) {
    size_t lo = 0, hi = ky->n_dims;
    while (lo < hi && ky->dims[lo] == 1)
      lo++;
    while (hi > lo && ky->dims[hi - 1] == 1)
      hi--;
    for (size_t i = lo; i < hi; i++)
      if (ky->dims[i] == 1)
        return DM_OK; /* a 1 inside B's run: numpy's rule only */
    dm_opb_arg_int(b, "broadcast", 1);
    dm_opb_arg_int(b, "axis", ra - rb);
  }
  return DM_OK; /* numpy's broadcast at run time */
}

static dm_status tr_add(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Add", 1);
}

static dm_status tr_sub(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Sub", 0);
}

static dm_status tr_mul(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Mul", 1);
}

static dm_status tr_div(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return binary(c, n, b, "Div", 0);
}

/* The value of a constant one-element FLOAT, DOUBLE, FLOAT16 or BFLOAT16 tensor. */
static dm_status const_scalar(imp *c, const Onnx__TensorProto *t, const char *what, float *out) {
  size_t es = ox_elem_size(t->data_type);
  if (ox_tensor_numel(t) != 1 || !es)
    return ox_refuse(c, "%s is not a one-element constant", what);
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  DM_TRY(ox_tensor_bytes(c, t, 1, &data, &owned));
  dm_status s = DM_OK;
  switch (t->data_type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: memcpy(out, data, 4); break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
    double d;
    memcpy(&d, data, 8);
    *out = (float)d;
  } break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: {
    uint16_t h;
    memcpy(&h, data, 2);
    *out = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ? dm_half_to_float(h)
                                                                  : dm_bf16_to_float(h);
  } break;
  default:
    s = ox_refuse(c, "%s is %s; expected a float constant", what, ox_dtype_name(t->data_type));
  }
  free(owned);
  return s;
}

/* Max, Min, Mean and Pow: N inputs broadcast numpy's way, as the Caffe2 ops. */
static dm_status nary(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (n->n_input == 0)
    return ox_refuse(c, "no inputs");
  if (n->n_input > 64)
    return ox_refuse(c, "%zu inputs; at most 64", n->n_input);
  int rank = 0;
  for (size_t i = 0; i < n->n_input; i++) {
    if (!ox_in_name(n, i))
      return ox_refuse(c, "an empty input name");
    int r = ox_rank_of(c, n->input[i]);
    rank = rank < 0 || r < 0 ? -1 : r > rank ? r : rank;
  }
  c->out_rank = rank;
  ox_start(b, type, n, n->n_input);
  return DM_OK;
}

static dm_status tr_max(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return nary(c, n, b, "Max");
}
static dm_status tr_min(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return nary(c, n, b, "Min");
}
static dm_status tr_mean(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return nary(c, n, b, "Mean");
}

/* Pow(X, Y): Caffe2's `exponent` argument when Y is a constant float scalar no wider in
 * rank than X; the 2-input form (numpy's broadcast, any numeric exponent) otherwise. */
static int is_float_type(int32_t t) {
  return t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
         t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
         t == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

static dm_status tr_pow(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (n->n_input != 2 || !ox_in_name(n, 0) || !ox_in_name(n, 1))
    return ox_refuse(c, "expected 2 inputs");
  const Onnx__TensorProto *ky = ox_const_find(c, n->input[1]);
  int ra = ox_rank_of(c, n->input[0]);
  if (ky && ox_tensor_numel(ky) == 1 && (ky->n_dims == 0 || ra >= (int)ky->n_dims) &&
      is_float_type(ky->data_type)) {
    float e;
    DM_TRY(const_scalar(c, ky, "the exponent", &e));
    ox_start(b, "Pow", n, 1);
    dm_opb_arg_float(b, "exponent", e);
    return DM_OK;
  }
  return nary(c, n, b, "Pow");
}

static dm_status tr_sum(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  for (size_t i = 0; i < n->n_input; i++)
    if (!ox_in_name(n, i))
      return ox_refuse(c, "an empty input name");
  if (n->n_input == 0)
    return ox_refuse(c, "no inputs");
  if (n->n_input == 2) /* Add broadcasts numpy's way */
    return binary(c, n, b, "Add", 1);
  /* Caffe2's Sum takes equal shapes: a broadcast between 3 or more inputs fails at run
   * time, naming the shapes. */
  ox_start(b, "Sum", n, n->n_input);
  return DM_OK;
}

/* ---- activations ------------------------------------------------------------------ */

/* The rows of operators/unary_family.h marked PLAIN: ONNX's op is the Caffe2 op of the
 * same name, X -> Y without attributes. */
static dm_status tr_unary_plain(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_plain(c, n, b, n->op_type, 1);
}
#define UNARY_ENTRY_(Name, args, reads_x, onnx, ...)                                      \
  DM_UN_IF_PLAIN(onnx, {#Name, tr_unary_plain}, )

static dm_status tr_hardswish(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_plain(c, n, b, "HardSwish", 1);
}

static dm_status tr_leaky_relu(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "LeakyRelu", 1));
  dm_opb_arg_float(b, "alpha", ox_attr_float(n, "alpha", 0.01f));
  return DM_OK;
}

static dm_status tr_hard_sigmoid(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "HardSigmoid", 1));
  dm_opb_arg_float(b, "alpha", ox_attr_float(n, "alpha", 0.2f));
  dm_opb_arg_float(b, "beta", ox_attr_float(n, "beta", 0.5f));
  return DM_OK;
}

/* Clip: before opset 11 the bounds are attributes; from 11 optional inputs, which must
 * be constants here (Caffe2's Clip takes arguments). */
static dm_status tr_clip(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (n->n_input < 1 || !ox_in_name(n, 0))
    return ox_refuse(c, "no input X");
  float lo = -INFINITY, hi = INFINITY;
  if (c->opset < 11) {
    if (n->n_input > 1)
      return ox_refuse(c, "%zu inputs; expected 1 before opset 11", n->n_input);
    lo = ox_attr_float(n, "min", -INFINITY);
    hi = ox_attr_float(n, "max", INFINITY);
  } else {
    if (n->n_input > 3)
      return ox_refuse(c, "%zu inputs; expected at most 3", n->n_input);
    for (size_t i = 1; i < n->n_input; i++) {
      const char *nm = ox_in_name(n, i);
      if (!nm)
        continue;
      const Onnx__TensorProto *k = ox_const_find(c, nm);
      if (!k)
        return ox_refuse(c, "%s '%s' is not a constant (Caffe2's Clip takes its bounds as "
                         "arguments)", i == 1 ? "min" : "max", nm);
      DM_TRY(const_scalar(c, k, i == 1 ? "min" : "max", i == 1 ? &lo : &hi));
    }
  }
  ox_start(b, "Clip", n, 1);
  if (lo != -INFINITY)
    dm_opb_arg_float(b, "min", lo);
  if (hi != INFINITY)
    dm_opb_arg_float(b, "max", hi);
  return DM_OK;
}

const ox_translator ox_ops_math[] = {
    {"Relu", tr_relu},
    {"Add", tr_add},
    {"Sub", tr_sub},
    {"Mul", tr_mul},
    {"Div", tr_div},
    {"Sum", tr_sum},
    {"Max", tr_max},
    {"Min", tr_min},
    {"Mean", tr_mean},
    {"Pow", tr_pow},
    DM_UNARY_OPS(UNARY_ENTRY_)
    {"LeakyRelu", tr_leaky_relu},
    {"HardSigmoid", tr_hard_sigmoid},
    {"HardSwish", tr_hardswish},
    {"Clip", tr_clip},
    {NULL, NULL},
};
