/* demitasse_plugin.h: the operator-author API. Built-in operators and plugins use the
 * same calls: describe an op with a dm_op_schema, implement it with one or more
 * dm_kernel_def (keyed by op type, device and engine), register both.
 *
 * A plugin is a shared library that exports
 *
 *     DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host);
 *
 * The loader first reads the exported `dm_plugin_api_version` (an int) and refuses the
 * library unless it equals DM_PLUGIN_API_VERSION; then it calls dm_plugin_entry, which
 * registers schemas and kernels through host->register_schema / host->register_kernel
 * (the same functions the built-ins use). Use DM_PLUGIN_DECLARE_VERSION() once.
 *
 * How the ABI grows. DM_PLUGIN_API_VERSION changes only when an existing field or
 * function changes; new fields are appended to the end of a struct, each appended block
 * starting past the previous layout's sizeof (its tail padding). The structs that can
 * grow (dm_op_schema, dm_kernel_def, dm_plugin_host) start with `struct_size`, the sizeof
 * the author's compiler saw; the small element structs of lists (dm_arg_spec,
 * dm_inplace_pair) and dm_op_cost never change. So a plugin built against an older
 * header (smaller struct) loads into a newer library, which treats the fields the plugin
 * did not know as zero (their defaults); a plugin built against a newer header loads into
 * an older library as long as it leaves the fields that library does not know zero, and
 * is refused with a message otherwise. Set `.struct_size = sizeof(dm_op_schema)`
 * (DM_SCHEMA_SIZE) and `.struct_size = sizeof(dm_kernel_def)` (DM_KERNEL_SIZE); 0 is
 * refused. Functions are only ever added, as exported symbols: a plugin calling one that
 * is newer than the library it is loaded into is refused by the loader ("undefined
 * symbol"), with the library's dlopen message.
 *
 * A kernel reads its inputs and arguments and writes its outputs through a dm_op_ctx:
 *
 *     static dm_status swish_run(dm_op_ctx *ctx) {
 *       const dm_tensor *x = dm_op_input(ctx, 0);
 *       dm_tensor *y = dm_op_output(ctx, 0);
 *       DM_TRY(dm_tensor_resize_like(y, x));
 *       const float *px = dm_tensor_data(x);   float *py = dm_tensor_mutable_data(y);
 *       for (int64_t i = 0; i < dm_tensor_numel(x); i++) py[i] = px[i] / (1 + expf(-px[i]));
 *       return DM_OK;
 *     }
 *
 * Errors: return dm_op_error(ctx, status, fmt, ...); the executor adds the op's
 * index, type and name to the message.
 */
#ifndef DEMITASSE_PLUGIN_H
#define DEMITASSE_PLUGIN_H

#include "demitasse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Changed only when an existing field or function changes meaning or place; appending
 * a field or adding a function keeps it (see "How the ABI grows" above). */
#define DM_PLUGIN_API_VERSION 3

#define DM_PLUGIN_EXPORT __attribute__((visibility("default")))
#define DM_PLUGIN_DECLARE_VERSION() \
  DM_PLUGIN_EXPORT const int dm_plugin_api_version = DM_PLUGIN_API_VERSION


typedef enum dm_device_type { DM_CPU = 0, DM_CUDA = 1 } dm_device_type;

/* Argument types of an OperatorDef's `arg` entries. */
typedef enum dm_arg_type {
  DM_ARG_FLOAT = 1,   /* f (an integer value i is accepted too) */
  DM_ARG_INT = 2,     /* i */
  DM_ARG_STRING = 3,  /* s */
  DM_ARG_FLOATS = 4,  /* floats */
  DM_ARG_INTS = 5,    /* ints */
  DM_ARG_STRINGS = 6, /* strings */
  DM_ARG_NET = 7,     /* n */
  DM_ARG_TENSOR = 8,  /* t */
  DM_ARG_ANY = 9      /* not checked */
} dm_arg_type;

typedef struct dm_arg_spec {
  const char *name;
  dm_arg_type type;
  int required; /* nonzero: instantiating an op without it fails */
  const char *doc;
} dm_arg_spec;

/* How the mixed-precision pass treats an op (read by net passes). */
typedef enum dm_precision_class {
  DM_PREC_FOLLOW = 0, /* runs in the precision of its inputs (Relu, pooling, reshape) */
  DM_PREC_FP16 = 1,   /* benefits from FP16 (Conv, FC and their gradients) */
  DM_PREC_FP32 = 2,   /* must run in FP32 (softmax, losses, reductions, updates) */
  DM_PREC_NONE = 3    /* not a float computation (fills, casts, integer ops) */
} dm_precision_class;

/* What role an op plays in training, for the passes that rewrite training nets. */
typedef enum dm_op_role {
  DM_ROLE_COMPUTE = 0,  /* forward or backward computation */
  DM_ROLE_OPTIMIZER = 1 /* updates training state (iteration counter, learning rate,
                           parameters, momenta): the mixed-precision pass runs it in FP32
                           on the FP32 masters, after the gradients are unscaled */
} dm_op_role;

/* An in-place pair: output `out` may share the blob of input `in`. End lists with {-1,-1}. */
/* How an op meets 4-D data the layout pass (net/passes/layout_pass.h) holds NHWC. The schema's
 * layout_inputs/layout_outputs masks name the slots that hold such data (bit 63: that
 * slot and every later one). */
typedef enum dm_layout_rule {
  DM_LAYOUT_REFUSE = 0,   /* unknown: the pass refuses the op when it reads NHWC data */
  DM_LAYOUT_ORDER = 1,    /* takes an `order` argument (NCHW or NHWC): the pass sets it;
                             channels pass through (pools, batch norm, LRN) */
  DM_LAYOUT_FILTER = 2,   /* as ORDER, and input 1 is a filter (M x C x kH x kW; NHWC:
                             M x kH x kW x C) whose dim 0 is the output's channels (Conv) */
  DM_LAYOUT_JOIN = 3,     /* as ORDER, joining its inputs along channels (Concat); an
                             explicit `axis` is a dim of the 4-D data and is renumbered */
  DM_LAYOUT_ELEMENTWISE = 4, /* computes element by element (or over the whole tensor, the
                             same whatever the order): the masked outputs have the layout
                             of the masked inputs; in-place outputs keep theirs */
  DM_LAYOUT_FLATTEN = 5   /* flattens input 0 from dim 1 against a weight, input 1 (FC,
                             N x C*H*W): the pass reorders the weight's columns for NHWC */
} dm_layout_rule;

typedef struct dm_inplace_pair {
  int in, out;
} dm_inplace_pair;

/* One output of a gradient op: the gradient of the forward op's input `input` (-1 ends
 * the list). With `unless` set, an op whose integer argument of that name is nonzero
 * has no such output, and the later ones move down one (ConvGradient's no_bias: no db). */
typedef struct dm_grad_slot {
  int input;
  const char *unless;
} dm_grad_slot;

typedef struct dm_op_ctx dm_op_ctx;
typedef struct dm_grad_ctx dm_grad_ctx;

/* What one run of an op costs, for `demitasse inspect` and the benchmarks. */
typedef struct dm_op_cost {
  double flops;         /* multiply-adds count as 2 */
  double bytes_read;    /* inputs */
  double bytes_written; /* outputs */
} dm_op_cost;

/* A schema: what passes and the instantiator need to know about an op type. */
typedef struct dm_op_schema {
  size_t struct_size; /* sizeof(dm_op_schema) as compiled: DM_SCHEMA_SIZE */
  const char *type;
  int min_inputs, max_inputs;   /* max -1: unbounded */
  int min_outputs, max_outputs; /* max -1: unbounded */
  const dm_arg_spec *args;      /* terminated by {NULL}; may be NULL */
  const dm_inplace_pair *inplace; /* allowed in-place pairs, {-1,-1}-terminated; NULL: none */
  int inplace_any;                /* nonzero: any output may alias any input */
  dm_precision_class precision;
  const char *doc;
  /* Shape and type inference, optional: checks the inputs' dtypes and shapes and
   * declares every output with dm_op_set_output. Passes call it with shape-only tensors
   * (dm_op_shape_only(ctx) is nonzero, inputs have no data); kernels call it first,
   * when dm_op_set_output also allocates, so the checks are written once. */
  dm_status (*infer)(dm_op_ctx *ctx);
  /* Cost for the inferred shapes, optional (the default counts bytes only). */
  void (*cost)(dm_op_ctx *ctx, dm_op_cost *cost);
  /* Gradient maker: emits the ops that compute the gradients of the inputs from those
   * of the outputs (see "Gradient makers" below). With gradient NULL, no_gradient
   * nonzero means the op passes no gradient back (fills, StopGradient, Iter); zero means
   * differentiating through it is an error (Accuracy, optimizer updates). */
  dm_status (*gradient)(dm_grad_ctx *g);
  int no_gradient;

  /* Appended in ABI 3.1 (zero in a schema built against an older header, which keeps the
   * old behaviour). What the net passes need to know of the op, so that they hold no
   * per-op rules of their own. Slot masks: bit i is input or output i, bit 63
   * slot 63 and every later one (core/slot_mask.h reads them).
   * The block starts with a 64-bit field so that it begins past the 3.0 struct's tail
   * padding, which an older plugin leaves uninitialised; every later block must too. */
  /* Float slots that stay FP32 whatever precision the op runs in (batch norm's scale,
   * bias and statistics beside an FP16 X, as cuDNN wants them). */
  uint64_t fp32_inputs, fp32_outputs;
  /* Slots that hold no float data (integer shapes, split sizes, masks): never cast. */
  uint64_t nonfloat_inputs, nonfloat_outputs;
  /* Inputs whose VALUES a kernel reads on the host (a shape, split sizes): on a device,
   * reading them would need a synchronisation, so the device pass keeps an op that has
   * one of them on the CPU. */
  uint64_t host_inputs;
  dm_op_role role;
  /* DM_ROLE_OPTIMIZER ops: nonzero when the op accepts one extra, last input, found_inf
   * (a scalar), and leaves every output bit-identical when it is nonzero: the
   * mixed-precision pass appends it so a step with an inf/nan gradient is skipped. */
  int skip_input;
  /* Outputs whose buffers the kernel hands out again every run (a DB reader's two
   * alternating batch buffers, page-locked once for DMA uploads): freeing them between
   * runs would allocate afresh each time, so the memory pass keeps them when asked to. */
  uint64_t reused_outputs;

  /* Appended in ABI 3.2. What the layout pass needs (see dm_layout_rule; zero: the op
   * is refused when it reads data held NHWC). */
  uint64_t layout_inputs, layout_outputs;
  dm_layout_rule layout;

  /* Appended in ABI 3.4. How values flow through the op, for a pass that follows them
   * (the layout pass pads channels only where zeros stay zeros), so that it names no op.
   * Nonzero: output 0 holds input 0's values, copied or cast element by element, 0
   * staying 0 (Cast, FloatToHalf, HalfToFloat, StopGradient). */
  uint64_t value_copy;
  /* A gradient op's outputs, in order: the forward op's input each is the gradient of
   * (ConvGradient: dW, db, dX of Conv's W, b, X). NULL: not said. */
  const dm_grad_slot *grad_slots;
} dm_op_schema;

/* A kernel. `run` is called every time the net runs; `init` (optional) once at
 * instantiation to validate arguments and build private state, freed by `fini`. */
typedef struct dm_kernel_def {
  size_t struct_size; /* sizeof(dm_kernel_def) as compiled: DM_KERNEL_SIZE */
  const char *type;
  dm_device_type device;
  const char *engine; /* "" or NULL: the plain implementation */
  dm_status (*init)(dm_op_ctx *ctx, void **state);
  dm_status (*run)(dm_op_ctx *ctx);
  void (*fini)(void *state);
  /* Nonzero: inputs may live on another device than the op (CopyCPUToGPU and
   * CopyGPUToCPU); zero: the executor checks that every input is on the op's device. */
  int cross_device;

  /* Appended in ABI 3.1. Optional: whether this kernel can run this op, given its
   * arguments, input count and input dtypes (ggml's supports_op). NULL: every op its
   * schema admits. Asked when the executor picks among engines and when the device pass
   * places an op, so a kernel, not a pass, says what it cannot do. During placement the
   * inputs are shape-only tensors whose dtype may still be DM_UNDEFINED (not yet known):
   * answer for what is known. */
  int (*supports)(const dm_op_ctx *ctx);

  /* Appended in ABI 3.3: DM_KERNEL_* bits (0: none). */
  uint64_t flags;
} dm_kernel_def;

/* dm_kernel_def.flags. */
/* The kernel takes its inputs in whatever storage layout they hold and leaves them so
 * (Free drops a blob without converting it first); without it, the executor hands a
 * kernel plain row-major data. */
#define DM_KERNEL_ANY_LAYOUT 0x1u
/* A device kernel whose run may be recorded once into a device graph (a CUDA graph) and
 * replayed in later runs instead of being called: it queues all its work on the op's
 * stream (dm_op_cuda_stream) and waits for none of it; it reads no host memory at run
 * time except its arguments and the state made at init; what it queues depends only on
 * its arguments and its inputs' shapes, dtypes and addresses, never on their values or
 * a per-run host counter (a random seed advanced on the host, say); and after its first
 * runs at a given shape it allocates only through its outputs (no growing a scratch
 * buffer). The executor replays a run of such ops while those shapes and addresses stay
 * as they were captured (net/graph_exec.h). Without it, the op runs every time. */
#define DM_KERNEL_GRAPH_SAFE 0x2u

/* For a supports hook that says no: records why and returns 0, as in
 *     return dm_op_refuse(ctx, "input_as_shape reads its input's values on the host");
 * The reason ends the executor's error when no kernel supports the op, and the device
 * pass's report line for an op it keeps on the CPU. */
DM_API int dm_op_refuse(const dm_op_ctx *ctx, const char *fmt, ...) DM_PRINTF(2, 3);

/* Registration (built-ins and plugins alike). The registry copies each struct during the
 * call, so the struct itself may be temporary; the strings and functions it points at
 * must outlive the process's use of the op (static storage, or a plugin that stays
 * loaded). Registering an existing type (schema) or an existing (type, device, engine)
 * (kernel) fails with DM_ERR_EXISTS. Refused with DM_ERR_INVALID: a type name over 80
 * characters or an engine over 63, min_inputs/min_outputs below 0 or above a max that is
 * not -1, a kernel device other than DM_CPU or DM_CUDA. Called by a plugin during its
 * dm_plugin_entry, these act as the host's callbacks do: the registration is committed
 * with the plugin's others, or dropped if the load is refused. */
DM_API dm_status dm_register_schema(const dm_op_schema *schema);
DM_API dm_status dm_register_kernel(const dm_kernel_def *kernel);
DM_API const dm_op_schema *dm_schema_lookup(const char *type);

#define DM_SCHEMA_SIZE .struct_size = sizeof(dm_op_schema)
#define DM_KERNEL_SIZE .struct_size = sizeof(dm_kernel_def)

/* What a plugin's entry function receives. Fields are appended in later versions:
 * check struct_size before using one your header has and an older library may lack. */
typedef struct dm_plugin_host {
  size_t struct_size;
  int api_version;
  dm_status (*register_schema)(const dm_op_schema *schema);
  dm_status (*register_kernel)(const dm_kernel_def *kernel);
} dm_plugin_host;

typedef dm_status (*dm_plugin_entry_fn)(const dm_plugin_host *host);

/* What a plugin defines (declared here so that plugins compile warning-free). */
extern DM_PLUGIN_EXPORT const int dm_plugin_api_version;
DM_PLUGIN_EXPORT dm_status dm_plugin_entry(const dm_plugin_host *host);

/* Inside a kernel ---------------------------------------------------------------- */

DM_API int dm_op_num_inputs(const dm_op_ctx *ctx);
DM_API int dm_op_num_outputs(const dm_op_ctx *ctx);
DM_API const dm_tensor *dm_op_input(dm_op_ctx *ctx, int i);
DM_API dm_tensor *dm_op_output(dm_op_ctx *ctx, int i);
DM_API const char *dm_op_input_name(const dm_op_ctx *ctx, int i);
/* Input i's dtype; DM_UNDEFINED when i is out of range or the dtype is not known yet (a
 * supports hook asked during placement, before the net has run). */
DM_API dm_dtype dm_op_input_dtype(const dm_op_ctx *ctx, int i);
DM_API const char *dm_op_output_name(const dm_op_ctx *ctx, int i);
DM_API const char *dm_op_type(const dm_op_ctx *ctx);
/* Where the op runs: its device_option's device_type and device_id (CPU, 0 by default).
 * Outputs a kernel declares with dm_op_set_output are allocated there, and the
 * executor refuses to run an op whose inputs are elsewhere unless its kernel says
 * cross_device (copy ops). Data pointers of a CUDA tensor are device pointers. */
DM_API dm_device_type dm_op_device(const dm_op_ctx *ctx);
DM_API int dm_op_device_id(const dm_op_ctx *ctx);
/* Runs the op's schema inference (its checks, and dm_op_set_output for every output):
 * for kernels written apart from their schema, such as a second device's. */
DM_API dm_status dm_op_run_infer(dm_op_ctx *ctx);
/* For kernels of CUDA plugins: the cudaStream_t the op's work must be queued on, and
 * the cublasHandle_t, cublasLtHandle_t and cudnnHandle_t of the op's device for the
 * calling thread (already set to that stream). NULL for an op on the CPU or in a build
 * without CUDA. Cast to the CUDA type. */
DM_API void *dm_op_cuda_stream(const dm_op_ctx *ctx);
DM_API void *dm_op_cublas_handle(const dm_op_ctx *ctx);
DM_API void *dm_op_cublaslt_handle(const dm_op_ctx *ctx);
DM_API void *dm_op_cudnn_handle(const dm_op_ctx *ctx);
/* The kernel's private state from init (NULL if none). */
DM_API void *dm_op_state(dm_op_ctx *ctx);
/* The op's device_option.random_seed if set, else `fallback`. */
DM_API uint32_t dm_op_random_seed(const dm_op_ctx *ctx, uint32_t fallback);

/* Arguments, validated against the schema at instantiation. *_or return the default
 * when absent. */
DM_API int dm_op_has_arg(const dm_op_ctx *ctx, const char *name);
/* The type of the value argument `name` holds (DM_ARG_FLOAT for f, DM_ARG_INTS for ints,
 * ...), or 0 when the op has no such argument or it holds no value. */
DM_API dm_arg_type dm_op_arg_type(const dm_op_ctx *ctx, const char *name);
DM_API float dm_op_arg_float(const dm_op_ctx *ctx, const char *name, float dflt);
DM_API int64_t dm_op_arg_int(const dm_op_ctx *ctx, const char *name, int64_t dflt);
/* Borrowed; NULL-terminated copy not guaranteed for binary bytes: see *len. */
DM_API const char *dm_op_arg_string(const dm_op_ctx *ctx, const char *name, const char *dflt);
/* Arrays: *n receives the count; the pointer is borrowed (NULL if absent). */
DM_API const float *dm_op_arg_floats(const dm_op_ctx *ctx, const char *name, size_t *n);
DM_API const int64_t *dm_op_arg_ints(const dm_op_ctx *ctx, const char *name, size_t *n);
DM_API const char *const *dm_op_arg_strings(const dm_op_ctx *ctx, const char *name, size_t *n);

/* Nonzero while shapes are being inferred: tensors carry dtype and shape, no data. */
DM_API int dm_op_shape_only(const dm_op_ctx *ctx);
/* Declares output i: in shape-only mode records dtype and shape, otherwise resizes it
 * (allocating as dm_tensor_resize does). */
DM_API dm_status dm_op_set_output(dm_op_ctx *ctx, int i, dm_dtype dtype, int ndim,
                                  const int64_t *dims);

/* Records an error for this op and returns `s`. */
DM_API dm_status dm_op_error(dm_op_ctx *ctx, dm_status s, const char *fmt, ...) DM_PRINTF(3, 4);

/* Gradient makers -----------------------------------------------------------------
 * Called by the gradient pass for a forward op some of whose outputs have gradients.
 * Names follow Caffe2: the gradient of blob X is X_grad (or a temporary the pass sums
 * when X feeds several ops). Emitted ops copy the forward op's arguments, device and
 * engine and carry is_gradient_op. A typical maker:
 *
 *     static dm_status relu_gradient(dm_grad_ctx *g) {   // ReluGradient: Y, dY -> dX
 *       const char *in[] = {dm_grad_output(g, 0), dm_grad_output_grad(g, 0)};
 *       const char *out[] = {dm_grad_input_grad(g, 0)};
 *       return dm_grad_emit(g, "ReluGradient", 2, in, 1, out);
 *     }
 */
DM_API int dm_grad_num_inputs(const dm_grad_ctx *g);
DM_API int dm_grad_num_outputs(const dm_grad_ctx *g);
/* Forward blob names. */
DM_API const char *dm_grad_input(const dm_grad_ctx *g, int i);
DM_API const char *dm_grad_output(const dm_grad_ctx *g, int i);
/* The gradient of output i, or NULL when no gradient reaches it. */
DM_API const char *dm_grad_output_grad(const dm_grad_ctx *g, int i);
/* The name to write input i's gradient to. */
DM_API const char *dm_grad_input_grad(const dm_grad_ctx *g, int i);
/* Nonzero when the loss can use input i's gradient (it leads to a parameter or an
 * external input); a maker may skip the rest (Conv's `no_gradient_to_input`). */
DM_API int dm_grad_input_needed(const dm_grad_ctx *g, int i);
/* Declares that input i's gradient is the existing blob `blob` (no op needed), as when
 * Sum passes dY to every input. */
DM_API dm_status dm_grad_set_input_grad(dm_grad_ctx *g, int i, const char *blob);
/* The forward op's arguments. */
DM_API int dm_grad_has_arg(const dm_grad_ctx *g, const char *name);
DM_API int64_t dm_grad_arg_int(const dm_grad_ctx *g, const char *name, int64_t dflt);
DM_API float dm_grad_arg_float(const dm_grad_ctx *g, const char *name, float dflt);
/* Emits a gradient op. */
DM_API dm_status dm_grad_emit(dm_grad_ctx *g, const char *type, int n_in, const char *const *in,
                              int n_out, const char *const *out);
/* Sets (adds or replaces) an argument of the op emitted last. */
DM_API dm_status dm_grad_set_arg_int(dm_grad_ctx *g, const char *name, int64_t v);
DM_API dm_status dm_grad_set_arg_float(dm_grad_ctx *g, const char *name, float v);
/* Drops every copied argument of the op emitted last (for ops that take none). */
DM_API void dm_grad_clear_args(dm_grad_ctx *g);

/* FP16 and BF16, stored as uint16_t bit patterns: narrowing rounds to nearest even,
 * handles subnormals, inf and nan exactly (the same bits as the built-in kernels and
 * F16C). dm_convert converts n values between any two of FLOAT, FLOAT16 and BFLOAT16
 * (the same dtype: a copy); DM_ERR_TYPE for other dtypes. */
DM_API uint16_t dm_f32_to_f16(float f);
DM_API float dm_f16_to_f32(uint16_t h);
DM_API uint16_t dm_f32_to_bf16(float f);
DM_API float dm_bf16_to_f32(uint16_t h);
DM_API dm_status dm_convert(dm_dtype dst_type, void *dst, dm_dtype src_type, const void *src,
                            size_t n);

/* Tensors (write side). A resize keeps the storage when the byte size is unchanged,
 * otherwise allocates fresh (64-byte aligned) storage; sizes are checked for overflow
 * and against the workspace's tensor limit. */
DM_API dm_status dm_tensor_resize(dm_tensor *t, dm_dtype dtype, int ndim, const int64_t *dims);
DM_API dm_status dm_tensor_resize_like(dm_tensor *t, const dm_tensor *like);
DM_API void *dm_tensor_mutable_data(dm_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* DEMITASSE_PLUGIN_H */
