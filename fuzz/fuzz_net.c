/* fuzz_net.c: the random-net fuzzer. From its input it builds a small net out of the
 * ops in the registry (whatever dm_init registered: every schema but the ones that do
 * file I/O), instantiates it in a fresh workspace and runs it twice on the CPU. A clean
 * error status is fine; a crash, leak, sanitizer report or timeout is a bug.
 *
 * The net: an init net of 1-3 fills (ConstantFill, the GivenTensor*Fill family, the
 * random fills) giving blobs of small shapes, so later ops see real tensors; then a net
 * of 1-8 ops of any type, each with an input count in its schema's range (and
 * sometimes outside it), blob names from a pool of six, and each argument of its
 * schema present or not, with a value drawn from a table of edge cases (and now and
 * then of the wrong kind). One input in four goes through the training pipeline first
 * (gradient, optimizer, and maybe mixed precision and the memory pass), so gradient
 * makers and the passes see the same nets. Memory and time stay bounded by the
 * workspace's per-tensor limit (64 KiB), which every allocation of a tensor checks: an
 * op that allocates past it without asking is itself a finding.
 *
 * The input is read by fuzz_input.h's cursor: every byte is one choice, so mutations
 * change the net locally. FUZZ_NET_PRINT=1 prints the nets an input builds and the
 * status they end with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/netio.h"
#include "core/registry.h"
#include "fuzz_input.h"
#include "net/api.h"
#include "net/netdef_build.h"
#include "net/passes/pipeline.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LIMIT ((uint64_t)64 << 10)
#define MAX_OPS 8
#define POOL 6
#define MAX_LIST 6

static const char *const pool[POOL] = {"x0", "x1", "x2", "x3", "x4", "x5"};

/* Ops that read or write files (or LMDBs) do not belong in a net built from noise: they
 * have their own fuzzer (fuzz_lmdb_record) and would litter the disk. */
static const char *const skipped[] = {"Save", "Load", "TensorProtosDBInput"};

static const char *const fills[] = {"ConstantFill", "GivenTensorFill", "GivenTensorIntFill",
    "GivenTensorInt64Fill", "GivenTensorBoolFill", "GivenTensorDoubleFill",
    "GivenTensorStringFill", "UniformFill", "GaussianFill", "XavierFill", "MSRAFill"};

/* The schemas a net may use (the registry's order is sorted, so stable). */
static const dm_op_schema *ops[512];
static size_t n_ops;

static void fail(const char *what) {
  fprintf(stderr, "fuzz_net: %s: %s\n", what, dm_last_error());
  __builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  setenv("OMP_NUM_THREADS", "1", 0); /* one fuzzer, one core */
  if (dm_init() != DM_OK)
    fail("dm_init");
  for (size_t i = 0; i < dm_schema_count() && n_ops < sizeof ops / sizeof *ops; i++) {
    const dm_op_schema *s = dm_schema_at(i);
    if (!dm_str_in_list(s->type, skipped, sizeof skipped / sizeof *skipped))
      ops[n_ops++] = s;
  }
  return 0;
}

/* Edge cases first, then small values, which shapes, axes and counts want most. */
static int64_t gen_int(fz_in *in) {
  static const int64_t edge[] = {INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN, (int64_t)1 << 31,
      (int64_t)1 << 32, (int64_t)1 << 62, 65536, 1000, 255, 256, -1, -2, -3};
  uint8_t b = fz_u8(in);
  if (b >= 240)
    return edge[(b - 240) % (sizeof edge / sizeof *edge)];
  return (int64_t)(b % 16) - 2; /* -2 .. 13 */
}

static float gen_float(fz_in *in) {
  static const float edge[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 3.4e38f, 1e-40f,
      65504.0f, 65520.0f, 1e-8f, -0.0f, 0.5f, 1.0f / 256, 1e5f};
  uint8_t b = fz_u8(in);
  if (b >= 240)
    return edge[(b - 240) % (sizeof edge / sizeof *edge)];
  return ((float)b - 100.0f) / 16.0f;
}

static ProtobufCBinaryData gen_string(fz_in *in) {
  static const char *const words[] = {"", "x0", "x1", "NCHW", "NHWC", "float", "FLOAT",
      "float16", "FLOAT16", "bfloat16", "int32", "INT64", "uint8", "bool", "double", "string",
      "fixed", "step", "exp", "inv", "multistep", "poly", "CUDNN", "lmdb", "0", "-1", "\xff",
      "a,b"};
  const char *w = words[fz_pick(in, sizeof words / sizeof *words)];
  return (ProtobufCBinaryData){strlen(w), (uint8_t *)w};
}

/* Fills *a (whose arrays point into the caller's buffers) with a value of kind `t`
 * (a random kind for DM_ARG_ANY and the rest). */
static void gen_arg(fz_in *in, dm_arg_type t, Caffe2__Argument *a, int64_t *ints, float *floats,
                    ProtobufCBinaryData *strs) {
  if (t != DM_ARG_FLOAT && t != DM_ARG_INT && t != DM_ARG_STRING && t != DM_ARG_INTS &&
      t != DM_ARG_FLOATS && t != DM_ARG_STRINGS)
    t = (dm_arg_type)(DM_ARG_FLOAT + fz_pick(in, 6));
  switch (t) {
  case DM_ARG_FLOAT: a->has_f = 1, a->f = gen_float(in); break;
  case DM_ARG_INT: a->has_i = 1, a->i = gen_int(in); break;
  case DM_ARG_STRING: a->has_s = 1, a->s = gen_string(in); break;
  case DM_ARG_INTS:
    a->n_ints = fz_pick(in, MAX_LIST + 1), a->ints = ints;
    for (size_t k = 0; k < a->n_ints; k++)
      ints[k] = gen_int(in);
    break;
  case DM_ARG_FLOATS:
    a->n_floats = fz_pick(in, MAX_LIST + 1), a->floats = floats;
    for (size_t k = 0; k < a->n_floats; k++)
      floats[k] = gen_float(in);
    break;
  default:
    a->n_strings = fz_pick(in, MAX_LIST + 1), a->strings = strs;
    for (size_t k = 0; k < a->n_strings; k++)
      strs[k] = gen_string(in);
    break;
  }
}

/* The wrong kind now and then: argument checking is under test too. */
static dm_arg_type maybe_wrong(fz_in *in, dm_arg_type t) {
  return fz_u8(in) >= 248 ? DM_ARG_ANY : t;
}

/* How many inputs or outputs: mostly within [lo, hi] (hi -1: unbounded), sometimes not. */
static int gen_count(fz_in *in, int lo, int hi) {
  uint8_t b = fz_u8(in);
  if (b >= 248)
    return b % 5;
  int top = hi < 0 ? lo + 3 : hi;
  if (top > POOL)
    top = POOL;
  return lo > top ? lo : lo + b % (top - lo + 1);
}

static void add_args(fz_in *in, dm_opb *b, const dm_op_schema *s, int numel) {
  for (const dm_arg_spec *sp = s->args; sp && sp->name; sp++) {
    uint8_t how = fz_u8(in);
    if (!sp->required && !(how & 1))
      continue;
    Caffe2__Argument a = CAFFE2__ARGUMENT__INIT;
    int64_t ints[MAX_LIST];
    float floats[MAX_LIST];
    ProtobufCBinaryData strs[MAX_LIST];
    a.name = (char *)sp->name;
    if (numel >= 0 && strcmp(sp->name, "values") == 0 && (how & 2)) {
      /* a fill's values, as many as its shape holds, mostly */
      static float fv[64];
      static int64_t iv[64];
      static ProtobufCBinaryData sv[64];
      size_t n = (size_t)numel + (how >> 7);
      if (n > 64)
        n = 64;
      for (size_t k = 0; k < n; k++)
        fv[k] = gen_float(in), iv[k] = gen_int(in), sv[k] = gen_string(in);
      if (sp->type == DM_ARG_FLOATS)
        a.n_floats = n, a.floats = fv;
      else if (sp->type == DM_ARG_INTS)
        a.n_ints = n, a.ints = iv;
      else
        a.n_strings = n, a.strings = sv;
    } else {
      gen_arg(in, maybe_wrong(in, sp->type), &a, ints, floats, strs);
    }
    dm_opb_copy_arg(b, &a);
  }
  if (fz_u8(in) >= 250) { /* an argument the schema does not know */
    Caffe2__Argument a = CAFFE2__ARGUMENT__INIT;
    int64_t ints[MAX_LIST];
    float floats[MAX_LIST];
    ProtobufCBinaryData strs[MAX_LIST];
    a.name = "fuzz_unknown";
    gen_arg(in, DM_ARG_ANY, &a, ints, floats, strs);
    dm_opb_copy_arg(b, &a);
  }
}

static const dm_op_schema *find_schema(const char *type) {
  for (size_t i = 0; i < n_ops; i++)
    if (strcmp(ops[i]->type, type) == 0)
      return ops[i];
  return NULL;
}

/* A fill of a small shape (rank 0-4, dims 0-4) into a pool blob. */
static void add_fill(fz_in *in, Caffe2__NetDef *net) {
  const dm_op_schema *s = find_schema(fills[fz_pick(in, sizeof fills / sizeof *fills)]);
  if (!s)
    return;
  int64_t dims[4];
  size_t rank = fz_pick(in, 5);
  int numel = 1;
  for (size_t d = 0; d < rank; d++)
    numel *= (int)(dims[d] = fz_pick(in, 5));
  dm_opb b;
  dm_opb_start(&b, s->type);
  dm_opb_output(&b, pool[fz_pick(in, POOL)]);
  dm_opb_arg_ints(&b, "shape", dims, rank);
  add_args(in, &b, s, numel);
  dm_opb_append(&b, net); /* a failure frees the op and skips it */
}

static void add_op(fz_in *in, Caffe2__NetDef *net) {
  const dm_op_schema *s = ops[fz_u16(in) % n_ops];
  dm_opb b;
  dm_opb_start(&b, s->type);
  int ni = gen_count(in, s->min_inputs, s->max_inputs);
  for (int i = 0; i < ni; i++)
    dm_opb_input(&b, pool[fz_pick(in, POOL)]);
  int no = gen_count(in, s->min_outputs, s->max_outputs);
  for (int i = 0; i < no; i++)
    dm_opb_output(&b, pool[fz_pick(in, POOL)]);
  add_args(in, &b, s, -1);
  if (fz_u8(in) >= 252) { /* a device this build does not have */
    Caffe2__DeviceOption d = CAFFE2__DEVICE_OPTION__INIT;
    d.has_device_type = 1, d.device_type = 1;
    dm_opb_device_option(&b, &d);
  }
  dm_opb_append(&b, net);
}

static void print_net(const Caffe2__NetDef *net) { /* FUZZ_NET_PRINT: what an input builds */
  char *text = NULL;
  size_t len = 0;
  if (net && dm_text_print(&net->base, &text, &len) == DM_OK)
    fprintf(stderr, "%s\n", text);
  free(text);
}

/* The training passes on the forward net: gradient for the loss (output 0 of the last
 * op), optimizer (the fills' blobs are the parameters), and by the mode byte mixed
 * precision (FP16 or BF16, dynamic or no loss scaling) and the memory pass. */
static dm_status train_passes(uint8_t mode, Caffe2__NetDef *net, Caffe2__NetDef **init_add) {
  if (!net->n_op || !net->op[net->n_op - 1]->n_output)
    return DM_ERR_INVALID;
  /* A copy: the passes rename outputs in place, freeing the net's own string. */
  char name[64];
  snprintf(name, sizeof name, "%s", net->op[net->n_op - 1]->output[0]);
  const char *loss = name;
  dm_pipeline_opts o;
  dm_pipeline_opts_init_training(&o, &loss, 1, NULL, 0);
  o.mixed_precision = (mode >> 2) & 1;
  o.mp.target = (mode >> 3) & 1 ? DM_BFLOAT16 : DM_FLOAT16;
  o.mp.scaling = (mode >> 4) & 1 ? DM_LOSS_SCALE_NONE : DM_LOSS_SCALE_DYNAMIC;
  o.memory = (mode >> 5) & 1;
  dm_pipeline_result r = {0};
  dm_status s = dm_pipeline_run(net, &o, init_add, &r);
  dm_pipeline_result_free(&r);
  return s;
}

/* Instantiates `def` (taken) in ws and runs it `runs` times. */
static dm_status create_run(dm_workspace *ws, Caffe2__NetDef *def, int runs) {
  if (getenv("FUZZ_NET_PRINT"))
    print_net(def);
  dm_net *n = NULL;
  dm_status s = dm_workspace_create_net(ws, def, "fuzz", &n);
  for (int r = 0; r < runs && s == DM_OK; r++)
    s = dm_net_run(n);
  return s;
}

/* Mode byte: bits 0-1 == 3: a training net through the pipeline (bits 2-5 choose its
 * passes, see train_passes), else the forward net as built. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size};
  uint8_t mode = fz_u8(&in);
  Caffe2__NetDef *init = NULL, *net = NULL, *init_add = NULL;
  if (dm_netdef_new("fuzz_init", &init) != DM_OK || dm_netdef_new("fuzz", &net) != DM_OK)
    fail("dm_netdef_new");
  int n_fill = 1 + (int)fz_pick(&in, 3), n_op = 1 + (int)fz_pick(&in, MAX_OPS);
  for (int i = 0; i < n_fill; i++)
    add_fill(&in, init);
  for (int i = 0; i < n_op; i++)
    add_op(&in, net);

  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK)
    fail("dm_workspace_create");
  dm_workspace_set_tensor_limit(ws, LIMIT);
  dm_status s = DM_OK;
  if ((mode & 3) == 3)
    s = train_passes(mode, net, &init_add);
  if (s == DM_OK)
    s = create_run(ws, init, 1);
  else
    protobuf_c_message_free_unpacked(&init->base, NULL);
  if (s == DM_OK && init_add)
    s = create_run(ws, init_add, 1);
  else if (init_add)
    protobuf_c_message_free_unpacked(&init_add->base, NULL);
  /* Twice: kernels keep state between runs (cached shapes, buffers reused). */
  if (s == DM_OK)
    s = create_run(ws, net, 2);
  else
    protobuf_c_message_free_unpacked(&net->base, NULL);
  if (getenv("FUZZ_NET_PRINT"))
    fprintf(stderr, "status %s: %s\n", dm_status_name(s), s == DM_OK ? "" : dm_last_error());
  dm_workspace_destroy(ws);
  return 0;
}
