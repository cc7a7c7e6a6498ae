/* loss_scale.c: dynamic loss scaling for mixed-precision training, the two ops the
 * mixed-precision pass inserts between the backward pass and the updates
 * (/work/shared/reference/mixed-precision.md has the contract PyTorch, Apex, TF and MXNet
 * share):
 *
 *   UnscaleAndCheck  loss_scale, g_1, ..., g_n -> g_1, ..., g_n, found_inf
 *                    g_k *= 1/S (in place: output k-1 is input k), and found_inf = 1.0 when
 *                    any element of any g_k is inf or NaN, before or after unscaling
 *                    (dividing by S < 1 can overflow), else 0.0. found_inf feeds the
 *                    optional `skip` input of the update ops (optimizer.c), so an overflow
 *                    leaves parameters and optimizer state bit-for-bit unchanged.
 *   UpdateLossScale  loss_scale, found_inf, good_steps, skipped_steps
 *                      -> loss_scale, good_steps, skipped_steps (in place)
 *                    halves S (backoff_factor) on an overflow, doubles it (growth_factor)
 *                    after growth_interval clean steps in a row, within [min_scale,
 *                    max_scale]; counts skipped steps. dynamic = 0 keeps S fixed.
 *
 * Arithmetic of the unscale: the reciprocal 1/S is computed once in double and rounded to
 * float, then every element is multiplied by it in FP32 (one rounding per element, as
 * Apex's and PyTorch's fused kernels do). S is a power of two whenever UpdateLossScale's
 * factors are (the defaults 2 and 0.5 with an initial 2^k), so 1/S is exact and g * (1/S)
 * equals g / S exactly, subnormal results apart; for other S the result is within about
 * one FP32 ulp of g / S. FP16 gradients are widened exactly, multiplied in FP32 and rounded
 * to FP16 once; values below FP16's range after unscaling flush toward zero, which is why
 * PyTorch refuses FP16 gradients: the pass should unscale FP32 master gradients.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dm_config.h"

#include "builtin.h"
#include "common.h"
#include "loss_scale.h"
#include "core/half.h"

/* Elements per FP16 chunk: converted through a stack buffer so that the F16C array
 * conversions in half.h do the widening and narrowing. */
enum { HALF_CHUNK = 1024 };

/* Parallel only for large tensors: thread start-up costs more than a small loop. The
 * reductions are OR of flags, so results do not depend on the thread count. */
#if DM_HAVE_OPENMP
#define OMP_FOR_BAD_N _Pragma("omp parallel for reduction(|: bad) if (n > (1 << 16))")
#define OMP_FOR_BAD_CHUNKS _Pragma("omp parallel for reduction(|: bad) if (nchunks > 64)")
#else
#define OMP_FOR_BAD_N
#define OMP_FOR_BAD_CHUNKS
#endif

/* On the bits (exponent all ones), so that the test survives -ffinite-math-only and the
 * loop vectorises to integer compares. */
static inline int f32_nonfinite(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return (u & 0x7f800000u) == 0x7f800000u;
}
static inline int f16_nonfinite(uint16_t h) { return (h & 0x7c00u) == 0x7c00u; }

/* ---- UnscaleAndCheck ----------------------------------------------------------------- */

static dm_status unscale_check_names(dm_op_ctx *ctx) {
  const int n_in = dm_op_num_inputs(ctx), n_out = dm_op_num_outputs(ctx);
  if (n_out != n_in)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "UnscaleAndCheck has %d gradient input(s) but %d output(s); it needs "
                       "one output per gradient (the gradient, in place) and found_inf last",
                       n_in - 1, n_out);
  /* Names, not tensors: they are what the net says, in shape inference and at run time
   * alike. A gradient listed twice would be unscaled twice in place. */
  for (int i = 1; i < n_in; i++)
    for (int j = 1; j < i; j++)
      if (strcmp(dm_op_input_name(ctx, i), dm_op_input_name(ctx, j)) == 0)
        return dm_op_error(ctx, DM_ERR_INVALID, "gradient '%s' is listed twice (inputs %d and %d)",
                           dm_op_input_name(ctx, i), j, i);
  /* The schema allows any in-place pair (the list is unbounded), so the real rule is
   * checked here: output k is input k + 1 or a blob no input names; found_inf is neither
   * an input nor another output. */
  for (int o = 0; o < n_out; o++) {
    const char *name = dm_op_output_name(ctx, o);
    for (int i = 0; i < n_in; i++) {
      if (o < n_out - 1 && i == o + 1)
        continue;
      if (strcmp(name, dm_op_input_name(ctx, i)) == 0)
        return dm_op_error(ctx, DM_ERR_INVALID,
                           o == n_out - 1
                               ? "found_inf (output %d '%s') must not be an input (it is input %d)"
                               : "output %d '%s' is input %d; gradient output k may only be "
                                 "input k + 1 (in place) or a new blob",
                           o, name, i);
    }
    for (int p = 0; p < o; p++)
      if (strcmp(name, dm_op_output_name(ctx, p)) == 0)
        return dm_op_error(ctx, DM_ERR_INVALID, "outputs %d and %d are both '%s'", p, o, name);
  }
  return DM_OK;
}

/* Dtypes and shapes; declares every output. Shared by shape inference and the kernel. */
static dm_status unscale_check_tensors(dm_op_ctx *ctx) {
  static const int64_t one[1] = {1};
  const int n_in = dm_op_num_inputs(ctx);
  const dm_tensor *s = dm_op_input(ctx, 0);
  if (s->dtype != DM_FLOAT || s->numel != 1) {
    char buf[96];
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "loss_scale (input 0 '%s') is %s %s; expected FLOAT with one element",
                       dm_op_input_name(ctx, 0), dm_dtype_name(s->dtype),
                       dm_shape_str(s, buf, sizeof buf));
  }
  for (int i = 1; i < n_in; i++) {
    const dm_tensor *g = dm_op_input(ctx, i);
    if (!dm_is_float_or_half(g->dtype))
      return dm_op_error(ctx, DM_ERR_TYPE,
                         "gradient %d (input %d '%s') is %s; UnscaleAndCheck takes FLOAT or "
                         "FLOAT16",
                         i, i, dm_op_input_name(ctx, i), dm_dtype_name(g->dtype));
  }
  for (int i = 1; i < n_in; i++) {
    const dm_tensor *g = dm_op_input(ctx, i);
    DM_TRY(dm_op_set_output(ctx, i - 1, g->dtype, g->ndim, g->dims));
  }
  return dm_op_set_output(ctx, n_in - 1, DM_FLOAT, 1, one);
}

static dm_status unscale_infer(dm_op_ctx *ctx) {
  DM_TRY(unscale_check_names(ctx));
  return unscale_check_tensors(ctx);
}

/* Names do not change between runs: checked once at instantiation, not every step. */
static dm_status unscale_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  return unscale_check_names(ctx);
}

/* y = x * inv over n FP32 elements (y may be x); nonzero when any x or y is inf/NaN. */
static int unscale_f32(const float *x, float *y, int64_t n, float inv) {
  int bad = 0;
  OMP_FOR_BAD_N
  for (int64_t i = 0; i < n; i++) {
    const float xi = x[i], yi = xi * inv;
    y[i] = yi;
    bad |= f32_nonfinite(xi) | f32_nonfinite(yi);
  }
  return bad;
}

/* The same for FP16; the check after unscaling is on the rounded FP16 value, which
 * overflows to inf past 65504 where the FP32 product would not. */
static int unscale_f16(const uint16_t *x, uint16_t *y, int64_t n, float inv) {
  int bad = 0;
  const int64_t nchunks = (n + HALF_CHUNK - 1) / HALF_CHUNK;
  OMP_FOR_BAD_CHUNKS
  for (int64_t c = 0; c < nchunks; c++) {
    float buf[HALF_CHUNK];
    uint16_t hbuf[HALF_CHUNK];
    const int64_t i0 = c * HALF_CHUNK;
    const size_t m = (size_t)(n - i0 < HALF_CHUNK ? n - i0 : HALF_CHUNK);
    for (size_t j = 0; j < m; j++)
      bad |= f16_nonfinite(x[i0 + (int64_t)j]);
    dm_half_to_float_array(x + i0, buf, m);
    for (size_t j = 0; j < m; j++)
      buf[j] *= inv;
    /* Through hbuf: the array conversions require src and dst not to overlap, and x may
     * be y; each chunk is read completely before it is written. */
    dm_float_to_half_array(buf, hbuf, m);
    for (size_t j = 0; j < m; j++)
      bad |= f16_nonfinite(hbuf[j]);
    memcpy(y + i0, hbuf, m * sizeof *hbuf);
  }
  return bad;
}

static dm_status unscale_run(dm_op_ctx *ctx) {
  const int n_in = dm_op_num_inputs(ctx);
  DM_TRY(unscale_check_tensors(ctx));
  const float s = *(const float *)dm_tensor_data(dm_op_input(ctx, 0));
  /* A scale UpdateLossScale produced is in [min_scale, max_scale]; anything else is a
   * bad initial value, better reported than turned into a silently skipped step. */
  if (!(s > 0) || !isfinite(s))
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "loss_scale '%s' is %g; it must be positive and finite",
                       dm_op_input_name(ctx, 0), (double)s);
  /* Once, in double, rounded to float: exact for powers of two. A subnormal S gives
   * inv = inf, and then every gradient reads as overflowed, which is the truth. */
  const float inv = (float)(1.0 / (double)s);
  int bad = 0;
  for (int i = 1; i < n_in; i++) {
    const dm_tensor *g = dm_op_input(ctx, i);
    dm_tensor *y = dm_op_output(ctx, i - 1);
    if (g->numel == 0)
      continue;
    if (g->dtype == DM_FLOAT)
      bad |= unscale_f32(dm_tensor_data(g), dm_tensor_mutable_data(y), g->numel, inv);
    else
      bad |= unscale_f16(dm_tensor_data(g), dm_tensor_mutable_data(y), g->numel, inv);
  }
  *(float *)dm_tensor_mutable_data(dm_op_output(ctx, n_in - 1)) = bad ? 1.0f : 0.0f;
  return DM_OK;
}

static void unscale_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  for (int i = 1; i < dm_op_num_inputs(ctx); i++)
    c->flops += (double)dm_op_input(ctx, i)->numel; /* one multiply per element */
}

static const dm_op_schema unscale_schema = {
    .type = "UnscaleAndCheck", .min_inputs = 2, .max_inputs = -1, .min_outputs = 2,
    .max_outputs = -1, .args = NULL, .inplace = NULL,
    /* Any pair passes the net's check; unscale_check_names enforces "output k is input
     * k + 1 or a new blob", which a finite pair list cannot express for unbounded n. */
    .inplace_any = 1,
    /* FP32: the painting pass must leave it alone (it reads FP16 gradients itself). */
    .precision = DM_PREC_FP32,
    .fp32_inputs = 0x1, /* loss_scale; found_inf, the last output, has no fixed slot */
    .doc = "loss_scale, g_1, ..., g_n -> g_1, ..., g_n, found_inf: each g_k (FLOAT or FLOAT16, "
           "in place) is multiplied by 1/S (1/S computed once in double, rounded to float; "
           "FP32 arithmetic); found_inf (FLOAT, one element) is 1.0 when any element of any "
           "g_k is inf or NaN before or after unscaling, else 0.0. loss_scale is FLOAT, one "
           "element, positive and finite. Feed found_inf to the update ops' skip input.",
    .infer = unscale_infer, .cost = unscale_cost, .gradient = NULL, .no_gradient = 0,
    .layout = DM_LAYOUT_ELEMENTWISE}; /* g_k in place keep their layout */

/* ---- UpdateLossScale ------------------------------------------------------------------ */

enum { U_SCALE, U_FOUND, U_GOOD, U_SKIPPED };

static const dm_arg_spec update_args[] = {
    {"dynamic", DM_ARG_INT, 0, "1 (default): grow and back off; 0: S fixed, skips counted"},
    {"growth_factor", DM_ARG_FLOAT, 0, "S *= this after growth_interval clean steps (default 2)"},
    {"backoff_factor", DM_ARG_FLOAT, 0, "S *= this on an overflow (default 0.5)"},
    {"growth_interval", DM_ARG_INT, 0, "clean steps in a row before S grows (default 2000)"},
    {"min_scale", DM_ARG_FLOAT, 0, "lower bound of S (default 1)"},
    {"max_scale", DM_ARG_FLOAT, 0, "upper bound of S (default 2^24 = 16777216)"},
    {NULL, 0, 0, NULL},
};
static const dm_inplace_pair update_inplace[] = {{0, 0}, {2, 1}, {3, 2}, {-1, -1}};

/* The comparisons are written so that NaN fails. */
dm_status dm_loss_scale_params_get(dm_op_ctx *ctx, dm_loss_scale_params *p) {
  const int64_t dyn = dm_op_arg_int(ctx, "dynamic", 1);
  p->growth = dm_op_arg_float(ctx, "growth_factor", 2.0f);
  p->backoff = dm_op_arg_float(ctx, "backoff_factor", 0.5f);
  p->interval = dm_op_arg_int(ctx, "growth_interval", 2000);
  p->min_scale = dm_op_arg_float(ctx, "min_scale", 1.0f);
  p->max_scale = dm_op_arg_float(ctx, "max_scale", 16777216.0f);
  if (dyn != 0 && dyn != 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "dynamic must be 0 or 1, got %lld", (long long)dyn);
  p->dynamic = (int)dyn;
  if (!(p->backoff > 0 && p->backoff < 1))
    return dm_op_error(ctx, DM_ERR_INVALID, "backoff_factor must be in (0, 1), got %g",
                       p->backoff);
  if (!(p->growth > 1) || !isfinite(p->growth))
    return dm_op_error(ctx, DM_ERR_INVALID, "growth_factor must be finite and > 1, got %g",
                       p->growth);
  if (p->interval < 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "growth_interval must be >= 1, got %lld",
                       (long long)p->interval);
  if (!(p->min_scale > 0) || !isfinite(p->max_scale) || !(p->min_scale <= p->max_scale))
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "min_scale and max_scale must satisfy 0 < min_scale <= max_scale < inf, "
                       "got min_scale %g, max_scale %g",
                       p->min_scale, p->max_scale);
  return DM_OK;
}

static dm_status update_init(dm_op_ctx *ctx, void **state) {
  dm_loss_scale_params p;
  *state = NULL;
  return dm_loss_scale_params_get(ctx, &p);
}

static dm_status update_check_input(dm_op_ctx *ctx, int i, const char *what, dm_dtype want) {
  const dm_tensor *t = dm_op_input(ctx, i);
  if (t->dtype != want || t->numel != 1) {
    char buf[96];
    return dm_op_error(ctx, DM_ERR_TYPE, "%s (input %d '%s') is %s %s; expected %s with one element",
                       what, i, dm_op_input_name(ctx, i), dm_dtype_name(t->dtype),
                       dm_shape_str(t, buf, sizeof buf), dm_dtype_name(want));
  }
  return DM_OK;
}

static dm_status update_check_tensors(dm_op_ctx *ctx) {
  DM_TRY(update_check_input(ctx, U_SCALE, "loss_scale", DM_FLOAT));
  DM_TRY(update_check_input(ctx, U_FOUND, "found_inf", DM_FLOAT));
  DM_TRY(update_check_input(ctx, U_GOOD, "good_steps", DM_INT64));
  DM_TRY(update_check_input(ctx, U_SKIPPED, "skipped_steps", DM_INT64));
  static const int in_of_out[3] = {U_SCALE, U_GOOD, U_SKIPPED};
  for (int o = 0; o < 3; o++) {
    const dm_tensor *t = dm_op_input(ctx, in_of_out[o]);
    DM_TRY(dm_op_set_output(ctx, o, t->dtype, t->ndim, t->dims));
  }
  return DM_OK;
}

static dm_status update_infer(dm_op_ctx *ctx) {
  dm_loss_scale_params p;
  DM_TRY(dm_loss_scale_params_get(ctx, &p));
  return update_check_tensors(ctx);
}

static dm_status update_run(dm_op_ctx *ctx) {
  dm_loss_scale_params p;
  DM_TRY(dm_loss_scale_params_get(ctx, &p));
  DM_TRY(update_check_tensors(ctx));
  /* Every input is read before any output is written: the outputs are the inputs'
   * blobs in the usual in-place form. */
  const double s = *(const float *)dm_tensor_data(dm_op_input(ctx, U_SCALE));
  const float found_f = *(const float *)dm_tensor_data(dm_op_input(ctx, U_FOUND));
  int64_t good = *(const int64_t *)dm_tensor_data(dm_op_input(ctx, U_GOOD));
  int64_t skipped = *(const int64_t *)dm_tensor_data(dm_op_input(ctx, U_SKIPPED));
  const int found = !(found_f == 0); /* NaN counts as found, as the skip inputs read it */
  if (!(s > 0) || !isfinite(s))
    return dm_op_error(ctx, DM_ERR_INVALID, "loss_scale '%s' is %g; it must be positive and finite",
                       dm_op_input_name(ctx, U_SCALE), s);
  if (good < 0 || skipped < 0)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "good_steps '%s' (%lld) and skipped_steps '%s' (%lld) must not be negative",
                       dm_op_input_name(ctx, U_GOOD), (long long)good,
                       dm_op_input_name(ctx, U_SKIPPED), (long long)skipped);
  double ns = s;
  if (found) {
    if (skipped == INT64_MAX)
      return dm_op_error(ctx, DM_ERR_LIMIT, "skipped_steps overflows INT64");
    skipped++;
    good = 0;
    if (p.dynamic)
      ns = fmax(s * p.backoff, p.min_scale);
  } else if (good < INT64_MAX) { /* static mode never resets it: saturate, not wrap */
    good++;
    if (p.dynamic && good >= p.interval) {
      ns = fmin(s * p.growth, p.max_scale);
      good = 0;
    }
  }
  *(float *)dm_tensor_mutable_data(dm_op_output(ctx, 0)) = (float)ns;
  *(int64_t *)dm_tensor_mutable_data(dm_op_output(ctx, 1)) = good;
  *(int64_t *)dm_tensor_mutable_data(dm_op_output(ctx, 2)) = skipped;
  return DM_OK;
}

static const dm_op_schema update_schema = {
    .type = "UpdateLossScale", .min_inputs = 4, .max_inputs = 4, .min_outputs = 3,
    .max_outputs = 3, .args = update_args, .inplace = update_inplace, .inplace_any = 0,
    .precision = DM_PREC_NONE,
    .fp32_inputs = 0x3, .nonfloat_inputs = 0xc, .fp32_outputs = 0x1, .nonfloat_outputs = 0x6,
    .doc = "loss_scale (FLOAT), found_inf (FLOAT), good_steps (INT64), skipped_steps (INT64), "
           "each one element -> loss_scale, good_steps, skipped_steps (in place). dynamic: on "
           "found_inf != 0, S = max(S * backoff_factor, min_scale), good_steps = 0, "
           "skipped_steps += 1; otherwise good_steps += 1 and, when it reaches "
           "growth_interval, S = min(S * growth_factor, max_scale) and good_steps = 0. "
           "dynamic = 0: S is fixed; good_steps counts clean steps since the last overflow; "
           "skipped_steps counts overflows.",
    .infer = update_infer, .cost = NULL, .gradient = NULL, .no_gradient = 0};

static const dm_op_schema *const schemas[] = {&unscale_schema, &update_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "UnscaleAndCheck", .device = DM_CPU, .init = unscale_init, .run = unscale_run},
    {.type = "UpdateLossScale", .device = DM_CPU, .init = update_init, .run = update_run},
    {0},
};
const dm_op_family dm_family_loss_scale = {schemas, kernels};
