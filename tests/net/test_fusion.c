/* test_fusion.c: the inference fusion pass (net/passes/fusion_pass.h), test-mode SpatialBN folded
 * into the Conv before it, with the fold a FoldBN op in the init addition:
 *   - the exact op lists of the fused net and of the addition (BN gone, the Conv reads
 *     the folded weights and a bias, also when it had none; the epsilon carried over);
 *     with FP16 painting after it, the folded weights are what gets cast;
 *   - the pairs left alone, each with its reason in the report: the Conv's output read
 *     by another op, fetched, or an external output; a BN in training mode; NHWC; a BN
 *     after a non-Conv; a weight fed at each run; a net with gradient ops refused;
 *   - numerics through the C API (dm_infer_options.fuse), a grouped Conv (group 2) ->
 *     SpatialBN -> Relu with random weights and non-trivial statistics: fused and unfused
 *     outputs both within a bound derived from FP32's unit roundoff and the reduction
 *     length of a double-precision reference computed here; the fold runs once (a
 *     second run gives the same bits, the addition's FoldBN is not in the net);
 *   - ABI growth: a dm_infer_options from a header before `fuse` is never fused;
 *   - FoldBN refuses mismatched shapes with a message instead of reading past a buffer;
 *   - post_ops: Conv + Relu, Conv + SpatialBN + Relu, the ResNet block Conv + Sum + Relu
 *     (projection and identity shortcuts, the sum in place over S), Conv + Add and
 *     FC + Relu become ConvFusion / FCFusion with the exact inputs, outputs, positions
 *     and fusion_type, the Conv's arguments carried; the cases left alone, each with its
 *     reason in the report (the intermediate read by another op, fetched, an external
 *     output, fed, read between in place; a Conv input written between the Conv and the
 *     Sum; a broadcast Add; a Sum of three; the output one of the Conv's inputs; a Relu
 *     after a pool); the summary's counts. (Numerics: test_numerics_group runs through
 *     the C API, which asks for post_ops, so its Conv + BN + Relu runs as ConvFusion.)
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "net/passes/fusion_pass.h"
#include "net/infer.h"
#include "net/netdef_build.h"
#include "netdef_test_util.h"
#include "test_util.h"

static void expect_ops(const Caffe2__NetDef *net, const char *want) {
  char got[2048];
  op_list(net, OPL_OUTPUTS, got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("ops\n  got:  %s\n  want: %s", got, want);
}

static const char *const params[] = {"w", "b", "s", "bias", "rm", "riv"};

/* The inference pipeline with fusion on `text`; returns the net, *add the addition (NULL
 * if none), *report (the pass's summary text, caller frees) when report is not NULL. */
static Caffe2__NetDef *fuse_text(const char *text, dm_dtype prec, const char *const *fetch,
                                 size_t n_fetch, const char *const *fed, size_t n_fed,
                                 Caffe2__NetDef **add, char **report) {
  Caffe2__NetDef *net = parse(text);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = report ? open_memstream(&buf, &len) : NULL;
  dm_infer_options o;
  assert_ok(dm_infer_options_init(&o));
  o.precision = prec == DM_FLOAT16 ? DM_PRECISION_FP16
                : prec == DM_BFLOAT16 ? DM_PRECISION_BF16 : DM_PRECISION_FP32;
  o.data_blobs = fed;
  o.n_data_blobs = n_fed;
  o.outputs = fetch;
  o.n_outputs = n_fetch;
  o.fuse = 1;
  dm_pipeline_opts p;
  assert_ok(dm_pipeline_opts_from_infer(&o, &p));
  dm_infer_set_weights(&p, params, 6);
  p.fuse_opts.post_ops = 0; /* the BN folds alone: the post-op fusions have their tests */
  p.report = f;
  assert_ok(dm_infer_pipeline(net, &p, add, NULL));
  if (f) {
    fclose(f);
    *report = buf;
  }
  return net;
}

static const char *const data_only[] = {"data"};

#define CONV_BN(conv_extra, bn_extra)                                                      \
  "op { input: ['data', 'w', 'b'] output: 'conv' type: 'Conv' arg { name: 'kernel' i: 3 }" \
  conv_extra " }"                                                                          \
  "op { input: ['conv', 's', 'bias', 'rm', 'riv'] output: 'bn' type: 'SpatialBN'"          \
  "     arg { name: 'is_test' i: 1 } arg { name: 'epsilon' f: 0.001 }" bn_extra " }"       \
  "op { input: 'bn' output: 'bn' type: 'Relu' }"

static void test_folded(void **state) {
  (void)state;
  Caffe2__NetDef *add = NULL;
  Caffe2__NetDef *net = fuse_text(CONV_BN("", "") "external_output: 'bn'", DM_FLOAT, NULL, 0,
                                  data_only, 1, &add, NULL);
  expect_ops(net, "Conv(data,bn_folded_w,bn_folded_b)>bn Relu(bn)>bn");
  assert_non_null(add);
  expect_ops(add, "FoldBN(w,s,bias,rm,riv,b)>bn_folded_w,bn_folded_b");
  const Caffe2__Argument *eps = dm_opdef_find_arg(add->op[0], "epsilon");
  assert_true(eps && eps->has_f && eps->f == 0.001f);
  const Caffe2__Argument *k = dm_opdef_find_arg(net->op[0], "kernel");
  assert_true(k && k->has_i && k->i == 3); /* the Conv keeps its arguments */
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* A Conv without a bias gets one; a blob already named like the fold's gets a suffix. */
static void test_no_bias(void **state) {
  (void)state;
  Caffe2__NetDef *add = NULL;
  Caffe2__NetDef *net = fuse_text(
      "op { input: ['data', 'w'] output: 'conv' type: 'Conv' arg { name: 'kernel' i: 1 } }"
      "op { input: ['conv', 's', 'bias', 'rm', 'riv'] output: 'bn' type: 'SpatialBN'"
      "     arg { name: 'is_test' i: 1 } }"
      "op { input: 'bn' output: 'bn_folded_w' type: 'Relu' }",
      DM_FLOAT, NULL, 0, data_only, 1, &add, NULL);
  expect_ops(net, "Conv(data,bn_folded_w_1,bn_folded_b)>bn Relu(bn)>bn_folded_w");
  expect_ops(add, "FoldBN(w,s,bias,rm,riv)>bn_folded_w_1,bn_folded_b");
  assert_null(dm_opdef_find_arg(add->op[0], "epsilon")); /* FoldBN's default is BN's */
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* Fusion first, then FP16 painting: the folded weights are what the addition casts. */
static void test_then_fp16(void **state) {
  (void)state;
  Caffe2__NetDef *add = NULL;
  Caffe2__NetDef *net = fuse_text(CONV_BN("", "") "external_output: 'bn'", DM_FLOAT16, NULL,
                                  0, data_only, 1, &add, NULL);
  expect_ops(net, "FloatToHalf(data)>data_fp16 Conv(data_fp16,bn_folded_w_fp16,"
                  "bn_folded_b_fp16)>bn Relu(bn)>bn_fp16 HalfToFloat(bn_fp16)>bn");
  expect_ops(add, "FoldBN(w,s,bias,rm,riv,b)>bn_folded_w,bn_folded_b "
                  "FloatToHalf(bn_folded_w)>bn_folded_w_fp16 "
                  "FloatToHalf(bn_folded_b)>bn_folded_b_fp16");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* Each case leaves the net as it was and names its reason. */
static void expect_unfused(const char *text, const char *const *fetch, size_t n_fetch,
                           const char *const *fed, size_t n_fed, const char *reason) {
  Caffe2__NetDef *orig = parse(text), *add = NULL;
  char *report = NULL;
  Caffe2__NetDef *net = fuse_text(text, DM_FLOAT, fetch, n_fetch, fed, n_fed, &add, &report);
  char want[2048];
  op_list(orig, OPL_OUTPUTS, want, sizeof want);
  expect_ops(net, want);
  assert_null(add); /* an empty addition is not handed back */
  if (!report || !strstr(report, reason))
    fail_msg("report\n%s\nlacks '%s'", report ? report : "(none)", reason);
  assert_non_null(strstr(report, "fusion: 0 of 1 SpatialBN folded"));
  free(report);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&orig->base, NULL);
}

static void test_not_fused(void **state) {
  (void)state;
  static const char *const fetch_conv[] = {"conv"};
  static const char *const fed_s[] = {"data", "s"};
  /* the Conv's output read by another op */
  expect_unfused(CONV_BN("", "") "op { input: 'conv' output: 'c2' type: 'Relu' }", NULL, 0,
                 data_only, 1, "another reader or writer");
  /* fetched by the caller, or an external output */
  expect_unfused(CONV_BN("", ""), fetch_conv, 1, data_only, 1, "output is fetched");
  expect_unfused(CONV_BN("", "") "external_output: 'conv'", NULL, 0, data_only, 1,
                 "output is fetched");
  /* training mode: the batch statistics, 5 outputs */
  expect_unfused(
      "op { input: ['data', 'w', 'b'] output: 'conv' type: 'Conv' arg { name: 'kernel' i: 3 } }"
      "op { input: ['conv', 's', 'bias', 'rm', 'riv'] output: ['bn', 'rm', 'riv', 'sm', 'sv']"
      "     type: 'SpatialBN' arg { name: 'is_test' i: 0 } }",
      NULL, 0, data_only, 1, "training mode");
  /* NHWC */
  expect_unfused(CONV_BN(" arg { name: 'order' s: 'NHWC' }", " arg { name: 'order' s: 'NHWC' }"),
                 NULL, 0, data_only, 1, "NCHW only");
  expect_unfused(CONV_BN(" arg { name: 'order' s: 'NHWC' }", ""), NULL, 0, data_only, 1,
                 "NCHW only");
  /* a BN after something else */
  expect_unfused("op { input: 'data' output: 'conv' type: 'Relu' }"
                 "op { input: ['conv', 's', 'bias', 'rm', 'riv'] output: 'bn' type: 'SpatialBN'"
                 "     arg { name: 'is_test' i: 1 } }",
                 NULL, 0, data_only, 1, "not a Conv's output");
  /* a BN parameter fed at each run, or computed by the net */
  expect_unfused(CONV_BN("", ""), NULL, 0, fed_s, 2, "fed at each run");
  expect_unfused("op { input: 'data' output: 'rm' type: 'Relu' }" CONV_BN("", ""), NULL, 0,
                 data_only, 1, "computed by the net");
}

/* A net with gradient ops is not an inference net. */
static void test_gradient_refused(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(CONV_BN("", "") "op { input: 'bn' output: 'bn_grad' "
                              "type: 'ConstantFill' is_gradient_op: true }");
  Caffe2__NetDef *add = NULL;
  dm_fusion_summary sum;
  assert_ok(dm_netdef_new("add", &add));
  assert_status_msg(dm_fusion_pass(net, NULL, add, &sum), DM_ERR_INVALID, "gradient op");
  dm_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* Numerics --------------------------------------------------------------------------- */

enum { N = 2, C = 4, H = 5, W = 5, M = 6, G = 2, KH = 3 };
#define EPS 1e-3

static const char *init_text =
    "op { output: 'w' type: 'GaussianFill' arg { name: 'shape' ints: [6, 2, 3, 3] }"
    "     arg { name: 'std' f: 0.4 } device_option { random_seed: 21 } }"
    "op { output: 'b' type: 'UniformFill' arg { name: 'shape' ints: 6 }"
    "     arg { name: 'min' f: -0.5 } arg { name: 'max' f: 0.5 } device_option { random_seed: 22 } }"
    "op { output: 's' type: 'UniformFill' arg { name: 'shape' ints: 6 }"
    "     arg { name: 'min' f: -1.5 } arg { name: 'max' f: 1.5 } device_option { random_seed: 23 } }"
    "op { output: 'bias' type: 'UniformFill' arg { name: 'shape' ints: 6 }"
    "     arg { name: 'min' f: -0.5 } arg { name: 'max' f: 0.5 } device_option { random_seed: 24 } }"
    "op { output: 'rm' type: 'UniformFill' arg { name: 'shape' ints: 6 }"
    "     arg { name: 'min' f: -0.4 } arg { name: 'max' f: 0.4 } device_option { random_seed: 25 } }"
    "op { output: 'riv' type: 'UniformFill' arg { name: 'shape' ints: 6 }"
    "     arg { name: 'min' f: 0.001 } arg { name: 'max' f: 3 } device_option { random_seed: 26 } }";

/* group 2: output channels 0-2 read input channels 0-1, 3-5 read 2-3 */
static const char *predict_text =
    "name: 'gbn'"
    "op { input: ['data', 'w', 'b'] output: 'conv' type: 'Conv'"
    "     arg { name: 'kernel' i: 3 } arg { name: 'pad' i: 1 } arg { name: 'group' i: 2 } }"
    "op { input: ['conv', 's', 'bias', 'rm', 'riv'] output: 'bn' type: 'SpatialBN'"
    "     arg { name: 'is_test' i: 1 } arg { name: 'epsilon' f: 0.001 } }"
    "op { input: 'bn' output: 'y' type: 'Relu' }"
    "external_output: 'y'";

static const float *fetch_f32(dm_workspace *ws, const char *name, int64_t numel) {
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &t));
  assert_int_equal(dm_tensor_dtype(t), DM_FLOAT);
  assert_int_equal(dm_tensor_numel(t), numel);
  return dm_tensor_data(t);
}

/* y = relu(BN(conv(x))) in double from the unfolded weights, and per element the sum of
 * the magnitudes the fused Conv adds up (|w k x| terms and |b'|), which bounds its
 * rounding error. */
static void reference(dm_workspace *ws, const float *x, double *y, double *mag) {
  const float *w = fetch_f32(ws, "w", M * (C / G) * KH * KH), *b = fetch_f32(ws, "b", M);
  const float *s = fetch_f32(ws, "s", M), *bias = fetch_f32(ws, "bias", M);
  const float *rm = fetch_f32(ws, "rm", M), *riv = fetch_f32(ws, "riv", M);
  int cg = C / G, mg = M / G;
  for (int n = 0; n < N; n++)
    for (int m = 0; m < M; m++) {
      double k = s[m] / sqrt((double)riv[m] + EPS);
      for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++) {
          double acc = b[m], sum_abs = 0;
          for (int c = 0; c < cg; c++)
            for (int u = 0; u < KH; u++)
              for (int v = 0; v < KH; v++) {
                int ii = i + u - 1, jj = j + v - 1;
                if (ii < 0 || ii >= H || jj < 0 || jj >= W)
                  continue;
                double t = (double)w[((m * cg + c) * KH + u) * KH + v] *
                           x[((n * C + (m / mg) * cg + c) * H + ii) * W + jj];
                acc += t;
                sum_abs += fabs(t * k);
              }
          double z = (acc - rm[m]) * k + bias[m];
          size_t at = ((size_t)(n * M + m) * H + i) * W + j;
          y[at] = z > 0 ? z : 0;
          mag[at] = sum_abs + fabs((b[m] - rm[m]) * k) + fabs((double)bias[m]);
        }
    }
}

/* Runs the net through the C API, fused or not; returns y (copied) and fills *ws. */
static void run_api(const char *path, int fuse, const float *x, dm_workspace **ws,
                    float *y) {
  assert_ok(dm_workspace_create(ws));
  assert_ok(run_text(*ws, init_text));
  dm_infer_options o;
  assert_ok(dm_infer_options_init(&o));
  assert_int_equal(o.fuse, 0); /* the API's default: the net as the file has it */
  o.fuse = fuse;
  dm_net *net = NULL;
  assert_ok(dm_workspace_create_infer_net(*ws, path, &o, &net));
  int64_t dims[4] = {N, C, H, W};
  assert_ok(dm_workspace_feed(*ws, "data", DM_FLOAT, 4, dims, x));
  assert_ok(dm_net_run(net));
  memcpy(y, fetch_f32(*ws, "y", N * M * H * W), sizeof(float) * N * M * H * W);
  assert_ok(dm_net_run(net)); /* the fold is not redone: same weights, same bits */
  assert_memory_equal(y, fetch_f32(*ws, "y", N * M * H * W), sizeof(float) * N * M * H * W);
  const dm_tensor *t = NULL;
  dm_status folded = dm_workspace_fetch(*ws, "bn_folded_w", &t);
  assert_int_equal(folded == DM_OK, fuse != 0);
}

static void test_numerics_group(void **state) {
  (void)state;
  char path[64];
  snprintf(path, sizeof path, "/tmp/dm_fusion_XXXXXX.pbtxt");
  int fd = mkstemps(path, 6);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  assert_non_null(f);
  fputs(predict_text, f);
  assert_int_equal(fclose(f), 0);
  static float x[N * C * H * W], yf[N * M * H * W], yu[N * M * H * W];
  static double ref[N * M * H * W], mag[N * M * H * W];
  for (int i = 0; i < N * C * H * W; i++)
    x[i] = sinf(0.53f * (float)i + 0.1f) * (1.0f + 0.5f * cosf(0.17f * (float)i));
  dm_workspace *wsf = NULL, *wsu = NULL;
  run_api(path, 1, x, &wsf, yf);
  run_api(path, 0, x, &wsu, yu);
  unlink(path);
  reference(wsf, x, ref, mag);
  /* Bound: FP32 u = 2^-24. The fused Conv sums L = C/G * 9 products of weights that
   * FoldBN rounded once (relative u each), plus the folded bias (rounded once): at most
   * (L + 2) u * sum of the magnitudes (the classic gamma_L bound, first order). The
   * unfused path rounds the Conv the same way and then BN's output once more (relative
   * to |y| <= mag). Twice that covers both paths; Relu adds nothing. */
  const double u = 0x1p-24, L = (C / G) * KH * KH;
  double worst_f = 0, worst_u = 0, ymax = 0;
  for (int i = 0; i < N * M * H * W; i++) {
    double tol = 2 * (L + 4) * u * mag[i];
    double ef = fabs(yf[i] - ref[i]), eu = fabs(yu[i] - ref[i]);
    if (ef > tol || eu > tol)
      fail_msg("y[%d]: fused %.9g, unfused %.9g, reference %.9g (tol %.3g)", i, (double)yf[i],
               (double)yu[i], ref[i], tol);
    worst_f = fmax(worst_f, ef / tol);
    worst_u = fmax(worst_u, eu / tol);
    ymax = fmax(ymax, fabs(ref[i]));
  }
  assert_true(ymax > 0.5); /* the net computes something: not all clipped by Relu */
  printf("fused: worst error %.3f of the bound, unfused %.3f\n", worst_f, worst_u);
  dm_workspace_destroy(wsf);
  dm_workspace_destroy(wsu);
}

/* ABI growth: a program built before `fuse` existed passes a struct that ends before it;
 * whatever lies past its struct_size is not read, so its net is not fused. */
static void test_old_struct(void **state) {
  (void)state;
  char path[64];
  snprintf(path, sizeof path, "/tmp/dm_fusion_XXXXXX.pbtxt");
  int fd = mkstemps(path, 6);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  assert_non_null(f);
  fputs(predict_text, f);
  assert_int_equal(fclose(f), 0);
  for (int old = 0; old < 2; old++) {
    dm_workspace *ws = NULL;
    assert_ok(dm_workspace_create(&ws));
    assert_ok(run_text(ws, init_text));
    dm_infer_options o;
    assert_ok(dm_infer_options_init_sized(&o, old ? offsetof(dm_infer_options, fuse)
                                                   : sizeof o));
    o.fuse = 1; /* past an old struct's end: not read */
    dm_net *net = NULL;
    assert_ok(dm_workspace_create_infer_net(ws, path, &o, &net));
    const dm_tensor *t = NULL;
    assert_int_equal(dm_workspace_fetch(ws, "bn_folded_w", &t) == DM_OK, !old);
    dm_workspace_destroy(ws);
  }
  unlink(path);
}

/* FoldBN with a scale of the wrong length fails with the slot named, reading nothing. */
static void test_foldbn_shapes(void **state) {
  (void)state;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  assert_ok(run_text(ws, init_text));
  assert_ok(run_text(ws, "op { output: 's5' type: 'ConstantFill' arg { name: 'shape' ints: 5 }"
                         "     arg { name: 'value' f: 1 } }"));
  assert_status_msg(run_text(ws, "op { input: ['w', 's5', 'bias', 'rm', 'riv'] output: ['a', 'c']"
                                 "     type: 'FoldBN' }"),
                    DM_ERR_SHAPE, "scale has 5 elements but W has 6 output channels");
  dm_workspace_destroy(ws);
}

/* Post-ops --------------------------------------------------------------------------- */

/* dm_fusion_pass with post_ops on `text` (params: every blob read before written); the
 * net's ops must read `want`, and the report hold `reason` (NULL: no report). */
static void expect_post(const char *text, const char *const *keep, size_t n_keep,
                        const char *want, const char *reason, dm_fusion_summary *out) {
  Caffe2__NetDef *net = parse(text), *add = NULL;
  assert_ok(dm_netdef_new("add", &add));
  dm_fusion_opts o = {0};
  static const char *const fed[] = {"data", "x"};
  o.keep = keep, o.n_keep = n_keep, o.fed = fed, o.n_fed = 2, o.post_ops = 1;
  dm_fusion_summary sum;
  assert_ok(dm_fusion_pass(net, &o, add, &sum));
  expect_ops(net, want);
  if (reason && (!sum.report || !strstr(sum.report, reason)))
    fail_msg("report\n%s\nlacks '%s'", sum.report ? sum.report : "(none)", reason);
  if (!reason && sum.report)
    fail_msg("unexpected report\n%s", sum.report);
  if (out) {
    *out = sum;
    out->report = NULL, out->new_params = NULL, out->n_new_params = 0;
  }
  dm_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* The text net after the pass with post_ops (the caller frees it). */
static Caffe2__NetDef *post_fused(const char *text) {
  Caffe2__NetDef *net = parse(text), *add = NULL;
  assert_ok(dm_netdef_new("add", &add));
  dm_fusion_opts o = {0};
  o.post_ops = 1;
  dm_fusion_summary sum;
  assert_ok(dm_fusion_pass(net, &o, add, &sum));
  dm_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&add->base, NULL);
  return net;
}

static int64_t fusion_type_of(const char *text, size_t op) {
  Caffe2__NetDef *net = post_fused(text);
  assert_true(op < net->n_op);
  const Caffe2__Argument *a = dm_opdef_find_arg(net->op[op], "fusion_type");
  int64_t t = a && a->has_i ? a->i : -1;
  const Caffe2__Argument *k = dm_opdef_find_arg(net->op[op], "kernel");
  if (strcmp(net->op[op]->type, "ConvFusion") == 0) /* the Conv's arguments carried */
    assert_true(k && k->has_i && k->i == 3);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  return t;
}

#define CONV(x, w, y) \
  "op { input: ['" x "', '" w "'] output: '" y "' type: 'Conv' arg { name: 'kernel' i: 3 }" \
  " arg { name: 'pad' i: 1 } }"
#define OP1(type, x, y) "op { input: '" x "' output: '" y "' type: '" type "' }"
#define OP2(type, a, b, y) "op { input: ['" a "', '" b "'] output: '" y "' type: '" type "' }"

static void test_post_fused(void **state) {
  (void)state;
  dm_fusion_summary sum;
  /* Conv + Relu; the Conv's bias stays; NHWC is carried over */
  const char *conv_relu =
      "op { input: ['data', 'w', 'b'] output: 'c' type: 'Conv' arg { name: 'kernel' i: 3 }"
      " arg { name: 'order' s: 'NHWC' } }" OP1("Relu", "c", "y") "external_output: 'y'";
  expect_post(conv_relu, NULL, 0, "ConvFusion(data,w,b)>y", NULL, &sum);
  assert_int_equal(sum.conv_relu, 1);
  assert_int_equal(fusion_type_of(conv_relu, 0), 1);
  /* Conv + SpatialBN + Relu: one op, reading the folded weights */
  expect_post(CONV_BN("", "") "external_output: 'bn'", NULL, 0,
              "ConvFusion(data,bn_folded_w,bn_folded_b)>bn", NULL, &sum);
  assert_int_equal(sum.folded, 1);
  assert_int_equal(sum.conv_relu, 1);
  /* ResNet block, projection shortcut: both operands are Conv outputs; the first is
   * taken, moved to the Sum's place (after the shortcut's Conv), the Relu joins it */
  const char *projection = CONV("x", "w1", "a") CONV("x", "w2", "short")
      OP2("Sum", "a", "short", "sum") OP1("Relu", "sum", "sum") "external_output: 'sum'";
  expect_post(projection, NULL, 0, "Conv(x,w2)>short ConvFusion(x,w1,short)>sum", NULL, &sum);
  assert_int_equal(sum.conv_sum, 1);
  assert_int_equal(sum.conv_sum_relu, 1);
  assert_int_equal(sum.post_total, 2);
  assert_int_equal(fusion_type_of(projection, 1), 3);
  /* identity shortcut, the sum written over S in place, with an op between the Conv and
   * the Sum that writes S (S is read where the Sum was) */
  const char *identity = CONV("x", "w1", "a") OP1("Softmax", "x", "s")
      OP2("Sum", "a", "s", "s") OP1("Relu", "s", "s") "external_output: 's'";
  expect_post(identity, NULL, 0, "Softmax(x)>s ConvFusion(x,w1,s)>s", NULL, NULL);
  assert_int_equal(fusion_type_of(identity, 1), 3);
  /* S made earlier in the net and dead after the sum: Y is renamed S from there on, so
   * the sum runs in place onto S's buffer (no copy of S); not when S is read later, nor
   * when S comes from outside the net (the next run would find it overwritten) */
  expect_post(OP1("Softmax", "x", "s") CONV("s", "w1", "a") CONV("a", "w2", "c")
                  OP2("Sum", "c", "s", "y") OP1("Relu", "y", "y") OP1("Softmax", "y", "p")
                      "external_output: 'p'",
              NULL, 0, "Softmax(x)>s Conv(s,w1)>a ConvFusion(a,w2,s)>s Softmax(s)>p", NULL, NULL);
  expect_post(OP1("Softmax", "x", "s") CONV("s", "w1", "a") CONV("a", "w2", "c")
                  OP2("Sum", "c", "s", "y") OP1("Relu", "y", "y") OP2("Sum", "y", "s", "p")
                      "external_output: 'p'",
              NULL, 0, "Softmax(x)>s Conv(s,w1)>a ConvFusion(a,w2,s)>y Sum(y,s)>p",
              "neither operand is a Conv's output", NULL);
  /* Conv + Add (no broadcast), S the first operand; no Relu: fusion_type 2 */
  const char *add = CONV("x", "w1", "a") OP2("Add", "s0", "a", "y") OP1("Softmax", "y", "p");
  expect_post(add, NULL, 0, "ConvFusion(x,w1,s0)>y Softmax(y)>p", NULL, &sum);
  assert_int_equal(fusion_type_of(add, 0), 2);
  /* FC + Relu, in place, axis carried */
  const char *fc = "op { input: ['x', 'w', 'b'] output: 'f' type: 'FC' arg { name: 'axis' i: 2 } }"
      OP1("Relu", "f", "f");
  expect_post(fc, NULL, 0, "FCFusion(x,w,b)>f", NULL, &sum);
  assert_int_equal(sum.fc_relu, 1);
  assert_int_equal(fusion_type_of(fc, 0), 1);
}

static void test_post_not_fused(void **state) {
  (void)state;
  static const char *const keep_c[] = {"c"};
  /* the intermediate read by another op, fetched, an external output, fed */
  expect_post(CONV("x", "w", "c") OP1("Relu", "c", "y") OP1("Softmax", "c", "z"), NULL, 0,
              "Conv(x,w)>c Relu(c)>y Softmax(c)>z", "another reader or writer", NULL);
  expect_post(CONV("x", "w", "c") OP1("Relu", "c", "y"), keep_c, 1, "Conv(x,w)>c Relu(c)>y",
              "is fetched", NULL);
  expect_post(CONV("x", "w", "c") OP1("Relu", "c", "y") "external_output: 'c'", NULL, 0,
              "Conv(x,w)>c Relu(c)>y", "is fetched", NULL);
  expect_post(CONV("data", "w", "x") OP1("Relu", "x", "y"), NULL, 0, "Conv(data,w)>x Relu(x)>y",
              "fed at each run", NULL);
  /* in place: an op between reads the Conv's output before the Relu */
  expect_post(CONV("x", "w", "c") OP1("Softmax", "c", "z") OP1("Relu", "c", "c"), NULL, 0,
              "Conv(x,w)>c Softmax(c)>z Relu(c)>c", "an op between them reads or writes", NULL);
  /* a Conv input (its X) written between the Conv and the Sum: not readable later */
  expect_post(CONV("x", "w", "a") OP1("Relu", "s", "x") OP2("Sum", "a", "s", "y"), NULL, 0,
              "Conv(x,w)>a Relu(s)>x Sum(a,s)>y", "writes an input of the first", NULL);
  /* a broadcast Add, a Sum of three */
  expect_post(CONV("x", "w", "a")
              "op { input: ['a', 'b'] output: 'y' type: 'Add' arg { name: 'broadcast' i: 1 } }",
              NULL, 0, "Conv(x,w)>a Add(a,b)>y", "broadcast Add", NULL);
  expect_post(CONV("x", "w", "a") "op { input: ['a', 's', 't'] output: 'y' type: 'Sum' }", NULL,
              0, "Conv(x,w)>a Sum(a,s,t)>y", "two operands", NULL);
  /* a Sum of the Conv's output with itself */
  expect_post(CONV("x", "w", "a") OP2("Sum", "a", "a", "y"), NULL, 0, "Conv(x,w)>a Sum(a,a)>y",
              "more than one of the op's operands", NULL);
  /* the fused op would write its own input */
  expect_post(CONV("x", "w", "c") OP1("Relu", "c", "x"), NULL, 0, "Conv(x,w)>c Relu(c)>x",
              "would be one of its inputs", NULL);
  /* a Relu after a pool, a Sum of two non-Conv outputs */
  expect_post(OP1("MaxPool", "x", "p") OP1("Relu", "p", "p") OP2("Sum", "p", "x", "y"), NULL, 0,
              "MaxPool(x)>p Relu(p)>p Sum(p,x)>y", "not the output of a Conv, an FC", NULL);
  expect_post(OP1("MaxPool", "x", "p") OP2("Sum", "p", "x", "y"), NULL, 0,
              "MaxPool(x)>p Sum(p,x)>y", "neither operand is a Conv's output", NULL);
  /* post_ops off: the folds only */
  Caffe2__NetDef *net = parse(CONV("x", "w", "c") OP1("Relu", "c", "y")), *add = NULL;
  assert_ok(dm_netdef_new("add", &add));
  dm_fusion_summary sum;
  assert_ok(dm_fusion_pass(net, NULL, add, &sum));
  expect_ops(net, "Conv(x,w)>c Relu(c)>y");
  assert_int_equal(sum.post_total, 0);
  dm_fusion_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* The string argument `name` of op `op` of the fused text net ("" when absent), and
 * float argument `fname` (NAN when absent). */
static void act_of(const char *text, size_t op, const char *fname, char *act, size_t cap,
                   float *fval) {
  Caffe2__NetDef *net = post_fused(text);
  assert_true(op < net->n_op);
  const Caffe2__Argument *a = dm_opdef_find_arg(net->op[op], "activation");
  snprintf(act, cap, "%.*s", a && a->has_s ? (int)a->s.len : 0,
           a && a->has_s ? (const char *)a->s.data : "");
  const Caffe2__Argument *f = fname ? dm_opdef_find_arg(net->op[op], fname) : NULL;
  *fval = f && f->has_f ? f->f : NAN;
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* Activations other than Relu: Conv + Clip (ReLU6, its bounds carried), Conv + Sigmoid,
 * Conv + Sum + HardSwish, Conv + Sigmoid + Mul (SiLU) as Swish; and what is not fused. */
static void test_post_activations(void **state) {
  (void)state;
  dm_fusion_summary sum;
  char act[32];
  float v;
  const char *clip = CONV("x", "w", "c")
      "op { input: 'c' output: 'y' type: 'Clip' arg { name: 'min' f: 0 }"
      " arg { name: 'max' f: 6 } }";
  expect_post(clip, NULL, 0, "ConvFusion(x,w)>y", NULL, &sum);
  assert_int_equal(sum.act_total, 1);
  assert_int_equal(sum.conv_act, 1);
  assert_int_equal(sum.post_total, 0);
  assert_int_equal(fusion_type_of(clip, 0), 1);
  act_of(clip, 0, "max", act, sizeof act, &v);
  assert_string_equal(act, "Clip");
  assert_true(v == 6.0f);
  const char *sig = CONV("x", "w", "c") OP1("Sigmoid", "c", "y");
  expect_post(sig, NULL, 0, "ConvFusion(x,w)>y", NULL, NULL);
  act_of(sig, 0, NULL, act, sizeof act, &v);
  assert_string_equal(act, "Sigmoid");
  /* Conv + Sum + an activation: fusion_type 3 with it */
  const char *sum_hs = CONV("x", "w1", "a") OP1("Softmax", "x", "s") OP2("Add", "a", "s", "t")
      OP1("HardSwish", "t", "y") "external_output: 'y'";
  expect_post(sum_hs, NULL, 0, "Softmax(x)>s ConvFusion(x,w1,s)>y", NULL, NULL);
  assert_int_equal(fusion_type_of(sum_hs, 1), 3);
  act_of(sum_hs, 1, NULL, act, sizeof act, &v);
  assert_string_equal(act, "HardSwish");
  /* SiLU, both operand orders; the Sigmoid goes too */
  const char *silu = CONV("x", "w", "c") OP1("Sigmoid", "c", "s") OP2("Mul", "c", "s", "y")
      OP1("Softmax", "y", "p");
  expect_post(silu, NULL, 0, "ConvFusion(x,w)>y Softmax(y)>p", NULL, &sum);
  assert_int_equal(sum.act_total, 1);
  assert_int_equal(sum.conv_act, 1);
  act_of(silu, 0, NULL, act, sizeof act, &v);
  assert_string_equal(act, "Swish");
  expect_post(CONV("x", "w", "c") OP1("Softmax", "x", "z") OP1("Sigmoid", "c", "s")
                  OP2("Mul", "s", "c", "y"),
              NULL, 0, "Softmax(x)>z ConvFusion(x,w)>y", NULL, NULL);
  /* HardSwish as torch exports it below opset 14: x * HardSigmoid(x; 1/6, 1/2); with
   * another alpha it is no HardSwish, and the HardSigmoid's input has two readers */
  const char *hswish = CONV("x", "w", "c")
      "op { input: 'c' output: 's' type: 'HardSigmoid' arg { name: 'alpha' f: 0.16666667 }"
      " arg { name: 'beta' f: 0.5 } }" OP2("Mul", "s", "c", "y");
  expect_post(hswish, NULL, 0, "ConvFusion(x,w)>y", NULL, NULL);
  act_of(hswish, 0, NULL, act, sizeof act, &v);
  assert_string_equal(act, "HardSwish");
  expect_post(CONV("x", "w", "c")
                  "op { input: 'c' output: 's' type: 'HardSigmoid' arg { name: 'alpha' f: 0.2 }"
                  " }" OP2("Mul", "s", "c", "y"),
              NULL, 0, "Conv(x,w)>c HardSigmoid(c)>s Mul(s,c)>y", "another reader or writer",
              NULL);
  /* not fused: FC + Clip, Swish with another reader of the Conv's output or of the
   * Sigmoid's, the Sigmoid's output fetched, Swish over a pool's output */
  expect_post("op { input: ['x', 'w', 'b'] output: 'f' type: 'FC' }" OP1("Tanh", "f", "y"),
              NULL, 0, "FC(x,w,b)>f Tanh(f)>y", "FCFusion fuses Relu only", NULL);
  expect_post(CONV("x", "w", "c") OP1("Sigmoid", "c", "s") OP2("Mul", "c", "s", "y")
                  OP1("Softmax", "c", "z"),
              NULL, 0, "Conv(x,w)>c Sigmoid(c)>s Mul(c,s)>y Softmax(c)>z",
              "another reader or writer", NULL);
  static const char *const keep_s[] = {"s"};
  expect_post(CONV("x", "w", "c") OP1("Sigmoid", "c", "s") OP2("Mul", "c", "s", "y"), keep_s, 1,
              "Conv(x,w)>c Sigmoid(c)>s Mul(c,s)>y", "fed, fetched or kept", NULL);
  expect_post(OP1("MaxPool", "x", "c") OP1("Sigmoid", "c", "s") OP2("Mul", "c", "s", "y"), NULL,
              0, "MaxPool(x)>c Sigmoid(c)>s Mul(c,s)>y", "not a Conv's output", NULL);
  /* Erf has no engine post-op: left alone, and not counted */
  expect_post(CONV("x", "w", "c") OP1("Erf", "c", "y"), NULL, 0, "Conv(x,w)>c Erf(c)>y", NULL,
              &sum);
  assert_int_equal(sum.act_total, 0);
}

static int setup(void **state) {
  (void)state;
  return dm_init() == DM_OK ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_folded),         cmocka_unit_test(test_no_bias),
      cmocka_unit_test(test_then_fp16),      cmocka_unit_test(test_not_fused),
      cmocka_unit_test(test_gradient_refused), cmocka_unit_test(test_numerics_group),
      cmocka_unit_test(test_old_struct),     cmocka_unit_test(test_foldbn_shapes),
      cmocka_unit_test(test_post_fused),     cmocka_unit_test(test_post_not_fused),
      cmocka_unit_test(test_post_activations),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
