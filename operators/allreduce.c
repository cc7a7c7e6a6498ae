/* allreduce.c: the Allreduce op's schema (its kernels: operators/mpi/allreduce_mpi.c on
 * the CPU, where MPI is built).
 *
 * Allreduce(X0, X1, ...) -> (X0, X1, ...), strictly in place, as Caffe2's Allreduce:
 * every rank of the job ends with the sum of all ranks' X_i (with `average`, the mean).
 * The data-parallel pass (net/passes/data_parallel_pass.c) puts one after the backward ops for the
 * weight gradients. Arguments:
 *   average       1: the mean: each rank's values divided by the number of ranks
 *                 before the sum, as NCCL's average (default 0)
 *   wire_dtype    the precision the sum is taken in: "" (default) each blob's own (FP16
 *                 gradients summed in FP16, as the seed recipe's NCCL all-reduce does),
 *                 or FLOAT, FLOAT16, BFLOAT16 (the blobs converted for the reduction and
 *                 back)
 *   bucket_bytes  the blobs are packed, in order, into buffers of at most this many
 *                 bytes in the wire precision, one collective per buffer (default 25
 *                 MiB, PyTorch DDP's bucket; a larger blob goes alone, in place)
 * Shape inference: each output is its input, unchanged.
 */
#include <string.h>

#include "builtin.h"
#include "common.h"

static dm_status allreduce_infer(dm_op_ctx *ctx) {
  if (dm_op_num_inputs(ctx) != dm_op_num_outputs(ctx))
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "Allreduce takes as many outputs as inputs, got %d and %d",
                       dm_op_num_inputs(ctx), dm_op_num_outputs(ctx));
  for (int i = 0; i < dm_op_num_inputs(ctx); i++) {
    if (strcmp(dm_op_input_name(ctx, i), dm_op_output_name(ctx, i)) != 0)
      return dm_op_error(ctx, DM_ERR_INVALID,
                         "Allreduce is in place: output %d is '%s' but input %d is '%s'", i,
                         dm_op_output_name(ctx, i), i, dm_op_input_name(ctx, i));
    const dm_tensor *x = dm_op_input(ctx, i);
    if (x->dtype != DM_UNDEFINED && x->dtype != DM_FLOAT && x->dtype != DM_FLOAT16 &&
        x->dtype != DM_BFLOAT16 && x->dtype != DM_DOUBLE)
      return dm_op_error(ctx, DM_ERR_TYPE,
                         "input %d '%s' is %s; Allreduce sums FLOAT, FLOAT16, BFLOAT16 or "
                         "DOUBLE",
                         i, dm_op_input_name(ctx, i), dm_dtype_name(x->dtype));
    DM_TRY(dm_op_set_output(ctx, i, x->dtype, x->ndim, x->dims));
  }
  return DM_OK;
}

/* Each element read and written once (the network's bytes are not the memory's). */
static void allreduce_cost(dm_op_ctx *ctx, dm_op_cost *c) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < dm_op_num_inputs(ctx); i++) {
    const dm_tensor *x = dm_op_input(ctx, i);
    double b = (double)dm_tensor_numel(x) * (double)dm_dtype_size(x->dtype);
    c->bytes_read += b;
    c->bytes_written += b;
  }
}

static const dm_arg_spec allreduce_args[] = {
    {"average", DM_ARG_INT, 0, "1: the mean over the ranks instead of the sum"},
    {"wire_dtype", DM_ARG_STRING, 0,
     "the precision of the sum: the blobs' own (default), FLOAT, FLOAT16 or BFLOAT16"},
    {"bucket_bytes", DM_ARG_INT, 0, "bytes per collective (default 25 MiB)"},
    {NULL, 0, 0, NULL},
};

/* Precision NONE: the mixed-precision pass leaves its inputs as they are (it places the
 * op after its own casts anyway: the data-parallel pass runs later). */
static const dm_op_schema allreduce_schema = {
    .type = "Allreduce", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1,
    .max_outputs = -1, .inplace_any = 1, .precision = DM_PREC_NONE, .args = allreduce_args,
    .doc = "X0, X1, ... -> the same blobs, summed (or averaged) over every rank; in place",
    .infer = allreduce_infer, .cost = allreduce_cost, .no_gradient = 1};

static const dm_op_schema *const schemas[] = {&allreduce_schema, NULL};
/* No kernel here: MPI's is registered by dm_register_mpi_ops where MPI is built, and
 * the one below where it is not (net/init.c). */
static const dm_kernel_def kernels[] = {{0}};
const dm_op_family dm_family_allreduce = {schemas, kernels};

static dm_status no_mpi_init(dm_op_ctx *ctx, void **state) {
  (void)state;
  return dm_op_error(ctx, DM_ERR_UNSUPPORTED,
                     "Allreduce needs MPI, and this build has none (install libopenmpi-dev "
                     "and rebuild; `demitasse info` says what was built)");
}

const dm_kernel_def dm_allreduce_no_mpi_kernels[] = {
    {.type = "Allreduce", .device = DM_CPU, .init = no_mpi_init},
    {0},
};
