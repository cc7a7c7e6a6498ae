/* frozen_plugin.c: a plugin built against tests/plugins/abi3.0, the headers as plugin ABI
 * 3 first shipped (its structs are shorter than this library's). Registers Twice
 * (Y = 2 X, FLOAT) to show that such a plugin still loads and runs after fields were
 * appended to dm_op_schema and dm_kernel_def, and TwiceHeap, the same op registered from
 * heap structs with garbage padding that it frees at once. */
#include <stdlib.h>
#include <string.h>

#include "demitasse_plugin.h"

DM_PLUGIN_DECLARE_VERSION();

static dm_status twice_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_tensor_dtype(x) != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "Twice takes FLOAT");
  DM_TRY(dm_tensor_resize_like(y, x));
  const float *px = dm_tensor_data(x);
  float *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < dm_tensor_numel(x); i++)
    py[i] = 2 * px[i];
  return DM_OK;
}

static const dm_op_schema twice_schema = {DM_SCHEMA_SIZE, .type = "Twice", .min_inputs = 1,
                                          .max_inputs = 1, .min_outputs = 1, .max_outputs = 1};
static const dm_kernel_def twice_cpu = {DM_KERNEL_SIZE, .type = "Twice", .device = DM_CPU,
                                        .run = twice_run};

/* What this plugin's compiler saw, for the test to compare with the library's. */
DM_PLUGIN_EXPORT const size_t frozen_schema_size = sizeof(dm_op_schema);
DM_PLUGIN_EXPORT const size_t frozen_kernel_size = sizeof(dm_kernel_def);

/* A second op registered from a struct on the heap whose padding holds garbage, freed
 * as soon as it is registered: the library must copy it during the call and must not
 * read the 3.0 struct's tail padding as a field appended later. */
static dm_status register_from_heap(const dm_plugin_host *host) {
  dm_op_schema *s = malloc(sizeof *s);
  if (!s)
    return DM_ERR_NOMEM;
  memset(s, 0xab, sizeof *s);
  s->struct_size = sizeof *s;
  s->type = "TwiceHeap";
  s->min_inputs = s->max_inputs = s->min_outputs = s->max_outputs = 1;
  s->args = NULL;
  s->inplace = NULL;
  s->inplace_any = 0;
  s->precision = DM_PREC_FOLLOW;
  s->doc = NULL;
  s->infer = NULL;
  s->cost = NULL;
  s->gradient = NULL;
  s->no_gradient = 0;
  dm_status st = host->register_schema(s);
  free(s);
  if (st != DM_OK)
    return st;
  dm_kernel_def *k = malloc(sizeof *k);
  if (!k)
    return DM_ERR_NOMEM;
  memset(k, 0xab, sizeof *k);
  k->struct_size = sizeof *k;
  k->type = "TwiceHeap";
  k->device = DM_CPU;
  k->engine = NULL;
  k->init = NULL;
  k->run = twice_run;
  k->fini = NULL;
  k->cross_device = 0;
  st = host->register_kernel(k);
  free(k);
  return st;
}

DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host) {
  DM_TRY(host->register_schema(&twice_schema));
  DM_TRY(host->register_kernel(&twice_cpu));
  return register_from_heap(host);
}
