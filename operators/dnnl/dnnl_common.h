/* dnnl_common.h: what every kernel of the oneDNN engine shares (internal).
 *
 * The engine. Ops of a CPU net that names no engine run on oneDNN's primitives where a
 * kernel of engine "DNNL" exists and its supports hook accepts the op (FP32 and BF16;
 * FP16 stays on the reference kernels, which are faithful to tensor cores). An op whose
 * engine is "REFERENCE", or a workspace set to it (dm_workspace_set_engine, `--engine
 * reference`), runs the reference kernels; every engine kernel is tested against them.
 *
 * Layouts. oneDNN's fast convolutions read and write blocked layouts (nChw16c for
 * activations, OIhw16i16o and the like for weights). Converting to NCHW and back at every
 * op would cost a pass over memory per op, so the layout travels with the data: an
 * engine kernel asks its primitive for the layouts it wants ("any"), and writes its
 * outputs in the layout the primitive chose, recorded in the tensor's storage
 * (core/tensor.h: dm_storage.layout, with a copy of the dnnl_memory_desc_t). The next
 * engine kernel reads that description and feeds the data on as it is when its own
 * primitive wants the same layout (the usual case: consecutive convolutions agree on
 * nChw16c), reordering only when it does not. Nothing outside the engine ever sees a
 * blocked buffer: the executor converts the inputs of every other kernel to plain
 * row-major before it runs (net/net.c), and dm_tensor_data converts on access, so a
 * fetch, a Save, a checkpoint, a device copy or a plugin reads NCHW as the op declares.
 * The logical shape (dims) is always the plain one; only the bytes differ.
 *
 * Weights are reordered once: a Conv whose W arrives plain and wants it blocked stores
 * the blocked copy back into W's blob (same values, new layout), so the next run finds
 * it ready. In training the optimizer (a reference kernel) reads W plain, which converts
 * it back; that is one reorder of the weights per step each way.
 *
 * Each kernel keeps its primitive in its op state, rebuilt when the input shapes,
 * dtypes or layouts change. Memory objects are made per run around the tensors' buffers
 * (cheap on the CPU). Primitives run on a stream of the calling thread's own.
 */
#ifndef DM_OPERATORS_DNNL_COMMON_H
#define DM_OPERATORS_DNNL_COMMON_H

#include <oneapi/dnnl/dnnl.h>

#include "core/registry.h"
#include "core/tensor.h"
#include "operators/common.h"

/* The process's CPU engine, created on first use; NULL when oneDNN cannot run here. */
DM_HIDDEN dnnl_engine_t dm_dnnl_engine(void);
/* The calling thread's stream on that engine (destroyed when the thread exits). */
DM_HIDDEN dm_status dm_dnnl_stream(dnnl_stream_t *out);

/* dnnl_success -> DM_OK; anything else an error naming `what` and oneDNN's status. */
DM_HIDDEN dm_status dm_dnnl_status(dnnl_status_t st, const char *what);
#define DM_DNNL_TRY(call, what) DM_TRY(dm_dnnl_status((call), (what)))

/* oneDNN's data type for a dtype the engine runs (FLOAT, BFLOAT16; also INT32, INT8,
 * UINT8 for reorders); 0 for any other. */
DM_HIDDEN int dm_dnnl_dtype(dm_dtype t, dnnl_data_type_t *out);

/* The plain row-major description of dims and dtype. */
DM_HIDDEN dm_status dm_dnnl_plain_md(int ndim, const int64_t *dims, dm_dtype dtype,
                                     dnnl_memory_desc_t *md);
/* The description of t's data as it is: its recorded layout, or plain row-major. */
DM_HIDDEN dm_status dm_dnnl_md_of(const dm_tensor *t, dnnl_memory_desc_t *md);
/* Whether md is the plain row-major layout of its dims. */
DM_HIDDEN int dm_dnnl_md_is_plain(const dnnl_memory_desc_t *md);

/* The layout ops recorded in storages the engine writes (desc: a dnnl_memory_desc_t). */
extern DM_HIDDEN const dm_layout_ops dm_dnnl_layout;

/* A scratch buffer an op state keeps for reordered inputs (grown, never shrunk). */
typedef struct dm_dnnl_buf {
  void *data;
  size_t cap;
} dm_dnnl_buf;
DM_HIDDEN void dm_dnnl_buf_free(dm_dnnl_buf *b);
/* Grows b to at least n bytes (64-byte aligned; the old contents are not kept). */
DM_HIDDEN dm_status dm_dnnl_buf_reserve(dm_dnnl_buf *b, size_t n);

/* Whether layout md has padding (a blocked dim rounded up: nChw16c of 24 channels), and
 * zeros written to that padding of the buffer at data, as oneDNN's primitives expect of
 * their inputs: for kernels that run their own loop over a whole buffer, padding
 * included, with a function that does not map 0 to 0 (Sigmoid, Div). */
DM_HIDDEN int dm_dnnl_md_is_padded(const dnnl_memory_desc_t *md);
DM_HIDDEN dm_status dm_dnnl_zero_pad(const dnnl_memory_desc_t *md, void *data);
/* Copies `src` (layout src_md, at src) to dst (layout dst_md) with a reorder primitive. */
DM_HIDDEN dm_status dm_dnnl_reorder(const dnnl_memory_desc_t *src_md, const void *src,
                                    const dnnl_memory_desc_t *dst_md, void *dst);

/* t's data in layout `want`, for reading: t's own buffer when it is already laid out so,
 * else a reorder into `scratch`. */
DM_HIDDEN dm_status dm_dnnl_input(const dm_tensor *t, const dnnl_memory_desc_t *want,
                                  dm_dnnl_buf *scratch, void **data);
/* Puts t's data in layout `want` in place (new storage of t's own, recorded layout), so
 * that later runs read it as it is: weights. A no-op when it already is. */
DM_HIDDEN dm_status dm_dnnl_relayout(dm_tensor *t, const dnnl_memory_desc_t *want);
/* Resizes t to dtype and dims with storage in layout `md` (recorded unless plain) and
 * returns its buffer, for a primitive to write. */
DM_HIDDEN dm_status dm_dnnl_output(dm_tensor *t, dm_dtype dtype, int ndim, const int64_t *dims,
                                   const dnnl_memory_desc_t *md, void **data);

/* Runs `prim` on the thread's stream with arguments (arg id, description, buffer) and
 * waits for it. */
typedef struct dm_dnnl_arg {
  int arg; /* DNNL_ARG_SRC, ... */
  const dnnl_memory_desc_t *md;
  void *data;
} dm_dnnl_arg;
DM_HIDDEN dm_status dm_dnnl_execute(dnnl_primitive_t prim, int n, const dm_dnnl_arg *args);

/* The description a primitive descriptor chose for `what` (dnnl_query_src_md, ...). */
DM_HIDDEN dm_status dm_dnnl_query_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index,
                                     dnnl_memory_desc_t *out);
/* A primitive from its descriptor (which it keeps; the caller destroys both). */
DM_HIDDEN dm_status dm_dnnl_make(const void *op_desc, const_dnnl_primitive_attr_t attr,
                                 const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd,
                                 dnnl_primitive_t *prim);

/* A primitive an op state keeps, with the input descriptions it was made for: rebuilt
 * when they change (a new batch size, another layout upstream). */
#define DM_DNNL_MAX_KEY 4
typedef struct dm_dnnl_prim {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t prim;
  dnnl_memory_desc_t key[DM_DNNL_MAX_KEY];
  int n_key;
} dm_dnnl_prim;
/* Whether p was made for these n descriptions. */
DM_HIDDEN int dm_dnnl_prim_matches(const dm_dnnl_prim *p, int n, const dnnl_memory_desc_t *key);
/* Destroys p's primitive and descriptor (a zeroed p is fine). */
DM_HIDDEN void dm_dnnl_prim_reset(dm_dnnl_prim *p);
/* Replaces p's primitive by one made from op_desc (see dm_dnnl_make), for key. */
DM_HIDDEN dm_status dm_dnnl_prim_make(dm_dnnl_prim *p, const void *op_desc,
                                      const_dnnl_primitive_attr_t attr,
                                      const_dnnl_primitive_desc_t hint, int n,
                                      const dnnl_memory_desc_t *key);

/* The primitive kinds the engine builds, each tried once per dtype on this CPU
 * (caps.c): which exist depends on the ISA (no BFLOAT16 ones below AVX-512 in oneDNN
 * 2.6). DM_DNNL_KIND(k) is k's bit in a supports hook's `kinds`. */
typedef enum dm_dnnl_kind {
  DM_DNNL_CONV,
  DM_DNNL_CONV_BWD_DATA,
  DM_DNNL_CONV_BWD_WEIGHTS,
  DM_DNNL_IP,
  DM_DNNL_IP_BWD_DATA,
  DM_DNNL_IP_BWD_WEIGHTS,
  DM_DNNL_POOL,
  DM_DNNL_POOL_BWD,
  DM_DNNL_BN,
  DM_DNNL_BN_BWD,
  DM_DNNL_CONCAT,
  DM_DNNL_MATMUL,
  DM_DNNL_LNORM,
  DM_DNNL_LNORM_BWD,
  DM_DNNL_N_KINDS
} dm_dnnl_kind;
#define DM_DNNL_KIND(k) (1u << (k))
/* Runs the trials (once per process; every query below runs them if need be). */
DM_HIDDEN void dm_dnnl_probe(void);
/* Whether oneDNN builds `kind` for `dtype` on this CPU. */
DM_HIDDEN int dm_dnnl_can(dm_dnnl_kind kind, dm_dtype dtype);
/* Whether it builds every kind for `dtype` (for `info`). */
DM_HIDDEN int dm_dnnl_can_all(dm_dtype dtype);
DM_HIDDEN const char *dm_dnnl_kind_name(dm_dnnl_kind kind);
/* oneDNN's effective ISA ("avx2", "avx512_core_bf16"), as ONEDNN_MAX_CPU_ISA caps it. */
DM_HIDDEN const char *dm_dnnl_isa_name(void);

/* For supports hooks: whether input `input` is FLOAT or BFLOAT16 and oneDNN builds every
 * primitive kind in `kinds` (DM_DNNL_KIND bits; 0 for kernels that run their own loops)
 * for its dtype on this CPU, or its dtype is not known yet (the executor asks again once
 * it is); otherwise refuses, with the reason. */
DM_HIDDEN int dm_dnnl_dtype_ok(const dm_op_ctx *ctx, int input, unsigned kinds);
/* For supports hooks: the op's order argument is NCHW (the engine's convolutions and
 * pools run NCHW only); otherwise refuses, with the reason. */
DM_HIDDEN int dm_dnnl_nchw_order(const dm_op_ctx *ctx);

/* The engine's kernel tables (operators/dnnl/<family>.c), registered by
 * dm_register_dnnl_ops when oneDNN can run on this CPU. */
DM_HIDDEN dm_status dm_register_dnnl_ops(void);

#endif
