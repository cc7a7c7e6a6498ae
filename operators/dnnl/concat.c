/* concat.c: the oneDNN engine's Concat (FLOAT, BFLOAT16) on a concat primitive.
 *
 * The reference's semantics and checks (operators/tensor_ops.c, run through the schema's
 * inference): inputs alike but along `axis` (from `axis`, or `order`: NCHW 1, NHWC 3),
 * Y joined along it, and the optional second output split_info (INT32, each input's
 * extent along axis). add_axis = 1 (stacking) is refused: the reference runs it.
 *
 * Inputs that arrive blocked (SqueezeNet's fire modules join two convolutions' nChw16c
 * outputs on the channel axis) are fed as they are and Y is written in the first one's
 * format (nChw16c, also when a channel count is not a multiple of 16: the next
 * convolution wants it so), or where that is not a usual one in the format the primitive
 * chooses; recorded in Y's storage. When every input is
 * plain, each is viewed as (outer, extent, inner) and Y is written plain, whatever the
 * rank. Inputs of zero extent along the axis add nothing and are left out.
 */
#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"
#include "kernels.h"
#include "operators/tensor_ops.h"

/* dm_dnnl_execute passes at most 16 arguments: the sources and Y. */
#define MAX_INPUTS 15

typedef struct concat_state {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t prim;
  dnnl_memory_desc_t *key; /* the sources it was made for */
  dm_dnnl_arg *args;
  int n_key, axis, cap;
} concat_state;

static void concat_reset(concat_state *s) {
  if (s->prim)
    dnnl_primitive_destroy(s->prim);
  if (s->pd)
    dnnl_primitive_desc_destroy(s->pd);
  s->prim = NULL;
  s->pd = NULL;
  s->n_key = 0;
}

static dm_status concat_init(dm_op_ctx *ctx, void **state) {
  int n = dm_op_num_inputs(ctx);
  concat_state *s = calloc(1, sizeof *s);
  if (s) {
    s->key = calloc((size_t)n, sizeof *s->key);
    s->args = calloc((size_t)n + 1, sizeof *s->args);
    s->cap = n;
  }
  if (!s || !s->key || !s->args) {
    if (s)
      free(s->key), free(s->args);
    free(s);
    return DM_NOMEM("a oneDNN op state");
  }
  *state = s;
  return DM_OK;
}

static void concat_fini(void *state) {
  concat_state *s = state;
  concat_reset(s);
  free(s->key);
  free(s->args);
  free(s);
}

static int concat_supports(const dm_op_ctx *ctx) {
  if (dm_op_arg_int(ctx, "add_axis", 0) != 0)
    return dm_op_refuse(ctx, "the oneDNN Concat joins along an axis; add_axis = 1 is not run");
  if (dm_op_num_inputs(ctx) > MAX_INPUTS)
    return dm_op_refuse(ctx, "the oneDNN Concat joins at most %d inputs", MAX_INPUTS);
  for (int i = 0; i < dm_op_num_inputs(ctx); i++)
    if (!dm_dnnl_dtype_ok(ctx, i, DM_DNNL_KIND(DM_DNNL_CONCAT)))
      return 0;
  return 1;
}

/* Y in the first input's format when it is one of oneDNN's usual blocked ones (the
 * primitive's own choice may be plain when a channel count is not a multiple of the
 * block): into *dst, returning 1; else 0 (the primitive chooses). */
static int dst_like(const dnnl_memory_desc_t *src0, const dm_tensor *y, dnnl_memory_desc_t *dst) {
  static const dnnl_format_tag_t tags[][3] = {
      {0}, {0}, {0}, {dnnl_aBc16b, dnnl_aBc8b, dnnl_acb},
      {dnnl_aBcd16b, dnnl_aBcd8b, dnnl_acdb}, {dnnl_aBcde16b, dnnl_aBcde8b, dnnl_acdeb}};
  if (src0->ndims < 3 || src0->ndims > 5 || y->ndim != src0->ndims)
    return 0;
  dnnl_dims_t d;
  for (int i = 0; i < y->ndim; i++)
    d[i] = y->dims[i];
  for (int k = 0; k < 3; k++) {
    dnnl_memory_desc_t probe;
    if (dnnl_memory_desc_init_by_tag(&probe, src0->ndims, src0->dims, src0->data_type,
                                     tags[src0->ndims][k]) == dnnl_success &&
        dnnl_memory_desc_equal(&probe, src0))
      return dnnl_memory_desc_init_by_tag(dst, y->ndim, d, src0->data_type,
                                          tags[src0->ndims][k]) == dnnl_success;
  }
  return 0;
}

static dm_status concat_run(dm_op_ctx *ctx) {
  concat_state *s = dm_op_state(ctx);
  if (dm_op_arg_int(ctx, "add_axis", 0) != 0) /* refused by supports */
    return dm_op_error(ctx, DM_ERR_INVALID, "the oneDNN Concat does not run add_axis = 1");
  DM_TRY(dm_op_run_infer(ctx)); /* the reference's checks; Y (plain) and split_info sized */
  int nin = dm_op_num_inputs(ctx), axis;
  const dm_tensor *x0 = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  dm_dtype t = x0->dtype;
  DM_TRY(dm_concat_axis(ctx, x0->ndim, &axis));
  if (t != DM_FLOAT && t != DM_BFLOAT16) /* refused by supports */
    return dm_op_error(ctx, DM_ERR_TYPE, "the oneDNN Concat runs FLOAT and BFLOAT16, not %s",
                       dm_dtype_name(t));
  if (dm_op_num_outputs(ctx) > 1) {
    int32_t *info = dm_tensor_mutable_data(dm_op_output(ctx, 1));
    if (!info)
      return DM_NOMEM("Concat's split_info");
    for (int i = 0; i < nin; i++)
      info[i] = (int32_t)dm_op_input(ctx, i)->dims[axis];
  }
  if (y->numel == 0)
    return DM_OK;
  int plain = 1;
  for (int i = 0; i < nin; i++)
    plain = plain && dm_tensor_is_plain(dm_op_input(ctx, i));
  dnnl_data_type_t dt = dnnl_f32;
  dm_dnnl_dtype(t, &dt);
  int64_t outer = dm_dims_product(x0, 0, axis), inner = dm_dims_product(x0, axis + 1, x0->ndim);
  int n = 0, cat = plain ? 1 : axis;
  for (int i = 0; i < nin; i++) {
    const dm_tensor *x = dm_op_input(ctx, i);
    if (x->dims[axis] == 0)
      continue;
    if (plain) {
      dnnl_dims_t d = {outer, x->dims[axis], inner};
      DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(&s->key[n], 3, d, dt, dnnl_abc),
                  "describing an input");
      s->args[n].data = (void *)dm_tensor_data(x);
    } else {
      DM_TRY(dm_dnnl_md_of(x, &s->key[n]));
      s->args[n].data = dm_tensor_raw_data(x);
    }
    s->args[n].arg = DNNL_ARG_MULTIPLE_SRC + n;
    s->args[n].md = &s->key[n];
    n++;
  }
  /* The cached primitive, unless the sources or the axis changed (compared with the
   * descriptions the primitive was made for, which it keeps). */
  int same = s->prim && s->n_key == n && s->axis == cat;
  for (int i = 0; same && i < n; i++) {
    const dnnl_memory_desc_t *made = dnnl_primitive_desc_query_md(s->pd, dnnl_query_src_md, i);
    same = made && dnnl_memory_desc_equal(made, &s->key[i]);
  }
  if (!same) {
    concat_reset(s);
    dnnl_memory_desc_t dplain, *dst = NULL;
    if (plain) {
      dnnl_dims_t d = {outer, y->dims[axis], inner};
      DM_DNNL_TRY(dnnl_memory_desc_init_by_tag(&dplain, 3, d, dt, dnnl_abc),
                  "describing the output");
      dst = &dplain;
    } else if (dst_like(&s->key[0], y, &dplain)) {
      dst = &dplain;
    }
    DM_DNNL_TRY(dnnl_concat_primitive_desc_create(&s->pd, dst, n, cat, s->key, NULL,
                                                  dm_dnnl_engine()),
                "creating a concat");
    dnnl_status_t st = dnnl_primitive_create(&s->prim, s->pd);
    if (st != dnnl_success) {
      dnnl_primitive_desc_destroy(s->pd);
      s->pd = NULL;
      s->prim = NULL;
    }
    DM_TRY(dm_dnnl_status(st, "creating a concat"));
    s->n_key = n;
    s->axis = cat;
  }
  dnnl_memory_desc_t dmd;
  DM_TRY(dm_dnnl_query_md(s->pd, dnnl_query_dst_md, 0, &dmd));
  void *out;
  if (plain) {
    out = dm_tensor_mutable_data(y); /* plain already (the inference's resize) */
    if (!out)
      return DM_NOMEM("Concat's output");
  } else {
    int64_t dims[DM_MAX_DIMS];
    memcpy(dims, y->dims, sizeof dims);
    DM_TRY(dm_dnnl_output(y, t, y->ndim, dims, &dmd, &out));
  }
  s->args[n] = (dm_dnnl_arg){DNNL_ARG_DST, &dmd, out};
  return dm_dnnl_execute(s->prim, n + 1, s->args);
}

const dm_kernel_def dm_dnnl_concat_kernels[] = {
    {.struct_size = sizeof(dm_kernel_def), .type = "Concat", .device = DM_CPU,
     .engine = DM_ENGINE_DNNL, .init = concat_init, .run = concat_run, .fini = concat_fini,
     .supports = concat_supports},
    {0},
};
