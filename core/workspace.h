/* workspace.h: a map of blob names to tensors, owning the nets created in it (internal). */
#ifndef DM_CORE_WORKSPACE_H
#define DM_CORE_WORKSPACE_H

#include <uthash.h>

#include "tensor.h"

typedef struct dm_blob {
  char *name;
  dm_tensor *tensor;
  UT_hash_handle hh;
} dm_blob;

struct dm_workspace {
  dm_blob *blobs; /* uthash head */
  dm_net **nets;
  size_t n_nets, cap_nets;
  uint64_t tensor_limit;
  char **sorted_names; /* cache for dm_workspace_blob_name; rebuilt when stale */
  size_t n_sorted;
  int names_stale;
};

/* The blob, or NULL. */
DM_HIDDEN dm_blob *dm_workspace_find(const dm_workspace *ws, const char *name);
/* The blob, created empty if absent. */
DM_HIDDEN dm_status dm_workspace_get_or_create(dm_workspace *ws, const char *name, dm_blob **out);
/* Takes ownership of `net` (freed with the workspace). */
DM_HIDDEN dm_status dm_workspace_adopt_net(dm_workspace *ws, dm_net *net);

#endif
