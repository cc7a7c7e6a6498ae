/* multi_optimizer.c: the multi-tensor update ops MultiMomentumSGDUpdate, MultiAdam and
 * MultiWeightedSum (layout in multi_optimizer.h): one op updates every parameter of a
 * step, so that a GPU runs one kernel launch for the lot (Apex's multi_tensor_apply)
 * where the single ops launch one per parameter (161 for ResNet-50). The optimizer pass
 * emits them when asked (net/passes/optimizer_pass.h, multi_tensor).
 *
 * Semantics: exactly n MomentumSGDUpdate, Adam or two-pair WeightedSum ops, one per
 * tensor, with the same arguments, lr, iter, weights and skip: the CPU kernel calls the
 * single ops' element loops (optimizer.h), so the results are bit-identical. A nonzero
 * skip leaves every in-place output unchanged and copies the input into an output that
 * is another blob.
 *
 * Names: an output is its own input (in place) or a blob no input names, and no blob is
 * written twice, so the tensors are independent and may be updated in any order (the
 * CUDA kernel updates them all at once).
 */
#include "multi_optimizer.h"

#include <string.h>

#include "builtin.h"
#include "optimizer.h"

static const char *const role_names[3][4] = {{"grad", "moment", "param", NULL},
                                             {"param", "moment_1", "moment_2", "grad"},
                                             {"x", "z", NULL, NULL}};
static const char *const kind_names[3] = {"MultiMomentumSGDUpdate", "MultiAdam",
                                          "MultiWeightedSum"};
static const int kind_lists[3] = {3, 4, 2}, kind_outs[3] = {3, 3, 1}, kind_scalars[3] = {1, 2, 2};

int dm_multi_input(const dm_multi_layout *l, int role, int k) {
  if ((l->kind == DM_MULTI_MOMENTUM && role == DM_MM_PARAM) ||
      (l->kind == DM_MULTI_WSUM && role == DM_MW_Z))
    return role * l->n + 1 + k; /* after lr, after w0 */
  return role * l->n + k;
}

dm_status dm_multi_layout_get(dm_op_ctx *ctx, dm_multi_kind kind, dm_multi_layout *l) {
  const int n_in = dm_op_num_inputs(ctx), n_out = dm_op_num_outputs(ctx);
  const int lists = kind_lists[kind], outs = kind_outs[kind], scalars = kind_scalars[kind];
  const char *type = kind_names[kind];
  static const char *const input_lists[3] = {"grad, moment lists, lr, param list",
                                             "param, moment_1, moment_2, grad lists, lr, iter",
                                             "x list, w0, z list, w1"};
  static const char *const output_lists[3] = {"grad, moment and param lists",
                                              "param, moment_1 and moment_2 lists", "x list"};
  if (n_out % outs != 0 || n_out == 0)
    return dm_op_error(ctx, DM_ERR_INVALID, "%s has %d outputs; it needs %d per tensor (the %s)",
                       type, n_out, outs, output_lists[kind]);
  const int n = n_out / outs, base = lists * n + scalars;
  if (n_in != base && n_in != base + 1)
    return dm_op_error(ctx, DM_ERR_INVALID,
                       "%s has %d outputs, so %d tensors, and needs %d inputs (%s), or %d with "
                       "a skip input; it has %d",
                       type, n_out, n, base, input_lists[kind], base + 1, n_in);
  l->kind = kind;
  l->n = n;
  l->lists = lists;
  l->outs = outs;
  l->lr = kind == DM_MULTI_ADAM ? 4 * n : kind == DM_MULTI_WSUM ? n : 2 * n;
  l->iter = kind == DM_MULTI_ADAM ? 4 * n + 1 : kind == DM_MULTI_WSUM ? 2 * n + 1 : -1;
  l->skip = n_in == base + 1 ? base : -1;
  return DM_OK;
}

dm_status dm_multi_check_names(dm_op_ctx *ctx, dm_multi_kind kind) {
  dm_multi_layout l;
  DM_TRY(dm_multi_layout_get(ctx, kind, &l));
  const int n_in = dm_op_num_inputs(ctx), n_out = dm_op_num_outputs(ctx);
  for (int o = 0; o < n_out; o++) {
    const int j = o / l.n, k = o % l.n, src = dm_multi_input(&l, j, k);
    const char *name = dm_op_output_name(ctx, o);
    for (int i = 0; i < n_in; i++)
      if (i != src && strcmp(name, dm_op_input_name(ctx, i)) == 0)
        return dm_op_error(ctx, DM_ERR_INVALID,
                           "%s: output %d '%s' (%s %d) is input %d; it may only be its own "
                           "input %d '%s' (in place) or a blob no input names",
                           kind_names[kind], o, name, role_names[kind][j], k + 1, i, src,
                           dm_op_input_name(ctx, src));
    for (int p = 0; p < o; p++)
      if (strcmp(name, dm_op_output_name(ctx, p)) == 0)
        return dm_op_error(ctx, DM_ERR_INVALID, "%s: outputs %d and %d are both '%s'",
                           kind_names[kind], p, o, name);
  }
  return DM_OK;
}

/* Dtypes and shapes (every list's tensor k FLOAT with the first list's shape; lr, iter,
 * skip scalars); declares every output. */
static dm_status check_tensors(dm_op_ctx *ctx, dm_multi_kind kind, dm_multi_layout *l) {
  DM_TRY(dm_multi_layout_get(ctx, kind, l));
  const int lists = l->lists;
  for (int k = 0; k < l->n; k++) {
    const int r0 = dm_multi_input(l, 0, k);
    const dm_tensor *ref = dm_op_input(ctx, r0);
    for (int r = 0; r < lists; r++) {
      const int i = dm_multi_input(l, r, k);
      const dm_tensor *t = dm_op_input(ctx, i);
      if (t->dtype != DM_FLOAT)
        return dm_op_error(ctx, DM_ERR_TYPE, "%s: %s %d (input %d '%s') is %s; it takes FLOAT",
                           kind_names[kind], role_names[kind][r], k + 1, i,
                           dm_op_input_name(ctx, i), dm_dtype_name(t->dtype));
      if (!dm_tensor_same_shape(t, ref)) {
        char a[96], b[96];
        return dm_op_error(ctx, DM_ERR_SHAPE,
                           "%s: %s %d (input %d '%s') is %s, but %s %d '%s' is %s",
                           kind_names[kind], role_names[kind][r], k + 1, i,
                           dm_op_input_name(ctx, i), dm_shape_str(t, a, sizeof a),
                           role_names[kind][0], k + 1, dm_op_input_name(ctx, r0),
                           dm_shape_str(ref, b, sizeof b));
      }
    }
  }
  DM_TRY(dm_update_check_scalar(ctx, l->lr, kind == DM_MULTI_WSUM ? "w0" : "lr", 1));
  if (kind == DM_MULTI_WSUM)
    DM_TRY(dm_update_check_scalar(ctx, l->iter, "w1", 1));
  else if (l->iter >= 0) {
    const dm_tensor *it = dm_op_input(ctx, l->iter);
    if (it->dtype != DM_INT64 || it->numel != 1)
      return dm_op_error(ctx, DM_ERR_TYPE,
                         "%s: iter (input %d '%s') is %s with %lld elements; expected one INT64",
                         kind_names[kind], l->iter, dm_op_input_name(ctx, l->iter),
                         dm_dtype_name(it->dtype), (long long)it->numel);
  }
  if (l->skip >= 0)
    DM_TRY(dm_update_check_scalar(ctx, l->skip, "skip", 0));
  for (int j = 0; j < l->outs; j++)
    for (int k = 0; k < l->n; k++) {
      const dm_tensor *t = dm_op_input(ctx, dm_multi_input(l, 0, k));
      DM_TRY(dm_op_set_output(ctx, j * l->n + k, DM_FLOAT, t->ndim, t->dims));
    }
  return DM_OK;
}

static dm_status infer(dm_op_ctx *ctx, dm_multi_kind kind) {
  /* The names are the net's: checked once per instantiation by the kernels' init, and
   * here only when a pass asks (they cost n^2 comparisons). */
  if (dm_op_shape_only(ctx))
    DM_TRY(dm_multi_check_names(ctx, kind));
  dm_multi_layout l;
  return check_tensors(ctx, kind, &l);
}

/* A skipped step: every output that is not its input's blob gets a copy. */
static dm_status skip_all(dm_op_ctx *ctx, const dm_multi_layout *l) {
  for (int o = 0; o < l->outs * l->n; o++) {
    const int in = dm_multi_input(l, o / l->n, o % l->n);
    DM_TRY(dm_update_skip_outputs(ctx, 1, &in, &o));
  }
  return DM_OK;
}

static const float *in_f(dm_op_ctx *ctx, const dm_multi_layout *l, int role, int k) {
  return dm_tensor_data(dm_op_input(ctx, dm_multi_input(l, role, k)));
}
static float *out_f(dm_op_ctx *ctx, const dm_multi_layout *l, int j, int k) {
  return dm_tensor_mutable_data(dm_op_output(ctx, j * l->n + k));
}

/* ---- MultiMomentumSGDUpdate --------------------------------------------------------- */

static const dm_arg_spec momentum_args[] = {
    {"momentum", DM_ARG_FLOAT, 0, "mu (default 0)"},
    {"nesterov", DM_ARG_INT, 0, "1: Nesterov's momentum (default 0)"},
    {NULL, 0, 0, NULL},
};

static dm_status momentum_infer(dm_op_ctx *ctx) { return infer(ctx, DM_MULTI_MOMENTUM); }

dm_status dm_multi_momentum_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  return dm_multi_check_names(ctx, DM_MULTI_MOMENTUM);
}

static dm_status momentum_run(dm_op_ctx *ctx) {
  dm_multi_layout l;
  DM_TRY(check_tensors(ctx, DM_MULTI_MOMENTUM, &l));
  if (l.skip >= 0 && dm_update_skip_requested(ctx, l.skip))
    return skip_all(ctx, &l);
  const float lr = *(const float *)dm_tensor_data(dm_op_input(ctx, l.lr));
  const float mu = dm_op_arg_float(ctx, "momentum", 0);
  const int nesterov = dm_op_arg_int(ctx, "nesterov", 0) != 0;
  for (int k = 0; k < l.n; k++)
    dm_momentum_sgd_f32(in_f(ctx, &l, DM_MM_GRAD, k), in_f(ctx, &l, DM_MM_MOMENT, k),
                        in_f(ctx, &l, DM_MM_PARAM, k), out_f(ctx, &l, 0, k), out_f(ctx, &l, 1, k),
                        out_f(ctx, &l, 2, k),
                        dm_op_input(ctx, dm_multi_input(&l, DM_MM_GRAD, k))->numel, lr, mu,
                        nesterov);
  return DM_OK;
}

static const dm_op_schema momentum_schema = {
    .type = "MultiMomentumSGDUpdate", .min_inputs = 4, .max_inputs = -1, .min_outputs = 3,
    .max_outputs = -1, .args = momentum_args,
    /* Any pair passes the net's check; dm_multi_check_names enforces "each output its own
     * input or a new blob", which a finite pair list cannot express for unbounded n. */
    .inplace_any = 1, .precision = DM_PREC_FP32, .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "g_1..g_n, m_1..m_n, lr, p_1..p_n, [skip] -> g_1..g_n, m_1..m_n, p_1..p_n (in "
           "place): MomentumSGDUpdate on each (g_k, m_k, lr, p_k) with the same momentum, "
           "nesterov and skip, bit for bit; one kernel launch for all on a GPU.",
    .infer = momentum_infer};

/* ---- MultiAdam --------------------------------------------------------------------------- */

static const dm_arg_spec adam_args[] = {
    {"beta1", DM_ARG_FLOAT, 0, "first-moment decay (default 0.9)"},
    {"beta2", DM_ARG_FLOAT, 0, "second-moment decay (default 0.999)"},
    {"epsilon", DM_ARG_FLOAT, 0, "added to sqrt(m2) (default 1e-5)"},
    {NULL, 0, 0, NULL},
};

static dm_status adam_infer(dm_op_ctx *ctx) { return infer(ctx, DM_MULTI_ADAM); }

dm_status dm_multi_adam_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  return dm_multi_check_names(ctx, DM_MULTI_ADAM);
}

static dm_status adam_run(dm_op_ctx *ctx) {
  dm_multi_layout l;
  DM_TRY(check_tensors(ctx, DM_MULTI_ADAM, &l));
  if (l.skip >= 0 && dm_update_skip_requested(ctx, l.skip))
    return skip_all(ctx, &l);
  const float b1 = dm_op_arg_float(ctx, "beta1", 0.9f);
  const float b2 = dm_op_arg_float(ctx, "beta2", 0.999f);
  const float eps = dm_op_arg_float(ctx, "epsilon", 1e-5f);
  const int64_t iter = *(const int64_t *)dm_tensor_data(dm_op_input(ctx, l.iter));
  const float corr = dm_adam_correction(b1, b2, iter + 1); /* Caffe2's t */
  const float lr = *(const float *)dm_tensor_data(dm_op_input(ctx, l.lr));
  for (int k = 0; k < l.n; k++)
    dm_adam_f32(in_f(ctx, &l, DM_MA_PARAM, k), in_f(ctx, &l, DM_MA_M1, k),
                in_f(ctx, &l, DM_MA_M2, k), in_f(ctx, &l, DM_MA_GRAD, k), out_f(ctx, &l, 0, k),
                out_f(ctx, &l, 1, k), out_f(ctx, &l, 2, k),
                dm_op_input(ctx, dm_multi_input(&l, DM_MA_PARAM, k))->numel, lr, corr, b1, b2,
                eps);
  return DM_OK;
}

static const dm_op_schema adam_schema = {
    .type = "MultiAdam", .min_inputs = 6, .max_inputs = -1, .min_outputs = 3,
    .max_outputs = -1, .args = adam_args, .inplace_any = 1, .precision = DM_PREC_FP32,
    .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "p_1..p_n, m1_1..m1_n, m2_1..m2_n, g_1..g_n, lr, iter, [skip] -> p_1..p_n, "
           "m1_1..m1_n, m2_1..m2_n (in place): Adam on each (p_k, m1_k, m2_k, g_k, lr, iter) "
           "with the same beta1, beta2, epsilon and skip, bit for bit; one kernel launch for "
           "all on a GPU.",
    .infer = adam_infer};

/* ---- MultiWeightedSum -------------------------------------------------------------------- */

static dm_status wsum_infer(dm_op_ctx *ctx) { return infer(ctx, DM_MULTI_WSUM); }

dm_status dm_multi_wsum_init(dm_op_ctx *ctx, void **state) {
  *state = NULL;
  return dm_multi_check_names(ctx, DM_MULTI_WSUM);
}

static dm_status wsum_run(dm_op_ctx *ctx) {
  dm_multi_layout l;
  DM_TRY(check_tensors(ctx, DM_MULTI_WSUM, &l));
  if (l.skip >= 0 && dm_update_skip_requested(ctx, l.skip))
    return skip_all(ctx, &l);
  const float w[2] = {*(const float *)dm_tensor_data(dm_op_input(ctx, l.lr)),
                      *(const float *)dm_tensor_data(dm_op_input(ctx, l.iter))};
  for (int k = 0; k < l.n; k++) {
    const float *x[2] = {in_f(ctx, &l, DM_MW_X, k), in_f(ctx, &l, DM_MW_Z, k)};
    dm_weighted_sum_f32(x, w, 2, out_f(ctx, &l, 0, k),
                        dm_op_input(ctx, dm_multi_input(&l, DM_MW_X, k))->numel);
  }
  return DM_OK;
}

static const dm_op_schema wsum_schema = {
    .type = "MultiWeightedSum", .min_inputs = 4, .max_inputs = -1, .min_outputs = 1,
    .max_outputs = -1, .inplace_any = 1, .precision = DM_PREC_FP32,
    .role = DM_ROLE_OPTIMIZER, .skip_input = 1,
    .doc = "x_1..x_n, w0, z_1..z_n, w1, [skip] -> x_1..x_n (in place): WeightedSum(x_k, w0, "
           "z_k, w1) for each k (an SGD step, a weight decay), with the same skip, bit for "
           "bit; one kernel launch for all on a GPU.",
    .infer = wsum_infer};

static const dm_op_schema *const schemas[] = {&momentum_schema, &adam_schema, &wsum_schema,
                                              NULL};
/* The family's kernels, ending in a zero entry (as Lua's luaL_Reg tables). */
static const dm_kernel_def kernels[] = {
    {.type = "MultiMomentumSGDUpdate", .device = DM_CPU, .init = dm_multi_momentum_init,
     .run = momentum_run},
    {.type = "MultiAdam", .device = DM_CPU, .init = dm_multi_adam_init, .run = adam_run},
    {.type = "MultiWeightedSum", .device = DM_CPU, .init = dm_multi_wsum_init, .run = wsum_run},
    {0},
};
const dm_op_family dm_family_multi_optimizer = {schemas, kernels};
