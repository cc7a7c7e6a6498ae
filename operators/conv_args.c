/* conv_args.c: parsing and checking the Conv/pool arguments, and output sizes
 * (see conv_args.h). */
#include "conv_args.h"
#include "unary_math.h"
#include "common.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Larger values are certainly a mistake and would overflow the size arithmetic below. */
#define ARG_MAX ((int64_t)1 << 30)
/* Likewise an input's spatial dim (even in a zero-element X, 0 x C x 2^62 x 1): with the
 * arguments below ARG_MAX, the padded sizes and window arithmetic stay within int64. */
#define SPATIAL_MAX ((int64_t)1 << 40)

/* One (h, w) pair given as `one` | `name_h` + `name_w` | `list` [h, w]. */
static dm_status read_pair(dm_op_ctx *ctx, const char *one, const char *name_h,
                           const char *name_w, const char *list, int64_t dflt, int *given,
                           int64_t out[2]) {
  int has_one = dm_op_has_arg(ctx, one), has_h = dm_op_has_arg(ctx, name_h),
      has_w = dm_op_has_arg(ctx, name_w), has_list = dm_op_has_arg(ctx, list);
  if (has_one + (has_h || has_w) + has_list > 1)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "give '%s', '%s'/'%s' or '%s', not more than one of them", one, name_h,
                       name_w, list);
  out[0] = out[1] = dflt;
  *given = has_one || has_h || has_w || has_list;
  if (has_one) {
    out[0] = out[1] = dm_op_arg_int(ctx, one, dflt);
  } else if (has_h || has_w) {
    if (!(has_h && has_w))
      return dm_op_error(ctx, DM_ERR_INVALID, "'%s' and '%s' must be given together", name_h,
                         name_w);
    out[0] = dm_op_arg_int(ctx, name_h, dflt);
    out[1] = dm_op_arg_int(ctx, name_w, dflt);
  } else if (has_list) {
    size_t n = 0;
    const int64_t *v = dm_op_arg_ints(ctx, list, &n);
    if (n != 2)
      return dm_op_error(ctx, n == 1 || n == 3 ? DM_ERR_UNSUPPORTED : DM_ERR_INVALID,
                         "'%s' has %zu values; only 2-D (h, w) is supported", list, n);
    out[0] = v[0];
    out[1] = v[1];
  }
  return DM_OK;
}

static dm_status check_range(dm_op_ctx *ctx, const char *what, const int64_t *v, int n,
                             int64_t lo) {
  for (int i = 0; i < n; i++)
    if (v[i] < lo || v[i] > ARG_MAX)
      return dm_op_error(ctx, DM_ERR_INVALID, "%s %lld is out of range (%lld to %lld)", what,
                         (long long)v[i], (long long)lo, (long long)ARG_MAX);
  return DM_OK;
}

static dm_status read_pads(dm_op_ctx *ctx, int64_t pads[4], int *given) {
  static const char *const side[4] = {"pad_t", "pad_l", "pad_b", "pad_r"};
  int has_pad = dm_op_has_arg(ctx, "pad"), has_list = dm_op_has_arg(ctx, "pads"), n_side = 0;
  for (int i = 0; i < 4; i++)
    n_side += dm_op_has_arg(ctx, side[i]);
  if (has_pad + (n_side > 0) + has_list > 1)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "give 'pad', 'pad_t'/'pad_l'/'pad_b'/'pad_r' or 'pads', not more than "
                       "one of them");
  *given = has_pad || n_side || has_list;
  for (int i = 0; i < 4; i++)
    pads[i] = has_pad ? dm_op_arg_int(ctx, "pad", 0) : 0;
  if (n_side) {
    /* Caffe2 silently ignores an incomplete set; saying so is kinder. */
    if (n_side != 4)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "'pad_t', 'pad_l', 'pad_b' and 'pad_r' must be given together");
    for (int i = 0; i < 4; i++)
      pads[i] = dm_op_arg_int(ctx, side[i], 0);
  } else if (has_list) {
    size_t n = 0;
    const int64_t *v = dm_op_arg_ints(ctx, "pads", &n);
    if (n != 4)
      return dm_op_error(ctx, n == 2 || n == 6 ? DM_ERR_UNSUPPORTED : DM_ERR_INVALID,
                         "'pads' has %zu values; 2-D takes 4 (t, l, b, r)", n);
    memcpy(pads, v, 4 * sizeof *pads);
  }
  return check_range(ctx, "pad", pads, 4, 0);
}

dm_status dm_conv_args_parse(dm_op_ctx *ctx, int is_pool, dm_conv_args *a) {
  memset(a, 0, sizeof *a);
  int kernel_given, stride_given, dil_given, pad_given;
  a->global_pooling = is_pool && dm_op_arg_int(ctx, "global_pooling", 0) != 0;
  DM_TRY(read_pair(ctx, "kernel", "kernel_h", "kernel_w", "kernels", 0, &kernel_given,
                   a->kernel));
  DM_TRY(read_pair(ctx, "stride", "stride_h", "stride_w", "strides", 1, &stride_given,
                   a->stride));
  DM_TRY(read_pair(ctx, "dilation", "dilation_h", "dilation_w", "dilations", 1, &dil_given,
                   a->dilation));
  DM_TRY(read_pads(ctx, a->pads, &pad_given));
  if (a->global_pooling) {
    /* The kernel is the input's spatial size; Caffe2 refuses pads and strides too. */
    if (stride_given && (a->stride[0] != 1 || a->stride[1] != 1))
      return dm_op_error(ctx, DM_ERR_INVALID, "global_pooling takes no stride (got %lldx%lld)",
                         (long long)a->stride[0], (long long)a->stride[1]);
    for (int i = 0; i < 4; i++)
      if (a->pads[i])
        return dm_op_error(ctx, DM_ERR_INVALID, "global_pooling takes no padding");
    a->kernel[0] = a->kernel[1] = 0;
  } else {
    if (!kernel_given)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "the kernel size is required: 'kernel', 'kernel_h'/'kernel_w' or "
                         "'kernels'%s",
                         is_pool ? " (or global_pooling)" : "");
    DM_TRY(check_range(ctx, "kernel", a->kernel, 2, 1));
  }
  DM_TRY(check_range(ctx, "stride", a->stride, 2, 1));
  DM_TRY(check_range(ctx, "dilation", a->dilation, 2, 1));
  int dilated = a->dilation[0] != 1 || a->dilation[1] != 1;

  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  if (strcasecmp(order, "NCHW") == 0)
    a->nhwc = 0;
  else if (strcasecmp(order, "NHWC") == 0)
    a->nhwc = 1;
  else
    return dm_op_error(ctx, DM_ERR_INVALID, "'order' is '%s'; expected NCHW or NHWC", order);

  int64_t lp = dm_op_arg_int(ctx, "legacy_pad", DM_LEGACY_NOTSET);
  if (lp < DM_LEGACY_NOTSET || lp > DM_LEGACY_CAFFE_POOLING)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "legacy_pad %lld is not one of 0 (NOTSET), 1 (VALID), 2 (SAME), "
                       "3 (CAFFE_LEGACY_POOLING)",
                       (long long)lp);
  a->legacy_pad = (int)lp;
  if ((lp == DM_LEGACY_VALID || lp == DM_LEGACY_SAME) && dm_op_has_arg(ctx, "pads"))
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "legacy_pad %s computes the padding; 'pads' must not be given",
                       lp == DM_LEGACY_VALID ? "VALID" : "SAME");
  if (lp >= DM_LEGACY_SAME && dilated)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "legacy_pad %lld does not support dilation",
                       (long long)lp);

  if (is_pool) {
    a->ceil_mode = dm_op_arg_int(ctx, "ceil_mode", 0) != 0;
    a->count_include_pad = dm_op_arg_int(ctx, "count_include_pad", 0) != 0;
    if (a->ceil_mode && (lp != DM_LEGACY_NOTSET || a->global_pooling))
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "ceil_mode takes explicit pads (legacy_pad 0, no global_pooling)");
    if (dilated && a->global_pooling)
      return dm_op_error(ctx, DM_ERR_INVALID, "global_pooling takes no dilation");
    a->group = 1;
  } else {
    a->group = dm_op_arg_int(ctx, "group", 1);
    DM_TRY(check_range(ctx, "group", &a->group, 1, 1));
    if (a->group != 1 && dilated)
      return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                         "dilation %lldx%lld needs group 1 (group is %lld), as in Caffe2",
                         (long long)a->dilation[0], (long long)a->dilation[1],
                         (long long)a->group);
  }
  return DM_OK;
}

/* Output size and pads of one spatial dim (Caffe2's ComputeSizeAndPad). */
static void size_and_pad(int legacy, int64_t in, int64_t k, int64_t s, int64_t d,
                         int64_t *head, int64_t *tail, int64_t *out) {
  int64_t dk = d * (k - 1) + 1;
  switch (legacy) {
  case DM_LEGACY_VALID:
    *head = *tail = 0;
    *out = (in - dk) / s + 1;
    break;
  case DM_LEGACY_SAME: {
    int64_t target = (in + s - 1) / s;
    int64_t need = (target - 1) * s + k - in;
    if (need < 0) /* stride > kernel: no padding needed */
      need = 0;
    *head = need / 2;
    *tail = need - *head;
    *out = (in + need - dk) / s + 1;
    break;
  }
  case DM_LEGACY_CAFFE_POOLING: {
    /* Caffe rounds the output size up, then drops a last window that would start in the
     * padding; the tail pad grows to make the standard formula agree. */
    int64_t span = in + 2 * *head - k;
    int64_t o = (span + s - 1) / s + 1;
    if (*head > 0 && (o - 1) * s >= in + *head)
      o--;
    int64_t standard = span / s + 1;
    *tail = *head + s * (o - standard);
    *out = o;
    break;
  }
  default:
    *out = (in + *head + *tail - dk) / s + 1;
  }
}

dm_status dm_conv_geometry(dm_op_ctx *ctx, const dm_conv_args *a, const dm_tensor *x,
                           int is_pool, dm_conv_geom *g) {
  char xs[96];
  if (x->ndim != 4)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s; %s takes a 4-D %s input",
                       dm_shape_str(x, xs, sizeof xs), dm_op_type(ctx), a->nhwc ? "NHWC" : "NCHW");
  g->N = x->dims[0];
  g->C = x->dims[a->nhwc ? 3 : 1];
  g->H = x->dims[a->nhwc ? 1 : 2];
  g->W = x->dims[a->nhwc ? 2 : 3];
  if (g->C == 0 || g->H == 0 || g->W == 0)
    return dm_op_error(ctx, DM_ERR_SHAPE, "X is %s (%s): it has no channels or pixels",
                       dm_shape_str(x, xs, sizeof xs), a->nhwc ? "NHWC" : "NCHW");
  int64_t in[2] = {g->H, g->W};
  if (g->H > SPATIAL_MAX || g->W > SPATIAL_MAX)
    return dm_op_error(ctx, DM_ERR_LIMIT, "X is %s (%s): a spatial dim above 2^40 is beyond "
                       "%s's size arithmetic", dm_shape_str(x, xs, sizeof xs),
                       a->nhwc ? "NHWC" : "NCHW", dm_op_type(ctx));
  for (int i = 0; i < 2; i++) {
    g->kernel[i] = a->global_pooling ? in[i] : a->kernel[i];
    g->stride[i] = a->stride[i];
    g->dilation[i] = a->dilation[i];
    g->pads[i] = a->pads[i];
    g->pads[i + 2] = a->pads[i + 2];
  }
  /* A global pool's kernel is the input's size (up to 2^40), dilated up to 2^30 times. */
  for (int i = 0; i < 2; i++) {
    int64_t dk;
    if (__builtin_mul_overflow(g->dilation[i], g->kernel[i] - 1, &dk) || dk > SPATIAL_MAX)
      return dm_op_error(ctx, DM_ERR_LIMIT, "kernel %lld dilated %lld times is beyond 2^40",
                         (long long)g->kernel[i], (long long)g->dilation[i]);
  }
  for (int i = 0; i < 2; i++) {
    int64_t dk = g->dilation[i] * (g->kernel[i] - 1) + 1;
    /* SAME pads whatever is needed; CAFFE pooling pads the head on both sides. */
    int64_t padded = a->legacy_pad == DM_LEGACY_VALID          ? in[i]
                     : a->legacy_pad == DM_LEGACY_CAFFE_POOLING ? in[i] + 2 * g->pads[i]
                     : a->legacy_pad == DM_LEGACY_SAME          ? dk
                                                                : in[i] + g->pads[i] + g->pads[i + 2];
    if (padded < dk) {
      int vp = a->legacy_pad == DM_LEGACY_VALID;
      int64_t t = vp ? 0 : a->pads[0], l = vp ? 0 : a->pads[1];
      int64_t b = vp ? 0 : a->legacy_pad == DM_LEGACY_CAFFE_POOLING ? t : a->pads[2];
      int64_t r = vp ? 0 : a->legacy_pad == DM_LEGACY_CAFFE_POOLING ? l : a->pads[3];
      char dil[64] = "";
      if (g->dilation[0] != 1 || g->dilation[1] != 1)
        snprintf(dil, sizeof dil, " (dilated to %lldx%lld)",
                 (long long)(g->dilation[0] * (g->kernel[0] - 1) + 1),
                 (long long)(g->dilation[1] * (g->kernel[1] - 1) + 1));
      return dm_op_error(ctx, DM_ERR_SHAPE,
                         "kernel %lldx%lld%s does not fit the padded input %lldx%lld (pads t%lld "
                         "l%lld b%lld r%lld)",
                         (long long)g->kernel[0], (long long)g->kernel[1], dil,
                         (long long)(g->H + t + b), (long long)(g->W + l + r), (long long)t,
                         (long long)l, (long long)b, (long long)r);
    }
  }
  size_and_pad(a->legacy_pad, g->H, g->kernel[0], g->stride[0], g->dilation[0], &g->pads[0],
               &g->pads[2], &g->outH);
  size_and_pad(a->legacy_pad, g->W, g->kernel[1], g->stride[1], g->dilation[1], &g->pads[1],
               &g->pads[3], &g->outW);
  memcpy(g->count_pads, g->pads, sizeof g->pads);
  if (a->ceil_mode) {
    /* ONNX's (and PyTorch's) rule: ceil((in + pt + pb - k) / s) + 1 windows, less one
     * when the last would start past the top padding and the input; the tail pad grows
     * to hold the last window, but count_include_pad counts only the given pads. */
    int64_t *out[2] = {&g->outH, &g->outW};
    for (int i = 0; i < 2; i++) {
      int64_t dk = g->dilation[i] * (g->kernel[i] - 1) + 1;
      int64_t span = in[i] + g->pads[i] + g->pads[i + 2] - dk;
      int64_t o = (span + g->stride[i] - 1) / g->stride[i] + 1;
      if ((o - 1) * g->stride[i] >= in[i] + g->pads[i])
        o--;
      int64_t tail = (o - 1) * g->stride[i] + dk - in[i] - g->pads[i];
      if (tail > g->pads[i + 2])
        g->pads[i + 2] = tail;
      *out[i] = o;
    }
  }
  if (is_pool) {
    /* An empty window has no maximum and no average (Caffe2 would divide by zero). */
    int64_t out[2] = {g->outH, g->outW};
    for (int i = 0; i < 2; i++)
      if (g->pads[i] >= g->dilation[i] * (g->kernel[i] - 1) + 1 ||
          (out[i] - 1) * g->stride[i] - g->pads[i] >= in[i])
        return dm_op_error(ctx, DM_ERR_INVALID,
                           "a %s pooling window would lie entirely in the padding (kernel %lld, "
                           "stride %lld, pads %lld and %lld, input %lld)",
                           i ? "horizontal" : "vertical", (long long)g->kernel[i],
                           (long long)g->stride[i], (long long)g->pads[i],
                           (long long)g->pads[i + 2], (long long)in[i]);
    /* Dilated, a window may also skip over a small input: each needs a tap inside. */
    for (int i = 0; i < 2 && (g->dilation[0] != 1 || g->dilation[1] != 1); i++)
      for (int64_t o = 0; o < out[i]; o++) {
        int64_t lo, hi;
        dm_pool_window(g, i, o, in[i], &lo, &hi);
        if (lo >= hi)
          return dm_op_error(ctx, DM_ERR_INVALID,
                             "a %s pooling window (kernel %lld dilated %lld times) has no "
                             "tap inside the input of %lld",
                             i ? "horizontal" : "vertical", (long long)g->kernel[i],
                             (long long)g->dilation[i], (long long)in[i]);
      }
  }
  return DM_OK;
}

void dm_conv_out_dims(const dm_conv_args *a, const dm_conv_geom *g, int64_t channels,
                      int64_t dims[4]) {
  dims[0] = g->N;
  if (a->nhwc) {
    dims[1] = g->outH, dims[2] = g->outW, dims[3] = channels;
  } else {
    dims[1] = channels, dims[2] = g->outH, dims[3] = g->outW;
  }
}

/* W against X and the arguments (4-D, groups dividing both channel counts, C/group and the
 * kernel size in the order's places); sets M and the channels per group in and out. */
static dm_status check_filter(dm_op_ctx *ctx, const dm_conv_args *a, const dm_conv_geom *g,
                              const dm_tensor *x, const dm_tensor *w, int64_t *M, int64_t *Cg,
                              int64_t *Mg) {
  const char *order = a->nhwc ? "NHWC" : "NCHW";
  char xs[96], ws[96];
  if (w->ndim != 4)
    return dm_op_error(ctx, DM_ERR_SHAPE, "W is %s; Conv takes a 4-D filter (%s)",
                       dm_shape_str(w, ws, sizeof ws),
                       a->nhwc ? "M, kH, kW, C/group" : "M, C/group, kH, kW");
  int64_t grp = a->group;
  *M = w->dims[0];
  if (g->C % grp != 0)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "group %lld does not divide the %lld input channels of X (%s)",
                       (long long)grp, (long long)g->C, dm_shape_str(x, xs, sizeof xs));
  if (*M % grp != 0 || *M == 0)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "group %lld does not divide the %lld output channels of W (%s)",
                       (long long)grp, (long long)*M, dm_shape_str(w, ws, sizeof ws));
  *Cg = g->C / grp;
  *Mg = *M / grp;
  int64_t wc = w->dims[a->nhwc ? 3 : 1], wkh = w->dims[a->nhwc ? 1 : 2],
          wkw = w->dims[a->nhwc ? 2 : 3];
  if (wc != *Cg)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "W is %s (%s), but X (%s) has %lld channels in %lld group(s): W's "
                       "C/group must be %lld, not %lld",
                       dm_shape_str(w, ws, sizeof ws), order, dm_shape_str(x, xs, sizeof xs),
                       (long long)g->C, (long long)grp, (long long)*Cg, (long long)wc);
  if (wkh != g->kernel[0] || wkw != g->kernel[1])
    return dm_op_error(ctx, DM_ERR_SHAPE, "W is %s (%s), but the kernel is %lldx%lld",
                       dm_shape_str(w, ws, sizeof ws), order, (long long)g->kernel[0],
                       (long long)g->kernel[1]);
  return DM_OK;
}

dm_status dm_conv_check_dtypes(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                               const dm_tensor *b) {
  int r16 = dm_is_reduced_float(x->dtype);
  if ((x->dtype != DM_FLOAT && !r16) || w->dtype != x->dtype ||
      (b && b->dtype != x->dtype && !(r16 && b->dtype == DM_FLOAT)))
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X, W%s are %s, %s%s%s; expected all FLOAT, or FLOAT16 (BFLOAT16) X and "
                       "W with a b of the same dtype or FLOAT",
                       b ? ", b" : "", dm_dtype_name(x->dtype), dm_dtype_name(w->dtype),
                       b ? ", " : "", b ? dm_dtype_name(b->dtype) : "");
  return DM_OK;
}

int dm_conv_epilogue_of(int64_t t, int n, dm_conv_epilogue *e) {
  const dm_conv_act relu = DM_CONV_ACT_RELU, none = DM_CONV_ACT_NONE;
  if (t == DM_CONV_FUSE_NONE && n <= 3)
    *e = (dm_conv_epilogue){.has_bias = n == 3, .sum = -1, .act = none, .unary = DM_UN_NONE};
  else if (t == DM_CONV_FUSE_RELU && n <= 3)
    *e = (dm_conv_epilogue){.has_bias = n == 3, .sum = -1, .act = relu, .unary = DM_UN_NONE};
  else if ((t == DM_CONV_FUSE_SUM || t == DM_CONV_FUSE_SUM_RELU) && n >= 3)
    *e = (dm_conv_epilogue){.has_bias = n == 4, .sum = n - 1,
                            .act = t == DM_CONV_FUSE_SUM_RELU ? relu : none,
                            .unary = DM_UN_NONE};
  else
    return 0;
  return 1;
}

dm_status dm_conv_fusion_epilogue(dm_op_ctx *ctx, dm_conv_epilogue *e) {
  int64_t t = dm_op_arg_int(ctx, "fusion_type", 0);
  int n = dm_op_num_inputs(ctx);
  if (t == DM_CONV_FUSE_NONE || !dm_conv_epilogue_of(t, n, e)) {
    if (t == DM_CONV_FUSE_RELU)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "fusion_type 1 (conv + relu) takes X, W, [b]; got %d inputs", n);
    if (t == DM_CONV_FUSE_SUM || t == DM_CONV_FUSE_SUM_RELU)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "fusion_type %lld (conv + sum) takes X, W, [b], S; got %d inputs",
                         (long long)t, n);
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "fusion_type is %lld; ConvFusion takes 1 (conv + relu), 2 (conv + "
                       "sum) or 3 (conv + sum + relu)", (long long)t);
  }
  const char *act = dm_op_arg_string(ctx, "activation", NULL);
  if (!act)
    return DM_OK;
  if (e->act == DM_CONV_ACT_NONE)
    return dm_op_error(ctx, DM_ERR_INVALID, "activation '%s' with fusion_type %lld, which has "
                       "none (1 and 3 do)", act, (long long)t);
  if (strcmp(act, "Relu") == 0)
    return DM_OK;
  if (strcmp(act, "Swish") == 0) {
    e->act = DM_CONV_ACT_SWISH;
    return DM_OK;
  }
  e->unary = dm_unary_kind_of(act, 0);
  if (e->unary == DM_UN_NONE)
    return dm_op_error(ctx, DM_ERR_INVALID, "activation '%s' is not Relu, Swish or an op of "
                       "the unary family (Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid, "
                       "HardSwish, Erf, Sqrt, Gelu)", act);
  e->act = DM_CONV_ACT_UNARY;
  e->p = dm_unary_params_of(ctx, e->unary);
  return dm_unary_check_params(ctx, e->unary, &e->p);
}

int dm_conv_fusable_activation(const char *type) {
  static const char *const acts[] = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh",
                                     "HardSigmoid", "HardSwish", "Gelu"};
  for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
    if (type && strcmp(type, acts[i]) == 0)
      return 1;
  return 0;
}

/* The arguments, X's geometry, W against them, and Y's dims. */
static dm_status conv_shape(dm_op_ctx *ctx, const dm_tensor *x, const dm_tensor *w,
                            dm_conv_shape *s) {
  DM_TRY(dm_conv_args_parse(ctx, 0, &s->a));
  DM_TRY(dm_conv_geometry(ctx, &s->a, x, 0, &s->g));
  DM_TRY(check_filter(ctx, &s->a, &s->g, x, w, &s->M, &s->Cg, &s->Mg));
  dm_conv_out_dims(&s->a, &s->g, s->M, s->ydims);
  return DM_OK;
}

/* S has Y's shape and dtype; Y is no input but S, and when it is S no other input shares
 * its storage (the sum reads S element by element before writing Y there). */
static dm_status check_sum(dm_op_ctx *ctx, const dm_conv_epilogue *e, const dm_conv_shape *s) {
  const dm_tensor *x = dm_op_input(ctx, 0), *sv = dm_op_input(ctx, e->sum);
  const dm_tensor *y = dm_op_output(ctx, 0);
  const int64_t *d = s->ydims;
  char ss[96];
  if (sv->dtype != x->dtype || sv->ndim != 4 || memcmp(sv->dims, d, sizeof s->ydims) != 0)
    return dm_op_error(ctx, DM_ERR_SHAPE,
                       "S is %s %s, but the convolution gives %s %lldx%lldx%lldx%lld: S "
                       "must have Y's shape and dtype",
                       dm_dtype_name(sv->dtype), dm_shape_str(sv, ss, sizeof ss),
                       dm_dtype_name(x->dtype), (long long)d[0], (long long)d[1],
                       (long long)d[2], (long long)d[3]);
  for (int i = 0; i < dm_op_num_inputs(ctx); i++) {
    if (i == e->sum)
      continue;
    if (dm_op_input(ctx, i) == y)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "Y is input %d too; only S (input %d) may be Y's blob", i, e->sum);
    if (y == sv && dm_tensors_alias(y, dm_op_input(ctx, i)))
      return dm_op_error(ctx, DM_ERR_INVALID, "Y is S's blob and shares storage with input %d",
                         i);
  }
  return DM_OK;
}

dm_status dm_conv_check_forward(dm_op_ctx *ctx, const dm_conv_epilogue *e, dm_conv_shape *s) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  const dm_tensor *b = e->has_bias ? dm_op_input(ctx, 2) : NULL;
  DM_TRY(dm_conv_check_dtypes(ctx, x, w, b));
  DM_TRY(conv_shape(ctx, x, w, s));
  char bs[96], ws[96];
  if (b && (b->ndim != 1 || b->dims[0] != s->M))
    return dm_op_error(ctx, DM_ERR_SHAPE, "b is %s, but W is %s: b must hold M = %lld values",
                       dm_shape_str(b, bs, sizeof bs), dm_shape_str(w, ws, sizeof ws),
                       (long long)s->M);
  return e->sum >= 0 ? check_sum(ctx, e, s) : DM_OK;
}

dm_status dm_conv_check_backward(dm_op_ctx *ctx, dm_conv_shape *s, int *has_db, int *has_dx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  if (!dm_is_float_or_reduced(x->dtype) || w->dtype != x->dtype || dy->dtype != x->dtype)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "X, W, dY are %s, %s, %s; expected all FLOAT, all FLOAT16 or all "
                       "BFLOAT16",
                       dm_dtype_name(x->dtype), dm_dtype_name(w->dtype), dm_dtype_name(dy->dtype));
  int no_bias = dm_op_arg_int(ctx, "no_bias", 0) != 0, n_out = dm_op_num_outputs(ctx);
  if (no_bias && n_out == 3)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "no_bias is set, so the outputs are dW and dX; got 3 outputs");
  if (!no_bias && n_out == 1)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "without no_bias the outputs are dW, db and optionally dX; got 1 output");
  *has_db = !no_bias;
  *has_dx = n_out == (no_bias ? 2 : 3);
  DM_TRY(conv_shape(ctx, x, w, s));
  const int64_t *d = s->ydims;
  char ds[96];
  if (dy->ndim != 4 || memcmp(dy->dims, d, sizeof s->ydims) != 0)
    return dm_op_error(ctx, DM_ERR_SHAPE, "dY is %s, but Conv's Y is %lldx%lldx%lldx%lld",
                       dm_shape_str(dy, ds, sizeof ds), (long long)d[0], (long long)d[1],
                       (long long)d[2], (long long)d[3]);
  return DM_OK;
}
