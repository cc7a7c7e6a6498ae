/* kernels.h: what the C kernel files of gpu/ share (internal; only with DM_HAVE_CUDA):
 * the kernel tables register.c walks, the device table, and the few helpers every run
 * function uses.
 *
 * Each family file defines one table, an array of dm_kernel_def ending in a zero entry
 * (Lua's luaL_Reg), written with GPU_KERNEL so every entry is on DM_CUDA and carries its
 * struct_size. register.c lists the tables, one line each.
 */
#ifndef DM_GPU_KERNELS_H
#define DM_GPU_KERNELS_H

#include "context.h"
#include "core/device.h"
#include "core/tensor.h"
#include "cuda_kernels.h"
#include "demitasse_plugin.h"
#include "operators/common.h"

extern const dm_device_ops dm_cuda_device_ops; /* memory.c */
/* Its graph hooks (graph.c; core/device.h says what each does). */
DM_HIDDEN dm_status dm_cuda_capture_begin(int id);
DM_HIDDEN dm_status dm_cuda_capture_end(int id, void **graph, long *nodes);
DM_HIDDEN dm_status dm_cuda_graph_launch(int id, void *graph);
DM_HIDDEN void dm_cuda_graph_free(int id, void *graph);

/* The kernel tables, each ending in {0}. */
extern const dm_kernel_def dm_cuda_copy_kernels[];        /* device_copy.c */
extern const dm_kernel_def dm_cuda_elementwise_kernels[]; /* elementwise.c */
extern const dm_kernel_def dm_cuda_cast_kernels[];        /* cast.c */
extern const dm_kernel_def dm_cuda_fill_kernels[];        /* fill.c */
extern const dm_kernel_def dm_cuda_optimizer_kernels[];   /* optimizer.c */
extern const dm_kernel_def dm_cuda_loss_scale_kernels[];  /* loss_scale.c */
extern const dm_kernel_def dm_cuda_loss_kernels[];        /* loss.c */
extern const dm_kernel_def dm_cuda_tensor_kernels[];      /* tensor_ops.c */
extern const dm_kernel_def dm_cuda_dropout_kernels[];     /* dropout.c */
extern const dm_kernel_def dm_cuda_conv_kernels[];        /* conv_cudnn.c */
extern const dm_kernel_def dm_cuda_pool_kernels[];        /* pool_cudnn.c */
extern const dm_kernel_def dm_cuda_bn_kernels[];          /* batchnorm_cudnn.c */
extern const dm_kernel_def dm_cuda_softmax_kernels[];     /* softmax_cudnn.c */
extern const dm_kernel_def dm_cuda_lrn_kernels[];         /* lrn_cudnn.c */
extern const dm_kernel_def dm_cuda_fc_kernels[];          /* fc_cublas.c */
extern const dm_kernel_def dm_cuda_conv_fusion_kernels[]; /* conv_fusion_cudnn.c */
extern const dm_kernel_def dm_cuda_allreduce_kernels[];   /* allreduce_nccl.c */
extern const dm_kernel_def dm_cuda_multi_tensor_kernels[]; /* multi_tensor.c */
extern const dm_kernel_def dm_cuda_batch_matmul_kernels[]; /* batch_matmul_cublas.c */
extern const dm_kernel_def dm_cuda_gather_kernels[];       /* gather.c */
extern const dm_kernel_def dm_cuda_where_kernels[];        /* where.c */
extern const dm_kernel_def dm_cuda_layernorm_kernels[];   /* layernorm.c */
extern const dm_kernel_def dm_cuda_masked_softmax_kernels[]; /* masked_softmax.c */

/* The table of a multi-tensor launch (cuda_kernels.h) for ts[0..nt), uploaded on the op's
 * stream into the context's scratch (multi_tensor.c): *dts and *dcs its device copies,
 * *nchunks the chunks (0: nothing to launch, nothing uploaded). */
DM_HIDDEN dm_status dm_gpu_mt_upload(dm_op_ctx *ctx, const dmk_mt_tensor *ts, int nt,
                                     const dmk_mt_tensor **dts, const dmk_mt_chunk **dcs,
                                     int64_t *nchunks);

/* The cuDNN Conv kernels' pieces (conv_cudnn.c) that ConvFusion and ConvReluGradient
 * (conv_fusion_cudnn.c) share: the state (init, fini), the forward (relu: ConvFusion
 * fusion_type 1, Y = relu(conv + b)) and ConvGradient with dY's data from dy_data (dY's
 * shape and dtype, input 2's). */
DM_HIDDEN dm_status dm_cuda_conv_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN void dm_cuda_conv_fini(void *state);
DM_HIDDEN dm_status dm_cuda_conv_forward(dm_op_ctx *ctx, void *state, int relu);
DM_HIDDEN dm_status dm_cuda_conv_backward(dm_op_ctx *ctx, void *state, const void *dy_data);
/* The cuBLAS FC kernels' runs (fc_cublas.c), FCGradient's with dY's data from dy_data. */
DM_HIDDEN dm_status dm_cuda_fc_forward(dm_op_ctx *ctx);
DM_HIDDEN dm_status dm_cuda_fc_backward(dm_op_ctx *ctx, const void *dy_data);

/* One entry of a table: op type, engine (NULL or "" plain, "CUDNN"), then any of .init,
 * .run, .fini, .cross_device, .supports. */
#define GPU_KERNEL(op, eng, ...)                                                           \
  {DM_KERNEL_SIZE, .type = (op), .device = DM_CUDA, .engine = (eng), __VA_ARGS__}
/* A kernel that keeps DM_KERNEL_GRAPH_SAFE's promise (core/demitasse_plugin.h): all its
 * work on the op's stream, no host values read, the same work for the same shapes and
 * addresses. Not: the copies (host memory), Dropout (a per-run host counter in its
 * key), the multi-tensor ops and UnscaleAndCheck (their tensor tables go up through the
 * staging ring, whose buffers later uploads reuse), NCCL (communicator set-up). */
#define GRAPH_SAFE .flags = DM_KERNEL_GRAPH_SAFE

/* Shorthands of the run functions. */
#define IN(i) dm_op_input(ctx, (i))
#define OUT(i) dm_op_output(ctx, (i))
#define DATA(t) dm_tensor_data(t)
#define MDATA(t) dm_tensor_mutable_data(t)

#endif
