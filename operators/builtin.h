/* builtin.h: the built-in operator families and the one function that registers them. */
#ifndef DM_OPERATORS_BUILTIN_H
#define DM_OPERATORS_BUILTIN_H

#include "core/registry.h"

/* One table per family, defined in operators/<family>.c; listed in builtin.c. */
extern const dm_op_family dm_family_fill;
extern const dm_op_family dm_family_fc;
extern const dm_op_family dm_family_activation;
extern const dm_op_family dm_family_softmax;
extern const dm_op_family dm_family_elementwise;
extern const dm_op_family dm_family_cast;
extern const dm_op_family dm_family_conv;
extern const dm_op_family dm_family_conv_fusion;
extern const dm_op_family dm_family_pool;
extern const dm_op_family dm_family_random_fill;
extern const dm_op_family dm_family_tensor_ops;
extern const dm_op_family dm_family_shape_ops;
extern const dm_op_family dm_family_batchnorm;
extern const dm_op_family dm_family_bn_fusion;
extern const dm_op_family dm_family_lrn;
extern const dm_op_family dm_family_dropout;
extern const dm_op_family dm_family_loss;
extern const dm_op_family dm_family_save_load;
extern const dm_op_family dm_family_db_input;
extern const dm_op_family dm_family_optimizer;
extern const dm_op_family dm_family_loss_scale;
extern const dm_op_family dm_family_free;
extern const dm_op_family dm_family_allreduce;
/* Allreduce's CPU kernel where MPI is not built: it fails at instantiation, saying so. */
extern const dm_kernel_def dm_allreduce_no_mpi_kernels[];
extern const dm_op_family dm_family_fold_bn;
extern const dm_op_family dm_family_device_copy;
extern const dm_op_family dm_family_multi_optimizer;
extern const dm_op_family dm_family_unary_math;
extern const dm_op_family dm_family_nary_math;
extern const dm_op_family dm_family_reduce;
extern const dm_op_family dm_family_log_softmax;
extern const dm_op_family dm_family_conv_transpose;
extern const dm_op_family dm_family_resize;
extern const dm_op_family dm_family_pad;
extern const dm_op_family dm_family_batch_matmul; /* BatchMatMul, MatMul */
extern const dm_op_family dm_family_where;
extern const dm_op_family dm_family_clip_norm;
extern const dm_op_family dm_family_layernorm;
extern const dm_op_family dm_family_masked_softmax;
extern const dm_op_family dm_family_mask_tokens; /* MaskTokens (BERT's masking) */

/* Registers every built-in family's schemas and CPU kernels (called by dm_init in
 * net/init.c, which also registers the CUDA backend). */
DM_HIDDEN dm_status dm_register_builtin_ops(void);

#endif
