/* conv.c: Conv and ConvGradient (2-D, NCHW and NHWC, groups, dilation), FP32, FP16, BF16.
 *
 * Method: im2col unfolds the input patches into a column matrix and sgemm with the
 * filter gives the output (1x1 stride-1 unpadded convolutions use the image itself as
 * the column matrix). The columns of a chunk of images sit side by side, so there is one
 * large sgemm per group and chunk rather than one small one per image, and the GEMM's
 * own threads do the parallel work (dm_sgemm: oneDNN where built in, else CBLAS). No OpenMP here on purpose: calling a pthreads
 * OpenBLAS from OpenMP threads makes both thread pools spin against each other (a LeNet
 * step many times slower), and even OpenMP-parallel im2col beside the BLAS threads is
 * slower on a busy 2-core machine; im2col is a few per cent of the time.
 *
 * Layouts (Caffe2's): NCHW X (N, C, H, W), W (M, C/group, kH, kW), Y (N, M, outH, outW);
 * NHWC X (N, H, W, C), W (M, kH, kW, C/group), Y (N, outH, outW, M); b (M).
 *
 * FP16 is faithful to tensor cores: FP16 X and W (bias FP16 or FP32) are widened
 * exactly to FP32, accumulated in FP32 (sgemm), and each output is rounded to FP16 once.
 * The gradient does the same with dY, X and W, rounding dW, db and dX once at the end.
 * BF16 takes the same path with the other 16-bit format (bias BF16 or FP32).
 */
#include "dm_config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"

/* The im2col/col2im loops between the GEMMs run on the same OpenMP threads as OpenBLAS
 * (its OpenMP build), so they do not sit serial while the other threads spin. */
#if DM_HAVE_OPENMP
#define DM_OMP_PRAGMA(x) _Pragma(#x)
#define DM_OMP_FOR_IMAGES(n) DM_OMP_PRAGMA(omp parallel for schedule(static) if ((n) > 1))
#else
#define DM_OMP_FOR_IMAGES(n)
#endif
#include "common.h"
#include "conv_args.h"
#include "core/half.h"
#include "math/gemm.h"
#include "math/im2col.h"

/* Images go through in chunks whose column block fits in about this many bytes (tests
 * lower it to exercise chunking). */
size_t dm_conv_chunk_bytes = (size_t)64 << 20;

/* Everything one run needs, from the arguments and the input shapes. */
typedef struct conv_plan {
  dm_conv_args a;
  dm_conv_geom g;
  int64_t M, Cg, Mg; /* output channels, channels per group in and out */
  int64_t K;         /* Cg*kH*kW: the reduction behind one output */
  int64_t HWin, HWout;
  int one_by_one;    /* 1x1, stride 1, no pad: X is its own column matrix */
  dm_im2col_shape cs;
} conv_plan;

/* The plan for a checked geometry (dm_conv_check_forward's or _backward's): the BLAS
 * limits, and the im2col shape. */
static dm_status plan_make(dm_op_ctx *ctx, const dm_conv_shape *s, conv_plan *p) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  p->a = s->a, p->g = s->g, p->M = s->M, p->Cg = s->Cg, p->Mg = s->Mg;
  const dm_conv_geom *g = &p->g;
  char xs[96], ws[96];
  p->K = p->Cg * g->kernel[0] * g->kernel[1];
  p->HWin = g->H * g->W;
  /* The BLAS takes int sizes and leading dimensions. */
  if (__builtin_mul_overflow(g->outH, g->outW, &p->HWout) || p->K > INT_MAX || p->HWout > INT_MAX || p->M > INT_MAX || g->C > INT_MAX ||
      p->K * p->HWout > INT64_MAX / 64)
    return dm_op_error(ctx, DM_ERR_LIMIT, "Conv of X %s with W %s exceeds the BLAS index range",
                       dm_shape_str(x, xs, sizeof xs), dm_shape_str(w, ws, sizeof ws));
  p->one_by_one = g->kernel[0] == 1 && g->kernel[1] == 1 && g->stride[0] == 1 &&
                  g->stride[1] == 1 && !g->pads[0] && !g->pads[1] && !g->pads[2] && !g->pads[3];
  p->cs = (dm_im2col_shape){.C = p->Cg, .H = g->H, .W = g->W, .kh = g->kernel[0],
                            .kw = g->kernel[1], .sh = g->stride[0], .sw = g->stride[1],
                            .dh = g->dilation[0], .dw = g->dilation[1], .pt = g->pads[0],
                            .pl = g->pads[1], .outH = g->outH, .outW = g->outW};
  return DM_OK;
}

/* An output that shares storage with an input (a Reshape view) gets fresh storage. */
static void unalias(dm_op_ctx *ctx, int out) {
  if (dm_op_shape_only(ctx))
    return;
  dm_tensor *y = dm_op_output(ctx, out);
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    if (dm_tensors_alias(y, dm_op_input(ctx, i)))
      dm_tensor_reset(y);
}

/* Conv: X, W, [b] -> Y; with the epilogue's S (ConvFusion) also S, of Y's shape. */
static dm_status conv_prepare(dm_op_ctx *ctx, const dm_conv_epilogue *e, conv_plan *p) {
  dm_conv_shape s;
  DM_TRY(dm_conv_check_forward(ctx, e, &s));
  DM_TRY(plan_make(ctx, &s, p));
  /* Y may be S itself (read before written, element by element), checked above */
  if (e->sum < 0 || dm_op_output(ctx, 0) != dm_op_input(ctx, e->sum))
    unalias(ctx, 0);
  return dm_op_set_output(ctx, 0, dm_op_input(ctx, 0)->dtype, 4, s.ydims);
}

dm_status dm_conv_forward_infer(dm_op_ctx *ctx, const dm_conv_epilogue *e) {
  conv_plan p;
  return conv_prepare(ctx, e, &p);
}

static dm_status conv_infer(dm_op_ctx *ctx) {
  const dm_conv_epilogue e = {.has_bias = dm_op_num_inputs(ctx) > 2, .sum = -1,
                              .act = DM_CONV_ACT_NONE, .unary = DM_UN_NONE};
  return dm_conv_forward_infer(ctx, &e);
}

/* ConvGradient: X, W, dY -> dW, [db], [dX]. Which outputs exist follows Caffe2: with a
 * bias (no_bias = 0) dW, db, [dX]; without, dW, [dX]. */
static dm_status conv_grad_prepare(dm_op_ctx *ctx, conv_plan *p, int *has_db, int *has_dx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_conv_shape s;
  DM_TRY(dm_conv_check_backward(ctx, &s, has_db, has_dx));
  DM_TRY(plan_make(ctx, &s, p));
  int n_out = dm_op_num_outputs(ctx);
  for (int o = 0; o < n_out; o++)
    unalias(ctx, o);
  DM_TRY(dm_op_set_output(ctx, 0, w->dtype, 4, w->dims));
  if (*has_db)
    DM_TRY(dm_op_set_output(ctx, 1, dy->dtype, 1, &p->M));
  if (*has_dx)
    DM_TRY(dm_op_set_output(ctx, n_out - 1, x->dtype, 4, x->dims));
  return DM_OK;
}

/* FLOPs = 2 * (outputs) * K, K = C/group*kH*kW = numel(W) / M. */
void dm_conv_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  const dm_tensor *w = dm_op_input(ctx, 1), *y = dm_op_output(ctx, 0);
  if (w->ndim == 4 && w->dims[0] > 0)
    c->flops = 2.0 * (double)y->numel * (double)(w->numel / w->dims[0]);
}

/* dW and dX each cost a forward pass; db one add per dY element. */
void dm_conv_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  const dm_tensor *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  if (w->ndim != 4 || w->dims[0] <= 0)
    return;
  int n_out = dm_op_num_outputs(ctx), no_bias = dm_op_arg_int(ctx, "no_bias", 0) != 0;
  double fwd = 2.0 * (double)dy->numel * (double)(w->numel / w->dims[0]);
  c->flops = fwd * (n_out == (no_bias ? 2 : 3) ? 2 : 1) + (no_bias ? 0 : (double)dy->numel);
}

/* Caffe2's GetConvGradient: dX only when wanted; no_bias for a bias-less Conv. */
dm_status dm_conv_gradient_emit(dm_grad_ctx *g, const char *type, int with_y) {
  int has_b = dm_grad_num_inputs(g) == 3;
  int want_dx = !dm_grad_arg_int(g, "no_gradient_to_input", 0) && dm_grad_input_needed(g, 0);
  const char *in[] = {dm_grad_input(g, 0), dm_grad_input(g, 1), dm_grad_output_grad(g, 0),
                      dm_grad_output(g, 0)};
  const char *out[3];
  int n = 0;
  out[n++] = dm_grad_input_grad(g, 1);
  if (has_b)
    out[n++] = dm_grad_input_grad(g, 2);
  if (want_dx)
    out[n++] = dm_grad_input_grad(g, 0);
  DM_TRY(dm_grad_emit(g, type, with_y ? 4 : 3, in, n, out));
  if (!has_b)
    DM_TRY(dm_grad_set_arg_int(g, "no_bias", 1));
  if (!want_dx)
    DM_TRY(dm_grad_set_arg_int(g, "no_gradient_to_input", 1));
  return DM_OK;
}

static dm_status conv_gradient(dm_grad_ctx *g) {
  return dm_conv_gradient_emit(g, "ConvGradient", 0);
}

/* Images per chunk: the column block of a chunk (and the FP32 copies FP16 needs) stays
 * within dm_conv_chunk_bytes. */
static int64_t chunk_images(const conv_plan *p, int fp16, int grad) {
  size_t per = (size_t)(p->K * p->HWout) + (size_t)(p->M * p->HWout); /* col, Y or dY block */
  if (fp16)
    per += (size_t)(p->g.C * p->HWin) * (grad ? 2 : 1) + (size_t)(p->M * p->HWout);
  int64_t b = (int64_t)(dm_conv_chunk_bytes / (per * sizeof(float)));
  return b < 1 ? 1 : b > p->g.N ? p->g.N : b;
}

void dm_relu_f32(float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = y[i] > 0.0f || y[i] != y[i] ? y[i] : 0.0f;
}

void dm_conv_act_apply(const dm_conv_epilogue *e, float *y, int64_t n) {
  switch (e->act) {
  case DM_CONV_ACT_NONE: break;
  case DM_CONV_ACT_RELU: dm_relu_f32(y, n); break;
  case DM_CONV_ACT_UNARY:
    for (int64_t i = 0; i < n; i++)
      y[i] = dm_unary_forward(e->unary, &e->p, y[i]);
    break;
  case DM_CONV_ACT_SWISH:
    for (int64_t i = 0; i < n; i++)
      y[i] = y[i] * dm_unary_fwd_Sigmoid(y[i], &e->p);
    break;
  }
}

/* Conv on nb images in FP32. x: their images; y: their outputs (Y's layout; for FP16 a
 * scratch block); col: (K, nb*HW) NCHW or (nb*HW, K) NHWC; ybig: (M, nb*HW) for NCHW.
 * sv: their S (Y's layout, FP32; may be y itself) or NULL, added after the bias; e's
 * activation last. y16 (FP16 or BF16 output, of dtype yt) receives the outputs rounded
 * once. */
static dm_status conv_chunk(const conv_plan *p, int64_t nb, const float *x, const float *w,
                       const float *b, const float *sv, const dm_conv_epilogue *e, float *y,
                       dm_dtype yt,
                       uint16_t *y16, float *col, float *ybig) {
  const int64_t xs = p->g.C * p->HWin, ys = p->M * p->HWout, HW = p->HWout, L = nb * HW;
  const int M = (int)p->M, Mg = (int)p->Mg, K = (int)p->K, C = (int)p->g.C;
  /* NHWC: the GEMM writes Y in place, so S is put there first and accumulated onto */
  if (p->a.nhwc && sv && sv != y)
    memcpy(y, sv, (size_t)(nb * ys) * sizeof *y);
  const float beta = p->a.nhwc && sv ? 1.0f : 0.0f;
  for (int64_t grp = 0; grp < p->a.group; grp++) {
    const float *wg = w + grp * p->Mg * p->K; /* (Mg, K) */
    if (p->a.nhwc) {
      const float *src = x + grp * p->Cg; /* (L, K), leading dim C (1x1) or K */
      int ld = C;
      if (!p->one_by_one) {
        for (int64_t i = 0; i < nb; i++)
          dm_im2col_nhwc(&p->cs, C, x + i * xs + grp * p->Cg, col + i * HW * K);
        src = col, ld = K;
      }
      DM_TRY(dm_sgemm(0, 1, (int)L, Mg, K, 1.0f, src, ld, wg, K,
                  beta, y + grp * p->Mg, M));
    } else {
      const float *src = col; /* (K, L) */
      if (p->one_by_one && nb == 1) {
        src = x + grp * p->Cg * p->HWin;
      } else {
        /* images fill disjoint column ranges of col: one per thread */
        DM_OMP_FOR_IMAGES(nb)
        for (int64_t i = 0; i < nb; i++)
          dm_im2col_nchw(&p->cs, x + i * xs + grp * p->Cg * p->HWin, L, col + i * HW);
      }
      DM_TRY(dm_sgemm(0, 0, Mg, (int)L, K, 1.0f, wg, K, src,
                  (int)L, 0.0f, ybig + grp * p->Mg * L, (int)L));
    }
  }
  /* Bias (for NCHW also the move from (M, nb*HW) to nb x (M, HW)), S and the activation, then
   * FP16's rounding. */
  for (int64_t i = 0; i < nb; i++) {
    if (!p->a.nhwc) {
      for (int64_t m = 0; m < p->M; m++) {
        float *r = ybig + m * L + i * HW; /* FP16: add the bias in place, then round */
        float *d = y16 ? r : y + i * ys + m * HW;
        float bm = b ? b[m] : 0.0f;
        if (sv) {
          const float *sm = sv + i * ys + m * HW; /* read before d (maybe sm) is written */
          for (int64_t j = 0; j < HW; j++)
            d[j] = r[j] + bm + sm[j];
        } else {
          for (int64_t j = 0; j < HW; j++)
            d[j] = r[j] + bm;
        }
        dm_conv_act_apply(e, d, HW);
        if (y16)
          dm_narrow(yt, d, y16 + i * ys + m * HW, (size_t)HW);
      }
    } else {
      float *yi = y + i * ys; /* (HW, M) */
      if (b)
        for (int64_t j = 0; j < HW; j++)
          for (int64_t m = 0; m < p->M; m++)
            yi[j * p->M + m] += b[m];
      dm_conv_act_apply(e, yi, ys);
      if (y16)
        dm_narrow(yt, yi, y16 + i * ys, (size_t)ys);
    }
  }
  return DM_OK;
}

dm_status dm_conv_forward_run(dm_op_ctx *ctx, const dm_conv_epilogue *e) {
  conv_plan p;
  DM_TRY(conv_prepare(ctx, e, &p));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  const dm_tensor *b = e->has_bias ? dm_op_input(ctx, 2) : NULL;
  const dm_tensor *sv = e->sum >= 0 ? dm_op_input(ctx, e->sum) : NULL;
  dm_tensor *y = dm_op_output(ctx, 0);
  const int64_t N = p.g.N, xs = p.g.C * p.HWin, ys = p.M * p.HWout; /* per image */
  if (N == 0)
    return DM_OK;
  const int fp16 = dm_is_reduced_float(x->dtype); /* FP16 or BF16 */
  const int64_t B = chunk_images(&p, fp16, 0);
  /* Scratch: col (K, B*HW); ybig (M, B*HW) (NCHW, or FP16's FP32 Y); FP16: X, W, b, S. */
  size_t n_col = (size_t)(B * p.K * p.HWout), n_big = (size_t)(B * ys);
  size_t n_x = fp16 ? (size_t)(B * xs) : 0, n_w = fp16 ? (size_t)w->numel : 0;
  size_t n_b = b && dm_is_reduced_float(b->dtype) ? (size_t)p.M : 0;
  size_t n_s = fp16 && sv ? (size_t)(B * ys) : 0;
  float *buf = NULL;
  DM_TRY(dm_scratch_get(dm_op_state(ctx),
                        (n_col + n_big + n_x + n_w + n_b + n_s + 1) * sizeof(float),
                        (void **)&buf));
  float *col = buf, *ybig = col + n_col, *xf = ybig + n_big, *wf = xf + n_x, *bf = wf + n_w;
  float *sf = bf + n_b;
  const float *pw = dm_tensor_data(w), *pb = b ? dm_tensor_data(b) : NULL;
  if (fp16) { /* widened once (exact) */
    dm_widen(x->dtype, dm_tensor_data(w), wf, n_w);
    pw = wf;
    if (n_b) {
      dm_widen(x->dtype, dm_tensor_data(b), bf, n_b);
      pb = bf;
    }
  }
  for (int64_t n0 = 0; n0 < N; n0 += B) {
    int64_t nb = N - n0 < B ? N - n0 : B;
    if (!fp16) {
      float *py = (float *)dm_tensor_mutable_data(y) + n0 * ys;
      const float *ps = sv ? (const float *)dm_tensor_data(sv) + n0 * ys : NULL;
      DM_TRY(conv_chunk(&p, nb, (const float *)dm_tensor_data(x) + n0 * xs, pw, pb, ps,
                        e, py, DM_FLOAT, NULL, col, ybig));
    } else {
      dm_widen(x->dtype, (const uint16_t *)dm_tensor_data(x) + n0 * xs, xf, (size_t)(nb * xs));
      if (sv) /* this chunk of S is read before its chunk of Y (maybe S) is written */
        dm_widen(x->dtype, (const uint16_t *)dm_tensor_data(sv) + n0 * ys, sf,
                 (size_t)(nb * ys));
      DM_TRY(conv_chunk(&p, nb, xf, pw, pb, sv ? sf : NULL, e, ybig, y->dtype,
                        (uint16_t *)dm_tensor_mutable_data(y) + n0 * ys, col, ybig));
    }
  }
  return DM_OK;
}

static dm_status conv_run(dm_op_ctx *ctx) {
  const dm_conv_epilogue e = {.has_bias = dm_op_num_inputs(ctx) > 2, .sum = -1,
                              .act = DM_CONV_ACT_NONE, .unary = DM_UN_NONE};
  return dm_conv_forward_run(ctx, &e);
}

/* ConvGradient on nb images in FP32: dw (M, K) and db (M) accumulate; dx (their images,
 * or NULL) is overwritten. col as in conv_chunk; dybig (M, nb*HW) for NCHW. */
static dm_status conv_grad_chunk(const conv_plan *p, int64_t nb, const float *x, const float *w,
                            const float *dy, float *dw, float *db, float *dx, float *col,
                            float *dybig) {
  const int64_t xs = p->g.C * p->HWin, ys = p->M * p->HWout, HW = p->HWout, L = nb * HW;
  const int M = (int)p->M, Mg = (int)p->Mg, K = (int)p->K, C = (int)p->g.C, Cg = (int)p->Cg;
  const int direct = p->one_by_one && (p->a.nhwc || nb == 1); /* X is the column matrix */
  if (dx && !direct)
    memset(dx, 0, (size_t)(nb * xs) * sizeof *dx);
  if (!p->a.nhwc && nb > 1) { /* dY as one (M, nb*HW) matrix */
    for (int64_t i = 0; i < nb; i++)
      for (int64_t m = 0; m < p->M; m++)
        memcpy(dybig + m * L + i * HW, dy + i * ys + m * HW, (size_t)HW * sizeof *dy);
  } else {
    dybig = (float *)dy; /* already that matrix (read only) */
  }
  for (int64_t grp = 0; grp < p->a.group; grp++) {
    const float *wg = w + grp * p->Mg * p->K; /* (Mg, K) */
    float *dwg = dw + grp * p->Mg * p->K;
    if (p->a.nhwc) {
      const float *dyg = dy + grp * p->Mg; /* (L, Mg), leading dim M */
      const float *src = x + grp * p->Cg;  /* (L, K), leading dim C or K */
      int ld = C;
      if (!direct) {
        for (int64_t i = 0; i < nb; i++)
          dm_im2col_nhwc(&p->cs, C, x + i * xs + grp * p->Cg, col + i * HW * K);
        src = col, ld = K;
      }
      DM_TRY(dm_sgemm(1, 0, Mg, K, (int)L, 1.0f, dyg, M, src, ld,
                  1.0f, dwg, K));
      if (!dx)
        continue;
      if (direct) {
        DM_TRY(dm_sgemm(0, 0, (int)L, Cg, Mg, 1.0f, dyg, M, wg,
                    K, 0.0f, dx + grp * p->Cg, C));
      } else {
        DM_TRY(dm_sgemm(0, 0, (int)L, K, Mg, 1.0f, dyg, M, wg,
                    K, 0.0f, col, K));
        for (int64_t i = 0; i < nb; i++)
          dm_col2im_nhwc(&p->cs, C, col + i * HW * K, dx + i * xs + grp * p->Cg);
      }
    } else {
      const float *dyg = dybig + grp * p->Mg * L; /* (Mg, L) */
      const float *src = col;                     /* (K, L) */
      if (direct) {
        src = x + grp * p->Cg * p->HWin;
      } else {
        /* images fill disjoint column ranges of col: one per thread */
        DM_OMP_FOR_IMAGES(nb)
        for (int64_t i = 0; i < nb; i++)
          dm_im2col_nchw(&p->cs, x + i * xs + grp * p->Cg * p->HWin, L, col + i * HW);
      }
      DM_TRY(dm_sgemm(0, 1, Mg, K, (int)L, 1.0f, dyg, (int)L, src,
                  (int)L, 1.0f, dwg, K));
      if (!dx)
        continue;
      if (direct) {
        DM_TRY(dm_sgemm(1, 0, Cg, (int)HW, Mg, 1.0f, wg, K, dyg,
                    (int)HW, 0.0f, dx + grp * p->Cg * p->HWin, (int)p->HWin));
      } else {
        DM_TRY(dm_sgemm(1, 0, K, (int)L, Mg, 1.0f, wg, K, dyg,
                    (int)L, 0.0f, col, (int)L));
        DM_OMP_FOR_IMAGES(nb) /* each image's dX is its own */
        for (int64_t i = 0; i < nb; i++)
          dm_col2im_nchw(&p->cs, col + i * HW, L, dx + i * xs + grp * p->Cg * p->HWin);
      }
    }
  }
  if (!db)
    return DM_OK;
  if (!p->a.nhwc) {
    for (int64_t m = 0; m < p->M; m++) {
      float s = 0.0f;
      for (int64_t j = 0; j < L; j++)
        s += dybig[m * L + j];
      db[m] += s;
    }
  } else {
    for (int64_t j = 0; j < L; j++)
      for (int64_t m = 0; m < p->M; m++)
        db[m] += dy[j * p->M + m];
  }
  return DM_OK;
}

dm_status dm_conv_grad_infer(dm_op_ctx *ctx) {
  conv_plan p;
  int db, dx;
  return conv_grad_prepare(ctx, &p, &db, &dx);
}

dm_status dm_conv_backward_run(dm_op_ctx *ctx, const void *dy_data) {
  conv_plan p;
  int has_db, has_dx;
  DM_TRY(conv_grad_prepare(ctx, &p, &has_db, &has_dx));
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  dm_tensor *dw = dm_op_output(ctx, 0), *db = has_db ? dm_op_output(ctx, 1) : NULL;
  dm_tensor *dx = has_dx ? dm_op_output(ctx, dm_op_num_outputs(ctx) - 1) : NULL;
  const int fp16 = dm_is_reduced_float(x->dtype); /* FP16 or BF16 */
  const int64_t N = p.g.N, xs = p.g.C * p.HWin, ys = p.M * p.HWout; /* per image */
  const int64_t B = chunk_images(&p, fp16, 1);
  /* Scratch: col, dybig; the dW and db sums; FP16: W, and the X, dX, dY chunks. */
  size_t n_col = (size_t)(B * p.K * p.HWout), n_big = (size_t)(B * ys);
  size_t n_w = (size_t)w->numel, n_sum = n_w + (size_t)p.M;
  size_t n_x = fp16 ? (size_t)(B * xs) : 0, n_dy = fp16 ? (size_t)(B * ys) : 0;
  size_t n_wf = fp16 ? n_w : 0;
  size_t n_buf = n_col + n_big + n_sum + n_wf + 2 * n_x + n_dy + 1;
  float *buf = NULL;
  DM_TRY(dm_scratch_get(dm_op_state(ctx), n_buf * sizeof(float), (void **)&buf));
  float *col = buf, *dybig = col + n_col, *sum = dybig + n_big, *wf = sum + n_sum;
  memset(sum, 0, n_sum * sizeof(float)); /* the dW and db sums; the rest is overwritten */
  float *xf = wf + n_wf, *dxf = xf + n_x, *dyf = dxf + n_x;
  const float *pw = dm_tensor_data(w);
  if (fp16) {
    dm_widen(x->dtype, dm_tensor_data(w), wf, n_w);
    pw = wf;
  }
  for (int64_t n0 = 0; n0 < N; n0 += B) {
    int64_t nb = N - n0 < B ? N - n0 : B;
    if (!fp16) {
      DM_TRY(conv_grad_chunk(&p, nb, (const float *)dm_tensor_data(x) + n0 * xs, pw,
                             (const float *)dy_data + n0 * ys, sum,
                             has_db ? sum + n_w : NULL,
                             dx ? (float *)dm_tensor_mutable_data(dx) + n0 * xs : NULL, col,
                             dybig));
    } else {
      dm_widen(x->dtype, (const uint16_t *)dm_tensor_data(x) + n0 * xs, xf, (size_t)(nb * xs));
      dm_widen(x->dtype, (const uint16_t *)dy_data + n0 * ys, dyf, (size_t)(nb * ys));
      DM_TRY(conv_grad_chunk(&p, nb, xf, pw, dyf, sum, has_db ? sum + n_w : NULL,
                             dx ? dxf : NULL, col, dybig));
      if (dx)
        dm_narrow(x->dtype, dxf, (uint16_t *)dm_tensor_mutable_data(dx) + n0 * xs,
                  (size_t)(nb * xs));
    }
  }
  /* dW, db rounded once (FP16) or copied. */
  dm_store_f32(dw->dtype, dm_tensor_mutable_data(dw), 0, (int64_t)n_w, sum);
  if (db)
    dm_store_f32(db->dtype, dm_tensor_mutable_data(db), 0, p.M, sum + n_w);
  return DM_OK;
}

static dm_status conv_grad_run(dm_op_ctx *ctx) {
  return dm_conv_backward_run(ctx, dm_tensor_data(dm_op_input(ctx, 2)));
}

/* Schemas ------------------------------------------------------------------------ */

static const dm_arg_spec conv_args[] = {DM_CONV_ARG_SPECS, {NULL, 0, 0, NULL}};
static const dm_arg_spec conv_grad_args[] = {
    DM_CONV_ARG_SPECS,
    {"no_gradient_to_input", DM_ARG_INT, 0, "set by the gradient maker when dX is not needed"},
    {NULL, 0, 0, NULL},
};

dm_status dm_conv_init(dm_op_ctx *ctx, void **state) {
  dm_conv_args a; /* argument errors at instantiation, not at the first run */
  DM_TRY(dm_conv_args_parse(ctx, 0, &a));
  return dm_scratch_init(ctx, state); /* column buffers kept between runs */
}

static const dm_op_schema conv_schema = {
    .type = "Conv",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = conv_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W (M x C/group x kH x kW; NHWC: M x kH x kW x C/group), [b (M)] -> Y.",
    .infer = conv_infer,
    .cost = dm_conv_cost,
    .gradient = conv_gradient,
    .layout = DM_LAYOUT_FILTER, .layout_inputs = 0x3, .layout_outputs = 0x1, /* X, W -> Y */
};

/* Conv's X, W, b -> ConvGradient's dW, [db], [dX] (also ConvReluGradient's). */
const dm_grad_slot dm_conv_grad_slots[] = {{1, NULL}, {2, "no_bias"}, {0, NULL}, {-1, NULL}};

static const dm_op_schema conv_grad_schema = {
    .type = "ConvGradient",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 3,
    .args = conv_grad_args,
    .precision = DM_PREC_FP16,
    .doc = "X, W, dY -> dW, db, [dX]; with no_bias: dW, [dX].",
    .infer = dm_conv_grad_infer,
    .cost = dm_conv_grad_cost,
    /* X, W, dY -> dW, dX (db, 1-D, may take slot 1: a slot of dX without no_bias) */
    .layout = DM_LAYOUT_FILTER, .layout_inputs = 0x7, .layout_outputs = 0x7,
    .grad_slots = dm_conv_grad_slots,
};

static const dm_op_schema *const schemas[] = {&conv_schema, &conv_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    { .type = "Conv", .device = DM_CPU, .init = dm_conv_init, .run = conv_run, .fini = dm_scratch_fini},
    { .type = "ConvGradient", .device = DM_CPU, .init = dm_conv_init, .run = conv_grad_run, .fini = dm_scratch_fini},
    {0},
};
const dm_op_family dm_family_conv = {schemas, kernels};
