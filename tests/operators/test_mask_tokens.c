/* test_mask_tokens.c: MaskTokens against the selection rule its header documents,
 * reimplemented here in plain C (splitmix64 written out again, not the op's helper):
 *   - the exact pattern, element by element, for several shapes, seeds, iterations and
 *     argument sets (mask_prob 0 and 1, replace_prob 1, random_prob 1, in place);
 *   - the rates over 2^18 tokens: the selected count within 5 binomial standard
 *     deviations of n * mask_prob, and among the selected the mask / random / unchanged
 *     counts within 5 of theirs (a random draw equal to the original counts as
 *     unchanged, probability 1 / V); random tokens in [0, V) with their mean within 5
 *     standard deviations of (V - 1) / 2;
 *   - determinism: the same (seed, iter) twice and in two workspaces is identical, the
 *     next iteration and another seed differ, the run counter equals `iter`;
 *   - the schema (no gradient, precision none, nonfloat slots) and a training rewrite
 *     in FP16 and BF16 on CUDA (no GPU needed to rewrite) that leaves it uncast, on the
 *     CPU while the FC goes to the GPU (where the build has CUDA kernels), and
 *     differentiates the net around it;
 *   - a training step on the CPU masking by the optimizer's iteration, step by step;
 *   - refusals with their messages.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/registry.h"
#include "demitasse_plugin.h"
#include "net/api.h"
#include "op_test_util.h"
#include "proto/caffe2.pb-c.h"

#define GOLD 0x9E3779B97F4A7C15ull

static uint64_t ref_mix(uint64_t z) { /* splitmix64's finaliser */
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double ref_unit(uint64_t h) { return (double)(h >> 11) / 9007199254740992.0; }

typedef struct mt_params {
  float mask_prob, replace_prob, random_prob;
  int64_t mask_id, vocab, ignore;
  uint64_t seed;
} mt_params;

static mt_params defaults(int64_t vocab) {
  return (mt_params){0.15f, 0.8f, 0.1f, vocab, vocab, -1, 0};
}

/* What the header says element i of iteration b becomes. */
static void ref_mask(const mt_params *p, int64_t b, const int32_t *tok, int64_t n,
                     int32_t *masked, int32_t *labels) {
  uint64_t key = ref_mix(ref_mix(p->seed) + (uint64_t)b * GOLD);
  for (int64_t i = 0; i < n; i++) {
    uint64_t h1 = ref_mix(key + (uint64_t)i * GOLD), h2 = ref_mix(h1), h3 = ref_mix(h2);
    int sel = ref_unit(h1) < (double)p->mask_prob;
    double u2 = ref_unit(h2);
    labels[i] = sel ? tok[i] : (int32_t)p->ignore;
    if (!sel || u2 >= (double)p->replace_prob + (double)p->random_prob)
      masked[i] = tok[i];
    else if (u2 < (double)p->replace_prob)
      masked[i] = (int32_t)p->mask_id;
    else
      masked[i] = (int32_t)(h3 % (uint64_t)p->vocab);
  }
}

static int32_t *draw_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  int32_t *t = malloc(sizeof *t * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    t[i] = (int32_t)floor(opt_uniform(&seed, 0, (double)vocab));
  return t;
}

static void add_args(opt_op *op, const mt_params *p) {
  opt_arg_float(op, "mask_prob", p->mask_prob);
  opt_arg_float(op, "replace_prob", p->replace_prob);
  opt_arg_float(op, "random_prob", p->random_prob);
  opt_arg_int(op, "mask_id", p->mask_id);
  opt_arg_int(op, "vocab_size", p->vocab);
  opt_arg_int(op, "ignore_label", p->ignore);
  opt_arg_int(op, "seed", (int64_t)p->seed);
}

/* One run with the INT64 (or INT32) iter input fed b; compares with the reference. */
static void check_exact(const mt_params *p, int ndim, const int64_t *dims, int64_t b,
                        int iter32, int inplace) {
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    n *= dims[d];
  int32_t *tok = draw_tokens(n, p->vocab, 77 + (uint64_t)b);
  int32_t *rm = malloc(sizeof *rm * (size_t)(n ? n : 1)), *rl = malloc(sizeof *rl * (size_t)(n ? n : 1));
  ref_mask(p, b, tok, n, rm, rl);
  opt_feed(ws, "tokens", DM_INT32, ndim, dims, tok);
  int64_t one = 1, b64 = b;
  int32_t b32 = (int32_t)b;
  opt_feed(ws, "iter", iter32 ? DM_INT32 : DM_INT64, 1, &one, iter32 ? (void *)&b32 : (void *)&b64);
  opt_op *op = opt_new("MaskTokens");
  opt_in(op, "tokens"), opt_in(op, "iter");
  opt_out(op, inplace ? "tokens" : "masked"), opt_out(op, "labels");
  add_args(op, p);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *m = opt_fetch(ws, inplace ? "tokens" : "masked", DM_INT32, ndim, dims);
  const dm_tensor *l = opt_fetch(ws, "labels", DM_INT32, ndim, dims);
  const int32_t *pm = dm_tensor_data(m), *pl = dm_tensor_data(l);
  for (int64_t i = 0; i < n; i++)
    if (pm[i] != rm[i] || pl[i] != rl[i])
      fail_msg("element %lld of %lld (b %lld): masked %d labels %d, reference %d %d",
               (long long)i, (long long)n, (long long)b, pm[i], pl[i], rm[i], rl[i]);
  free(tok), free(rm), free(rl);
  dm_workspace_destroy(ws);
}

static void test_exact(void **state) {
  (void)state;
  mt_params p = defaults(1000);
  int64_t d3[] = {4, 16, 33}, d1[] = {7}, d0[] = {0};
  check_exact(&p, 3, d3, 0, 0, 0);
  check_exact(&p, 3, d3, 123456789012ll, 0, 0);
  check_exact(&p, 1, d1, 5, 1, 0);
  check_exact(&p, 0, NULL, 9, 0, 0); /* a scalar token */
  check_exact(&p, 1, d0, 3, 0, 0);   /* no tokens */
  check_exact(&p, 3, d3, 2, 0, 1);   /* masked in place of tokens */
  mt_params q = p;
  q.seed = 0xFFFFFFFFull, q.ignore = -100, q.mask_id = 3, q.mask_prob = 0.5f;
  check_exact(&q, 3, d3, 1, 0, 0);
  q.mask_prob = 1.0f, q.replace_prob = 0.0f, q.random_prob = 1.0f; /* all random */
  check_exact(&q, 3, d3, 4, 0, 0);
  q.replace_prob = 1.0f, q.random_prob = 0.0f; /* all [MASK] */
  check_exact(&q, 3, d3, 4, 0, 0);
  q.mask_prob = 0.0f; /* none */
  check_exact(&q, 3, d3, 4, 0, 0);
  q = defaults(1), q.mask_id = 0; /* one token, [MASK] inside the vocabulary */
  check_exact(&q, 1, d1, 8, 0, 0);
}

static void test_rates(void **state) {
  dm_workspace *ws = *state;
  enum { N = 1 << 18 };
  const int64_t V = 1000;
  mt_params p = defaults(V);
  p.seed = 2024, p.ignore = -7;
  int64_t dims[] = {64, 4096};
  int32_t *tok = draw_tokens(N, V, 5);
  opt_feed(ws, "tokens", DM_INT32, 2, dims, tok);
  opt_op *op = opt_new("MaskTokens");
  opt_in(op, "tokens"), opt_out(op, "masked"), opt_out(op, "labels");
  add_args(op, &p);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const int32_t *m = dm_tensor_data(opt_fetch(ws, "masked", DM_INT32, 2, dims));
  const int32_t *l = dm_tensor_data(opt_fetch(ws, "labels", DM_INT32, 2, dims));
  int64_t sel = 0, nmask = 0, nrand = 0, nsame = 0;
  double rsum = 0;
  for (int64_t i = 0; i < N; i++) {
    if (l[i] == p.ignore) {
      if (m[i] != tok[i])
        fail_msg("element %lld not selected but changed: %d -> %d", (long long)i, tok[i], m[i]);
      continue;
    }
    sel++;
    if (l[i] != tok[i])
      fail_msg("element %lld: label %d, original %d", (long long)i, l[i], tok[i]);
    if (m[i] == p.mask_id)
      nmask++;
    else if (m[i] == tok[i])
      nsame++;
    else {
      if (m[i] < 0 || m[i] >= V)
        fail_msg("element %lld: random token %d outside [0, %lld)", (long long)i, m[i],
                 (long long)V);
      nrand++, rsum += m[i];
    }
  }
  /* Binomial counts: |k - n q| <= 5 sqrt(n q (1 - q)). */
#define WITHIN(k, n, q, what)                                                             \
  do {                                                                                    \
    double mu_ = (double)(n) * (q), sd_ = sqrt((double)(n) * (q) * (1 - (q)));            \
    if (!(fabs((double)(k) - mu_) <= 5 * sd_))                                            \
      fail_msg("%s: %lld of %lld, expected %.1f +- 5 * %.1f", what, (long long)(k),       \
               (long long)(n), mu_, sd_);                                                 \
  } while (0)
  double ps = (double)p.mask_prob, pm = (double)p.replace_prob, pr = (double)p.random_prob;
  WITHIN(sel, N, ps, "selected");
  WITHIN(nmask, sel, pm, "made [MASK]");
  double prand = pr * (1 - 1.0 / (double)V);
  WITHIN(nrand, sel, prand, "made another token");
  WITHIN(nsame, sel, 1 - pm - prand, "left unchanged");
  /* Uniform on [0, V) less the original: mean within 5 sd of (V - 1) / 2. */
  double mean = rsum / (double)nrand, sd = sqrt(((double)V * V - 1) / 12 / (double)nrand);
  if (!(fabs(mean - (double)(V - 1) / 2) <= 5 * sd))
    fail_msg("random tokens' mean %.2f, expected %.2f +- 5 * %.2f", mean, (V - 1) / 2.0, sd);
  print_message("MaskTokens: %lld of %d selected; [MASK] %lld, random %lld, unchanged %lld\n",
                (long long)sel, N, (long long)nmask, (long long)nrand, (long long)nsame);
  free(tok);
}

/* A net of one MaskTokens (with `iter` when iter >= 0) run `runs` times in a fresh
 * workspace; run r's masked copied to out + r * n. */
static void run_net(uint64_t seed, int64_t iter, int runs, int64_t n, int32_t *out) {
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  int32_t *tok = draw_tokens(n, 500, 9);
  opt_feed(ws, "tokens", DM_INT32, 1, &n, tok);
  int64_t one = 1;
  if (iter >= 0)
    opt_feed(ws, "iter", DM_INT64, 1, &one, &iter);
  char text[512];
  snprintf(text, sizeof text,
           "name: 'mask' op { type: 'MaskTokens' input: 'tokens' %s output: 'masked' "
           "output: 'labels' arg { name: 'vocab_size' i: 500 } arg { name: 'mask_id' i: 500 } "
           "arg { name: 'seed' i: %llu } }",
           iter >= 0 ? "input: 'iter'" : "", (unsigned long long)seed);
  dm_net *net = NULL;
  if (dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net) != DM_OK)
    fail_msg("%s", dm_last_error());
  for (int r = 0; r < runs; r++) {
    if (dm_net_run(net) != DM_OK)
      fail_msg("%s", dm_last_error());
    memcpy(out + r * n, dm_tensor_data(opt_fetch(ws, "masked", DM_INT32, 1, &n)),
           sizeof *out * (size_t)n);
  }
  free(tok);
  dm_workspace_destroy(ws);
}

static void test_determinism(void **state) {
  (void)state;
  enum { n = 4096 };
  static int32_t a[3 * n], b[3 * n], c[n], it2[2 * n], it3[n], s2[3 * n];
  run_net(11, -1, 3, n, a); /* the run counter: b = 0, 1, 2 */
  run_net(11, -1, 3, n, b);
  run_net(11, 2, 1, n, c);  /* iter = 2 */
  run_net(11, 2, 2, n, it2);
  run_net(11, 3, 1, n, it3);
  run_net(12, -1, 3, n, s2);
  size_t sz = sizeof a[0] * n;
  assert_memory_equal(a, b, 3 * sz);           /* two workspaces, the same runs */
  assert_memory_not_equal(a, a + n, sz);       /* the next run draws afresh */
  assert_memory_not_equal(a + n, a + 2 * n, sz);
  assert_memory_equal(a + 2 * n, c, sz);       /* the third run is iteration 2 */
  assert_memory_equal(it2, it2 + n, sz);       /* iter fixed: the same every run */
  assert_memory_not_equal(c, it3, sz);         /* another iteration */
  assert_memory_not_equal(a, s2, sz);          /* another seed */
}

static void test_schema(void **state) {
  (void)state;
  const dm_op_schema *sc = dm_schema_lookup("MaskTokens");
  assert_non_null(sc);
  assert_null(sc->gradient);
  assert_true(sc->no_gradient);
  assert_int_equal(sc->precision, DM_PREC_NONE);
  assert_int_equal(sc->nonfloat_inputs & 0x3, 0x3);
  assert_int_equal(sc->nonfloat_outputs & 0x3, 0x3);
}

/* A tiny masked LM reading the optimizer's iteration: tokens masked, embedded (a table of V + 1 rows: [MASK] = V),
 * projected to V logits and scored at the selected positions. */
static const char *lm_net =
    "name: 'mlm' "
    "op { type: 'MaskTokens' input: 'tokens' input: 'optimizer_iteration' output: 'masked' "
    "     output: 'mlm_label' "
    "     arg { name: 'vocab_size' i: 9 } arg { name: 'mask_id' i: 9 } arg { name: 'seed' i: 3 }"
    "     arg { name: 'mask_prob' f: 0.5 } }"
    "op { type: 'Gather' input: 'emb_w' input: 'masked' output: 'x' }"
    "op { type: 'FC' input: 'x' input: 'out_w' input: 'out_b' output: 'logits' "
    "     arg { name: 'axis' i: 2 } }"
    "op { type: 'SoftmaxWithLoss' input: 'logits' input: 'mlm_label' output: 'prob' "
    "     output: 'loss' arg { name: 'axis' i: 2 } arg { name: 'ignore_label' i: -1 } }";

static const Caffe2__OperatorDef *find_op(const Caffe2__NetDef *net, const char *type) {
  for (size_t i = 0; i < net->n_op; i++)
    if (!strcmp(net->op[i]->type, type))
      return net->op[i];
  return NULL;
}

static int reads(const Caffe2__OperatorDef *op, const char *blob) {
  for (size_t k = 0; k < op->n_input; k++)
    if (!strcmp(op->input[k], blob))
      return 1;
  return 0;
}

static void rewrite_precision(const char *dir, dm_precision prec) {
  char in[512], out[512];
  snprintf(in, sizeof in, "%s/mlm.pbtxt", dir);
  snprintf(out, sizeof out, "%s/mlm_train.pbtxt", dir);
  FILE *f = fopen(in, "w");
  assert_non_null(f);
  fputs(lm_net, f);
  fclose(f);
  static const char *const data[] = {"tokens"};
  dm_train_options o;
  assert_int_equal(dm_train_options_init(&o), DM_OK);
  o.data_blobs = data, o.n_data_blobs = 1;
  o.precision = prec;
  o.device = "cuda";
  if (dm_rewrite_train_net(in, &o, out, NULL) != DM_OK)
    fail_msg("%s", dm_last_error());
  Caffe2__NetDef *net = NULL;
  assert_int_equal(dm_netdef_read(out, &net), DM_OK);
  const Caffe2__OperatorDef *mt = find_op(net, "MaskTokens");
  assert_non_null(mt);
  /* Unchanged: its own blobs in and out, on the CPU. */
  assert_string_equal(mt->input[0], "tokens");
  assert_string_equal(mt->output[0], "masked");
  assert_string_equal(mt->output[1], "mlm_label");
  assert_true(!mt->device_option || mt->device_option->device_type == DM_CPU);
  /* while the net went to the GPU, where the build has a CUDA backend (a CPU-only build
   * places everything on the CPU) */
  const Caffe2__OperatorDef *fc = find_op(net, "FC");
  int on_cuda = fc && fc->device_option && fc->device_option->device_type == DM_CUDA;
  assert_int_equal(on_cuda, dm_kernel_exists("FC", DM_CUDA, NULL));
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    int is_cast = !strcmp(op->type, "Cast") || !strcmp(op->type, "FloatToHalf") ||
                  !strcmp(op->type, "HalfToFloat");
    if (is_cast && (reads(op, "tokens") || reads(op, "masked") || reads(op, "mlm_label")))
      fail_msg("op %zu (%s) casts a token blob", i, op->type);
  }
  assert_non_null(find_op(net, "GatherGradient")); /* the net around it was differentiated */
  caffe2__net_def__free_unpacked(net, NULL);
  unlink(out), unlink(in);
}

static void test_rewrite(void **state) {
  (void)state;
  char dir[] = "/tmp/mask_tokens_XXXXXX";
  assert_non_null(mkdtemp(dir));
  rewrite_precision(dir, DM_PRECISION_FP16);
  rewrite_precision(dir, DM_PRECISION_BF16);
  rmdir(dir);
}

/* The masked LM trained on the CPU: each step masks by the optimizer's iteration, which
 * the step's Iter (after the backward ops) then advances, so step r reads b = r. */
static void test_train(void **state) {
  (void)state;
  char dir[] = "/tmp/mask_tokens_XXXXXX", path[512];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/mlm.pbtxt", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(lm_net, f);
  fclose(f);
  dm_workspace *ws = NULL;
  assert_int_equal(dm_workspace_create(&ws), DM_OK);
  const char *init =
      "op { output: 'emb_w' type: 'GaussianFill' arg { name: 'shape' ints: [10, 4] } }"
      "op { output: 'out_w' type: 'GaussianFill' arg { name: 'shape' ints: [9, 4] } }"
      "op { output: 'out_b' type: 'ConstantFill' arg { name: 'shape' ints: 9 } }";
  dm_net *init_net = NULL;
  if (dm_workspace_create_net_bytes(ws, init, strlen(init), 1, &init_net) != DM_OK ||
      dm_net_run(init_net) != DM_OK)
    fail_msg("%s", dm_last_error());
  enum { N = 2, T = 8 };
  int64_t dims[] = {N, T};
  int32_t *tok = draw_tokens(N * T, 9, 31), rm[N * T], rl[N * T];
  opt_feed(ws, "tokens", DM_INT32, 2, dims, tok);
  static const char *const data[] = {"tokens"};
  dm_train_options o;
  assert_int_equal(dm_train_options_init(&o), DM_OK);
  o.data_blobs = data, o.n_data_blobs = 1, o.memory = 0;
  dm_net *step = NULL;
  if (dm_workspace_create_train_net(ws, path, &o, &step) != DM_OK)
    fail_msg("%s", dm_last_error());
  mt_params p = defaults(9);
  p.seed = 3, p.mask_prob = 0.5f;
  for (int r = 0; r < 3; r++) {
    if (dm_net_run(step) != DM_OK)
      fail_msg("%s", dm_last_error());
    int64_t one = 1;
    const int64_t *it = dm_tensor_data(opt_fetch(ws, "optimizer_iteration", DM_INT64, 1, &one));
    assert_int_equal(*it, r + 1);
    ref_mask(&p, r, tok, N * T, rm, rl);
    assert_memory_equal(dm_tensor_data(opt_fetch(ws, "masked", DM_INT32, 2, dims)), rm, sizeof rm);
    assert_memory_equal(dm_tensor_data(opt_fetch(ws, "mlm_label", DM_INT32, 2, dims)), rl, sizeof rl);
    const dm_tensor *loss = NULL;
    assert_int_equal(dm_workspace_fetch(ws, "loss", &loss), DM_OK);
    assert_true(isfinite(((const float *)dm_tensor_data(loss))[0]));
  }
  free(tok);
  dm_workspace_destroy(ws);
  unlink(path), rmdir(dir);
}

/* An op over tokens T (INT32 unless fdtype) expected to fail with the fragments. */
static void expect_refusal(dm_workspace *ws, const mt_params *p, const int32_t *tok,
                           int64_t n, int as_float, dm_status want, const char *a,
                           const char *b) {
  if (as_float) {
    float f[4] = {0};
    opt_feed(ws, "T", DM_FLOAT, 1, &n, f);
  } else {
    opt_feed(ws, "T", DM_INT32, 1, &n, tok);
  }
  opt_op *op = opt_new("MaskTokens");
  opt_in(op, "T"), opt_out(op, "M"), opt_out(op, "L");
  add_args(op, p);
  opt_expect_error(opt_run(op, ws), want, a, b, NULL);
}

static void test_refusals(void **state) {
  dm_workspace *ws = *state;
  int32_t ok[4] = {0, 1, 2, 9}, hi[4] = {0, 10, 2, 3}, neg[4] = {0, 1, -1, 3};
  mt_params p = defaults(10), q;
  expect_refusal(ws, &p, ok, 4, 1, DM_ERR_TYPE, "tokens is FLOAT", "INT32");
  expect_refusal(ws, &p, hi, 4, 0, DM_ERR_INVALID, "tokens[1] is 10", "[0, vocab_size 10)");
  expect_refusal(ws, &p, neg, 4, 0, DM_ERR_INVALID, "tokens[2] is -1", NULL);
  q = p, q.mask_prob = 1.5f;
  expect_refusal(ws, &q, ok, 4, 0, DM_ERR_INVALID, "mask_prob is 1.5", "[0, 1]");
  q = p, q.random_prob = -0.1f;
  expect_refusal(ws, &q, ok, 4, 0, DM_ERR_INVALID, "random_prob is -0.1", "[0, 1]");
  q = p, q.replace_prob = 0.8f, q.random_prob = 0.3f;
  expect_refusal(ws, &q, ok, 4, 0, DM_ERR_INVALID, "replace_prob 0.8", "is over 1");
  q = p, q.mask_id = 11;
  expect_refusal(ws, &q, ok, 4, 0, DM_ERR_INVALID, "mask_id is 11", "[0, vocab_size 10]");
  q = p, q.mask_id = -1;
  expect_refusal(ws, &q, ok, 4, 0, DM_ERR_INVALID, "mask_id is -1", NULL);
  q = p, q.vocab = 0, q.mask_id = 0;
  expect_refusal(ws, &q, ok, 4, 0, DM_ERR_INVALID, "vocab_size is 0", NULL);
  /* The required arguments, and a bad iter. */
  int64_t four = 4, two = 2, one = 1, negb = -3;
  opt_feed(ws, "T", DM_INT32, 1, &four, ok);
  opt_op *op = opt_new("MaskTokens");
  opt_in(op, "T"), opt_out(op, "M"), opt_out(op, "L");
  opt_arg_int(op, "vocab_size", 10);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "mask_id", NULL);
  int64_t it2[2] = {1, 2};
  opt_feed(ws, "I2", DM_INT64, 1, &two, it2);
  op = opt_new("MaskTokens");
  opt_in(op, "T"), opt_in(op, "I2"), opt_out(op, "M"), opt_out(op, "L");
  add_args(op, &p);
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "input 'iter' must be one INT64", "of 2", NULL);
  opt_feed(ws, "IN", DM_INT64, 1, &one, &negb);
  op = opt_new("MaskTokens");
  opt_in(op, "T"), opt_in(op, "IN"), opt_out(op, "M"), opt_out(op, "L");
  add_args(op, &p);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "iteration -3 is out of range", ">= 0", NULL);
  /* A refused run in place leaves the tokens as they were. */
  opt_feed(ws, "T", DM_INT32, 1, &four, hi);
  op = opt_new("MaskTokens");
  opt_in(op, "T"), opt_out(op, "T"), opt_out(op, "L");
  q = p, q.mask_prob = 1.0f;
  add_args(op, &q);
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "tokens[1] is 10", NULL);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "T", DM_INT32, 1, &four)), hi, sizeof hi);
}

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact),    cmocka_unit_test(test_rates),
      cmocka_unit_test(test_determinism), cmocka_unit_test(test_schema),
      cmocka_unit_test(test_rewrite),  cmocka_unit_test(test_train),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
