/* free.c: Free, which drops the data of its blobs (Caffe2's Free operator).
 *
 * Free(X0, X1, ...) -> (X0, X1, ...), strictly in place: output i is input i. After it
 * each blob is empty (no storage, no dtype), exactly as if it had never been written, so
 * an op that reads it later fails with "has no data" instead of reading stale memory.
 * The memory pass (net/passes/memory_pass.c) inserts it after each step-local blob's last use;
 * the next run writes the blob afresh before anything reads it. Device-agnostic: it
 * only releases the tensor's storage reference (an alias such as a Reshape view keeps
 * the shared storage alive until it is freed too).
 */
#include <string.h>

#include "builtin.h"
#include "common.h"

/* Caffe2's Free is one-to-one in place; anything else would free one blob and leave
 * another named output unwritten. Checked once, at instantiation. */
static dm_status free_init(dm_op_ctx *ctx, void **state) {
  (void)state;
  if (dm_op_num_inputs(ctx) != dm_op_num_outputs(ctx))
    return dm_op_error(ctx, DM_ERR_INVALID, "Free takes as many outputs as inputs, got %d and %d",
                       dm_op_num_inputs(ctx), dm_op_num_outputs(ctx));
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    if (strcmp(dm_op_input_name(ctx, i), dm_op_output_name(ctx, i)) != 0)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "Free is in place: output %d is '%s' but input %d is '%s'", i,
                         dm_op_output_name(ctx, i), i, dm_op_input_name(ctx, i));
  return DM_OK;
}

/* Shape inference sees the blobs as they were before the Free: nothing after it may read
 * them, and a listing (`inspect --input`) still shows what each blob held. */
static dm_status free_infer(dm_op_ctx *ctx) {
  for (int i = 0; i < dm_op_num_outputs(ctx); i++) {
    const dm_tensor *x = dm_op_input(ctx, i);
    DM_TRY(dm_op_set_output(ctx, i, x->dtype, x->ndim, x->dims));
  }
  return DM_OK;
}

static dm_status free_run(dm_op_ctx *ctx) {
  for (int i = 0; i < dm_op_num_outputs(ctx); i++)
    dm_tensor_reset(dm_op_output(ctx, i));
  return DM_OK;
}

/* Nothing is computed, read or written. */
static void free_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  (void)ctx;
  memset(c, 0, sizeof *c);
}

static const dm_op_schema free_schema = {
    .type = "Free", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = -1,
    .inplace_any = 1, .precision = DM_PREC_NONE,
    .doc = "X0, X1, ... -> the same blobs, emptied (their memory released); in place",
    .infer = free_infer, .cost = free_cost, .no_gradient = 1};

/* The same kernel on the GPU: releasing a storage is the device backend's business (a
 * CUDA block goes back to its stream-ordered pool), not the kernel's. cross_device: the
 * memory pass gives a Free the device of the blob's last user, and a host blob's last
 * user can be a copy op running on the GPU (CopyCPUToGPU(data)), so either kernel may
 * free a blob that lives on the other side. Registered in
 * every build: without CUDA, placing it there fails like any CUDA op, with the reason. */

static const dm_op_schema *const schemas[] = {&free_schema, NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    /* Free drops storage as it is, blocked layouts included: converting first would
     * copy memory about to be released. On a device its release is stream-ordered (a
     * free node when captured into a graph). */
    { .type = "Free", .device = DM_CPU, .init = free_init, .run = free_run, .cross_device = 1,
      .flags = DM_KERNEL_ANY_LAYOUT},
    { .type = "Free", .device = DM_CUDA, .init = free_init, .run = free_run, .cross_device = 1,
      .flags = DM_KERNEL_ANY_LAYOUT | DM_KERNEL_GRAPH_SAFE},
    {0},
};
const dm_op_family dm_family_free = {schemas, kernels};
