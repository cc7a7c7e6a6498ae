/* swish_plugin.c: a test operator plugin: Swish(X) = X * sigmoid(X), FP32, in place
 * allowed. Built as a loadable module, loaded by `demitasse run --plugin` and by
 * dm_plugin_load in the tests. It uses only demitasse_plugin.h. */
#include <math.h>

#include "demitasse_plugin.h"

DM_PLUGIN_DECLARE_VERSION();

static dm_status swish_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (dm_tensor_dtype(x) != DM_FLOAT)
    return dm_op_error(ctx, DM_ERR_TYPE, "Swish takes FLOAT, got %s",
                       dm_dtype_name(dm_tensor_dtype(x)));
  dm_tensor *y = dm_op_output(ctx, 0);
  DM_TRY(dm_tensor_resize_like(y, x));
  const float *px = dm_tensor_data(x);
  float *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < dm_tensor_numel(x); i++)
    py[i] = px[i] / (1.0f + expf(-px[i]));
  return DM_OK;
}

static const dm_inplace_pair swish_inplace[] = {{0, 0}, {-1, -1}};
static const dm_op_schema swish_schema = {DM_SCHEMA_SIZE,
    .type = "Swish", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .inplace = swish_inplace, .precision = DM_PREC_FOLLOW, .doc = "Y = X * sigmoid(X)"};
static const dm_kernel_def swish_cpu = {DM_KERNEL_SIZE, .type = "Swish", .device = DM_CPU, .run = swish_run};

DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host) {
  DM_TRY(host->register_schema(&swish_schema));
  return host->register_kernel(&swish_cpu);
}
