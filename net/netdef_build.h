/* netdef_build.h: building and editing NetDef/OperatorDef messages in passes (internal).
 *
 * Everything is allocated with malloc so that protobuf_c_message_free_unpacked(m, NULL)
 * frees a built message exactly like a parsed one; passes can mix the two freely.
 */
#ifndef DM_NET_NETDEF_BUILD_H
#define DM_NET_NETDEF_BUILD_H

#include <stdarg.h>
#include <stddef.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

/* Deep copy of any message (through its own wire encoding, which is exact). */
DM_HIDDEN dm_status dm_pb_clone(const ProtobufCMessage *m, ProtobufCMessage **out);
#define DM_PB_CLONE(type, src, dst) dm_pb_clone(&(src)->base, (ProtobufCMessage **)(dst))

/* Appends a copy of `s` to a repeated string field. */
DM_HIDDEN dm_status dm_strv_push(char ***arr, size_t *n, const char *s);

DM_HIDDEN dm_status dm_opdef_new(const char *type, Caffe2__OperatorDef **out);
DM_HIDDEN dm_status dm_opdef_add_input(Caffe2__OperatorDef *op, const char *name);
DM_HIDDEN dm_status dm_opdef_add_output(Caffe2__OperatorDef *op, const char *name);
/* The argument named `name`, or NULL. */
DM_HIDDEN Caffe2__Argument *dm_opdef_find_arg(const Caffe2__OperatorDef *op, const char *name);
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
/* Appends `op` to the net, taking ownership (freed here on failure). */
DM_HIDDEN dm_status dm_netdef_append_op(Caffe2__NetDef *net, Caffe2__OperatorDef *op);
/* Inserts `op` at position `at`, taking ownership. */
DM_HIDDEN dm_status dm_netdef_insert_op(Caffe2__NetDef *net, size_t at, Caffe2__OperatorDef *op);
/* Appends printf-formatted text to the malloc'd summary text *text of *len bytes (passes
 * report what they did this way). Best-effort: out of memory leaves the text as it was,
 * since a summary must never fail a pass. */
DM_HIDDEN void dm_text_appendf(char **text, size_t *len, const char *fmt, ...) DM_PRINTF(3, 4);
DM_HIDDEN void dm_text_vappendf(char **text, size_t *len, const char *fmt, va_list ap);
/* Whether `s` is one of list[0..n). */
DM_HIDDEN int dm_str_in_list(const char *s, const char *const *list, size_t n);
/* A new empty NetDef named `name` (may be NULL). */
DM_HIDDEN dm_status dm_netdef_new(const char *name, Caffe2__NetDef **out);

#endif
