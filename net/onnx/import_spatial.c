/* import_spatial.c: ONNX translators for ConvTranspose, Resize, Upsample and Pad, onto
 * Caffe2's ConvTranspose, ResizeNearest, UpsampleBilinear and PadImage (2-D NCHW).
 *
 * Sizes, scales and pads must be constants; what the Caffe2 ops cannot express (1-D and
 * 3-D, cubic and antialiased resizing, tf_crop_and_resize, padding of N or C, negative
 * pads, wrap) is refused with the reason. ONNX's formulas (onnx.ai's operator pages)
 * are the ops' own where the ops take ONNX's extra arguments (operators/resize.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/onnx/translate.h"

/* The string attribute `name` into buf (absent: def); 0 when it does not fit. */
static int attr_str(const Onnx__NodeProto *n, const char *name, const char *def, char *buf,
                    size_t cap) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  if (!a || !a->has_s)
    return snprintf(buf, cap, "%s", def) < (int)cap;
  if (a->s.len >= cap)
    return 0;
  memcpy(buf, a->s.data, a->s.len);
  buf[a->s.len] = '\0';
  return 1;
}

int ox_static_dims(const imp *c, const char *name, int64_t *dims, int max) {
  int64_t d[DM_MAX_DIMS];
  int r = ox_shape_of(c, name, d);
  if (r < 0 || r > max)
    return -1;
  memcpy(dims, d, (size_t)r * sizeof *d);
  return r;
}

/* The float values of a constant FLOAT (or DOUBLE) 1-D input into out[max]; *n their
 * count. */
static dm_status const_floats(imp *c, const char *name, const char *what, double *out,
                              size_t max, size_t *n) {
  const Onnx__TensorProto *t = ox_const_find(c, name);
  if (!t)
    return ox_refuse(c, "%s is not a constant", what);
  int64_t numel = ox_tensor_numel(t);
  int f32 = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  if (numel < 0 || (size_t)numel > max || t->n_dims > 1 ||
      (!f32 && t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE))
    return ox_refuse(c, "%s is not a 1-D FLOAT constant of at most %zu values", what, max);
  const uint8_t *data = NULL;
  uint8_t *owned = NULL;
  DM_TRY(ox_tensor_bytes(c, t, numel, &data, &owned));
  for (int64_t i = 0; i < numel; i++) {
    if (f32) {
      float v;
      memcpy(&v, data + 4 * i, 4);
      out[i] = v;
    } else {
      memcpy(&out[i], data + 8 * i, 8);
    }
  }
  free(owned);
  *n = (size_t)numel;
  return DM_OK;
}

/* The int values of a constant INT64/INT32 1-D input into out[max]. */
static dm_status const_ints(imp *c, const char *name, const char *what, int64_t *out,
                            size_t max, size_t *n) {
  const Onnx__TensorProto *t = ox_const_find(c, name);
  if (!t)
    return ox_refuse(c, "%s is not a constant", what);
  int64_t *v = NULL;
  DM_TRY(ox_const_ints(c, t, &v, n));
  if (*n > max) {
    free(v);
    return ox_refuse(c, "%s has %zu values (at most %zu expected)", what, *n, max);
  }
  memcpy(out, v, *n * sizeof *v);
  free(v);
  return DM_OK;
}

/* ---- ConvTranspose ---------------------------------------------------------------- */

/* ConvTranspose: kernel_shape (or W's dims), strides, dilations, group, pads or auto_pad,
 * output_padding -> adjs; output_shape -> the pads that give it (ONNX's rule: the total
 * padding split evenly, the odd one at the end for SAME_UPPER, else at the start). */
static dm_status tr_convtranspose(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0) || !ox_in_name(n, 1))
    return ox_refuse(c, "X and W are required");
  int64_t wd[8], xd[8];
  int wr = ox_static_dims(c, ox_in_name(n, 1), wd, 8), xr = ox_static_dims(c, ox_in_name(n, 0), xd, 8);
  size_t nk, ns, np, nd, nop, nos;
  const int64_t *k = ox_attr_ints(n, "kernel_shape", &nk);
  const int64_t *st = ox_attr_ints(n, "strides", &ns);
  const int64_t *p = ox_attr_ints(n, "pads", &np);
  const int64_t *d = ox_attr_ints(n, "dilations", &nd);
  const int64_t *op = ox_attr_ints(n, "output_padding", &nop);
  const int64_t *os = ox_attr_ints(n, "output_shape", &nos);
  if (wr >= 0 && wr != 4)
    return ox_refuse(c, "weights of rank %d; only 2-D transposed convolutions are supported", wr);
  if (!k && wr == 4) {
    k = wd + 2;
    nk = 2;
  }
  if (!k)
    return ox_refuse(c, "no kernel_shape and the weights' shape is unknown");
  if (nk != 2)
    return ox_refuse(c, "%zu-D; only 2-D transposed convolutions are supported", nk);
  if ((st && ns != 2) || (p && np != 4) || (d && nd != 2) || (op && nop != 2) ||
      (os && nos != 2 && nos != 4))
    return ox_refuse(c, "strides/pads/dilations/output_padding/output_shape do not match a "
                     "2-D kernel");
  if (os && nos == 4) /* the full output shape: its spatial part */
    os += 2;
  int64_t s[2] = {st ? st[0] : 1, st ? st[1] : 1}, dil[2] = {d ? d[0] : 1, d ? d[1] : 1};
  int64_t adj[2] = {op ? op[0] : 0, op ? op[1] : 0}, pads[4] = {0, 0, 0, 0};
  int64_t group = ox_attr_int(n, "group", 1);
  for (int i = 0; i < 2; i++) {
    if (s[i] < 1 || dil[i] < 1 || k[i] < 1)
      return ox_refuse(c, "a kernel, stride or dilation below 1");
    if (adj[i] < 0 || adj[i] >= s[i])
      return ox_refuse(c, "output_padding %lld not below the stride %lld (ConvTranspose's adj "
                       "must be)", (long long)adj[i], (long long)s[i]);
  }
  if (group != 1 && (dil[0] != 1 || dil[1] != 1))
    return ox_refuse(c, "dilation with group %lld", (long long)group);
  char ap[32];
  if (!attr_str(n, "auto_pad", "NOTSET", ap, sizeof ap))
    return ox_refuse(c, "an unknown auto_pad");
  int same_upper = strcmp(ap, "SAME_UPPER") == 0, same = same_upper || strcmp(ap, "SAME_LOWER") == 0;
  if (!same && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
    return ox_refuse(c, "auto_pad %s", ap);
  if (os || same) {
    if (os && p && strcmp(ap, "NOTSET") == 0)
      return ox_refuse(c, "both output_shape and pads");
    for (int i = 0; i < 2; i++) {
      int64_t dk = dil[i] * (k[i] - 1) + 1, total;
      if (os) {
        if (xr != 4)
          return ox_refuse(c, "output_shape with an input of unknown size (the pads depend "
                           "on it)");
        total = s[i] * (xd[2 + i] - 1) + adj[i] + dk - os[i];
      } else { /* SAME: the output is input * stride, whatever the input */
        total = adj[i] + dk - s[i];
      }
      /* ONNX splits with Python's floor division; a negative end pad is an extra
       * output row or column (adj), a negative start pad is not expressible */
      int64_t small = total >= 0 ? total / 2 : -((1 - total) / 2), large = total - small;
      pads[i] = same_upper ? small : large;
      pads[i + 2] = same_upper ? large : small;
      if (pads[i + 2] < 0 && adj[i] - pads[i + 2] < s[i]) {
        adj[i] -= pads[i + 2];
        pads[i + 2] = 0;
      }
    }
  } else if (p && strcmp(ap, "NOTSET") == 0) {
    memcpy(pads, p, sizeof pads); /* ONNX's order is Caffe2's: t, l, b, r */
  }
  for (int i = 0; i < 4; i++)
    if (pads[i] < 0)
      return ox_refuse(c, "negative pads");
  ox_start(b, "ConvTranspose", n, 3);
  dm_opb_arg_ints(b, "kernels", k, 2);
  dm_opb_arg_ints(b, "strides", s, 2);
  dm_opb_arg_ints(b, "pads", pads, 4);
  if (adj[0] || adj[1])
    dm_opb_arg_ints(b, "adjs", adj, 2);
  if (dil[0] != 1 || dil[1] != 1)
    dm_opb_arg_ints(b, "dilations", dil, 2);
  if (group != 1)
    dm_opb_arg_int(b, "group", group);
  c->out_rank = 4;
  return DM_OK;
}

/* ---- Resize, Upsample ------------------------------------------------------------- */

/* Emits ResizeNearest or UpsampleBilinear for mode, coordinate mode and nearest mode,
 * with scales (h, w), sizes (h, w) or both (the sizes, and the scale the coordinates
 * use). */
static dm_status emit_resize(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *mode,
                             const char *ct, const char *nm, const double *scales,
                             const int64_t *sizes) {
  int linear = strcmp(mode, "linear") == 0;
  if (!linear && strcmp(mode, "nearest") != 0)
    return ox_refuse(c, "mode '%s' (nearest and linear are supported)", mode);
  if (strcmp(ct, "asymmetric") != 0 && strcmp(ct, "align_corners") != 0 &&
      strcmp(ct, "half_pixel") != 0 && strcmp(ct, "pytorch_half_pixel") != 0 &&
      strcmp(ct, "half_pixel_symmetric") != 0)
    return ox_refuse(c, "coordinate_transformation_mode '%s' (asymmetric, align_corners, "
                     "half_pixel, pytorch_half_pixel and half_pixel_symmetric are supported)",
                     ct);
  if (!linear && strcmp(nm, "floor") != 0 && strcmp(nm, "ceil") != 0 &&
      strcmp(nm, "round_prefer_floor") != 0 && strcmp(nm, "round_prefer_ceil") != 0)
    return ox_refuse(c, "nearest_mode '%s'", nm);
  for (int i = 0; scales && i < 2; i++) /* beside sizes, a ratio that FLOAT rounds */
    if (!(scales[i] > 0) || !isfinite(scales[i]) || (!sizes && (float)scales[i] != scales[i]))
      return ox_refuse(c, "a scale of %g", scales[i]);
  for (int i = 0; sizes && i < 2; i++)
    if (sizes[i] < 1)
      return ox_refuse(c, "an output size of %lld", (long long)sizes[i]);
  ox_start(b, linear ? "UpsampleBilinear" : "ResizeNearest", n, 1);
  if (scales) {
    dm_opb_arg_float(b, "height_scale", (float)scales[0]);
    dm_opb_arg_float(b, "width_scale", (float)scales[1]);
  }
  if (sizes) {
    dm_opb_arg_int(b, "output_height", sizes[0]);
    dm_opb_arg_int(b, "output_width", sizes[1]);
  }
  dm_opb_arg_string(b, "coordinate_transformation_mode", ct);
  if (!linear)
    dm_opb_arg_string(b, "nearest_mode", nm);
  c->out_rank = 4;
  return DM_OK;
}

/* align_corners and pytorch_half_pixel divide by the resized length, which ONNX's
 * reference takes as scale * input and ONNX Runtime and PyTorch as the output size (the
 * ops' rule, operators/resize.c): they differ when scale * input is fractional, which
 * is refused where X's size shows it. */
static dm_status check_length(imp *c, const Onnx__NodeProto *n, const char *ct,
                              const double hw[2]) {
  int64_t xd[8];
  if ((strcmp(ct, "align_corners") != 0 && strcmp(ct, "pytorch_half_pixel") != 0) ||
      ox_static_dims(c, ox_in_name(n, 0), xd, 8) != 4)
    return DM_OK;
  for (int i = 0; i < 2; i++) {
    double f = hw[i] * (double)xd[2 + i];
    /* one output row sits at 0 under align_corners either way */
    if (f != floor(f) && (strcmp(ct, "align_corners") == 0) == (floor(f) > 1))
      return ox_refuse(c, "%s with a fractional resized length (%g): ONNX's reference and "
                       "ONNX Runtime differ there", ct, f);
  }
  return DM_OK;
}

/* Four scales (or two with axes) that leave N and C alone, into hw[2]. */
static dm_status spatial_scales(imp *c, const double *v, size_t nv, const int64_t *axes,
                                size_t naxes, double hw[2]) {
  if (axes) {
    if (naxes != 2 || nv != 2)
      return ox_refuse(c, "axes and scales/sizes must name H and W (2 values)");
    for (size_t i = 0; i < 2; i++) {
      int64_t a = axes[i] < 0 ? axes[i] + 4 : axes[i];
      if (a != 2 && a != 3)
        return ox_refuse(c, "resizing axis %lld (only H and W of a 4-D input)", (long long)axes[i]);
      hw[a - 2] = v[i];
    }
    if (axes[0] == axes[1] || (axes[0] < 0 ? axes[0] + 4 : axes[0]) == (axes[1] < 0 ? axes[1] + 4 : axes[1]))
      return ox_refuse(c, "repeated axes");
    return DM_OK;
  }
  if (nv != 4)
    return ox_refuse(c, "%zu scales or sizes (a 4-D NCHW input takes 4)", nv);
  if (v[0] != 1 || v[1] != 1)
    return ox_refuse(c, "resizing N or C (scales %g, %g)", v[0], v[1]);
  hw[0] = v[2], hw[1] = v[3];
  return DM_OK;
}

/* Upsample (opsets 7-9; deprecated in 10): scales attribute (7-8) or input (9-10); nearest
 * or linear, both with ONNX's asymmetric coordinates. Nearest before Resize-11 has no
 * nearest_mode: upsampling picks floor(y / scale) (what np.repeat gives, ONNX's
 * reference), downsampling is left unspecified, so refused. */
static dm_status upsample_like(imp *c, const Onnx__NodeProto *n, dm_opb *b, const char *scales_in) {
  double v[4];
  size_t nv = 0;
  if (scales_in) {
    DM_TRY(const_floats(c, scales_in, "scales", v, 4, &nv));
  } else {
    const Onnx__AttributeProto *a = ox_attr(n, "scales");
    if (!a || a->n_floats == 0 || a->n_floats > 4)
      return ox_refuse(c, "no scales");
    for (size_t i = 0; i < a->n_floats; i++)
      v[i] = a->floats[i];
    nv = a->n_floats;
  }
  double hw[2];
  DM_TRY(spatial_scales(c, v, nv, NULL, 0, hw));
  char mode[16];
  if (!attr_str(n, "mode", "nearest", mode, sizeof mode))
    return ox_refuse(c, "an unknown mode");
  if (strcmp(mode, "nearest") == 0 && (hw[0] < 1 || hw[1] < 1))
    return ox_refuse(c, "nearest downsampling before opset 11 (ONNX leaves its rounding "
                     "unspecified)");
  if (strcmp(mode, "bilinear") == 0) /* opset 7's name */
    strcpy(mode, "linear");
  return emit_resize(c, n, b, mode, "asymmetric", "floor", hw, NULL);
}

static dm_status tr_upsample(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0))
    return ox_refuse(c, "X is required");
  return upsample_like(c, n, b, c->opset >= 9 ? ox_in_name(n, 1) : NULL);
}

/* Resize: opset 10 (X, scales; asymmetric coordinates), 11+ (X, roi, scales, sizes, with
 * coordinate_transformation_mode and nearest_mode), 18+ (axes, antialias,
 * keep_aspect_ratio_policy). */
static dm_status tr_resize(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0))
    return ox_refuse(c, "X is required");
  int r = ox_rank_of(c, ox_in_name(n, 0));
  if (r >= 0 && r != 4)
    return ox_refuse(c, "a %d-D input (only 4-D NCHW is supported)", r);
  if (c->opset < 11)
    return upsample_like(c, n, b, ox_in_name(n, 1));
  char mode[32], ct[32], nm[32], kar[32];
  if (!attr_str(n, "mode", "nearest", mode, sizeof mode) ||
      !attr_str(n, "coordinate_transformation_mode", "half_pixel", ct, sizeof ct) ||
      !attr_str(n, "nearest_mode", "round_prefer_floor", nm, sizeof nm) ||
      !attr_str(n, "keep_aspect_ratio_policy", "stretch", kar, sizeof kar))
    return ox_refuse(c, "an unknown attribute value");
  if (ox_attr_int(n, "antialias", 0) != 0)
    return ox_refuse(c, "antialias");
  /* exclude_outside only changes weights of neighbours outside the input, which the
   * clamped nearest and linear kernels never read with a nonzero weight. */
  size_t naxes = 0;
  const int64_t *axes = ox_attr_ints(n, "axes", &naxes);
  const char *sc = ox_in_name(n, 2), *sz = ox_in_name(n, 3);
  if (sc) { /* an empty scales is "absent" when sizes is given */
    const Onnx__TensorProto *t = ox_const_find(c, sc);
    if (t && ox_tensor_numel(t) == 0)
      sc = NULL;
  }
  if (!!sc == !!sz)
    return ox_refuse(c, "exactly one of scales and sizes must be given");
  double hw[2];
  if (sc) {
    double v[4];
    size_t nv;
    DM_TRY(const_floats(c, sc, "scales", v, 4, &nv));
    DM_TRY(spatial_scales(c, v, nv, axes, naxes, hw));
    DM_TRY(check_length(c, n, ct, hw));
    return emit_resize(c, n, b, mode, ct, nm, hw, NULL);
  }
  int64_t iv[4];
  size_t nv;
  DM_TRY(const_ints(c, sz, "sizes", iv, 4, &nv));
  double v[4] = {0, 0, 0, 0};
  int64_t xd[8];
  if (!axes && nv == 4) {
    /* sizes names N and C too: they must be X's, which only a known shape shows */
    int xr = ox_static_dims(c, ox_in_name(n, 0), xd, 8);
    if (xr != 4 || xd[0] != iv[0] || xd[1] != iv[1])
      return ox_refuse(c, "sizes for N and C that X's known shape does not confirm");
    v[0] = v[1] = 1;
    v[2] = (double)iv[2], v[3] = (double)iv[3];
  } else {
    for (size_t i = 0; i < nv; i++)
      v[i] = (double)iv[i];
  }
  DM_TRY(spatial_scales(c, v, nv, axes, naxes, hw));
  int64_t size[2] = {(int64_t)hw[0], (int64_t)hw[1]};
  if (strcmp(kar, "stretch") == 0)
    return emit_resize(c, n, b, mode, ct, nm, NULL, size);
  /* One scale for H and W, the smaller (not_larger) or larger (not_smaller) of the
   * sizes' ratios, and sizes rounded half up from it: needs X's size. */
  if (strcmp(kar, "not_larger") != 0 && strcmp(kar, "not_smaller") != 0)
    return ox_refuse(c, "keep_aspect_ratio_policy %s", kar);
  if (!axes)
    return ox_refuse(c, "keep_aspect_ratio_policy without axes naming H and W (it would "
                     "scale N and C)");
  if (ox_static_dims(c, ox_in_name(n, 0), xd, 8) != 4 || xd[2] < 1 || xd[3] < 1)
    return ox_refuse(c, "keep_aspect_ratio_policy on an input of unknown size");
  double r0 = hw[0] / (double)xd[2], r1 = hw[1] / (double)xd[3];
  double ks = strcmp(kar, "not_larger") == 0 ? (r0 < r1 ? r0 : r1) : (r0 > r1 ? r0 : r1);
  double both[2] = {ks, ks};
  DM_TRY(check_length(c, n, ct, both));
  size[0] = (int64_t)(ks * (double)xd[2] + 0.5);
  size[1] = (int64_t)(ks * (double)xd[3] + 0.5);
  return emit_resize(c, n, b, mode, ct, nm, both, size);
}

/* ---- Pad -------------------------------------------------------------------------- */

/* Pad of a 4-D NCHW tensor on H and W: opset < 11 attributes pads, mode, value; 11+ inputs
 * pads, constant_value (a constant); 18+ axes. */
static dm_status tr_pad(imp *c, const Onnx__NodeProto *n, dm_opb *b) {
  DM_TRY(ox_need_outputs(c, n, 1));
  if (!ox_in_name(n, 0))
    return ox_refuse(c, "data is required");
  char mode[16];
  if (!attr_str(n, "mode", "constant", mode, sizeof mode) ||
      (strcmp(mode, "constant") != 0 && strcmp(mode, "reflect") != 0 && strcmp(mode, "edge") != 0))
    return ox_refuse(c, "mode other than constant, reflect, edge");
  int64_t pv[8];
  size_t np = 0;
  double value = 0;
  if (c->opset < 11) {
    const int64_t *p = ox_attr_ints(n, "pads", &np);
    if (!p || np > 8)
      return ox_refuse(c, "no pads of a 4-D tensor");
    memcpy(pv, p, np * sizeof *p);
    value = ox_attr_float(n, "value", 0.0f);
  } else {
    if (!ox_in_name(n, 1))
      return ox_refuse(c, "pads is required");
    DM_TRY(const_ints(c, ox_in_name(n, 1), "pads", pv, 8, &np));
    const char *cv = ox_in_name(n, 2);
    if (cv) {
      const Onnx__TensorProto *t = ox_const_find(c, cv);
      if (!t)
        return ox_refuse(c, "constant_value is not a constant");
      int64_t numel = ox_tensor_numel(t);
      size_t es = ox_elem_size(t->data_type);
      if (numel != 1 || es == 0)
        return ox_refuse(c, "constant_value is not a scalar of a known type");
      const uint8_t *data = NULL;
      uint8_t *owned = NULL;
      DM_TRY(ox_tensor_bytes(c, t, 1, &data, &owned));
      switch (t->data_type) {
      case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: { float f; memcpy(&f, data, 4); value = f; break; }
      case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: memcpy(&value, data, 8); break;
      case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: { int64_t i; memcpy(&i, data, 8); value = (double)i; break; }
      case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: { int32_t i; memcpy(&i, data, 4); value = i; break; }
      default:
        free(owned);
        return ox_refuse(c, "constant_value of type %s", ox_dtype_name(t->data_type));
      }
      free(owned);
      if ((double)(float)value != value && isfinite(value))
        return ox_refuse(c, "constant_value %g is not exact in FLOAT (PadImage's value)", value);
    }
  }
  int64_t full[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const char *an = c->opset >= 18 ? ox_in_name(n, 3) : NULL;
  if (an) {
    int64_t axes[4];
    size_t na;
    DM_TRY(const_ints(c, an, "axes", axes, 4, &na));
    if (np != 2 * na)
      return ox_refuse(c, "%zu pads for %zu axes", np, na);
    int r = ox_rank_of(c, ox_in_name(n, 0));
    if (r != 4)
      return ox_refuse(c, "axes on an input of %s rank (4-D NCHW is supported)",
                       r < 0 ? "unknown" : "another");
    for (size_t i = 0; i < na; i++) {
      int64_t a = axes[i] < 0 ? axes[i] + 4 : axes[i];
      if (a < 0 || a > 3)
        return ox_refuse(c, "axis %lld", (long long)axes[i]);
      full[a] = pv[i];
      full[a + 4] = pv[i + na];
    }
  } else {
    if (np != 8)
      return ox_refuse(c, "%zu pads (a 4-D NCHW tensor takes 8)", np);
    memcpy(full, pv, sizeof full);
  }
  if (full[0] || full[1] || full[4] || full[5])
    return ox_refuse(c, "padding of N or C (PadImage pads H and W)");
  int64_t tlbr[4] = {full[2], full[3], full[6], full[7]};
  for (int i = 0; i < 4; i++)
    if (tlbr[i] < 0)
      return ox_refuse(c, "negative pads (cropping)");
  ox_start(b, "PadImage", n, 1);
  dm_opb_arg_ints(b, "pads", tlbr, 4);
  if (strcmp(mode, "constant") != 0)
    dm_opb_arg_string(b, "mode", mode);
  if (value != 0)
    dm_opb_arg_float(b, "value", (float)value);
  c->out_rank = 4;
  return DM_OK;
}

const ox_translator ox_ops_spatial[] = {
    {"ConvTranspose", tr_convtranspose},
    {"Resize", tr_resize},
    {"Upsample", tr_upsample},
    {"Pad", tr_pad},
    {NULL, NULL},
};
