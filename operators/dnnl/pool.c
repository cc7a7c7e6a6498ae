/* pool.c: the oneDNN engine's MaxPool, AveragePool and their gradients (FLOAT, BFLOAT16,
 * 2-D NCHW).
 *
 * Arguments, shapes and errors are the reference's (operators/pool.c, conv_args.h): the
 * schema's shape inference runs first, for its checks only (dm_dnnl_check_shapes), then
 * dm_conv_geometry gives the effective pads and the output size. oneDNN pools with
 * explicit left and right padding; the right padding is chosen so that oneDNN's output
 * size (floor((in + pl + pr - k) / s) + 1) is the reference's, which covers every
 * legacy_pad (CAFFE_LEGACY_POOLING's ceil mode is a larger right padding). AveragePool
 * divides by the inputs under the window, padding not counted: oneDNN's
 * pooling_avg_exclude_padding, which clips the window to the input as the reference does;
 * with count_include_pad, pooling_avg_include_padding (the supports hook leaves the
 * rounded-up outputs whose last window passes the padding to the reference).
 *
 * Layouts: X is read in the layout it arrives in (nChw16c from a convolution stays so)
 * and Y is written in the one the primitive picks for it, which follows X's.
 *
 * AveragePoolGradient runs oneDNN's backward pooling (it needs no workspace; X and Y give
 * only their shapes). MaxPoolGradient does not: oneDNN's backward sends each dY to the
 * one input its forward picked (the first maximum), where Caffe2's rule, the reference's,
 * sends it to every input of the window equal to Y (ties share it, as after a Relu or in
 * BF16, where they are common). So this kernel runs the reference's rule itself, on X, Y
 * and dY in whatever layouts they come (any oneDNN layout with at most a channel block:
 * nchw, nhwc, nChw8c, nChw16c; others are reordered to plain first), accumulating in FP32
 * in the windows' order as the reference does, and writes dX in X's layout.
 *
 * Non-finite inputs: the reference's maximum skips NaN (x > max is false for it) and
 * starts from -inf; oneDNN's maximum may return a NaN it meets, and starts from the
 * lowest finite float, so a window of -inf gives -FLT_MAX. Finite inputs agree exactly.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"
#include "dnnl_common.h"
#include "kernels.h"
#include "operators/common.h"
#include "operators/conv_args.h"

dm_status dm_dnnl_check_shapes(dm_op_ctx *ctx) { return dm_op_check_shapes(ctx); }

/* oneDNN's avg_include_padding divides by the whole kernel, which is the reference's
 * count_include_pad divisor while every window lies within the padded input: not so when
 * a rounded-up output (ceil_mode, legacy_pad 3) reaches past the padding. */
static int include_pad_ok(const dm_op_ctx *ctx) {
  size_t nd = 0;
  const int64_t *dl = dm_op_arg_ints(ctx, "dilations", &nd);
  if (dm_op_arg_int(ctx, "dilation", 1) != 1 || dm_op_arg_int(ctx, "dilation_h", 1) != 1 ||
      dm_op_arg_int(ctx, "dilation_w", 1) != 1 || (nd == 2 && (dl[0] != 1 || dl[1] != 1)))
    return dm_op_refuse(ctx, "dilated pooling runs on the reference kernels");
  if (strncmp(dm_op_type(ctx), "AveragePool", 11) != 0 ||
      dm_op_arg_int(ctx, "count_include_pad", 0) == 0)
    return 1;
  if (dm_op_arg_int(ctx, "ceil_mode", 0) != 0 ||
      dm_op_arg_int(ctx, "legacy_pad", 0) == DM_LEGACY_CAFFE_POOLING)
    return dm_op_refuse(ctx, "count_include_pad with a rounded-up output (ceil_mode or "
                        "legacy_pad 3): oneDNN would count the padding past the given pads");
  return 1;
}

static int pool_supports(const dm_op_ctx *ctx) {
  return dm_dnnl_nchw_order(ctx) && dm_dnnl_dtype_ok(ctx, 0, DM_DNNL_KIND(DM_DNNL_POOL)) &&
         include_pad_ok(ctx);
}

static int pool_grad_supports(const dm_op_ctx *ctx) {
  /* The gradient runs in FLOAT whatever the inputs' dtype (pool_grad_run), so only
   * FLOAT's pooling kinds matter. */
  if (!dm_dnnl_can(DM_DNNL_POOL, DM_FLOAT) || !dm_dnnl_can(DM_DNNL_POOL_BWD, DM_FLOAT))
    return dm_op_refuse(ctx, "oneDNN builds no FLOAT pooling backward on this CPU (ISA %s)",
                        dm_dnnl_isa_name());
  return dm_dnnl_nchw_order(ctx) && dm_dnnl_dtype_ok(ctx, 0, 0) && dm_dnnl_dtype_ok(ctx, 1, 0) &&
         dm_dnnl_dtype_ok(ctx, 2, 0) && include_pad_ok(ctx);
}

typedef struct pool_state {
  dm_dnnl_prim fwd, bwd;
  dm_dnnl_buf scratch[3]; /* inputs reordered */
  float *acc;             /* an FP32 dX for BF16 */
  size_t acc_cap;
} pool_state;

static dm_status pool_init(dm_op_ctx *ctx, void **state) {
  dm_conv_args a; /* argument errors at instantiation, as the reference's */
  DM_TRY(dm_conv_args_parse(ctx, 1, &a));
  *state = calloc(1, sizeof(pool_state));
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void pool_fini(void *state) {
  pool_state *s = state;
  dm_dnnl_prim_reset(&s->fwd);
  dm_dnnl_prim_reset(&s->bwd);
  for (int i = 0; i < 3; i++)
    dm_dnnl_buf_free(&s->scratch[i]);
  free(s->acc);
  free(s);
}

/* The reference's geometry for X, and oneDNN's window arrays for it. */
typedef struct pool_geom {
  dm_conv_geom g;
  int64_t ydims[4];
  dnnl_dims_t strides, kernel, dilation, pad_l, pad_r;
} pool_geom;

static dm_status pool_geometry(dm_op_ctx *ctx, const dm_tensor *x, pool_geom *p) {
  dm_conv_args a;
  DM_TRY(dm_conv_args_parse(ctx, 1, &a));
  DM_TRY(dm_conv_geometry(ctx, &a, x, 1, &p->g));
  dm_conv_out_dims(&a, &p->g, p->g.C, p->ydims);
  const int64_t in[2] = {p->g.H, p->g.W}, out[2] = {p->g.outH, p->g.outW};
  for (int d = 0; d < 2; d++) {
    p->strides[d] = p->g.stride[d];
    p->kernel[d] = p->g.kernel[d];
    p->dilation[d] = 0; /* oneDNN counts dilation from 0 */
    p->pad_l[d] = p->g.pads[d];
    /* The least right padding that gives the reference's output size (the floor
     * division leaves stride - 1 of slack; the reference's own pad_b may exceed it, and
     * oneDNN wants every window to start before the padding, as the reference's do). */
    int64_t need = (out[d] - 1) * p->g.stride[d] + p->g.kernel[d] - in[d] - p->g.pads[d];
    p->pad_r[d] = need < 0 && need + p->g.stride[d] - 1 >= 0 ? 0 : need;
  }
  return DM_OK;
}

static dnnl_alg_kind_t pool_alg(const dm_op_ctx *ctx) {
  if (strncmp(dm_op_type(ctx), "MaxPool", 7) == 0)
    return dnnl_pooling_max;
  return dm_op_arg_int(ctx, "count_include_pad", 0) != 0 ? dnnl_pooling_avg_include_padding
                                                         : dnnl_pooling_avg_exclude_padding;
}

/* X's plain description as the "any" format of its dims (for the primitive to choose). */
static dm_status any_md(int ndim, const int64_t *dims, dm_dtype t, dnnl_memory_desc_t *md) {
  dnnl_data_type_t dt;
  if (!dm_dnnl_dtype(t, &dt))
    return dm_error(DM_ERR_TYPE, "oneDNN: no data type for dtype %d", (int)t);
  dnnl_dims_t d;
  for (int i = 0; i < ndim; i++)
    d[i] = dims[i];
  DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(md, ndim, d, dt, dnnl_format_tag_any),
              "describing a tensor");
  return DM_OK;
}

static dm_status pool_run(dm_op_ctx *ctx) {
  pool_state *s = dm_op_state(ctx);
  DM_TRY(dm_dnnl_check_shapes(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  pool_geom p;
  DM_TRY(pool_geometry(ctx, x, &p));
  if (y == x) /* the schema allows no in-place pair; an alias would be overwritten */
    return dm_op_error(ctx, DM_ERR_INVALID, "Y may not be X's blob");
  if (dm_tensors_alias(y, x))
    dm_tensor_reset(y); /* a view of X (Reshape): fresh storage, as the reference */
  dnnl_memory_desc_t xmd, ymd;
  void *src = dm_tensor_raw_data(x), *dst;
  if (x->numel == 0) { /* nothing to pool (oneDNN makes no primitive for it) */
    DM_TRY(dm_dnnl_plain_md(4, p.ydims, x->dtype, &ymd));
    return dm_dnnl_output(y, x->dtype, 4, p.ydims, &ymd, &dst);
  }
  DM_TRY(dm_dnnl_md_of(x, &xmd));
  if (!dm_dnnl_prim_matches(&s->fwd, 1, &xmd)) {
    DM_TRY(any_md(4, p.ydims, x->dtype, &ymd));
    dnnl_pooling_v2_desc_t d;
    DM_DNNL_TRY(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, pool_alg(ctx), &xmd,
                                                  &ymd, p.strides, p.kernel, p.dilation, p.pad_l,
                                                  p.pad_r),
                "describing a pooling");
    DM_TRY(dm_dnnl_prim_make(&s->fwd, &d, NULL, NULL, 1, &xmd));
  }
  DM_TRY(dm_dnnl_query_md(s->fwd.pd, dnnl_query_dst_md, 0, &ymd));
  DM_TRY(dm_dnnl_output(y, x->dtype, 4, p.ydims, &ymd, &dst));
  dm_dnnl_arg args[] = {{DNNL_ARG_SRC, &xmd, src}, {DNNL_ARG_DST, &ymd, dst}};
  return dm_dnnl_execute(s->fwd.prim, 2, args);
}

static dm_status acc_reserve(pool_state *s, size_t n) {
  if (s->acc && s->acc_cap >= n)
    return DM_OK;
  float *a = malloc((n ? n : 1) * sizeof *a);
  if (!a)
    return DM_NOMEM("an FP32 pooling gradient buffer");
  free(s->acc);
  s->acc = a;
  s->acc_cap = n;
  return DM_OK;
}

/* md with data type dt (same layout: a blocked md's strides count elements). */
static dnnl_memory_desc_t with_type(const dnnl_memory_desc_t *md, dnnl_data_type_t dt) {
  dnnl_memory_desc_t m = *md;
  m.data_type = dt;
  return m;
}

/* AveragePoolGradient: X, Y, dY -> dX with oneDNN's backward pooling, in FP32: oneDNN's
 * BF16 backward rounds where overlapping windows add up (seen: 0.0325 for 0.03125), where
 * the reference rounds each dX once; so BF16 dY is widened (exact), and dX computed in
 * FP32 and rounded once to BF16, as the reference. */
static dm_status avg_grad_run(dm_op_ctx *ctx, pool_state *s, const pool_geom *p) {
  const dm_tensor *x = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0);
  dnnl_memory_desc_t key[2], dsmd, ddmd;
  void *dydata, *dxdata;
  int64_t dims[4];
  memcpy(dims, x->dims, sizeof dims);
  if (x->numel == 0) {
    DM_TRY(dm_dnnl_plain_md(4, dims, x->dtype, &dsmd));
    return dm_dnnl_output(dx, x->dtype, 4, dims, &dsmd, &dxdata);
  }
  DM_TRY(dm_dnnl_md_of(dy, &key[0]));
  key[0] = with_type(&key[0], dnnl_f32);
  DM_TRY(dm_dnnl_plain_md(4, dims, DM_FLOAT, &key[1]));
  if (!dm_dnnl_prim_matches(&s->bwd, 2, key)) {
    dnnl_memory_desc_t xany;
    DM_TRY(any_md(4, dims, DM_FLOAT, &xany));
    dnnl_pooling_v2_desc_t fd, bd;
    DM_DNNL_TRY(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, pool_alg(ctx),
                                                  &key[1], &key[0], p->strides, p->kernel,
                                                  p->dilation, p->pad_l, p->pad_r),
                "describing a pooling");
    DM_TRY(dm_dnnl_prim_make(&s->fwd, &fd, NULL, NULL, 0, NULL));
    DM_DNNL_TRY(dnnl_pooling_v2_backward_desc_init(&bd, pool_alg(ctx), &xany, &key[0], p->strides,
                                                   p->kernel, p->dilation, p->pad_l, p->pad_r),
                "describing a pooling gradient");
    DM_TRY(dm_dnnl_prim_make(&s->bwd, &bd, NULL, s->fwd.pd, 2, key));
  }
  DM_TRY(dm_dnnl_query_md(s->bwd.pd, dnnl_query_diff_src_md, 0, &dsmd));
  DM_TRY(dm_dnnl_query_md(s->bwd.pd, dnnl_query_diff_dst_md, 0, &ddmd));
  DM_TRY(dm_dnnl_input(dy, &ddmd, &s->scratch[0], &dydata));
  dnnl_data_type_t dt;
  dm_dnnl_dtype(x->dtype, &dt);
  dnnl_memory_desc_t dxmd = with_type(&dsmd, dt);
  DM_TRY(dm_dnnl_output(dx, x->dtype, 4, dims, &dxmd, &dxdata));
  void *f32 = dxdata;
  if (x->dtype != DM_FLOAT) {
    DM_TRY(acc_reserve(s, dnnl_memory_desc_get_size(&dsmd) / sizeof(float)));
    f32 = s->acc;
  }
  dm_dnnl_arg args[] = {{DNNL_ARG_DIFF_DST, &ddmd, dydata}, {DNNL_ARG_DIFF_SRC, &dsmd, f32}};
  DM_TRY(dm_dnnl_execute(s->bwd.prim, 2, args));
  return f32 == dxdata ? DM_OK : dm_dnnl_reorder(&dsmd, f32, &dxmd, dxdata);
}

int64_t dm_dnnl_channel_block(const dnnl_memory_desc_t *md) {
  if (md->format_kind != dnnl_blocked || md->ndims < 2)
    return 0;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (b->inner_nblks == 0)
    return 1;
  return b->inner_nblks == 1 && b->inner_idxs[0] == 1 ? b->inner_blks[0] : 0;
}

int dm_dnnl_flat4_of(const dnnl_memory_desc_t *md, dm_dnnl_flat4 *f) {
  if (md->ndims != 4 || !(f->blk = dm_dnnl_channel_block(md)))
    return 0;
  f->off0 = md->offset0;
  for (int i = 0; i < 4; i++)
    f->s[i] = md->format_desc.blocking.strides[i];
  return 1;
}

/* t's data and where its elements sit: as it is, or reordered to plain into scratch. */
static dm_status flat_input(const dm_tensor *t, dm_dnnl_buf *scratch, const void **data,
                            dm_dnnl_flat4 *f) {
  dnnl_memory_desc_t md;
  DM_TRY(dm_dnnl_md_of(t, &md));
  if (!dm_dnnl_flat4_of(&md, f)) {
    DM_TRY(dm_dnnl_plain_md(4, t->dims, t->dtype, &md));
    void *p;
    DM_TRY(dm_dnnl_input(t, &md, scratch, &p));
    dm_dnnl_flat4_of(&md, f);
    *data = p;
    return DM_OK;
  }
  *data = dm_tensor_raw_data(t);
  return DM_OK;
}

static inline float load(const void *p, dm_dtype t, int64_t i) {
  return t == DM_FLOAT ? ((const float *)p)[i] : dm_bf16_to_float(((const uint16_t *)p)[i]);
}

/* One (n, c) plane of MaxPoolGradient; inlined with t constant, so the loads do not
 * test the dtype per element. */
static inline __attribute__((always_inline)) void
max_grad_plane(const dm_conv_geom *g, const int64_t *hwin, const int64_t *wwin, const void *px,
               const void *py, const void *pdy, float *acc, const dm_dnnl_flat4 *fx,
               const dm_dnnl_flat4 *fy, const dm_dnnl_flat4 *fdy, const dm_dnnl_flat4 *fdx,
               int64_t n, int64_t c, dm_dtype t) {
  const int64_t bx = dm_dnnl_flat4_plane(fx, n, c), by = dm_dnnl_flat4_plane(fy, n, c);
  const int64_t bdy = dm_dnnl_flat4_plane(fdy, n, c), bdx = dm_dnnl_flat4_plane(fdx, n, c);
  for (int64_t oh = 0; oh < g->outH; oh++)
    for (int64_t ow = 0; ow < g->outW; ow++) {
      float yv = load(py, t, by + oh * fy->s[2] + ow * fy->s[3]);
      float d = load(pdy, t, bdy + oh * fdy->s[2] + ow * fdy->s[3]);
      for (int64_t h = hwin[2 * oh]; h < hwin[2 * oh + 1]; h++)
        for (int64_t w = wwin[2 * ow]; w < wwin[2 * ow + 1]; w++)
          if (load(px, t, bx + h * fx->s[2] + w * fx->s[3]) == yv)
            acc[bdx + h * fdx->s[2] + w * fdx->s[3]] += d;
    }
}

/* MaxPoolGradient: dY to every input of the window equal to Y (Caffe2's rule). */
static dm_status max_grad_run(dm_op_ctx *ctx, pool_state *s, const pool_geom *p) {
  const dm_tensor *x = dm_op_input(ctx, 0), *y = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0);
  const dm_dtype t = x->dtype;
  const void *px, *py, *pdy;
  dm_dnnl_flat4 fx, fy, fdy, fdx;
  DM_TRY(flat_input(x, &s->scratch[0], &px, &fx));
  DM_TRY(flat_input(y, &s->scratch[1], &py, &fy));
  DM_TRY(flat_input(dy, &s->scratch[2], &pdy, &fdy));
  /* dX in X's layout when the loop can address it, else plain. */
  dnnl_memory_desc_t dxmd;
  DM_TRY(dm_dnnl_md_of(x, &dxmd));
  if (!dm_dnnl_flat4_of(&dxmd, &fdx))
    DM_TRY(dm_dnnl_plain_md(4, x->dims, t, &dxmd));
  dm_dnnl_flat4_of(&dxmd, &fdx);
  int64_t dims[4];
  memcpy(dims, x->dims, sizeof dims);
  void *pdx;
  DM_TRY(dm_dnnl_output(dx, t, 4, dims, &dxmd, &pdx));
  size_t n_dx = dnnl_memory_desc_get_size(&dxmd) / dm_dtype_size(t); /* padding included */
  float *acc = pdx;
  if (t != DM_FLOAT) {
    DM_TRY(acc_reserve(s, n_dx));
    acc = s->acc;
  }
  if (n_dx)
    memset(acc, 0, n_dx * sizeof *acc);
  const dm_conv_geom *g = &p->g;
  /* Window bounds once per op, not per output element. */
  int64_t *win = malloc((size_t)(2 * g->outH + 2 * g->outW) * sizeof *win + 1);
  if (!win)
    return DM_NOMEM("pooling windows");
  for (int64_t oh = 0; oh < g->outH; oh++)
    dm_pool_window(g, 0, oh, g->H, &win[2 * oh], &win[2 * oh + 1]);
  int64_t *wwin = win + 2 * g->outH;
  for (int64_t ow = 0; ow < g->outW; ow++)
    dm_pool_window(g, 1, ow, g->W, &wwin[2 * ow], &wwin[2 * ow + 1]);
  const int64_t N = g->N, C = g->C;
#if DM_HAVE_OPENMP
#pragma omp parallel for collapse(2) schedule(static) if (dx->numel > (1 << 14))
#endif
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      if (t == DM_FLOAT) /* the dtype is a constant inside each call: two tight loops */
        max_grad_plane(g, win, wwin, px, py, pdy, acc, &fx, &fy, &fdy, &fdx, n, c, DM_FLOAT);
      else
        max_grad_plane(g, win, wwin, px, py, pdy, acc, &fx, &fy, &fdy, &fdx, n, c, DM_BFLOAT16);
    }
  free(win);
  if (t != DM_FLOAT)
    dm_narrow(t, acc, pdx, n_dx);
  return DM_OK;
}

static dm_status pool_grad_run(dm_op_ctx *ctx) {
  pool_state *s = dm_op_state(ctx);
  DM_TRY(dm_dnnl_check_shapes(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *dx = dm_op_output(ctx, 0);
  DM_TRY(dm_op_check_grad_alias(ctx, 0, -1, 0x7u, (const char *const[]){"X", "Y", "dY"}));
  for (int i = 0; i < 3; i++)
    if (dm_tensors_alias(dx, dm_op_input(ctx, i)))
      dm_tensor_reset(dx);
  pool_geom p;
  DM_TRY(pool_geometry(ctx, x, &p));
  return pool_alg(ctx) == dnnl_pooling_max ? max_grad_run(ctx, s, &p) : avg_grad_run(ctx, s, &p);
}

#define POOL_KERNEL(name, run_, supports_)                                                   \
  {.struct_size = sizeof(dm_kernel_def), .type = name, .device = DM_CPU,                    \
   .engine = DM_ENGINE_DNNL, .init = pool_init, .run = run_, .fini = pool_fini,             \
   .supports = supports_}

const dm_kernel_def dm_dnnl_pool_kernels[] = {
    POOL_KERNEL("MaxPool", pool_run, pool_supports),
    POOL_KERNEL("AveragePool", pool_run, pool_supports),
    POOL_KERNEL("MaxPoolGradient", pool_grad_run, pool_grad_supports),
    POOL_KERNEL("AveragePoolGradient", pool_grad_run, pool_grad_supports),
    {0},
};
