/* caps.c: what oneDNN can build on this CPU, asked once (see dm_dnnl_can).
 *
 * oneDNN's implementations of a primitive kind for a dtype depend on the CPU: oneDNN 2.6
 * has BFLOAT16 convolutions, inner products, pools and batch norms only from AVX-512
 * (avx512_core) on, its reference implementations included, and ONEDNN_MAX_CPU_ISA can
 * cap an AVX-512 machine below that. Which kinds exist is not in its API, and guessing
 * from the ISA would be guessing its internals: so one small trial primitive descriptor
 * per kind and dtype answers, once per process (a few milliseconds), in the forms the
 * kernels create them (format "any" where they use it, a forward hint for backward). A
 * kind that fails its trial is refused by the kernels' supports hooks and the reference
 * kernel runs the op; a shape a kind still cannot build is refused when the primitive is
 * created (dm_dnnl_make), with the same outcome.
 */
#include <pthread.h>
#include <stdio.h>

#include "dnnl_common.h"

static const char *const kind_names[DM_DNNL_N_KINDS] = {
    [DM_DNNL_CONV] = "convolution",
    [DM_DNNL_CONV_BWD_DATA] = "convolution backward data",
    [DM_DNNL_CONV_BWD_WEIGHTS] = "convolution backward weights",
    [DM_DNNL_IP] = "inner product",
    [DM_DNNL_IP_BWD_DATA] = "inner product backward data",
    [DM_DNNL_IP_BWD_WEIGHTS] = "inner product backward weights",
    [DM_DNNL_POOL] = "pooling",
    [DM_DNNL_POOL_BWD] = "pooling backward",
    [DM_DNNL_BN] = "batch normalization",
    [DM_DNNL_BN_BWD] = "batch normalization backward",
    [DM_DNNL_CONCAT] = "concat",
    [DM_DNNL_MATMUL] = "matmul",
    [DM_DNNL_LNORM] = "layer normalization",
    [DM_DNNL_LNORM_BWD] = "layer normalization backward",
};

/* The dtypes the engine runs, in the table's order. */
static const dm_dtype probed[] = {DM_FLOAT, DM_BFLOAT16};
#define N_PROBED (sizeof probed / sizeof probed[0])

static pthread_once_t caps_once = PTHREAD_ONCE_INIT;
static unsigned char can[DM_DNNL_N_KINDS][N_PROBED];

/* Whether op_desc (with an optional forward hint) has an implementation; the descriptor
 * is kept in *keep when asked (a hint for the backward trials). */
static int trial(const void *op_desc, const_dnnl_primitive_desc_t hint,
                 dnnl_primitive_desc_t *keep) {
  dnnl_primitive_desc_t pd = NULL;
  if (dnnl_primitive_desc_create(&pd, op_desc, NULL, dm_dnnl_engine(), hint) != dnnl_success)
    return 0;
  if (keep)
    *keep = pd;
  else
    dnnl_primitive_desc_destroy(pd);
  return 1;
}

static int md(dnnl_memory_desc_t *out, int ndim, const dnnl_dims_t dims, dnnl_data_type_t dt,
              dnnl_format_tag_t tag) {
  return dnnl_memory_desc_init_by_tag(out, ndim, dims, dt, tag) == dnnl_success;
}

/* A 1x4x6x6 image, 4 filters of 3x3, stride 1, no padding: a 4x4 output. */
static void probe_conv(dnnl_data_type_t dt, unsigned char *row) {
  const dnnl_dims_t xd = {1, 4, 6, 6}, wd = {4, 4, 3, 3}, yd = {1, 4, 4, 4};
  const dnnl_dims_t strides = {1, 1}, dil = {0, 0}, pad = {0, 0};
  dnnl_memory_desc_t x, w, y;
  dnnl_convolution_desc_t fd, dd, bd;
  if (!md(&x, 4, xd, dt, dnnl_format_tag_any) || !md(&w, 4, wd, dt, dnnl_format_tag_any) ||
      !md(&y, 4, yd, dt, dnnl_format_tag_any))
    return;
  if (dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                 dnnl_convolution_direct, &x, &w, NULL, &y,
                                                 strides, dil, pad, pad) != dnnl_success)
    return;
  dnnl_primitive_desc_t hint = NULL;
  row[DM_DNNL_CONV] = (unsigned char)trial(&fd, NULL, &hint);
  if (!hint)
    return;
  if (dnnl_dilated_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &x, &w, &y,
                                                       strides, dil, pad, pad) == dnnl_success)
    row[DM_DNNL_CONV_BWD_DATA] = (unsigned char)trial(&dd, hint, NULL);
  if (dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &x, &w,
                                                          NULL, &y, strides, dil, pad,
                                                          pad) == dnnl_success)
    row[DM_DNNL_CONV_BWD_WEIGHTS] = (unsigned char)trial(&bd, hint, NULL);
  dnnl_primitive_desc_destroy(hint);
}

/* X 2x8 times W 4x8 (plain, as fc.c describes them). */
static void probe_ip(dnnl_data_type_t dt, unsigned char *row) {
  const dnnl_dims_t xd = {2, 8}, wd = {4, 8}, yd = {2, 4};
  dnnl_memory_desc_t x, w, y;
  dnnl_inner_product_desc_t fd, dd, bd;
  if (!md(&x, 2, xd, dt, dnnl_ab) || !md(&w, 2, wd, dt, dnnl_ab) || !md(&y, 2, yd, dt, dnnl_ab))
    return;
  if (dnnl_inner_product_forward_desc_init(&fd, dnnl_forward_training, &x, &w, NULL, &y) !=
      dnnl_success)
    return;
  dnnl_primitive_desc_t hint = NULL;
  row[DM_DNNL_IP] = (unsigned char)trial(&fd, NULL, &hint);
  if (!hint)
    return;
  if (dnnl_inner_product_backward_data_desc_init(&dd, &x, &w, &y) == dnnl_success)
    row[DM_DNNL_IP_BWD_DATA] = (unsigned char)trial(&dd, hint, NULL);
  if (dnnl_inner_product_backward_weights_desc_init(&bd, &x, &w, NULL, &y) == dnnl_success)
    row[DM_DNNL_IP_BWD_WEIGHTS] = (unsigned char)trial(&bd, hint, NULL);
  dnnl_primitive_desc_destroy(hint);
}

/* A 2x2 max pool, stride 2, over a plain 1x4x4x4 image (the output's format chosen). */
static void probe_pool(dnnl_data_type_t dt, unsigned char *row) {
  const dnnl_dims_t xd = {1, 4, 4, 4}, yd = {1, 4, 2, 2};
  const dnnl_dims_t k = {2, 2}, dil = {0, 0}, pad = {0, 0};
  dnnl_memory_desc_t x, y;
  dnnl_pooling_v2_desc_t fd, bd;
  if (!md(&x, 4, xd, dt, dnnl_abcd) || !md(&y, 4, yd, dt, dnnl_format_tag_any))
    return;
  if (dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, dnnl_pooling_max, &x, &y, k,
                                        k, dil, pad, pad) != dnnl_success)
    return;
  dnnl_primitive_desc_t hint = NULL;
  row[DM_DNNL_POOL] = (unsigned char)trial(&fd, NULL, &hint);
  if (!hint)
    return;
  if (dnnl_pooling_v2_backward_desc_init(&bd, dnnl_pooling_max, &x, &y, k, k, dil, pad, pad) ==
      dnnl_success)
    row[DM_DNNL_POOL_BWD] = (unsigned char)trial(&bd, hint, NULL);
  dnnl_primitive_desc_destroy(hint);
}

/* Training batch norm with scale and shift over a plain 2x4x3x3 tensor, as batchnorm.c. */
static void probe_bn(dnnl_data_type_t dt, unsigned char *row) {
  const dnnl_dims_t xd = {2, 4, 3, 3};
  const unsigned flags = dnnl_use_scale | dnnl_use_shift;
  dnnl_memory_desc_t x;
  dnnl_batch_normalization_desc_t fd, bd;
  if (!md(&x, 4, xd, dt, dnnl_abcd) ||
      dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &x, 1e-5f, flags) !=
          dnnl_success)
    return;
  dnnl_primitive_desc_t hint = NULL;
  row[DM_DNNL_BN] = (unsigned char)trial(&fd, NULL, &hint);
  if (!hint)
    return;
  if (dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &x, &x, 1e-5f, flags) ==
      dnnl_success)
    row[DM_DNNL_BN_BWD] = (unsigned char)trial(&bd, hint, NULL);
  dnnl_primitive_desc_destroy(hint);
}

/* Two 1x2x3 tensors joined on axis 1, as concat.c joins (outer, axis, inner) views. */
static void probe_concat(dnnl_data_type_t dt, unsigned char *row) {
  const dnnl_dims_t xd = {1, 2, 3}, yd = {1, 4, 3};
  dnnl_memory_desc_t x[2], y;
  if (!md(&x[0], 3, xd, dt, dnnl_abc) || !md(&x[1], 3, xd, dt, dnnl_abc) ||
      !md(&y, 3, yd, dt, dnnl_abc))
    return;
  dnnl_primitive_desc_t pd = NULL;
  if (dnnl_concat_primitive_desc_create(&pd, &y, 2, 1, x, NULL, dm_dnnl_engine()) ==
      dnnl_success) {
    row[DM_DNNL_CONCAT] = 1;
    dnnl_primitive_desc_destroy(pd);
  }
}

/* A 2x3 by 3x4 product, plain (matmul.c describes its operands by strides). */
static void probe_matmul(dnnl_data_type_t dt, unsigned char *row) {
  const dnnl_dims_t ad = {2, 3}, bd = {3, 4}, yd = {2, 4};
  dnnl_memory_desc_t a, b, y;
  dnnl_matmul_desc_t d;
  if (md(&a, 2, ad, dt, dnnl_ab) && md(&b, 2, bd, dt, dnnl_ab) && md(&y, 2, yd, dt, dnnl_ab) &&
      dnnl_matmul_desc_init(&d, &a, &b, NULL, &y) == dnnl_success)
    row[DM_DNNL_MATMUL] = (unsigned char)trial(&d, NULL, NULL);
}

/* Layer normalization with scale and shift over plain 4x8 rows, FP32 statistics, as
 * layernorm.c describes it. */
static void probe_lnorm(dnnl_data_type_t dt, unsigned char *row) {
  const dnnl_dims_t xd = {4, 8}, sd = {4};
  const unsigned flags = dnnl_use_scale | dnnl_use_shift;
  dnnl_memory_desc_t x, st;
  dnnl_layer_normalization_desc_t fd, bd;
  if (!md(&x, 2, xd, dt, dnnl_ab) || !md(&st, 1, sd, dnnl_f32, dnnl_a) ||
      dnnl_layer_normalization_forward_desc_init(&fd, dnnl_forward_training, &x, &st, 1e-5f,
                                                 flags) != dnnl_success)
    return;
  dnnl_primitive_desc_t hint = NULL;
  row[DM_DNNL_LNORM] = (unsigned char)trial(&fd, NULL, &hint);
  if (!hint)
    return;
  if (dnnl_layer_normalization_backward_desc_init(&bd, dnnl_backward, &x, &x, &st, 1e-5f,
                                                  flags) == dnnl_success)
    row[DM_DNNL_LNORM_BWD] = (unsigned char)trial(&bd, hint, NULL);
  dnnl_primitive_desc_destroy(hint);
}

static void probe_all(void) {
  if (!dm_dnnl_engine())
    return; /* nothing can be built: every answer stays 0 */
  for (size_t t = 0; t < N_PROBED; t++) {
    unsigned char row[DM_DNNL_N_KINDS] = {0};
    dnnl_data_type_t dt;
    dm_dnnl_dtype(probed[t], &dt);
    probe_conv(dt, row);
    probe_ip(dt, row);
    probe_pool(dt, row);
    probe_bn(dt, row);
    probe_concat(dt, row);
    probe_matmul(dt, row);
    probe_lnorm(dt, row);
    for (int k = 0; k < DM_DNNL_N_KINDS; k++)
      can[k][t] = row[k];
  }
}

void dm_dnnl_probe(void) { pthread_once(&caps_once, probe_all); }

int dm_dnnl_can(dm_dnnl_kind kind, dm_dtype dtype) {
  dm_dnnl_probe();
  for (size_t t = 0; t < N_PROBED; t++)
    if (probed[t] == dtype)
      return (unsigned)kind < DM_DNNL_N_KINDS && can[kind][t];
  return 0;
}

const char *dm_dnnl_kind_name(dm_dnnl_kind kind) {
  return (unsigned)kind < DM_DNNL_N_KINDS ? kind_names[kind] : "?";
}

int dm_dnnl_can_all(dm_dtype dtype) {
  for (int k = 0; k < DM_DNNL_N_KINDS; k++)
    if (!dm_dnnl_can((dm_dnnl_kind)k, dtype))
      return 0;
  return 1;
}

int dm_dnnl_dtype_ok(const dm_op_ctx *ctx, int input, unsigned kinds) {
  dm_dtype t = dm_op_input_dtype(ctx, input);
  if (t == DM_UNDEFINED)
    return 1; /* asked again once it is known */
  if (t != DM_FLOAT && t != DM_BFLOAT16)
    return dm_op_refuse(ctx, "the oneDNN engine runs FLOAT and BFLOAT16, not %s",
                        dm_dtype_name(t));
  for (int k = 0; k < DM_DNNL_N_KINDS; k++)
    if ((kinds & (1u << k)) && !dm_dnnl_can((dm_dnnl_kind)k, t))
      return dm_op_refuse(ctx, "oneDNN builds no %s %s on this CPU (ISA %s)", dm_dtype_name(t),
                          kind_names[k], dm_dnnl_isa_name());
  return 1;
}
