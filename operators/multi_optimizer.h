/* multi_optimizer.h: the input layout of the multi-tensor update ops (multi_optimizer.c),
 * shared with their CUDA kernels (gpu/multi_tensor.c), internal.
 *
 * A multi-tensor op updates n parameters at once; its inputs are lists of n blobs, one
 * list per role, and its outputs the three updated lists (in place):
 *   MultiMomentumSGDUpdate  g_1..g_n, m_1..m_n, lr, p_1..p_n, [skip]
 *                             -> g_1..g_n, m_1..m_n, p_1..p_n
 *   MultiAdam               p_1..p_n, m1_1..m1_n, m2_1..m2_n, g_1..g_n, lr, iter, [skip]
 *                             -> p_1..p_n, m1_1..m1_n, m2_1..m2_n
 * n is the output count / 3; the optional skip input is the single ops' (optimizer.c).
 */
#ifndef DM_OPERATORS_MULTI_OPTIMIZER_H
#define DM_OPERATORS_MULTI_OPTIMIZER_H

#include "common.h"

typedef enum dm_multi_kind { DM_MULTI_MOMENTUM = 0, DM_MULTI_ADAM = 1 } dm_multi_kind;

/* Roles of the input lists, in input order. */
enum { DM_MM_GRAD = 0, DM_MM_MOMENT = 1, DM_MM_PARAM = 2 };             /* momentum */
enum { DM_MA_PARAM = 0, DM_MA_M1 = 1, DM_MA_M2 = 2, DM_MA_GRAD = 3 };  /* Adam */

typedef struct dm_multi_layout {
  dm_multi_kind kind;
  int n;     /* tensors per list */
  int lr;    /* input index of lr */
  int iter;  /* Adam: input index of iter; -1 otherwise */
  int skip;  /* input index of skip; -1 when absent */
} dm_multi_layout;

/* Input index of list `role`, tensor k (0-based). */
DM_HIDDEN int dm_multi_input(const dm_multi_layout *l, int role, int k);
/* The input list output list j (0..2) updates, so output j*n + k is an update of input
 * dm_multi_input(l, dm_multi_out_role(l, j), k). */
DM_HIDDEN int dm_multi_out_role(const dm_multi_layout *l, int j);
/* The layout from the input and output counts; DM_ERR_INVALID naming the op when they do
 * not fit. */
DM_HIDDEN dm_status dm_multi_layout_get(dm_op_ctx *ctx, dm_multi_kind kind, dm_multi_layout *l);
/* The names' rules (each output its own input or a blob no input names; no output twice):
 * checked once, at instantiation (kernels' init) and by shape inference in the passes. */
DM_HIDDEN dm_status dm_multi_check_names(dm_op_ctx *ctx, dm_multi_kind kind);

#endif
