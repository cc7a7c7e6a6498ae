/* sum.c: the oneDNN engine's Sum (N inputs) and Add, Sub, Mul and Div (FLOAT, BFLOAT16), on
 * buffers in any layout.
 *
 * An elementwise op does not care how its buffers are laid out as long as they are laid
 * out alike, so these run the reference's arithmetic (operators/elementwise.c: FLOAT in
 * input order; BFLOAT16 widened, computed in FP32 in input order and rounded once) over
 * the bytes as they are, padding included, and write Y in the inputs' layout: ResNet's
 * residual Sum of two blocked convolution outputs, or SiLU's Mul of X and Sigmoid(X),
 * stays nChw16c, with no conversion. Where layouts are mixed, the inputs are reordered
 * (into scratch buffers) to the first plain one's (see same_layout). Padding is written
 * zeros again afterwards (Div's 0 / 0 is NaN). The results are the reference's bit for
 * bit.
 *
 * Numpy's broadcast of a per-channel operand onto a 4-D one (B of shape [C, 1, 1],
 * [1, C, 1, 1] or [N, C, 1, 1] against A of [N, C, H, W], or the other way round: the
 * squeeze-and-excitation block's scaling) runs in the 4-D operand's layout too
 * (channel_run); any other broadcast is handed to the reference kernel on plain buffers.
 * `broadcast` = 1 (Caffe2's legacy rule) is refused (the reference runs it). The
 * reference's shape checks run first, in its words. Y may be X0's blob (Sum), A's or
 * B's (the binary ops), as the schemas allow.
 */
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"

#include "dnnl_common.h"
#include "kernels.h"
#include "operators/broadcast.h"

#define BLOCK 1024

static int sum_supports(const dm_op_ctx *ctx) {
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    if (!dm_dnnl_dtype_ok(ctx, i, 0)) /* its own loops */
      return 0;
  return 1;
}

static int binary_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "broadcast", 0) != 0)
    return dm_op_refuse(ctx, "the oneDNN %s runs numpy's broadcast, not broadcast = 1",
                        dm_op_type(ctx));
  return sum_supports(ctx);
}

/* What the kernel computes: Sum and Add add their inputs in order; the others take two. */
typedef enum kind { K_ADD, K_SUB, K_MUL, K_DIV } kind;

static kind kind_of(const char *type) {
  return strcmp(type, "Sub") == 0   ? K_SUB
         : strcmp(type, "Mul") == 0 ? K_MUL
         : strcmp(type, "Div") == 0 ? K_DIV
                                    : K_ADD; /* Sum, Add */
}

typedef struct sum_state {
  dm_dnnl_buf *bufs; /* per input: its data reordered to X0's layout */
  const void **ptrs;
  int n;
  kind kind;
  dm_dnnl_buf scale; /* channel_run: the per-channel operand, plain FP32 */
} sum_state;

static dm_status sum_init(dm_op_ctx *ctx, void **state) {
  int n = dm_op_num_inputs(ctx);
  sum_state *s = calloc(1, sizeof *s);
  if (s) {
    s->bufs = calloc((size_t)n, sizeof *s->bufs);
    s->ptrs = calloc((size_t)n, sizeof *s->ptrs);
    s->n = n;
    s->kind = kind_of(dm_op_type(ctx));
  }
  if (!s || !s->bufs || !s->ptrs) {
    if (s)
      free(s->bufs), free(s->ptrs);
    free(s);
    return DM_NOMEM("a oneDNN op state");
  }
  *state = s;
  return DM_OK;
}

static void sum_fini(void *state) {
  sum_state *s = state;
  for (int i = 0; i < s->n; i++)
    dm_dnnl_buf_free(&s->bufs[i]);
  dm_dnnl_buf_free(&s->scale);
  free(s->bufs);
  free(s->ptrs);
  free(s);
}

/* y[i] = sum over k of x[k][i], for i in [0, n), in input order. */
static void sum_buffers(dm_dtype t, int nin, const void *const *x, void *y, int64_t n) {
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 16))
#endif
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    float acc[BLOCK], tmp[BLOCK];
    if (t == DM_FLOAT) {
      const float *p0 = (const float *)x[0] + i0;
      for (int64_t j = 0; j < m; j++)
        acc[j] = p0[j];
      for (int k = 1; k < nin; k++) {
        const float *pk = (const float *)x[k] + i0;
        for (int64_t j = 0; j < m; j++)
          acc[j] += pk[j];
      }
      memcpy((float *)y + i0, acc, (size_t)m * sizeof *acc);
      continue;
    }
    dm_widen(t, (const uint16_t *)x[0] + i0, acc, (size_t)m);
    for (int k = 1; k < nin; k++) {
      dm_widen(t, (const uint16_t *)x[k] + i0, tmp, (size_t)m);
      for (int64_t j = 0; j < m; j++)
        acc[j] += tmp[j];
    }
    dm_narrow(t, acc, (uint16_t *)y + i0, (size_t)m);
  }
}

/* y[i] = a[i] op b[i] for i in [0, n): Sub, Mul, Div (y may be a or b). */
#define BIN_LOOP_(OP)                                                                      \
  for (int64_t j = 0; j < m; j++)                                                          \
    py[j] = pa[j] OP pb[j];
static void binary_buffers(kind k, dm_dtype t, const void *a, const void *b, void *y,
                           int64_t n) {
#if DM_HAVE_OPENMP
#pragma omp parallel for if (n > (1 << 16))
#endif
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    float wa[BLOCK], wb[BLOCK];
    const float *pa = wa, *pb = wb;
    float *py = wa;
    if (t == DM_FLOAT) {
      pa = (const float *)a + i0, pb = (const float *)b + i0, py = (float *)y + i0;
    } else { /* both read before Y (maybe A or B) is written */
      dm_widen(t, (const uint16_t *)a + i0, wa, (size_t)m);
      dm_widen(t, (const uint16_t *)b + i0, wb, (size_t)m);
    }
    switch (k) {
    case K_SUB: BIN_LOOP_(-) break;
    case K_MUL: BIN_LOOP_(*) break;
    case K_DIV: BIN_LOOP_(/) break;
    case K_ADD: BIN_LOOP_(+) break;
    }
    if (t != DM_FLOAT)
      dm_narrow(t, wa, (uint16_t *)y + i0, (size_t)m);
  }
}

static dm_status sum_common(dm_op_ctx *ctx) {
  sum_state *s = dm_op_state(ctx);
  int nin = dm_op_num_inputs(ctx);
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  dm_dtype t = x0->dtype;
  int plain = 1;
  for (int k = 0; k < nin; k++)
    plain = plain && dm_tensor_is_plain(dm_op_input(ctx, k));
  int64_t n;
  void *out;
  dnnl_memory_desc_t md;
  if (plain) { /* any rank, zero sizes: the reference's plain arrays */
    for (int k = 0; k < nin; k++)
      s->ptrs[k] = dm_tensor_data(dm_op_input(ctx, k));
    DM_TRY(dm_op_set_output(ctx, 0, t, x0->ndim, x0->dims));
    out = dm_tensor_mutable_data(y);
    n = x0->numel;
  } else {
    /* One input's layout, the others reordered into it where they differ: a plain
     * input's when there is one (a fed blob; what reads the sum next, a loss say, is
     * then as likely plain, and converting the blocked inputs costs the same as
     * converting the plain one), else X0's: two convolutions' outputs stay blocked. */
    int ref = 0;
    for (int k = nin - 1; k >= 0; k--)
      if (dm_tensor_is_plain(dm_op_input(ctx, k)))
        ref = k;
    DM_TRY(dm_dnnl_md_of(dm_op_input(ctx, ref), &md));
    for (int k = 0; k < nin; k++) {
      void *p;
      DM_TRY(dm_dnnl_input(dm_op_input(ctx, k), &md, &s->bufs[k], &p));
      s->ptrs[k] = p;
    }
    int64_t dims[DM_MAX_DIMS];
    memcpy(dims, x0->dims, sizeof dims); /* y may be x0 */
    /* Y on an input's blob in that layout keeps its buffer (same size, in place); one in
     * another layout was read into scratch before the resize replaces it. */
    DM_TRY(dm_dnnl_output(y, t, x0->ndim, dims, &md, &out));
    n = (int64_t)(dnnl_memory_desc_get_size(&md) / dm_dtype_size(t));
  }
  if (n && !out)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for Y");
  if (nin == 2 && s->kind != K_ADD)
    binary_buffers(s->kind, t, s->ptrs[0], s->ptrs[1], out, n);
  else
    sum_buffers(t, nin, s->ptrs, out, n);
  return plain ? DM_OK : dm_dnnl_zero_pad(&md, out);
}

/* The reference's checks, in its words (dm_op_check_shapes leaves Y, which may be an
 * input, as it is). */
static dm_status sum_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_check_shapes(ctx));
  return sum_common(ctx);
}

/* ---- numpy's broadcast of a per-channel operand ---------------------------------- */

/* Whether `small`, aligned at the last dims, is [C, 1, 1] with at most a leading 1 or N
 * against the 4-D `big` of [N, C, H, W]: the result then has big's shape. *per_image: its
 * elements are read at n * C + c (else at c). */
static int channel_form(const dm_tensor *big, const dm_tensor *small, int *per_image) {
  if (big->ndim != 4 || big->numel == 0 || small->ndim < 3 || small->ndim > 4)
    return 0;
  const int64_t *d = small->dims + small->ndim - 3;
  if (d[0] != big->dims[1] || d[1] != 1 || d[2] != 1)
    return 0;
  int64_t sn = small->ndim == 4 ? small->dims[0] : 1;
  *per_image = sn != 1;
  return sn == 1 || sn == big->dims[0];
}

/* y[o + i] = x[o + i] op v[i * step] (or v op x where the broadcast operand is A), for i
 * in [0, len): one contiguous run of the big operand (len <= BLOCK); FLOAT in place of
 * its own, BFLOAT16 widened and rounded once. */
#define RUN_LOOP_(OP)                                                                      \
  if (x_first)                                                                             \
    for (int64_t i = 0; i < len; i++)                                                      \
      w[i] = px[i] OP v[i * step];                                                         \
  else                                                                                     \
    for (int64_t i = 0; i < len; i++)                                                      \
      w[i] = v[i * step] OP px[i];
static void channel_span(kind k, dm_dtype t, int x_first, const void *x, void *y, int64_t o,
                         const float *v, int64_t step, int64_t len) {
  float buf[BLOCK], *w = t == DM_FLOAT ? (float *)y + o : buf;
  const float *px = t == DM_FLOAT ? (const float *)x + o : buf;
  if (t != DM_FLOAT)
    dm_widen(t, (const uint16_t *)x + o, buf, (size_t)len);
  switch (k) {
  case K_ADD: RUN_LOOP_(+) break;
  case K_SUB: RUN_LOOP_(-) break;
  case K_MUL: RUN_LOOP_(*) break;
  case K_DIV: RUN_LOOP_(/) break;
  }
  if (t != DM_FLOAT)
    dm_narrow(t, buf, (uint16_t *)y + o, (size_t)len);
}

/* FLOAT, a channel-blocked plane stored whole (nChw16c: the H W pixels of one block of
 * blk channels, one after the other): y[p blk + c] = x[p blk + c] op vb[c] (or vb op x)
 * over its `pixels`, vb the block's blk values. */
#define PLANE_LOOP_(OP)                                                                    \
  for (int64_t q = 0; q < pixels; q++) {                                                   \
    const float *xp = x + q * blk;                                                         \
    float *yp = y + q * blk;                                                               \
    if (x_first)                                                                           \
      for (int64_t c = 0; c < blk; c++)                                                    \
        yp[c] = xp[c] OP vb[c];                                                            \
    else                                                                                   \
      for (int64_t c = 0; c < blk; c++)                                                    \
        yp[c] = vb[c] OP xp[c];                                                            \
  }
static void channel_plane_f32(kind k, int x_first, const float *x, float *y, const float *vb,
                              int64_t blk, int64_t pixels) {
  switch (k) {
  case K_ADD: PLANE_LOOP_(+) break;
  case K_SUB: PLANE_LOOP_(-) break;
  case K_MUL: PLANE_LOOP_(*) break;
  case K_DIV: PLANE_LOOP_(/) break;
  }
}

/* C = A op B where input `bi` is the 4-D operand and the other the per-channel one: C in
 * the 4-D operand's layout (plain when that layout has more than a channel block). Runs
 * are the channel block's elements of one pixel (nChw16c: 16 channels, 16 scales), or a
 * row of W pixels of one channel (NCHW: one scale). */
static dm_status channel_run(dm_op_ctx *ctx, int bi, int per_image) {
  sum_state *s = dm_op_state(ctx);
  const dm_tensor *big = dm_op_input(ctx, bi), *small = dm_op_input(ctx, 1 - bi);
  dm_tensor *y = dm_op_output(ctx, 0);
  const dm_dtype t = big->dtype;
  dnnl_memory_desc_t md, smd;
  dm_dnnl_flat4 f;
  void *px, *py, *ps;
  DM_TRY(dm_dnnl_md_of(big, &md));
  int moved = !dm_dnnl_flat4_of(&md, &f);
  if (moved) {
    DM_TRY(dm_dnnl_plain_md(4, big->dims, t, &md));
    dm_dnnl_flat4_of(&md, &f);
  }
  DM_TRY(dm_dnnl_input(big, &md, &s->bufs[bi], &px));
  /* The per-channel values as plain FP32 (the 16-bit ones widened exactly), read where
   * they are: the squeeze-and-excitation scale arrives as a [N, C, 1, 1] in the blocked
   * layout of the conv that made it, and converting it would be one more reorder. */
  DM_TRY(dm_dnnl_buf_reserve(&s->scale, (size_t)small->numel * sizeof(float)));
  float *sv = s->scale.data;
  dm_dnnl_flat4 sf;
  DM_TRY(dm_dnnl_md_of(small, &smd));
  if (small->ndim == 4 && dm_dnnl_flat4_of(&smd, &sf)) {
    DM_TRY(dm_dnnl_input(small, &smd, &s->bufs[1 - bi], &ps)); /* its own layout: no copy */
    const int64_t sn = small->dims[0], sc = small->dims[1];
    for (int64_t n = 0; n < sn; n++)
      for (int64_t c0 = 0; c0 < sc; c0 += sf.blk) /* a block's channels are adjacent */
        dm_load_f32(t, ps, dm_dnnl_flat4_plane(&sf, n, c0),
                    sc - c0 < sf.blk ? sc - c0 : sf.blk, sv + n * sc + c0);
  } else {
    DM_TRY(dm_dnnl_plain_md(small->ndim, small->dims, t, &smd));
    DM_TRY(dm_dnnl_input(small, &smd, &s->bufs[1 - bi], &ps));
    dm_load_f32(t, ps, 0, small->numel, sv);
  }
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, big->dims, sizeof dims); /* y may be big */
  DM_TRY(dm_dnnl_output(y, t, 4, dims, &md, &py));
  if (y == big && !moved)
    px = py; /* in place: the resize kept the buffer */
  const int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3], blk = f.blk;
  const int64_t nb = (C + blk - 1) / blk;
  const int x_first = bi == 0, w_runs = blk == 1 && f.s[3] == 1;
  const int planes = t == DM_FLOAT && blk > 1 && blk <= 64 && f.s[3] == blk &&
                     f.s[2] == W * blk;
  const kind k = s->kind;
#if DM_HAVE_OPENMP
#pragma omp parallel for collapse(2) if (N * C * H * W > (1 << 16))
#endif
  for (int64_t n = 0; n < N; n++)
    for (int64_t cb = 0; cb < nb; cb++) {
      const float *v = sv + (per_image ? n * C : 0) + cb * blk;
      const int64_t cn = C - cb * blk < blk ? C - cb * blk : blk;
      const int64_t base = f.off0 + n * f.s[0] + cb * f.s[1];
      if (planes) { /* the padding's values are 0 (then zeroed again below, for Div) */
        float vb[64] = {0};
        memcpy(vb, v, (size_t)cn * sizeof *vb);
        channel_plane_f32(k, x_first, (const float *)px + base, (float *)py + base, vb, blk,
                          H * W);
        continue;
      }
      for (int64_t h = 0; h < H; h++) {
        if (w_runs) { /* plain NCHW: a row of W, one value */
          for (int64_t w0 = 0; w0 < W; w0 += BLOCK)
            channel_span(k, t, x_first, px, py, base + h * f.s[2] + w0, v, 0,
                         W - w0 < BLOCK ? W - w0 : BLOCK);
          continue;
        }
        for (int64_t w = 0; w < W; w++) /* a pixel's channels of the block */
          channel_span(k, t, x_first, px, py, base + h * f.s[2] + w * f.s[3], v, 1, cn);
      }
    }
  return dm_dnnl_zero_pad(&md, py);
}

/* Add, Sub, Mul, Div: equal shapes and per-channel broadcasts in any layout; other
 * broadcasts on the reference kernel, their blocked inputs converted in their blobs (as
 * the executor does for any plain kernel) and a blocked Y dropped. */
static dm_status binary_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_check_shapes(ctx));
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  if (dm_tensor_same_shape(a, b))
    return sum_common(ctx);
  int per_image;
  if (channel_form(a, b, &per_image))
    return channel_run(ctx, 0, per_image);
  if (channel_form(b, a, &per_image))
    return channel_run(ctx, 1, per_image);
  for (int i = 0; i < 2; i++)
    DM_TRY(dm_tensor_make_plain((dm_tensor *)dm_op_input(ctx, i)));
  if (!dm_tensor_is_plain(dm_op_output(ctx, 0)))
    dm_tensor_reset(dm_op_output(ctx, 0));
  return dm_binary_run_reference(ctx);
}

#define BINARY_KERNEL_(T)                                                                  \
  {.struct_size = sizeof(dm_kernel_def), .type = T, .device = DM_CPU,                      \
   .engine = DM_ENGINE_DNNL, .init = sum_init, .run = binary_run, .fini = sum_fini,        \
   .supports = binary_supports},

const dm_kernel_def dm_dnnl_sum_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "Sum", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = sum_init, .run = sum_run, .fini = sum_fini,
     .supports = sum_supports},
    BINARY_KERNEL_("Add") BINARY_KERNEL_("Sub") BINARY_KERNEL_("Mul") BINARY_KERNEL_("Div")
    {0},
};
