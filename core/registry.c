/* registry.c: the schema and kernel tables (dm_init in net/init.c fills them with the
 * built-ins). */
#include "registry.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "dm_config.h"

/* Entries hold the registry's own copy of each struct, at this library's size: a
 * plugin built against an older header hands over a shorter struct, whose missing
 * fields read as zero here (see "How the ABI grows" in demitasse_plugin.h). */
typedef struct schema_entry {
  dm_op_schema schema;
  UT_hash_handle hh; /* key: schema.type */
} schema_entry;

typedef struct kernel_entry {
  char key[160]; /* type \x1f device \x1f engine */
  dm_kernel_def kernel;
  UT_hash_handle hh;
} kernel_entry;

/* The struct_size of the first ABI 3 structs: every field before these existed then. */
#define SCHEMA_MIN_SIZE (offsetof(dm_op_schema, no_gradient) + sizeof(int))
#define KERNEL_MIN_SIZE (offsetof(dm_kernel_def, cross_device) + sizeof(int))
/* Far above any struct this ABI will grow to. */
#define MAX_STRUCT_SIZE 4096

/* Copies a `size`-byte struct from a plugin or built-in into `dst` (`cap` bytes, zeroed):
 * refused when shorter than the first ABI 3 layout, or when longer than this library's
 * struct with nonzero bytes past it (fields this library would silently ignore). */
static dm_status copy_sized(void *dst, size_t cap, const void *src, size_t size, size_t min,
                            const char *what, const char *type) {
  if (size > MAX_STRUCT_SIZE) /* garbage, not a newer header: read no byte past cap */
    return dm_error(DM_ERR_VERSION, "register %s '%s': struct_size %zu is not a struct size",
                    what, type, size);
  if (size < min)
    return dm_error(DM_ERR_VERSION,
                    "register %s '%s': struct_size %zu is smaller than the first ABI %d layout "
                    "(%zu bytes); set .struct_size = sizeof(dm_%s)",
                    what, type, size, DM_PLUGIN_API_VERSION, min,
                    strcmp(what, "schema") == 0 ? "op_schema" : "kernel_def");
  for (size_t i = cap; i < size; i++)
    if (((const unsigned char *)src)[i])
      return dm_error(DM_ERR_VERSION,
                      "register %s '%s': it sets fields this library does not know (built "
                      "against a newer demitasse_plugin.h: %zu bytes, this library knows %zu)",
                      what, type, size, cap);
  memcpy(dst, src, size < cap ? size : cap);
  return DM_OK;
}

static schema_entry *schemas;
static kernel_entry *kernels;
static const dm_op_schema **sorted;
static size_t n_sorted;
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;

static int make_key(char *key, size_t cap, const char *type, int device, const char *engine) {
  int n = snprintf(key, cap, "%s\x1f%d\x1f%s", type, device, engine ? engine : "");
  return n > 0 && (size_t)n < cap;
}

void dm_registry_free(void) {
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
  n_sorted = 0;
}

dm_status dm_schema_copy_abi(const dm_op_schema *schema, dm_op_schema *out) {
  memset(out, 0, sizeof *out);
  DM_TRY(copy_sized(out, sizeof *out, schema, schema->struct_size, SCHEMA_MIN_SIZE, "schema",
                    schema->type ? schema->type : ""));
  out->struct_size = sizeof *out;
  return DM_OK;
}

dm_status dm_kernel_copy_abi(const dm_kernel_def *kernel, dm_kernel_def *out) {
  memset(out, 0, sizeof *out);
  DM_TRY(copy_sized(out, sizeof *out, kernel, kernel->struct_size, KERNEL_MIN_SIZE, "kernel",
                    kernel->type ? kernel->type : ""));
  out->struct_size = sizeof *out;
  return DM_OK;
}

/* `size`: the struct's size as its author compiled it. */
static dm_status add_schema(const dm_op_schema *schema, size_t size) {
  if (!schema || !schema->type || !*schema->type)
    return dm_error(DM_ERR_INVALID, "register_schema: a schema needs a type name");
  schema_entry *e = calloc(1, sizeof *e);
  if (!e)
    return DM_NOMEM("a schema entry");
  dm_status st = copy_sized(&e->schema, sizeof e->schema, schema, size, SCHEMA_MIN_SIZE,
                            "schema", schema->type);
  if (st != DM_OK) {
    free(e);
    return st;
  }
  e->schema.struct_size = sizeof e->schema;
  pthread_rwlock_wrlock(&lock);
  schema_entry *old = NULL;
  HASH_FIND_STR(schemas, schema->type, old);
  if (old)
    st = dm_error(DM_ERR_EXISTS, "an operator named '%s' is already registered", schema->type);
  else
    HASH_ADD_KEYPTR(hh, schemas, e->schema.type, strlen(e->schema.type), e);
  pthread_rwlock_unlock(&lock);
  if (st != DM_OK)
    free(e);
  return st;
}

dm_status dm_register_schema(const dm_op_schema *schema) {
  return add_schema(schema, schema ? schema->struct_size : 0);
}

static dm_status add_kernel(const dm_kernel_def *k, size_t size) {
  if (!k || !k->type || !k->run)
    return dm_error(DM_ERR_INVALID, "register_kernel: a kernel needs a type and a run function");
  kernel_entry *e = calloc(1, sizeof *e);
  if (!e)
    return DM_NOMEM("a kernel entry");
  if (!make_key(e->key, sizeof e->key, k->type, k->device, k->engine)) {
    free(e);
    return dm_error(DM_ERR_INVALID, "register_kernel: op type or engine name too long");
  }
  dm_status st = copy_sized(&e->kernel, sizeof e->kernel, k, size, KERNEL_MIN_SIZE, "kernel",
                            k->type);
  if (st != DM_OK) {
    free(e);
    return st;
  }
  e->kernel.struct_size = sizeof e->kernel;
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

dm_status dm_register_kernel(const dm_kernel_def *k) {
  return add_kernel(k, k ? k->struct_size : 0);
}

const dm_op_schema *dm_schema_lookup(const char *type) {
  if (!type)
    return NULL;
  schema_entry *e = NULL;
  pthread_rwlock_rdlock(&lock);
  HASH_FIND_STR(schemas, type, e);
  pthread_rwlock_unlock(&lock);
  return e ? &e->schema : NULL;
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
  return e ? &e->kernel : NULL;
}

int dm_kernel_exists(const char *type, dm_device_type device, const char *engine) {
  const char *e = engine ? engine : "";
  pthread_rwlock_rdlock(&lock);
  const dm_kernel_def *k = find_kernel(type, device, e, strlen(e));
  pthread_rwlock_unlock(&lock);
  return k != NULL;
}

/* At most this many engines are tried for one op: its own list, the device's default
 * and the plain kernel. */
#define MAX_CANDIDATES 16

dm_status dm_kernel_lookup(const char *type, dm_device_type device, const char *engines,
                           const dm_op_ctx *ctx, const dm_kernel_def **out) {
  static const char *const device_defaults[] = {[DM_CPU] = "", [DM_CUDA] = "CUDNN"};
  const dm_kernel_def *cand[MAX_CANDIDATES];
  size_t n = 0;
  /* The existing kernels in the order they are preferred, found under the lock; entries
   * are never freed while the process uses them, so their supports hooks are asked
   * after it is released (a hook may itself look things up in the registry). */
  pthread_rwlock_rdlock(&lock);
  for (const char *p = engines ? engines : ""; *p && n < MAX_CANDIDATES - 2;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    while (len && *p == ' ')
      p++, len--;
    const dm_kernel_def *k = len ? find_kernel(type, device, p, len) : NULL;
    if (k)
      cand[n++] = k;
    p += len + (comma ? 1 : 0);
    if (!comma)
      break;
  }
  if ((unsigned)device <= DM_CUDA && *device_defaults[device]) {
    const dm_kernel_def *k =
        find_kernel(type, device, device_defaults[device], strlen(device_defaults[device]));
    if (k)
      cand[n++] = k;
  }
  const dm_kernel_def *plain = find_kernel(type, device, "", 0);
  if (plain)
    cand[n++] = plain;
  pthread_rwlock_unlock(&lock);
  const dm_kernel_def *k = NULL;
  int refused = 0;
  for (size_t i = 0; i < n && !k; i++) {
    if (ctx && cand[i]->supports && !cand[i]->supports(ctx))
      refused = 1;
    else
      k = cand[i];
  }
  if (!k) {
    const char *dev = device == DM_CUDA ? "CUDA" : "CPU";
    if (!dm_schema_lookup(type))
      return dm_error(DM_ERR_NOT_FOUND, "unknown operator type '%s'", type);
    if (refused)
      return dm_error(DM_ERR_UNSUPPORTED,
                      "no %s kernel of '%s' supports this form of the op (its arguments, "
                      "inputs or dtypes)",
                      dev, type);
    return dm_error(DM_ERR_NOT_FOUND, "operator '%s' has no kernel for device %s", type, dev);
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
        arr[i++] = &e->schema;
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

/* Built-ins are compiled against this very header: their size is sizeof, whatever
 * struct_size they set. */
dm_status dm_register_family(const dm_op_family *family) {
  for (const dm_op_schema *const *s = family->schemas; s && *s; s++)
    DM_TRY(add_schema(*s, sizeof **s));
  return dm_register_kernel_table(family->kernels);
}

dm_status dm_register_kernel_table(const dm_kernel_def *table) {
  for (const dm_kernel_def *k = table; k && k->type; k++)
    DM_TRY(add_kernel(k, sizeof *k));
  return DM_OK;
}

const char *dm_version_string(void) { return DM_VERSION; }
