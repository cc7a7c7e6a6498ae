/* train_checkpoint.c: checkpoints of `demitasse train` (see train_checkpoint.h). The
 * records themselves, their atomic replacement and their checksums are the Save and
 * Load ops' (operators/save_load.c); what is here is what only the training loop knows:
 * which blobs are its state, and what shape and dtype the model gives each. */
#include "train_checkpoint.h"

#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "net/netdef_build.h"

dm_status dm_train_checkpoint_net(dm_workspace *ws, const char *path, int save,
                                  char *const *blobs, size_t n, dm_net **out) {
  Caffe2__NetDef *def = NULL;
  Caffe2__OperatorDef *op = NULL;
  DM_TRY(dm_netdef_new(save ? "save_checkpoint" : "load_checkpoint", &def));
  dm_status s = dm_opdef_new(save ? "Save" : "Load", &op);
  for (size_t i = 0; i < n && s == DM_OK; i++)
    s = save ? dm_opdef_add_input(op, blobs[i]) : dm_opdef_add_output(op, blobs[i]);
  if (s == DM_OK)
    s = dm_opdef_set_arg_string(op, "db", path);
  if (s == DM_OK)
    s = dm_opdef_set_arg_string(op, "db_type", "lmdb");
  if (s == DM_OK) {
    s = dm_netdef_append_op(def, op);
    op = NULL;
  }
  if (op)
    protobuf_c_message_free_unpacked(&op->base, NULL);
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return s;
  }
  return dm_workspace_create_net(ws, def, save ? "<save>" : "<load>", out);
}

/* A blob's dtype and shape as the init nets made it. */
typedef struct blob_sig {
  dm_dtype dtype;
  int ndim;
  int64_t dims[DM_MAX_DIMS];
} blob_sig;

static void sig_of(const dm_tensor *t, blob_sig *g) {
  g->dtype = dm_tensor_dtype(t);
  g->ndim = dm_tensor_ndim(t);
  if (g->ndim > 0 && g->ndim <= DM_MAX_DIMS)
    memcpy(g->dims, dm_tensor_dims(t), (size_t)g->ndim * sizeof *g->dims);
}

static const char *sig_str(const blob_sig *g, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, "%s ", dm_dtype_name(g->dtype));
  if (g->ndim == 0 && used < cap)
    snprintf(buf + used, cap - used, "scalar");
  for (int i = 0; i < g->ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, i ? "x%lld" : "%lld",
                             (long long)g->dims[i]);
  return buf;
}

dm_status dm_train_resume(dm_workspace *ws, const char *path, char *const *blobs, size_t n) {
  blob_sig *want = calloc(n + 1, sizeof *want);
  if (!want)
    return DM_NOMEM("the blob shapes");
  for (size_t i = 0; i < n; i++)
    sig_of(dm_workspace_tensor(ws, blobs[i]), &want[i]);
  dm_net *load = NULL;
  dm_status s = dm_train_checkpoint_net(ws, path, 0, blobs, n, &load);
  if (s == DM_OK)
    s = dm_net_run(load);
  if (s == DM_ERR_NOT_FOUND) /* a folder, or nothing, where the checkpoint should be */
    dm_error_prefix(s, "--resume: --checkpoint '%s' holds no checkpoint to resume from (train "
                    "without --resume to start one, or give an earlier run's)", path);
  else if (s != DM_OK)
    dm_error_prefix(s, "--resume");
  for (size_t i = 0; s == DM_OK && i < n; i++) {
    blob_sig got;
    sig_of(dm_workspace_tensor(ws, blobs[i]), &got);
    if (got.dtype == want[i].dtype && got.ndim == want[i].ndim &&
        memcmp(got.dims, want[i].dims, (size_t)got.ndim * sizeof *got.dims) == 0)
      continue;
    char a[160], b[160];
    s = dm_error(DM_ERR_SHAPE,
                 "--resume: checkpoint '%s': blob '%s' is %s there, but the init nets make "
                 "it %s: the checkpoint is another model's (or was written with other "
                 "options); resume with the --init and --net it was trained with, or train "
                 "from the start",
                 path, blobs[i], sig_str(&got, a, sizeof a), sig_str(&want[i], b, sizeof b));
  }
  free(want);
  return s;
}
