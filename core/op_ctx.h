/* op_ctx.h: the built-in kernels' accessors of dm_op_ctx beyond the plugin ABI's
 * (internal; core/op_ctx.c defines them, with the ABI's dm_op_* in demitasse_plugin.h).
 * Kernels include this, never op_ctx_impl.h: what an op holds stays core's and the
 * executor's. */
#ifndef DM_CORE_OP_CTX_H
#define DM_CORE_OP_CTX_H

#include "demitasse_plugin.h"
#include "status.h"

/* Runs the op's schema shape inference for its checks and messages only: shape-only, no
 * allocation, every output tensor left exactly as it was (storage, layout, dims), so an
 * engine kernel reports the reference's errors in its words without its plain resizes. */
DM_HIDDEN dm_status dm_op_check_shapes(dm_op_ctx *ctx);

#endif
