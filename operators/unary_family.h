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
 *   args      the dm_arg_spec table in unary_math.c (alpha, beta, min, max), or NULL
 *   reads_x   0: the gradient reads Y, and the forward may run in place; 1: it reads X
 *             (the derivative is no function of Y), so the forward may not
 *   onnx      PLAIN: ONNX's op of the same name, no attributes, translated both ways from
 *             this row; OWN: translators written in net/ (attributes, opset forms)
 *   doc       the forward's schema doc ("X -> Y ..."), grad_doc the gradient's
 */
#ifndef DM_OPERATORS_UNARY_FAMILY_H
#define DM_OPERATORS_UNARY_FAMILY_H

#define DM_UNARY_OPS(X)                                                                     \
  X(Sigmoid, NULL, 0, PLAIN,                                                                \
    "X -> Y = 1 / (1 + exp(-X)); FLOAT, FLOAT16 or BFLOAT16; may run in place.",           \
    "Y, dY -> dX = dY * Y * (1 - Y); dX may be dY.")                                       \
  X(Tanh, NULL, 0, PLAIN, "X -> Y = tanh(X); FLOAT, FLOAT16 or BFLOAT16; may run in place.", \
    "Y, dY -> dX = dY * (1 - Y^2); dX may be dY.")                                         \
  X(LeakyRelu, leaky_args, 0, OWN, "X -> Y = X where X > 0, else alpha * X; may run in place.", \
    "Y, dY -> dX = dY where Y > 0, else alpha * dY; dX may be dY.")                        \
  X(Clip, clip_args, 0, OWN, "X -> Y = min(max(X, min), max); NaN passes; may run in place.", \
    "Y, dY -> dX = dY where min < Y < max, else 0; dX may be dY.")                         \
  X(HardSigmoid, hsig_args, 0, OWN,                                                         \
    "X -> Y = max(0, min(1, alpha * X + beta)); may run in place.",                        \
    "Y, dY -> dX = alpha * dY where 0 < Y < 1, else 0; dX may be dY.")                     \
  X(HardSwish, NULL, 1, OWN,                                                                \
    "X -> Y = X * max(0, min(1, X / 6 + 1/2)) = X * relu6(X + 3) / 6 (ONNX's "             \
    "HardSwish; not a Caffe2 op); not in place (the gradient reads X).",                   \
    "X, dY -> dX = dY * (0 below -3, 1 above 3, (2X + 3) / 6 between); dX may be dY.")

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
