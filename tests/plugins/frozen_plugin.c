/* frozen_plugin.c: a plugin built against tests/plugins/abi3.0, the headers as plugin ABI
 * 3 first shipped (its structs are shorter than this library's). Registers Twice
 * (Y = 2 X, FLOAT) to show that such a plugin still loads and runs after fields were
 * appended to dm_op_schema and dm_kernel_def. */
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

DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host) {
  DM_TRY(host->register_schema(&twice_schema));
  return host->register_kernel(&twice_cpu);
}
