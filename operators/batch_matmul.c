/* batch_matmul.c: BatchMatMul and MatMul (products of two activations) and their
 * gradients, FP32, FP16 and BF16.
 *
 * BatchMatMul (Caffe2): A, B -> Y = op(A) op(B) over the last two dims, op a transpose
 * where trans_a / trans_b is set. broadcast = 0: A and B have the same rank (>= 2) and
 * the same batch dims (all but the last two). broadcast = 1: numpy's matmul: batch dims
 * broadcast (aligned at the end, equal or 1), a 1-D A is a row vector [1, K] and a 1-D B
 * a column [K, 1] whose unit dim is dropped from Y (their trans_* is ignored, as
 * Caffe2), and two 1-D inputs give Y of shape [1] (Caffe2's dot product).
 * MatMul (Caffe2): A flattened to 2-D at axis_a, B at axis_b, Y = op(A) op(B), 2-D.
 *
 * The 16-bit kernels widen A and B exactly to FP32, multiply with FP32 accumulation in
 * dm_sgemm, and round each element of Y once, as tensor cores do (math/gemm.h).
 *
 * Gradients. BatchMatMul without broadcast emits two BatchMatMuls with the transposes
 * chosen so each writes its input's stored layout (as Caffe2's maker):
 *   trans_a 0: dA = dY op(B)^T    trans_a 1: dA = op(B) dY^T
 *   trans_b 0: dB = op(A)^T dY    trans_b 1: dB = dY^T op(A)
 * With broadcast, a broadcast batch dim of A (B) sums its products' gradients and a 1-D
 * input has no M (N) dim in dY, which no BatchMatMul expresses: the maker emits
 * BatchMatMulGradient (A, B, dY -> dA, dB), which does those products per batch matrix
 * and accumulates into dA and dB (16-bit: in FP32 scratch, rounded once). MatMul emits
 * MatMulGradient, the same kernel on MatMul's geometry (dA keeps A's N-D shape).
 */
#include <stdlib.h>
#include <string.h>

#include "batch_matmul.h"
#include "builtin.h"
#include "common.h"
#include "math/gemm.h"

#define BMM_TRANS_ARGS                                                                   \
  {"trans_a", DM_ARG_INT, 0, "nonzero: use A's (last two dims') transpose (default 0)"}, \
      {"trans_b", DM_ARG_INT, 0, "nonzero: use B's transpose (default 0)"}
static const dm_arg_spec bmm_args[] = {
    BMM_TRANS_ARGS,
    {"broadcast", DM_ARG_INT, 0,
     "nonzero: numpy's matmul broadcasting of batch dims and 1-D inputs (default 0)"},
    {NULL, 0, 0, NULL}};
static const dm_arg_spec mm_args[] = {
    {"axis_a", DM_ARG_INT, 0, "flatten A to 2-D at this axis (default 1)"},
    {"axis_b", DM_ARG_INT, 0, "flatten B to 2-D at this axis (default 1)"},
    BMM_TRANS_ARGS,
    {NULL, 0, 0, NULL}};

/* ---- geometry ---------------------------------------------------------------------- */

static dm_status need_rank(dm_op_ctx *ctx, const char *slot, const dm_tensor *t, int min) {
  char s[96];
  if (t->ndim < min)
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s (%d-d); %s needs at least %d dims%s", slot,
                       dm_shape_str(t, s, sizeof s), t->ndim, dm_op_type(ctx), min,
                       min == 2 ? " without broadcast=1" : "");
  return DM_OK;
}

/* Y's element count (batch x M x N) fits int64: broadcasting and the product's M, N are
 * not bounded by either input's own count. */
static dm_status check_y_size(dm_op_ctx *ctx, const dm_bmm_geom *g) {
  int64_t mn, n = 1;
  int bad = __builtin_mul_overflow(g->M, g->N, &mn); /* the kernels use M N itself */
  for (int d = 0; d < g->nb; d++)
    bad |= __builtin_mul_overflow(n, g->bdims[d], &n);
  bad |= __builtin_mul_overflow(n, mn, &n);
  if (bad)
    return dm_op_error(ctx, DM_ERR_LIMIT,
                       "Y of %lldx%lld matrices over %d batch dims from A and B would hold more "
                       "than 2^63 elements",
                       (long long)g->M, (long long)g->N, g->nb);
  return DM_OK;
}

dm_status dm_batch_matmul_geometry(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b,
                                   dm_bmm_geom *g) {
  int bc = dm_op_arg_int(ctx, "broadcast", 0) != 0;
  DM_TRY(need_rank(ctx, "A", a, bc ? 1 : 2));
  DM_TRY(need_rank(ctx, "B", b, bc ? 1 : 2));
  memset(g, 0, sizeof *g);
  char as[96], bs[96];
  dm_shape_str(a, as, sizeof as);
  dm_shape_str(b, bs, sizeof bs);
  int a1 = a->ndim == 1, b1 = b->ndim == 1;
  g->trans_a = !a1 && dm_op_arg_int(ctx, "trans_a", 0) != 0;
  g->trans_b = !b1 && dm_op_arg_int(ctx, "trans_b", 0) != 0;
  /* A's matrix as stored: rows x cols (1-D: one row of K) */
  int64_t ar = a1 ? 1 : a->dims[a->ndim - 2], ac = a->dims[a->ndim - 1];
  int64_t br = b1 ? b->dims[0] : b->dims[b->ndim - 2], bcols = b1 ? 1 : b->dims[b->ndim - 1];
  g->M = g->trans_a ? ac : ar;
  g->K = g->trans_a ? ar : ac;
  int64_t kb = g->trans_b ? bcols : br;
  g->N = g->trans_b ? br : bcols;
  if (kb != g->K)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "A is %s and B is %s (trans_a %d, trans_b %d): op(A) has K = %lld "
                       "columns but op(B) has %lld rows",
                       as, bs, g->trans_a, g->trans_b, (long long)g->K, (long long)kb);
  int na = a1 ? 0 : a->ndim - 2, nbb = b1 ? 0 : b->ndim - 2;
  if (!bc && (a->ndim != b->ndim || memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)na)))
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "A is %s and B is %s: their batch dims (all but the last two) differ; "
                       "set broadcast=1 for numpy's broadcasting",
                       as, bs);
  g->nb = na > nbb ? na : nbb;
  g->a_mats = g->b_mats = 1;
  for (int d = 0; d < na; d++)
    g->a_mats *= a->dims[d];
  for (int d = 0; d < nbb; d++)
    g->b_mats *= b->dims[d];
  /* batch dims aligned at the end; steps from the last dim out */
  int64_t sa = 1, sb = 1;
  g->batch = 1;
  for (int d = g->nb - 1; d >= 0; d--) {
    int ia = na - (g->nb - d), ib = nbb - (g->nb - d);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "A is %s and B is %s: batch dims %lld and %lld (%d from the end of "
                         "the batch dims) neither match nor are 1, so they do not broadcast",
                         as, bs, (long long)da, (long long)db, g->nb - d);
    g->bdims[d] = da == db || db == 1 ? da : db; /* 0 against 1 is 0, as numpy */
    g->a_step[d] = da == 1 ? 0 : sa;
    g->b_step[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  DM_TRY(check_y_size(ctx, g));
  for (int d = 0; d < g->nb; d++)
    g->batch *= g->bdims[d];
  int n = 0;
  for (int d = 0; d < g->nb; d++)
    g->y_dims[n++] = g->bdims[d];
  if (!a1)
    g->y_dims[n++] = g->M;
  if (!b1)
    g->y_dims[n++] = g->N;
  if (n == 0)
    g->y_dims[n++] = 1; /* vector . vector: Caffe2's Y of shape [1] */
  g->y_ndim = n;
  return DM_OK;
}

dm_status dm_matmul_geometry(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b,
                             dm_bmm_geom *g) {
  memset(g, 0, sizeof *g);
  int xa, xb;
  DM_TRY(dm_op_canonical_axis(ctx, "axis_a", dm_op_arg_int(ctx, "axis_a", 1), a->ndim, 0, &xa));
  DM_TRY(dm_op_canonical_axis(ctx, "axis_b", dm_op_arg_int(ctx, "axis_b", 1), b->ndim, 0, &xb));
  g->trans_a = dm_op_arg_int(ctx, "trans_a", 0) != 0;
  g->trans_b = dm_op_arg_int(ctx, "trans_b", 0) != 0;
  int64_t ar = dm_dims_product(a, 0, xa), ac = dm_dims_product(a, xa, a->ndim);
  int64_t br = dm_dims_product(b, 0, xb), bcols = dm_dims_product(b, xb, b->ndim);
  g->M = g->trans_a ? ac : ar;
  g->K = g->trans_a ? ar : ac;
  int64_t kb = g->trans_b ? bcols : br;
  g->N = g->trans_b ? br : bcols;
  char as[96], bs[96];
  if (kb != g->K)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "A is %s flattened at axis_a %d to %lldx%lld and B is %s flattened at "
                       "axis_b %d to %lldx%lld (trans_a %d, trans_b %d): K differs (%lld vs "
                       "%lld)",
                       dm_shape_str(a, as, sizeof as), xa, (long long)ar, (long long)ac,
                       dm_shape_str(b, bs, sizeof bs), xb, (long long)br, (long long)bcols,
                       g->trans_a, g->trans_b, (long long)g->K, (long long)kb);
  g->a_mats = g->b_mats = g->batch = 1;
  DM_TRY(check_y_size(ctx, g));
  g->y_ndim = 2;
  g->y_dims[0] = g->M;
  g->y_dims[1] = g->N;
  return DM_OK;
}

dm_status dm_bmm_op_geometry(dm_op_ctx *ctx, dm_bmm_geom *g) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  if (strncmp(dm_op_type(ctx), "MatMul", 6) == 0)
    return dm_matmul_geometry(ctx, a, b, g);
  return dm_batch_matmul_geometry(ctx, a, b, g);
}

int64_t dm_bmm_uniform_step(const dm_bmm_geom *g, int of_b) {
  if (g->batch <= 1)
    return 0;
  int64_t a0, b0, a1, b1;
  dm_bmm_pick(g, 1, &a1, &b1);
  int64_t s = of_b ? b1 : a1;
  for (int64_t i = 2; i < g->batch; i++) {
    dm_bmm_pick(g, i, &a0, &b0);
    if ((of_b ? b0 : a0) != i * s)
      return -1;
  }
  return s;
}

/* ---- forward ----------------------------------------------------------------------- */

static dm_status check_dtypes(dm_op_ctx *ctx, int n) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  const dm_tensor *dy = n > 2 ? dm_op_input(ctx, 2) : a;
  if (!dm_is_float_or_reduced(a->dtype) || b->dtype != a->dtype || dy->dtype != a->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       n > 2 ? "A, B, dY are %s, %s, %s; expected all FLOAT, all FLOAT16 or "
                               "all BFLOAT16"
                             : "A, B are %s, %s%.0s; expected both FLOAT, both FLOAT16 or both "
                               "BFLOAT16",
                       dm_dtype_name(a->dtype), dm_dtype_name(b->dtype), dm_dtype_name(dy->dtype));
  return DM_OK;
}

static dm_status bmm_infer(dm_op_ctx *ctx) {
  DM_TRY(check_dtypes(ctx, 2));
  dm_bmm_geom g;
  DM_TRY(dm_bmm_op_geometry(ctx, &g));
  return dm_op_set_output(ctx, 0, dm_op_input(ctx, 0)->dtype, g.y_ndim, g.y_dims);
}

static void bmm_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  dm_bmm_geom g;
  if (dm_bmm_op_geometry(ctx, &g) == DM_OK)
    c->flops = 2.0 * (double)g.batch * (double)g.M * (double)g.N * (double)g.K;
}

/* FP32 views of the operands: the data itself for FLOAT, a widened copy (exact) in *buf
 * for the 16-bit dtypes. */
static dm_status widen_all(dm_dtype t, int n, const void *const *src, const size_t *len,
                           const float **dst, float **buf) {
  *buf = NULL;
  if (t == DM_FLOAT) {
    for (int i = 0; i < n; i++)
      dst[i] = src[i];
    return DM_OK;
  }
  size_t total = 0;
  for (int i = 0; i < n; i++)
    total += len[i];
  *buf = malloc((total ? total : 1) * sizeof(float));
  if (!*buf)
    return DM_NOMEM("FP32 scratch for a 16-bit matrix product");
  float *p = *buf;
  for (int i = 0; i < n; i++) {
    dm_widen(t, src[i], p, len[i]);
    dst[i] = p;
    p += len[i];
  }
  return DM_OK;
}

dm_status dm_bmm_forward_begin(dm_op_ctx *ctx, dm_bmm_geom *g) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_tensors_alias(y, a) || dm_tensors_alias(y, b))
    dm_tensor_reset(y); /* the kernels write Y before they have read all of A and B */
  DM_TRY(bmm_infer(ctx));
  return dm_bmm_op_geometry(ctx, g);
}

static dm_status bmm_run(dm_op_ctx *ctx) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  dm_tensor *y = dm_op_output(ctx, 0);
  dm_bmm_geom g;
  DM_TRY(dm_bmm_forward_begin(ctx, &g));
  int64_t M = g.M, N = g.N, K = g.K;
  dm_dtype t = a->dtype;
  const void *src[] = {dm_tensor_data(a), dm_tensor_data(b)};
  size_t len[] = {(size_t)(g.a_mats * M * K), (size_t)(g.b_mats * K * N)};
  const float *f[2];
  float *buf = NULL, *acc = NULL;
  DM_TRY(widen_all(t, 2, src, len, f, &buf));
  dm_status s = DM_OK;
  if (t != DM_FLOAT && !(acc = malloc((size_t)(M * N > 0 ? M * N : 1) * sizeof *acc)))
    s = DM_NOMEM("FP32 scratch for a 16-bit matrix product");
  void *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; s == DM_OK && i < g.batch; i++) {
    int64_t ai, bi;
    dm_bmm_pick(&g, i, &ai, &bi);
    float *c = t == DM_FLOAT ? (float *)py + i * M * N : acc;
    s = dm_gemm_f32(g.trans_a, g.trans_b, M, N, K, 1.0f, f[0] + ai * M * K, f[1] + bi * K * N,
                    0.0f, c);
    if (s == DM_OK && t != DM_FLOAT)
      dm_narrow(t, acc, (uint16_t *)py + i * M * N, (size_t)(M * N));
  }
  free(acc);
  free(buf);
  return s;
}

/* ---- gradients --------------------------------------------------------------------- */

/* One BatchMatMul of the maker: out = op(x) op(y) with the given transposes. */
static dm_status emit_bmm(dm_grad_ctx *g, const char *x, const char *y, int ta, int tb,
                          const char *out) {
  const char *in[] = {x, y};
  DM_TRY(dm_grad_emit(g, "BatchMatMul", 2, in, 1, &out));
  DM_TRY(dm_grad_set_arg_int(g, "trans_a", ta));
  return dm_grad_set_arg_int(g, "trans_b", tb);
}

static dm_status grad_op_emit(dm_grad_ctx *g, const char *type) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_input(g, 1), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0), dm_grad_input_grad(g, 1)};
  return dm_grad_emit(g, type, 3, in, 2, out);
}

static dm_status bmm_gradient(dm_grad_ctx *g) {
  if (dm_grad_arg_int(g, "broadcast", 0))
    return grad_op_emit(g, "BatchMatMulGradient");
  int ta = dm_grad_arg_int(g, "trans_a", 0) != 0, tb = dm_grad_arg_int(g, "trans_b", 0) != 0;
  const char *A = dm_grad_input(g, 0), *B = dm_grad_input(g, 1), *dY = dm_grad_output_grad(g, 0);
  if (dm_grad_input_needed(g, 0))
    DM_TRY(ta ? emit_bmm(g, B, dY, tb, 1, dm_grad_input_grad(g, 0))
              : emit_bmm(g, dY, B, 0, !tb, dm_grad_input_grad(g, 0)));
  if (dm_grad_input_needed(g, 1))
    DM_TRY(tb ? emit_bmm(g, dY, A, 1, ta, dm_grad_input_grad(g, 1))
              : emit_bmm(g, A, dY, !ta, 0, dm_grad_input_grad(g, 1)));
  return DM_OK;
}

static dm_status mm_gradient(dm_grad_ctx *g) { return grad_op_emit(g, "MatMulGradient"); }

static dm_status bmm_grad_infer(dm_op_ctx *ctx) {
  DM_TRY(check_dtypes(ctx, 3));
  dm_bmm_geom g;
  DM_TRY(dm_bmm_op_geometry(ctx, &g));
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  int same = dy->ndim == g.y_ndim;
  for (int d = 0; same && d < g.y_ndim; d++)
    same = dy->dims[d] == g.y_dims[d];
  if (!same) {
    char s[96], ys[96];
    dm_tensor shape = {.ndim = g.y_ndim}; /* only for its shape string */
    memcpy(shape.dims, g.y_dims, sizeof(int64_t) * (size_t)g.y_ndim);
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY is %s; the forward's Y is %s",
                       dm_shape_str(dy, s, sizeof s), dm_shape_str(&shape, ys, sizeof ys));
  }
  if (dm_op_output(ctx, 0) == dm_op_output(ctx, 1))
    return dm_op_error(ctx, DM_ERR_INVALID, "dA and dB are one blob");
  DM_TRY(dm_op_set_output(ctx, 0, a->dtype, a->ndim, a->dims));
  return dm_op_set_output(ctx, 1, b->dtype, b->ndim, b->dims);
}

static void bmm_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  dm_bmm_geom g;
  if (dm_bmm_op_geometry(ctx, &g) == DM_OK)
    c->flops = 4.0 * (double)g.batch * (double)g.M * (double)g.N * (double)g.K;
}

/* dA and dB, summed over the products that read each stored matrix. */
static dm_status bmm_grad_run(dm_op_ctx *ctx) {
  DM_TRY(bmm_grad_infer(ctx));
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *da = dm_op_output(ctx, 0), *db = dm_op_output(ctx, 1);
  dm_bmm_geom g;
  DM_TRY(dm_bmm_op_geometry(ctx, &g));
  int64_t M = g.M, N = g.N, K = g.K;
  int ta = g.trans_a, tb = g.trans_b;
  dm_dtype t = a->dtype;
  size_t na = (size_t)(g.a_mats * M * K), nb = (size_t)(g.b_mats * K * N);
  const void *src[] = {dm_tensor_data(a), dm_tensor_data(b), dm_tensor_data(dy)};
  size_t len[] = {na, nb, (size_t)(g.batch * M * N)};
  const float *f[3];
  float *buf = NULL, *acc = NULL;
  DM_TRY(widen_all(t, 3, src, len, f, &buf));
  float *pda, *pdb;
  if (t == DM_FLOAT) {
    pda = dm_tensor_mutable_data(da);
    pdb = dm_tensor_mutable_data(db);
  } else if (!(acc = malloc((na + nb ? na + nb : 1) * sizeof *acc))) {
    free(buf);
    return DM_NOMEM("FP32 accumulators of a 16-bit matrix product's gradient");
  } else {
    pda = acc;
    pdb = acc + na;
  }
  memset(pda, 0, na * sizeof *pda);
  memset(pdb, 0, nb * sizeof *pdb);
  dm_status s = DM_OK;
  for (int64_t i = 0; s == DM_OK && i < g.batch; i++) {
    int64_t ai, bi;
    dm_bmm_pick(&g, i, &ai, &bi);
    const float *A = f[0] + ai * M * K, *B = f[1] + bi * K * N, *dY = f[2] + i * M * N;
    float *dA = pda + ai * M * K, *dB = pdb + bi * K * N;
    s = ta ? dm_gemm_f32(tb, 1, K, M, N, 1.0f, B, dY, 1.0f, dA)
           : dm_gemm_f32(0, !tb, M, K, N, 1.0f, dY, B, 1.0f, dA);
    if (s == DM_OK)
      s = tb ? dm_gemm_f32(1, ta, N, K, M, 1.0f, dY, A, 1.0f, dB)
             : dm_gemm_f32(!ta, 0, K, N, M, 1.0f, A, dY, 1.0f, dB);
  }
  if (s == DM_OK && t != DM_FLOAT) {
    dm_narrow(t, pda, dm_tensor_mutable_data(da), na);
    dm_narrow(t, pdb, dm_tensor_mutable_data(db), nb);
  }
  free(acc);
  free(buf);
  return s;
}

/* ---- schemas and kernels ----------------------------------------------------------- */

static const dm_grad_slot grad_slots[] = {{0, NULL}, {1, NULL}, {-1, NULL}};

static const dm_op_schema bmm_schema = {
    .type = "BatchMatMul",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = bmm_args,
    .precision = DM_PREC_FP16,
    .doc = "A, B -> Y = op(A) op(B) over the last two dims, batch dims equal (or numpy's "
           "matmul broadcasting with `broadcast`); op a transpose with trans_a / trans_b.",
    .infer = bmm_infer,
    .cost = bmm_cost,
    .gradient = bmm_gradient,
};

static const dm_op_schema bmm_grad_schema = {
    .type = "BatchMatMulGradient",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 2,
    .max_outputs = 2,
    .args = bmm_args,
    .precision = DM_PREC_FP16,
    .doc = "A, B, dY -> dA, dB for BatchMatMul (same trans_a, trans_b, broadcast); a "
           "broadcast batch dim sums its products' gradients.",
    .infer = bmm_grad_infer,
    .cost = bmm_grad_cost,
    .grad_slots = grad_slots,
};

static const dm_op_schema mm_schema = {
    .type = "MatMul",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = mm_args,
    .precision = DM_PREC_FP16,
    .doc = "A, B -> Y (M x N) = op(A) op(B), A flattened to 2-D at axis_a and B at axis_b; "
           "op a transpose with trans_a / trans_b.",
    .infer = bmm_infer,
    .cost = bmm_cost,
    .gradient = mm_gradient,
};

static const dm_op_schema mm_grad_schema = {
    .type = "MatMulGradient",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 2,
    .max_outputs = 2,
    .args = mm_args,
    .precision = DM_PREC_FP16,
    .doc = "A, B, dY -> dA, dB for MatMul (same axis_a, axis_b, trans_a, trans_b), in A's "
           "and B's shapes.",
    .infer = bmm_grad_infer,
    .cost = bmm_grad_cost,
    .grad_slots = grad_slots,
};

static const dm_op_schema *const schemas[] = {&bmm_schema, &bmm_grad_schema, &mm_schema,
                                              &mm_grad_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "BatchMatMul", .device = DM_CPU, .run = bmm_run},
    {.type = "BatchMatMulGradient", .device = DM_CPU, .run = bmm_grad_run},
    {.type = "MatMul", .device = DM_CPU, .run = bmm_run},
    {.type = "MatMulGradient", .device = DM_CPU, .run = bmm_grad_run},
    {0},
};
const dm_op_family dm_family_batch_matmul = {schemas, kernels};
