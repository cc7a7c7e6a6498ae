/* hostdev.h: DM_HOSTDEV, the mark of a function that both gcc and nvcc compile, for the
 * host and (under nvcc) the device: the formulas the CPU and CUDA kernels share
 * (unary_formulas.h, cast_rules.h). Plain C, no include. */
#ifndef DM_OPERATORS_HOSTDEV_H
#define DM_OPERATORS_HOSTDEV_H

#ifdef __CUDACC__
#define DM_HOSTDEV __host__ __device__
#else
#define DM_HOSTDEV
#endif

#endif
