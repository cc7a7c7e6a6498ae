/* unary_math.h: the activations of unary_math.c as the CUDA kernels share them
 * (internal): which op a type names, its arguments, and the shape checks, so that
 * gpu/elementwise.c reads an op exactly as the CPU kernel does. */
#ifndef DM_OPERATORS_UNARY_MATH_H
#define DM_OPERATORS_UNARY_MATH_H

#include "demitasse_plugin.h"

/* The order is the CUDA kernels' too (gpu/elementwise.cu numbers them 0 to 5). */
typedef enum dm_unary_kind {
  DM_UN_SIGMOID, DM_UN_TANH, DM_UN_LEAKY, DM_UN_CLIP, DM_UN_HSIG, DM_UN_HSWISH, DM_UN_NONE
} dm_unary_kind;

/* LeakyRelu's alpha; HardSigmoid's alpha and beta; Clip's bounds (lo, hi). */
typedef struct dm_unary_params {
  float alpha, beta, lo, hi;
} dm_unary_params;

/* The kind of forward op `type` (gradient 0) or of its gradient op (gradient 1). */
DM_HIDDEN dm_unary_kind dm_unary_kind_of(const char *type, int gradient);
/* The op's arguments, defaults filled in. */
DM_HIDDEN dm_unary_params dm_unary_params_of(dm_op_ctx *ctx, dm_unary_kind k);
/* Shape and dtype checks of the forward (X -> Y) and gradient (Y or X, dY -> dX) ops. */
DM_HIDDEN dm_status dm_unary_infer(dm_op_ctx *ctx);
DM_HIDDEN dm_status dm_unary_grad_infer(dm_op_ctx *ctx);

#endif
