/* shape_infer.c: whole-net shape and dtype inference over shape-only tensors. */
#include "shape_infer.h"

#include <stdlib.h>

#include "net.h"
#include "netdef_build.h"
#include "op_origin.h"

/* Bytes of the op's inputs and outputs, the cost of ops without a cost function. */
static void default_cost(dm_op_ctx *op, dm_op_cost *c) {
  for (int i = 0; i < op->n_in; i++)
    c->bytes_read += (double)op->in[i]->tensor->numel * (double)dm_dtype_size(op->in[i]->tensor->dtype);
  for (int o = 0; o < op->n_out; o++)
    c->bytes_written +=
        (double)op->out[o]->tensor->numel * (double)dm_dtype_size(op->out[o]->tensor->dtype);
}

static dm_status infer_op(dm_op_ctx *op, dm_op_cost *cost) {
  for (int i = 0; i < op->n_in; i++)
    if (op->in[i]->tensor->dtype == DM_UNDEFINED)
      return dm_error(DM_ERR_NOT_FOUND,
                      "input %d '%s' has no known shape: no earlier op writes it and no "
                      "shape was given for it",
                      i, op->in[i]->name);
  if (!op->schema->infer)
    return dm_error(DM_ERR_UNSUPPORTED, "operator '%s' has no shape inference", op->def->type);
  op->shape_only = 1;
  dm_status s = op->schema->infer(op);
  op->shape_only = 0;
  if (s != DM_OK || !cost)
    return s;
  *cost = (dm_op_cost){0};
  if (op->schema->cost)
    op->schema->cost(op, cost);
  else
    default_cost(op, cost);
  return DM_OK;
}

dm_status dm_infer_net_shapes(dm_workspace *ws, const Caffe2__NetDef *def, const char *source,
                              dm_infer_hook hook, void *user, dm_op_cost *costs) {
  /* Instantiate a copy op by op, so that a hook can give parameters their shapes
   * before the op that reads them is resolved. */
  Caffe2__NetDef *copy = NULL;
  DM_TRY(DM_PB_CLONE(Caffe2__NetDef, def, &copy));
  size_t n = copy->n_op;
  Caffe2__OperatorDef **ops = copy->op;
  copy->op = NULL;
  copy->n_op = 0;
  dm_net *net = NULL;
  dm_status s = dm_net_create(ws, copy, source, &net); /* an empty net, filled below */
  for (size_t i = 0; i < n && s == DM_OK; i++) {
    Caffe2__OperatorDef *op = ops[i];
    ops[i] = NULL;
    s = dm_netdef_append_op(net->def, op);
    if (s == DM_OK && hook)
      s = hook(user, ws, op, (int)i);
    if (s == DM_OK)
      s = dm_net_append_op(net, (int)i);
    if (s == DM_OK)
      s = infer_op(&net->ops[i], costs ? &costs[i] : NULL);
    if (s != DM_OK) {
      char what[256];
      if (net->n_ops > i)
        dm_op_describe(&net->ops[i], what, sizeof what);
      else /* the hook failed before the op was resolved */
        dm_opdef_describe(op, i, what, sizeof what);
      dm_error_prefix(s, "%s: %s", source, what);
    }
  }
  for (size_t i = 0; i < n; i++)
    if (ops[i])
      protobuf_c_message_free_unpacked(&ops[i]->base, NULL);
  free(ops);
  dm_net_free(net);
  return s;
}
