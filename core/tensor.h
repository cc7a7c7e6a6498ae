/* tensor.h: tensors and reference-counted storage (internal).
 *
 * A tensor is a dtype, a shape and a view on a storage. Storage is reference-counted so
 * that Reshape and in-place ops can share memory; a resize that keeps the byte size
 * keeps the storage. CPU buffers are 64-byte aligned. STRING tensors hold an array of
 * malloc'd char* that the storage frees.
 */
#ifndef DM_CORE_TENSOR_H
#define DM_CORE_TENSOR_H

#include <stdatomic.h>
#include <stdint.h>

#include "demitasse_plugin.h"
#include "status.h"

#define DM_ALIGN 64
/* Default cap on one tensor's bytes; the workspace can change it. */
#define DM_DEFAULT_TENSOR_LIMIT ((uint64_t)8 << 30)

/* What a tensor allocates under: the cap on one tensor's bytes and its workspace's cap on
 * the host memory of all its tensors, with the count of what they hold. A workspace has
 * one, shared by its blobs' tensors, by the temporaries made from them
 * (dm_tensor_new(t->limit)) and by every storage they allocated on the host, which is
 * counted here until it is freed, whoever holds it by then: a storage shared by several
 * tensors is counted once. Reference-counted (the workspace, each tensor, each counted
 * storage), so a tensor or storage that outlives its workspace still finds it. Atomic:
 * a DB input's prefetch thread allocates too. */
typedef struct dm_mem_limit {
  atomic_int refs;
  _Atomic uint64_t tensor_max; /* bytes of one tensor */
  atomic_size_t cap;           /* bytes of host storage in all; 0: no cap */
  atomic_size_t in_use, peak;  /* counted as allocated (rounded up to DM_ALIGN) */
} dm_mem_limit;

/* A new set of limits (one reference, no cap), or NULL when out of memory. */
DM_HIDDEN dm_mem_limit *dm_mem_limit_new(uint64_t tensor_max);
/* Drops a reference (NULL is fine); the last frees it. */
DM_HIDDEN void dm_mem_limit_release(dm_mem_limit *l);
/* The most bytes one tensor of t's may take (its workspace's tensor limit). */
DM_HIDDEN uint64_t dm_tensor_max_bytes(const dm_tensor *t);

/* A storage's data in a layout other than the plain row-major one of its tensor's dims:
 * oneDNN's blocked formats, written by the DNNL engine's kernels (operators/dnnl/), which
 * pass them on to each other so consecutive ops do not convert back and forth. Everyone
 * else sees plain data: dm_tensor_data and dm_tensor_mutable_data convert on first
 * access, and the executor converts the inputs of every other kernel before it runs
 * (net/net.c), so no reference kernel, plugin, fetch, save or device copy ever reads a
 * blocked buffer. See "Layouts" in DESIGN-level notes of operators/dnnl/dnnl_common.h. */
typedef struct dm_layout_ops {
  const char *name;
  /* Writes src's data (in src->storage's layout) to dst as the plain row-major array of
   * src's dims and dtype. */
  dm_status (*to_plain)(const dm_tensor *src, void *dst);
  void (*free_desc)(void *desc);
} dm_layout_ops;

typedef struct dm_storage {
  atomic_int refs;
  dm_device_type device; /* CPU storage is host memory; other devices' is theirs */
  int device_id;
  dm_dtype dtype; /* STRING storage frees its strings */
  void *data;
  size_t nbytes;
  int64_t count; /* elements, for STRING cleanup */
  /* Host storage uploaded asynchronously (dm_tensor_copy_to, core/device.h): the backend
   * that page-locked it (NULL: not locked), the fence of its last upload and whether a
   * host write must still wait for it, how many uploads it has had (the second locks
   * it: a buffer uploaded once, like a weight, is not worth locking) and whether
   * locking failed (then it stays staged). One thread uses a storage at a time, as one
   * thread runs a workspace. */
  const struct dm_device_ops *pinned_by;
  void *fence;
  int upload_pending;
  int uploads;
  int pin_failed;
  dm_mem_limit *counted; /* the workspace limits whose in_use holds this (a reference) */
  /* NULL: plain. Otherwise the data's layout and its description (owned); nbytes is then
   * the layout's size, which may exceed the plain one (channel blocks are padded). */
  const dm_layout_ops *layout;
  void *layout_desc;
  /* Its contents' version: a number drawn from one process-wide counter when the storage
   * is made and whenever a writer may have changed it (dm_tensor_mutable_data, a copy
   * into it, an op that outputs it: dm_tensor_touch). A kernel that derives data from
   * an input (oneDNN's Winograd weights) keeps it while (storage, version) is unchanged;
   * the counter makes the pair unique even when a freed address is reused. */
  uint64_t version;
} dm_storage;

struct dm_tensor {
  dm_dtype dtype;
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  int64_t numel;
  dm_storage *storage;  /* NULL while empty */
  dm_mem_limit *limit;  /* what it allocates under (a reference; NULL: the defaults) */
  const char *blob;     /* the blob's name, borrowed, for messages (NULL: a temporary) */
};

/* Bytes of tensor storage allocated now on a device type (DM_CPU, or DM_CUDA: all GPUs
 * together), and the most allocated at once since the last dm_memory_reset_peak (which
 * sets the peak to the current bytes). Process-wide. */
DM_HIDDEN void dm_memory_usage(dm_device_type device, size_t *now, size_t *peak);
DM_HIDDEN void dm_memory_reset_peak(dm_device_type device);

/* Product of dims with overflow check; negative dims are an error. The product of the
 * nonzero dims must fit in int64 too (DM_ERR_LIMIT), so every sub-product of a tensor's
 * dims does: dm_dims_product and the ops' shape arithmetic rely on it. */
DM_HIDDEN dm_status dm_shape_numel(int ndim, const int64_t *dims, int64_t *numel);
/* numel * size with overflow check against `limit`. */
DM_HIDDEN dm_status dm_shape_nbytes(dm_dtype dtype, int64_t numel, uint64_t limit, size_t *nbytes);

/* An empty tensor allocating under `limit` (it takes a reference; NULL: at most
 * DM_DEFAULT_TENSOR_LIMIT bytes, uncounted). */
DM_HIDDEN dm_tensor *dm_tensor_new_in(dm_mem_limit *limit);
/* An empty tensor outside any workspace, of at most max_bytes, uncounted: limits of its
 * own (the temporaries made from it share them). */
DM_HIDDEN dm_tensor *dm_tensor_new_max(uint64_t max_bytes);
/* dm_tensor_new(t->limit), dm_tensor_new(ws->tensor_limit): a tensor under the same
 * limits; dm_tensor_new(bytes), e.g. DM_DEFAULT_TENSOR_LIMIT: one outside any workspace
 * (tests, fuzzers, tools). NULL when out of memory. */
#define dm_tensor_new(x)                                                                 \
  _Generic((x), dm_mem_limit *: dm_tensor_new_in, void *: dm_tensor_new_in,             \
           default: dm_tensor_new_max)(x)
DM_HIDDEN void dm_tensor_free(dm_tensor *t);
/* Sets dtype and shape without allocating (shape inference); storage is dropped unless
 * its size still fits exactly. */
DM_HIDDEN dm_status dm_tensor_set_shape(dm_tensor *t, dm_dtype dtype, int ndim,
                                        const int64_t *dims);
/* dm_tensor_resize (which allocates on the CPU) on device (type, id) instead: storage on
 * another device is dropped, never reused. */
DM_HIDDEN dm_status dm_tensor_resize_on(dm_tensor *t, dm_device_type device, int id,
                                        dm_dtype dtype, int ndim, const int64_t *dims);
/* Where t's storage is: DM_CPU (and 0) while it has none. */
DM_HIDDEN dm_device_type dm_tensor_device(const dm_tensor *t, int *id);
/* Deep copy of src into dst on device (type, id), either side anywhere (host <-> device
 * copies go through the device backend). */
DM_HIDDEN dm_status dm_tensor_copy_to(dm_tensor *dst, dm_device_type device, int id,
                                      const dm_tensor *src);
/* Whether t's data is plain row-major (or t has none). */
DM_HIDDEN int dm_tensor_is_plain(const dm_tensor *t);
/* Converts t's data to plain row-major in new storage of its own (no-op when plain). */
DM_HIDDEN dm_status dm_tensor_make_plain(dm_tensor *t);
/* Layout conversions (an engine's reorders: to and from its blocked layouts, of inputs,
 * weights and outputs) made by the calling thread so far: their count, the bytes they
 * wrote and the seconds they took. The engine notes each (dm_layout_note_reorder);
 * `run --profile` reports the difference over its runs. */
typedef struct dm_reorder_totals {
  uint64_t count, bytes;
  double seconds;
} dm_reorder_totals;
DM_HIDDEN void dm_layout_note_reorder(size_t bytes, double seconds);
DM_HIDDEN dm_reorder_totals dm_layout_reorders(void);
/* Resizes t on the CPU to dtype and dims with `nbytes` of storage in `layout` (NULL:
 * plain), described by `desc`, which it takes over (freed with layout->free_desc, also
 * on failure). The storage is t's own afterwards: one shared with another tensor is not
 * reused. The data is left unwritten. */
DM_HIDDEN dm_status dm_tensor_resize_layout(dm_tensor *t, dm_dtype dtype, int ndim,
                                            const int64_t *dims, size_t nbytes,
                                            const dm_layout_ops *layout, void *desc);
/* The storage's bytes in whatever layout they are (kernels that read layouts). */
DM_HIDDEN void *dm_tensor_raw_data(const dm_tensor *t);
/* The version of t's contents (dm_storage.version; 0 when t has no storage), and a new
 * one for them after a write that bypassed dm_tensor_mutable_data (the executor touches
 * every output an op wrote). */
DM_HIDDEN uint64_t dm_tensor_version(const dm_tensor *t);
DM_HIDDEN void dm_tensor_touch(dm_tensor *t);
/* Drops the storage; the tensor becomes empty (UNDEFINED, 0-d). */
DM_HIDDEN void dm_tensor_reset(dm_tensor *t);
/* As dm_tensor_reset, but device storage is dropped without giving its memory back to
 * the backend: memory that was never the tensor's to free (made while a device graph was
 * being recorded, and discarded with it: net/graph_exec.c). */
DM_HIDDEN void dm_tensor_forget_storage(dm_tensor *t);
/* t becomes the owner of nbytes of device memory at `data` on (device, id), which the
 * backend allocated elsewhere (a device graph's allocation, handed back to the host's
 * view after each replay: net/graph_exec.c), with that dtype and shape; what t held is
 * dropped. Freeing t gives the memory back through the backend's free. */
DM_HIDDEN dm_status dm_tensor_adopt_device(dm_tensor *t, dm_device_type device, int id,
                                           void *data, size_t nbytes, dm_dtype dtype,
                                           int ndim, const int64_t *dims);
/* Makes `dst` a view of `src`'s storage (shape and dtype copied). */
DM_HIDDEN void dm_tensor_share(dm_tensor *dst, const dm_tensor *src);
/* Exchanges the storages of host tensors a and b when each holds its storage alone and
 * both have the same byte size: a filled buffer handed over without a copy (the DB
 * input's prefetched batch). Returns 0, and changes nothing, otherwise. */
DM_HIDDEN int dm_tensor_swap_storage(dm_tensor *a, dm_tensor *b);
/* Gives t storage of its own (a copy) if its storage is shared: copy-on-write before an
 * op writes a view in place. */
DM_HIDDEN dm_status dm_tensor_make_unique(dm_tensor *t);
/* Deep copy of src into dst on src's device (dst gets fresh storage unless it already has
 * the size there). */
DM_HIDDEN dm_status dm_tensor_copy(dm_tensor *dst, const dm_tensor *src);
/* Same shape (ndim and dims). */
DM_HIDDEN int dm_tensor_same_shape(const dm_tensor *a, const dm_tensor *b);
/* "2x3x4" into buf. */
DM_HIDDEN const char *dm_shape_str(const dm_tensor *t, char *buf, size_t cap);
DM_HIDDEN int dm_dtype_is_valid(int t);
/* Name -> dtype (accepts "FLOAT", "float", "FLOAT16", "float16", "half", "INT32", ...). */
DM_HIDDEN dm_status dm_dtype_from_name(const char *name, dm_dtype *out);

#endif
