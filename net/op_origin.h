/* op_origin.h: which op of the net as the user wrote it an op of a rewritten net comes
 * from, so that errors name ops as the user wrote them.
 *
 * The passes renumber ops (the gradient pass appends, the mixed-precision pass inserts
 * casts, fusion turns FC into FCFusion), so "op 10 (FCFusion)" in an error means nothing
 * to someone whose net has ops 0-9 and no FCFusion. Before the passes, each op is stamped
 * with its place as written ("op 3 (FC 'fc1')"), in OperatorDef.debug_info, the field
 * Caffe2 keeps for where an op came from; passes that rewrite an op keep the field (they
 * edit or clone the op), gradient ops get their forward op's ("the gradient of ..."), and
 * after each pass the ops it added are stamped with its name. The stamps are in-memory
 * annotations: dm_netdef_write_atomic drops them, so a written net is as before. */
#ifndef DM_NET_OP_ORIGIN_H
#define DM_NET_OP_ORIGIN_H

#include <stddef.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

/* Marks a stamp: a user's own debug_info (no prefix) is never read or replaced. */
#define DM_ORIGIN_PREFIX "dm-origin: "

/* Stamps every op of `net` that has no debug_info with "op I (TYPE 'NAME')". */
DM_HIDDEN dm_status dm_origin_stamp(Caffe2__NetDef *net);
/* Stamps the ops of `net` without a stamp (added since dm_origin_stamp) with "added by
 * the <pass> pass". A net never stamped is left alone. */
DM_HIDDEN dm_status dm_origin_mark_added(Caffe2__NetDef *net, const char *pass);
/* The stamp a gradient op of `fwd` carries, malloc'd ("the gradient of op 3 (FC 'fc1')");
 * NULL when `fwd` has none (or out of memory: the stamp is only for messages). */
DM_HIDDEN char *dm_origin_of_gradient(const Caffe2__OperatorDef *fwd);
/* Whether any op of `net` carries a stamp. */
DM_HIDDEN int dm_origin_any(const Caffe2__NetDef *net);
/* Drops the stamps (debug_info with the prefix) of every op of `net`. */
DM_HIDDEN void dm_origin_strip(Caffe2__NetDef *net);

/* The op `op` at `index` as an error names it: "op 10 (FCFusion 'fc1')", and where a
 * stamp says it is another op of the net as written, that one first, with the
 * rewritten one beside it: "op 3 (FC 'fc1') as written (op 10, FCFusion, in the
 * rewritten net)", "op 14 (FCGradient, the gradient of op 3 (FC 'fc1') as written)",
 * "op 12 (FloatToHalf, added by the mixed-precision pass)". Returns buf. */
DM_HIDDEN const char *dm_opdef_describe(const Caffe2__OperatorDef *op, size_t index, char *buf,
                                        size_t cap);

#endif
