/* tensor.c: tensors with reference-counted, 64-byte aligned storage, and the count of
 * each workspace's host storage against its memory cap (dm_mem_limit). */
#include "tensor.h"

#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The source of storage versions (dm_storage.version): never reused, so a version names
 * one state of one storage even across a freed and reallocated address. */
static atomic_uint_fast64_t g_storage_version;

static void storage_touch(dm_storage *s) { s->version = atomic_fetch_add(&g_storage_version, 1) + 1; }

void dm_tensor_touch(dm_tensor *t) {
  if (t && t->storage)
    storage_touch(t->storage);
}

uint64_t dm_tensor_version(const dm_tensor *t) { return t && t->storage ? t->storage->version : 0; }

dm_status dm_shape_numel(int ndim, const int64_t *dims, int64_t *numel) {
  if (ndim < 0 || ndim > DM_MAX_DIMS)
    return dm_error(DM_ERR_SHAPE, "%d dimensions (at most %d supported)", ndim, DM_MAX_DIMS);
  /* The product of the nonzero dims must fit too: a zero-element 0 x 2^62 x 2^62 would
   * otherwise pass, and an op multiplying its other dims (FC's K, a pool's H*W, Split's
   * inner size) would overflow. With this, any product of any of a shape's dims fits. */
  int64_t nonzero = 1;
  int any_zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0)
      return dm_error(DM_ERR_SHAPE, "dimension %d is negative (%lld)", i, (long long)dims[i]);
    if (dims[i] == 0)
      any_zero = 1;
    else if (__builtin_mul_overflow(nonzero, dims[i], &nonzero))
      return dm_error(DM_ERR_LIMIT, "the product of the dimensions%s overflows 64 bits (at "
                      "dimension %d, %lld)", any_zero ? " other than the zero ones" : "", i,
                      (long long)dims[i]);
  }
  *numel = any_zero ? 0 : nonzero;
  return DM_OK;
}

dm_status dm_shape_nbytes(dm_dtype dtype, int64_t numel, uint64_t limit, size_t *nbytes) {
  size_t elem = dtype == DM_STRING ? sizeof(char *) : dm_dtype_size(dtype);
  uint64_t total;
  if (numel < 0 || __builtin_mul_overflow((uint64_t)numel, (uint64_t)elem, &total))
    return dm_error(DM_ERR_LIMIT, "tensor size overflows (%lld elements of %zu bytes)",
                    (long long)numel, elem);
  if (total > limit)
    return dm_error(DM_ERR_LIMIT,
                    "tensor of %lld elements (%llu bytes) exceeds the limit of %llu bytes",
                    (long long)numel, (unsigned long long)total, (unsigned long long)limit);
  if (total > SIZE_MAX)
    return dm_error(DM_ERR_LIMIT, "tensor too large for this machine");
  *nbytes = (size_t)total;
  return DM_OK;
}

/* Bytes of storage held now on each device type (all ids together), and the most held
 * since the last reset: what the memory pass saves is measured here rather than
 * estimated. Process-wide atomics: two workspaces in two threads share the count (a
 * measurement wants one at a time) but never block each other. Counted as allocated,
 * i.e. rounded up to the alignment. */
static atomic_size_t bytes_now[2], bytes_peak[2];

static size_t alloc_size(size_t nbytes) {
  size_t rounded = (nbytes + DM_ALIGN - 1) / DM_ALIGN * DM_ALIGN;
  return rounded ? rounded : DM_ALIGN;
}

static void count_alloc(dm_device_type d, size_t bytes) {
  size_t now = atomic_fetch_add(&bytes_now[d], bytes) + bytes;
  size_t peak = atomic_load(&bytes_peak[d]);
  while (now > peak && !atomic_compare_exchange_weak(&bytes_peak[d], &peak, now)) {
  }
}

void dm_memory_usage(dm_device_type d, size_t *now, size_t *peak) {
  unsigned i = (unsigned)d < 2 ? (unsigned)d : 0;
  *now = atomic_load(&bytes_now[i]);
  *peak = atomic_load(&bytes_peak[i]);
}

void dm_memory_reset_peak(dm_device_type d) {
  unsigned i = (unsigned)d < 2 ? (unsigned)d : 0;
  atomic_store(&bytes_peak[i], atomic_load(&bytes_now[i]));
}

dm_mem_limit *dm_mem_limit_new(uint64_t tensor_max) {
  dm_mem_limit *l = calloc(1, sizeof *l);
  if (l) {
    atomic_init(&l->refs, 1);
    atomic_init(&l->tensor_max, tensor_max);
  }
  return l;
}

void dm_mem_limit_release(dm_mem_limit *l) {
  if (l && atomic_fetch_sub(&l->refs, 1) == 1)
    free(l);
}

uint64_t dm_tensor_max_bytes(const dm_tensor *t) {
  return t->limit ? atomic_load(&t->limit->tensor_max) : DM_DEFAULT_TENSOR_LIMIT;
}

/* "1.5 GiB" beside a byte count, so that a limit error reads at a glance. */
static const char *human(size_t n, char *buf, size_t cap) {
  static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    u++;
  }
  snprintf(buf, cap, u ? "%zu bytes (%.1f %s)" : "%zu bytes", n, v, unit[u]);
  return buf;
}

/* Counts `bytes` of new host storage for t against its workspace's cap, before they are
 * allocated (an 8 GiB fill over the cap never reaches malloc). The storage t holds now
 * is freed right after when t holds it alone, so it is not counted against the new one:
 * the cap bounds what stays allocated, and a tensor shrinking or resized in place of
 * itself never fails for the moment both exist. */
static dm_status charge(const dm_tensor *t, size_t bytes) {
  dm_mem_limit *l = t->limit;
  if (!l)
    return DM_OK;
  const dm_storage *old = t->storage;
  size_t replaced = old && old->counted == l && atomic_load(&old->refs) == 1
                        ? alloc_size(old->nbytes) : 0;
  size_t cur = atomic_load(&l->in_use), after;
  do {
    size_t cap = atomic_load(&l->cap);
    after = cur - (replaced < cur ? replaced : cur);
    if (cap && (after > cap || bytes > cap - after)) {
      char a[64], b[64], c[64];
      return dm_error(DM_ERR_LIMIT,
                      "allocating %s for %s%s%s would exceed the workspace memory limit: %s "
                      "in use, limit %s (dm_workspace_set_memory_limit, --memory-limit)",
                      human(bytes, a, sizeof a), t->blob ? "blob '" : "an op's temporary tensor",
                      t->blob ? t->blob : "", t->blob ? "'" : "", human(after, b, sizeof b),
                      human(cap, c, sizeof c));
    }
  } while (!atomic_compare_exchange_weak(&l->in_use, &cur, cur + bytes));
  size_t held = after + bytes, peak = atomic_load(&l->peak);
  while (held > peak && !atomic_compare_exchange_weak(&l->peak, &peak, held)) {
  }
  return DM_OK;
}

static void uncharge(dm_mem_limit *l, size_t bytes) {
  if (l)
    atomic_fetch_sub(&l->in_use, bytes);
}

/* Before the host writes (or frees) host storage: the end of its last asynchronous
 * upload. A failed wait means the device failed (its next call reports it); the DMA then
 * no longer runs, so the write may go ahead. */
static void storage_await_uploads(dm_storage *s) {
  if (s->upload_pending) {
    dm_device_note_host_sync();
    (void)s->pinned_by->fence_wait(s->fence);
    s->upload_pending = 0;
  }
}

static void storage_clear_layout(dm_storage *s) {
  if (s->layout)
    s->layout->free_desc(s->layout_desc);
  s->layout = NULL;
  s->layout_desc = NULL;
}

static void storage_release(dm_storage *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
    return;
  atomic_fetch_sub(&bytes_now[s->device == DM_CPU ? 0 : 1], alloc_size(s->nbytes));
  uncharge(s->counted, alloc_size(s->nbytes));
  if (s->layout)
    s->layout->free_desc(s->layout_desc);
  dm_mem_limit_release(s->counted);
  if (s->device != DM_CPU) {
    const dm_device_ops *ops = dm_device_ops_for(s->device);
    if (ops && s->data)
      ops->free(s->device_id, s->data);
    free(s);
    return;
  }
  if (s->dtype == DM_STRING && s->data) {
    char **strs = s->data;
    for (int64_t i = 0; i < s->count; i++)
      free(strs[i]);
  }
  if (s->pinned_by) {
    storage_await_uploads(s);
    s->pinned_by->host_unregister(s->data);
  }
  if (s->fence)
    s->pinned_by->fence_free(s->fence);
  free(s->data);
  free(s);
}

/* Storage on a device through its backend, counted like host storage (the pool's own
 * statistics would include what it keeps for reuse). */
/* A new device storage's bookkeeping, its data already set: counted, one reference. */
static void device_storage_init(dm_storage *s, dm_device_type device, int id, dm_dtype dtype,
                                size_t nbytes) {
  count_alloc(1, alloc_size(nbytes));
  atomic_init(&s->refs, 1);
  storage_touch(s);
  s->device = device;
  s->device_id = id;
  s->dtype = dtype;
  s->nbytes = nbytes;
}

static dm_status device_storage_alloc(dm_device_type device, int id, dm_dtype dtype,
                                      size_t nbytes, dm_storage **out) {
  char name[32];
  const dm_device_ops *ops = dm_device_ops_for(device);
  if (!ops)
    return dm_error(DM_ERR_UNSUPPORTED, "cannot allocate on %s: built without that backend",
                    dm_device_str(device, id, name, sizeof name));
  if (dtype == DM_STRING)
    return dm_error(DM_ERR_TYPE, "STRING tensors live on the CPU only, not on %s",
                    dm_device_str(device, id, name, sizeof name));
  dm_storage *s = calloc(1, sizeof *s);
  if (!s)
    return DM_NOMEM("tensor storage");
  dm_status st = ops->alloc(id, alloc_size(nbytes), &s->data);
  if (st != DM_OK) {
    free(s);
    return st;
  }
  device_storage_init(s, device, id, dtype, nbytes);
  *out = s;
  return DM_OK;
}

/* Host buffers this large are worth page-locking when uploaded every step (smaller ones
 * go through the backend's staging, which costs little at that size). */
#define DM_PIN_MIN ((size_t)1 << 20)

/* The host's page size (4 KiB on x86-64, often 64 KiB on Arm servers). */
static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p >= DM_ALIGN ? (size_t)p : 4096;
}

static size_t page_round(size_t n) {
  size_t page = page_size();
  return (n + page - 1) / page * page;
}

/* Host storage for t (which it will replace), counted against t's workspace cap. */
static dm_status storage_alloc(const dm_tensor *t, dm_dtype dtype, int64_t count,
                               size_t nbytes, dm_storage **out) {
  /* aligned_alloc needs a size that is a multiple of the alignment. Buffers that may be
   * page-locked get whole pages of their own, since two locked ranges may not share a
   * page; they are still counted at the 64-byte rounding, as every buffer is. */
  size_t rounded = alloc_size(nbytes);
  DM_TRY(charge(t, rounded));
  dm_storage *s = calloc(1, sizeof *s);
  if (s)
    s->data = rounded >= DM_PIN_MIN ? aligned_alloc(page_size(), page_round(rounded))
                                    : aligned_alloc(DM_ALIGN, rounded);
  if (!s || !s->data) {
    uncharge(t->limit, rounded);
    free(s);
    return dm_error(DM_ERR_NOMEM, "out of memory allocating a tensor of %zu bytes", nbytes);
  }
  if (t->limit) {
    atomic_fetch_add(&t->limit->refs, 1);
    s->counted = t->limit;
  }
  storage_touch(s);
  if (dtype == DM_STRING)
    memset(s->data, 0, rounded); /* NULL strings until written */
  count_alloc(DM_CPU, rounded);
  atomic_init(&s->refs, 1);
  s->device = DM_CPU;
  s->dtype = dtype;
  s->nbytes = nbytes;
  s->count = count;
  *out = s;
  return DM_OK;
}

dm_tensor *dm_tensor_new_in(dm_mem_limit *limit) {
  dm_tensor *t = calloc(1, sizeof *t);
  if (t && limit) {
    atomic_fetch_add(&limit->refs, 1);
    t->limit = limit;
  }
  return t;
}

dm_tensor *dm_tensor_new_max(uint64_t max_bytes) {
  dm_mem_limit *l = dm_mem_limit_new(max_bytes);
  dm_tensor *t = l ? dm_tensor_new_in(l) : NULL;
  dm_mem_limit_release(l); /* the tensor holds it now */
  return t;
}

void dm_tensor_reset(dm_tensor *t) {
  storage_release(t->storage);
  t->storage = NULL;
  t->dtype = DM_UNDEFINED;
  t->ndim = 0;
  t->numel = 0;
}

void dm_tensor_forget_storage(dm_tensor *t) {
  if (t->storage && t->storage->device != DM_CPU)
    t->storage->data = NULL; /* storage_release frees no NULL data */
  dm_tensor_reset(t);
}

dm_status dm_tensor_adopt_device(dm_tensor *t, dm_device_type device, int id, void *data,
                                 size_t nbytes, dm_dtype dtype, int ndim, const int64_t *dims) {
  int64_t numel;
  if (device == DM_CPU || ndim < 0 || ndim > DM_MAX_DIMS || dtype == DM_STRING)
    return dm_error(DM_ERR_INVALID, "dm_tensor_adopt_device: not device data of a tensor");
  DM_TRY(dm_shape_numel(ndim, dims, &numel));
  dm_storage *s = calloc(1, sizeof *s);
  if (!s)
    return DM_NOMEM("tensor storage");
  s->data = data;
  device_storage_init(s, device, id, dtype, nbytes);
  storage_release(t->storage);
  t->storage = s;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
  t->numel = numel;
  return DM_OK;
}

void dm_tensor_free(dm_tensor *t) {
  if (!t)
    return;
  dm_tensor_reset(t);
  dm_mem_limit_release(t->limit);
  free(t);
}

dm_status dm_tensor_resize(dm_tensor *t, dm_dtype dtype, int ndim, const int64_t *dims) {
  if (!t)
    return dm_error(DM_ERR_INVALID, "dm_tensor_resize: NULL tensor");
  if (ndim > 0 && !dims)
    return dm_error(DM_ERR_INVALID, "dm_tensor_resize: NULL dims for %d dimensions", ndim);
  return dm_tensor_resize_on(t, DM_CPU, 0, dtype, ndim, dims);
}

dm_device_type dm_tensor_device(const dm_tensor *t, int *id) {
  if (id)
    *id = t->storage ? t->storage->device_id : 0;
  return t->storage ? t->storage->device : DM_CPU;
}

dm_status dm_tensor_resize_on(dm_tensor *t, dm_device_type device, int id, dm_dtype dtype,
                              int ndim, const int64_t *dims) {
  if (dtype == DM_BYTE)
    dtype = DM_UINT8;
  if (!dm_dtype_is_valid(dtype) || dtype == DM_UNDEFINED)
    return dm_error(DM_ERR_TYPE, "cannot allocate a tensor of data type %d", (int)dtype);
  int64_t numel;
  size_t nbytes;
  DM_TRY(dm_shape_numel(ndim, dims, &numel));
  DM_TRY(dm_shape_nbytes(dtype, numel, dm_tensor_max_bytes(t), &nbytes));
  /* Keep the storage if nobody else shares it and the bytes fit exactly; a shared
   * storage is kept too when the size matches, which is what in-place ops rely on. */
  int keep = t->storage && t->storage->nbytes == nbytes && t->storage->dtype != DM_STRING &&
             dtype != DM_STRING && t->storage->device == device &&
             t->storage->device_id == id;
  /* A blocked buffer of the same size is reused for plain data only when it is t's
   * alone: another tensor sharing it still reads it in its layout. */
  if (keep && t->storage->layout) {
    keep = atomic_load(&t->storage->refs) == 1;
    if (keep)
      storage_clear_layout(t->storage);
  }
  if (!keep) {
    dm_storage *s = NULL;
    if (device == DM_CPU)
      DM_TRY(storage_alloc(t, dtype, numel, nbytes, &s));
    else
      DM_TRY(device_storage_alloc(device, id, dtype, nbytes, &s));
    storage_release(t->storage);
    t->storage = s;
  } else {
    t->storage->dtype = dtype;
    storage_touch(t->storage); /* resized for a writer */
  }
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++)
    t->dims[i] = dims[i];
  t->numel = numel;
  return DM_OK;
}

dm_status dm_tensor_set_shape(dm_tensor *t, dm_dtype dtype, int ndim, const int64_t *dims) {
  if (dtype == DM_BYTE)
    dtype = DM_UINT8;
  if (!dm_dtype_is_valid(dtype) || dtype == DM_UNDEFINED)
    return dm_error(DM_ERR_TYPE, "invalid data type %d", (int)dtype);
  int64_t numel;
  size_t nbytes;
  DM_TRY(dm_shape_numel(ndim, dims, &numel));
  DM_TRY(dm_shape_nbytes(dtype, numel, dm_tensor_max_bytes(t), &nbytes));
  if (t->storage && (t->storage->nbytes != nbytes || dtype == DM_STRING || t->storage->layout)) {
    storage_release(t->storage);
    t->storage = NULL;
  }
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++)
    t->dims[i] = dims[i];
  t->numel = numel;
  return DM_OK;
}

dm_status dm_tensor_resize_like(dm_tensor *t, const dm_tensor *like) {
  if (!t || !like)
    return dm_error(DM_ERR_INVALID, "dm_tensor_resize_like: NULL %s", t ? "like" : "tensor");
  return dm_tensor_resize(t, like->dtype, like->ndim, like->dims);
}

void dm_tensor_share(dm_tensor *dst, const dm_tensor *src) {
  if (dst == src)
    return;
  if (src->storage)
    atomic_fetch_add(&src->storage->refs, 1);
  storage_release(dst->storage);
  dst->storage = src->storage;
  dst->dtype = src->dtype;
  dst->ndim = src->ndim;
  memcpy(dst->dims, src->dims, sizeof dst->dims);
  dst->numel = src->numel;
}

dm_status dm_tensor_copy(dm_tensor *dst, const dm_tensor *src) {
  int id;
  dm_device_type device = dm_tensor_device(src, &id);
  return dm_tensor_copy_to(dst, device, id, src);
}

/* Host storage src to device storage dst (same size). A large buffer uploaded for the
 * second time is page-locked and from then on sent by DMA without waiting
 * (core/device.h); otherwise, and when locking fails (it is not retried), the backend's
 * staged copy. */
static dm_status upload(const dm_device_ops *ops, int id, dm_storage *dst, dm_storage *src) {
  if (ops->upload_async && !src->pin_failed && src->dtype != DM_STRING &&
      src->nbytes >= DM_PIN_MIN) {
    if (!src->pinned_by && ++src->uploads >= 2) {
      if (ops->host_register(src->data, page_round(alloc_size(src->nbytes))) == DM_OK)
        src->pinned_by = ops;
      else
        src->pin_failed = 1;
    }
    if (src->pinned_by == ops) {
      DM_TRY(ops->upload_async(id, dst->data, src->data, dst->nbytes, &src->fence));
      src->upload_pending = 1;
      return DM_OK;
    }
  }
  return ops->copy(dst->device, id, dst->data, DM_CPU, 0, src->data, dst->nbytes);
}

dm_status dm_tensor_copy_to(dm_tensor *dst, dm_device_type device, int id, const dm_tensor *src) {
  if (dst == src) {
    int at;
    if (!src->storage || (dm_tensor_device(src, &at) == device && (device == DM_CPU || at == id)))
      return DM_OK;
    /* in place across devices (CopyCPUToGPU(w) -> w): copy aside, then take it over */
    dm_tensor *moved = dm_tensor_new(src->limit);
    if (!moved)
      return DM_NOMEM("a tensor");
    moved->blob = src->blob;
    dm_status s = dm_tensor_copy_to(moved, device, id, src);
    if (s == DM_OK)
      dm_tensor_share(dst, moved);
    dm_tensor_free(moved);
    return s;
  }
  if (src->dtype == DM_UNDEFINED) {
    dm_tensor_reset(dst);
    return DM_OK;
  }
  /* Copies are plain: a blocked source is converted where it is first (the conversion
   * changes its bytes, not its value, so a const source may be). */
  if (!dm_tensor_is_plain(src))
    DM_TRY(dm_tensor_make_plain((dm_tensor *)src));
  if (dst->storage && src->storage && dst->storage == src->storage && src->storage->device == device &&
      src->storage->device_id == id) {
    dm_tensor_share(dst, src);
    return DM_OK;
  }
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, src->dims, sizeof dims); /* src may alias dst's dims through a caller */
  DM_TRY(dm_tensor_resize_on(dst, device, id, src->dtype, src->ndim, dims));
  if (src->dtype == DM_STRING) {
    char **d = dst->storage->data;
    char *const *s = src->storage->data;
    for (int64_t i = 0; i < src->numel; i++) {
      free(d[i]);
      d[i] = s[i] ? strdup(s[i]) : NULL;
      if (s[i] && !d[i])
        return DM_NOMEM("a string element");
    }
  } else if (src->numel > 0) {
    dm_device_type from = src->storage->device;
    if (device == DM_CPU)
      storage_await_uploads(dst->storage);
    if (from == DM_CPU && device == DM_CPU) {
      memcpy(dst->storage->data, src->storage->data, dst->storage->nbytes);
    } else {
      const dm_device_ops *ops = dm_device_ops_for(device != DM_CPU ? device : from);
      if (!ops)
        return dm_error(DM_ERR_UNSUPPORTED, "no backend to copy device memory");
      if (from == DM_CPU)
        DM_TRY(upload(ops, id, dst->storage, src->storage));
      else {
        if (device == DM_CPU) /* the host reads dst next: the copy waits for the device */
          dm_device_note_host_sync();
        DM_TRY(ops->copy(device, id, dst->storage->data, from, src->storage->device_id,
                         src->storage->data, dst->storage->nbytes));
      }
    }
  }
  storage_touch(dst->storage);
  return DM_OK;
}

int dm_tensor_swap_storage(dm_tensor *a, dm_tensor *b) {
  dm_storage *x = a->storage, *y = b->storage;
  if (!x || !y || x == y || x->device != DM_CPU || y->device != DM_CPU || x->layout || y->layout ||
      x->dtype == DM_STRING || y->dtype == DM_STRING || x->nbytes != y->nbytes ||
      atomic_load(&x->refs) != 1 || atomic_load(&y->refs) != 1)
    return 0;
  a->storage = y;
  b->storage = x;
  x->dtype = b->dtype;
  y->dtype = a->dtype;
  return 1;
}

dm_status dm_tensor_make_unique(dm_tensor *t) {
  if (!t->storage || atomic_load(&t->storage->refs) == 1)
    return DM_OK;
  if (t->storage->layout)
    return dm_tensor_make_plain(t); /* new storage, t's alone */
  dm_tensor *copy = dm_tensor_new(t->limit);
  if (!copy)
    return DM_NOMEM("a tensor");
  copy->blob = t->blob;
  int64_t dims[DM_MAX_DIMS];
  memcpy(dims, t->dims, sizeof dims);
  int id;
  dm_device_type device = dm_tensor_device(t, &id);
  dm_status s = dm_tensor_resize_on(copy, device, id, t->dtype, t->ndim, dims);
  if (s == DM_OK)
    s = dm_tensor_copy(copy, t);
  if (s == DM_OK)
    dm_tensor_share(t, copy);
  dm_tensor_free(copy);
  return s;
}

int dm_tensor_same_shape(const dm_tensor *a, const dm_tensor *b) {
  if (a->ndim != b->ndim)
    return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i])
      return 0;
  return 1;
}

const char *dm_shape_str(const dm_tensor *t, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  if (t->ndim == 0)
    snprintf(buf, cap, "scalar");
  for (int i = 0; i < t->ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, i ? "x%lld" : "%lld", (long long)t->dims[i]);
  return buf;
}

/* Public read-side accessors. */
/* The public accessors take NULL (a failed fetch's tensor) and answer as for an empty
 * tensor: UNDEFINED, 0 dimensions, NULL dims, 0 elements, 0 bytes, NULL data. */
dm_dtype dm_tensor_dtype(const dm_tensor *t) { return t ? t->dtype : DM_UNDEFINED; }
int dm_tensor_ndim(const dm_tensor *t) { return t ? t->ndim : 0; }
const int64_t *dm_tensor_dims(const dm_tensor *t) { return t ? t->dims : NULL; }
int64_t dm_tensor_numel(const dm_tensor *t) { return t ? t->numel : 0; }
/* A blocked tensor answers for the plain data its first access converts to. */
size_t dm_tensor_nbytes(const dm_tensor *t) {
  if (!t || !t->storage)
    return 0;
  return t->storage->layout ? (size_t)t->numel * dm_dtype_size(t->dtype) : t->storage->nbytes;
}
/* Readers outside the layout-aware kernels get plain data (converted on first access:
 * the bytes change, not the value, so a const tensor may be); NULL when the conversion
 * fails (out of memory), with the error set. */
const void *dm_tensor_data(const dm_tensor *t) {
  if (!t || !t->storage)
    return NULL;
  if (t->storage->layout && dm_tensor_make_plain((dm_tensor *)t) != DM_OK)
    return NULL;
  return t->storage->data;
}
/* The host may be about to write: wait for an upload still reading the storage. */
void *dm_tensor_mutable_data(dm_tensor *t) {
  if (!t || !t->storage)
    return NULL;
  if (t->storage->layout && dm_tensor_make_plain(t) != DM_OK)
    return NULL;
  storage_await_uploads(t->storage);
  storage_touch(t->storage);
  return t->storage->data;
}

void *dm_tensor_raw_data(const dm_tensor *t) { return t && t->storage ? t->storage->data : NULL; }

int dm_tensor_is_plain(const dm_tensor *t) { return !t->storage || !t->storage->layout; }

/* Per thread: a net's ops run on its caller's thread, so a profile sees its own. */
static _Thread_local dm_reorder_totals reorders;

void dm_layout_note_reorder(size_t bytes, double seconds) {
  reorders.count++;
  reorders.bytes += bytes;
  reorders.seconds += seconds;
}

dm_reorder_totals dm_layout_reorders(void) { return reorders; }

dm_status dm_tensor_make_plain(dm_tensor *t) {
  if (dm_tensor_is_plain(t))
    return DM_OK;
  size_t nbytes = (size_t)t->numel * dm_dtype_size(t->dtype);
  dm_storage *s = NULL;
  DM_TRY(storage_alloc(t, t->dtype, t->numel, nbytes, &s));
  dm_status st = t->storage->layout->to_plain(t, s->data);
  if (st != DM_OK) {
    storage_release(s);
    return st;
  }
  storage_release(t->storage);
  t->storage = s;
  return DM_OK;
}

dm_status dm_tensor_resize_layout(dm_tensor *t, dm_dtype dtype, int ndim, const int64_t *dims,
                                  size_t nbytes, const dm_layout_ops *layout, void *desc) {
  int64_t numel;
  size_t plain;
  dm_status st = dm_shape_numel(ndim, dims, &numel);
  if (st == DM_OK)
    st = dm_shape_nbytes(dtype, numel, dm_tensor_max_bytes(t), &plain);
  if (st == DM_OK && dtype == DM_STRING)
    st = dm_error(DM_ERR_TYPE, "STRING tensors have no layouts");
  dm_storage *old = t->storage;
  int keep = st == DM_OK && old && old->device == DM_CPU && old->nbytes == nbytes &&
             old->dtype != DM_STRING && atomic_load(&old->refs) == 1;
  if (st == DM_OK && !keep) {
    dm_storage *s = NULL;
    st = storage_alloc(t, dtype, numel, nbytes, &s);
    if (st == DM_OK) {
      storage_release(t->storage);
      t->storage = s;
    }
  }
  if (st != DM_OK) {
    if (layout && desc)
      layout->free_desc(desc);
    return st;
  }
  storage_await_uploads(t->storage);
  storage_touch(t->storage); /* a kept storage is about to be written */
  storage_clear_layout(t->storage);
  t->storage->layout = layout;
  t->storage->layout_desc = layout ? desc : NULL;
  t->storage->dtype = dtype;
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++)
    t->dims[i] = dims[i];
  t->numel = numel;
  return DM_OK;
}
