/* loss_scale.c: the CUDA kernels (engine "") of UnscaleAndCheck and UpdateLossScale
 * (schemas and CPU kernels in operators/loss_scale.c; device code in optimizer.cu).
 * found_inf is set and read on the device: no value comes back to the host. A bad loss
 * scale, which the CPU reports as an error, sets found_inf instead (the step is
 * skipped), and UpdateLossScale then leaves the state unchanged.
 */
#include <stdlib.h>

#include "kernels.h"
#include "operators/loss_scale.h"

/* loss_scale, g_1..g_n -> g_1..g_n, found_inf: found_inf is set by the kernels, read by
 * the update ops' skip inputs; no value comes back to the host. Two launches whatever n:
 * found_inf from the scale, then every gradient in one multi-tensor launch (a table of
 * the gradients uploaded on the stream, multi_tensor.c). */
static dm_status unscale_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx)); /* names, dtypes, and every output sized */
  const int n_in = dm_op_num_inputs(ctx), n = n_in - 1;
  const float *scale = DATA(IN(0));
  float *found = MDATA(OUT(n_in - 1));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_unscale_begin(s, scale, found));
  dmk_mt_tensor *t = calloc((size_t)n, sizeof *t);
  if (!t)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the table of %d gradients", n);
  for (int i = 0; i < n; i++) {
    const dm_tensor *g = IN(i + 1);
    t[i] = (dmk_mt_tensor){.p = {(void *)DATA(g), MDATA(OUT(i))}, .n = g->numel,
                           .dtype = (int32_t)g->dtype};
  }
  const dmk_mt_tensor *dt;
  const dmk_mt_chunk *dc;
  int64_t nc;
  dm_status st = dm_gpu_mt_upload(ctx, t, n, &dt, &dc, &nc);
  free(t);
  DM_TRY(st);
  DM_CUDA_TRY(dmk_multi_unscale(s, dt, dc, nc, scale, found));
  return DM_OK;
}

static dm_status update_init(dm_op_ctx *ctx, void **state) {
  dm_loss_scale_params p;
  *state = NULL;
  return dm_loss_scale_params_get(ctx, &p);
}

/* loss_scale, found_inf, good_steps, skipped_steps -> loss_scale, good_steps, skipped_steps */
static dm_status update_run(dm_op_ctx *ctx) {
  dm_loss_scale_params p;
  DM_TRY(dm_loss_scale_params_get(ctx, &p));
  DM_TRY(dm_op_run_infer(ctx));
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_update_loss_scale(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), DATA(IN(3)),
                                    MDATA(OUT(0)), MDATA(OUT(1)), MDATA(OUT(2)), p.dynamic,
                                    p.growth, p.backoff, p.min_scale, p.max_scale, p.interval));
  return DM_OK;
}

const dm_kernel_def dm_cuda_loss_scale_kernels[] = {
    GPU_KERNEL("UnscaleAndCheck", "", .run = unscale_run),
    GPU_KERNEL("UpdateLossScale", "", .init = update_init, .run = update_run, GRAPH_SAFE),
    {0},
};
