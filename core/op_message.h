/* op_message.h: kernel error messages that name the op's blobs (see op_message.c). */
#ifndef DM_CORE_OP_MESSAGE_H
#define DM_CORE_OP_MESSAGE_H

#include "op_ctx_impl.h"
#include "status.h"

/* Writes msg to out (cap bytes, always terminated) followed by the blob of each of the
 * op's slots it mentions ("... (W is blob 'conv2_w')"), the slots read from the schema's
 * doc, and for a type error on a float64 or integer input the NumPy fix. */
DM_HIDDEN void dm_op_message_annotate(const dm_op_ctx *ctx, dm_status s, const char *msg,
                                      char *out, size_t cap);

#endif
