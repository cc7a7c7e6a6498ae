/* grad_ctx.c: what a gradient maker sees of its forward op: blob names, arguments, and
 * dm_grad_emit for the ops it adds (the struct: grad_ctx_impl.h, filled by the gradient
 * pass in net/passes/gradient_pass.c). */
#include <stdlib.h>
#include <string.h>

#include "grad_ctx_impl.h"
#include "opdef_args.h"
#include "status.h"

int dm_grad_num_inputs(const dm_grad_ctx *g) { return (int)g->op->n_input; }
int dm_grad_num_outputs(const dm_grad_ctx *g) { return (int)g->op->n_output; }
const char *dm_grad_input(const dm_grad_ctx *g, int i) {
  return i >= 0 && (size_t)i < g->op->n_input ? g->op->input[i] : NULL;
}
const char *dm_grad_output(const dm_grad_ctx *g, int i) {
  return i >= 0 && (size_t)i < g->op->n_output ? g->op->output[i] : NULL;
}
const char *dm_grad_output_grad(const dm_grad_ctx *g, int i) {
  return i >= 0 && (size_t)i < g->op->n_output ? g->out_grads[i] : NULL;
}
const char *dm_grad_input_grad(const dm_grad_ctx *g, int i) {
  return i >= 0 && (size_t)i < g->op->n_input ? g->in_grads[i] : NULL;
}
int dm_grad_input_needed(const dm_grad_ctx *g, int i) {
  if (i < 0 || (size_t)i >= g->op->n_input)
    return 0;
  return g->needed ? g->needed[i] : 1;
}

dm_status dm_grad_set_input_grad(dm_grad_ctx *g, int i, const char *blob) {
  if (i < 0 || (size_t)i >= g->op->n_input)
    return dm_error(DM_ERR_INVALID, "gradient maker: input %d does not exist", i);
  if (!blob) /* e.g. an output gradient that does not exist, passed on unchecked */
    return dm_error(DM_ERR_INVALID, "gradient maker: NULL gradient name for input %d", i);
  char *copy = strdup(blob);
  if (!copy)
    return DM_NOMEM("a gradient name");
  free(g->in_alias[i]);
  g->in_alias[i] = copy;
  return DM_OK;
}

int dm_grad_has_arg(const dm_grad_ctx *g, const char *name) {
  return dm_opdef_find_arg(g->op, name) != NULL;
}
int64_t dm_grad_arg_int(const dm_grad_ctx *g, const char *name, int64_t dflt) {
  return dm_opdef_arg_int(g->op, name, dflt);
}
float dm_grad_arg_float(const dm_grad_ctx *g, const char *name, float dflt) {
  const Caffe2__Argument *a = dm_opdef_find_arg(g->op, name);
  if (a && a->has_f)
    return a->f;
  return a && a->has_i ? (float)a->i : dflt;
}

dm_status dm_grad_emit(dm_grad_ctx *g, const char *type, int n_in, const char *const *in,
                       int n_out, const char *const *out) {
  /* A maker (a plugin's too) may pass on a name that does not exist unchecked, e.g. the
   * gradient of an output nothing reads: refused here, before net/ builds anything. */
  for (int i = 0; i < n_in; i++)
    if (!in[i])
      return dm_error(DM_ERR_INVALID, "gradient maker: input %d of %s is NULL", i, type);
  for (int i = 0; i < n_out; i++)
    if (!out[i])
      return dm_error(DM_ERR_INVALID, "gradient maker: output %d of %s is NULL", i, type);
  Caffe2__OperatorDef *op = NULL;
  DM_TRY(g->host.emit(g->host.self, g->op, type, n_in, in, n_out, out, &op));
  g->last = op;
  return DM_OK;
}

static dm_status need_last(const dm_grad_ctx *g) {
  return g->last ? DM_OK : dm_error(DM_ERR_INVALID, "gradient maker: no op emitted yet");
}

dm_status dm_grad_set_arg_int(dm_grad_ctx *g, const char *name, int64_t v) {
  DM_TRY(need_last(g));
  return dm_opdef_set_arg_int(g->last, name, v);
}

dm_status dm_grad_set_arg_float(dm_grad_ctx *g, const char *name, float v) {
  DM_TRY(need_last(g));
  return dm_opdef_set_arg_float(g->last, name, v);
}

void dm_grad_clear_args(dm_grad_ctx *g) {
  if (g->last)
    dm_opdef_clear_args(g->last);
}
