/* test_spatial.c: ConvTranspose, ResizeNearest, UpsampleBilinear and PadImage against
 * double-precision loops written here from the ops' definitions (Caffe2's and ONNX's
 * formulas), FP32, FP16 and BF16; small cases whose answers are ONNX's documented
 * examples; errors.
 *
 * Bounds. Inputs are exact in every dtype (values rounded to it before the reference
 * sees them). ConvTranspose: each output sums L = C/group*kH*kW products and a bias in
 * FP32: |error| <= (L + 1) u32 S, S = sum |x w| + |b|. Bilinear: four weights rounded to
 * FP32 and three FP32 blends: 8 u32 M, M the largest |x| under the window. Nearest and
 * PadImage copy: exact. A 16-bit output rounds once more: + u |y| + the subnormal half.
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
#include "demitasse_plugin.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* n values uniform in [-1, 1), rounded to the mode's dtype (mode 0: FP32). */
static double *values(int64_t n, int mode, uint64_t seed) { return opt_draw(n, -1, 1, mode, &seed); }

static double get(const dm_tensor *t, int64_t i) {
  dm_dtype d = dm_tensor_dtype(t);
  return d == DM_FLOAT16    ? dm_half_to_float(((const uint16_t *)dm_tensor_data(t))[i])
         : d == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)dm_tensor_data(t))[i])
                            : ((const float *)dm_tensor_data(t))[i];
}

/* Compares Y (dims yd) with ref, each within its bound (acc: the FP32 part). */
static void compare(dm_workspace *ws, const char *what, int mode, const int64_t yd[4],
                    const double *ref, const double *acc) {
  const dm_tensor *y = opt_fetch(ws, "Y", opt_mode_dtype(mode), 4, yd);
  int64_t n = yd[0] * yd[1] * yd[2] * yd[3];
  for (int64_t i = 0; i < n; i++) {
    double a = acc ? acc[i] : 0, tol = a + (mode ? opt_mode_u(mode) * (fabs(ref[i]) + a) +
                                                       opt_mode_tiny(mode) : 0);
    double err = fabs(get(y, i) - ref[i]);
    if (!(err <= tol))
      fail_msg("%s %s: element %lld is %.9g, expected %.9g (error %.3g > bound %.3g)", what,
               opt_mode_name(mode), (long long)i, get(y, i), ref[i], err, tol);
  }
}

/* ---- ConvTranspose ---------------------------------------------------------------- */

typedef struct ct_case {
  const char *name;
  int64_t N, C, H, W, Mg, group, kh, kw, sh, sw, dh, dw;
  int64_t pads[4], adj[2];
  int bias;
} ct_case;

static const ct_case ct_cases[] = {
    {"3x3 stride 1", 2, 3, 4, 5, 2, 1, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, {0, 0}, 1},
    {"stride 2 pads adj", 1, 2, 3, 4, 3, 1, 3, 2, 2, 3, 1, 1, {1, 0, 2, 1}, {1, 2}, 1},
    {"groups", 2, 4, 3, 3, 3, 2, 2, 3, 2, 1, 1, 1, {0, 1, 0, 1}, {1, 0}, 0},
    {"dilated", 1, 2, 4, 3, 2, 1, 2, 3, 1, 2, 2, 3, {1, 1, 0, 2}, {0, 1}, 1},
    {"depthwise k1", 1, 3, 2, 2, 1, 3, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, {1, 1}, 1},
};

static void ct_run(dm_workspace *ws, const ct_case *c, int mode) {
  const int64_t M = c->Mg * c->group, Cg = c->C / c->group;
  const int64_t oH = c->sh * (c->H - 1) + c->dh * (c->kh - 1) + 1 - c->pads[0] - c->pads[2] + c->adj[0];
  const int64_t oW = c->sw * (c->W - 1) + c->dw * (c->kw - 1) + 1 - c->pads[1] - c->pads[3] + c->adj[1];
  int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->C, c->Mg, c->kh, c->kw};
  int64_t yd[4] = {c->N, M, oH, oW};
  int64_t nx = c->N * c->C * c->H * c->W, nw = c->C * c->Mg * c->kh * c->kw, ny = c->N * M * oH * oW;
  double *x = values(nx, mode, 11), *w = values(nw, mode, 12), *b = values(M, mode, 13);
  double *ref = calloc((size_t)ny, sizeof *ref), *S = calloc((size_t)ny, sizeof *S);
  /* The definition: every input scattered through the kernel onto Y. */
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t ci = 0; ci < c->C; ci++)
      for (int64_t h = 0; h < c->H; h++)
        for (int64_t v = 0; v < c->W; v++)
          for (int64_t m = 0; m < c->Mg; m++)
            for (int64_t i = 0; i < c->kh; i++)
              for (int64_t j = 0; j < c->kw; j++) {
                int64_t oh = h * c->sh - c->pads[0] + i * c->dh, ow = v * c->sw - c->pads[1] + j * c->dw;
                if (oh < 0 || oh >= oH || ow < 0 || ow >= oW)
                  continue;
                int64_t co = (ci / Cg) * c->Mg + m;
                int64_t yi = ((n * M + co) * oH + oh) * oW + ow;
                double p = x[((n * c->C + ci) * c->H + h) * c->W + v] *
                           w[((ci * c->Mg + m) * c->kh + i) * c->kw + j];
                ref[yi] += p, S[yi] += fabs(p);
              }
  int64_t L = Cg * c->kh * c->kw;
  for (int64_t i = 0; i < ny; i++) {
    int64_t co = (i / (oH * oW)) % M;
    if (c->bias)
      ref[i] += b[co], S[i] += fabs(b[co]);
    S[i] *= (double)(L + 1) * OPT_U32;
  }
  opt_feed_mode(ws, "X", mode, 4, xd, x), opt_feed_mode(ws, "W", mode, 4, wd, w);
  if (c->bias)
    opt_feed_mode(ws, "b", mode, 1, &M, b);
  opt_op *op = opt_new("ConvTranspose");
  opt_in(op, "X"), opt_in(op, "W");
  if (c->bias)
    opt_in(op, "b");
  opt_out(op, "Y");
  int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, d[2] = {c->dh, c->dw};
  opt_arg_ints(op, "kernels", 2, k), opt_arg_ints(op, "strides", 2, s);
  opt_arg_ints(op, "pads", 4, c->pads), opt_arg_ints(op, "adjs", 2, c->adj);
  if (c->dh != 1 || c->dw != 1)
    opt_arg_ints(op, "dilations", 2, d);
  if (c->group != 1)
    opt_arg_int(op, "group", c->group);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("ConvTranspose %s: %s", c->name, dm_last_error());
  compare(ws, c->name, mode, yd, ref, S);
  free(x), free(w), free(b), free(ref), free(S);
}

static void test_conv_transpose(void **state) {
  for (int mode = 0; mode < 3; mode++)
    for (size_t i = 0; i < sizeof ct_cases / sizeof ct_cases[0]; i++)
      ct_run(*state, &ct_cases[i], mode);
}

/* ONNX's test_convtranspose example: X = 0..8 (3x3), W all ones (2 channels of 3x3),
 * stride 1: each output is the sum of the inputs its window covers. */
static void test_conv_transpose_onnx_example(void **state) {
  dm_workspace *ws = *state;
  int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 2, 3, 3}, yd[4] = {1, 2, 5, 5};
  double x[9], w[18], ref[50];
  for (int i = 0; i < 9; i++)
    x[i] = i;
  for (int i = 0; i < 18; i++)
    w[i] = 1;
  static const double y0[25] = {0,  1,  3,  3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                27, 15, 9,  20, 33, 24, 13, 6,  13, 21, 15, 8};
  memcpy(ref, y0, sizeof y0), memcpy(ref + 25, y0, sizeof y0);
  opt_feed_mode(ws, "X", 0, 4, xd, x), opt_feed_mode(ws, "W", 0, 4, wd, w);
  opt_op *op = opt_new("ConvTranspose");
  opt_in(op, "X"), opt_in(op, "W"), opt_out(op, "Y");
  opt_arg_int(op, "kernel", 3);
  assert_int_equal(opt_run(op, ws), DM_OK);
  compare(ws, "ONNX example", 0, yd, ref, NULL);
}

static void test_conv_transpose_errors(void **state) {
  dm_workspace *ws = *state;
  static const float z[64];
  int64_t xd[4] = {1, 2, 2, 2}, wd[4] = {2, 1, 2, 2}, w3[4] = {3, 1, 2, 2}, bd = 3;
  opt_feed(ws, "X", DM_FLOAT, 4, xd, z), opt_feed(ws, "W", DM_FLOAT, 4, wd, z);
  opt_feed(ws, "W3", DM_FLOAT, 4, w3, z), opt_feed(ws, "b", DM_FLOAT, 1, &bd, z);
  struct {
    const char *w, *b, *arg;
    int64_t v;
    dm_status want;
    const char *frag;
  } bad[] = {
      {"W", NULL, "adj", 1, DM_ERR_INVALID, "less than the stride 1"},
      {"W3", NULL, NULL, 0, DM_ERR_SHAPE, "W must be (2, M/group, 2, 2)"},
      {"W", "b", NULL, 0, DM_ERR_SHAPE, "b must hold M = 1 values"},
      {"W", NULL, "pad", 2, DM_ERR_SHAPE, "the vertical output size is -1"},
      {"W", NULL, "legacy_pad", 2, DM_ERR_UNSUPPORTED, "explicit pads only"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    opt_op *op = opt_new("ConvTranspose");
    opt_in(op, "X"), opt_in(op, bad[i].w);
    if (bad[i].b)
      opt_in(op, bad[i].b);
    opt_out(op, "Y");
    opt_arg_int(op, "kernel", 2);
    if (bad[i].arg)
      opt_arg_int(op, bad[i].arg, bad[i].v);
    opt_expect_error(opt_run(op, ws), bad[i].want, "op 0 (ConvTranspose)", bad[i].frag, NULL);
  }
}

/* ---- ResizeNearest, UpsampleBilinear ---------------------------------------------- */

typedef struct rs_case {
  const char *name;
  int linear;
  const char *ct, *nm; /* NULL: the op's default (Caffe2's) */
  double hs, ws;       /* scales (0: by size) */
  int64_t oh, ow;      /* sizes (0: by scale) */
  int64_t N, C, H, W;
} rs_case;

static const rs_case rs_cases[] = {
    {"Caffe2 nearest x2", 0, NULL, NULL, 2, 2, 0, 0, 2, 3, 4, 5},
    {"Caffe2 nearest x1.5, x0.5", 0, NULL, NULL, 1.5, 0.5, 0, 0, 1, 2, 5, 8},
    {"nearest half_pixel rpf", 0, "half_pixel", "round_prefer_floor", 0, 0, 7, 3, 1, 2, 4, 5},
    {"nearest align_corners ceil", 0, "align_corners", "ceil", 0, 0, 8, 9, 1, 1, 3, 4},
    {"nearest pytorch rpc", 0, "pytorch_half_pixel", "round_prefer_ceil", 3, 0.5, 0, 0, 1, 2, 3, 6},
    {"Caffe2 bilinear x2", 1, NULL, NULL, 2, 2, 0, 0, 2, 2, 3, 4},
    {"bilinear half_pixel down", 1, "half_pixel", NULL, 0.6, 0.8, 0, 0, 1, 2, 5, 7},
    {"bilinear half_pixel sizes", 1, "half_pixel", NULL, 0, 0, 7, 5, 1, 2, 3, 4},
    {"bilinear pytorch to 1", 1, "pytorch_half_pixel", NULL, 0, 0, 1, 6, 1, 1, 4, 3},
    {"bilinear asymmetric", 1, "asymmetric", NULL, 1.7, 2.5, 0, 0, 1, 2, 3, 2},
    {"bilinear align_corners scales", 1, "align_corners", NULL, 1.5, 0.75, 0, 0, 2, 1, 4, 4},
    {"bilinear half_pixel_symmetric", 1, "half_pixel_symmetric", NULL, 1.7, 0.6, 0, 0, 1, 2, 4, 5},
    {"nearest half_pixel_symmetric", 0, "half_pixel_symmetric", "round_prefer_ceil", 2.3, 0.7, 0, 0, 1, 1, 3, 4},
    {"bilinear align_corners size and scale", 1, "align_corners", NULL, 1.3, 1.3, 5, 7, 1, 1, 4, 5},
};

/* ONNX's source coordinate of output o (Resize's formulas; len the resized length,
 * out the output size, as ONNX Runtime and PyTorch take align_corners' and
 * pytorch_half_pixel's resized length). */
static double onnx_coord(const char *ct, double o, double scale, double in, double len,
                         double out) {
  if (strcmp(ct, "align_corners") == 0)
    return out == 1 ? 0 : o * (in - 1) / (out - 1);
  if (strcmp(ct, "half_pixel") == 0)
    return (o + 0.5) / scale - 0.5;
  if (strcmp(ct, "pytorch_half_pixel") == 0)
    return out > 1 ? (o + 0.5) / scale - 0.5 : 0;
  if (strcmp(ct, "half_pixel_symmetric") == 0) /* centred on the rounded output */
    return in / 2 * (1 - floor(len) / len) + (o + 0.5) / scale - 0.5;
  return o / scale;
}

static int64_t nearest(const char *nm, double x, int64_t in) {
  double f = floor(x);
  int64_t i = (int64_t)f;
  if (x != f) {
    if (strcmp(nm, "ceil") == 0)
      i = (int64_t)ceil(x);
    else if (strcmp(nm, "round_prefer_floor") == 0)
      i = x - f > 0.5 ? i + 1 : i;
    else if (strcmp(nm, "round_prefer_ceil") == 0)
      i = x - f >= 0.5 ? i + 1 : i;
  }
  return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* The linear neighbours and weight along one dim, with the input's edge repeated. */
static void linear_at(double x, int64_t in, int64_t *a, int64_t *b, double *t) {
  double f = floor(x);
  *t = x - f;
  *a = (int64_t)f, *b = *a + 1;
  *a = *a < 0 ? 0 : *a >= in ? in - 1 : *a;
  *b = *b < 0 ? 0 : *b >= in ? in - 1 : *b;
}

static void rs_run(dm_workspace *ws, const rs_case *c, int mode) {
  const char *ct = c->ct ? c->ct : c->linear ? "align_corners" : "asymmetric";
  const char *nm = c->nm ? c->nm : "floor";
  double sc[2], len[2];
  int64_t in[2] = {c->H, c->W}, out[2];
  for (int d = 0; d < 2; d++) {
    double s = d ? c->ws : c->hs;
    int64_t o = d ? c->ow : c->oh;
    if (o && s) { /* both: the size, and the scale the coordinates use */
      s = (double)(float)s;
      out[d] = o, sc[d] = s, len[d] = s * (double)in[d];
    } else if (o) {
      out[d] = o, sc[d] = (double)o / (double)in[d], len[d] = (double)o;
    } else {
      s = (double)(float)s; /* the op's argument is a FLOAT */
      out[d] = (int64_t)floor(s * (double)in[d]), sc[d] = s, len[d] = s * (double)in[d];
    }
  }
  int64_t xd[4] = {c->N, c->C, c->H, c->W}, yd[4] = {c->N, c->C, out[0], out[1]};
  int64_t nx = c->N * c->C * c->H * c->W, ny = c->N * c->C * out[0] * out[1];
  double *x = values(nx, mode, 21), *ref = malloc(sizeof *ref * (size_t)ny);
  double *acc = calloc((size_t)ny, sizeof *acc);
  for (int64_t p = 0; p < c->N * c->C; p++)
    for (int64_t i = 0; i < out[0]; i++)
      for (int64_t j = 0; j < out[1]; j++) {
        double yh = onnx_coord(ct, (double)i, sc[0], (double)c->H, len[0], (double)out[0]);
        double yw = onnx_coord(ct, (double)j, sc[1], (double)c->W, len[1], (double)out[1]);
        const double *xp = x + p * c->H * c->W;
        int64_t yi = (p * out[0] + i) * out[1] + j;
        if (!c->linear) {
          ref[yi] = xp[nearest(nm, yh, c->H) * c->W + nearest(nm, yw, c->W)];
          continue;
        }
        int64_t h0, h1, w0, w1;
        double th, tw;
        linear_at(yh, c->H, &h0, &h1, &th);
        linear_at(yw, c->W, &w0, &w1, &tw);
        double q[4] = {xp[h0 * c->W + w0], xp[h0 * c->W + w1], xp[h1 * c->W + w0], xp[h1 * c->W + w1]};
        ref[yi] = (1 - th) * ((1 - tw) * q[0] + tw * q[1]) + th * ((1 - tw) * q[2] + tw * q[3]);
        double m = 0;
        for (int k = 0; k < 4; k++)
          m = fabs(q[k]) > m ? fabs(q[k]) : m;
        acc[yi] = 8 * OPT_U32 * m;
      }
  opt_feed_mode(ws, "X", mode, 4, xd, x);
  opt_op *op = opt_new(c->linear ? "UpsampleBilinear" : "ResizeNearest");
  opt_in(op, "X"), opt_out(op, "Y");
  if (c->hs)
    opt_arg_float(op, "height_scale", (float)c->hs), opt_arg_float(op, "width_scale", (float)c->ws);
  if (c->oh)
    opt_arg_int(op, "output_height", c->oh), opt_arg_int(op, "output_width", c->ow);
  if (c->ct)
    opt_arg_string(op, "coordinate_transformation_mode", c->ct);
  if (c->nm)
    opt_arg_string(op, "nearest_mode", c->nm);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s: %s", c->name, dm_last_error());
  compare(ws, c->name, mode, yd, ref, acc);
  free(x), free(ref), free(acc);
}

static void test_resize(void **state) {
  for (int mode = 0; mode < 3; mode++)
    for (size_t i = 0; i < sizeof rs_cases / sizeof rs_cases[0]; i++)
      rs_run(*state, &rs_cases[i], mode);
}

/* ONNX's documented examples (onnx.ai Resize; test_resize_upsample_scales_linear and
 * _align_corners): [[1, 2], [3, 4]] scaled by 2. */
static void test_resize_onnx_examples(void **state) {
  dm_workspace *ws = *state;
  int64_t xd[4] = {1, 1, 2, 2}, yd[4] = {1, 1, 4, 4};
  const double x[4] = {1, 2, 3, 4};
  static const double half_pixel[16] = {1,   1.25, 1.75, 2,   1.5, 1.75, 2.25, 2.5,
                                        2.5, 2.75, 3.25, 3.5, 3,   3.25, 3.75, 4};
  double third = 1.0 / 3, align[16];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      align[i * 4 + j] = 1 + 2 * i * third + j * third;
  static const double nearest2[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  const char *ct[3] = {"half_pixel", "align_corners", NULL};
  const double *want[3] = {half_pixel, align, nearest2};
  double acc[16];
  for (int i = 0; i < 16; i++)
    acc[i] = 16 * OPT_U32;
  for (int k = 0; k < 3; k++) {
    opt_feed_mode(ws, "X", 0, 4, xd, x);
    opt_op *op = opt_new(ct[k] ? "UpsampleBilinear" : "ResizeNearest");
    opt_in(op, "X"), opt_out(op, "Y");
    opt_arg_float(op, "height_scale", 2), opt_arg_float(op, "width_scale", 2);
    if (ct[k])
      opt_arg_string(op, "coordinate_transformation_mode", ct[k]);
    assert_int_equal(opt_run(op, ws), DM_OK);
    compare(ws, ct[k] ? ct[k] : "nearest", 0, yd, want[k], acc);
  }
}

static void test_resize_errors(void **state) {
  dm_workspace *ws = *state;
  static const float z[64];
  int64_t xd[4] = {1, 1, 2, 2}, x3[3] = {1, 2, 2};
  opt_feed(ws, "X", DM_FLOAT, 4, xd, z), opt_feed(ws, "X3", DM_FLOAT, 3, x3, z);
  struct {
    const char *type, *x, *arg, *sv;
    float fv;
    dm_status want;
    const char *frag;
  } bad[] = {
      {"ResizeNearest", "X", "height_scale", NULL, -1, DM_ERR_INVALID, "must be positive"},
      {"ResizeNearest", "X", "width_scale", NULL, 0.1f, DM_ERR_SHAPE, "output size of 0"},
      {"ResizeNearest", "X3", NULL, NULL, 0, DM_ERR_SHAPE, "4-D NCHW"},
      {"ResizeNearest", "X", "nearest_mode", "round", 0, DM_ERR_UNSUPPORTED, "nearest_mode 'round'"},
      {"UpsampleBilinear", "X", "coordinate_transformation_mode", "tf_crop_and_resize", 0,
       DM_ERR_UNSUPPORTED, "tf_crop_and_resize"},
      {"UpsampleBilinear", "X", "nearest_mode", "floor", 0, DM_ERR_INVALID, "ResizeNearest's"},
      {"UpsampleBilinear", "X", "output_height", NULL, 3, DM_ERR_INVALID, "given together"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    opt_op *op = opt_new(bad[i].type);
    opt_in(op, bad[i].x), opt_out(op, "Y");
    if (bad[i].sv)
      opt_arg_string(op, bad[i].arg, bad[i].sv);
    else if (bad[i].arg && strncmp(bad[i].arg, "output", 6) == 0)
      opt_arg_int(op, bad[i].arg, (int64_t)bad[i].fv);
    else if (bad[i].arg)
      opt_arg_float(op, bad[i].arg, bad[i].fv);
    char frag[64];
    snprintf(frag, sizeof frag, "op 0 (%s)", bad[i].type);
    opt_expect_error(opt_run(op, ws), bad[i].want, frag, bad[i].frag, NULL);
  }
}

/* ---- PadImage --------------------------------------------------------------------- */

static int64_t pad_src(const char *mode, int64_t o, int64_t head, int64_t n) {
  int64_t i = o - head;
  if (i >= 0 && i < n)
    return i;
  if (strcmp(mode, "edge") == 0)
    return i < 0 ? 0 : n - 1;
  if (strcmp(mode, "reflect") == 0) /* numpy's reflect: mirror about the edge pixel */
    return i < 0 ? -i : (n - 1) - (i - (n - 1));
  return -1;
}

static void test_pad(void **state) {
  dm_workspace *ws = *state;
  const char *modes[3] = {"constant", "reflect", "edge"};
  const int64_t pads[2][4] = {{1, 2, 3, 0}, {0, 3, 2, 2}};
  for (int mode = 0; mode < 3; mode++)
    for (int m = 0; m < 3; m++)
      for (int k = 0; k < 2; k++) {
        const int64_t N = 2, C = 3, H = 4, W = 5, *p = pads[k];
        const int64_t oH = H + p[0] + p[2], oW = W + p[1] + p[3];
        int64_t xd[4] = {N, C, H, W}, yd[4] = {N, C, oH, oW};
        double *x = values(N * C * H * W, mode, 31), *ref = malloc(sizeof *ref * (size_t)(N * C * oH * oW));
        const double value = 1.5;
        for (int64_t q = 0; q < N * C; q++)
          for (int64_t i = 0; i < oH; i++)
            for (int64_t j = 0; j < oW; j++) {
              int64_t h = pad_src(modes[m], i, p[0], H), w = pad_src(modes[m], j, p[1], W);
              ref[(q * oH + i) * oW + j] = h < 0 || w < 0 ? value : x[(q * H + h) * W + w];
            }
        opt_feed_mode(ws, "X", mode, 4, xd, x);
        opt_op *op = opt_new("PadImage");
        opt_in(op, "X"), opt_out(op, "Y");
        opt_arg_ints(op, "pads", 4, p);
        opt_arg_string(op, "mode", modes[m]);
        opt_arg_float(op, "value", (float)value);
        if (opt_run(op, ws) != DM_OK)
          fail_msg("PadImage %s: %s", modes[m], dm_last_error());
        compare(ws, modes[m], mode, yd, ref, NULL);
        free(x), free(ref);
      }
}

/* Integer tensors are copied too, the constant converted once. */
static void test_pad_int(void **state) {
  dm_workspace *ws = *state;
  int64_t xd[4] = {1, 1, 1, 2}, yd[4] = {1, 1, 2, 3};
  const int32_t x[2] = {7, -8};
  opt_feed(ws, "X", DM_INT32, 4, xd, x);
  opt_op *op = opt_new("PadImage");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_int(op, "pad_t", 1), opt_arg_int(op, "pad_l", 0), opt_arg_int(op, "pad_b", 0),
      opt_arg_int(op, "pad_r", 1);
  opt_arg_float(op, "value", -3);
  assert_int_equal(opt_run(op, ws), DM_OK);
  const dm_tensor *y = opt_fetch(ws, "Y", DM_INT32, 4, yd);
  const int32_t want[6] = {-3, -3, -3, 7, -8, -3};
  assert_memory_equal(dm_tensor_data(y), want, sizeof want);
}

static void test_pad_errors(void **state) {
  dm_workspace *ws = *state;
  static const float z[64];
  int64_t xd[4] = {1, 1, 2, 3};
  opt_feed(ws, "X", DM_FLOAT, 4, xd, z);
  struct {
    const char *mode;
    int64_t pad;
    dm_status want;
    const char *frag;
  } bad[] = {
      {"reflect", 2, DM_ERR_SHAPE, "a reflect pad of 2 needs a dim above it, got 2"},
      {"wrap", 1, DM_ERR_INVALID, "mode 'wrap'"},
      {"constant", -1, DM_ERR_INVALID, "pad_t -1 is out of range"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    opt_op *op = opt_new("PadImage");
    opt_in(op, "X"), opt_out(op, "Y");
    opt_arg_int(op, "pad", bad[i].pad);
    opt_arg_string(op, "mode", bad[i].mode);
    opt_expect_error(opt_run(op, ws), bad[i].want, "op 0 (PadImage)", bad[i].frag, NULL);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_transpose),        cmocka_unit_test(test_conv_transpose_onnx_example),
      cmocka_unit_test(test_conv_transpose_errors), cmocka_unit_test(test_resize),
      cmocka_unit_test(test_resize_onnx_examples),  cmocka_unit_test(test_resize_errors),
      cmocka_unit_test(test_pad),                   cmocka_unit_test(test_pad_int),
      cmocka_unit_test(test_pad_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
