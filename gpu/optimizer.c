/* optimizer.c: the CUDA kernels (engine "") of the update ops MomentumSGDUpdate, Adam,
 * AdamW and WeightedSum (each with the optional skip input UnscaleAndCheck's found_inf feeds),
 * and of Iter and LearningRate, so a step's counter and rate never leave the GPU and the
 * skip flag is read there. The device code is optimizer.cu.
 *
 * Semantics are operators/optimizer.c's. Where the CPU reads a value on the host to
 * raise an error, the device cannot without a host sync: Iter's overflow at INT64_MAX
 * and LearningRate's negative iteration are not reported (the count stays at INT64_MAX,
 * the rate becomes NaN). LearningRate's arguments are parsed and checked once, at
 * instantiation, by the CPU kernel's own code (lr_policy.h).
 */
#include <stdlib.h>

#include "kernels.h"
#include "operators/lr_policy.h"

_Static_assert((int)DMK_LR_FIXED == (int)DM_LR_FIXED && (int)DMK_LR_STEP == (int)DM_LR_STEP &&
                   (int)DMK_LR_EXP == (int)DM_LR_EXP && (int)DMK_LR_INV == (int)DM_LR_INV &&
                   (int)DMK_LR_POLY == (int)DM_LR_POLY,
               "cuda_kernels.h's policy numbers must be dm_lr_kind's");

/* The optional skip input at index i: its device pointer, or NULL when absent. */
static const void *skip_input(dm_op_ctx *ctx, int i, int *dtype) {
  if (dm_op_num_inputs(ctx) <= i) {
    *dtype = DM_UNDEFINED;
    return NULL;
  }
  *dtype = IN(i)->dtype;
  return DATA(IN(i));
}

static dm_status momentum_run(dm_op_ctx *ctx) { /* grad, moment, lr, param, [skip] */
  DM_TRY(dm_op_run_infer(ctx));
  int st;
  const void *skip = skip_input(ctx, 4, &st);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_momentum_sgd(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), DATA(IN(3)),
                               MDATA(OUT(0)), MDATA(OUT(1)), MDATA(OUT(2)),
                               dm_op_arg_float(ctx, "momentum", 0),
                               dm_op_arg_int(ctx, "nesterov", 0) != 0, skip, st, IN(0)->numel));
  return DM_OK;
}

static dm_status adam_run(dm_op_ctx *ctx) { /* param, m1, m2, grad, lr, iter, [skip] */
  DM_TRY(dm_op_run_infer(ctx));
  int st;
  const void *skip = skip_input(ctx, 6, &st);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_adam(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), DATA(IN(3)), DATA(IN(4)),
                       DATA(IN(5)), MDATA(OUT(0)), MDATA(OUT(1)), MDATA(OUT(2)),
                       dm_op_arg_float(ctx, "beta1", 0.9f), dm_op_arg_float(ctx, "beta2", 0.999f),
                       dm_op_arg_float(ctx, "epsilon", 1e-5f), skip, st, IN(0)->numel));
  return DM_OK;
}

/* AdamW: Adam's inputs. A negative iteration, which the CPU reports, has no bias
 * correction; on the device it makes the step NaN (reading iter would need a sync). */
static dm_status adamw_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  int st;
  const void *skip = skip_input(ctx, 6, &st);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_adamw(s, DATA(IN(0)), DATA(IN(1)), DATA(IN(2)), DATA(IN(3)), DATA(IN(4)),
                        DATA(IN(5)), MDATA(OUT(0)), MDATA(OUT(1)), MDATA(OUT(2)),
                        dm_op_arg_float(ctx, "beta1", 0.9f),
                        dm_op_arg_float(ctx, "beta2", 0.999f),
                        dm_op_arg_float(ctx, "epsilon", 1e-8f),
                        dm_op_arg_float(ctx, "weight_decay", 0.01f), skip, st, IN(0)->numel));
  return DM_OK;
}

/* X0, w0, ..., [skip]: up to DMK_MAX_TERMS pairs per launch, Y the running sum. */
static dm_status weighted_sum_run(dm_op_ctx *ctx) {
  DM_TRY(dm_op_run_infer(ctx));
  const int nin = dm_op_num_inputs(ctx), np = nin / 2;
  int st;
  const void *skip = nin % 2 ? skip_input(ctx, nin - 1, &st) : (st = DM_UNDEFINED, NULL);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  float *y = MDATA(OUT(0));
  for (int j0 = 0; j0 < np; j0 += DMK_MAX_TERMS) {
    const float *x[DMK_MAX_TERMS], *w[DMK_MAX_TERMS];
    int k = np - j0 < DMK_MAX_TERMS ? np - j0 : DMK_MAX_TERMS;
    for (int j = 0; j < k; j++) {
      x[j] = DATA(IN(2 * (j0 + j)));
      w[j] = DATA(IN(2 * (j0 + j) + 1));
    }
    DM_CUDA_TRY(dmk_weighted_sum(s, x, w, k, j0 == 0, y, skip, st, IN(0)->numel));
  }
  return DM_OK;
}

/* ---- Iter ----------------------------------------------------------------------------- */

/* [iter, [skip]] -> iter (in place). As optimizer.c's iter_run, with the count read and
 * written on the device: only shapes and dtypes are looked at here. */
static dm_status iter_run(dm_op_ctx *ctx) {
  dm_tensor *y = OUT(0);
  int fresh;
  const void *skip = NULL;
  int skip_dtype = DM_UNDEFINED;
  if (dm_op_num_inputs(ctx) == 0) {
    /* Caffe2's input-less form: the output blob holds the count. */
    fresh = !(y->dtype != DM_UNDEFINED && y->numel > 0);
    if (!fresh && (y->dtype != DM_INT64 || y->numel != 1))
      return dm_op_error(ctx, DM_ERR_TYPE, "iter '%s' holds %s data; expected one INT64",
                         dm_op_output_name(ctx, 0), dm_dtype_name(y->dtype));
    int id;
    if (!fresh && (dm_tensor_device(y, &id) != DM_CUDA || id != dm_op_device_id(ctx)))
      /* A count left elsewhere (an init net on the CPU): bring it over, then count on. */
      DM_TRY(dm_tensor_copy_to(y, DM_CUDA, dm_op_device_id(ctx), y));
  } else {
    /* An empty input starts at 0; infer then grows it to one (unwritten) element. */
    const dm_tensor *it = IN(0);
    fresh = !(it->dtype == DM_INT64 && it->numel == 1);
    if (dm_op_num_inputs(ctx) > 1) {
      skip = DATA(IN(1));
      skip_dtype = IN(1)->dtype;
    }
  }
  DM_TRY(dm_op_run_infer(ctx)); /* in place, INT64, one element; the skip input's checks */
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_iter(s, MDATA(y), fresh, skip, skip_dtype));
  return DM_OK;
}

/* ---- LearningRate -------------------------------------------------------------------- */

/* Arguments are parsed and checked once, at instantiation, by the CPU kernel's own code
 * (dm_lr_args); each run passes them by value. */
static dm_status lr_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  dm_lr_policy p;
  float base_lr;
  DM_TRY(dm_lr_args(ctx, &p, &base_lr));
  dmk_lr_params *k = malloc(sizeof *k);
  if (!k)
    return dm_op_error(ctx, DM_ERR_NOMEM, "out of memory for the learning-rate state");
  *k = (dmk_lr_params){.kind = (int)p.kind, .stepsize = p.stepsize, .max_iter = p.max_iter,
                       .warmup_iter = p.warmup_iter, .gamma = p.gamma, .power = p.power,
                       .warmup_start = p.warmup_start, .base_lr = (double)base_lr};
  *state = k;
  return DM_OK;
}

static void lr_fini(void *state) { free(state); }

static dm_status lr_run(dm_op_ctx *ctx) { /* iter -> lr */
  DM_TRY(dm_op_run_infer(ctx));
  const dmk_lr_params *p = dm_op_state(ctx);
  cudaStream_t s;
  DM_TRY(dm_gpu_op_stream(ctx, &s));
  DM_CUDA_TRY(dmk_learning_rate(s, DATA(IN(0)), MDATA(OUT(0)), *p));
  return DM_OK;
}

const dm_kernel_def dm_cuda_optimizer_kernels[] = {
    GPU_KERNEL("MomentumSGDUpdate", "", .run = momentum_run, GRAPH_SAFE),
    GPU_KERNEL("Adam", "", .run = adam_run, GRAPH_SAFE),
    GPU_KERNEL("AdamW", "", .run = adamw_run, GRAPH_SAFE),
    GPU_KERNEL("WeightedSum", "", .run = weighted_sum_run, GRAPH_SAFE),
    GPU_KERNEL("Iter", "", .run = iter_run, GRAPH_SAFE),
    GPU_KERNEL("LearningRate", "", .init = lr_init, .run = lr_run, .fini = lr_fini, GRAPH_SAFE),
    {0},
};
