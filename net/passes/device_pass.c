/* device_pass.c: the device placement pass (see net/passes/device_pass.h for what it makes). */
#include "net/passes/device_pass.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core/registry.h"
#include "core/slot_mask.h"
#include "demitasse.h"
#include "net/passes/memory_pass.h"
#include "net/net.h"
#include "net/netdef_build.h"
#include "net/op_origin.h"

/* A place: LOC_CPU, or the id of a CUDA GPU. */
#define LOC_CPU (-1)

/* What the pass knows of one blob: its home, and a copy of its current value on another
 * device while one is valid. */
typedef struct blob {
  char *name;
  int home;
  int read_first; /* state: its first touch reads it */
  char *mirror;   /* the copy's name on mirror_loc, kept once made (reused when refreshed) */
  int mirror_loc;
  int mirror_valid;
  UT_hash_handle hh;
} blob;

/* Every name the net uses, so generated names never collide with the user's. */
typedef struct name_entry {
  char *name;
  UT_hash_handle hh;
} name_entry;

typedef struct pass {
  const dm_device_opts *o;
  dm_workspace *ws;  /* scratch: ops are bound here to ask their kernels (never run) */
  blob *blobs;       /* uthash, in first-touch order */
  name_entry *names; /* uthash */
  Caffe2__NetDef *out;
  dm_device_summary *sum;
  size_t report_len;
} pass;

DM_PRINTF(2, 3) static void report(pass *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dm_text_vappendf(&p->sum->report, &p->report_len, fmt, ap);
  va_end(ap);
}

static const char *loc_str(int loc, char *buf, size_t cap) {
  if (loc == LOC_CPU)
    snprintf(buf, cap, "CPU");
  else
    snprintf(buf, cap, "CUDA:%d", loc);
  return buf;
}

/* Whether op can run on CUDA:device_id: *why is "" when it can, else the reason it stays
 * on the CPU. What decides is the op's schema (an input whose values a kernel reads on
 * the host) and the registry: the kernel the executor would pick (the op's engines, then
 * CUDA's default, then the plain one) and that kernel's own supports(ctx), asked of the
 * op bound in the scratch workspace `ws` (input dtypes unknown there). An op that cannot
 * be bound at all (bad arity or arguments) fails the pass, naming it. */
static dm_status cuda_verdict(dm_workspace *ws, size_t i, const Caffe2__OperatorDef *op,
                              int device_id, char *why, size_t cap) {
  const char *type = op->type ? op->type : "";
  const dm_op_schema *schema = dm_schema_lookup(type);
  why[0] = '\0';
  for (size_t k = 0; schema && k < op->n_input; k++)
    if (dm_slot_in(schema->host_inputs, k)) {
      snprintf(why, cap, "its input %zu ('%s') is read on the host (on a GPU, a sync per run)",
               k, op->input[k]);
      return DM_OK;
    }
  const dm_kernel_def *kernel = NULL;
  dm_status s = dm_op_probe_kernel(ws, op, DM_CUDA, device_id, &kernel);
  if (s == DM_ERR_NOT_FOUND)
    snprintf(why, cap, "no CUDA kernel for its type");
  else if (s == DM_ERR_UNSUPPORTED)
    snprintf(why, cap, "%s",
             *dm_op_last_refusal() ? dm_op_last_refusal()
                                   : "its CUDA kernels do not support this form of it (its "
                                     "arguments or inputs)");
  else if (s != DM_OK)
    return dm_error_prefix(s, "device placement: op %zu (%s%s%s)", i, type,
                           op->name && *op->name ? " " : "", op->name ? op->name : "");
  return DM_OK;
}

static int option_loc(const Caffe2__DeviceOption *d) {
  if (d->device_type == DM_CPU)
    return LOC_CPU;
  return d->has_device_id ? d->device_id : 0;
}

/* Where the op runs as the executor sees it: its own device_option, else the net's. */
static int effective_loc(const Caffe2__NetDef *net, const Caffe2__OperatorDef *op) {
  if (op->device_option && op->device_option->has_device_type)
    return option_loc(op->device_option);
  if (net->device_option && net->device_option->has_device_type)
    return option_loc(net->device_option);
  return LOC_CPU;
}

/* The pass's choice for op i into *loc, with the summary's count and report line. */
static dm_status decide(pass *p, size_t i, const Caffe2__OperatorDef *op, int *loc) {
  const char *type = op->type ? op->type : "", *why = NULL;
  char reason[600];
  size_t *kept = NULL;
  if (op->device_option && op->device_option->has_device_type) {
    *loc = option_loc(op->device_option);
    why = "pinned there by its own device_option";
    kept = &p->sum->kept_pinned;
  } else if (dm_str_in_list(type, p->o->force_cpu, p->o->n_force_cpu)) {
    *loc = LOC_CPU;
    why = "its type is on the CPU list";
    kept = &p->sum->kept_forced;
  } else {
    DM_TRY(cuda_verdict(p->ws, i, op, p->o->device_id, reason, sizeof reason));
    *loc = reason[0] ? LOC_CPU : p->o->device_id;
    why = reason;
    kept = &p->sum->kept_no_kernel;
  }
  if (*loc != LOC_CPU) {
    p->sum->ops_device++;
  } else {
    (*kept)++;
    report(p, "  op %zu (%s%s%s) CPU: %s\n", i, type, op->name && *op->name ? " " : "",
           op->name ? op->name : "", why);
  }
  return DM_OK;
}

static blob *find_blob(pass *p, const char *name) {
  blob *b = NULL;
  HASH_FIND_STR(p->blobs, name, b);
  return b;
}

/* Where a touch of op slot puts the blob: the op's device, except the host side of a
 * copy op (a copy runs on the GPU but one end is on the host). The copy ops are this
 * pass's own (emit_copy), recognised by name also where an earlier run or a user put
 * them: which end is the host is what the op type means, and no schema or kernel field
 * says it (a kernel's cross_device only says that its input may be elsewhere). */
static int touch_loc(const Caffe2__OperatorDef *op, int op_loc, int is_output) {
  const char *type = op->type ? op->type : "";
  if (!is_output && strcmp(type, "CopyCPUToGPU") == 0)
    return LOC_CPU;
  if (is_output && strcmp(type, "CopyGPUToCPU") == 0)
    return LOC_CPU;
  return op_loc;
}

static dm_status touch(pass *p, const char *name, int loc, int is_read) {
  if (find_blob(p, name))
    return DM_OK;
  blob *b = calloc(1, sizeof *b);
  if (!b || !(b->name = strdup(name))) {
    free(b);
    return DM_NOMEM("the device plan");
  }
  b->home = dm_str_in_list(name, p->o->host_blobs, p->o->n_host_blobs) ? LOC_CPU : loc;
  b->read_first = is_read;
  HASH_ADD_KEYPTR(hh, p->blobs, b->name, strlen(b->name), b);
  return DM_OK;
}

/* Homes: the place of each blob's first touch, in op order (inputs before outputs). */
static dm_status find_homes(pass *p, const Caffe2__NetDef *net, const int *locs) {
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; k < op->n_input; k++)
      DM_TRY(touch(p, op->input[k], touch_loc(op, locs[i], 0), 1));
    for (size_t k = 0; k < op->n_output; k++)
      DM_TRY(touch(p, op->output[k], touch_loc(op, locs[i], 1), 0));
  }
  return DM_OK;
}

static dm_status list_gpu_state(pass *p) {
  for (const blob *b = p->blobs; b; b = b->hh.next) {
    if (!b->read_first || b->home == LOC_CPU)
      continue;
    DM_TRY(dm_strv_push(&p->sum->gpu_state, &p->sum->n_gpu_state, b->name));
  }
  return DM_OK;
}

static dm_status add_name(pass *p, const char *name) {
  name_entry *e = NULL;
  HASH_FIND_STR(p->names, name, e);
  if (e)
    return DM_OK;
  if (!(e = calloc(1, sizeof *e)) || !(e->name = strdup(name))) {
    free(e);
    return DM_NOMEM("the device plan");
  }
  HASH_ADD_KEYPTR(hh, p->names, e->name, strlen(e->name), e);
  return DM_OK;
}

static int name_used(pass *p, const char *name) {
  name_entry *e = NULL;
  HASH_FIND_STR(p->names, name, e);
  return e != NULL;
}

static dm_status collect_names(pass *p, const Caffe2__NetDef *net) {
  for (size_t i = 0; i < net->n_op; i++) {
    for (size_t k = 0; k < net->op[i]->n_input; k++)
      DM_TRY(add_name(p, net->op[i]->input[k]));
    for (size_t k = 0; k < net->op[i]->n_output; k++)
      DM_TRY(add_name(p, net->op[i]->output[k]));
  }
  for (size_t k = 0; k < net->n_external_input; k++)
    DM_TRY(add_name(p, net->external_input[k]));
  for (size_t k = 0; k < net->n_external_output; k++)
    DM_TRY(add_name(p, net->external_output[k]));
  return DM_OK;
}

/* The name of b's copy on `loc`: X_cpu, X_cuda (GPU 0), X_cudaN; a suffix _2, _3 ... if
 * the net already uses that name. Made once per (blob, place) and reused. */
static dm_status mirror_name(pass *p, blob *b, int loc) {
  if (b->mirror && b->mirror_loc == loc)
    return DM_OK;
  char base[600], name[640];
  if (loc == LOC_CPU)
    snprintf(base, sizeof base, "%s_cpu", b->name);
  else if (loc == 0)
    snprintf(base, sizeof base, "%s_cuda", b->name);
  else
    snprintf(base, sizeof base, "%s_cuda%d", b->name, loc);
  snprintf(name, sizeof name, "%s", base);
  for (int k = 2; name_used(p, name); k++)
    snprintf(name, sizeof name, "%s_%d", base, k);
  DM_TRY(add_name(p, name));
  char *m = strdup(name);
  if (!m)
    return DM_NOMEM("a blob name");
  free(b->mirror);
  b->mirror = m;
  b->mirror_loc = loc;
  b->mirror_valid = 0;
  return DM_OK;
}

/* Sets the op's device to `loc`, keeping its other device_option fields. */
static dm_status set_loc(Caffe2__OperatorDef *op, int loc) {
  if (!op->device_option) {
    if (!(op->device_option = malloc(sizeof *op->device_option)))
      return DM_NOMEM("a device option");
    caffe2__device_option__init(op->device_option);
  }
  op->device_option->has_device_type = 1;
  op->device_option->device_type = loc == LOC_CPU ? DM_CPU : DM_CUDA;
  op->device_option->has_device_id = loc != LOC_CPU;
  op->device_option->device_id = loc == LOC_CPU ? 0 : loc;
  return DM_OK;
}

/* Appends the copy src (on `from`) -> dst (on `to`), run on the GPU side. */
static dm_status emit_copy(pass *p, const char *src, const char *dst, int from, int to) {
  dm_opb b;
  dm_opb_start(&b, to == LOC_CPU ? "CopyGPUToCPU" : "CopyCPUToGPU");
  dm_opb_input(&b, src);
  dm_opb_output(&b, dst);
  if (dm_opb_op(&b))
    dm_opb_fail(&b, set_loc(dm_opb_op(&b), to == LOC_CPU ? from : to));
  p->sum->copies++;
  return dm_opb_append(&b, p->out);
}

static dm_status refuse_gpu_to_gpu(size_t i, const Caffe2__OperatorDef *op, const char *what,
                                   const char *name, int loc, int home) {
  char a[32], b[32], desc[512];
  return dm_error(DM_ERR_UNSUPPORTED,
                  "%s on %s %s blob '%s', whose home is %s: there is no copy op "
                  "between two GPUs (pin the op to %s or to the CPU)",
                  dm_opdef_describe(op, i, desc, sizeof desc), loc_str(loc, a, sizeof a), what,
                  name, loc_str(home, b, sizeof b), b);
}

static dm_status replace(char **slot, const char *name) {
  char *c = strdup(name);
  if (!c)
    return DM_NOMEM("a blob name");
  free(*slot);
  *slot = c;
  return DM_OK;
}

/* Rewrites op i (placed on `loc`): reads through copies, writes to other homes through
 * the loc-side name and a copy back. Appends the copies, the op and the copies back. */
static dm_status place_op(pass *p, size_t i, Caffe2__OperatorDef *op, int loc, size_t *n_back) {
  for (size_t k = 0; k < op->n_input; k++) {
    blob *b = find_blob(p, op->input[k]);
    int from = b->home;
    if (from == loc || from == touch_loc(op, loc, 0))
      continue;
    if (from != LOC_CPU && loc != LOC_CPU)
      return refuse_gpu_to_gpu(i, op, "reads", b->name, loc, from);
    if (!(b->mirror_valid && b->mirror_loc == loc)) {
      DM_TRY(mirror_name(p, b, loc));
      DM_TRY(emit_copy(p, b->name, b->mirror, from, loc));
      b->mirror_valid = 1;
    }
    DM_TRY(replace(&op->input[k], b->mirror));
  }
  *n_back = 0;
  for (size_t k = 0; k < op->n_output; k++) {
    blob *b = find_blob(p, op->output[k]);
    int to = b->home;
    if (to == loc || to == touch_loc(op, loc, 1)) {
      b->mirror_valid = 0; /* a copy of the old value is stale now */
      continue;
    }
    if (to != LOC_CPU && loc != LOC_CPU)
      return refuse_gpu_to_gpu(i, op, "writes", b->name, loc, to);
    DM_TRY(mirror_name(p, b, loc));
    b->mirror_valid = 0; /* valid again once the copy back follows */
    DM_TRY(replace(&op->output[k], b->mirror));
    (*n_back)++;
  }
  return DM_OK;
}

/* After op (already appended): copy each loc-side output back to its blob's home. */
static dm_status copy_back(pass *p, const Caffe2__OperatorDef *op, int loc) {
  for (size_t k = 0; k < op->n_output; k++) {
    const char *out = op->output[k];
    for (blob *b = p->blobs; b; b = b->hh.next)
      if (b->mirror && strcmp(b->mirror, out) == 0 && b->home != loc) {
        DM_TRY(emit_copy(p, out, b->name, loc, b->home));
        b->mirror_valid = 1; /* both sides hold the value just written */
        break;
      }
  }
  return DM_OK;
}

static void free_pass(pass *p) {
  blob *b, *tb;
  HASH_ITER(hh, p->blobs, b, tb) {
    HASH_DEL(p->blobs, b);
    free(b->name);
    free(b->mirror);
    free(b);
  }
  name_entry *e, *te;
  HASH_ITER(hh, p->names, e, te) {
    HASH_DEL(p->names, e);
    free(e->name);
    free(e);
  }
  if (p->ws)
    dm_workspace_destroy(p->ws);
  if (p->out)
    protobuf_c_message_free_unpacked(&p->out->base, NULL);
}

/* The rewrite on `w` (a clone of the net, whose ops are moved into p->out one by one). */
static dm_status rewrite(pass *p, Caffe2__NetDef *w, const int *locs) {
  int net_on_gpu = w->device_option && w->device_option->has_device_type &&
                   w->device_option->device_type != DM_CPU;
  DM_TRY(dm_netdef_new(NULL, &p->out));
  for (size_t i = 0; i < w->n_op; i++) {
    Caffe2__OperatorDef *op = w->op[i];
    int pinned = op->device_option && op->device_option->has_device_type;
    if (!pinned && (locs[i] != LOC_CPU || net_on_gpu))
      DM_TRY(set_loc(op, locs[i]));
    size_t n_back = 0;
    DM_TRY(place_op(p, i, op, locs[i], &n_back));
    w->op[i] = NULL;
    DM_TRY(dm_netdef_append_op(p->out, op));
    if (n_back)
      DM_TRY(copy_back(p, op, locs[i]));
  }
  return DM_OK;
}

/* Moves each host-to-device copy (into another blob) as early as it can go: right after
 * the last earlier op that writes its source or touches its destination (and after the
 * copies already moved to that spot, so they keep their order). Placed before its first
 * reader, the label's copy would sit in the middle of a training step, between GPU ops,
 * cutting the step's device graph in two (net/graph_exec.h); moved up, every upload
 * starts the step, where the double-buffered copy overlaps the previous step's compute.
 * The cost: a copy lives from there, not from its first reader (the label: bytes). */
static void hoist_uploads(Caffe2__NetDef *net) {
  for (size_t k = 0; k < net->n_op; k++) {
    Caffe2__OperatorDef *c = net->op[k];
    if (!c->type || strcmp(c->type, "CopyCPUToGPU") != 0 || c->n_input != 1 || c->n_output != 1 ||
        strcmp(c->input[0], c->output[0]) == 0)
      continue;
    size_t pos = 0;
    for (size_t j = 0; j < k; j++) {
      const Caffe2__OperatorDef *op = net->op[j];
      if (dm_str_in_list(c->input[0], (const char *const *)op->output, op->n_output) ||
          dm_str_in_list(c->output[0], (const char *const *)op->output, op->n_output) ||
          dm_str_in_list(c->output[0], (const char *const *)op->input, op->n_input))
        pos = j + 1;
    }
    while (pos < k && net->op[pos]->type && strcmp(net->op[pos]->type, "CopyCPUToGPU") == 0)
      pos++;
    memmove(&net->op[pos + 1], &net->op[pos], (k - pos) * sizeof *net->op);
    net->op[pos] = c;
  }
}

void dm_device_opts_init(dm_device_opts *o) { memset(o, 0, sizeof *o); }

void dm_device_summary_free(dm_device_summary *sum) {
  for (size_t i = 0; i < sum->n_gpu_state; i++)
    free(sum->gpu_state[i]);
  free(sum->gpu_state);
  free(sum->report);
  memset(sum, 0, sizeof *sum);
}

int dm_device_placed(const Caffe2__NetDef *net) {
  return dm_netdef_find_arg(net, DM_DEVICE_MARK) != NULL;
}

/* A placed net: only its GPU state, from where its ops run. */
static dm_status summarize_placed(pass *p, const Caffe2__NetDef *net) {
  int *locs = calloc(net->n_op + 1, sizeof *locs);
  if (!locs)
    return DM_NOMEM("the device plan");
  for (size_t i = 0; i < net->n_op; i++)
    locs[i] = effective_loc(net, net->op[i]);
  dm_status s = find_homes(p, net, locs);
  if (s == DM_OK)
    s = list_gpu_state(p);
  free(locs);
  return s;
}

dm_status dm_device_pass(Caffe2__NetDef *net, const dm_device_opts *o, dm_device_summary *sum) {
  memset(sum, 0, sizeof *sum);
  DM_TRY(dm_init()); /* the pass asks the registry for kernels */
  pass p = {.o = o, .sum = sum};
  dm_status s = DM_OK;
  if (dm_device_placed(net)) {
    sum->already = 1;
    s = summarize_placed(&p, net);
    free_pass(&p);
    return s;
  }
  DM_TRY(dm_memory_refuse_planned(net, "device placement"));
  if (o->device_id < 0)
    return dm_error(DM_ERR_INVALID, "device placement: GPU %d is not a device id", o->device_id);
  sum->ops_total = net->n_op;
  Caffe2__NetDef *w = NULL;
  int *locs = calloc(net->n_op + 1, sizeof *locs);
  s = locs ? DM_PB_CLONE(Caffe2__NetDef, net, &w) : DM_NOMEM("the device plan");
  if (s == DM_OK)
    s = dm_workspace_create(&p.ws);
  for (size_t i = 0; s == DM_OK && i < net->n_op; i++)
    s = decide(&p, i, net->op[i], &locs[i]);
  if (s == DM_OK)
    s = find_homes(&p, net, locs);
  if (s == DM_OK)
    s = list_gpu_state(&p);
  if (s == DM_OK)
    s = collect_names(&p, net);
  if (s == DM_OK)
    s = rewrite(&p, w, locs);
  if (s == DM_OK)
    hoist_uploads(p.out);
  char mark[32];
  snprintf(mark, sizeof mark, "CUDA:%d", o->device_id);
  if (s == DM_OK)
    s = dm_netdef_set_arg_string(net, DM_DEVICE_MARK, mark);
  if (s == DM_OK) { /* swap: the old ops are freed with p.out */
    Caffe2__OperatorDef **ops = net->op;
    size_t n = net->n_op;
    net->op = p.out->op;
    net->n_op = p.out->n_op;
    p.out->op = ops;
    p.out->n_op = n;
  }
  if (w) { /* ops already moved out are NULL here */
    for (size_t i = 0; i < w->n_op; i++)
      if (w->op[i])
        protobuf_c_message_free_unpacked(&w->op[i]->base, NULL);
    free(w->op);
    w->op = NULL;
    w->n_op = 0;
    protobuf_c_message_free_unpacked(&w->base, NULL);
  }
  free(locs);
  free_pass(&p);
  if (s != DM_OK)
    dm_device_summary_free(sum);
  return s;
}

/* Init nets ---------------------------------------------------------------------- */

static int all_in(char **names, size_t n, const char *const *set, size_t n_set) {
  for (size_t k = 0; k < n; k++)
    if (!dm_str_in_list(names[k], set, n_set))
      return 0;
  return 1;
}

/* Whether init op i moves to the GPU: all it writes and reads is GPU state, it is neither
 * pinned nor forced, and its CUDA kernel takes it (cuda_verdict). */
static dm_status init_op_to_gpu(dm_workspace *ws, size_t i, const Caffe2__OperatorDef *op,
                                const dm_device_opts *o, const char *const *gpu_blobs,
                                size_t n, int *to_gpu) {
  int pinned = op->device_option && op->device_option->has_device_type;
  *to_gpu = !pinned && op->n_output && all_in(op->output, op->n_output, gpu_blobs, n) &&
            all_in(op->input, op->n_input, gpu_blobs, n) &&
            !dm_str_in_list(op->type ? op->type : "", o->force_cpu, o->n_force_cpu);
  if (!*to_gpu)
    return DM_OK;
  char why[600];
  DM_TRY(cuda_verdict(ws, i, op, o->device_id, why, sizeof why));
  *to_gpu = why[0] == '\0';
  return DM_OK;
}

dm_status dm_device_place_init(Caffe2__NetDef *init, const dm_device_opts *o,
                               const char *const *gpu_blobs, size_t n, size_t *copies) {
  if (copies)
    *copies = 0;
  DM_TRY(dm_init());
  if (dm_device_placed(init))
    return DM_OK;
  /* Decide first, change after: a failure (out of memory) may leave some ops placed, but
   * never the copies half-appended or the mark set. */
  dm_device_summary sum = {0};
  pass p = {.o = o, .sum = &sum};
  char **sent = NULL; /* blobs written on the CPU that must go to the GPU, first write order */
  size_t n_sent = 0;
  dm_status s = DM_OK;
  int *to_gpu = calloc(init->n_op + 1, sizeof *to_gpu);
  if (!to_gpu) {
    s = DM_NOMEM("the init placement");
    goto cleanup;
  }
  if ((s = dm_workspace_create(&p.ws)) != DM_OK)
    goto cleanup;
  for (size_t i = 0; i < init->n_op; i++) {
    const Caffe2__OperatorDef *op = init->op[i];
    if ((s = init_op_to_gpu(p.ws, i, op, o, gpu_blobs, n, &to_gpu[i])) != DM_OK)
      goto cleanup;
    /* An input an earlier op of this net wrote on the CPU reaches the GPU only with the
     * copies at the end: its reader stays on the CPU too (a momentum filled in the shape
     * of a weight the layout pass re-laid there). */
    for (size_t k = 0; to_gpu[i] && k < op->n_input; k++)
      if (dm_str_in_list(op->input[k], (const char *const *)sent, n_sent))
        to_gpu[i] = 0;
    int pinned = op->device_option && op->device_option->has_device_type;
    int on_cpu = pinned ? option_loc(op->device_option) == LOC_CPU : !to_gpu[i];
    for (size_t k = 0; on_cpu && k < op->n_output; k++)
      if (dm_str_in_list(op->output[k], gpu_blobs, n) &&
          !dm_str_in_list(op->output[k], (const char *const *)sent, n_sent) &&
          (s = dm_strv_push(&sent, &n_sent, op->output[k])) != DM_OK)
        goto cleanup;
  }
  if ((s = dm_netdef_new(NULL, &p.out)) != DM_OK) /* the copies, moved to init at the end */
    goto cleanup;
  for (size_t k = 0; k < n_sent; k++)
    if ((s = emit_copy(&p, sent[k], sent[k], LOC_CPU, o->device_id)) != DM_OK)
      goto cleanup;
  for (size_t i = 0; i < init->n_op; i++)
    if (to_gpu[i] && (s = set_loc(init->op[i], o->device_id)) != DM_OK)
      goto cleanup;
  char mark[32];
  snprintf(mark, sizeof mark, "CUDA:%d", o->device_id);
  if ((s = dm_netdef_set_arg_string(init, DM_DEVICE_MARK, mark)) != DM_OK)
    goto cleanup;
  size_t total = init->n_op + p.out->n_op;
  Caffe2__OperatorDef **ops = realloc(init->op, (total + 1) * sizeof *ops);
  if (!ops) {
    s = DM_NOMEM("the init placement");
    goto cleanup;
  }
  for (size_t k = 0; k < p.out->n_op; k++)
    ops[init->n_op + k] = p.out->op[k];
  init->op = ops;
  init->n_op = total;
  p.out->n_op = 0;
  if (copies)
    *copies = sum.copies;
cleanup:
  free_pass(&p); /* the workspace, and p.out (emptied on success) */
  for (size_t k = 0; k < n_sent; k++)
    free(sent[k]);
  free(sent);
  free(to_gpu);
  return s;
}
