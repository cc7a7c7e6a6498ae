/* graph_exec.c: capturing and replaying a net's device ops as one device graph (see
 * graph_exec.h for what and when). */
#include "graph_exec.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/tensor.h"

/* A blob as the recording left it: what a replay must leave on the host's side. */
typedef struct end_state {
  void *data; /* its storage's address (NULL: empty) */
  dm_dtype dtype;
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  int64_t numel;
  /* Storage the recording allocated and the run does not free: the graph's memory, at
   * the same address every replay. Ops after the run may drop it (the memory pass's
   * Free: the memory then goes back outside the graph, as CUDA allows); each replay
   * allocates it again, and the blob gets a storage object owning it again (the first
   * blob viewing it, `view_of`, adopts it; the others share). */
  int in_graph;
  size_t view_of;
  size_t nbytes;
  dm_device_type device;
  int device_id;
} end_state;

typedef struct graph_entry {
  uint64_t sig;
  void *graph; /* the backend's executable graph */
  long nodes;
  unsigned long used; /* the plan's clock at its last replay, for eviction */
  end_state *ends;    /* one per plan blob */
} graph_entry;

struct dm_graph_plan {
  dm_graph_host host;
  size_t first, end; /* ops [first, end) */
  const dm_device_ops *dev;
  int device_id;
  dm_blob **blobs; /* every blob the ops touch, once */
  unsigned char *written; /* blobs[k] is some op's output */
  size_t n_blobs;
  void **before; /* each blob's storage before a capture, to undo a failed one */
  graph_entry cache[DM_GRAPH_CACHE];
  int n_cache;
  unsigned long clock;
  struct { /* signatures seen at the start of runs, not captured yet, and how often */
    uint64_t sig;
    int runs;
    unsigned long used;
  } seen[2 * DM_GRAPH_CACHE];
  long captures_since_replay;
  int off;
  char why_off[512];
};

static int capturable(const dm_op_ctx *op) {
  return op->device != DM_CPU && op->kernel && (op->kernel->flags & DM_KERNEL_GRAPH_SAFE);
}

static int same_device(const dm_op_ctx *a, const dm_op_ctx *b) {
  return a->device == b->device && a->device_id == b->device_id;
}

static int cmp_ptr(const void *a, const void *b) {
  const dm_blob *x = *(dm_blob *const *)a, *y = *(dm_blob *const *)b;
  return (x > y) - (x < y);
}

static dm_status collect_blobs(dm_graph_plan *p) {
  size_t n = 0;
  for (size_t i = p->first; i < p->end; i++)
    n += (size_t)(p->host.ops[i].n_in + p->host.ops[i].n_out);
  p->blobs = calloc(n ? n : 1, sizeof *p->blobs);
  p->before = calloc(n ? n : 1, sizeof *p->before);
  if (!p->blobs || !p->before)
    return DM_NOMEM("a graph plan's blob list");
  for (size_t i = p->first; i < p->end; i++) {
    const dm_op_ctx *op = &p->host.ops[i];
    for (int k = 0; k < op->n_in; k++)
      p->blobs[p->n_blobs++] = op->in[k];
    for (int k = 0; k < op->n_out; k++)
      p->blobs[p->n_blobs++] = op->out[k];
  }
  qsort(p->blobs, p->n_blobs, sizeof *p->blobs, cmp_ptr);
  size_t u = 0;
  for (size_t k = 0; k < p->n_blobs; k++)
    if (u == 0 || p->blobs[u - 1] != p->blobs[k])
      p->blobs[u++] = p->blobs[k];
  p->n_blobs = u;
  if (!(p->written = calloc(u ? u : 1, 1)))
    return DM_NOMEM("a graph plan's blob list");
  for (size_t i = p->first; i < p->end; i++) {
    const dm_op_ctx *op = &p->host.ops[i];
    for (int o = 0; o < op->n_out; o++) {
      dm_blob **at = bsearch(&op->out[o], p->blobs, u, sizeof *p->blobs, cmp_ptr);
      if (at)
        p->written[at - p->blobs] = 1;
    }
  }
  return DM_OK;
}

static void entry_free(dm_graph_plan *p, graph_entry *e) {
  free(e->ends);
  p->dev->graph_free(p->device_id, e->graph);
  *e = (graph_entry){0};
}

dm_status dm_graph_plan_make(const dm_graph_host *host, dm_graph_plan **out, char *why,
                             size_t cap) {
  *out = NULL;
  const dm_op_ctx *ops = host->ops;
  const size_t n_ops = host->n_ops;
  size_t best = 0, best_len = 0;
  for (size_t i = 0; i < n_ops;) {
    if (!capturable(&ops[i])) {
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < n_ops && capturable(&ops[j]) && same_device(&ops[i], &ops[j]))
      j++;
    if (j - i > best_len) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  if (best_len < 2) {
    snprintf(why, cap, "%s", best_len ? "one graph-safe device op only: nothing to gain"
                                      : "no run of graph-safe device ops");
    return DM_OK;
  }
  const dm_device_ops *dev = dm_device_ops_for(ops[best].device);
  if (!dev || !dev->capture_begin || !dev->capture_end || !dev->graph_launch ||
      !dev->graph_free) {
    snprintf(why, cap, "the %s backend has no graphs", dev ? dev->name : "device");
    return DM_OK;
  }
  dm_graph_plan *p = calloc(1, sizeof *p);
  if (!p)
    return DM_NOMEM("a graph plan");
  p->host = *host;
  p->first = best;
  p->end = best + best_len;
  p->dev = dev;
  p->device_id = ops[best].device_id;
  dm_status s = collect_blobs(p);
  if (s != DM_OK) {
    dm_graph_plan_free(p);
    return s;
  }
  *out = p;
  return DM_OK;
}

void dm_graph_plan_free(dm_graph_plan *p) {
  if (!p)
    return;
  for (int k = 0; k < p->n_cache; k++)
    entry_free(p, &p->cache[k]);
  free(p->blobs);
  free(p->written);
  free(p->before);
  free(p);
}

void dm_graph_plan_range(const dm_graph_plan *p, size_t *first, size_t *end) {
  *first = p->first;
  *end = p->end;
}

const char *dm_graph_plan_why_off(const dm_graph_plan *p) { return p->off ? p->why_off : ""; }

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211u; }

/* What the ops' work depends on besides their arguments: each blob's storage, whether
 * another blob shares it (an op writing a shared blob detaches it first: other work),
 * dtype and shape; and the device context's private memory (its epoch moves when the
 * context replaces a workspace or buffer of its own that recorded work may point into). */
static uint64_t signature(const dm_graph_plan *p) {
  uint64_t h = 1469598103934665603u;
  h = mix(h, (uint64_t)dm_device_private_epoch(p->dev, p->device_id));
  for (size_t k = 0; k < p->n_blobs; k++) {
    const dm_tensor *t = p->blobs[k]->tensor;
    h = mix(h, (uint64_t)(uintptr_t)(t->storage ? t->storage->data : NULL));
    h = mix(h, (uint64_t)(t->storage && atomic_load(&t->storage->refs) > 1));
    h = mix(h, (uint64_t)t->dtype);
    h = mix(h, (uint64_t)t->ndim);
    for (int d = 0; d < t->ndim; d++)
      h = mix(h, (uint64_t)t->dims[d]);
  }
  return h;
}

static void turn_off(dm_graph_plan *p, const char *fmt, const char *detail) {
  p->off = 1;
  snprintf(p->why_off, sizeof p->why_off, fmt, detail);
}

/* Ops one by one, as without graphs. */
static dm_status run_eager(dm_graph_plan *p, dm_run_counts *c, size_t *failed) {
  for (size_t i = p->first; i < p->end; i++) {
    dm_status s = p->host.run_op(p->host.self, i);
    if (s != DM_OK) {
      *failed = i;
      return s;
    }
    c->device_ops++;
  }
  return DM_OK;
}

/* The blobs as the recording left them, after it (the first launch) or a replay: the
 * host's side of the run, which the ops would have done. The signature matched, so each
 * blob started the run as it did when recorded. */
static dm_status restore_ends(dm_graph_plan *p, const graph_entry *e) {
  for (size_t k = 0; k < p->n_blobs; k++) {
    dm_tensor *t = p->blobs[k]->tensor;
    const end_state *x = &e->ends[k];
    if (x->in_graph && (!t->storage || t->storage->data != x->data)) {
      const dm_tensor *v = p->blobs[x->view_of]->tensor;
      if (x->view_of < k && v->storage && v->storage->data == x->data)
        dm_tensor_share(t, v);
      else
        DM_TRY(dm_tensor_adopt_device(t, x->device, x->device_id, x->data, x->nbytes,
                                      x->dtype, x->ndim, x->dims));
    } else if (!x->data) {
      if (t->storage) /* dropped by the run (a Free of host memory, done when recorded) */
        dm_tensor_reset(t);
      continue;
    }
    if (!t->storage || t->storage->data != x->data)
      continue; /* cannot happen when the signature matched; left as it is */
    t->dtype = x->dtype;
    t->ndim = x->ndim;
    memcpy(t->dims, x->dims, sizeof t->dims);
    t->numel = x->numel;
    if (p->written[k]) /* as run_op does for every output */
      dm_tensor_touch(t);
  }
  return DM_OK;
}

/* Records every blob's state at the end of the recording into e->ends. */
static dm_status record_ends(dm_graph_plan *p, graph_entry *e) {
  if (!(e->ends = calloc(p->n_blobs ? p->n_blobs : 1, sizeof *e->ends)))
    return DM_NOMEM("a device graph's blob states");
  for (size_t k = 0; k < p->n_blobs; k++) {
    dm_tensor *t = p->blobs[k]->tensor;
    end_state *x = &e->ends[k];
    x->data = t->storage ? t->storage->data : NULL;
    x->dtype = t->dtype;
    x->ndim = t->ndim;
    memcpy(x->dims, t->dims, sizeof x->dims);
    x->numel = t->numel;
    x->view_of = k;
    if (t->storage && t->storage->device != DM_CPU && t->storage->data != p->before[k]) {
      x->in_graph = 1;
      x->nbytes = t->storage->nbytes;
      x->device = t->storage->device;
      x->device_id = t->storage->device_id;
      for (size_t j = 0; j < k; j++)
        if (e->ends[j].in_graph && e->ends[j].data == x->data) {
          x->view_of = e->ends[j].view_of;
          break;
        }
    }
  }
  return DM_OK;
}

static dm_status launch(dm_graph_plan *p, graph_entry *e, dm_run_counts *c) {
  DM_TRY(p->dev->graph_launch(p->device_id, e->graph));
  e->used = ++p->clock;
  c->graph_launches++;
  c->graph_nodes += e->nodes;
  return restore_ends(p, e);
}

/* Undoes what a failed recording left in the blobs: storage made during it belonged to
 * the discarded graph. Storage that was there before is the blob's own and stays. */
static void drop_recorded_storage(dm_graph_plan *p) {
  for (size_t k = 0; k < p->n_blobs; k++) {
    dm_tensor *t = p->blobs[k]->tensor;
    if (!t->storage || t->storage->data == p->before[k] || t->storage->device == DM_CPU)
      continue;
    if (atomic_load(&t->storage->refs) == 1)
      dm_tensor_forget_storage(t);
    else /* a view of another blob's: that blob is reached in its turn */
      dm_tensor_reset(t);
  }
}

/* Records the ops into a graph for signature `sig` and queues it; on a failure of the
 * recording, the run goes op by op and graphs stay off. */
static dm_status capture(dm_graph_plan *p, uint64_t sig, dm_run_counts *c, size_t *failed) {
  for (size_t i = p->first; i < p->end; i++)
    if (!capturable(&p->host.ops[i])) { /* a kernel re-chosen for new dtypes */
      char what[256];
      turn_off(p, "%s has no graph-safe kernel now",
               p->host.describe(p->host.self, i, what, sizeof what));
      return run_eager(p, c, failed);
    }
  for (size_t k = 0; k < p->n_blobs; k++) {
    const dm_tensor *t = p->blobs[k]->tensor;
    p->before[k] = t->storage ? t->storage->data : NULL;
  }
  dm_status s = p->dev->capture_begin(p->device_id);
  if (s != DM_OK) {
    turn_off(p, "the capture could not start: %s", dm_last_error());
    return run_eager(p, c, failed);
  }
  char msg[512] = "";
  for (size_t i = p->first; i < p->end && s == DM_OK; i++) {
    s = p->host.run_op(p->host.self, i);
    if (s != DM_OK) {
      char what[256];
      snprintf(msg, sizeof msg, "%s: %s", p->host.describe(p->host.self, i, what, sizeof what),
               dm_last_error());
    }
  }
  void *graph = NULL;
  long nodes = 0;
  dm_status e = p->dev->capture_end(p->device_id, &graph, &nodes);
  if (s == DM_OK && e != DM_OK)
    snprintf(msg, sizeof msg, "%s", dm_last_error());
  if (s != DM_OK || e != DM_OK || !graph) {
    if (graph)
      p->dev->graph_free(p->device_id, graph);
    drop_recorded_storage(p);
    turn_off(p, "capturing failed (%s); the ops run one by one", *msg ? msg : "no graph");
    return run_eager(p, c, failed);
  }
  graph_entry fresh = {sig, graph, nodes, 0, NULL};
  s = record_ends(p, &fresh);
  if (s != DM_OK) {
    entry_free(p, &fresh);
    *failed = p->first;
    return s;
  }
  c->captures++;
  graph_entry *slot = NULL;
  if (p->n_cache < DM_GRAPH_CACHE) {
    slot = &p->cache[p->n_cache++];
  } else { /* the least recently replayed goes */
    slot = &p->cache[0];
    for (int k = 1; k < p->n_cache; k++)
      if (p->cache[k].used < slot->used)
        slot = &p->cache[k];
    entry_free(p, slot);
  }
  *slot = fresh;
  p->captures_since_replay++;
  /* recording ran nothing: this run's work is the first replay */
  s = launch(p, slot, c);
  if (s != DM_OK)
    *failed = p->first;
  return s;
}

/* How many runs have started with `sig`, this one included (the least recently seen
 * signature is forgotten to make room). */
static int count_seen(dm_graph_plan *p, uint64_t sig) {
  int n = (int)(sizeof p->seen / sizeof p->seen[0]), slot = 0;
  ++p->clock;
  for (int k = 0; k < n; k++) {
    if (p->seen[k].runs && p->seen[k].sig == sig) {
      p->seen[k].used = p->clock;
      return ++p->seen[k].runs;
    }
    if (p->seen[k].used < p->seen[slot].used)
      slot = k;
  }
  p->seen[slot].sig = sig;
  p->seen[slot].runs = 1;
  p->seen[slot].used = p->clock;
  return 1;
}

dm_status dm_graph_plan_run(dm_graph_plan *p, dm_run_counts *c, size_t *failed) {
  *failed = p->first;
  if (p->off)
    return run_eager(p, c, failed);
  uint64_t sig = signature(p);
  for (int k = 0; k < p->n_cache; k++)
    if (p->cache[k].sig == sig) {
      p->captures_since_replay = 0;
      return launch(p, &p->cache[k], c);
    }
  if (count_seen(p, sig) <= DM_GRAPH_WARMUP)
    return run_eager(p, c, failed);
  if (p->captures_since_replay >= DM_GRAPH_MAX_CAPTURES) {
    char n[32];
    snprintf(n, sizeof n, "%d", DM_GRAPH_MAX_CAPTURES);
    turn_off(p, "re-captured %s times without a replay: the blobs' shapes or addresses "
                "change every run; the ops run one by one",
             n);
    return run_eager(p, c, failed);
  }
  return capture(p, sig, c, failed);
}
