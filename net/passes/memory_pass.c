/* memory_pass.c: Free ops after each step-local blob's last use (see net/passes/memory_pass.h). */
#include "net/passes/memory_pass.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "net/netdef_build.h"

/* What the pass knows of one blob: where it is first and last touched, and whether the
 * first touch is a pure write (so no run reads what the previous run left). */
typedef struct blob_use {
  const char *name; /* borrowed from the NetDef */
  size_t last;      /* index of the last op that reads or writes it */
  int local;        /* first access is a write by an op that does not read it */
  UT_hash_handle hh;
} blob_use;

typedef struct plan {
  blob_use *blobs; /* uthash, in first-access order */
} plan;

static void plan_free(plan *p) {
  blob_use *b, *tmp;
  HASH_ITER(hh, p->blobs, b, tmp) {
    HASH_DEL(p->blobs, b);
    free(b);
  }
}

/* Records an access of `name` by op `i`; `written_first` says what a first access is. */
static dm_status touch(plan *p, const char *name, size_t i, int written_first) {
  blob_use *b;
  HASH_FIND_STR(p->blobs, name, b);
  if (!b) {
    if (!(b = calloc(1, sizeof *b)))
      return DM_NOMEM("the memory plan");
    b->name = name;
    b->local = written_first;
    HASH_ADD_KEYPTR(hh, p->blobs, b->name, strlen(b->name), b);
  }
  b->last = i;
  return DM_OK;
}

static void pin(plan *p, const char *name) {
  blob_use *b;
  HASH_FIND_STR(p->blobs, name, b);
  if (b)
    b->local = 0;
}

/* Control-flow ops carry nets whose blobs this pass cannot see. */
static dm_status check_no_subnets(const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t a = 0; a < op->n_arg; a++)
      if (op->arg[a]->n || op->arg[a]->n_nets)
        return dm_error(DM_ERR_UNSUPPORTED,
                        "op %zu (%s): argument '%s' holds a nested net, whose blob uses the "
                        "memory pass cannot see",
                        i, op->type ? op->type : "", op->arg[a]->name ? op->arg[a]->name : "");
  }
  return DM_OK;
}

static dm_status analyse(plan *p, const Caffe2__NetDef *net, const char *const *keep,
                         size_t n_keep) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    /* inputs first: an op that reads and writes a blob it meets first (Iter, in-place
     * updates) makes it state, not step-local */
    for (size_t k = 0; k < op->n_input; k++)
      DM_TRY(touch(p, op->input[k], i, 0));
    for (size_t k = 0; k < op->n_output; k++)
      DM_TRY(touch(p, op->output[k], i, 1));
  }
  for (size_t k = 0; k < net->n_external_input; k++)
    pin(p, net->external_input[k]);
  for (size_t k = 0; k < net->n_external_output; k++)
    pin(p, net->external_output[k]);
  for (size_t k = 0; k < n_keep; k++)
    pin(p, keep[k]);
  return DM_OK;
}

static int freed_after(const blob_use *b, size_t i) { return b->local && b->last == i; }

/* Free(blobs whose last use is op `i`), on op i's device; *out NULL if there are none. */
static dm_status free_op_after(const plan *p, const Caffe2__NetDef *net, size_t i,
                               Caffe2__OperatorDef **out, size_t *n_freed) {
  *out = NULL;
  size_t n = 0;
  for (const blob_use *b = p->blobs; b; b = b->hh.next)
    n += (size_t)freed_after(b, i);
  if (!n)
    return DM_OK;
  dm_opb f;
  dm_opb_start(&f, "Free");
  for (const blob_use *b = p->blobs; b; b = b->hh.next)
    if (freed_after(b, i)) {
      dm_opb_input(&f, b->name);
      dm_opb_output(&f, b->name);
    }
  if (net->op[i]->device_option)
    dm_opb_device_option(&f, net->op[i]->device_option);
  *n_freed += n;
  return dm_opb_finish(&f, out);
}

int dm_memory_planned(const Caffe2__NetDef *net) {
  return dm_netdef_find_arg(net, DM_MEMORY_MARK) != NULL;
}

dm_status dm_memory_refuse_planned(const Caffe2__NetDef *net, const char *pass) {
  if (!dm_memory_planned(net))
    return DM_OK;
  return dm_error(DM_ERR_INVALID,
                  "the net has been through the memory pass (its Free ops release blobs after "
                  "their last use, and ops added after them would read freed blobs): run the "
                  "%s pass before the memory pass",
                  pass);
}

dm_status dm_memory_pass(Caffe2__NetDef *net, const dm_memory_opts *o,
                         dm_memory_summary *summary) {
  const char *const *keep = o ? o->keep : NULL;
  size_t n_keep = o ? o->n_keep : 0;
  memset(summary, 0, sizeof *summary);
  if (dm_memory_planned(net)) {
    summary->already = 1;
    return DM_OK;
  }
  DM_TRY(check_no_subnets(net));
  plan p = {0};
  dm_status s = analyse(&p, net, keep, n_keep);
  /* The new op list, built aside so that a failure leaves `net` as it was. The ops are
   * moved (not copied) into it once everything is allocated. */
  Caffe2__OperatorDef **frees = s == DM_OK ? calloc(net->n_op + 1, sizeof *frees) : NULL;
  if (s == DM_OK && !frees)
    s = DM_NOMEM("the memory plan");
  for (size_t i = 0; s == DM_OK && i < net->n_op; i++) {
    s = free_op_after(&p, net, i, &frees[i], &summary->blobs_freed);
    summary->free_ops += frees[i] != NULL;
  }
  Caffe2__OperatorDef **ops =
      s == DM_OK ? malloc((net->n_op + summary->free_ops + 1) * sizeof *ops) : NULL;
  if (s == DM_OK && !ops)
    s = DM_NOMEM("the memory plan");
  if (s == DM_OK)
    s = dm_netdef_set_arg_string(net, DM_MEMORY_MARK, "free_after_last_use");
  if (s == DM_OK) {
    size_t k = 0;
    for (size_t i = 0; i < net->n_op; i++) {
      ops[k++] = net->op[i];
      if (frees[i])
        ops[k++] = frees[i];
    }
    free(net->op);
    net->op = ops;
    net->n_op = k;
  } else {
    free(ops);
    for (size_t i = 0; frees && i < net->n_op; i++)
      if (frees[i])
        protobuf_c_message_free_unpacked(&frees[i]->base, NULL);
    memset(summary, 0, sizeof *summary);
  }
  free(frees);
  plan_free(&p);
  return s;
}
