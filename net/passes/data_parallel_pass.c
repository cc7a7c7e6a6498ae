/* data_parallel_pass.c: the data-parallel pass (see net/passes/data_parallel_pass.h): Allreduce ops over the
 * weight gradients, each after the last backward op that writes its gradients.
 */
#include "net/passes/data_parallel_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/registry.h"
#include "net/netdef_build.h"

static int has_name(char **names, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0)
      return 1;
  return 0;
}

/* Where gradient g is complete: the index of the last backward op writing it before
 * anything else touches it; -1 when no backward op writes it there. */
static long complete_at(const Caffe2__NetDef *net, const char *g) {
  long last = -1;
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    int reads = has_name(op->input, op->n_input, g), writes = has_name(op->output, op->n_output, g);
    if (!reads && !writes)
      continue;
    if (!op->is_gradient_op)
      break; /* the first non-backward op to touch it (a cast, an update) */
    if (writes)
      last = (long)i;
  }
  return last;
}

/* Inserts Allreduce(grads) -> grads after op `after`, on its device. */
static dm_status insert(Caffe2__NetDef *net, long after, const char *const *grads, size_t n,
                        const dm_dp_opts *o) {
  dm_opb b;
  dm_opb_start(&b, "Allreduce");
  dm_opb_inputs(&b, grads, n);
  dm_opb_outputs(&b, grads, n);
  dm_opb_arg_int(&b, "average", 1);
  if (o->fp32_wire)
    dm_opb_arg_string(&b, "wire_dtype", "FLOAT");
  if (o->bucket_bytes > 0)
    dm_opb_arg_int(&b, "bucket_bytes", o->bucket_bytes);
  if (net->op[after]->device_option)
    dm_opb_device_option(&b, net->op[after]->device_option);
  dm_opb_gradient(&b, 1);
  return dm_opb_insert(&b, net, (size_t)after + 1);
}

/* Whether op's schema declares argument `name`. */
static int takes_arg(const Caffe2__OperatorDef *op, const char *name) {
  const dm_op_schema *schema = op->type ? dm_schema_lookup(op->type) : NULL;
  for (const dm_arg_spec *a = schema ? schema->args : NULL; a && a->name; a++)
    if (strcmp(a->name, name) == 0)
      return 1;
  return 0;
}

dm_status dm_data_parallel_pass(Caffe2__NetDef *net, const dm_dp_opts *o, dm_dp_summary *sum) {
  memset(sum, 0, sizeof *sum);
  if (o->num_shards > 1 && (o->shard_id < 0 || o->shard_id >= o->num_shards))
    return dm_error(DM_ERR_INVALID, "data parallelism: shard %d of %d", o->shard_id,
                    o->num_shards);
  for (size_t i = 0; o->num_shards > 1 && i < net->n_op; i++)
    if (takes_arg(net->op[i], "num_shards") && takes_arg(net->op[i], "shard_id")) {
      DM_TRY(dm_opdef_set_arg_int(net->op[i], "num_shards", o->num_shards));
      DM_TRY(dm_opdef_set_arg_int(net->op[i], "shard_id", o->shard_id));
    }
  if (o->n_params == 0)
    return dm_error(DM_ERR_INVALID, "data parallelism: the net has no trainable parameters "
                                    "(no <p>_grad); nothing to reduce");
  const size_t n = o->n_params;
  char **grads = calloc(n, sizeof *grads);
  long *at = calloc(n, sizeof *at);
  const char **group = calloc(n, sizeof *group);
  dm_status s = grads && at && group ? DM_OK : DM_NOMEM("the gradients' names");
  for (size_t i = 0; s == DM_OK && i < n; i++) {
    size_t len = strlen(o->params[i]) + 6;
    if (!(grads[i] = malloc(len))) {
      s = DM_NOMEM("a gradient's name");
      break;
    }
    snprintf(grads[i], len, "%s_grad", o->params[i]);
    at[i] = complete_at(net, grads[i]);
    if (at[i] < 0)
      s = dm_error(DM_ERR_INVALID, "data parallelism: no backward op writes '%s' (the gradient "
                                   "of parameter '%s')", grads[i], o->params[i]);
  }
  /* From the last position back, so earlier indices stay valid: each op after its
   * position with the gradients completed there (all of them at the last, without
   * overlap). */
  long last = -1;
  for (size_t i = 0; s == DM_OK && i < n; i++)
    last = at[i] > last ? at[i] : last;
  for (long pos = last; s == DM_OK && pos >= 0; pos--) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (o->overlap ? at[i] == pos : pos == last)
        group[k++] = grads[i];
    if (k == 0)
      continue;
    s = insert(net, pos, group, k, o);
    sum->n_ops++;
    sum->n_grads += k;
    if (!o->overlap)
      break;
  }
  for (size_t i = 0; grads && i < n; i++)
    free(grads[i]);
  free(grads);
  free(at);
  free(group);
  return s;
}
