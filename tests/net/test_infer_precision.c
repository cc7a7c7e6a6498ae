/* test_infer_precision.c: inference in FP16 and BF16 through the mixed-precision pass's
 * inference mode (net/infer.h, the C API's dm_workspace_create_infer_net), on a small
 * net with batch norm, Conv -> SpatialBN(is_test) -> Relu -> FC -> Softmax, random
 * weights:
 *   - the painted net: Conv and FC read reduced copies, SpatialBN's scale, bias, mean and
 *     variance stay the FP32 blobs, Softmax reads FP32, one cast per boundary; the
 *     weights' casts are in the init addition (once), not in the net; a fetched blob the
 *     net leaves in FP16 is cast back under its own name;
 *   - run through the C API in FP32, FP16 and BF16: the blobs' dtypes as painted (BN
 *     parameters FLOAT, activations reduced, the output FLOAT), and the logits, softmax
 *     and top-1 against a double-precision reference computed here, with tolerances
 *     derived from each dtype's unit roundoff;
 *   - the options: struct_size checks, unknown precision, NULL arguments.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "net/infer.h"
#include "net/netdef_build.h"
#include "netdef_test_util.h"
#include "test_util.h"

enum { N = 4, C = 3, H = 6, W = 6, M = 5, KH = 3, K = 7, FCIN = M * H * W };

static const char *init_text =
    "op { output: 'w' type: 'GaussianFill' arg { name: 'shape' ints: [5, 3, 3, 3] }"
    "     arg { name: 'std' f: 0.3 } device_option { random_seed: 11 } }"
    "op { output: 'b' type: 'UniformFill' arg { name: 'shape' ints: 5 }"
    "     arg { name: 'min' f: -0.5 } arg { name: 'max' f: 0.5 } device_option { random_seed: 12 } }"
    "op { output: 's' type: 'UniformFill' arg { name: 'shape' ints: 5 }"
    "     arg { name: 'min' f: 0.5 } arg { name: 'max' f: 1.5 } device_option { random_seed: 13 } }"
    "op { output: 'bias' type: 'UniformFill' arg { name: 'shape' ints: 5 }"
    "     arg { name: 'min' f: -0.5 } arg { name: 'max' f: 0.5 } device_option { random_seed: 14 } }"
    "op { output: 'rm' type: 'UniformFill' arg { name: 'shape' ints: 5 }"
    "     arg { name: 'min' f: -0.3 } arg { name: 'max' f: 0.3 } device_option { random_seed: 15 } }"
    "op { output: 'riv' type: 'UniformFill' arg { name: 'shape' ints: 5 }"
    "     arg { name: 'min' f: 0.5 } arg { name: 'max' f: 2 } device_option { random_seed: 16 } }"
    "op { output: 'w2' type: 'GaussianFill' arg { name: 'shape' ints: [7, 180] }"
    "     arg { name: 'std' f: 0.1 } device_option { random_seed: 17 } }"
    "op { output: 'b2' type: 'UniformFill' arg { name: 'shape' ints: 7 }"
    "     arg { name: 'min' f: -0.5 } arg { name: 'max' f: 0.5 } device_option { random_seed: 18 } }";

static const char *predict_text =
    "name: 'bn_net'"
    "op { input: ['data', 'w', 'b'] output: 'conv' type: 'Conv'"
    "     arg { name: 'kernel' i: 3 } arg { name: 'pad' i: 1 } }"
    "op { input: ['conv', 's', 'bias', 'rm', 'riv'] output: 'bn' type: 'SpatialBN'"
    "     arg { name: 'is_test' i: 1 } arg { name: 'epsilon' f: 1e-5 } }"
    "op { input: 'bn' output: 'bn' type: 'Relu' }"
    "op { input: ['bn', 'w2', 'b2'] output: 'fc' type: 'FC' }"
    "op { input: 'fc' output: 'prob' type: 'Softmax' }"
    "external_input: ['data', 'w', 'b', 's', 'bias', 'rm', 'riv', 'w2', 'b2']"
    "external_output: 'prob'";

static const char *const weights[] = {"w", "b", "s", "bias", "rm", "riv", "w2", "b2"};

/* The predict net's text in a temporary file (the C API reads a path). */
static char net_path[64];

static int setup(void **state) {
  (void)state;
  snprintf(net_path, sizeof net_path, "/tmp/dm_infer_XXXXXX.pbtxt");
  int fd = mkstemps(net_path, 6);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  if (!f)
    return -1;
  fputs(predict_text, f);
  return fclose(f) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  unlink(net_path);
  return 0;
}

/* Paints the predict net for `target` with the init net's blobs as the weights. */
static int free_masters; /* what paint() asks for */

static Caffe2__NetDef *paint(dm_dtype target, const char *const *fetch, size_t n_fetch,
                             Caffe2__NetDef **init_add) {
  static const char *const inputs[] = {"data"};
  Caffe2__NetDef *net = parse(predict_text);
  dm_infer_options o;
  assert_ok(dm_infer_options_init(&o));
  o.precision = target == DM_BFLOAT16 ? DM_PRECISION_BF16 : DM_PRECISION_FP16;
  o.data_blobs = inputs;
  o.n_data_blobs = 1;
  o.outputs = fetch;
  o.n_outputs = n_fetch;
  dm_pipeline_opts p;
  assert_ok(dm_pipeline_opts_from_infer(&o, &p));
  dm_infer_set_weights(&p, weights, 8);
  p.mp.free_masters = free_masters;
  assert_ok(dm_infer_pipeline(net, &p, init_add, NULL));
  return net;
}

static void expect_ops(const Caffe2__NetDef *net, const char *want) {
  char got[2048];
  op_list(net, OPL_OUTPUTS, got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("ops\n  got:  %s\n  want: %s", got, want);
}

/* Conv and FC read reduced copies; BN reads its FP32 parameters as they are; Softmax reads
 * an FP32 copy of the logits; the weights are cast once, in the init addition. */
static void test_painted_fp16(void **state) {
  (void)state;
  Caffe2__NetDef *add = NULL;
  Caffe2__NetDef *net = paint(DM_FLOAT16, NULL, 0, &add);
  expect_ops(net, "FloatToHalf(data)>data_fp16 Conv(data_fp16,w_fp16,b_fp16)>conv "
                  "SpatialBN(conv,s,bias,rm,riv)>bn Relu(bn)>bn FC(bn,w2_fp16,b2_fp16)>fc "
                  "HalfToFloat(fc)>fc_fp32 Softmax(fc_fp32)>prob");
  assert_non_null(add);
  expect_ops(add, "FloatToHalf(w)>w_fp16 FloatToHalf(b)>b_fp16 FloatToHalf(w2)>w2_fp16 "
                  "FloatToHalf(b2)>b2_fp16");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* BF16: the same painting with Cast(to=BFLOAT16) and _bf16 copies. */
static void test_painted_bf16(void **state) {
  (void)state;
  Caffe2__NetDef *add = NULL;
  Caffe2__NetDef *net = paint(DM_BFLOAT16, NULL, 0, &add);
  expect_ops(net, "Cast(data)>data_bf16 Conv(data_bf16,w_bf16,b_bf16)>conv "
                  "SpatialBN(conv,s,bias,rm,riv)>bn Relu(bn)>bn FC(bn,w2_bf16,b2_bf16)>fc "
                  "Cast(fc)>fc_fp32 Softmax(fc_fp32)>prob");
  const Caffe2__Argument *to = dm_opdef_find_arg(net->op[0], "to");
  assert_true(to && to->has_i && to->i == DM_BFLOAT16);
  expect_ops(add, "Cast(w)>w_bf16 Cast(b)>b_bf16 Cast(w2)>w2_bf16 Cast(b2)>b2_bf16");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* With free_masters (as `run` paints), the casts are followed by one Free of the FP32
 * weights the net no longer reads: Conv's and FC's, never BN's (still read in FP32), nor
 * a fetched one (b2 here). */
static void test_free_masters(void **state) {
  (void)state;
  static const char *const fetch[] = {"b2"};
  Caffe2__NetDef *add = NULL;
  free_masters = 1;
  Caffe2__NetDef *net = paint(DM_FLOAT16, fetch, 1, &add);
  free_masters = 0;
  expect_ops(add, "FloatToHalf(w)>w_fp16 FloatToHalf(b)>b_fp16 FloatToHalf(w2)>w2_fp16 "
                  "FloatToHalf(b2)>b2_fp16 Free(w,b,w2)>w,b,w2");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* Fetched blobs come back FP32 under their own names: the logits' last writer writes
 * fc_fp16 and Softmax's FP32 copy is `fc` itself; `bn` (last written in place by Relu)
 * is cast back after the net. */
static void test_fetched_fp32(void **state) {
  (void)state;
  static const char *const fetch[] = {"fc", "bn"};
  Caffe2__NetDef *add = NULL;
  Caffe2__NetDef *net = paint(DM_FLOAT16, fetch, 2, &add);
  expect_ops(net, "FloatToHalf(data)>data_fp16 Conv(data_fp16,w_fp16,b_fp16)>conv "
                  "SpatialBN(conv,s,bias,rm,riv)>bn Relu(bn)>bn_fp16 "
                  "FC(bn_fp16,w2_fp16,b2_fp16)>fc_fp16 HalfToFloat(fc_fp16)>fc "
                  "Softmax(fc)>prob HalfToFloat(bn_fp16)>bn");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* The reference, in double, from the FP32 weights in `ws` and the input x. */
static const float *fetch_f32(dm_workspace *ws, const char *name, int64_t numel) {
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &t));
  assert_int_equal(dm_tensor_dtype(t), DM_FLOAT);
  assert_int_equal(dm_tensor_numel(t), numel);
  return dm_tensor_data(t);
}

static void reference(dm_workspace *ws, const float *x, double z[N][K], double p[N][K]) {
  const float *w = fetch_f32(ws, "w", M * C * KH * KH), *b = fetch_f32(ws, "b", M);
  const float *s = fetch_f32(ws, "s", M), *bias = fetch_f32(ws, "bias", M);
  const float *rm = fetch_f32(ws, "rm", M), *riv = fetch_f32(ws, "riv", M);
  const float *w2 = fetch_f32(ws, "w2", K * FCIN), *b2 = fetch_f32(ws, "b2", K);
  static double a[N][FCIN]; /* relu(bn(conv)) */
  for (int n = 0; n < N; n++)
    for (int m = 0; m < M; m++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++) {
          double acc = b[m];
          for (int c = 0; c < C; c++)
            for (int u = 0; u < KH; u++)
              for (int v = 0; v < KH; v++) {
                int ii = i + u - 1, jj = j + v - 1;
                if (ii < 0 || ii >= H || jj < 0 || jj >= W)
                  continue;
                acc += (double)w[((m * C + c) * KH + u) * KH + v] *
                       x[((n * C + c) * H + ii) * W + jj];
              }
          double y = (acc - rm[m]) / sqrt((double)riv[m] + 1e-5) * s[m] + bias[m];
          a[n][(m * H + i) * W + j] = y > 0 ? y : 0;
        }
  for (int n = 0; n < N; n++) {
    double mx = -INFINITY, sum = 0;
    for (int k = 0; k < K; k++) {
      double acc = b2[k];
      for (int j = 0; j < FCIN; j++)
        acc += (double)w2[k * FCIN + j] * a[n][j];
      z[n][k] = acc;
      mx = fmax(mx, acc);
    }
    for (int k = 0; k < K; k++)
      sum += exp(z[n][k] - mx);
    for (int k = 0; k < K; k++)
      p[n][k] = exp(z[n][k] - mx) / sum;
  }
}

static dm_dtype blob_dtype(dm_workspace *ws, const char *name) {
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &t));
  return dm_tensor_dtype(t);
}

static int argmax(const double *v) {
  int best = 0;
  for (int k = 1; k < K; k++)
    if (v[k] > v[best])
      best = k;
  return best;
}

/* A new workspace (*ws) with the init net run, and the predict net made through the C
 * API in `prec`, fetching outs (n of them; 0: the net's outputs). */
static dm_net *infer_net(dm_workspace **ws, dm_precision prec, const char *const *outs,
                         size_t n) {
  assert_ok(dm_workspace_create(ws));
  assert_ok(run_text(*ws, init_text));
  dm_infer_options o;
  assert_ok(dm_infer_options_init(&o));
  o.precision = prec;
  o.outputs = outs;
  o.n_outputs = n;
  dm_net *net = NULL;
  assert_ok(dm_workspace_create_infer_net(*ws, net_path, &o, &net));
  return net;
}

/* One precision end to end through the C API, against the double reference. */
static void run_precision(dm_precision prec) {
  static const char *const outs[] = {"fc"};
  dm_dtype reduced = prec == DM_PRECISION_FP16 ? DM_FLOAT16
                     : prec == DM_PRECISION_BF16 ? DM_BFLOAT16 : DM_FLOAT;
  dm_workspace *ws = NULL;
  dm_net *net = infer_net(&ws, prec, outs, 1);
  float x[N * C * H * W];
  for (int i = 0; i < N * C * H * W; i++)
    x[i] = sinf(0.37f * (float)i + 0.2f) * (1.0f + 0.5f * cosf(0.11f * (float)i));
  int64_t dims[4] = {N, C, H, W};
  assert_ok(dm_workspace_feed(ws, "data", DM_FLOAT, 4, dims, x));
  assert_ok(dm_net_run(net));
  assert_ok(dm_net_run(net)); /* a second run: the weights' copies are still there */

  /* What ran in which dtype: BN parameters and the fetched blobs FP32, activations and
   * the Conv/FC weight copies reduced. */
  for (size_t i = 0; i < 8; i++)
    assert_int_equal(blob_dtype(ws, weights[i]), DM_FLOAT);
  assert_int_equal(blob_dtype(ws, "conv"), reduced);
  assert_int_equal(blob_dtype(ws, "prob"), DM_FLOAT);
  assert_int_equal(blob_dtype(ws, "fc"), DM_FLOAT);
  if (reduced != DM_FLOAT) {
    const char *copy = reduced == DM_FLOAT16 ? "w_fp16" : "w_bf16";
    assert_int_equal(blob_dtype(ws, copy), reduced);
    assert_int_equal(blob_dtype(ws, "bn"), reduced);
  }

  double z[N][K], p[N][K];
  reference(ws, x, z, p);
  const float *gz = fetch_f32(ws, "fc", N * K), *gp = fetch_f32(ws, "prob", N * K);
  /* Tolerance. u = the dtype's unit roundoff (FP32 2^-24, FP16 2^-11, BF16 2^-8). Between
   * the FP32 input and the logits the reduced path rounds L = 9 times (the input, conv's
   * weights, bias and output, BN's output, FC's weights, bias and output, and the cast
   * back), each a relative error of at most u; independent roundings add in quadrature,
   * so the logits move by about sqrt(L) u max|z|, and a factor 2 covers the spread. FP32
   * itself (the reference is double) only accumulates: FC's 181 terms, 181 u. */
  double u = prec == DM_PRECISION_FP16 ? 0x1p-11 : prec == DM_PRECISION_BF16 ? 0x1p-8 : 0;
  double zabs = 0;
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++)
      zabs = fmax(zabs, fabs(z[n][k]));
  double tol_z = (2 * sqrt(9.0) * u + (FCIN + 1) * 0x1p-24) * zabs;
  double err_z = 0, err_p = 0;
  int checked = 0;
  for (int n = 0; n < N; n++) {
    double zmax = -INFINITY;
    for (int k = 0; k < K; k++) {
      err_z = fmax(err_z, fabs(gz[n * K + k] - z[n][k]));
      zmax = fmax(zmax, z[n][k]);
      /* log-softmax moves by at most 2 max|dz|: |dp| <= p (e^(2 tol_z) - 1), + FP32's
       * own rounding of p */
      double tol_p = p[n][k] * expm1(2 * tol_z) + 8 * 0x1p-24;
      if (fabs(gp[n * K + k] - p[n][k]) > tol_p)
        fail_msg("prec %d: prob[%d][%d] = %.9g, reference %.9g (tol %.3g)", (int)prec, n, k,
                 (double)gp[n * K + k], p[n][k], tol_p);
      err_p = fmax(err_p, fabs(gp[n * K + k] - p[n][k]));
    }
    /* top-1 must agree wherever the reference's margin exceeds what the error can move */
    double second = -INFINITY;
    int top = argmax(z[n]);
    for (int k = 0; k < K; k++)
      if (k != top)
        second = fmax(second, z[n][k]);
    if (zmax - second > 2 * tol_z) {
      checked++;
      double got[K];
      for (int k = 0; k < K; k++)
        got[k] = gz[n * K + k];
      assert_int_equal(argmax(got), top);
    }
  }
  printf("precision %d: max |logit err| %.3g (tol %.3g), max |prob err| %.3g, top-1 checked "
         "on %d of %d\n", (int)prec, err_z, tol_z, err_p, checked, N);
  if (err_z > tol_z)
    fail_msg("prec %d: logits off by %.3g > %.3g", (int)prec, err_z, tol_z);
  assert_true(checked > 0); /* the top-1 check is not vacuous */
  dm_workspace_destroy(ws);
}

static void test_run_fp32(void **state) { (void)state; run_precision(DM_PRECISION_FP32); }
static void test_run_fp16(void **state) { (void)state; run_precision(DM_PRECISION_FP16); }
static void test_run_bf16(void **state) { (void)state; run_precision(DM_PRECISION_BF16); }

/* Inputs near FP16's largest value (60000 < 65504) make Conv's sums overflow FP16 (each
 * output adds 27 products of |x| ~ 6e4 and |w| ~ 0.3), not BF16 or FP32: the FP16 run
 * fails with DM_ERR_NONFINITE naming the Conv (op 1, after the input's cast) and the
 * fix; the others run, with finite outputs. */
static void run_overflow(dm_precision prec) {
  dm_workspace *ws = NULL;
  dm_net *net = infer_net(&ws, prec, NULL, 0);
  float x[N * C * H * W];
  for (int i = 0; i < N * C * H * W; i++)
    x[i] = 60000.0f * (i % 2 ? 1.0f : -1.0f) * (0.75f + 0.25f * sinf((float)i));
  int64_t dims[4] = {N, C, H, W};
  assert_ok(dm_workspace_feed(ws, "data", DM_FLOAT, 4, dims, x));
  if (prec == DM_PRECISION_FP16) {
    assert_status_msg(dm_net_run(net), DM_ERR_NONFINITE,
                      "output 'prob' holds inf or nan; the first inf/nan came from op 0 (Conv) as written (op 1, Conv, in the rewritten net)");
    assert_non_null(strstr(dm_last_error(), "overflow FP16"));
    assert_non_null(strstr(dm_last_error(), "dm_infer_options.precision bf16"));
  } else {
    assert_ok(dm_net_run(net));
    const dm_tensor *p = NULL;
    assert_ok(dm_workspace_fetch(ws, "prob", &p));
    const float *v = dm_tensor_data(p);
    for (int64_t i = 0; i < dm_tensor_numel(p); i++)
      assert_true(isfinite(v[i]));
  }
  dm_workspace_destroy(ws);
}

static void test_overflow_fp16(void **state) { (void)state; run_overflow(DM_PRECISION_FP16); }
static void test_overflow_bf16(void **state) { (void)state; run_overflow(DM_PRECISION_BF16); }
static void test_overflow_fp32(void **state) { (void)state; run_overflow(DM_PRECISION_FP32); }

/* Bad options are refused with a message, and leave the workspace as it was. */
static void test_options(void **state) {
  (void)state;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  assert_ok(run_text(ws, init_text));
  size_t before = dm_workspace_blob_count(ws);
  dm_infer_options o;
  dm_net *net = NULL;
  assert_status_msg(dm_infer_options_init_sized(&o, 3), DM_ERR_VERSION, "struct_size 3");
  assert_ok(dm_infer_options_init(&o));
  o.precision = (dm_precision)7;
  assert_status_msg(dm_workspace_create_infer_net(ws, net_path, &o, &net), DM_ERR_INVALID,
                    "precision: unknown value 7");
  struct { dm_infer_options o; uint64_t newer; } big; /* a newer header's struct */
  assert_ok(dm_infer_options_init(&big.o));
  big.o.struct_size = sizeof big;
  big.newer = 1; /* a field this library does not know, set */
  assert_status_msg(dm_workspace_create_infer_net(ws, net_path, &big.o, &net), DM_ERR_VERSION,
                    "does not know");
  big.newer = 0; /* left zero: accepted */
  assert_ok(dm_workspace_create_infer_net(ws, net_path, &big.o, &net));
  net = NULL;
  before = dm_workspace_blob_count(ws);
  assert_ok(dm_infer_options_init(&o));
  o.device = "gpu";
  assert_status_msg(dm_workspace_create_infer_net(ws, net_path, &o, &net), DM_ERR_INVALID,
                    "dm_infer_options.device", "'gpu'");
  assert_status_msg(dm_workspace_create_infer_net(ws, NULL, &o, &net), DM_ERR_INVALID,
                    "NULL net_path");
  assert_ok(dm_infer_options_init(&o));
  o.precision = DM_PRECISION_FP16;
  assert_status_msg(dm_workspace_create_infer_net(ws, "/nonexistent/net.pbtxt", &o, &net),
                    DM_ERR_NOT_FOUND, "/nonexistent/net.pbtxt");
  assert_int_equal(dm_workspace_blob_count(ws), before);
  assert_null(net);
  dm_workspace_destroy(ws);
}

/* An op type with no schema fails the painting with its index and type named (the
 * message must be formatted before the op is freed: under ASan this test checks it). */
static void test_unknown_op(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse("op { input: 'data' input: 'w' output: 'y' type: 'Conv' }"
                              "op { input: 'y' output: 'z' type: 'NoSuchOpType' }");
  dm_infer_options o;
  assert_ok(dm_infer_options_init(&o));
  o.precision = DM_PRECISION_FP16;
  dm_pipeline_opts p;
  assert_ok(dm_pipeline_opts_from_infer(&o, &p));
  Caffe2__NetDef *add = NULL;
  assert_status_msg(dm_infer_pipeline(net, &p, &add, NULL), DM_ERR_NOT_FOUND,
                    "op 1 (NoSuchOpType): unknown operator type 'NoSuchOpType'");
  assert_null(add);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_painted_fp16), cmocka_unit_test(test_painted_bf16),
      cmocka_unit_test(test_fetched_fp32), cmocka_unit_test(test_free_masters),
      cmocka_unit_test(test_run_fp32),
      cmocka_unit_test(test_run_fp16),     cmocka_unit_test(test_run_bf16),
      cmocka_unit_test(test_overflow_fp16), cmocka_unit_test(test_overflow_bf16),
      cmocka_unit_test(test_overflow_fp32),
      cmocka_unit_test(test_options),      cmocka_unit_test(test_unknown_op),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
