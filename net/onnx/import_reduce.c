/* import_reduce.c: ONNX translators for reductions: ReduceSum, ReduceMean, ReduceMax
 * (Caffe2's ops of those names, `axes` and `keepdims`) and LogSoftmax (a reduction along
 * rows, with Softmax's axis rules).
 */
#include <stdlib.h>
#include <string.h>

#include "net/onnx/translate.h"

/* The axes: an attribute, or (ReduceSum from opset 13, the others from 18) an optional
 * input that must be a constant. noop_with_empty_axes with no axes is an identity
 * (Copy); otherwise no axes means all. */
static dm_status reduce(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *type,
                        int64_t axes_input_opset) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (n->n_input < 1 || !ox_in_name(n, 0))
    return ox_refuse(c, "no input data");
  int64_t *axes = NULL;
  size_t na = 0;
  int have_axes = 0;
  if (c->opset >= axes_input_opset) {
    if (n->n_input > 2)
      return ox_refuse(c, "%zu inputs; expected at most 2", n->n_input);
    if (ox_attr(n, "axes"))
      return ox_refuse(c, "an axes attribute at opset %lld (axes are an input from %lld)",
                       (long long)c->opset, (long long)axes_input_opset);
    const char *an = ox_in_name(n, 1);
    if (an) {
      const Onnx__TensorProto *k = ox_const_find(c, an);
      if (!k)
        return ox_refuse(c, "axes '%s' is not a constant", an);
      DM_TRY(ox_const_ints(c, k, &axes, &na));
      have_axes = na > 0;
    }
  } else {
    if (n->n_input > 1)
      return ox_refuse(c, "%zu inputs; expected 1 before opset %lld", n->n_input,
                       (long long)axes_input_opset);
    size_t cnt = 0;
    const int64_t *a = ox_attr_ints(n, "axes", &cnt);
    if (a && cnt) {
      axes = malloc(cnt * sizeof *axes);
      if (!axes)
        return DM_NOMEM("axes");
      memcpy(axes, a, cnt * sizeof *axes);
      na = cnt;
      have_axes = 1;
    }
  }
  int keep = ox_attr_int(n, "keepdims", 1) != 0;
  int rank = ox_rank_of(c, n->input[0]);
  if (!have_axes && ox_attr_int(n, "noop_with_empty_axes", 0) != 0) {
    free(axes);
    ox_start(b, "Copy", n, 1);
    return DM_OK;
  }
  ox_start(b, type, n, 1);
  if (have_axes)
    dm_opb_arg_ints(b, "axes", axes, na);
  dm_opb_arg_int(b, "keepdims", keep);
  free(axes);
  c->out_rank = keep || rank < 0 ? rank : have_axes ? rank - (int)na : 0;
  return DM_OK;
}

static dm_status tr_reduce_sum(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return reduce(c, n, b, "ReduceSum", 13);
}

static dm_status tr_reduce_mean(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return reduce(c, n, b, "ReduceMean", 18);
}

static dm_status tr_reduce_max(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return reduce(c, n, b, "ReduceMax", 18);
}

static dm_status tr_log_softmax(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  return ox_softmax_like(c, n, b, "LogSoftmax");
}

const ox_translator ox_ops_reduce[] = {
    {"ReduceSum", tr_reduce_sum},
    {"ReduceMean", tr_reduce_mean},
    {"ReduceMax", tr_reduce_max},
    {"LogSoftmax", tr_log_softmax},
    {NULL, NULL},
};
