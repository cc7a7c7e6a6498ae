/* net.h: a NetDef instantiated against a workspace, and the sequential executor (internal).
 *
 * Instantiation resolves every op once: its schema (arity, in-place rules, argument
 * types and required arguments are checked here), its kernel by (type, device, engine),
 * its blobs, and its kernel's private state. Running is then a loop over the ops.
 */
#ifndef DM_NET_NET_H
#define DM_NET_NET_H

#include <stdio.h>

#include "core/op_ctx_impl.h"
#include "core/workspace.h"
#include "graph_exec.h"
#include "proto/caffe2.pb-c.h"

struct dm_net {
  dm_workspace *ws;
  Caffe2__NetDef *def; /* owned */
  char *source;        /* file name for messages, or "<memory>" */
  dm_op_ctx *ops;
  size_t n_ops, cap_ops;
  int check_finite;      /* scan float outputs after each op (--explain-overflow) */
  char **finite_blobs;   /* blobs each run must leave finite (dm_net_require_finite) */
  size_t n_finite_blobs;
  char *finite_hint;     /* the fix, for the message */
  double *op_seconds;    /* with profiling on: each op's time summed over the runs */
  dm_reorder_totals reorders0; /* with profiling on: the thread's layout conversions before */
  uint64_t *op_reorders; /* with profiling on: each op's layout conversions over the runs */
  long profiled_runs;
  long first_nonfinite;  /* op index of the first inf/nan output in the last run, or -1 */
  int nonfinite_output;  /* which output of that op */
  int graphs_off;        /* dm_net_set_graphs(net, 0) */
  int graph_planned;     /* the plan below was made (it may be NULL: see graph_why) */
  dm_graph_plan *graph;  /* device graph of the net's longest graph-safe run (graph_exec.h) */
  char graph_why[256];   /* why there is no plan */
  dm_run_counts counts;
};

/* Instantiates `def` (taking ownership of it, even on failure) in `ws`. The net is not
 * yet adopted by the workspace. */
DM_HIDDEN dm_status dm_net_create(dm_workspace *ws, Caffe2__NetDef *def, const char *source,
                                  dm_net **out);
DM_HIDDEN void dm_net_free(dm_net *net);
/* Instantiates def->op[index] as the net's next op (for passes that build a net op by
 * op). The error message has no op prefix; the caller adds it. */
DM_HIDDEN dm_status dm_net_append_op(dm_net *net, int index);
/* With `on`, every run scans each op's FLOAT/FLOAT16 outputs for inf or nan and records
 * the first op that produced one (a diagnostic: it costs a pass over every output). */
DM_HIDDEN void dm_net_set_check_finite(dm_net *net, int on);
/* Every later run must leave blobs `names` (a reduced-precision net's outputs) free of
 * inf and nan: one that does not fails with DM_ERR_NONFINITE, naming the blob and the
 * first op that produced an inf/nan (found by running the net once more with the scan
 * above on: the cost falls on the failing run only), followed by `hint` (the fix:
 * "run it in BF16 or FP32"). The names and hint are copied; n = 0 turns it off. */
DM_HIDDEN dm_status dm_net_require_finite(dm_net *net, const char *const *names, size_t n,
                                          const char *hint);
/* With `on`, every run times each op (waiting for its device to finish it, so ops are
 * timed one by one rather than overlapped: a diagnostic, slower than a plain run) and
 * adds the time to the op's total; turning it on clears the totals. */
DM_HIDDEN dm_status dm_net_set_profile(dm_net *net, int on);
/* Writes the totals by op type, largest first, as lines "# type count ms_per_run share"
 * of the runs profiled; nothing if none were. */
DM_HIDDEN void dm_net_print_profile(const dm_net *net, FILE *f);
/* Device graphs (graph_exec.h) for this net's runs: on by default; off, every op runs
 * one by one. Turning them off frees the graphs captured so far. */
DM_HIDDEN void dm_net_set_graphs(dm_net *net, int on);
/* The counts over the runs so far (kernel launches, graph replays, host syncs). */
DM_HIDDEN void dm_net_run_counts(const dm_net *net, dm_run_counts *out);
/* One line on the net's device graph: what is captured and replayed, or why nothing is
 * (graphs off, no graph-safe run of device ops, a capture that failed). */
DM_HIDDEN void dm_net_graph_status(const dm_net *net, char *buf, size_t cap);
/* After a run with checking on: the first op whose output held inf/nan (and which
 * output), or 0 if none did. */
DM_HIDDEN int dm_net_first_nonfinite(const dm_net *net, const dm_op_ctx **op, int *output);
/* For passes: binds `def` as instantiation does (schema, arity, arguments, blobs of `ws`,
 * which creates the new ones empty: their dtype is DM_UNDEFINED unless `ws` knows it) and
 * asks the registry for the kernel the executor would run it with on (device,
 * device_id): its engines, the device's defaults, the plain one, each kernel's supports
 * asked. No device check, no kernel init, nothing run. DM_ERR_NOT_FOUND: no such kernel
 * or no schema; DM_ERR_UNSUPPORTED: kernels exist but refuse this form (see
 * dm_op_last_refusal); anything else: the op cannot be instantiated at all. */
DM_HIDDEN dm_status dm_op_probe_kernel(dm_workspace *ws, const Caffe2__OperatorDef *def,
                                       dm_device_type device, int device_id,
                                       const dm_kernel_def **out);
/* "op 3 (Conv 'conv1')" into buf. */
DM_HIDDEN const char *dm_op_describe(const dm_op_ctx *op, char *buf, size_t cap);

#endif
