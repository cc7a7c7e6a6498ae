/* random_fill.c: GaussianFill, UniformFill, XavierFill, MSRAFill (FLOAT or FLOAT16).
 *
 * Shapes as ConstantFill (`shape`, or the input's shape / values with input_as_shape,
 * then `extra_shape`). Random numbers come from Philox4x32-10 (Salmon et al., "Parallel
 * random numbers: as easy as 1, 2, 3", SC 2011), a counter-based generator: element i
 * depends only on (key, i), so the result is the same for any thread count and any
 * platform. The key is (seed, hash of the output blob name): the seed is the op's
 * device_option.random_seed, else a fixed default (runs reproduce), and the name keeps two
 * unseeded fills of equal shape from drawing the same weights. The counter also holds
 * the run number, so a second run of the same op draws fresh values.
 * This does NOT reproduce Caffe2's std::mt19937 streams; only the distributions match.
 *
 * Uniform: 24 random bits -> u in [0, 1), y = min + (max - min) u in double, rounded
 * once. Normal: Box-Muller on two 32-bit words, u1 in (0, 1], in double, rounded once.
 * Xavier: uniform on +-sqrt(3 / fan_in), fan_in = size / dim0. MSRA: normal with
 * std sqrt(2 / fan_out), fan_out = size / dim1 (Caffe2's definitions).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/half.h"
#include "builtin.h"

#define DEFAULT_SEED 0x5EEDu

void dm_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u; /* the Weyl key schedule */
    k1 += 0xBB67AE85u;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

typedef enum rkind { R_GAUSS, R_UNIFORM, R_XAVIER, R_MSRA } rkind;

typedef struct rstate {
  rkind kind;
  uint32_t key[2];
  uint32_t runs;
} rstate;

static rkind kind_of(dm_op_ctx *ctx) {
  const char *t = dm_op_type(ctx);
  return t[0] == 'G' ? R_GAUSS : t[0] == 'U' ? R_UNIFORM : t[0] == 'X' ? R_XAVIER : R_MSRA;
}

/* FNV-1a: spreads the output name over the second key word. */
static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; s && *s; s++)
    h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static dm_status rand_dtype(dm_op_ctx *ctx, dm_dtype *t) {
  DM_TRY(dm_op_dtype_arg(ctx, "dtype", DM_FLOAT, t));
  if (!dm_is_float_or_half(*t))
    return dm_op_error(ctx, DM_ERR_TYPE, "dtype is %s; %s fills FLOAT or FLOAT16",
                       dm_dtype_name(*t), dm_op_type(ctx));
  return DM_OK;
}

static dm_status rand_init(dm_op_ctx *ctx, void **state) {
  DM_TRY(dm_fill_check_shape_args(ctx, 0));
  dm_dtype t;
  DM_TRY(rand_dtype(ctx, &t));
  rkind k = kind_of(ctx);
  if (k == R_UNIFORM && dm_op_arg_float(ctx, "min", 0) > dm_op_arg_float(ctx, "max", 1))
    return dm_op_error(ctx, DM_ERR_INVALID, "min %g is greater than max %g",
                       (double)dm_op_arg_float(ctx, "min", 0), (double)dm_op_arg_float(ctx, "max", 1));
  if (k == R_GAUSS && !(dm_op_arg_float(ctx, "std", 1) >= 0))
    return dm_op_error(ctx, DM_ERR_INVALID, "std %g is negative",
                       (double)dm_op_arg_float(ctx, "std", 1));
  rstate *s = malloc(sizeof *s);
  if (!s)
    return DM_NOMEM("random fill state");
  *s = (rstate){k, {dm_op_random_seed(ctx, DEFAULT_SEED), name_hash(dm_op_output_name(ctx, 0))}, 0};
  *state = s;
  return DM_OK;
}

static dm_status rand_infer(dm_op_ctx *ctx) {
  dm_dtype t;
  dm_tensor *y;
  DM_TRY(rand_dtype(ctx, &t));
  DM_TRY(dm_fill_set_output(ctx, t, &y));
  rkind k = kind_of(ctx);
  if ((k == R_XAVIER && y->ndim < 1) || (k == R_MSRA && y->ndim < 2))
    return dm_op_error(ctx, DM_ERR_SHAPE, "%s needs at least %d dims (fan %s = size / dim %d), "
                       "but the shape has %d", dm_op_type(ctx), k == R_XAVIER ? 1 : 2,
                       k == R_XAVIER ? "in" : "out", k == R_XAVIER ? 0 : 1, y->ndim);
  return DM_OK;
}

/* Draws per element: ~20 operations for the generator and the transform. */
static void rand_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  c->flops = 20.0 * (double)dm_op_output(ctx, 0)->numel;
}

static dm_status rand_run(dm_op_ctx *ctx) {
  DM_TRY(rand_infer(ctx));
  rstate *st = dm_op_state(ctx);
  dm_tensor *y = dm_op_output(ctx, 0);
  int64_t n = y->numel;
  if (n == 0)
    return DM_OK;
  double a, b; /* uniform: [a, b); normal: mean a, std b */
  int normal = st->kind == R_GAUSS || st->kind == R_MSRA;
  switch (st->kind) {
  case R_GAUSS: a = dm_op_arg_float(ctx, "mean", 0), b = dm_op_arg_float(ctx, "std", 1); break;
  case R_UNIFORM: a = dm_op_arg_float(ctx, "min", 0), b = dm_op_arg_float(ctx, "max", 1); break;
  case R_XAVIER: b = sqrt(3.0 / (double)(n / y->dims[0])), a = -b; break;
  default: a = 0, b = sqrt(2.0 / (double)(n / y->dims[1])); break;
  }
  uint32_t run = st->runs++;
  int half = y->dtype == DM_FLOAT16;
  void *p = dm_tensor_mutable_data(y);
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t blk = 0; blk < (n + 3) / 4; blk++) {
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)((uint64_t)blk >> 32), run, 0}, w[4];
    dm_philox4x32_10(ctr, st->key, w);
    double v[4];
    if (normal) {
      for (int j = 0; j < 4; j += 2) {
        double u1 = ((double)w[j] + 1.0) * 0x1p-32, u2 = (double)w[j + 1] * 0x1p-32;
        double r = sqrt(-2.0 * log(u1));
        v[j] = a + b * r * cos(two_pi * u2);
        v[j + 1] = a + b * r * sin(two_pi * u2);
      }
    } else {
      for (int j = 0; j < 4; j++)
        v[j] = a + (b - a) * ((double)(w[j] >> 8) * 0x1p-24);
    }
    for (int j = 0; j < 4 && blk * 4 + j < n; j++) {
      if (half)
        ((uint16_t *)p)[blk * 4 + j] = dm_double_to_half(v[j]);
      else
        ((float *)p)[blk * 4 + j] = (float)v[j];
    }
  }
  return DM_OK;
}

static void rand_fini(void *state) { free(state); }

#define RAND_SCHEMA(var, name, extra, docstr)                                               \
  static const dm_arg_spec var##_args[] = {                                                 \
      DM_FILL_SHAPE_ARGS,                                                                   \
      {"dtype", DM_ARG_ANY, 0, "FLOAT (default) or FLOAT16"},                               \
      extra{NULL, 0, 0, NULL}};                                                             \
  static const dm_op_schema var##_schema = {                                                \
      .type = name, .min_inputs = 0, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,   \
      .args = var##_args, .precision = DM_PREC_NONE, .doc = docstr, .infer = rand_infer,    \
      .cost = rand_cost, .no_gradient = 1}

#define GAUSS_ARGS                                                                          \
  {"mean", DM_ARG_FLOAT, 0, "default 0"}, {"std", DM_ARG_FLOAT, 0, "default 1"},
#define UNIFORM_ARGS                                                                        \
  {"min", DM_ARG_FLOAT, 0, "default 0"}, {"max", DM_ARG_FLOAT, 0, "default 1"},

RAND_SCHEMA(gauss, "GaussianFill", GAUSS_ARGS, "[X] -> Y ~ Normal(mean, std).");
RAND_SCHEMA(uniform, "UniformFill", UNIFORM_ARGS, "[X] -> Y ~ Uniform[min, max].");
RAND_SCHEMA(xavier, "XavierFill", , "[X] -> Y ~ Uniform(+-sqrt(3 / fan_in)), fan_in = size / dim0.");
RAND_SCHEMA(msra, "MSRAFill", , "[X] -> Y ~ Normal(0, sqrt(2 / fan_out)), fan_out = size / dim1.");

static const dm_op_schema *const schemas[] = {&gauss_schema, &uniform_schema, &xavier_schema,
                                              &msra_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
#define RAND_KERNEL(name) \
  {.type = name, .device = DM_CPU, .init = rand_init, .run = rand_run, .fini = rand_fini}
static const dm_kernel_def kernels[] = {RAND_KERNEL("GaussianFill"), RAND_KERNEL("UniformFill"),
                                        RAND_KERNEL("XavierFill"), RAND_KERNEL("MSRAFill"), {0}};
const dm_op_family dm_family_random_fill = {schemas, kernels};
