/* register.c: registers the oneDNN engine's kernels (engine "DNNL", see dnnl_common.h),
 * one table per family, when oneDNN can run on this CPU; reads the engine's settings
 * (settings.h) then, at init. */
#include "dnnl_common.h"
#include "kernels.h"
#include "settings.h"

static const struct {
  const char *family;
  const dm_kernel_def *kernels;
} tables[] = {
    {"eltwise", dm_dnnl_eltwise_kernels},
    {"pool", dm_dnnl_pool_kernels},
    {"bn", dm_dnnl_bn_kernels},
    {"conv", dm_dnnl_conv_kernels},
    {"conv fusion", dm_dnnl_conv_fusion_kernels},
    {"fc", dm_dnnl_fc_kernels},
    {"fc_fusion", dm_dnnl_fc_fusion_kernels},
    {"sum", dm_dnnl_sum_kernels},
    {"concat", dm_dnnl_concat_kernels},
    {"matmul", dm_dnnl_matmul_kernels},
    {"layernorm", dm_dnnl_layernorm_kernels},
    {NULL, NULL},
};

dm_status dm_register_dnnl_ops(void) {
  /* No engine (a CPU oneDNN does not run on): the reference kernels serve every op. */
  if (!dm_dnnl_engine())
    return DM_OK;
  dm_dnnl_probe();         /* what it can build here, asked once (caps.c) */
  dm_dnnl_settings_load(); /* the environment, read here and not in a kernel */
  for (int t = 0; tables[t].family; t++) {
    dm_status s = dm_register_kernel_table(tables[t].kernels);
    if (s != DM_OK)
      return dm_error_prefix(s, "registering the oneDNN %s kernels", tables[t].family);
  }
  return DM_OK;
}

int dm_have_dnnl(void) { return dm_dnnl_engine() != NULL; }
