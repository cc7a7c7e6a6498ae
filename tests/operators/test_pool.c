/* test_pool.c: MaxPool, AveragePool and their gradients against double-precision loops,
 * FP32 and FP16, NCHW and NHWC; legacy_pad output sizes against values computed by hand
 * from Caffe2's rules (SqueezeNet's pools among them); finite differences; errors.
 *
 * Bounds, derived (as test_fc.c): a maximum is exact. An average of L inputs is a sum
 * (error <= (L - 1) u32 S, S = sum |x|) times the rounded 1/L (two more roundings):
 * (L + 2) u32 S / L. FP16 rounds once more: + u16 |y| + 2^-25. MaxPoolGradient sums at
 * most kH*kW dY values into one dX; AveragePoolGradient adds kH*kW products dY * (1/L).
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
#include "grad_check.h"
#include "net/shape_infer.h"
#include "op_test_util.h"

typedef struct pool_case {
  const char *name;
  int64_t N, C, H, W, kh, kw, sh, sw;
  int64_t pads[4]; /* as given: t, l, b, r */
  int legacy, global;
  int64_t outH, outW, pt, pl; /* hand-computed output size and effective head pads */
} pool_case;

static const pool_case cases[] = {
    {"k3 s2", 2, 3, 7, 7, 3, 3, 2, 2, {0, 0, 0, 0}, 0, 0, 3, 3, 0, 0},
    {"odd, asymmetric pads", 1, 2, 8, 9, 3, 2, 2, 1, {1, 0, 1, 1}, 0, 0, 4, 9, 1, 0},
    {"pads, stride 1", 2, 3, 6, 5, 3, 3, 1, 1, {2, 2, 2, 2}, 0, 0, 8, 7, 2, 2},
    {"stride > kernel", 1, 2, 10, 10, 2, 2, 3, 3, {0, 0, 0, 0}, 0, 0, 3, 3, 0, 0},
    {"whole image 5x5", 1, 1, 5, 5, 5, 5, 1, 1, {0, 0, 0, 0}, 0, 0, 1, 1, 0, 0},
    {"global 13x13", 2, 4, 13, 13, 0, 0, 1, 1, {0, 0, 0, 0}, 0, 1, 1, 1, 0, 0},
    /* CAFFE_LEGACY_POOLING: ceil((6+2-3)/2)+1 = 4, ceil((5+2-3)/2)+1 = 3. */
    {"legacy 3, k3 s2 p1", 2, 3, 6, 5, 3, 3, 2, 2, {1, 1, 1, 1}, 3, 0, 4, 3, 1, 1},
    /* ceil((5+2-2)/2)+1 = 4 and ceil((7+2-2)/2)+1 = 5, each last window starting in the
     * padding ((4-1)*2 >= 5+1, (5-1)*2 >= 7+1) is dropped: 3 and 4. */
    {"legacy 3 drops a window", 1, 2, 5, 7, 2, 2, 2, 2, {1, 1, 1, 1}, 3, 0, 3, 4, 1, 1},
    /* SqueezeNet: kernel 3 stride 2 with Caffe's arithmetic: 111 -> 55 -> 27 -> 13. */
    {"SqueezeNet pool1 111", 1, 2, 111, 111, 3, 3, 2, 2, {0, 0, 0, 0}, 3, 0, 55, 55, 0, 0},
    {"SqueezeNet pool 55", 1, 3, 55, 55, 3, 3, 2, 2, {0, 0, 0, 0}, 3, 0, 27, 27, 0, 0},
    {"SqueezeNet pool 27", 2, 3, 27, 27, 3, 3, 2, 2, {0, 0, 0, 0}, 3, 0, 13, 13, 0, 0},
    /* VALID ignores pad: (7-3)/2+1 = 3, (8-3)/2+1 = 3. */
    {"legacy 1 (VALID)", 1, 2, 7, 8, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 0, 3, 3, 0, 0},
    /* SAME: ceil(7/2) = 4 with pad 2 = 1 + 1; ceil(8/2) = 4 with pad 1 = 0 + 1 (tail). */
    {"legacy 2 (SAME)", 2, 2, 7, 8, 3, 3, 2, 2, {0, 0, 0, 0}, 2, 0, 4, 4, 1, 0},
};

static double worst_mode[3]; /* FP32, FP16, BF16 */

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* Values k/64, |k| <= 2046 (exact in FP16), with k = i*1031 mod 4093 (prime): equal only
 * 4093 elements apart, more than any window spans, so a maximum has no ties. */
static double *distinct(int64_t n, double scale) {
  double *v = malloc(sizeof *v * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    v[i] = (double)((i * 1031) % 4093 - 2046) / 64.0 * scale;
  return v;
}

/* The same for BF16 (8 significant bits): integers in [-128, 128], period 257, which
 * is longer than any pooling window's span of flat indices in the cases below. */
static double *distinct_bf16(int64_t n) {
  double *v = malloc(sizeof *v * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    v[i] = (double)((i * 101) % 257 - 128);
  return v;
}

static double *nchw_to_nhwc(const double *v, int64_t N, int64_t C, int64_t H, int64_t W) {
  double *t = malloc(sizeof *t * (size_t)(N * C * H * W));
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < H * W; i++)
        t[(n * H * W + i) * C + c] = v[(n * C + c) * H * W + i];
  return t;
}

static void feed(dm_workspace *ws, const char *name, dm_dtype t, const int64_t *dims,
                 const double *v) {
  int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
  void *buf = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    if (t == DM_FLOAT16)
      ((uint16_t *)buf)[i] = dm_double_to_half(v[i]);
    else if (t == DM_BFLOAT16)
      ((uint16_t *)buf)[i] = dm_double_to_bf16(v[i]);
    else
      ((float *)buf)[i] = (float)v[i];
  opt_feed(ws, name, t, 4, dims, buf);
  free(buf);
}

/* Element (n, c, h, w) of a fetched tensor in either order. */
static double at(const dm_tensor *t, int nhwc, int64_t C, int64_t H, int64_t W, int64_t n,
                 int64_t c, int64_t h, int64_t w) {
  int64_t i = nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
  dm_dtype d = dm_tensor_dtype(t);
  return d == DM_FLOAT16    ? dm_half_to_float(((const uint16_t *)dm_tensor_data(t))[i])
         : d == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)dm_tensor_data(t))[i])
                            : ((const float *)dm_tensor_data(t))[i];
}

static void add_args(opt_op *op, const pool_case *c, int nhwc) {
  if (c->global) {
    opt_arg_int(op, "global_pooling", 1);
  } else {
    if (c->kh == c->kw)
      opt_arg_int(op, "kernel", c->kh);
    else
      opt_arg_int(op, "kernel_h", c->kh), opt_arg_int(op, "kernel_w", c->kw);
    int64_t s[2] = {c->sh, c->sw};
    opt_arg_ints(op, "strides", 2, s);
    if (c->pads[0] || c->pads[1] || c->pads[2] || c->pads[3])
      opt_arg_int(op, "pad_t", c->pads[0]), opt_arg_int(op, "pad_l", c->pads[1]),
          opt_arg_int(op, "pad_b", c->pads[2]), opt_arg_int(op, "pad_r", c->pads[3]);
  }
  if (c->legacy)
    opt_arg_int(op, "legacy_pad", c->legacy);
  if (nhwc)
    opt_arg_string(op, "order", "NHWC");
}

static double bound(double ref, double S, int64_t L, int fp16, int is_max) {
  double acc = is_max ? 0 : (double)(L + 2) * OPT_U32 * S;
  return fp16 ? acc + opt_mode_u(fp16) * (fabs(ref) + acc) + opt_mode_tiny(fp16) : acc;
}

/* Forward and backward of one case, one op, one order, one dtype. */
static void run_case(dm_workspace *ws, const pool_case *c, int is_max, int nhwc, int fp16) {
  uint64_t seed = 77 + (uint64_t)c->H;
  const int64_t N = c->N, C = c->C, H = c->H, W = c->W, OH = c->outH, OW = c->outW;
  const int64_t kh = c->global ? H : c->kh, kw = c->global ? W : c->kw;
  int64_t nx = N * C * H * W, ny = N * C * OH * OW;
  double *x = fp16 == 2 ? distinct_bf16(nx) : distinct(nx, 1), *dy = malloc(sizeof *dy * (size_t)ny);
  for (int64_t i = 0; i < ny; i++)
    dy[i] = fp16 ? opt_widen(fp16, opt_narrow(fp16, (float)opt_uniform(&seed, -1, 1)))
                 : (float)opt_uniform(&seed, -1, 1);
  double *y = malloc(sizeof *y * (size_t)ny), *S = malloc(sizeof *S * (size_t)ny);
  double *dx = calloc((size_t)nx, sizeof *dx), *dxS = calloc((size_t)nx, sizeof *dx);
  for (int64_t n = 0; n < N; n++)
    for (int64_t ch = 0; ch < C; ch++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t h0 = oh * c->sh - c->pt, w0 = ow * c->sw - c->pl, cnt = 0, arg = -1;
          double m = -INFINITY, s = 0, sa = 0;
          for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + kh && h < H; h++)
            for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + kw && w < W; w++) {
              int64_t xi = ((n * C + ch) * H + h) * W + w;
              if (x[xi] > m)
                m = x[xi], arg = xi;
              s += x[xi], sa += fabs(x[xi]), cnt++;
            }
          assert_true(cnt > 0);
          int64_t yi = ((n * C + ch) * OH + oh) * OW + ow;
          y[yi] = is_max ? m : s / (double)cnt;
          S[yi] = sa / (double)cnt;
          if (is_max) {
            dx[arg] += dy[yi], dxS[arg] += fabs(dy[yi]);
            continue;
          }
          for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + kh && h < H; h++)
            for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + kw && w < W; w++) {
              int64_t xi = ((n * C + ch) * H + h) * W + w;
              dx[xi] += dy[yi] / (double)cnt, dxS[xi] += fabs(dy[yi]) / (double)cnt;
            }
        }
  dm_dtype t = opt_mode_dtype(fp16);
  int64_t xd[4] = {N, C, H, W}, yd[4] = {N, C, OH, OW};
  if (nhwc) {
    double *xt = nchw_to_nhwc(x, N, C, H, W), *dyt = nchw_to_nhwc(dy, N, C, OH, OW);
    xd[1] = H, xd[2] = W, xd[3] = C, yd[1] = OH, yd[2] = OW, yd[3] = C;
    feed(ws, "X", t, xd, xt), feed(ws, "dY", t, yd, dyt);
    free(xt), free(dyt);
  } else {
    feed(ws, "X", t, xd, x), feed(ws, "dY", t, yd, dy);
  }
  const char *type = is_max ? "MaxPool" : "AveragePool";
  opt_op *op = opt_new(type);
  opt_in(op, "X"), opt_out(op, "Y");
  add_args(op, c, nhwc);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s %s: %s", type, c->name, dm_last_error());
  char gtype[64];
  snprintf(gtype, sizeof gtype, "%sGradient", type);
  op = opt_new(gtype);
  opt_in(op, "X"), opt_in(op, "Y"), opt_in(op, "dY"), opt_out(op, "dX");
  add_args(op, c, nhwc);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s %s: %s", gtype, c->name, dm_last_error());
  const dm_tensor *ty = opt_fetch(ws, "Y", t, 4, yd), *tdx = opt_fetch(ws, "dX", t, 4, xd);
  double *worst = &worst_mode[fp16];
  for (int64_t n = 0; n < N; n++)
    for (int64_t ch = 0; ch < C; ch++) {
      for (int64_t i = 0; i < OH * OW; i++) {
        int64_t yi = (n * C + ch) * OH * OW + i;
        double got = at(ty, nhwc, C, OH, OW, n, ch, i / OW, i % OW);
        double tol = bound(y[yi], S[yi], kh * kw, fp16, is_max);
        if (!(fabs(got - y[yi]) <= tol))
          fail_msg("%s %s (%s %s): Y[%lld] = %.9g, reference %.9g, tolerance %.3g", type,
                   c->name, nhwc ? "NHWC" : "NCHW", opt_mode_name(fp16), (long long)yi, got,
                   y[yi], tol);
        if (tol > 0)
          *worst = fmax(*worst, fabs(got - y[yi]) / tol);
      }
      for (int64_t i = 0; i < H * W; i++) {
        int64_t xi = (n * C + ch) * H * W + i;
        double got = at(tdx, nhwc, C, H, W, n, ch, i / W, i % W);
        double acc = (double)(kh * kw + 2) * OPT_U32 * dxS[xi];
        double tol =
            fp16 ? acc + opt_mode_u(fp16) * (fabs(dx[xi]) + acc) + opt_mode_tiny(fp16) : acc;
        if (!(fabs(got - dx[xi]) <= tol))
          fail_msg("%s %s (%s %s): dX[%lld] = %.9g, reference %.9g, tolerance %.3g", gtype,
                   c->name, nhwc ? "NHWC" : "NCHW", opt_mode_name(fp16), (long long)xi, got,
                   dx[xi], tol);
        if (tol > 0)
          *worst = fmax(*worst, fabs(got - dx[xi]) / tol);
      }
    }
  free(x), free(dy), free(y), free(S), free(dx), free(dxS);
}

static void test_pool_fp32(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int k = 0; k < 4; k++)
      run_case(*state, &cases[i], k & 1, k >> 1, 0);
  print_message("pools FP32: worst error %.3f of the bound\n", worst_mode[0]);
}

static void test_pool_fp16(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int k = 0; k < 4; k++)
      run_case(*state, &cases[i], k & 1, k >> 1, 1);
  print_message("pools FP16: worst error %.3f of the bound\n", worst_mode[1]);
}

static void test_pool_bf16(void **state) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int k = 0; k < 4; k++)
      run_case(*state, &cases[i], k & 1, k >> 1, 2);
  print_message("pools BF16: worst error %.3f of the bound\n", worst_mode[2]);
}

static void test_pool_grad_check(void **state) {
  (void)state;
  double *xd = distinct(2 * 3 * 7 * 6, 4); /* neighbours 1/16 apart: h = 1e-2 keeps order */
  float x[2 * 3 * 7 * 6];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
    x[i] = (float)xd[i];
  free(xd);
  gc_input in[] = {{"X", 4, {2, 3, 7, 6}, x, 1, 0}};
  double worst = 0;
  worst = fmax(worst, gc_check("type: 'MaxPool' input: 'X' output: 'Y' arg { name: 'kernel' i: 3 } "
                               "arg { name: 'stride' i: 2 } arg { name: 'pad' i: 1 }",
                               in, 1, 1, 9));
  worst = fmax(worst, gc_check("type: 'AveragePool' input: 'X' output: 'Y' "
                               "arg { name: 'kernel' i: 3 } arg { name: 'stride' i: 2 } "
                               "arg { name: 'pad' i: 1 } arg { name: 'legacy_pad' i: 3 }",
                               in, 1, 1, 9));
  worst = fmax(worst, gc_check("type: 'AveragePool' input: 'X' output: 'Y' "
                               "arg { name: 'global_pooling' i: 1 } arg { name: 'order' s: 'NHWC' }",
                               in, 1, 1, 7 * 3));
  print_message("pools finite differences: worst error %.3f of the tolerance\n", worst);
}

/* Output sizes through shape inference (shape-only tensors: nothing allocated). */
static dm_status infer(const char *op_text, const int64_t *xd, int64_t *yd) {
  char text[1024];
  snprintf(text, sizeof text, "op { input: 'X' output: 'Y' %s }", op_text);
  ProtobufCMessage *m = NULL;
  assert_int_equal(dm_text_parse(text, strlen(text), "infer", &caffe2__net_def__descriptor, &m),
                   DM_OK);
  dm_workspace *ws = NULL;
  dm_blob *bl = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  assert_int_equal(dm_workspace_get_or_create(ws, "X", &bl), DM_OK);
  assert_int_equal(dm_tensor_set_shape(bl->tensor, DM_FLOAT, 4, xd), DM_OK);
  dm_op_cost cost = {0};
  dm_status s = dm_infer_net_shapes(ws, (Caffe2__NetDef *)m, "infer", NULL, NULL, &cost);
  if (s == DM_OK) {
    const dm_tensor *y = dm_workspace_find(ws, "Y")->tensor;
    assert_null(dm_tensor_data(y));
    memcpy(yd, dm_tensor_dims(y), 4 * sizeof *yd);
    assert_true(cost.flops > 0);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  dm_workspace_destroy(ws);
  return s;
}

static void test_pool_infer(void **state) {
  (void)state;
  /* SqueezeNet's pools at full width: 96 and 256 channels. */
  const char *sq = "type: 'MaxPool' arg { name: 'kernel' i: 3 } arg { name: 'stride' i: 2 } "
                   "arg { name: 'legacy_pad' i: 3 }";
  int64_t in[][4] = {{1, 96, 111, 111}, {1, 256, 55, 55}, {1, 512, 27, 27}}, want[] = {55, 27, 13};
  for (int i = 0; i < 3; i++) {
    int64_t y[4];
    assert_int_equal(infer(sq, in[i], y), DM_OK);
    assert_int_equal(y[1], in[i][1]);
    assert_int_equal(y[2], want[i]);
    assert_int_equal(y[3], want[i]);
  }
  int64_t x13[] = {1, 13, 13, 1000}, y[4];
  assert_int_equal(infer("type: 'AveragePool' arg { name: 'global_pooling' i: 1 } "
                         "arg { name: 'order' s: 'NHWC' }",
                         x13, y),
                   DM_OK);
  assert_true(y[0] == 1 && y[1] == 1 && y[2] == 1 && y[3] == 1000);
  int64_t x5[] = {1, 1, 5, 5};
  opt_expect_error(infer("type: 'MaxPool' arg { name: 'kernel' i: 7 }", x5, y), DM_ERR_SHAPE,
                   "kernel 7x7 does not fit the padded input 5x5 (pads t0 l0 b0 r0)", NULL);
}

static void test_pool_errors(void **state) {
  dm_workspace *ws = *state;
  static const float z[256];
  int64_t xd[] = {1, 2, 5, 5}, x3[] = {2, 5, 5}, yd[] = {1, 2, 2, 2};
  opt_feed(ws, "X", DM_FLOAT, 4, xd, z);
  struct {
    const char *arg;
    int64_t v;
    const char *arg2;
    int64_t v2;
    dm_status want;
    const char *frag;
  } bad[] = {
      {NULL, 0, NULL, 0, DM_ERR_INVALID, "the kernel size is required"},
      {"global_pooling", 1, "stride", 2, DM_ERR_INVALID, "global_pooling takes no stride"},
      {"global_pooling", 1, "dilation", 2, DM_ERR_INVALID, "global_pooling takes no dilation"},
      {"kernel", 2, "dilation", 5, DM_ERR_SHAPE, "(dilated to 6x6) does not fit"},
      {"kernel", 2, "pad", 2, DM_ERR_INVALID, "would lie entirely in the padding"},
      {"kernel", 3, "pad", -1, DM_ERR_INVALID, "pad -1 is out of range"},
      {"kernel", 0, NULL, 0, DM_ERR_INVALID, "kernel 0 is out of range"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    opt_op *op = opt_new("MaxPool");
    opt_in(op, "X"), opt_out(op, "Y");
    if (bad[i].arg)
      opt_arg_int(op, bad[i].arg, bad[i].v);
    if (bad[i].arg2)
      opt_arg_int(op, bad[i].arg2, bad[i].v2);
    opt_expect_error(opt_run(op, ws), bad[i].want, "op 0 (MaxPool)", bad[i].frag, NULL);
  }
  opt_op *op = opt_new("AveragePool");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_int(op, "kernel", 2), opt_arg_string(op, "order", "nchw?");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "'order' is 'nchw?'", NULL);
  /* The gradient checks Y and dY against the pooled shape of X. */
  opt_feed(ws, "Y", DM_FLOAT, 4, yd, z);
  opt_feed(ws, "dY", DM_FLOAT, 4, yd, z);
  op = opt_new("MaxPoolGradient");
  opt_in(op, "X"), opt_in(op, "Y"), opt_in(op, "dY"), opt_out(op, "dX");
  opt_arg_int(op, "kernel", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "Y is 1x2x2x2, but the pooled X is 1x2x4x4",
                   NULL);
  opt_feed(ws, "X", DM_FLOAT, 3, x3, z);
  op = opt_new("MaxPool");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_int(op, "kernel", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "X is 2x5x5; MaxPool takes a 4-D NCHW input",
                   NULL);
  int32_t zi[50] = {0};
  opt_feed(ws, "X", DM_INT32, 4, xd, zi);
  op = opt_new("MaxPool");
  opt_in(op, "X"), opt_out(op, "Y");
  opt_arg_int(op, "kernel", 2);
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "X is INT32; MaxPool takes FLOAT, FLOAT16 or BFLOAT16",
                   NULL);
}

/* ceil_mode (ONNX's and PyTorch's rule, asymmetric pads), count_include_pad and dilation,
 * forward
 * and AveragePool's gradient, on the default engine (oneDNN where built; it leaves the
 * case whose last window passes the pads to the reference) and the reference. Output
 * sizes by hand: ceil((in + pt + pb - k) / s) + 1, less one when the last window would
 * start past pt + in. The divisor with count_include_pad is the window clipped to
 * [-pt, in + pb) with the pads as given. */
static void test_pool_ceil_include_pad(void **state) {
  dm_workspace *ws = *state;
  static const struct {
    const char *name;
    int64_t H, W, kh, kw, sh, sw, pads[4];
    int ceil;
    int64_t outH, outW, dh, dw; /* dh, dw: dilation */
  } oc[] = {
      /* H: ceil((5+0+1-2)/2)+1 = 3; W: ceil((7+1+0-3)/2)+1 = 4 */
      {"ceil, asymmetric pads", 5, 7, 2, 3, 2, 2, {0, 1, 1, 0}, 1, 3, 4, 1, 1},
      /* ceil((2-1)/2)+1 = 2, but (2-1)*2 >= 2 + 0: 1 (ONNX's reduce_by_one case) */
      {"ceil drops a window", 2, 2, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 1, 1},
      /* (4+1+1-3)+1 = 4, (4+2+0-3)+1 = 4 */
      {"pads, no ceil", 4, 4, 3, 3, 1, 1, {1, 2, 1, 0}, 0, 4, 4, 1, 1},
      /* ceil((6+2-3)/2)+1 = 4: the last window [5, 8) passes in + pb = 7 */
      {"ceil past the pads", 6, 6, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 4, 4, 1, 1},
      /* dilated 2x3: windows 3 and 7 wide; (7+1+1-3)/1+1 = 7, (8+2+0-7)/2+1 = 2 */
      {"dilated", 7, 8, 2, 3, 1, 2, {1, 2, 1, 0}, 0, 7, 2, 2, 3},
      /* dilated 2, ceil: window 5; ceil((6+1+1-5)/2)+1 = 3, (3-1)*2 < 6+1 */
      {"dilated, ceil", 6, 5, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 3, 2, 2, 2},
  };
  const char *engines[2] = {NULL, "REFERENCE"};
  for (size_t ci = 0; ci < sizeof oc / sizeof oc[0]; ci++)
    for (int kind = 0; kind < 3; kind++) /* MaxPool, AveragePool, with count_include_pad */
      for (int e = 0; e < 2; e++) {
        const int64_t N = 1, C = 2, H = oc[ci].H, W = oc[ci].W, OH = oc[ci].outH, OW = oc[ci].outW;
        const int64_t *p = oc[ci].pads;
        double *x = distinct(N * C * H * W, 1), *y = malloc(sizeof *y * (size_t)(C * OH * OW));
        double *dy = malloc(sizeof *dy * (size_t)(C * OH * OW)), *dx = calloc((size_t)(C * H * W), sizeof *dx);
        for (int64_t i = 0; i < C * OH * OW; i++)
          dy[i] = (double)(i % 7) - 3;
        for (int64_t ch = 0; ch < C; ch++)
          for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
              int64_t dh = oc[ci].dh, dw = oc[ci].dw;
              int64_t h0 = oh * oc[ci].sh - p[0], w0 = ow * oc[ci].sw - p[1];
              int64_t h1 = h0 + dh * (oc[ci].kh - 1) + 1, w1 = w0 + dw * (oc[ci].kw - 1) + 1;
              double m = -INFINITY, sum = 0, cnt = 0;
              for (int64_t h = h0; h < h1; h += dh)
                for (int64_t w = w0; w < w1; w += dw) {
                  int inside = h >= 0 && h < H && w >= 0 && w < W;
                  int padded = h >= -p[0] && h < H + p[2] && w >= -p[1] && w < W + p[3];
                  if (inside)
                    m = fmax(m, x[(ch * H + h) * W + w]), sum += x[(ch * H + h) * W + w];
                  cnt += kind == 2 ? padded : inside;
                }
              int64_t yi = (ch * OH + oh) * OW + ow;
              y[yi] = kind == 0 ? m : sum / cnt;
              for (int64_t h = h0; kind && h < h1; h += dh)
                for (int64_t w = w0; w < w1; w += dw)
                  if (h >= 0 && h < H && w >= 0 && w < W)
                    dx[(ch * H + h) * W + w] += dy[yi] / cnt;
            }
        int64_t xd[4] = {N, C, H, W}, yd[4] = {N, C, OH, OW};
        feed(ws, "X", DM_FLOAT, xd, x), feed(ws, "dY", DM_FLOAT, yd, dy);
        for (int g = 0; g < (kind ? 2 : 1); g++) {
          opt_op *op = opt_new(g ? "AveragePoolGradient" : kind ? "AveragePool" : "MaxPool");
          opt_in(op, "X");
          if (g)
            opt_in(op, "Y"), opt_in(op, "dY");
          opt_out(op, g ? "dX" : "Y");
          if (engines[e])
            opt_engine(op, engines[e]);
          opt_arg_int(op, "kernel_h", oc[ci].kh), opt_arg_int(op, "kernel_w", oc[ci].kw);
          opt_arg_int(op, "stride_h", oc[ci].sh), opt_arg_int(op, "stride_w", oc[ci].sw);
          opt_arg_ints(op, "pads", 4, p);
          if (oc[ci].ceil)
            opt_arg_int(op, "ceil_mode", 1);
          if (kind == 2)
            opt_arg_int(op, "count_include_pad", 1);
          if (oc[ci].dh != 1 || oc[ci].dw != 1)
            opt_arg_int(op, "dilation_h", oc[ci].dh), opt_arg_int(op, "dilation_w", oc[ci].dw);
          if (opt_run(op, ws) != DM_OK)
            fail_msg("%s (kind %d, engine %s): %s", oc[ci].name, kind,
                     engines[e] ? engines[e] : "default", dm_last_error());
          const dm_tensor *t = opt_fetch(ws, g ? "dX" : "Y", DM_FLOAT, 4, g ? xd : yd);
          const double *ref = g ? dx : y;
          for (int64_t i = 0; i < (g ? C * H * W : C * OH * OW); i++) {
            double got = ((const float *)dm_tensor_data(t))[i];
            /* sums of at most 9 values below 32, times a rounded 1/L: 12 u32 * 9 * 32 */
            if (!(fabs(got - ref[i]) <= 12 * OPT_U32 * 9 * 32))
              fail_msg("%s (kind %d, %s, engine %s): element %lld is %.9g, expected %.9g",
                       oc[ci].name, kind, g ? "dX" : "Y", engines[e] ? engines[e] : "default",
                       (long long)i, got, ref[i]);
          }
        }
        free(x), free(y), free(dy), free(dx);
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_fp32),       cmocka_unit_test(test_pool_fp16), cmocka_unit_test(test_pool_bf16),
      cmocka_unit_test(test_pool_grad_check), cmocka_unit_test(test_pool_infer),
      cmocka_unit_test(test_pool_errors), cmocka_unit_test(test_pool_ceil_include_pad),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
