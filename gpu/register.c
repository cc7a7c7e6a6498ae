/* register.c: the CUDA backend's kernel table, registered from operators/builtin.c.
 *
 * Empty for now, on purpose: no op has a CUDA kernel yet, so registering none keeps the
 * registry honest. A net placed on CUDA fails at instantiation with "no kernel for
 * (type, CUDA)" instead of silently running somewhere else. The device code that is
 * built today (fp16_convert.cu) is reached through device_info.h's self-test.
 */
#include "register.h"

static const dm_kernel_def *const cuda_kernels[] = {
    NULL,
};

dm_status dm_register_cuda_ops(void) {
  for (const dm_kernel_def *const *k = cuda_kernels; *k; k++)
    DM_TRY(dm_register_kernel(*k));
  return DM_OK;
}
