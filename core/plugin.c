/* plugin.c: loading operator plugins (dlopen + version handshake + one entry symbol).
 *
 * Registration is transactional: the plugin's entry function registers into a pending
 * list (through the host's callbacks, or the exported dm_register_schema/kernel called
 * on this thread while the entry runs); only if it succeeds is the list committed, all
 * or nothing (dm_registry_add_all: the same checks as each registration, then names
 * that clash with what exists). On any failure the library is closed again and the
 * registry is untouched,
 * so no registry entry can point into an unloaded library. The pending list holds copies
 * of the plugin's structs, made when it registers them, so they need not outlive the
 * registration call (the strings and functions they point at must: the library stays
 * loaded).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

#define MAX_PENDING 256

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
/* Only touched with plugin_lock held, during one plugin's entry call. */
static dm_op_schema pending_schemas[MAX_PENDING];
static dm_kernel_def pending_kernels[MAX_PENDING];
static size_t n_pending_schemas, n_pending_kernels;

/* Set while this thread runs a plugin's entry function: the plugin's own calls to the
 * exported dm_register_schema/dm_register_kernel are pended too (registry.c), so they
 * are dropped with the rest when the load is refused. */
static _Thread_local int entry_running;

int dm_plugin_entry_running(void) { return entry_running; }

/* Copied, then checked as the registry will check it, so a plugin learns at once (and
 * the commit cannot fail on a check the pending list passed). */
dm_status dm_plugin_pend_schema(const dm_op_schema *s) {
  if (!s || !s->type || !*s->type)
    return dm_error(DM_ERR_INVALID, "register_schema: a schema needs a type name");
  if (n_pending_schemas == MAX_PENDING)
    return dm_error(DM_ERR_LIMIT, "a plugin may register at most %d schemas", MAX_PENDING);
  DM_TRY(dm_schema_copy_abi(s, &pending_schemas[n_pending_schemas]));
  DM_TRY(dm_schema_check(&pending_schemas[n_pending_schemas]));
  n_pending_schemas++;
  return DM_OK;
}

dm_status dm_plugin_pend_kernel(const dm_kernel_def *k) {
  if (!k || !k->type || !k->run)
    return dm_error(DM_ERR_INVALID, "register_kernel: a kernel needs a type and a run function");
  if (n_pending_kernels == MAX_PENDING)
    return dm_error(DM_ERR_LIMIT, "a plugin may register at most %d kernels", MAX_PENDING);
  DM_TRY(dm_kernel_copy_abi(k, &pending_kernels[n_pending_kernels]));
  DM_TRY(dm_kernel_check(&pending_kernels[n_pending_kernels]));
  n_pending_kernels++;
  return DM_OK;
}

static dm_status load_locked(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    return dm_error(DM_ERR_IO, "cannot load plugin: %s", why ? why : "dlopen failed");
  }
  dm_status s = DM_OK;
  const int *version = dlsym(lib, "dm_plugin_api_version");
  dm_plugin_entry_fn entry = NULL;
  *(void **)&entry = dlsym(lib, "dm_plugin_entry");
  if (!version) {
    s = dm_error(DM_ERR_NOT_FOUND,
                 "not a Demitasse plugin: no 'dm_plugin_api_version' symbol "
                 "(use DM_PLUGIN_DECLARE_VERSION() from demitasse_plugin.h)");
  } else if (*version != DM_PLUGIN_API_VERSION) {
    s = dm_error(DM_ERR_VERSION,
                 "built for plugin API version %d, but this Demitasse speaks version %d; "
                 "rebuild the plugin against this demitasse_plugin.h",
                 *version, DM_PLUGIN_API_VERSION);
  } else if (!entry) {
    s = dm_error(DM_ERR_NOT_FOUND, "missing entry symbol 'dm_plugin_entry'");
  } else {
    static const dm_plugin_host host = {sizeof host, DM_PLUGIN_API_VERSION,
                                        dm_plugin_pend_schema, dm_plugin_pend_kernel};
    n_pending_schemas = n_pending_kernels = 0;
    dm_error_clear();
    entry_running = 1;
    s = entry(&host);
    entry_running = 0;
    if (s != DM_OK && dm_last_error()[0])
      dm_error_prefix(s, "its dm_plugin_entry failed");
    else if (s != DM_OK)
      dm_error(s, "its dm_plugin_entry returned %s", dm_status_name(s));
    else
      s = dm_registry_add_all(pending_schemas, n_pending_schemas, pending_kernels,
                              n_pending_kernels);
  }
  if (s != DM_OK)
    dlclose(lib);
  /* On success the library stays loaded for the life of the process: the registry
   * points into it. */
  return s;
}

dm_status dm_plugin_load_registered(const char *path) {
  pthread_mutex_lock(&plugin_lock);
  dm_status s = load_locked(path);
  pthread_mutex_unlock(&plugin_lock);
  if (s != DM_OK)
    return dm_error_prefix(s, "plugin %s", path);
  return DM_OK;
}
