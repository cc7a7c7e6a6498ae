/* allreduce_mpi.c: Allreduce's CPU kernel (schema and arguments: operators/allreduce.c),
 * through MPI_COMM_WORLD, registered for the plain CPU kernel and engine "MPI".
 *
 * The blobs are cut, in order, into buckets of at most bucket_bytes in the wire
 * precision. A bucket of one blob already in that precision is reduced in place; any
 * other is packed into one buffer (converted to the wire precision), reduced with one
 * collective, and unpacked (converted back). So a net's many small gradients (biases, BN
 * scales) cost a few collectives, not one each. `average` multiplies each rank's
 * contribution by 1/ranks before the sum, in FP32 (for 2^k ranks exact), as NCCL's
 * ncclAvg does: FP16 gradients that one process holds without overflow then sum without
 * overflow on N ranks too, so N ranks skip the steps one process skips, and the CPU and
 * the GPU all-reduce overflow alike (a sum taken first overflows at 1/N of the scale).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/registry.h"
#include "mpi_common.h"
#include "operators/builtin.h"
#include "operators/common.h"

#define DEFAULT_BUCKET_BYTES ((int64_t)25 << 20)

typedef struct ar_state {
  void *buf; /* the packing buffer */
  size_t cap;
} ar_state;

static dm_status ar_init(dm_op_ctx *ctx, void **state) {
  if (dm_op_arg_int(ctx, "bucket_bytes", DEFAULT_BUCKET_BYTES) <= 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "bucket_bytes must be positive, got %lld",
                       (long long)dm_op_arg_int(ctx, "bucket_bytes", 0));
  const char *w = dm_op_arg_string(ctx, "wire_dtype", "");
  if (w && *w && strcmp(w, "FLOAT") != 0 && strcmp(w, "FLOAT16") != 0 &&
      strcmp(w, "BFLOAT16") != 0)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "wire_dtype is '%s'; it takes FLOAT, FLOAT16 or BFLOAT16 (or nothing: "
                       "each blob's own)",
                       w);
  *state = calloc(1, sizeof(ar_state));
  return *state ? DM_OK : DM_NOMEM("the Allreduce state");
}

static void ar_fini(void *state) {
  ar_state *s = state;
  if (s)
    free(s->buf);
  free(s);
}

/* n elements between dtypes (FLOAT, FLOAT16, BFLOAT16, DOUBLE), with `scale` applied. */
static void convert(const void *src, dm_dtype from, void *dst, dm_dtype to, size_t n,
                    float scale) {
  for (size_t i = 0; i < n; i++) {
    double v;
    switch (from) {
    case DM_FLOAT16: v = dm_half_to_float(((const uint16_t *)src)[i]); break;
    case DM_BFLOAT16: v = dm_bf16_to_float(((const uint16_t *)src)[i]); break;
    case DM_DOUBLE: v = ((const double *)src)[i]; break;
    default: v = ((const float *)src)[i]; break;
    }
    v *= scale;
    switch (to) {
    case DM_FLOAT16: ((uint16_t *)dst)[i] = dm_float_to_half((float)v); break;
    case DM_BFLOAT16: ((uint16_t *)dst)[i] = dm_float_to_bf16((float)v); break;
    case DM_DOUBLE: ((double *)dst)[i] = v; break;
    default: ((float *)dst)[i] = (float)v; break;
    }
  }
}

static dm_dtype wire_of(const dm_op_ctx *ctx, dm_dtype own) {
  const char *w = dm_op_arg_string(ctx, "wire_dtype", "");
  if (!w || !*w)
    return own;
  return strcmp(w, "FLOAT16") == 0 ? DM_FLOAT16 : strcmp(w, "BFLOAT16") == 0 ? DM_BFLOAT16
                                                                               : DM_FLOAT;
}

/* Reduces inputs [first, last) as one bucket of `bytes` wire bytes in `wire`, each
 * rank's values multiplied by `scale` first. */
static dm_status reduce_bucket(dm_op_ctx *ctx, ar_state *s, int first, int last, dm_dtype wire,
                               size_t bytes, float scale) {
  char what[160];
  snprintf(what, sizeof what, "%d blob(s) from '%s' (op %s)", last - first,
           dm_op_input_name(ctx, first), dm_op_type(ctx));
  dm_tensor *x0 = dm_op_output(ctx, first);
  if (last - first == 1 && x0->dtype == wire) { /* in place */
    size_t n = (size_t)dm_tensor_numel(x0);
    void *d = dm_tensor_mutable_data(x0);
    if (!d && n)
      return dm_op_error(ctx, DM_ERR_NOMEM, "reading '%s'", dm_op_input_name(ctx, first));
    if (scale != 1.0f)
      convert(d, wire, d, wire, n, scale);
    return dm_mpi_allreduce_sum(d, n, wire, what);
  }
  if (bytes > s->cap) {
    void *b = realloc(s->buf, bytes);
    if (!b)
      return dm_op_error(ctx, DM_ERR_NOMEM, "allocating a %zu-byte bucket", bytes);
    s->buf = b;
    s->cap = bytes;
  }
  size_t off = 0, es = dm_dtype_size(wire);
  for (int i = first; i < last; i++) {
    dm_tensor *x = dm_op_output(ctx, i);
    size_t n = (size_t)dm_tensor_numel(x);
    const void *d = dm_tensor_data(x);
    if (!d && n)
      return dm_op_error(ctx, DM_ERR_NOMEM, "reading '%s'", dm_op_input_name(ctx, i));
    convert(d, x->dtype, (char *)s->buf + off * es, wire, n, scale);
    off += n;
  }
  DM_TRY(dm_mpi_allreduce_sum(s->buf, off, wire, what));
  off = 0;
  for (int i = first; i < last; i++) {
    dm_tensor *x = dm_op_output(ctx, i);
    size_t n = (size_t)dm_tensor_numel(x);
    void *d = dm_tensor_mutable_data(x);
    convert((char *)s->buf + off * es, wire, d, x->dtype, n, 1.0f);
    off += n;
  }
  return DM_OK;
}

static dm_status ar_run(dm_op_ctx *ctx) {
  ar_state *s = dm_op_state(ctx);
  DM_TRY(dm_op_check_shapes(ctx));
  if (!dm_mpi_ready())
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "MPI is not initialised: run the net under mpirun with `demitasse "
                       "train --data-parallel`, or call dm_dist_init first");
  const float scale = dm_op_arg_int(ctx, "average", 0) ? 1.0f / (float)dm_mpi_size() : 1.0f;
  const size_t cap = (size_t)dm_op_arg_int(ctx, "bucket_bytes", DEFAULT_BUCKET_BYTES);
  const int n = dm_op_num_inputs(ctx);
  /* Buckets: consecutive blobs of one wire dtype while they fit in cap bytes. */
  int first = 0;
  size_t bytes = 0;
  dm_dtype bucket_wire = DM_UNDEFINED;
  for (int i = 0; i <= n; i++) {
    dm_dtype w = DM_UNDEFINED;
    size_t b = 0;
    if (i < n) {
      const dm_tensor *x = dm_op_output(ctx, i);
      w = wire_of(ctx, x->dtype);
      b = (size_t)dm_tensor_numel(x) * dm_dtype_size(w);
    }
    if (i > first && (i == n || w != bucket_wire || bytes + b > cap)) {
      DM_TRY(reduce_bucket(ctx, s, first, i, bucket_wire, bytes, scale));
      first = i;
      bytes = 0;
    }
    bucket_wire = w;
    bytes += b;
  }
  return DM_OK;
}

static const dm_kernel_def kernels[] = {
    {.type = "Allreduce", .device = DM_CPU, .init = ar_init, .fini = ar_fini, .run = ar_run},
    {.type = "Allreduce", .device = DM_CPU, .engine = "MPI", .init = ar_init, .fini = ar_fini,
     .run = ar_run},
    {0},
};

dm_status dm_register_mpi_ops(void) { return dm_register_kernel_table(kernels); }
