/* eltwise.c: the oneDNN engine's Relu and ReluGradient, the forwards of the unary family
 * (operators/unary_family.h: Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid, HardSwish, Erf,
 * Sqrt, Gelu), FLOAT and BFLOAT16, and Dropout at inference.
 *
 * An elementwise op does not care how its buffer is laid out, so these run the
 * reference kernels' formulas (operators/activation.h, unary_formulas.h: widened to
 * FP32, rounded once) over the bytes as they arrive and write Y in X's layout: a Clip
 * (ReLU6) or a Sigmoid between two blocked convolutions keeps their format, with no
 * conversion either side. oneDNN's own eltwise primitives are not used: their relu maps
 * NaN to 0 (and ReluGradient passes dY where Y is NaN), which would hide an overflow from
 * mixed precision's check; the loops keep the reference's rules exactly, bit for bit,
 * except Sigmoid's e^x, which is vmath.h's vectorised one (a few units in the last
 * place from glibc's; NaN and the tails as the reference's).
 * Padding in a blocked buffer is zeros: Relu keeps it so, and the others write zeros
 * there again afterwards (Sigmoid(0) is 1/2). The unary family's gradients run on the
 * reference kernels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"
#include "kernels.h"
#include "dm_config.h"
#include "operators/activation.h"
#include "operators/unary_math.h"
#include "vmath.h"

/* Their own loops, no primitive: any dtype the engine runs, whatever the CPU. */
static int relu_supports(const dm_op_ctx *ctx) { return dm_dnnl_dtype_ok(ctx, 0, 0); }

static int relu_grad_supports(const dm_op_ctx *ctx) {
  return dm_dnnl_dtype_ok(ctx, 0, 0) && dm_dnnl_dtype_ok(ctx, 1, 0);
}

/* Elements in a buffer of layout md, padding included. */
static int64_t buffer_elems(const dnnl_memory_desc_t *md, dm_dtype t) {
  return (int64_t)(dnnl_memory_desc_get_size(md) / dm_dtype_size(t));
}

static dm_status relu_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  dnnl_memory_desc_t md;
  DM_TRY(dm_dnnl_md_of(x, &md));
  void *src = dm_tensor_raw_data(x), *dst;
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims); /* y may be x */
  DM_TRY(dm_dnnl_output(y, x->dtype, x->ndim, dims, &md, &dst));
  if (y == x)
    src = dst; /* in place: the resize kept the buffer */
  dm_relu_buffer(x->dtype, src, dst, buffer_elems(&md, x->dtype));
  return DM_OK;
}

typedef struct grad_state {
  dm_dnnl_buf scratch; /* dY reordered to Y's layout */
} grad_state;

static dm_status grad_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  *state = calloc(1, sizeof(grad_state));
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void grad_fini(void *state) {
  grad_state *s = state;
  dm_dnnl_buf_free(&s->scratch);
  free(s);
}

static dm_status relu_grad_run(dm_op_ctx *ctx) {
  grad_state *s = dm_op_state(ctx);
  const dm_tensor *y = dm_op_input(ctx, 0), *dy = dm_op_input(ctx, 1);
  dm_tensor *dx = dm_op_output(ctx, 0);
  DM_TRY(dm_op_check_shapes(ctx)); /* the reference's checks: dtypes, shapes, dX not Y */
  dnnl_memory_desc_t md;
  DM_TRY(dm_dnnl_md_of(y, &md));
  /* dY in Y's layout: a copy when it comes in another. dX (which may be dY's blob) is
   * written in Y's. */
  void *ydata = dm_tensor_raw_data(y), *dydata, *dxdata;
  DM_TRY(dm_dnnl_input(dy, &md, &s->scratch, &dydata));
  int dx_is_dy = dx == dy && dydata == dm_tensor_raw_data(dy);
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, y->dims, sizeof dims);
  DM_TRY(dm_dnnl_output(dx, y->dtype, y->ndim, dims, &md, &dxdata));
  if (dx_is_dy)
    dydata = dxdata; /* in place: the same buffer, kept by the resize */
  dm_relu_grad_buffer(y->dtype, ydata, dydata, dxdata, buffer_elems(&md, y->dtype));
  return DM_OK;
}

/* ---- the unary family's forwards --------------------------------------------------- */

#define UNARY_BLOCK 1024

static int unary_supports(const dm_op_ctx *ctx) { return dm_dnnl_dtype_ok(ctx, 0, 0); }

/* The reference's Sigmoid (1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: no
 * overflow either side) with e^-|x| from vmath.h, so within a few units in the last
 * place of the reference's (glibc's expf). Below lo = -87 (and at -inf) e^-|x| is e^-87,
 * so Y is 1.6e-38 where the reference's is smaller still; NaN passes. */
static inline float sigmoid(float x, float lo) {
  float a = -fabsf(x);
  float e = dm_vexpf(a < lo ? lo : a);
  return (x >= 0 ? 1.0f : e) / (1.0f + e); /* a NaN X makes e, and so Y, NaN */
}

/* Sigmoid's clamp bound, read through a volatile: gcc 12 compiles `a < c ? c : a` with a
 * constant c to a branch, and the loop is then not vectorised; with a bound it cannot
 * see, the select is a maxps. */
static volatile float vexp_lo = DM_VEXP_LO;

/* y[0 .. m) = f(x[..]) (y may be x), the kind's formula called directly: the switch is
 * out of the loop and the arguments are locals, so that the compiler can keep them in
 * registers and make the simple ones branch-free. Clip is written as two steps, which
 * give the formula's result for every x (NaN included) given min <= max, and compile to
 * a max and a min: the one-expression form branches per element. */
#define UNARY_CASE_(Name, ...)                                                             \
  case DM_UN_##Name:                                                                       \
    for (int64_t j = 0; j < m; j++)                                                        \
      y[j] = dm_unary_fwd_##Name(x[j], &q);                                                \
    break;
static void unary_f32(dm_unary_kind k, const dm_unary_params *p, const float *x, float *y,
                      int64_t m) {
  const dm_unary_params q = *p;
  if (k == DM_UN_Clip) {
    const float lo = q.lo, hi = q.hi;
#if DM_HAVE_OPENMP
#pragma omp simd
#endif
    for (int64_t j = 0; j < m; j++) {
      float v = x[j] < lo ? lo : x[j];
      y[j] = v > hi ? hi : v;
    }
    return;
  }
  if (k == DM_UN_Sigmoid) {
    const float lo = vexp_lo;
#if DM_HAVE_OPENMP
#pragma omp simd
#endif
    for (int64_t j = 0; j < m; j++)
      y[j] = sigmoid(x[j], lo);
    return;
  }
  switch (k) {
    DM_UNARY_OPS(UNARY_CASE_)
  default: break;
  }
}
#undef UNARY_CASE_

static dm_status unary_run(dm_op_ctx *ctx) {
  const dm_unary_op *u = dm_op_state(ctx);
  DM_TRY(dm_unary_check_forward_args(ctx, u)); /* the reference's checks and words */
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const dm_dtype t = x->dtype;
  dnnl_memory_desc_t md;
  DM_TRY(dm_dnnl_md_of(x, &md));
  void *src = dm_tensor_raw_data(x), *dst;
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims); /* y may be x */
  DM_TRY(dm_dnnl_output(y, t, x->ndim, dims, &md, &dst));
  if (y == x)
    src = dst; /* in place: the resize kept the buffer */
  const int64_t n = buffer_elems(&md, t);
  const dm_unary_kind k = u->kind;
  const dm_unary_params p = u->p;
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 15))
#endif
  for (int64_t i0 = 0; i0 < n; i0 += UNARY_BLOCK) {
    int64_t m = n - i0 < UNARY_BLOCK ? n - i0 : UNARY_BLOCK;
    if (t == DM_FLOAT) {
      unary_f32(k, &p, (const float *)src + i0, (float *)dst + i0, m);
      continue;
    }
    float buf[UNARY_BLOCK]; /* BFLOAT16: widened exactly, rounded once */
    dm_widen(t, (const uint16_t *)src + i0, buf, (size_t)m);
    unary_f32(k, &p, buf, buf, m);
    dm_narrow(t, buf, (uint16_t *)dst + i0, (size_t)m);
  }
  return dm_dnnl_zero_pad(&md, dst);
}

/* Dropout at inference (is_test = 1) is Y = X: a copy in X's layout, so a
 * Dropout between two blocked convolutions (SqueezeNet's last) costs no conversion to
 * plain and back. Training Dropout draws a mask: the reference runs it. */
static int dropout_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "is_test", 0) == 0)
    return dm_op_refuse(ctx, "the oneDNN engine runs Dropout at inference (is_test = 1) only");
  return dm_dnnl_dtype_ok(ctx, 0, 0);
}

static dm_status dropout_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_check_shapes(ctx)); /* the reference's ratio and arity checks */
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_op_num_outputs(ctx) > 1) { /* a mask, if asked for, keeps everything (plain BOOL) */
    DM_TRY(dm_op_set_output(ctx, 1, DM_BOOL, x->ndim, x->dims));
    memset(dm_tensor_mutable_data(dm_op_output(ctx, 1)), 1, (size_t)x->numel);
  }
  if (y == x)
    return DM_OK;
  dnnl_memory_desc_t md;
  DM_TRY(dm_dnnl_md_of(x, &md));
  void *dst;
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  DM_TRY(dm_dnnl_output(y, x->dtype, x->ndim, dims, &md, &dst));
  memcpy(dst, dm_tensor_raw_data(x), dnnl_memory_desc_get_size(&md));
  return DM_OK;
}

const dm_kernel_def dm_dnnl_eltwise_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "Dropout", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .run = dropout_run, .supports = dropout_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "Relu", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .run = relu_run, .supports = relu_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "ReluGradient", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = grad_init, .run = relu_grad_run, .fini = grad_fini,
     .supports = relu_grad_supports},
#define UNARY_KERNEL_(Name, ...)                                                           \
  {.struct_size = sizeof(dm_kernel_def), .type = #Name, .device = DM_CPU,                  \
   .engine = DM_ENGINE_DNNL, .init = dm_unary_init, .run = unary_run, .fini = dm_unary_fini, \
   .supports = unary_supports},
    DM_UNARY_OPS(UNARY_KERNEL_)
#undef UNARY_KERNEL_
    {0},
};
