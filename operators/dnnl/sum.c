/* sum.c: the oneDNN engine's Sum (N inputs) and Add without broadcast (FLOAT, BFLOAT16),
 * on buffers in any layout.
 *
 * An elementwise sum does not care how its buffers are laid out as long as they are laid
 * out alike, so these run the reference's arithmetic (operators/elementwise.c: FLOAT
 * added in input order; BFLOAT16 widened, added in FP32 in input order and rounded once)
 * over the bytes as they are, padding included (zeros stay zeros), and write Y in the
 * inputs' layout: ResNet's residual Sum of two blocked convolution outputs stays
 * nChw16c, with no conversion. Where layouts are mixed, the inputs are reordered (into
 * scratch buffers) to the first plain one's (see sum_common). The results are the
 * reference's bit for bit.
 *
 * Add with `broadcast` = 1 is refused (the reference runs it); without it unequal
 * shapes (numpy's broadcast) of plain buffers are handed to the reference kernel; the reference's shape checks run first, in its words. Y may be X0's
 * blob (Sum), A's or B's (Add), as the schemas allow.
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

static int add_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "broadcast", 0) != 0)
    return dm_op_refuse(ctx, "the oneDNN Add runs equal shapes, not broadcast = 1");
  return sum_supports(ctx);
}

typedef struct sum_state {
  dm_dnnl_buf *bufs; /* per input: its data reordered to X0's layout */
  const void **ptrs;
  int n;
} sum_state;

static dm_status sum_init(dm_op_ctx *ctx, void **state) {
  int n = dm_op_num_inputs(ctx);
  sum_state *s = calloc(1, sizeof *s);
  if (s) {
    s->bufs = calloc((size_t)n, sizeof *s->bufs);
    s->ptrs = calloc((size_t)n, sizeof *s->ptrs);
    s->n = n;
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
    dnnl_memory_desc_t md;
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
    return DM_NOMEM("Sum's output");
  sum_buffers(t, nin, s->ptrs, out, n);
  return DM_OK;
}

/* The reference's checks, in its words (dm_op_check_shapes leaves Y, which may be an
 * input, as it is). */
static dm_status sum_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_check_shapes(ctx));
  return sum_common(ctx);
}

static dm_status add_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_check_shapes(ctx));
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  if (!dm_tensor_same_shape(a, b)) { /* numpy's broadcast (supports refuses broadcast = 1) */
    if (dm_tensor_is_plain(a) && dm_tensor_is_plain(b))
      return dm_binary_run_reference(ctx);
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "the oneDNN Add broadcasts (numpy's rule) plain buffers only, and an "
                       "input is in a blocked layout; run this Add on engine REFERENCE");
  }
  return sum_common(ctx);
}

const dm_kernel_def dm_dnnl_sum_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "Sum", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = sum_init, .run = sum_run, .fini = sum_fini,
     .supports = sum_supports},
    {.struct_size = sizeof(dm_kernel_def), .type = "Add", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = sum_init, .run = add_run, .fini = sum_fini,
     .supports = add_supports},
    {0},
};
