/* eltwise.c: the oneDNN engine's Relu and ReluGradient (FLOAT, BFLOAT16), and Dropout at
 * inference.
 *
 * An elementwise op does not care how its buffer is laid out, so these run the
 * reference kernels' loops (operators/activation.h) over the bytes as they arrive and
 * write Y in X's layout: a Relu between two blocked convolutions keeps their format,
 * with no conversion either side. oneDNN's own eltwise primitives are not used: their
 * relu maps NaN to 0 (and ReluGradient passes dY where Y is NaN), which would hide an
 * overflow from mixed precision's check; the loops keep the reference's rules exactly.
 * Padding in a blocked buffer is zeros, and stays zeros through both.
 */
#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"
#include "kernels.h"
#include "operators/activation.h"

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
    {0},
};
