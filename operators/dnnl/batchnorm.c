/* batchnorm.c: the oneDNN engine's SpatialBN (test and training mode) and SpatialBNGradient,
 * FLOAT or BFLOAT16 X/Y/dY/dX with FLOAT scale, bias and statistics, order NCHW, on
 * oneDNN's batch normalization primitives (use_scale | use_shift; use_global_stats for
 * is_test), run on X in the layout it arrives in: nChw16c from a convolution is read as
 * it is and Y and dX are written in it, so a Conv -> SpatialBN -> Relu -> Conv chain stays
 * blocked. A layout with at most a channel block (nchw, nhwc, nChw8c, nChw16c) of 3 to 5
 * dims is given to the primitive as it is; a plain X of other ranks is seen as (N, C, HW);
 * any other layout is reordered to plain first.
 *
 * Arithmetic: oneDNN accumulates the statistics and computes every output in FP32 (a BF16
 * X is widened, and Y rounded once), where the reference (operators/batchnorm.c) sums in
 * double: outputs agree within a few FP32 ulps times sqrt(N*H*W) (tests/operators/
 * test_dnnl_pool.c holds them to it), not bit for bit.
 *
 * Training: oneDNN gives the batch mean and biased variance (FP32); from them, in double
 * as the reference: running = running * momentum + batch * (1 - momentum), saved_mean =
 * mean, saved_inv_std = 1 / sqrt(var + epsilon). The gradient of a train-mode op gets
 * saved_mean and saved_inv_std; oneDNN's backward wants the variance, given as
 * 1 / inv_std^2 - epsilon (double, per channel). The gradient of an is_test op (mean and
 * var the forward's inputs, held constant) is oneDNN's backward with use_global_stats.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"
#include "kernels.h"
#include "operators/common.h"

static int bn_supports(const dm_op_ctx *ctx) {
  return dm_dnnl_nchw_order(ctx) && dm_dnnl_dtype_ok(ctx, 0, DM_DNNL_KIND(DM_DNNL_BN));
}

/* dX in dY's blob (the reference's in-place gradient) is the reference's to run: the
 * primitive reads dY in its own layout, maybe a reorder of it, while writing dX. */
static int bn_grad_supports(const dm_op_ctx *ctx) {
  const unsigned kinds = DM_DNNL_KIND(DM_DNNL_BN) | DM_DNNL_KIND(DM_DNNL_BN_BWD);
  const char *dx = dm_op_output_name(ctx, 0), *dy = dm_op_input_name(ctx, 2);
  if (dx && dy && strcmp(dx, dy) == 0)
    return dm_op_refuse(ctx, "dX is dY's blob (the reference kernel runs it in place)");
  return dm_dnnl_nchw_order(ctx) && dm_dnnl_dtype_ok(ctx, 0, kinds) &&
         dm_dnnl_dtype_ok(ctx, 2, kinds);
}

typedef struct bn_state {
  dm_dnnl_prim fwd, bwd;  /* bwd: fwd is its hint */
  dm_dnnl_buf scratch[2]; /* X reordered to plain; dY reordered to X's layout */
  dm_dnnl_buf stats;      /* 2 C floats: batch mean and variance; or the gradient's */
} bn_state;

static dm_status bn_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  *state = calloc(1, sizeof(bn_state));
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void bn_fini(void *state) {
  bn_state *s = state;
  dm_dnnl_prim_reset(&s->fwd);
  dm_dnnl_prim_reset(&s->bwd);
  dm_dnnl_buf_free(&s->scratch[0]);
  dm_dnnl_buf_free(&s->scratch[1]);
  dm_dnnl_buf_free(&s->stats);
  free(s);
}

/* X's data: md its layout (X's dims; the layout Y, dY and dX take), pmd the description
 * the primitive gets (md itself, or for a plain X of 2 or more than 5 dims, (N, C, HW)). */
typedef struct bn_data {
  dnnl_memory_desc_t md, pmd;
  void *x;
} bn_data;

static dm_status x_input(const dm_tensor *x, dm_dnnl_buf *scratch, bn_data *d) {
  DM_TRY(dm_dnnl_md_of(x, &d->md));
  d->x = dm_tensor_raw_data(x);
  int ok = x->ndim >= 3 && x->ndim <= 5 && dm_dnnl_channel_block(&d->md);
  if (!ok && !dm_dnnl_md_is_plain(&d->md)) {
    DM_TRY(dm_dnnl_plain_md(x->ndim, x->dims, x->dtype, &d->md));
    DM_TRY(dm_dnnl_input(x, &d->md, scratch, &d->x));
    ok = x->ndim >= 3 && x->ndim <= 5;
  }
  d->pmd = d->md;
  if (!ok) { /* plain, of a rank oneDNN's normalization does not take */
    int64_t v[3] = {x->dims[0], x->dims[1], 1};
    for (int i = 2; i < x->ndim; i++)
      v[2] *= x->dims[i];
    DM_TRY(dm_dnnl_plain_md(3, v, x->dtype, &d->pmd));
  }
  return DM_OK;
}

/* t's buffer in layout md (t's own now), its padding (channel blocks) zeroed unless it
 * holds X's data (in place; oneDNN keeps an output's padding zero anyway). */
static dm_status output_like(dm_tensor *t, const dm_tensor *x, const dnnl_memory_desc_t *md,
                             int keep_data, void **data) {
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  DM_TRY(dm_dnnl_output(t, x->dtype, x->ndim, dims, md, data));
  size_t bytes = dnnl_memory_desc_get_size(md);
  if (!keep_data && bytes > (size_t)x->numel * dm_dtype_size(x->dtype))
    memset(*data, 0, bytes);
  return DM_OK;
}

/* The forward primitive for X's description (training or inference), kept in s->fwd. */
static dm_status fwd_prim(bn_state *s, const dnnl_memory_desc_t *pmd, int global_stats,
                          float eps) {
  if (dm_dnnl_prim_matches(&s->fwd, 1, pmd))
    return DM_OK;
  unsigned flags = dnnl_use_scale | dnnl_use_shift | (global_stats ? dnnl_use_global_stats : 0);
  dnnl_batch_normalization_desc_t d;
  DM_DNNL_TRY(dnnl_batch_normalization_forward_desc_init(
                  &d, global_stats ? dnnl_forward_inference : dnnl_forward_training, pmd, eps,
                  flags),
              "describing a batch normalization");
  return dm_dnnl_prim_make(&s->fwd, &d, NULL, NULL, 1, pmd);
}

static dm_status bn_run(dm_op_ctx *ctx) {
  bn_state *s = dm_op_state(ctx);
  DM_TRY(dm_dnnl_check_shapes(ctx)); /* the reference's checks: dims, dtypes, outputs, eps */
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  const float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  const double mom = dm_op_arg_float(ctx, "momentum", 0.9f);
  const int64_t C = x->dims[1];
  bn_data d;
  DM_TRY(x_input(x, &s->scratch[0], &d));
  /* Y may be X (in place): the resize keeps X's buffer (same layout, same size) unless
   * another tensor shares it, which then keeps d.x alive; oneDNN's normalization runs in
   * place. */
  void *py;
  DM_TRY(output_like(y, x, &d.md, y == x && d.x == dm_tensor_raw_data(x), &py));
  for (int o = 1; o < dm_op_num_outputs(ctx); o++)
    DM_TRY(dm_op_set_output(ctx, o, DM_FLOAT, 1, &C));
  float *scale = (float *)dm_tensor_data(dm_op_input(ctx, 1)); /* (C) */
  float *bias = (float *)dm_tensor_data(dm_op_input(ctx, 2));  /* (C) */
  float *rmean = (float *)dm_tensor_data(dm_op_input(ctx, 3)); /* (C); may be output 1 */
  float *rvar = (float *)dm_tensor_data(dm_op_input(ctx, 4));  /* (C); may be output 2 */
  float *mean = rmean, *var = rvar;
  if (!is_test) { /* the batch statistics, oneDNN's outputs */
    DM_TRY(dm_dnnl_buf_reserve(&s->stats, 2 * (size_t)C * sizeof(float) + 1));
    mean = s->stats.data;
    var = mean + C;
  }
  if (x->numel) { /* (training refuses an X without values, is_test has nothing to do) */
    dnnl_memory_desc_t cmd;
    DM_TRY(dm_dnnl_plain_md(1, &C, DM_FLOAT, &cmd));
    DM_TRY(fwd_prim(s, &d.pmd, is_test, eps));
    dm_dnnl_arg args[] = {{DNNL_ARG_SRC, &d.pmd, d.x},   {DNNL_ARG_DST, &d.pmd, py},
                          {DNNL_ARG_SCALE, &cmd, scale}, {DNNL_ARG_SHIFT, &cmd, bias},
                          {DNNL_ARG_MEAN, &cmd, mean},   {DNNL_ARG_VARIANCE, &cmd, var}};
    DM_TRY(dm_dnnl_execute(s->fwd.prim, 6, args));
  }
  if (is_test)
    return DM_OK;
  float *out_rm = dm_tensor_mutable_data(dm_op_output(ctx, 1));
  float *out_rv = dm_tensor_mutable_data(dm_op_output(ctx, 2));
  float *saved_mean = dm_tensor_mutable_data(dm_op_output(ctx, 3));
  float *saved_inv = dm_tensor_mutable_data(dm_op_output(ctx, 4));
  for (int64_t c = 0; c < C; c++) {
    /* The running inputs are read before the (possibly in-place) outputs are written. */
    double m = mean[c], v = var[c], rm = rmean[c], rv = rvar[c];
    out_rm[c] = (float)(rm * mom + m * (1 - mom));
    out_rv[c] = (float)(rv * mom + v * (1 - mom));
    saved_mean[c] = (float)m;
    saved_inv[c] = (float)(1.0 / sqrt(v + eps));
  }
  return DM_OK;
}

/* X, scale, dY, saved_mean, saved_inv_std (or mean, var when is_test) -> dX, dscale, dbias. */
static dm_status bn_grad_run(dm_op_ctx *ctx) {
  bn_state *s = dm_op_state(ctx);
  DM_TRY(dm_dnnl_check_shapes(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0);
  /* dX is not X (the reference's check, above) nor dY (refused in supports) */
  const int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  const float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  const int64_t C = x->dims[1];
  bn_data d;
  void *pdy, *pdx;
  DM_TRY(x_input(x, &s->scratch[0], &d));
  DM_TRY(dm_dnnl_input(dy, &d.md, &s->scratch[1], &pdy)); /* dY in X's layout */
  DM_TRY(output_like(dx, x, &d.md, 0, &pdx));
  DM_TRY(dm_op_set_output(ctx, 1, DM_FLOAT, 1, &C));
  DM_TRY(dm_op_set_output(ctx, 2, DM_FLOAT, 1, &C));
  float *scale = (float *)dm_tensor_data(dm_op_input(ctx, 1));  /* (C) */
  float *s_mean = (float *)dm_tensor_data(dm_op_input(ctx, 3)); /* (C) */
  float *s_inv = (float *)dm_tensor_data(dm_op_input(ctx, 4));  /* (C) inv_std, or var */
  float *dscale = dm_tensor_mutable_data(dm_op_output(ctx, 1)); /* (C) */
  float *dbias = dm_tensor_mutable_data(dm_op_output(ctx, 2));  /* (C) */
  if (x->numel == 0) { /* sums of nothing */
    for (int64_t c = 0; c < C; c++)
      dscale[c] = dbias[c] = 0;
    return DM_OK;
  }
  /* oneDNN's backward wants a shift too (read only when it fuses a Relu): zeros. */
  DM_TRY(dm_dnnl_buf_reserve(&s->stats, 2 * (size_t)C * sizeof(float)));
  float *shift = s->stats.data, *var = s_inv; /* is_test: the forward's var, as oneDNN wants */
  memset(shift, 0, (size_t)C * sizeof(float));
  if (!is_test) { /* the variance whose 1 / sqrt(var + epsilon) is saved_inv_std */
    var = shift + C;
    for (int64_t c = 0; c < C; c++) {
      double inv = s_inv[c];
      var[c] = (float)(1.0 / (inv * inv) - eps);
    }
  }
  if (!dm_dnnl_prim_matches(&s->bwd, 1, &d.pmd)) {
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (is_test ? dnnl_use_global_stats : 0);
    dnnl_batch_normalization_desc_t fd, bd;
    DM_DNNL_TRY(dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &d.pmd,
                                                           eps, flags),
                "describing a batch normalization");
    DM_TRY(dm_dnnl_prim_make(&s->fwd, &fd, NULL, NULL, 0, NULL));
    DM_DNNL_TRY(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &d.pmd, &d.pmd,
                                                            eps, flags),
                "describing a batch normalization gradient");
    DM_TRY(dm_dnnl_prim_make(&s->bwd, &bd, NULL, s->fwd.pd, 1, &d.pmd));
  }
  dnnl_memory_desc_t cmd;
  DM_TRY(dm_dnnl_plain_md(1, &C, DM_FLOAT, &cmd));
  dm_dnnl_arg args[] = {
      {DNNL_ARG_SRC, &d.pmd, d.x},       {DNNL_ARG_DIFF_DST, &d.pmd, pdy},
      {DNNL_ARG_SCALE, &cmd, scale},     {DNNL_ARG_SHIFT, &cmd, shift},
      {DNNL_ARG_MEAN, &cmd, s_mean},     {DNNL_ARG_VARIANCE, &cmd, var},
      {DNNL_ARG_DIFF_SRC, &d.pmd, pdx},  {DNNL_ARG_DIFF_SCALE, &cmd, dscale},
      {DNNL_ARG_DIFF_SHIFT, &cmd, dbias}};
  return dm_dnnl_execute(s->bwd.prim, 9, args);
}

const dm_kernel_def dm_dnnl_bn_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "SpatialBN", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = bn_init, .run = bn_run, .fini = bn_fini,
     .supports = bn_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "SpatialBNGradient", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = bn_init, .run = bn_grad_run, .fini = bn_fini,
     .supports = bn_grad_supports},
    {0},
};
