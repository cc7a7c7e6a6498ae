/* common.c: helpers shared by the CPU operator files. */
#include "common.h"
#include "dm_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#if DM_HAVE_OPENMP
#include <omp.h>
#endif

dm_status dm_op_canonical_axis(dm_op_ctx *ctx, const char *what, int64_t axis, int ndim,
                               int end_ok, int *out) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a > ndim || (a == ndim && !end_ok))
    return dm_op_error(ctx, DM_ERR_INVALID, "%s %lld is out of range for a %d-d tensor", what,
                       (long long)axis, ndim);
  *out = (int)a;
  return DM_OK;
}

int64_t dm_dims_product(const dm_tensor *t, int lo, int hi) {
  /* A tensor's shape passed dm_shape_numel, whose product of nonzero dims fits in int64, so
   * no product here overflows; the check keeps a broken invariant from being UB. */
  int64_t p = 1, nz = 1;
  for (int i = lo; i < hi; i++) {
    if (t->dims[i] == 0)
      p = 0;
    else if (__builtin_mul_overflow(nz, t->dims[i], &nz))
      nz = INT64_MAX;
  }
  return p ? nz : 0;
}

int dm_tensors_alias(const dm_tensor *a, const dm_tensor *b) {
  return a == b || (a->storage && a->storage == b->storage);
}

dm_status dm_op_check_grad_alias(dm_op_ctx *ctx, int dx, int dy, uint32_t inputs,
                                 const char *const *names) {
  const dm_tensor *t = dm_op_output(ctx, dx);
  for (int i = 0; i < dm_op_num_inputs(ctx) && i < 32; i++) {
    if (!(inputs >> i & 1u) || dm_op_input(ctx, i) != t)
      continue;
    if (dy >= 0)
      return dm_op_error(ctx, DM_ERR_INVALID, "dX may be %s's blob, not %s's", names[dy],
                         names[i]);
    return dm_op_error(ctx, DM_ERR_INVALID, "dX may not be %s's blob", names[i]);
  }
  return DM_OK;
}

int dm_is_float_or_half(dm_dtype t) { return t == DM_FLOAT || t == DM_FLOAT16; }

void dm_widen(dm_dtype t, const uint16_t *src, float *dst, size_t n) {
  if (t == DM_BFLOAT16)
    dm_bf16_to_float_array(src, dst, n);
  else
    dm_half_to_float_array(src, dst, n);
}

void dm_narrow(dm_dtype t, const float *src, uint16_t *dst, size_t n) {
  if (t == DM_BFLOAT16)
    dm_float_to_bf16_array(src, dst, n);
  else
    dm_float_to_half_array(src, dst, n);
}

void dm_load_f32(dm_dtype t, const void *src, int64_t i0, int64_t n, float *dst) {
  if (dm_is_reduced_float(t))
    dm_widen(t, (const uint16_t *)src + i0, dst, (size_t)n);
  else if (t == DM_DOUBLE)
    for (int64_t j = 0; j < n; j++)
      dst[j] = (float)((const double *)src)[i0 + j];
  else
    memcpy(dst, (const float *)src + i0, (size_t)n * sizeof(float));
}

void dm_store_f32(dm_dtype t, void *dst, int64_t i0, int64_t n, const float *src) {
  if (dm_is_reduced_float(t))
    dm_narrow(t, src, (uint16_t *)dst + i0, (size_t)n);
  else if (t == DM_DOUBLE)
    for (int64_t j = 0; j < n; j++)
      ((double *)dst)[i0 + j] = src[j];
  else
    memcpy((float *)dst + i0, src, (size_t)n * sizeof(float));
}

dm_status dm_op_dtype_arg(dm_op_ctx *ctx, const char *name, dm_dtype dflt, dm_dtype *out) {
  const char *s = dm_op_arg_string(ctx, name, NULL);
  if (s) {
    if (dm_dtype_from_name(s, out) != DM_OK)
      return dm_op_error(ctx, DM_ERR_TYPE, "unknown '%s' data type '%s'", name, s);
    return DM_OK;
  }
  if (!dm_op_has_arg(ctx, name)) {
    *out = dflt;
    return DM_OK;
  }
  /* An absent i is the only case where two different defaults come back. */
  int is_int = dm_op_arg_int(ctx, name, 0) == dm_op_arg_int(ctx, name, 1);
  int64_t v = dm_op_arg_int(ctx, name, -1);
  if (!is_int)
    return dm_op_error(ctx, DM_ERR_TYPE, "'%s' must be a DataType number or name", name);
  if (v <= 0 || v > 1000 || !dm_dtype_is_valid((int)v))
    return dm_op_error(ctx, DM_ERR_TYPE, "unknown '%s' data type %lld", name, (long long)v);
  *out = (dm_dtype)v == DM_BYTE ? DM_UINT8 : (dm_dtype)v;
  return DM_OK;
}

dm_status dm_op_need_values(dm_op_ctx *ctx, int i, const char *why) {
  if (dm_tensor_data(dm_op_input(ctx, i)) || dm_op_input(ctx, i)->numel == 0)
    return DM_OK;
  return dm_op_error(ctx, DM_ERR_NOT_FOUND,
                     "the output shape depends on the values of input %d '%s' (%s), which "
                     "shape inference does not have",
                     i, dm_op_input_name(ctx, i), why);
}

dm_status dm_op_iteration_input(dm_op_ctx *ctx, int i, int64_t *b) {
  const dm_tensor *it = dm_op_input(ctx, i);
  if ((it->dtype != DM_INT64 && it->dtype != DM_INT32) || it->numel != 1)
    return dm_op_error(ctx, DM_ERR_TYPE,
                       "input 'iter' must be one INT64 (or INT32) value, not %s of %lld",
                       dm_dtype_name(it->dtype), (long long)it->numel);
  if (!b || !dm_tensor_data(it))
    return DM_OK;
  *b = it->dtype == DM_INT64 ? *(const int64_t *)dm_tensor_data(it)
                             : *(const int32_t *)dm_tensor_data(it);
  if (*b < 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "iteration %lld is out of range (iter must be "
                       ">= 0)", (long long)*b);
  return DM_OK;
}

void dm_cost_io(dm_op_ctx *ctx, dm_op_cost *c) {
  for (int i = 0; i < dm_op_num_inputs(ctx); i++) {
    const dm_tensor *t = dm_op_input(ctx, i);
    c->bytes_read += (double)t->numel * (double)dm_dtype_size(t->dtype);
  }
  for (int o = 0; o < dm_op_num_outputs(ctx); o++) {
    const dm_tensor *t = dm_op_output(ctx, o);
    c->bytes_written += (double)t->numel * (double)dm_dtype_size(t->dtype);
  }
}

dm_status dm_op_order_axis(dm_op_ctx *ctx, int *out) {
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  if (strcmp(order, "NCHW") == 0)
    *out = 1;
  else if (strcmp(order, "NHWC") == 0)
    *out = 3;
  else
    return dm_op_error(ctx, DM_ERR_INVALID, "'order' is '%s'; expected NCHW or NHWC", order);
  return DM_OK;
}

dm_status dm_scratch_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  dm_scratch *s = calloc(1, sizeof *s);
  if (!s)
    return DM_NOMEM("kernel scratch");
  *state = s;
  return DM_OK;
}

void dm_scratch_fini(void *state) {
  dm_scratch *s = state;
  if (s)
    free(s->p);
  free(s);
}

dm_status dm_scratch_get(dm_scratch *s, size_t bytes, void **out) {
  if (bytes > s->cap) {
    size_t cap = (bytes + DM_ALIGN - 1) / DM_ALIGN * DM_ALIGN;
    void *p = aligned_alloc(DM_ALIGN, cap);
    if (!p)
      return dm_error(DM_ERR_NOMEM, "out of memory allocating %zu bytes of kernel scratch", bytes);
    free(s->p);
    s->p = p;
    s->cap = cap;
  }
  *out = s->p;
  return DM_OK;
}

/* Threads for n rows: OpenMP's count, no more than the rows. */
static int rows_threads(int64_t n, int parallel) {
#if DM_HAVE_OPENMP
  int t = parallel ? omp_get_max_threads() : 1;
  return n < t ? (n > 0 ? (int)n : 1) : t;
#else
  (void)n, (void)parallel;
  return 1;
#endif
}

dm_status dm_parallel_rows(dm_op_ctx *ctx, int64_t n, int parallel, size_t scratch_bytes,
                           const char *what, dm_row_fn fn, void *arg) {
  const int nt = rows_threads(n, parallel);
  /* each thread's slice on its own cache lines */
  const size_t per = (scratch_bytes + DM_ALIGN - 1) / DM_ALIGN * DM_ALIGN;
  char *buf = NULL;
  if (per && n > 0) {
    if (per > SIZE_MAX / (size_t)nt || !(buf = aligned_alloc(DM_ALIGN, per * (size_t)nt)))
      return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for %s (%zu bytes a thread)", what,
                         scratch_bytes);
  }
#if DM_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
  for (int64_t i = 0; i < n; i++) {
#if DM_HAVE_OPENMP
    char *mine = buf ? buf + (size_t)omp_get_thread_num() * per : NULL;
#else
    char *mine = buf;
#endif
    fn(arg, mine, i);
  }
  free(buf);
  return DM_OK;
}
