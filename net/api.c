/* api.c: the public calls that need the layers above core: creating a workspace (which
 * initialises the library first), loading nets into it, running and destroying them,
 * the gradient pass on a NetDef in memory, and loading a plugin (after the built-ins are
 * registered). */
#include "api.h"

#include <stdlib.h>

#include "core/registry.h"
#include "passes/gradient_pass.h"

/* The workspace's destructor for the nets it adopts. */
static void destroy_net(void *net) { dm_net_free(net); }

dm_status dm_workspace_create(dm_workspace **out) {
  if (!out)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create: NULL out");
  *out = NULL;
  DM_TRY(dm_init());
  return dm_workspace_new(out);
}

dm_status dm_plugin_load(const char *path) {
  if (!path)
    return dm_error(DM_ERR_INVALID, "dm_plugin_load: NULL path");
  if (!*path) /* dlopen("") would hand back the host program itself */
    return dm_error(DM_ERR_INVALID, "dm_plugin_load: an empty path");
  /* Built-ins first, so that a plugin cannot take a built-in op's name. */
  DM_TRY(dm_init());
  return dm_plugin_load_registered(path);
}

dm_status dm_netdef_read(const char *path, Caffe2__NetDef **out) {
  ProtobufCMessage *m = NULL;
  DM_TRY(dm_message_read_file(path, &caffe2__net_def__descriptor, DM_FORMAT_AUTO, &m));
  *out = (Caffe2__NetDef *)m;
  return DM_OK;
}

dm_status dm_workspace_create_net(dm_workspace *ws, Caffe2__NetDef *def, const char *source,
                                  dm_net **out) {
  /* Instantiating creates the blobs the net names that do not exist yet; a failure
   * removes them again (after the net that points at them is freed), so a failed call
   * leaves the blob list as it was. */
  dm_workspace_mark mark = dm_workspace_get_mark(ws);
  dm_net *net = NULL;
  dm_status s = dm_net_create(ws, def, source, &net);
  if (s == DM_OK) {
    s = dm_workspace_adopt(ws, net, destroy_net);
    if (s != DM_OK)
      dm_net_free(net);
  }
  if (s != DM_OK) {
    dm_workspace_rollback(ws, mark);
    return s;
  }
  *out = net;
  return DM_OK;
}

dm_status dm_workspace_create_net_file(dm_workspace *ws, const char *path, dm_net **out) {
  if (!ws || !path || !out)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create_net_file: NULL %s",
                    !ws ? "ws" : !path ? "path" : "out");
  *out = NULL;
  if (!*path)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create_net_file: an empty path");
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_create_net_file"));
  Caffe2__NetDef *def = NULL;
  dm_status s = dm_netdef_read(path, &def);
  if (s == DM_OK)
    s = dm_workspace_create_net(ws, def, path, out);
  return dm_workspace_leave_with(ws, s);
}

dm_status dm_workspace_create_net_bytes(dm_workspace *ws, const void *data, size_t size, int text,
                                        dm_net **out) {
  if (!ws || (!data && size) || !out)
    return dm_error(DM_ERR_INVALID, "dm_workspace_create_net_bytes: NULL %s",
                    !ws ? "ws" : !out ? "out" : "data");
  *out = NULL;
  DM_TRY(dm_message_check_nonempty("dm_workspace_create_net_bytes: <memory>", size));
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_create_net_bytes"));
  ProtobufCMessage *m = NULL;
  dm_status s = dm_message_parse(data, size, "<memory>", &caffe2__net_def__descriptor,
                                 text ? DM_FORMAT_TEXT : DM_FORMAT_BINARY, &m);
  if (s == DM_OK)
    s = dm_workspace_create_net(ws, (Caffe2__NetDef *)m, "<memory>", out);
  return dm_workspace_leave_with(ws, s);
}

dm_status dm_workspace_run_net_file(dm_workspace *ws, const char *path) {
  if (!ws || !path)
    return dm_error(DM_ERR_INVALID, "dm_workspace_run_net_file: NULL %s", ws ? "path" : "ws");
  if (!*path)
    return dm_error(DM_ERR_INVALID, "dm_workspace_run_net_file: an empty path");
  /* Entered for both calls, so that no other thread's call comes between them. */
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_run_net_file"));
  dm_net *net = NULL;
  dm_status s = dm_workspace_create_net_file(ws, path, &net);
  if (s == DM_OK)
    s = dm_net_run(net);
  return dm_workspace_leave_with(ws, s);
}

dm_status dm_net_destroy(dm_net *net) {
  if (!net)
    return DM_OK;
  dm_workspace *ws = net->ws;
  DM_TRY(dm_workspace_enter(ws, "dm_net_destroy"));
  dm_status s = DM_OK;
  if (dm_workspace_disown(ws, net))
    dm_net_free(net);
  else /* not one of its nets (destroyed twice, say): freeing it again would crash */
    s = dm_error(DM_ERR_INVALID, "dm_net_destroy: the net is not one its workspace holds");
  return dm_workspace_leave_with(ws, s);
}

dm_status dm_netdef_add_gradient(const void *net, size_t size, const char *const *losses,
                                 size_t n_losses, void **out, size_t *out_size) {
  if (!net || !losses || !out || !out_size)
    return dm_error(DM_ERR_INVALID, "dm_netdef_add_gradient: NULL %s",
                    !net ? "net" : !losses ? "losses" : !out ? "out" : "out_size");
  *out = NULL;
  *out_size = 0;
  if (!n_losses)
    return dm_error(DM_ERR_INVALID, "dm_netdef_add_gradient: no loss blob named");
  for (size_t i = 0; i < n_losses; i++)
    if (!losses[i] || !*losses[i])
      return dm_error(DM_ERR_INVALID, "dm_netdef_add_gradient: loss %zu is %s", i,
                      losses[i] ? "an empty name" : "NULL");
  DM_TRY(dm_message_check_nonempty("dm_netdef_add_gradient: <memory>", size));
  DM_TRY(dm_init()); /* the gradient makers are the schemas' */
  ProtobufCMessage *m = NULL;
  DM_TRY(dm_message_parse(net, size, "<memory>", &caffe2__net_def__descriptor,
                          DM_FORMAT_BINARY, &m));
  Caffe2__NetDef *def = (Caffe2__NetDef *)m;
  dm_status s = dm_gradient_pass(def, &(dm_gradient_opts){losses, n_losses});
  if (s == DM_OK) {
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf) {
      protobuf_c_message_pack(m, buf);
      *out = buf;
      *out_size = len;
    } else {
      s = DM_NOMEM("the net with its gradient");
    }
  }
  protobuf_c_message_free_unpacked(m, NULL);
  return s;
}

void dm_free(void *p) { free(p); }
