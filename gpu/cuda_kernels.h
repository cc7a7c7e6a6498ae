/* cuda_kernels.h: host entry points of the kernels in the .cu files of gpu/ (internal).
 *
 * Plain C declarations with no CUDA types, so C files can call into nvcc-compiled code.
 * Each returns 0 or the cudaError_t of the first failing call (as an int) and writes a
 * message into `msg`, so the C side can turn it into a dm_status.
 */
#ifndef DM_GPU_CUDA_KERNELS_H
#define DM_GPU_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Copies n floats to device `device`, converts them to FP16 there (round to nearest
 * even, as __float2half_rn) and copies the bit patterns back into host_out. */
int dm_cuda_float_to_half_host(int device, const float *host_in, uint16_t *host_out, size_t n,
                               char *msg, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
