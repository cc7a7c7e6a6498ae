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

#endif
