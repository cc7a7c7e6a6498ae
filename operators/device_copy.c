/* device_copy.c: the schemas of CopyCPUToGPU and CopyGPUToCPU (Caffe2's names).
 *
 * X -> Y with the same dtype and shape, Y on the other side. The device pass
 * (net/passes/device_pass.c) inserts them where a blob crosses between a CPU op and a GPU op;
 * like Caffe2, both run as GPU ops (their device_option is the GPU's), so their kernels
 * live in gpu/device_copy.c and are cross_device: the executor lets one input be on the host.
 * The schemas exist in every build, so a placed net prints, loads and infers shapes on a
 * machine without CUDA; running it needs the CUDA backend and a GPU.
 */
#include "builtin.h"
#include "common.h"

static dm_status copy_infer(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  return dm_op_set_output(ctx, 0, x->dtype, x->ndim, x->dims);
}

static void copy_cost(dm_op_ctx *ctx, dm_op_cost *c) { dm_cost_io(ctx, c); }

/* The gradient of a copy one way is the copy of dY the other way. */
static dm_status emit_reverse(dm_grad_ctx *g, const char *type) {
  const char *dy = dm_grad_output_grad(g, 0);
  if (!dy)
    return DM_OK;
  const char *in[] = {dy};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, type, 1, in, 1, out);
}

static dm_status to_gpu_gradient(dm_grad_ctx *g) { return emit_reverse(g, "CopyGPUToCPU"); }
static dm_status to_cpu_gradient(dm_grad_ctx *g) { return emit_reverse(g, "CopyCPUToGPU"); }

/* In place (Y = X) moves a blob to the other side under its own name: the device pass
 * ends a placed init net with CopyCPUToGPU(w) -> w for parameters a CPU-only fill made. */
static const dm_inplace_pair inplace00[] = {{0, 0}, {-1, -1}};

static const dm_op_schema to_gpu = {
    .type = "CopyCPUToGPU", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .inplace = inplace00, .precision = DM_PREC_FOLLOW,
    .doc = "X (host) -> Y on the op's GPU; same dtype and shape", .infer = copy_infer,
    .cost = copy_cost, .gradient = to_gpu_gradient,
    /* Y (another blob) is a view of one of two device buffers the CUDA kernel uploads
     * into in turn (gpu/device_copy.c): they live with the op, so freeing Y frees
     * nothing, and a kept Y keeps the step's device graph on stable addresses. */
    .reused_outputs = 1};
static const dm_op_schema to_cpu = {
    .type = "CopyGPUToCPU", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .inplace = inplace00, .precision = DM_PREC_FOLLOW,
    .doc = "X (on the op's GPU) -> Y on the host; same dtype and shape", .infer = copy_infer,
    .cost = copy_cost, .gradient = to_cpu_gradient};

static const dm_op_schema *const schemas[] = {&to_gpu, &to_cpu, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {0},
};
const dm_op_family dm_family_device_copy = {schemas, kernels};
