/* export_math.c: ONNX exporters for the activations, n-ary math and reductions
 * (operators/unary_math.c, nary_math.c, reduce.c, log_softmax.c), opset 13 forms; the
 * activations marked PLAIN in operators/unary_family.h from that table.
 *
 * Each maps to the ONNX op of the same meaning; where the opset differs from Caffe2's
 * argument form, the argument becomes what opset 13 wants: Clip's bounds and ReduceSum's
 * axes are inputs (initializers made here), Pow's `exponent` a scalar initializer, and
 * HardSwish (opset 14) is written as X * HardSigmoid(X; 1/6, 1/2), its definition.
 *
 * BatchMatMul and MatMul (operators/batch_matmul.c) become ONNX MatMul, numpy's matmul
 * rule, which BatchMatMul's broadcast=1 is and broadcast=0 a case of; trans_a/trans_b
 * become a Transpose of the last two dims, and MatMul's axis_a/axis_b a Flatten.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "net/netdef_build.h"
#include "net/onnx/emit.h"
#include "operators/unary_family.h"

/* X -> Y as one node of `type` (in *node, for its attributes). */
static dm_status unary_op(oxe *e, const ex_op *o, const char *type, Onnx__NodeProto **node) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  Onnx__NodeProto *n = ex_node_io(e, o, type, 1);
  if (node)
    *node = n;
  return e->s;
}

/* The rows of operators/unary_family.h marked PLAIN: the ONNX op of the same name. */
static dm_status tr_unary_plain(oxe *e, const ex_op *o) {
  return unary_op(e, o, o->def->type, NULL);
}
#define UNARY_ENTRY_(Name, args, reads_x, onnx, ...)                                      \
  DM_UN_IF_PLAIN(onnx, {#Name, tr_unary_plain}, )

/* The defaults are the Caffe2 ops' (operators/unary_math.c), written out always. */
static dm_status tr_leaky_relu(oxe *e, const ex_op *o) {
  Onnx__NodeProto *n = NULL;
  DM_TRY(unary_op(e, o, "LeakyRelu", &n));
  ex_attr_float(e, n, "alpha", ex_arg_f(o, "alpha", 0.01f));
  return e->s;
}

static dm_status tr_hard_sigmoid(oxe *e, const ex_op *o) {
  Onnx__NodeProto *n = NULL;
  DM_TRY(unary_op(e, o, "HardSigmoid", &n));
  ex_attr_float(e, n, "alpha", ex_arg_f(o, "alpha", 0.2f));
  ex_attr_float(e, n, "beta", ex_arg_f(o, "beta", 0.5f));
  return e->s;
}

static dm_status tr_hard_swish(oxe *e, const ex_op *o) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  const char *gate = ex_fresh(e, o->out[0], "_gate");
  Onnx__NodeProto *h = ex_node(e, "HardSigmoid", NULL);
  ex_in(e, h, o->in[0]);
  ex_out(e, h, gate);
  ex_attr_float(e, h, "alpha", 1.0f / 6.0f);
  ex_attr_float(e, h, "beta", 0.5f);
  Onnx__NodeProto *m = ex_node(e, "Mul", o->def->name);
  ex_in(e, m, o->in[0]);
  ex_in(e, m, gate);
  ex_out(e, m, o->out[0]);
  return e->s;
}

/* A FLOAT scalar initializer "<out><suffix>" holding v; its name. */
static const char *scalar(oxe *e, const ex_op *o, const char *suffix, float v) {
  const char *k = ex_fresh(e, o->out[0], suffix);
  if (k)
    ex_initializer(e, k, DM_FLOAT, 0, NULL, &v);
  return k;
}

/* Clip(min, max) with absent bounds as the float range's ends (what Caffe2's defaults
 * mean), both written as opset 13's inputs. */
static dm_status tr_clip(oxe *e, const ex_op *o) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  const char *lo = scalar(e, o, "_min", ex_arg_f(o, "min", -FLT_MAX));
  const char *hi = scalar(e, o, "_max", ex_arg_f(o, "max", FLT_MAX));
  Onnx__NodeProto *n = ex_node_io(e, o, "Clip", 1);
  ex_in(e, n, lo);
  ex_in(e, n, hi);
  return e->s;
}

/* Pow(X, exponent) or Pow(X, Y). */
static dm_status tr_pow(oxe *e, const ex_op *o) {
  if (o->def->n_output != 1 || o->def->n_input < 1 || o->def->n_input > 2)
    return ex_refuse(e, "expected X [, Y] -> Z");
  if (o->def->n_input == 2) {
    ex_node_io(e, o, "Pow", 2);
    return e->s;
  }
  if (!dm_opdef_find_arg(o->def, "exponent"))
    return ex_refuse(e, "no exponent argument and no second input");
  const char *k = scalar(e, o, "_exponent", ex_arg_f(o, "exponent", 1.0f));
  Onnx__NodeProto *n = ex_node_io(e, o, "Pow", 1);
  ex_in(e, n, k);
  return e->s;
}

/* Max, Min, Mean: n-ary with numpy broadcasting in both. */
static dm_status nary(oxe *e, const ex_op *o, const char *type) {
  if (o->def->n_input < 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X0, ... -> Y");
  ex_node_io(e, o, type, o->def->n_input);
  return e->s;
}

static dm_status tr_max(oxe *e, const ex_op *o) { return nary(e, o, "Max"); }
static dm_status tr_min(oxe *e, const ex_op *o) { return nary(e, o, "Min"); }
static dm_status tr_mean(oxe *e, const ex_op *o) { return nary(e, o, "Mean"); }

static dm_status tr_log_softmax(oxe *e, const ex_op *o) {
  return ex_softmax_like(e, o, "LogSoftmax");
}

/* ReduceSum/Mean/Max(axes, keepdims): absent axes reduce every dim, in both. Opset 13's
 * ReduceSum takes the axes as an input, the others as an attribute. */
static dm_status reduce(oxe *e, const ex_op *o, const char *type, int axes_input) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  const Caffe2__Argument *axes = dm_opdef_find_arg(o->def, "axes");
  Onnx__NodeProto *n = ex_node_io(e, o, type, 1);
  if (axes && axes->n_ints) {
    if (axes_input)
      ex_in(e, n, ex_const_i64(e, o->out[0], "_axes", axes->ints, axes->n_ints));
    else
      ex_attr_ints(e, n, "axes", axes->ints, axes->n_ints);
  }
  ex_attr_int(e, n, "keepdims", ex_arg_i(o, "keepdims", 1) != 0);
  return e->s;
}

static dm_status tr_reduce_sum(oxe *e, const ex_op *o) { return reduce(e, o, "ReduceSum", 1); }
static dm_status tr_reduce_mean(oxe *e, const ex_op *o) { return reduce(e, o, "ReduceMean", 0); }
static dm_status tr_reduce_max(oxe *e, const ex_op *o) { return reduce(e, o, "ReduceMax", 0); }

/* Input i of a matrix product as ONNX MatMul's operand: with `flatten`, flattened to
 * 2-D at `axis` (MatMul's axis_a/axis_b), then with its last two dims swapped when
 * `trans` (a 1-D input of BatchMatMul has no transpose). NULL after a refusal. */
static const char *mm_operand(oxe *e, const ex_op *o, int i, int flatten, int64_t axis,
                              int trans) {
  const ex_shape *s = &o->in_shape[i];
  const char *x = o->in[i];
  int rank = s->known ? s->ndim : -1;
  if (axis < 0 && rank >= 0)
    axis += rank;
  if (flatten && !(rank == 2 && axis == 1)) {
    /* Caffe2 flattens at an axis in [0, rank); axis 0 gives [1, numel] in both */
    if (axis < 0 || (rank >= 0 && axis >= rank)) {
      ex_refuse(e, "axis %lld on input %d of %s rank", (long long)axis, i,
                rank < 0 ? "unknown" : "lower");
      return NULL;
    }
    const char *f = ex_fresh(e, o->out[0], i ? "_b2d" : "_a2d");
    Onnx__NodeProto *n = ex_node(e, "Flatten", NULL);
    ex_in(e, n, x);
    ex_out(e, n, f);
    ex_attr_int(e, n, "axis", axis);
    x = f;
    rank = 2;
  }
  if (!trans || rank == 1)
    return x;
  if (rank < 2) {
    ex_refuse(e, "trans_%c on an input of unknown rank (give the inputs' shapes)", i ? 'b' : 'a');
    return NULL;
  }
  int64_t perm[DM_MAX_DIMS];
  for (int d = 0; d < rank; d++)
    perm[d] = d;
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = rank - 2;
  const char *t = ex_fresh(e, o->out[0], i ? "_bt" : "_at");
  Onnx__NodeProto *n = ex_node(e, "Transpose", NULL);
  ex_in(e, n, x);
  ex_out(e, n, t);
  ex_attr_ints(e, n, "perm", perm, (size_t)rank);
  return t;
}

static dm_status matmul(oxe *e, const ex_op *o, int flatten) {
  if (o->def->n_input != 2 || o->def->n_output != 1)
    return ex_refuse(e, "expected A, B -> Y");
  if (!flatten && o->in_shape[0].known && o->in_shape[1].known && o->in_shape[0].ndim == 1 &&
      o->in_shape[1].ndim == 1)
    return ex_refuse(e, "two 1-D inputs (BatchMatMul's Y is [1], ONNX MatMul's a scalar)");
  const char *a = mm_operand(e, o, 0, flatten, ex_arg_i(o, "axis_a", 1),
                             ex_arg_i(o, "trans_a", 0) != 0);
  const char *b = a ? mm_operand(e, o, 1, flatten, ex_arg_i(o, "axis_b", 1),
                                 ex_arg_i(o, "trans_b", 0) != 0)
                    : NULL;
  if (!a || !b)
    return e->s != DM_OK ? e->s : EX_REFUSED;
  Onnx__NodeProto *n = ex_node(e, "MatMul", o->def->name);
  ex_in(e, n, a);
  ex_in(e, n, b);
  ex_out(e, n, o->out[0]);
  return e->s;
}

static dm_status tr_batch_matmul(oxe *e, const ex_op *o) { return matmul(e, o, 0); }
static dm_status tr_matmul(oxe *e, const ex_op *o) { return matmul(e, o, 1); }

const ex_translator ex_ops_math[] = {
    DM_UNARY_OPS(UNARY_ENTRY_)
    {"LeakyRelu", tr_leaky_relu},
    {"HardSigmoid", tr_hard_sigmoid},
    {"HardSwish", tr_hard_swish},
    {"Clip", tr_clip},
    {"Pow", tr_pow},
    {"Max", tr_max},
    {"Min", tr_min},
    {"Mean", tr_mean},
    {"LogSoftmax", tr_log_softmax},
    {"ReduceSum", tr_reduce_sum},
    {"ReduceMean", tr_reduce_mean},
    {"ReduceMax", tr_reduce_max},
    {"BatchMatMul", tr_batch_matmul},
    {"MatMul", tr_matmul},
    {NULL, NULL},
};
