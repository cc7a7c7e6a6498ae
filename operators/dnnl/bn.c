/* bn.c: the oneDNN engine's SpatialBN (test and training mode) and SpatialBNGradient,
 * FLOAT or BFLOAT16 X/Y/dY/dX with FLOAT scale, bias and statistics, order NCHW, on X in
 * the layout it arrives in: nChw16c from a convolution is read as it is and Y and dX are
 * written in it, so a Conv -> SpatialBN -> Relu -> Conv chain stays blocked.
 *
 * Not oneDNN's batch normalization primitive: it accumulates the statistics and computes
 * each output in FP32, where the reference (operators/batchnorm.c) sums in double and
 * rounds every output once from a double, and the reference's tests hold it to that (Y
 * within half an FP32 ulp, saved_inv_std likewise); oneDNN's results are a few FP32 ulps
 * off (seen: Y 0.527919292 for 0.52791924; saved_inv_std 0.622466266 for 0.622466343). So
 * these kernels run the reference's arithmetic (the same double sums in the same order,
 * one rounding per output: bit-identical results) over the layout's own addressing: in
 * any oneDNN layout whose channels are at most blocked once and whose spatial positions
 * are evenly strided (nchw, nhwc, nChw8c, nChw16c; others are reordered to plain), a
 * channel of an image is a run of H*W values `stride` apart, as the reference's NHWC
 * runs are. The blocks' channel padding is left zero, as oneDNN's consumers want.
 *
 * Training: running = running * momentum + batch * (1 - momentum) with the biased batch
 * variance; saved_inv_std = 1 / sqrt(var + epsilon), as the reference. The gradient of
 * an is_test op treats mean and var as constants.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"
#include "core/half.h"
#include "dnnl_common.h"
#include "kernels.h"
#include "operators/common.h"

static int bn_supports(const dm_op_ctx *ctx) {
  return dm_dnnl_nchw_order(ctx) && dm_dnnl_float_or_bf16(ctx, 0);
}

static int bn_grad_supports(const dm_op_ctx *ctx) {
  return dm_dnnl_nchw_order(ctx) && dm_dnnl_float_or_bf16(ctx, 0) && dm_dnnl_float_or_bf16(ctx, 2);
}

typedef struct bn_state {
  dm_dnnl_buf scratch[2]; /* X reordered to plain; dY reordered to X's layout */
} bn_state;

static dm_status bn_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  *state = calloc(1, sizeof(bn_state));
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void bn_fini(void *state) {
  bn_state *s = state;
  dm_dnnl_buf_free(&s->scratch[0]);
  dm_dnnl_buf_free(&s->scratch[1]);
  free(s);
}

/* Where the values of channel c of image n sit in a layout: H*W of them from
 * off0 + n s0 + (c / blk) s1 + c % blk, `stride` apart. */
typedef struct chan_layout {
  int64_t off0, s0, s1, blk, stride, N, C, HW;
} chan_layout;

/* l for md (of X's dims), or 0 when md's layout is not of that form. */
static int chan_layout_of(const dnnl_memory_desc_t *md, chan_layout *l) {
  const int nd = md->ndims;
  if (!(l->blk = dm_dnnl_channel_block(md)))
    return 0;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  l->off0 = md->offset0;
  l->s0 = b->strides[0];
  l->s1 = b->strides[1];
  l->N = md->dims[0];
  l->C = md->dims[1];
  l->HW = 1;
  l->stride = nd > 2 ? b->strides[nd - 1] : 1;
  for (int i = 2; i < nd; i++) {
    l->HW *= md->dims[i];
    if (i < nd - 1 && b->strides[i] != md->dims[i + 1] * b->strides[i + 1])
      return 0; /* spatial positions not evenly strided */
  }
  return 1;
}

static inline int64_t chan_base(const chan_layout *l, int64_t n, int64_t c) {
  return l->off0 + n * l->s0 + (c / l->blk) * l->s1 + c % l->blk;
}

static inline double ld(const void *p, dm_dtype t, int64_t i) {
  return t == DM_FLOAT ? ((const float *)p)[i] : dm_bf16_to_float(((const uint16_t *)p)[i]);
}

static inline void st(void *p, dm_dtype t, int64_t i, double v) {
  if (t == DM_FLOAT)
    ((float *)p)[i] = (float)v;
  else
    ((uint16_t *)p)[i] = dm_double_to_bf16(v);
}

/* X's data and layout as the loops address it: as it is, or reordered to plain. */
static dm_status x_input(const dm_tensor *x, dm_dnnl_buf *scratch, dnnl_memory_desc_t *md,
                         const void **data, chan_layout *l) {
  DM_TRY(dm_dnnl_md_of(x, md));
  *data = dm_tensor_raw_data(x);
  if (chan_layout_of(md, l))
    return DM_OK;
  DM_TRY(dm_dnnl_plain_md(x->ndim, x->dims, x->dtype, md));
  void *p;
  DM_TRY(dm_dnnl_input(x, md, scratch, &p));
  *data = p;
  chan_layout_of(md, l);
  return DM_OK;
}

/* t's buffer in layout md (t's own now), its padding (channel blocks) zeroed. */
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

static dm_status bn_run(dm_op_ctx *ctx) {
  bn_state *s = dm_op_state(ctx);
  DM_TRY(dm_dnnl_check_shapes(ctx)); /* the reference's checks: dims, dtypes, outputs, eps */
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  const dm_dtype t = x->dtype;
  const double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  const double mom = dm_op_arg_float(ctx, "momentum", 0.9f);
  dnnl_memory_desc_t md;
  const void *px;
  chan_layout l;
  DM_TRY(x_input(x, &s->scratch[0], &md, &px, &l));
  const int64_t C = l.C, M = l.N * l.HW;
  /* Y may be X (in place): the resize keeps X's buffer (same layout, same size) unless
   * another tensor shares it, which then keeps px alive. Each block of X is read before
   * the same block of Y is written, and the statistics are complete by then. */
  void *py;
  DM_TRY(output_like(y, x, &md, y == x && px == dm_tensor_raw_data(x), &py));
  for (int o = 1; o < dm_op_num_outputs(ctx); o++)
    DM_TRY(dm_op_set_output(ctx, o, DM_FLOAT, 1, &C));
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1)); /* (C) */
  const float *bias = dm_tensor_data(dm_op_input(ctx, 2));  /* (C) */
  const float *rmean = dm_tensor_data(dm_op_input(ctx, 3)); /* (C); may be output 1 */
  const float *rvar = dm_tensor_data(dm_op_input(ctx, 4));  /* (C); may be output 2 */
  float *out_rm = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 1));
  float *out_rv = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 2));
  float *saved_mean = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 3));
  float *saved_inv = is_test ? NULL : dm_tensor_mutable_data(dm_op_output(ctx, 4));
#if DM_HAVE_OPENMP
#pragma omp parallel for if (x->numel > (1 << 15))
#endif
  for (int64_t c = 0; c < C; c++) {
    double mean, var;
    if (is_test) {
      mean = rmean[c], var = rvar[c];
    } else {
      double sum = 0, ss = 0;
      for (int64_t n = 0; n < l.N; n++)
        for (int64_t j = 0, i = chan_base(&l, n, c); j < l.HW; j++, i += l.stride)
          sum += ld(px, t, i);
      mean = sum / (double)M;
      for (int64_t n = 0; n < l.N; n++)
        for (int64_t j = 0, i = chan_base(&l, n, c); j < l.HW; j++, i += l.stride) {
          double d = ld(px, t, i) - mean;
          ss += d * d;
        }
      var = ss / (double)M;
    }
    double inv = 1.0 / sqrt(var + eps), a = scale[c] * inv, b = bias[c];
    for (int64_t n = 0; n < l.N; n++)
      for (int64_t j = 0, i = chan_base(&l, n, c); j < l.HW; j++, i += l.stride)
        st(py, t, i, (ld(px, t, i) - mean) * a + b);
    if (!is_test) {
      /* The running inputs are read before the (possibly in-place) outputs are written. */
      double rm = rmean[c], rv = rvar[c];
      out_rm[c] = (float)(rm * mom + mean * (1 - mom));
      out_rv[c] = (float)(rv * mom + var * (1 - mom));
      saved_mean[c] = (float)mean;
      saved_inv[c] = (float)inv;
    }
  }
  return DM_OK;
}

/* X, scale, dY, saved_mean, saved_inv_std (or mean, var when is_test) -> dX, dscale, dbias. */
static dm_status bn_grad_run(dm_op_ctx *ctx) {
  bn_state *s = dm_op_state(ctx);
  DM_TRY(dm_dnnl_check_shapes(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0);
  if (dx == x || dx == dy)
    return dm_op_error(ctx, DM_ERR_INVALID, "dX may be neither X's blob nor dY's");
  const int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  const dm_dtype t = x->dtype;
  const double eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  dnnl_memory_desc_t md;
  const void *px;
  void *pdy, *pdx;
  chan_layout l;
  DM_TRY(x_input(x, &s->scratch[0], &md, &px, &l));
  DM_TRY(dm_dnnl_input(dy, &md, &s->scratch[1], &pdy)); /* dY in X's layout */
  const int64_t C = l.C, M = l.N * l.HW;
  DM_TRY(output_like(dx, x, &md, 0, &pdx));
  DM_TRY(dm_op_set_output(ctx, 1, DM_FLOAT, 1, &C));
  DM_TRY(dm_op_set_output(ctx, 2, DM_FLOAT, 1, &C));
  const float *scale = dm_tensor_data(dm_op_input(ctx, 1));  /* (C) */
  const float *s_mean = dm_tensor_data(dm_op_input(ctx, 3)); /* (C) */
  const float *s_inv = dm_tensor_data(dm_op_input(ctx, 4));  /* (C) inv_std, or var */
  float *dscale = dm_tensor_mutable_data(dm_op_output(ctx, 1)); /* (C) */
  float *dbias = dm_tensor_mutable_data(dm_op_output(ctx, 2));  /* (C) */
#if DM_HAVE_OPENMP
#pragma omp parallel for if (x->numel > (1 << 15))
#endif
  for (int64_t c = 0; c < C; c++) {
    double mean = s_mean[c];
    double inv = is_test ? 1.0 / sqrt((double)s_inv[c] + eps) : s_inv[c];
    double sdy = 0, sdyx = 0; /* sum dY, sum dY * xhat */
    for (int64_t n = 0; n < l.N; n++)
      for (int64_t j = 0, i = chan_base(&l, n, c); j < l.HW; j++, i += l.stride) {
        double g = ld(pdy, t, i);
        sdy += g;
        sdyx += g * ((ld(px, t, i) - mean) * inv);
      }
    dbias[c] = (float)sdy;
    dscale[c] = (float)sdyx;
    double k = scale[c] * inv;
    /* Train: Y depends on X through the batch mean and variance too, whence the two
     * correction terms; is_test: mean and var are constants. */
    double m1 = is_test || M == 0 ? 0 : sdy / (double)M;
    double m2 = is_test || M == 0 ? 0 : sdyx / (double)M;
    for (int64_t n = 0; n < l.N; n++)
      for (int64_t j = 0, i = chan_base(&l, n, c); j < l.HW; j++, i += l.stride)
        st(pdx, t, i, k * (ld(pdy, t, i) - m1 - (ld(px, t, i) - mean) * inv * m2));
  }
  return DM_OK;
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
