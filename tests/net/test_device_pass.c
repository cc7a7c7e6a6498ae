/* test_device_pass.c: the device placement pass and the init-net placement.
 *
 * The test registers its own op types with fake CUDA kernels (never run), so what goes
 * to the GPU does not depend on which real CUDA kernels exist:
 *   DevGpu (2 in, 1 out) and DevGpuFill (0 in): CPU and CUDA kernels;
 *   DevCpu (1 in, 1 out, in place allowed), DevFill (0 in): CPU kernels only.
 * It checks placement, one copy per boundary shared by later readers and refreshed after
 * a rewrite, writes of GPU state by a CPU-only op (copy back), homes of state, pinned
 * ops, force_cpu, a GPU-to-GPU crossing refused, idempotence, determinism, the refusal
 * after the memory pass, the text round trip, dm_device_place_init, that forms whose
 * kernels read values on the host (Reshape with a shape input...) stay on the CPU, and
 * that a placed net cannot be instantiated on a machine without a usable GPU.
 * What decides, with no op names in the pass: DevHost's schema marks input 1 host-read
 * (a present one keeps the op on the CPU); DevPicky's CUDA kernels answer supports():
 * the plain one refuses mode != 0 (with a reason), the FAST engine refuses everything
 * (so an op asking for FAST still gets the plain kernel, as the executor would).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/device.h"
#include "core/netio.h"
#include "core/registry.h"
#include "net/passes/device_pass.h"
#include "net/passes/memory_pass.h"
#include "net/netdef_build.h"
#include "netdef_test_util.h"
#include "test_util.h"

static dm_status stub_run(dm_op_ctx *ctx) {
  (void)ctx;
  return DM_OK;
}

static const dm_inplace_pair any_inplace[] = {{0, 0}, {-1, -1}};
static const dm_op_schema gpu_schema = {DM_SCHEMA_SIZE, .type = "DevGpu", .min_inputs = 2, .max_inputs = 2,
                                        .min_outputs = 1, .max_outputs = 1};
static const dm_op_schema gpu_fill_schema = {DM_SCHEMA_SIZE, .type = "DevGpuFill", .min_outputs = 1,
                                             .max_outputs = 1, .no_gradient = 1};
static const dm_op_schema cpu_schema = {DM_SCHEMA_SIZE, .type = "DevCpu", .min_inputs = 1, .max_inputs = 1,
                                        .min_outputs = 1, .max_outputs = 1,
                                        .inplace = any_inplace};
static const dm_op_schema fill_schema = {DM_SCHEMA_SIZE, .type = "DevFill", .min_outputs = 1, .max_outputs = 1,
                                         .no_gradient = 1};
static const dm_op_schema host_schema = {DM_SCHEMA_SIZE, .type = "DevHost", .min_inputs = 1,
                                         .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
                                         .host_inputs = 0x2};
static const dm_arg_spec picky_args[] = {{"mode", DM_ARG_INT, 0, NULL}, {NULL, 0, 0, NULL}};
static const dm_op_schema picky_schema = {DM_SCHEMA_SIZE, .type = "DevPicky", .min_inputs = 1,
                                          .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
                                          .args = picky_args};

static int picky_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "mode", 0) != 0)
    return dm_op_refuse(ctx, "DevPicky on CUDA runs mode 0 only");
  return 1;
}

static int never_supports(const dm_op_ctx *ctx) { return dm_op_refuse(ctx, "FAST never runs"); }

static const dm_kernel_def kernels[] = {
    {DM_KERNEL_SIZE, "DevHost", DM_CPU, NULL, NULL, stub_run, NULL, 0, NULL},
    {DM_KERNEL_SIZE, "DevHost", DM_CUDA, NULL, NULL, stub_run, NULL, 0, NULL},
    {DM_KERNEL_SIZE, "DevPicky", DM_CPU, NULL, NULL, stub_run, NULL, 0, NULL},
    {DM_KERNEL_SIZE, "DevPicky", DM_CUDA, NULL, NULL, stub_run, NULL, 0, picky_supports},
    {DM_KERNEL_SIZE, "DevPicky", DM_CUDA, "FAST", NULL, stub_run, NULL, 0, never_supports},
    {DM_KERNEL_SIZE, "DevGpu", DM_CPU, NULL, NULL, stub_run, NULL, 0},
    {DM_KERNEL_SIZE, "DevGpu", DM_CUDA, NULL, NULL, stub_run, NULL, 0},
    {DM_KERNEL_SIZE, "DevGpuFill", DM_CPU, NULL, NULL, stub_run, NULL, 0},
    {DM_KERNEL_SIZE, "DevGpuFill", DM_CUDA, "FAKE", NULL, stub_run, NULL, 0}, /* only under its engine */
    {DM_KERNEL_SIZE, "DevCpu", DM_CPU, NULL, NULL, stub_run, NULL, 0},
    {DM_KERNEL_SIZE, "DevFill", DM_CPU, NULL, NULL, stub_run, NULL, 0},
};

static int setup_registry(void **state) {
  (void)state;
  if (dm_init() != DM_OK)
    return -1;
  if (dm_register_schema(&gpu_schema) || dm_register_schema(&gpu_fill_schema) ||
      dm_register_schema(&cpu_schema) || dm_register_schema(&fill_schema) ||
      dm_register_schema(&host_schema) || dm_register_schema(&picky_schema))
    return -1;
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
    if (dm_register_kernel(&kernels[i]))
      return -1;
  return 0;
}

/* "Type(in,in)>out@G" per op (@G: CUDA:0, @G1: CUDA:1, @C: CPU), joined by spaces. */
static void summarize(const Caffe2__NetDef *net, char *buf, size_t cap) {
  op_list(net, OPL_OUTPUTS | OPL_DEVICE, buf, cap);
}

/* x is written on the CPU and read twice on the GPU (one shared copy), rewritten on the
 * CPU in place, read on the GPU again (a fresh copy); w is state first read on the GPU;
 * DevCpu updates w in place (copy in, copy back); `it` is state pinned to the CPU. */
static const char *const main_net =
    "name: \"main\"\n"
    "op { type: \"DevFill\" output: \"x\" }\n"
    "op { type: \"DevGpu\" input: \"x\" input: \"w\" output: \"y\" }\n"
    "op { type: \"DevGpu\" input: \"x\" input: \"y\" output: \"z\" }\n"
    "op { type: \"DevCpu\" input: \"z\" output: \"zc\" }\n"
    "op { type: \"DevCpu\" input: \"x\" output: \"x\" }\n"
    "op { type: \"DevGpu\" input: \"x\" input: \"w\" output: \"y2\" }\n"
    "op { type: \"DevCpu\" input: \"w\" output: \"w\" }\n"
    "op { type: \"DevGpu\" input: \"w\" input: \"m\" output: \"q\" }\n"
    "op { type: \"DevGpu\" input: \"it\" input: \"it\" output: \"it\" "
    "device_option { device_type: 0 } }\n"
    "external_input: \"w\" external_input: \"m\" external_input: \"it\"\n";

static void test_placement(void **unused) {
  (void)unused;
  Caffe2__NetDef *net = parse(main_net);
  dm_device_opts o;
  dm_device_opts_init(&o);
  dm_device_summary sum;
  assert_ok(dm_device_pass(net, &o, &sum));
  char got[2048];
  summarize(net, got, sizeof got);
  assert_string_equal(got,
                      "DevFill()>x@C "
                      "CopyCPUToGPU(x)>x_cuda@G DevGpu(x_cuda,w)>y@G DevGpu(x_cuda,y)>z@G "
                      "CopyGPUToCPU(z)>z_cpu@G DevCpu(z_cpu)>zc@C "
                      "DevCpu(x)>x@C "
                      "CopyCPUToGPU(x)>x_cuda@G DevGpu(x_cuda,w)>y2@G "
                      "CopyGPUToCPU(w)>w_cpu@G DevCpu(w_cpu)>w_cpu@C CopyCPUToGPU(w_cpu)>w@G "
                      "DevGpu(w,m)>q@G "
                      "DevGpu(it,it)>it@C");
  assert_int_equal(sum.ops_total, 9);
  assert_int_equal(sum.ops_device, 4);
  assert_int_equal(sum.kept_no_kernel, 4);
  assert_int_equal(sum.kept_pinned, 1);
  assert_int_equal(sum.kept_forced, 0);
  assert_int_equal(sum.copies, 5);
  assert_int_equal(sum.already, 0);
  /* state read before written and homed on the GPU, in first-touch order; `it` is the
   * CPU's (pinned), x is written first */
  assert_int_equal(sum.n_gpu_state, 2);
  assert_string_equal(sum.gpu_state[0], "w");
  assert_string_equal(sum.gpu_state[1], "m");
  assert_non_null(strstr(sum.report, "op 0 (DevFill) CPU: no CUDA kernel"));
  assert_non_null(strstr(sum.report, "op 8 (DevGpu) CPU: pinned"));
  assert_true(dm_device_placed(net));
  const Caffe2__Argument *mark = dm_netdef_find_arg(net, DM_DEVICE_MARK);
  assert_non_null(mark);
  assert_int_equal(mark->s.len, 6);
  assert_memory_equal(mark->s.data, "CUDA:0", 6);
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_engine_and_device_id(void **unused) {
  (void)unused;
  /* DevGpuFill has a CUDA kernel only under engine FAKE; GPU 1 names copies X_cuda1 and
   * an existing blob named like a copy is not clobbered */
  Caffe2__NetDef *net = parse("op { type: \"DevGpuFill\" output: \"a\" }\n"
                              "op { type: \"DevGpuFill\" output: \"b\" engine: \"X, FAKE\" }\n"
                              "op { type: \"DevFill\" output: \"c\" }\n"
                              "op { type: \"DevFill\" output: \"c_cuda1\" }\n"
                              "op { type: \"DevGpu\" input: \"c\" input: \"b\" output: \"d\" "
                              "device_option { random_seed: 7 } }\n");
  dm_device_opts o;
  dm_device_opts_init(&o);
  o.device_id = 1;
  dm_device_summary sum;
  assert_ok(dm_device_pass(net, &o, &sum));
  char got[1024];
  summarize(net, got, sizeof got);
  /* the upload moves up to just after c's writer (hoisted: uploads start a step) */
  assert_string_equal(got, "DevGpuFill()>a@C DevGpuFill()>b@G1 DevFill()>c@C "
                           "CopyCPUToGPU(c)>c_cuda1_2@G1 DevFill()>c_cuda1@C "
                           "DevGpu(c_cuda1_2,b)>d@G1");
  assert_int_equal(net->op[5]->device_option->random_seed, 7); /* other fields kept */
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_force_cpu_and_host_blobs(void **unused) {
  (void)unused;
  Caffe2__NetDef *net = parse(main_net);
  dm_device_opts o;
  dm_device_opts_init(&o);
  const char *force[] = {"DevGpu"};
  o.force_cpu = force;
  o.n_force_cpu = 1;
  dm_device_summary sum;
  assert_ok(dm_device_pass(net, &o, &sum));
  assert_int_equal(sum.ops_device, 0);
  assert_int_equal(sum.kept_forced, 4);
  assert_int_equal(sum.copies, 0);
  assert_int_equal(sum.n_gpu_state, 0);
  for (size_t i = 0; i < net->n_op; i++) /* nothing placed, no device_option added */
    assert_true(!net->op[i]->device_option || net->op[i]->device_option->device_type == 0);
  assert_non_null(strstr(sum.report, "op 1 (DevGpu) CPU: its type is on the CPU list"));
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);

  /* a blob the caller feeds from the host is homed on the CPU: copied, not GPU state */
  net = parse("op { type: \"DevGpu\" input: \"data\" input: \"w\" output: \"y\" }\n");
  const char *host[] = {"data"};
  dm_device_opts_init(&o);
  o.host_blobs = host;
  o.n_host_blobs = 1;
  assert_ok(dm_device_pass(net, &o, &sum));
  char got[512];
  summarize(net, got, sizeof got);
  assert_string_equal(got, "CopyCPUToGPU(data)>data_cuda@G DevGpu(data_cuda,w)>y@G");
  assert_int_equal(sum.n_gpu_state, 1);
  assert_string_equal(sum.gpu_state[0], "w");
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_idempotent_and_deterministic(void **unused) {
  (void)unused;
  Caffe2__NetDef *a = parse(main_net), *b = parse(main_net);
  dm_device_opts o;
  dm_device_opts_init(&o);
  dm_device_summary sa, sb;
  assert_ok(dm_device_pass(a, &o, &sa));
  assert_ok(dm_device_pass(b, &o, &sb));
  char *ta = print(a), *tb = print(b);
  assert_string_equal(ta, tb); /* deterministic */
  dm_device_summary_free(&sb);
  /* marked: unchanged, and the summary still names the GPU state */
  assert_ok(dm_device_pass(a, &o, &sb));
  assert_int_equal(sb.already, 1);
  assert_int_equal(sb.copies, 0);
  assert_int_equal(sb.n_gpu_state, sa.n_gpu_state);
  for (size_t i = 0; i < sa.n_gpu_state; i++)
    assert_string_equal(sb.gpu_state[i], sa.gpu_state[i]);
  char *ta2 = print(a);
  assert_string_equal(ta, ta2);
  dm_device_summary_free(&sb);
  /* without the mark the output is a fixed point too: every op is where it reads and
   * writes its blobs, so a second run adds nothing */
  Caffe2__Argument *last = b->arg[b->n_arg - 1];
  assert_string_equal(last->name, DM_DEVICE_MARK);
  protobuf_c_message_free_unpacked(&last->base, NULL);
  b->n_arg--;
  assert_ok(dm_device_pass(b, &o, &sb));
  assert_int_equal(sb.copies, 0);
  char *tb2 = print(b);
  assert_string_equal(ta, tb2);
  /* the text round trip: the placed net prints, parses and prints the same */
  Caffe2__NetDef *c = parse(ta);
  char *tc = print(c);
  assert_string_equal(ta, tc);
  free(ta);
  free(tb);
  free(ta2);
  free(tb2);
  free(tc);
  dm_device_summary_free(&sa);
  dm_device_summary_free(&sb);
  protobuf_c_message_free_unpacked(&a->base, NULL);
  protobuf_c_message_free_unpacked(&b->base, NULL);
  protobuf_c_message_free_unpacked(&c->base, NULL);
}

static void test_refusals(void **unused) {
  (void)unused;
  Caffe2__NetDef *net = parse(main_net);
  dm_memory_summary ms;
  assert_ok(dm_memory_pass(net, NULL, &ms));
  char *before = print(net);
  dm_device_opts o;
  dm_device_opts_init(&o);
  dm_device_summary sum;
  assert_status_msg(dm_device_pass(net, &o, &sum), DM_ERR_INVALID, "memory pass",
                    "device placement");
  char *after = print(net);
  assert_string_equal(before, after);
  free(before);
  free(after);
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);

  /* a blob homed on GPU 0 read by an op pinned to GPU 1: no copy op for that */
  net = parse("op { type: \"DevGpuFill\" output: \"a\" engine: \"FAKE\" }\n"
              "op { type: \"DevGpu\" input: \"a\" input: \"a\" output: \"b\" "
              "device_option { device_type: 1 device_id: 1 } }\n");
  before = print(net);
  assert_status_msg(dm_device_pass(net, &o, &sum), DM_ERR_UNSUPPORTED, "op 1 (DevGpu)",
                    "'a'", "CUDA:1", "CUDA:0");
  after = print(net);
  assert_string_equal(before, after); /* unchanged on failure */
  free(before);
  free(after);
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_place_init(void **unused) {
  (void)unused;
  Caffe2__NetDef *init = parse("op { type: \"DevFill\" output: \"w\" }\n"
                               "op { type: \"DevGpuFill\" output: \"m\" engine: \"FAKE\" }\n"
                               "op { type: \"DevFill\" output: \"it\" }\n"
                               "op { type: \"DevGpuFill\" output: \"k\" engine: \"FAKE\" "
                               "device_option { device_type: 0 } }\n");
  dm_device_opts o;
  dm_device_opts_init(&o);
  const char *gpu[] = {"w", "m", "k"};
  size_t copies = 0;
  assert_ok(dm_device_place_init(init, &o, gpu, 3, &copies));
  char got[1024];
  summarize(init, got, sizeof got);
  /* CPU-only fills stay and are copied over in place at the end; a fill with a CUDA
   * kernel runs there; `it` is not GPU state; a pinned op stays and is copied */
  assert_string_equal(got, "DevFill()>w@C DevGpuFill()>m@G DevFill()>it@C DevGpuFill()>k@C "
                           "CopyCPUToGPU(w)>w@G CopyCPUToGPU(k)>k@G");
  assert_int_equal(copies, 2);
  char *t1 = print(init);
  assert_ok(dm_device_place_init(init, &o, gpu, 3, &copies)); /* idempotent */
  assert_int_equal(copies, 0);
  char *t2 = print(init);
  assert_string_equal(t1, t2);
  free(t1);
  free(t2);
  protobuf_c_message_free_unpacked(&init->base, NULL);
}

/* A placed net names CUDA:0; without a usable GPU, instantiating it says why. The net
 * starts with a GPU op of the test's own, so the check does not depend on whether this
 * build has the copy kernels (a build without CUDA has none). */
/* Forms whose CUDA kernels would read a tensor's values on the host stay on the CPU
 * whatever kernels the build has; the plain forms go to the GPU where a kernel exists. */
static void test_host_valued_forms(void **unused) {
  (void)unused;
  Caffe2__NetDef *net =
      parse("op { type: \"Reshape\" input: \"x\" input: \"shape\" output: \"a\" }\n"
            "op { type: \"Split\" input: \"x\" input: \"sizes\" output: \"b\" output: \"c\" }\n"
            "op { type: \"ConstantFill\" input: \"dims\" output: \"d\" "
            "arg { name: \"input_as_shape\" i: 1 } }\n"
            "op { type: \"Reshape\" input: \"x\" output: \"e\" arg { name: \"shape\" ints: -1 } }\n");
  dm_device_opts o;
  dm_device_opts_init(&o);
  dm_device_summary sum;
  assert_ok(dm_device_pass(net, &o, &sum));
  int gpu_reshape = dm_kernel_exists("Reshape", DM_CUDA, "");
  size_t on_gpu = 0;
  for (size_t i = 0; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    int gpu = op->device_option && op->device_option->device_type == DM_CUDA;
    if (strncmp(op->type, "Copy", 4) == 0)
      continue;
    if (op->n_input > 1 || strcmp(op->type, "ConstantFill") == 0)
      assert_false(gpu);
    on_gpu += (size_t)gpu;
  }
  assert_int_equal(on_gpu, gpu_reshape ? 1 : 0);
  assert_non_null(strstr(sum.report, "read on the host"));
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* Placement from the schema's host_inputs and the kernels' supports(), never op names. */
static void test_schema_and_supports_decide(void **unused) {
  (void)unused;
  Caffe2__NetDef *net =
      parse("op { type: \"DevHost\" input: \"x\" output: \"a\" }\n"
            "op { type: \"DevHost\" input: \"x\" input: \"dims\" output: \"b\" }\n"
            "op { type: \"DevPicky\" input: \"x\" output: \"c\" }\n"
            "op { type: \"DevPicky\" input: \"x\" output: \"d\" arg { name: \"mode\" i: 2 } }\n"
            "op { type: \"DevPicky\" input: \"x\" output: \"e\" engine: \"FAST\" }\n"
            "op { type: \"DevPicky\" input: \"x\" output: \"f\" engine: \"FAST\" "
            "arg { name: \"mode\" i: 1 } }\n"
            "external_input: \"x\" external_input: \"dims\"\n");
  dm_device_opts o;
  dm_device_opts_init(&o);
  dm_device_summary sum;
  assert_ok(dm_device_pass(net, &o, &sum));
  char got[2048];
  summarize(net, got, sizeof got);
  /* x is state first read on the GPU, so its home is there */
  assert_string_equal(got, "DevHost(x)>a@G "
                           "CopyGPUToCPU(x)>x_cpu@G DevHost(x_cpu,dims)>b@C "
                           "DevPicky(x)>c@G "
                           "DevPicky(x_cpu)>d@C "
                           "DevPicky(x)>e@G "
                           "DevPicky(x_cpu)>f@C");
  assert_int_equal(sum.ops_device, 3);
  assert_int_equal(sum.kept_no_kernel, 3);
  assert_non_null(strstr(sum.report, "op 1 (DevHost) CPU: its input 1 ('dims') is read on the host"));
  assert_non_null(strstr(sum.report, "op 3 (DevPicky) CPU: DevPicky on CUDA runs mode 0 only\n"));
  /* FAST refuses first: its reason is the one kept (the preferred engine's) */
  assert_non_null(strstr(sum.report, "op 5 (DevPicky) CPU: FAST never runs\n"));
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);

  /* The init net: a refused op stays on the CPU and its output is copied over. */
  Caffe2__NetDef *init =
      parse("op { type: \"DevPicky\" input: \"s\" output: \"p\" }\n"
            "op { type: \"DevPicky\" input: \"s\" output: \"q\" arg { name: \"mode\" i: 1 } }\n");
  const char *const gpu[] = {"s", "p", "q"};
  size_t copies = 0;
  assert_ok(dm_device_place_init(init, &o, gpu, 3, &copies));
  summarize(init, got, sizeof got);
  assert_string_equal(got, "DevPicky(s)>p@G DevPicky(s)>q@C CopyCPUToGPU(q)>q@G");
  assert_int_equal(copies, 1);
  protobuf_c_message_free_unpacked(&init->base, NULL);

  /* An op the executor could not instantiate (here: a wrong argument type) fails the
   * pass, naming it, and leaves the net as it was. */
  net = parse("op { type: \"DevPicky\" input: \"x\" output: \"c\" arg { name: \"mode\" s: \"x\" } }\n");
  char *before = print(net);
  assert_status_msg(dm_device_pass(net, &o, &sum), DM_ERR_TYPE, "op 0 (DevPicky)", "'mode'");
  dm_device_summary_free(&sum);
  char *after = print(net);
  assert_string_equal(before, after);
  free(before);
  free(after);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_instantiate_without_gpu(void **unused) {
  (void)unused;
  if (dm_device_check(DM_CUDA, 0) == DM_OK) {
    print_message("a usable GPU is present: the no-GPU refusal is not checked here\n");
    return;
  }
  Caffe2__NetDef *net = parse("op { type: \"DevGpuFill\" output: \"a\" engine: \"FAKE\" }\n"
                              "op { type: \"DevCpu\" input: \"a\" output: \"b\" }\n");
  dm_device_opts o;
  dm_device_opts_init(&o);
  dm_device_summary sum;
  assert_ok(dm_device_pass(net, &o, &sum));
  assert_int_equal(sum.ops_device, 1);
  char *text = print(net);
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  dm_net *n = NULL;
  assert_status_msg(dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &n),
                    DM_ERR_UNSUPPORTED, "CUDA:0", "op 0 (DevGpuFill)");
  dm_workspace_destroy(ws);
  free(text);
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* A step's uploads come first: the label a loss reads late is copied before the GPU
 * ops, not between them (so a device graph of those ops is not cut in two); an upload of
 * what a CPU op writes follows that op, not earlier. */
static void test_uploads_hoisted(void **unused) {
  (void)unused;
  Caffe2__NetDef *net = parse("op { type: \"DevGpu\" input: \"data\" input: \"w\" output: \"y\" }\n"
                              "op { type: \"DevGpu\" input: \"y\" input: \"w\" output: \"z\" }\n"
                              "op { type: \"DevCpu\" input: \"data\" output: \"h\" }\n"
                              "op { type: \"DevGpu\" input: \"z\" input: \"w\" output: \"z2\" }\n"
                              "op { type: \"DevGpu\" input: \"z2\" input: \"h\" output: \"u\" }\n"
                              "op { type: \"DevGpu\" input: \"u\" input: \"label\" output: \"loss\" }\n"
                              "external_input: \"w\"\n");
  const char *host[] = {"data", "label"};
  dm_device_opts o;
  dm_device_opts_init(&o);
  o.host_blobs = host;
  o.n_host_blobs = 2;
  dm_device_summary sum;
  assert_ok(dm_device_pass(net, &o, &sum));
  char got[2048];
  summarize(net, got, sizeof got);
  assert_string_equal(got, "CopyCPUToGPU(data)>data_cuda@G CopyCPUToGPU(label)>label_cuda@G "
                           "DevGpu(data_cuda,w)>y@G DevGpu(y,w)>z@G DevCpu(data)>h@C "
                           "CopyCPUToGPU(h)>h_cuda@G DevGpu(z,w)>z2@G DevGpu(z2,h_cuda)>u@G "
                           "DevGpu(u,label_cuda)>loss@G");
  dm_device_summary_free(&sum);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_placement),
      cmocka_unit_test(test_uploads_hoisted),
      cmocka_unit_test(test_engine_and_device_id),
      cmocka_unit_test(test_force_cpu_and_host_blobs),
      cmocka_unit_test(test_idempotent_and_deterministic),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_place_init),
      cmocka_unit_test(test_host_valued_forms),
      cmocka_unit_test(test_schema_and_supports_decide),
      cmocka_unit_test(test_instantiate_without_gpu),
  };
  return cmocka_run_group_tests(tests, setup_registry, NULL);
}
