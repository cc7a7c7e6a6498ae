/* graph_exec.h: device graphs for the executor (internal; net/net.c calls it).
 *
 * The recorder sees the executor only through what it is handed (dm_graph_host): the
 * instantiated ops, and how to run and name one of them. It calls nothing of net/, so
 * calls between the executor and the recorder go one way (net.c -> graph_exec.c).
 *
 * A training step on a GPU is hundreds of small kernels, and the host's cost of
 * launching them one by one (and of each op's host-side bookkeeping) is a large share of
 * a step at batch 64. A device graph (CUDA graph) records a run of those launches once
 * and replays them with one launch.
 *
 * What is captured: the net's longest run of consecutive ops that are on one device,
 * whose kernels are flagged DM_KERNEL_GRAPH_SAFE (core/demitasse_plugin.h: they queue
 * all their work on the op's stream, read no host values, queue the same work for the
 * same shapes and addresses), on a backend with capture hooks (core/device.h). One run
 * only, so that the host's view of every blob (shape, storage) is the same at its end
 * whether the run was replayed or executed; ops before and after it (the batch upload,
 * a download of the loss) run as usual.
 *
 * When: the run's signature is a hash of every blob its ops touch (storage address,
 * dtype, shape) as they stand when the run starts. A replay is valid exactly when the
 * signature equals the one seen at capture: the same work on the same memory. Once a
 * signature has been seen at the start of DM_GRAPH_WARMUP consecutive runs (the first
 * runs allocate, choose algorithms, grow workspaces), the run is captured, and later
 * runs with that signature replay it. A few graphs are kept (a double-buffered input
 * alternates between two addresses, so two); a signature seen for the first time runs
 * as usual. A run whose signature never settles (re-captured DM_GRAPH_MAX_CAPTURES times
 * without replays in between) is left to run as usual, with the reason.
 *
 * A capture that fails (a kernel that did something a graph cannot hold) leaves the net
 * running op by op from then on, with the reason; nothing of the failed recording has
 * run, so the run is executed again as usual, after the blobs that got storage during
 * the recording are reset (that storage belonged to the discarded graph).
 *
 * After a replay the host's view of every blob the run touches is made what the
 * recording left (shapes; the storage of blobs the run allocates, which ops after the
 * run may have freed and each replay allocates again at the same address; blobs the run
 * drops), and the written blobs' versions are bumped as the ops would, so the ops after
 * the run, and caches keyed on versions (core/tensor.h), see what they would see.
 *
 * Besides the blobs, the signature holds whether each blob's storage is shared (an op
 * writing a shared blob copies it first: other work) and the backends' private-memory
 * epoch of the plan's device context (core/device.h): a workspace that context grows or
 * a buffer of its own it reallocates retires the graphs recorded on it before, which may
 * point into the old one; other threads' and devices' graphs are not touched.
 */
#ifndef DM_NET_GRAPH_EXEC_H
#define DM_NET_GRAPH_EXEC_H

#include <stddef.h>

#include "core/op_ctx_impl.h"
#include "core/status.h"

typedef struct dm_graph_plan dm_graph_plan;

/* What the executor hands the recorder: its ops (ops[0..n_ops), not moved while the
 * plan lives), and callbacks on `self` that run op i exactly as the executor does
 * (checks, layouts, versions) and write "op 3 (Conv 'conv1')" for messages. */
typedef struct dm_graph_host {
  void *self;
  dm_op_ctx *ops;
  size_t n_ops;
  dm_status (*run_op)(void *self, size_t i);
  const char *(*describe)(void *self, size_t i, char *buf, size_t cap);
} dm_graph_host;

#define DM_GRAPH_WARMUP 2
#define DM_GRAPH_CACHE 4
#define DM_GRAPH_MAX_CAPTURES 16

/* Counts over a net's runs (dm_net_run_counts). */
typedef struct dm_run_counts {
  long runs;            /* dm_net_run calls that finished */
  long device_ops;      /* device ops run one by one (each queues one kernel or more) */
  long graph_launches;  /* replays (each one launch) */
  long graph_nodes;     /* operations those replays ran on the device */
  long captures;        /* graphs recorded */
  long host_syncs;      /* host waits for a device (core/device.h) */
} dm_run_counts;

/* The plan for the host's ops (the host is copied; NULL in *out when nothing can be
 * captured: no device op, no backend with graphs; *why then says so). */
DM_HIDDEN dm_status dm_graph_plan_make(const dm_graph_host *host, dm_graph_plan **out,
                                       char *why, size_t cap);
DM_HIDDEN void dm_graph_plan_free(dm_graph_plan *plan);
/* The captured run's first op and one past its last. */
DM_HIDDEN void dm_graph_plan_range(const dm_graph_plan *plan, size_t *first, size_t *end);
/* Runs ops [first, end) of the plan: replayed, captured then replayed, or one by one.
 * On failure *failed is the index of the op that failed (or `first`). */
DM_HIDDEN dm_status dm_graph_plan_run(dm_graph_plan *plan, dm_run_counts *counts,
                                      size_t *failed);
/* Why the plan stopped capturing ("" while it has not). */
DM_HIDDEN const char *dm_graph_plan_why_off(const dm_graph_plan *plan);

#endif
