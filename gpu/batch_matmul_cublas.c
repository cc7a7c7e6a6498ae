/* batch_matmul_cublas.c: the cuBLAS BatchMatMul, MatMul and their gradient ops (plain
 * engine). The geometry is the CPU kernels' (operators/batch_matmul.h).
 *
 * One cublasGemmStridedBatchedEx runs every product of Y when the products step through
 * A and B with one stride each (equal batch dims, or a whole operand broadcast: stride
 * 0); other broadcasts run one call per product. FP32 uses CUBLAS_COMPUTE_32F_PEDANTIC
 * (no TF32); FP16/BF16 use CUBLAS_COMPUTE_32F on tensor cores, each result rounded once
 * into the 16-bit output, as the CPU reference.
 *
 * The gradient ops write dA (dB) with one batched call when each stored matrix of A (B)
 * is read by one product; when a broadcast matrix is read by several, their products
 * are summed into an FP32 buffer (the output itself for FP32, scratch otherwise) and a
 * 16-bit output is rounded from it once, as the CPU kernel does. All work is on the op's
 * stream, no host values are read and no memory is allocated beyond the context's
 * scratch, so the kernels are graph-safe.
 */
#include <limits.h>

#include "cudnn_common.h"
#include "operators/batch_matmul.h"

static cudaDataType_t blas_type(dm_dtype t) {
  return t == DM_FLOAT16 ? CUDA_R_16F : t == DM_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Row-major C (M x N, stride sc between products) = op(A) op(B) + beta C over `count`
 * products, A stored M x K (K x M with ta), B K x N (N x K with tb), strides sa, sb in
 * elements. cuBLAS is column-major, so it computes C^T = op(B)^T op(A)^T on the same
 * bytes. A and B are of dtype t, C of ct (FLOAT or t). */
static dm_status rm_gemm(dm_gpu_context *c, dm_dtype t, int ta, int tb, int64_t M, int64_t N,
                         int64_t K, const void *A, int64_t sa, const void *B, int64_t sb,
                         float beta, void *C, dm_dtype ct, int64_t sc, int64_t count) {
  cudaDataType_t ab = blas_type(t);
  cublasComputeType_t comp = t == DM_FLOAT ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  int64_t lda = ta ? M : K, ldb = tb ? K : N;
  DM_CUBLAS_TRY(cublasGemmStridedBatchedEx(
      c->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
      (int)K, &k_one, B, ab, (int)(ldb > 0 ? ldb : 1), sb, A, ab, (int)(lda > 0 ? lda : 1), sa,
      &beta, C, blas_type(ct), (int)(N > 0 ? N : 1), sc, (int)count, comp, CUBLAS_GEMM_DEFAULT));
  return DM_OK;
}

/* cuBLAS takes int sizes. */
static dm_status check_int_sizes(dm_op_ctx *ctx, const dm_bmm_geom *g) {
  if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX || g->batch > INT_MAX)
    return dm_op_error(ctx, DM_ERR_LIMIT,
                       "%lld products of %lldx%lld by %lldx%lld exceed cuBLAS's int sizes",
                       (long long)g->batch, (long long)g->M, (long long)g->K, (long long)g->K,
                       (long long)g->N);
  return DM_OK;
}

static size_t esize(dm_dtype t) { return t == DM_FLOAT ? 4 : 2; }

static dm_status bmm_forward(dm_op_ctx *ctx) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  dm_tensor *y = dm_op_output(ctx, 0);
  dm_bmm_geom g;
  DM_TRY(dm_bmm_forward_begin(ctx, &g));
  DM_TRY(check_int_sizes(ctx, &g));
  int64_t M = g.M, N = g.N, K = g.K;
  if (g.batch == 0 || M == 0 || N == 0)
    return DM_OK;
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  char *py = dm_tensor_mutable_data(y);
  if (K == 0) {
    DM_CUDA_TRY(cudaMemsetAsync(py, 0, dm_tensor_nbytes(y), c->stream));
    return DM_OK;
  }
  const char *pa = dm_tensor_data(a), *pb = dm_tensor_data(b);
  int64_t sa = dm_bmm_uniform_step(&g, 0), sb = dm_bmm_uniform_step(&g, 1);
  size_t es = esize(a->dtype);
  if (sa >= 0 && sb >= 0)
    return rm_gemm(c, a->dtype, g.trans_a, g.trans_b, M, N, K, pa, sa * M * K, pb, sb * K * N,
                   0.0f, py, y->dtype, M * N, g.batch);
  for (int64_t i = 0; i < g.batch; i++) {
    int64_t ai, bi;
    dm_bmm_pick(&g, i, &ai, &bi);
    DM_TRY(rm_gemm(c, a->dtype, g.trans_a, g.trans_b, M, N, K, pa + (size_t)(ai * M * K) * es,
                   0, pb + (size_t)(bi * K * N) * es, 0, 0.0f, py + (size_t)(i * M * N) * es,
                   y->dtype, 0, 1));
  }
  return DM_OK;
}

/* One input's gradient, dX = the sum over products i of P_i, where P_i is the product of
 * X's matrix that product i reads (rows x cols) = op(L_i) op(R_i) (ta/tb on L and R as
 * stored; L_i, R_i of lrows x .. as the caller sets up). which: 0 for dA, 1 for dB. */
typedef struct side {
  int ta, tb;
  int64_t m, n, k;                  /* the product's M, N, K */
  const char *l, *r;                /* L's and R's data */
  int l_is_dy;                      /* L (else R) is dY; the other is the other input */
} side;

static dm_status input_grad(dm_gpu_context *c, const dm_bmm_geom *g, int which, dm_dtype t,
                            const side *s, dm_tensor *dx, int64_t mats) {
  size_t es = esize(t);
  int64_t xs = s->m * s->n;                         /* elements of one of dX's matrices */
  int64_t ys = g->M * g->N;                         /* of dY's */
  int64_t os = which ? g->M * g->K : g->K * g->N;   /* of the other input's */
  char *out = dm_tensor_mutable_data(dx);
  if (xs == 0 || mats == 0)
    return DM_OK;
  int64_t step = dm_bmm_uniform_step(g, which);
  int64_t ostep = dm_bmm_uniform_step(g, !which);
  int64_t ls = s->l_is_dy ? ys : os, rs = s->l_is_dy ? os : ys;
  int64_t lstep = s->l_is_dy ? 1 : ostep, rstep = s->l_is_dy ? ostep : 1;
  if (g->batch == 0 || s->k == 0) {
    DM_CUDA_TRY(cudaMemsetAsync(out, 0, dm_tensor_nbytes(dx), c->stream));
    return DM_OK;
  }
  if (step == 1 && mats == g->batch && ostep >= 0) /* each matrix read once: one call */
    return rm_gemm(c, t, s->ta, s->tb, s->m, s->n, s->k, s->l, lstep * ls, s->r, rstep * rs,
                   0.0f, out, t, xs, g->batch);
  /* several products read one matrix: sum them in FP32 */
  void *acc = out;
  if (t != DM_FLOAT)
    DM_TRY(dm_gpu_scratch(c, (size_t)(mats * xs) * sizeof(float), &acc));
  DM_CUDA_TRY(cudaMemsetAsync(acc, 0, (size_t)(mats * xs) * sizeof(float), c->stream));
  for (int64_t i = 0; i < g->batch; i++) {
    int64_t ai, bi;
    dm_bmm_pick(g, i, &ai, &bi);
    int64_t xi = which ? bi : ai, oi = which ? ai : bi;
    const char *l = s->l + (size_t)((s->l_is_dy ? i : oi) * ls) * es;
    const char *r = s->r + (size_t)((s->l_is_dy ? oi : i) * rs) * es;
    DM_TRY(rm_gemm(c, t, s->ta, s->tb, s->m, s->n, s->k, l, 0, r, 0, 1.0f,
                   (float *)acc + xi * xs, DM_FLOAT, 0, 1));
  }
  if (t != DM_FLOAT)
    DM_CUDA_TRY(dmk_cast(c->stream, DM_FLOAT, t, acc, out, mats * xs));
  return DM_OK;
}

/* The CPU kernel's products (operators/batch_matmul.c):
 *   ta 0: dA = dY op(B)^T    ta 1: dA = op(B) dY^T
 *   tb 0: dB = op(A)^T dY    tb 1: dB = dY^T op(A) */
static dm_status bmm_backward(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *da = dm_op_output(ctx, 0), *db = dm_op_output(ctx, 1);
  dm_bmm_geom g;
  DM_TRY(dm_bmm_op_geometry(ctx, &g));
  DM_TRY(check_int_sizes(ctx, &g));
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  int64_t M = g.M, N = g.N, K = g.K;
  int ta = g.trans_a, tb = g.trans_b;
  const char *pa = dm_tensor_data(a), *pb = dm_tensor_data(b), *pdy = dm_tensor_data(dy);
  side sa = ta ? (side){tb, 1, K, M, N, pb, pdy, 0} : (side){0, !tb, M, K, N, pdy, pb, 1};
  side sb = tb ? (side){1, ta, N, K, M, pdy, pa, 1} : (side){!ta, 0, K, N, M, pa, pdy, 0};
  DM_TRY(input_grad(c, &g, 0, a->dtype, &sa, da, g.a_mats));
  /* dA's FP32 scratch is consumed by its cast before dB may reuse it: same stream */
  return input_grad(c, &g, 1, a->dtype, &sb, db, g.b_mats);
}

const dm_kernel_def dm_cuda_batch_matmul_kernels[] = {
    GPU_KERNEL("BatchMatMul", "", .run = bmm_forward, GRAPH_SAFE),
    GPU_KERNEL("MatMul", "", .run = bmm_forward, GRAPH_SAFE),
    GPU_KERNEL("BatchMatMulGradient", "", .run = bmm_backward, GRAPH_SAFE),
    GPU_KERNEL("MatMulGradient", "", .run = bmm_backward, GRAPH_SAFE),
    {0},
};
