/* optimizer_pass.h: the optimizer pass, NetDef -> NetDef (internal).
 *
 * Run after the gradient pass: given a net whose backward ops write <p>_grad for each
 * trainable parameter p, it appends Caffe2's update ops, so that a user writes only the
 * forward net plus flags:
 *
 *   Iter(optimizer_iteration) -> optimizer_iteration                 (once)
 *   LearningRate(optimizer_iteration) -> lr   base_lr, policy args    (once)
 *   WeightedSum(p_grad, optimizer_one, p, optimizer_weight_decay) -> p_grad
 *                                        (weight decay; params named *_w, or all)
 *   sgd:      WeightedSum(p, optimizer_one, p_grad, lr) -> p
 *   momentum: MomentumSGDUpdate(p_grad, p_momentum, lr, p) -> p_grad, p_momentum, p
 *   adam:     Adam(p, p_first_moment, p_second_moment, p_grad, lr, optimizer_iteration)
 *                 -> p, p_first_moment, p_second_moment
 *
 * The sign of base_lr follows Caffe2's optimizer.py, because the ops differ: WeightedSum
 * and Adam ADD lr * step, so base_lr = -lr; MomentumSGDUpdate SUBTRACTS, so base_lr = +lr.
 * Iter runs before the updates, as in Caffe2, so the first step sees iteration 1 (the
 * learning-rate policy and Adam's correction, t = iter + 1 = 2, are Caffe2's).
 *
 * The state those ops need is created by ops appended to a second NetDef, the init-net
 * addition, to run once after the user's init net (it reads the params' shapes):
 *   ConstantFill() -> optimizer_iteration   (INT64 [1], 0)
 *   ConstantFill() -> optimizer_one, optimizer_weight_decay   (FLOAT [1])
 *   ConstantFill(p) -> p_momentum | p_first_moment, p_second_moment   (p's shape, 0)
 *
 * With multi_tensor on, the per-parameter ops become multi-tensor ops over every
 * parameter (operators/multi_optimizer.h), which a GPU runs in one kernel launch each
 * instead of one per parameter, with bit-identical results:
 *   MultiWeightedSum(g_1..g_d, optimizer_one, p_1..p_d, optimizer_weight_decay)
 *                 -> g_1..g_d                         (the d decayed params; weight decay)
 *   sgd:      MultiWeightedSum(p_1..p_n, optimizer_one, g_1..g_n, lr) -> p_1..p_n
 *   momentum: MultiMomentumSGDUpdate(g_1..g_n, m_1..m_n, lr, p_1..p_n)
 *                 -> g_1..g_n, m_1..m_n, p_1..p_n
 *   adam:     MultiAdam(p_1..p_n, m1_1..m1_n, m2_1..m2_n, g_1..g_n, lr, optimizer_iteration)
 *                 -> p_1..p_n, m1_1..m1_n, m2_1..m2_n
 * Every parameter is an FP32 master when the pass runs (the mixed-precision pass comes
 * later) and the device pass places the whole net on one device, so the parameters form
 * one group of one dtype and device.
 *
 * Weight decay is L2 through the gradient (grad += wd * param), as Caffe2's
 * AddWeightDecay. Its shapes are unknown when the pass runs, so "weights" (decayed by
 * default; biases are not) are the params whose names end in "_w", Caffe2's brew
 * convention (fc1_w, conv1_w); decay_all decays every param.
 */
#ifndef DM_NET_OPTIMIZER_PASS_H
#define DM_NET_OPTIMIZER_PASS_H

#include <stdint.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

/* Blob names the pass creates. */
#define DM_OPTIM_ITER_BLOB "optimizer_iteration"
#define DM_OPTIM_LR_BLOB "lr"
#define DM_OPTIM_ONE_BLOB "optimizer_one"
#define DM_OPTIM_WD_BLOB "optimizer_weight_decay"

/* The optimizer is demitasse.h's dm_optimizer (DM_OPTIMIZER_SGD: WeightedSum, MOMENTUM:
 * MomentumSGDUpdate, ADAM: Adam); multi_tensor its dm_switch: ON emits the multi-tensor
 * update op (above), OFF and AUTO one op per parameter (AUTO is decided by the
 * pipeline's plan: ON when it places the net on CUDA). */
typedef struct dm_optimizer_opts {
  dm_optimizer kind;
  double lr;           /* > 0, the step size; the pass signs base_lr (see above) */
  double momentum;     /* MOMENTUM: mu in [0, 1) */
  int nesterov;        /* MOMENTUM */
  double beta1, beta2, epsilon; /* ADAM */
  double weight_decay; /* >= 0; 0: none */
  int decay_all;       /* 0: decay only params named *_w; 1: every param */
  const char *policy;  /* learning-rate policy name; NULL: "fixed" */
  int64_t stepsize;    /* step */
  double gamma;        /* step, exp, inv */
  double power;        /* inv, poly */
  int64_t max_iter;    /* poly */
  int64_t warmup_iter; /* 0: no warmup */
  double warmup_start; /* warmup multiplier at iteration 0 */
  dm_switch multi_tensor; /* ON: one update op for all params (AUTO: as OFF); not ADAMW */
  double clip_norm;    /* > 0: one ClipByGlobalNorm over the gradients before the updates */
  /* Inputs of the forward net that are not parameters (data, labels), for
   * dm_find_trainable_params when no params are passed. Borrowed. */
  const char *const *exclude;
  size_t n_exclude;
  /* The parameters to update (NULL: the trainable ones, found as above). Borrowed. */
  const char *const *params;
  size_t n_params;
} dm_optimizer_opts;

/* Caffe2's defaults: SGD, lr 0.01, momentum 0.9, beta1 0.9, beta2 0.999, epsilon 1e-5,
 * no weight decay, policy fixed, no warmup, nothing excluded; multi_tensor AUTO. */
DM_HIDDEN void dm_optimizer_opts_init(dm_optimizer_opts *o);
/* "sgd", "momentum", "adam", "adamw". */
DM_HIDDEN dm_status dm_optimizer_kind_from_name(const char *name, dm_optimizer *out);

/* The trainable parameters of a net after the gradient pass: every input of the forward
 * part (its external_input, and blobs a non-gradient op reads before any forward op
 * writes them), in first-use order, for which some op writes <name>_grad, minus
 * `exclude`. *out is a malloc'd array of malloc'd names (dm_optimizer_free_names). */
DM_HIDDEN dm_status dm_find_trainable_params(const Caffe2__NetDef *net, const char *const *exclude,
                                             size_t n_exclude, char ***out, size_t *n_out);
DM_HIDDEN void dm_optimizer_free_names(char **names, size_t n);

/* Appends the update ops for o->params (NULL: dm_find_trainable_params with
 * o->exclude) to `net`, and their state's fills to `init_add` (both modified in place).
 * Fails with DM_ERR_INVALID on bad options or a param without <p>_grad, DM_ERR_EXISTS if
 * a name the pass creates is already a blob of `net`. On failure the nets may hold part
 * of it. */
DM_HIDDEN dm_status dm_optimizer_pass(Caffe2__NetDef *net, const dm_optimizer_opts *o,
                                      Caffe2__NetDef *init_add);

#endif
