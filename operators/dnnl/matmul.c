/* matmul.c: the oneDNN engine's BatchMatMul and MatMul (FLOAT, BFLOAT16) on the matmul
 * primitive.
 *
 * The reference's semantics and checks (operators/batch_matmul.c): the shape and dtype
 * checks are the schema's own inference and the geometry dm_bmm_op_geometry, so the
 * errors read the same. The product is described to oneDNN as it is stored, with no
 * copy: A as [batch dims of A, M, K] and B as [batch dims of B, K, N], a broadcast
 * batch dim given as 1 (oneDNN broadcasts those), a transpose as swapped strides of the
 * last two dims, a 1-D A as one row and a 1-D B as one column; Y is [batch dims, M, N],
 * plain, which are Y's own bytes whatever unit dims its shape drops. BFLOAT16: oneDNN
 * accumulates in FP32 and rounds each result once, as the reference.
 *
 * The gradients: BatchMatMul's maker emits BatchMatMuls without broadcast, which run
 * here; BatchMatMulGradient and MatMulGradient run the reference kernels.
 */
#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"
#include "kernels.h"
#include "operators/batch_matmul.h"

typedef struct mm_state {
  dm_dnnl_prim fwd;
} mm_state;

static dm_status mm_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  *state = calloc(1, sizeof(mm_state));
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void mm_fini(void *state) {
  mm_state *s = state;
  dm_dnnl_prim_reset(&s->fwd);
  free(s);
}

static int mm_supports(const dm_op_ctx *ctx) {
  for (int i = 0; i < 2; i++)
    if (!dm_dnnl_dtype_ok(ctx, i, DM_DNNL_KIND(DM_DNNL_MATMUL)))
      return 0;
  return 1;
}

/* One operand: its batch dims (1 where it is broadcast), then rows x cols of op(X) with
 * the strides of X as stored (trans: column-major), the batch strides contiguous. */
static dm_status operand_md(const dm_bmm_geom *g, const int64_t *step, int64_t rows,
                            int64_t cols, int trans, dnnl_data_type_t dt,
                            dnnl_memory_desc_t *md) {
  dnnl_dims_t dims, strides;
  int n = g->nb;
  dims[n] = rows;
  dims[n + 1] = cols;
  strides[n] = trans ? 1 : cols;
  strides[n + 1] = trans ? rows : 1;
  int64_t s = rows * cols;
  for (int d = n - 1; d >= 0; d--) {
    dims[d] = step ? (step[d] == 0 ? 1 : g->bdims[d]) : g->bdims[d];
    strides[d] = s > 0 ? s : 1;
    s *= dims[d];
  }
  DM_DNNL_TRY(dnnl_memory_desc_init_by_strides(md, n + 2, dims, dt, strides),
              "describing a matmul operand");
  return DM_OK;
}

static dm_status mm_run(dm_op_ctx *ctx) {
  mm_state *s = dm_op_state(ctx);
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  dm_tensor *y = dm_op_output(ctx, 0);
  dm_bmm_geom g;
  DM_TRY(dm_bmm_forward_begin(ctx, &g)); /* the reference's checks; Y resized, plain */
  if (g.batch == 0 || g.M == 0 || g.N == 0)
    return DM_OK;
  void *ydata = dm_tensor_mutable_data(y);
  if (!ydata)
    return DM_NOMEM("the matmul's output");
  if (g.K == 0) { /* no product: zeros (0 is all-zero bits in FLOAT and BFLOAT16) */
    memset(ydata, 0, dm_tensor_nbytes(y));
    return DM_OK;
  }
  const void *adata = dm_tensor_data(a), *bdata = dm_tensor_data(b);
  if (!adata || !bdata)
    return DM_NOMEM("converting the matmul's inputs to plain");
  dnnl_data_type_t dt;
  dm_dnnl_dtype(a->dtype, &dt);
  dnnl_memory_desc_t key[3];
  DM_TRY(operand_md(&g, g.a_step, g.M, g.K, g.trans_a, dt, &key[0]));
  DM_TRY(operand_md(&g, g.b_step, g.K, g.N, g.trans_b, dt, &key[1]));
  DM_TRY(operand_md(&g, NULL, g.M, g.N, 0, dt, &key[2]));
  if (!dm_dnnl_prim_matches(&s->fwd, 3, key)) {
    dnnl_matmul_desc_t desc;
    DM_DNNL_TRY(dnnl_matmul_desc_init(&desc, &key[0], &key[1], NULL, &key[2]),
                "describing a matmul");
    DM_TRY(dm_dnnl_prim_make(&s->fwd, &desc, NULL, NULL, 3, key));
  }
  dm_dnnl_arg args[] = {{DNNL_ARG_SRC, &key[0], (void *)adata},
                        {DNNL_ARG_WEIGHTS, &key[1], (void *)bdata},
                        {DNNL_ARG_DST, &key[2], ydata}};
  return dm_dnnl_execute(s->fwd.prim, 3, args);
}

const dm_kernel_def dm_dnnl_matmul_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "BatchMatMul", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = mm_init, .run = mm_run, .fini = mm_fini,
     .supports = mm_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "MatMul", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = mm_init, .run = mm_run, .fini = mm_fini,
     .supports = mm_supports},
    {0},
};
