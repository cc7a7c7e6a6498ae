/* common.h: small helpers the CPU operator files share (internal). */
#ifndef DM_OPERATORS_COMMON_H
#define DM_OPERATORS_COMMON_H

#include "core/half.h"
#include "core/op_ctx.h" /* dm_op_check_shapes */
#include "core/tensor.h"

/* Canonical axis in [0, ndim] (end_ok: ndim itself allowed, as for flattening) from a
 * possibly negative one; DM_ERR_INVALID naming `what` when out of range. */
DM_HIDDEN dm_status dm_op_canonical_axis(dm_op_ctx *ctx, const char *what, int64_t axis,
                                         int ndim, int end_ok, int *out);
/* Product of dims[lo..hi). The tensor's numel is already overflow-checked. */
DM_HIDDEN int64_t dm_dims_product(const dm_tensor *t, int lo, int hi);
/* Nonzero when a and b share storage (so writing one changes the other). */
DM_HIDDEN int dm_tensors_alias(const dm_tensor *a, const dm_tensor *b);

/* A gradient kernel's in-place rule, its words shared by every family: output dx (dX) is
 * none of the inputs in mask `inputs` (input i: bit i, i < 32), which the kernel reads
 * again after writing dX. names[i] names input i. dy >= 0: dX may be input dy's blob
 * (each element read before the same element of dX is written), and the error says so:
 * DM_ERR_INVALID "dX may be dY's blob, not Y's"; dy < 0: "dX may not be Y's blob". */
DM_HIDDEN dm_status dm_op_check_grad_alias(dm_op_ctx *ctx, int dx, int dy, uint32_t inputs,
                                           const char *const *names);

/* FLOAT or FLOAT16: the dtypes of the float kernels (FP16 in, FP32 compute, FP16 out). */
DM_HIDDEN int dm_is_float_or_half(dm_dtype t);
/* FLOAT16 or BFLOAT16: the 16-bit floats stored as uint16_t patterns, which the reduced-
 * precision kernels widen to FP32, compute on, and round back once. */
static inline int dm_is_reduced_float(dm_dtype t) { return t == DM_FLOAT16 || t == DM_BFLOAT16; }
/* FLOAT, FLOAT16 or BFLOAT16: the dtypes of the kernels that take either reduced format. */
static inline int dm_is_float_or_reduced(dm_dtype t) {
  return t == DM_FLOAT || dm_is_reduced_float(t);
}
/* One element of a FLOAT16 or BFLOAT16 (t) pattern widened (exact), and a double rounded
 * once into it (nearest even; NaN stays NaN). */
static inline float dm_reduced_to_float(dm_dtype t, uint16_t h) {
  return t == DM_BFLOAT16 ? dm_bf16_to_float(h) : dm_half_to_float(h);
}
static inline uint16_t dm_double_to_reduced(dm_dtype t, double d) {
  return t == DM_BFLOAT16 ? dm_double_to_bf16(d) : dm_double_to_half(d);
}
/* n FLOAT16 or BFLOAT16 (t) elements widened to float (exact), and floats narrowed to
 * them (nearest even, once); src and dst must not overlap. */
DM_HIDDEN void dm_widen(dm_dtype t, const uint16_t *src, float *dst, size_t n);
DM_HIDDEN void dm_narrow(dm_dtype t, const float *src, uint16_t *dst, size_t n);
/* n elements from index i0 of a FLOAT, FLOAT16, BFLOAT16 or DOUBLE array, widened/narrowed
 * to float (exact for the 16-bit ones), and back (16-bit rounded to nearest even, once). */
DM_HIDDEN void dm_load_f32(dm_dtype t, const void *src, int64_t i0, int64_t n, float *dst);
DM_HIDDEN void dm_store_f32(dm_dtype t, void *dst, int64_t i0, int64_t n, const float *src);

/* A DataType argument given as a number or a name ("FLOAT16"); `dflt` when absent.
 * DM_ERR_TYPE names the argument for anything else. */
DM_HIDDEN dm_status dm_op_dtype_arg(dm_op_ctx *ctx, const char *name, dm_dtype dflt,
                                    dm_dtype *out);
/* Cast's kernel init, for the CPU and CUDA kernels alike: `to` is resolved and checked
 * once, at instantiation (a number or a name, BYTE read as UINT8, numeric only); the
 * state is the dtype number itself: (dm_dtype)(intptr_t)dm_op_state(ctx). */
DM_HIDDEN dm_status dm_cast_init(dm_op_ctx *ctx, void **state);
/* DM_ERR_UNSUPPORTED while inferring shapes when input i has no values to read (the
 * output shape depends on them: Reshape's new_shape, input_as_shape, Split's sizes). */
/* DM_OK when input i's values are there (or it has none); else, in shape inference,
 * DM_ERR_NOT_FOUND: the output shape is not known yet, which is no fault of the op (the
 * ONNX importer tells it apart from an op's own refusals by this status). */
DM_HIDDEN dm_status dm_op_need_values(dm_op_ctx *ctx, int i, const char *why);
/* An optional `iter` input (slot i): the INT64 iteration blob that checkpoints carry (INT32
 * taken too), one value. Checked always; with b not NULL and values there (not shape
 * inference), *b is its value, checked >= 0. The ops that pick what they do by the
 * iteration, so that a resumed run does what the uninterrupted one did, share it
 * (TensorProtosDBInput's batch, MaskTokens' draws). */
DM_HIDDEN dm_status dm_op_iteration_input(dm_op_ctx *ctx, int i, int64_t *b);
/* Adds the bytes of every input and output to *c (the part of a cost all ops share). */
DM_HIDDEN void dm_cost_io(dm_op_ctx *ctx, dm_op_cost *c);
/* The OperatorDef `order` argument's channel axis: NCHW -> 1, NHWC -> 3. */
DM_HIDDEN dm_status dm_op_order_axis(dm_op_ctx *ctx, int *out);
/* X (at least 2 dims) as N blocks of C channels x HW positions in NCHW (nhwc 0) or NHWC
 * order (BN and LRN, on the CPU and on CUDA). */
static inline void dm_channel_view(const dm_tensor *x, int nhwc, int64_t *N, int64_t *C,
                                   int64_t *HW) {
  *N = x->dims[0];
  *C = nhwc ? x->dims[x->ndim - 1] : x->dims[1];
  *HW = nhwc ? dm_dims_product(x, 1, x->ndim - 1) : dm_dims_product(x, 2, x->ndim);
}

/* Fill shapes (defined in fill.c, shared with random_fill.c). Arguments `shape`,
 * `input_as_shape`, `extra_shape` as Caffe2's FillerOp: */
#define DM_FILL_SHAPE_ARGS                                                               \
  {"shape", DM_ARG_INTS, 0, "output shape when there is no input"},                     \
      {"input_as_shape", DM_ARG_INT, 0, "use the input's values (1-D int) as the shape"}, \
      {"extra_shape", DM_ARG_INTS, 0, "dims appended to the input-derived shape"}
/* Why this fill reads its input's VALUES (input_as_shape with an input: the shape is
 * data, so a device kernel would have to read it on the host), or NULL when it reads the
 * input's shape only or has none. For kernels' supports hooks. */
DM_HIDDEN const char *dm_fill_reads_input_values(const dm_op_ctx *ctx);
/* Instantiation-time checks of those arguments. */
DM_HIDDEN dm_status dm_fill_check_shape_args(dm_op_ctx *ctx, int shape_required);
/* The output shape for this run (the input may change between runs). */
DM_HIDDEN dm_status dm_fill_shape(dm_op_ctx *ctx, int *ndim, int64_t *dims);
/* Declares output 0 with that shape (allocating unless shape-only); *y is the output. */
DM_HIDDEN dm_status dm_fill_set_output(dm_op_ctx *ctx, dm_dtype dtype, dm_tensor **y);
/* Whether argument `name` holds an int (as opposed to a float or nothing). */
DM_HIDDEN int dm_op_arg_is_int(const dm_op_ctx *ctx, const char *name);
/* ConstantFill, shared by the CPU and CUDA kernels: the output dtype (`dtype`, else from
 * the type of `value`, Caffe2's rule); the kernel init (instantiation-time checks of the
 * shape arguments and the dtype/value pair); and the element's bit pattern for numeric
 * dtype t (in the low dm_dtype_size(t) bytes), DM_ERR_UNSUPPORTED "cannot fill a T
 * tensor<where>" for the others. */
DM_HIDDEN dm_status dm_constant_fill_dtype(dm_op_ctx *ctx, dm_dtype *out);
DM_HIDDEN dm_status dm_constant_fill_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN dm_status dm_constant_fill_bits(dm_op_ctx *ctx, dm_dtype t, const char *where,
                                          uint64_t *bits);

/* Philox4x32-10 (Salmon et al. 2011), the counter-based generator of random_fill.c:
 * out = the 4 words for counter ctr under key. */
DM_HIDDEN void dm_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* One row of a dm_parallel_rows loop: row i, with the calling thread's scratch. */
typedef void (*dm_row_fn)(void *arg, void *scratch, int64_t i);
/* fn(arg, scratch, i) for every i in [0, n): on OpenMP threads when `parallel` is nonzero
 * (static schedule, at most one thread a row), else in order on this thread; each thread
 * gets its own scratch_bytes (64-byte aligned, contents undefined). The scratch of every
 * thread is had before any row runs, so a failure does nothing and says so
 * (DM_ERR_NOMEM "out of memory for <what>"), and no thread has a failure to report. */
DM_HIDDEN dm_status dm_parallel_rows(dm_op_ctx *ctx, int64_t n, int parallel,
                                     size_t scratch_bytes, const char *what, dm_row_fn fn,
                                     void *arg);

/* A kernel's scratch memory, kept between runs in its state so that a training step does
 * not allocate (and page-fault in) fresh buffers every time. Grows, never shrinks. */
typedef struct dm_scratch {
  void *p;
  size_t cap;
} dm_scratch;
/* Kernel init/fini that create and free a dm_scratch state. */
DM_HIDDEN dm_status dm_scratch_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN void dm_scratch_fini(void *state);
/* At least `bytes` of 64-byte aligned scratch (contents undefined). */
DM_HIDDEN dm_status dm_scratch_get(dm_scratch *s, size_t bytes, void **out);

#endif
