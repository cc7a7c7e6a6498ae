/* api.h: internal helpers behind the public calls that load nets into a workspace and
 * run them (used by the CLI too). */
#ifndef DM_NET_API_H
#define DM_NET_API_H

#include "core/netio.h"
#include "net.h"

/* Reads a NetDef file (.pb or .pbtxt); free with protobuf_c_message_free_unpacked. */
DM_HIDDEN dm_status dm_netdef_read(const char *path, Caffe2__NetDef **out);
/* Instantiates `def` (ownership taken) in `ws`, which adopts the net. */
DM_HIDDEN dm_status dm_workspace_create_net(dm_workspace *ws, Caffe2__NetDef *def,
                                            const char *source, dm_net **out);
/* "cpu" (or NULL), "cuda", "cuda:N" -> *cuda, *id; `what` (an options field) names the
 * value in the error. */
DM_HIDDEN dm_status dm_api_parse_device(const char *what, const char *dev, int *cuda, int *id);
/* The state already in `ws` (an init net ran on the host) that placed nets read on the
 * GPU goes there in place: one CopyCPUToGPU(X) -> X per CPU blob among `names`. */
DM_HIDDEN dm_status dm_api_state_to_gpu(dm_workspace *ws, char *const *names, size_t n, int id);

/* One fact every data-parallel rank must agree on: its name in messages, this rank's
 * value, and whether to print it in hex (a fingerprint). */
typedef struct dm_dist_fact {
  const char *name;
  int64_t value;
  int hex;
} dm_dist_fact;
/* Every rank passes its `n` facts (the same names, in the same order); each rank gets
 * every rank's values (one all-reduce), so on a mismatch every rank fails alike, with
 * DM_ERR_INVALID and a message saying `what` and, per fact that differs, each rank's
 * value ("batch size: rank 0 64, rank 1 32"). DM_OK without MPI or with one rank. */
DM_HIDDEN dm_status dm_dist_agree(const char *what, const dm_dist_fact *facts, size_t n);
/* A 64-bit FNV-1a fingerprint of `len` bytes, continuing from `h` (start with 0). */
DM_HIDDEN uint64_t dm_fingerprint(uint64_t h, const void *data, size_t len);

#endif
