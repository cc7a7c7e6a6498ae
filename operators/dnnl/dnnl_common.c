/* dnnl_common.c: the oneDNN engine's shared plumbing (see dnnl_common.h): the engine and
 * per-thread streams, descriptions of tensors, recorded layouts, reorders, execution. */
#include "dnnl_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static pthread_key_t stream_key;

static void destroy_stream(void *s) { dnnl_stream_destroy(s); }

static void engine_destroy(void) {
  /* The main thread's stream is not passed to the key's destructor: destroy it here, at
   * exit, before the engine it belongs to. */
  dnnl_stream_t s = pthread_getspecific(stream_key);
  if (s)
    dnnl_stream_destroy(s);
  pthread_setspecific(stream_key, NULL);
  dnnl_engine_destroy(engine);
  engine = NULL;
}

static void engine_create(void) {
  if (pthread_key_create(&stream_key, destroy_stream) != 0)
    return;
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    engine = NULL;
  else
    atexit(engine_destroy);
}

dnnl_engine_t dm_dnnl_engine(void) {
  pthread_once(&engine_once, engine_create);
  return engine;
}

dm_status dm_dnnl_stream(dnnl_stream_t *out) {
  dnnl_engine_t e = dm_dnnl_engine();
  if (!e)
    return dm_error(DM_ERR_UNSUPPORTED, "oneDNN: no CPU engine on this machine");
  dnnl_stream_t s = pthread_getspecific(stream_key);
  if (!s) {
    DM_DNNL_TRY(dnnl_stream_create(&s, e, dnnl_stream_default_flags), "creating a stream");
    if (pthread_setspecific(stream_key, s) != 0) {
      dnnl_stream_destroy(s);
      return DM_NOMEM("a oneDNN stream");
    }
  }
  *out = s;
  return DM_OK;
}

dm_status dm_dnnl_status(dnnl_status_t st, const char *what) {
  if (st == dnnl_success)
    return DM_OK;
  if (st == dnnl_out_of_memory)
    return dm_error(DM_ERR_NOMEM, "oneDNN: out of memory %s", what);
  const char *why = st == dnnl_invalid_arguments ? "invalid arguments"
                    : st == dnnl_unimplemented   ? "no implementation for these shapes/types"
                                                 : "failed";
  /* No implementation: a refusal, so the executor hands the op to the reference kernel
   * (net.c, fall_back) instead of failing. */
  if (st == dnnl_unimplemented)
    dm_op_refuse(NULL, "oneDNN (ISA %s) has no implementation %s", dm_dnnl_isa_name(), what);
  return dm_error(st == dnnl_unimplemented ? DM_ERR_UNSUPPORTED : DM_ERR_INVALID,
                  "oneDNN: %s %s (status %d)", why, what, (int)st);
}

int dm_dnnl_dtype(dm_dtype t, dnnl_data_type_t *out) {
  switch (t) {
  case DM_FLOAT: *out = dnnl_f32; return 1;
  case DM_BFLOAT16: *out = dnnl_bf16; return 1;
  case DM_INT32: *out = dnnl_s32; return 1;
  case DM_INT8: *out = dnnl_s8; return 1;
  case DM_UINT8: *out = dnnl_u8; return 1;
  default: return 0;
  }
}

dm_status dm_dnnl_plain_md(int ndim, const int64_t *dims, dm_dtype dtype, dnnl_memory_desc_t *md) {
  static const dnnl_format_tag_t tags[] = {dnnl_a,    dnnl_a,     dnnl_ab,  dnnl_abc,
                                           dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  dnnl_data_type_t dt;
  if (!dm_dnnl_dtype(dtype, &dt))
    return dm_error(DM_ERR_TYPE, "oneDNN: no data type for dtype %d", (int)dtype);
  if (ndim < 0 || ndim > 6)
    return dm_error(DM_ERR_UNSUPPORTED, "oneDNN: %d dimensions (at most 6 here)", ndim);
  dnnl_dims_t d = {1};
  for (int i = 0; i < ndim; i++)
    d[i] = dims[i];
  DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(md, ndim ? ndim : 1, d, dt, tags[ndim]),
              "describing a plain tensor");
  return DM_OK;
}

dm_status dm_dnnl_md_of(const dm_tensor *t, dnnl_memory_desc_t *md) {
  if (t->storage && t->storage->layout == &dm_dnnl_layout) {
    *md = *(const dnnl_memory_desc_t *)t->storage->layout_desc;
    return DM_OK;
  }
  if (!dm_tensor_is_plain(t))
    return dm_error(DM_ERR_INVALID, "blob '%s' holds a layout ('%s') oneDNN cannot read",
                    t->blob ? t->blob : "?", t->storage->layout->name);
  return dm_dnnl_plain_md(t->ndim, t->dims, t->dtype, md);
}

int dm_dnnl_md_is_plain(const dnnl_memory_desc_t *md) {
  dnnl_memory_desc_t plain;
  if (md->ndims < 1 || md->ndims > 6 || md->format_kind != dnnl_blocked)
    return 0;
  static const dnnl_format_tag_t tags[] = {dnnl_a,    dnnl_a,     dnnl_ab,  dnnl_abc,
                                           dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  if (dnnl_memory_desc_init_by_tag(&plain, md->ndims, md->dims, md->data_type, tags[md->ndims]) !=
      dnnl_success)
    return 0;
  return dnnl_memory_desc_equal(&plain, md);
}

static dm_status layout_to_plain(const dm_tensor *src, void *dst) {
  if (src->numel == 0)
    return DM_OK; /* nothing to move (an empty batch) */
  dnnl_memory_desc_t from, to;
  DM_TRY(dm_dnnl_md_of(src, &from));
  DM_TRY(dm_dnnl_plain_md(src->ndim, src->dims, src->dtype, &to));
  return dm_dnnl_reorder(&from, dm_tensor_raw_data(src), &to, dst);
}

const dm_layout_ops dm_dnnl_layout = {.name = "oneDNN blocked", .to_plain = layout_to_plain,
                                      .free_desc = free};

void dm_dnnl_buf_free(dm_dnnl_buf *b) {
  free(b->data);
  b->data = NULL;
  b->cap = 0;
}

dm_status dm_dnnl_buf_reserve(dm_dnnl_buf *b, size_t n) {
  if (b->cap >= n && b->data)
    return DM_OK;
  size_t rounded = (n + DM_ALIGN - 1) / DM_ALIGN * DM_ALIGN;
  void *p = aligned_alloc(DM_ALIGN, rounded ? rounded : DM_ALIGN);
  if (!p)
    return dm_error(DM_ERR_NOMEM, "out of memory for a %zu-byte oneDNN reorder buffer", n);
  free(b->data);
  b->data = p;
  b->cap = rounded;
  return DM_OK;
}

dm_status dm_dnnl_make(const void *op_desc, const_dnnl_primitive_attr_t attr,
                       const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd,
                       dnnl_primitive_t *prim) {
  *pd = NULL;
  *prim = NULL;
  dnnl_engine_t e = dm_dnnl_engine();
  if (!e)
    return dm_error(DM_ERR_UNSUPPORTED, "oneDNN: no CPU engine on this machine");
  DM_DNNL_TRY(dnnl_primitive_desc_create(pd, op_desc, attr, e, hint), "creating a primitive");
  dnnl_status_t st = dnnl_primitive_create(prim, *pd);
  if (st != dnnl_success) {
    dnnl_primitive_desc_destroy(*pd);
    *pd = NULL;
    *prim = NULL;
  }
  return dm_dnnl_status(st, "creating a primitive");
}

dm_status dm_dnnl_query_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index,
                           dnnl_memory_desc_t *out) {
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, what, index);
  if (!md)
    return dm_error(DM_ERR_INVALID, "oneDNN: a primitive has no memory of kind %d", (int)what);
  *out = *md;
  return DM_OK;
}

#define MAX_ARGS 16

dm_status dm_dnnl_execute(dnnl_primitive_t prim, int n, const dm_dnnl_arg *args) {
  if (n > MAX_ARGS)
    return dm_error(DM_ERR_INVALID, "oneDNN: %d arguments to one primitive", n);
  dnnl_stream_t s;
  DM_TRY(dm_dnnl_stream(&s));
  dnnl_exec_arg_t ea[MAX_ARGS];
  dm_status st = DM_OK;
  int made = 0;
  for (; made < n && st == DM_OK; made++) {
    ea[made].arg = args[made].arg;
    st = dm_dnnl_status(
        dnnl_memory_create(&ea[made].memory, args[made].md, dm_dnnl_engine(), args[made].data),
        "wrapping a buffer");
    if (st != DM_OK)
      break;
  }
  if (st == DM_OK)
    st = dm_dnnl_status(dnnl_primitive_execute(prim, s, n, ea), "running a primitive");
  if (st == DM_OK)
    st = dm_dnnl_status(dnnl_stream_wait(s), "waiting for a primitive");
  for (int i = 0; i < made; i++)
    dnnl_memory_destroy(ea[i].memory);
  return st;
}

int dm_dnnl_md_is_padded(const dnnl_memory_desc_t *md) {
  for (int i = 0; i < md->ndims; i++)
    if (md->padded_dims[i] != md->dims[i])
      return 1;
  return 0;
}

/* The usual case, a layout whose only inner block is on the channels (nChw16c) and whose
 * only padding is theirs: the last channel block's tail, zeroed at every other index. */
static int zero_channel_tail(const dnnl_memory_desc_t *md, unsigned char *data) {
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (md->format_kind != dnnl_blocked || b->inner_nblks != 1 || b->inner_idxs[0] != 1)
    return 0;
  int64_t outer = 1;
  for (int i = 0; i < md->ndims; i++) {
    if (i != 1 && md->padded_dims[i] != md->dims[i])
      return 0;
    outer *= i == 1 ? 1 : md->dims[i];
  }
  const int64_t blk = b->inner_blks[0], c0 = md->dims[1] % blk;
  const int64_t last = md->dims[1] / blk * b->strides[1];
  const size_t es = dnnl_data_type_size(md->data_type);
  for (int64_t o = 0; o < outer; o++) {
    int64_t off = md->offset0 + last, r = o;
    for (int i = md->ndims - 1; i >= 0; i--)
      if (i != 1) {
        off += r % md->dims[i] * b->strides[i];
        r /= md->dims[i];
      }
    memset(data + (size_t)(off + c0) * es, 0, (size_t)(blk - c0) * es);
  }
  return 1;
}

/* Any other layout goes to plain and back: a reorder writes zeros in its output's
 * padding (oneDNN 2.6's dnnl_memory_set_data_handle does not). */
dm_status dm_dnnl_zero_pad(const dnnl_memory_desc_t *md, void *data) {
  if (!dm_dnnl_md_is_padded(md) || zero_channel_tail(md, data))
    return DM_OK;
  dnnl_memory_desc_t plain;
  DM_DNNL_TRY(dnnl_memory_desc_init_by_strides(&plain, md->ndims, md->dims, md->data_type, NULL),
              "describing a plain buffer");
  dm_dnnl_buf tmp = {0};
  dm_status st = dm_dnnl_buf_reserve(&tmp, dnnl_memory_desc_get_size(&plain));
  if (st == DM_OK)
    st = dm_dnnl_reorder(md, data, &plain, tmp.data);
  if (st == DM_OK)
    st = dm_dnnl_reorder(&plain, tmp.data, md, data);
  dm_dnnl_buf_free(&tmp);
  return st;
}

dm_status dm_dnnl_reorder(const dnnl_memory_desc_t *src_md, const void *src,
                          const dnnl_memory_desc_t *dst_md, void *dst) {
  dnnl_engine_t e = dm_dnnl_engine();
  if (!e)
    return dm_error(DM_ERR_UNSUPPORTED, "oneDNN: no CPU engine on this machine");
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t prim;
  /* oneDNN keeps created primitives in its own cache, so a reorder made again for the
   * same layouts costs a lookup, not a JIT compilation. */
  DM_DNNL_TRY(dnnl_reorder_primitive_desc_create(&pd, src_md, e, dst_md, e, NULL),
              "creating a reorder");
  dm_status st = dm_dnnl_status(dnnl_primitive_create(&prim, pd), "creating a reorder");
  dnnl_primitive_desc_destroy(pd);
  if (st != DM_OK)
    return st;
  dm_dnnl_arg args[] = {{DNNL_ARG_FROM, src_md, (void *)src}, {DNNL_ARG_TO, dst_md, dst}};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  st = dm_dnnl_execute(prim, 2, args);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  dnnl_primitive_destroy(prim);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (st == DM_OK) /* for `run --profile` */
    dm_layout_note_reorder(dnnl_memory_desc_get_size(dst_md), seconds);
  return st;
}

dm_status dm_dnnl_input(const dm_tensor *t, const dnnl_memory_desc_t *want, dm_dnnl_buf *scratch,
                        void **data) {
  dnnl_memory_desc_t have;
  DM_TRY(dm_dnnl_md_of(t, &have));
  if (dnnl_memory_desc_equal(&have, want)) {
    *data = dm_tensor_raw_data(t);
    return DM_OK;
  }
  DM_TRY(dm_dnnl_buf_reserve(scratch, dnnl_memory_desc_get_size(want)));
  DM_TRY(dm_dnnl_reorder(&have, dm_tensor_raw_data(t), want, scratch->data));
  *data = scratch->data;
  return DM_OK;
}

/* A heap copy of md to record in a storage, or NULL for a plain md. */
static dm_status record(const dnnl_memory_desc_t *md, const dm_layout_ops **layout, void **desc) {
  *layout = NULL;
  *desc = NULL;
  if (dm_dnnl_md_is_plain(md))
    return DM_OK;
  dnnl_memory_desc_t *copy = malloc(sizeof *copy);
  if (!copy)
    return DM_NOMEM("a layout description");
  *copy = *md;
  *layout = &dm_dnnl_layout;
  *desc = copy;
  return DM_OK;
}

dm_status dm_dnnl_output(dm_tensor *t, dm_dtype dtype, int ndim, const int64_t *dims,
                         const dnnl_memory_desc_t *md, void **data) {
  const dm_layout_ops *layout;
  void *desc;
  DM_TRY(record(md, &layout, &desc));
  DM_TRY(dm_tensor_resize_layout(t, dtype, ndim, dims, dnnl_memory_desc_get_size(md), layout, desc));
  *data = dm_tensor_raw_data(t);
  return DM_OK;
}

dm_status dm_dnnl_relayout(dm_tensor *t, const dnnl_memory_desc_t *want) {
  dnnl_memory_desc_t have;
  DM_TRY(dm_dnnl_md_of(t, &have));
  if (dnnl_memory_desc_equal(&have, want))
    return DM_OK;
  /* The recorded layout describes t's own dims and dtype, nothing else. */
  int same = want->ndims == t->ndim && want->data_type == have.data_type;
  for (int i = 0; same && i < t->ndim; i++)
    same = want->dims[i] == t->dims[i];
  if (!same)
    return dm_error(DM_ERR_INVALID, "oneDNN: blob '%s' cannot take a layout of other dims or type",
                    t->blob ? t->blob : "?");
  dm_tensor *moved = dm_tensor_new(t->limit);
  if (!moved)
    return DM_NOMEM("a tensor");
  moved->blob = t->blob;
  void *dst;
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, t->dims, sizeof dims);
  dm_status st = dm_dnnl_output(moved, t->dtype, t->ndim, dims, want, &dst);
  if (st == DM_OK)
    st = dm_dnnl_reorder(&have, dm_tensor_raw_data(t), want, dst);
  if (st == DM_OK)
    dm_tensor_share(t, moved);
  dm_tensor_free(moved);
  return st;
}

int dm_dnnl_prim_matches(const dm_dnnl_prim *p, int n, const dnnl_memory_desc_t *key) {
  if (!p->prim || p->n_key != n)
    return 0;
  for (int i = 0; i < n; i++)
    if (!dnnl_memory_desc_equal(&p->key[i], &key[i]))
      return 0;
  return 1;
}

void dm_dnnl_prim_reset(dm_dnnl_prim *p) {
  if (p->prim)
    dnnl_primitive_destroy(p->prim);
  if (p->pd)
    dnnl_primitive_desc_destroy(p->pd);
  p->prim = NULL;
  p->pd = NULL;
  p->n_key = 0;
}

dm_status dm_dnnl_prim_make(dm_dnnl_prim *p, const void *op_desc, const_dnnl_primitive_attr_t attr,
                            const_dnnl_primitive_desc_t hint, int n, const dnnl_memory_desc_t *key) {
  dm_dnnl_prim_reset(p);
  if (n > DM_DNNL_MAX_KEY)
    return dm_error(DM_ERR_INVALID, "oneDNN: a primitive keyed by %d descriptions", n);
  DM_TRY(dm_dnnl_make(op_desc, attr, hint, &p->pd, &p->prim));
  for (int i = 0; i < n; i++)
    p->key[i] = key[i];
  p->n_key = n;
  return DM_OK;
}

int dm_dnnl_nchw_order(const dm_op_ctx *ctx) {
  const char *order = dm_op_arg_string(ctx, "order", "NCHW");
  if (order && strcasecmp(order, "NCHW") == 0) /* as conv_args.c reads it */
    return 1;
  return dm_op_refuse(ctx, "the oneDNN engine runs order NCHW, not '%s'", order ? order : "?");
}

/* The ISA oneDNN dispatches to (after ONEDNN_MAX_CPU_ISA), for messages and `info`. */
const char *dm_dnnl_isa_name(void) {
  switch (dnnl_get_effective_cpu_isa()) {
  case dnnl_cpu_isa_sse41: return "sse41";
  case dnnl_cpu_isa_avx: return "avx";
  case dnnl_cpu_isa_avx2: return "avx2";
  case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
  case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
  case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
  case dnnl_cpu_isa_avx512_core: return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
  case dnnl_cpu_isa_all: return "all (no limit set)";
  default: return "unknown";
  }
}
