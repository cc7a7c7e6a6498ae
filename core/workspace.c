/* workspace.c: named blobs (a uthash table) and the nets that live in a workspace. */
#include "workspace.h"

#include "device.h"

#include <stdlib.h>
#include <string.h>

dm_status dm_workspace_new(dm_workspace **out) {
  *out = NULL;
  dm_workspace *ws = calloc(1, sizeof *ws);
  if (!ws)
    return DM_NOMEM("a workspace");
  ws->tensor_limit = DM_DEFAULT_TENSOR_LIMIT;
  *out = ws;
  return DM_OK;
}

void dm_workspace_destroy(dm_workspace *ws) {
  if (!ws)
    return;
  for (size_t i = 0; i < ws->n_owned; i++)
    ws->owned[i].destroy(ws->owned[i].obj);
  free(ws->owned);
  dm_blob *b, *tmp;
  HASH_ITER(hh, ws->blobs, b, tmp) {
    HASH_DEL(ws->blobs, b);
    dm_tensor_free(b->tensor);
    free(b->name);
    free(b);
  }
  free(ws->sorted_names);
  free(ws);
}

void dm_workspace_set_tensor_limit(dm_workspace *ws, uint64_t max_bytes) {
  ws->tensor_limit = max_bytes;
  dm_blob *b, *tmp;
  HASH_ITER(hh, ws->blobs, b, tmp) { b->tensor->limit = max_bytes; }
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
    HASH_ADD_KEYPTR(hh, ws->blobs, b->name, strlen(b->name), b);
    ws->names_stale = 1;
  }
  *out = b;
  return DM_OK;
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

int dm_workspace_has_blob(const dm_workspace *ws, const char *name) {
  return dm_workspace_find(ws, name) != NULL;
}

dm_status dm_workspace_feed(dm_workspace *ws, const char *name, dm_dtype dtype, int ndim,
                            const int64_t *dims, const void *data) {
  if (!ws || !name || (ndim > 0 && !dims))
    return dm_error(DM_ERR_INVALID, "dm_workspace_feed: NULL argument");
  dm_blob *b;
  DM_TRY(dm_workspace_get_or_create(ws, name, &b));
  dm_status s = dm_tensor_resize(b->tensor, dtype, ndim, dims);
  if (s != DM_OK)
    return dm_error_prefix(s, "feeding blob '%s'", name);
  if (dtype == DM_STRING) {
    char **dst = b->tensor->storage->data;
    const char *const *src = data;
    for (int64_t i = 0; i < b->tensor->numel; i++) {
      free(dst[i]);
      dst[i] = strdup(src[i] ? src[i] : "");
      if (!dst[i])
        return DM_NOMEM("a string element");
    }
  } else if (b->tensor->storage->nbytes) {
    if (!data)
      return dm_error(DM_ERR_INVALID, "feeding blob '%s': NULL data", name);
    memcpy(dm_tensor_mutable_data(b->tensor), data, b->tensor->storage->nbytes);
  }
  return DM_OK;
}

dm_status dm_workspace_fetch(dm_workspace *ws, const char *name, const dm_tensor **out) {
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

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t dm_workspace_blob_count(const dm_workspace *ws) { return HASH_COUNT(ws->blobs); }

const char *dm_workspace_blob_name(const dm_workspace *ws, size_t i) {
  /* The sorted cache is logically const: rebuilt lazily when blobs were added. */
  dm_workspace *w = (dm_workspace *)ws;
  size_t n = HASH_COUNT(w->blobs);
  if (w->names_stale || w->n_sorted != n) {
    char **names = realloc(w->sorted_names, (n ? n : 1) * sizeof *names);
    if (!names)
      return NULL;
    w->sorted_names = names;
    size_t k = 0;
    for (dm_blob *b = w->blobs; b; b = b->hh.next)
      names[k++] = b->name;
    qsort(names, n, sizeof *names, cmp_str);
    w->n_sorted = n;
    w->names_stale = 0;
  }
  return i < w->n_sorted ? w->sorted_names[i] : NULL;
}
