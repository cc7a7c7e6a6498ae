/* pool.c: MaxPool and AveragePool (2-D, NCHW and NHWC) and their gradients, FP32, FP16
 * and BF16.
 *
 * Arguments as Conv's (conv_args.h; dilation too, legacy_pad 0 or 1) plus global_pooling,
 * ceil_mode and count_include_pad;
 * legacy_pad 3 is Caffe's pooling arithmetic, which the model zoo's nets use, ceil_mode
 * ONNX's and PyTorch's. AveragePool divides by the number of input pixels under the
 * window (padding not counted), or with count_include_pad (Caffe2's argument) by the
 * window clipped to the padded input. The gradient of MaxPool goes
 * to every input in the window equal to the output (Caffe2's CPU rule; inputs with ties
 * share it). FP16 and BF16 widen exactly, computes in FP32 and rounds each output once.
 */
#include "dm_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "conv_args.h"
#include "core/half.h"

typedef struct pool_plan {
  dm_conv_args a;
  dm_conv_geom g;
  int64_t xs, ys; /* elements per image of X and Y */
} pool_plan;

static int is_max_pool(dm_op_ctx *ctx) { return strncmp(dm_op_type(ctx), "MaxPool", 7) == 0; }

static dm_status plan_make(dm_op_ctx *ctx, const dm_tensor *x, pool_plan *p, int64_t ydims[4]) {
  DM_TRY(dm_conv_args_parse(ctx, 1, &p->a));
  DM_TRY(dm_conv_geometry(ctx, &p->a, x, 1, &p->g));
  dm_conv_out_dims(&p->a, &p->g, p->g.C, ydims);
  p->xs = p->g.C * p->g.H * p->g.W;
  p->ys = p->g.C * p->g.outH * p->g.outW;
  return DM_OK;
}

/* MaxPool / AveragePool: X -> Y. */
static dm_status pool_prepare(dm_op_ctx *ctx, pool_plan *p) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  if (!dm_is_float_or_reduced(x->dtype))
    return dm_op_error(ctx, DM_ERR_TYPE, "X is %s; %s takes FLOAT, FLOAT16 or BFLOAT16",
                       dm_dtype_name(x->dtype), dm_op_type(ctx));
  int64_t dims[4];
  DM_TRY(plan_make(ctx, x, p, dims));
  if (!dm_op_shape_only(ctx) && dm_tensors_alias(dm_op_output(ctx, 0), x))
    dm_tensor_reset(dm_op_output(ctx, 0)); /* a view of X (Reshape): fresh storage */
  return dm_op_set_output(ctx, 0, x->dtype, 4, dims);
}

static dm_status pool_infer(dm_op_ctx *ctx) {
  pool_plan p;
  return pool_prepare(ctx, &p);
}

/* MaxPoolGradient / AveragePoolGradient: X, Y, dY -> dX. */
static dm_status pool_grad_prepare(dm_op_ctx *ctx, pool_plan *p) {
  const dm_tensor *x = dm_op_input(ctx, 0), *y = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  if (!dm_is_float_or_reduced(x->dtype) || y->dtype != x->dtype || dy->dtype != x->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X, Y, dY are %s, %s, %s; expected all FLOAT, all FLOAT16 or all "
                       "BFLOAT16",
                       dm_dtype_name(x->dtype), dm_dtype_name(y->dtype), dm_dtype_name(dy->dtype));
  int64_t dims[4];
  DM_TRY(plan_make(ctx, x, p, dims));
  const dm_tensor *t[2] = {y, dy};
  for (int i = 0; i < 2; i++)
    if (t[i]->ndim != 4 || memcmp(t[i]->dims, dims, sizeof dims) != 0) {
      char s[96];
      return dm_op_error(ctx, DM_ERR_SHAPE, "%s is %s, but the pooled X is %lldx%lldx%lldx%lld",
                         i ? "dY" : "Y", dm_shape_str(t[i], s, sizeof s), (long long)dims[0],
                         (long long)dims[1], (long long)dims[2], (long long)dims[3]);
    }
  dm_tensor *dx = dm_op_output(ctx, 0);
  if (!dm_op_shape_only(ctx))
    for (int i = 0; i < 3; i++)
      if (dm_tensors_alias(dx, dm_op_input(ctx, i)))
        dm_tensor_reset(dx);
  return dm_op_set_output(ctx, 0, x->dtype, 4, x->dims);
}

static dm_status pool_grad_infer(dm_op_ctx *ctx) {
  pool_plan p;
  return pool_grad_prepare(ctx, &p);
}

/* One compare or add per input under each window. */
static void pool_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  pool_plan p;
  int64_t dims[4];
  if (plan_make(ctx, dm_op_input(ctx, 0), &p, dims) == DM_OK)
    c->flops = (double)dm_op_output(ctx, 0)->numel * (double)(p.g.kernel[0] * p.g.kernel[1]);
}

static void pool_grad_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  dm_cost_io(ctx, c);
  pool_plan p;
  int64_t dims[4];
  if (plan_make(ctx, dm_op_input(ctx, 0), &p, dims) == DM_OK)
    c->flops = (double)dm_op_input(ctx, 2)->numel * (double)(p.g.kernel[0] * p.g.kernel[1]);
}


/* One image forward in FP32: x (C, H, W) or (H, W, C) -> y. */
static void pool_image(const pool_plan *p, int is_max, const float *x, float *y) {
  const dm_conv_geom *g = &p->g;
  const int64_t C = g->C, H = g->H, W = g->W, dh = g->dilation[0], dw = g->dilation[1];
  for (int64_t oh = 0; oh < g->outH; oh++) {
    int64_t h0, h1;
    dm_pool_window(g, 0, oh, H, &h0, &h1);
    for (int64_t ow = 0; ow < g->outW; ow++) {
      int64_t w0, w1;
      dm_pool_window(g, 1, ow, W, &w0, &w1);
      float inv = 1.0f / (float)dm_pool_divisor(g, p->a.count_include_pad, oh, ow);
      if (!p->a.nhwc) {
        for (int64_t c = 0; c < C; c++) {
          const float *xc = x + c * H * W; /* (H, W) */
          float acc = is_max ? -INFINITY : 0.0f;
          for (int64_t h = h0; h < h1; h += dh)
            for (int64_t w = w0; w < w1; w += dw)
              acc = is_max ? (xc[h * W + w] > acc ? xc[h * W + w] : acc) : acc + xc[h * W + w];
          y[(c * g->outH + oh) * g->outW + ow] = is_max ? acc : acc * inv;
        }
      } else {
        float *yp = y + (oh * g->outW + ow) * C; /* (C) */
        for (int64_t c = 0; c < C; c++)
          yp[c] = is_max ? -INFINITY : 0.0f;
        for (int64_t h = h0; h < h1; h += dh)
          for (int64_t w = w0; w < w1; w += dw) {
            const float *xp = x + (h * W + w) * C;
            if (is_max)
              for (int64_t c = 0; c < C; c++)
                yp[c] = xp[c] > yp[c] ? xp[c] : yp[c];
            else
              for (int64_t c = 0; c < C; c++)
                yp[c] += xp[c];
          }
        if (!is_max)
          for (int64_t c = 0; c < C; c++)
            yp[c] *= inv;
      }
    }
  }
}

/* One image backward in FP32: dx (zeroed here) from x, y, dy. */
static void pool_grad_image(const pool_plan *p, int is_max, const float *x, const float *y,
                            const float *dy, float *dx) {
  const dm_conv_geom *g = &p->g;
  const int64_t C = g->C, H = g->H, W = g->W, dh = g->dilation[0], dw = g->dilation[1];
  memset(dx, 0, (size_t)p->xs * sizeof *dx);
  for (int64_t oh = 0; oh < g->outH; oh++) {
    int64_t h0, h1;
    dm_pool_window(g, 0, oh, H, &h0, &h1);
    for (int64_t ow = 0; ow < g->outW; ow++) {
      int64_t w0, w1;
      dm_pool_window(g, 1, ow, W, &w0, &w1);
      float inv = 1.0f / (float)dm_pool_divisor(g, p->a.count_include_pad, oh, ow);
      for (int64_t c = 0; c < C; c++) {
        int64_t yi = p->a.nhwc ? (oh * g->outW + ow) * C + c : (c * g->outH + oh) * g->outW + ow;
        float d = is_max ? dy[yi] : dy[yi] * inv;
        for (int64_t h = h0; h < h1; h += dh)
          for (int64_t w = w0; w < w1; w += dw) {
            int64_t xi = p->a.nhwc ? (h * W + w) * C + c : (c * H + h) * W + w;
            if (!is_max || x[xi] == y[yi])
              dx[xi] += d;
          }
      }
    }
  }
}

/* The images of one pool's run: X (and for the gradient Y, dY), the output (Y or dX). */
typedef struct pool_images {
  const pool_plan *p;
  int is_max;
  dm_dtype t;
  const void *x, *y, *dy;
  void *out;
} pool_images;

/* Image n of a pool; FP16 and BF16 through FP32 copies in the thread's scratch. */
static void pool_one(void *arg, void *scratch, int64_t n) {
  const pool_images *r = arg;
  const int64_t xs = r->p->xs, ys = r->p->ys;
  if (!dm_is_reduced_float(r->t)) {
    pool_image(r->p, r->is_max, (const float *)r->x + n * xs, (float *)r->out + n * ys);
    return;
  }
  float *xf = scratch, *yf = xf + xs;
  dm_widen(r->t, (const uint16_t *)r->x + n * xs, xf, (size_t)xs);
  pool_image(r->p, r->is_max, xf, yf);
  dm_narrow(r->t, yf, (uint16_t *)r->out + n * ys, (size_t)ys);
}

/* Image n of a pool's gradient, likewise. */
static void pool_grad_one(void *arg, void *scratch, int64_t n) {
  const pool_images *r = arg;
  const int64_t xs = r->p->xs, ys = r->p->ys;
  if (!dm_is_reduced_float(r->t)) {
    pool_grad_image(r->p, r->is_max, (const float *)r->x + n * xs, (const float *)r->y + n * ys,
                    (const float *)r->dy + n * ys, (float *)r->out + n * xs);
    return;
  }
  float *xf = scratch, *yf = xf + xs, *dyf = yf + ys, *dxf = dyf + ys;
  if (r->is_max) { /* AveragePool's gradient reads neither X nor Y */
    dm_widen(r->t, (const uint16_t *)r->x + n * xs, xf, (size_t)xs);
    dm_widen(r->t, (const uint16_t *)r->y + n * ys, yf, (size_t)ys);
  }
  dm_widen(r->t, (const uint16_t *)r->dy + n * ys, dyf, (size_t)ys);
  pool_grad_image(r->p, r->is_max, xf, yf, dyf, dxf);
  dm_narrow(r->t, dxf, (uint16_t *)r->out + n * xs, (size_t)xs);
}

static dm_status pool_run(dm_op_ctx *ctx) {
  pool_plan p;
  DM_TRY(pool_prepare(ctx, &p));
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  const int fp16 = dm_is_reduced_float(x->dtype);
  const pool_images r = {&p, is_max_pool(ctx), x->dtype, dm_tensor_data(x), NULL, NULL,
                         dm_tensor_mutable_data(y)};
  size_t per = fp16 ? (size_t)(p.xs + p.ys) * sizeof(float) : 0;
  return dm_parallel_rows(ctx, p.g.N, 1, per, "FP32 pooling buffers", pool_one, (void *)&r);
}

static dm_status pool_grad_run(dm_op_ctx *ctx) {
  pool_plan p;
  DM_TRY(pool_grad_prepare(ctx, &p));
  const dm_tensor *x = dm_op_input(ctx, 0), *y = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *dx = dm_op_output(ctx, 0);
  const int fp16 = dm_is_reduced_float(x->dtype);
  const pool_images r = {&p, is_max_pool(ctx), x->dtype, dm_tensor_data(x), dm_tensor_data(y),
                         dm_tensor_data(dy), dm_tensor_mutable_data(dx)};
  size_t per = fp16 ? (size_t)(2 * p.xs + 2 * p.ys) * sizeof(float) : 0;
  return dm_parallel_rows(ctx, p.g.N, 1, per, "FP32 pooling gradient buffers", pool_grad_one,
                          (void *)&r);
}

/* Schemas ------------------------------------------------------------------------ */

static const dm_arg_spec pool_args[] = {
    DM_CONV_POOL_ARG_SPECS,
    DM_POOL_ARG_SPECS,
    {"global_pooling", DM_ARG_INT, 0, "pool over the whole image (kernel = H x W)"},
    {"dilation", DM_ARG_INT, 0, "dilation (default 1)"},
    {"dilation_h", DM_ARG_INT, 0, "dilation height"},
    {"dilation_w", DM_ARG_INT, 0, "dilation width"},
    {"dilations", DM_ARG_INTS, 0, "dilations [h, w]"},
    {NULL, 0, 0, NULL},
};

static dm_status pool_init(dm_op_ctx *ctx, void **state) {
  (void)state;
  dm_conv_args a; /* argument errors at instantiation, not at the first run */
  return dm_conv_args_parse(ctx, 1, &a);
}

static dm_status max_pool_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_output(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "MaxPoolGradient", 3, in, 1, out);
}

static dm_status average_pool_gradient(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_input(g, 0), dm_grad_output(g, 0), dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "AveragePoolGradient", 3, in, 1, out);
}

#define POOL_SCHEMA(name, grad_fn, doc_)                                                    \
  {.type = name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,     \
   .args = pool_args, .precision = DM_PREC_FOLLOW, .doc = doc_, .infer = pool_infer,       \
   .cost = pool_cost, .gradient = grad_fn, .layout = DM_LAYOUT_ORDER, .layout_inputs = 0x1,  \
   .layout_outputs = 0x1}
#define POOL_GRAD_SCHEMA(name, doc_)                                                        \
  {.type = name, .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,     \
   .args = pool_args, .precision = DM_PREC_FOLLOW, .doc = doc_, .infer = pool_grad_infer,  \
   .cost = pool_grad_cost, .layout = DM_LAYOUT_ORDER, .layout_inputs = 0x7,                \
   .layout_outputs = 0x1}

static const dm_op_schema max_pool_schema =
    POOL_SCHEMA("MaxPool", max_pool_gradient, "X -> Y, the maximum over each window.");
static const dm_op_schema average_pool_schema = POOL_SCHEMA(
    "AveragePool", average_pool_gradient,
    "X -> Y, the mean over each window's input pixels (with count_include_pad, padding "
    "counted as zeros).");
static const dm_op_schema max_pool_grad_schema =
    POOL_GRAD_SCHEMA("MaxPoolGradient", "X, Y, dY -> dX; dY goes to the inputs equal to Y.");
static const dm_op_schema average_pool_grad_schema = POOL_GRAD_SCHEMA(
    "AveragePoolGradient", "X, Y, dY -> dX; dY spread evenly over each window's inputs.");

static const dm_op_schema *const schemas[] = {&max_pool_schema, &average_pool_schema,
                                              &max_pool_grad_schema, &average_pool_grad_schema,
                                              NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    { .type = "MaxPool", .device = DM_CPU, .init = pool_init, .run = pool_run},
    { .type = "AveragePool", .device = DM_CPU, .init = pool_init, .run = pool_run},
    { .type = "MaxPoolGradient", .device = DM_CPU, .init = pool_init, .run = pool_grad_run},
    { .type = "AveragePoolGradient", .device = DM_CPU, .init = pool_init, .run = pool_grad_run},
    {0},
};
const dm_op_family dm_family_pool = {schemas, kernels};
