/* device_copy.c: the CUDA kernels of CopyCPUToGPU and CopyGPUToCPU (schemas in
 * operators/device_copy.c).
 *
 * Both copies run as GPU ops, as in Caffe2, and are cross_device: the executor lets
 * their input live on either side. The transfer itself is core's dm_tensor_copy_to,
 * which goes through memory.c's pinned staging: to the GPU it returns at once, to the
 * host it waits for the stream, since the host reads the result next.
 */
#include "kernels.h"

#include "core/tensor.h"

static dm_status to_gpu_run(dm_op_ctx *ctx) {
  return dm_tensor_copy_to(dm_op_output(ctx, 0), DM_CUDA, dm_op_device_id(ctx),
                           dm_op_input(ctx, 0));
}

static dm_status to_cpu_run(dm_op_ctx *ctx) {
  return dm_tensor_copy_to(dm_op_output(ctx, 0), DM_CPU, 0, dm_op_input(ctx, 0));
}

const dm_kernel_def dm_cuda_copy_kernels[] = {
    GPU_KERNEL("CopyCPUToGPU", NULL, .run = to_gpu_run, .cross_device = 1),
    GPU_KERNEL("CopyGPUToCPU", NULL, .run = to_cpu_run, .cross_device = 1),
    {0},
};
