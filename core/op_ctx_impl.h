/* op_ctx_impl.h: what a kernel's dm_op_ctx holds (internal).
 *
 * Kernels see an op only through the dm_op_* accessors (demitasse_plugin.h), which live
 * here in core (op_ctx.c) so that operators/ and gpu/ depend on nothing above core. The
 * executor (net/net.c) fills the struct when it instantiates an op; whatever the
 * accessors need of the net (its workspace) is a field it sets, so core never calls up
 * into net/. `net` is opaque to core: only net/ looks inside it.
 */
#ifndef DM_CORE_OP_CTX_IMPL_H
#define DM_CORE_OP_CTX_IMPL_H

#include <stdint.h>

#include "demitasse_plugin.h"
#include "proto/caffe2.pb-c.h"
#include "workspace.h"

/* An argument of an op, with NUL-terminated copies of its string values. */
typedef struct dm_arg {
  const Caffe2__Argument *pb;
  char *s;     /* copy of pb->s, or NULL */
  char **strs; /* copies of pb->strings */
} dm_arg;

struct dm_op_ctx {
  dm_net *net;       /* the net it belongs to (NULL while a pass probes a kernel) */
  dm_workspace *ws;  /* its blobs' workspace (dm_op_workspace) */
  int index;
  const Caffe2__OperatorDef *def;
  const dm_op_schema *schema;
  const dm_kernel_def *kernel;
  dm_device_type device;
  int device_id;
  dm_blob **in, **out;
  int n_in, n_out;
  dm_arg *args;
  size_t n_args;
  void *state;
  int has_seed;
  uint32_t seed;
  int shape_only; /* set while inferring shapes */
  int keeps_layouts; /* the kernel reads and writes blocked layouts (core/tensor.h) */
  uint64_t dtypes_seen; /* the input dtypes the kernel's supports hook last accepted */
  int reference_only;   /* an engine's run refused the op: the plain kernel runs it */
};

/* Why the last kernel lookup's supports hook refused (dm_op_refuse), or "" (this
 * thread's; the executor clears it at the start of every lookup). */
DM_HIDDEN const char *dm_op_last_refusal(void);
DM_HIDDEN void dm_op_clear_refusal(void);

#endif
