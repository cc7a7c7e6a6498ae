/* kernels_basic.c: CUDA kernels (engine "") for the ops that need no library: elementwise
 * arithmetic, Relu, casts and fills, the update ops, loss scaling and the FP32 losses. The
 * device code is gpu/basic_elementwise.cu, gpu/basic_optim.cu and gpu/basic_losses.cu;
 * this file checks and sizes through each op's schema inference (dm_op_run_infer, the
 * CPU kernels' own checks) and launches on the calling thread's context stream.
 *
 * Semantics are the CPU kernels' (in operators/), with one class of exception: values
 * the CPU reads on the host to raise an error (labels out of range, an integer division
 * by zero, a bad loss scale or a negative step count) live on the device here, and
 * reading them would cost a host sync per step. Those cases produce NaN (losses,
 * Accuracy), 0 (integer x / 0), a skipped step (UnscaleAndCheck sets found_inf for a
 * bad scale) or an unchanged state (UpdateLossScale) instead of an error.
 *
 * In-place ops whose output is smaller or of another element size (SumReduceLike, a cast
 * to another width) compute into the context's scratch, then resize the output and copy:
 * every step is stream-ordered, so the input's old storage is read before it is freed.
 */
#include <string.h>

#include "basic_kernels.h"
#include "context.h"
#include "core/half.h"
#include "core/tensor.h"
#include "kernels.h"
#include "operators/broadcast.h"
#include "operators/common.h"
#include "operators/loss.h"
#include "operators/loss_scale.h"

#define SAME_NUM(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME_NUM(DMK_FLOAT, DM_FLOAT) && SAME_NUM(DMK_INT32, DM_INT32) &&
                   SAME_NUM(DMK_BOOL, DM_BOOL) && SAME_NUM(DMK_UINT8, DM_UINT8) &&
                   SAME_NUM(DMK_INT8, DM_INT8) && SAME_NUM(DMK_UINT16, DM_UINT16) &&
                   SAME_NUM(DMK_INT16, DM_INT16) && SAME_NUM(DMK_INT64, DM_INT64) &&
                   SAME_NUM(DMK_FLOAT16, DM_FLOAT16) && SAME_NUM(DMK_DOUBLE, DM_DOUBLE) &&
                   SAME_NUM(DMK_BFLOAT16, DM_BFLOAT16),
               "basic_kernels.h's dtype numbers must be dm_dtype's");

static dm_status op_stream(dm_op_ctx *ctx, cudaStream_t *s) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  *s = c->stream;
  return DM_OK;
}

static dm_status op_scratch(dm_op_ctx *ctx, size_t n, void **p) {
  dm_gpu_context *c;
  DM_TRY(dm_gpu_op_context(ctx, &c));
  return dm_gpu_scratch(c, n ? n : 1, p);
}

#define IN(i) dm_op_input(ctx, (i))
#define OUT(i) dm_op_output(ctx, (i))
#define DATA(t) dm_tensor_data(t)
#define MDATA(t) dm_tensor_mutable_data(t)

/* ---- Add / Sub / Mul / Div, Sum, Scale, SumReduceLike ----------------------------- */

static dm_status binary_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *a = IN(0), *b = IN(1);
  dm_bcast g;
  DM_TRY(dm_bcast_from_args(ctx, a, b, &g));
  const char *t = dm_op_type(ctx);
  int op = t[0] == 'A' ? DMK_ADD : t[0] == 'S' ? DMK_SUB : t[0] == 'M' ? DMK_MUL : DMK_DIV;
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_binary(s, op, a->dtype, DATA(a), DATA(b), MDATA(OUT(0)), g.pre, g.n, g.post));
  return DM_OK;
}

/* Up to DMK_MAX_TERMS inputs per launch, in input order; 16-bit sums of more inputs keep
 * their FP32 running sum in scratch so that they are rounded once. */
static dm_status sum_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const int nin = dm_op_num_inputs(ctx);
  const dm_tensor *x0 = IN(0);
  const int64_t n = x0->numel;
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  float *acc = NULL;
  if (dm_is_reduced_float(x0->dtype) && nin > DMK_MAX_TERMS)
    DM_TRY(op_scratch(ctx, (size_t)n * sizeof(float), (void **)&acc));
  void *y = MDATA(OUT(0));
  for (int j0 = 0; j0 < nin; j0 += DMK_MAX_TERMS) {
    const void *x[DMK_MAX_TERMS];
    int k = nin - j0 < DMK_MAX_TERMS ? nin - j0 : DMK_MAX_TERMS;
    for (int j = 0; j < k; j++)
      x[j] = DATA(IN(j0 + j));
    DM_CUDA_TRY(dmk_sum(s, x0->dtype, x, k, j0 == 0, j0 + k == nin, acc, y, n));
  }
  return DM_OK;
}

static dm_status scale_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_scale(s, x->dtype, DATA(x), MDATA(OUT(0)), dm_op_arg_float(ctx, "scale", 1.0f),
                        x->numel));
  return DM_OK;
}

static dm_status reduce_like_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *a = IN(0), *b = IN(1);
  dm_tensor *c = OUT(0);
  dm_bcast g;
  DM_TRY(dm_bcast_legacy(ctx, a, b, 1, dm_op_arg_int(ctx, "axis", -1), &g));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  const dm_dtype t = a->dtype;
  if (!dm_tensors_alias(c, a)) { /* infer has sized C */
    DM_CUDA_TRY(dmk_sum_reduce_like(s, t, DATA(a), MDATA(c), g.pre, g.n, g.post));
    return DM_OK;
  }
  /* In place on A: reduce aside, then C takes B's shape (A has been read by then). */
  const size_t bytes = (size_t)g.n * dm_dtype_size(t);
  void *tmp;
  DM_TRY(op_scratch(ctx, bytes, &tmp));
  DM_CUDA_TRY(dmk_sum_reduce_like(s, t, DATA(a), tmp, g.pre, g.n, g.post));
  int64_t dims[DM_MAX_DIMS];
  const int ndim = b->ndim;
  memcpy(dims, b->dims, sizeof dims);
  DM_TRY(dm_op_set_output(ctx, 0, t, ndim, dims));
  if (bytes)
    DM_CUDA_TRY(cudaMemcpyAsync(MDATA(c), tmp, bytes, cudaMemcpyDeviceToDevice, s));
  return DM_OK;
}

/* ---- Relu ------------------------------------------------------------------------ */

static dm_status relu_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_relu(s, x->dtype, DATA(x), MDATA(OUT(0)), x->numel));
  return DM_OK;
}

static dm_status relu_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *y = IN(0), *dy = IN(1);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_relu_grad(s, y->dtype, DATA(y), DATA(dy), MDATA(OUT(0)), y->numel));
  return DM_OK;
}

/* ---- casts, Copy, ConstantFill ----------------------------------------------------- */

/* X into Y as dtype `to` (infer has run). In place with another element size the result
 * is built in scratch first: the resize would replace storage still to be read. */
static dm_status cast_to(dm_op_ctx *ctx, dm_dtype to) {
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  const int64_t n = x->numel;
  const dm_dtype from = x->dtype;
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  if (dm_tensors_alias(y, x) && dm_dtype_size(to) != dm_dtype_size(from)) {
    const size_t bytes = (size_t)n * dm_dtype_size(to);
    void *tmp;
    DM_TRY(op_scratch(ctx, bytes, &tmp));
    DM_CUDA_TRY(dmk_cast(s, from, to, DATA(x), tmp, n));
    int64_t dims[DM_MAX_DIMS];
    const int ndim = x->ndim;
    memcpy(dims, x->dims, sizeof dims);
    DM_TRY(dm_op_set_output(ctx, 0, to, ndim, dims));
    if (bytes)
      DM_CUDA_TRY(cudaMemcpyAsync(MDATA(y), tmp, bytes, cudaMemcpyDeviceToDevice, s));
    return DM_OK;
  }
  if (from == to) {
    if (n && DATA(x) != DATA(y))
      DM_CUDA_TRY(cudaMemcpyAsync(MDATA(y), DATA(x), (size_t)n * dm_dtype_size(to),
                                  cudaMemcpyDeviceToDevice, s));
    return DM_OK;
  }
  DM_CUDA_TRY(dmk_cast(s, from, to, DATA(x), MDATA(y), n));
  return DM_OK;
}

static dm_status float_to_half_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return cast_to(ctx, DM_FLOAT16);
}

static dm_status half_to_float_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return cast_to(ctx, DM_FLOAT);
}

static dm_status cast_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx)); /* validates `to` */
  dm_dtype to;
  DM_TRY(dm_op_dtype_arg(ctx, "to", DM_UNDEFINED, &to));
  return cast_to(ctx, to);
}

static dm_status cast_like_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  return cast_to(ctx, IN(1)->dtype);
}

static dm_status copy_run(dm_op_ctx *ctx) {
  const dm_tensor *x = IN(0);
  dm_tensor *y = OUT(0);
  if (dm_tensors_alias(y, x)) /* a view of X: make Y its own copy */
    dm_tensor_reset(y);
  if (x->dtype == DM_STRING)
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "cannot copy a STRING tensor on CUDA");
  DM_TRY(dm_op_run_infer(ctx));
  const size_t bytes = dm_tensor_nbytes(x);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  if (bytes)
    DM_CUDA_TRY(cudaMemcpyAsync(MDATA(y), DATA(x), bytes, cudaMemcpyDeviceToDevice, s));
  return DM_OK;
}

/* Whether argument `name` holds an int (fill.c's test: only an absent i gives two
 * different defaults). */
static int arg_is_int(const dm_op_ctx *ctx, const char *name) {
  return dm_op_arg_int(ctx, name, 0) == dm_op_arg_int(ctx, name, 1);
}

/* The element bit pattern ConstantFill's CPU kernel writes, computed once on the host. */
static dm_status fill_bits(dm_op_ctx *ctx, dm_dtype t, uint64_t *bits) {
  const int is_int = dm_op_has_arg(ctx, "value") && arg_is_int(ctx, "value");
  const int64_t iv = dm_op_arg_int(ctx, "value", 0);
  const double dv = is_int ? (double)iv : (double)dm_op_arg_float(ctx, "value", 0.0f);
  const int floating = t == DM_FLOAT || t == DM_DOUBLE || t == DM_FLOAT16 || t == DM_BFLOAT16;
  if (!is_int && !floating && t != DM_BOOL && (dv != dv || dv >= 0x1p63 || dv < -0x1p63))
    return dm_op_error(ctx, DM_ERR_INVALID, "'value' %g does not fit %s", dv, dm_dtype_name(t));
  const int64_t ival = is_int || floating || t == DM_BOOL ? iv : (int64_t)dv;
  float f;
  uint32_t u32;
  switch (t) {
  case DM_FLOAT:
    f = (float)dv;
    memcpy(&u32, &f, sizeof u32);
    *bits = u32;
    break;
  case DM_DOUBLE: memcpy(bits, &dv, sizeof *bits); break;
  case DM_FLOAT16: *bits = dm_double_to_half(dv); break;
  case DM_BFLOAT16: *bits = dm_double_to_bf16(dv); break;
  case DM_BOOL: *bits = dv != 0; break;
  case DM_INT8: *bits = (uint8_t)(int8_t)ival; break;
  case DM_UINT8: *bits = (uint8_t)ival; break;
  case DM_INT16: *bits = (uint16_t)(int16_t)ival; break;
  case DM_UINT16: *bits = (uint16_t)ival; break;
  case DM_INT32: *bits = (uint32_t)(int32_t)ival; break;
  case DM_INT64: *bits = (uint64_t)ival; break;
  default:
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED, "cannot fill a %s tensor on CUDA",
                       dm_dtype_name(t));
  }
  return DM_OK;
}

/* The CPU kernel's instantiation-time checks (fill.c's constant_fill_init): 'shape' with
 * an input, 'extra_shape' or 'input_as_shape' without one, a negative or too long
 * 'shape', and the dtype/value pair. Without them this kernel would run nets the CPU
 * refuses (infer alone ignores the shape arguments that do not apply). */
static dm_status constant_fill_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  DM_TRY(dm_fill_check_shape_args(ctx, 0));
  const int str_value = dm_op_arg_string(ctx, "value", NULL) != NULL;
  const dm_dtype dflt = str_value                                                  ? DM_STRING
                        : dm_op_has_arg(ctx, "value") && arg_is_int(ctx, "value") ? DM_INT64
                                                                                   : DM_FLOAT;
  dm_dtype t;
  DM_TRY(dm_op_dtype_arg(ctx, "dtype", dflt, &t));
  if ((t == DM_STRING) != str_value && dm_op_has_arg(ctx, "value"))
    return dm_op_error(ctx, DM_ERR_TYPE, "'value' is %s but dtype is %s",
                       t == DM_STRING ? "a number" : "a string", dm_dtype_name(t));
  return DM_OK;
}

static dm_status constant_fill_run(dm_op_ctx *ctx) {
  /* The shape from X's values would need them on the host (a sync per run). */
  if (dm_op_num_inputs(ctx) > 0 && dm_op_arg_int(ctx, "input_as_shape", 0))
    return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                       "input_as_shape reads the shape from device memory; run this "
                       "ConstantFill on the CPU");
  DM_TRY(dm_op_run_infer(ctx));
  dm_tensor *y = OUT(0);
  uint64_t bits = 0;
  DM_TRY(fill_bits(ctx, y->dtype, &bits));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_fill(s, MDATA(y), (int)dm_dtype_size(y->dtype), bits, y->numel));
  return DM_OK;
}

/* ---- update ops ------------------------------------------------------------------- */

/* The optional skip input at index i: its device pointer, or NULL when absent. */
static const void *skip_input(dm_op_ctx *ctx, int i, int *dtype) {
  if (dm_op_num_inputs(ctx) <= i) {
    *dtype = DM_UNDEFINED;
    return NULL;
  }
  *dtype = IN(i)->dtype;
  return DATA(IN(i));
}

static dm_status momentum_run(dm_op_ctx *ctx) { /* grad, moment, lr, param, [skip] */
  DM_TRY(dm_op_run_infer(ctx));
  int st;
  const void *skip = skip_input(ctx, 4, &st);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_momentum_sgd(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), DATA(IN(3)),
                               MDATA(OUT(0)), MDATA(OUT(1)), MDATA(OUT(2)),
                               dm_op_arg_float(ctx, "momentum", 0),
                               dm_op_arg_int(ctx, "nesterov", 0) != 0, skip, st, IN(0)->numel));
  return DM_OK;
}

static dm_status adam_run(dm_op_ctx *ctx) { /* param, m1, m2, grad, lr, iter, [skip] */
  DM_TRY(dm_op_run_infer(ctx));
  int st;
  const void *skip = skip_input(ctx, 6, &st);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_adam(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), DATA(IN(3)), DATA(IN(4)),
                       DATA(IN(5)), MDATA(OUT(0)), MDATA(OUT(1)), MDATA(OUT(2)),
                       dm_op_arg_float(ctx, "beta1", 0.9f), dm_op_arg_float(ctx, "beta2", 0.999f),
                       dm_op_arg_float(ctx, "epsilon", 1e-5f), skip, st, IN(0)->numel));
  return DM_OK;
}

/* X0, w0, ..., [skip]: up to DMK_MAX_TERMS pairs per launch, Y the running sum. */
static dm_status weighted_sum_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const int nin = dm_op_num_inputs(ctx), np = nin / 2;
  int st;
  const void *skip = nin % 2 ? skip_input(ctx, nin - 1, &st) : (st = DM_UNDEFINED, NULL);
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  float *y = MDATA(OUT(0));
  for (int j0 = 0; j0 < np; j0 += DMK_MAX_TERMS) {
    const float *x[DMK_MAX_TERMS], *w[DMK_MAX_TERMS];
    int k = np - j0 < DMK_MAX_TERMS ? np - j0 : DMK_MAX_TERMS;
    for (int j = 0; j < k; j++) {
      x[j] = DATA(IN(2 * (j0 + j)));
      w[j] = DATA(IN(2 * (j0 + j) + 1));
    }
    DM_CUDA_TRY(dmk_weighted_sum(s, x, w, k, j0 == 0, y, skip, st, IN(0)->numel));
  }
  return DM_OK;
}

/* ---- loss scaling --------------------------------------------------------------------- */

/* loss_scale, g_1..g_n -> g_1..g_n, found_inf: found_inf is set by the kernels, read by
 * the update ops' skip inputs; no value comes back to the host. */
static dm_status unscale_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx)); /* names, dtypes, and every output sized */
  const int n_in = dm_op_num_inputs(ctx);
  const float *scale = DATA(IN(0));
  float *found = MDATA(OUT(n_in - 1));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_unscale_begin(s, scale, found));
  for (int i = 1; i < n_in; i++) {
    const dm_tensor *g = IN(i);
    DM_CUDA_TRY(dmk_unscale(s, g->dtype, DATA(g), MDATA(OUT(i - 1)), scale, found, g->numel));
  }
  return DM_OK;
}

static dm_status update_init(dm_op_ctx *ctx, void **state) {
  dm_loss_scale_params p;
  *state = NULL;
  return dm_loss_scale_params_get(ctx, &p);
}

/* loss_scale, found_inf, good_steps, skipped_steps -> loss_scale, good_steps, skipped_steps */
static dm_status update_run(dm_op_ctx *ctx) {
  dm_loss_scale_params p;
  DM_TRY(dm_loss_scale_params_get(ctx, &p));
  DM_TRY(dm_op_run_infer(ctx));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_update_loss_scale(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), DATA(IN(3)),
                                    MDATA(OUT(0)), MDATA(OUT(1)), MDATA(OUT(2)), p.dynamic,
                                    p.growth, p.backoff, p.min_scale, p.max_scale, p.interval));
  return DM_OK;
}

/* ---- losses ------------------------------------------------------------------------ */

/* logits, labels, [weights] -> softmax, avg_loss */
static dm_status swl_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const dm_tensor *x = IN(0), *l = IN(1);
  const int has_w = dm_op_num_inputs(ctx) == 3, prob = dm_op_arg_int(ctx, "label_prob", 0) != 0;
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, x, dm_op_arg_int(ctx, "axis", 1), &N, &D));
  double *rowloss;
  DM_TRY(op_scratch(ctx, (size_t)N * sizeof(double), (void **)&rowloss));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_softmax_loss(s, x->dtype, DATA(x), prob ? NULL : DATA(l), prob ? DATA(l) : NULL,
                               has_w ? DATA(IN(2)) : NULL, MDATA(OUT(0)), rowloss, MDATA(OUT(1)),
                               dm_op_arg_float(ctx, "scale", 1.0f), N, D));
  return DM_OK;
}

/* logits, labels, [weights], softmax, d_avg_loss -> dX */
static dm_status swl_grad_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const int n = dm_op_num_inputs(ctx), has_w = n == 5;
  const int prob = dm_op_arg_int(ctx, "label_prob", 0) != 0;
  const dm_tensor *x = IN(0), *l = IN(1);
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, x, dm_op_arg_int(ctx, "axis", 1), &N, &D));
  double *kbuf;
  DM_TRY(op_scratch(ctx, sizeof(double), (void **)&kbuf));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_softmax_loss_grad(s, x->dtype, prob ? NULL : DATA(l), prob ? DATA(l) : NULL,
                                    has_w ? DATA(IN(2)) : NULL, DATA(IN(n - 2)), DATA(IN(n - 1)),
                                    kbuf, MDATA(OUT(0)), dm_op_arg_float(ctx, "scale", 1.0f), N,
                                    D));
  return DM_OK;
}

static dm_status lce_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, IN(0), 1, &N, &D));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_label_xent(s, DATA(IN(0)), DATA(IN(1)), MDATA(OUT(0)), N, D));
  return DM_OK;
}

static dm_status lce_grad_run(dm_op_ctx *ctx) { /* X, label, dY -> dX */
  DM_TRY(dm_op_run_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, IN(0), 1, &N, &D));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_label_xent_grad(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), MDATA(OUT(0)), N, D));
  return DM_OK;
}

static dm_status avg_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_averaged_loss(s, DATA(IN(0)), MDATA(OUT(0)), IN(0)->numel));
  return DM_OK;
}

static dm_status avg_grad_run(dm_op_ctx *ctx) { /* X, dY -> dX */
  DM_TRY(dm_op_run_infer(ctx));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_averaged_loss_grad(s, DATA(IN(1)), MDATA(OUT(0)), IN(0)->numel));
  return DM_OK;
}

static dm_status accuracy_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  int64_t N, D;
  DM_TRY(dm_loss_rows(ctx, IN(0), 1, &N, &D));
  cudaStream_t s;
  DM_TRY(op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_accuracy(s, DATA(IN(0)), DATA(IN(1)), MDATA(OUT(0)),
                           dm_op_arg_int(ctx, "top_k", 1), N, D));
  return DM_OK;
}

/* ---- registration ------------------------------------------------------------------ */

#define K(name, fn) {.type = name, .device = DM_CUDA, .engine = "", .run = fn}
static const dm_kernel_def kernels_[] = {
    K("Add", binary_run),
    K("Sub", binary_run),
    K("Mul", binary_run),
    K("Div", binary_run),
    K("Sum", sum_run),
    K("Scale", scale_run),
    K("SumReduceLike", reduce_like_run),
    K("Relu", relu_run),
    K("ReluGradient", relu_grad_run),
    K("FloatToHalf", float_to_half_run),
    K("HalfToFloat", half_to_float_run),
    K("Cast", cast_run),
    K("CastLike", cast_like_run),
    K("Copy", copy_run),
    {.type = "ConstantFill", .device = DM_CUDA, .engine = "", .init = constant_fill_init,
     .run = constant_fill_run},
    K("MomentumSGDUpdate", momentum_run),
    K("Adam", adam_run),
    K("WeightedSum", weighted_sum_run),
    K("UnscaleAndCheck", unscale_run),
    {.type = "UpdateLossScale", .device = DM_CUDA, .engine = "", .init = update_init,
     .run = update_run},
    K("SoftmaxWithLoss", swl_run),
    K("SoftmaxWithLossGradient", swl_grad_run),
    K("LabelCrossEntropy", lce_run),
    K("LabelCrossEntropyGradient", lce_grad_run),
    K("AveragedLoss", avg_run),
    K("AveragedLossGradient", avg_grad_run),
    K("Accuracy", accuracy_run),
};
#undef K

static const dm_op_schema *const schemas[] = {NULL}; /* the schemas are operators/' */
static const dm_kernel_def *const kernels[] = {
    &kernels_[0],  &kernels_[1],  &kernels_[2],  &kernels_[3],  &kernels_[4],  &kernels_[5],
    &kernels_[6],  &kernels_[7],  &kernels_[8],  &kernels_[9],  &kernels_[10], &kernels_[11],
    &kernels_[12], &kernels_[13], &kernels_[14], &kernels_[15], &kernels_[16], &kernels_[17],
    &kernels_[18], &kernels_[19], &kernels_[20], &kernels_[21], &kernels_[22], &kernels_[23],
    &kernels_[24], &kernels_[25], &kernels_[26], NULL};
_Static_assert(sizeof kernels_ / sizeof kernels_[0] == 27, "kernels[] lists every entry");
const dm_op_family dm_cuda_family_basic = {schemas, kernels};
