/* test_conv.c: Conv and ConvGradient against a direct double-precision convolution,
 * FP32 and FP16, NCHW and NHWC, over a table of shapes; the gradient maker by finite
 * differences; shape inference and costs; argument errors.
 *
 * Tolerances follow from the arithmetic, not from tuning (as test_fc.c). With S the sum
 * of |terms| behind one result and L their number, any FP32 summation order errs by at
 * most L u32 S (u32 = 2^-24); the forward adds the bias after the sum, one more rounding:
 * (K + 1) u32 S with K = C/group*kH*kW. FP16 rounds the FP32 result once more: + u16 |y|
 * (u16 = 2^-11) plus 2^-25 (half the smallest subnormal).
 * Gradients: dW sums L = N*outH*outW terms, db the same, dX at most Mg*kH*kW.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "core/netio.h"
#include "core/workspace.h"
#include "operators/conv_args.h"
#include "grad_check.h"
#include "net/shape_infer.h"
#include "conv_case.h"
#include "op_test_util.h"


static const conv_case cases[] = {
    {"basic 3x3", 2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"odd sizes, asymmetric pads", 1, 3, 9, 8, 5, 3, 2, 2, 1, 1, 1, {1, 0, 2, 1}, 1, 1},
    {"pads bigger than stride", 2, 2, 6, 5, 3, 3, 3, 1, 1, 1, 1, {2, 2, 2, 2}, 1, 0},
    {"depthwise (group = C)", 2, 4, 7, 7, 4, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 4, 1},
    {"depthwise x2 (M = 2C)", 1, 3, 6, 5, 6, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 3, 1},
    {"group 2, stride 2", 3, 4, 6, 6, 6, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 2, 1},
    {"batch 1, stride > kernel", 1, 3, 10, 11, 2, 2, 2, 3, 3, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"dilation 2", 2, 3, 9, 9, 4, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 1, 1},
    {"dilation 2x1, 2x3 kernel", 1, 2, 8, 8, 3, 2, 3, 1, 2, 2, 1, {0, 1, 1, 0}, 1, 0},
    {"1x1", 3, 5, 4, 6, 7, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 grouped", 2, 6, 3, 3, 4, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 2, 0},
    {"1x1 stride 2", 2, 3, 5, 5, 4, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"1x1 padded", 1, 2, 3, 4, 3, 1, 1, 1, 1, 1, 1, {1, 0, 0, 1}, 1, 1},
    {"LeNet conv1", 4, 1, 28, 28, 20, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"LeNet conv2", 5, 20, 12, 12, 50, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1},
    {"kernel = padded input", 2, 2, 3, 3, 2, 5, 5, 1, 1, 1, 1, {1, 1, 1, 1}, 1, 1},
};

/* Worst error / bound per mode (0 FP32, 1 FP16, 2 BF16). */
static double worst_fwd[3], worst_grad[3];

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - (d * (k - 1) + 1)) / s + 1;
}

/* Draws n values in [lo, hi), rounded to the storage type so the reference sees them
 * (fp16 is the mode: 0 FP32, 1 FP16, 2 BF16). */
static double *draw(int64_t n, double lo, double hi, int fp16, uint64_t *seed) {
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    float f = (float)opt_uniform(seed, lo, hi);
    v[i] = fp16 ? opt_widen(fp16, opt_narrow(fp16, f)) : f;
  }
  return v;
}

/* (N, A, B, C) -> (N, B, C, A): NCHW to NHWC, and W (M, Cg, kh, kw) to (M, kh, kw, Cg). */
static double *to_last(const double *v, int64_t N, int64_t A, int64_t B, int64_t C) {
  int64_t total = N * A * B * C;
  double *t = malloc(sizeof *t * (size_t)(total > 0 ? total : 1));
  for (int64_t n = 0; n < N; n++)
    for (int64_t a = 0; a < A; a++)
      for (int64_t i = 0; i < B * C; i++)
        t[(n * B * C + i) * A + a] = v[(n * A + a) * B * C + i];
  return t;
}

/* (N, B, C, A) -> (N, A, B, C). */
static void from_last(const double *t, int64_t N, int64_t A, int64_t B, int64_t C, double *v) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t a = 0; a < A; a++)
      for (int64_t i = 0; i < B * C; i++)
        v[(n * A + a) * B * C + i] = t[(n * B * C + i) * A + a];
}

static void feed(dm_workspace *ws, const char *name, dm_dtype t, int ndim, const int64_t *dims,
                 const double *v) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  void *buf = malloc((size_t)(n ? n : 1) * 4);
  for (int64_t i = 0; i < n; i++)
    if (t == DM_FLOAT16)
      ((uint16_t *)buf)[i] = dm_double_to_half(v[i]);
    else if (t == DM_BFLOAT16)
      ((uint16_t *)buf)[i] = dm_double_to_bf16(v[i]);
    else
      ((float *)buf)[i] = (float)v[i];
  opt_feed(ws, name, t, ndim, dims, buf);
  free(buf);
}

static double *fetch(dm_workspace *ws, const char *name, dm_dtype t, int ndim,
                     const int64_t *dims) {
  const dm_tensor *y = opt_fetch(ws, name, t, ndim, dims);
  int64_t n = dm_tensor_numel(y);
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    v[i] = t == DM_FLOAT16    ? dm_half_to_float(((const uint16_t *)dm_tensor_data(y))[i])
           : t == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)dm_tensor_data(y))[i])
                              : ((const float *)dm_tensor_data(y))[i];
  return v;
}


/* Reference forward: y (N, M, oh, ow) and S (sum of |terms|) per output. */
static void ref_conv(const conv_case *c, const double *x, const double *w, const double *b,
                     int64_t oh_n, int64_t ow_n, double *y, double *S) {
  int64_t Cg = c->C / c->group, Mg = c->M / c->group;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t oh = 0; oh < oh_n; oh++)
        for (int64_t ow = 0; ow < ow_n; ow++) {
          double acc = b ? b[m] : 0, s = b ? fabs(b[m]) : 0;
          for (int64_t cg = 0; cg < Cg; cg++)
            for (int64_t i = 0; i < c->kh; i++)
              for (int64_t j = 0; j < c->kw; j++) {
                int64_t ih = oh * c->sh - c->pads[0] + i * c->dh;
                int64_t iw = ow * c->sw - c->pads[1] + j * c->dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
                  continue;
                double t = x[((n * c->C + m / Mg * Cg + cg) * c->H + ih) * c->W + iw] *
                           w[((m * Cg + cg) * c->kh + i) * c->kw + j];
                acc += t, s += fabs(t);
              }
          int64_t o = ((n * c->M + m) * oh_n + oh) * ow_n + ow;
          y[o] = acc, S[o] = s;
        }
}

/* got vs ref with the derived bound: acc = L u32 S, then FP16's (BF16's) one rounding. */
static double check_close(const char *what, const conv_case *c, int64_t i, double got,
                          double ref, double S, int64_t L, int fp16) {
  double acc = (double)L * OPT_U32 * S;
  double tol = fp16 ? acc + opt_mode_u(fp16) * (fabs(ref) + acc) + opt_mode_tiny(fp16) : acc;
  if (!(fabs(got - ref) <= tol))
    fail_msg("%s (%s, %s): [%lld] = %.9g, reference %.9g, tolerance %.3g", what, c->name,
             opt_mode_name(fp16), (long long)i, got, ref, tol);
  return tol > 0 ? fabs(got - ref) / tol : 0;
}

static void run_forward(dm_workspace *ws, const conv_case *c, int nhwc, int fp16, int b32,
                        int form) {
  uint64_t seed = 0x1234567ull + (uint64_t)form;
  int64_t Cg = c->C / c->group, K = Cg * c->kh * c->kw;
  int64_t oh = out_size(c->H, c->kh, c->sh, c->dh, c->pads[0], c->pads[2]);
  int64_t ow = out_size(c->W, c->kw, c->sw, c->dw, c->pads[1], c->pads[3]);
  double *x = draw(c->N * c->C * c->H * c->W, -2, 2, fp16, &seed);
  double *w = draw(c->M * K, -1, 1, fp16, &seed);
  double *b = draw(c->M, -1, 1, b32 ? 0 : fp16, &seed);
  int64_t ny = c->N * c->M * oh * ow;
  double *y = malloc(sizeof *y * (size_t)ny), *S = malloc(sizeof *S * (size_t)ny);
  ref_conv(c, x, w, c->bias ? b : NULL, oh, ow, y, S);

  dm_dtype t = opt_mode_dtype(fp16);
  int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, Cg, c->kh, c->kw}, bd[1] = {c->M};
  int64_t yd[4] = {c->N, c->M, oh, ow};
  if (nhwc) {
    double *xt = to_last(x, c->N, c->C, c->H, c->W), *wt = to_last(w, c->M, Cg, c->kh, c->kw);
    int64_t xdt[4] = {c->N, c->H, c->W, c->C}, wdt[4] = {c->M, c->kh, c->kw, Cg};
    feed(ws, "X", t, 4, xdt, xt);
    feed(ws, "W", t, 4, wdt, wt);
    free(xt), free(wt);
    yd[1] = oh, yd[2] = ow, yd[3] = c->M;
  } else {
    feed(ws, "X", t, 4, xd, x);
    feed(ws, "W", t, 4, wd, w);
  }
  feed(ws, "b", fp16 && !b32 ? t : DM_FLOAT, 1, bd, b);
  opt_op *op = opt_new("Conv");
  opt_in(op, "X"), opt_in(op, "W");
  if (c->bias)
    opt_in(op, "b");
  opt_out(op, "Y");
  conv_case_args(op, c, nhwc, form);
  if (form == 1) { /* GPU hints are accepted and ignored */
    opt_arg_int(op, "exhaustive_search", 1), opt_arg_int(op, "ws_nbytes_limit", 1 << 20);
    opt_arg_int(op, "enable_tensor_core", 1), opt_arg_int(op, "float16_compute", 1);
    opt_arg_int(op, "shared_buffer", 1);
  }
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s: %s", c->name, dm_last_error());
  double *got = fetch(ws, "Y", t, 4, yd);
  if (nhwc) {
    double *g2 = malloc(sizeof *g2 * (size_t)ny);
    from_last(got, c->N, c->M, oh, ow, g2);
    free(got);
    got = g2;
  }
  double *worst = &worst_fwd[fp16];
  for (int64_t i = 0; i < ny; i++)
    *worst = fmax(*worst, check_close("Y", c, i, got[i], y[i], S[i], K + 1, fp16));
  free(x), free(w), free(b), free(y), free(S), free(got);
}

static void test_conv_fp32(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      run_forward(*state, &cases[i], nhwc, 0, 0, (int)i + nhwc);
  print_message("Conv FP32: worst error %.3f of the bound\n", worst_fwd[0]);
}

static void test_conv_fp16(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      run_forward(*state, &cases[i], nhwc, 1, (int)(i % 2), (int)i + nhwc);
  print_message("Conv FP16: worst error %.3f of the bound\n", worst_fwd[1]);
}

static void test_conv_bf16(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      run_forward(*state, &cases[i], nhwc, 2, (int)(i % 2), (int)i + nhwc);
  print_message("Conv BF16: worst error %.3f of the bound\n", worst_fwd[2]);
}

/* ConvGradient directly, against the double reference of dW, db, dX. `outs`: 0 all,
 * 1 no dX (no_gradient_to_input), and a bias-less case has dW, dX with no_bias. */
static void run_grad(dm_workspace *ws, const conv_case *c, int nhwc, int fp16, int drop_dx,
                     int form) {
  uint64_t seed = 0xABCDEFull + (uint64_t)form;
  int64_t Cg = c->C / c->group, Mg = c->M / c->group, K = Cg * c->kh * c->kw;
  int64_t oh = out_size(c->H, c->kh, c->sh, c->dh, c->pads[0], c->pads[2]);
  int64_t ow = out_size(c->W, c->kw, c->sw, c->dw, c->pads[1], c->pads[3]);
  int64_t nx = c->N * c->C * c->H * c->W, ny = c->N * c->M * oh * ow;
  double *x = draw(nx, -2, 2, fp16, &seed), *w = draw(c->M * K, -1, 1, fp16, &seed);
  double *dy = draw(ny, -1, 1, fp16, &seed);
  double *dw = calloc((size_t)(c->M * K), sizeof *dw), *dwS = calloc((size_t)(c->M * K), sizeof *dw);
  double *db = calloc((size_t)c->M, sizeof *db), *dbS = calloc((size_t)c->M, sizeof *db);
  double *dx = calloc((size_t)nx, sizeof *dx), *dxS = calloc((size_t)nx, sizeof *dx);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t a = 0; a < oh; a++)
        for (int64_t bb = 0; bb < ow; bb++) {
          double g = dy[((n * c->M + m) * oh + a) * ow + bb];
          db[m] += g, dbS[m] += fabs(g);
          for (int64_t cg = 0; cg < Cg; cg++)
            for (int64_t i = 0; i < c->kh; i++)
              for (int64_t j = 0; j < c->kw; j++) {
                int64_t ih = a * c->sh - c->pads[0] + i * c->dh, iw = bb * c->sw - c->pads[1] + j * c->dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
                  continue;
                int64_t xi = ((n * c->C + m / Mg * Cg + cg) * c->H + ih) * c->W + iw;
                int64_t wi = ((m * Cg + cg) * c->kh + i) * c->kw + j;
                dw[wi] += g * x[xi], dwS[wi] += fabs(g * x[xi]);
                dx[xi] += g * w[wi], dxS[xi] += fabs(g * w[wi]);
              }
        }
  dm_dtype t = opt_mode_dtype(fp16);
  int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, Cg, c->kh, c->kw};
  int64_t yd[4] = {c->N, c->M, oh, ow}, bd[1] = {c->M};
  if (nhwc) {
    double *xt = to_last(x, c->N, c->C, c->H, c->W), *wt = to_last(w, c->M, Cg, c->kh, c->kw);
    double *dyt = to_last(dy, c->N, c->M, oh, ow);
    xd[1] = c->H, xd[2] = c->W, xd[3] = c->C;
    wd[1] = c->kh, wd[2] = c->kw, wd[3] = Cg;
    yd[1] = oh, yd[2] = ow, yd[3] = c->M;
    feed(ws, "X", t, 4, xd, xt), feed(ws, "W", t, 4, wd, wt), feed(ws, "dY", t, 4, yd, dyt);
    free(xt), free(wt), free(dyt);
  } else {
    feed(ws, "X", t, 4, xd, x), feed(ws, "W", t, 4, wd, w), feed(ws, "dY", t, 4, yd, dy);
  }
  opt_op *op = opt_new("ConvGradient");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "dY");
  opt_out(op, "dW");
  if (c->bias)
    opt_out(op, "db");
  else
    opt_arg_int(op, "no_bias", 1);
  if (!drop_dx)
    opt_out(op, "dX");
  else
    opt_arg_int(op, "no_gradient_to_input", 1);
  conv_case_args(op, c, nhwc, form);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s: %s", c->name, dm_last_error());
  double *worst = &worst_grad[fp16];
  double *got = fetch(ws, "dW", t, 4, wd);
  if (nhwc) {
    double *g2 = malloc(sizeof *g2 * (size_t)(c->M * K));
    from_last(got, c->M, Cg, c->kh, c->kw, g2);
    free(got), got = g2;
  }
  for (int64_t i = 0; i < c->M * K; i++)
    *worst = fmax(*worst, check_close("dW", c, i, got[i], dw[i], dwS[i], c->N * oh * ow, fp16));
  free(got);
  if (c->bias) {
    got = fetch(ws, "db", t, 1, bd);
    for (int64_t i = 0; i < c->M; i++)
      *worst = fmax(*worst, check_close("db", c, i, got[i], db[i], dbS[i], c->N * oh * ow, fp16));
    free(got);
  }
  if (!drop_dx) {
    got = fetch(ws, "dX", t, 4, xd);
    if (nhwc) {
      double *g2 = malloc(sizeof *g2 * (size_t)nx);
      from_last(got, c->N, c->C, c->H, c->W, g2);
      free(got), got = g2;
    }
    for (int64_t i = 0; i < nx; i++)
      *worst = fmax(*worst, check_close("dX", c, i, got[i], dx[i], dxS[i], Mg * c->kh * c->kw, fp16));
    free(got);
  }
  free(x), free(w), free(dy), free(dw), free(dwS), free(db), free(dbS), free(dx), free(dxS);
}

static void test_conv_grad_fp32(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      run_grad(*state, &cases[i], nhwc, 0, i % 5 == 4, (int)i + nhwc);
  print_message("ConvGradient FP32: worst error %.3f of the bound\n", worst_grad[0]);
}

static void test_conv_grad_fp16(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      run_grad(*state, &cases[i], nhwc, 1, i % 5 == 3, (int)i + nhwc);
  print_message("ConvGradient FP16: worst error %.3f of the bound\n", worst_grad[1]);
}

static void test_conv_grad_bf16(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int nhwc = 0; nhwc < 2; nhwc++)
      run_grad(*state, &cases[i], nhwc, 2, i % 5 == 3, (int)i + nhwc);
  print_message("ConvGradient BF16: worst error %.3f of the bound\n", worst_grad[2]);
}

/* The same tables with the images split into chunks: one image per chunk, and chunks of
 * a few images with a shorter last one. */
static void test_conv_chunked(void **state) {
  size_t saved = dm_conv_chunk_bytes;
  size_t budgets[] = {1, 2000, 300000};
  for (int k = 0; k < 3; k++) {
    dm_conv_chunk_bytes = budgets[k];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      for (int v = 0; v < 4; v++) {
        run_forward(*state, &cases[i], v & 1, v >> 1, 0, (int)i + v);
        run_grad(*state, &cases[i], v & 1, v >> 1, i % 5 == 2, (int)i + v);
      }
  }
  dm_conv_chunk_bytes = saved;
}

/* The gradient maker and kernels end to end, against finite differences of Conv. */
static void test_conv_grad_check(void **state) {
  (void)state;
  uint64_t seed = 99;
  float x[2 * 4 * 6 * 5], w[6 * 2 * 3 * 3], b[6];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
    x[i] = (float)opt_uniform(&seed, -1, 1);
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
    w[i] = (float)opt_uniform(&seed, -1, 1);
  for (size_t i = 0; i < 6; i++)
    b[i] = (float)opt_uniform(&seed, -1, 1);
  double worst = 0;
  gc_input nchw[] = {{"X", 4, {2, 4, 6, 5}, x, 1, 0},
                     {"W", 4, {6, 2, 3, 3}, w, 1, 0},
                     {"b", 1, {6}, b, 1, 0}};
  worst = fmax(worst, gc_check("type: 'Conv' input: 'X' input: 'W' input: 'b' output: 'Y' "
                               "arg { name: 'kernel' i: 3 } arg { name: 'group' i: 2 } "
                               "arg { name: 'pads' ints: [1, 0, 2, 1] } "
                               "arg { name: 'stride_h' i: 2 } arg { name: 'stride_w' i: 1 }",
                               nchw, 3, 1, 2 * 3 * 3));
  gc_input nb[] = {{"X", 4, {2, 4, 6, 5}, x, 1, 0}, {"W", 4, {6, 4, 1, 1}, w, 1, 0}};
  worst = fmax(worst, gc_check("type: 'Conv' input: 'X' input: 'W' output: 'Y' "
                               "arg { name: 'kernel' i: 1 }",
                               nb, 2, 1, 4));
  gc_input dil[] = {{"X", 4, {2, 4, 6, 5}, x, 1, 0}, {"W", 4, {3, 4, 2, 2}, w, 1, 0},
                    {"b", 1, {3}, b, 1, 0}};
  worst = fmax(worst, gc_check("type: 'Conv' input: 'X' input: 'W' input: 'b' output: 'Y' "
                               "arg { name: 'kernel' i: 2 } arg { name: 'dilation' i: 2 } "
                               "arg { name: 'pad' i: 1 }",
                               dil, 3, 1, 4 * 2 * 2));
  gc_input nhwc[] = {{"X", 4, {2, 6, 5, 4}, x, 1, 0}, {"W", 4, {4, 3, 3, 1}, w, 1, 0},
                     {"b", 1, {4}, b, 1, 0}};
  worst = fmax(worst, gc_check("type: 'Conv' input: 'X' input: 'W' input: 'b' output: 'Y' "
                               "arg { name: 'kernel' i: 3 } arg { name: 'group' i: 4 } "
                               "arg { name: 'pad' i: 1 } arg { name: 'order' s: 'NHWC' }",
                               nhwc, 3, 1, 3 * 3));
  print_message("Conv finite differences: worst error %.3f of the tolerance\n", worst);
}

/* Shape inference over shape-only tensors (the path passes take) and the cost. */
static void infer_one(const char *op_text, const int64_t *xd, const int64_t *wd, int64_t M,
                      dm_status want, const char *frag, const int64_t *yd, double flops) {
  char text[1024];
  snprintf(text, sizeof text, "op { %s }", op_text);
  ProtobufCMessage *m = NULL;
  assert_int_equal(dm_text_parse(text, strlen(text), "infer", &caffe2__net_def__descriptor, &m),
                   DM_OK);
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  dm_blob *bl = NULL;
  assert_int_equal(dm_workspace_get_or_create(ws, "X", &bl), DM_OK);
  assert_int_equal(dm_tensor_set_shape(bl->tensor, DM_FLOAT16, 4, xd), DM_OK);
  assert_int_equal(dm_workspace_get_or_create(ws, "W", &bl), DM_OK);
  assert_int_equal(dm_tensor_set_shape(bl->tensor, DM_FLOAT16, 4, wd), DM_OK);
  assert_int_equal(dm_workspace_get_or_create(ws, "b", &bl), DM_OK);
  assert_int_equal(dm_tensor_set_shape(bl->tensor, DM_FLOAT, 1, &M), DM_OK);
  dm_op_cost cost = {0};
  dm_status s = dm_infer_net_shapes(ws, (Caffe2__NetDef *)m, "infer", NULL, NULL, &cost);
  if (want != DM_OK) {
    opt_expect_error(s, want, frag, NULL);
  } else {
    if (s != DM_OK)
      fail_msg("%s", dm_last_error());
    const dm_tensor *y = dm_workspace_find(ws, "Y")->tensor;
    assert_int_equal(dm_tensor_dtype(y), DM_FLOAT16);
    assert_null(dm_tensor_data(y)); /* nothing allocated */
    for (int i = 0; i < 4; i++)
      assert_int_equal(dm_tensor_dims(y)[i], yd[i]);
    assert_true(cost.flops == flops);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  dm_workspace_destroy(ws);
}

static void test_conv_infer(void **state) {
  (void)state;
  int64_t x[] = {8, 3, 32, 32}, w[] = {16, 3, 5, 5}, y[] = {8, 16, 16, 16};
  infer_one("type: 'Conv' input: 'X' input: 'W' input: 'b' output: 'Y' "
            "arg { name: 'kernel' i: 5 } arg { name: 'stride' i: 2 } arg { name: 'pad' i: 2 }",
            x, w, 16, DM_OK, NULL, y, 2.0 * 16 * 3 * 5 * 5 * 16 * 16 * 8);
  int64_t xn[] = {2, 31, 31, 8}, wn[] = {8, 3, 3, 1}, yn[] = {2, 16, 16, 8};
  infer_one("type: 'Conv' input: 'X' input: 'W' output: 'Y' arg { name: 'order' s: 'NHWC' } "
            "arg { name: 'kernel' i: 3 } arg { name: 'stride' i: 2 } arg { name: 'group' i: 8 } "
            "arg { name: 'legacy_pad' i: 2 }",
            xn, wn, 8, DM_OK, NULL, yn, 2.0 * 8 * 1 * 3 * 3 * 16 * 16 * 2);
  int64_t xs[] = {1, 3, 5, 5}, ws7[] = {4, 3, 7, 7};
  infer_one("type: 'Conv' input: 'X' input: 'W' output: 'Y' arg { name: 'kernel' i: 7 }", xs,
            ws7, 4, DM_ERR_SHAPE, "kernel 7x7 does not fit the padded input 5x5 (pads t0 l0 b0 r0)",
            NULL, 0);
}

/* legacy_pad output sizes against values computed by hand from Caffe2's rules. */
static void test_conv_legacy_pad(void **state) {
  (void)state;
  int64_t x[] = {1, 2, 7, 8}, w3[] = {3, 2, 3, 3}, w2[] = {3, 2, 2, 2};
  /* VALID ignores pad: (7-3)/2+1 = 3, (8-3)/2+1 = 3. */
  int64_t v[] = {1, 3, 3, 3};
  infer_one("type: 'Conv' input: 'X' input: 'W' output: 'Y' arg { name: 'kernel' i: 3 } "
            "arg { name: 'stride' i: 2 } arg { name: 'legacy_pad' i: 1 } arg { name: 'pad' i: 4 }",
            x, w3, 3, DM_OK, NULL, v, 2.0 * 3 * 2 * 9 * 9);
  /* SAME: ceil(7/3) = 3, ceil(8/3) = 3. */
  int64_t s[] = {1, 3, 3, 3};
  infer_one("type: 'Conv' input: 'X' input: 'W' output: 'Y' arg { name: 'kernel' i: 2 } "
            "arg { name: 'stride' i: 3 } arg { name: 'legacy_pad' i: 2 }",
            x, w2, 3, DM_OK, NULL, s, 2.0 * 3 * 2 * 4 * 9);
}

/* SAME with an odd total pad puts the extra row/column at the tail (bottom/right):
 * H = 4, k = 2, s = 1 needs 1 pad, all at the bottom; compare with explicit pads. */
static void test_conv_same_pad_values(void **state) {
  dm_workspace *ws = *state;
  float x[16], w[4] = {1, 2, 3, 4};
  for (int i = 0; i < 16; i++)
    x[i] = (float)(i + 1);
  int64_t xd[] = {1, 1, 4, 4}, wd[] = {1, 1, 2, 2}, yd[] = {1, 1, 4, 4};
  opt_feed(ws, "X", DM_FLOAT, 4, xd, x);
  opt_feed(ws, "W", DM_FLOAT, 4, wd, w);
  opt_op *op = opt_new("Conv");
  opt_in(op, "X"), opt_in(op, "W"), opt_out(op, "Y1");
  opt_arg_int(op, "kernel", 2), opt_arg_int(op, "legacy_pad", 2);
  assert_int_equal(opt_run(op, ws), DM_OK);
  op = opt_new("Conv");
  opt_in(op, "X"), opt_in(op, "W"), opt_out(op, "Y2");
  int64_t pads[] = {0, 0, 1, 1};
  opt_arg_int(op, "kernel", 2), opt_arg_ints(op, "pads", 4, pads);
  assert_int_equal(opt_run(op, ws), DM_OK);
  const float *y1 = dm_tensor_data(opt_fetch(ws, "Y1", DM_FLOAT, 4, yd));
  const float *y2 = dm_tensor_data(opt_fetch(ws, "Y2", DM_FLOAT, 4, yd));
  assert_memory_equal(y1, y2, 16 * sizeof(float));
  assert_true(y1[0] == 1 * 1 + 2 * 2 + 5 * 3 + 6 * 4);
  assert_true(y1[15] == 16 * 1); /* bottom-right: only the window's top-left is inside */
}

static dm_status run_bad(dm_workspace *ws, const int64_t *xd, const int64_t *wd, int64_t nb,
                         const char *k, int64_t kv, const char *k2, int64_t kv2,
                         const char *order) {
  float z[4096] = {0};
  opt_feed(ws, "X", DM_FLOAT, 4, xd, z);
  opt_feed(ws, "W", DM_FLOAT, 4, wd, z);
  opt_op *op = opt_new("Conv");
  opt_in(op, "X"), opt_in(op, "W");
  if (nb) {
    opt_feed(ws, "b", DM_FLOAT, 1, &nb, z);
    opt_in(op, "b");
  }
  opt_out(op, "Y");
  if (k)
    opt_arg_int(op, k, kv);
  if (k2)
    opt_arg_int(op, k2, kv2);
  if (order)
    opt_arg_string(op, "order", order);
  return opt_run(op, ws);
}

static void test_conv_errors(void **state) {
  dm_workspace *ws = *state;
  int64_t x[] = {2, 4, 5, 5}, w[] = {6, 2, 3, 3}, w7[] = {6, 4, 7, 7}, w4[] = {6, 4, 3, 3};
  opt_expect_error(run_bad(ws, x, w7, 0, "kernel", 7, NULL, 0, NULL), DM_ERR_SHAPE,
                   "op 0 (Conv)", "kernel 7x7 does not fit the padded input 5x5 (pads t0 l0 b0 r0)",
                   NULL);
  opt_expect_error(run_bad(ws, x, w, 0, "kernel", 3, "group", 3, NULL), DM_ERR_SHAPE,
                   "group 3 does not divide the 4 input channels", NULL);
  int64_t w5[] = {5, 2, 3, 3};
  opt_expect_error(run_bad(ws, x, w5, 0, "kernel", 3, "group", 2, NULL), DM_ERR_SHAPE,
                   "group 2 does not divide the 5 output channels", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, "kernel", 3, "group", 2, NULL), DM_ERR_SHAPE,
                   "W's C/group must be 2, not 4", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, "kernel", 5, NULL, 0, NULL), DM_ERR_SHAPE,
                   "W is 6x4x3x3 (NCHW), but the kernel is 5x5", NULL);
  opt_expect_error(run_bad(ws, x, w4, 5, "kernel", 3, NULL, 0, NULL), DM_ERR_SHAPE,
                   "b must hold M = 6 values", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, "kernel", 3, NULL, 0, "CHWN"), DM_ERR_INVALID,
                   "'order' is 'CHWN'; expected NCHW or NHWC", NULL);
  opt_op *op = opt_new("Conv");
  opt_in(op, "X"), opt_in(op, "W"), opt_out(op, "Y");
  opt_arg_int(op, "kernel", 3), opt_arg_int(op, "group", 2), opt_arg_int(op, "dilation", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_UNSUPPORTED, "dilation 2x2 needs group 1", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, NULL, 0, NULL, 0, NULL), DM_ERR_INVALID,
                   "the kernel size is required", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, "kernel", 3, "kernel_h", 3, NULL), DM_ERR_INVALID,
                   "give 'kernel', 'kernel_h'/'kernel_w' or 'kernels'", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, "kernel", 3, "pad_t", 1, NULL), DM_ERR_INVALID,
                   "must be given together", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, "kernel", 3, "stride", 0, NULL), DM_ERR_INVALID,
                   "stride 0 is out of range", NULL);
  opt_expect_error(run_bad(ws, x, w4, 0, "kernel", 3, "legacy_pad", 4, NULL), DM_ERR_INVALID,
                   "legacy_pad 4 is not one of", NULL);
  int64_t x3[] = {4, 5, 5};
  static const float z[4096];
  opt_feed(ws, "X", DM_FLOAT, 3, x3, z);
  op = opt_new("Conv");
  opt_in(op, "X"), opt_in(op, "W"), opt_out(op, "Y");
  opt_arg_int(op, "kernel", 3);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "X is 4x5x5; Conv takes a 4-D NCHW input",
                   NULL);
  /* ConvGradient: no_bias with three outputs. */
  opt_feed(ws, "X", DM_FLOAT, 4, x, z);
  op = opt_new("ConvGradient");
  opt_in(op, "X"), opt_in(op, "W"), opt_in(op, "dY");
  opt_out(op, "dW"), opt_out(op, "db"), opt_out(op, "dX");
  opt_arg_int(op, "kernel", 3), opt_arg_int(op, "no_bias", 1);
  int64_t yd[] = {2, 6, 3, 3};
  opt_feed(ws, "dY", DM_FLOAT, 4, yd, z);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "no_bias is set", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_fp32),
      cmocka_unit_test(test_conv_fp16),
      cmocka_unit_test(test_conv_bf16),
      cmocka_unit_test(test_conv_grad_fp32),
      cmocka_unit_test(test_conv_grad_fp16),
      cmocka_unit_test(test_conv_grad_bf16),
      cmocka_unit_test(test_conv_chunked),
      cmocka_unit_test(test_conv_grad_check),
      cmocka_unit_test(test_conv_infer),
      cmocka_unit_test(test_conv_legacy_pad),
      cmocka_unit_test(test_conv_same_pad_values),
      cmocka_unit_test(test_conv_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
