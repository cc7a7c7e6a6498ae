/* net.c: instantiating a NetDef (ops resolved and validated once) and running it in order. */
#include "net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/device.h"
#include "core/registry.h"
#include "op_origin.h"

const char *dm_op_describe(const dm_op_ctx *op, char *buf, size_t cap) {
  return dm_opdef_describe(op->def, (size_t)op->index, buf, cap);
}

static const char *plural(int n, const char *word, char *buf, size_t cap) {
  snprintf(buf, cap, "%d %s%s", n, word, n == 1 ? "" : "s");
  return buf;
}

static dm_status check_arity(const char *what, int n, int lo, int hi) {
  char a[32], b[32];
  if (n >= lo && (hi < 0 || n <= hi))
    return DM_OK;
  if (lo == hi)
    return dm_error(DM_ERR_INVALID, "takes %s, got %d", plural(lo, what, a, sizeof a), n);
  if (hi < 0)
    return dm_error(DM_ERR_INVALID, "takes at least %s, got %d", plural(lo, what, a, sizeof a), n);
  return dm_error(DM_ERR_INVALID, "takes %d to %s, got %d", lo, plural(hi, what, b, sizeof b), n);
}

static const char *arg_type_name(dm_arg_type t) {
  static const char *const names[] = {"?",      "float",   "int", "string", "floats",
                                      "ints",   "strings", "net", "tensor", "any"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* What the Argument actually carries, for messages. */
static const char *arg_carries(const Caffe2__Argument *a) {
  if (a->has_f) return "a float (f)";
  if (a->has_i) return "an int (i)";
  if (a->s.data || a->has_s) return "a string (s)";
  if (a->n_floats) return "floats";
  if (a->n_ints) return "ints";
  if (a->n_strings) return "strings";
  if (a->n) return "a net (n)";
  if (a->t) return "a tensor (t)";
  return "no value";
}

static int arg_matches(const Caffe2__Argument *a, dm_arg_type t) {
  int empty_list = !a->has_f && !a->has_i && !a->has_s && !a->n && !a->t && !a->n_floats &&
                   !a->n_ints && !a->n_strings && !a->n_nets && !a->n_tensors;
  switch (t) {
  case DM_ARG_FLOAT: return a->has_f || a->has_i;
  case DM_ARG_INT: return a->has_i;
  case DM_ARG_STRING: return a->has_s;
  case DM_ARG_FLOATS: return a->n_floats > 0 || a->n_ints > 0 || empty_list;
  case DM_ARG_INTS: return a->n_ints > 0 || empty_list;
  case DM_ARG_STRINGS: return a->n_strings > 0 || empty_list;
  case DM_ARG_NET: return a->n != NULL;
  case DM_ARG_TENSOR: return a->t != NULL;
  case DM_ARG_ANY: return 1;
  }
  return 0;
}

static char *bytes_dup(ProtobufCBinaryData b) {
  char *s = malloc(b.len + 1);
  if (s) {
    if (b.len)
      memcpy(s, b.data, b.len);
    s[b.len] = '\0';
  }
  return s;
}

static dm_status parse_args(dm_op_ctx *op) {
  const Caffe2__OperatorDef *d = op->def;
  op->n_args = d->n_arg;
  op->args = calloc(d->n_arg ? d->n_arg : 1, sizeof *op->args);
  if (!op->args)
    return DM_NOMEM("op arguments");
  for (size_t i = 0; i < d->n_arg; i++) {
    const Caffe2__Argument *a = d->arg[i];
    dm_arg *x = &op->args[i];
    x->pb = a;
    if (!a->name)
      return dm_error(DM_ERR_INVALID, "argument %zu has no name", i);
    for (size_t j = 0; j < i; j++)
      if (strcmp(d->arg[j]->name, a->name) == 0)
        return dm_error(DM_ERR_INVALID, "argument '%s' is given twice", a->name);
    if (a->has_s && !(x->s = bytes_dup(a->s)))
      return DM_NOMEM("a string argument");
    if (a->n_strings) {
      if (!(x->strs = calloc(a->n_strings + 1, sizeof *x->strs)))
        return DM_NOMEM("a string list argument");
      for (size_t j = 0; j < a->n_strings; j++)
        if (!(x->strs[j] = bytes_dup(a->strings[j])))
          return DM_NOMEM("a string list argument");
    }
  }
  /* Against the schema: required arguments present, known ones of the right type.
   * Arguments the schema does not list are allowed: Caffe2 nets carry hints (engine
   * tuning, `order` on ops that ignore it) that a kernel may not read. */
  for (const dm_arg_spec *spec = op->schema->args; spec && spec->name; spec++) {
    const dm_arg *found = NULL;
    for (size_t i = 0; i < op->n_args; i++)
      if (strcmp(op->args[i].pb->name, spec->name) == 0)
        found = &op->args[i];
    if (!found && spec->required)
      return dm_error(DM_ERR_INVALID, "missing required argument '%s' (%s)", spec->name,
                      arg_type_name(spec->type));
    if (found && !arg_matches(found->pb, spec->type))
      return dm_error(DM_ERR_TYPE, "argument '%s' must be %s, but it holds %s", spec->name,
                      arg_type_name(spec->type), arg_carries(found->pb));
  }
  return DM_OK;
}

static int inplace_allowed(const dm_op_schema *s, int in, int out) {
  if (s->inplace_any)
    return 1;
  for (const dm_inplace_pair *p = s->inplace; p && p->in >= 0; p++)
    if (p->in == in && p->out == out)
      return 1;
  return 0;
}

static dm_status resolve_blobs(dm_op_ctx *op, dm_workspace *ws) {
  const Caffe2__OperatorDef *d = op->def;
  op->n_in = (int)d->n_input;
  op->n_out = (int)d->n_output;
  op->in = calloc(d->n_input + 1, sizeof *op->in);
  op->out = calloc(d->n_output + 1, sizeof *op->out);
  if (!op->in || !op->out)
    return DM_NOMEM("op blob lists");
  for (int i = 0; i < op->n_in; i++) {
    if (!d->input[i] || !*d->input[i])
      return dm_error(DM_ERR_INVALID, "input %d has an empty name", i);
    DM_TRY(dm_workspace_get_or_create(ws, d->input[i], &op->in[i]));
  }
  for (int o = 0; o < op->n_out; o++) {
    if (!d->output[o] || !*d->output[o])
      return dm_error(DM_ERR_INVALID, "output %d has an empty name", o);
    DM_TRY(dm_workspace_get_or_create(ws, d->output[o], &op->out[o]));
    /* Kernels take their outputs to be distinct blobs: one named twice would be
     * resized by one output's code while another's writes into it. */
    for (int p = 0; p < o; p++)
      if (op->out[o] == op->out[p])
        return dm_error(DM_ERR_INVALID,
                        "outputs %d and %d are both '%s': an op may not name one blob twice "
                        "among its outputs",
                        p, o, d->output[o]);
    for (int i = 0; i < op->n_in; i++)
      if (op->out[o] == op->in[i] && !inplace_allowed(op->schema, i, o))
        return dm_error(DM_ERR_INVALID,
                        "output %d '%s' is input %d too, and this op cannot run in place", o,
                        d->output[o], i);
  }
  return DM_OK;
}

/* Everything instantiation checks before choosing a kernel: schema, arity, device,
 * arguments, blobs. `net_dev` is the net's device_option (may be NULL). */
static dm_status bind_op(dm_op_ctx *op, dm_workspace *ws, const Caffe2__OperatorDef *d,
                         const Caffe2__DeviceOption *net_dev) {
  op->def = d;
  op->ws = ws;
  if (!d->type || !*d->type)
    return dm_error(DM_ERR_INVALID, "the op has no type");
  op->schema = dm_schema_lookup(d->type);
  if (!op->schema)
    return dm_unknown_op_error(d->type);
  DM_TRY(check_arity("input", (int)d->n_input, op->schema->min_inputs, op->schema->max_inputs));
  DM_TRY(check_arity("output", (int)d->n_output, op->schema->min_outputs,
                     op->schema->max_outputs));
  const Caffe2__DeviceOption *dev = d->device_option ? d->device_option : net_dev;
  op->device = dev && dev->has_device_type ? (dm_device_type)dev->device_type : DM_CPU;
  op->device_id = dev && dev->has_device_id ? dev->device_id : 0;
  if (dev && dev->has_random_seed) {
    op->has_seed = 1;
    op->seed = dev->random_seed;
  }
  DM_TRY(parse_args(op));
  return resolve_blobs(op, ws);
}

/* The registry's lookup for op on `device`, its message ending with a supports hook's
 * reason (dm_op_refuse) when kernels exist but refuse. */
static dm_status lookup_kernel(dm_op_ctx *op, const dm_workspace *ws, dm_device_type device,
                               const dm_kernel_def **out) {
  dm_op_clear_refusal();
  const char *engine = op->reference_only                   ? DM_ENGINE_REFERENCE
                       : op->def->engine && *op->def->engine ? op->def->engine
                                                             : ws->engine;
  dm_status s = dm_kernel_lookup(op->def->type, device, engine, op, out);
  if (s == DM_ERR_UNSUPPORTED && *dm_op_last_refusal()) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dm_last_error());
    dm_error(s, "%s: %s", msg, dm_op_last_refusal());
  }
  return s;
}

/* The input dtypes as one number, to notice when they change between runs. */
static uint64_t input_dtypes(const dm_op_ctx *op) {
  uint64_t sig = 1469598103934665603u;
  for (int i = 0; i < op->n_in; i++)
    sig = (sig ^ (uint64_t)op->in[i]->tensor->dtype) * 1099511628211u;
  return sig;
}

/* Chooses op's kernel and makes its state. */
static dm_status bind_kernel(dm_op_ctx *op, dm_workspace *ws) {
  DM_TRY(lookup_kernel(op, ws, op->device, &op->kernel));
  op->keeps_layouts = dm_kernel_keeps_layouts(op->kernel);
  op->dtypes_seen = input_dtypes(op);
  if (op->device != DM_CPU)
    DM_TRY(dm_device_check(op->device, op->device_id));
  if (op->kernel->init)
    DM_TRY(op->kernel->init(op, &op->state));
  return DM_OK;
}

/* A kernel is chosen when the net is made, when some inputs' dtypes may not be known yet
 * (activations): its supports hook answered for what was known. Once they are, and
 * whenever they change, it is asked again, and a kernel that refuses gives way to the
 * next the registry offers (an engine that runs FLOAT but not FLOAT16, say). */
static dm_status recheck_kernel(dm_op_ctx *op) {
  uint64_t sig = input_dtypes(op);
  if (sig == op->dtypes_seen)
    return DM_OK;
  op->dtypes_seen = sig;
  dm_op_clear_refusal();
  if (op->kernel->supports(op))
    return DM_OK;
  if (op->kernel->fini && op->state)
    op->kernel->fini(op->state);
  op->state = NULL;
  return bind_kernel(op, op->net->ws);
}

static dm_status create_op(dm_net *net, int index, dm_op_ctx *op) {
  op->net = net;
  op->index = index;
  DM_TRY(bind_op(op, net->ws, net->def->op[index], net->def->device_option));
  return bind_kernel(op, net->ws);
}

static void free_op(dm_op_ctx *op) {
  if (op->kernel && op->kernel->fini && op->state)
    op->kernel->fini(op->state);
  for (size_t i = 0; op->args && i < op->n_args; i++) {
    free(op->args[i].s);
    if (op->args[i].strs)
      for (size_t j = 0; op->args[i].strs[j]; j++)
        free(op->args[i].strs[j]);
    free(op->args[i].strs);
  }
  free(op->args);
  free(op->in);
  free(op->out);
}

dm_status dm_op_probe_kernel(dm_workspace *ws, const Caffe2__OperatorDef *def,
                             dm_device_type device, int device_id, const dm_kernel_def **out) {
  dm_op_ctx op = {.index = -1};
  dm_status s = bind_op(&op, ws, def, NULL);
  op.device = device;
  op.device_id = device_id;
  if (s == DM_OK)
    s = lookup_kernel(&op, ws, device, out);
  free_op(&op);
  return s;
}

void dm_net_free(dm_net *net) {
  if (!net)
    return;
  dm_graph_plan_free(net->graph);
  for (size_t i = 0; i < net->n_ops; i++)
    free_op(&net->ops[i]);
  free(net->ops);
  free(net->op_seconds);
  free(net->op_reorders);
  if (net->def)
    protobuf_c_message_free_unpacked(&net->def->base, NULL);
  free(net->source);
  dm_net_require_finite(net, NULL, 0, NULL);
  free(net);
}

dm_status dm_net_append_op(dm_net *net, int index) {
  if (index < 0 || (size_t)index >= net->def->n_op)
    return dm_error(DM_ERR_INVALID, "op %d does not exist", index);
  if (net->op_seconds)
    return dm_error(DM_ERR_INVALID, "cannot add ops to a net being profiled");
  dm_graph_plan_free(net->graph); /* planned for the ops it had */
  net->graph = NULL;
  net->graph_planned = 0;
  if (net->n_ops == net->cap_ops) {
    size_t cap = net->cap_ops ? 2 * net->cap_ops : 16;
    dm_op_ctx *ops = realloc(net->ops, cap * sizeof *ops);
    if (!ops)
      return DM_NOMEM("a net's op list");
    net->ops = ops;
    net->cap_ops = cap;
  }
  dm_op_ctx *op = &net->ops[net->n_ops++];
  *op = (dm_op_ctx){0};
  return create_op(net, index, op);
}

dm_status dm_net_create(dm_workspace *ws, Caffe2__NetDef *def, const char *source, dm_net **out) {
  *out = NULL;
  dm_net *net = calloc(1, sizeof *net);
  if (!net) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return DM_NOMEM("a net");
  }
  net->ws = ws;
  net->first_nonfinite = -1;
  net->def = def;
  net->source = strdup(source ? source : "<memory>");
  net->cap_ops = def->n_op ? def->n_op : 1;
  net->ops = calloc(net->cap_ops, sizeof *net->ops);
  if (!net->source || !net->ops) {
    dm_net_free(net);
    return DM_NOMEM("a net");
  }
  for (size_t i = 0; i < def->n_op; i++) {
    dm_status s = dm_net_append_op(net, (int)i);
    if (s != DM_OK) {
      char what[256];
      dm_op_describe(&net->ops[i], what, sizeof what);
      dm_error_prefix(s, "%s: %s", net->source, what);
      dm_net_free(net);
      return s;
    }
  }
  *out = net;
  return DM_OK;
}

/* Before an op writes an output, detach it from storage another blob shares (a Reshape
 * view, say): writing one blob must not change another. An output that is also an input
 * (in place) gets a private copy of its data; any other output just drops the share. */
static dm_status detach_outputs(dm_op_ctx *op) {
  for (int o = 0; o < op->n_out; o++) {
    dm_tensor *t = op->out[o]->tensor;
    if (!t->storage || atomic_load(&t->storage->refs) == 1)
      continue;
    int in_place = 0;
    for (int i = 0; i < op->n_in; i++)
      in_place |= op->in[i] == op->out[o];
    if (!in_place)
      dm_tensor_reset(t);
    else
      DM_TRY(dm_tensor_make_unique(t));
  }
  return DM_OK;
}

/* A kernel reads its inputs where it runs: a CPU kernel handed a device pointer would
 * crash, a GPU kernel handed a host pointer likewise. Only copy kernels cross. */
static dm_status check_input_devices(const dm_op_ctx *op) {
  for (int i = 0; i < op->n_in; i++) {
    int id;
    dm_device_type dev = dm_tensor_device(op->in[i]->tensor, &id);
    if (dev == op->device && (dev == DM_CPU || id == op->device_id))
      continue;
    char at[32], runs[32];
    return dm_error(DM_ERR_INVALID,
                    "input %d '%s' is on %s but the op runs on %s: a copy op must bring it "
                    "over (the device pass inserts CopyCPUToGPU/CopyGPUToCPU)",
                    i, op->in[i]->name, dm_device_str(dev, id, at, sizeof at),
                    dm_device_str(op->device, op->device_id, runs, sizeof runs));
  }
  return DM_OK;
}

/* Kernels other than the layout-aware engine's see plain data: blocked inputs are
 * converted in their blobs (so the next plain reader finds them converted), and a blocked
 * output that is not also an input is dropped, since the kernel writes it afresh. */
static dm_status plain_layouts(dm_op_ctx *op) {
  for (int i = 0; i < op->n_in; i++)
    DM_TRY(dm_tensor_make_plain(op->in[i]->tensor));
  for (int o = 0; o < op->n_out; o++)
    if (!dm_tensor_is_plain(op->out[o]->tensor))
      dm_tensor_reset(op->out[o]->tensor); /* an input too would have been converted */
  return DM_OK;
}

static dm_status run_op(dm_op_ctx *op);

/* An engine's kernel that refused the op while running (dm_op_refuse, then
 * DM_ERR_UNSUPPORTED: oneDNN has no implementation for these shapes or this dtype on this
 * CPU) gives way to the plain kernel, for the rest of the net's life, which runs it now:
 * a refusal is not an error. The engine kernel fails before it writes any output. */
static dm_status fall_back(dm_op_ctx *op) {
  if (op->kernel->fini && op->state)
    op->kernel->fini(op->state);
  op->state = NULL;
  op->reference_only = 1;
  DM_TRY(bind_kernel(op, op->net->ws));
  return run_op(op);
}

static dm_status run_op(dm_op_ctx *op) {
  for (int i = 0; i < op->n_in; i++)
    if (op->in[i]->tensor->dtype == DM_UNDEFINED)
      return dm_error(DM_ERR_NOT_FOUND,
                      "input %d '%s' has no data: no earlier op wrote it and it was not fed", i,
                      op->in[i]->name);
  if (op->kernel->supports && op->net)
    DM_TRY(recheck_kernel(op));
  if (!op->kernel->cross_device)
    DM_TRY(check_input_devices(op));
  DM_TRY(detach_outputs(op));
  if (!op->keeps_layouts)
    DM_TRY(plain_layouts(op));
  dm_op_clear_refusal();
  dm_status st = op->kernel->run(op);
  /* Outputs may have been written through raw pointers (engine kernels, devices): new
   * versions, so a kernel that derived data from one of them derives it again. */
  for (int o = 0; o < op->n_out; o++)
    dm_tensor_touch(op->out[o]->tensor);
  if (st == DM_ERR_UNSUPPORTED && *dm_op_last_refusal() && op->net && op->kernel->engine &&
      *op->kernel->engine)
    return fall_back(op);
  return st;
}

void dm_net_set_check_finite(dm_net *net, int on) { net->check_finite = on; }

int dm_net_first_nonfinite(const dm_net *net, const dm_op_ctx **op, int *output) {
  if (net->first_nonfinite < 0 || (size_t)net->first_nonfinite >= net->n_ops)
    return 0;
  *op = &net->ops[net->first_nonfinite];
  *output = net->nonfinite_output;
  return 1;
}

static int has_nonfinite(const dm_tensor *t) {
  const void *data = dm_tensor_data(t); /* plain, converted if blocked */
  if (!data)
    return 0;
  if (t->dtype == DM_FLOAT) {
    const float *p = data;
    for (int64_t i = 0; i < t->numel; i++)
      if (!isfinite(p[i]))
        return 1;
  } else if (t->dtype == DM_FLOAT16 || t->dtype == DM_BFLOAT16) {
    const uint16_t *p = data; /* exponent all ones: inf or nan */
    const uint16_t exp = t->dtype == DM_FLOAT16 ? 0x7c00 : 0x7f80;
    for (int64_t i = 0; i < t->numel; i++)
      if ((p[i] & exp) == exp)
        return 1;
  }
  return 0;
}

/* Whether t is a floating-point tensor holding inf or nan. One on a GPU is scanned
 * through a host copy (a diagnostic mode: the copy waits for the GPU). */
static int tensor_nonfinite(const dm_tensor *t) {
  if (!t->storage ||
      (t->dtype != DM_FLOAT && t->dtype != DM_FLOAT16 && t->dtype != DM_BFLOAT16))
    return 0;
  if (t->storage->device == DM_CPU)
    return has_nonfinite(t);
  dm_tensor *host = dm_tensor_new(t->limit);
  int bad = host && dm_tensor_copy_to(host, DM_CPU, 0, t) == DM_OK && has_nonfinite(host);
  dm_tensor_free(host);
  return bad;
}

/* Index of the first output of `op` holding inf or nan, or -1. */
static int nonfinite_output(const dm_op_ctx *op) {
  for (int o = 0; o < op->n_out; o++) {
    if (tensor_nonfinite(op->out[o]->tensor))
      return o;
  }
  return -1;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

dm_status dm_net_set_profile(dm_net *net, int on) {
  free(net->op_seconds);
  free(net->op_reorders);
  net->op_seconds = NULL;
  net->op_reorders = NULL;
  net->profiled_runs = 0;
  if (on && (!(net->op_seconds = calloc(net->n_ops + 1, sizeof *net->op_seconds)) ||
             !(net->op_reorders = calloc(net->n_ops + 1, sizeof *net->op_reorders)))) {
    free(net->op_seconds);
    net->op_seconds = NULL;
    return DM_NOMEM("the op profile");
  }
  net->reorders0 = dm_layout_reorders();
  return DM_OK;
}

/* run_op, timed to the end of its device work. */
static dm_status run_op_timed(dm_net *net, size_t i) {
  dm_op_ctx *op = &net->ops[i];
  const dm_device_ops *dev = dm_device_ops_for(op->device);
  double t0 = now_seconds();
  uint64_t r0 = dm_layout_reorders().count;
  dm_status s = run_op(op);
  if (s == DM_OK && dev)
    s = dev->synchronize(op->device_id);
  net->op_seconds[i] += now_seconds() - t0;
  net->op_reorders[i] += dm_layout_reorders().count - r0;
  return s;
}

typedef struct type_total {
  const char *type;
  const char *engine; /* the kernel's ("" for the plain kernel) */
  double seconds;
  long ops;
  uint64_t reorders;
} type_total;

static int by_seconds_desc(const void *a, const void *b) {
  double x = ((const type_total *)a)->seconds, y = ((const type_total *)b)->seconds;
  return (x < y) - (x > y);
}

void dm_net_print_profile(const dm_net *net, FILE *f) {
  if (!net->op_seconds || net->profiled_runs == 0)
    return;
  type_total *t = calloc(net->n_ops + 1, sizeof *t);
  if (!t)
    return;
  size_t n = 0;
  double all = 0;
  for (size_t i = 0; i < net->n_ops; i++) {
    const char *type = net->ops[i].def->type;
    const char *engine = net->ops[i].kernel->engine ? net->ops[i].kernel->engine : "";
    size_t k = 0;
    while (k < n && (strcmp(t[k].type, type) != 0 || strcmp(t[k].engine, engine) != 0))
      k++;
    if (k == n) {
      t[n].type = type;
      t[n++].engine = engine;
    }
    t[k].seconds += net->op_seconds[i];
    t[k].reorders += net->op_reorders[i];
    t[k].ops++;
    all += net->op_seconds[i];
  }
  qsort(t, n, sizeof *t, by_seconds_desc);
  double runs = (double)net->profiled_runs;
  fprintf(f, "# profile of %ld runs: %.3f ms per run\n# %-26s %-10s %5s %10s %6s %8s\n",
          net->profiled_runs, 1e3 * all / runs, "op type", "engine", "ops", "ms/run", "share",
          "conv/run");
  for (size_t k = 0; k < n; k++)
    fprintf(f, "# %-26s %-10s %5ld %10.3f %5.1f%% %8.1f\n", t[k].type,
            *t[k].engine ? t[k].engine : "reference", t[k].ops, 1e3 * t[k].seconds / runs,
            all > 0 ? 100 * t[k].seconds / all : 0, (double)t[k].reorders / runs);
  free(t);
  /* Layout conversions in the profiled runs (inside the ops' times above; conv/run: an op
   * type's share): the engine's reorders between its blocked layouts and plain, of
   * inputs, outputs and weights, and the executor's conversions for plain kernels. */
  dm_reorder_totals r = dm_layout_reorders();
  fprintf(f, "# layout conversions: %.1f per run, %.3f MB per run, %.3f ms per run\n",
          (double)(r.count - net->reorders0.count) / runs,
          (double)(r.bytes - net->reorders0.bytes) / runs / 1e6,
          1e3 * (r.seconds - net->reorders0.seconds) / runs);
}

/* The recorder's view of the net (graph_exec.h): it runs and names ops through these. */
static dm_status host_run_op(void *self, size_t i) { return run_op(&((dm_net *)self)->ops[i]); }

static const char *host_describe(void *self, size_t i, char *buf, size_t cap) {
  return dm_op_describe(&((dm_net *)self)->ops[i], buf, cap);
}

void dm_net_set_graphs(dm_net *net, int on) {
  net->graphs_off = !on;
  dm_graph_plan_free(net->graph);
  net->graph = NULL;
  net->graph_planned = 0;
}

dm_status dm_net_set_device_graphs(dm_net *net, int on) {
  if (!net)
    return dm_error(DM_ERR_INVALID, "dm_net_set_device_graphs: NULL net");
  DM_TRY(dm_workspace_enter(net->ws, "dm_net_set_device_graphs"));
  dm_net_set_graphs(net, on);
  dm_workspace_leave(net->ws);
  return DM_OK;
}

void dm_net_run_counts(const dm_net *net, dm_run_counts *out) { *out = net->counts; }

void dm_net_graph_status(const dm_net *net, char *buf, size_t cap) {
  if (net->graphs_off) {
    snprintf(buf, cap, "device graphs off");
  } else if (!net->graph_planned) {
    snprintf(buf, cap, "device graphs: not planned yet (the net has not run)");
  } else if (!net->graph) {
    snprintf(buf, cap, "no device graph: %s", net->graph_why);
  } else {
    size_t first, end;
    dm_graph_plan_range(net->graph, &first, &end);
    const char *off = dm_graph_plan_why_off(net->graph);
    if (*off)
      snprintf(buf, cap, "device graph of ops %zu to %zu off: %s", first, end - 1, off);
    else
      snprintf(buf, cap, "device graph of ops %zu to %zu (%zu of %zu ops): %ld captured, %ld "
                         "replays",
               first, end - 1, end - first, net->n_ops, net->counts.captures,
               net->counts.graph_launches);
  }
}

/* Plans the device graph at the first run that may use one: graphs on, no profiling
 * or inf/nan scan (both look at each op). */
static dm_status graph_for_run(dm_net *net, dm_graph_plan **out) {
  *out = NULL;
  if (net->graphs_off || net->op_seconds || net->check_finite)
    return DM_OK;
  if (!net->graph_planned) {
    const dm_graph_host host = {net, net->ops, net->n_ops, host_run_op, host_describe};
    DM_TRY(dm_graph_plan_make(&host, &net->graph, net->graph_why, sizeof net->graph_why));
    net->graph_planned = 1;
  }
  *out = net->graph;
  return DM_OK;
}

static dm_status run_failed(dm_net *net, dm_status s, size_t i) {
  char what[256];
  const char *name = net->def->name && *net->def->name ? net->def->name : net->source;
  return dm_error_prefix(s, "net '%s': %s", name, dm_op_describe(&net->ops[i], what, sizeof what));
}

static dm_status run_ops(dm_net *net) {
  net->first_nonfinite = -1;
  if (net->op_seconds)
    net->profiled_runs++;
  dm_graph_plan *graph;
  DM_TRY(graph_for_run(net, &graph));
  size_t g_first = 0, g_end = 0;
  if (graph)
    dm_graph_plan_range(graph, &g_first, &g_end);
  long syncs0 = dm_device_host_syncs();
  for (size_t i = 0; i < net->n_ops; i++) {
    if (graph && i == g_first) {
      size_t failed;
      dm_status s = dm_graph_plan_run(graph, &net->counts, &failed);
      if (s != DM_OK)
        return run_failed(net, s, failed);
      i = g_end - 1;
      continue;
    }
    if (net->ops[i].device != DM_CPU)
      net->counts.device_ops++;
    dm_status s = net->op_seconds ? run_op_timed(net, i) : run_op(&net->ops[i]);
    if (s == DM_OK && net->check_finite && net->first_nonfinite < 0) {
      int o = nonfinite_output(&net->ops[i]);
      if (o >= 0) {
        net->first_nonfinite = (long)i;
        net->nonfinite_output = o;
      }
    }
    if (s != DM_OK)
      return run_failed(net, s, i);
  }
  net->counts.host_syncs += dm_device_host_syncs() - syncs0;
  net->counts.runs++;
  return DM_OK;
}

dm_status dm_net_require_finite(dm_net *net, const char *const *names, size_t n,
                                const char *hint) {
  for (size_t i = 0; i < net->n_finite_blobs; i++)
    free(net->finite_blobs[i]);
  free(net->finite_blobs);
  free(net->finite_hint);
  net->finite_blobs = NULL;
  net->finite_hint = NULL;
  net->n_finite_blobs = 0;
  if (n == 0)
    return DM_OK;
  net->finite_blobs = calloc(n, sizeof *net->finite_blobs);
  net->finite_hint = strdup(hint ? hint : "");
  if (!net->finite_blobs || !net->finite_hint)
    return DM_NOMEM("a net's list of outputs to check");
  for (; net->n_finite_blobs < n; net->n_finite_blobs++)
    if (!(net->finite_blobs[net->n_finite_blobs] = strdup(names[net->n_finite_blobs])))
      return DM_NOMEM("a net's list of outputs to check");
  return DM_OK;
}

/* The first required blob (dm_net_require_finite) holding inf/nan after a run, or NULL. */
static const char *nonfinite_required(const dm_net *net) {
  for (size_t i = 0; i < net->n_finite_blobs; i++) {
    const dm_tensor *t = dm_workspace_tensor(net->ws, net->finite_blobs[i]);
    if (t && tensor_nonfinite(t))
      return net->finite_blobs[i];
  }
  return NULL;
}

/* A required output held inf/nan: the net runs once more with the per-op scan on (its
 * inputs unchanged, an inference net computes the same) to name the first op. */
static dm_status nonfinite_failure(dm_net *net, const char *blob) {
  char op_what[256], what[600] = "";
  int was = net->check_finite;
  net->check_finite = 1;
  const dm_op_ctx *op;
  int out;
  if (run_ops(net) == DM_OK && dm_net_first_nonfinite(net, &op, &out))
    snprintf(what, sizeof what, "; the first inf/nan came from %s, output %d '%s'",
             dm_op_describe(op, op_what, sizeof op_what), out, dm_op_output_name(op, out));
  net->check_finite = was;
  const char *net_name = net->def->name && *net->def->name ? net->def->name : net->source;
  return dm_error(DM_ERR_NONFINITE, "net '%s': output '%s' holds inf or nan%s%s%s", net_name,
                  blob, what, *net->finite_hint ? ": " : "", net->finite_hint);
}

/* A run, its outputs checked (dm_net_require_finite), inside the workspace's guard. */
static dm_status run_entered(dm_net *net) {
  DM_TRY(run_ops(net));
  const char *bad = nonfinite_required(net);
  return bad ? nonfinite_failure(net, bad) : DM_OK;
}

dm_status dm_net_run(dm_net *net) {
  if (!net)
    return dm_error(DM_ERR_INVALID, "dm_net_run: NULL net");
  DM_TRY(dm_workspace_enter(net->ws, "dm_net_run"));
  return dm_workspace_leave_with(net->ws, run_entered(net));
}

const char *dm_net_name(const dm_net *net) {
  if (!net) {
    dm_error(DM_ERR_INVALID, "dm_net_name: NULL net");
    return "";
  }
  return net->def->name ? net->def->name : "";
}
