/* fc.c: the oneDNN engine's FC, FCFusion (FC + relu) and FCGradient (FLOAT, BFLOAT16),
 * on inner-product primitives.
 *
 * The reference's semantics (operators/fc.c): X flattened to M x K at `axis`, W to N x K
 * at `axis_w`, b of N elements (FLOAT, or BFLOAT16 beside BFLOAT16 X and W); Y keeps
 * X's leading dims and appends N, plain. Its shape and dtype checks are the reference's
 * own (dm_fc_infer, dm_fc_geometry), so the errors read the same.
 *
 * X. A 4-D X flattened at axis 1 that arrives blocked (the output of a convolution or a
 * pooling, nChw16c) with more rows than W (M > N: training batches) is fed as it is: the
 * primitive sees a 4-D source in that layout and 4-D weights (N, C, H, W), a view of W's
 * N x K row-major bytes (the same bytes), so X is never converted to plain. Any other X
 * is the plain 2-D M x K (a blocked one converted into a scratch buffer, leaving X's own
 * layout to its other readers): at inference batches X is the smaller, and converting it
 * beats reordering W at every run (ResNet-50's classifier: 8 x 2048 against 1000 x 2048).
 *
 * W. With a 2-D X the primitives read W as it is, plain N x K (oneDNN's GEMM-based inner
 * product takes it so): no reorder, no copy, and faster than "any" weights (brgemm)
 * reordered into scratch per run (docs/engines-and-layouts.md, "Measured choices"). W is not reordered in place into the
 * forward's preferred blocked layout: in training the optimizer (a reference kernel)
 * reads W plain every step, so the blob would be converted both ways each step, each
 * time a second copy of W alive at once (the planned step peak of tests/net/
 * test_memory_pass grew by one W). With a blocked 4-D X the forward asks for the
 * weights layout it likes ("any") for the 4-D view and W is reordered into a scratch
 * buffer of the op's on every run (one pass over W, small beside the product for the
 * batch sizes that matter).
 *
 * FCFusion (fusion_type 1, operators/conv_fusion.c) is FC with an eltwise relu post-op.
 * oneDNN's relu maps NaN to 0 where the reference's passes NaN on: the one difference,
 * for NaN outputs only. BFLOAT16: oneDNN accumulates in FP32, adds the bias and applies
 * the relu before the one rounding, as the reference (relu and rounding commute).
 *
 * FCGradient: dW (W's shape and dtype), db (N, dY's dtype), [dX] (X's shape), all plain;
 * backward-weights and backward-data primitives on the plain 2-D views of X and dY. db is
 * the reference's loop (a double accumulator, one rounding), not oneDNN's FP32 diff_bias:
 * the reference's accuracy, and one pass over dY, small beside the products.
 */
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "dnnl_common.h"
#include "kernels.h"
#include "operators/fc.h"

typedef struct fc_state {
  dm_dnnl_prim fwd;      /* FC: forward; FCGradient: backward data */
  dm_dnnl_prim bwd_w;    /* FCGradient: backward weights */
  dm_dnnl_buf xbuf, wbuf, dybuf;
} fc_state;

static dm_status fc_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  *state = calloc(1, sizeof(fc_state));
  return *state ? DM_OK : DM_NOMEM("a oneDNN op state");
}

static void fc_fini(void *state) {
  fc_state *s = state;
  dm_dnnl_prim_reset(&s->fwd);
  dm_dnnl_prim_reset(&s->bwd_w);
  dm_dnnl_buf_free(&s->xbuf);
  dm_dnnl_buf_free(&s->wbuf);
  dm_dnnl_buf_free(&s->dybuf);
  free(s);
}

static int inputs_ok(const dm_op_ctx *ctx, unsigned kinds) {
  for (int i = 0; i < 3; i++)
    if (!dm_dnnl_dtype_ok(ctx, i, kinds))
      return 0;
  return 1;
}

static int fc_supports(const dm_op_ctx *ctx) { return inputs_ok(ctx, DM_DNNL_KIND(DM_DNNL_IP)); }

static int fc_grad_supports(const dm_op_ctx *ctx) {
  return inputs_ok(ctx, DM_DNNL_KIND(DM_DNNL_IP) | DM_DNNL_KIND(DM_DNNL_IP_BWD_WEIGHTS) |
                            DM_DNNL_KIND(DM_DNNL_IP_BWD_DATA));
}

static int fc_fusion_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "fusion_type", 0) != 1)
    return dm_op_refuse(ctx, "the oneDNN FCFusion runs fusion_type 1 (FC + relu) only");
  return fc_supports(ctx);
}

/* A plain description of dims (ndim of them) in oneDNN's type dt. */
static dm_status plain_md(int ndim, const int64_t *dims, dnnl_data_type_t dt,
                          dnnl_memory_desc_t *md) {
  static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd};
  dnnl_dims_t d;
  for (int i = 0; i < ndim; i++)
    d[i] = dims[i];
  DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(md, ndim, d, dt, tags[ndim]), "describing a matrix");
  return DM_OK;
}

static dm_status any_md(int ndim, const int64_t *dims, dnnl_data_type_t dt,
                        dnnl_memory_desc_t *md) {
  dnnl_dims_t d;
  for (int i = 0; i < ndim; i++)
    d[i] = dims[i];
  DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(md, ndim, d, dt, dnnl_format_tag_any),
              "describing the weights");
  return DM_OK;
}

static dnnl_data_type_t dt_of(dm_dtype t) {
  dnnl_data_type_t dt = dnnl_f32;
  dm_dnnl_dtype(t, &dt);
  return dt;
}

/* X's data as the 2-D plain M x K: its own buffer when plain, else converted into
 * scratch. */
static dm_status plain_2d(const dm_tensor *t, int64_t rows, int64_t cols, dm_dnnl_buf *scratch,
                          dnnl_memory_desc_t *md, void **data) {
  dnnl_memory_desc_t own;
  DM_TRY(dm_dnnl_plain_md(t->ndim, t->dims, t->dtype, &own));
  DM_TRY(dm_dnnl_input(t, &own, scratch, data));
  int64_t d[2] = {rows, cols};
  return plain_md(2, d, dt_of(t->dtype), md);
}

/* W's data in layout `want`: as it is when it already is, else reordered into scratch
 * (from W's bytes viewed as `want`'s dims when those are not W's own: row-major, the
 * same bytes). */
static dm_status weights_as(const dm_tensor *w, const dnnl_memory_desc_t *want,
                            dm_dnnl_buf *scratch, void **data) {
  int own = w->ndim == want->ndims;
  for (int i = 0; own && i < w->ndim; i++)
    own = w->dims[i] == want->dims[i];
  if (own)
    return dm_dnnl_input(w, want, scratch, data);
  /* A view of other dims: W's plain bytes (converted on access if blocked) under the
   * plain description of want's dims. */
  if (!dm_tensor_data(w))
    return dm_error(DM_ERR_NOMEM, "converting W '%s' to plain", w->blob ? w->blob : "?");
  dm_tensor view = *w;
  view.ndim = want->ndims;
  for (int i = 0; i < want->ndims; i++)
    view.dims[i] = want->dims[i];
  return dm_dnnl_input(&view, want, scratch, data);
}

/* Y = b in each row (+ relu) when K is 0: no product to run. */
static dm_status bias_only(const dm_tensor *b, dm_tensor *y, int64_t M, int64_t N, int relu) {
  float *row = malloc((size_t)N * sizeof *row);
  if (!row)
    return DM_NOMEM("an FC row");
  dm_load_f32(b->dtype, dm_tensor_data(b), 0, N, row);
  for (int64_t j = 0; relu && j < N; j++)
    row[j] = row[j] < 0 ? 0 : row[j];
  void *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < M; i++)
    dm_store_f32(y->dtype, py, i * N, N, row);
  free(row);
  return DM_OK;
}

static dm_status relu_attr(dnnl_primitive_attr_t *attr) {
  dnnl_post_ops_t po;
  *attr = NULL;
  DM_DNNL_TRY(dnnl_primitive_attr_create(attr), "creating attributes");
  dnnl_status_t st = dnnl_post_ops_create(&po);
  if (st == dnnl_success) {
    st = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
    if (st == dnnl_success)
      st = dnnl_primitive_attr_set_post_ops(*attr, po);
    dnnl_post_ops_destroy(po);
  }
  if (st != dnnl_success) {
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
  }
  return dm_dnnl_status(st, "adding a relu post-op");
}

static dm_status fc_forward(dm_op_ctx *ctx, int relu) {
  fc_state *s = dm_op_state(ctx);
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *b = dm_op_input(ctx, 2);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_tensors_alias(y, x) || dm_tensors_alias(y, w) || dm_tensors_alias(y, b))
    dm_tensor_reset(y); /* a view of an input (Reshape): write Y into fresh storage */
  DM_TRY(dm_fc_infer(ctx)); /* the reference's checks; Y resized, plain */
  dm_fc_dims d;
  DM_TRY(dm_fc_geometry(ctx, x, w, &d));
  if (d.M == 0 || d.N == 0)
    return DM_OK;
  if (d.K == 0)
    return bias_only(b, y, d.M, d.N, relu);
  dnnl_data_type_t dt = dt_of(x->dtype);
  dnnl_memory_desc_t xmd, bmd, ymd, wview;
  void *xdata;
  DM_TRY(dm_dnnl_md_of(x, &xmd));
  /* A blocked X is fed as it is only when it is the larger of the two: otherwise
   * converting X (N x 2048 after ResNet's global pool) costs far less than W's reorder
   * (1000 x 2048) at every run. */
  int four = x->ndim == 4 && d.axis == 1 && !dm_dnnl_md_is_plain(&xmd) && d.M > d.N;
  int64_t wdims[4] = {d.N, d.K};
  if (four) { /* X as it arrives, W viewed as (N, C, H, W) */
    xdata = dm_tensor_raw_data(x);
    for (int i = 1; i < 4; i++)
      wdims[i] = x->dims[i];
  } else {
    DM_TRY(plain_2d(x, d.M, d.K, &s->xbuf, &xmd, &xdata));
  }
  int wn = four ? 4 : 2;
  int64_t n = d.N, mn[2] = {d.M, d.N};
  DM_TRY(plain_md(wn, wdims, dt, &wview));
  DM_TRY(plain_md(1, &n, dt_of(b->dtype), &bmd));
  DM_TRY(plain_md(2, mn, dt, &ymd));
  dnnl_memory_desc_t key[3] = {xmd, wview, bmd};
  if (!dm_dnnl_prim_matches(&s->fwd, 3, key)) {
    dnnl_memory_desc_t wreq = wview;
    if (four)
      DM_TRY(any_md(wn, wdims, dt, &wreq));
    dnnl_inner_product_desc_t desc;
    DM_DNNL_TRY(dnnl_inner_product_forward_desc_init(&desc, dnnl_forward_inference, &xmd, &wreq,
                                                     &bmd, &ymd),
                "describing an inner product");
    dnnl_primitive_attr_t attr = NULL;
    if (relu)
      DM_TRY(relu_attr(&attr));
    dm_status st = dm_dnnl_prim_make(&s->fwd, &desc, attr, NULL, 3, key);
    if (attr)
      dnnl_primitive_attr_destroy(attr);
    DM_TRY(st);
  }
  dnnl_memory_desc_t wmd;
  DM_TRY(dm_dnnl_query_md(s->fwd.pd, dnnl_query_weights_md, 0, &wmd));
  void *wdata;
  DM_TRY(weights_as(w, &wmd, &s->wbuf, &wdata));
  const void *bdata = dm_tensor_data(b);
  void *ydata = dm_tensor_mutable_data(y);
  if (!bdata || !ydata)
    return DM_NOMEM("FC's bias or output");
  dm_dnnl_arg args[] = {{DNNL_ARG_SRC, &xmd, xdata},
                        {DNNL_ARG_WEIGHTS, &wmd, wdata},
                        {DNNL_ARG_BIAS, &bmd, (void *)bdata},
                        {DNNL_ARG_DST, &ymd, ydata}};
  return dm_dnnl_execute(s->fwd.prim, 4, args);
}

static dm_status fc_run(dm_op_ctx *ctx) { return fc_forward(ctx, 0); }

static dm_status fc_fusion_run(dm_op_ctx *ctx) {
  int64_t t = dm_op_arg_int(ctx, "fusion_type", 0);
  if (t != 1) /* refused by supports; the reference's words, should it get here */
    return dm_op_error(ctx, DM_ERR_INVALID, "fusion_type is %lld; FCFusion takes 1 (FC + relu)",
                       (long long)t);
  return fc_forward(ctx, 1);
}

/* ---- FCGradient ------------------------------------------------------------------ */

/* db = column sums of dY (M x N plain, dY's dtype), accumulated in double and rounded
 * once, as the reference (oneDNN's diff_bias sums in FP32: M roundings). */
static dm_status bias_grad(const void *dy, dm_dtype t, int64_t M, int64_t N, dm_tensor *db) {
  double *acc = calloc((size_t)N, sizeof *acc);
  float *row = malloc((size_t)N * sizeof *row);
  if (!acc || !row) {
    free(acc);
    free(row);
    return DM_NOMEM("FCGradient bias accumulator");
  }
  for (int64_t i = 0; i < M; i++) {
    dm_load_f32(t, dy, i * N, N, row);
    for (int64_t j = 0; j < N; j++)
      acc[j] += row[j];
  }
  void *out = dm_tensor_mutable_data(db);
  for (int64_t j = 0; j < N; j++) {
    if (dm_is_reduced_float(t))
      ((uint16_t *)out)[j] = dm_double_to_reduced(t, acc[j]);
    else
      ((float *)out)[j] = (float)acc[j];
  }
  free(acc);
  free(row);
  return DM_OK;
}

static dm_status fc_grad_run(dm_op_ctx *ctx) {
  fc_state *s = dm_op_state(ctx);
  DM_TRY(dm_op_run_infer(ctx)); /* the reference's checks; dW, db, dX resized, plain */
  const dm_tensor *x = dm_op_input(ctx, 0), *w = dm_op_input(ctx, 1), *dy = dm_op_input(ctx, 2);
  dm_tensor *dw = dm_op_output(ctx, 0), *db = dm_op_output(ctx, 1);
  dm_tensor *dx = dm_op_num_outputs(ctx) > 2 ? dm_op_output(ctx, 2) : NULL;
  dm_fc_dims d;
  DM_TRY(dm_fc_geometry(ctx, x, w, &d));
  int64_t M = d.M, N = d.N, K = d.K;
  void *dwdata = dm_tensor_mutable_data(dw), *dbdata = dm_tensor_mutable_data(db);
  void *dxdata = dx ? dm_tensor_mutable_data(dx) : NULL;
  if ((dw->numel && !dwdata) || (N && !dbdata) || (dx && dx->numel && !dxdata))
    return DM_NOMEM("FCGradient's outputs");
  dnnl_data_type_t dt = dt_of(x->dtype);
  dnnl_memory_desc_t xmd, dymd, wmd;
  void *xdata, *dydata;
  DM_TRY(plain_2d(dy, M, N, &s->dybuf, &dymd, &dydata));
  if (N == 0)
    return DM_OK; /* dW and db empty, dX zero-sized or all zeros: none written below */
  DM_TRY(bias_grad(dydata, dy->dtype, M, N, db));
  if (M == 0 || K == 0) { /* no product: zeros */
    if (dwdata)
      memset(dwdata, 0, (size_t)(N * K) * dm_dtype_size(dw->dtype));
    if (dxdata)
      memset(dxdata, 0, (size_t)(M * K) * dm_dtype_size(dx->dtype));
    return DM_OK;
  }
  DM_TRY(plain_2d(x, M, K, &s->xbuf, &xmd, &xdata));
  int64_t nk[2] = {N, K};
  DM_TRY(plain_md(2, nk, dt, &wmd));
  dnnl_memory_desc_t key[2] = {xmd, dymd};
  int want_dx = dx != NULL;
  if (!dm_dnnl_prim_matches(&s->bwd_w, 2, key) || (want_dx && !s->fwd.prim)) {
    dm_dnnl_prim_reset(&s->fwd);
    /* The backward primitives take the forward's descriptor as a hint. */
    dnnl_inner_product_desc_t fdesc, wdesc, ddesc;
    DM_DNNL_TRY(dnnl_inner_product_forward_desc_init(&fdesc, dnnl_forward_training, &xmd, &wmd,
                                                     NULL, &dymd),
                "describing an inner product");
    dnnl_primitive_desc_t hint;
    DM_DNNL_TRY(dnnl_primitive_desc_create(&hint, &fdesc, NULL, dm_dnnl_engine(), NULL),
                "creating an inner product");
    dnnl_status_t st =
        dnnl_inner_product_backward_weights_desc_init(&wdesc, &xmd, &wmd, NULL, &dymd);
    dm_status r = dm_dnnl_status(st, "describing an inner product's weights gradient");
    if (r == DM_OK)
      r = dm_dnnl_prim_make(&s->bwd_w, &wdesc, NULL, hint, 2, key);
    if (r == DM_OK && want_dx) {
      r = dm_dnnl_status(dnnl_inner_product_backward_data_desc_init(&ddesc, &xmd, &wmd, &dymd),
                         "describing an inner product's data gradient");
      if (r == DM_OK)
        r = dm_dnnl_prim_make(&s->fwd, &ddesc, NULL, hint, 0, NULL);
    }
    dnnl_primitive_desc_destroy(hint);
    if (r != DM_OK)
      dm_dnnl_prim_reset(&s->bwd_w);
    DM_TRY(r);
  }
  dm_dnnl_arg wargs[] = {{DNNL_ARG_SRC, &xmd, xdata},
                         {DNNL_ARG_DIFF_DST, &dymd, dydata},
                         {DNNL_ARG_DIFF_WEIGHTS, &wmd, dwdata}};
  DM_TRY(dm_dnnl_execute(s->bwd_w.prim, 3, wargs));
  if (!want_dx)
    return DM_OK;
  dnnl_memory_desc_t wwant;
  DM_TRY(dm_dnnl_query_md(s->fwd.pd, dnnl_query_weights_md, 0, &wwant));
  void *wdata;
  DM_TRY(weights_as(w, &wwant, &s->wbuf, &wdata));
  dm_dnnl_arg dargs[] = {{DNNL_ARG_DIFF_DST, &dymd, dydata},
                         {DNNL_ARG_WEIGHTS, &wwant, wdata},
                         {DNNL_ARG_DIFF_SRC, &xmd, dxdata}};
  return dm_dnnl_execute(s->fwd.prim, 3, dargs);
}

const dm_kernel_def dm_dnnl_fc_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "FC", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = fc_init, .run = fc_run, .fini = fc_fini,
     .supports = fc_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "FCGradient", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = fc_init, .run = fc_grad_run, .fini = fc_fini,
     .supports = fc_grad_supports},
    {0},
};

const dm_kernel_def dm_dnnl_fc_fusion_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "FCFusion", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = fc_init, .run = fc_fusion_run, .fini = fc_fini,
     .supports = fc_fusion_supports},
    {0},
};
