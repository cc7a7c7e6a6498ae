/* resize.c: ResizeNearest and UpsampleBilinear (Caffe2's, NCHW), FP32, FP16 and BF16.
 *
 * Caffe2's arguments: height_scale, width_scale (default 1); the output is
 * floor(H * height_scale) x floor(W * width_scale). Caffe2's own coordinates are the
 * defaults: ResizeNearest reads input row min(floor(y / height_scale), H - 1)
 * (ONNX's "asymmetric" with nearest_mode "floor"), UpsampleBilinear interpolates with
 * corners aligned, y (H - 1) / (outH - 1) (ONNX's "align_corners").
 *
 * Demitasse adds what ONNX's Resize needs beyond that, as optional arguments whose
 * defaults leave a Caffe2 net's meaning alone:
 *   output_height, output_width: the output size (ONNX's `sizes`); a scale not given is
 *     then output / input, one given beside them still maps the coordinates;
 *   coordinate_transformation_mode: asymmetric, align_corners, half_pixel,
 *     pytorch_half_pixel or half_pixel_symmetric, as ONNX defines them (onnx.ai Resize);
 *   nearest_mode (ResizeNearest): floor, ceil, round_prefer_floor, round_prefer_ceil.
 * align_corners and pytorch_half_pixel take the resized length to be the output size, as
 * ONNX Runtime and PyTorch do (ONNX's reference divides by scale * input, fractional
 * when the output size was rounded down; the importer refuses a case it can see differ).
 * Source coordinates are computed in double (as ONNX's reference does) and clamped to the
 * input; values are interpolated in FP32 (16-bit inputs widened exactly, each output
 * rounded once).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "core/half.h"

enum { CT_ASYMMETRIC, CT_ALIGN_CORNERS, CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_HALF_PIXEL_SYMMETRIC };
enum { NM_FLOOR, NM_CEIL, NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL };

typedef struct resize_plan {
  int linear;
  int ct, nm;
  double scale[2];   /* h, w: output / input as the coordinates use it */
  double length[2];  /* the resized length: the output size (as ONNX Runtime and PyTorch) */
  double flen[2];    /* scale * input, fractional (half_pixel_symmetric's output_width) */
  int64_t N, C, H, W, outH, outW;
} resize_plan;

static int is_linear(dm_op_ctx *ctx) { return strcmp(dm_op_type(ctx), "UpsampleBilinear") == 0; }

static int lookup(const char *v, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(v, names[i]) == 0)
      return i;
  return -1;
}

/* The arguments that do not depend on X. */
static dm_status args_make(dm_op_ctx *ctx, resize_plan *p) {
  static const char *const cts[] = {"asymmetric", "align_corners", "half_pixel",
                                    "pytorch_half_pixel", "half_pixel_symmetric"};
  static const char *const nms[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};
  p->linear = is_linear(ctx);
  const char *ct = dm_op_arg_string(ctx, "coordinate_transformation_mode",
                                    p->linear ? "align_corners" : "asymmetric");
  if ((p->ct = lookup(ct, cts, 5)) < 0)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "coordinate_transformation_mode '%s'; expected asymmetric, "
                       "align_corners, half_pixel, pytorch_half_pixel or half_pixel_symmetric",
                       ct);
  const char *nm = dm_op_arg_string(ctx, "nearest_mode", "floor");
  if (p->linear && dm_op_has_arg(ctx, "nearest_mode"))
    return dm_op_error(ctx, DM_ERR_INVALID, "nearest_mode is ResizeNearest's argument");
  if ((p->nm = lookup(nm, nms, 4)) < 0)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "nearest_mode '%s'; expected floor, ceil, round_prefer_floor or "
                       "round_prefer_ceil", nm);
  int has_oh = dm_op_has_arg(ctx, "output_height"), has_ow = dm_op_has_arg(ctx, "output_width");
  if (has_oh != has_ow)
    return dm_op_error(ctx, DM_ERR_INVALID, "'output_height' and 'output_width' must be given "
                       "together");
  static const char *const sn[2] = {"height_scale", "width_scale"};
  for (int i = 0; i < 2; i++) {
    float s = dm_op_arg_float(ctx, sn[i], 1.0f);
    if (!(s > 0.0f) || !isfinite(s))
      return dm_op_error(ctx, DM_ERR_INVALID, "%s %g must be positive and finite", sn[i],
                         (double)s);
    p->scale[i] = s;
  }
  if (has_oh) {
    int64_t o[2] = {dm_op_arg_int(ctx, "output_height", 0), dm_op_arg_int(ctx, "output_width", 0)};
    for (int i = 0; i < 2; i++)
      if (o[i] < 1 || o[i] > ((int64_t)1 << 40))
        return dm_op_error(ctx, DM_ERR_INVALID, "%s %lld is out of range (1 to 2^40)",
                           i ? "output_width" : "output_height", (long long)o[i]);
  }
  return DM_OK;
}

static dm_status plan_make(dm_op_ctx *ctx, const dm_tensor *x, resize_plan *p) {
  DM_TRY(args_make(ctx, p));
  char xs[96];
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; %s takes FLOAT, FLOAT16 or BFLOAT16",
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  if (x->ndim != 4)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s; %s takes a 4-D NCHW input",
                       dm_shape_str(x, xs, sizeof xs), dm_op_type(ctx));
  p->N = x->dims[0], p->C = x->dims[1], p->H = x->dims[2], p->W = x->dims[3];
  int64_t in[2] = {p->H, p->W}, out[2];
  int sized = dm_op_has_arg(ctx, "output_height");
  static const char *const sn[2] = {"height_scale", "width_scale"};
  for (int i = 0; i < 2; i++) {
    if (in[i] < 1 || in[i] > ((int64_t)1 << 40))
      return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s: its spatial dims must be 1 to 2^40",
                         dm_shape_str(x, xs, sizeof xs));
    if (sized) {
      out[i] = dm_op_arg_int(ctx, i ? "output_width" : "output_height", 1);
      if (!dm_op_has_arg(ctx, sn[i]))
        p->scale[i] = (double)out[i] / (double)in[i];
      p->flen[i] = dm_op_has_arg(ctx, sn[i]) ? p->scale[i] * (double)in[i] : (double)out[i];
    } else {
      double o = floor(p->scale[i] * (double)in[i]);
      if (o < 1 || o > (double)((int64_t)1 << 40))
        return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s: %s %g gives an output size of %.0f",
                           dm_shape_str(x, xs, sizeof xs), sn[i], p->scale[i], o);
      out[i] = (int64_t)o;
      p->flen[i] = p->scale[i] * (double)in[i];
    }
  }
  p->outH = out[0], p->outW = out[1];
  p->length[0] = (double)out[0], p->length[1] = (double)out[1];
  return DM_OK;
}

static dm_status resize_prepare(dm_op_ctx *ctx, resize_plan *p) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(plan_make(ctx, x, p));
  if (!dm_op_shape_only(ctx) && dm_tensors_alias(dm_op_output(ctx, 0), x))
    dm_tensor_reset(dm_op_output(ctx, 0)); /* a view of X (Reshape): fresh storage */
  int64_t dims[4] = {p->N, p->C, p->outH, p->outW};
  return dm_op_set_output(ctx, 0, x->dtype, 4, dims);
}

static dm_status resize_infer(dm_op_ctx *ctx) {
  resize_plan p;
  return resize_prepare(ctx, &p);
}

static dm_status resize_init(dm_op_ctx *ctx, void **state) {
  (void)state;
  resize_plan p; /* argument errors at instantiation, not at the first run */
  return args_make(ctx, &p);
}

/* The source coordinate of output index o along dim d (ONNX's Resize formulas). */
static double source_coord(const resize_plan *p, int d, int64_t o, int64_t in) {
  switch (p->ct) {
  case CT_ALIGN_CORNERS:
    return p->length[d] == 1.0 ? 0.0 : (double)o * (double)(in - 1) / (p->length[d] - 1.0);
  case CT_HALF_PIXEL:
    return ((double)o + 0.5) / p->scale[d] - 0.5;
  case CT_PYTORCH_HALF_PIXEL:
    return p->length[d] > 1.0 ? ((double)o + 0.5) / p->scale[d] - 0.5 : 0.0;
  case CT_HALF_PIXEL_SYMMETRIC: { /* half_pixel about the centre of the rounded output */
    double adjustment = (double)(d ? p->outW : p->outH) / p->flen[d];
    double offset = (double)in / 2 * (1 - adjustment);
    return offset + ((double)o + 0.5) / p->scale[d] - 0.5;
  }
  default:
    return (double)o / p->scale[d];
  }
}

static int64_t clamp(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

/* Per output index along one dim: the two source indices and the weight of the second
 * (nearest: both the same index, weight 0). */
static void axis_table(const resize_plan *p, int d, int64_t in, int64_t out, int64_t *i0,
                       int64_t *i1, float *lam) {
  for (int64_t o = 0; o < out; o++) {
    double x = source_coord(p, d, o, in), f = floor(x), r = x - f;
    int64_t fi = (int64_t)f;
    if (p->linear) {
      i0[o] = clamp(fi, in);
      i1[o] = clamp(fi + 1, in);
      lam[o] = (float)r;
    } else {
      int64_t k = fi;
      if (r > 0 && (p->nm == NM_CEIL || (p->nm == NM_ROUND_PREFER_FLOOR && r > 0.5) ||
                    (p->nm == NM_ROUND_PREFER_CEIL && r >= 0.5)))
        k = fi + 1;
      i0[o] = i1[o] = clamp(k, in);
      lam[o] = 0.0f;
    }
  }
}

/* One plane: x (H, W) -> y (outH, outW). */
static void resize_plane(const resize_plan *p, const int64_t *hy0, const int64_t *hy1,
                         const float *ly, const int64_t *wx0, const int64_t *wx1,
                         const float *lx, const float *x, float *y) {
  for (int64_t oh = 0; oh < p->outH; oh++) {
    const float *r0 = x + hy0[oh] * p->W, *r1 = x + hy1[oh] * p->W;
    float *yr = y + oh * p->outW;
    if (!p->linear) {
      for (int64_t ow = 0; ow < p->outW; ow++)
        yr[ow] = r0[wx0[ow]];
      continue;
    }
    const float a = ly[oh];
    for (int64_t ow = 0; ow < p->outW; ow++) {
      const float b = lx[ow];
      float top = (1.0f - b) * r0[wx0[ow]] + b * r0[wx1[ow]];
      float bot = (1.0f - b) * r1[wx0[ow]] + b * r1[wx1[ow]];
      yr[ow] = (1.0f - a) * top + a * bot;
    }
  }
}

static dm_status resize_run(dm_op_ctx *ctx) {
  resize_plan p;
  DM_TRY(resize_prepare(ctx, &p));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const int r16 = dm_is_reduced_float(x->dtype);
  const int64_t xs = p.H * p.W, ys = p.outH * p.outW, planes = p.N * p.C;
  if (planes == 0)
    return DM_OK;
  size_t ni = (size_t)(2 * (p.outH + p.outW)), nf = (size_t)(p.outH + p.outW);
  size_t nbuf = r16 ? (size_t)(xs + ys) : 0;
  int64_t *idx = malloc(ni * sizeof *idx);
  float *fl = malloc((nf + nbuf) * sizeof *fl);
  if (!idx || !fl) {
    free(idx);
    free(fl);
    return DM_NOMEM("resize tables");
  }
  int64_t *hy0 = idx, *hy1 = hy0 + p.outH, *wx0 = hy1 + p.outH, *wx1 = wx0 + p.outW;
  float *ly = fl, *lx = ly + p.outH, *xf = lx + p.outW, *yf = xf + (r16 ? xs : 0);
  axis_table(&p, 0, p.H, p.outH, hy0, hy1, ly);
  axis_table(&p, 1, p.W, p.outW, wx0, wx1, lx);
  const void *px = dm_tensor_data(x);
  void *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < planes; i++) {
    if (!r16) {
      resize_plane(&p, hy0, hy1, ly, wx0, wx1, lx, (const float *)px + i * xs,
                   (float *)py + i * ys);
    } else {
      dm_widen(x->dtype, (const uint16_t *)px + i * xs, xf, (size_t)xs);
      resize_plane(&p, hy0, hy1, ly, wx0, wx1, lx, xf, yf);
      dm_narrow(x->dtype, yf, (uint16_t *)py + i * ys, (size_t)ys);
    }
  }
  free(idx);
  free(fl);
  return DM_OK;
}

/* Four multiply-adds per bilinear output (nearest: copies). */
static void resize_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  if (is_linear(ctx))
    c->flops = 6.0 * (double)dm_op_output(ctx, 0)->numel;
}

#define RESIZE_COMMON_ARGS                                                                  \
  {"height_scale", DM_ARG_FLOAT, 0, "output height / input height (default 1)"},          \
      {"width_scale", DM_ARG_FLOAT, 0, "output width / input width (default 1)"},         \
      {"output_height", DM_ARG_INT, 0, "output height (with output_width; ONNX sizes)"},  \
      {"output_width", DM_ARG_INT, 0, "output width (with output_height)"}

static const dm_arg_spec nearest_args[] = {
    RESIZE_COMMON_ARGS,
    {"coordinate_transformation_mode", DM_ARG_STRING, 0,
     "asymmetric (default, Caffe2's), align_corners, half_pixel, pytorch_half_pixel, "
     "half_pixel_symmetric"},
    {"nearest_mode", DM_ARG_STRING, 0,
     "floor (default, Caffe2's), ceil, round_prefer_floor, round_prefer_ceil"},
    {NULL, 0, 0, NULL},
};
static const dm_arg_spec bilinear_args[] = {
    RESIZE_COMMON_ARGS,
    {"coordinate_transformation_mode", DM_ARG_STRING, 0,
     "align_corners (default, Caffe2's), asymmetric, half_pixel, pytorch_half_pixel, "
     "half_pixel_symmetric"},
    {NULL, 0, 0, NULL},
};

static const dm_op_schema nearest_schema = {
    .type = "ResizeNearest",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = nearest_args,
    .precision = DM_PREC_FOLLOW,
    .doc = "X (N, C, H, W) -> Y (N, C, floor(H height_scale), floor(W width_scale)), each "
           "output the input pixel nearest its source coordinate (Caffe2: floor(y / scale)).",
    .infer = resize_infer,
    .cost = resize_cost,
};
static const dm_op_schema bilinear_schema = {
    .type = "UpsampleBilinear",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .args = bilinear_args,
    .precision = DM_PREC_FOLLOW,
    .doc = "X (N, C, H, W) -> Y (N, C, floor(H height_scale), floor(W width_scale)), "
           "bilinear interpolation (Caffe2: corners aligned).",
    .infer = resize_infer,
    .cost = resize_cost,
};

static const dm_op_schema *const schemas[] = {&nearest_schema, &bilinear_schema, NULL};
static const dm_kernel_def kernels[] = {
    {.type = "ResizeNearest", .device = DM_CPU, .init = resize_init, .run = resize_run},
    {.type = "UpsampleBilinear", .device = DM_CPU, .init = resize_init, .run = resize_run},
    {0},
};
const dm_op_family dm_family_resize = {schemas, kernels};
