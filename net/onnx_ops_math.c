/* onnx_ops_math.c: ONNX translators for elementwise arithmetic: Relu, Add/Sub/Mul/Div, Sum. */
#include <stdlib.h>
#include <string.h>

#include "onnx_translate.h"

static dm_status tr_relu(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_plain(c, n, b, "Relu", 1);
}

/* Elementwise binary ops. ONNX broadcasts numpy's way; the Caffe2 ops take equal shapes,
 * or (broadcast 1) a B whose dims, leading and trailing 1s dropped, are a run of A's
 * starting at `axis`. That is numpy's rule when B is a constant of rank <= A's with no
 * 1 inside that run, aligned at axis = rank(A) - rank(B); for Add and Mul a constant A
 * is swapped to the B side. Other broadcasts are refused where the ranks say so, and
 * two non-constant inputs of one rank are taken to have equal shapes. */
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
  if (ky && ox_tensor_numel(ky) == 1) { /* a scalar: any rank */
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
        return ox_refuse(c, "B (%s) broadcasts along a dim inside its shape", y);
    dm_opb_arg_int(b, "broadcast", 1);
    dm_opb_arg_int(b, "axis", ra - rb);
    return DM_OK;
  }
  if (ra >= 0 && rb >= 0 && ra != rb)
    return ox_refuse(c, "a broadcast between ranks %d and %d of a non-constant input", ra, rb);
  return DM_OK;
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

static dm_status tr_sum(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  for (size_t i = 0; i < n->n_input; i++)
    if (!ox_in_name(n, i))
      return ox_refuse(c, "an empty input name");
  if (n->n_input == 0)
    return ox_refuse(c, "no inputs");
  ox_start(b, "Sum", n, n->n_input); /* equal shapes, as Add */
  return DM_OK;
}

const ox_translator ox_ops_math[] = {
    {"Relu", tr_relu},
    {"Add", tr_add},
    {"Sub", tr_sub},
    {"Mul", tr_mul},
    {"Div", tr_div},
    {"Sum", tr_sum},
    {NULL, NULL},
};
