/* kernels_more.c: CUDA kernels (engine "") for the rest of a training step: Iter and
 * LearningRate (so the counter and the rate stay on the GPU and found_inf is read there),
 * the shape ops Reshape, Flatten, ResizeLike and StopGradient, Concat, Split, Transpose
 * and TransposeGradient, and Dropout / DropoutGrad. The device code is
 * gpu/more_kernels.cu.
 *
 * Semantics are the CPU kernels' (operators/optimizer.c, tensor_ops.c, dropout.c): each
 * run function first runs the op's schema inference (the CPU's own checks, outputs
 * allocated on the op's GPU), then does what the CPU kernel does with device memory.
 * Views (Reshape, Flatten, ResizeLike) share X's storage with dm_tensor_share exactly as
 * on the CPU; no bytes move.
 *
 * Where the CPU reads a value on the host, the device cannot without a host sync:
 *   - Reshape's new_shape INPUT and Split's split INPUT are refused (DM_ERR_UNSUPPORTED,
 *     naming the blob): the output shapes depend on their values. The arguments work.
 *   - Iter's overflow at INT64_MAX and LearningRate's negative iteration are not
 *     reported: the count stays at INT64_MAX, the rate becomes NaN.
 * Small host-side results (Reshape's old_shape, Concat's split_info) are written with
 * dmm_write_small, whose bytes travel in the kernel launch: unlike a staged copy, it does
 * not wait for an earlier staged copy to finish, so a step keeps running ahead.
 *
 * Dropout's mask is dropout.c's counter-based hash of (seed, output name, run, index),
 * computed on the device with the key derived here exactly as the CPU kernel derives
 * it, so for the same op (same seed, same first output name) and run the GPU's mask is
 * the CPU's bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "core/tensor.h"
#include "kernels.h"
#include "more_kernels.h"
#include "operators/common.h"
#include "operators/lr_policy.h"

#define SAME_NUM(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME_NUM(DMM_FLOAT, DM_FLOAT) && SAME_NUM(DMM_INT32, DM_INT32) &&
                   SAME_NUM(DMM_BOOL, DM_BOOL) && SAME_NUM(DMM_UINT8, DM_UINT8) &&
                   SAME_NUM(DMM_INT64, DM_INT64) && SAME_NUM(DMM_FLOAT16, DM_FLOAT16) &&
                   SAME_NUM(DMM_DOUBLE, DM_DOUBLE) && SAME_NUM(DMM_BFLOAT16, DM_BFLOAT16),
               "more_kernels.h's dtype numbers must be dm_dtype's");
_Static_assert(SAME_NUM(DMM_LR_FIXED, DM_LR_FIXED) && SAME_NUM(DMM_LR_STEP, DM_LR_STEP) &&
                   SAME_NUM(DMM_LR_EXP, DM_LR_EXP) && SAME_NUM(DMM_LR_INV, DM_LR_INV) &&
                   SAME_NUM(DMM_LR_POLY, DM_LR_POLY),
               "more_kernels.h's policy numbers must be dm_lr_kind's");
_Static_assert(DMM_MAX_DIMS == DM_MAX_DIMS, "more_kernels.h's DMM_MAX_DIMS is DM_MAX_DIMS");

#define IN(i) dm_op_input(ctx, (i))
#define OUT(i) dm_op_output(ctx, (i))
#define DATA(t) dm_tensor_data(t)
#define MDATA(t) dm_tensor_mutable_data(t)

static dm_status op_stream(dm_op_ctx *ctx, cudaStream_t *s) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  *s = c->stream;
  return DM_OK;
}

/* ---- Iter ----------------------------------------------------------------------------- */

/* [iter, [skip]] -> iter (in place). As optimizer.c's iter_run, with the count read and
 * written on the device: only shapes and dtypes are looked at here. */
static dm_status iter_run(dm_op_ctx *ctx) {
  dm_tensor *y = OUT(0);
  int fresh;
  const void *skip = NULL;
  int skip_dtype = DM_UNDEFINED;
  if (dm_op_num_inputs(ctx) == 0) {
    /* Caffe2's input-less form: the output blob holds the count. */
    fresh = !(y->dtype != DM_UNDEFINED && y->numel > 0);
    if (!fresh && (y->dtype != DM_INT64 || y->numel != 1))
      return dm_op_error(ctx, DM_ERR_TYPE, "iter '%s' holds %s data; expected one INT64",
                         dm_op_output_name(ctx, 0), dm_dtype_name(y->dtype));
    int id;
    if (!fresh && (dm_tensor_device(y, &id) != DM_CUDA || id != dm_op_device_id(ctx)))
      /* A count left elsewhere (an init net on the CPU): bring it over, then count on. */
      DM_TRY(dm_tensor_copy_to(y, DM_CUDA, dm_op_device_id(ctx), y));
  } else {
    /* An empty input starts at 0; infer then grows it to one (unwritten) element. */
    const dm_tensor *it = IN(0);
    fresh = !(it->dtype == DM_INT64 && it->numel == 1);
    if (dm_op_num_inputs(ctx) > 1) {
      skip = DATA(IN(1));
      skip_dtype = IN(1)->dtype;
    }
  }
  DM_TRY(dm_op_run_infer(ctx)); /* in place, INT64, one element; the skip input's checks */
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmm_iter(s, MDATA(y), fresh, skip, skip_dtype));
  return DM_OK;
}

/* ---- LearningRate -------------------------------------------------------------------- */

/* The arguments as optimizer.c's lr_policy_from_args reads them, checked by lr_policy.h. */
static dm_status lr_params(dm_op_ctx *ctx, dmm_lr_params *out) {
  dm_lr_policy p;
  memset(&p, 0, sizeof p);
  DM_TRY(dm_lr_kind_from_name(dm_op_arg_string(ctx, "policy", "fixed"), &p.kind));
  p.stepsize = dm_op_arg_int(ctx, "stepsize", 0);
  p.gamma = dm_op_arg_float(ctx, "gamma", 0);
  p.power = dm_op_arg_float(ctx, "power", 0);
  p.max_iter = dm_op_arg_int(ctx, "max_iter", 0);
  p.warmup_iter = dm_op_arg_int(ctx, "warmup_iter", 0);
  p.warmup_start = dm_op_arg_float(ctx, "warmup_start", 0);
  DM_TRY(dm_lr_policy_check(&p, dm_op_has_arg(ctx, "stepsize"), dm_op_has_arg(ctx, "gamma"),
                            dm_op_has_arg(ctx, "power"), dm_op_has_arg(ctx, "max_iter")));
  const float base_lr = dm_op_arg_float(ctx, "base_lr", 0);
  if (!isfinite(base_lr))
    return dm_op_error(ctx, DM_ERR_INVALID, "base_lr is not finite");
  *out = (dmm_lr_params){.kind = (int)p.kind, .stepsize = p.stepsize, .max_iter = p.max_iter,
                         .warmup_iter = p.warmup_iter, .gamma = p.gamma, .power = p.power,
                         .warmup_start = p.warmup_start, .base_lr = (double)base_lr};
  return DM_OK;
}

/* Arguments are parsed and checked once, at instantiation; each run passes them by value. */
static dm_status lr_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  dmm_lr_params *p = malloc(sizeof *p);
  if (!p)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the learning-rate state");
  dm_status s = lr_params(ctx, p);
  if (s != DM_OK) {
    free(p);
    return s;
  }
  *state = p;
  return DM_OK;
}

static void lr_fini(void *state) { free(state); }

static dm_status lr_run(dm_op_ctx *ctx) { /* iter -> lr */
  DM_TRY(dm_op_run_infer(ctx));
  const dmm_lr_params *p = dm_op_state(ctx);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmm_learning_rate(s, DATA(IN(0)), MDATA(OUT(0)), *p));
  return DM_OK;
}

/* ---- views: Reshape, Flatten, ResizeLike; StopGradient --------------------------------- */

/* tensor_ops.c's make_view: Y shares X's storage with new dims (in place: X's change). */
static void make_view(dm_tensor *y, const dm_tensor *x, int ndim, const int64_t *dims) {
  dm_tensor_share(y, x);
  y->ndim = ndim;
  memset(y->dims, 0, sizeof y->dims);
  memcpy(y->dims, dims, (size_t)ndim * sizeof *dims);
}

/* An optional input whose values decide output shapes: reading it would sync the host. */
static dm_status refuse_shape_input(dm_op_ctx *ctx, int i, const char *what) {
  return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                     "%s input %d '%s' would have to be read on the host (a sync per run); give "
                     "the '%s' argument instead, or run this %s on the CPU",
                     what, i, dm_op_input_name(ctx, i),
                     strcmp(dm_op_type(ctx), "Reshape") == 0 ? "shape" : "split",
                     dm_op_type(ctx));
}

/* X -> Y, [old_shape]: the `shape` argument (infer has checked it against X). */
static dm_status reshape_run(dm_op_ctx *ctx) {
  if (dm_op_num_inputs(ctx) > 1)
    return refuse_shape_input(ctx, 1, "the new_shape");
  DM_TRY(dm_op_run_infer(ctx)); /* validates `shape`; old_shape is sized (INT64, X's ndim) */
  const dm_tensor *x = IN(0);
  size_t n = 0;
  const int64_t *req = dm_op_arg_ints(ctx, "shape", &n);
  int64_t dims[DM_MAX_DIMS], known = 1;
  int infer_at = -1;
  if (n > DM_MAX_DIMS) /* refused by infer; kept so that dims[] is never overrun */
    return dm_op_error(ctx, DM_ERR_SHAPE, "'shape' has %zu dims (at most %d)", n, DM_MAX_DIMS);
  for (size_t i = 0; i < n; i++) {
    dims[i] = req[i] == 0 ? x->dims[i] : req[i];
    if (req[i] == -1)
      infer_at = (int)i;
    else
      known *= dims[i];
  }
  if (infer_at >= 0)
    dims[infer_at] = known ? x->numel / known : 0;
  if (dm_op_num_outputs(ctx) > 1) { /* before an in-place reshape changes X's dims */
    cudaStream_t s;
    DM_TRY(op_stream(ctx, &s));
    DM_CUDA_TRY(dmm_write_small(s, MDATA(OUT(1)), x->dims, (size_t)x->ndim * sizeof(int64_t)));
  }
  make_view(OUT(0), x, (int)n, dims);
  return DM_OK;
}

static dm_status flatten_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx)); /* X numeric, axis in range */
  const dm_tensor *x = IN(0);
  int axis;
  DM_TRY(dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), x->ndim, 1, &axis));
  const int64_t dims[2] = {dm_dims_product(x, 0, axis), dm_dims_product(x, axis, x->ndim)};
  make_view(OUT(0), x, 2, dims);
  return DM_OK;
}

static dm_status resize_like_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx)); /* same element count */
  const dm_tensor *like = IN(1);
  int64_t dims[DM_MAX_DIMS];
  const int ndim = like->ndim;
  memcpy(dims, like->dims, sizeof dims); /* like may be Y's blob */
  make_view(OUT(0), IN(0), ndim, dims);
  return DM_OK;
}

static dm_status stop_gradient_run(dm_op_ctx *ctx) {
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  if (y == x)
    return DM_OK; /* in place: nothing to do */
  if (x->dtype == DM_STRING)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "cannot copy a STRING tensor on CUDA");
  DM_TRY(dm_op_run_infer(ctx));
  return dm_tensor_copy(y, x); /* device to device, on this thread's stream */
}

/* ---- Concat, Split ------------------------------------------------------------------ */

/* tensor_ops.c's concat_axis: `axis`, else from `order`, canonical for `ndim` dims. */
static dm_status concat_axis(dm_op_ctx *ctx, int ndim, int *out) {
  int axis;
  if (dm_op_has_arg(ctx, "axis"))
    return dm_op_canonical_axis(ctx, "axis", dm_op_arg_int(ctx, "axis", 1), ndim, 0, out);
  DM_TRY(dm_op_order_axis(ctx, &axis));
  return dm_op_canonical_axis(ctx, "axis (from order)", axis, ndim, 0, out);
}

/* X0, X1, ... -> Y, [split_info (INT32)]: each input is one block copy of `outer` rows. */
static dm_status concat_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x0 = IN(0);
  const int n = dm_op_num_inputs(ctx), add = dm_op_arg_int(ctx, "add_axis", 0) != 0;
  int axis;
  DM_TRY(concat_axis(ctx, x0->ndim + add, &axis));
  dm_tensor *y = OUT(0);
  const int es = (int)dm_dtype_size(x0->dtype);
  const int64_t outer = dm_dims_product(x0, 0, axis), row = y->numel / (outer ? outer : 1);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  int32_t *info = NULL;
  if (dm_op_num_outputs(ctx) > 1 && !(info = malloc((size_t)n * sizeof *info)))
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for split_info");
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    const dm_tensor *x = IN(i);
    const int64_t inner = outer ? x->numel / outer : 0; /* this input's part of one Y row */
    cudaError_t e = dmm_copy_blocks(s, DATA(x), MDATA(y), es, outer, inner, inner, 0, row, off);
    if (e != cudaSuccess) {
      free(info);
      return dm_cuda_error(e, "dmm_copy_blocks");
    }
    if (info)
      info[i] = (int32_t)(add ? 1 : x->dims[axis]);
    off += inner;
  }
  cudaError_t e = info ? dmm_write_small(s, MDATA(OUT(1)), info, (size_t)n * sizeof *info)
                       : cudaSuccess;
  free(info);
  if (e != cudaSuccess)
    return dm_cuda_error(e, "dmm_write_small");
  return DM_OK;
}

/* X -> Y0, Y1, ... cut along the axis by the `split` argument or in equal parts (infer
 * has checked the sizes against X). */
static dm_status split_run(dm_op_ctx *ctx) {
  if (dm_op_num_inputs(ctx) > 1)
    return refuse_shape_input(ctx, 1, "the split");
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  const int n = dm_op_num_outputs(ctx);
  int axis;
  DM_TRY(concat_axis(ctx, x->ndim, &axis));
  size_t na = 0;
  const int64_t *arg = dm_op_arg_ints(ctx, "split", &na);
  if (arg && na != (size_t)n) /* refused by infer */
    return dm_op_error(ctx, DM_ERR_INVALID, "'split' has %zu sizes for %d outputs", na, n);
  const int es = (int)dm_dtype_size(x->dtype);
  const int64_t outer = dm_dims_product(x, 0, axis), inner = dm_dims_product(x, axis + 1, x->ndim);
  const int64_t row = x->dims[axis] * inner;
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    const int64_t part = (arg ? arg[i] : x->dims[axis] / n) * inner;
    DM_CUDA_TRY(dmm_copy_blocks(s, DATA(x), MDATA(OUT(i)), es, outer, part, row, off, part, 0));
    off += part;
  }
  return DM_OK;
}

/* ---- Transpose, TransposeGradient --------------------------------------------------- */

/* Y = X with dims permuted: Y's dim i is X's dim perm[i], perm from `axes` (default
 * reversed) or, for the gradient, its inverse (infer has checked `axes`). */
static dm_status transpose_as(dm_op_ctx *ctx, int inverse) {
  DM_TRY(dm_op_run_infer(ctx)); /* numeric X, a permutation, not in place; Y sized */
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  const int nd = x->ndim;
  int perm[DM_MAX_DIMS];
  size_t na = 0;
  const int64_t *axes = dm_op_arg_ints(ctx, "axes", &na);
  if (axes && na != 0 && na != (size_t)nd) /* refused by infer */
    return dm_op_error(ctx, DM_ERR_INVALID, "'axes' has %zu entries for a %d-d X", na, nd);
  for (int i = 0; i < nd; i++) {
    if (!axes || na == 0)
      perm[i] = nd - 1 - i;
    else if (inverse)
      perm[axes[i]] = i;
    else
      perm[i] = (int)axes[i];
  }
  int64_t xstride[DM_MAX_DIMS], st[DM_MAX_DIMS];
  for (int64_t i = nd - 1, s = 1; i >= 0; i--) {
    xstride[i] = s;
    s *= x->dims[i];
  }
  for (int i = 0; i < nd; i++)
    st[i] = xstride[perm[i]]; /* X step for Y dim i */
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmm_transpose(s, DATA(x), MDATA(y), (int)dm_dtype_size(x->dtype), nd, y->dims, st,
                            y->numel));
  return DM_OK;
}

static dm_status transpose_run(dm_op_ctx *ctx) { return transpose_as(ctx, 0); }
static dm_status transpose_grad_run(dm_op_ctx *ctx) { return transpose_as(ctx, 1); }

/* ---- Dropout, DropoutGrad ------------------------------------------------------------ */

#define DROPOUT_DEFAULT_SEED 0x5EEDu /* dropout.c's DM_DROPOUT_DEFAULT_SEED */

typedef struct dropout_state {
  uint64_t key;  /* seed and stream, mixed */
  uint64_t iter; /* runs so far */
} dropout_state;

static uint64_t mix64(uint64_t z) { /* dropout.c's, and more_kernels.cu's */
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* dropout.c's dropout_init: the same key for the same seed and first output name. */
static dm_status dropout_init(dm_op_ctx *ctx, void **state) {
  dropout_state *s = calloc(1, sizeof *s);
  if (!s)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the dropout state");
  uint64_t stream = 1469598103934665603ull; /* FNV-1a of the first output's name */
  for (const char *p = dm_op_output_name(ctx, 0); p && *p; p++)
    stream = (stream ^ (unsigned char)*p) * 1099511628211ull;
  s->key = mix64(mix64(dm_op_random_seed(ctx, DROPOUT_DEFAULT_SEED)) ^ stream);
  *state = s;
  return DM_OK;
}

static void dropout_fini(void *state) { free(state); }

/* dropout.c's: the validated ratio (infer has refused one outside [0, 1]), and
 * 1 / (1 - ratio), 0 when everything is dropped. */
static float dropout_ratio(dm_op_ctx *ctx) { return dm_op_arg_float(ctx, "ratio", 0.5f); }
static double keep_scale(float ratio) { return ratio < 1.0f ? 1.0 / (1.0 - ratio) : 0.0; }

/* is_test: Y = X (a copy unless in place). */
static dm_status copy_through(cudaStream_t s, const dm_tensor *x, dm_tensor *y) {
  if (x->numel && DATA(x) != DATA(y))
    DM_CUDA_TRY(cudaMemcpyAsync(MDATA(y), DATA(x), dm_tensor_nbytes(x), cudaMemcpyDeviceToDevice,
                                s));
  return DM_OK;
}

static dm_status dropout_run(dm_op_ctx *ctx) { /* X -> Y, [mask] */
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  const int64_t n = x->numel;
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  if (dm_op_arg_int(ctx, "is_test", 0)) {
    DM_TRY(copy_through(s, x, y));
    if (dm_op_num_outputs(ctx) > 1 && n) /* a mask, if asked for, keeps everything */
      DM_CUDA_TRY(cudaMemsetAsync(MDATA(OUT(1)), 1, (size_t)n, s));
    return DM_OK;
  }
  const float ratio = dropout_ratio(ctx);
  dropout_state *st = dm_op_state(ctx);
  const uint64_t key = mix64(st->key ^ mix64(st->iter++));
  DM_CUDA_TRY(dmm_dropout(s, x->dtype, DATA(x), MDATA(y), MDATA(OUT(1)), key, ratio,
                          keep_scale(ratio), n));
  return DM_OK;
}

static dm_status dropout_grad_run(dm_op_ctx *ctx) { /* dY, [mask] -> dX */
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *dy = IN(0);
  dm_tensor *dx = OUT(0);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  if (dm_op_arg_int(ctx, "is_test", 0))
    return copy_through(s, dy, dx);
  DM_CUDA_TRY(dmm_dropout_grad(s, dy->dtype, DATA(dy), DATA(IN(1)), MDATA(dx),
                               keep_scale(dropout_ratio(ctx)), dy->numel));
  return DM_OK;
}

/* ---- registration ------------------------------------------------------------------ */

#define K(name, fn) {.type = name, .device = DM_CUDA, .engine = "", .run = fn}
static const dm_kernel_def kernels_[] = {
    K("Iter", iter_run),
    {.type = "LearningRate", .device = DM_CUDA, .engine = "", .init = lr_init, .run = lr_run,
     .fini = lr_fini},
    K("Reshape", reshape_run),
    K("Flatten", flatten_run),
    K("ResizeLike", resize_like_run),
    K("StopGradient", stop_gradient_run),
    K("Concat", concat_run),
    K("Split", split_run),
    K("Transpose", transpose_run),
    K("TransposeGradient", transpose_grad_run),
    {.type = "Dropout", .device = DM_CUDA, .engine = "", .init = dropout_init,
     .run = dropout_run, .fini = dropout_fini},
    K("DropoutGrad", dropout_grad_run),
};
#undef K

static const dm_op_schema *const schemas[] = {NULL}; /* the schemas are operators/' */
static const dm_kernel_def *const kernels[] = {
    &kernels_[0], &kernels_[1], &kernels_[2], &kernels_[3], &kernels_[4],  &kernels_[5],
    &kernels_[6], &kernels_[7], &kernels_[8], &kernels_[9], &kernels_[10], &kernels_[11], NULL};
_Static_assert(sizeof kernels_ / sizeof kernels_[0] == 12, "kernels[] lists every entry");
const dm_op_family dm_cuda_family_more = {schemas, kernels};
