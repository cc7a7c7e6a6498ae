/* multi_optimizer.h: the input layout of the multi-tensor update ops (multi_optimizer.c),
 * shared with their CUDA kernels (gpu/multi_tensor.c), internal.
 *
 * A multi-tensor op updates n parameters at once; its inputs are lists of n blobs, one
 * list per role, and its outputs the three updated lists (in place):
 *   MultiMomentumSGDUpdate  g_1..g_n, m_1..m_n, lr, p_1..p_n, [skip]
 *                             -> g_1..g_n, m_1..m_n, p_1..p_n
 *   MultiAdam               p_1..p_n, m1_1..m1_n, m2_1..m2_n, g_1..g_n, lr, iter, [skip]
 *                             -> p_1..p_n, m1_1..m1_n, m2_1..m2_n
 *   MultiWeightedSum        x_1..x_n, w0, z_1..z_n, w1, [skip] -> x_1..x_n
 *                             (x_k = w0 x_k + w1 z_k: an SGD step or a weight decay)
 * n is the output count / 3 (MultiWeightedSum: the output count); the optional skip
 * input is the single ops' (optimizer.c).
 */
#ifndef DM_OPERATORS_MULTI_OPTIMIZER_H
#define DM_OPERATORS_MULTI_OPTIMIZER_H

#include "common.h"

typedef enum dm_multi_kind {
  DM_MULTI_MOMENTUM = 0,
  DM_MULTI_ADAM = 1,
  DM_MULTI_WSUM = 2
} dm_multi_kind;

/* Roles of the input lists, in input order. */
enum { DM_MM_GRAD = 0, DM_MM_MOMENT = 1, DM_MM_PARAM = 2 };             /* momentum */
enum { DM_MA_PARAM = 0, DM_MA_M1 = 1, DM_MA_M2 = 2, DM_MA_GRAD = 3 };  /* Adam */
enum { DM_MW_X = 0, DM_MW_Z = 1 };                                      /* WeightedSum */

typedef struct dm_multi_layout {
  dm_multi_kind kind;
  int n;     /* tensors per list */
  int lists; /* input lists: 3, 4, 2 */
  int outs;  /* output lists: 3, 3, 1 */
  int lr;    /* input index of lr (MultiWeightedSum: of w0) */
  int iter;  /* Adam: input index of iter (MultiWeightedSum: of w1); -1 otherwise */
  int skip;  /* input index of skip; -1 when absent */
} dm_multi_layout;

/* Input index of list `role`, tensor k (0-based). */
DM_HIDDEN int dm_multi_input(const dm_multi_layout *l, int role, int k);
/* Output j*n + k (j < outs) updates input dm_multi_input(l, j, k): the output lists are
 * the first input lists, in order. */
/* The layout from the input and output counts; DM_ERR_INVALID naming the op when they do
 * not fit. */
DM_HIDDEN dm_status dm_multi_layout_get(dm_op_ctx *ctx, dm_multi_kind kind, dm_multi_layout *l);
/* The names' rules (each output its own input or a blob no input names; no output twice):
 * checked once, at instantiation (kernels' init) and by shape inference in the passes. */
DM_HIDDEN dm_status dm_multi_check_names(dm_op_ctx *ctx, dm_multi_kind kind);
/* The kernels' init (CPU and CUDA alike): dm_multi_check_names, no state. */
DM_HIDDEN dm_status dm_multi_momentum_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN dm_status dm_multi_adam_init(dm_op_ctx *ctx, void **state);
DM_HIDDEN dm_status dm_multi_wsum_init(dm_op_ctx *ctx, void **state);

#endif
