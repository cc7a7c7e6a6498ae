/* export_seq.c: ONNX exporters for the sequence-model ops (operators/tensor_ops.c's
 * Gather, where.c, layernorm.c, masked_softmax.c and the unary family's Gelu), in
 * opset 13 forms, so that a transformer exports without raising the model's opset.
 *
 * Gather and Where map to the ONNX ops of the same meaning. The others have no opset-13
 * op and are written as their definitions:
 *   LayerNorm      ReduceMean, Sub, Mul, ReduceMean, Add(epsilon), Sqrt, Div (then
 *                  * gamma + beta) over dims [axis, ndim), as torch.onnx writes it below
 *                  opset 17;
 *   Gelu           X * 0.5 * (1 + Erf(X / sqrt(2))), or fast_gelu's tanh form;
 *   MaskedSoftmax  Softmax(-1) of scale * X (+ mask) (+ a constant causal mask of 0 and
 *                  -inf for the keys j > i + (Tk - Tq)).
 * Their kernels compute in FP32 whatever the input's dtype, so a FLOAT16 or BFLOAT16
 * input is cast to FLOAT first and the result back, and the constants are FLOAT; these
 * three need the inputs' dtypes, so the export needs the graph inputs' shapes.
 *
 * One difference is left to the reader: a MaskedSoftmax row whose every key the mask
 * removes is zeros in Demitasse and NaN in ONNX's Softmax (exp of -inf everywhere); a
 * causal mask alone never empties a row when Tk >= Tq, and the export refuses Tk < Tq.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net/onnx/emit.h"

/* A FLOAT scalar initializer "<out0><suffix>" holding v; its name. */
static const char *scalar(oxe *e, const ex_op *o, const char *suffix, float v) {
  const char *k = ex_fresh(e, o->out[0], suffix);
  if (k)
    ex_initializer(e, k, DM_FLOAT, 0, NULL, &v);
  return k;
}

/* Whether input k is FLOAT16 or BFLOAT16 (computed here in FLOAT); its dtype is known
 * (need_dtype has refused the op otherwise). */
static int narrow_input(const ex_op *o, size_t k) {
  const ex_shape *s = &o->in_shape[k];
  return s->known && (s->dtype == DM_FLOAT16 || s->dtype == DM_BFLOAT16);
}

/* The definitions' constants are FLOAT and 16-bit inputs get a Cast: without the inputs'
 * shapes (and so dtypes) a 16-bit net would be written ill-typed, so refuse. */
static dm_status need_dtype(oxe *e, const ex_op *o) {
  for (size_t k = 0; k < o->def->n_input; k++)
    if (!o->in_shape[k].known)
      return ex_refuse(e, "the dtype of input %zu ('%s') is unknown (give the inputs' shapes)",
                       k, o->def->input[k]);
  return DM_OK;
}

/* Input k as FLOAT: its name, or a Cast of it when it is 16-bit. */
static const char *as_float(oxe *e, const ex_op *o, size_t k) {
  if (!narrow_input(o, k))
    return o->in[k];
  const char *f = ex_fresh(e, o->out[0], k == 0 ? "_x32" : "_in32");
  ex_attr_int(e, ex_unary(e, "Cast", NULL, o->in[k], f), "to", ex_onnx_dtype(DM_FLOAT));
  return f;
}

/* Where the FLOAT result of an op on input 0 goes: out0 itself, or a fresh name that
 * finish() casts back to input 0's dtype. */
static const char *result_name(oxe *e, const ex_op *o) {
  return narrow_input(o, 0) ? ex_fresh(e, o->out[0], "_y32") : o->out[0];
}

static dm_status finish(oxe *e, const ex_op *o, const char *y) {
  if (narrow_input(o, 0))
    ex_attr_int(e, ex_unary(e, "Cast", NULL, y, o->out[0]), "to",
                ex_onnx_dtype(o->in_shape[0].dtype));
  return e->s;
}

/* Gather(DATA, INDICES) along `axis` (default 0), ONNX's Gather. */
static dm_status tr_gather(oxe *e, const ex_op *o) {
  if (o->def->n_input != 2 || o->def->n_output != 1)
    return ex_refuse(e, "expected DATA, INDICES -> OUTPUT");
  ex_attr_int(e, ex_node_io(e, o, "Gather", 2), "axis", ex_arg_i(o, "axis", 0));
  return e->s;
}

/* Where(C, X, Y): the same numpy broadcasting in both. */
static dm_status tr_where(oxe *e, const ex_op *o) {
  if (o->def->n_input != 3 || o->def->n_output != 1)
    return ex_refuse(e, "expected C, X, Y -> Z");
  ex_node_io(e, o, "Where", 3);
  return e->s;
}

/* LayerNorm X [, gamma, beta] -> Y [, mean, std], over dims [axis, ndim). */
static dm_status tr_layer_norm(oxe *e, const ex_op *o) {
  const ex_shape *sx = &o->in_shape[0];
  int affine = ex_arg_i(o, "elementwise_affine", 0) != 0;
  if (o->def->n_input != (affine ? 3u : 1u) || o->def->n_output < 1)
    return ex_refuse(e, "expected X%s -> Y", affine ? ", gamma, beta" : "");
  for (size_t k = 1; k < o->def->n_output; k++)
    if (o->out_used[k])
      return ex_refuse(e, "output %zu (%s) is read: only Y is exported", k,
                       k == 1 ? "mean" : "std");
  if (!sx->known)
    return ex_refuse(e, "the shape of X is unknown (give the inputs' shapes)");
  DM_TRY(need_dtype(e, o));
  int64_t axis = ex_arg_i(o, "axis", 1);
  if (axis < 0)
    axis += sx->ndim;
  if (axis < 0 || axis >= sx->ndim)
    return ex_refuse(e, "axis %lld on a %d-D input", (long long)ex_arg_i(o, "axis", 1),
                     sx->ndim);
  int64_t axes[DM_MAX_DIMS];
  size_t na = 0;
  for (int64_t d = axis; d < sx->ndim; d++)
    axes[na++] = d;
  const char *x = as_float(e, o, 0);
  const char *mean = ex_fresh(e, o->out[0], "_mean"), *dev = ex_fresh(e, o->out[0], "_dev");
  const char *sq = ex_fresh(e, o->out[0], "_sq"), *var = ex_fresh(e, o->out[0], "_var");
  const char *vare = ex_fresh(e, o->out[0], "_vareps"), *sd = ex_fresh(e, o->out[0], "_std");
  Onnx__NodeProto *m = ex_unary(e, "ReduceMean", NULL, x, mean);
  ex_attr_ints(e, m, "axes", axes, na);
  ex_attr_int(e, m, "keepdims", 1);
  ex_binary(e, "Sub", NULL, x, mean, dev);
  ex_binary(e, "Mul", NULL, dev, dev, sq);
  Onnx__NodeProto *v = ex_unary(e, "ReduceMean", NULL, sq, var);
  ex_attr_ints(e, v, "axes", axes, na);
  ex_attr_int(e, v, "keepdims", 1);
  ex_binary(e, "Add", NULL, var, scalar(e, o, "_eps", ex_arg_f(o, "epsilon", 1e-5f)), vare);
  ex_unary(e, "Sqrt", NULL, vare, sd);
  const char *y = result_name(e, o);
  if (!affine) {
    ex_binary(e, "Div", o->def->name, dev, sd, y);
    return finish(e, o, y);
  }
  /* gamma and beta hold D = prod(dims[axis:]) values; shaped as those dims they
   * broadcast along the leading ones. */
  const char *norm = ex_fresh(e, o->out[0], "_norm"), *scaled = ex_fresh(e, o->out[0], "_g");
  ex_binary(e, "Div", NULL, dev, sd, norm);
  const char *gb[2];
  for (int k = 0; k < 2; k++) {
    gb[k] = ex_fresh(e, o->def->input[1 + k], "_nd");
    ex_reshape_const(e, as_float(e, o, 1 + (size_t)k), sx->dims + axis, sx->ndim - (int)axis,
                     gb[k], NULL);
  }
  ex_binary(e, "Mul", NULL, norm, gb[0], scaled);
  ex_binary(e, "Add", o->def->name, scaled, gb[1], y);
  return finish(e, o, y);
}

/* Gelu: the exact (erf) form, or with fast_gelu=1 the tanh approximation. */
static dm_status tr_gelu(oxe *e, const ex_op *o) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  DM_TRY(need_dtype(e, o));
  const char *x = as_float(e, o, 0), *inner = ex_fresh(e, o->out[0], "_in");
  const char *t = ex_fresh(e, o->out[0], "_t"), *t1 = ex_fresh(e, o->out[0], "_t1");
  const char *h = ex_fresh(e, o->out[0], "_half"), *one = scalar(e, o, "_one", 1.0f);
  const char *y = result_name(e, o);
  if (ex_arg_i(o, "fast_gelu", 0) != 0) {
    /* sqrt(2/pi) * (x + 0.044715 x^3) = sqrt(2/pi) * x * (1 + 0.044715 x^2) */
    const char *x2 = ex_fresh(e, o->out[0], "_x2"), *p = ex_fresh(e, o->out[0], "_p");
    const char *p1 = ex_fresh(e, o->out[0], "_p1"), *xp = ex_fresh(e, o->out[0], "_xp");
    ex_binary(e, "Mul", NULL, x, x, x2);
    ex_binary(e, "Mul", NULL, x2, scalar(e, o, "_c", 0.044715f), p);
    ex_binary(e, "Add", NULL, p, one, p1);
    ex_binary(e, "Mul", NULL, x, p1, xp);
    ex_binary(e, "Mul", NULL, xp, scalar(e, o, "_k", 0.7978845608028654f), inner);
    ex_unary(e, "Tanh", NULL, inner, t);
  } else {
    ex_binary(e, "Mul", NULL, x, scalar(e, o, "_rsqrt2", 0.70710678118654752f), inner);
    ex_unary(e, "Erf", NULL, inner, t);
  }
  ex_binary(e, "Add", NULL, t, one, t1);
  ex_binary(e, "Mul", NULL, x, scalar(e, o, "_0.5", 0.5f), h);
  ex_binary(e, "Mul", o->def->name, h, t1, y);
  return finish(e, o, y);
}

/* The causal mask of a [Tq, Tk] score block: 0 where key j <= i + (Tk - Tq), else -inf. */
static const char *causal_mask(oxe *e, const ex_op *o, int64_t tq, int64_t tk) {
  float *m = malloc((size_t)(tq * tk) * sizeof *m);
  if (!m) {
    ex_fail(e, DM_NOMEM("a causal mask"));
    return NULL;
  }
  for (int64_t i = 0; i < tq; i++)
    for (int64_t j = 0; j < tk; j++)
      m[i * tk + j] = j > i + (tk - tq) ? -INFINITY : 0.0f;
  const char *k = ex_fresh(e, o->out[0], "_causal");
  if (k)
    ex_initializer(e, k, DM_FLOAT, 2, (const int64_t[]){tq, tk}, m);
  free(m);
  return k;
}

/* MaskedSoftmax X [, mask] -> Y over the last axis. */
static dm_status tr_masked_softmax(oxe *e, const ex_op *o) {
  if (o->def->n_input < 1 || o->def->n_input > 2 || o->def->n_output != 1)
    return ex_refuse(e, "expected X [, mask] -> Y");
  const ex_shape *sx = &o->in_shape[0];
  int causal = ex_arg_i(o, "causal", 0) != 0;
  float scale = ex_arg_f(o, "scale", 1.0f);
  if (causal && (!sx->known || sx->ndim < 2))
    return ex_refuse(e, "causal=1 needs X's shape, [..., Tq, Tk] (give the inputs' shapes)");
  int64_t tq = causal ? sx->dims[sx->ndim - 2] : 0, tk = causal ? sx->dims[sx->ndim - 1] : 0;
  if (causal && tk < tq)
    return ex_refuse(e, "causal=1 with Tk %lld < Tq %lld: its first rows are all masked, "
                        "zeros here and NaN in ONNX's Softmax",
                     (long long)tk, (long long)tq);
  DM_TRY(need_dtype(e, o));
  const char *z = as_float(e, o, 0);
  if (scale != 1.0f) {
    const char *s = ex_fresh(e, o->out[0], "_scaled");
    ex_binary(e, "Mul", NULL, z, scalar(e, o, "_scale", scale), s);
    z = s;
  }
  if (o->def->n_input == 2) {
    const char *s = ex_fresh(e, o->out[0], "_masked");
    ex_binary(e, "Add", NULL, z, as_float(e, o, 1), s);
    z = s;
  }
  if (causal) {
    const char *s = ex_fresh(e, o->out[0], "_causal_in");
    ex_binary(e, "Add", NULL, z, causal_mask(e, o, tq, tk), s);
    z = s;
  }
  const char *y = result_name(e, o);
  ex_attr_int(e, ex_unary(e, "Softmax", o->def->name, z, y), "axis", -1);
  return finish(e, o, y);
}

const ex_translator ex_ops_seq[] = {
    {"Gather", tr_gather},
    {"Where", tr_where},
    {"LayerNorm", tr_layer_norm},
    {"Gelu", tr_gelu},
    {"MaskedSoftmax", tr_masked_softmax},
    {NULL, NULL},
};
