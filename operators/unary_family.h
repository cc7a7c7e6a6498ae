/* unary_family.h: the one table of the elementwise activations (operators/unary_math.c,
 * gpu/elementwise.c/.cu, net/onnx/import_math.c, net/onnx/export_math.c). Every list of
 * them (the kind enum, the type names, the schemas, the CPU and CUDA kernel tables, the
 * kernels' switches and the ONNX translators of the plain ones) is an expansion of
 * DM_UNARY_OPS, so an op is one row here plus its two formulas in unary_formulas.h
 * (dm_unary_fwd_<Name>, dm_unary_grad_<Name>).
 *
 * Plain C with no include, so that nvcc compiles it beside gcc (ggml's ggml-common.h is
 * the precedent); the columns name C things (arg tables, strings) only for expansions in
 * the .c files.
 *
 * X(Name, args, reads_x, onnx, doc, grad_doc):
 *   Name      the Caffe2 type, and the gradient op's `Name`Gradient; DM_UN_Name the kind
 *   args      a list of the op's arguments, DM_UN_ARGS_NONE or one defined below as
 *             A(name, field, TYPE, default, doc) per argument: the Caffe2 argument `name`
 *             of dm_arg_type DM_ARG_TYPE fills dm_unary_params.`field` (unary_formulas.h),
 *             `default` where the op does not set it; unary_math.c makes the schema's arg
 *             table and the kernels' reading of them from it
 *   reads_x   0: the gradient reads Y, and the forward may run in place; 1: it reads X
 *             (the derivative is no function of Y), so the forward may not
 *   onnx      PLAIN: ONNX's op of the same name, no attributes, translated both ways from
 *             this row; OWN: translators written in net/ (attributes, opset forms)
 *   doc       the forward's schema doc ("X -> Y ..."), grad_doc the gradient's
 */
#ifndef DM_OPERATORS_UNARY_FAMILY_H
#define DM_OPERATORS_UNARY_FAMILY_H

/* The argument lists of the rows below. */
#define DM_UN_ARGS_NONE(A)
#define DM_UN_ARGS_LEAKY(A)                                                                \
  A(alpha, alpha, FLOAT, 0.01f, "the slope for x <= 0 (default 0.01)")
#define DM_UN_ARGS_CLIP(A)                                                                 \
  A(min, lo, FLOAT, -INFINITY, "the lower bound (default -inf)")                           \
  A(max, hi, FLOAT, INFINITY, "the upper bound (default +inf)")
#define DM_UN_ARGS_HSIG(A)                                                                 \
  A(alpha, alpha, FLOAT, 0.2f, "the slope (default 0.2)")                                  \
  A(beta, beta, FLOAT, 0.5f, "the offset (default 0.5)")
#define DM_UN_ARGS_GELU(A)                                                                 \
  A(fast_gelu, fast, INT, 0, "1: the tanh approximation (default 0: the exact, erf form)")

#define DM_UNARY_OPS(X)                                                                    \
  X(Sigmoid, DM_UN_ARGS_NONE, 0, PLAIN,                                                    \
    "X -> Y = 1 / (1 + exp(-X)); FLOAT, FLOAT16 or BFLOAT16; may run in place.",           \
    "Y, dY -> dX = dY * Y * (1 - Y); dX may be dY.")                                       \
  X(Tanh, DM_UN_ARGS_NONE, 0, PLAIN,                                                       \
    "X -> Y = tanh(X); FLOAT, FLOAT16 or BFLOAT16; may run in place.",                     \
    "Y, dY -> dX = dY * (1 - Y^2); dX may be dY.")                                         \
  X(LeakyRelu, DM_UN_ARGS_LEAKY, 0, OWN,                                                   \
    "X -> Y = X where X > 0, else alpha * X; may run in place.",                           \
    "Y, dY -> dX = dY where Y > 0, else alpha * dY; dX may be dY.")                        \
  X(Clip, DM_UN_ARGS_CLIP, 0, OWN,                                                         \
    "X -> Y = min(max(X, min), max); NaN passes; may run in place.",                       \
    "Y, dY -> dX = dY where min < Y < max, else 0; dX may be dY.")                         \
  X(HardSigmoid, DM_UN_ARGS_HSIG, 0, OWN,                                                  \
    "X -> Y = max(0, min(1, alpha * X + beta)); may run in place.",                        \
    "Y, dY -> dX = alpha * dY where 0 < Y < 1, else 0; dX may be dY.")                     \
  X(HardSwish, DM_UN_ARGS_NONE, 1, OWN,                                                    \
    "X -> Y = X * max(0, min(1, X / 6 + 1/2)) = X * relu6(X + 3) / 6 (ONNX's "             \
    "HardSwish; not a Caffe2 op); not in place (the gradient reads X).",                   \
    "X, dY -> dX = dY * (0 below -3, 1 above 3, (2X + 3) / 6 between); dX may be dY.")     \
  X(Erf, DM_UN_ARGS_NONE, 1, PLAIN,                                                        \
    "X -> Y = erf(X); not in place (the gradient reads X).",                               \
    "X, dY -> dX = dY * 2 / sqrt(pi) * exp(-X^2); dX may be dY.")                          \
  X(Sqrt, DM_UN_ARGS_NONE, 0, PLAIN,                                                       \
    "X -> Y = sqrt(X), NaN below 0; may run in place.",                                    \
    "Y, dY -> dX = dY / (2 Y); dX may be dY.")                                             \
  X(Gelu, DM_UN_ARGS_GELU, 1, OWN,                                                         \
    "X -> Y = X * Phi(X) = X / 2 * (1 + erf(X / sqrt(2))), or with fast_gelu = 1 "         \
    "X / 2 * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 X^3))); not in place (the gradient "   \
    "reads X).",                                                                           \
    "X, dY -> dX = dY * d/dX of the forward's form; dX may be dY.")

/* The kinds, in the table's order; DM_UN_NONE: not one of them. */
#define DM_UN_ENUM_(Name, ...) DM_UN_##Name,
typedef enum dm_unary_kind { DM_UNARY_OPS(DM_UN_ENUM_) DM_UN_NONE } dm_unary_kind;
#undef DM_UN_ENUM_

/* In an expansion: what follows `onnx` where the row's onnx column is PLAIN, else
 * nothing (the ONNX translators' tables list the PLAIN rows this way). */
#define DM_UN_IF_PLAIN(onnx, ...) DM_UN_IF_PLAIN_##onnx(__VA_ARGS__)
#define DM_UN_IF_PLAIN_PLAIN(...) __VA_ARGS__
#define DM_UN_IF_PLAIN_OWN(...)

#endif
