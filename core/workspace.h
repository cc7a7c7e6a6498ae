/* workspace.h: a map of blob names to tensors, owning the nets created in it (internal).
 *
 * Nets belong to net/, above this layer: the workspace holds them as opaque objects,
 * each with the destructor it was handed (dm_workspace_adopt).
 */
#ifndef DM_CORE_WORKSPACE_H
#define DM_CORE_WORKSPACE_H

#include <stdatomic.h>
#include <stdint.h>
#include <uthash.h>

#include "tensor.h"

typedef struct dm_blob {
  char *name;
  dm_tensor *tensor;
  uint64_t serial; /* creation order in its workspace (dm_workspace_mark) */
  UT_hash_handle hh;
} dm_blob;

/* An object the workspace owns (a net) and the function that frees it. */
typedef struct dm_owned {
  void *obj;
  void (*destroy)(void *obj);
} dm_owned;

struct dm_workspace {
  dm_blob *blobs; /* uthash head */
  dm_owned *owned;
  size_t n_owned, cap_owned;
  /* What its tensors allocate under (core/tensor.h): the cap on one tensor and the memory
   * cap with the count of their host storage; ops make temporaries with
   * dm_tensor_new(ws->tensor_limit) so that those count too. */
  dm_mem_limit *tensor_limit;
  char **sorted_names; /* cache for dm_workspace_blob_name; rebuilt when stale */
  size_t n_sorted;
  int names_stale;
  uint64_t next_serial; /* the serial the next new blob gets */
  char engine[64];      /* the engine list of ops that name none ("": the registry's choice) */
  /* One public call at a time (demitasse.h, "Threads"): the thread inside a public call
   * (its token, 0 when none), taken by try-acquire in dm_workspace_enter, and how deep
   * its public calls are nested (touched by that thread only). */
  _Atomic(uintptr_t) owner;
  unsigned owner_depth;
};

/* A new, empty workspace. The public dm_workspace_create (net/api.c) calls dm_init
 * first and then this. */
DM_HIDDEN dm_status dm_workspace_new(dm_workspace **out);
/* The blob, or NULL. */
DM_HIDDEN dm_blob *dm_workspace_find(const dm_workspace *ws, const char *name);
/* The blob's tensor wherever it lives (unlike dm_workspace_fetch, a GPU tensor too:
 * read its data through a host copy), or NULL if there is no such blob. */
DM_HIDDEN const dm_tensor *dm_workspace_tensor(const dm_workspace *ws, const char *name);
/* The blob, created empty if absent. */
DM_HIDDEN dm_status dm_workspace_get_or_create(dm_workspace *ws, const char *name, dm_blob **out);
/* What a workspace holds at one moment: dm_workspace_rollback(ws, m) removes every blob
 * created after the mark and destroys every object adopted after it (latest first, the
 * objects before the blobs they point at), so a failed call that instantiated nets
 * leaves the blob list as it was. Blobs that existed at the mark are never removed,
 * whatever happened to their tensors since. */
typedef struct dm_workspace_mark {
  uint64_t serial;
  size_t n_owned;
} dm_workspace_mark;
DM_HIDDEN dm_workspace_mark dm_workspace_get_mark(const dm_workspace *ws);
DM_HIDDEN void dm_workspace_rollback(dm_workspace *ws, dm_workspace_mark m);
/* Takes ownership of `obj` (a net): dm_workspace_destroy calls destroy(obj), in the
 * order objects were adopted, before it frees the blobs. On failure nothing is taken. */
DM_HIDDEN dm_status dm_workspace_adopt(dm_workspace *ws, void *obj, void (*destroy)(void *obj));
/* Takes `obj` off the workspace's list without destroying it; 0 if it is not there. */
DM_HIDDEN int dm_workspace_disown(dm_workspace *ws, void *obj);
/* The first object `ws` owns that was adopted with `destroy`, or NULL: the destructor
 * names the kind, so a kernel can keep one object per workspace (the NCCL communicator
 * of gpu/allreduce_nccl.c) without a process-wide static, freed with the workspace. */
DM_HIDDEN void *dm_workspace_find_owned(const dm_workspace *ws, void (*destroy)(void *obj));
/* Enters a public call `fn` on `ws`: DM_OK when no other thread is inside a public call
 * on it (the calling thread may be, as when one public call makes another), else
 * DM_ERR_BUSY with a message naming `fn`, at once: it never waits. Each DM_OK is paired
 * with one dm_workspace_leave. `ws` is const for the read-only calls; the owner word is
 * the one field they change. */
DM_HIDDEN dm_status dm_workspace_enter(const dm_workspace *ws, const char *fn);
DM_HIDDEN void dm_workspace_leave(const dm_workspace *ws);
/* Returns `s` after leaving `ws` (for `return dm_workspace_leave_with(ws, call(...));`). */
DM_HIDDEN dm_status dm_workspace_leave_with(const dm_workspace *ws, dm_status s);

/* The workspace of the op a kernel is running (core/op_ctx.c), for
 * kernels that create blobs by name (Load). */
DM_HIDDEN dm_workspace *dm_op_workspace(dm_op_ctx *ctx);

#endif
