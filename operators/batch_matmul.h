/* batch_matmul.h: the geometry of BatchMatMul and MatMul as a batch of row-major matrix
 * products, shared by the CPU kernels (batch_matmul.c), the oneDNN engine
 * (dnnl/matmul.c) and the cuBLAS kernels (gpu/batch_matmul_cublas.c) (internal).
 *
 * Every form is Y_i (M x N) = op(A_{a(i)}) (M x K) op(B_{b(i)}) (K x N) for the batch
 * matrices i of Y, where A holds a_mats stored matrices (M x K, or K x M with trans_a)
 * and B b_mats (K x N, or N x K with trans_b), each contiguous, and a(i), b(i) pick the
 * matrix each product reads: equal batch dims step together, a broadcast dim (1 or
 * missing) reads the same matrix again (numpy's matmul rule).
 */
#ifndef DM_OPERATORS_BATCH_MATMUL_H
#define DM_OPERATORS_BATCH_MATMUL_H

#include <stdint.h>

#include "core/tensor.h"

typedef struct dm_bmm_geom {
  int64_t M, N, K;
  int trans_a, trans_b; /* as the products read the stored matrices (0 for a 1-D input) */
  int64_t a_mats, b_mats, batch; /* matrices in A, in B, and products (matrices of Y) */
  int nb;                        /* Y's batch dims */
  int64_t bdims[DM_MAX_DIMS];
  int64_t a_step[DM_MAX_DIMS], b_step[DM_MAX_DIMS]; /* per batch dim, in matrices; 0: broadcast */
  int y_ndim;
  int64_t y_dims[DM_MAX_DIMS];
} dm_bmm_geom;

/* BatchMatMul's geometry from A, B and the op's trans_a, trans_b, broadcast (Caffe2's
 * rules, batch_matmul.c); DM_ERR_SHAPE / DM_ERR_INVALID naming A and B. */
DM_HIDDEN dm_status dm_batch_matmul_geometry(dm_op_ctx *ctx, const dm_tensor *a,
                                             const dm_tensor *b, dm_bmm_geom *g);
/* MatMul's: A flattened to 2-D at axis_a, B at axis_b, one product. */
DM_HIDDEN dm_status dm_matmul_geometry(dm_op_ctx *ctx, const dm_tensor *a, const dm_tensor *b,
                                       dm_bmm_geom *g);
/* The geometry of the op in ctx (BatchMatMul, MatMul or their gradients), by its type. */
DM_HIDDEN dm_status dm_bmm_op_geometry(dm_op_ctx *ctx, dm_bmm_geom *g);

/* The start of every forward kernel (CPU, oneDNN, cuBLAS): Y given fresh storage when it
 * is a view of an input (Reshape), the schema's checks run and Y sized, the geometry. */
DM_HIDDEN dm_status dm_bmm_forward_begin(dm_op_ctx *ctx, dm_bmm_geom *g);

/* The stored matrices product i reads. */
static inline void dm_bmm_pick(const dm_bmm_geom *g, int64_t i, int64_t *ai, int64_t *bi) {
  int64_t a = 0, b = 0;
  for (int d = g->nb - 1; d >= 0; d--) {
    int64_t j = i % g->bdims[d];
    i /= g->bdims[d];
    a += j * g->a_step[d];
    b += j * g->b_step[d];
  }
  *ai = a;
  *bi = b;
}

/* The stride, in matrices, from one product's A (B) to the next when it is the same for
 * every product (0 when all read one matrix), else -1: then a strided-batched GEMM
 * cannot run the batch in one call. */
DM_HIDDEN int64_t dm_bmm_uniform_step(const dm_bmm_geom *g, int of_b);

#endif
