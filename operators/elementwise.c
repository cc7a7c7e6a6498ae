/* elementwise.c: Sum, Add/Sub/Mul/Div (numpy's broadcast, or Caffe2's legacy one with
 * `broadcast`=1), Scale and SumReduceLike, with their gradient makers.
 *
 * Sum works in blocks: every input's block is read and summed in a local accumulator
 * before the block of Y is written, so Y may share storage with any input. FP16 and BF16
 * inputs are computed in FP32 and rounded once (tensor-core style); integer results wrap
 * (two's complement) instead of invoking C's undefined signed overflow, and an integer
 * division by zero is an error (checked before anything is written).
 *
 * Gradients (dC = C's gradient): Sum and Add pass dC through (no op) to every input
 * of C's shape; a broadcast B gets SumReduceLike(dC, B), which sums dC over the
 * broadcast dims. Sub negates B's (Scale by -1). Mul: dA = Mul(dC, B) (same broadcast),
 * dB = SumReduceLike(Mul(dC, A)). Div reads C and B, not A (so it may run in place on A):
 * dA = Div(dC, B), dB = -SumReduceLike(dC * C / B). The chains run in place on dB's
 * blob, so no temporary names are needed. Without `broadcast` (numpy's rule) either
 * input may be broadcast and the maker has no shapes, so every input's gradient goes
 * through SumReduceLike without `axis` (a copy when that input was not broadcast).
 */
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "common.h"
#include "broadcast.h"
#include "core/half.h"
#include "builtin.h"

#define BLOCK 1024

static const dm_inplace_pair sum_inplace[] = {{0, 0}, {-1, -1}};

static dm_status sum_infer(dm_op_ctx *ctx);
static void elementwise_cost(dm_op_ctx *ctx, dm_op_cost *c);
static dm_status sum_gradient(dm_grad_ctx *g);

static const dm_op_schema sum_schema = {
    .type = "Sum",
    .min_inputs = 1,
    .max_inputs = -1,
    .min_outputs = 1,
    .max_outputs = 1,
    .inplace = sum_inplace,
    .precision = DM_PREC_FOLLOW,
    .doc = "X0, X1, ... (same shape and dtype) -> Y = elementwise sum; Y may be X0.",
    .infer = sum_infer,
    .cost = elementwise_cost,
    .gradient = sum_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = UINT64_MAX, .layout_outputs = 0x1,
};

/* One block [i0, i0 + n) for an accumulator type ACC over element type T; LOAD widens an
 * element, STORE narrows the accumulator into Y. */
#define SUM_BLOCK(T, ACC, LOAD, STORE)                                 \
  do {                                                                 \
    ACC acc[BLOCK];                                                    \
    const T *p0 = (const T *)dm_tensor_data(dm_op_input(ctx, 0)) + i0; \
    for (int64_t j = 0; j < n; j++)                                    \
      acc[j] = LOAD(p0[j]);                                            \
    for (int k = 1; k < nin; k++) {                                    \
      const T *pk = (const T *)dm_tensor_data(dm_op_input(ctx, k)) + i0; \
      for (int64_t j = 0; j < n; j++)                                  \
        acc[j] += LOAD(pk[j]);                                         \
    }                                                                  \
    T *py = (T *)out + i0;                                             \
    for (int64_t j = 0; j < n; j++)                                    \
      py[j] = STORE(acc[j]);                                           \
  } while (0)

#define SAME(v) (v)
#define TO_I32(v) ((int32_t)(v)) /* uint32 -> int32: modular on every target compiler */
#define TO_I64(v) ((int64_t)(v))

static dm_status sum_infer(dm_op_ctx *ctx) {
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  int nin = dm_op_num_inputs(ctx);
  dm_dtype t = x0->dtype;
  if (!dm_is_float_or_reduced(t) && t != DM_INT32 && t != DM_INT64 && t != DM_DOUBLE)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X0 is %s; Sum takes FLOAT, FLOAT16, BFLOAT16, INT32, INT64 or DOUBLE",
                       dm_dtype_name(t));
  for (int k = 1; k < nin; k++) {
    const dm_tensor *xk = dm_op_input(ctx, k);
    char a[96], b[96];
    if (xk->dtype != t)
      return dm_op_error(ctx, DM_ERR_TYPE, "input %d '%s' is %s, but X0 is %s", k,
                         dm_op_input_name(ctx, k), dm_dtype_name(xk->dtype), dm_dtype_name(t));
    if (!dm_tensor_same_shape(xk, x0))
      return dm_op_error(ctx, DM_ERR_SHAPE, "input %d '%s' is %s, but X0 '%s' is %s", k,
                         dm_op_input_name(ctx, k), dm_shape_str(xk, a, sizeof a),
                         dm_op_input_name(ctx, 0), dm_shape_str(x0, b, sizeof b));
  }
  return dm_op_set_output(ctx, 0, t, x0->ndim, x0->dims);
}

/* One operation per input element: (inputs - 1) additions per output element for Sum,
 * one for the binary ops and Scale. */
static void elementwise_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  int nin = dm_op_num_inputs(ctx);
  c->flops = (double)dm_op_output(ctx, 0)->numel * (nin > 2 ? nin - 1 : 1);
}

static dm_status sum_gradient(dm_grad_ctx *g) {
  for (int i = 0; i < dm_grad_num_inputs(g); i++)
    DM_TRY(dm_grad_set_input_grad(g, i, dm_grad_output_grad(g, 0)));
  return DM_OK;
}

/* FP16 and BF16 (t): the block widened with the array conversion, summed in FP32 in
 * input order, then rounded once (the same bits as element by element). */
static void sum_block_half(dm_op_ctx *ctx, dm_dtype t, int nin, void *out, int64_t i0,
                           int64_t n) {
  float acc[BLOCK], tmp[BLOCK];
  dm_widen(t, (const uint16_t *)dm_tensor_data(dm_op_input(ctx, 0)) + i0, acc, (size_t)n);
  for (int k = 1; k < nin; k++) {
    dm_widen(t, (const uint16_t *)dm_tensor_data(dm_op_input(ctx, k)) + i0, tmp, (size_t)n);
    for (int64_t j = 0; j < n; j++)
      acc[j] += tmp[j];
  }
  dm_narrow(t, acc, (uint16_t *)out + i0, (size_t)n);
}

static dm_status sum_run(dm_op_ctx *ctx) {
  DM_TRY(sum_infer(ctx));
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  int nin = dm_op_num_inputs(ctx);
  dm_dtype t = x0->dtype;
  dm_tensor *y = dm_op_output(ctx, 0);
  void *out = dm_tensor_mutable_data(y);
  int64_t total = x0->numel;
#if DM_HAVE_OPENMP
#pragma omp parallel for if (total > (1 << 16))
#endif
  for (int64_t i0 = 0; i0 < total; i0 += BLOCK) {
    int64_t n = total - i0 < BLOCK ? total - i0 : BLOCK;
    switch (t) {
    case DM_FLOAT: SUM_BLOCK(float, float, SAME, SAME); break;
    case DM_DOUBLE: SUM_BLOCK(double, double, SAME, SAME); break;
    case DM_FLOAT16:
    case DM_BFLOAT16: sum_block_half(ctx, t, nin, out, i0, n); break;
    case DM_INT32: SUM_BLOCK(int32_t, uint32_t, (uint32_t), TO_I32); break;
    case DM_INT64: SUM_BLOCK(int64_t, uint64_t, (uint64_t), TO_I64); break;
    default: break;
    }
  }
  return DM_OK;
}


/* ---- Add / Sub / Mul / Div ------------------------------------------------------- */

typedef enum bin_kind { B_ADD, B_SUB, B_MUL, B_DIV } bin_kind;

static const dm_arg_spec binary_args[] = {
    {"broadcast", DM_ARG_INT, 0,
     "1: B is broadcast onto A (legacy rules); default 0: numpy's rule"},
    {"axis", DM_ARG_INT, 0, "where B's dims start in A's (default -1: trailing)"},
    {NULL, 0, 0, NULL},
};
/* C may be A's blob, or B's when B has A's shape (a broadcast B is smaller than C). */
static const dm_inplace_pair binary_inplace[] = {{0, 0}, {1, 0}, {-1, -1}};

static bin_kind kind_of(dm_op_ctx *ctx) {
  const char *t = dm_op_type(ctx);
  return t[0] == 'A' ? B_ADD : t[0] == 'S' ? B_SUB : t[0] == 'M' ? B_MUL : B_DIV;
}

static int binary_dtype_ok(dm_dtype t) {
  return dm_is_float_or_reduced(t) || t == DM_DOUBLE || t == DM_INT32 || t == DM_INT64;
}

/* Whether the op broadcasts numpy's way: no legacy `broadcast`, and unequal shapes. */
static int binary_is_numpy(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b) {
  return dm_op_arg_int(ctx, "broadcast", 0) == 0 && !dm_tensor_same_shape(a, b);
}

static dm_status binary_infer(dm_op_ctx *ctx) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  if (!binary_dtype_ok(a->dtype) || b->dtype != a->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "A, B are %s, %s; expected the same dtype, one of FLOAT, FLOAT16, "
                       "BFLOAT16, DOUBLE, INT32, INT64",
                       dm_dtype_name(a->dtype), dm_dtype_name(b->dtype));
  if (binary_is_numpy(ctx, a, b)) {
    const dm_tensor *in[] = {a, b};
    int ndim;
    int64_t dims[DM_MAX_DIMS];
    static const char *const slots[] = {"A", "B"};
    DM_TRY(dm_bcast_numpy_output_shape(ctx, 2, in, slots, &ndim, dims));
    return dm_op_set_output(ctx, 0, a->dtype, ndim, dims);
  }
  dm_bcast g;
  DM_TRY(dm_bcast_from_args(ctx, a, b, &g));
  if (g.broadcasting && dm_op_output(ctx, 0) == b)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "C is B's blob, but B is broadcast (smaller than C): run in place on A");
  return dm_op_set_output(ctx, 0, a->dtype, a->ndim, a->dims);
}

#define OP_ADD(x, y) ((x) + (y))
#define OP_SUB(x, y) ((x) - (y))
#define OP_MUL(x, y) ((x) * (y))
#define OP_DIV(x, y) ((x) / (y))
/* Integers: modular through the unsigned type; INT_MIN / -1 wraps too. */
#define IOP_ADD(U, x, y) ((U)(x) + (U)(y))
#define IOP_SUB(U, x, y) ((U)(x) - (U)(y))
#define IOP_MUL(U, x, y) ((U)(x) * (U)(y))
#define IOP_DIV(U, x, y) ((y) == -1 ? (U)0 - (U)(x) : (U)((x) / (y)))

#if DM_HAVE_OPENMP
#define OMP_FOR_BIG _Pragma("omp parallel for if (rows * g.post > (1 << 16))")
#else
#define OMP_FOR_BIG
#endif

/* C[r * post + q] = OP(A[r * post + q], B[r % n]) over rows r of (pre * n). With no
 * broadcast (post = 1, n = numel) this is the flat elementwise loop. */
#define BIN_LOOP(T, EXPR)                                                   \
  do {                                                                      \
    const T *pa = dm_tensor_data(a), *pb = dm_tensor_data(b);              \
    T *pc = dm_tensor_mutable_data(c);                                      \
    int64_t rows = g.pre * g.n;                                             \
    OMP_FOR_BIG                                                             \
    for (int64_t r = 0; r < rows; r++) {                                    \
      const T y = pb[r % g.n];                                              \
      for (int64_t q = r * g.post; q < (r + 1) * g.post; q++) {             \
        const T x = pa[q];                                                  \
        pc[q] = (T)(EXPR);                                                  \
      }                                                                     \
    }                                                                       \
  } while (0)

/* FP16 and BF16: each element widened exactly, computed in FP32, rounded once, in blocks of the
 * flat index converted with the array functions. Both operands' blocks are read before
 * C's is written, so C may be A or (unbroadcast) B. */
#define BIN_LOOP_HALF(EXPR)                                                 \
  do {                                                                      \
    const uint16_t *pa = dm_tensor_data(a), *pb = dm_tensor_data(b);       \
    uint16_t *pc = dm_tensor_mutable_data(c);                               \
    int64_t rows = g.pre * g.n, total = rows * g.post;                      \
    OMP_FOR_BIG                                                             \
    for (int64_t i0 = 0; i0 < total; i0 += BLOCK) {                         \
      float xs[BLOCK], ys[BLOCK];                                           \
      int64_t m = total - i0 < BLOCK ? total - i0 : BLOCK;                  \
      dm_widen(a->dtype, pa + i0, xs, (size_t)m);                           \
      half_bcast_block(a->dtype, pb, &g, i0, m, ys);                        \
      for (int64_t j = 0; j < m; j++) {                                     \
        const float x = xs[j], y = ys[j];                                   \
        xs[j] = EXPR;                                                       \
      }                                                                     \
      dm_narrow(a->dtype, xs, pc + i0, (size_t)m);                          \
    }                                                                       \
  } while (0)

/* B's values for the flat indices i0 .. i0 + m of A, widened: element q pairs with
 * B[(q / post) % n]. */
static void half_bcast_block(dm_dtype t, const uint16_t *pb, const dm_bcast *g, int64_t i0,
                             int64_t m, float *ys) {
  if (g->post == 1 && g->pre == 1) { /* B has A's shape */
    dm_widen(t, pb + i0, ys, (size_t)m);
    return;
  }
  int64_t r = i0 / g->post, q = i0 % g->post;
  float y = dm_reduced_to_float(t, pb[r % g->n]);
  for (int64_t j = 0; j < m; j++) {
    ys[j] = y;
    if (++q == g->post && j + 1 < m) {
      q = 0, r++;
      y = dm_reduced_to_float(t, pb[r % g->n]);
    }
  }
}

#define BIN_SWITCH(KIND, F, I)                                              \
  switch (KIND) {                                                           \
  case B_ADD: F(I##ADD); break;                                             \
  case B_SUB: F(I##SUB); break;                                             \
  case B_MUL: F(I##MUL); break;                                             \
  case B_DIV: F(I##DIV); break;                                             \
  }

/* Every dtype's loop for kind K, with F32 .. I64 defined by the caller (the plain and the
 * numpy loops). */
#define DTYPE_SWITCH(T, K)                                                  \
  switch (T) {                                                              \
  case DM_FLOAT: BIN_SWITCH(K, F32, OP_) break;                             \
  case DM_DOUBLE: BIN_SWITCH(K, F64, OP_) break;                            \
  case DM_FLOAT16:                                                          \
  case DM_BFLOAT16: BIN_SWITCH(K, F16, OP_) break;                          \
  case DM_INT32: BIN_SWITCH(K, I32, IOP_) break;                            \
  case DM_INT64: BIN_SWITCH(K, I64, IOP_) break;                            \
  default: break;                                                           \
  }

/* Numpy's broadcast: C walked in rows of its last dim; A and B read at their row's
 * offset with a stride of 0 or 1 along it. C may be an input of C's shape (read at the
 * index written). 16-bit elements are widened, computed in FP32 and rounded once. */
#define NP_LOOP(T, ACC_T, LOAD, STORE, EXPR)                                        \
  do {                                                                         \
    const T *pa = dm_tensor_data(a), *pb = dm_tensor_data(b);                  \
    T *pc = dm_tensor_mutable_data(c);                                         \
    OMP_FOR_NP                                                                 \
    for (int64_t r = 0; r < rows; r++) {                                       \
      const T *ra = pa + dm_bcast_row_offset(nd, dims, sa, r);                 \
      const T *rb = pb + dm_bcast_row_offset(nd, dims, sb, r);                 \
      T *rc = pc + r * len;                                                    \
      for (int64_t j = 0; j < len; j++) {                                      \
        const ACC_T x = LOAD(ra[j * ia]), y = LOAD(rb[j * ib]);                \
        rc[j] = (T)STORE(EXPR);                                                \
      }                                                                        \
    }                                                                          \
  } while (0)

#if DM_HAVE_OPENMP
#define OMP_FOR_NP _Pragma("omp parallel for if (rows * len > (1 << 16))")
#else
#define OMP_FOR_NP
#endif

static dm_status binary_numpy_run(dm_op_ctx *ctx, bin_kind k) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  dm_tensor *c = dm_op_output(ctx, 0);
  if (c->numel == 0)
    return DM_OK;
  int nd = c->ndim > 0 ? c->ndim : 1;
  int64_t dims[DM_MAX_DIMS] = {1}, sa[DM_MAX_DIMS], sb[DM_MAX_DIMS];
  for (int d = 0; d < c->ndim; d++)
    dims[d] = c->dims[d];
  dm_bcast_numpy_strides(a, nd, dims, sa);
  dm_bcast_numpy_strides(b, nd, dims, sb);
  const int64_t len = dims[nd - 1], rows = c->numel / len, ia = sa[nd - 1], ib = sb[nd - 1];
  const dm_dtype t = a->dtype;
#define WIDEN(v) dm_reduced_to_float(t, v)
#define ROUND(v) dm_double_to_reduced(t, (double)(v))
#define F32(OP) NP_LOOP(float, float, SAME, SAME, OP(x, y))
#define F64(OP) NP_LOOP(double, double, SAME, SAME, OP(x, y))
#define F16(OP) NP_LOOP(uint16_t, float, WIDEN, ROUND, OP(x, y))
#define I32(OP) NP_LOOP(int32_t, int32_t, SAME, SAME, OP(uint32_t, x, y))
#define I64(OP) NP_LOOP(int64_t, int64_t, SAME, SAME, OP(uint64_t, x, y))
  DTYPE_SWITCH(t, k)
#undef WIDEN
#undef ROUND
#undef F32
#undef F64
#undef F16
#undef I32
#undef I64
  return DM_OK;
}

dm_status dm_binary_run_reference(dm_op_ctx *ctx) {
  DM_TRY(binary_infer(ctx));
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  dm_tensor *c = dm_op_output(ctx, 0);
  bin_kind k = kind_of(ctx);
  if (k == B_DIV && (a->dtype == DM_INT32 || a->dtype == DM_INT64))
    for (int64_t j = 0; j < b->numel; j++)
      if (a->dtype == DM_INT32 ? ((const int32_t *)dm_tensor_data(b))[j] == 0
                               : ((const int64_t *)dm_tensor_data(b))[j] == 0)
        return dm_op_error(ctx, DM_ERR_INVALID, "integer division by zero: B[%lld] is 0",
                           (long long)j);
  if (binary_is_numpy(ctx, a, b))
    return binary_numpy_run(ctx, k);
  dm_bcast g;
  DM_TRY(dm_bcast_from_args(ctx, a, b, &g));
  if (a->numel == 0)
    return DM_OK;
#define F32(OP) BIN_LOOP(float, OP(x, y))
#define F64(OP) BIN_LOOP(double, OP(x, y))
#define F16(OP) BIN_LOOP_HALF(OP(x, y))
#define I32(OP) BIN_LOOP(int32_t, OP(uint32_t, x, y))
#define I64(OP) BIN_LOOP(int64_t, OP(uint64_t, x, y))
  DTYPE_SWITCH(a->dtype, k)
#undef F32
#undef F64
#undef F16
#undef I32
#undef I64
  return DM_OK;
}

/* Emits SumReduceLike(src, B) -> dst with the forward's broadcast axis. */
static dm_status emit_reduce_like(dm_grad_ctx *g, const char *src, const char *dst) {
  const char *in[] = {src, dm_grad_input(g, 1)};
  const char *out[] = {dst};
  int64_t axis = dm_grad_arg_int(g, "axis", -1);
  DM_TRY(dm_grad_emit(g, "SumReduceLike", 2, in, 1, out));
  dm_grad_clear_args(g);
  return dm_grad_set_arg_int(g, "axis", axis);
}

/* Emits Scale(x) -> y by `scale`. */
static dm_status emit_scale(dm_grad_ctx *g, const char *x, const char *y, float scale) {
  const char *in[] = {x};
  const char *out[] = {y};
  DM_TRY(dm_grad_emit(g, "Scale", 1, in, 1, out));
  dm_grad_clear_args(g);
  return dm_grad_set_arg_float(g, "scale", scale);
}

/* Numpy's rule (no `broadcast`): either input may be broadcast, which the maker cannot
 * see (it has no shapes), so each input's gradient is reduced to its shape by
 * SumReduceLike without `axis` (numpy's rule; a copy when nothing was broadcast). */
static dm_status emit_reduce_numpy(dm_grad_ctx *g, const char *src, int input, const char *dst) {
  const char *in[] = {src, dm_grad_input(g, input)};
  const char *out[] = {dst};
  DM_TRY(dm_grad_emit(g, "SumReduceLike", 2, in, 1, out));
  dm_grad_clear_args(g);
  return DM_OK;
}

static dm_status add_sub_gradient(dm_grad_ctx *g, int negate) {
  const char *dc = dm_grad_output_grad(g, 0), *db = dm_grad_input_grad(g, 1);
  int bcast = dm_grad_arg_int(g, "broadcast", 0) != 0;
  if (!bcast) {
    if (dm_grad_input_needed(g, 0))
      DM_TRY(emit_reduce_numpy(g, dc, 0, dm_grad_input_grad(g, 0)));
    if (!dm_grad_input_needed(g, 1))
      return DM_OK;
    DM_TRY(emit_reduce_numpy(g, dc, 1, db));
    return negate ? emit_scale(g, db, db, -1.0f) : DM_OK;
  }
  DM_TRY(dm_grad_set_input_grad(g, 0, dc)); /* A has C's shape */
  if (!dm_grad_input_needed(g, 1))
    return DM_OK;
  DM_TRY(emit_reduce_like(g, dc, db));
  return negate ? emit_scale(g, db, db, -1.0f) : DM_OK;
}

static dm_status add_gradient(dm_grad_ctx *g) { return add_sub_gradient(g, 0); }
static dm_status sub_gradient(dm_grad_ctx *g) { return add_sub_gradient(g, 1); }

static dm_status mul_gradient(dm_grad_ctx *g) {
  const char *dc = dm_grad_output_grad(g, 0), *a = dm_grad_input(g, 0), *b = dm_grad_input(g, 1);
  const char *da = dm_grad_input_grad(g, 0), *db = dm_grad_input_grad(g, 1);
  int bcast = dm_grad_arg_int(g, "broadcast", 0) != 0;
  if (dm_grad_input_needed(g, 0)) { /* dA = dC * B, broadcast as the forward */
    const char *in[] = {dc, b}, *out[] = {da};
    DM_TRY(dm_grad_emit(g, "Mul", 2, in, 1, out));
    if (!bcast)
      DM_TRY(emit_reduce_numpy(g, da, 0, da));
  }
  if (!dm_grad_input_needed(g, 1))
    return DM_OK;
  const char *in[] = {dc, a}, *out[] = {db}; /* legacy: same shapes, no broadcast */
  DM_TRY(dm_grad_emit(g, "Mul", 2, in, 1, out));
  dm_grad_clear_args(g);
  if (!bcast)
    return emit_reduce_numpy(g, db, 1, db);
  return emit_reduce_like(g, db, db);
}

static dm_status div_gradient(dm_grad_ctx *g) {
  const char *dc = dm_grad_output_grad(g, 0), *c = dm_grad_output(g, 0), *b = dm_grad_input(g, 1);
  const char *da = dm_grad_input_grad(g, 0), *db = dm_grad_input_grad(g, 1);
  int bcast = dm_grad_arg_int(g, "broadcast", 0) != 0;
  if (dm_grad_input_needed(g, 0)) { /* dA = dC / B, broadcast as the forward */
    const char *in[] = {dc, b}, *out[] = {da};
    DM_TRY(dm_grad_emit(g, "Div", 2, in, 1, out));
    if (!bcast)
      DM_TRY(emit_reduce_numpy(g, da, 0, da));
  }
  if (!dm_grad_input_needed(g, 1))
    return DM_OK;
  const char *in1[] = {dc, c}, *out1[] = {db}; /* dB = dC * C ... */
  DM_TRY(dm_grad_emit(g, "Mul", 2, in1, 1, out1));
  dm_grad_clear_args(g);
  const char *in2[] = {db, b}; /* ... / B (the forward's broadcast, args copied) ... */
  DM_TRY(dm_grad_emit(g, "Div", 2, in2, 1, out1));
  if (bcast)
    DM_TRY(emit_reduce_like(g, db, db));
  else
    DM_TRY(emit_reduce_numpy(g, db, 1, db));
  return emit_scale(g, db, db, -1.0f); /* ... negated */
}

#define BINARY_SCHEMA(var, name, grad, docstr)                                          \
  static const dm_op_schema var##_schema = {                                            \
      .type = name, .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, \
      .args = binary_args, .inplace = binary_inplace, .precision = DM_PREC_FOLLOW,      \
      .doc = docstr, .infer = binary_infer, .cost = elementwise_cost, .gradient = grad,  \
      .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x3, .layout_outputs = 0x1}

BINARY_SCHEMA(add, "Add", add_gradient,
              "A, B -> C = A + B (numpy broadcast; legacy with broadcast=1).");
BINARY_SCHEMA(sub, "Sub", sub_gradient,
              "A, B -> C = A - B (numpy broadcast; legacy with broadcast=1).");
BINARY_SCHEMA(mul, "Mul", mul_gradient,
              "A, B -> C = A * B (numpy broadcast; legacy with broadcast=1).");
BINARY_SCHEMA(div, "Div", div_gradient,
              "A, B -> C = A / B (numpy broadcast; legacy with broadcast=1).");

/* ---- Scale ----------------------------------------------------------------------- */

static const dm_arg_spec scale_args[] = {
    {"scale", DM_ARG_FLOAT, 0, "the factor (default 1.0)"},
    {NULL, 0, 0, NULL},
};
static const dm_inplace_pair scale_inplace[] = {{0, 0}, {-1, -1}};

static dm_status scale_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (!dm_is_float_or_reduced(x->dtype) && x->dtype != DM_DOUBLE)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X is %s; Scale takes FLOAT, FLOAT16, BFLOAT16 or DOUBLE",
                       dm_dtype_name(x->dtype));
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static dm_status scale_run(dm_op_ctx *ctx) {
  DM_TRY(scale_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  float k = dm_op_arg_float(ctx, "scale", 1.0f);
  int64_t n = x->numel;
  if (x->dtype == DM_DOUBLE) {
    const double *px = dm_tensor_data(x);
    double *py = dm_tensor_mutable_data(y);
    for (int64_t i = 0; i < n; i++)
      py[i] = (double)k * px[i];
    return DM_OK;
  }
  /* FLOAT, FLOAT16 and BFLOAT16 in FP32 blocks (16-bit: widened, scaled, rounded once) */
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 16))
#endif
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    float buf[BLOCK];
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    dm_load_f32(x->dtype, dm_tensor_data(x), i0, m, buf);
    for (int64_t j = 0; j < m; j++)
      buf[j] *= k;
    dm_store_f32(x->dtype, dm_tensor_mutable_data(y), i0, m, buf);
  }
  return DM_OK;
}

static dm_status scale_gradient(dm_grad_ctx *g) { /* Scale(dY) by the same factor */
  const char *in[] = {dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "Scale", 1, in, 1, out);
}

static const dm_op_schema scale_schema = {
    .type = "Scale", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .args = scale_args, .inplace = scale_inplace, .precision = DM_PREC_FOLLOW,
    .doc = "X -> Y = scale * X (FLOAT, FLOAT16, BFLOAT16, DOUBLE); may run in place.",
    .infer = scale_infer, .cost = elementwise_cost, .gradient = scale_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x1};

/* ---- SumReduceLike --------------------------------------------------------------- */

static const dm_arg_spec reduce_like_args[] = {
    {"axis", DM_ARG_INT, 0,
     "legacy: where B's dims start in A's (-1: trailing); absent: numpy's rule"},
    {NULL, 0, 0, NULL},
};
/* In place on A: C is built aside (it is smaller), then takes A's blob. */
static const dm_inplace_pair reduce_like_inplace[] = {{0, 0}, {-1, -1}};

/* Without `axis`, numpy's rule: B must broadcast to exactly A's shape. */
static dm_status reduce_like_numpy_check(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b) {
  const dm_tensor *in[] = {a, b};
  static const char *const slots[] = {"A", "B"};
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dm_bcast_numpy_shape(ctx, 2, in, slots, &ndim, dims));
  int same = ndim == a->ndim;
  for (int d = 0; same && d < ndim; d++)
    same = dims[d] == a->dims[d];
  if (!same) {
    char as[96], bs[96];
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "A is %s and B is %s: B does not broadcast to A's shape",
                       dm_shape_str(a, as, sizeof as), dm_shape_str(b, bs, sizeof bs));
  }
  return DM_OK;
}

static dm_status reduce_like_infer(dm_op_ctx *ctx) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  if (!dm_is_float_or_reduced(a->dtype) && a->dtype != DM_DOUBLE)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "A is %s; SumReduceLike takes FLOAT, FLOAT16, BFLOAT16 or DOUBLE",
                       dm_dtype_name(a->dtype));
  if (dm_op_has_arg(ctx, "axis")) {
    dm_bcast g;
    DM_TRY(dm_bcast_legacy(ctx, a, b, 1, dm_op_arg_int(ctx, "axis", -1), &g));
  } else {
    DM_TRY(reduce_like_numpy_check(ctx, a, b));
  }
  if (dm_op_shape_only(ctx) || !dm_tensors_alias(dm_op_output(ctx, 0), a))
    return dm_op_set_output(ctx, 0, a->dtype, b->ndim, b->dims);
  return DM_OK; /* in place: the kernel resizes after reading A */
}

/* acc[j] (B's numel, zeroed) += A's elements that pair with B[j] under numpy's rule. */
static dm_status reduce_like_numpy_sum(const dm_tensor *a, const dm_tensor *b, double *acc) {
  int nd = a->ndim > 0 ? a->ndim : 1;
  int64_t dims[DM_MAX_DIMS] = {1}, sb[DM_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++)
    dims[d] = a->dims[d];
  dm_bcast_numpy_strides(b, nd, dims, sb);
  const int64_t len = dims[nd - 1], rows = a->numel / (len ? len : 1), ib = sb[nd - 1];
  float *row = malloc((size_t)(len ? len : 1) * sizeof *row);
  if (!row)
    return DM_NOMEM("SumReduceLike row");
  for (int64_t r = 0; r < rows; r++) {
    double *pacc = acc + dm_bcast_row_offset(nd, dims, sb, r);
    if (a->dtype == DM_DOUBLE) {
      const double *pa = (const double *)dm_tensor_data(a) + r * len;
      for (int64_t q = 0; q < len; q++)
        pacc[q * ib] += pa[q];
    } else {
      dm_load_f32(a->dtype, dm_tensor_data(a), r * len, len, row);
      for (int64_t q = 0; q < len; q++)
        pacc[q * ib] += row[q];
    }
  }
  free(row);
  return DM_OK;
}

static dm_status reduce_like_run(dm_op_ctx *ctx) {
  DM_TRY(reduce_like_infer(ctx));
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  int numpy = !dm_op_has_arg(ctx, "axis");
  dm_bcast g = {1, b->numel, 1, 0};
  if (!numpy)
    DM_TRY(dm_bcast_legacy(ctx, a, b, 1, dm_op_arg_int(ctx, "axis", -1), &g));
  /* C[j] = sum over (p, q) of A[p][j][q], in double: more than FP32's accuracy, and the
   * same for every thread count. */
  double *acc = calloc((size_t)(g.n ? g.n : 1), sizeof *acc);
  float *row = malloc((size_t)(g.post ? g.post : 1) * sizeof *row);
  if (!acc || !row) {
    free(acc);
    free(row);
    return DM_NOMEM("SumReduceLike accumulators");
  }
  dm_status s = DM_OK;
  if (numpy)
    s = reduce_like_numpy_sum(a, b, acc);
  for (int64_t r = 0; !numpy && r < g.pre * g.n; r++) {
    double t = 0;
    if (a->dtype == DM_DOUBLE) {
      const double *pa = (const double *)dm_tensor_data(a) + r * g.post;
      for (int64_t q = 0; q < g.post; q++)
        t += pa[q];
    } else {
      dm_load_f32(a->dtype, dm_tensor_data(a), r * g.post, g.post, row);
      for (int64_t q = 0; q < g.post; q++)
        t += row[q];
    }
    acc[r % g.n] += t;
  }
  free(row);
  dm_tensor *c = dm_op_output(ctx, 0);
  dm_dtype t = a->dtype;
  if (s == DM_OK)
    s = dm_op_set_output(ctx, 0, t, b->ndim, b->dims); /* A was fully read */
  for (int64_t j = 0; s == DM_OK && j < g.n; j++) {
    if (t == DM_DOUBLE)
      ((double *)dm_tensor_mutable_data(c))[j] = acc[j];
    else if (dm_is_reduced_float(t)) /* double -> 16 bits once, not via float */
      ((uint16_t *)dm_tensor_mutable_data(c))[j] = dm_double_to_reduced(t, acc[j]);
    else
      ((float *)dm_tensor_mutable_data(c))[j] = (float)acc[j];
  }
  free(acc);
  return s;
}

static const dm_op_schema reduce_like_schema = {
    .type = "SumReduceLike", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .args = reduce_like_args, .inplace = reduce_like_inplace,
    .precision = DM_PREC_FOLLOW,
    .doc = "A, B -> C of B's shape: A summed over the dims B is broadcast along (numpy's "
           "rule; the legacy rules when `axis` is given); the gradient of a broadcast "
           "operand.",
    .infer = reduce_like_infer, .cost = elementwise_cost};

static const dm_op_schema *const schemas[] = {&sum_schema,   &add_schema,   &sub_schema,
                                              &mul_schema,   &div_schema,   &scale_schema,
                                              &reduce_like_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Sum", .device = DM_CPU, .run = sum_run},
    {.type = "Add", .device = DM_CPU, .run = dm_binary_run_reference},
    {.type = "Sub", .device = DM_CPU, .run = dm_binary_run_reference},
    {.type = "Mul", .device = DM_CPU, .run = dm_binary_run_reference},
    {.type = "Div", .device = DM_CPU, .run = dm_binary_run_reference},
    {.type = "Scale", .device = DM_CPU, .run = scale_run},
    {.type = "SumReduceLike", .device = DM_CPU, .run = reduce_like_run},
    {0},
};
const dm_op_family dm_family_elementwise = {schemas, kernels};
