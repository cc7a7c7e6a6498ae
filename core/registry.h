/* registry.h: op schemas and kernels, keyed by (type, device, engine) (internal).
 *
 * One process-wide registry, written when built-ins are registered (dm_init in
 * net/init.c, once: the registry itself knows no operator family) and
 * when plugins load, read when nets are instantiated; a read-write lock keeps those
 * safe across threads. Entries are the registry's copies of the registered structs; the
 * strings and functions they point at stay the registrant's (static, or a plugin that
 * stays loaded).
 */
#ifndef DM_CORE_REGISTRY_H
#define DM_CORE_REGISTRY_H

#include "demitasse_plugin.h"
#include "status.h"

/* Engine names with a meaning to the registry. "DNNL": the oneDNN engine
 * (operators/dnnl/), the CPU's default where it is built; its kernels alone read and
 * write blocked layouts (core/tensor.h). "REFERENCE", in an op's engine list: the plain
 * kernel, never the device's default engine (no kernel is registered under it). */
#define DM_ENGINE_DNNL "DNNL"
#define DM_ENGINE_REFERENCE "REFERENCE"
/* DM_ERR_NOT_FOUND for an op type without a schema, with the likely fix (a plugin's op,
 * its plugin not loaded). */
DM_HIDDEN dm_status dm_unknown_op_error(const char *type);
/* Whether k reads and writes blocked layouts as they are: the layout-aware engine's
 * kernels, and kernels flagged DM_KERNEL_ANY_LAYOUT. */
DM_HIDDEN int dm_kernel_keeps_layouts(const dm_kernel_def *k);

/* Finds the kernel for `type` on `device`, trying each engine of the comma-separated
 * `engines` list in order, then the device's default engine (CPU: "DNNL", CUDA: "CUDNN")
 * unless the list names "REFERENCE", then the plain implementation; with `ctx` (may be NULL), skipping kernels whose supports(ctx) says
 * no (DM_ERR_UNSUPPORTED when every existing kernel does). */
DM_HIDDEN dm_status dm_kernel_lookup(const char *type, dm_device_type device, const char *engines,
                                     const dm_op_ctx *ctx, const dm_kernel_def **out);
/* Whether a kernel for exactly (type, device, engine) is registered. */
DM_HIDDEN int dm_kernel_exists(const char *type, dm_device_type device, const char *engine);
/* Number of registered schemas, and the i-th in sorted order (for `demitasse ops`). */
DM_HIDDEN size_t dm_schema_count(void);
DM_HIDDEN const dm_op_schema *dm_schema_at(size_t i);
/* Number of registered kernels, and the i-th in the table's (unsorted) order, stable while
 * nothing is registered (for tests that check a refused plugin left the registry as it
 * was). */
DM_HIDDEN size_t dm_kernel_count(void);
DM_HIDDEN const dm_kernel_def *dm_kernel_at(size_t i);

/* A plugin's struct copied at this library's size as its struct_size says (see "How the
 * ABI grows" in demitasse_plugin.h): the fields it does not know zero, struct_size
 * sizeof(*out). DM_ERR_VERSION with the reason when it cannot be. */
DM_HIDDEN dm_status dm_schema_copy_abi(const dm_op_schema *schema, dm_op_schema *out);
DM_HIDDEN dm_status dm_kernel_copy_abi(const dm_kernel_def *kernel, dm_kernel_def *out);

/* The checks every schema and kernel passes before it is registered, in one place (the
 * plugin loader runs them when a plugin registers, the registry again when it adds):
 * a type name of at most 80 characters, an engine of at most 63, 0 <= min <= max (max -1:
 * unbounded) inputs and outputs, device DM_CPU or DM_CUDA. */
DM_HIDDEN dm_status dm_schema_check(const dm_op_schema *schema);
DM_HIDDEN dm_status dm_kernel_check(const dm_kernel_def *kernel);
/* Adds schemas and kernels (structs of this library's size) all or nothing: any check or
 * conflict (a name that exists or repeats, a kernel without a schema) refuses the whole
 * batch, under one write lock, before the first is added. */
DM_HIDDEN dm_status dm_registry_add_all(const dm_op_schema *schemas, size_t n_schemas,
                                        const dm_kernel_def *kernels, size_t n_kernels);
/* A plugin's registrations as one transaction: after dm_registry_begin, this thread's
 * dm_register_schema and dm_register_kernel calls (a plugin's own, or through the host's
 * callbacks) are copied and checked into a pending list instead of being added;
 * dm_registry_commit adds the list all or nothing (dm_registry_add_all) and
 * dm_registry_abort drops it. Either ends the transaction. One at a time in the process:
 * begin waits for another thread's to end. Nothing registered in a refused plugin stays,
 * so no entry can point into a library that is closed again (core/plugin.c). */
DM_HIDDEN void dm_registry_begin(void);
DM_HIDDEN dm_status dm_registry_commit(void);
DM_HIDDEN void dm_registry_abort(void);
/* Loads a plugin into the registry, which already holds the built-ins (core/plugin.c;
 * the public dm_plugin_load in net/api.c calls dm_init, then this). */
DM_HIDDEN dm_status dm_plugin_load_registered(const char *path);
/* Frees every entry (at exit: dm_init registers it with atexit). */
DM_HIDDEN void dm_registry_free(void);

/* Built-in registration tables, one per operator family: its schemas (a pointer list
 * ending in NULL: schemas are large and often made by macros) and its kernels (an array
 * of structs ending in a zero entry, as Lua's luaL_Reg tables; the CUDA backend's
 * tables have the same form). */
typedef struct dm_op_family {
  const dm_op_schema *const *schemas;
  const dm_kernel_def *kernels;
} dm_op_family;
DM_HIDDEN dm_status dm_register_family(const dm_op_family *family);
/* Registers a built-in backend's kernels from an array of structs ending in an entry
 * whose type is NULL (as Lua's luaL_Reg tables). */
DM_HIDDEN dm_status dm_register_kernel_table(const dm_kernel_def *table);

#endif
