/* gpu_cases.h: the case table of test_gpu_ops.c: one op, its arguments, its fed inputs
 * (shapes, dtypes, value ranges), an optional CPU "prep" net that derives consistent
 * inputs (a gradient op's Y from its forward op), and the reduction length behind one
 * output, from which the tolerance is derived. Included once, by test_gpu_ops.c.
 *
 * Input dtype letters: 'T' the case's float type (FLOAT, FLOAT16 in the FP16 pass,
 * BFLOAT16 in the BF16 pass), 'f' always FLOAT, 'i' INT32 and 'l' INT64 (integers drawn
 * in [lo, hi)). lo == hi gives a constant. inf_at > 0 puts +inf at element inf_at - 1.
 */
#ifndef DM_TESTS_GPU_CASES_H
#define DM_TESTS_GPU_CASES_H

#include <stdint.h>

typedef struct gpu_feed {
  const char *name;
  char t;
  int ndim;
  int64_t dims[4];
  float lo, hi;
  int inf_at;
} gpu_feed;

/* The passes a case runs in (its modes). GC_BF16 is set only where the CPU kernel takes
 * BFLOAT16 for the case's 'T' inputs: it refuses them (DM_ERR_TYPE) in LRN(Gradient)
 * and UnscaleAndCheck, whose cases are GC_BOTH, as are SoftmaxWithLoss(Gradient)'s (the
 * CPU takes BF16 logits, the CUDA kernels do not). */
enum { GC_FP32 = 1, GC_FP16 = 2, GC_BF16 = 4, GC_BOTH = GC_FP32 | GC_FP16,
       GC_ALL = GC_BOTH | GC_BF16 };

typedef struct gpu_case {
  const char *label;
  const char *op;         /* "type: '...' arg { ... }": everything but inputs and outputs */
  gpu_feed feed[10];       /* ended by a NULL name */
  const char *prep;       /* CPU ops run after feeding, before the op (may be NULL) */
  const char *in[12];     /* the op's inputs, in order (a name may repeat); NULL-ended */
  const char *out[8];     /* its outputs, NULL-ended; a name that is also an input runs in
                           * place */
  int modes;
  int k;                  /* longest reduction behind one output (+ a few for exp/pow) */
  int reshape;            /* GC_RESHAPE: also run the same nets at batch N+1, then N again */
} gpu_case;

/* A case marked GC_RESHAPE runs its instantiated nets three times (test_gpu_ops.c): at
 * the table's batch N, at N + 1, at N again, the nets not re-created in between, so a
 * kernel's per-op state (cached cuDNN descriptors, parsed arguments) is hit and then
 * re-set after a shape change. N is dim 0 of the first feed; every feed of rank >= 1 whose
 * dim 0 is N takes N + 1 in the second run, so a case so marked must not have a
 * non-batch feed whose leading dim happens to equal N. */
enum { GC_RESHAPE = 1 };

#define A(n, v) "arg { name: '" n "' i: " #v " } "
#define AF(n, v) "arg { name: '" n "' f: " #v " } "
#define AS(n, v) "arg { name: '" n "' s: '" v "' } "

/* Conv: NCHW 2x3x7x7 * 4x3x3x3, stride 2, pad 1 -> 2x4x4x4. */
#define CONV_NCHW "type: 'Conv' " A("kernel", 3) A("stride", 2) A("pad", 1)
#define CONV_NHWC "type: 'Conv' " A("kernel", 3) A("stride", 2) A("pad", 1) AS("order", "NHWC")
#define CONV_GRP "type: 'Conv' " A("kernel", 3) A("pad", 1) A("group", 2)
#define CONV_FUSION                                                                     \
  "type: 'ConvFusion' " A("kernel", 3) A("stride", 2) A("pad", 1) A("fusion_type", 1)
#define POOL(t) "type: '" t "' " A("kernel", 2) A("stride", 2)
#define BN_ARGS A("is_test", 0) AF("epsilon", 1e-5) AF("momentum", 0.9)
#define BN AS("order", "NCHW") BN_ARGS
#define BN_NHWC AS("order", "NHWC") BN_ARGS
#define BN_TEST AS("order", "NCHW") A("is_test", 1) AF("epsilon", 1e-5)
#define BN_TEST_NHWC AS("order", "NHWC") A("is_test", 1) AF("epsilon", 1e-5)
#define LRN_ARGS A("size", 5) AF("alpha", 0.001) AF("beta", 0.75) AF("bias", 1.0)

/* Rows leave inf_at and the unused array slots to zero-initialisation on purpose: the
 * table reads as one case per row only without them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const gpu_case gpu_cases[] = {
    {"Add broadcast", "type: 'Add' " A("broadcast", 1) A("axis", 1),
     {{"A", 'T', 4, {2, 3, 4, 5}, -2, 2}, {"B", 'T', 2, {3, 4}, -2, 2}}, NULL,
     {"A", "B"}, {"C"}, GC_ALL, 2},
    {"Sub", "type: 'Sub'", {{"A", 'T', 2, {6, 7}, -2, 2}, {"B", 'T', 2, {6, 7}, -2, 2}},
     NULL, {"A", "B"}, {"C"}, GC_ALL, 2},
    {"Mul broadcast", "type: 'Mul' " A("broadcast", 1),
     {{"A", 'T', 3, {2, 3, 5}, -2, 2}, {"B", 'T', 1, {5}, -2, 2}}, NULL, {"A", "B"}, {"C"},
     GC_ALL, 2},
    {"Div", "type: 'Div'", {{"A", 'T', 2, {4, 9}, -2, 2}, {"B", 'T', 2, {4, 9}, 0.5, 2}},
     NULL, {"A", "B"}, {"C"}, GC_ALL, 2},
    {"Sum", "type: 'Sum'",
     {{"A", 'T', 2, {5, 6}, -1, 1}, {"B", 'T', 2, {5, 6}, -1, 1}, {"D", 'T', 2, {5, 6}, -1, 1}},
     NULL, {"A", "B", "D"}, {"Y"}, GC_ALL, 3},
    {"Scale", "type: 'Scale' " AF("scale", 0.37), {{"X", 'T', 2, {3, 11}, -4, 4}}, NULL,
     {"X"}, {"Y"}, GC_ALL, 1},
    {"SumReduceLike", "type: 'SumReduceLike' " A("axis", 1),
     {{"A", 'T', 4, {2, 3, 4, 5}, -1, 1}, {"B", 'T', 2, {3, 4}, -1, 1}}, NULL, {"A", "B"},
     {"C"}, GC_ALL, 10},
    {"Relu", "type: 'Relu'", {{"X", 'T', 3, {2, 5, 7}, -1, 1}}, NULL, {"X"}, {"Y"}, GC_ALL, 1},
    {"ReluGradient", "type: 'ReluGradient'",
     {{"X", 'T', 2, {4, 9}, -1, 1}, {"dY", 'T', 2, {4, 9}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Relu' }", {"Y", "dY"}, {"dX"}, GC_ALL, 1},
    /* The activations of unary_math.c (gpu/elementwise.cu); X spans both sides of each
     * kink (LeakyRelu's 0, Clip's bounds, HardSwish's -3 and 3). exp/tanh: k 4. */
    {"Sigmoid", "type: 'Sigmoid'", {{"X", 'T', 2, {3, 37}, -8, 8}}, NULL, {"X"}, {"Y"}, GC_ALL, 4},
    {"Tanh", "type: 'Tanh'", {{"X", 'T', 2, {3, 37}, -4, 4}}, NULL, {"X"}, {"Y"}, GC_ALL, 4},
    {"LeakyRelu", "type: 'LeakyRelu' " AF("alpha", 0.1), {{"X", 'T', 2, {3, 37}, -2, 2}}, NULL,
     {"X"}, {"X"}, GC_ALL, 1},
    {"Clip", "type: 'Clip' " AF("min", -0.5) AF("max", 0.75), {{"X", 'T', 2, {3, 37}, -2, 2}},
     NULL, {"X"}, {"Y"}, GC_ALL, 1},
    {"HardSigmoid", "type: 'HardSigmoid' " AF("alpha", 0.3) AF("beta", 0.4),
     {{"X", 'T', 2, {3, 37}, -4, 4}}, NULL, {"X"}, {"Y"}, GC_ALL, 2},
    {"HardSwish", "type: 'HardSwish'", {{"X", 'T', 2, {3, 37}, -5, 5}}, NULL, {"X"}, {"Y"},
     GC_ALL, 3},
    {"Erf", "type: 'Erf'", {{"X", 'T', 2, {3, 37}, -3, 3}}, NULL, {"X"}, {"Y"}, GC_ALL, 4},
    {"Sqrt", "type: 'Sqrt'", {{"X", 'T', 2, {3, 37}, 0, 9}}, NULL, {"X"}, {"X"}, GC_ALL, 2},
    {"Gelu", "type: 'Gelu'", {{"X", 'T', 2, {3, 37}, -6, 6}}, NULL, {"X"}, {"Y"}, GC_ALL, 4},
    {"Gelu fast", "type: 'Gelu' " A("fast_gelu", 1), {{"X", 'T', 2, {3, 37}, -6, 6}}, NULL,
     {"X"}, {"Y"}, GC_ALL, 4},
    {"SigmoidGradient", "type: 'SigmoidGradient'",
     {{"X", 'T', 2, {4, 9}, -4, 4}, {"dY", 'T', 2, {4, 9}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Sigmoid' }", {"Y", "dY"}, {"dX"}, GC_ALL, 3},
    {"TanhGradient", "type: 'TanhGradient'",
     {{"X", 'T', 2, {4, 9}, -2, 2}, {"dY", 'T', 2, {4, 9}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Tanh' }", {"Y", "dY"}, {"dX"}, GC_ALL, 3},
    {"ClipGradient", "type: 'ClipGradient' " AF("min", -0.5) AF("max", 0.75),
     {{"X", 'T', 2, {4, 9}, -2, 2}, {"dY", 'T', 2, {4, 9}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Clip' arg { name: 'min' f: -0.5 } "
     "arg { name: 'max' f: 0.75 } }", {"Y", "dY"}, {"dX"}, GC_ALL, 1},
    {"HardSwishGradient", "type: 'HardSwishGradient'",
     {{"X", 'T', 2, {4, 9}, -5, 5}, {"dY", 'T', 2, {4, 9}, -1, 1}}, NULL, {"X", "dY"}, {"dX"},
     GC_ALL, 3},
    {"GeluGradient", "type: 'GeluGradient'",
     {{"X", 'T', 2, {4, 9}, -6, 6}, {"dY", 'T', 2, {4, 9}, -1, 1}}, NULL, {"X", "dY"}, {"dX"},
     GC_ALL, 4},
    {"SqrtGradient", "type: 'SqrtGradient'",
     {{"X", 'T', 2, {4, 9}, 0.5, 4}, {"dY", 'T', 2, {4, 9}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Sqrt' }", {"Y", "dY"}, {"dX"}, GC_ALL, 3},
    /* Relu, ReluGradient, Sum and the FLOAT <-> FLOAT16/BFLOAT16 casts move 16-byte packs
     * (8 halves, 4 floats) and do the last n % 8 (% 4) elements one by one. 3 x 1001 x 1001
     * leaves 3 over (Relu in place puts +inf in the last); the largest (33.6M elements) has
     * more packs than the 16384 x 256 threads of the grid, so the grid-stride loop wraps in
     * FP16 and BF16 too; Sum of 10 chains two launches (8 terms per launch: FP16 and BF16
     * through the FP32 accumulator, FLOAT through Y); 64 is whole packs, 5 in the 16-bit
     * passes only a tail. Device buffers are 256-byte aligned, so the unaligned path (the
     * same code as the tail) is not reached here. */
    {"Relu wrapping grid", "type: 'Relu'", {{"X", 'T', 3, {3, 1025, 10923}, -1, 1}}, NULL,
     {"X"}, {"Y"}, GC_ALL, 1},
    {"Relu in place", "type: 'Relu'", {{"X", 'T', 3, {3, 1001, 1001}, -1, 1, 3006003}}, NULL,
     {"X"}, {"X"}, GC_ALL, 1},
    {"Relu 64", "type: 'Relu'", {{"X", 'T', 2, {8, 8}, -1, 1}}, NULL, {"X"}, {"Y"}, GC_ALL, 1},
    {"ReluGradient large", "type: 'ReluGradient'",
     {{"X", 'T', 3, {3, 1001, 1001}, -1, 1}, {"dY", 'T', 3, {3, 1001, 1001}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Relu' }", {"Y", "dY"}, {"dX"}, GC_ALL, 1},
    {"ReluGradient in place 5", "type: 'ReluGradient'",
     {{"X", 'T', 1, {5}, -1, 1}, {"dY", 'T', 1, {5}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Relu' }", {"Y", "dY"}, {"dY"}, GC_ALL, 1},
    {"Sum of 2 large", "type: 'Sum'",
     {{"A", 'T', 3, {3, 1001, 1001}, -1, 1}, {"B", 'T', 3, {3, 1001, 1001}, -1, 1}}, NULL,
     {"A", "B"}, {"Y"}, GC_ALL, 2},
    {"Sum of 3 large in place", "type: 'Sum'",
     {{"A", 'T', 3, {3, 1001, 1001}, -1, 1}, {"B", 'T', 3, {3, 1001, 1001}, -1, 1},
      {"D", 'T', 3, {3, 1001, 1001}, -1, 1}}, NULL, {"A", "B", "D"}, {"A"}, GC_ALL, 3},
    {"Sum of 10", "type: 'Sum'",
     {{"A", 'T', 2, {7, 1001}, -1, 1}, {"B", 'T', 2, {7, 1001}, -1, 1},
      {"D", 'T', 2, {7, 1001}, -1, 1}}, NULL,
     {"A", "B", "D", "A", "B", "D", "A", "B", "D", "B"}, {"Y"}, GC_ALL, 10},
    {"FloatToHalf large", "type: 'FloatToHalf'", {{"X", 'f', 3, {3, 1001, 1001}, -70000, 70000}},
     NULL, {"X"}, {"Y"}, GC_FP32, 1},
    {"HalfToFloat large", "type: 'HalfToFloat'", {{"X", 'T', 3, {3, 1001, 1001}, -60000, 60000}},
     NULL, {"X"}, {"Y"}, GC_FP16, 1},
    {"FloatToHalf", "type: 'FloatToHalf'", {{"X", 'f', 2, {7, 13}, -70000, 70000}}, NULL,
     {"X"}, {"Y"}, GC_FP32, 1},
    {"HalfToFloat", "type: 'HalfToFloat'", {{"X", 'T', 2, {7, 13}, -60000, 60000}}, NULL,
     {"X"}, {"Y"}, GC_FP16, 1},
    {"Cast to FLOAT16", "type: 'Cast' " A("to", 12), {{"X", 'f', 1, {50}, -3, 3}}, NULL,
     {"X"}, {"Y"}, GC_FP32, 1},
    {"Cast to FLOAT", "type: 'Cast' " A("to", 1), {{"X", 'T', 1, {50}, -3, 3}}, NULL, {"X"},
     {"Y"}, GC_FP16 | GC_BF16, 1},
    /* The casts of mixed precision with --bf16 (Cast to 20 and to 1), packed as the FP16
     * ones above; the large ones leave 3 over whole packs. FLOAT -> BFLOAT16 spans FLOAT's
     * range up to its top, which BFLOAT16's exponent still reaches: |x| > 3.3961e38 rounds
     * to inf, compared exactly. */
    {"Cast to BFLOAT16", "type: 'Cast' " A("to", 20), {{"X", 'f', 1, {50}, -3, 3}}, NULL,
     {"X"}, {"Y"}, GC_BF16, 1},
    {"Cast to BFLOAT16 large", "type: 'Cast' " A("to", 20),
     {{"X", 'f', 3, {3, 1001, 1001}, -3.4e38f, 3.4e38f}}, NULL, {"X"}, {"Y"}, GC_BF16, 1},
    {"Cast to FLOAT large", "type: 'Cast' " A("to", 1),
     {{"X", 'T', 3, {3, 1001, 1001}, -3e38f, 3e38f}}, NULL, {"X"}, {"Y"}, GC_BF16, 1},
    {"Cast to INT32", "type: 'Cast' " A("to", 2), {{"X", 'f', 1, {50}, -300, 300}}, NULL,
     {"X"}, {"Y"}, GC_FP32, 1},
    {"Copy", "type: 'Copy'", {{"X", 'T', 2, {3, 17}, -5, 5}}, NULL, {"X"}, {"Y"}, GC_ALL, 1},
    {"ConstantFill", "type: 'ConstantFill' arg { name: 'shape' ints: 3 ints: 5 } "
     AF("value", 2.5), {{NULL}}, NULL, {NULL}, {"Y"}, GC_FP32, 1},
    {"MomentumSGDUpdate", "type: 'MomentumSGDUpdate' " AF("momentum", 0.9),
     {{"g", 'f', 1, {40}, -1, 1}, {"m", 'f', 1, {40}, -1, 1}, {"lr", 'f', 1, {1}, 0.01, 0.1},
      {"p", 'f', 1, {40}, -1, 1}}, NULL, {"g", "m", "lr", "p"}, {"g", "m", "p"}, GC_FP32, 3},
    {"MomentumSGDUpdate nesterov", "type: 'MomentumSGDUpdate' " AF("momentum", 0.9)
     A("nesterov", 1),
     {{"g", 'f', 1, {40}, -1, 1}, {"m", 'f', 1, {40}, -1, 1}, {"lr", 'f', 1, {1}, 0.01, 0.1},
      {"p", 'f', 1, {40}, -1, 1}, {"skip", 'f', 1, {1}, 0, 0}}, NULL,
     {"g", "m", "lr", "p", "skip"}, {"g", "m", "p"}, GC_FP32, 4},
    {"Adam", "type: 'Adam'",
     {{"p", 'f', 1, {40}, -1, 1}, {"m1", 'f', 1, {40}, -1, 1}, {"m2", 'f', 1, {40}, 0, 1},
      {"g", 'f', 1, {40}, -1, 1}, {"lr", 'f', 1, {1}, 0.001, 0.01}, {"it", 'l', 1, {1}, 7, 7}},
     NULL, {"p", "m1", "m2", "g", "lr", "it"}, {"p", "m1", "m2"}, GC_FP32, 12},
    /* Issue 25: an embedding lookup and its scatter-add (FP32 atomics: k bounds the
     * repeats a table row sums), Where with numpy broadcast and its deterministic
     * gradient; the BOOL condition is cast from drawn integers by the prep net. */
    {"Gather embedding", "type: 'Gather'",
     {{"E", 'T', 2, {11, 5}, -2, 2}, {"ids", 'i', 2, {3, 7}, 0, 11}}, NULL, {"E", "ids"},
     {"Y"}, GC_ALL, 1},
    {"Gather axis 1 wrap", "type: 'Gather' " A("axis", 1) A("wrap_indices", 1),
     {{"D", 'T', 3, {2, 6, 3}, -2, 2}, {"ids", 'l', 1, {9}, -6, 6}}, NULL, {"D", "ids"},
     {"Y"}, GC_ALL, 1},
    {"GatherGradient", "type: 'GatherGradient'",
     {{"E", 'T', 2, {11, 5}, 0, 0}, {"ids", 'i', 2, {3, 7}, 0, 11},
      {"dY", 'T', 3, {3, 7, 5}, -1, 1}}, NULL, {"E", "ids", "dY"}, {"dE"}, GC_ALL, 21},
    {"Where broadcast", "type: 'Where'",
     {{"ci", 'i', 2, {3, 1}, 0, 2}, {"X", 'T', 3, {2, 3, 4}, -2, 2}, {"Y", 'T', 1, {4}, -2, 2}},
     "op { input: 'ci' output: 'C' type: 'Cast' arg { name: 'to' i: 5 } }", {"C", "X", "Y"},
     {"Z"}, GC_ALL, 1},
    {"WhereGradient broadcast", "type: 'WhereGradient'",
     {{"ci", 'i', 3, {2, 3, 4}, 0, 2}, {"X", 'T', 2, {3, 1}, 0, 0}, {"Y", 'T', 1, {4}, 0, 0},
      {"dZ", 'T', 3, {2, 3, 4}, -1, 1}},
     "op { input: 'ci' output: 'C' type: 'Cast' arg { name: 'to' i: 5 } }",
     {"C", "X", "Y", "dZ"}, {"dX", "dY"}, GC_ALL, 8},
    {"AdamW", "type: 'AdamW' " AF("weight_decay", 0.1),
     {{"p", 'f', 1, {40}, -1, 1}, {"m1", 'f', 1, {40}, -1, 1}, {"m2", 'f', 1, {40}, 0, 1},
      {"g", 'f', 1, {40}, -1, 1}, {"lr", 'f', 1, {1}, -0.01, -0.001}, {"it", 'l', 1, {1}, 7, 7},
      {"skip", 'f', 1, {1}, 0, 0}},
     NULL, {"p", "m1", "m2", "g", "lr", "it", "skip"}, {"p", "m1", "m2"}, GC_FP32, 12},
    /* The multi-tensor updates: one launch over every tensor, a tensor of 3 chunks
     * (DMK_MT_CHUNK = 16384) beside a small or an empty one; skip 0 and 1. */
    {"MultiMomentumSGDUpdate", "type: 'MultiMomentumSGDUpdate' " AF("momentum", 0.9),
     {{"g1", 'f', 2, {2, 20000}, -1, 1}, {"g2", 'f', 1, {7}, -1, 1},
      {"m1", 'f', 2, {2, 20000}, -1, 1}, {"m2", 'f', 1, {7}, -1, 1},
      {"lr", 'f', 1, {1}, 0.01, 0.1}, {"p1", 'f', 2, {2, 20000}, -1, 1},
      {"p2", 'f', 1, {7}, -1, 1}, {"skip", 'f', 1, {1}, 0, 0}}, NULL,
     {"g1", "g2", "m1", "m2", "lr", "p1", "p2", "skip"}, {"g1", "g2", "m1", "m2", "p1", "p2"},
     GC_FP32, 3},
    {"MultiMomentumSGDUpdate nesterov empty", "type: 'MultiMomentumSGDUpdate' "
     AF("momentum", 0.9) A("nesterov", 1),
     {{"g1", 'f', 1, {0}, -1, 1}, {"g2", 'f', 1, {16385}, -1, 1},
      {"m1", 'f', 1, {0}, -1, 1}, {"m2", 'f', 1, {16385}, -1, 1},
      {"lr", 'f', 1, {1}, 0.01, 0.1}, {"p1", 'f', 1, {0}, -1, 1},
      {"p2", 'f', 1, {16385}, -1, 1}}, NULL,
     {"g1", "g2", "m1", "m2", "lr", "p1", "p2"}, {"g1", "g2", "m1", "m2", "p1", "p2"},
     GC_FP32, 4},
    {"MultiMomentumSGDUpdate skipped", "type: 'MultiMomentumSGDUpdate' " AF("momentum", 0.9),
     {{"g1", 'f', 1, {300}, -1, 1}, {"g2", 'f', 1, {7}, -1, 1}, {"m1", 'f', 1, {300}, -1, 1},
      {"m2", 'f', 1, {7}, -1, 1}, {"lr", 'f', 1, {1}, 0.01, 0.1}, {"p1", 'f', 1, {300}, -1, 1},
      {"p2", 'f', 1, {7}, -1, 1}, {"skip", 'f', 1, {1}, 1, 1}}, NULL,
     {"g1", "g2", "m1", "m2", "lr", "p1", "p2", "skip"}, {"g1", "g2", "m1", "m2", "p1", "n2"},
     GC_FP32, 1},
    {"MultiAdam", "type: 'MultiAdam' " AF("beta1", 0.8) AF("epsilon", 1e-6),
     {{"p", 'f', 2, {3, 20000}, -1, 1}, {"m1", 'f', 2, {3, 20000}, -1, 1},
      {"m2", 'f', 2, {3, 20000}, 0, 1}, {"g", 'f', 2, {3, 20000}, -1, 1},
      {"lr", 'f', 1, {1}, 0.001, 0.01}, {"it", 'l', 1, {1}, 7, 7}}, NULL,
     {"p", "m1", "m2", "g", "lr", "it"}, {"p", "m1", "m2"}, GC_FP32, 12},
    {"MultiWeightedSum", "type: 'MultiWeightedSum'",
     {{"x1", 'f', 2, {2, 20000}, -1, 1}, {"x2", 'f', 1, {0}, -1, 1}, {"x3", 'f', 1, {9}, -1, 1},
      {"w0", 'f', 1, {1}, 1, 1}, {"z1", 'f', 2, {2, 20000}, -1, 1}, {"z2", 'f', 1, {0}, -1, 1},
      {"z3", 'f', 1, {9}, -1, 1}, {"w1", 'f', 1, {1}, -0.1, 0.1}}, NULL,
     {"x1", "x2", "x3", "w0", "z1", "z2", "z3", "w1"}, {"x1", "x2", "x3"}, GC_FP32, 2},
    {"UnscaleAndCheck chunks", "type: 'UnscaleAndCheck'",
     {{"S", 'f', 1, {1}, 512, 4096}, {"g1", 'T', 2, {2, 20000}, -100, 100, 30001},
      {"g2", 'f', 1, {0}, -100, 100}, {"g3", 'f', 1, {5}, -100, 100}}, NULL,
     {"S", "g1", "g2", "g3"}, {"g1", "g2", "g3", "found_inf"}, GC_BOTH, 1},
    {"WeightedSum", "type: 'WeightedSum'",
     {{"X0", 'f', 2, {4, 8}, -1, 1}, {"w0", 'f', 1, {1}, 0.5, 1}, {"X1", 'f', 2, {4, 8}, -1, 1},
      {"w1", 'f', 1, {1}, -1, 1}}, NULL, {"X0", "w0", "X1", "w1"}, {"Y"}, GC_FP32, 2},
    {"UnscaleAndCheck", "type: 'UnscaleAndCheck'",
     {{"S", 'f', 1, {1}, 512, 4096}, {"g1", 'T', 1, {30}, -100, 100},
      {"g2", 'f', 2, {3, 7}, -100, 100}}, NULL, {"S", "g1", "g2"}, {"g1", "g2", "found_inf"},
     GC_BOTH, 1},
    {"UnscaleAndCheck inf", "type: 'UnscaleAndCheck'",
     {{"S", 'f', 1, {1}, 512, 4096}, {"g1", 'T', 1, {30}, -100, 100},
      {"g2", 'T', 2, {3, 7}, -100, 100, 9}}, NULL, {"S", "g1", "g2"},
     {"g1", "g2", "found_inf"}, GC_BOTH, 1},
    {"UpdateLossScale overflow", "type: 'UpdateLossScale' " A("growth_interval", 6),
     {{"S", 'f', 1, {1}, 65536, 65536}, {"inf", 'f', 1, {1}, 1, 1}, {"good", 'l', 1, {1}, 5, 5},
      {"skipped", 'l', 1, {1}, 2, 2}}, NULL, {"S", "inf", "good", "skipped"},
     {"S", "good", "skipped"}, GC_FP32, 1},
    {"UpdateLossScale growth", "type: 'UpdateLossScale' " A("growth_interval", 6),
     {{"S", 'f', 1, {1}, 65536, 65536}, {"inf", 'f', 1, {1}, 0, 0}, {"good", 'l', 1, {1}, 5, 5},
      {"skipped", 'l', 1, {1}, 2, 2}}, NULL, {"S", "inf", "good", "skipped"},
     {"S", "good", "skipped"}, GC_FP32, 1},
    {"SoftmaxWithLoss", "type: 'SoftmaxWithLoss'",
     {{"X", 'T', 2, {6, 10}, -3, 3}, {"label", 'i', 1, {6}, 0, 10}}, NULL, {"X", "label"},
     {"P", "loss"}, GC_BOTH, 24, GC_RESHAPE},
    {"SoftmaxWithLoss tokens", "type: 'SoftmaxWithLoss' " A("axis", 2),
     {{"X", 'T', 3, {2, 3, 7}, -3, 3}, {"label", 'i', 2, {2, 3}, 0, 7}}, NULL, {"X", "label"},
     {"P", "loss"}, GC_BOTH, 24},
    {"SoftmaxWithLossGradient", "type: 'SoftmaxWithLossGradient'",
     {{"X", 'T', 2, {6, 10}, -3, 3}, {"label", 'i', 1, {6}, 0, 10}, {"dL", 'f', 0, {0}, 0.5, 2}},
     "op { input: 'X' input: 'label' output: 'P' output: 'loss' type: 'SoftmaxWithLoss' }",
     {"X", "label", "P", "dL"}, {"dX"}, GC_BOTH, 24, GC_RESHAPE},
    {"LabelCrossEntropy", "type: 'LabelCrossEntropy'",
     {{"X", 'f', 2, {6, 10}, 0.05f, 1}, {"label", 'i', 1, {6}, 0, 10}}, NULL, {"X", "label"},
     {"Y"}, GC_FP32, 8},
    {"LabelCrossEntropyGradient", "type: 'LabelCrossEntropyGradient'",
     {{"X", 'f', 2, {6, 10}, 0.05f, 1}, {"label", 'i', 1, {6}, 0, 10},
      {"dY", 'f', 1, {6}, -1, 1}}, NULL, {"X", "label", "dY"}, {"dX"}, GC_FP32, 2},
    {"AveragedLoss", "type: 'AveragedLoss'", {{"X", 'f', 1, {37}, -1, 1}}, NULL, {"X"},
     {"Y"}, GC_FP32, 37},
    {"AveragedLossGradient", "type: 'AveragedLossGradient'",
     {{"X", 'f', 1, {37}, -1, 1}, {"dY", 'f', 0, {0}, 0.5, 2}}, NULL, {"X", "dY"}, {"dX"},
     GC_FP32, 2},
    {"Accuracy", "type: 'Accuracy'",
     {{"P", 'f', 2, {16, 10}, 0, 1}, {"label", 'i', 1, {16}, 0, 10}}, NULL, {"P", "label"},
     {"acc"}, GC_FP32, 16},
    {"Conv NCHW", CONV_NCHW,
     {{"X", 'T', 4, {2, 3, 7, 7}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1},
      {"b", 'T', 1, {4}, -1, 1}}, NULL, {"X", "W", "b"}, {"Y"}, GC_ALL, 28, GC_RESHAPE},
    {"Conv NHWC", CONV_NHWC,
     {{"X", 'T', 4, {2, 7, 7, 3}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1},
      {"b", 'T', 1, {4}, -1, 1}}, NULL, {"X", "W", "b"}, {"Y"}, GC_ALL, 28, GC_RESHAPE},
    {"Conv group 2", CONV_GRP,
     {{"X", 'T', 4, {2, 4, 6, 6}, -1, 1}, {"W", 'T', 4, {6, 2, 3, 3}, -1, 1},
      {"b", 'T', 1, {6}, -1, 1}}, NULL, {"X", "W", "b"}, {"Y"}, GC_ALL, 19, GC_RESHAPE},
    {"ConvGradient NCHW", "type: 'ConvGradient' " A("kernel", 3) A("stride", 2) A("pad", 1),
     {{"X", 'T', 4, {2, 3, 7, 7}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1},
      {"dY", 'T', 4, {2, 4, 4, 4}, -1, 1}}, NULL, {"X", "W", "dY"}, {"dW", "db", "dX"},
     GC_ALL, 40, GC_RESHAPE},
    {"ConvGradient NHWC",
     "type: 'ConvGradient' " A("kernel", 3) A("stride", 2) A("pad", 1) AS("order", "NHWC"),
     {{"X", 'T', 4, {2, 7, 7, 3}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1},
      {"dY", 'T', 4, {2, 4, 4, 4}, -1, 1}}, NULL, {"X", "W", "dY"}, {"dW", "db", "dX"},
     GC_ALL, 40, GC_RESHAPE},
    {"ConvGradient group 2", "type: 'ConvGradient' " A("kernel", 3) A("pad", 1) A("group", 2),
     {{"X", 'T', 4, {2, 4, 6, 6}, -1, 1}, {"W", 'T', 4, {6, 2, 3, 3}, -1, 1},
      {"dY", 'T', 4, {2, 6, 6, 6}, -1, 1}}, NULL, {"X", "W", "dY"}, {"dW", "db", "dX"},
     GC_ALL, 80, GC_RESHAPE},
    /* conv_fusion_cudnn.c: the training fusion's Conv + Relu (cuDNN's fused forward; FP32
     * bias with 16-bit data and BF16 through Conv + relu) and its gradient (dY masked by
     * the CPU forward's Y, so the mask is the CPU's). */
    {"ConvFusion relu NCHW", CONV_FUSION,
     {{"X", 'T', 4, {2, 3, 7, 7}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1},
      {"b", 'T', 1, {4}, -1, 1}}, NULL, {"X", "W", "b"}, {"Y"}, GC_ALL, 28, GC_RESHAPE},
    {"ConvFusion relu NHWC no bias", CONV_FUSION AS("order", "NHWC"),
     {{"X", 'T', 4, {2, 7, 7, 3}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1}}, NULL,
     {"X", "W"}, {"Y"}, GC_ALL, 28, GC_RESHAPE},
    {"ConvFusion relu FP32 bias", CONV_FUSION,
     {{"X", 'T', 4, {2, 3, 7, 7}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1},
      {"b", 'f', 1, {4}, -1, 1}}, NULL, {"X", "W", "b"}, {"Y"}, GC_ALL, 28},
    {"ConvReluGradient", "type: 'ConvReluGradient' " A("kernel", 3) A("stride", 2) A("pad", 1)
     A("fusion_type", 1),
     {{"X", 'T', 4, {2, 3, 7, 7}, -1, 1}, {"W", 'T', 4, {4, 3, 3, 3}, -1, 1},
      {"b", 'T', 1, {4}, -1, 1}, {"dY", 'T', 4, {2, 4, 4, 4}, -1, 1}},
     "op { input: ['X', 'W', 'b'] output: 'Y' " CONV_FUSION "}", {"X", "W", "dY", "Y"},
     {"dW", "db", "dX"}, GC_ALL, 40, GC_RESHAPE},
    {"MaxPool", POOL("MaxPool"), {{"X", 'T', 4, {2, 3, 6, 6}, -1, 1}}, NULL, {"X"}, {"Y"},
     GC_ALL, 1, GC_RESHAPE},
    {"AveragePool", POOL("AveragePool"), {{"X", 'T', 4, {2, 3, 6, 6}, -1, 1}}, NULL, {"X"},
     {"Y"}, GC_ALL, 5, GC_RESHAPE},
    {"MaxPoolGradient", POOL("MaxPoolGradient"),
     {{"X", 'T', 4, {2, 3, 6, 6}, -1, 1}, {"dY", 'T', 4, {2, 3, 3, 3}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'MaxPool' " A("kernel", 2) A("stride", 2) "}",
     {"X", "Y", "dY"}, {"dX"}, GC_ALL, 1, GC_RESHAPE},
    {"AveragePoolGradient", POOL("AveragePoolGradient"),
     {{"X", 'T', 4, {2, 3, 6, 6}, -1, 1}, {"dY", 'T', 4, {2, 3, 3, 3}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'AveragePool' " A("kernel", 2) A("stride", 2) "}",
     {"X", "Y", "dY"}, {"dX"}, GC_ALL, 5, GC_RESHAPE},
    {"SpatialBN training", "type: 'SpatialBN' " BN,
     {{"X", 'T', 4, {4, 3, 5, 5}, -2, 2}, {"scale", 'f', 1, {3}, 0.5, 2},
      {"bias", 'f', 1, {3}, -1, 1}, {"mean", 'f', 1, {3}, -1, 1}, {"var", 'f', 1, {3}, 0.5, 2}},
     NULL, {"X", "scale", "bias", "mean", "var"}, {"Y", "mean", "var", "sm", "siv"}, GC_ALL,
     110, GC_RESHAPE},
    {"SpatialBNGradient", "type: 'SpatialBNGradient' " BN,
     {{"X", 'T', 4, {4, 3, 5, 5}, -2, 2}, {"scale", 'f', 1, {3}, 0.5, 2},
      {"bias", 'f', 1, {3}, -1, 1}, {"mean", 'f', 1, {3}, -1, 1}, {"var", 'f', 1, {3}, 0.5, 2},
      {"dY", 'T', 4, {4, 3, 5, 5}, -1, 1}},
     "op { input: 'X' input: 'scale' input: 'bias' input: 'mean' input: 'var' output: 'Y' "
     "output: 'mean' output: 'var' output: 'sm' output: 'siv' type: 'SpatialBN' " BN "}",
     {"X", "scale", "dY", "sm", "siv"}, {"dX", "dscale", "dbias"}, GC_ALL, 210, GC_RESHAPE},
    /* NHWC takes cuDNN's persistent batch norm (batchnorm_cudnn.c); 8 channels, the
     * multiple its NHWC kernels want */
    {"SpatialBN training NHWC", "type: 'SpatialBN' " BN_NHWC,
     {{"X", 'T', 4, {4, 5, 5, 8}, -2, 2}, {"scale", 'f', 1, {8}, 0.5, 2},
      {"bias", 'f', 1, {8}, -1, 1}, {"mean", 'f', 1, {8}, -1, 1}, {"var", 'f', 1, {8}, 0.5, 2}},
     NULL, {"X", "scale", "bias", "mean", "var"}, {"Y", "mean", "var", "sm", "siv"}, GC_ALL,
     110, GC_RESHAPE},
    {"SpatialBNGradient NHWC", "type: 'SpatialBNGradient' " BN_NHWC,
     {{"X", 'T', 4, {4, 5, 5, 8}, -2, 2}, {"scale", 'f', 1, {8}, 0.5, 2},
      {"bias", 'f', 1, {8}, -1, 1}, {"mean", 'f', 1, {8}, -1, 1}, {"var", 'f', 1, {8}, 0.5, 2},
      {"dY", 'T', 4, {4, 5, 5, 8}, -1, 1}},
     "op { input: 'X' input: 'scale' input: 'bias' input: 'mean' input: 'var' output: 'Y' "
     "output: 'mean' output: 'var' output: 'sm' output: 'siv' type: 'SpatialBN' " BN_NHWC "}",
     {"X", "scale", "dY", "sm", "siv"}, {"dX", "dscale", "dbias"}, GC_ALL, 210, GC_RESHAPE},
    /* C = 3, not a multiple of 8: persistent mode must still be right (or not taken) */
    {"SpatialBNGradient NHWC C3", "type: 'SpatialBNGradient' " BN_NHWC,
     {{"X", 'T', 4, {4, 5, 5, 3}, -2, 2}, {"scale", 'f', 1, {3}, 0.5, 2},
      {"bias", 'f', 1, {3}, -1, 1}, {"mean", 'f', 1, {3}, -1, 1}, {"var", 'f', 1, {3}, 0.5, 2},
      {"dY", 'T', 4, {4, 5, 5, 3}, -1, 1}},
     "op { input: 'X' input: 'scale' input: 'bias' input: 'mean' input: 'var' output: 'Y' "
     "output: 'mean' output: 'var' output: 'sm' output: 'siv' type: 'SpatialBN' " BN_NHWC "}",
     {"X", "scale", "dY", "sm", "siv"}, {"dX", "dscale", "dbias"}, GC_ALL, 210, GC_RESHAPE},
    /* The fused training ops (operators/bn_fusion.c) without their reserve slot: the
     * unfused sequence on the GPU (batchnorm_cudnn.c's fallback), NCHW and NHWC; the gradients
     * read Y and the statistics of the CPU's forward */
#define BNF_FEEDS(C, D0, D1, D2, D3)                                                    \
  {{"X", 'T', 4, {D0, D1, D2, D3}, -2, 2}, {"scale", 'f', 1, {C}, 0.5, 2},                 \
   {"bias", 'f', 1, {C}, -1, 1}, {"mean", 'f', 1, {C}, -1, 1}, {"var", 'f', 1, {C}, 0.5, 2}, \
   {"Z", 'T', 4, {D0, D1, D2, D3}, -1, 1}, {"dY", 'T', 4, {D0, D1, D2, D3}, -1, 1}}
#define BNF_PREP(TYPE, Z, ARGS)                                                          \
  "op { input: 'X' input: 'scale' input: 'bias' input: 'mean' input: 'var' " Z           \
  "output: 'Y' output: 'mean' output: 'var' output: 'sm' output: 'siv' type: '" TYPE "' " \
  ARGS "}"
#define BNF_CASES(SFX, ARGS, C, D0, D1, D2, D3)                                          \
  {"SpatialBNRelu" SFX, "type: 'SpatialBNRelu' " ARGS, BNF_FEEDS(C, D0, D1, D2, D3), NULL, \
   {"X", "scale", "bias", "mean", "var"}, {"Y", "mean", "var", "sm", "siv"}, GC_ALL, 110, \
   GC_RESHAPE},                                                                          \
  {"SpatialBNAddRelu" SFX, "type: 'SpatialBNAddRelu' " ARGS,                             \
   BNF_FEEDS(C, D0, D1, D2, D3), NULL, {"X", "scale", "bias", "mean", "var", "Z"},       \
   {"Y", "mean", "var", "sm", "siv"}, GC_ALL, 110, GC_RESHAPE},                          \
  {"SpatialBNReluGradient" SFX, "type: 'SpatialBNReluGradient' " ARGS,                   \
   BNF_FEEDS(C, D0, D1, D2, D3), BNF_PREP("SpatialBNRelu", "", ARGS),                    \
   {"X", "scale", "dY", "sm", "siv", "Y", "bias"}, {"dX", "dscale", "dbias"}, GC_ALL, 210, \
   GC_RESHAPE},                                                                          \
  {"SpatialBNAddReluGradient" SFX, "type: 'SpatialBNAddReluGradient' " ARGS,             \
   BNF_FEEDS(C, D0, D1, D2, D3), BNF_PREP("SpatialBNAddRelu", "input: 'Z' ", ARGS),      \
   {"X", "scale", "dY", "sm", "siv", "Y", "bias"}, {"dX", "dscale", "dbias", "dZ"}, GC_ALL, \
   210, GC_RESHAPE}
    BNF_CASES("", BN, 3, 4, 3, 5, 5),
    BNF_CASES(" NHWC", BN_NHWC, 8, 4, 5, 5, 8),
    /* Inference: Y from the running statistics, which stay inputs only */
    {"SpatialBN is_test", "type: 'SpatialBN' " BN_TEST,
     {{"X", 'T', 4, {2, 3, 5, 5}, -2, 2}, {"scale", 'f', 1, {3}, 0.5, 2},
      {"bias", 'f', 1, {3}, -1, 1}, {"mean", 'f', 1, {3}, -1, 1}, {"var", 'f', 1, {3}, 0.5, 2}},
     NULL, {"X", "scale", "bias", "mean", "var"}, {"Y"}, GC_ALL, 4, GC_RESHAPE},
    {"SpatialBN is_test NHWC", "type: 'SpatialBN' " BN_TEST_NHWC,
     {{"X", 'T', 4, {2, 5, 5, 8}, -2, 2}, {"scale", 'f', 1, {8}, 0.5, 2},
      {"bias", 'f', 1, {8}, -1, 1}, {"mean", 'f', 1, {8}, -1, 1}, {"var", 'f', 1, {8}, 0.5, 2}},
     NULL, {"X", "scale", "bias", "mean", "var"}, {"Y"}, GC_ALL, 4, GC_RESHAPE},
    {"Softmax", "type: 'Softmax'", {{"X", 'T', 2, {5, 12}, -4, 4}}, NULL, {"X"}, {"Y"},
     GC_ALL, 24, GC_RESHAPE},
    {"Softmax axis 2", "type: 'Softmax' " A("axis", 2), {{"X", 'T', 3, {3, 4, 10}, -4, 4}},
     NULL, {"X"}, {"Y"}, GC_ALL, 22, GC_RESHAPE},
    {"SoftmaxGradient", "type: 'SoftmaxGradient'",
     {{"X", 'T', 2, {5, 12}, -4, 4}, {"dY", 'T', 2, {5, 12}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'Softmax' }", {"Y", "dY"}, {"dX"}, GC_ALL, 24,
     GC_RESHAPE},
    {"LRN", "type: 'LRN' " LRN_ARGS, {{"X", 'T', 4, {2, 7, 3, 3}, -2, 2}}, NULL, {"X"},
     {"Y", "scale"}, GC_BOTH, 16, GC_RESHAPE},
    {"LRNGradient", "type: 'LRNGradient' " LRN_ARGS,
     {{"X", 'T', 4, {2, 7, 3, 3}, -2, 2}, {"dY", 'T', 4, {2, 7, 3, 3}, -1, 1}},
     "op { input: 'X' output: 'Y' output: 'scale' type: 'LRN' " LRN_ARGS "}",
     {"X", "Y", "dY", "scale"}, {"dX"}, GC_BOTH, 24, GC_RESHAPE},
    {"FC", "type: 'FC'",
     {{"X", 'T', 2, {8, 33}, -1, 1}, {"W", 'T', 2, {5, 33}, -1, 1}, {"b", 'T', 1, {5}, -1, 1}},
     NULL, {"X", "W", "b"}, {"Y"}, GC_ALL, 34},
    {"FCGradient", "type: 'FCGradient'",
     {{"X", 'T', 2, {8, 33}, -1, 1}, {"W", 'T', 2, {5, 33}, -1, 1}, {"dY", 'T', 2, {8, 5}, -1, 1}},
     NULL, {"X", "W", "dY"}, {"dW", "db", "dX"}, GC_ALL, 10},
    {"FCFusion", "type: 'FCFusion' " A("fusion_type", 1),
     {{"X", 'T', 2, {8, 33}, -1, 1}, {"W", 'T', 2, {5, 33}, -1, 1}, {"b", 'T', 1, {5}, -1, 1}},
     NULL, {"X", "W", "b"}, {"Y"}, GC_ALL, 34},
    {"FCReluGradient", "type: 'FCReluGradient' " A("fusion_type", 1),
     {{"X", 'T', 2, {8, 33}, -1, 1}, {"W", 'T', 2, {5, 33}, -1, 1}, {"b", 'T', 1, {5}, -1, 1},
      {"dY", 'T', 2, {8, 5}, -1, 1}},
     "op { input: ['X', 'W', 'b'] output: 'Y' type: 'FCFusion' " A("fusion_type", 1) "}",
     {"X", "W", "dY", "Y"}, {"dW", "db", "dX"}, GC_ALL, 10},
    /* gpu/batch_matmul_cublas.c: one strided-batched call (equal batch dims, a whole
     * operand broadcast) or one call per product (other broadcasts); the gradients sum
     * a broadcast matrix's products in FP32 (k: N or M times the products reading it). */
    {"BatchMatMul", "type: 'BatchMatMul'",
     {{"A", 'T', 4, {2, 3, 5, 33}, -1, 1}, {"B", 'T', 4, {2, 3, 33, 6}, -1, 1}}, NULL,
     {"A", "B"}, {"Y"}, GC_ALL, 34, GC_RESHAPE},
    {"BatchMatMul broadcast A", "type: 'BatchMatMul' " A("broadcast", 1) A("trans_b", 1),
     {{"A", 'T', 2, {5, 33}, -1, 1}, {"B", 'T', 3, {3, 6, 33}, -1, 1}}, NULL, {"A", "B"},
     {"Y"}, GC_ALL, 34},
    {"BatchMatMul broadcast both", "type: 'BatchMatMul' " A("broadcast", 1) A("trans_a", 1),
     {{"A", 'T', 4, {2, 1, 33, 5}, -1, 1}, {"B", 'T', 3, {3, 33, 6}, -1, 1}}, NULL,
     {"A", "B"}, {"Y"}, GC_ALL, 34, GC_RESHAPE},
    {"BatchMatMulGradient", "type: 'BatchMatMulGradient' " A("trans_a", 1),
     {{"A", 'T', 3, {2, 8, 5}, -1, 1}, {"B", 'T', 3, {2, 8, 6}, -1, 1},
      {"dY", 'T', 3, {2, 5, 6}, -1, 1}}, NULL, {"A", "B", "dY"}, {"dA", "dB"}, GC_ALL, 8,
     GC_RESHAPE},
    {"BatchMatMulGradient broadcast", "type: 'BatchMatMulGradient' " A("broadcast", 1)
     A("trans_b", 1),
     {{"A", 'T', 4, {2, 1, 5, 8}, -1, 1}, {"B", 'T', 3, {3, 6, 8}, -1, 1},
      {"dY", 'T', 4, {2, 3, 5, 6}, -1, 1}}, NULL, {"A", "B", "dY"}, {"dA", "dB"}, GC_ALL, 20,
     GC_RESHAPE},
    {"MatMul", "type: 'MatMul' " A("trans_b", 1),
     {{"A", 'T', 2, {6, 33}, -1, 1}, {"B", 'T', 2, {7, 33}, -1, 1}}, NULL, {"A", "B"}, {"Y"},
     GC_ALL, 34},
    {"MatMulGradient", "type: 'MatMulGradient'",
     {{"A", 'T', 3, {2, 3, 8}, -1, 1}, {"B", 'T', 2, {24, 5}, -1, 1},
      {"dY", 'T', 2, {2, 5}, -1, 1}}, NULL, {"A", "B", "dY"}, {"dA", "dB"}, GC_ALL, 6},
    /* gpu/optimizer.c, tensor_ops.c, dropout.c: the step counter and rate, shape ops,
     * Concat/Split/Transpose, Dropout. Copies and views are exact; the rate agrees to
     * FLOAT rounding. */
    {"Iter", "type: 'Iter'", {{"it", 'l', 1, {1}, 41, 41}}, NULL, {"it"}, {"it"}, GC_FP32, 1},
    {"Iter skip", "type: 'Iter'", {{"it", 'l', 1, {1}, 41, 41}, {"skip", 'f', 1, {1}, 1, 1}},
     NULL, {"it", "skip"}, {"it"}, GC_FP32, 1},
    {"Iter no skip", "type: 'Iter'",
     {{"it", 'l', 1, {1}, 41, 41}, {"skip", 'f', 1, {1}, 0, 0}}, NULL, {"it", "skip"}, {"it"},
     GC_FP32, 1},
    {"Iter no input", "type: 'Iter'", {{NULL}}, NULL, {NULL}, {"it"}, GC_FP32, 1},
    {"LearningRate fixed", "type: 'LearningRate' " AF("base_lr", -0.1),
     {{"it", 'l', 1, {1}, 37, 37}}, NULL, {"it"}, {"lr"}, GC_FP32, 1},
    {"LearningRate step", "type: 'LearningRate' " AF("base_lr", 0.1) AS("policy", "step")
     A("stepsize", 10) AF("gamma", 0.5), {{"it", 'l', 1, {1}, 37, 37}}, NULL, {"it"}, {"lr"},
     GC_FP32, 1},
    {"LearningRate exp", "type: 'LearningRate' " AF("base_lr", 0.1) AS("policy", "exp")
     AF("gamma", 0.99), {{"it", 'l', 1, {1}, 37, 37}}, NULL, {"it"}, {"lr"}, GC_FP32, 1},
    {"LearningRate inv", "type: 'LearningRate' " AF("base_lr", 0.1) AS("policy", "inv")
     AF("gamma", 0.0001) AF("power", 0.75), {{"it", 'l', 1, {1}, 1237, 1237}}, NULL, {"it"},
     {"lr"}, GC_FP32, 1},
    {"LearningRate poly", "type: 'LearningRate' " AF("base_lr", 0.1) AS("policy", "poly")
     A("max_iter", 100) AF("power", 0.9), {{"it", 'l', 1, {1}, 37, 37}}, NULL, {"it"}, {"lr"},
     GC_FP32, 1},
    {"LearningRate poly past max_iter", "type: 'LearningRate' " AF("base_lr", 0.1)
     AS("policy", "poly") A("max_iter", 100) AF("power", 0.9), {{"it", 'l', 1, {1}, 150, 150}},
     NULL, {"it"}, {"lr"}, GC_FP32, 1},
    {"LearningRate step warmup", "type: 'LearningRate' " AF("base_lr", 0.1) AS("policy", "step")
     A("stepsize", 10) AF("gamma", 0.5) A("warmup_iter", 100) AF("warmup_start", 0.1),
     {{"it", 'l', 1, {1}, 37, 37}}, NULL, {"it"}, {"lr"}, GC_FP32, 1},
    {"Reshape", "type: 'Reshape' arg { name: 'shape' ints: 0 ints: -1 }",
     {{"X", 'T', 3, {2, 3, 4}, -2, 2}}, NULL, {"X"}, {"Y", "old"}, GC_ALL, 1},
    {"Reshape in place", "type: 'Reshape' arg { name: 'shape' ints: 4 ints: 3 ints: 2 }",
     {{"X", 'T', 3, {2, 3, 4}, -2, 2}}, NULL, {"X"}, {"X", "old"}, GC_ALL, 1},
    {"Flatten", "type: 'Flatten' " A("axis", 2), {{"X", 'T', 4, {2, 3, 4, 5}, -2, 2}}, NULL,
     {"X"}, {"Y"}, GC_ALL, 1},
    {"ResizeLike", "type: 'ResizeLike'",
     {{"X", 'T', 2, {4, 6}, -2, 2}, {"like", 'f', 3, {2, 3, 4}, -1, 1}}, NULL, {"X", "like"},
     {"Y"}, GC_ALL, 1},
    {"StopGradient", "type: 'StopGradient'", {{"X", 'T', 2, {3, 5}, -2, 2}}, NULL, {"X"},
     {"Y"}, GC_ALL, 1},
    {"Concat", "type: 'Concat' " A("axis", 1),
     {{"A", 'T', 3, {2, 3, 4}, -2, 2}, {"B", 'T', 3, {2, 5, 4}, -2, 2},
      {"D", 'T', 3, {2, 1, 4}, -2, 2}}, NULL, {"A", "B", "D"}, {"Y", "info"}, GC_ALL, 1},
    {"Concat add_axis", "type: 'Concat' " A("axis", 1) A("add_axis", 1),
     {{"A", 'T', 2, {2, 3}, -2, 2}, {"B", 'T', 2, {2, 3}, -2, 2}}, NULL, {"A", "B"},
     {"Y", "info"}, GC_ALL, 1},
    {"Concat INT32 NHWC", "type: 'Concat' " AS("order", "NHWC"),
     {{"A", 'i', 4, {2, 2, 3, 3}, -50, 50}, {"B", 'i', 4, {2, 2, 3, 1}, -50, 50}}, NULL,
     {"A", "B"}, {"Y"}, GC_FP32, 1},
    {"Split", "type: 'Split' " A("axis", 1) "arg { name: 'split' ints: 2 ints: 3 ints: 4 }",
     {{"X", 'T', 3, {2, 9, 4}, -2, 2}}, NULL, {"X"}, {"Y0", "Y1", "Y2"}, GC_ALL, 1},
    {"Split equal INT64", "type: 'Split' " A("axis", 0),
     {{"X", 'l', 2, {4, 6}, -1000, 1000}}, NULL, {"X"}, {"Y0", "Y1"}, GC_FP32, 1},
    {"Transpose", "type: 'Transpose'", {{"X", 'T', 4, {2, 3, 4, 5}, -2, 2}}, NULL, {"X"},
     {"Y"}, GC_ALL, 1},
    {"Transpose NCHW->NHWC",
     "type: 'Transpose' arg { name: 'axes' ints: 0 ints: 2 ints: 3 ints: 1 }",
     {{"X", 'T', 4, {2, 3, 4, 5}, -2, 2}}, NULL, {"X"}, {"Y"}, GC_ALL, 1},
    {"Transpose INT32", "type: 'Transpose' arg { name: 'axes' ints: 1 ints: 0 ints: 2 }",
     {{"X", 'i', 3, {3, 4, 5}, -50, 50}}, NULL, {"X"}, {"Y"}, GC_FP32, 1},
    {"NCHW2NHWCPad 3 -> 8", "type: 'NCHW2NHWCPad'",
     {{"X", 'T', 4, {2, 3, 4, 5}, -2, 2}}, NULL, {"X"}, {"Y"}, GC_ALL, 1},
    {"NCHW2NHWCPad 9 -> 12", "type: 'NCHW2NHWCPad' " A("multiple", 4),
     {{"X", 'T', 4, {2, 9, 3, 1}, -2, 2}}, NULL, {"X"}, {"Y"}, GC_ALL, 1},
    {"TransposeGradient",
     "type: 'TransposeGradient' arg { name: 'axes' ints: 0 ints: 2 ints: 3 ints: 1 }",
     {{"dY", 'T', 4, {2, 4, 5, 3}, -2, 2}}, NULL, {"dY"}, {"dX"}, GC_ALL, 1},
    /* Training masks are compared only where they are certain (ratio 0 and 1): the mask's
     * hash covers the output's name, and the device net's is Y_cuda, not Y. */
    {"Dropout is_test", "type: 'Dropout' " A("is_test", 1) AF("ratio", 0.5),
     {{"X", 'T', 2, {5, 7}, -2, 2}}, NULL, {"X"}, {"Y", "mask"}, GC_ALL, 1, GC_RESHAPE},
    {"Dropout ratio 0", "type: 'Dropout' " AF("ratio", 0.0), {{"X", 'T', 2, {5, 7}, -2, 2}},
     NULL, {"X"}, {"Y", "mask"}, GC_ALL, 1, GC_RESHAPE},
    {"Dropout ratio 1", "type: 'Dropout' " AF("ratio", 1.0), {{"X", 'T', 2, {5, 7}, -2, 2}},
     NULL, {"X"}, {"Y", "mask"}, GC_ALL, 1, GC_RESHAPE},
    {"DropoutGrad", "type: 'DropoutGrad' " AF("ratio", 0.3),
     {{"X", 'T', 2, {6, 9}, -2, 2}, {"dY", 'T', 2, {6, 9}, -2, 2}},
     "op { input: 'X' output: 'Yd' output: 'mask' type: 'Dropout' " AF("ratio", 0.3) "}",
     {"dY", "mask"}, {"dX"}, GC_ALL, 1, GC_RESHAPE},
    {"DropoutGrad is_test", "type: 'DropoutGrad' " A("is_test", 1),
     {{"dY", 'T', 2, {6, 9}, -2, 2}}, NULL, {"dY"}, {"dX"}, GC_ALL, 1, GC_RESHAPE},
    /* LayerNorm (gpu/layernorm.cu): rows of D = 32 (axis 2) or 60 (axis 1, no affine) */
    {"LayerNorm affine", "type: 'LayerNorm' " A("axis", 2) A("elementwise_affine", 1),
     {{"X", 'T', 3, {6, 4, 32}, -3, 3}, {"gamma", 'f', 1, {32}, 0.5, 1.5},
      {"beta", 'f', 1, {32}, -1, 1}}, NULL, {"X", "gamma", "beta"}, {"Y", "mean", "std"},
     GC_ALL, 40, GC_RESHAPE},
    {"LayerNorm", "type: 'LayerNorm'", {{"X", 'T', 3, {4, 3, 20}, -3, 3}}, NULL, {"X"},
     {"Y", "mean", "std"}, GC_ALL, 68, GC_RESHAPE},
    {"LayerNormGradient", "type: 'LayerNormGradient' " A("axis", 2) A("elementwise_affine", 1),
     {{"X", 'T', 3, {6, 4, 32}, -3, 3}, {"gamma", 'f', 1, {32}, 0.5, 1.5},
      {"beta", 'f', 1, {32}, -1, 1}, {"dY", 'T', 3, {6, 4, 32}, -1, 1}},
     "op { input: 'X' input: 'gamma' input: 'beta' output: 'Y' output: 'mean' output: 'std' "
     "type: 'LayerNorm' " A("axis", 2) A("elementwise_affine", 1) "}",
     {"dY", "Y", "mean", "std", "X", "gamma"}, {"dX", "dgamma", "dbeta"}, GC_ALL, 72,
     GC_RESHAPE},
    {"LayerNormGradient in place", "type: 'LayerNormGradient'",
     {{"X", 'T', 2, {5, 40}, -3, 3}, {"dY", 'T', 2, {5, 40}, -1, 1}},
     "op { input: 'X' output: 'Y' output: 'mean' output: 'std' type: 'LayerNorm' }",
     {"dY", "Y", "mean", "std", "X"}, {"dY"}, GC_ALL, 48, GC_RESHAPE},
    /* MaskedSoftmax (gpu/masked_softmax.cu): causal with cached keys and a [Tq, Tk] mask,
     * a key-padding mask in X's dtype; 16-bit logits near the top scaled in FP32 */
    {"MaskedSoftmax causal", "type: 'MaskedSoftmax' " A("causal", 1) AF("scale", 0.25),
     {{"X", 'T', 4, {2, 3, 5, 9}, -8, 8}, {"M", 'f', 2, {5, 9}, -2, 2}}, NULL, {"X", "M"},
     {"Y"}, GC_ALL, 20, GC_RESHAPE},
    {"MaskedSoftmax padding", "type: 'MaskedSoftmax' ",
     {{"X", 'T', 4, {2, 2, 4, 300}, -4, 4}, {"M", 'T', 4, {2, 1, 1, 300}, -3, 0}}, NULL,
     {"X", "M"}, {"Y"}, GC_ALL, 310, GC_RESHAPE},
    {"MaskedSoftmax big logits", "type: 'MaskedSoftmax' " A("causal", 1) AF("scale", 4.0),
     {{"X", 'T', 4, {2, 2, 4, 4}, 30000, 30100}}, NULL, {"X"}, {"Y"}, GC_ALL, 12, GC_RESHAPE},
    {"MaskedSoftmaxGradient", "type: 'MaskedSoftmaxGradient' " AF("scale", 0.5),
     {{"X", 'T', 4, {2, 3, 5, 9}, -4, 4}, {"dY", 'T', 4, {2, 3, 5, 9}, -1, 1}},
     "op { input: 'X' output: 'Y' type: 'MaskedSoftmax' " A("causal", 1) AF("scale", 0.5) "}",
     {"Y", "dY"}, {"dX"}, GC_ALL, 20, GC_RESHAPE},
};
#pragma GCC diagnostic pop

#undef A
#undef AF
#undef AS
#endif
