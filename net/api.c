/* api.c: the public calls that need the layers above core: creating a workspace (which
 * initialises the library first), loading nets into it and running them, and loading a
 * plugin (after the built-ins are registered). */
#include "api.h"

#include <stdlib.h>

#include "core/registry.h"

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
