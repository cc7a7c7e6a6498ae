/* device_info.c: CUDA runtime, driver, library versions and GPUs, or why there are none.
 *
 * This file and net/init.c are the only C files that test DM_HAVE_CUDA; everything else
 * asks these functions. Without the backend they still exist and say so. This file is
 * also the only user of NCCL (DM_HAVE_NCCL, -Dnccl), for its version.
 */
#include "device_info.h"

#include <stdio.h>
#include <string.h>

#include "dm_config.h"

#if DM_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#if DM_HAVE_NCCL /* optional (-Dnccl): without it only the NCCL version goes unreported */
#include <nccl.h>
#endif

#include "cuda_kernels.h"

static void describe_error(cudaError_t e, const char *what, char *buf, size_t cap) {
  snprintf(buf, cap, "no usable GPU: %s failed: %s (%s, %d)", what, cudaGetErrorString(e),
           cudaGetErrorName(e), (int)e);
}

void dm_cuda_info_get(dm_cuda_info *info) {
  memset(info, 0, sizeof *info);
  info->built_with_cuda = 1;
  cudaRuntimeGetVersion(&info->runtime_version);
  cudaDriverGetVersion(&info->driver_version);
  info->cudnn_version = cudnnGetVersion();
  /* cublasGetProperty needs no handle, hence no GPU (cublasGetVersion would). */
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    info->cublas_version = major * 10000 + minor * 100 + patch;
#if DM_HAVE_NCCL
  info->built_with_nccl = 1;
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    info->nccl_version = nccl;
#endif

  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    describe_error(e, "cudaGetDeviceCount", info->why, sizeof info->why);
    cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
    return;
  }
  if (count == 0) {
    snprintf(info->why, sizeof info->why, "no usable GPU: the driver reports no CUDA devices");
    return;
  }
  for (int i = 0; i < count && info->n_gpus < DM_MAX_GPUS; i++) {
    struct cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) {
      char what[64];
      snprintf(what, sizeof what, "cudaGetDeviceProperties(%d)", i);
      describe_error(e, what, info->why, sizeof info->why);
      continue;
    }
    dm_gpu_desc *g = &info->gpus[info->n_gpus++];
    snprintf(g->name, sizeof g->name, "%s", p.name);
    g->major = p.major;
    g->minor = p.minor;
    g->total_mem = p.totalGlobalMem;
    g->multiprocessors = p.multiProcessorCount;
  }
  if (info->n_gpus > 0)
    info->why[0] = '\0';
}

dm_status dm_cuda_float_to_half(int device, const float *in, uint16_t *out, size_t n) {
  char why[512];
  if (!dm_cuda_available(why, sizeof why))
    return dm_error(DM_ERR_UNSUPPORTED, "%s", why);
  char msg[512];
  if (dmk_float_to_half_host(device, in, out, n, msg, sizeof msg) != 0)
    return dm_error(DM_ERR_DEVICE, "GPU %d: %s", device, msg);
  return DM_OK;
}

#else /* !DM_HAVE_CUDA */

void dm_cuda_info_get(dm_cuda_info *info) {
  memset(info, 0, sizeof *info);
  snprintf(info->why, sizeof info->why, "built without CUDA");
}

dm_status dm_cuda_float_to_half(int device, const float *in, uint16_t *out, size_t n) {
  return dm_error(DM_ERR_UNSUPPORTED, "built without CUDA");
}

#endif

int dm_cuda_available(char *why, size_t cap) {
  dm_cuda_info info;
  dm_cuda_info_get(&info);
  if (info.n_gpus > 0) {
    if (cap)
      why[0] = '\0';
    return 1;
  }
  snprintf(why, cap, "%s", info.why);
  return 0;
}

/* 13000 -> "13.0" (runtime and driver versions are major*1000 + minor*10). */
static const char *cuda_version_str(int v, char *buf, size_t cap) {
  snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10);
  return buf;
}

void dm_cuda_info_format(const dm_cuda_info *info, char *buf, size_t cap) {
  size_t k = 0;
#define PUT(...)                                                 \
  do {                                                           \
    if (k < cap)                                                 \
      k += (size_t)snprintf(buf + k, cap - k, __VA_ARGS__);      \
  } while (0)
  if (cap)
    buf[0] = '\0';
  if (!info->built_with_cuda) {
    PUT("CUDA: %s\n", info->why);
    return;
  }
  char a[32], b[32];
  PUT("CUDA runtime: %s\n", cuda_version_str(info->runtime_version, a, sizeof a));
  if (info->driver_version)
    PUT("CUDA driver: supports up to CUDA %s\n",
        cuda_version_str(info->driver_version, b, sizeof b));
  else
    PUT("CUDA driver: none installed\n");
  /* cuDNN 9 encodes major*10000 + minor*100 + patch (8.x used major*1000). */
  size_t c = info->cudnn_version;
  if (c >= 90000)
    PUT("cuDNN: %zu.%zu.%zu\n", c / 10000, (c % 10000) / 100, c % 100);
  else
    PUT("cuDNN: %zu.%zu.%zu\n", c / 1000, (c % 1000) / 100, c % 100);
  int u = info->cublas_version;
  PUT("cuBLAS: %d.%d.%d\n", u / 10000, (u % 10000) / 100, u % 100);
  int n = info->nccl_version;
  /* NCCL >= 2.9 encodes major*10000 + minor*100 + patch. */
  if (!info->built_with_nccl)
    PUT("NCCL: built without NCCL\n");
  else if (n >= 10000)
    PUT("NCCL: %d.%d.%d\n", n / 10000, (n % 10000) / 100, n % 100);
  else
    PUT("NCCL: %d.%d.%d\n", n / 1000, (n % 1000) / 100, n % 100);
  if (info->n_gpus == 0) {
    PUT("GPUs: 0 (%s)\n", info->why);
    return;
  }
  PUT("GPUs: %d\n", info->n_gpus);
  for (int i = 0; i < info->n_gpus; i++) {
    const dm_gpu_desc *g = &info->gpus[i];
    PUT("  GPU %d: %s, compute capability %d.%d, %.1f GiB, %d SMs\n", i, g->name, g->major,
        g->minor, (double)g->total_mem / (1024.0 * 1024.0 * 1024.0), g->multiprocessors);
  }
#undef PUT
}
