/* test_layout.c: the layout pass (net/passes/layout_pass.h), an NCHW net made NHWC.
 *
 *   - FCWeightToNHWC against index loops written here (the NCHW column c*S + s of every
 *     row moved to s*C + c), with the channels summed over two filters (a Concat's), and
 *     its refusal of a K that is not a multiple of the channels;
 *   - the refusal: an op whose schema gives no layout rule (Reshape) reading NHWC data
 *     fails the pass with its index, type and name, and the net is left as it was;
 *   - two Convs joined by a Concat (axis 1 -> 3) into an FC: the FC weight reordered by
 *     both filters' channels, the output equal to the NCHW net's;
 *   - training steps through the pipeline (gradient, momentum, [FP16 mixed precision with
 *     an initial loss scale of 128, so the first step is taken], layout) against the
 *     same pipeline without the layout pass: LeNet (models/mnist,
 *     its DB input removed, batch 2 fed) and ResNet-50 (models/resnet50, batch 2 of 64 x
 *     64 images, which its global pooling allows), FP32 and FP16. The loss, the logits and
 *     every parameter after one update (BN running statistics included) are compared,
 *     the re-laid weights read back through the pass's rename list (a filter's
 *     M x kH x kW x C, an FC weight's columns in NHWC order);
 *   - the tolerances can fail: LeNet with the FC weight's reorder replaced by a plain copy
 *     (the NCHW columns against NHWC data) is outside them.
 *
 * Tolerance (derived, never tuned). The two nets compute the same sums in different
 * orders (NHWC kernels walk channels innermost), so each value differs by FP32 rounding
 * only. By Higham and Mary's probabilistic bound (SIAM J. Sci. Comput. 2019), a sum of K
 * terms in two orders differs by at most lam sqrt(K) u times the terms' scale (lam = 7.2,
 * see LAM; u = 2^-24); along the net the errors add, so K is the sum, over every Conv, FC and
 * training-mode SpatialBN of the forward net, of the reductions it and its gradient ops
 * perform (C kH kW forward, M kH kW for dX, N outH outW for dW; K_in, N_out and the
 * batch for an FC; N H W twice for a BN), read from the NCHW net's shapes. A parameter is
 * compared with the scale of its update (the adjusted gradient MomentumSGDUpdate leaves
 * in <p>_grad, lr g on the first step), plus two ulps of the parameter for the update's
 * own rounding; a blob without a gradient (running statistics) and the loss and logits
 * with their own largest magnitude. With FP16 painting, the roundings of each FP16
 * tensor to FP16 (u16 = 2^-11) may also land one ulp apart: D of them along the path,
 * two per forward op (its output and its gradient), add lam sqrt(D) 2 u16 by the same
 * bound.
 *
 * ResNet-50's updates are compared in norm instead, against a noise floor. At batch 2
 * its gradients are not continuous at rounding level: a MaxPool window's maximum tied
 * within rounding, a Relu input within rounding of 0, or a training-mode BN over the 8
 * values of a 2 x 2 res5 channel sends an element's gradient elsewhere, so moving every
 * input pixel by one ulp already moves the NCHW net's updates by ~2% (FP32) in norm.
 * Rounding differences in the NHWC net can do no more than such perturbations: the
 * relative distance of its updates from NCHW's must be within lam times that floor
 * (measured here on the NCHW net, input one ulp up) plus the bound above, and in FP32
 * the floor must stay under 10%, so a wrong backward is still caught. In FP16, whose
 * roundings tie MaxPool windows far more often, the floor is ~75% and the updates are
 * only held to it; the loss and logits are still compared elementwise, and LeNet's FP16
 * updates are.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/half.h"
#include "net/api.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"
#include "netdef_test_util.h"
#include "test_util.h"

/* Higham and Mary's bound holds for one sum with probability at least
 * 1 - 2 exp(-lam^2 / 2) (for K u << 1); the tests take the worst of up to ~1e8 compared
 * values, so lam = sqrt(2 ln(2 * 1e8 / 1e-3)) = 7.2 keeps the chance that any one of them
 * exceeds its bound by rounding alone under 1e-3 (lam = 4 was exceeded, 1.21 of the
 * bound, by a res5 BN running mean on the reference kernels). */
#define LAM 7.2
#define U32 0x1p-24
#define U16 0x1p-11

static const char *lenet_init, *lenet_train, *resnet_init, *resnet_train, *squeeze_init,
    *squeeze_train;

static const dm_tensor *fetch(dm_workspace *ws, const char *name);
static double max_abs(const dm_tensor *t);

/* ---- FCWeightToNHWC -------------------------------------------------------------- */

static void test_fc_weight_op(void **state) {
  (void)state;
  enum { N = 3, C1 = 2, C2 = 3, C = C1 + C2, S = 4, K = C * S };
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  float w[N * K], f1[C1], f2[C2 * 2];
  for (int i = 0; i < N * K; i++)
    w[i] = (float)i;
  const int64_t wd[2] = {N, K}, f1d[1] = {C1}, f2d[2] = {C2, 2}, bad[2] = {N, K + 1};
  assert_ok(dm_workspace_feed(ws, "w", DM_FLOAT, 2, wd, w));
  assert_ok(dm_workspace_feed(ws, "f1", DM_FLOAT, 1, f1d, f1));
  assert_ok(dm_workspace_feed(ws, "f2", DM_FLOAT, 2, f2d, f2));
  assert_ok(run_text(ws, "op { input: ['w', 'f1', 'f2'] output: 'y' type: 'FCWeightToNHWC' }"));
  const dm_tensor *y = NULL;
  assert_ok(dm_workspace_fetch(ws, "y", &y));
  assert_int_equal(dm_tensor_ndim(y), 2);
  assert_int_equal(dm_tensor_dims(y)[1], K);
  const float *py = dm_tensor_data(y);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int s = 0; s < S; s++)
        if (py[n * K + s * C + c] != w[n * K + c * S + s])
          fail_msg("y[%d, %d] is %g; want W[%d, %d] = %g", n, s * C + c,
                   py[n * K + s * C + c], n, c * S + s, w[n * K + c * S + s]);
  float wb[N * (K + 1)] = {0};
  assert_ok(dm_workspace_feed(ws, "w", DM_FLOAT, 2, bad, wb));
  assert_status_msg(run_text(ws, "op { input: ['w', 'f1', 'f2'] output: 'y' "
                                 "type: 'FCWeightToNHWC' }"),
                    DM_ERR_INVALID, "not a multiple of the 5 channels");
  dm_workspace_destroy(ws);
}

/* ---- refusal --------------------------------------------------------------------- */

static void test_refused(void **state) {
  (void)state;
  const char *text =
      "op { input: ['data', 'w'] output: 'c' type: 'Conv' arg { name: 'kernel' i: 3 } }"
      "op { input: ['c', 'b'] output: 'r' name: 'add' type: 'Add'"
      "     arg { name: 'broadcast' i: 1 } arg { name: 'axis' i: 1 } }"
      "external_input: ['data', 'w', 'b'] external_output: 'r'";
  Caffe2__NetDef *net = parse(text), *add = NULL;
  char *before = print(net);
  assert_ok(dm_netdef_new("add", &add));
  static const char *const fed[] = {"data"};
  dm_layout_opts o = {.fed = fed, .n_fed = 1};
  dm_layout_summary sum = {0};
  assert_status_msg(dm_layout_pass(net, &o, add, &sum), DM_ERR_UNSUPPORTED,
                    "op 1 (Add 'add')", "broadcasts");
  char *after = print(net);
  assert_string_equal(before, after); /* decided before anything changed */
  assert_int_equal(add->n_op, 0);
  dm_layout_summary_free(&sum);
  free(before);
  free(after);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  protobuf_c_message_free_unpacked(&add->base, NULL);
}

/* ---- NCHW2NHWCPad ---------------------------------------------------------------- */

/* Y (N, H, W, C') against index loops: X's (n, c, h, w) for c < C, exactly 0 above, C'
 * the next multiple; FP32 and FP16 (bits moved, nothing computed); a 3-D X refused. */
static void test_pad_op(void **state) {
  (void)state;
  enum { N = 2, H = 3, W = 5, MAXC = 9 };
  static const int chans[] = {3, 8, 9}, mults[] = {8, 8, 4};
  for (int t = 0; t < 3; t++)
    for (int half = 0; half < 2; half++) {
      const int C = chans[t], m = mults[t], Cp = (C + m - 1) / m * m;
      uint16_t xh[N * MAXC * H * W];
      float xf[N * MAXC * H * W];
      for (int i = 0; i < N * C * H * W; i++) {
        xf[i] = (float)(i + 1);
        xh[i] = dm_float_to_half(xf[i]);
      }
      dm_workspace *ws = NULL;
      assert_ok(dm_workspace_create(&ws));
      const int64_t xd[4] = {N, C, H, W};
      assert_ok(dm_workspace_feed(ws, "x", half ? DM_FLOAT16 : DM_FLOAT, 4, xd,
                                  half ? (const void *)xh : (const void *)xf));
      char text[160];
      snprintf(text, sizeof text, "op { input: 'x' output: 'y' type: 'NCHW2NHWCPad' "
                                  "arg { name: 'multiple' i: %d } }", m);
      assert_ok(run_text(ws, text));
      const dm_tensor *y = fetch(ws, "y");
      const int64_t *d = dm_tensor_dims(y);
      assert_true(dm_tensor_ndim(y) == 4 && d[0] == N && d[1] == H && d[2] == W && d[3] == Cp);
      for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
          for (int w = 0; w < W; w++)
            for (int c = 0; c < Cp; c++) {
              int64_t k = ((n * H + h) * W + w) * Cp + c;
              double got = half ? dm_half_to_float(((const uint16_t *)dm_tensor_data(y))[k])
                                : ((const float *)dm_tensor_data(y))[k];
              double want = c < C ? xf[((n * C + c) * H + h) * W + w] : 0.0;
              if (got != want)
                fail_msg("C %d multiple %d %s: y[%d, %d, %d, %d] is %g; want %g", C, m,
                         half ? "FP16" : "FP32", n, h, w, c, got, want);
            }
      dm_workspace_destroy(ws);
    }
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  const int64_t bad[3] = {2, 3, 4};
  float z[24] = {0};
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 3, bad, z));
  assert_status_msg(run_text(ws, "op { input: 'x' output: 'y' type: 'NCHW2NHWCPad' }"),
                    DM_ERR_SHAPE, "takes 4-D NCHW data");
  dm_workspace_destroy(ws);
}

/* ---- small nets, NCHW against NHWC --------------------------------------------- */

typedef struct blob_spec {
  const char *name;
  int ndim;
  int64_t dims[4];
} blob_spec;

typedef struct small_run {
  dm_workspace *ws[2];        /* [0] the net as written, [1] through the layout pass */
  Caffe2__NetDef *net, *add;  /* the rewritten net and its addition (ws[1] owns them) */
  dm_layout_summary sum;
} small_run;

/* Feeds the blobs (uniform in [-0.5, 0.5) from `seed`) to two workspaces, runs `text` in
 * the first as written and in the second through the layout pass ('data' fed), the
 * addition first. */
static void small_run_both(const char *text, const blob_spec *b, int n_blobs, uint64_t seed,
                           small_run *r) {
  memset(r, 0, sizeof *r);
  for (int v = 0; v < 2; v++)
    assert_ok(dm_workspace_create(&r->ws[v]));
  for (int t = 0; t < n_blobs; t++) {
    int64_t n = 1;
    for (int d = 0; d < b[t].ndim; d++)
      n *= b[t].dims[d];
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      x[i] = (float)((double)(seed >> 40) / 16777216.0 - 0.5);
    }
    for (int v = 0; v < 2; v++)
      assert_ok(dm_workspace_feed(r->ws[v], b[t].name, DM_FLOAT, b[t].ndim, b[t].dims, x));
    free(x);
  }
  assert_ok(run_text(r->ws[0], text));
  r->net = parse(text);
  assert_ok(dm_netdef_new("add", &r->add));
  static const char *const fed[] = {"data"};
  dm_layout_opts o = {.fed = fed, .n_fed = 1};
  assert_ok(dm_layout_pass(r->net, &o, r->add, &r->sum));
  dm_net *n = NULL;
  assert_ok(dm_workspace_create_net(r->ws[1], r->add, "add", &n));
  assert_ok(dm_net_run(n));
  assert_ok(dm_workspace_create_net(r->ws[1], r->net, "nhwc", &n));
  assert_ok(dm_net_run(n));
}

/* Output `y` of both runs: numel elements, equal within FP32 rounding of K-term sums. */
static void small_run_check(small_run *r, const char *y, int64_t numel, double K) {
  const dm_tensor *ya = fetch(r->ws[0], y), *yb = fetch(r->ws[1], y);
  assert_int_equal(dm_tensor_numel(ya), numel);
  assert_int_equal(dm_tensor_numel(yb), numel);
  const float *pa = dm_tensor_data(ya), *pb = dm_tensor_data(yb);
  double tol = LAM * sqrt(K) * U32 * max_abs(ya);
  for (int64_t k = 0; k < numel; k++)
    if (fabs((double)pa[k] - pb[k]) > tol)
      fail_msg("%s[%lld]: NCHW %.9g, NHWC %.9g (tolerance %.3g)", y, (long long)k, pa[k], pb[k],
               tol);
  dm_layout_summary_free(&r->sum);
  dm_workspace_destroy(r->ws[0]);
  dm_workspace_destroy(r->ws[1]);
}

/* ---- exits: an op without a layout rule reads NHWC data ----------------------------- */

/* A Reshape (no layout rule) reading a Conv's NHWC output gets it transposed back into
 * c_nchw just before it, so r equals the NCHW net's r within the Conv's FP32 rounding
 * (K = 27 terms), in the NCHW net's shape. */
static void test_exit(void **state) {
  (void)state;
  const char *text =
      "op { input: ['data', 'w'] output: 'c' type: 'Conv' arg { name: 'kernel' i: 3 } }"
      "op { input: ['c'] output: ['r', 'old'] name: 'flat' type: 'Reshape'"
      "     arg { name: 'shape' ints: [0, -1] } }"
      "external_input: ['data', 'w'] external_output: 'r'";
  static const blob_spec b[] = {{"data", 4, {2, 3, 5, 5}}, {"w", 4, {4, 3, 3, 3}}};
  small_run r;
  small_run_both(text, b, 2, 7, &r);
  char got[1024];
  op_list(r.net, OPL_OUTPUTS, got, sizeof got);
  assert_string_equal(got, "Transpose(data)>data_nhwc Conv(data_nhwc,w_nhwc)>c "
                           "Transpose(c)>c_nchw Reshape(c_nchw)>r,old");
  const Caffe2__Argument *axes = dm_opdef_find_arg(r.net->op[2], "axes");
  assert_true(axes && axes->n_ints == 4 && axes->ints[1] == 3 && axes->ints[2] == 1);
  assert_int_equal(dm_tensor_dims(fetch(r.ws[1], "r"))[1], 4 * 9);
  small_run_check(&r, "r", 2 * 4 * 9, 27);
}

/* ---- Concat into FC ---------------------------------------------------------------- */

/* Two Convs joined along channels (Concat axis 1) and flattened into an FC: the Concat's
 * axis becomes 3, the FC's weight is reordered by the channels of both filters, and y
 * equals the NCHW net's within FP32 rounding (K = 27 + 54 terms on the path). */
static void test_concat_fc(void **state) {
  (void)state;
  const char *text =
      "op { input: ['data', 'w1'] output: 'a' type: 'Conv' arg { name: 'kernel' i: 3 } }"
      "op { input: ['data', 'w2'] output: 'b' type: 'Conv' arg { name: 'kernel' i: 3 } }"
      "op { input: ['a', 'b'] output: ['c', 'ci'] type: 'Concat' arg { name: 'axis' i: 1 } }"
      "op { input: ['c', 'fw', 'fb'] output: 'y' type: 'FC' }"
      "external_input: ['data', 'w1', 'w2', 'fw', 'fb'] external_output: 'y'";
  static const blob_spec b[] = {{"data", 4, {2, 3, 5, 5}}, {"w1", 4, {4, 3, 3, 3}},
                                {"w2", 4, {2, 3, 3, 3}},   {"fw", 2, {5, 54}},
                                {"fb", 1, {5}}};
  small_run r;
  small_run_both(text, b, 5, 42, &r);
  char got[1024];
  op_list(r.add, OPL_OUTPUTS, got, sizeof got);
  assert_string_equal(got, "Transpose(w1)>w1_nhwc Transpose(w2)>w2_nhwc "
                           "FCWeightToNHWC(fw,w1_nhwc,w2_nhwc)>fw_nhwc");
  const Caffe2__Argument *axis = dm_opdef_find_arg(r.net->op[3], "axis");
  assert_true(strcmp(r.net->op[3]->type, "Concat") == 0 && axis && axis->i == 3);
  small_run_check(&r, "y", 10, 27.0 + 54.0);
}

/* ---- training steps ------------------------------------------------------------- */

typedef struct model {
  const char *init, *train;
  int64_t batch, channels, side;
  const char *pred; /* the probabilities or logits compared besides the loss */
} model;

typedef struct stepped {
  dm_workspace *ws;
  Caffe2__NetDef *net;     /* the rewritten training net (a copy, for the shapes) */
  Caffe2__NetDef *add;     /* its init addition (a copy) */
  dm_layout_summary layout;
  char **params;           /* the init net's outputs */
  size_t n_params;
  const char *pred;        /* the model's */
} stepped;

static const dm_tensor *fetch(dm_workspace *ws, const char *name) {
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, name, &t));
  return t;
}

/* The forward net without its DB input (data and label are fed). */
static Caffe2__NetDef *forward_def(const char *path) {
  Caffe2__NetDef *def = NULL;
  assert_ok(dm_netdef_read(path, &def));
  drop_ops(def, "TensorProtosDBInput");
  return def;
}

/* sabotage: the FC weights' reorder made a plain copy (the check that the tolerance can
 * fail); perturb: every pixel one ulp up (the noise floor). */
static void step(const model *m, int layout, int fp16, int sabotage, int perturb, int pad,
                 int fuse, stepped *out) {
  memset(out, 0, sizeof *out);
  out->pred = m->pred;
  assert_ok(dm_workspace_create(&out->ws));
  assert_ok(dm_workspace_run_net_file(out->ws, m->init));
  Caffe2__NetDef *init = NULL;
  assert_ok(dm_netdef_read(m->init, &init));
  for (size_t i = 0; i < init->n_op; i++)
    for (size_t k = 0; k < init->op[i]->n_output; k++)
      assert_ok(dm_strv_push(&out->params, &out->n_params, init->op[i]->output[k]));
  protobuf_c_message_free_unpacked(&init->base, NULL);

  const char *loss = "loss";
  dm_pipeline_opts p;
  model_step_opts(&p, &loss, fp16);
  p.layout = layout ? DM_TRAIN_LAYOUT_NHWC : DM_TRAIN_LAYOUT_NCHW;
  p.layout_opts.pad_channels = pad;
  p.fuse_train = fuse;
  Caffe2__NetDef *net = forward_def(m->train), *add = NULL;
  dm_pipeline_result r;
  assert_ok(dm_pipeline_run(net, &p, &add, &r));
  assert_ok(DM_PB_CLONE(Caffe2__NetDef, add, &out->add)); /* before any sabotage */
  out->layout = r.layout;
  r.layout = (dm_layout_summary){0};
  dm_pipeline_result_free(&r);
  for (size_t i = 0; sabotage && i < add->n_op; i++)
    if (strcmp(add->op[i]->type, "FCWeightToNHWC") == 0) {
      for (size_t k = 1; k < add->op[i]->n_input; k++) /* the channel inputs go */
        free(add->op[i]->input[k]);
      add->op[i]->n_input = 1;
      char *copy = strdup("Copy");
      assert_non_null(copy);
      free(add->op[i]->type);
      add->op[i]->type = copy;
      sabotage = 2;
    }
  assert_true(sabotage != 1); /* asked for, and there was an FC weight to sabotage */
  assert_ok(DM_PB_CLONE(Caffe2__NetDef, net, &out->net));
  dm_net *n = NULL;
  assert_ok(dm_workspace_create_net(out->ws, add, "init_add", &n));
  assert_ok(dm_net_run(n));

  int64_t numel = m->batch * m->channels * m->side * m->side;
  float *x = malloc((size_t)numel * sizeof *x);
  assert_non_null(x);
  uint64_t rng = 0x853c49e6748fea9bull;
  for (int64_t i = 0; i < numel; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(rng >> 40) / 16777216.0);
    if (perturb)
      x[i] = nextafterf(x[i], 2.0f);
  }
  const int64_t xd[4] = {m->batch, m->channels, m->side, m->side}, ld[1] = {m->batch};
  int32_t labels[8] = {3, 8, 0, 5, 1, 2, 7, 9};
  assert_ok(dm_workspace_feed(out->ws, "data", DM_FLOAT, 4, xd, x));
  assert_ok(dm_workspace_feed(out->ws, "label", DM_INT32, 1, ld, labels));
  free(x);
  assert_ok(dm_workspace_create_net(out->ws, net, "train", &n));
  assert_ok(dm_net_run(n));
  if (fp16) { /* the step was taken, not skipped for an overflow */
    const dm_tensor *f = fetch(out->ws, "found_inf");
    assert_true(*(const float *)dm_tensor_data(f) == 0.0f);
  }
}

static void stepped_free(stepped *s) {
  dm_workspace_destroy(s->ws);
  protobuf_c_message_free_unpacked(&s->net->base, NULL);
  protobuf_c_message_free_unpacked(&s->add->base, NULL);
  dm_layout_summary_free(&s->layout);
  for (size_t i = 0; i < s->n_params; i++)
    free(s->params[i]);
  free(s->params);
}

static int64_t dim(dm_workspace *ws, const char *name, int d) {
  const dm_tensor *t = fetch(ws, name);
  return d < dm_tensor_ndim(t) ? dm_tensor_dims(t)[d] : 1;
}

/* K (the summed reduction lengths) and D (the FP16 roundings) of the NCHW net. */
static void reductions(const stepped *a, double *K, double *D) {
  *K = 0;
  *D = 0;
  const Caffe2__NetDef *net = a->net;
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    if (op->is_gradient_op || !op->n_output)
      continue;
    const char *t = op->type;
    *D += 2;
    if (strcmp(t, "Conv") == 0) {
      const char *w = op->input[1], *y = op->output[0];
      double khw = (double)(dim(a->ws, w, 2) * dim(a->ws, w, 3));
      *K += (double)dim(a->ws, w, 1) * khw + (double)dim(a->ws, w, 0) * khw +
            (double)(dim(a->ws, y, 0) * dim(a->ws, y, 2) * dim(a->ws, y, 3));
    } else if (strcmp(t, "FC") == 0) {
      const char *w = op->input[1];
      *K += (double)(dim(a->ws, w, 1) + dim(a->ws, w, 0) + dim(a->ws, op->output[0], 0));
    } else if (strcmp(t, "SpatialBN") == 0) {
      const char *y = op->output[0];
      *K += 2.0 * (double)(dim(a->ws, y, 0) * dim(a->ws, y, 2) * dim(a->ws, y, 3));
    }
  }
}

static double max_abs(const dm_tensor *t) {
  const float *p = dm_tensor_data(t);
  double m = 0;
  for (int64_t i = 0; i < dm_tensor_numel(t); i++)
    m = fmax(m, fabs(p[i]));
  return m;
}

/* B's index of A's element k of parameter `name`: the same, or through a filter's (C: B's
 * channels, padded or not) or an FC weight's (C: the channels) re-layout. */
static int64_t b_index(const dm_tensor *ta, int fc, int64_t C, int64_t k) {
  const int64_t *d = dm_tensor_dims(ta);
  if (fc < 0)
    return k;
  if (fc) { /* (N, C*S): column c*S + s -> s*C + c */
    int64_t K = d[1], S = K / C, n = k / K, col = k % K;
    return n * K + (col % S) * C + col / S;
  }
  int64_t Cf = d[1], kh = d[2], kw = d[3]; /* C: B's dim 3, Cf or Cf padded */
  int64_t w = k % kw, h = k / kw % kh, c = k / (kw * kh) % Cf, o = k / (kw * kh * Cf);
  return ((o * kh + h) * kw + w) * C + c;
}

/* The channels an FC weight's reorder used: the first dims of its filter inputs. */
static int64_t fc_channels(const stepped *b, const char *w_new) {
  int64_t C = 0;
  for (size_t i = 0; i < b->add->n_op; i++) {
    const Caffe2__OperatorDef *op = b->add->op[i];
    if (strcmp(op->type, "FCWeightToNHWC") == 0 && strcmp(op->output[0], w_new) == 0)
      for (size_t k = 1; k < op->n_input; k++)
        C += dim(b->ws, op->input[k], 0);
  }
  return C;
}

/* A float tensor's values as doubles (FP16 widened), malloc'd. */
static double *values(const dm_tensor *t) {
  int64_t n = dm_tensor_numel(t);
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  assert_non_null(v);
  for (int64_t k = 0; k < n; k++)
    v[k] = dm_tensor_dtype(t) == DM_FLOAT16
               ? dm_half_to_float(((const uint16_t *)dm_tensor_data(t))[k])
               : ((const float *)dm_tensor_data(t))[k];
  return v;
}

/* How far B is from A: the worst |A - B| / tolerance over the loss, the logits, the
 * parameters without a gradient (running statistics) and, with `elementwise`, every
 * trained parameter; and the trained parameters' difference and update as sums of
 * squares (their relative distance in norm). */
typedef struct gap {
  double worst;
  double sq_err, sq_update;
} gap;

static gap compare(const stepped *a, const stepped *b, double rel, int elementwise,
                   int verbose) {
  gap g = {0, 0, 0};
  const char *outs[] = {"loss", a->pred};
  for (int o = 0; o < 2; o++) {
    const dm_tensor *ta = fetch(a->ws, outs[o]), *tb = fetch(b->ws, outs[o]);
    assert_int_equal(dm_tensor_numel(ta), dm_tensor_numel(tb));
    double *pa = values(ta), *pb = values(tb), tol = 0;
    for (int64_t k = 0; k < dm_tensor_numel(ta); k++)
      tol = fmax(tol, rel * fabs(pa[k]));
    double here = 0;
    for (int64_t k = 0; k < dm_tensor_numel(ta); k++)
      here = fmax(here, fabs(pa[k] - pb[k]) / tol);
    if (verbose && here > 0.5)
      print_message("  %s: worst error / tolerance %.3g\n", outs[o], here);
    g.worst = fmax(g.worst, here);
    free(pa);
    free(pb);
  }
  for (size_t i = 0; i < a->n_params; i++) {
    const char *name = a->params[i], *bname = name;
    int fc = -1, pad = 0;
    for (size_t k = 0; k < b->layout.n_renamed; k++)
      if (strcmp(b->layout.renamed[2 * k], name) == 0) {
        bname = b->layout.renamed[2 * k + 1];
        fc = b->layout.fc[k];
        pad = b->layout.pad[k];
      }
    const dm_tensor *ta = fetch(a->ws, name), *tb = fetch(b->ws, bname);
    if (dm_tensor_dtype(ta) != DM_FLOAT)
      continue; /* the iteration counter */
    if (pad <= 1) /* else checked by compare_padded */
      assert_int_equal(dm_tensor_numel(ta), dm_tensor_numel(tb));
    char gname[256]; /* the update: the FP32 gradient MomentumSGDUpdate adjusted */
    snprintf(gname, sizeof gname, "%s_grad_fp32", name);
    if (!dm_workspace_has_blob(a->ws, gname))
      snprintf(gname, sizeof gname, "%s_grad", name);
    const dm_tensor *grad = dm_workspace_has_blob(a->ws, gname) ? fetch(a->ws, gname) : NULL;
    double scale = max_abs(grad ? grad : ta);
    int64_t C = fc == 1 ? fc_channels(b, bname) : fc == 0 ? dm_tensor_dims(tb)[3] : 0;
    assert_true(fc != 1 || C > 0);
    const float *pa = dm_tensor_data(ta), *pb = dm_tensor_data(tb);
    const float *pg = grad ? dm_tensor_data(grad) : NULL;
    double here = 0;
    for (int64_t k = 0; k < dm_tensor_numel(ta); k++) {
      double tol = rel * scale + 2 * U32 * fabs(pa[k]);
      double err = fabs((double)pa[k] - pb[b_index(ta, fc, C, k)]);
      if (pg) {
        g.sq_err += err * err;
        g.sq_update += (double)pg[k] * pg[k];
      }
      if ((!pg || elementwise) && !(tol == 0 && err == 0))
        here = fmax(here, err / tol);
    }
    if (verbose && here > 0.5)
      print_message("  %s: worst error / tolerance %.3g\n", name, here);
    g.worst = fmax(g.worst, here);
  }
  return g;
}

/* The NHWC net with conv1's channels padded (c) against it unpadded (b): the padded
 * filter channels exactly 0 after the step and, with `exact`, everything else bit for bit
 * the same: the padding adds only +0 terms to each of conv1's sums, and a float sum is
 * unchanged by adding +0 as long as the kernel keeps the real terms' order. The
 * reference Conv's GEMM may block a longer reduction differently (ResNet-50's conv1, 147
 * -> 392 terms, then a batch-2 BN): there c is held to the NCHW tolerance instead, as b
 * is. Returns the number of padded filters. */
static size_t compare_padded(const stepped *b, const stepped *c, int exact) {
  const char *outs[] = {"loss", b->pred};
  for (int o = 0; o < 2; o++) {
    const dm_tensor *tb = fetch(b->ws, outs[o]), *tc = fetch(c->ws, outs[o]);
    assert_int_equal(dm_tensor_numel(tb), dm_tensor_numel(tc));
    double *pb = values(tb), *pc = values(tc);
    for (int64_t k = 0; k < dm_tensor_numel(tb); k++)
      if (exact && pb[k] != pc[k])
        fail_msg("%s[%lld]: unpadded %.9g, padded %.9g", outs[o], (long long)k, pb[k], pc[k]);
    free(pb);
    free(pc);
  }
  assert_int_equal(b->layout.n_renamed, c->layout.n_renamed);
  size_t padded = 0;
  for (size_t i = 0; i < b->n_params; i++) {
    const char *name = b->params[i], *bname = name, *cname = name;
    int pad = 0;
    for (size_t k = 0; k < b->layout.n_renamed; k++)
      if (strcmp(b->layout.renamed[2 * k], name) == 0)
        bname = b->layout.renamed[2 * k + 1];
    for (size_t k = 0; k < c->layout.n_renamed; k++)
      if (strcmp(c->layout.renamed[2 * k], name) == 0) {
        cname = c->layout.renamed[2 * k + 1];
        pad = c->layout.pad[k];
      }
    const dm_tensor *tb = fetch(b->ws, bname), *tc = fetch(c->ws, cname);
    if (dm_tensor_dtype(tb) != DM_FLOAT)
      continue;
    const float *pb = dm_tensor_data(tb), *pc = dm_tensor_data(tc);
    int64_t C = dm_tensor_ndim(tb) == 4 ? dm_tensor_dims(tb)[3] : 1, Cp = C;
    if (pad > 1) {
      Cp = dm_tensor_dims(tc)[3];
      assert_true(Cp % pad == 0 && Cp > C && Cp - C < pad);
      padded++;
    } else {
      assert_int_equal(dm_tensor_numel(tb), dm_tensor_numel(tc));
    }
    for (int64_t k = 0; k < dm_tensor_numel(tc); k++) {
      int64_t ch = k % Cp, rest = k / Cp;
      if (ch >= C && pc[k] != 0.0f)
        fail_msg("%s: padded channel %lld of element %lld is %g after the step, not 0", cname,
                 (long long)ch, (long long)rest, pc[k]);
      if (exact && ch < C && pc[k] != pb[rest * C + ch])
        fail_msg("%s[%lld]: padded %.9g, unpadded %.9g", cname, (long long)k, pc[k],
                 pb[rest * C + ch]);
    }
  }
  return padded;
}

/* With noise_floor, the trained parameters are compared in norm against how far the
 * NCHW net itself moves when every input pixel moves one ulp (see the file comment). */
/* B (the NHWC net, or C with conv1's channels padded) against A within the tolerance; with
 * noise_floor, its updates in norm against how far the NCHW net moves with its input one
 * ulp off (n). */
static void check_against(const model *m, int fp16, const stepped *a, const stepped *b,
                          const stepped *n, double rel, const char *what) {
  gap g = compare(a, b, rel, !n, 1);
  assert_true(isfinite(g.sq_update) && g.sq_update > 0); /* the parameters moved */
  print_message("%s %s%s: relative tolerance %.3g; worst error / tolerance %.3g\n", m->train,
                fp16 ? "FP16" : "FP32", what, rel, g.worst);
  if (g.worst > 1)
    fail_msg("NHWC%s differs from NCHW beyond the tolerance (%.3g of it)", what, g.worst);
  if (n) {
    gap gn = compare(a, n, rel, 0, 0);
    double e_layout = sqrt(g.sq_err / g.sq_update), e_noise = sqrt(gn.sq_err / gn.sq_update);
    print_message("  updates: NHWC%s vs NCHW %.3g relative (norm); NCHW vs NCHW with the "
                  "input one ulp off %.3g\n", what, e_layout, e_noise);
    if (!fp16 && !(e_noise < 0.1)) /* a floor this high would hide a wrong net */
      fail_msg("the noise floor %.3g is too high for a meaningful comparison", e_noise);
    if (!(e_layout <= LAM * e_noise + rel))
      fail_msg("NHWC%s's updates are %.3g off in norm, beyond %g x the noise floor %.3g + %.3g",
               what, e_layout, LAM, e_noise, rel);
  }
}

/* With noise_floor, the trained parameters are compared in norm against how far the
 * NCHW net itself moves when every input pixel moves one ulp (see the file comment).
 * A model whose input channels are not a multiple of 8 is also stepped with them padded
 * to 8 (the layout pass's pad_channels), held to the same tolerance against NCHW, its
 * padded filter channels exactly 0 (with oneDNN's GEMM the rest also comes out
 * bit-identical to the unpadded NHWC net; not required: a BLAS may sum the longer
 * reduction in another order). And the whole model is stepped fused on top of NHWC,
 * which must be bit-identical to the unfused NHWC net. */
static void check_model(const model *m, int fp16, int noise_floor) {
  stepped a, b, n;
  step(m, 0, fp16, 0, 0, 0, 0, &a);
  step(m, 1, fp16, 0, 0, 0, 0, &b);
  assert_true(b.layout.n_renamed > 0);
  double K, D;
  reductions(&a, &K, &D);
  double rel = LAM * sqrt(K) * U32 + (fp16 ? LAM * sqrt(D) * 2 * U16 : 0);
  print_message("%s %s: K %.0f, D %.0f\n", m->train, fp16 ? "FP16" : "FP32", K, D);
  if (noise_floor)
    step(m, 0, fp16, 0, 1, 0, 0, &n);
  check_against(m, fp16, &a, &b, noise_floor ? &n : NULL, rel, "");
  if (m->channels % 8) {
    stepped c;
    step(m, 1, fp16, 0, 0, 8, 0, &c);
    assert_int_equal(c.layout.padded, 1);
    check_against(m, fp16, &a, &c, noise_floor ? &n : NULL, rel, " (channels padded)");
    /* Not bit for bit: conv1's reduction is longer (zeros added), and a BLAS GEMM (the
     * build without oneDNN) may split it differently; the tolerance above holds it. */
    size_t padded = compare_padded(&b, &c, 0);
    print_message("  channels padded to 8: %zu filter(s) padded, their padded channels 0\n",
                  padded);
    assert_true(padded >= 1);
    stepped_free(&c);
  }
  /* The training fusion on top (Conv/FC + Relu, BN + Relu, BN + Add + Relu; as a GPU runs
   * them): bit-identical to the unfused NHWC net, so within the tolerance of NCHW too. */
  stepped f;
  step(m, 1, fp16, 0, 0, 0, 1, &f);
  size_t fused = 0;
  for (size_t i = 0; i < f.net->n_op; i++)
    fused += strstr(f.net->op[i]->type, "Fusion") || strstr(f.net->op[i]->type, "BNRelu") ||
             strstr(f.net->op[i]->type, "BNAddRelu");
  assert_true(fused > 0);
  compare_padded(&b, &f, 1);
  print_message("  fused (%zu ops) NHWC: loss, outputs and every parameter bit-identical to "
                "the unfused NHWC net\n", fused);
  stepped_free(&f);
  if (noise_floor)
    stepped_free(&n);
  stepped_free(&a);
  stepped_free(&b);
}

static const model lenet = {NULL, NULL, 2, 1, 28, "pred"};

static void test_lenet(void **state) {
  (void)state;
  model m = lenet;
  m.init = lenet_init;
  m.train = lenet_train;
  check_model(&m, 0, 0);
  check_model(&m, 1, 0);
}

/* The FC reorder replaced by a copy: the comparison must fail. */
static void test_lenet_can_fail(void **state) {
  (void)state;
  model m = lenet;
  m.init = lenet_init;
  m.train = lenet_train;
  stepped a, b;
  step(&m, 0, 0, 0, 0, 0, 0, &a);
  step(&m, 1, 0, 1, 0, 0, 0, &b);
  double K, D;
  reductions(&a, &K, &D);
  double worst = compare(&a, &b, LAM * sqrt(K) * U32, 1, 0).worst;
  print_message("sabotaged FC weight: worst error / tolerance %.3g\n", worst);
  assert_true(worst > 10);
  stepped_free(&a);
  stepped_free(&b);
}

static void test_resnet50(void **state) {
  (void)state;
  model m = {resnet_init, resnet_train, 2, 3, 64, "pred"};
  check_model(&m, 0, 1);
  check_model(&m, 1, 1);
}

/* The zoo SqueezeNet (models/squeezenet): global pooling into SoftmaxWithLoss, which has
 * no layout rule: its 1 x 1 pooled input is transposed back before it (an exit). */
static void test_squeezenet(void **state) {
  (void)state;
  model m = {squeeze_init, squeeze_train, 2, 3, 64, "softmax"};
  /* The trained weights in norm against the noise floor, as ResNet-50's: elementwise, a
   * weight whose gradient sums 26 layers of roundings in another order lands near the
   * derived bound (FP32 0.78 of it; FP16 1.06 with the reference kernels' BLAS GEMM) */
  check_model(&m, 0, 1);
  check_model(&m, 1, 1);
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s lenet_init lenet_train resnet50_init resnet50_train "
                    "squeezenet_init squeezenet_train\n", argv[0]);
    return 2;
  }
  lenet_init = argv[1];
  lenet_train = argv[2];
  resnet_init = argv[3];
  resnet_train = argv[4];
  squeeze_init = argv[5];
  squeeze_train = argv[6];
  assert_ok(dm_init());
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fc_weight_op),
      cmocka_unit_test(test_pad_op),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_exit),
      cmocka_unit_test(test_concat_fc),
      cmocka_unit_test(test_lenet),
      cmocka_unit_test(test_lenet_can_fail),
      cmocka_unit_test(test_resnet50),
      cmocka_unit_test(test_squeezenet),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
