/* where.c: the CUDA kernels (engine "") of Where (any dtype: elements moved by size, numpy
 * broadcast) and WhereGradient (FLOAT, FLOAT16 or BFLOAT16 dZ, deterministic sums over the
 * broadcast dims); the device code is where.cu, the broadcast geometry
 * operators/broadcast.h's, as on the CPU.
 */
#include <string.h>

#include "kernels.h"
#include "operators/broadcast.h"

static const char *const slots[] = {"C", "X", "Y"};

/* Both kernels' start: the schema's checks, Z's dims (rank 0 taken as rank 1) and the
 * strides of C, X and Y over them, and the op's stream. */
static dm_status where_prepare(dm_op_ctx *ctx, dmk_bcast3 *g, int64_t *n, cudaStream_t *s) {
  DM_TRY(dm_op_run_infer(ctx));
  DM_TRY(dm_gpu_op_stream(ctx, s));
  const dm_tensor *in[3] = {IN(0), IN(1), IN(2)};
  int nd;
  int64_t dims[DM_MAX_DIMS];
  DM_TRY(dm_bcast_numpy_shape(ctx, 3, in, slots, &nd, dims));
  if (nd == 0)
    nd = 1, dims[0] = 1;
  memset(g, 0, sizeof *g);
  g->ndim = nd;
  *n = 1;
  for (int d = 0; d < nd; d++)
    g->dims[d] = dims[d], *n *= dims[d];
  for (int k = 0; k < 3; k++)
    dm_bcast_numpy_strides(in[k], nd, dims, g->st[k]);
  return DM_OK;
}

static dm_status where_run(dm_op_ctx *ctx) { /* C, X, Y -> Z */
  dmk_bcast3 g;
  int64_t n;
  cudaStream_t s;
  DM_TRY(where_prepare(ctx, &g, &n, &s));
  DM_CUDA_TRY(dmk_where(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), MDATA(OUT(0)),
                        (int)dm_dtype_size(IN(1)->dtype), &g, n));
  return DM_OK;
}

static dm_status where_grad_run(dm_op_ctx *ctx) { /* C, X, Y, dZ -> dX, [dY] */
  dmk_bcast3 g;
  int64_t n;
  cudaStream_t s;
  DM_TRY(where_prepare(ctx, &g, &n, &s));
  const dm_tensor *dz = IN(3);
  for (int o = 0; o < dm_op_num_outputs(ctx); o++)
    DM_CUDA_TRY(dmk_where_grad(s, DATA(IN(0)), DATA(dz), dz->dtype, MDATA(OUT(o)), &g, o + 1,
                               o == 0, OUT(o)->numel));
  return DM_OK;
}

const dm_kernel_def dm_cuda_where_kernels[] = {
    GPU_KERNEL("Where", "", .run = where_run, GRAPH_SAFE),
    GPU_KERNEL("WhereGradient", "", .run = where_grad_run, GRAPH_SAFE),
    {0},
};
