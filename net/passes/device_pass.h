/* device_pass.h: the device placement pass, NetDef -> NetDef (internal).
 *
 * Puts every op that can run on the GPU there and inserts the copies a blob needs to
 * cross between host and GPU, as ordinary Caffe2 ops a user can read in `rewrite`:
 *   - an op goes to (CUDA, device_id) when the executor would find a CUDA kernel for it:
 *     its own engines, then "CUDNN", then the plain one, each kernel's supports(ctx)
 *     asked of the op (its arguments and inputs; input dtypes are not known yet), so
 *     the kernel, not the pass, says which forms it runs (ConstantFill's input_as_shape,
 *     a plugin's unimplemented argument). It stays on the CPU when its own
 *     device_option names a device_type (pinned: it stays where the file put it), its
 *     type is on the force_cpu list, its schema marks a present input as read on the
 *     host (host_inputs: Reshape's shape, Split's sizes), or no CUDA kernel takes it;
 *     the report says which, with a refusing kernel's reason (dm_op_refuse). An op the
 *     executor could not bind at all (arity, argument types) fails the pass;
 *   - each blob has a home: the device of the first op that touches it (the first
 *     writer, or for state read before written - parameters, momenta, the iteration,
 *     the loss scale - the first reader). host_blobs (what the caller feeds from the host)
 *     are homed on the CPU whatever touches them;
 *   - an op on device D reading a blob X homed elsewhere reads a copy,
 *     CopyCPUToGPU(X) -> X_cuda (X_cuda1 for GPU 1, ...) or CopyGPUToCPU(X) -> X_cpu,
 *     inserted before the first such reader and shared by later readers on D until X is
 *     written again (then a fresh copy): one copy per boundary, as the mixed-precision
 *     pass casts; a copy to the GPU then moves up to just after the last op it must
 *     follow (the one writing X, or an earlier copy), so a step's uploads come first;
 *   - an op on D writing a blob X homed elsewhere (a CPU-only update of GPU state, in
 *     place) writes the D-side name and is followed by a copy back to X's home, so X
 *     always holds the current value under its own name (checkpoints, messages);
 *   - like Caffe2, both copy ops run on the GPU side (their device_option is the GPU's;
 *     their kernels are cross_device). A blob that would cross between two different
 *     GPUs (ops pinned to another GPU) is refused, naming the op and the blob: there is
 *     no copy op for that.
 * Unpinned ops placed on the GPU get device_type 1 and device_id; an op's other
 * device_option fields (random_seed) are kept. When the net's own device_option names a
 * GPU, ops kept on the CPU get an explicit CPU device_option so they do not inherit it.
 *
 * The pass marks the net with an argument `device_placed` ("CUDA:N"); a marked net is
 * returned unchanged (idempotence; its summary still lists the GPU state). A net that
 * has been through the memory pass is refused (its Free ops would not free the copies).
 * Output is deterministic: names and order depend on the net and the options only.
 *
 * The init net: dm_device_place_init takes the GPU state the pass reported. An init op
 * whose outputs are all such blobs, whose inputs are all on the GPU too (none written
 * on the CPU by an earlier op of the same init net), and which has a CUDA kernel (and
 * is neither pinned nor forced) moves to the GPU. Any other init op
 * that writes such a blob (random fills, GivenTensorFill: CPU-only) stays on the CPU,
 * and one in-place copy CopyCPUToGPU(X) -> X per blob is appended at the end of the init
 * net, so the blob keeps its name and arrives on the GPU before the main net runs.
 */
#ifndef DM_NET_DEVICE_PASS_H
#define DM_NET_DEVICE_PASS_H

#include <stddef.h>

#include "core/status.h"
#include "demitasse_plugin.h"
#include "proto/caffe2.pb-c.h"

#define DM_DEVICE_MARK "device_placed"

typedef struct dm_device_opts {
  int device_id;                 /* the GPU: CUDA:device_id */
  const char *const *force_cpu;  /* op types kept on the CPU */
  size_t n_force_cpu;
  const char *const *host_blobs; /* blobs the caller feeds from the host: homed on the CPU */
  size_t n_host_blobs;
} dm_device_opts;

typedef struct dm_device_summary {
  size_t ops_total;       /* ops of the input net */
  size_t ops_device;      /* placed on (or pinned to) a GPU */
  size_t kept_no_kernel;  /* on the CPU: no CUDA kernel for the type, or none that supports
                             this form of it, or an input read on the host */
  size_t kept_pinned;     /* on the CPU: pinned there by the op's own device_option */
  size_t kept_forced;     /* on the CPU: the type is on force_cpu */
  size_t copies;          /* CopyCPUToGPU / CopyGPUToCPU inserted */
  int already;            /* the net was already placed: nothing done */
  char **gpu_state;       /* state blobs (read before written) homed on the GPU, in order */
  size_t n_gpu_state;
  char *report;           /* malloc'd text: each op kept on the CPU and why */
} dm_device_summary;

DM_HIDDEN void dm_device_opts_init(dm_device_opts *o);
/* Rewrites `net` in place; on failure `net` is unchanged. Free the summary with
 * dm_device_summary_free (also after a failure). */
DM_HIDDEN dm_status dm_device_pass(Caffe2__NetDef *net, const dm_device_opts *o,
                                   dm_device_summary *sum);
DM_HIDDEN void dm_device_summary_free(dm_device_summary *sum);
/* Places an init net for a main net whose GPU state is gpu_blobs[0..n) (see above);
 * `*copies` (may be NULL) gets the number of copies appended. Marked and idempotent like
 * the pass. */
DM_HIDDEN dm_status dm_device_place_init(Caffe2__NetDef *init, const dm_device_opts *o,
                                         const char *const *gpu_blobs, size_t n,
                                         size_t *copies);
/* Nonzero if `net` has been placed. */
DM_HIDDEN int dm_device_placed(const Caffe2__NetDef *net);

#endif
