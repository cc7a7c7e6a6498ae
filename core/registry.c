/* registry.c: the schema and kernel tables, and dm_init which fills them with built-ins. */
#include "registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "dm_config.h"
#include "operators/builtin.h"

typedef struct schema_entry {
  const dm_op_schema *schema;
  UT_hash_handle hh; /* key: schema->type */
} schema_entry;

typedef struct kernel_entry {
  char key[160]; /* type \x1f device \x1f engine */
  const dm_kernel_def *kernel;
  UT_hash_handle hh;
} kernel_entry;

static schema_entry *schemas;
static kernel_entry *kernels;
static const dm_op_schema **sorted;
static size_t n_sorted;
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;

static int make_key(char *key, size_t cap, const char *type, int device, const char *engine) {
  int n = snprintf(key, cap, "%s\x1f%d\x1f%s", type, device, engine ? engine : "");
  return n > 0 && (size_t)n < cap;
}

static void free_registry(void) {
  schema_entry *s, *st;
  HASH_ITER(hh, schemas, s, st) {
    HASH_DEL(schemas, s);
    free(s);
  }
  kernel_entry *k, *kt;
  HASH_ITER(hh, kernels, k, kt) {
    HASH_DEL(kernels, k);
    free(k);
  }
  free(sorted);
  sorted = NULL;
}

dm_status dm_register_schema(const dm_op_schema *schema) {
  if (!schema || !schema->type || !*schema->type)
    return dm_error(DM_ERR_INVALID, "register_schema: a schema needs a type name");
  dm_status st = DM_OK;
  pthread_rwlock_wrlock(&lock);
  schema_entry *e = NULL;
  HASH_FIND_STR(schemas, schema->type, e);
  if (e) {
    st = dm_error(DM_ERR_EXISTS, "an operator named '%s' is already registered", schema->type);
  } else if (!(e = calloc(1, sizeof *e))) {
    st = DM_NOMEM("a schema entry");
  } else {
    e->schema = schema;
    HASH_ADD_KEYPTR(hh, schemas, schema->type, strlen(schema->type), e);
  }
  pthread_rwlock_unlock(&lock);
  return st;
}

dm_status dm_register_kernel(const dm_kernel_def *k) {
  if (!k || !k->type || !k->run)
    return dm_error(DM_ERR_INVALID, "register_kernel: a kernel needs a type and a run function");
  kernel_entry *e = calloc(1, sizeof *e);
  if (!e)
    return DM_NOMEM("a kernel entry");
  if (!make_key(e->key, sizeof e->key, k->type, k->device, k->engine)) {
    free(e);
    return dm_error(DM_ERR_INVALID, "register_kernel: op type or engine name too long");
  }
  e->kernel = k;
  dm_status st = DM_OK;
  pthread_rwlock_wrlock(&lock);
  schema_entry *s = NULL;
  kernel_entry *old = NULL;
  HASH_FIND_STR(schemas, k->type, s);
  HASH_FIND_STR(kernels, e->key, old);
  if (!s)
    st = dm_error(DM_ERR_NOT_FOUND, "kernel for '%s': no schema of that name is registered",
                  k->type);
  else if (old)
    st = dm_error(DM_ERR_EXISTS, "a kernel for '%s' on device %d, engine '%s' already exists",
                  k->type, (int)k->device, k->engine ? k->engine : "");
  else
    HASH_ADD_STR(kernels, key, e);
  pthread_rwlock_unlock(&lock);
  if (st != DM_OK)
    free(e);
  return st;
}

const dm_op_schema *dm_schema_lookup(const char *type) {
  schema_entry *e = NULL;
  pthread_rwlock_rdlock(&lock);
  HASH_FIND_STR(schemas, type, e);
  pthread_rwlock_unlock(&lock);
  return e ? e->schema : NULL;
}

static const dm_kernel_def *find_kernel(const char *type, int device, const char *engine,
                                        size_t engine_len) {
  char eng[64], key[160];
  if (engine_len >= sizeof eng)
    return NULL;
  memcpy(eng, engine, engine_len);
  eng[engine_len] = '\0';
  if (!make_key(key, sizeof key, type, device, eng))
    return NULL;
  kernel_entry *e = NULL;
  HASH_FIND_STR(kernels, key, e);
  return e ? e->kernel : NULL;
}

int dm_kernel_exists(const char *type, dm_device_type device, const char *engine) {
  const char *e = engine ? engine : "";
  pthread_rwlock_rdlock(&lock);
  const dm_kernel_def *k = find_kernel(type, device, e, strlen(e));
  pthread_rwlock_unlock(&lock);
  return k != NULL;
}

dm_status dm_kernel_lookup(const char *type, dm_device_type device, const char *engines,
                           const dm_kernel_def **out) {
  static const char *const device_defaults[] = {[DM_CPU] = "", [DM_CUDA] = "CUDNN"};
  const dm_kernel_def *k = NULL;
  pthread_rwlock_rdlock(&lock);
  for (const char *p = engines ? engines : ""; *p && !k;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    while (len && *p == ' ')
      p++, len--;
    if (len)
      k = find_kernel(type, device, p, len);
    p += len + (comma ? 1 : 0);
    if (!comma)
      break;
  }
  if (!k && (unsigned)device <= DM_CUDA && *device_defaults[device])
    k = find_kernel(type, device, device_defaults[device], strlen(device_defaults[device]));
  if (!k)
    k = find_kernel(type, device, "", 0);
  pthread_rwlock_unlock(&lock);
  if (!k) {
    if (!dm_schema_lookup(type))
      return dm_error(DM_ERR_NOT_FOUND, "unknown operator type '%s'", type);
    return dm_error(DM_ERR_NOT_FOUND, "operator '%s' has no kernel for device %s", type,
                    device == DM_CUDA ? "CUDA" : "CPU");
  }
  *out = k;
  return DM_OK;
}

static int cmp_schema(const void *a, const void *b) {
  return strcmp((*(const dm_op_schema *const *)a)->type, (*(const dm_op_schema *const *)b)->type);
}

size_t dm_schema_count(void) {
  pthread_rwlock_wrlock(&lock);
  size_t n = HASH_COUNT(schemas);
  if (n != n_sorted) {
    const dm_op_schema **arr = realloc(sorted, (n ? n : 1) * sizeof *arr);
    if (arr) {
      size_t i = 0;
      for (schema_entry *e = schemas; e; e = e->hh.next)
        arr[i++] = e->schema;
      qsort(arr, n, sizeof *arr, cmp_schema);
      sorted = arr;
      n_sorted = n;
    }
  }
  n = n_sorted;
  pthread_rwlock_unlock(&lock);
  return n;
}

const dm_op_schema *dm_schema_at(size_t i) {
  pthread_rwlock_rdlock(&lock);
  const dm_op_schema *s = i < n_sorted ? sorted[i] : NULL;
  pthread_rwlock_unlock(&lock);
  return s;
}

dm_status dm_register_family(const dm_op_family *family) {
  for (const dm_op_schema *const *s = family->schemas; s && *s; s++)
    DM_TRY(dm_register_schema(*s));
  for (const dm_kernel_def *const *k = family->kernels; k && *k; k++)
    DM_TRY(dm_register_kernel(*k));
  return DM_OK;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static dm_status init_status = DM_OK;
static char init_message[512];

static void init_builtins(void) {
  init_status = dm_register_builtin_ops();
  if (init_status != DM_OK)
    snprintf(init_message, sizeof init_message, "%s", dm_last_error());
  /* The registry lives as long as the process; freeing it at exit keeps leak checkers
   * quiet about what is really static data. */
  atexit(free_registry);
}

dm_status dm_init(void) {
  pthread_once(&init_once, init_builtins);
  if (init_status != DM_OK)
    return dm_error(init_status, "registering built-in operators: %s", init_message);
  return DM_OK;
}

const char *dm_version_string(void) { return DM_VERSION; }
