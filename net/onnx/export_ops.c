/* export_ops.c: the ONNX exporter's translators, one per Caffe2 op type, and their
 * table (net/onnx/emit.h).
 *
 * Each writes the ONNX (opset 13) nodes that compute what the Caffe2 op computes in
 * Demitasse, or refuses with the reason. Where ONNX needs something Caffe2 keeps in an
 * argument (Reshape's shape, Split's sizes) it becomes a constant initializer; where the
 * equivalent form depends on a rank or shape (FC on a 4-D input, Softmax's flattening,
 * a legacy broadcast at an axis) the known shapes choose the simplest exact form, and a
 * general one is written, or the op refused, when they are unknown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/netdef_build.h"
#include "net/onnx/emit.h"

/* ---- arguments --------------------------------------------------------------------- */

static const Caffe2__Argument *arg(const ex_op *o, const char *name) {
  return dm_opdef_find_arg(o->def, name);
}



/* Whether string argument `name` is `v` (any case); an absent one is `def`. */
static int arg_is(const ex_op *o, const char *name, const char *def, const char *v) {
  const Caffe2__Argument *a = arg(o, name);
  if (!a || !a->has_s)
    return strcasecmp(def, v) == 0;
  return a->s.len == strlen(v) && strncasecmp((const char *)a->s.data, v, a->s.len) == 0;
}

static dm_status need_nchw(oxe *e, const ex_op *o) {
  if (!arg_is(o, "order", "NCHW", "NCHW"))
    return ex_refuse(e, "order is not NCHW (ONNX's ops are NCHW; export the net before the "
                        "layout pass)");
  return DM_OK;
}

/* Refuses when input k (a weight) is an external input the init net does not fill. */
static dm_status need_filled(oxe *e, const ex_op *o, size_t k, const char *slot) {
  if (k < o->def->n_input && o->in_param_missing[k])
    return ex_refuse(e, "%s '%s' is not filled by the init net (a missing fill?)", slot,
                     o->def->input[k]);
  return DM_OK;
}

/* Refuses when an output from `first` on is read later (one ONNX has no counterpart
 * for): `what` names them. */
static dm_status extra_outputs_unused(oxe *e, const ex_op *o, size_t first, const char *what) {
  for (size_t k = first; k < o->def->n_output; k++)
    if (o->out_used[k])
      return ex_refuse(e, "its output %zu '%s' (%s) is read, and ONNX has no such output", k,
                       o->def->output[k], what);
  return DM_OK;
}


/* A node of `type` named `name` (NULL: none) from x to y. */
static dm_status plain(oxe *e, const ex_op *o, const char *type, size_t n_in) {
  if (o->def->n_input != n_in || o->def->n_output < 1)
    return ex_refuse(e, "expected %zu input(s) and an output", n_in);
  DM_TRY(extra_outputs_unused(e, o, 1, "an extra output"));
  ex_node_io(e, o, type, n_in);
  return e->s;
}

/* ---- windows: Conv and the pools ------------------------------------------------- */

typedef struct win {
  int64_t k[2], s[2], d[2], p[4];
  int has_k, legacy;
} win;

/* One (h, w) pair given as `one` | `nh` + `nw` | `list` [h, w], as Caffe2 reads it. */
static dm_status pair(oxe *e, const ex_op *o, const char *one, const char *nh, const char *nw,
                      const char *list, int64_t dflt, int64_t out[2], int *given) {
  const Caffe2__Argument *a1 = arg(o, one), *ah = arg(o, nh), *aw = arg(o, nw), *al = arg(o, list);
  out[0] = out[1] = dflt;
  *given = a1 || ah || aw || al;
  if ((a1 != NULL) + (ah || aw) + (al != NULL) > 1)
    return ex_refuse(e, "'%s', '%s'/'%s' and '%s' are mixed", one, nh, nw, list);
  if (a1) {
    out[0] = out[1] = a1->i;
  } else if (ah || aw) {
    if (!ah || !aw)
      return ex_refuse(e, "'%s' without '%s'", ah ? nh : nw, ah ? nw : nh);
    out[0] = ah->i;
    out[1] = aw->i;
  } else if (al) {
    if (al->n_ints != 2)
      return ex_refuse(e, "'%s' has %zu values; only 2-D windows are exported", list, al->n_ints);
    out[0] = al->ints[0];
    out[1] = al->ints[1];
  }
  return DM_OK;
}

static dm_status window(oxe *e, const ex_op *o, win *w) {
  int given;
  DM_TRY(pair(e, o, "kernel", "kernel_h", "kernel_w", "kernels", 0, w->k, &w->has_k));
  DM_TRY(pair(e, o, "stride", "stride_h", "stride_w", "strides", 1, w->s, &given));
  DM_TRY(pair(e, o, "dilation", "dilation_h", "dilation_w", "dilations", 1, w->d, &given));
  static const char *const side[4] = {"pad_t", "pad_l", "pad_b", "pad_r"};
  const Caffe2__Argument *pad = arg(o, "pad"), *pads = arg(o, "pads");
  int n_side = 0;
  for (int i = 0; i < 4; i++)
    n_side += arg(o, side[i]) != NULL;
  if ((pad != NULL) + (n_side > 0) + (pads != NULL) > 1)
    return ex_refuse(e, "'pad', 'pad_t'/'pad_l'/'pad_b'/'pad_r' and 'pads' are mixed");
  for (int i = 0; i < 4; i++)
    w->p[i] = pad ? pad->i : n_side ? ex_arg_i(o, side[i], 0) : 0;
  if (n_side && n_side != 4)
    return ex_refuse(e, "an incomplete set of pad_t/pad_l/pad_b/pad_r");
  if (pads) {
    if (pads->n_ints != 4)
      return ex_refuse(e, "'pads' has %zu values; only 2-D windows are exported", pads->n_ints);
    memcpy(w->p, pads->ints, sizeof w->p);
  }
  w->legacy = (int)ex_arg_i(o, "legacy_pad", 0);
  if (w->legacy < 0 || w->legacy > 3)
    return ex_refuse(e, "legacy_pad %d", w->legacy);
  return DM_OK;
}

/* kernel_shape, strides, then the padding: explicit pads (t, l, b, r is ONNX's order
 * too), auto_pad VALID, SAME_UPPER (Caffe2's SAME puts an odd pixel at the end), or for
 * pools Caffe's rule (legacy_pad 3: the output size rounded up, a last window that
 * starts in the padding dropped, the head pads on both sides) as ceil_mode 1. */
static void window_attrs(oxe *e, Onnx__NodeProto *n, const win *w) {
  if (w->has_k)
    ex_attr_ints(e, n, "kernel_shape", w->k, 2);
  ex_attr_ints(e, n, "strides", w->s, 2);
  if (w->legacy == 1) {
    ex_attr_str(e, n, "auto_pad", "VALID");
  } else if (w->legacy == 2) {
    ex_attr_str(e, n, "auto_pad", "SAME_UPPER");
  } else if (w->legacy == 3) {
    int64_t p[4] = {w->p[0], w->p[1], w->p[0], w->p[1]};
    ex_attr_ints(e, n, "pads", p, 4);
    ex_attr_int(e, n, "ceil_mode", 1);
  } else {
    ex_attr_ints(e, n, "pads", w->p, 4);
  }
}

/* Conv(X, W, [b]) -> y under the op's arguments. */
static dm_status conv_node(oxe *e, const ex_op *o, const char *b, const char *y) {
  win w;
  DM_TRY(need_nchw(e, o));
  DM_TRY(window(e, o, &w));
  DM_TRY(need_filled(e, o, 1, "W"));
  if (b)
    DM_TRY(need_filled(e, o, 2, "b"));
  if (w.legacy == 3)
    return ex_refuse(e, "legacy_pad 3 (Caffe's pooling rule) on a Conv");
  Onnx__NodeProto *n = ex_node(e, "Conv", o->def->name);
  ex_in(e, n, o->in[0]);
  ex_in(e, n, o->in[1]);
  if (b)
    ex_in(e, n, b);
  ex_out(e, n, y);
  window_attrs(e, n, &w);
  if (w.d[0] != 1 || w.d[1] != 1)
    ex_attr_ints(e, n, "dilations", w.d, 2);
  int64_t group = ex_arg_i(o, "group", 1);
  if (group != 1)
    ex_attr_int(e, n, "group", group);
  return e->s;
}

static dm_status tr_conv(oxe *e, const ex_op *o) {
  if (o->def->n_input < 2 || o->def->n_input > 3 || o->def->n_output != 1)
    return ex_refuse(e, "expected X, W, [b] -> Y");
  return conv_node(e, o, o->def->n_input == 3 ? o->in[2] : NULL, o->out[0]);
}

/* ConvFusion (net/passes/fusion_pass.c's inference fusion) expanded again: Conv, then + S (types 2
 * and 3), then Relu (types 1 and 3). */
static dm_status tr_conv_fusion(oxe *e, const ex_op *o) {
  int64_t t = ex_arg_i(o, "fusion_type", 1);
  size_t n_in = o->def->n_input;
  int has_sum = t == 2 || t == 3, relu = t == 1 || t == 3;
  if (t < 1 || t > 3)
    return ex_refuse(e, "fusion_type %lld", (long long)t);
  if (!arg_is(o, "activation", "Relu", "Relu"))
    return ex_refuse(e, "an activation other than Relu (export the net before the fusion "
                        "pass: `run --no-fuse`, `rewrite` without --fuse)");
  if (n_in < 2 + (size_t)has_sum || n_in > 3 + (size_t)has_sum || o->def->n_output != 1)
    return ex_refuse(e, "expected X, W, [b]%s -> Y", has_sum ? ", S" : "");
  int has_b = n_in == 3 + (size_t)has_sum;
  const char *conv = has_sum || relu ? ex_fresh(e, o->out[0], "_conv") : o->out[0];
  DM_TRY(conv_node(e, o, has_b ? o->in[2] : NULL, conv));
  const char *y = conv;
  if (has_sum) {
    const char *sum = relu ? ex_fresh(e, o->out[0], "_sum") : o->out[0];
    Onnx__NodeProto *n = ex_node(e, "Add", NULL);
    ex_in(e, n, conv);
    ex_in(e, n, o->in[n_in - 1]);
    ex_out(e, n, sum);
    y = sum;
  }
  if (relu)
    ex_unary(e, "Relu", NULL, y, o->out[0]);
  return e->s;
}

/* Caffe's pooling rule (legacy_pad 3) rounds the output size up like ONNX's ceil_mode,
 * but also drops a last window that would start in the padding, which ONNX's shape rule
 * (onnx 1.23) does not. Where that happens the pads that give Caffe's size are written
 * instead (the tail grown by stride * (rounded - floor), as conv_args.c computes), with
 * ceil_mode 0; it can only happen with a head pad, and without X's shape such a pool is
 * refused. */
static dm_status caffe_pool_pads(oxe *e, const ex_op *o, win *w) {
  const ex_shape *sx = &o->in_shape[0];
  int dropped = 0;
  if (!sx->known || sx->ndim != 4) {
    if (w->p[0] || w->p[1])
      return ex_refuse(e, "legacy_pad 3 with padding and X's shape unknown (Caffe drops a last "
                          "window that starts in the padding; ONNX's ceil_mode keeps it): give "
                          "the inputs' shapes");
    return DM_OK;
  }
  int64_t tail[2];
  for (int i = 0; i < 2; i++) {
    int64_t in = sx->dims[2 + i], h = w->p[i], k = w->k[i], s = w->s[i];
    int64_t span = in + 2 * h - k;
    if (span < 0 || s < 1)
      return ex_refuse(e, "a %lld-wide window on %lld pixels with pad %lld", (long long)k,
                       (long long)in, (long long)h);
    int64_t out = (span + s - 1) / s + 1, standard = span / s + 1;
    if (h > 0 && (out - 1) * s >= in + h) {
      out--;
      dropped = 1;
    }
    tail[i] = h + s * (out - standard);
  }
  if (dropped) {
    w->legacy = 0;
    w->p[2] = tail[0];
    w->p[3] = tail[1];
  }
  return DM_OK;
}

static dm_status pool(oxe *e, const ex_op *o, const char *type, const char *global,
                      int average) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  DM_TRY(need_nchw(e, o));
  if (ex_arg_i(o, "global_pooling", 0)) {
    ex_node_io(e, o, global, 1);
    return e->s;
  }
  win w;
  DM_TRY(window(e, o, &w));
  if (!w.has_k)
    return ex_refuse(e, "no kernel size");
  if (w.d[0] != 1 || w.d[1] != 1)
    return ex_refuse(e, "dilated pooling");
  /* The op's ceil_mode is ONNX's rule (operators/conv_args.h); legacy_pad 3 is Caffe's. */
  int ceil = ex_arg_i(o, "ceil_mode", 0) != 0;
  if (ceil && w.legacy)
    return ex_refuse(e, "ceil_mode with legacy_pad %d", w.legacy);
  if (w.legacy == 3)
    DM_TRY(caffe_pool_pads(e, o, &w));
  Onnx__NodeProto *n = ex_node_io(e, o, type, 1);
  window_attrs(e, n, &w);
  if (ceil)
    ex_attr_int(e, n, "ceil_mode", 1);
  /* ONNX's default, as ours, divides by the input pixels of each window only */
  if (average && ex_arg_i(o, "count_include_pad", 0))
    ex_attr_int(e, n, "count_include_pad", 1);
  return e->s;
}

static dm_status tr_maxpool(oxe *e, const ex_op *o) {
  return pool(e, o, "MaxPool", "GlobalMaxPool", 0);
}

static dm_status tr_avgpool(oxe *e, const ex_op *o) {
  return pool(e, o, "AveragePool", "GlobalAveragePool", 1);
}

/* ---- SpatialBN, FC, Softmax, Dropout, LRN -------------------------------------------- */

static dm_status tr_spatial_bn(oxe *e, const ex_op *o) {
  if (!ex_arg_i(o, "is_test", 0))
    return ex_refuse(e, "training mode (is_test 0); export an inference net");
  if (o->def->n_input != 5)
    return ex_refuse(e, "expected X, scale, bias, mean, var");
  DM_TRY(need_nchw(e, o));
  static const char *const slot[] = {"", "scale", "bias", "mean", "var"};
  for (size_t k = 1; k < 5; k++)
    DM_TRY(need_filled(e, o, k, slot[k]));
  DM_TRY(extra_outputs_unused(e, o, 1, "a training statistic"));
  Onnx__NodeProto *n = ex_node_io(e, o, "BatchNormalization", 5);
  ex_attr_float(e, n, "epsilon", ex_arg_f(o, "epsilon", 1e-5f));
  return e->s;
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++)
    p *= d[i];
  return p;
}

/* FC as Gemm(X2, W, b, transB 1): X flattened at `axis` first (unless it is 2-D already
 * and axis is 1), W as (N, K) (a constant of another rank reshaped at axis_w), and for
 * axis > 1 the result reshaped to X's leading dims + N. Then a Relu for FCFusion. */
static dm_status fc(oxe *e, const ex_op *o, int relu) {
  if (o->def->n_input != 3 || o->def->n_output != 1)
    return ex_refuse(e, "expected X, W, b -> Y");
  DM_TRY(need_filled(e, o, 1, "W"));
  DM_TRY(need_filled(e, o, 2, "b"));
  const ex_shape *sx = &o->in_shape[0], *sw = &o->in_shape[1];
  int64_t axis = ex_arg_i(o, "axis", 1), axis_w = ex_arg_i(o, "axis_w", 1);
  const char *w = o->in[1];
  if (!sw->known)
    return ex_refuse(e, "the shape of W '%s' is unknown (give the inputs' shapes)", o->def->input[1]);
  if (axis_w < 0)
    axis_w += sw->ndim;
  if (axis_w < 0 || axis_w > sw->ndim)
    return ex_refuse(e, "axis_w %lld for a W of rank %d", (long long)ex_arg_i(o, "axis_w", 1), sw->ndim);
  int64_t wd[2] = {prod(sw->dims, 0, (int)axis_w), prod(sw->dims, (int)axis_w, sw->ndim)};
  if (sw->ndim != 2 || wd[0] != sw->dims[0]) {
    const ex_const *c = ex_const_find(e, w);
    if (!c)
      return ex_refuse(e, "W is not 2-D and not a constant");
    w = ex_fresh(e, o->def->input[1], "_2d");
    if (w)
      ex_initializer(e, w, c->dtype, 2, wd, c->data);
  }
  if (axis < 0 && sx->known)
    axis += sx->ndim;
  if (axis < 0)
    return ex_refuse(e, "a negative axis on an input of unknown rank");
  if (axis != 1 && !sx->known)
    return ex_refuse(e, "axis %lld on an input of unknown shape (give the inputs' shapes)",
                     (long long)axis);
  if (sx->known && axis > sx->ndim)
    return ex_refuse(e, "axis %lld on a %d-D input", (long long)axis, sx->ndim);
  const char *a = o->in[0];
  if (!(axis == 1 && sx->known && sx->ndim == 2)) {
    a = ex_fresh(e, o->out[0], "_flat");
    ex_attr_int(e, ex_unary(e, "Flatten", NULL, o->in[0], a), "axis", axis);
  }
  int reshape = axis != 1;
  const char *y = relu || reshape ? ex_fresh(e, o->out[0], "_gemm") : o->out[0];
  Onnx__NodeProto *n = ex_node(e, "Gemm", o->def->name);
  ex_in(e, n, a);
  ex_in(e, n, w);
  ex_in(e, n, o->in[2]);
  ex_out(e, n, y);
  ex_attr_int(e, n, "transB", 1);
  if (reshape) {
    int64_t dims[DM_MAX_DIMS + 1];
    memcpy(dims, sx->dims, (size_t)axis * sizeof *dims);
    dims[axis] = wd[0];
    const char *r = relu ? ex_fresh(e, o->out[0], "_fc") : o->out[0];
    ex_reshape_const(e, y, dims, (int)axis + 1, r, NULL);
    y = r;
  }
  if (relu)
    ex_unary(e, "Relu", NULL, y, o->out[0]);
  return e->s;
}

static dm_status tr_fc(oxe *e, const ex_op *o) { return fc(e, o, 0); }

static dm_status tr_fc_fusion(oxe *e, const ex_op *o) {
  if (ex_arg_i(o, "fusion_type", 1) != 1)
    return ex_refuse(e, "fusion_type %lld", (long long)ex_arg_i(o, "fusion_type", 1));
  return fc(e, o, 1);
}

/* Caffe2's Softmax (and LogSoftmax) normalises over dims [axis, ndim) together (ONNX's
 * rule before opset 13); opset 13's normalises along `axis` alone. The same when axis is the last dim or
 * every dim after it is 1; otherwise Flatten at axis, Softmax along the last, and a
 * Reshape back (to the known shape, or to Shape(X) when it is unknown). */
dm_status ex_softmax_like(oxe *e, const ex_op *o, const char *type) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  const ex_shape *sx = &o->in_shape[0];
  int64_t axis = ex_arg_i(o, "axis", 1);
  if (axis < 0 && sx->known)
    axis += sx->ndim;
  if (axis < 0)
    return ex_refuse(e, "a negative axis on an input of unknown rank");
  if (sx->known && (axis >= sx->ndim && sx->ndim > 0))
    return ex_refuse(e, "axis %lld on a %d-D input", (long long)axis, sx->ndim);
  if (sx->known && prod(sx->dims, (int)axis + 1, sx->ndim) == 1) {
    Onnx__NodeProto *n = ex_node_io(e, o, type, 1);
    ex_attr_int(e, n, "axis", axis + 1 == sx->ndim ? -1 : axis);
    return e->s;
  }
  const char *flat = ex_fresh(e, o->out[0], "_flat"), *sm = ex_fresh(e, o->out[0], "_2d");
  ex_attr_int(e, ex_unary(e, "Flatten", NULL, o->in[0], flat), "axis", axis);
  ex_attr_int(e, ex_unary(e, type, o->def->name, flat, sm), "axis", -1);
  if (sx->known) {
    ex_reshape_const(e, sm, sx->dims, sx->ndim, o->out[0], NULL);
  } else {
    const char *shape = ex_fresh(e, o->out[0], "_shape");
    ex_unary(e, "Shape", NULL, o->in[0], shape);
    Onnx__NodeProto *n = ex_unary(e, "Reshape", NULL, sm, o->out[0]);
    ex_in(e, n, shape); /* after X: ONNX's inputs are (data, shape) */
  }
  return e->s;
}

static dm_status tr_softmax(oxe *e, const ex_op *o) { return ex_softmax_like(e, o, "Softmax"); }

static dm_status tr_dropout(oxe *e, const ex_op *o) {
  if (!ex_arg_i(o, "is_test", 0))
    return ex_refuse(e, "training mode (is_test 0); export an inference net");
  DM_TRY(extra_outputs_unused(e, o, 1, "the mask"));
  if (o->def->n_input != 1)
    return ex_refuse(e, "expected X -> Y");
  ex_node_io(e, o, "Identity", 1); /* is_test: Y = X */
  return e->s;
}

/* LRN across channels: the same formula (alpha divided by size); Caffe2's defaults for
 * alpha and beta (0) are not ONNX's, so all four are written. */
static dm_status tr_lrn(oxe *e, const ex_op *o) {
  DM_TRY(need_nchw(e, o));
  const Caffe2__Argument *size = arg(o, "size");
  if (!size || !size->has_i)
    return ex_refuse(e, "no size");
  DM_TRY(extra_outputs_unused(e, o, 1, "the scale"));
  if (o->def->n_input != 1)
    return ex_refuse(e, "expected X -> Y");
  Onnx__NodeProto *n = ex_node_io(e, o, "LRN", 1);
  ex_attr_int(e, n, "size", size->i);
  ex_attr_float(e, n, "alpha", ex_arg_f(o, "alpha", 0));
  ex_attr_float(e, n, "beta", ex_arg_f(o, "beta", 0));
  ex_attr_float(e, n, "bias", ex_arg_f(o, "bias", 1));
  return e->s;
}

/* ---- elementwise -------------------------------------------------------------------- */

static dm_status tr_relu(oxe *e, const ex_op *o) { return plain(e, o, "Relu", 1); }
static dm_status tr_identity(oxe *e, const ex_op *o) { return plain(e, o, "Identity", 1); }

static dm_status tr_sum(oxe *e, const ex_op *o) {
  if (o->def->n_input < 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X0, ... -> Y");
  ex_node_io(e, o, "Sum", o->def->n_input); /* equal shapes, in both */
  return e->s;
}

/* Add/Sub/Mul/Div. Without `broadcast` the shapes are equal. With it, B's dims match a
 * run of A's starting at `axis` (default: trailing): numpy's rule when B ends at A's last
 * dim; otherwise B gets trailing 1s (a reshaped copy of a constant, or a Reshape), which
 * needs A's rank and B's shape. */
static dm_status binary(oxe *e, const ex_op *o, const char *type) {
  if (o->def->n_input != 2 || o->def->n_output != 1)
    return ex_refuse(e, "expected A, B -> C");
  int64_t axis = ex_arg_i(o, "axis", -1);
  const ex_shape *sa = &o->in_shape[0], *sb = &o->in_shape[1];
  if (!ex_arg_i(o, "broadcast", 0) || axis == -1 ||
      (sa->known && sb->known && axis + sb->ndim == sa->ndim)) {
    ex_node_io(e, o, type, 2);
    return e->s;
  }
  if (!sa->known || !sb->known)
    return ex_refuse(e, "a broadcast at axis %lld with %s's shape unknown (give the inputs' "
                        "shapes)", (long long)axis, !sa->known ? "A" : "B");
  if (axis < 0 || axis + sb->ndim > sa->ndim)
    return ex_refuse(e, "broadcast axis %lld for A of rank %d and B of rank %d", (long long)axis,
                     sa->ndim, sb->ndim);
  int64_t dims[DM_MAX_DIMS];
  int nd = (int)(sa->ndim - axis);
  for (int i = 0; i < nd; i++)
    dims[i] = i < sb->ndim ? sb->dims[i] : 1;
  const ex_const *c = ex_const_find(e, o->in[1]);
  const char *b = ex_fresh(e, o->def->input[1], "_bcast");
  if (c) {
    if (b)
      ex_initializer(e, b, c->dtype, nd, dims, c->data);
  } else {
    ex_reshape_const(e, o->in[1], dims, nd, b, NULL);
  }
  Onnx__NodeProto *n = ex_node(e, type, o->def->name);
  ex_in(e, n, o->in[0]);
  ex_in(e, n, b);
  ex_out(e, n, o->out[0]);
  return e->s;
}

static dm_status tr_add(oxe *e, const ex_op *o) { return binary(e, o, "Add"); }
static dm_status tr_sub(oxe *e, const ex_op *o) { return binary(e, o, "Sub"); }
static dm_status tr_mul(oxe *e, const ex_op *o) { return binary(e, o, "Mul"); }
static dm_status tr_div(oxe *e, const ex_op *o) { return binary(e, o, "Div"); }

/* Scale: Mul by a one-element constant of X's dtype (FLOAT or DOUBLE). */
static dm_status tr_scale(oxe *e, const ex_op *o) {
  if (o->def->n_input != 1 || o->def->n_output != 1)
    return ex_refuse(e, "expected X -> Y");
  dm_dtype t = o->in_shape[0].known ? o->in_shape[0].dtype : DM_FLOAT;
  if (t != DM_FLOAT && t != DM_DOUBLE)
    return ex_refuse(e, "a %s input", dm_dtype_name(t));
  float f = ex_arg_f(o, "scale", 1.0f);
  double d = f;
  const char *k = ex_fresh(e, o->out[0], "_scale");
  if (k)
    ex_initializer(e, k, t, 0, NULL, t == DM_FLOAT ? (const void *)&f : (const void *)&d);
  Onnx__NodeProto *n = ex_node(e, "Mul", o->def->name);
  ex_in(e, n, o->in[0]);
  ex_in(e, n, k);
  ex_out(e, n, o->out[0]);
  return e->s;
}

/* ---- tensors ------------------------------------------------------------------------ */

/* Concat's and Split's axis: `axis`, else from `order`; add_axis is refused. */
static dm_status join_axis(oxe *e, const ex_op *o, int64_t *axis) {
  if (ex_arg_i(o, "add_axis", 0))
    return ex_refuse(e, "add_axis 1 (a new axis)");
  if (arg(o, "axis"))
    *axis = ex_arg_i(o, "axis", 1);
  else if (arg_is(o, "order", "NCHW", "NHWC"))
    *axis = 3;
  else if (arg_is(o, "order", "NCHW", "NCHW"))
    *axis = 1;
  else
    return ex_refuse(e, "order is neither NCHW nor NHWC");
  return DM_OK;
}

/* Concat; its split_info output (each input's size along axis), when read, becomes a
 * constant from the known shapes. */
static dm_status tr_concat(oxe *e, const ex_op *o) {
  int64_t axis;
  DM_TRY(join_axis(e, o, &axis));
  size_t n_in = o->def->n_input;
  if (n_in < 1 || o->def->n_output < 1 || o->def->n_output > 2)
    return ex_refuse(e, "expected X0, ... -> Y, [split_info]");
  if (o->def->n_output == 2 && o->out_used[1]) {
    int32_t *sizes = malloc(n_in * sizeof *sizes);
    if (!sizes)
      return DM_NOMEM("split sizes");
    for (size_t k = 0; k < n_in; k++) {
      const ex_shape *s = &o->in_shape[k];
      int64_t a = axis < 0 && s->known ? axis + s->ndim : axis;
      if (!s->known || a < 0 || a >= s->ndim) {
        free(sizes);
        return ex_refuse(e, "split_info is read and input %zu's shape is unknown", k);
      }
      sizes[k] = (int32_t)s->dims[a];
    }
    int64_t d = (int64_t)n_in;
    ex_initializer(e, o->out[1], DM_INT32, 1, &d, sizes);
    free(sizes);
  }
  Onnx__NodeProto *n = ex_node_io(e, o, "Concat", n_in);
  ex_attr_int(e, n, "axis", axis);
  return e->s;
}

/* The values of constant `name` (INT32 or INT64, any rank) as int64, or NULL. */
static int64_t *const_ints(oxe *e, const char *name, size_t *n) {
  const ex_const *c = ex_const_find(e, name);
  if (!c || (c->dtype != DM_INT64 && c->dtype != DM_INT32))
    return NULL;
  int64_t *v = malloc((size_t)c->numel * sizeof *v + 1);
  if (!v)
    return NULL;
  for (int64_t i = 0; i < c->numel; i++)
    v[i] = c->dtype == DM_INT64 ? ((const int64_t *)c->data)[i] : ((const int32_t *)c->data)[i];
  *n = (size_t)c->numel;
  return v;
}

/* Input k, an integer constant, as a 1-D INT64 one: itself when it is one, else an
 * INT64 copy "<output 0><suffix>". NULL when it is no integer constant (or out of
 * memory: e->s). */
static const char *int64_input(oxe *e, const ex_op *o, size_t k, const char *suffix) {
  const ex_const *c = ex_const_find(e, o->in[k]);
  if (c && c->dtype == DM_INT64 && c->ndim == 1)
    return o->in[k];
  size_t n = 0;
  int64_t *v = const_ints(e, o->in[k], &n);
  if (!v)
    return NULL;
  const char *name = ex_const_i64(e, o->out[0], suffix, v, n);
  free(v);
  return name;
}

/* Reshape: the `shape` argument (or a constant second input) as an INT64 initializer (0
 * keeps a dim and -1 is inferred in both); its old_shape output, when read, a constant
 * from X's known shape. */
static dm_status tr_reshape(oxe *e, const ex_op *o) {
  const Caffe2__Argument *sa = arg(o, "shape");
  size_t n_in = o->def->n_input;
  if (n_in < 1 || n_in > 2 || o->def->n_output < 1 || o->def->n_output > 2)
    return ex_refuse(e, "expected X, [new_shape] -> Y, [old_shape]");
  if ((sa != NULL) == (n_in == 2))
    return ex_refuse(e, "give the shape as the argument or as the second input");
  const char *shape = NULL;
  if (sa) {
    shape = ex_const_i64(e, o->out[0], "_shape", sa->ints, sa->n_ints);
  } else if (ex_const_find(e, o->in[1])) {
    shape = int64_input(e, o, 1, "_shape");
    if (!shape)
      return e->s != DM_OK ? e->s : ex_refuse(e, "new_shape is not an integer constant");
  } else if (o->in_shape[1].known && o->in_shape[1].dtype == DM_INT64) {
    shape = o->in[1];
  } else {
    return ex_refuse(e, "new_shape is computed and not known to be INT64");
  }
  if (o->def->n_output == 2 && o->out_used[1]) {
    const ex_shape *sx = &o->in_shape[0];
    if (!sx->known)
      return ex_refuse(e, "old_shape is read and X's shape is unknown");
    int64_t d = sx->ndim;
    ex_initializer(e, o->out[1], DM_INT64, 1, &d, sx->dims);
  }
  Onnx__NodeProto *n = ex_node(e, "Reshape", o->def->name);
  ex_in(e, n, o->in[0]);
  ex_in(e, n, shape);
  ex_out(e, n, o->out[0]);
  return e->s;
}

static dm_status tr_flatten(oxe *e, const ex_op *o) {
  DM_TRY(plain(e, o, "Flatten", 1));
  ex_attr_int(e, e->g->node[e->g->n_node - 1], "axis", ex_arg_i(o, "axis", 1));
  return e->s;
}

static dm_status tr_transpose(oxe *e, const ex_op *o) {
  DM_TRY(plain(e, o, "Transpose", 1));
  const Caffe2__Argument *a = arg(o, "axes");
  if (a) /* absent: reversed, in both */
    ex_attr_ints(e, e->g->node[e->g->n_node - 1], "perm", a->ints, a->n_ints);
  return e->s;
}

/* Cast `to` (a DataType number or name, as Caffe2 reads it). */
static dm_status cast_to(oxe *e, const ex_op *o, dm_dtype to) {
  int32_t ot = ex_onnx_dtype(to);
  if (!ot)
    return ex_refuse(e, "a cast to %s", dm_dtype_name(to));
  DM_TRY(plain(e, o, "Cast", 1));
  ex_attr_int(e, e->g->node[e->g->n_node - 1], "to", ot);
  return e->s;
}

static dm_status tr_cast(oxe *e, const ex_op *o) {
  const Caffe2__Argument *a = arg(o, "to");
  dm_dtype to = DM_UNDEFINED;
  if (a && a->has_s) {
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)a->s.len, (const char *)a->s.data);
    if (dm_dtype_from_name(name, &to) != DM_OK)
      return ex_refuse(e, "unknown 'to' type '%s'", name);
  } else if (a && a->has_i && a->i >= 0 && a->i < 1000 && dm_dtype_is_valid((int)a->i)) {
    to = (dm_dtype)a->i;
  } else {
    return ex_refuse(e, "'to' is not a data type");
  }
  return cast_to(e, o, to == DM_BYTE ? DM_UINT8 : to);
}

static dm_status tr_float_to_half(oxe *e, const ex_op *o) { return cast_to(e, o, DM_FLOAT16); }
static dm_status tr_half_to_float(oxe *e, const ex_op *o) { return cast_to(e, o, DM_FLOAT); }

/* Split: the sizes (argument or constant second input) as opset 13's INT64 input; none:
 * equal parts in both. */
static dm_status tr_split(oxe *e, const ex_op *o) {
  int64_t axis;
  DM_TRY(join_axis(e, o, &axis));
  size_t n_in = o->def->n_input;
  if (n_in < 1 || n_in > 2 || o->def->n_output < 1)
    return ex_refuse(e, "expected X, [split] -> Y0, ...");
  const Caffe2__Argument *sa = arg(o, "split");
  const char *sizes = NULL;
  if (sa && n_in == 2)
    return ex_refuse(e, "the sizes are given twice");
  if (sa) {
    sizes = ex_const_i64(e, o->out[0], "_split", sa->ints, sa->n_ints);
  } else if (n_in == 2) {
    sizes = int64_input(e, o, 1, "_split");
    if (!sizes)
      return e->s != DM_OK ? e->s : ex_refuse(e, "the split sizes are not an integer constant");
  }
  Onnx__NodeProto *n = ex_node(e, "Split", o->def->name);
  ex_in(e, n, o->in[0]);
  if (sizes)
    ex_in(e, n, sizes);
  for (size_t k = 0; k < o->def->n_output; k++)
    ex_out(e, n, o->out[k]);
  ex_attr_int(e, n, "axis", axis);
  return e->s;
}

const ex_translator ex_ops[] = {
    {"Conv", tr_conv},
    {"ConvFusion", tr_conv_fusion},
    {"MaxPool", tr_maxpool},
    {"AveragePool", tr_avgpool},
    {"SpatialBN", tr_spatial_bn},
    {"FC", tr_fc},
    {"FCFusion", tr_fc_fusion},
    {"Softmax", tr_softmax},
    {"Dropout", tr_dropout},
    {"LRN", tr_lrn},
    {"Relu", tr_relu},
    {"Copy", tr_identity},
    {"StopGradient", tr_identity},
    {"CopyCPUToGPU", tr_identity},
    {"CopyGPUToCPU", tr_identity},
    {"Sum", tr_sum},
    {"Add", tr_add},
    {"Sub", tr_sub},
    {"Mul", tr_mul},
    {"Div", tr_div},
    {"Scale", tr_scale},
    {"Concat", tr_concat},
    {"Reshape", tr_reshape},
    {"Flatten", tr_flatten},
    {"Transpose", tr_transpose},
    {"Cast", tr_cast},
    {"FloatToHalf", tr_float_to_half},
    {"HalfToFloat", tr_half_to_float},
    {"Split", tr_split},
    {NULL, NULL},
};
