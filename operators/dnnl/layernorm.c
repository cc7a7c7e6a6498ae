/* layernorm.c: the oneDNN engine's LayerNorm and LayerNormGradient, FLOAT or BFLOAT16 X,
 * Y, dY, dX with FLOAT gamma, beta and statistics, on oneDNN's layer normalization
 * primitives over X seen as plain (N, D) rows (operators/layernorm.c's view at `axis`).
 *
 * oneDNN keeps the mean and the biased variance; Caffe2's LayerNorm outputs the mean and
 * std = sqrt(var + epsilon), so the forward writes oneDNN's mean straight into the mean
 * output and takes std from the variance (in double), and the gradient hands oneDNN the
 * variance back as std^2 - epsilon. Arithmetic: oneDNN sums the statistics in FP32 where
 * the reference sums in double, so they agree within a few FP32 ulps times D (tests/
 * operators/test_dnnl_layernorm.c holds them to it), not bit for bit. FP16 is refused
 * (the engine runs FLOAT and BFLOAT16), as is a dX in dY's blob (oneDNN does not promise
 * to read dY before writing dX there): the reference kernels run those.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"
#include "kernels.h"

static int ln_supports(const dm_op_ctx *ctx) {
  return dm_dnnl_dtype_ok(ctx, 0, DM_DNNL_KIND(DM_DNNL_LNORM));
}

static int ln_grad_supports(const dm_op_ctx *ctx) {
  const unsigned kinds = DM_DNNL_KIND(DM_DNNL_LNORM) | DM_DNNL_KIND(DM_DNNL_LNORM_BWD);
  const char *dx = dm_op_output_name(ctx, 0), *dy = dm_op_input_name(ctx, 0);
  if (dx && dy && strcmp(dx, dy) == 0)
    return dm_op_refuse(ctx, "dX is dY's blob (the reference kernel runs it in place)");
  return dm_dnnl_dtype_ok(ctx, 4, kinds) && dm_dnnl_dtype_ok(ctx, 0, kinds);
}

typedef struct ln_state {
  dm_dnnl_prim fwd, bwd; /* bwd: fwd is its hint */
  dm_dnnl_buf stats;     /* N variances, then D zeros (the backward's unread shift) */
} ln_state;

static dm_status ln_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  *state = calloc(1, sizeof(ln_state));
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void ln_fini(void *state) {
  ln_state *s = state;
  dm_dnnl_prim_reset(&s->fwd);
  dm_dnnl_prim_reset(&s->bwd);
  dm_dnnl_buf_free(&s->stats);
  free(s);
}

/* The descriptions of one run: data (N, D) in X's dtype, statistics (N) and parameters
 * (D) in FP32. */
typedef struct ln_mds {
  int64_t N, D;
  dnnl_memory_desc_t data, stat, param;
} ln_mds;

static dm_status ln_describe(dm_op_ctx *ctx, const dm_tensor *x, ln_mds *m) {
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 0, &axis));
  m->N = dm_dims_product(x, 0, axis), m->D = dm_dims_product(x, axis, x->ndim);
  const int64_t nd[2] = {m->N, m->D};
  DM_TRY(dm_dnnl_plain_md(2, nd, x->dtype, &m->data));
  DM_TRY(dm_dnnl_plain_md(1, &m->N, DM_FLOAT, &m->stat));
  return dm_dnnl_plain_md(1, &m->D, DM_FLOAT, &m->param);
}

static unsigned ln_flags(int affine) { return affine ? dnnl_use_scale | dnnl_use_shift : 0; }

/* The forward primitive for these descriptions, kept in s->fwd. */
static dm_status fwd_prim(ln_state *s, const ln_mds *m, int affine, float eps) {
  if (dm_dnnl_prim_matches(&s->fwd, 1, &m->data))
    return DM_OK;
  dnnl_layer_normalization_desc_t d;
  DM_DNNL_TRY(dnnl_layer_normalization_forward_desc_init(&d, dnnl_forward_training, &m->data,
                                                         &m->stat, eps, ln_flags(affine)),
              "describing a layer normalization");
  return dm_dnnl_prim_make(&s->fwd, &d, NULL, NULL, 1, &m->data);
}

/* X [, gamma, beta] -> Y, mean, std */
static dm_status ln_run(dm_op_ctx *ctx) {
  ln_state *s = dm_op_state(ctx);
  DM_TRY(dm_op_run_infer(ctx)); /* the reference's checks, and every output declared plain */
  const dm_tensor *x = dm_op_input(ctx, 0);
  const int affine = dm_op_num_inputs(ctx) == 3;
  const float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  ln_mds m;
  DM_TRY(ln_describe(ctx, x, &m));
  if (m.N == 0)
    return DM_OK;
  float *mean = dm_tensor_mutable_data(dm_op_output(ctx, 1)); /* (N) */
  float *sd = dm_tensor_mutable_data(dm_op_output(ctx, 2));   /* (N) */
  DM_TRY(dm_dnnl_buf_reserve(&s->stats, (size_t)m.N * sizeof(float)));
  float *var = s->stats.data;
  DM_TRY(fwd_prim(s, &m, affine, eps));
  dm_dnnl_arg args[] = {
      {DNNL_ARG_SRC, &m.data, (void *)dm_tensor_data(x)},
      {DNNL_ARG_DST, &m.data, dm_tensor_mutable_data(dm_op_output(ctx, 0))},
      {DNNL_ARG_MEAN, &m.stat, mean},
      {DNNL_ARG_VARIANCE, &m.stat, var},
      {DNNL_ARG_SCALE, &m.param, affine ? (void *)dm_tensor_data(dm_op_input(ctx, 1)) : NULL},
      {DNNL_ARG_SHIFT, &m.param, affine ? (void *)dm_tensor_data(dm_op_input(ctx, 2)) : NULL}};
  DM_TRY(dm_dnnl_execute(s->fwd.prim, affine ? 6 : 4, args));
  for (int64_t i = 0; i < m.N; i++)
    sd[i] = (float)sqrt((double)var[i] + eps);
  return DM_OK;
}

/* dY, Y, mean, std, X [, gamma] -> dX [, dgamma, dbeta] */
static dm_status ln_grad_run(dm_op_ctx *ctx) {
  ln_state *s = dm_op_state(ctx);
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 4);
  const int affine = dm_op_num_inputs(ctx) == 6;
  const float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  ln_mds m;
  DM_TRY(ln_describe(ctx, x, &m));
  float *dg = affine ? dm_tensor_mutable_data(dm_op_output(ctx, 1)) : NULL; /* (D) */
  float *db = affine ? dm_tensor_mutable_data(dm_op_output(ctx, 2)) : NULL; /* (D) */
  if (m.N == 0) { /* sums of nothing */
    for (int64_t j = 0; affine && j < m.D; j++)
      dg[j] = db[j] = 0;
    return DM_OK;
  }
  DM_TRY(dm_dnnl_buf_reserve(&s->stats, (size_t)(m.N + m.D) * sizeof(float)));
  float *var = s->stats.data, *shift = var + m.N;
  const float *sd = dm_tensor_data(dm_op_input(ctx, 3));
  for (int64_t i = 0; i < m.N; i++) /* the variance whose sqrt(var + epsilon) is std */
    var[i] = (float)((double)sd[i] * sd[i] - eps);
  memset(shift, 0, (size_t)m.D * sizeof(float));
  const unsigned flags = ln_flags(affine);
  if (!dm_dnnl_prim_matches(&s->bwd, 1, &m.data)) {
    dnnl_layer_normalization_desc_t fd, bd;
    DM_DNNL_TRY(dnnl_layer_normalization_forward_desc_init(&fd, dnnl_forward_training, &m.data,
                                                           &m.stat, eps, flags),
                "describing a layer normalization");
    DM_TRY(dm_dnnl_prim_make(&s->fwd, &fd, NULL, NULL, 0, NULL));
    DM_DNNL_TRY(dnnl_layer_normalization_backward_desc_init(
                    &bd, affine ? dnnl_backward : dnnl_backward_data, &m.data, &m.data, &m.stat,
                    eps, flags),
                "describing a layer normalization gradient");
    DM_TRY(dm_dnnl_prim_make(&s->bwd, &bd, NULL, s->fwd.pd, 1, &m.data));
  }
  dm_dnnl_arg args[] = {
      {DNNL_ARG_SRC, &m.data, (void *)dm_tensor_data(x)},
      {DNNL_ARG_DIFF_DST, &m.data, (void *)dm_tensor_data(dm_op_input(ctx, 0))},
      {DNNL_ARG_MEAN, &m.stat, (void *)dm_tensor_data(dm_op_input(ctx, 2))},
      {DNNL_ARG_VARIANCE, &m.stat, var},
      {DNNL_ARG_DIFF_SRC, &m.data, dm_tensor_mutable_data(dm_op_output(ctx, 0))},
      {DNNL_ARG_SCALE, &m.param, affine ? (void *)dm_tensor_data(dm_op_input(ctx, 5)) : NULL},
      {DNNL_ARG_SHIFT, &m.param, shift},
      {DNNL_ARG_DIFF_SCALE, &m.param, dg},
      {DNNL_ARG_DIFF_SHIFT, &m.param, db}};
  return dm_dnnl_execute(s->bwd.prim, affine ? 9 : 5, args);
}

const dm_kernel_def dm_dnnl_layernorm_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "LayerNorm", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = ln_init, .run = ln_run, .fini = ln_fini,
     .supports = ln_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "LayerNormGradient", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = ln_init, .run = ln_grad_run, .fini = ln_fini,
     .supports = ln_grad_supports},
    {0},
};
