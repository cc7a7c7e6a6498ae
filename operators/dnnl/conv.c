/* conv.c: the oneDNN engine's Conv, ConvFusion and ConvGradient (2-D, NCHW, groups,
 * dilation, every Caffe2 pad form; FLOAT and BFLOAT16).
 *
 * Layouts: X and Y are described to the primitives as "any", so oneDNN picks its fast
 * blocked formats (nChw16c); X is fed as it arrives when it already has the chosen
 * layout (the previous engine op wrote it so), and Y is written in the chosen one. W is
 * reordered into the primitive's weights layout once, in its blob (dm_dnnl_relayout); a
 * grouped W has 5-D weights (G, M/G, C/G, kH, kW) in oneDNN, recorded on the 4-D blob
 * as the same bytes viewed 4-D when oneDNN can describe them so (else W is reordered
 * into scratch every run). b is plain; with BFLOAT16 X and W, b is BFLOAT16 or FLOAT,
 * as the reference accepts, and oneDNN takes either.
 *
 * Arguments, shape checks and their messages are the reference's (operators/conv.c,
 * conv_fusion.c), through conv_args.h; arities and fusion types the reference rejects
 * are refused here, so the reference kernel reports them. NHWC is refused (the
 * reference runs it). A batch of no images gives an empty Y and dX, and zero dW and db.
 *
 * ConvFusion (inference, operators/conv_fusion.c) is Conv with oneDNN post-ops: a sum
 * (Y's buffer holds S in Y's layout before the primitive runs and is accumulated onto)
 * and then the activation's eltwise post-ops (relu, or the one `activation` names:
 * clip_v2 for Clip, logistic, swish, hardswish, ...; Erf has none and is refused). Two
 * differences from the reference: oneDNN's relu maps NaN to 0, where the reference's
 * passes NaN through (as Relu does; see eltwise.c), and its transcendental activations
 * are its own approximations (a few ulps from glibc's). A fused inference op is where
 * that is acceptable: an overflow there is not checked by mixed precision's loss scaling,
 * which only watches training. The tests use finite inputs and derived tolerances.
 *
 * ConvGradient: backward-data (dX) and backward-weights (dW, db) primitives, made with
 * the forward-training descriptor as their hint. W is reordered into scratch for the
 * backward-data primitive, never in its blob: the forward pass wants W in its own
 * layout, and moving the blob back and forth would cost two reorders a step instead of
 * one. dW is written in the layout the backward-weights primitive chooses ("any": its
 * blocked ABcd16b16a, the one its JIT kernel writes). Asking for plain OIHW instead makes
 * oneDNN 2.6 pick its GEMM-based kernel, with X and dY in plain NCHW too, which is more
 * than twice as slow (docs/engines-and-layouts.md, "Measured choices"). The optimizer (a
 * reference kernel) reads dW plain, which converts it once; a user's fetch does the same. db and dX: db plain, dX in the chosen layout (blocked, for the
 * previous layer's engine ops).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "operators/conv_args.h"
#include "operators/unary_math.h"
#include "dnnl_common.h"
#include "kernels.h"
#include "settings.h"

/* ---- shared checks ---------------------------------------------------------------- */

/* A scratch buffer of n bytes in b (kept between runs). */
static dm_status scratch(dm_dnnl_buf *b, size_t n, void **out) {
  DM_TRY(dm_dnnl_buf_reserve(b, n));
  *out = b->data;
  return DM_OK;
}

/* The geometry of one convolution, checked by the reference's checks (conv_args.h). */
typedef dm_conv_shape conv_geo;

/* oneDNN's convolution descriptors for p: strides, dilations (oneDNN counts 0 for
 * none), paddings; X, W, Y descriptions in format "any" (W 5-D when grouped). */
typedef struct conv_descs {
  dnnl_dims_t strides, dilates, pad_l, pad_r;
  dnnl_memory_desc_t src, wei, dst;
} conv_descs;

static dm_status descs_make(const conv_geo *p, dnnl_data_type_t dt, conv_descs *d) {
  const dm_conv_geom *g = &p->g;
  for (int i = 0; i < 2; i++) {
    d->strides[i] = g->stride[i];
    d->dilates[i] = g->dilation[i] - 1;
  }
  d->pad_l[0] = g->pads[0], d->pad_l[1] = g->pads[1];
  d->pad_r[0] = g->pads[2], d->pad_r[1] = g->pads[3];
  dnnl_dims_t xd = {g->N, g->C, g->H, g->W}, yd, wd;
  for (int i = 0; i < 4; i++)
    yd[i] = p->ydims[i];
  int grouped = p->a.group > 1, wn = grouped ? 5 : 4;
  if (grouped) {
    wd[0] = p->a.group, wd[1] = p->Mg, wd[2] = p->Cg, wd[3] = g->kernel[0], wd[4] = g->kernel[1];
  } else {
    wd[0] = p->M, wd[1] = p->Cg, wd[2] = g->kernel[0], wd[3] = g->kernel[1];
  }
  DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(&d->src, 4, xd, dt, dnnl_format_tag_any), "describing X");
  DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(&d->dst, 4, yd, dt, dnnl_format_tag_any), "describing Y");
  DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(&d->wei, wn, wd, dt, dnnl_format_tag_any), "describing W");
  return DM_OK;
}

/* The 4-D description of a 5-D grouped weights layout `five` (same bytes), for W's blob;
 * 0 when oneDNN cannot express it 4-D. A 4-D `five` is returned as it is. */
static int weights_as_4d(const dnnl_memory_desc_t *five, const int64_t *wdims,
                         dnnl_memory_desc_t *four) {
  if (five->ndims == 4) {
    *four = *five;
    return 1;
  }
  dnnl_dims_t d = {wdims[0], wdims[1], wdims[2], wdims[3]};
  return dnnl_memory_desc_reshape(four, five, 4, d) == dnnl_success;
}

/* W's 4-D data plain: its own bytes, or (W blocked) reordered into buf; *md describes it. */
static dm_status weights_plain(const dm_tensor *w, dm_dnnl_buf *buf, dnnl_memory_desc_t *md,
                               const void **data) {
  DM_TRY(dm_dnnl_md_of(w, md));
  *data = dm_tensor_raw_data(w);
  if (dm_dnnl_md_is_plain(md))
    return DM_OK;
  dnnl_memory_desc_t plain;
  void *p;
  DM_TRY(dm_dnnl_plain_md(4, w->dims, w->dtype, &plain));
  DM_TRY(scratch(buf, dnnl_memory_desc_get_size(&plain), &p));
  DM_TRY(dm_dnnl_reorder(md, *data, &plain, p));
  *md = plain;
  *data = p;
  return DM_OK;
}

/* W's data in the primitive's weights layout `want` (4-D, or 5-D when grouped): in W's
 * blob (relayout: later runs read it as it is) when `in_place` and oneDNN can describe
 * the layout 4-D, else reordered into scratch (through plain when W's own layout has no
 * 5-D view). */
static dm_status weights_in(dm_tensor *w, const dnnl_memory_desc_t *want, int in_place,
                            dm_dnnl_buf *buf, dm_dnnl_buf *buf2, void **data) {
  dnnl_memory_desc_t four, have, view;
  if (weights_as_4d(want, w->dims, &four)) {
    if (in_place) {
      DM_TRY(dm_dnnl_relayout(w, &four));
      *data = dm_tensor_raw_data(w);
      return DM_OK;
    }
    return dm_dnnl_input(w, &four, buf, data);
  }
  const void *src;
  DM_TRY(weights_plain(w, buf2, &have, &src));
  DM_DNNL_TRY(dnnl_memory_desc_reshape(&view, &have, want->ndims, want->dims),
              "viewing W by groups");
  DM_TRY(scratch(buf, dnnl_memory_desc_get_size(want), data));
  return dm_dnnl_reorder(&view, src, want, *data);
}

/* W's data transformed into the Winograd layout `want`, in buf: oneDNN reorders only
 * plain weights into it, so a blocked W goes through plain (in buf2) first. */
static dm_status weights_winograd(const dm_tensor *w, const dnnl_memory_desc_t *want,
                                  dm_dnnl_buf *buf, dm_dnnl_buf *buf2, void **data) {
  dnnl_memory_desc_t have;
  const void *src;
  DM_TRY(weights_plain(w, buf2, &have, &src));
  DM_TRY(scratch(buf, dnnl_memory_desc_get_size(want), data));
  return dm_dnnl_reorder(&have, src, want, *data);
}

/* The plain description of t's dims and dtype (a key: independent of t's layout). */
static dm_status plain_of(const dm_tensor *t, dnnl_memory_desc_t *md) {
  return dm_dnnl_plain_md(t->ndim, t->dims, t->dtype, md);
}

/* ---- Conv and ConvFusion ---------------------------------------------------------- */

typedef struct fwd_state {
  dm_dnnl_prim p;
  dnnl_memory_desc_t src, wei, bias, dst; /* as the primitive wants them */
  dm_dnnl_buf xbuf, wbuf, wbuf2, bbuf, sbuf;
  /* W's derived copy in wbuf (Winograd's, or grouped weights no 4-D view of the blob
   * describes), made from this storage at this version (NULL: none kept). Winograd's
   * cannot live in W's blob: oneDNN has no way back from them to plain. */
  const void *derived_of;
  uint64_t derived_version;
} fwd_state;

/* Winograd for 3x3, stride-1, undilated, ungrouped FP32 convolutions with outputs this
 * large. Inference ops (ConvFusion: the fusion pass makes them for `run`) take oneDNN's
 * F(2x2,3x3) inference kernel, the weights transformed once and kept; from 14x14 up.
 * Training ops (Conv, ConvGradient) take its F(4x4,3x3) kernels, which transform the
 * weights at every call (they change every step), so they pay from 28x28 up; both about
 * halve the direct kernels' time on ResNet-50's 3x3 layers (docs/engines-and-layouts.md,
 * "Measured choices"). The transforms reorder the sums (exact in real arithmetic; within the
 * direct kernel's FP32 bound in the tests). DEMITASSE_NO_WINOGRAD (set, any value, read at
 * init: settings.h) keeps every convolution direct. */
static int wants_winograd(const conv_geo *p, dm_dtype dtype, int inference) {
  return dtype == DM_FLOAT && p->g.kernel[0] == 3 && p->g.kernel[1] == 3 &&
         p->g.stride[0] == 1 && p->g.stride[1] == 1 && p->g.dilation[0] == 1 &&
         p->g.dilation[1] == 1 && p->a.group == 1 &&
         p->g.outH * p->g.outW >= (inference ? 14 * 14 : 28 * 28) &&
         !dm_dnnl_settings_get()->no_winograd;
}

static int is_inference_op(const dm_op_ctx *ctx) {
  return strcmp(dm_op_type(ctx), "ConvFusion") == 0;
}

/* An op state of `size` zeroed bytes, once the arguments parse (argument errors at
 * instantiation, as the reference reports them). */
static dm_status state_new(dm_op_ctx *ctx, size_t size, void **state) {
  dm_conv_args a;
  DM_TRY(dm_conv_args_parse(ctx, 0, &a));
  *state = calloc(1, size);
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void bufs_free(dm_dnnl_buf *const *bufs, size_t n) {
  for (size_t i = 0; i < n; i++)
    dm_dnnl_buf_free(bufs[i]);
}

static dm_status fwd_init(dm_op_ctx *ctx, void **state) {
  return state_new(ctx, sizeof(fwd_state), state);
}

static void fwd_fini(void *state) {
  fwd_state *s = state;
  dm_dnnl_prim_reset(&s->p);
  dm_dnnl_buf *const bufs[] = {&s->xbuf, &s->wbuf, &s->wbuf2, &s->bbuf, &s->sbuf};
  bufs_free(bufs, sizeof bufs / sizeof *bufs);
  free(s);
}

/* The epilogue of this Conv or ConvFusion (conv_args.h); 0 for a form the reference
 * rejects (it reports it). */
static int epilogue_of(const dm_op_ctx *ctx, dm_conv_epilogue *e) {
  int fusion = strcmp(dm_op_type(ctx), "ConvFusion") == 0;
  int64_t t = fusion ? dm_op_arg_int(ctx, "fusion_type", 0) : DM_CONV_FUSE_NONE;
  return (!fusion || t != DM_CONV_FUSE_NONE) && dm_conv_epilogue_of(t, dm_op_num_inputs(ctx), e);
}

/* The eltwise post-ops computing e's activation, into po (n of them: HardSigmoid is a
 * linear then a clip); -1 for one oneDNN 2.6 has no algorithm for (Erf). */
typedef struct post_eltwise {
  dnnl_alg_kind_t alg;
  float alpha, beta;
} post_eltwise;

static int act_post_ops(const dm_conv_epilogue *e, post_eltwise *po) {
  switch (e->act) {
  case DM_CONV_ACT_NONE: return 0;
  case DM_CONV_ACT_RELU: po[0] = (post_eltwise){dnnl_eltwise_relu, 0, 0}; return 1;
  case DM_CONV_ACT_SWISH: po[0] = (post_eltwise){dnnl_eltwise_swish, 1, 0}; return 1;
  case DM_CONV_ACT_UNARY: break;
  }
  const dm_unary_params *p = &e->p;
  switch (e->unary) {
  case DM_UN_Sigmoid: po[0] = (post_eltwise){dnnl_eltwise_logistic, 0, 0}; return 1;
  case DM_UN_Tanh: po[0] = (post_eltwise){dnnl_eltwise_tanh, 0, 0}; return 1;
  case DM_UN_LeakyRelu: po[0] = (post_eltwise){dnnl_eltwise_relu, p->alpha, 0}; return 1;
  case DM_UN_Clip: po[0] = (post_eltwise){dnnl_eltwise_clip_v2, p->lo, p->hi}; return 1;
  case DM_UN_HardSwish: po[0] = (post_eltwise){dnnl_eltwise_hardswish, 0, 0}; return 1;
  case DM_UN_Sqrt: po[0] = (post_eltwise){dnnl_eltwise_sqrt, 0, 0}; return 1;
  case DM_UN_Gelu:
    po[0] = (post_eltwise){p->fast != 0 ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf, 0, 0};
    return 1;
  case DM_UN_HardSigmoid:
    po[0] = (post_eltwise){dnnl_eltwise_linear, p->alpha, p->beta};
    po[1] = (post_eltwise){dnnl_eltwise_clip_v2, 0, 1};
    return 2;
  default: return -1;
  }
}

static int fwd_supports(const dm_op_ctx *ctx) {
  dm_conv_epilogue e;
  if (!epilogue_of(ctx, &e))
    return dm_op_refuse(ctx, "not a fusion_type and input count ConvFusion takes");
  /* An activation without a post-op (Erf; a name the reference will reject) is left to
   * the reference kernel, which words any error. */
  const char *act = dm_op_arg_string(ctx, "activation", NULL);
  post_eltwise po[2];
  const dm_conv_epilogue named = {.act = DM_CONV_ACT_UNARY, .unary = act ? dm_unary_kind_of(act, 0)
                                                                         : DM_UN_NONE};
  if (act && strcmp(act, "Relu") != 0 && strcmp(act, "Swish") != 0 &&
      act_post_ops(&named, po) < 0)
    return dm_op_refuse(ctx, "oneDNN has no post-op for the activation %s", act);
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    if (!dm_dnnl_dtype_ok(ctx, i, DM_DNNL_KIND(DM_DNNL_CONV)))
      return 0;
  return dm_dnnl_nchw_order(ctx);
}

static dm_status fwd_run(dm_op_ctx *ctx) {
  fwd_state *s = dm_op_state(ctx);
  dm_conv_epilogue e;
  if (!epilogue_of(ctx, &e))
    return dm_op_error(ctx, DM_ERR_INVALID, "ConvFusion: a fusion_type and input count it "
                                            "does not take (the engine refused it)");
  if (strcmp(dm_op_type(ctx), "ConvFusion") == 0) /* the activation, in the reference's words */
    DM_TRY(dm_conv_fusion_epilogue(ctx, &e));
  post_eltwise acts[2];
  const int n_acts = act_post_ops(&e, acts);
  if (n_acts < 0) { /* supports() refuses these: the reference kernel runs them */
    dm_op_refuse(ctx, "oneDNN has no post-op for this activation");
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "oneDNN has no post-op for this activation");
  }
  const int fused = n_acts > 0 || e.sum >= 0;
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *w = (dm_tensor *)dm_op_input(ctx, 1); /* its layout may change, not its values */
  const dm_tensor *b = e.has_bias ? dm_op_input(ctx, 2) : NULL;
  const dm_tensor *sv = e.sum >= 0 ? dm_op_input(ctx, e.sum) : NULL;
  dm_tensor *y = dm_op_output(ctx, 0);
  conv_geo p;
  DM_TRY(dm_conv_check_forward(ctx, &e, &p)); /* Y may be S: the sum reads Y's buffer */
  if (p.g.N == 0) /* (dm_conv_geometry refuses C = 0 and empty images) */
    return dm_op_set_output(ctx, 0, x->dtype, 4, p.ydims);

  dnnl_memory_desc_t key[3];
  DM_TRY(plain_of(x, &key[0]));
  DM_TRY(plain_of(w, &key[1]));
  if (b)
    DM_TRY(plain_of(b, &key[2]));
  if (!dm_dnnl_prim_matches(&s->p, b ? 3 : 2, key)) {
    dnnl_data_type_t dt;
    dm_dnnl_dtype(x->dtype, &dt);
    conv_descs d;
    DM_TRY(descs_make(&p, dt, &d));
    /* Winograd where it pays (else, or where oneDNN has no Winograd kernel, direct). */
    const int infer = is_inference_op(ctx);
    int wino = wants_winograd(&p, x->dtype, infer);
    dnnl_convolution_desc_t cd;
  describe:
    DM_DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(
                    &cd, wino && infer ? dnnl_forward_inference : dnnl_forward_training,
                    wino ? dnnl_convolution_winograd : dnnl_convolution_direct, &d.src,
                    &d.wei, b ? &key[2] : NULL, &d.dst, d.strides, d.dilates, d.pad_l,
                    d.pad_r),
                "describing a convolution");
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dm_status st = DM_OK;
    if (fused) {
      st = dm_dnnl_status(dnnl_primitive_attr_create(&attr), "creating attributes");
      if (st == DM_OK)
        st = dm_dnnl_status(dnnl_post_ops_create(&po), "creating post-ops");
      if (st == DM_OK && sv)
        st = dm_dnnl_status(dnnl_post_ops_append_sum(po, 1.0f), "adding the sum post-op");
      for (int k = 0; st == DM_OK && k < n_acts; k++)
        st = dm_dnnl_status(dnnl_post_ops_append_eltwise(po, 1.0f, acts[k].alg, acts[k].alpha,
                                                         acts[k].beta),
                            "adding the activation's post-op");
      if (st == DM_OK)
        st = dm_dnnl_status(dnnl_primitive_attr_set_post_ops(attr, po), "setting post-ops");
    }
    if (st == DM_OK)
      st = dm_dnnl_prim_make(&s->p, &cd, attr, NULL, b ? 3 : 2, key);
    if (po)
      dnnl_post_ops_destroy(po);
    if (attr)
      dnnl_primitive_attr_destroy(attr);
    if (st != DM_OK && wino) {
      dm_error_clear();
      wino = 0;
      goto describe;
    }
    DM_TRY(st);
    s->derived_of = NULL;
    DM_TRY(dm_dnnl_query_md(s->p.pd, dnnl_query_src_md, 0, &s->src));
    DM_TRY(dm_dnnl_query_md(s->p.pd, dnnl_query_weights_md, 0, &s->wei));
    DM_TRY(dm_dnnl_query_md(s->p.pd, dnnl_query_dst_md, 0, &s->dst));
    if (b)
      DM_TRY(dm_dnnl_query_md(s->p.pd, dnnl_query_weights_md, 1, &s->bias));
  }
  /* Every input read (reordered where needed) before Y is resized, since Y may share
   * storage with one of them. */
  void *xd, *wd, *bd = NULL, *sd = NULL, *yd;
  DM_TRY(dm_dnnl_input(x, &s->src, &s->xbuf, &xd));
  /* W in its blob where its blob can hold the primitive's layout; else (Winograd's, or a
   * grouped one no 4-D view describes) a copy in wbuf, made again only when W changes */
  dnnl_memory_desc_t four;
  const int wino = s->wei.format_kind == dnnl_format_kind_wino;
  if (!wino && weights_as_4d(&s->wei, w->dims, &four)) {
    DM_TRY(weights_in(w, &s->wei, 1, &s->wbuf, &s->wbuf2, &wd));
  } else if (s->derived_of == w->storage && s->derived_version == dm_tensor_version(w)) {
    wd = s->wbuf.data; /* W unchanged since its transform */
  } else {
    s->derived_of = NULL;
    if (wino)
      DM_TRY(weights_winograd(w, &s->wei, &s->wbuf, &s->wbuf2, &wd));
    else
      DM_TRY(weights_in(w, &s->wei, 1, &s->wbuf, &s->wbuf2, &wd));
    s->derived_of = w->storage;
    s->derived_version = dm_tensor_version(w);
  }
  if (b)
    DM_TRY(dm_dnnl_input(b, &s->bias, &s->bbuf, &bd));
  if (sv)
    DM_TRY(dm_dnnl_input(sv, &s->dst, &s->sbuf, &sd));
  DM_TRY(dm_dnnl_output(y, x->dtype, 4, p.ydims, &s->dst, &yd));
  if (sd && sd != yd) /* the sum post-op accumulates onto Y's buffer: S there first */
    memcpy(yd, sd, dnnl_memory_desc_get_size(&s->dst));
  dm_dnnl_arg args[4] = {{DNNL_ARG_SRC, &s->src, xd}, {DNNL_ARG_WEIGHTS, &s->wei, wd},
                         {DNNL_ARG_DST, &s->dst, yd}, {DNNL_ARG_BIAS, &s->bias, bd}};
  return dm_dnnl_execute(s->p.prim, b ? 4 : 3, args);
}

/* ---- ConvGradient ----------------------------------------------------------------- */

typedef struct grad_state {
  dm_dnnl_prim bwd_w, bwd_d;           /* dW (and db); dX (unless not wanted) */
  dnnl_memory_desc_t w_src, w_ddst, w_dwei, w_dbias; /* backward-weights layouts */
  dnnl_memory_desc_t d_wei, d_ddst, d_dsrc;          /* backward-data layouts */
  dm_dnnl_buf xbuf, dybuf, dybuf2, wbuf, wbuf2, dwbuf;
} grad_state;

static dm_status grad_init(dm_op_ctx *ctx, void **state) {
  return state_new(ctx, sizeof(grad_state), state);
}

static void grad_fini(void *state) {
  grad_state *s = state;
  dm_dnnl_prim_reset(&s->bwd_w);
  dm_dnnl_prim_reset(&s->bwd_d);
  dm_dnnl_buf *const bufs[] = {&s->xbuf, &s->dybuf, &s->dybuf2, &s->wbuf, &s->wbuf2, &s->dwbuf};
  bufs_free(bufs, sizeof bufs / sizeof *bufs);
  free(s);
}

/* The arities the reference rejects are refused, so that it reports them. */
static int grad_supports(const dm_op_ctx *ctx) {
  int no_bias = dm_op_arg_int(ctx, "no_bias", 0) != 0, n_out = dm_op_num_outputs(ctx);
  if ((no_bias && n_out == 3) || (!no_bias && n_out == 1))
    return dm_op_refuse(ctx, "outputs that do not match no_bias");
  /* dX needs backward data; the forward is the backward primitives' hint. */
  const unsigned kinds = DM_DNNL_KIND(DM_DNNL_CONV) | DM_DNNL_KIND(DM_DNNL_CONV_BWD_WEIGHTS) |
                         DM_DNNL_KIND(DM_DNNL_CONV_BWD_DATA);
  for (int i = 0; i < 3; i++)
    if (!dm_dnnl_dtype_ok(ctx, i, kinds))
      return 0;
  return dm_dnnl_nchw_order(ctx);
}

/* dW = 0, db = 0 and an empty dX, for a batch of no images. */
static dm_status grad_nothing(dm_op_ctx *ctx, const conv_geo *p, dm_tensor *dw, dm_tensor *db,
                              dm_tensor *dx) {
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1);
  DM_TRY(dm_op_set_output(ctx, 0, x->dtype, 4, w->dims));
  memset(dm_tensor_mutable_data(dw), 0, (size_t)w->numel * dm_dtype_size(x->dtype));
  if (db) {
    DM_TRY(dm_op_set_output(ctx, 1, x->dtype, 1, &p->M));
    memset(dm_tensor_mutable_data(db), 0, (size_t)p->M * dm_dtype_size(x->dtype));
  }
  return dx ? dm_op_set_output(ctx, dm_op_num_outputs(ctx) - 1, x->dtype, 4, x->dims) : DM_OK;
}

static dm_status grad_build(grad_state *s, const conv_geo *p, dm_dtype dtype, int has_db,
                            int has_dx, const dnnl_memory_desc_t *key, int wino) {
  const dnnl_alg_kind_t alg = wino ? dnnl_convolution_winograd : dnnl_convolution_direct;
  dnnl_data_type_t dt;
  dm_dnnl_dtype(dtype, &dt);
  conv_descs d;
  DM_TRY(descs_make(p, dt, &d));
  dnnl_memory_desc_t bias;
  DM_TRY(dm_dnnl_plain_md(1, &p->M, dtype, &bias));
  dnnl_convolution_desc_t fd, wd, dd;
  DM_DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(
                  &fd, dnnl_forward_training, alg, &d.src, &d.wei,
                  has_db ? &bias : NULL, &d.dst, d.strides, d.dilates, d.pad_l, d.pad_r),
              "describing a convolution");
  DM_DNNL_TRY(dnnl_dilated_convolution_backward_weights_desc_init(
                  &wd, alg, &d.src, &d.wei, has_db ? &bias : NULL, &d.dst,
                  d.strides, d.dilates, d.pad_l, d.pad_r),
              "describing a convolution's backward weights");
  DM_DNNL_TRY(dnnl_dilated_convolution_backward_data_desc_init(
                  &dd, alg, &d.src, &d.wei, &d.dst, d.strides, d.dilates,
                  d.pad_l, d.pad_r),
              "describing a convolution's backward data");
  dnnl_primitive_desc_t hint = NULL;
  dnnl_engine_t e = dm_dnnl_engine();
  if (!e)
    return dm_error(DM_ERR_UNSUPPORTED, "oneDNN: no CPU engine on this machine");
  DM_DNNL_TRY(dnnl_primitive_desc_create(&hint, &fd, NULL, e, NULL), "creating a convolution");
  dm_status st = dm_dnnl_prim_make(&s->bwd_w, &wd, NULL, hint, 3, key);
  if (st == DM_OK && has_dx)
    st = dm_dnnl_prim_make(&s->bwd_d, &dd, NULL, hint, 3, key);
  dnnl_primitive_desc_destroy(hint);
  DM_TRY(st);
  DM_TRY(dm_dnnl_query_md(s->bwd_w.pd, dnnl_query_src_md, 0, &s->w_src));
  DM_TRY(dm_dnnl_query_md(s->bwd_w.pd, dnnl_query_diff_dst_md, 0, &s->w_ddst));
  DM_TRY(dm_dnnl_query_md(s->bwd_w.pd, dnnl_query_diff_weights_md, 0, &s->w_dwei));
  if (has_db)
    DM_TRY(dm_dnnl_query_md(s->bwd_w.pd, dnnl_query_diff_weights_md, 1, &s->w_dbias));
  if (has_dx) {
    DM_TRY(dm_dnnl_query_md(s->bwd_d.pd, dnnl_query_weights_md, 0, &s->d_wei));
    DM_TRY(dm_dnnl_query_md(s->bwd_d.pd, dnnl_query_diff_dst_md, 0, &s->d_ddst));
    DM_TRY(dm_dnnl_query_md(s->bwd_d.pd, dnnl_query_diff_src_md, 0, &s->d_dsrc));
  }
  return DM_OK;
}

static dm_status grad_run(dm_op_ctx *ctx) {
  grad_state *s = dm_op_state(ctx);
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *w = (dm_tensor *)dm_op_input(ctx, 1); /* its layout may change, not its values */
  const dm_tensor *dy = dm_op_input(ctx, 2);
  int has_db, has_dx, n_out = dm_op_num_outputs(ctx);
  conv_geo p;
  DM_TRY(dm_conv_check_backward(ctx, &p, &has_db, &has_dx));
  if (x->dtype == DM_FLOAT16) /* (supports refuses it; the reference runs it) */
    return dm_op_error(ctx, DM_ERR_TYPE, "the oneDNN engine runs FLOAT and BFLOAT16, not %s",
                       dm_dtype_name(x->dtype));
  for (int o = 0; o < n_out; o++)
    for (int i = 0; i < 3; i++)
      if (dm_op_output(ctx, o) == dm_op_input(ctx, i))
        return dm_op_error(ctx, DM_ERR_INVALID, "output %d is input %d too", o, i);
  dm_tensor *dw = dm_op_output(ctx, 0), *db = has_db ? dm_op_output(ctx, 1) : NULL;
  dm_tensor *dx = has_dx ? dm_op_output(ctx, n_out - 1) : NULL;
  if (p.g.N == 0)
    return grad_nothing(ctx, &p, dw, db, dx);

  dnnl_memory_desc_t key[3];
  DM_TRY(plain_of(x, &key[0]));
  DM_TRY(plain_of(w, &key[1]));
  DM_TRY(plain_of(dy, &key[2]));
  if (!dm_dnnl_prim_matches(&s->bwd_w, 3, key) ||
      (has_dx && !dm_dnnl_prim_matches(&s->bwd_d, 3, key))) {
    /* Winograd where it pays (see wants_winograd), else, or where oneDNN has none, direct */
    const int wino = wants_winograd(&p, x->dtype, 0);
    dm_status st = grad_build(s, &p, x->dtype, has_db, has_dx, key, wino);
    if (st != DM_OK && wino) {
      dm_error_clear();
      st = grad_build(s, &p, x->dtype, has_db, has_dx, key, 0);
    }
    DM_TRY(st);
  }
  /* Inputs first (outputs may share storage with them), each in the layout its primitive
   * wants: dY once per distinct layout. */
  void *xd, *dyw, *dyd = NULL, *wd = NULL, *dwd, *dbd = NULL, *dxd = NULL;
  DM_TRY(dm_dnnl_input(x, &s->w_src, &s->xbuf, &xd));
  DM_TRY(dm_dnnl_input(dy, &s->w_ddst, &s->dybuf, &dyw));
  if (has_dx) {
    if (dnnl_memory_desc_equal(&s->d_ddst, &s->w_ddst))
      dyd = dyw;
    else
      DM_TRY(dm_dnnl_input(dy, &s->d_ddst, &s->dybuf2, &dyd));
    DM_TRY(weights_in(w, &s->d_wei, 0, &s->wbuf, &s->wbuf2, &wd));
  }
  /* dW in the chosen layout, viewed 4-D; a grouped layout oneDNN cannot view so goes
   * through scratch into plain dW. */
  dnnl_memory_desc_t dw4, plain4, plain5;
  int direct = weights_as_4d(&s->w_dwei, w->dims, &dw4);
  if (direct) {
    DM_TRY(dm_dnnl_output(dw, w->dtype, 4, w->dims, &dw4, &dwd));
  } else {
    DM_TRY(scratch(&s->dwbuf, dnnl_memory_desc_get_size(&s->w_dwei), &dwd));
  }
  if (db)
    DM_TRY(dm_dnnl_output(db, dy->dtype, 1, &p.M, &s->w_dbias, &dbd));
  dm_dnnl_arg wargs[5] = {{DNNL_ARG_SRC, &s->w_src, xd},
                          {DNNL_ARG_DIFF_DST, &s->w_ddst, dyw},
                          {DNNL_ARG_DIFF_WEIGHTS, &s->w_dwei, dwd},
                          {DNNL_ARG_DIFF_BIAS, &s->w_dbias, dbd}};
  DM_TRY(dm_dnnl_execute(s->bwd_w.prim, db ? 4 : 3, wargs));
  if (!direct) {
    void *out;
    DM_TRY(dm_dnnl_plain_md(4, w->dims, w->dtype, &plain4));
    DM_DNNL_TRY(dnnl_memory_desc_reshape(&plain5, &plain4, s->w_dwei.ndims, s->w_dwei.dims),
                "viewing dW by groups");
    DM_TRY(dm_dnnl_output(dw, w->dtype, 4, w->dims, &plain4, &out));
    DM_TRY(dm_dnnl_reorder(&s->w_dwei, dwd, &plain5, out));
  }
  if (!dx)
    return DM_OK;
  DM_TRY(dm_dnnl_output(dx, x->dtype, 4, x->dims, &s->d_dsrc, &dxd));
  dm_dnnl_arg dargs[3] = {{DNNL_ARG_DIFF_DST, &s->d_ddst, dyd},
                          {DNNL_ARG_WEIGHTS, &s->d_wei, wd},
                          {DNNL_ARG_DIFF_SRC, &s->d_dsrc, dxd}};
  return dm_dnnl_execute(s->bwd_d.prim, 3, dargs);
}

const dm_kernel_def dm_dnnl_conv_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "Conv", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = fwd_init, .run = fwd_run, .fini = fwd_fini,
     .supports = fwd_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "ConvGradient", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = grad_init, .run = grad_run, .fini = grad_fini,
     .supports = grad_supports},
    {0},
};

/* Registered only where the ConvFusion schema exists (register.c). */
const dm_kernel_def dm_dnnl_conv_fusion_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "ConvFusion", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = fwd_init, .run = fwd_run, .fini = fwd_fini,
     .supports = fwd_supports},
    {0},
};
