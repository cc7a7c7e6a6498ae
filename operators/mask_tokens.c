/* mask_tokens.c: MaskTokens, BERT's masked-language-model corruption done at run time
 * by a seeded op (CPU only: integer work that feeds a Gather; a net placed on CUDA keeps
 * it on the CPU, as the device pass does for any op without a CUDA kernel).
 *
 * tokens (INT32, any shape), [iter] -> masked, labels (INT32, tokens' shape). Element i
 * is selected with probability mask_prob; a selected element becomes mask_id with
 * probability replace_prob, a uniform token of [0, vocab_size) with probability
 * random_prob, and stays as it was otherwise (BERT's 80/10/10); labels[i] is the
 * original token where selected and ignore_label elsewhere, so SoftmaxWithLoss with
 * that ignore_label scores only the selected positions.
 *
 * The draws of element i (row-major index) in the run for iteration b are a pure
 * function of (seed, b, i), written out so a test or another framework can redo them
 * (mix64 is splitmix64's finaliser, operators/dropout.h; G = 0x9E3779B97F4A7C15):
 *     key = mix64(mix64(seed) + b * G)
 *     h1 = mix64(key + i * G), h2 = mix64(h1), h3 = mix64(h2)
 *     u(h) = (h >> 11) * 2^-53                      (53 uniform bits in [0, 1))
 *     selected: u(h1) < mask_prob
 *     selected and u(h2) < replace_prob:               masked = mask_id
 *     selected and u(h2) < replace_prob + random_prob: masked = h3 mod vocab_size
 *     otherwise:                                        masked = tokens[i]
 * (the probabilities are the FLOAT arguments widened to double; h3 mod V is uniform to
 * within V / 2^64). b is the value of the optional input `iter` (the INT64 iteration
 * blob, which checkpoints carry), so a run resumed from a checkpoint masks exactly as
 * the uninterrupted run did; without it b counts this op's runs from 0, as
 * TensorProtosDBInput does. The result does not depend on the number of threads.
 *
 * mask_id may be vocab_size: a [MASK] row past the vocabulary (an embedding table of
 * vocab_size + 1 rows), which the random replacements, drawn from [0, vocab_size), never
 * produce. The tokens themselves must lie in [0, vocab_size).
 */
#include <stdint.h>
#include <stdlib.h>

#include "builtin.h"
#include "common.h"
#include "dropout.h" /* dm_mix64, DM_DROPOUT_GOLDEN: the counter-based hash */

/* The kernel state: the runs so far (b without `iter`). */
typedef struct mt_state {
  int64_t runs;
} mt_state;

typedef struct mt_args {
  double mask_prob, replace_prob, random_prob;
  int64_t mask_id, vocab_size, ignore_label;
  uint64_t seed;
} mt_args;

static const dm_arg_spec mt_arg_specs[] = {
    {"mask_prob", DM_ARG_FLOAT, 0, "probability an element is selected, in [0, 1] (default 0.15)"},
    {"mask_id", DM_ARG_INT, 1, "the [MASK] token, in [0, vocab_size] (vocab_size: a row past "
                               "the vocabulary)"},
    {"vocab_size", DM_ARG_INT, 1, "tokens lie in [0, vocab_size); random replacements too"},
    {"seed", DM_ARG_INT, 0, "the draws' seed (default 0)"},
    {"ignore_label", DM_ARG_INT, 0, "labels of unselected elements (default -1)"},
    {"replace_prob", DM_ARG_FLOAT, 0, "selected elements made mask_id (default 0.8)"},
    {"random_prob", DM_ARG_FLOAT, 0, "selected elements made a random token (default 0.1); "
                                     "replace_prob + random_prob <= 1, the rest unchanged"},
    {NULL, 0, 0, NULL},
};

static dm_status check_prob(dm_op_ctx *ctx, const char *name, double p) {
  if (!(p >= 0.0 && p <= 1.0))
    return dm_op_error(ctx, DM_ERR_INVALID, "%s is %g; it must be in [0, 1]", name, p);
  return DM_OK;
}

static dm_status mt_read_args(dm_op_ctx *ctx, mt_args *a) {
  a->mask_prob = dm_op_arg_float(ctx, "mask_prob", 0.15f);
  a->replace_prob = dm_op_arg_float(ctx, "replace_prob", 0.8f);
  a->random_prob = dm_op_arg_float(ctx, "random_prob", 0.1f);
  a->mask_id = dm_op_arg_int(ctx, "mask_id", -1);
  a->vocab_size = dm_op_arg_int(ctx, "vocab_size", 0);
  a->ignore_label = dm_op_arg_int(ctx, "ignore_label", -1);
  a->seed = (uint64_t)dm_op_arg_int(ctx, "seed", 0);
  DM_TRY(check_prob(ctx, "mask_prob", a->mask_prob));
  DM_TRY(check_prob(ctx, "replace_prob", a->replace_prob));
  DM_TRY(check_prob(ctx, "random_prob", a->random_prob));
  if (!(a->replace_prob + a->random_prob <= 1.0))
    return dm_op_error(ctx, DM_ERR_INVALID, "replace_prob %g + random_prob %g is over 1",
                       a->replace_prob, a->random_prob);
  if (a->vocab_size < 1 || a->vocab_size > INT32_MAX)
    return dm_op_error(ctx, DM_ERR_INVALID, "vocab_size is %lld; it must be in [1, %d]",
                       (long long)a->vocab_size, INT32_MAX);
  if (a->mask_id < 0 || a->mask_id > a->vocab_size)
    return dm_op_error(ctx, DM_ERR_INVALID, "mask_id is %lld; it must be in [0, vocab_size "
                       "%lld] (vocab_size itself: a [MASK] row past the vocabulary)",
                       (long long)a->mask_id, (long long)a->vocab_size);
  if (a->ignore_label < INT32_MIN || a->ignore_label > INT32_MAX)
    return dm_op_error(ctx, DM_ERR_INVALID, "ignore_label %lld does not fit INT32",
                       (long long)a->ignore_label);
  return DM_OK;
}

static dm_status mt_infer(dm_op_ctx *ctx) {
  mt_args a;
  DM_TRY(mt_read_args(ctx, &a));
  const dm_tensor *t = dm_op_input(ctx, 0);
  if (t->dtype != DM_INT32)
    return dm_op_error(ctx, DM_ERR_TYPE, "tokens is %s; MaskTokens takes INT32 token ids",
                       dm_dtype_name(t->dtype));
  if (dm_op_num_inputs(ctx) > 1)
    DM_TRY(dm_op_iteration_input(ctx, 1, NULL));
  DM_TRY(dm_op_set_output(ctx, 0, DM_INT32, t->ndim, t->dims));
  return dm_op_set_output(ctx, 1, DM_INT32, t->ndim, t->dims);
}

static dm_status mt_init(dm_op_ctx *ctx, void **state) {
  mt_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for MaskTokens' state");
  *state = s;
  return DM_OK;
}

static void mt_fini(void *state) { free(state); }

static double unit(uint64_t h) { return (double)(h >> 11) * 0x1p-53; }

static dm_status mt_run(dm_op_ctx *ctx) {
  DM_TRY(mt_infer(ctx));
  mt_args a;
  DM_TRY(mt_read_args(ctx, &a));
  mt_state *st = dm_op_state(ctx);
  int64_t b = st->runs;
  if (dm_op_num_inputs(ctx) > 1)
    DM_TRY(dm_op_iteration_input(ctx, 1, &b));
  const dm_tensor *tt = dm_op_input(ctx, 0);
  const int32_t *tok = dm_tensor_data(tt); /* (n) */
  int64_t n = tt->numel;
  /* Every token is checked before anything is written: masked may be tokens' blob. */
  for (int64_t i = 0; i < n; i++)
    if (tok[i] < 0 || tok[i] >= a.vocab_size)
      return dm_op_error(ctx, DM_ERR_INVALID, "tokens[%lld] is %d; tokens must lie in "
                         "[0, vocab_size %lld)", (long long)i, tok[i], (long long)a.vocab_size);
  int32_t *masked = dm_tensor_mutable_data(dm_op_output(ctx, 0)); /* (n) */
  int32_t *labels = dm_tensor_mutable_data(dm_op_output(ctx, 1)); /* (n) */
  uint64_t key = dm_mix64(dm_mix64(a.seed) + (uint64_t)b * DM_DROPOUT_GOLDEN);
  double keep_above = a.replace_prob + a.random_prob;
  for (int64_t i = 0; i < n; i++) {
    int32_t t = tok[i]; /* read before masked[i], which may be the same element */
    uint64_t h1 = dm_mix64(key + (uint64_t)i * DM_DROPOUT_GOLDEN);
    if (!(unit(h1) < a.mask_prob)) {
      labels[i] = (int32_t)a.ignore_label;
      masked[i] = t;
      continue;
    }
    uint64_t h2 = dm_mix64(h1);
    double u2 = unit(h2);
    labels[i] = t;
    if (u2 < a.replace_prob)
      masked[i] = (int32_t)a.mask_id;
    else if (u2 < keep_above)
      masked[i] = (int32_t)(dm_mix64(h2) % (uint64_t)a.vocab_size);
    else
      masked[i] = t;
  }
  if (dm_op_num_inputs(ctx) < 2)
    st->runs++;
  return DM_OK;
}

static const dm_inplace_pair mt_inplace[] = {{0, 0}, {-1, -1}};

/* No layout rule: the draws follow the row-major index, so a layout pass holding the
 * tokens NHWC gives the op its exit to NCHW and the pattern stays the NCHW net's. */
static const dm_op_schema mt_schema = {
    .type = "MaskTokens", .min_inputs = 1, .max_inputs = 2, .min_outputs = 2,
    .max_outputs = 2, .args = mt_arg_specs, .inplace = mt_inplace,
    .precision = DM_PREC_NONE, .no_gradient = 1,
    .nonfloat_inputs = 0x3, .nonfloat_outputs = 0x3, /* token ids, the iteration */
    .doc = "tokens (INT32), [iter] -> masked, labels (INT32): BERT's 80/10/10 masking, "
           "seeded by (seed, iter, index); labels are the originals where selected, "
           "ignore_label elsewhere",
    .infer = mt_infer, .cost = dm_cost_io};

static const dm_op_schema *const schemas[] = {&mt_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "MaskTokens", .device = DM_CPU, .init = mt_init, .run = mt_run, .fini = mt_fini},
    {0},
};
const dm_op_family dm_family_mask_tokens = {schemas, kernels};
