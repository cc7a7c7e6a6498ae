/* dropout.c: Dropout and DropoutGrad, FP32, FP16 and BF16 (precision follows X).
 *
 * Training: keep each element with probability 1 - ratio, Y = X * mask / (1 - ratio)
 * (Caffe2 scales at training time, so is_test needs no scaling: Y = X). The mask is a
 * BOOL tensor for DropoutGrad: dX = dY * mask / (1 - ratio).
 *
 * The bits are a counter-based hash (splitmix64 finaliser) of (seed, op stream,
 * iteration, element index): the seed is the op's device_option.random_seed (a fixed
 * default without one), the stream is a hash of the op's first output name (two
 * dropout ops under one net-wide seed must not share a mask), and the iteration is a
 * counter in the kernel's state, advanced on every run. So each run draws new bits,
 * rerunning a program reproduces them exactly, and the result does not depend on the
 * number of threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "common.h"
#include "core/half.h"
#include "builtin.h"
#include "dropout.h"

/* Without a random_seed the masks are still reproducible: a fixed default. */
#define DM_DROPOUT_DEFAULT_SEED 0x5EEDu

static const dm_arg_spec dropout_args[] = {
    {"ratio", DM_ARG_FLOAT, 0, "probability of dropping an element, in [0, 1] (default 0.5)"},
    {"is_test", DM_ARG_INT, 0, "1: Y = X, no mask (default 0)"},
    {NULL, 0, 0, NULL},
};

dm_status dm_dropout_ratio(dm_op_ctx *ctx, float *ratio) {
  *ratio = dm_op_arg_float(ctx, "ratio", 0.5f);
  if (!(*ratio >= 0.0f && *ratio <= 1.0f))
    return dm_op_error(ctx, DM_ERR_INVALID, "ratio is %g; it must be in [0, 1]", (double)*ratio);
  return DM_OK;
}

static dm_status need_float_or_half(dm_op_ctx *ctx, const dm_tensor *t, const char *what) {
  if (!dm_is_float_or_reduced(t->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "%s is %s; %s takes FLOAT, FLOAT16 or BFLOAT16", what,
                       dm_dtype_name(t->dtype), dm_op_type(ctx));
  return DM_OK;
}

static dm_status dropout_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  float ratio;
  DM_TRY(dm_dropout_ratio(ctx, &ratio));
  DM_TRY(need_float_or_half(ctx, x, "X"));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  if (!is_test && dm_op_num_outputs(ctx) < 2)
    return dm_op_error(ctx, DM_ERR_INVALID, "training (is_test=0) needs the mask output "
                       "(Y, mask)");
  DM_TRY(dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims));
  if (dm_op_num_outputs(ctx) > 1)
    DM_TRY(dm_op_set_output(ctx, 1, DM_BOOL, x->ndim, x->dims));
  return DM_OK;
}

/* dY, mask -> dX; is_test: dY -> dX. */
static dm_status dropout_grad_infer(dm_op_ctx *ctx) {
  const dm_tensor *dy = dm_op_input(ctx, 0);
  float ratio;
  DM_TRY(dm_dropout_ratio(ctx, &ratio));
  DM_TRY(need_float_or_half(ctx, dy, "dY"));
  int is_test = dm_op_arg_int(ctx, "is_test", 0) != 0;
  if (!is_test) {
    if (dm_op_num_inputs(ctx) < 2)
      return dm_op_error(ctx, DM_ERR_INVALID, "training (is_test=0) needs the mask input "
                         "(dY, mask)");
    const dm_tensor *m = dm_op_input(ctx, 1);
    char ds[96], ms[96];
    if (m->dtype != DM_BOOL || !dm_tensor_same_shape(m, dy))
      return dm_op_error(ctx, DM_ERR_SHAPE, "mask is %s %s; expected BOOL %s like dY",
                         dm_dtype_name(m->dtype), dm_shape_str(m, ms, sizeof ms),
                         dm_shape_str(dy, ds, sizeof ds));
  }
  return dm_op_set_output(ctx, 0, dy->dtype, dy->ndim, dy->dims);
}

static void dropout_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  int train = dm_op_arg_int(ctx, "is_test", 0) == 0;
  c->flops = train ? 2 * (double)x->numel : 0; /* compare, multiply; the hash is extra */
  c->bytes_read = (double)dm_tensor_nbytes(x);
  c->bytes_written = (double)dm_tensor_nbytes(x) + (train ? (double)x->numel : 0);
}

static void dropout_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  const dm_tensor *dy = dm_op_input(ctx, 0);
  int train = dm_op_arg_int(ctx, "is_test", 0) == 0;
  c->flops = train ? (double)dy->numel : 0;
  c->bytes_read = (double)dm_tensor_nbytes(dy) + (train ? (double)dy->numel : 0);
  c->bytes_written = (double)dm_tensor_nbytes(dy);
}

static dm_status dropout_gradient(dm_grad_ctx *g) {
  if (dm_grad_arg_int(g, "is_test", 0) || dm_grad_num_outputs(g) < 2)
    /* Y = X: the gradient passes through unchanged, no op needed. */
    return dm_grad_set_input_grad(g, 0, dm_grad_output_grad(g, 0));
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_output(g, 1)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "DropoutGrad", 2, in, 1, out);
}

static const dm_inplace_pair dropout_inplace[] = {{0, 0}, {-1, -1}};

static const dm_op_schema dropout_schema = {
    .type = "Dropout",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 2,
    .args = dropout_args,
    .inplace = dropout_inplace,
    .precision = DM_PREC_FOLLOW,
    .nonfloat_outputs = 0x2, /* the BOOL mask */
    .doc = "X -> Y, [mask (BOOL)]: training keeps each element with probability 1 - ratio "
           "and scales it by 1 / (1 - ratio); is_test: Y = X.",
    .infer = dropout_infer,
    .cost = dropout_cost,
    .gradient = dropout_gradient,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x1, .layout_outputs = 0x3,
};

static const dm_op_schema dropout_grad_schema = {
    .type = "DropoutGrad",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = dropout_args,
    .inplace = dropout_inplace,
    .precision = DM_PREC_FOLLOW,
    .nonfloat_inputs = 0x2, /* the BOOL mask */
    .doc = "dY, mask -> dX = dY * mask / (1 - ratio); is_test: dX = dY.",
    .infer = dropout_grad_infer,
    .cost = dropout_grad_cost,
    .layout = DM_LAYOUT_ELEMENTWISE, .layout_inputs = 0x3, .layout_outputs = 0x1,
};

dm_status dm_dropout_init(dm_op_ctx *ctx, void **state) {
  dm_dropout_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the dropout state");
  uint64_t stream = 1469598103934665603ull; /* FNV-1a of the first output's name */
  for (const char *p = dm_op_output_name(ctx, 0); p && *p; p++)
    stream = (stream ^ (unsigned char)*p) * 1099511628211ull;
  s->key = dm_mix64(dm_mix64(dm_op_random_seed(ctx, DM_DROPOUT_DEFAULT_SEED)) ^ stream);
  *state = s;
  return DM_OK;
}

void dm_dropout_fini(void *state) { free(state); }

static dm_status dropout_run(dm_op_ctx *ctx) {
  DM_TRY(dropout_infer(ctx));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const dm_dtype t = x->dtype;
  int fp16 = dm_is_reduced_float(t); /* FP16 or BF16 */
  int64_t n = x->numel;
  if (dm_op_arg_int(ctx, "is_test", 0)) {
    if (y != x && n)
      memcpy(dm_tensor_mutable_data(y), dm_tensor_data(x), dm_tensor_nbytes(x));
    if (dm_op_num_outputs(ctx) > 1) /* a mask, if asked for, keeps everything */
      memset(dm_tensor_mutable_data(dm_op_output(ctx, 1)), 1, (size_t)n);
    return DM_OK;
  }
  float ratio;
  DM_TRY(dm_dropout_ratio(ctx, &ratio));
  uint64_t key = dm_dropout_next_key(dm_op_state(ctx));
  double scale = dm_dropout_keep_scale(ratio);
  uint8_t *mask = dm_tensor_mutable_data(dm_op_output(ctx, 1)); /* (n) BOOL */
  const void *px = dm_tensor_data(x);
  void *py = dm_tensor_mutable_data(y); /* may be x: each element is read, then written */
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 16))
#endif
  for (int64_t i = 0; i < n; i++) {
    /* 53 uniform bits; ratio 0 keeps all, ratio 1 drops all. */
    double u = (double)(dm_mix64(key + (uint64_t)i * DM_DROPOUT_GOLDEN) >> 11) * 0x1p-53;
    int keep = u >= ratio;
    mask[i] = (uint8_t)keep;
    if (fp16) {
      double v = keep ? dm_reduced_to_float(t, ((const uint16_t *)px)[i]) * scale : 0.0;
      ((uint16_t *)py)[i] = dm_double_to_reduced(t, v);
    } else {
      ((float *)py)[i] = keep ? (float)(((const float *)px)[i] * scale) : 0.0f;
    }
  }
  return DM_OK;
}

static dm_status dropout_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dropout_grad_infer(ctx));
  const dm_tensor *dy = dm_op_input(ctx, 0);
  dm_tensor *dx = dm_op_output(ctx, 0);
  int64_t n = dy->numel;
  if (dm_op_arg_int(ctx, "is_test", 0)) {
    if (dx != dy && n)
      memcpy(dm_tensor_mutable_data(dx), dm_tensor_data(dy), dm_tensor_nbytes(dy));
    return DM_OK;
  }
  float ratio;
  DM_TRY(dm_dropout_ratio(ctx, &ratio));
  double scale = dm_dropout_keep_scale(ratio);
  const uint8_t *mask = dm_tensor_data(dm_op_input(ctx, 1)); /* (n) BOOL */
  const void *pdy = dm_tensor_data(dy);
  void *pdx = dm_tensor_mutable_data(dx);
  const dm_dtype t = dy->dtype;
  int fp16 = dm_is_reduced_float(t); /* FP16 or BF16 */
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 16))
#endif
  for (int64_t i = 0; i < n; i++) {
    if (fp16) {
      double v = mask[i] ? dm_reduced_to_float(t, ((const uint16_t *)pdy)[i]) * scale : 0.0;
      ((uint16_t *)pdx)[i] = dm_double_to_reduced(t, v);
    } else {
      ((float *)pdx)[i] = mask[i] ? (float)(((const float *)pdy)[i] * scale) : 0.0f;
    }
  }
  return DM_OK;
}

static const dm_op_schema *const schemas[] = {&dropout_schema, &dropout_grad_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "Dropout", .device = DM_CPU, .init = dm_dropout_init, .run = dropout_run, .fini = dm_dropout_fini},
    {.type = "DropoutGrad", .device = DM_CPU, .run = dropout_grad_run},
    {0},
};
const dm_op_family dm_family_dropout = {schemas, kernels};
