/* demitasse.h: the one public header for embedding Demitasse in a host application.
 *
 * A workspace maps blob names to tensors and owns the nets created in it. Nets are
 * Caffe2 NetDef files (binary .pb or text .pbtxt). Every fallible call returns a
 * dm_status; on failure dm_last_error() gives a message with context (file:line:col
 * for parse errors, op index/type/name and blob for run errors). The message is kept
 * per thread, so two workspaces can live in two threads without sharing anything but
 * the (read-mostly, lock-protected) operator registry.
 *
 * Threads: a workspace is single-threaded. It takes one call at a time, from any
 * thread: a call on a workspace (or on a net of it) made while another thread is inside
 * one fails at once with DM_ERR_BUSY, touching nothing; it never waits. That covers
 * every call here that takes a workspace or a net, except dm_workspace_set_tensor_limit,
 * dm_workspace_set_memory_limit and dm_workspace_memory_usage (atomic: safe at any
 * time) and dm_net_name; dm_workspace_destroy of a busy workspace frees nothing and sets
 * the message. Calls answering a value (dm_workspace_has_blob, _blob_count, _blob_name)
 * answer 0 or NULL when busy, with DM_ERR_BUSY's message. A borrowed tensor or name is
 * the caller's to guard: another thread's run may rewrite it. For parallel work give
 * each thread its own workspace (they share nothing), or serialise the calls; retrying
 * after DM_ERR_BUSY is allowed but is a spin, not a queue.
 *
 * Example (error handling shortened; every call returns a dm_status):
 *
 *     #include <demitasse.h>
 *
 *     dm_workspace *ws = NULL;
 *     if (dm_workspace_create(&ws) != DM_OK) { fprintf(stderr, "%s\n", dm_last_error()); ... }
 *     dm_workspace_run_net_file(ws, "init_net.pbtxt");          // fills the weights
 *     dm_net *net = NULL;
 *     dm_workspace_create_net_file(ws, "predict_net.pb", &net);  // resolved once
 *     int64_t dims[2] = {1, 784};
 *     dm_workspace_feed(ws, "data", DM_FLOAT, 2, dims, pixels);  // copies pixels
 *     if (dm_net_run(net) != DM_OK) fprintf(stderr, "%s\n", dm_last_error());
 *     const dm_tensor *prob = NULL;
 *     dm_workspace_fetch(ws, "softmax", &prob);                  // borrowed, see below
 *     const float *p = dm_tensor_data(prob);                     // dm_tensor_numel(prob) floats
 *     dm_workspace_destroy(ws);                                  // also destroys net
 *
 * Ownership: a pointer returned through an out-parameter of dm_workspace_fetch or
 * dm_workspace_create_net is borrowed from the workspace and valid until the workspace
 * is destroyed (a tensor: until the blob is next written). Everything returned by a
 * *_create call is released by the matching *_destroy.
 *
 * Misuse: a NULL pointer argument (other than those documented as optional) is refused
 * with DM_ERR_INVALID and a message naming the function and the argument; calls that
 * return a value instead answer a neutral one (0, NULL, "", DM_UNDEFINED) and set the
 * message. Blob names and paths must be non-empty. A failed feed or net creation leaves the
 * workspace as it was: the blob fed is unchanged (or still absent), and the blobs a
 * failed net would have created are removed again.
 */
#ifndef DEMITASSE_H
#define DEMITASSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DM_VERSION_MAJOR 0
#define DM_VERSION_MINOR 1
#define DM_VERSION_PATCH 0

#if defined(__GNUC__)
#define DM_API __attribute__((visibility("default")))
#define DM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DM_API
#define DM_PRINTF(f, a)
#endif

/* Status codes. DM_OK is 0; every other value is an error with a message. */
typedef enum dm_status {
  DM_OK = 0,
  DM_ERR_INVALID = 1,     /* a bad argument or a bad net/op definition */
  DM_ERR_PARSE = 2,       /* a malformed file (.pb, .pbtxt, .npy) */
  DM_ERR_IO = 3,          /* a file could not be read or written */
  DM_ERR_NOT_FOUND = 4,   /* unknown op type, missing blob, missing symbol */
  DM_ERR_SHAPE = 5,       /* inconsistent shapes */
  DM_ERR_TYPE = 6,        /* wrong dtype or argument type */
  DM_ERR_NOMEM = 7,       /* out of memory */
  DM_ERR_LIMIT = 8,       /* a size overflowed or exceeded a configured limit */
  DM_ERR_UNSUPPORTED = 9, /* valid but not implemented here (e.g. no GPU) */
  DM_ERR_VERSION = 10,    /* plugin API version mismatch */
  DM_ERR_EXISTS = 11,     /* a name that is already registered */
  DM_ERR_DEVICE = 12,     /* a device (CUDA) call failed */
  DM_ERR_NONFINITE = 13,  /* a reduced-precision (FP16/BF16) net's output held inf or nan:
                           * its values overflowed that dtype; the message names the op */
  DM_ERR_BUSY = 14        /* the workspace is inside a call from another thread */
} dm_status;

/* Data types, numbered as Caffe2's TensorProto.DataType; BFLOAT16 is ours. */
typedef enum dm_dtype {
  DM_UNDEFINED = 0,
  DM_FLOAT = 1,
  DM_INT32 = 2,
  DM_BYTE = 3, /* Caffe2's deprecated name for UINT8; normalised to DM_UINT8 on load */
  DM_STRING = 4,
  DM_BOOL = 5,
  DM_UINT8 = 6,
  DM_INT8 = 7,
  DM_UINT16 = 8,
  DM_INT16 = 9,
  DM_INT64 = 10,
  DM_FLOAT16 = 12,
  DM_DOUBLE = 13,
  DM_BFLOAT16 = 20
} dm_dtype;

#define DM_MAX_DIMS 8

/* Propagates a failed status. */
#define DM_TRY(expr)                 \
  do {                               \
    dm_status dm_try_s_ = (expr);    \
    if (dm_try_s_ != DM_OK)          \
      return dm_try_s_;              \
  } while (0)

typedef struct dm_workspace dm_workspace;
typedef struct dm_net dm_net;
typedef struct dm_tensor dm_tensor;

/* Library ------------------------------------------------------------------------ */

/* "0.1.0". */
DM_API const char *dm_version_string(void);
/* The message of the last failed call on this thread ("" if none). */
DM_API const char *dm_last_error(void);
/* Name of a status code, e.g. "DM_ERR_PARSE". */
DM_API const char *dm_status_name(dm_status s);
/* Name of a dtype, e.g. "FLOAT16"; "?" for an unknown number. */
DM_API const char *dm_dtype_name(dm_dtype t);
/* Bytes per element (0 for STRING and UNDEFINED). */
DM_API size_t dm_dtype_size(dm_dtype t);
/* CPU threads --------------------------------------------------------------------- */

#define DM_MAX_THREADS 4096
/* Sets the threads the CPU kernels use, for OpenMP, OpenBLAS and oneDNN at once. 1..
 * DM_MAX_THREADS, else DM_ERR_INVALID and nothing changes. OpenMP keeps the count per
 * calling thread (its nthreads ICV): call it from the thread that runs the nets; a
 * build without OpenMP runs one thread whatever the count. Without a call, the
 * libraries' own defaults apply (usually every core of the machine). */
DM_API dm_status dm_set_num_threads(int n);
/* The threads the next run from this thread would use (OpenMP's max; 1 without it). */
DM_API int dm_get_num_threads(void);
/* The cores this process may run on (its affinity mask), the CLI's default --threads. */
DM_API int dm_num_threads_default(void);

/* Registers the built-in operators. Called by dm_workspace_create; safe to call from
 * several threads and more than once. */
DM_API dm_status dm_init(void);

/* Loads an operator plugin (a shared library exporting dm_plugin_entry, see
 * demitasse_plugin.h). Refused with DM_ERR_VERSION on an API mismatch, DM_ERR_NOT_FOUND
 * on a missing entry symbol, DM_ERR_EXISTS if it registers an op that exists. The
 * library stays loaded for the life of the process. */
DM_API dm_status dm_plugin_load(const char *path);

/* Workspace ---------------------------------------------------------------------- */

DM_API dm_status dm_workspace_create(dm_workspace **out);
DM_API void dm_workspace_destroy(dm_workspace *ws); /* NULL is fine */
/* Refuse any single tensor larger than this many bytes (default 8 GiB). */
DM_API void dm_workspace_set_tensor_limit(dm_workspace *ws, uint64_t max_bytes);
/* Caps the host memory of all the workspace's tensors together at `bytes` (0: no cap,
 * the default). An allocation that would pass it fails with DM_ERR_LIMIT, before any
 * memory is taken: the op that allocates fails with a message naming the op (index,
 * type, name), the blob, the bytes asked for, the bytes in use and the limit; a feed
 * fails the same way and leaves the blob as it was. The workspace stays usable, and
 * freeing blobs (a net's Free ops, a destroyed net's state, a removed blob) makes room.
 * Counted: every host buffer its blobs, their views and the ops' temporary tensors hold,
 * once however many blobs share it, rounded up to 64 bytes, for as long as it is
 * allocated. Not counted: GPU memory (a device allocation that does not fit fails on
 * its own, with DM_ERR_DEVICE), a STRING tensor's strings (its pointer array is), and
 * memory an op keeps outside tensors. Setting a cap below what is held frees nothing;
 * allocations fail until enough is freed. DM_ERR_INVALID for a NULL ws. */
DM_API dm_status dm_workspace_set_memory_limit(dm_workspace *ws, size_t bytes);
/* The engine the workspace's nets run ops on that name no engine of their own (an
 * OperatorDef's `engine` field), as a comma-separated preference list: "REFERENCE" for
 * the reference kernels (the FP16 path faithful to tensor cores, and the oracle the
 * engines are tested against), "DNNL" for oneDNN's, NULL or "" for the default (DNNL on
 * the CPU where the library was built with oneDNN, CUDNN on GPUs). An engine without a
 * kernel for an op falls back to the default, then to the reference kernel. Applies to
 * nets created afterwards. DM_ERR_INVALID for a NULL ws or a name over 63 characters. */
DM_API dm_status dm_workspace_set_engine(dm_workspace *ws, const char *engine);
/* Whether the library was built with the oneDNN engine (and it can run on this CPU). */
DM_API int dm_have_dnnl(void);
/* The host memory the workspace's tensors hold now, as the cap counts it, and the most
 * held at once since the workspace was created (either pointer may be NULL). */
DM_API dm_status dm_workspace_memory_usage(const dm_workspace *ws, size_t *in_use,
                                           size_t *peak);

/* Loads a NetDef (.pb binary or .pbtxt text, chosen by content), instantiates it and runs
 * it once (an init net). */
DM_API dm_status dm_workspace_run_net_file(dm_workspace *ws, const char *path);
/* Loads and instantiates a net; the workspace owns *out. */
DM_API dm_status dm_workspace_create_net_file(dm_workspace *ws, const char *path, dm_net **out);
/* The same from bytes in memory (binary protobuf, or text if `text` is nonzero). */
DM_API dm_status dm_workspace_create_net_bytes(dm_workspace *ws, const void *data, size_t size,
                                               int text, dm_net **out);
/* Runs every op of the net once, in order. */
DM_API dm_status dm_net_run(dm_net *net);
DM_API const char *dm_net_name(const dm_net *net); /* "" for NULL */
/* Frees a net of its workspace before the workspace goes (a net run once, as Caffe2's
 * RunNetOnce does, or one replaced by another of the same name). The blobs it created
 * stay. NULL is fine; DM_ERR_BUSY as any call on its workspace. */
DM_API dm_status dm_net_destroy(dm_net *net);
/* Device graphs (on by default): a net's longest run of ops on one GPU is recorded as a
 * CUDA graph once its blobs' shapes and addresses repeat, and replayed with one launch
 * per run; a run with other shapes runs op by op, or is recorded anew. Off (on = 0),
 * every op runs one by one and the graphs recorded so far are freed. No effect on a net
 * without GPU ops. */
DM_API dm_status dm_net_set_device_graphs(dm_net *net, int on);

/* Copies `data` (numel * dm_dtype_size(dtype) bytes; for STRING numel char*, NULL read
 * as "") into blob `name`, creating it. Everything is checked before the blob is
 * touched: on failure it is exactly as before, or still absent. */
DM_API dm_status dm_workspace_feed(dm_workspace *ws, const char *name, dm_dtype dtype, int ndim,
                                   const int64_t *dims, const void *data);
/* Borrows the tensor in blob `name` (DM_ERR_NOT_FOUND if there is none). */
DM_API dm_status dm_workspace_fetch(dm_workspace *ws, const char *name, const dm_tensor **out);
/* A tensor of the caller's that shares blob `name`'s data without a copy (a copy only
 * where the data is in an engine's blocked layout), released by dm_tensor_destroy. It
 * outlives the blob and the workspace, and keeps the values it was fetched with: a later
 * run or feed that writes the blob gives the blob new storage rather than writing into
 * the shared one. Read-only: writing through dm_tensor_data's pointer is not allowed.
 * DM_ERR_NOT_FOUND if there is no blob `name`; an empty blob gives an empty tensor. */
DM_API dm_status dm_workspace_fetch_shared(dm_workspace *ws, const char *name, dm_tensor **out);
DM_API void dm_tensor_destroy(dm_tensor *t); /* NULL is fine */
DM_API int dm_workspace_has_blob(const dm_workspace *ws, const char *name); /* 0 for NULL */
/* Number of blobs, and the i-th blob name in sorted order (borrowed); 0 and NULL for a
 * NULL workspace. */
DM_API size_t dm_workspace_blob_count(const dm_workspace *ws);
DM_API const char *dm_workspace_blob_name(const dm_workspace *ws, size_t i);

/* Training ----------------------------------------------------------------------- */

/* A training net from a forward net with its loss, built by the same passes as
 * `demitasse train` (the gradient and optimizer passes unless the net has gradient ops
 * already, mixed precision, device placement, the memory pass), so the same options
 * give the same net byte for byte (`demitasse rewrite` prints it). Options grow at the
 * end: struct_size says which fields the caller knows, the rest take their defaults.
 *
 *     dm_train_options o;
 *     dm_train_options_init(&o);
 *     o.precision = DM_PRECISION_FP16;                    // dynamic loss scaling
 *     dm_workspace_run_net_file(ws, "init_net.pbtxt");   // the weights, first
 *     dm_net *step = NULL;
 *     dm_workspace_create_train_net(ws, "train_net.pbtxt", &o, &step);
 *     for (int i = 0; i < 1000; i++) dm_net_run(step);   // one training step each
 */
typedef enum dm_optimizer {
  DM_OPTIMIZER_SGD = 0,      /* WeightedSum */
  DM_OPTIMIZER_MOMENTUM = 1, /* MomentumSGDUpdate (the default, as `demitasse train`) */
  DM_OPTIMIZER_ADAM = 2,     /* Adam */
  DM_OPTIMIZER_ADAMW = 3     /* AdamW: Adam with decoupled weight decay (torch.optim.AdamW) */
} dm_optimizer;

typedef enum dm_precision {
  DM_PRECISION_FP32 = 0,
  DM_PRECISION_FP16 = 1, /* FP16 compute, FP32 master weights, loss scaling */
  DM_PRECISION_BF16 = 2  /* BFLOAT16 compute, FP32 master weights */
} dm_precision;

typedef enum dm_loss_scale_mode {
  DM_LOSS_SCALE_AUTO = 0,    /* dynamic with FP16, none with BF16 */
  DM_LOSS_SCALE_NONE = 1,
  DM_LOSS_SCALE_STATIC = 2,  /* init_scale throughout */
  DM_LOSS_SCALE_DYNAMIC = 3  /* halve on overflow (the step is skipped), double after
                                growth_interval clean steps */
} dm_loss_scale_mode;

/* Blobs the training net keeps for the caller to fetch after a step. */
#define DM_TRAIN_LOSS_SCALE_BLOB "loss_scale"           /* FLOAT [1], the current S */
#define DM_TRAIN_SKIPPED_BLOB "loss_scale_skipped"      /* INT64 [1], steps skipped */
#define DM_TRAIN_ITERATION_BLOB "optimizer_iteration"   /* INT64 [1], steps applied */

/* A three-way option: the library's choice, or forced off or on. */
typedef enum dm_switch { DM_SWITCH_AUTO = 0, DM_SWITCH_OFF = 1, DM_SWITCH_ON = 2 } dm_switch;

/* The activations' layout in a training net (see dm_train_options.layout). */
typedef enum dm_train_layout {
  DM_TRAIN_LAYOUT_AUTO = 0,
  DM_TRAIN_LAYOUT_NCHW = 1, /* as the net is written */
  DM_TRAIN_LAYOUT_NHWC = 2
} dm_train_layout;

typedef struct dm_train_options {
  size_t struct_size;            /* sizeof(dm_train_options), set by dm_train_options_init */
  const char *const *losses;     /* the loss blobs (default {"loss"}); borrowed */
  size_t n_losses;
  const char *const *data_blobs; /* net inputs that are not parameters (default {"data",
                                    "label"}): not trained, homed on the host */
  size_t n_data_blobs;
  const char *db;                /* if set, the `db` argument of every op that reads a DB */
  /* The optimizer, as `demitasse train`'s flags (--optimizer, --lr, ...). */
  dm_optimizer optimizer;        /* default MOMENTUM */
  double lr;                     /* > 0, default 0.01 */
  double momentum;               /* default 0.9 */
  int nesterov;
  double beta1, beta2, epsilon;  /* Adam: 0.9, 0.999, 1e-5 */
  double weight_decay;           /* L2 on params named *_w (all with decay_all); 0: none.
                                    AdamW: its decoupled decay of the same params */
  int decay_all;
  const char *lr_policy;         /* "fixed" (default, NULL), "step", "exp", "inv", "poly" */
  int64_t stepsize;              /* step */
  double gamma;                  /* step, exp, inv */
  double power;                  /* inv, poly */
  int64_t max_iter;              /* poly */
  int64_t warmup_iter;           /* linear warmup over this many iterations (0: none) */
  double warmup_start;           /* from warmup_start * lr */
  /* Precision. */
  dm_precision precision;        /* default FP32 */
  dm_loss_scale_mode loss_scale; /* default AUTO */
  double init_scale;             /* the initial (or static) scale, default 65536 */
  int64_t growth_interval;       /* default 2000 */
  const char *const *fp32_ops;   /* op types kept in FP32 (--fp32-ops); borrowed */
  size_t n_fp32_ops;
  const char *const *fp16_ops;   /* op types forced to the reduced precision (--fp16-ops) */
  size_t n_fp16_ops;
  /* Device. */
  const char *device;            /* "cpu" (default, NULL), "cuda" or "cuda:N" */
  const char *const *cpu_ops;    /* with cuda: op types kept on the CPU (--cpu-ops) */
  size_t n_cpu_ops;
  /* The memory pass: Free after last use (default on). Never freed: the state (what
   * exists in the workspace, what the passes' init additions create), the losses, each
   * DB input's outputs, and `keep` (default {"accuracy", "data"}). */
  int memory;
  const char *const *keep;
  size_t n_keep;
  /* Data parallelism (after dm_dist_init): the weight gradients are averaged over the
   * ranks by Allreduce ops after the backward ops, and each DB input reads its rank's
   * share of every global batch (batch_size records per rank). */
  int data_parallel;
  int64_t dp_bucket_bytes;       /* bytes per all-reduce call (default 25 MiB) */
  int dp_fp32;                   /* 1: reduce FP16 gradients in FP32 (default: in FP16) */
  /* Appended later (ABI growth: a program built with an older header gets the
   * defaults). The step's speed options, as `demitasse train` has them. */
  int fuse_train;                /* nonzero: SpatialBN (+ Add) + Relu, Conv + Relu and FC +
                                    Relu fused, forward and backward (--fuse-train; cuDNN's
                                    fused paths on a GPU); default 0 */
  dm_switch multi_tensor;        /* one optimizer op for all parameters (--multi-tensor):
                                    DM_SWITCH_AUTO (default) is on with a GPU device */
  dm_train_layout layout;        /* DM_TRAIN_LAYOUT_AUTO (default): NHWC for a net on a
                                    GPU in FP16/BF16, else as written; NCHW: as written;
                                    NHWC: the layout pass (--layout) */
  double clip_norm;              /* > 0: the gradients scaled together so that their global
                                    L2 norm is at most clip_norm, before the updates (and
                                    after the loss scale is divided out: --clip-norm);
                                    default 0, none */
} dm_train_options;

/* Fills *o with the defaults above, as `demitasse train` has them, and struct_size with
 * the caller's sizeof(dm_train_options): a macro, so that the size is the one the
 * caller's compiler saw. Options grow only at the end; a library older than the
 * caller's header refuses a struct that sets fields it does not know. */
#define dm_train_options_init(o) dm_train_options_init_sized((o), sizeof *(o))
DM_API dm_status dm_train_options_init_sized(dm_train_options *o, size_t size);
/* Reads the forward net at `net_path` (.pb or .pbtxt), builds the training net with
 * `o` (NULL: the defaults), runs the state it needs (optimizer momenta and iteration,
 * loss-scale state) in `ws`, and instantiates the net: each dm_net_run(*out) is one
 * training step. Run the model's init net in `ws` first: the weights' shapes size the
 * state, and what exists in `ws` is kept as state. With device "cuda" the state already
 * in `ws` is copied to the GPU where the net reads it there (a GPU is needed:
 * DM_ERR_UNSUPPORTED or DM_ERR_DEVICE with the reason otherwise). The workspace owns
 * *out. On failure the blobs (state) and nets this call created are removed again;
 * blobs that existed before are kept, but with "cuda" state already moved to the GPU
 * stays there, so after a failed GPU call start again from a fresh workspace. */
DM_API dm_status dm_workspace_create_train_net(dm_workspace *ws, const char *net_path,
                                               const dm_train_options *o, dm_net **out);
/* The same passes without a workspace: writes the training net to `out_net_path` and,
 * if `out_init_path` is not NULL, the init-net addition (the state fills, to run after
 * the model's init net; an empty net if the passes made none) to `out_init_path`, text
 * or binary by extension (.pbtxt text). Each file is replaced atomically. Needs no GPU. */
DM_API dm_status dm_rewrite_train_net(const char *net_path, const dm_train_options *o,
                                      const char *out_net_path, const char *out_init_path);

/* Appends to a forward NetDef (binary protobuf, `size` bytes) the backward ops of the
 * gradient pass that `demitasse train` runs first (the gradient of X is X_grad; the
 * gradient of each loss is seeded with 1 by ConstantFill into <loss>_autogen_grad), and
 * writes the result, binary, to a malloc'd buffer *out of *out_size bytes that the caller
 * frees with dm_free. `losses`: n_losses blob names (at least one). */
DM_API dm_status dm_netdef_add_gradient(const void *net, size_t size, const char *const *losses,
                                        size_t n_losses, void **out, size_t *out_size);
/* Frees a buffer the library returned (NULL is fine). */
DM_API void dm_free(void *p);

/* Data parallelism ---------------------------------------------------------------- */

/* Several processes train one model, each on its share of every batch, started by
 * `mpirun -np N host_app ...` (OpenMPI; across hosts too). Each process is a rank; the
 * training net's weight gradients are averaged over the ranks by Allreduce ops (set
 * dm_train_options.data_parallel), so every rank applies the same update.
 *
 *     int rank, size;
 *     dm_dist_init(&rank, &size);                         // MPI, once per process
 *     dm_workspace_run_net_file(ws, "init_net.pbtxt");
 *     dm_workspace_broadcast(ws, NULL, 0, 0);             // rank 0's weights everywhere
 *     o.data_parallel = 1;                                // and o.db: rank r reads its share
 *     dm_workspace_create_train_net(ws, "train_net.pbtxt", &o, &step);
 *     ... dm_net_run(step) ...
 *     dm_dist_finalize();
 *
 * No call waits forever: a collective that the other ranks do not join within the
 * timeout (dm_dist_set_timeout, default 300 s) fails with DM_ERR_IO, naming it; end the
 * job then with dm_dist_abort. Built without MPI, these return DM_ERR_UNSUPPORTED. */
DM_API dm_status dm_dist_init(int *rank, int *size);
DM_API dm_status dm_dist_finalize(void);
DM_API dm_status dm_dist_set_timeout(double seconds);
/* This process's rank (0 without dm_dist_init) and the number of ranks (1 without). */
DM_API int dm_dist_rank(void);
DM_API int dm_dist_size(void);
/* Every rank gets rank `root`'s blobs `names` (NULL: every blob that holds data on root,
 * which every rank must hold too); a blob missing, or of another dtype or shape, on some rank fails on
 * every rank, naming it. */
DM_API dm_status dm_workspace_broadcast(dm_workspace *ws, const char *const *names, size_t n,
                                        int root);
/* values[i] becomes the mean of values[i] over the ranks. */
DM_API dm_status dm_dist_mean(double *values, size_t n);
/* Ends every rank of the job (MPI_Abort) with exit status `code`; returns without MPI. */
DM_API void dm_dist_abort(int code);

/* Inference in reduced precision ------------------------------------------------ */

/* An inference net painted for FP16 or BF16 by the mixed-precision pass (the training
 * pass's painter, in its inference mode): Conv and FC compute in the reduced precision,
 * softmax and losses in FP32, the rest follows its inputs; SpatialBN's scale, bias and
 * statistics stay FP32; one cast per precision boundary. The weights' reduced copies
 * (w_fp16 / w_bf16) are cast once, when the net is created, not on every run, and the
 * FP32 weights stay in the workspace beside them. The net's external outputs and
 * `outputs` hold FLOAT after each run; its other blobs may hold FLOAT16 / BFLOAT16.
 * Options grow at the end, as dm_train_options's do.
 *
 *     dm_workspace_run_net_file(ws, "init_net.pb");      // the weights, first
 *     dm_infer_options o;
 *     dm_infer_options_init(&o);
 *     o.precision = DM_PRECISION_FP16;
 *     dm_net *net = NULL;
 *     dm_workspace_create_infer_net(ws, "predict_net.pb", &o, &net);
 *     dm_workspace_feed(ws, "data", DM_FLOAT, 4, dims, x);   // FP32 in
 *     dm_net_run(net);                                      // "prob" FP32 out
 */
typedef struct dm_infer_options {
  size_t struct_size;            /* sizeof(dm_infer_options), set by dm_infer_options_init */
  dm_precision precision;        /* default FP32 (the net as it is) */
  const char *const *data_blobs; /* blobs the caller feeds (default {"data"}): not weights,
                                    even when they exist in the workspace already; borrowed */
  size_t n_data_blobs;
  const char *const *outputs;    /* blobs the caller fetches besides the external outputs:
                                    FLOAT after each run (default none); borrowed */
  size_t n_outputs;
  const char *device;            /* "cpu" (default, NULL), "cuda" or "cuda:N" */
  const char *const *cpu_ops;    /* with cuda: op types kept on the CPU; borrowed */
  size_t n_cpu_ops;
  /* Appended later (ABI growth: a program built with an older header gets 0). */
  int fuse;                      /* nonzero: fold each test-mode SpatialBN into the Conv
                                    before it (the fold runs once, here); default 0, so
                                    the net and its blobs stay as the file has them (the
                                    Conv's output before the BN is gone when fused, unless
                                    it is in `outputs`). `demitasse run` fuses by default.
                                    On the CPU also Conv + Sum/Add + Relu into ConvFusion
                                    and FC + Relu into FCFusion (blobs between them are
                                    gone likewise). */
  dm_train_layout layout;        /* NHWC: the layout pass makes an NCHW net NHWC (the
                                    weights re-laid once, here; `outputs` and the
                                    external outputs stay NCHW); AUTO (default) and
                                    NCHW: as written (`demitasse run --layout`) */
} dm_infer_options;

/* Fills *o with the defaults and struct_size with the caller's sizeof (a macro, as
 * dm_train_options_init). */
#define dm_infer_options_init(o) dm_infer_options_init_sized((o), sizeof *(o))
DM_API dm_status dm_infer_options_init_sized(dm_infer_options *o, size_t size);
/* Reads the net at `net_path` (.pb or .pbtxt), paints it for o->precision (NULL options:
 * FP32, the net unchanged), places it with device "cuda", casts the weights it reads in
 * the reduced precision once (the blobs in `ws` now, less data_blobs, are the weights:
 * run the init net first), and instantiates it. The workspace owns *out. On failure the
 * blobs and nets this call created are removed again. */
DM_API dm_status dm_workspace_create_infer_net(dm_workspace *ws, const char *net_path,
                                               const dm_infer_options *o, dm_net **out);

/* Tensors (read side; see demitasse_plugin.h for the write side) ----------------- */
/* A NULL tensor (e.g. from a failed fetch) reads as empty: DM_UNDEFINED, 0 dimensions,
 * NULL dims, 0 elements, 0 bytes, NULL data. */

DM_API dm_dtype dm_tensor_dtype(const dm_tensor *t);
DM_API int dm_tensor_ndim(const dm_tensor *t);
DM_API const int64_t *dm_tensor_dims(const dm_tensor *t);
DM_API int64_t dm_tensor_numel(const dm_tensor *t);
DM_API size_t dm_tensor_nbytes(const dm_tensor *t);
/* Host data of a CPU tensor; for STRING tensors an array of NUL-terminated char*. */
DM_API const void *dm_tensor_data(const dm_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* DEMITASSE_H */
