/* device_info.h: what CUDA this build and this machine offer (internal).
 *
 * The same functions exist with and without the CUDA backend, so callers never need
 * #if DM_HAVE_CUDA: a build without it reports "built without CUDA". Versions come
 * from calls that work without a GPU (runtime, driver, cuDNN, cuBLAS, NCCL), so they are
 * reported even on a machine whose driver is too old to run anything.
 */
#ifndef DM_GPU_DEVICE_INFO_H
#define DM_GPU_DEVICE_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define DM_MAX_GPUS 16

typedef struct dm_gpu_desc {
  char name[256];
  int major, minor; /* compute capability */
  uint64_t total_mem;
  int multiprocessors;
} dm_gpu_desc;

typedef struct dm_cuda_info {
  int built_with_cuda;
  int runtime_version; /* 13000 = 13.0; 0 if unknown */
  int driver_version;  /* newest CUDA the installed driver supports; 0: no driver */
  size_t cudnn_version; /* 91300 = 9.13.0 */
  int cublas_version;   /* 130100 = 13.1.0 */
  int built_with_nccl;  /* NCCL is optional (-Dnccl); 0: nccl_version is not known */
  int nccl_version;     /* 22703 = 2.27.3 */
  int n_gpus;           /* usable devices; 0 with `why` set when none */
  dm_gpu_desc gpus[DM_MAX_GPUS];
  char why[512]; /* why there is no usable GPU; "" when n_gpus > 0 */
} dm_cuda_info;

/* Fills *info; never fails (what cannot be found is 0 or explained in `why`). */
DM_HIDDEN void dm_cuda_info_get(dm_cuda_info *info);
/* Human-readable lines ("CUDA runtime 13.0, driver 12.4 ...") into buf. */
DM_HIDDEN void dm_cuda_info_format(const dm_cuda_info *info, char *buf, size_t cap);
/* 1 if at least one GPU can run kernels; otherwise 0 with the reason in why, e.g.
 * "no usable GPU: cudaGetDeviceCount failed: CUDA driver version is insufficient for
 * CUDA runtime version (cudaErrorInsufficientDriver, 35)" or "built without CUDA". */
DM_HIDDEN int dm_cuda_available(char *why, size_t cap);
/* Converts n floats to FP16 bit patterns on GPU `device` (a device self-test; the CPU
 * equivalent is dm_float_to_half_array). DM_ERR_UNSUPPORTED without CUDA or a GPU,
 * DM_ERR_DEVICE when a CUDA call fails. */
DM_HIDDEN dm_status dm_cuda_float_to_half(int device, const float *in, uint16_t *out, size_t n);

#endif
