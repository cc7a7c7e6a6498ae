/* workspace.c: named blobs (a uthash table), the nets that live in a workspace, and its
 * limits on tensor memory (one tensor's bytes, and all its tensors' host memory). */
#include "workspace.h"

#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dm_status dm_workspace_new(dm_workspace **out) {
  *out = NULL;
  dm_workspace *ws = calloc(1, sizeof *ws);
  if (!ws)
    return DM_NOMEM("a workspace");
  if (!(ws->tensor_limit = dm_mem_limit_new(DM_DEFAULT_TENSOR_LIMIT))) {
    free(ws);
    return DM_NOMEM("a workspace");
  }
  *out = ws;
  return DM_OK;
}

/* A token per thread: the address of a thread-local object is unique among the threads
 * alive, and never 0. */
static uintptr_t thread_token(void) {
  static _Thread_local char token;
  return (uintptr_t)&token;
}

dm_status dm_workspace_enter(const dm_workspace *ws, const char *fn) {
  dm_workspace *w = (dm_workspace *)ws; /* the owner word is mutable state of a const ws */
  uintptr_t me = thread_token(), was = 0;
  if (atomic_compare_exchange_strong_explicit(&w->owner, &was, me, memory_order_acquire,
                                              memory_order_relaxed)) {
    w->owner_depth = 1;
    return DM_OK;
  }
  if (was == me) { /* a public call made inside another on this thread */
    w->owner_depth++;
    return DM_OK;
  }
  return dm_error(DM_ERR_BUSY,
                  "%s: the workspace is busy: another thread is inside a call on it (a "
                  "workspace takes one call at a time; give each thread its own workspace, "
                  "or serialise the calls)",
                  fn);
}

void dm_workspace_leave(const dm_workspace *ws) {
  dm_workspace *w = (dm_workspace *)ws;
  if (--w->owner_depth == 0)
    atomic_store_explicit(&w->owner, 0, memory_order_release);
}

dm_status dm_workspace_leave_with(const dm_workspace *ws, dm_status s) {
  dm_workspace_leave(ws);
  return s;
}

static void remove_blob(dm_workspace *ws, dm_blob *b) {
  HASH_DEL(ws->blobs, b);
  dm_tensor_free(b->tensor);
  free(b->name);
  free(b);
  ws->names_stale = 1;
}

void dm_workspace_destroy(dm_workspace *ws) {
  if (!ws)
    return;
  /* Freeing what another thread is using would crash it: refuse (the workspace leaks,
   * the message says why) rather than free under it. */
  if (dm_workspace_enter(ws, "dm_workspace_destroy") != DM_OK)
    return;
  for (size_t i = 0; i < ws->n_owned; i++)
    ws->owned[i].destroy(ws->owned[i].obj);
  free(ws->owned);
  dm_blob *b, *tmp;
  HASH_ITER(hh, ws->blobs, b, tmp) { remove_blob(ws, b); }
  free(ws->sorted_names);
  dm_mem_limit_release(ws->tensor_limit); /* storages still shared elsewhere keep theirs */
  free(ws);
}

dm_status dm_workspace_set_engine(dm_workspace *ws, const char *engine) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_set_engine: NULL ws");
  if (!engine)
    engine = "";
  if (strlen(engine) >= sizeof ws->engine)
    return dm_error(DM_ERR_INVALID, "dm_workspace_set_engine: engine list '%.40s...' is over %zu characters",
                    engine, sizeof ws->engine - 1);
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_set_engine"));
  snprintf(ws->engine, sizeof ws->engine, "%s", engine);
  dm_workspace_leave(ws);
  return DM_OK;
}

void dm_workspace_set_tensor_limit(dm_workspace *ws, uint64_t max_bytes) {
  if (!ws) {
    dm_error(DM_ERR_INVALID, "dm_workspace_set_tensor_limit: NULL ws");
    return;
  }
  atomic_store(&ws->tensor_limit->tensor_max, max_bytes); /* shared by all its tensors */
}

/* The cap is checked when host storage is allocated (core/tensor.c), so lowering it below
 * what is held already frees nothing: allocations fail until enough is freed. */
dm_status dm_workspace_set_memory_limit(dm_workspace *ws, size_t bytes) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_set_memory_limit: NULL ws");
  atomic_store(&ws->tensor_limit->cap, bytes);
  return DM_OK;
}

dm_status dm_workspace_memory_usage(const dm_workspace *ws, size_t *in_use, size_t *peak) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_memory_usage: NULL ws");
  if (in_use)
    *in_use = atomic_load(&ws->tensor_limit->in_use);
  if (peak)
    *peak = atomic_load(&ws->tensor_limit->peak);
  return DM_OK;
}

dm_blob *dm_workspace_find(const dm_workspace *ws, const char *name) {
  dm_blob *b = NULL;
  HASH_FIND_STR(ws->blobs, name, b);
  return b;
}

const dm_tensor *dm_workspace_tensor(const dm_workspace *ws, const char *name) {
  const dm_blob *b = dm_workspace_find(ws, name);
  return b ? b->tensor : NULL;
}

dm_status dm_workspace_get_or_create(dm_workspace *ws, const char *name, dm_blob **out) {
  dm_blob *b = dm_workspace_find(ws, name);
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b)
      return DM_NOMEM("a blob");
    b->name = strdup(name);
    b->tensor = dm_tensor_new(ws->tensor_limit);
    if (!b->name || !b->tensor) {
      free(b->name);
      dm_tensor_free(b->tensor);
      free(b);
      return DM_NOMEM("a blob");
    }
    b->tensor->blob = b->name; /* freed after the tensor (remove_blob) */
    b->serial = ws->next_serial++;
    HASH_ADD_KEYPTR(hh, ws->blobs, b->name, strlen(b->name), b);
    ws->names_stale = 1;
  }
  *out = b;
  return DM_OK;
}

dm_workspace_mark dm_workspace_get_mark(const dm_workspace *ws) {
  return (dm_workspace_mark){ws->next_serial, ws->n_owned};
}

void dm_workspace_rollback(dm_workspace *ws, dm_workspace_mark m) {
  while (ws->n_owned > m.n_owned) {
    dm_owned *o = &ws->owned[--ws->n_owned];
    o->destroy(o->obj);
  }
  dm_blob *b, *tmp;
  HASH_ITER(hh, ws->blobs, b, tmp) {
    if (b->serial >= m.serial)
      remove_blob(ws, b);
  }
}

dm_status dm_workspace_adopt(dm_workspace *ws, void *obj, void (*destroy)(void *obj)) {
  if (ws->n_owned == ws->cap_owned) {
    size_t cap = ws->cap_owned ? ws->cap_owned * 2 : 4;
    dm_owned *owned = realloc(ws->owned, cap * sizeof *owned);
    if (!owned)
      return DM_NOMEM("the workspace's net list");
    ws->owned = owned;
    ws->cap_owned = cap;
  }
  ws->owned[ws->n_owned++] = (dm_owned){obj, destroy};
  return DM_OK;
}

int dm_workspace_disown(dm_workspace *ws, void *obj) {
  for (size_t i = 0; i < ws->n_owned; i++)
    if (ws->owned[i].obj == obj) {
      /* Kept in adoption order: destroy and rollback free the latest first. */
      memmove(&ws->owned[i], &ws->owned[i + 1], (ws->n_owned - i - 1) * sizeof *ws->owned);
      ws->n_owned--;
      return 1;
    }
  return 0;
}

void *dm_workspace_find_owned(const dm_workspace *ws, void (*destroy)(void *obj)) {
  for (size_t i = 0; i < ws->n_owned; i++)
    if (ws->owned[i].destroy == destroy)
      return ws->owned[i].obj;
  return NULL;
}

int dm_workspace_has_blob(const dm_workspace *ws, const char *name) {
  if (!ws || !name) {
    dm_error(DM_ERR_INVALID, "dm_workspace_has_blob: NULL %s", ws ? "name" : "ws");
    return 0;
  }
  if (dm_workspace_enter(ws, "dm_workspace_has_blob") != DM_OK)
    return 0;
  int has = dm_workspace_find(ws, name) != NULL;
  dm_workspace_leave(ws);
  return has;
}

/* Everything dm_workspace_feed can refuse, checked before the blob is touched. */
static dm_status check_feed(const dm_workspace *ws, const char *name, dm_dtype *dtype, int ndim,
                            const int64_t *dims, const void *data, int64_t *numel) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_feed: NULL ws");
  if (!name)
    return dm_error(DM_ERR_INVALID, "dm_workspace_feed: NULL name");
  if (!*name)
    return dm_error(DM_ERR_INVALID, "dm_workspace_feed: an empty blob name");
  if (ndim < 0 || ndim > DM_MAX_DIMS)
    return dm_error(DM_ERR_SHAPE, "dm_workspace_feed: feeding blob '%s': %d dimensions (0 to %d)", name,
                    ndim, DM_MAX_DIMS);
  if (ndim > 0 && !dims)
    return dm_error(DM_ERR_INVALID, "dm_workspace_feed: feeding blob '%s': NULL dims for %d dimensions",
                    name, ndim);
  if (*dtype == DM_BYTE)
    *dtype = DM_UINT8;
  if (!dm_dtype_is_valid(*dtype) || *dtype == DM_UNDEFINED)
    return dm_error(DM_ERR_TYPE, "dm_workspace_feed: feeding blob '%s': invalid data type %d", name,
                    (int)*dtype);
  size_t nbytes;
  dm_status s = dm_shape_numel(ndim, dims, numel);
  if (s == DM_OK)
    s = dm_shape_nbytes(*dtype, *numel, atomic_load(&ws->tensor_limit->tensor_max), &nbytes);
  if (s != DM_OK)
    return dm_error_prefix(s, "dm_workspace_feed: feeding blob '%s'", name);
  if (*numel > 0 && !data)
    return dm_error(DM_ERR_INVALID, "dm_workspace_feed: feeding blob '%s': NULL data for %lld elements",
                    name, (long long)*numel);
  return DM_OK;
}

static void free_strings(char **v, int64_t n) {
  for (int64_t i = 0; v && i < n; i++)
    free(v[i]);
  free(v);
}

/* All or nothing: every argument is checked and every allocation made (the string copies,
 * the storage) before the blob changes, and a blob this call created is removed again on
 * failure, so a failed feed leaves the workspace as it was. */
/* A feed into a blob whose storage another tensor shares (a Reshape view, or a host's
 * dm_workspace_fetch_shared) gets new storage: writing one blob must not change what
 * another holder reads. Allocated aside first, so a failure leaves the blob as it was. */
static dm_status detach_for_feed(dm_workspace *ws, dm_tensor *t, dm_dtype dtype, int ndim,
                                 const int64_t *dims) {
  dm_tensor *fresh = dm_tensor_new(ws->tensor_limit);
  if (!fresh)
    return DM_NOMEM("a blob's new storage");
  dm_status s = dm_tensor_resize(fresh, dtype, ndim, dims);
  if (s == DM_OK)
    dm_tensor_share(t, fresh); /* t drops its share of the old storage */
  dm_tensor_free(fresh);
  return s;
}

static dm_status feed_entered(dm_workspace *ws, const char *name, dm_dtype dtype, int ndim,
                              const int64_t *dims, const void *data) {
  int64_t numel = 0;
  DM_TRY(check_feed(ws, name, &dtype, ndim, dims, data, &numel));
  char **strs = NULL; /* the string copies, made first */
  if (dtype == DM_STRING && numel > 0) {
    const char *const *src = data;
    strs = calloc((size_t)numel, sizeof *strs);
    if (!strs)
      return DM_NOMEM("a string feed");
    for (int64_t i = 0; i < numel; i++)
      if (!(strs[i] = strdup(src[i] ? src[i] : ""))) {
        free_strings(strs, numel);
        return DM_NOMEM("a string element");
      }
  }
  dm_blob *b = dm_workspace_find(ws, name);
  int created = !b;
  dm_status s = created ? dm_workspace_get_or_create(ws, name, &b) : DM_OK;
  if (s == DM_OK && b->tensor->storage && atomic_load(&b->tensor->storage->refs) > 1)
    s = detach_for_feed(ws, b->tensor, dtype, ndim, dims);
  else if (s == DM_OK)
    s = dm_tensor_resize(b->tensor, dtype, ndim, dims); /* unchanged if this fails */
  if (s != DM_OK) {
    if (created && b)
      remove_blob(ws, b);
    free_strings(strs, numel);
    return dm_error_prefix(s, "feeding blob '%s'", name);
  }
  if (dtype == DM_STRING) {
    char **dst = b->tensor->storage->data; /* a new storage: no strings to free */
    for (int64_t i = 0; i < numel; i++)
      dst[i] = strs[i];
    free(strs);
  } else if (b->tensor->storage->nbytes) {
    memcpy(dm_tensor_mutable_data(b->tensor), data, b->tensor->storage->nbytes);
  }
  return DM_OK;
}

dm_status dm_workspace_feed(dm_workspace *ws, const char *name, dm_dtype dtype, int ndim,
                            const int64_t *dims, const void *data) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_feed: NULL ws");
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_feed"));
  return dm_workspace_leave_with(ws, feed_entered(ws, name, dtype, ndim, dims, data));
}

static dm_status fetch_entered(dm_workspace *ws, const char *name, const dm_tensor **out) {
  dm_blob *b = dm_workspace_find(ws, name);
  if (!b)
    return dm_error(DM_ERR_NOT_FOUND, "no blob named '%s' in the workspace", name);
  int id;
  dm_device_type dev = dm_tensor_device(b->tensor, &id);
  if (dev != DM_CPU) {
    char where[32];
    return dm_error(DM_ERR_INVALID,
                    "blob '%s' lives on %s, and a fetched tensor's data is read by the host: "
                    "copy it to the CPU first (CopyGPUToCPU)",
                    name, dm_device_str(dev, id, where, sizeof where));
  }
  *out = b->tensor;
  return DM_OK;
}

dm_status dm_workspace_fetch(dm_workspace *ws, const char *name, const dm_tensor **out) {
  if (!ws || !name || !out)
    return dm_error(DM_ERR_INVALID, "dm_workspace_fetch: NULL %s",
                    !ws ? "ws" : !name ? "name" : "out");
  *out = NULL;
  if (!*name)
    return dm_error(DM_ERR_INVALID, "dm_workspace_fetch: an empty blob name");
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_fetch"));
  return dm_workspace_leave_with(ws, fetch_entered(ws, name, out));
}

static dm_status fetch_shared_entered(dm_workspace *ws, const char *name, dm_tensor **out) {
  const dm_tensor *src = NULL;
  DM_TRY(fetch_entered(ws, name, &src));
  dm_tensor *view = dm_tensor_new(ws->tensor_limit);
  if (!view)
    return DM_NOMEM("a shared tensor");
  dm_tensor_share(view, src);
  /* A blocked buffer is converted in a storage of the view's own, so that the blob and
   * its engine keep their layout. */
  dm_status s = dm_tensor_make_plain(view);
  if (s != DM_OK) {
    dm_tensor_free(view);
    return dm_error_prefix(s, "fetching blob '%s'", name);
  }
  *out = view;
  return DM_OK;
}

dm_status dm_workspace_fetch_shared(dm_workspace *ws, const char *name, dm_tensor **out) {
  if (!ws || !name || !out)
    return dm_error(DM_ERR_INVALID, "dm_workspace_fetch_shared: NULL %s",
                    !ws ? "ws" : !name ? "name" : "out");
  *out = NULL;
  if (!*name)
    return dm_error(DM_ERR_INVALID, "dm_workspace_fetch_shared: an empty blob name");
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_fetch_shared"));
  return dm_workspace_leave_with(ws, fetch_shared_entered(ws, name, out));
}

void dm_tensor_destroy(dm_tensor *t) { dm_tensor_free(t); }

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t dm_workspace_blob_count(const dm_workspace *ws) {
  if (!ws) {
    dm_error(DM_ERR_INVALID, "dm_workspace_blob_count: NULL ws");
    return 0;
  }
  if (dm_workspace_enter(ws, "dm_workspace_blob_count") != DM_OK)
    return 0;
  size_t n = HASH_COUNT(ws->blobs);
  dm_workspace_leave(ws);
  return n;
}

const char *dm_workspace_blob_name(const dm_workspace *ws, size_t i) {
  if (!ws) {
    dm_error(DM_ERR_INVALID, "dm_workspace_blob_name: NULL ws");
    return NULL;
  }
  if (dm_workspace_enter(ws, "dm_workspace_blob_name") != DM_OK)
    return NULL;
  /* The sorted cache is logically const: rebuilt lazily when blobs were added. */
  dm_workspace *w = (dm_workspace *)ws;
  size_t n = HASH_COUNT(w->blobs);
  if (w->names_stale || w->n_sorted != n) {
    char **names = realloc(w->sorted_names, (n ? n : 1) * sizeof *names);
    if (!names) {
      dm_workspace_leave(ws);
      return NULL;
    }
    w->sorted_names = names;
    size_t k = 0;
    for (dm_blob *b = w->blobs; b; b = b->hh.next)
      names[k++] = b->name;
    qsort(names, n, sizeof *names, cmp_str);
    w->n_sorted = n;
    w->names_stale = 0;
  }
  const char *name = i < w->n_sorted ? w->sorted_names[i] : NULL;
  dm_workspace_leave(ws);
  return name;
}
