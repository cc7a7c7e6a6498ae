/* plugin.c: loading operator plugins (dlopen + version handshake + one entry symbol).
 *
 * Registration is transactional: the plugin's entry function registers into a pending
 * list; only if it succeeds and none of its names clash with what exists is the list
 * committed. On any failure the library is closed again and the registry is untouched,
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

static dm_status pend_schema(const dm_op_schema *s) {
  if (!s || !s->type || !*s->type)
    return dm_error(DM_ERR_INVALID, "register_schema: a schema needs a type name");
  if (n_pending_schemas == MAX_PENDING)
    return dm_error(DM_ERR_LIMIT, "a plugin may register at most %d schemas", MAX_PENDING);
  DM_TRY(dm_schema_copy_abi(s, &pending_schemas[n_pending_schemas]));
  n_pending_schemas++;
  return DM_OK;
}

static dm_status pend_kernel(const dm_kernel_def *k) {
  if (!k || !k->type || !k->run)
    return dm_error(DM_ERR_INVALID, "register_kernel: a kernel needs a type and a run function");
  if (n_pending_kernels == MAX_PENDING)
    return dm_error(DM_ERR_LIMIT, "a plugin may register at most %d kernels", MAX_PENDING);
  DM_TRY(dm_kernel_copy_abi(k, &pending_kernels[n_pending_kernels]));
  n_pending_kernels++;
  return DM_OK;
}

static int same_engine(const char *a, const char *b) {
  return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Refuses names that exist (built-in or from another plugin) or repeat in the plugin. */
static dm_status check_pending(void) {
  for (size_t i = 0; i < n_pending_schemas; i++) {
    const char *type = pending_schemas[i].type;
    if (dm_schema_lookup(type))
      return dm_error(DM_ERR_EXISTS, "it registers operator '%s', which already exists", type);
    for (size_t j = 0; j < i; j++)
      if (strcmp(pending_schemas[j].type, type) == 0)
        return dm_error(DM_ERR_EXISTS, "it registers operator '%s' twice", type);
  }
  for (size_t i = 0; i < n_pending_kernels; i++) {
    const dm_kernel_def *k = &pending_kernels[i];
    int own = 0;
    for (size_t j = 0; j < n_pending_schemas; j++)
      own |= strcmp(pending_schemas[j].type, k->type) == 0;
    if (!own && !dm_schema_lookup(k->type))
      return dm_error(DM_ERR_NOT_FOUND, "it registers a kernel for '%s', which has no schema",
                      k->type);
    if (dm_kernel_exists(k->type, k->device, k->engine))
      return dm_error(DM_ERR_EXISTS, "it registers a kernel for '%s' (engine '%s'), which exists",
                      k->type, k->engine ? k->engine : "");
    for (size_t j = 0; j < i; j++)
      if (strcmp(pending_kernels[j].type, k->type) == 0 &&
          pending_kernels[j].device == k->device && same_engine(pending_kernels[j].engine, k->engine))
        return dm_error(DM_ERR_EXISTS, "it registers the kernel for '%s' twice", k->type);
  }
  return DM_OK;
}

static dm_status commit_pending(void) {
  for (size_t i = 0; i < n_pending_schemas; i++)
    DM_TRY(dm_register_schema(&pending_schemas[i]));
  for (size_t i = 0; i < n_pending_kernels; i++)
    DM_TRY(dm_register_kernel(&pending_kernels[i]));
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
    static const dm_plugin_host host = {sizeof host, DM_PLUGIN_API_VERSION, pend_schema,
                                        pend_kernel};
    n_pending_schemas = n_pending_kernels = 0;
    dm_error_clear();
    s = entry(&host);
    if (s != DM_OK && dm_last_error()[0])
      dm_error_prefix(s, "its dm_plugin_entry failed");
    else if (s != DM_OK)
      dm_error(s, "its dm_plugin_entry returned %s", dm_status_name(s));
    else if ((s = check_pending()) == DM_OK)
      s = commit_pending();
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
