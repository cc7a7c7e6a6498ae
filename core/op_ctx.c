/* op_ctx.c: what a kernel sees of its op: blobs, arguments, seed, errors (the struct:
 * op_ctx_impl.h, filled by the executor in net/net.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "op_ctx.h"
#include "op_ctx_impl.h"
#include "op_message.h"

int dm_op_num_inputs(const dm_op_ctx *ctx) { return ctx->n_in; }
int dm_op_num_outputs(const dm_op_ctx *ctx) { return ctx->n_out; }

const dm_tensor *dm_op_input(dm_op_ctx *ctx, int i) {
  return i >= 0 && i < ctx->n_in ? ctx->in[i]->tensor : NULL;
}

dm_tensor *dm_op_output(dm_op_ctx *ctx, int i) {
  return i >= 0 && i < ctx->n_out ? ctx->out[i]->tensor : NULL;
}

const char *dm_op_input_name(const dm_op_ctx *ctx, int i) {
  return i >= 0 && i < ctx->n_in ? ctx->in[i]->name : NULL;
}

dm_dtype dm_op_input_dtype(const dm_op_ctx *ctx, int i) {
  return i >= 0 && i < ctx->n_in && ctx->in[i]->tensor ? ctx->in[i]->tensor->dtype : DM_UNDEFINED;
}

const char *dm_op_output_name(const dm_op_ctx *ctx, int i) {
  return i >= 0 && i < ctx->n_out ? ctx->out[i]->name : NULL;
}

const char *dm_op_type(const dm_op_ctx *ctx) { return ctx->def->type; }
void *dm_op_state(dm_op_ctx *ctx) { return ctx->state; }

uint32_t dm_op_random_seed(const dm_op_ctx *ctx, uint32_t fallback) {
  return ctx->has_seed ? ctx->seed : fallback;
}

static const dm_arg *find_arg(const dm_op_ctx *ctx, const char *name) {
  for (size_t i = 0; i < ctx->n_args; i++)
    if (strcmp(ctx->args[i].pb->name, name) == 0)
      return &ctx->args[i];
  return NULL;
}

int dm_op_has_arg(const dm_op_ctx *ctx, const char *name) { return find_arg(ctx, name) != NULL; }

dm_arg_type dm_op_arg_type(const dm_op_ctx *ctx, const char *name) {
  const dm_arg *a = find_arg(ctx, name);
  if (!a)
    return 0;
  const Caffe2__Argument *pb = a->pb;
  if (pb->has_f)
    return DM_ARG_FLOAT;
  if (pb->has_i)
    return DM_ARG_INT;
  if (pb->has_s)
    return DM_ARG_STRING;
  if (pb->n_floats)
    return DM_ARG_FLOATS;
  if (pb->n_ints)
    return DM_ARG_INTS;
  if (pb->n_strings)
    return DM_ARG_STRINGS;
  if (pb->n)
    return DM_ARG_NET;
  if (pb->t)
    return DM_ARG_TENSOR;
  return 0;
}

static void *device_handle(const dm_op_ctx *ctx, dm_device_handle which) {
  const dm_device_ops *ops = ctx->device == DM_CPU ? NULL : dm_device_ops_for(ctx->device);
  return ops && ops->handle ? ops->handle(ctx->device_id, which) : NULL;
}

void *dm_op_cuda_stream(const dm_op_ctx *ctx) { return device_handle(ctx, DM_HANDLE_STREAM); }
void *dm_op_cublas_handle(const dm_op_ctx *ctx) { return device_handle(ctx, DM_HANDLE_CUBLAS); }
void *dm_op_cublaslt_handle(const dm_op_ctx *ctx) {
  return device_handle(ctx, DM_HANDLE_CUBLASLT);
}
void *dm_op_cudnn_handle(const dm_op_ctx *ctx) { return device_handle(ctx, DM_HANDLE_CUDNN); }

float dm_op_arg_float(const dm_op_ctx *ctx, const char *name, float dflt) {
  const dm_arg *a = find_arg(ctx, name);
  if (!a)
    return dflt;
  if (a->pb->has_f)
    return a->pb->f;
  return a->pb->has_i ? (float)a->pb->i : dflt;
}

int64_t dm_op_arg_int(const dm_op_ctx *ctx, const char *name, int64_t dflt) {
  const dm_arg *a = find_arg(ctx, name);
  return a && a->pb->has_i ? a->pb->i : dflt;
}

const char *dm_op_arg_string(const dm_op_ctx *ctx, const char *name, const char *dflt) {
  const dm_arg *a = find_arg(ctx, name);
  return a && a->s ? a->s : dflt;
}

const float *dm_op_arg_floats(const dm_op_ctx *ctx, const char *name, size_t *n) {
  const dm_arg *a = find_arg(ctx, name);
  *n = a ? a->pb->n_floats : 0;
  return a ? a->pb->floats : NULL;
}

const int64_t *dm_op_arg_ints(const dm_op_ctx *ctx, const char *name, size_t *n) {
  const dm_arg *a = find_arg(ctx, name);
  *n = a ? a->pb->n_ints : 0;
  return a ? a->pb->ints : NULL;
}

const char *const *dm_op_arg_strings(const dm_op_ctx *ctx, const char *name, size_t *n) {
  const dm_arg *a = find_arg(ctx, name);
  *n = a ? a->pb->n_strings : 0;
  return a ? (const char *const *)a->strs : NULL;
}

int dm_op_shape_only(const dm_op_ctx *ctx) { return ctx->shape_only; }

dm_device_type dm_op_device(const dm_op_ctx *ctx) { return ctx->device; }

int dm_op_device_id(const dm_op_ctx *ctx) { return ctx->device_id; }

dm_workspace *dm_op_workspace(dm_op_ctx *ctx) { return ctx->ws; }

dm_status dm_op_run_infer(dm_op_ctx *ctx) {
  if (!ctx->schema->infer)
    return dm_error(DM_ERR_UNSUPPORTED, "%s has no shape inference", ctx->def->type);
  return ctx->schema->infer(ctx);
}

dm_status dm_op_check_shapes(dm_op_ctx *ctx) {
  /* Most ops have a few outputs; an Allreduce has one per gradient (hundreds in a
   * ResNet-50), so past the stack's few the saved tensors go to the heap. */
  enum { ON_STACK = 16 };
  dm_tensor stack[ON_STACK];
  dm_tensor *saved = stack;
  if (ctx->n_out > ON_STACK && !(saved = malloc((size_t)ctx->n_out * sizeof *saved)))
    return DM_NOMEM("the outputs' shapes");
  /* Shape-only, the inference sets dims without allocating; each output's tensor is
   * put back as it was afterwards (storage, layout, dtype, dims), since it may be an
   * input too, in place, whose data must survive. */
  for (int i = 0; i < ctx->n_out; i++) {
    saved[i] = *ctx->out[i]->tensor;
    ctx->out[i]->tensor->storage = NULL; /* held in saved[i] meanwhile */
  }
  int was = ctx->shape_only;
  ctx->shape_only = 1;
  dm_status s = dm_op_run_infer(ctx);
  ctx->shape_only = was;
  for (int i = 0; i < ctx->n_out; i++) {
    dm_tensor *t = ctx->out[i]->tensor;
    if (t->storage != saved[i].storage)
      dm_tensor_reset(t); /* nothing allocates shape-only; should it, drop it */
    *t = saved[i];
  }
  if (saved != stack)
    free(saved);
  return s;
}

dm_status dm_op_set_output(dm_op_ctx *ctx, int i, dm_dtype dtype, int ndim, const int64_t *dims) {
  if (i < 0 || i >= ctx->n_out)
    return dm_error(DM_ERR_INVALID, "output %d does not exist (the op has %d)", i, ctx->n_out);
  dm_tensor *t = ctx->out[i]->tensor;
  dm_status s = ctx->shape_only ? dm_tensor_set_shape(t, dtype, ndim, dims)
                                : dm_tensor_resize_on(t, ctx->device, ctx->device_id, dtype,
                                                      ndim, dims);
  if (s != DM_OK)
    return dm_error_prefix(s, "output %d '%s'", i, ctx->out[i]->name);
  return DM_OK;
}

/* Per thread, like the error message: lookups in two threads never mix reasons. */
static _Thread_local char refusal[512];

int dm_op_refuse(const dm_op_ctx *ctx, const char *fmt, ...) {
  (void)ctx;
  if (refusal[0]) /* the first kernel's reason (the preferred engine) is kept */
    return 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(refusal, sizeof refusal, fmt, ap);
  va_end(ap);
  return 0;
}

const char *dm_op_last_refusal(void) { return refusal; }
void dm_op_clear_refusal(void) { refusal[0] = '\0'; }

dm_status dm_op_error(dm_op_ctx *ctx, dm_status s, const char *fmt, ...) {
  char msg[1024], named[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The executor prefixes net and op; the kernel only says what went wrong, in its
   * schema's slot names, to which the blobs' names are added here. */
  if (!ctx)
    return dm_error(s, "%s", msg);
  dm_op_message_annotate(ctx, s, msg, named, sizeof named);
  return dm_error(s, "%s", named);
}
