/* memory_pass.h: the memory pass, NetDef -> NetDef (internal).
 *
 * Without it every blob a step writes keeps its memory until the workspace dies, so a
 * training step's peak is the sum of all its activations and gradients. The pass inserts
 * Free ops (Caffe2's Free: in place, empties the blobs) right after the last op that
 * touches each step-local blob, so the peak becomes the most that is live at once:
 * forward activations die as the backward pass consumes them, FP16 copies and weight
 * gradients die at their last reader. The result is an ordinary net that prints, diffs
 * and runs anywhere Caffe2's Free exists; the blob names are untouched (unlike blob
 * sharing by renaming, as Caffe2's memonger does), so messages still name real blobs.
 *
 * A blob is step-local, and freed, when its first access in op order is a write by an
 * op that does not also read it: every run then writes it afresh before anything reads
 * it, so nothing carries over between runs. Never freed: the net's external inputs and
 * outputs, blobs an op reads before writing (parameters, momenta, the iteration, the
 * loss scale: state), and the caller's `keep` list (what it reads after a run: the loss,
 * the accuracy; `demitasse train` also keeps everything its init nets created, which is
 * what checkpoints save).
 *
 * Run it last: it marks the net with an argument `memory_planned`, a marked net is
 * returned unchanged (idempotence), and the gradient and mixed-precision passes refuse a
 * marked net (ops they add after a Free would read freed blobs). A net with an op that
 * carries a nested net (control flow) is refused: its blobs are not visible here.
 */
#ifndef DM_NET_MEMORY_PASS_H
#define DM_NET_MEMORY_PASS_H

#include <stddef.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

#define DM_MEMORY_MARK "memory_planned"

typedef struct dm_memory_summary {
  size_t blobs_freed; /* blobs some Free op empties */
  size_t free_ops;    /* Free ops inserted (one after each op that is some blob's last use) */
  int already;        /* the net was already planned: nothing done */
} dm_memory_summary;

typedef struct dm_memory_opts {
  const char *const *keep; /* never freed (n_keep names, may be NULL). Borrowed. */
  size_t n_keep;
} dm_memory_opts;

/* Rewrites `net` in place (o NULL: nothing kept beyond the rules above). */
DM_HIDDEN dm_status dm_memory_pass(Caffe2__NetDef *net, const dm_memory_opts *o,
                                   dm_memory_summary *summary);
/* Nonzero if the memory pass has run on `net`. */
DM_HIDDEN int dm_memory_planned(const Caffe2__NetDef *net);
/* For the passes that add ops (gradient, optimizer, mixed precision): an error naming
 * `pass` if `net` has been through the memory pass, DM_OK otherwise. */
DM_HIDDEN dm_status dm_memory_refuse_planned(const Caffe2__NetDef *net, const char *pass);

#endif
