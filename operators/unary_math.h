/* unary_math.h: the activations of unary_math.c as the other kernels share them
 * (internal): the kernels' init, which resolves the op's kind and arguments once, and
 * the checks every run makes, so that gpu/elementwise.c and the oneDNN engine
 * (operators/dnnl/eltwise.c) read an op exactly as the CPU kernel does. The kinds and
 * formulas are unary_family.h's and unary_formulas.h's. */
#ifndef DM_OPERATORS_UNARY_MATH_H
#define DM_OPERATORS_UNARY_MATH_H

#include "demitasse_plugin.h"
#include "unary_formulas.h"

/* A kernel's state (dm_op_state), made by dm_unary_init, freed by dm_unary_fini. */
typedef struct dm_unary_op {
  dm_unary_kind kind;
  int gradient; /* 1: the kind's gradient op */
  dm_unary_params p; /* the op's arguments, defaults filled in */
} dm_unary_op;

/* The kind of forward op `type` (gradient 0) or of its gradient op (gradient 1);
 * DM_UN_NONE for any other type. */
DM_HIDDEN dm_unary_kind dm_unary_kind_of(const char *type, int gradient);
/* Kind k's arguments as the op of ctx sets them, the row's defaults for the others
 * (ConvFusion reads its fused activation's this way). */
DM_HIDDEN dm_unary_params dm_unary_params_of(dm_op_ctx *ctx, dm_unary_kind k);

/* The checks of kind k's arguments alone (Clip's min <= max), in the op's words: the
 * forward's, and ConvFusion's for the activation it fuses. */
DM_HIDDEN dm_status dm_unary_check_params(dm_op_ctx *ctx, dm_unary_kind k,
                                          const dm_unary_params *p);

/* Kernel init and fini of every op of the family, forward and gradient, CPU and CUDA. */
DM_HIDDEN dm_status dm_unary_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN void dm_unary_fini(void *state);
/* The run-time checks of the forward (X -> Y) or gradient (Y or X, dY -> dX) op, whose
 * output they then declare: what the schemas' inference checks, with the kind and
 * arguments of the state. */
DM_HIDDEN dm_status dm_unary_check(dm_op_ctx *ctx, const dm_unary_op *u);
/* The forward's checks of X's dtype and of the arguments alone, Y left as it is: for
 * the oneDNN engine's kernels (operators/dnnl/eltwise.c), which write Y in X's layout. */
DM_HIDDEN dm_status dm_unary_check_forward_args(dm_op_ctx *ctx, const dm_unary_op *u);

#endif
