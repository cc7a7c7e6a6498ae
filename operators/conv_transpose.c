/* conv_transpose.c: ConvTranspose (Caffe2's, 2-D NCHW, groups, dilation), FP32, FP16 and
 * BF16.
 *
 * Layouts (Caffe2's, which ONNX's ConvTranspose shares): X (N, C, H, W), W (C, M/group,
 * kH, kW), b (M), Y (N, M, outH, outW) with
 *   outH = stride_h (H - 1) + dilation_h (kH - 1) + 1 - pad_t - pad_b + adj_h
 * (likewise outW). ConvTranspose is the adjoint of a Conv from Y's size to X's, so each
 * image and group is one GEMM, col (M/group*kH*kW, H*W) = W_g^T X_g, folded into Y by
 * col2im (the same fold ConvGradient uses for dX). adj < stride, as Caffe2 requires: then
 * the Conv that maps Y's size back has exactly X's size.
 *
 * FP16 and BF16 as Conv: X and W widened exactly, FP32 accumulation, Y rounded once (the
 * bias, of X's dtype or FLOAT, is added before that rounding).
 */
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "conv_args.h"
#include "core/half.h"
#include "math/gemm.h"
#include "math/im2col.h"

typedef struct convt_plan {
  dm_conv_args a;
  int64_t adj[2];
  int64_t N, C, H, W; /* X */
  int64_t M, Cg, Mg;  /* output channels; channels per group in and out */
  int64_t outH, outW;
  dm_im2col_shape cs; /* the Conv from Y's size (one group's Mg channels) to X's */
} convt_plan;

/* adj | adj_h + adj_w | adjs [h, w] (default 0). */
static dm_status read_adj(dm_op_ctx *ctx, int64_t adj[2]) {
  int one = dm_op_has_arg(ctx, "adj"), hw = dm_op_has_arg(ctx, "adj_h") || dm_op_has_arg(ctx, "adj_w"),
      list = dm_op_has_arg(ctx, "adjs");
  if (one + hw + list > 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "give 'adj', 'adj_h'/'adj_w' or 'adjs', not more "
                       "than one of them");
  adj[0] = adj[1] = dm_op_arg_int(ctx, "adj", 0);
  if (hw) {
    adj[0] = dm_op_arg_int(ctx, "adj_h", 0);
    adj[1] = dm_op_arg_int(ctx, "adj_w", 0);
  } else if (list) {
    size_t n = 0;
    const int64_t *v = dm_op_arg_ints(ctx, "adjs", &n);
    if (n != 2)
      return dm_op_error(ctx, DM_ERR_INVALID, "'adjs' has %zu values; 2-D takes 2 (h, w)", n);
    adj[0] = v[0], adj[1] = v[1];
  }
  return DM_OK;
}

/* The arguments alone (at instantiation and before every run). */
static dm_status args_make(dm_op_ctx *ctx, convt_plan *p) {
  DM_TRY(dm_conv_args_parse(ctx, 0, &p->a));
  DM_TRY(read_adj(ctx, p->adj));
  if (p->a.nhwc)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "ConvTranspose takes NCHW only");
  if (p->a.legacy_pad != DM_LEGACY_NOTSET)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "legacy_pad %d; ConvTranspose takes explicit pads only", p->a.legacy_pad);
  if (p->a.dilation[0] != 1 || p->a.dilation[1] != 1) {
    if (p->a.group != 1) /* dm_conv_args_parse says so already; kept for clarity */
      return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "dilation needs group 1");
  }
  for (int i = 0; i < 2; i++)
    if (p->adj[i] < 0 || p->adj[i] >= p->a.stride[i])
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "adj %lld (%s) must be at least 0 and less than the stride %lld",
                         (long long)p->adj[i], i ? "w" : "h", (long long)p->a.stride[i]);
  return DM_OK;
}

static dm_status plan_make(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                           const dm_tensor *b, convt_plan *p) {
  DM_TRY(args_make(ctx, p));
  DM_TRY(dm_conv_check_dtypes(ctx, x, w, b));
  char xs[96], ws[96], bs[96];
  if (x->ndim != 4)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s; ConvTranspose takes a 4-D NCHW input",
                       dm_shape_str(x, xs, sizeof xs));
  if (w->ndim != 4)
    return dm_op_error(ctx, DM_ERR_SHAPE, "W is %s; ConvTranspose takes a 4-D filter (C, "
                       "M/group, kH, kW)", dm_shape_str(w, ws, sizeof ws));
  p->N = x->dims[0], p->C = x->dims[1], p->H = x->dims[2], p->W = x->dims[3];
  const int64_t grp = p->a.group;
  if (p->C == 0 || p->C % grp != 0)
    return dm_op_error(ctx, DM_ERR_SHAPE, "group %lld does not divide the %lld channels of X (%s)",
                       (long long)grp, (long long)p->C, dm_shape_str(x, xs, sizeof xs));
  if (w->dims[0] != p->C || w->dims[1] == 0 || w->dims[2] != p->a.kernel[0] ||
      w->dims[3] != p->a.kernel[1])
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "W is %s, but X is %s with kernel %lldx%lld: W must be (%lld, M/group, "
                       "%lld, %lld)",
                       dm_shape_str(w, ws, sizeof ws), dm_shape_str(x, xs, sizeof xs),
                       (long long)p->a.kernel[0], (long long)p->a.kernel[1], (long long)p->C,
                       (long long)p->a.kernel[0], (long long)p->a.kernel[1]);
  p->Cg = p->C / grp;
  p->Mg = w->dims[1];
  p->M = p->Mg * grp;
  if (b && (b->ndim != 1 || b->dims[0] != p->M))
    return dm_op_error(ctx, DM_ERR_SHAPE, "b is %s, but W is %s in %lld group(s): b must hold "
                       "M = %lld values", dm_shape_str(b, bs, sizeof bs),
                       dm_shape_str(w, ws, sizeof ws), (long long)grp, (long long)p->M);
  int64_t in[2] = {p->H, p->W}, out[2];
  for (int i = 0; i < 2; i++) {
    if (in[i] > ((int64_t)1 << 30))
      return dm_op_error(ctx, DM_ERR_LIMIT, "X is %s: a spatial dim above 2^30 is beyond "
                         "ConvTranspose's size arithmetic", dm_shape_str(x, xs, sizeof xs));
    int64_t dk = p->a.dilation[i] * (p->a.kernel[i] - 1) + 1;
    out[i] = p->a.stride[i] * (in[i] - 1) + dk - p->a.pads[i] - p->a.pads[i + 2] + p->adj[i];
    if (in[i] < 1 || out[i] < 1)
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "X is %s: with kernel %lld, stride %lld, pads %lld and %lld and adj "
                         "%lld the %s output size is %lld",
                         dm_shape_str(x, xs, sizeof xs), (long long)p->a.kernel[i],
                         (long long)p->a.stride[i], (long long)p->a.pads[i],
                         (long long)p->a.pads[i + 2], (long long)p->adj[i],
                         i ? "horizontal" : "vertical", (long long)out[i]);
  }
  p->outH = out[0], p->outW = out[1];
  if (p->Mg * p->a.kernel[0] * p->a.kernel[1] > INT32_MAX || p->H * p->W > INT32_MAX ||
      p->Cg > INT32_MAX || p->outH * p->outW > ((int64_t)1 << 40))
    return dm_op_error(ctx, DM_ERR_LIMIT, "ConvTranspose of X %s with W %s exceeds the BLAS "
                       "index range", dm_shape_str(x, xs, sizeof xs), dm_shape_str(w, ws, sizeof ws));
  p->cs = (dm_im2col_shape){.C = p->Mg, .H = p->outH, .W = p->outW, .kh = p->a.kernel[0],
                            .kw = p->a.kernel[1], .sh = p->a.stride[0], .sw = p->a.stride[1],
                            .dh = p->a.dilation[0], .dw = p->a.dilation[1], .pt = p->a.pads[0],
                            .pl = p->a.pads[1], .outH = p->H, .outW = p->W};
  return DM_OK;
}

static dm_status convt_prepare(dm_op_ctx *ctx, convt_plan *p) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  const dm_tensor *b = dm_op_num_inputs(ctx) > 2 ? dm_op_input(ctx, 2) : NULL;
  DM_TRY(plan_make(ctx, x, w, b, p));
  dm_tensor *y = dm_op_output(ctx, 0);
  if (!dm_op_shape_only(ctx))
    for (int i = 0; i < dm_op_num_inputs(ctx); i++)
      if (dm_tensors_alias(y, dm_op_input(ctx, i)))
        dm_tensor_reset(y); /* a view of an input (Reshape): fresh storage */
  int64_t dims[4] = {p->N, p->M, p->outH, p->outW};
  return dm_op_set_output(ctx, 0, x->dtype, 4, dims);
}

static dm_status convt_infer(dm_op_ctx *ctx) {
  convt_plan p;
  return convt_prepare(ctx, &p);
}

/* 2 * numel(X) * M/group * kH * kW: every input scattered onto its window. */
static void convt_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  if (w->ndim == 4 && w->dims[0] > 0)
    c->flops = 2.0 * (double)x->numel * (double)(w->numel / w->dims[0]);
}

static dm_status convt_init(dm_op_ctx *ctx, void **state) {
  convt_plan p; /* argument errors at instantiation, not at the first run */
  DM_TRY(args_make(ctx, &p));
  return dm_scratch_init(ctx, state); /* column buffers kept between runs */
}

static dm_status convt_run(dm_op_ctx *ctx) {
  convt_plan p;
  DM_TRY(convt_prepare(ctx, &p));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  const dm_tensor *b = dm_op_num_inputs(ctx) > 2 ? dm_op_input(ctx, 2) : NULL;
  dm_tensor *y = dm_op_output(ctx, 0);
  const int r16 = dm_is_reduced_float(x->dtype);
  const int64_t HW = p.H * p.W, oHW = p.outH * p.outW, K = p.Mg * p.a.kernel[0] * p.a.kernel[1];
  const int64_t xs = p.C * HW, ys = p.M * oHW; /* per image */
  /* Scratch (FP32): col (K, HW); for 16-bit X one image of X and Y, W and b widened. */
  size_t n_col = (size_t)(K * HW), n_x = r16 ? (size_t)xs : 0, n_y = r16 ? (size_t)ys : 0;
  size_t n_w = r16 ? (size_t)w->numel : 0, n_b = b && b->dtype != DM_FLOAT ? (size_t)p.M : 0;
  float *buf = NULL;
  if (p.N == 0)
    return DM_OK;
  DM_TRY(dm_scratch_get(dm_op_state(ctx), (n_col + n_x + n_y + n_w + n_b) * sizeof(float),
                        (void **)&buf));
  float *col = buf, *xf = col + n_col, *yf = xf + n_x, *wf = yf + n_y, *bf = wf + n_w;
  const float *wp = dm_tensor_data(w), *bp = b ? dm_tensor_data(b) : NULL;
  if (r16) {
    dm_widen(x->dtype, dm_tensor_data(w), wf, n_w);
    wp = wf;
  }
  if (n_b) {
    dm_widen(b->dtype, dm_tensor_data(b), bf, n_b);
    bp = bf;
  }
  for (int64_t n = 0; n < p.N; n++) {
    const float *xi = r16 ? xf : (const float *)dm_tensor_data(x) + n * xs; /* (C, H, W) */
    float *yi = r16 ? yf : (float *)dm_tensor_mutable_data(y) + n * ys;       /* (M, oH, oW) */
    if (r16)
      dm_widen(x->dtype, (const uint16_t *)dm_tensor_data(x) + n * xs, xf, (size_t)xs);
    memset(yi, 0, (size_t)ys * sizeof *yi);
    for (int64_t g = 0; g < p.a.group; g++) {
      /* col (K, HW) = W_g^T (K x Cg) X_g (Cg x HW), W_g (Cg, K) row-major */
      DM_TRY(dm_sgemm(1, 0, (int)K, (int)HW, (int)p.Cg, 1.0f, wp + g * p.Cg * K, (int)K,
                      xi + g * p.Cg * HW, (int)HW, 0.0f, col, (int)HW));
      dm_col2im_nchw(&p.cs, col, HW, yi + g * p.Mg * oHW);
    }
    if (bp)
      for (int64_t m = 0; m < p.M; m++)
        for (int64_t j = 0; j < oHW; j++)
          yi[m * oHW + j] += bp[m];
    if (r16)
      dm_narrow(x->dtype, yf, (uint16_t *)dm_tensor_mutable_data(y) + n * ys, (size_t)ys);
  }
  return DM_OK;
}

static const dm_arg_spec convt_args[] = {
    DM_CONV_ARG_SPECS,
    {"adj", DM_ARG_INT, 0, "extra output rows and columns at the end (0 <= adj < stride)"},
    {"adj_h", DM_ARG_INT, 0, "extra output rows (with adj_w)"},
    {"adj_w", DM_ARG_INT, 0, "extra output columns (with adj_h)"},
    {"adjs", DM_ARG_INTS, 0, "extra output size [h, w]"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema convt_schema = {
    .type = "ConvTranspose",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = convt_args,
    .precision = DM_PREC_FOLLOW,
    .doc = "X (N, C, H, W), W (C, M/group, kH, kW), [b (M)] -> Y (N, M, outH, outW), outH = "
           "stride (H - 1) + dilation (kH - 1) + 1 - pad_t - pad_b + adj_h; NCHW only.",
    .infer = convt_infer,
    .cost = convt_cost,
};

static const dm_op_schema *const schemas[] = {&convt_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "ConvTranspose", .device = DM_CPU, .init = convt_init, .run = convt_run,
     .fini = dm_scratch_fini},
    {0},
};
const dm_op_family dm_family_conv_transpose = {schemas, kernels};
