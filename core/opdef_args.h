/* opdef_args.h: the arguments of OperatorDef and NetDef messages: find, set, clear
 * (internal).
 *
 * They touch nothing but protobuf-c structs, so they sit in core, below everything that
 * edits ops: the passes (net/netdef_build.h includes this) and the gradient makers'
 * dm_grad_set_arg_* (core/grad_ctx.c). Everything is allocated with malloc, so that
 * protobuf_c_message_free_unpacked(m, NULL) frees an edited message like a parsed one.
 */
#ifndef DM_CORE_OPDEF_ARGS_H
#define DM_CORE_OPDEF_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/caffe2.pb-c.h"
#include "status.h"

/* The argument named `name`, or NULL. */
DM_HIDDEN Caffe2__Argument *dm_opdef_find_arg(const Caffe2__OperatorDef *op, const char *name);
/* Its integer argument `name`, or dflt when absent or not an integer. */
DM_HIDDEN int64_t dm_opdef_arg_int(const Caffe2__OperatorDef *op, const char *name, int64_t dflt);
/* Adds or replaces an argument. */
DM_HIDDEN dm_status dm_opdef_set_arg_int(Caffe2__OperatorDef *op, const char *name, int64_t v);
DM_HIDDEN dm_status dm_opdef_set_arg_float(Caffe2__OperatorDef *op, const char *name, float v);
DM_HIDDEN dm_status dm_opdef_set_arg_string(Caffe2__OperatorDef *op, const char *name,
                                            const char *v);
DM_HIDDEN dm_status dm_opdef_set_arg_ints(Caffe2__OperatorDef *op, const char *name,
                                          const int64_t *v, size_t n);
DM_HIDDEN dm_status dm_opdef_set_arg_floats(Caffe2__OperatorDef *op, const char *name,
                                            const float *v, size_t n);
/* The same for a net's own arguments (passes mark the nets they have rewritten). */
DM_HIDDEN Caffe2__Argument *dm_netdef_find_arg(const Caffe2__NetDef *net, const char *name);
DM_HIDDEN dm_status dm_netdef_set_arg_string(Caffe2__NetDef *net, const char *name,
                                             const char *v);
/* Removes every argument. */
DM_HIDDEN void dm_opdef_clear_args(Caffe2__OperatorDef *op);

#endif
