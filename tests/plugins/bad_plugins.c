/* bad_plugins.c: plugins that must be refused, one per build flavour (-DFLAVOUR=...):
 * WRONG_VERSION declares API version 999; NO_ENTRY has a version but no entry symbol;
 * CLASH registers an op named CLASH_NAME, which already exists; FAILING returns an error
 * from its entry after registering, which must leave the registry untouched.
 * LONG_ENGINE registers a schema, then a kernel whose engine name is 180 characters;
 * BAD_KERNEL a schema, then a kernel for a device that does not exist; DIRECT calls the
 * exported dm_register_schema itself (not through the host) and then fails. Each must
 * be refused with the registry exactly as before. */
#include "demitasse_plugin.h"

#if FLAVOUR_WRONG_VERSION
DM_PLUGIN_EXPORT const int dm_plugin_api_version = 999;
#else
DM_PLUGIN_DECLARE_VERSION();
#endif

static dm_status noop_run(dm_op_ctx *ctx) {
  (void)ctx;
  return DM_OK;
}

#ifndef CLASH_NAME
#define CLASH_NAME "BadPluginOp"
#endif
__attribute__((unused)) static const dm_op_schema schema = {DM_SCHEMA_SIZE, .type = CLASH_NAME, .min_inputs = 0, .max_inputs = -1,
                                    .min_outputs = 0, .max_outputs = -1};
__attribute__((unused)) static const dm_kernel_def kernel = {DM_KERNEL_SIZE, .type = CLASH_NAME, .device = DM_CPU, .run = noop_run};

#define E10 "EngineName"
#define E60 E10 E10 E10 E10 E10 E10
#if FLAVOUR_LONG_ENGINE
static const dm_kernel_def bad_kernel = {DM_KERNEL_SIZE, .type = CLASH_NAME, .device = DM_CPU,
                                         .engine = E60 E60 E60, .run = noop_run};
#elif FLAVOUR_BAD_KERNEL
static const dm_kernel_def bad_kernel = {DM_KERNEL_SIZE, .type = CLASH_NAME,
                                         .device = (dm_device_type)7, .run = noop_run};
#endif

#if !FLAVOUR_NO_ENTRY && FLAVOUR_DIRECT
DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host) {
  (void)host;
  DM_TRY(dm_register_schema(&schema));
  DM_TRY(dm_register_kernel(&kernel));
  return DM_ERR_INVALID;
}
#elif !FLAVOUR_NO_ENTRY
DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host) {
  DM_TRY(host->register_schema(&schema));
  DM_TRY(host->register_kernel(&kernel));
#if FLAVOUR_LONG_ENGINE || FLAVOUR_BAD_KERNEL
  DM_TRY(host->register_kernel(&bad_kernel));
#endif
#if FLAVOUR_FAILING
  return DM_ERR_INVALID;
#else
  return DM_OK;
#endif
}
#endif
