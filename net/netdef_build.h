/* netdef_build.h: building and editing NetDef/OperatorDef messages in passes (internal;
 * the argument helpers are core's, core/opdef_args.h, so the gradient makers' accessors
 * there can use them too).
 *
 * Everything is allocated with malloc so that protobuf_c_message_free_unpacked(m, NULL)
 * frees a built message exactly like a parsed one; passes can mix the two freely.
 */
#ifndef DM_NET_NETDEF_BUILD_H
#define DM_NET_NETDEF_BUILD_H

#include <stdarg.h>
#include <stddef.h>

#include "core/opdef_args.h" /* the dm_opdef_*_arg and dm_netdef_*_arg helpers */
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
/* Nonzero when `op` reads (writes) blob `name`. */
DM_HIDDEN int dm_opdef_reads(const Caffe2__OperatorDef *op, const char *name);
DM_HIDDEN int dm_opdef_writes(const Caffe2__OperatorDef *op, const char *name);
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

/* An op builder with a sticky error, so a pass writes one straight sequence of calls and
 * checks once:
 *
 *     dm_opb b;
 *     dm_opb_start(&b, "Mul");
 *     dm_opb_inputs(&b, in, 2);
 *     dm_opb_output(&b, seed);
 *     dm_opb_arg_int(&b, "broadcast", 1);
 *     DM_TRY(dm_opb_append(&b, net));   // or dm_opb_finish(&b, &op)
 *
 * After the first failure every call is a no-op that keeps that error; the finishing call
 * returns it and frees the half-built op, so nothing leaks and nothing is written through
 * a NULL op. A started builder must be finished (or dm_opb_discard'ed). */
typedef struct dm_opb {
  Caffe2__OperatorDef *op; /* the op being built; NULL after an error */
  dm_status s;             /* the first error, or DM_OK */
} dm_opb;

DM_HIDDEN void dm_opb_start(dm_opb *b, const char *type);
/* Records `s` as the error unless one is recorded already (s == DM_OK: nothing). */
DM_HIDDEN void dm_opb_fail(dm_opb *b, dm_status s);
DM_HIDDEN void dm_opb_input(dm_opb *b, const char *name);
DM_HIDDEN void dm_opb_inputs(dm_opb *b, const char *const *names, size_t n);
DM_HIDDEN void dm_opb_output(dm_opb *b, const char *name);
DM_HIDDEN void dm_opb_outputs(dm_opb *b, const char *const *names, size_t n);
DM_HIDDEN void dm_opb_arg_int(dm_opb *b, const char *name, int64_t v);
DM_HIDDEN void dm_opb_arg_float(dm_opb *b, const char *name, float v);
DM_HIDDEN void dm_opb_arg_string(dm_opb *b, const char *name, const char *v);
DM_HIDDEN void dm_opb_arg_ints(dm_opb *b, const char *name, const int64_t *v, size_t n);
/* Appends a copy of `a` (after the arguments set so far, whatever its name). */
DM_HIDDEN void dm_opb_copy_arg(dm_opb *b, const Caffe2__Argument *a);
/* Sets the op's device_option to a copy of `d`, and its engine to a copy of `engine`. */
DM_HIDDEN void dm_opb_device_option(dm_opb *b, const Caffe2__DeviceOption *d);
DM_HIDDEN void dm_opb_engine(dm_opb *b, const char *engine);
/* Sets is_gradient_op (and has_is_gradient_op) to `on`: 0 leaves the field unset. */
DM_HIDDEN void dm_opb_gradient(dm_opb *b, int on);
/* The op (owned by the builder) or NULL after an error. */
DM_HIDDEN Caffe2__OperatorDef *dm_opb_op(const dm_opb *b);
/* Hands the op to the caller, or returns the error having freed it. */
DM_HIDDEN dm_status dm_opb_finish(dm_opb *b, Caffe2__OperatorDef **out);
/* Finishes and appends to (inserts into at `at`) `net`, which takes the op. */
DM_HIDDEN dm_status dm_opb_append(dm_opb *b, Caffe2__NetDef *net);
DM_HIDDEN dm_status dm_opb_insert(dm_opb *b, Caffe2__NetDef *net, size_t at);
/* Frees what was built (a builder given up on). */
DM_HIDDEN void dm_opb_discard(dm_opb *b);

#endif
