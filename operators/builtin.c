/* builtin.c: registers the built-in operator families from explicit tables (no
 * constructor attributes, which static linking silently drops). */
#include "builtin.h"

static const dm_op_family *const families[] = {
    &dm_family_fill,
    &dm_family_fc,
    &dm_family_activation,
    &dm_family_softmax,
    &dm_family_elementwise,
    &dm_family_cast,
    &dm_family_conv,
    &dm_family_conv_fusion,
    &dm_family_pool,
    &dm_family_random_fill,
    &dm_family_tensor_ops,
    &dm_family_batchnorm,
    &dm_family_bn_fusion,
    &dm_family_lrn,
    &dm_family_dropout,
    &dm_family_loss,
    &dm_family_save_load,
    &dm_family_db_input,
    &dm_family_optimizer,
    &dm_family_loss_scale,
    &dm_family_free,
    &dm_family_allreduce,
    &dm_family_fold_bn,
    &dm_family_device_copy,
    &dm_family_multi_optimizer,
    &dm_family_unary_math,
    &dm_family_nary_math,
    &dm_family_reduce,
    &dm_family_log_softmax,
    &dm_family_shape_ops,
    &dm_family_conv_transpose,
    &dm_family_resize,
    &dm_family_pad,
    &dm_family_batch_matmul,
    &dm_family_where,
    &dm_family_clip_norm,
    &dm_family_layernorm,
    &dm_family_masked_softmax,
    &dm_family_mask_tokens,
    NULL,
};

dm_status dm_register_builtin_ops(void) {
  for (const dm_op_family *const *f = families; *f; f++)
    DM_TRY(dm_register_family(*f));
  return DM_OK;
}
