/* import_nn.c: ONNX translators for conv, pools, Gemm/MatMul as FC, BatchNormalization,
 * LayerNormalization, Dropout, Softmax, LRN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/onnx/translate.h"

/* Window arguments shared by Conv and the pools: kernel_shape, strides, pads, dilations,
 * auto_pad. 2-D only, as the Caffe2 ops. */
static dm_status window_args(imp *c, const Onnx__NodeProto *n, dm_opb *b, int is_pool,
                             const int64_t *kernel_dims) {
  size_t nk, ns, np, nd;
  const int64_t *k = ox_attr_ints(n, "kernel_shape", &nk);
  const int64_t *st = ox_attr_ints(n, "strides", &ns);
  const int64_t *p = ox_attr_ints(n, "pads", &np);
  const int64_t *d = ox_attr_ints(n, "dilations", &nd);
  if (!k && kernel_dims) {
    k = kernel_dims;
    nk = 2;
  }
  if (!k)
    return ox_refuse(c, "no kernel_shape and the weights are not an initializer");
  if (nk != 2)
    return ox_refuse(c, "%zu-D; only 2-D windows are supported", nk);
  if ((st && ns != 2) || (p && np != 4) || (d && nd != 2))
    return ox_refuse(c, "strides/pads/dilations do not match a 2-D kernel");
  dm_opb_arg_ints(b, "kernels", k, 2);
  if (st)
    dm_opb_arg_ints(b, "strides", st, 2);
  if (d && (d[0] != 1 || d[1] != 1))
    dm_opb_arg_ints(b, "dilations", d, 2);
  int ceil_mode = is_pool && ox_attr_int(n, "ceil_mode", 0) != 0;
  if (ox_attr_str_is(n, "auto_pad", "NOTSET", "NOTSET")) {
    int64_t zero[4] = {0, 0, 0, 0};
    if (!p)
      p = zero;
    if (ceil_mode) /* the pools' ceil_mode is ONNX's (operators/conv_args.c) */
      dm_opb_arg_int(b, "ceil_mode", 1);
    dm_opb_arg_ints(b, "pads", p, 4); /* ONNX's order is Caffe2's: t, l, b, r */
  } else if (ceil_mode) {
    return ox_refuse(c, "ceil_mode with auto_pad");
  } else if (ox_attr_str_is(n, "auto_pad", "NOTSET", "VALID")) {
    dm_opb_arg_int(b, "legacy_pad", 1);
  } else if (ox_attr_str_is(n, "auto_pad", "NOTSET", "SAME_UPPER")) {
    dm_opb_arg_int(b, "legacy_pad", 2); /* an odd total puts the extra pixel at the end */
  } else if (ox_attr_str_is(n, "auto_pad", "NOTSET", "SAME_LOWER")) {
    /* Caffe2 has no SAME with the extra pixel in front: explicit pads, from X's size */
    int64_t xd[8], pads[4];
    if (ox_static_dims(c, ox_in_name(n, 0), xd, 8) != 4)
      return ox_refuse(c, "auto_pad SAME_LOWER on an input of unknown size");
    for (int i = 0; i < 2; i++) {
      int64_t s = st ? st[i] : 1, dk = (d ? d[i] : 1) * (k[i] - 1) + 1, in = xd[2 + i];
      if (s < 1 || in < 1)
        return ox_refuse(c, "a stride or input size below 1");
      int64_t total = ((in + s - 1) / s - 1) * s + dk - in;
      total = total < 0 ? 0 : total;
      pads[i] = total - total / 2;
      pads[i + 2] = total / 2;
    }
    dm_opb_arg_ints(b, "pads", pads, 4);
  } else {
    return ox_refuse(c, "auto_pad other than NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  }
  return DM_OK;
}

static dm_status tr_conv(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0) || !ox_in_name(n, 1))
    return ox_refuse(c, "X and W are required");
  const Onnx__TensorProto *w = ox_const_find(c, ox_in_name(n, 1));
  ox_start(b, "Conv", n, 3);
  if (w && w->n_dims != 4)
    return ox_refuse(c, "weights of rank %zu; only 2-D convolutions are supported", w->n_dims);
  DM_TRY(window_args(c, n, b, 0, w ? w->dims + 2 : NULL));
  int64_t group = ox_attr_int(n, "group", 1);
  if (group != 1)
    dm_opb_arg_int(b, "group", group);
  return DM_OK;
}

static dm_status pool(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type, int avg) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (ox_attr_int(n, "storage_order", 0) != 0)
    return ox_refuse(c, "storage_order 1");
  ox_start(b, type, n, 1);
  DM_TRY(window_args(c, n, b, 1, NULL));
  /* AveragePool's count_include_pad is Caffe2's argument (operators/pool.c). */
  if (avg && ox_attr_int(n, "count_include_pad", 0) != 0)
    dm_opb_arg_int(b, "count_include_pad", 1);
  return DM_OK;
}

static dm_status tr_maxpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return pool(c, n, b, "MaxPool", 0);
}

static dm_status tr_avgpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return pool(c, n, b, "AveragePool", 1);
}

static dm_status global_pool(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type) {
  DM_TRY(ox_need_outputs(c, n, 1));
  ox_start(b, type, n, 1);
  dm_opb_arg_int(b, "global_pooling", 1);
  return DM_OK;
}

static dm_status tr_gavgpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return global_pool(c, n, b, "AveragePool");
}

static dm_status tr_gmaxpool(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return global_pool(c, n, b, "MaxPool");
}


static dm_status tr_dropout(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (ox_attr_int(n, "is_test", 1) == 0)
    return ox_refuse(c, "training mode (is_test 0)");
  const char *tm = ox_in_name(n, 2);
  if (tm) {
    const Onnx__TensorProto *t = ox_const_find(c, tm);
    if (!t || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL || ox_tensor_numel(t) != 1)
      return ox_refuse(c, "training_mode is not a constant");
    const uint8_t *data = NULL;
    uint8_t *owned = NULL;
    DM_TRY(ox_tensor_bytes(c, t, 1, &data, &owned));
    int training = data[0] != 0;
    free(owned);
    if (training)
      return ox_refuse(c, "training_mode true");
  }
  ox_start(b, "Copy", n, 1); /* inference: Y = X */
  return DM_OK;
}

/* Fills blob `name` (init net) with the transpose of the 2-D FLOAT constant `t`: FC's
 * weights are (N, K), a MatMul's or a transB 0 Gemm's B is (K, N). */
static dm_status fill_transposed(imp *c, const char *name, const Onnx__TensorProto *t) {
  int64_t numel = ox_tensor_numel(t);
  if (t->n_dims != 2 || numel < 0 || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
    return ox_refuse(c, "B is not a 2-D FLOAT constant");
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  DM_TRY(ox_tensor_bytes(c, t, numel, &data, &owned));
  int64_t k = t->dims[0], n = t->dims[1], dims[2] = {n, k};
  float *v = malloc((size_t)numel * sizeof *v + 1);
  dm_opb b;
  dm_opb_start(&b, "GivenTensorFill");
  if (!v)
    dm_opb_fail(&b, DM_NOMEM("transposed weights"));
  for (int64_t i = 0; v && i < k; i++)
    for (int64_t j = 0; j < n; j++)
      memcpy(&v[j * k + i], data + 4 * (i * n + j), 4);
  dm_opb_output(&b, name);
  dm_opb_arg_ints(&b, "shape", dims, 2);
  if (dm_opb_op(&b) && v)
    dm_opb_fail(&b, dm_opdef_set_arg_floats(dm_opb_op(&b), "values", v, (size_t)numel));
  free(v);
  free(owned);
  return dm_opb_append(&b, c->init);
}

/* FC(X, W, bias) for a node whose B is `b_name`, (N, K) when `b_is_nk`, else a (K, N)
 * constant transposed here; a missing bias is zeros (N from a constant B). */
static dm_status as_fc(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *b_name,
                       int b_is_nk, const char *bias_name, int64_t axis) {
  const Onnx__TensorProto *kb = ox_const_find(c, b_name);
  char *w = NULL, *zb = NULL;
  if (!b_is_nk && !kb)
    return ox_refuse(c, "B is (K, N) and not a constant (FC takes (N, K) weights)");
  if (kb && kb->n_dims != 2)
    return ox_refuse(c, "B of rank %zu", kb->n_dims);
  if (!bias_name && !kb)
    return ox_refuse(c, "no bias and B is not a constant (its size is unknown)");
  dm_status s = DM_OK;
  if (!b_is_nk && (s = ox_derived_name(c, b_name, "_transposed", &w)) == DM_OK)
    s = fill_transposed(c, w, kb);
  if (s == DM_OK && !bias_name &&
      (s = ox_derived_name(c, n->output[0], "_zero_bias", &zb)) == DM_OK)
    s = ox_fill_zeros(c, zb, b_is_nk ? kb->dims[0] : kb->dims[1]);
  if (s == DM_OK) {
    dm_opb_start(b, "FC");
    dm_opb_input(b, ox_in_name(n, 0));
    dm_opb_input(b, w ? w : b_name);
    dm_opb_input(b, zb ? zb : bias_name);
    dm_opb_output(b, n->output[0]);
    if (axis != 1)
      dm_opb_arg_int(b, "axis", axis);
  }
  free(w);
  free(zb);
  return s;
}

/* Gemm as FC: Y = A B^T + C with B as (N, K), which is how exporters write a Linear;
 * a constant B given as (K, N) (transB 0) is transposed at import. */
static dm_status tr_gemm(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (ox_attr_int(n, "transA", 0) != 0)
    return ox_refuse(c, "transA 1");
  if (ox_attr_float(n, "alpha", 1.0f) != 1.0f || ox_attr_float(n, "beta", 1.0f) != 1.0f)
    return ox_refuse(c, "alpha or beta other than 1");
  if (!ox_in_name(n, 0) || !ox_in_name(n, 1))
    return ox_refuse(c, "A and B are required");
  const Onnx__TensorProto *bias = ox_const_find(c, ox_in_name(n, 2));
  if (bias && bias->n_dims != 1)
    return ox_refuse(c, "C of rank %zu; only a 1-D bias is supported", bias->n_dims);
  c->out_rank = 2;
  return as_fc(c, n, b, ox_in_name(n, 1), ox_attr_int(n, "transB", 0) != 0, ox_in_name(n, 2), 1);
}

/* MatMul by a constant matrix as FC along A's last axis (FC flattens the leading ones);
 * any other (B computed: attention's Q K^T and its product with V, or A 1-D) as
 * BatchMatMul with broadcast=1, which is numpy's matmul as ONNX's, but for two 1-D
 * inputs: their product is BatchMatMul's [1] and ONNX's scalar. */
static dm_status tr_matmul(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0) || !ox_in_name(n, 1) || n->n_input != 2)
    return ox_refuse(c, "expected 2 inputs");
  int ra = ox_rank_of(c, ox_in_name(n, 0)), rb = ox_rank_of(c, ox_in_name(n, 1));
  const Onnx__TensorProto *w = ox_const_find(c, ox_in_name(n, 1));
  if (ra >= 2 && w && w->n_dims == 2) {
    c->out_rank = ra;
    return as_fc(c, n, b, ox_in_name(n, 1), 0, NULL, ra - 1);
  }
  if (ra < 0 || rb < 0)
    return ox_refuse(c, "A or B of unknown rank (a 1-D input would change the output's rank)");
  if (ra == 1 && rb == 1)
    return ox_refuse(c, "two 1-D inputs (their scalar product has no BatchMatMul form)");
  DM_TRY(ox_plain(c, n, b, "BatchMatMul", 2));
  dm_opb_arg_int(b, "broadcast", 1);
  c->out_rank = (ra > rb ? ra : rb) - (ra == 1) - (rb == 1);
  return DM_OK;
}

static dm_status tr_batchnorm(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (ox_attr_int(n, "training_mode", 0) != 0)
    return ox_refuse(c, "training mode");
  if (ox_attr_int(n, "spatial", 1) == 0)
    return ox_refuse(c, "spatial 0 (statistics per element, not per channel)");
  for (size_t i = 0; i < 5; i++)
    if (!ox_in_name(n, i))
      return ox_refuse(c, "input %zu is missing", i);
  ox_start(b, "SpatialBN", n, 5);
  dm_opb_arg_int(b, "is_test", 1);
  dm_opb_arg_float(b, "epsilon", ox_attr_float(n, "epsilon", 1e-5f));
  return DM_OK;
}

/* Softmax and LogSoftmax (`type`): before opset 13 they flatten to 2-D at `axis` (default
 * 1), which is the Caffe2 ops' rule; from 13 they normalise along the one axis (default
 * -1), the same only when that is the last. */
dm_status ox_softmax_like(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type) {
  DM_TRY(ox_plain(c, n, b, type, 1));
  int64_t axis = ox_attr_int(n, "axis", c->opset >= 13 ? -1 : 1);
  int rank = ox_rank_of(c, ox_in_name(n, 0));
  if (c->opset >= 13 && axis != -1 && !(rank > 0 && axis == rank - 1))
    return ox_refuse(c, "%s along axis %lld of a tensor of %s rank (only the last axis is "
                     "supported)", type, (long long)axis, rank < 0 ? "unknown" : "another");
  if (c->opset >= 13)
    axis = -1;
  dm_opb_arg_int(b, "axis", axis);
  return DM_OK;
}

static dm_status tr_softmax(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_softmax_like(c, n, b, "Softmax");
}

/* LayerNormalization (opset 17) as LayerNorm with elementwise_affine: ONNX normalises
 * over the dims from `axis` (default -1) as Caffe2 does, with the same biased variance
 * and epsilon. LayerNorm's mean and std are outputs of their own here, under names
 * derived from Y's; ONNX's Mean and InvStdDev outputs (1/std, shaped otherwise) are
 * refused. A missing B is a constant zero vector when Scale's size is known. */
static dm_status tr_layernorm(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  if (ox_n_outputs_used(n) > 1)
    return ox_refuse(c, "its Mean or InvStdDev output is used (LayerNorm's statistics are "
                     "the mean and std, shaped X's dims before axis then 1)");
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0) || !ox_in_name(n, 1))
    return ox_refuse(c, "X and Scale are required");
  if (ox_attr_int(n, "stash_type", 1) != 1)
    return ox_refuse(c, "stash_type %lld (only 1, FP32 statistics, is supported)",
                     (long long)ox_attr_int(n, "stash_type", 1));
  const char *bias = ox_in_name(n, 2);
  char *zb = NULL, *names[2] = {NULL, NULL};
  static const char *const suffix[2] = {"_mean", "_std"};
  dm_status s = DM_OK;
  if (!bias) {
    const Onnx__TensorProto *sc = ox_const_find(c, ox_in_name(n, 1));
    if (!sc || ox_tensor_numel(sc) < 0)
      return ox_refuse(c, "no B and Scale is not a constant (its size is unknown)");
    if ((s = ox_derived_name(c, n->output[0], "_zero_beta", &zb)) == DM_OK)
      s = ox_fill_zeros(c, zb, ox_tensor_numel(sc));
  }
  for (int i = 0; i < 2 && s == DM_OK; i++) {
    size_t len = strlen(n->output[0]) + strlen(suffix[i]) + 1;
    if (!(names[i] = malloc(len))) {
      s = DM_NOMEM("a blob name");
      break;
    }
    snprintf(names[i], len, "%s%s", n->output[0], suffix[i]);
    if (dm_str_in_list(names[i], (const char *const *)c->known, c->n_known))
      s = ox_refuse(c, "the graph already has a blob '%s'", names[i]);
  }
  if (s == DM_OK) {
    dm_opb_start(b, "LayerNorm");
    dm_opb_input(b, ox_in_name(n, 0));
    dm_opb_input(b, ox_in_name(n, 1));
    dm_opb_input(b, bias ? bias : zb);
    dm_opb_output(b, n->output[0]);
    dm_opb_output(b, names[0]);
    dm_opb_output(b, names[1]);
    dm_opb_arg_int(b, "axis", ox_attr_int(n, "axis", -1));
    dm_opb_arg_float(b, "epsilon", ox_attr_float(n, "epsilon", 1e-5f));
    dm_opb_arg_int(b, "elementwise_affine", 1);
  }
  free(zb), free(names[0]), free(names[1]);
  return s;
}

/* LRN across channels: ONNX's formula is Caffe2's (alpha divided by size); ONNX's
 * defaults differ from the op's, so all four are written. */
static dm_status tr_lrn(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_plain(c, n, b, "LRN", 1));
  const Onnx__AttributeProto *size = ox_attr(n, "size");
  if (!size || !size->has_i)
    return ox_refuse(c, "no size");
  dm_opb_arg_int(b, "size", size->i);
  dm_opb_arg_float(b, "alpha", ox_attr_float(n, "alpha", 1e-4f));
  dm_opb_arg_float(b, "beta", ox_attr_float(n, "beta", 0.75f));
  dm_opb_arg_float(b, "bias", ox_attr_float(n, "bias", 1.0f));
  return DM_OK;
}

const ox_translator ox_ops_nn[] = {
    {"Conv", tr_conv},
    {"MaxPool", tr_maxpool},
    {"AveragePool", tr_avgpool},
    {"GlobalAveragePool", tr_gavgpool},
    {"GlobalMaxPool", tr_gmaxpool},
    {"Dropout", tr_dropout},
    {"Gemm", tr_gemm},
    {"MatMul", tr_matmul},
    {"BatchNormalization", tr_batchnorm},
    {"LayerNormalization", tr_layernorm},
    {"Softmax", tr_softmax},
    {"LRN", tr_lrn},
    {NULL, NULL},
};
