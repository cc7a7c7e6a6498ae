/* plugin.c: loading operator plugins (dlopen + version handshake + one entry symbol).
 *
 * Registration is transactional, and the registry owns the transaction (registry.h,
 * dm_registry_begin): the entry function runs inside one, so what it registers (through
 * the host's callbacks, or the exported dm_register_schema/kernel on this thread) is
 * pended; only if it succeeds is the list committed, all or nothing. On any failure the
 * library is closed again and the registry is untouched, so no registry entry can point
 * into an unloaded library. This file only loads and calls down into the registry. The
 * strings and functions a plugin's structs point at must outlive the call: the library
 * stays loaded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;

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
    /* Inside the registry's transaction these pend, like the plugin's own direct
     * dm_register_schema/kernel calls. */
    static const dm_plugin_host host = {sizeof host, DM_PLUGIN_API_VERSION,
                                        dm_register_schema, dm_register_kernel};
    dm_error_clear();
    dm_registry_begin();
    s = entry(&host);
    if (s != DM_OK) {
      dm_registry_abort();
      if (dm_last_error()[0])
        dm_error_prefix(s, "its dm_plugin_entry failed");
      else
        dm_error(s, "its dm_plugin_entry returned %s", dm_status_name(s));
    } else {
      s = dm_registry_commit();
    }
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
