/* registry.c: the schema and kernel tables (dm_init in net/init.c fills them with the
 * built-ins). */
#include "registry.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* The name limits, in this one place: every (type, device, engine) key fits make_key's
 * and find_kernel's buffers, so a name that passes here is one lookups can find. */
#define MAX_TYPE_LEN 80
#define MAX_ENGINE_LEN 63

/* `call`: "register_schema" or "register_kernel"; `what`: "operator type" or "engine name". */
static dm_status check_name_len(const char *call, const char *what, const char *name,
                                size_t max) {
  size_t len = name ? strlen(name) : 0;
  if (len > max)
    return dm_error(DM_ERR_INVALID, "%s: %s '%.40s...' is %zu characters long, more than %zu",
                    call, what, name, len, max);
  return DM_OK;
}

dm_status dm_schema_check(const dm_op_schema *s) {
  if (!s || !s->type || !*s->type)
    return dm_error(DM_ERR_INVALID, "register_schema: a schema needs a type name");
  DM_TRY(check_name_len("register_schema", "operator type", s->type, MAX_TYPE_LEN));
  const struct {
    const char *what;
    int min, max;
  } ar[] = {{"inputs", s->min_inputs, s->max_inputs}, {"outputs", s->min_outputs, s->max_outputs}};
  for (int i = 0; i < 2; i++) {
    if (ar[i].min < 0)
      return dm_error(DM_ERR_INVALID, "register_schema '%s': min_%s %d is negative", s->type,
                      ar[i].what, ar[i].min);
    if (ar[i].max < -1)
      return dm_error(DM_ERR_INVALID,
                      "register_schema '%s': max_%s %d is negative (-1 means unbounded)",
                      s->type, ar[i].what, ar[i].max);
    if (ar[i].max != -1 && ar[i].min > ar[i].max)
      return dm_error(DM_ERR_INVALID, "register_schema '%s': min_%s %d is more than max_%s %d",
                      s->type, ar[i].what, ar[i].min, ar[i].what, ar[i].max);
  }
  return DM_OK;
}

dm_status dm_kernel_check(const dm_kernel_def *k) {
  if (!k || !k->type || !k->run)
    return dm_error(DM_ERR_INVALID, "register_kernel: a kernel needs a type and a run function");
  DM_TRY(check_name_len("register_kernel", "operator type", k->type, MAX_TYPE_LEN));
  DM_TRY(check_name_len("register_kernel", "engine name", k->engine, MAX_ENGINE_LEN));
  if (k->device != DM_CPU && k->device != DM_CUDA)
    return dm_error(DM_ERR_INVALID,
                    "register_kernel '%s': device %d does not exist (DM_CPU 0 or DM_CUDA 1)",
                    k->type, (int)k->device);
  return DM_OK;
}

static dm_status copy_schema(const dm_op_schema *schema, size_t size, dm_op_schema *out) {
  memset(out, 0, sizeof *out);
  DM_TRY(copy_sized(out, sizeof *out, schema, size, SCHEMA_MIN_SIZE, "schema",
                    schema->type ? schema->type : ""));
  out->struct_size = sizeof *out;
  return DM_OK;
}

static dm_status copy_kernel(const dm_kernel_def *kernel, size_t size, dm_kernel_def *out) {
  memset(out, 0, sizeof *out);
  DM_TRY(copy_sized(out, sizeof *out, kernel, size, KERNEL_MIN_SIZE, "kernel",
                    kernel->type ? kernel->type : ""));
  out->struct_size = sizeof *out;
  return DM_OK;
}

dm_status dm_schema_copy_abi(const dm_op_schema *schema, dm_op_schema *out) {
  return copy_schema(schema, schema->struct_size, out);
}

dm_status dm_kernel_copy_abi(const dm_kernel_def *kernel, dm_kernel_def *out) {
  return copy_kernel(kernel, kernel->struct_size, out);
}

/* With the lock held: why the batch cannot be added (names that exist or repeat, kernels
 * without a schema), or DM_OK. */
static dm_status batch_conflicts(schema_entry **se, size_t ns, kernel_entry **ke, size_t nk) {
  for (size_t i = 0; i < ns; i++) {
    const char *type = se[i]->schema.type;
    schema_entry *old = NULL;
    HASH_FIND_STR(schemas, type, old);
    if (old)
      return dm_error(DM_ERR_EXISTS, "operator '%s' already exists", type);
    for (size_t j = 0; j < i; j++)
      if (strcmp(se[j]->schema.type, type) == 0)
        return dm_error(DM_ERR_EXISTS, "operator '%s' is registered twice", type);
  }
  for (size_t i = 0; i < nk; i++) {
    const dm_kernel_def *k = &ke[i]->kernel;
    schema_entry *s = NULL;
    kernel_entry *old = NULL;
    HASH_FIND_STR(schemas, k->type, s);
    for (size_t j = 0; j < ns && !s; j++)
      if (strcmp(se[j]->schema.type, k->type) == 0)
        s = se[j];
    if (!s)
      return dm_error(DM_ERR_NOT_FOUND, "kernel for '%s': no schema of that name is registered",
                      k->type);
    HASH_FIND_STR(kernels, ke[i]->key, old);
    if (old)
      return dm_error(DM_ERR_EXISTS, "a kernel for '%s' on device %d, engine '%s' already exists",
                      k->type, (int)k->device, k->engine ? k->engine : "");
    for (size_t j = 0; j < i; j++)
      if (strcmp(ke[j]->key, ke[i]->key) == 0)
        return dm_error(DM_ERR_EXISTS,
                        "the kernel for '%s' on device %d, engine '%s' is registered twice",
                        k->type, (int)k->device, k->engine ? k->engine : "");
  }
  return DM_OK;
}

dm_status dm_registry_add_all(const dm_op_schema *schema_list, size_t ns,
                              const dm_kernel_def *kernel_list, size_t nk) {
  schema_entry **se = calloc(ns + 1, sizeof *se);
  kernel_entry **ke = calloc(nk + 1, sizeof *ke);
  dm_status st = se && ke ? DM_OK : DM_NOMEM("a registration batch");
  for (size_t i = 0; st == DM_OK && i < ns; i++) {
    st = dm_schema_check(&schema_list[i]);
    if (st == DM_OK && !(se[i] = calloc(1, sizeof *se[i])))
      st = DM_NOMEM("a schema entry");
    if (st == DM_OK)
      st = copy_schema(&schema_list[i], sizeof schema_list[i], &se[i]->schema);
  }
  for (size_t i = 0; st == DM_OK && i < nk; i++) {
    const dm_kernel_def *k = &kernel_list[i];
    st = dm_kernel_check(k);
    if (st == DM_OK && !(ke[i] = calloc(1, sizeof *ke[i])))
      st = DM_NOMEM("a kernel entry");
    if (st == DM_OK && !make_key(ke[i]->key, sizeof ke[i]->key, k->type, k->device, k->engine))
      st = dm_error(DM_ERR_INVALID, "register_kernel '%s': names too long", k->type);
    if (st == DM_OK)
      st = copy_kernel(k, sizeof *k, &ke[i]->kernel);
  }
  if (st == DM_OK) {
    /* All or nothing: every conflict is found before the first entry is added. */
    pthread_rwlock_wrlock(&lock);
    st = batch_conflicts(se, ns, ke, nk);
    if (st == DM_OK) {
      for (size_t i = 0; i < ns; i++)
        HASH_ADD_KEYPTR(hh, schemas, se[i]->schema.type, strlen(se[i]->schema.type), se[i]);
      for (size_t i = 0; i < nk; i++)
        HASH_ADD_STR(kernels, key, ke[i]);
    }
    pthread_rwlock_unlock(&lock);
  }
  if (st != DM_OK) {
    for (size_t i = 0; se && i < ns; i++)
      free(se[i]);
    for (size_t i = 0; ke && i < nk; i++)
      free(ke[i]);
  }
  free(se);
  free(ke);
  return st;
}

/* `size`: the struct's size as its author compiled it. */
static dm_status add_schema(const dm_op_schema *schema, size_t size) {
  if (!schema || !schema->type || !*schema->type)
    return dm_error(DM_ERR_INVALID, "register_schema: a schema needs a type name");
  dm_op_schema copy;
  DM_TRY(copy_schema(schema, size, &copy));
  return dm_registry_add_all(&copy, 1, NULL, 0);
}

static dm_status add_kernel(const dm_kernel_def *k, size_t size) {
  if (!k || !k->type || !k->run)
    return dm_error(DM_ERR_INVALID, "register_kernel: a kernel needs a type and a run function");
  dm_kernel_def copy;
  DM_TRY(copy_kernel(k, size, &copy));
  return dm_registry_add_all(NULL, 0, &copy, 1);
}

/* One plugin's registrations, pending until dm_registry_commit (registry.h). The
 * pending lists hold copies made when the plugin registers, so its structs need not
 * outlive the call. Only touched by the thread that holds txn_lock, between begin and
 * commit or abort. */
#define MAX_PENDING 256

static pthread_mutex_t txn_lock = PTHREAD_MUTEX_INITIALIZER;
static dm_op_schema pending_schemas[MAX_PENDING];
static dm_kernel_def pending_kernels[MAX_PENDING];
static size_t n_pending_schemas, n_pending_kernels;
/* Set in the thread that opened the transaction: its dm_register_schema/kernel calls
 * (the plugin's own, or through the host's callbacks) are pended. */
static _Thread_local int txn_open_here;

void dm_registry_begin(void) {
  pthread_mutex_lock(&txn_lock);
  n_pending_schemas = n_pending_kernels = 0;
  txn_open_here = 1;
}

static void txn_end(void) {
  n_pending_schemas = n_pending_kernels = 0;
  txn_open_here = 0;
  pthread_mutex_unlock(&txn_lock);
}

void dm_registry_abort(void) { txn_end(); }

dm_status dm_registry_commit(void) {
  dm_status s = dm_registry_add_all(pending_schemas, n_pending_schemas, pending_kernels,
                                    n_pending_kernels);
  txn_end();
  return s;
}

/* Copied, then checked as the commit will check it, so a plugin learns at once (and the
 * commit cannot fail on a check the pending list passed). */
static dm_status pend_schema(const dm_op_schema *s) {
  if (!s || !s->type || !*s->type)
    return dm_error(DM_ERR_INVALID, "register_schema: a schema needs a type name");
  if (n_pending_schemas == MAX_PENDING)
    return dm_error(DM_ERR_LIMIT, "a plugin may register at most %d schemas", MAX_PENDING);
  DM_TRY(dm_schema_copy_abi(s, &pending_schemas[n_pending_schemas]));
  DM_TRY(dm_schema_check(&pending_schemas[n_pending_schemas]));
  n_pending_schemas++;
  return DM_OK;
}

static dm_status pend_kernel(const dm_kernel_def *k) {
  if (!k || !k->type || !k->run)
    return dm_error(DM_ERR_INVALID, "register_kernel: a kernel needs a type and a run function");
  if (n_pending_kernels == MAX_PENDING)
    return dm_error(DM_ERR_LIMIT, "a plugin may register at most %d kernels", MAX_PENDING);
  DM_TRY(dm_kernel_copy_abi(k, &pending_kernels[n_pending_kernels]));
  DM_TRY(dm_kernel_check(&pending_kernels[n_pending_kernels]));
  n_pending_kernels++;
  return DM_OK;
}

dm_status dm_register_schema(const dm_op_schema *schema) {
  if (txn_open_here)
    return pend_schema(schema);
  return add_schema(schema, schema ? schema->struct_size : 0);
}

dm_status dm_register_kernel(const dm_kernel_def *k) {
  if (txn_open_here)
    return pend_kernel(k);
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
  static const char *const device_defaults[] = {[DM_CPU] = DM_ENGINE_DNNL, [DM_CUDA] = "CUDNN"};
  const dm_kernel_def *cand[MAX_CANDIDATES];
  size_t n = 0;
  int reference = 0;
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
    if (len == strlen(DM_ENGINE_REFERENCE) && strncasecmp(p, DM_ENGINE_REFERENCE, len) == 0)
      reference = 1;
    if (k)
      cand[n++] = k;
    p += len + (comma ? 1 : 0);
    if (!comma)
      break;
  }
  if ((unsigned)device <= DM_CUDA && !reference) {
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
      return dm_unknown_op_error(type);
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

dm_status dm_unknown_op_error(const char *type) {
  return dm_error(DM_ERR_NOT_FOUND,
                  "unknown operator type '%s' (not built in, and no loaded plugin registers "
                  "it: an op from a plugin needs the plugin loaded, --plugin LIB.so or "
                  "dm_plugin_load)",
                  type ? type : "");
}

int dm_kernel_keeps_layouts(const dm_kernel_def *k) {
  return k && ((k->flags & DM_KERNEL_ANY_LAYOUT) ||
               (k->engine && strcmp(k->engine, DM_ENGINE_DNNL) == 0));
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

size_t dm_kernel_count(void) {
  pthread_rwlock_rdlock(&lock);
  size_t n = HASH_COUNT(kernels);
  pthread_rwlock_unlock(&lock);
  return n;
}

const dm_kernel_def *dm_kernel_at(size_t i) {
  const dm_kernel_def *k = NULL;
  pthread_rwlock_rdlock(&lock);
  for (kernel_entry *e = kernels; e && !k; e = e->hh.next, i--)
    if (i == 0)
      k = &e->kernel;
  pthread_rwlock_unlock(&lock);
  return k;
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
