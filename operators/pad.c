/* pad.c: PadImage (Caffe2's, 4-D NCHW): float (FP32, FP16, BF16, double) and integer
 * tensors alike, since padding only copies.
 *
 * Pads the two spatial dims: Y (N, C, pad_t + H + pad_b, pad_l + W + pad_r), with
 *   mode "constant" (default): `value` (default 0) outside X;
 *   mode "reflect": mirrored about the edge pixel, which is not repeated (x[1] before
 *     x[0]; numpy's and ONNX's "reflect"), so a pad must be less than the dim;
 *   mode "edge": the edge pixel repeated.
 * Pads as Conv's: pad | pad_t, pad_l, pad_b, pad_r | pads [t, l, b, r], each >= 0. Values
 * are copied, so 16-bit tensors need no widening; the constant is converted to X's
 * dtype once (rounded for FP16/BF16, truncated toward zero for integers).
 */
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "core/half.h"

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

typedef struct pad_plan {
  int mode;
  int64_t pads[4]; /* t, l, b, r */
  float value;
  int64_t N, C, H, W, outH, outW;
} pad_plan;

static dm_status args_make(dm_op_ctx *ctx, pad_plan *p) {
  static const char *const side[4] = {"pad_t", "pad_l", "pad_b", "pad_r"};
  int has_pad = dm_op_has_arg(ctx, "pad"), has_list = dm_op_has_arg(ctx, "pads"), n_side = 0;
  for (int i = 0; i < 4; i++)
    n_side += dm_op_has_arg(ctx, side[i]);
  if (has_pad + (n_side > 0) + has_list > 1)
    return dm_op_error(ctx, DM_ERR_INVALID, "give 'pad', 'pad_t'/'pad_l'/'pad_b'/'pad_r' or "
                       "'pads', not more than one of them");
  if (n_side && n_side != 4)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "'pad_t', 'pad_l', 'pad_b' and 'pad_r' must be given together");
  for (int i = 0; i < 4; i++)
    p->pads[i] = n_side ? dm_op_arg_int(ctx, side[i], 0) : dm_op_arg_int(ctx, "pad", 0);
  if (has_list) {
    size_t n = 0;
    const int64_t *v = dm_op_arg_ints(ctx, "pads", &n);
    if (n != 4)
      return dm_op_error(ctx, DM_ERR_INVALID, "'pads' has %zu values; PadImage takes 4 (t, l, "
                         "b, r)", n);
    memcpy(p->pads, v, sizeof p->pads);
  }
  for (int i = 0; i < 4; i++)
    if (p->pads[i] < 0 || p->pads[i] > ((int64_t)1 << 30))
      return dm_op_error(ctx, DM_ERR_INVALID, "%s %lld is out of range (0 to 2^30)", side[i],
                         (long long)p->pads[i]);
  const char *mode = dm_op_arg_string(ctx, "mode", "constant");
  if (strcmp(mode, "constant") == 0)
    p->mode = PAD_CONSTANT;
  else if (strcmp(mode, "reflect") == 0)
    p->mode = PAD_REFLECT;
  else if (strcmp(mode, "edge") == 0)
    p->mode = PAD_EDGE;
  else
    return dm_op_error(ctx, DM_ERR_INVALID, "mode '%s'; expected constant, reflect or edge", mode);
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  if (strcmp(order, "NCHW") != 0)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "order '%s'; PadImage takes NCHW only", order);
  p->value = dm_op_arg_float(ctx, "value", 0.0f);
  return DM_OK;
}

static dm_status pad_prepare(dm_op_ctx *ctx, pad_plan *p) {
  DM_TRY(args_make(ctx, p));
  const dm_tensor *x = dm_op_input(ctx, 0);
  char xs[96];
  if (!dm_is_float_or_reduced(x->dtype) && x->dtype != DM_DOUBLE && x->dtype != DM_INT32 &&
      x->dtype != DM_INT64 && x->dtype != DM_INT8 && x->dtype != DM_UINT8 &&
      x->dtype != DM_INT16 && x->dtype != DM_UINT16)
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; PadImage takes a float or integer tensor",
                       dm_dtype_name(x->dtype));
  if (x->ndim != 4)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s; PadImage takes a 4-D NCHW input",
                       dm_shape_str(x, xs, sizeof xs));
  p->N = x->dims[0], p->C = x->dims[1], p->H = x->dims[2], p->W = x->dims[3];
  if (p->H > ((int64_t)1 << 40) || p->W > ((int64_t)1 << 40))
    return dm_op_error(ctx, DM_ERR_LIMIT, "X is %s: a spatial dim above 2^40",
                       dm_shape_str(x, xs, sizeof xs));
  if (p->mode != PAD_CONSTANT && (p->H == 0 || p->W == 0) &&
      (p->pads[0] || p->pads[1] || p->pads[2] || p->pads[3]))
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s: mode %s has no pixel to pad from",
                       dm_shape_str(x, xs, sizeof xs), p->mode == PAD_EDGE ? "edge" : "reflect");
  if (p->mode == PAD_REFLECT)
    for (int i = 0; i < 4; i++) {
      int64_t dim = i % 2 ? p->W : p->H;
      if (p->pads[i] >= dim)
        return dm_op_error(ctx, DM_ERR_SHAPE,
                           "X is %s: a reflect pad of %lld needs a dim above it, got %lld",
                           dm_shape_str(x, xs, sizeof xs), (long long)p->pads[i], (long long)dim);
    }
  p->outH = p->H + p->pads[0] + p->pads[2];
  p->outW = p->W + p->pads[1] + p->pads[3];
  if (!dm_op_shape_only(ctx) && dm_tensors_alias(dm_op_output(ctx, 0), x))
    dm_tensor_reset(dm_op_output(ctx, 0)); /* a view of X (Reshape): fresh storage */
  int64_t dims[4] = {p->N, p->C, p->outH, p->outW};
  return dm_op_set_output(ctx, 0, x->dtype, 4, dims);
}

static dm_status pad_infer(dm_op_ctx *ctx) {
  pad_plan p;
  return pad_prepare(ctx, &p);
}

static dm_status pad_init(dm_op_ctx *ctx, void **state) {
  (void)state;
  pad_plan p; /* argument errors at instantiation, not at the first run */
  return args_make(ctx, &p);
}

/* The source index of padded index o (-1: the constant). */
static int64_t source(int mode, int64_t o, int64_t head, int64_t n) {
  int64_t i = o - head;
  if (i >= 0 && i < n)
    return i;
  switch (mode) {
  case PAD_REFLECT:
    return i < 0 ? -i : 2 * (n - 1) - i;
  case PAD_EDGE:
    return i < 0 ? 0 : n - 1;
  default:
    return -1;
  }
}

/* Copies elements of `es` bytes: each output row from its source row, pixel by pixel. */
static void pad_planes(const pad_plan *p, size_t es, const unsigned char *x, unsigned char *y,
                       const void *cval) {
  const int64_t planes = p->N * p->C;
  for (int64_t pl = 0; pl < planes; pl++) {
    const unsigned char *xp = x + (size_t)(pl * p->H * p->W) * es;
    unsigned char *yp = y + (size_t)(pl * p->outH * p->outW) * es;
    for (int64_t oh = 0; oh < p->outH; oh++) {
      int64_t h = source(p->mode, oh, p->pads[0], p->H);
      unsigned char *yr = yp + (size_t)(oh * p->outW) * es;
      for (int64_t ow = 0; ow < p->outW; ow++) {
        int64_t w = h < 0 ? -1 : source(p->mode, ow, p->pads[1], p->W);
        memcpy(yr + (size_t)ow * es, w < 0 ? cval : xp + (size_t)(h * p->W + w) * es, es);
      }
    }
  }
}

static dm_status pad_run(dm_op_ctx *ctx) {
  pad_plan p;
  DM_TRY(pad_prepare(ctx, &p));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  union {
    float f;
    double d;
    uint16_t h;
    int8_t i8;
    uint8_t u8;
    int16_t i16;
    uint16_t u16;
    int32_t i32;
    int64_t i64;
  } c;
  memset(&c, 0, sizeof c);
  float v = p.value;
  /* Out-of-range constants for an integer X are clamped rather than undefined. */
  double iv = v != v ? 0.0 : v < -9.2e18 ? -9.2e18 : v > 9.2e18 ? 9.2e18 : (double)v;
  switch (x->dtype) {
  case DM_FLOAT: c.f = v; break;
  case DM_DOUBLE: c.d = v; break;
  case DM_FLOAT16: c.h = dm_float_to_half(v); break;
  case DM_BFLOAT16: c.h = dm_float_to_bf16(v); break;
  case DM_INT8: c.i8 = (int8_t)(iv < -128 ? -128 : iv > 127 ? 127 : iv); break;
  case DM_UINT8: c.u8 = (uint8_t)(iv < 0 ? 0 : iv > 255 ? 255 : iv); break;
  case DM_INT16: c.i16 = (int16_t)(iv < -32768 ? -32768 : iv > 32767 ? 32767 : iv); break;
  case DM_UINT16: c.u16 = (uint16_t)(iv < 0 ? 0 : iv > 65535 ? 65535 : iv); break;
  case DM_INT32: c.i32 = (int32_t)(iv < -2147483648.0 ? -2147483648.0 : iv > 2147483647.0 ? 2147483647.0 : iv); break;
  default: c.i64 = (int64_t)iv; break;
  }
  if (y->numel > 0)
    pad_planes(&p, dm_dtype_size(x->dtype), dm_tensor_data(x), dm_tensor_mutable_data(y), &c);
  return DM_OK;
}

static const dm_arg_spec pad_args[] = {
    {"pad", DM_ARG_INT, 0, "padding on every side (default 0)"},
    {"pad_t", DM_ARG_INT, 0, "top padding"},
    {"pad_l", DM_ARG_INT, 0, "left padding"},
    {"pad_b", DM_ARG_INT, 0, "bottom padding"},
    {"pad_r", DM_ARG_INT, 0, "right padding"},
    {"pads", DM_ARG_INTS, 0, "paddings [t, l, b, r]"},
    {"mode", DM_ARG_STRING, 0, "constant (default), reflect or edge"},
    {"value", DM_ARG_FLOAT, 0, "the constant (default 0)"},
    {"order", DM_ARG_STRING, 0, "NCHW (the only one taken)"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema pad_schema = {
    .type = "PadImage",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = pad_args,
    .precision = DM_PREC_FOLLOW,
    .doc = "X (N, C, H, W) -> Y (N, C, pad_t + H + pad_b, pad_l + W + pad_r); mode constant "
           "(value), reflect or edge.",
    .infer = pad_infer,
};

static const dm_op_schema *const schemas[] = {&pad_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "PadImage", .device = DM_CPU, .init = pad_init, .run = pad_run},
    {0},
};
const dm_op_family dm_family_pad = {schemas, kernels};
