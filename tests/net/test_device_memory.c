/* test_device_memory.c: the device plumbing under the CUDA backend, checked on the CPU.
 *
 * A fake backend stands in for CUDA in core's device table: its "device memory" is host
 * memory it counts (so every allocation must be given back), and its copies count bytes
 * each way. With it, and test ops registered here for (type, CUDA), the test checks what
 * core and the executor do with device tensors, none of which needs a GPU: outputs of a
 * CUDA op are allocated on the device; uploads, device compute and downloads give the
 * right values; a CPU op handed a device input is refused with both devices named (and
 * a device op handed a host input likewise); fetching a device blob is refused; Save
 * writes a device blob through a host copy and Load puts it back on its device; Free
 * releases device storage; an unusable device id is refused at instantiation; an
 * in-place copy (CopyCPUToGPU(w) -> w) really moves the blob; Free works across devices;
 * the inf/nan scan of --explain-overflow reads device outputs; the op profile counts
 * and times ops by type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/device.h"
#include "core/registry.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "net/net.h"
#include "demitasse_plugin.h"
#include "test_util.h"

/* ---- the fake backend ---------------------------------------------------------- */

static long fake_allocs, fake_frees;
static size_t fake_h2d, fake_d2h;

static dm_status fake_alloc(int id, size_t n, void **out) {
  (void)id;
  if (!(*out = malloc(n)))
    return DM_NOMEM("fake device memory");
  fake_allocs++;
  return DM_OK;
}

static void fake_free(int id, void *p) {
  (void)id;
  free(p);
  fake_frees++;
}

static dm_status fake_copy(dm_device_type dst_dev, int dst_id, void *dst, dm_device_type src_dev,
                           int src_id, const void *src, size_t n) {
  (void)dst_id;
  (void)src_id;
  memcpy(dst, src, n);
  fake_h2d += src_dev == DM_CPU && dst_dev == DM_CUDA ? n : 0;
  fake_d2h += src_dev == DM_CUDA && dst_dev == DM_CPU ? n : 0;
  return DM_OK;
}

static int fake_usable(int id, char *why, size_t cap) {
  if (id == 0)
    return 1;
  snprintf(why, cap, "the fake backend has device 0 only");
  return 0;
}

static dm_status fake_synchronize(int id) {
  (void)id;
  return DM_OK;
}

/* no asynchronous uploads: every copy is staged (tests/core/test_upload.c has those) */
static const dm_device_ops fake_ops = {.name = "FAKE",
                                       .alloc = fake_alloc,
                                       .free = fake_free,
                                       .copy = fake_copy,
                                       .usable = fake_usable,
                                       .synchronize = fake_synchronize};

/* ---- test ops: TestUpload, TestDownload (cross-device), TestDouble (on CUDA) ------ */

static dm_status upload_run(dm_op_ctx *ctx) {
  return dm_tensor_copy_to(dm_op_output(ctx, 0), DM_CUDA, dm_op_device_id(ctx),
                           dm_op_input(ctx, 0));
}

static dm_status download_run(dm_op_ctx *ctx) {
  return dm_tensor_copy_to(dm_op_output(ctx, 0), DM_CPU, 0, dm_op_input(ctx, 0));
}

/* Y = 2X, allocated with dm_op_set_output, so on the op's device. */
static dm_status double_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, dm_tensor_ndim(x), dm_tensor_dims(x)));
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_tensor_device(y, NULL) != dm_op_device(ctx))
    return dm_op_error(ctx, DM_ERR_INVALID, "output not on the op's device");
  const float *px = dm_tensor_data(x);
  float *py = dm_tensor_mutable_data(y);
  for (int64_t i = 0; i < dm_tensor_numel(x); i++)
    py[i] = 2 * px[i];
  return DM_OK;
}

static const dm_inplace_pair inplace00[] = {{0, 0}, {-1, -1}};
static const dm_op_schema one_to_one[] = {
    {DM_SCHEMA_SIZE, .type = "TestUpload", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .inplace = inplace00},
    {DM_SCHEMA_SIZE, .type = "TestDownload", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
     .max_outputs = 1},
    {DM_SCHEMA_SIZE, .type = "TestDouble", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1},
};
static const dm_kernel_def test_kernels[] = {
    {DM_KERNEL_SIZE, .type = "TestUpload", .device = DM_CUDA, .run = upload_run, .cross_device = 1},
    {DM_KERNEL_SIZE, .type = "TestDownload", .device = DM_CUDA, .run = download_run, .cross_device = 1},
    {DM_KERNEL_SIZE, .type = "TestDouble", .device = DM_CUDA, .run = double_run},
    {DM_KERNEL_SIZE, .type = "TestDouble", .device = DM_CPU, .run = double_run},
};

static int setup(void **unused) {
  (void)unused;
  /* after dm_init, so the fake replaces whatever backend the build registered */
  if (dm_init() != DM_OK)
    return -1;
  dm_device_register(DM_CUDA, &fake_ops);
  for (size_t i = 0; i < sizeof one_to_one / sizeof one_to_one[0]; i++)
    if (dm_register_schema(&one_to_one[i]) != DM_OK)
      return -1;
  for (size_t i = 0; i < sizeof test_kernels / sizeof test_kernels[0]; i++)
    if (dm_register_kernel(&test_kernels[i]) != DM_OK)
      return -1;
  return 0;
}

#define ON_GPU "device_option { device_type: 1 } "

static void feed_x(dm_workspace *ws) {
  const float x[4] = {1, -2, 3.5f, 0.25f};
  const int64_t dims[1] = {4};
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, x));
}

static void test_round_trip_and_no_leak(void **unused) {
  (void)unused;
  long allocs0 = fake_allocs, frees0 = fake_frees;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  feed_x(ws);
  fake_h2d = fake_d2h = 0;
  assert_ok(run_text(ws, "op { type: \"TestUpload\" input: \"x\" output: \"x_cuda\" " ON_GPU "}\n"
                         "op { type: \"TestDouble\" input: \"x_cuda\" output: \"y_cuda\" " ON_GPU
                         "}\n"
                         "op { type: \"TestDownload\" input: \"y_cuda\" output: \"y\" " ON_GPU
                         "}\n"));
  const dm_tensor *y = NULL;
  assert_ok(dm_workspace_fetch(ws, "y", &y));
  const float *py = dm_tensor_data(y);
  assert_true(py[0] == 2 && py[1] == -4 && py[2] == 7 && py[3] == 0.5f);
  assert_int_equal(fake_h2d, 4 * sizeof(float));
  assert_int_equal(fake_d2h, 4 * sizeof(float));
  assert_int_equal(fake_allocs - allocs0, 2); /* x_cuda and y_cuda */
  /* fetching a blob that lives on the device: refused, naming the way out */
  assert_status_msg(dm_workspace_fetch(ws, "y_cuda", &y), DM_ERR_INVALID, "'y_cuda'",
                    "CUDA:0", "CopyGPUToCPU");
  dm_workspace_destroy(ws);
  assert_int_equal(fake_frees - frees0, 2);
}

static void test_wrong_device_inputs_refused(void **unused) {
  (void)unused;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  feed_x(ws);
  assert_ok(run_text(ws, "op { type: \"TestUpload\" input: \"x\" output: \"x_cuda\" " ON_GPU
                         "}\n"));
  /* a CPU op reading device memory */
  assert_status_msg(run_text(ws, "op { type: \"TestDouble\" input: \"x_cuda\" output: \"z\" }"),
                    DM_ERR_INVALID, "op 0 (TestDouble)", "input 0 'x_cuda' is on CUDA:0",
                    "runs on CPU");
  /* a device op reading host memory */
  assert_status_msg(run_text(ws, "op { type: \"TestDouble\" input: \"x\" output: \"z\" " ON_GPU
                                 "}"),
                    DM_ERR_INVALID, "input 0 'x' is on CPU", "runs on CUDA:0");
  /* a device the backend cannot run: refused when the net is made */
  dm_net *net = NULL;
  assert_status_msg(net_from_text(ws, "op { type: \"TestDouble\" input: \"x\" output: \"z\" "
                                      "device_option { device_type: 1 device_id: 1 } }",
                                  &net),
                    DM_ERR_UNSUPPORTED, "CUDA:1", "device 0 only");
  dm_workspace_destroy(ws);
}

static void test_save_load_and_free_on_device(void **unused) {
  (void)unused;
  char dir[] = "/tmp/dm_device_ckpt_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char net[1024];
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  feed_x(ws);
  assert_ok(run_text(ws, "op { type: \"TestUpload\" input: \"x\" output: \"w\" " ON_GPU "}\n"));
  snprintf(net, sizeof net,
           "op { type: \"Save\" input: \"w\" arg { name: \"db\" s: \"%s/ckpt\" } }", dir);
  assert_ok(run_text(ws, net)); /* through a host copy */
  /* overwrite w on the device, then Load: the saved values come back, on the device */
  const float other[4] = {9, 9, 9, 9};
  const int64_t dims[1] = {4};
  assert_ok(dm_workspace_feed(ws, "x2", DM_FLOAT, 1, dims, other));
  assert_ok(run_text(ws, "op { type: \"TestUpload\" input: \"x2\" output: \"w\" " ON_GPU "}\n"));
  snprintf(net, sizeof net,
           "op { type: \"Load\" output: \"w\" arg { name: \"db\" s: \"%s/ckpt\" } }", dir);
  assert_ok(run_text(ws, net));
  int id = -1;
  dm_blob *b = dm_workspace_find(ws, "w");
  assert_int_equal(dm_tensor_device(b->tensor, &id), DM_CUDA);
  assert_int_equal(id, 0);
  assert_ok(run_text(ws, "op { type: \"TestDownload\" input: \"w\" output: \"w_cpu\" " ON_GPU
                         "}\n"));
  const dm_tensor *w = NULL;
  assert_ok(dm_workspace_fetch(ws, "w_cpu", &w));
  const float *pw = dm_tensor_data(w);
  assert_true(pw[0] == 1 && pw[1] == -2 && pw[2] == 3.5f && pw[3] == 0.25f);
  /* Free on the device gives the storage back to the backend */
  long frees = fake_frees;
  assert_ok(run_text(ws, "op { type: \"Free\" input: \"w\" output: \"w\" " ON_GPU "}"));
  assert_int_equal(fake_frees - frees, 1);
  assert_int_equal(dm_tensor_numel(b->tensor), 0);
  dm_workspace_destroy(ws);
  snprintf(net, sizeof net, "rm -rf '%s'", dir);
  assert_int_equal(system(net), 0);
}

/* A blob moved to the device under its own name (how a placed init net hands parameters
 * made by CPU-only fills to the GPU): the in-place copy really moves the data; with the
 * CUDA build's CopyCPUToGPU kernel too, which takes the same path. */
static void test_in_place_move(void **unused) {
  (void)unused;
  const char *ops[] = {"TestUpload", "CopyCPUToGPU"};
  for (int k = 0; k < 2; k++) {
    if (!dm_kernel_exists(ops[k], DM_CUDA, ""))
      continue; /* CopyCPUToGPU's kernel comes with the CUDA backend */
    dm_workspace *ws = NULL;
    assert_ok(dm_workspace_create(&ws));
    feed_x(ws);
    char net[256];
    snprintf(net, sizeof net, "op { type: \"%s\" input: \"x\" output: \"x\" " ON_GPU "}",
             ops[k]);
    assert_ok(run_text(ws, net));
    dm_blob *b = dm_workspace_find(ws, "x");
    assert_int_equal(dm_tensor_device(b->tensor, NULL), DM_CUDA);
    assert_ok(run_text(ws, "op { type: \"TestDownload\" input: \"x\" output: \"x_cpu\" " ON_GPU
                           "}"));
    const dm_tensor *y = NULL;
    assert_ok(dm_workspace_fetch(ws, "x_cpu", &y));
    const float *py = dm_tensor_data(y);
    assert_true(py[0] == 1 && py[1] == -2 && py[2] == 3.5f && py[3] == 0.25f);
    dm_workspace_destroy(ws);
  }
}

/* The memory pass gives a Free the device of the blob's last user, which for a host blob
 * can be a GPU copy op: Free runs across devices. */
static void test_free_across_devices(void **unused) {
  (void)unused;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  feed_x(ws);
  assert_ok(run_text(ws, "op { type: \"Free\" input: \"x\" output: \"x\" " ON_GPU "}"));
  assert_int_equal(dm_tensor_numel(dm_workspace_find(ws, "x")->tensor), 0);
  dm_workspace_destroy(ws);
}

/* --explain-overflow's scan reads a device output through a host copy. */
static void test_nonfinite_scan_on_device(void **unused) {
  (void)unused;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  const float x[3] = {1, 3e38f, 2};
  const int64_t dims[1] = {3};
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, x));
  const char *text = "op { type: \"TestUpload\" input: \"x\" output: \"x_cuda\" " ON_GPU "}\n"
                     "op { type: \"TestDouble\" input: \"x_cuda\" output: \"y_cuda\" " ON_GPU
                     "}\n";
  dm_net *net = NULL;
  assert_ok(net_from_text(ws, text, &net));
  dm_net_set_check_finite(net, 1);
  assert_ok(dm_net_run(net));
  const dm_op_ctx *op = NULL;
  int out = -1;
  assert_true(dm_net_first_nonfinite(net, &op, &out));
  assert_int_equal(op->index, 1); /* 2 * 3e38 overflows FLOAT in TestDouble */
  assert_int_equal(out, 0);
  dm_workspace_destroy(ws);
}

/* The op profile times each op to the end of its device work (through the backend's
 * synchronize) and sums by op type. */
static void test_profile(void **unused) {
  (void)unused;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  feed_x(ws);
  dm_net *net = NULL;
  assert_ok(net_from_text(ws, "op { type: \"TestUpload\" input: \"x\" output: \"x_cuda\" " ON_GPU
                              "}\n"
                              "op { type: \"TestDouble\" input: \"x_cuda\" output: \"y\" " ON_GPU
                              "}\n"
                              "op { type: \"TestDouble\" input: \"y\" output: \"z\" " ON_GPU "}\n",
                          &net));
  assert_ok(dm_net_set_profile(net, 1));
  for (int i = 0; i < 3; i++)
    assert_ok(dm_net_run(net));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  dm_net_print_profile(net, f);
  fclose(f);
  assert_non_null(strstr(text, "# profile of 3 runs"));
  assert_non_null(strstr(text, "TestDouble"));
  const char *line = strstr(text, "TestDouble");
  long ops = 0;
  assert_int_equal(sscanf(line, "TestDouble %*s %ld", &ops), 1); /* type, engine, ops */
  assert_int_equal(ops, 2);
  free(text);
  assert_ok(dm_net_set_profile(net, 0));
  dm_workspace_destroy(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_and_no_leak),
      cmocka_unit_test(test_wrong_device_inputs_refused),
      cmocka_unit_test(test_save_load_and_free_on_device),
      cmocka_unit_test(test_in_place_move),
      cmocka_unit_test(test_free_across_devices),
      cmocka_unit_test(test_nonfinite_scan_on_device),
      cmocka_unit_test(test_profile),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
