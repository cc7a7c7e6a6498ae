/* test_onnx_export.c: the ONNX exporter (net/onnx/export.h) on small Caffe2 pairs.
 *
 * What each translation must write (Conv's and the pools' attributes field by field,
 * the initializers' bytes and types, names kept and in-place blobs single-assigned, the
 * shape-dependent forms of FC, Softmax and a broadcast at an axis), what must fail with
 * every offending op listed (ops without a translation, training-mode ops, a weight no
 * init op fills, a blob nobody writes), and a round trip: export, then our importer,
 * gives the same ops and arguments, and both pairs compute the same outputs.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"
#include "netdef_test_util.h"
#include "net/api.h"
#include "net/netdef_build.h"
#include "net/onnx/export.h"
#include "net/onnx/import.h"

/* The weights of the conv net below: W 2x1x3x3, b 2, fc_w 3x4, fc_b 3, one INT64 and
 * one INT32 constant, and a fill the net never reads. */
static const char *conv_init =
    "op { output: 'w' type: 'GivenTensorFill' arg { name: 'shape' ints: [2, 1, 3, 3] }"
    "  arg { name: 'values' floats: [0.5, -1, 0.25, 2, 1, -0.5, 0.125, 0.75, -2,"
    "                                1, 1, -1, 0.5, -0.25, 0.25, 1.5, -1.5, 0.5] } }"
    "op { output: 'b' type: 'GivenTensorFill' arg { name: 'shape' ints: 2 }"
    "  arg { name: 'values' floats: [0.5, -0.25] } }"
    "op { output: 'fc_w' type: 'XavierFill' arg { name: 'shape' ints: [3, 4] }"
    "  device_option { random_seed: 5 } }"
    "op { output: 'fc_b' type: 'ConstantFill' arg { name: 'shape' ints: 3 }"
    "  arg { name: 'value' f: 0.25 } }"
    "op { output: 'newshape' type: 'GivenTensorInt64Fill' arg { name: 'shape' ints: 2 }"
    "  arg { name: 'values' ints: [1, -1] } }"
    "op { output: 'sizes' type: 'GivenTensorIntFill' arg { name: 'shape' ints: 2 }"
    "  arg { name: 'values' ints: [1, 1] } }"
    "op { output: 'unused' type: 'ConstantFill' arg { name: 'shape' ints: 4 } }";

/* x (1x1x8x8) -> Conv 3x3 pads t1 l0 b1 r2 -> c (1x2x8x8) -> Relu in place -> MaxPool
 * 3/2 pad 1 by Caffe's rule (rounded up: 5x5) -> p; AveragePool 4/1 VALID on c -> a
 * (1x2x5x5); Split p on channels by `sizes` -> p0, p1; Concat (p0, p1, a) -> j (1x4x5x5),
 * split_info unread; global MaxPool -> g (1x4x1x1) -> FC (4-D at axis 1: Flatten + Gemm)
 * -> fc; Reshape j by `newshape` -> r (1x100) -> Softmax -> prob. */
static const char *conv_pred_fmt =
    "name: 'convnet'"
    "op { input: ['x', 'w', 'b'] output: 'c' name: 'conv1' type: 'Conv'"
    "  arg { name: 'kernel' i: 3 } arg { name: 'stride' i: 1 }"
    "  arg { name: 'pad_t' i: 1 } arg { name: 'pad_l' i: 0 } arg { name: 'pad_b' i: 1 }"
    "  arg { name: 'pad_r' i: 2 } }"
    "op { input: 'c' output: 'c' name: 'relu1' type: 'Relu' }"
    "op { input: 'c' output: 'p' name: 'pool1' type: 'MaxPool' arg { name: 'kernel' i: 3 }"
    "  arg { name: 'stride' i: 2 } arg { name: 'pad' i: %d } arg { name: 'legacy_pad' i: 3 } }"
    "op { input: 'c' output: 'a' name: 'pool2' type: 'AveragePool' arg { name: 'kernels' ints: [4, 4] }"
    "  arg { name: 'strides' ints: [1, 1] } arg { name: 'legacy_pad' i: 1 } }"
    "op { input: ['p', 'sizes'] output: ['p0', 'p1'] name: 'split' type: 'Split' arg { name: 'axis' i: 1 } }"
    "op { input: ['p0', 'p1', 'a'] output: ['j', 'j_info'] name: 'cat' type: 'Concat'"
    "  arg { name: 'order' s: 'NCHW' } }"
    "op { input: 'j' output: 'g' name: 'gpool' type: 'MaxPool' arg { name: 'global_pooling' i: 1 } }"
    "op { input: ['g', 'fc_w', 'fc_b'] output: 'fc' name: 'fc' type: 'FC' }"
    "op { input: ['j', 'newshape'] output: 'r' name: 'reshape' type: 'Reshape' }"
    "op { input: 'r' output: 'prob' name: 'softmax' type: 'Softmax' }"
    "external_input: ['x', 'w', 'b', 'fc_w', 'fc_b', 'newshape', 'sizes']"
    "external_output: ['fc', 'prob']";

/* The conv net with pool1's pad (1, or 0 where X's shape is not given: a padded pool by
 * Caffe's rule needs it). */
static const char *conv_pred(int pool_pad) {
  static char buf[4096];
  snprintf(buf, sizeof buf, conv_pred_fmt, pool_pad);
  return buf;
}

static Onnx__ModelProto *export_text(const char *init_text, const char *pred_text,
                                     const dm_onnx_input_shape *shapes, size_t n_shapes) {
  Caffe2__NetDef *init = init_text ? parse(init_text) : NULL, *pred = parse(pred_text);
  dm_onnx_export_opts o = {shapes, n_shapes};
  Onnx__ModelProto *m = NULL;
  dm_status s = dm_onnx_export(init, pred, &o, &m);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  protobuf_c_message_free_unpacked(&pred->base, NULL);
  if (s != DM_OK)
    fail_msg("export failed: %s", dm_last_error());
  return m;
}

static void free_model(Onnx__ModelProto *m) { protobuf_c_message_free_unpacked(&m->base, NULL); }

static const Onnx__NodeProto *node_named(const Onnx__ModelProto *m, const char *name) {
  for (size_t i = 0; i < m->graph->n_node; i++)
    if (m->graph->node[i]->name && strcmp(m->graph->node[i]->name, name) == 0)
      return m->graph->node[i];
  fail_msg("no node named '%s'", name);
  return NULL;
}

/* The node that writes `out`. */
static const Onnx__NodeProto *node_writing(const Onnx__ModelProto *m, const char *out) {
  for (size_t i = 0; i < m->graph->n_node; i++)
    for (size_t k = 0; k < m->graph->node[i]->n_output; k++)
      if (strcmp(m->graph->node[i]->output[k], out) == 0)
        return m->graph->node[i];
  fail_msg("no node writes '%s'", out);
  return NULL;
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (strcmp(n->attribute[i]->name, name) == 0)
      return n->attribute[i];
  return NULL;
}

static void assert_ints(const Onnx__NodeProto *n, const char *name, size_t k, const int64_t *v) {
  const Onnx__AttributeProto *a = attr(n, name);
  if (!a)
    fail_msg("node %s has no %s", n->op_type, name);
  assert_int_equal(a->type, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  assert_int_equal(a->n_ints, k);
  assert_memory_equal(a->ints, v, k * sizeof *v);
}

static int64_t attr_i(const Onnx__NodeProto *n, const char *name) {
  const Onnx__AttributeProto *a = attr(n, name);
  if (!a || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
    fail_msg("node %s has no int %s", n->op_type, name);
  return a->i;
}

static const Onnx__TensorProto *initializer(const Onnx__ModelProto *m, const char *name) {
  for (size_t i = 0; i < m->graph->n_initializer; i++)
    if (strcmp(m->graph->initializer[i]->name, name) == 0)
      return m->graph->initializer[i];
  return NULL;
}

static void assert_inputs(const Onnx__NodeProto *n, size_t k, ...) {
  va_list ap;
  va_start(ap, k);
  assert_int_equal(n->n_input, k);
  for (size_t i = 0; i < k; i++)
    assert_string_equal(n->input[i], va_arg(ap, const char *));
  va_end(ap);
}

static void test_conv_pool_attributes(void **state) {
  (void)state;
  dm_onnx_input_shape x = {"x", 4, {1, 1, 8, 8}, DM_FLOAT};
  Onnx__ModelProto *m = export_text(conv_init, conv_pred(1), &x, 1);
  assert_int_equal(m->ir_version, DM_ONNX_EXPORT_IR_VERSION);
  assert_int_equal(m->opset_import[0]->version, DM_ONNX_EXPORT_OPSET);
  assert_string_equal(m->producer_name, "demitasse");
  assert_string_equal(m->graph->name, "convnet");
  /* Conv: kernel, stride, the four pads in Caffe2's (= ONNX's) order t, l, b, r */
  const Onnx__NodeProto *conv = node_named(m, "conv1");
  assert_string_equal(conv->op_type, "Conv");
  assert_inputs(conv, 3, "x", "w", "b");
  assert_ints(conv, "kernel_shape", 2, (int64_t[]){3, 3});
  assert_ints(conv, "strides", 2, (int64_t[]){1, 1});
  assert_ints(conv, "pads", 4, (int64_t[]){1, 0, 1, 2});
  assert_null(attr(conv, "dilations"));
  assert_null(attr(conv, "group"));
  /* Caffe's pooling rule: ceil_mode with the head pads on both sides */
  const Onnx__NodeProto *p1 = node_named(m, "pool1");
  assert_string_equal(p1->op_type, "MaxPool");
  assert_ints(p1, "kernel_shape", 2, (int64_t[]){3, 3});
  assert_ints(p1, "strides", 2, (int64_t[]){2, 2});
  assert_ints(p1, "pads", 4, (int64_t[]){1, 1, 1, 1});
  assert_int_equal(attr_i(p1, "ceil_mode"), 1);
  const Onnx__NodeProto *p2 = node_named(m, "pool2");
  assert_string_equal(p2->op_type, "AveragePool");
  assert_string_equal((const char *)attr(p2, "auto_pad")->s.data, "VALID");
  assert_null(attr(p2, "pads"));
  assert_null(attr(p2, "count_include_pad")); /* 0, as ours: input pixels only */
  assert_string_equal(node_named(m, "gpool")->op_type, "GlobalMaxPool");
  /* Split's sizes and Reshape's shape: INT64 inputs from the INT32/INT64 constants */
  const Onnx__NodeProto *split = node_named(m, "split");
  assert_int_equal(attr_i(split, "axis"), 1);
  assert_int_equal(split->n_input, 2);
  const Onnx__TensorProto *sz = initializer(m, split->input[1]);
  assert_non_null(sz);
  assert_int_equal(sz->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
  assert_memory_equal(sz->raw_data.data, ((int64_t[]){1, 1}), 16);
  const Onnx__NodeProto *cat = node_named(m, "cat");
  assert_int_equal(attr_i(cat, "axis"), 1);
  assert_int_equal(cat->n_output, 1); /* split_info, unread, dropped */
  /* FC on a 4-D input: Flatten at 1, then Gemm with W as (N, K) */
  const Onnx__NodeProto *fc = node_named(m, "fc");
  assert_string_equal(fc->op_type, "Gemm");
  assert_int_equal(attr_i(fc, "transB"), 1);
  const Onnx__NodeProto *flat = node_writing(m, fc->input[0]);
  assert_string_equal(flat->op_type, "Flatten");
  assert_string_equal(flat->input[0], "g");
  assert_int_equal(attr_i(flat, "axis"), 1);
  assert_string_equal(fc->input[1], "fc_w");
  /* Softmax on a 2-D input: one node, along the last axis */
  const Onnx__NodeProto *sm = node_named(m, "softmax");
  assert_string_equal(sm->op_type, "Softmax");
  assert_int_equal(attr_i(sm, "axis"), -1);
  assert_string_equal(sm->output[0], "prob");
  /* outputs with their inferred shapes */
  assert_int_equal(m->graph->n_output, 2);
  assert_string_equal(m->graph->output[0]->name, "fc");
  const Onnx__TensorShapeProto *os = m->graph->output[1]->type->tensor_type->shape;
  assert_int_equal(os->n_dim, 2);
  assert_int_equal(os->dim[0]->dim_value, 1);
  assert_int_equal(os->dim[1]->dim_value, 100);
  free_model(m);
}

static void test_initializers_and_names(void **state) {
  (void)state;
  Onnx__ModelProto *m = export_text(conv_init, conv_pred(0), NULL, 0);
  /* the values exactly, little-endian FLOAT; ConstantFill's too; an unread fill left out */
  const Onnx__TensorProto *w = initializer(m, "w"), *b = initializer(m, "b");
  assert_non_null(w);
  assert_int_equal(w->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
  assert_int_equal(w->n_dims, 4);
  assert_memory_equal(w->dims, ((int64_t[]){2, 1, 3, 3}), 32);
  assert_int_equal(w->raw_data.len, 18 * 4);
  float w0[3];
  memcpy(w0, w->raw_data.data, sizeof w0);
  assert_true(w0[0] == 0.5f && w0[1] == -1.0f && w0[2] == 0.25f);
  assert_memory_equal(b->raw_data.data, ((float[]){0.5f, -0.25f}), 8);
  float fb[3];
  memcpy(fb, initializer(m, "fc_b")->raw_data.data, sizeof fb);
  assert_true(fb[0] == 0.25f && fb[1] == 0.25f && fb[2] == 0.25f);
  assert_int_equal(initializer(m, "newshape")->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
  /* Split's INT32 sizes are read as an INT64 copy, and the original is left out */
  const Onnx__NodeProto *split = node_named(m, "split");
  assert_string_equal(split->input[1], "p0_split");
  assert_int_equal(initializer(m, "p0_split")->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
  assert_null(initializer(m, "sizes"));
  assert_string_equal(node_named(m, "reshape")->input[1], "newshape");
  assert_null(initializer(m, "unused"));
  /* the seeded XavierFill gives what the init net gives when run */
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  dm_net *net = NULL;
  assert_ok(net_from_text(ws, conv_init, &net));
  assert_ok(dm_net_run(net));
  const dm_tensor *fw = NULL;
  assert_ok(dm_workspace_fetch(ws, "fc_w", &fw));
  assert_memory_equal(initializer(m, "fc_w")->raw_data.data, dm_tensor_data(fw), 12 * 4);
  dm_workspace_destroy(ws);
  /* the graph input: x alone, FLOAT, no shape given; the in-place Relu keeps 'c' for
   * its value and the Conv's is c__1 */
  assert_int_equal(m->graph->n_input, 1);
  assert_string_equal(m->graph->input[0]->name, "x");
  assert_int_equal(m->graph->input[0]->type->tensor_type->elem_type,
                   ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
  assert_null(m->graph->input[0]->type->tensor_type->shape);
  const Onnx__NodeProto *conv = node_named(m, "conv1"), *relu = node_named(m, "relu1");
  assert_string_equal(conv->output[0], "c__1");
  assert_inputs(relu, 1, "c__1");
  assert_string_equal(relu->output[0], "c");
  assert_inputs(node_named(m, "pool1"), 1, "c");
  /* without shapes: FC flattens anyway, Softmax becomes Flatten, Softmax, Reshape to
   * Shape(r) */
  assert_string_equal(node_writing(m, node_named(m, "fc")->input[0])->op_type, "Flatten");
  const Onnx__NodeProto *back = node_writing(m, "prob");
  assert_string_equal(back->op_type, "Reshape");
  assert_string_equal(node_writing(m, back->input[1])->op_type, "Shape");
  assert_string_equal(node_writing(m, back->input[0])->op_type, "Softmax");
  free_model(m);
}

static void expect_fail(const char *init, const char *pred, const dm_onnx_input_shape *shapes,
                        size_t n, dm_status want, const char *const *frags) {
  Caffe2__NetDef *i = init ? parse(init) : NULL, *p = parse(pred);
  dm_onnx_export_opts o = {shapes, n};
  Onnx__ModelProto *m = (Onnx__ModelProto *)1;
  dm_status s = dm_onnx_export(i, p, &o, &m);
  if (s != want)
    fail_msg("status %s, wanted %s: %s", dm_status_name(s), dm_status_name(want), dm_last_error());
  assert_null(m);
  for (; *frags; frags++)
    if (!strstr(dm_last_error(), *frags))
      fail_msg("message lacks '%s': %s", *frags, dm_last_error());
  if (i)
    protobuf_c_message_free_unpacked(&i->base, NULL);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

static void test_refused_listed(void **state) {
  (void)state;
  /* four ops that cannot be exported, all listed; the translatable ones are not */
  const char *pred =
      "op { input: ['x', 'w', 'b'] output: 'c' name: 'conv1' type: 'Conv' arg { name: 'kernel' i: 3 } }"
      "op { input: 'c' output: 'd' name: 'drop' type: 'Dropout' arg { name: 'is_test' i: 0 } }"
      "op { input: 'd' output: 'e' name: 'frob' type: 'Frobnicate' }"
      "op { input: ['e', 'label'] output: ['sm', 'loss'] name: 'loss' type: 'SoftmaxWithLoss' }"
      "op { input: 'c' output: 'n' name: 'nhwc' type: 'MaxPool' arg { name: 'kernel' i: 2 }"
      "  arg { name: 'order' s: 'NHWC' } }"
      "op { input: 'c' output: 'r' name: 'relu' type: 'Relu' }"
      "external_input: ['x', 'w', 'b', 'label'] external_output: ['loss', 'r']";
  const char *init =
      "op { output: 'w' type: 'ConstantFill' arg { name: 'shape' ints: [1, 1, 3, 3] } }"
      "op { output: 'b' type: 'ConstantFill' arg { name: 'shape' ints: 1 } }";
  const char *frags[] = {"4 of 6 ops cannot be exported",
                         "op 1 'drop': Dropout: training mode",
                         "op 2 'frob': Frobnicate: no ONNX translation",
                         "op 3 'loss': SoftmaxWithLoss: no ONNX translation",
                         "op 4 'nhwc': MaxPool: order is not NCHW", NULL};
  expect_fail(init, pred, NULL, 0, DM_ERR_UNSUPPORTED, frags);
  /* Caffe's pooling rule with padding needs X's shape */
  const char *frags4[] = {"1 of 1 ops", "op 0 'pool': MaxPool: legacy_pad 3 with padding and "
                          "X's shape unknown", NULL};
  expect_fail(NULL, "op { input: 'x' output: 'y' name: 'pool' type: 'MaxPool' arg { name: "
              "'kernel' i: 3 } arg { name: 'pad' i: 1 } arg { name: 'legacy_pad' i: 3 } }"
              "external_input: 'x' external_output: 'y'", NULL, 0, DM_ERR_UNSUPPORTED, frags4);
  /* a weight no init op fills, and a blob nobody writes */
  const char *pred2 =
      "op { input: ['x', 'w', 'b'] output: 'c' name: 'conv1' type: 'Conv' arg { name: 'kernel' i: 3 } }"
      "op { input: ['c', 'ghost'] output: 's' name: 'add' type: 'Add' }"
      "external_input: ['x', 'w', 'b'] external_output: 's'";
  const char *init2 = "op { output: 'b' type: 'ConstantFill' arg { name: 'shape' ints: 1 } }";
  const char *frags2[] = {"2 of 2 ops cannot be exported",
                          "op 0 'conv1': Conv: W 'w' is not filled by the init net",
                          "op 1 'add': Add: input 'ghost' is not an input of the net", NULL};
  expect_fail(init2, pred2, NULL, 0, DM_ERR_UNSUPPORTED, frags2);
  /* a shape for a blob that is not a graph input */
  dm_onnx_input_shape bad = {"w", 1, {3}, DM_FLOAT};
  const char *frags3[] = {"an input shape for 'w'", "the init net fills it", NULL};
  expect_fail(init, "op { input: 'x' output: 'y' type: 'Relu' } external_input: ['x', 'w']"
                    " external_output: 'y'",
              &bad, 1, DM_ERR_INVALID, frags3);
}

/* FC at axis 2 (Flatten, Gemm, Reshape back), Softmax over trailing dims (Flatten,
 * Softmax, Reshape to the known shape), Softmax whose trailing dims are 1 (one node),
 * and a legacy broadcast at an axis (the constant B given trailing 1s). */
static void test_shape_forms(void **state) {
  (void)state;
  const char *init =
      "op { output: 'w' type: 'ConstantFill' arg { name: 'shape' ints: [5, 4] } arg { name: 'value' f: 0.5 } }"
      "op { output: 'b' type: 'ConstantFill' arg { name: 'shape' ints: 5 } }"
      "op { output: 'bias' type: 'GivenTensorFill' arg { name: 'shape' ints: 3 }"
      "  arg { name: 'values' floats: [1, 2, 3] } }";
  const char *pred =
      "op { input: ['x', 'w', 'b'] output: 'y' name: 'fc' type: 'FC' arg { name: 'axis' i: 2 } }"
      "op { input: 'y' output: 's' name: 'sm' type: 'Softmax' arg { name: 'axis' i: 1 } }"
      "op { input: ['s', 'bias'] output: 't' name: 'add' type: 'Add' arg { name: 'broadcast' i: 1 }"
      "  arg { name: 'axis' i: 1 } }"
      "op { input: 'x' output: 'u' name: 'sm1' type: 'Softmax' arg { name: 'axis' i: -1 } }"
      "external_input: ['x', 'w', 'b', 'bias'] external_output: ['t', 'u']";
  dm_onnx_input_shape x = {"x", 3, {2, 3, 4}, DM_FLOAT};
  Onnx__ModelProto *m = export_text(init, pred, &x, 1);
  const Onnx__NodeProto *gemm = node_named(m, "fc");
  assert_string_equal(gemm->op_type, "Gemm");
  const Onnx__NodeProto *flat = node_writing(m, gemm->input[0]);
  assert_int_equal(attr_i(flat, "axis"), 2);
  const Onnx__NodeProto *back = node_writing(m, "y");
  assert_string_equal(back->op_type, "Reshape");
  const Onnx__TensorProto *shape = initializer(m, back->input[1]);
  assert_int_equal(shape->raw_data.len, 24);
  assert_memory_equal(shape->raw_data.data, ((int64_t[]){2, 3, 5}), 24);
  /* Softmax over dims 1, 2 of (2, 3, 5): Flatten at 1, Softmax, Reshape to (2, 3, 5) */
  const Onnx__NodeProto *sm = node_named(m, "sm");
  assert_string_equal(node_writing(m, sm->input[0])->op_type, "Flatten");
  const Onnx__NodeProto *smb = node_writing(m, "s");
  assert_string_equal(smb->op_type, "Reshape");
  assert_memory_equal(initializer(m, smb->input[1])->raw_data.data, ((int64_t[]){2, 3, 5}), 24);
  /* B (3) at axis 1 of (2, 3, 5): numpy needs (3, 1) */
  const Onnx__NodeProto *add = node_named(m, "add");
  const Onnx__TensorProto *bb = initializer(m, add->input[1]);
  assert_non_null(bb);
  assert_int_equal(bb->n_dims, 2);
  assert_memory_equal(bb->dims, ((int64_t[]){3, 1}), 16);
  assert_memory_equal(bb->raw_data.data, ((float[]){1, 2, 3}), 12);
  free_model(m);
  /* Caffe's pooling rule where the last window would start in the padding (5 pixels,
   * kernel 3, stride 3, pad 1: Caffe gives 2, ONNX's ceil_mode 3): explicit pads that
   * give 2, no ceil_mode */
  dm_onnx_input_shape x5 = {"x", 4, {1, 1, 5, 5}, DM_FLOAT};
  m = export_text(NULL, "op { input: 'x' output: 'y' name: 'pool' type: 'MaxPool' arg { name: "
                  "'kernel' i: 3 } arg { name: 'stride' i: 3 } arg { name: 'pad' i: 1 } arg "
                  "{ name: 'legacy_pad' i: 3 } } external_input: 'x' external_output: 'y'", &x5, 1);
  const Onnx__NodeProto *pool = node_named(m, "pool");
  assert_null(attr(pool, "ceil_mode"));
  assert_ints(pool, "pads", 4, (int64_t[]){1, 1, 1, 1});
  const Onnx__TensorShapeProto *ys = m->graph->output[0]->type->tensor_type->shape;
  assert_int_equal(ys->dim[2]->dim_value, 2);
  free_model(m);
  m = export_text(init, pred, &x, 1);
  /* axis -1 of a 3-D input is the last: one Softmax node */
  const Onnx__NodeProto *sm1 = node_named(m, "sm1");
  assert_string_equal(sm1->op_type, "Softmax");
  assert_string_equal(sm1->input[0], "x");
  assert_string_equal(sm1->output[0], "u");
  free_model(m);
}

/* BatchMatMul and MatMul as ONNX MatMul: trans_* a Transpose of the last two dims,
 * MatMul's axis a Flatten; the forms with no ONNX counterpart refused. */
static void test_matmul(void **state) {
  (void)state;
  const char *pred =
      "op { input: ['q', 'k'] output: 's' name: 'qk' type: 'BatchMatMul'"
      "  arg { name: 'trans_b' i: 1 } }"
      "op { input: ['s', 'v'] output: 'o' name: 'sv' type: 'BatchMatMul'"
      "  arg { name: 'broadcast' i: 1 } }"
      "op { input: ['o', 'w'] output: 'p' name: 'mm' type: 'MatMul'"
      "  arg { name: 'axis_a' i: 2 } arg { name: 'trans_b' i: 1 } }"
      "external_input: ['q', 'k', 'v', 'w'] external_output: 'p'";
  dm_onnx_input_shape sh[] = {{"q", 3, {2, 4, 3}, DM_FLOAT},
                              {"k", 3, {2, 5, 3}, DM_FLOAT},
                              {"v", 2, {5, 6}, DM_FLOAT},
                              {"w", 2, {7, 6}, DM_FLOAT}};
  Onnx__ModelProto *m = export_text(NULL, pred, sh, 4);
  const Onnx__NodeProto *qk = node_named(m, "qk");
  assert_string_equal(qk->op_type, "MatMul");
  assert_string_equal(qk->input[0], "q");
  const Onnx__NodeProto *kt = node_writing(m, qk->input[1]);
  assert_string_equal(kt->op_type, "Transpose");
  assert_string_equal(kt->input[0], "k");
  assert_ints(kt, "perm", 3, (int64_t[]){0, 2, 1});
  const Onnx__NodeProto *sv = node_named(m, "sv");
  assert_string_equal(sv->op_type, "MatMul");
  assert_inputs(sv, 2, "s", "v");
  const Onnx__NodeProto *mm = node_named(m, "mm");
  const Onnx__NodeProto *flat = node_writing(m, mm->input[0]);
  assert_string_equal(flat->op_type, "Flatten");
  assert_int_equal(attr_i(flat, "axis"), 2);
  const Onnx__NodeProto *wt = node_writing(m, mm->input[1]);
  assert_string_equal(wt->op_type, "Transpose");
  assert_ints(wt, "perm", 2, (int64_t[]){1, 0});
  const Onnx__TensorShapeProto *ps = m->graph->output[0]->type->tensor_type->shape;
  assert_int_equal(ps->n_dim, 2);
  assert_int_equal(ps->dim[0]->dim_value, 8);
  assert_int_equal(ps->dim[1]->dim_value, 7);
  free_model(m);
  const char *dot = "op { input: ['a', 'b'] output: 'y' name: 'dot' type: 'BatchMatMul'"
                    "  arg { name: 'broadcast' i: 1 } }"
                    "external_input: ['a', 'b'] external_output: 'y'";
  dm_onnx_input_shape v[] = {{"a", 1, {4}, DM_FLOAT}, {"b", 1, {4}, DM_FLOAT}};
  expect_fail(NULL, dot, v, 2, DM_ERR_UNSUPPORTED,
              (const char *[]){"'dot'", "two 1-D inputs", NULL});
  const char *tr = "op { input: ['a', 'c'] output: 'z' name: 'tr' type: 'BatchMatMul'"
                   "  arg { name: 'trans_a' i: 1 } }"
                   "external_input: ['a', 'c'] external_output: 'z'";
  expect_fail(NULL, tr, NULL, 0, DM_ERR_UNSUPPORTED,
              (const char *[]){"'tr'", "trans_a on an input of unknown rank", NULL});
}

/* The sequence ops' definitions compute in FLOAT (as their kernels do): a FLOAT16 input
 * is cast up first and the result back; the forms ONNX would compute differently are
 * refused. tests/onnx/export_ort.py runs their values through ONNX Runtime. */
static void test_seq_ops(void **state) {
  (void)state;
  const char *ln = "op { input: 'x' output: ['y', 'mu', 'sd'] name: 'ln' type: 'LayerNorm'"
                   "  arg { name: 'axis' i: 2 } }"
                   "external_input: 'x' external_output: 'y'";
  dm_onnx_input_shape x16 = {"x", 3, {2, 3, 4}, DM_FLOAT16};
  Onnx__ModelProto *m = export_text(NULL, ln, &x16, 1);
  const Onnx__NodeProto *back = node_writing(m, "y");
  assert_string_equal(back->op_type, "Cast");
  assert_int_equal(attr_i(back, "to"), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16);
  const Onnx__NodeProto *div = node_named(m, "ln");
  assert_string_equal(div->op_type, "Div");
  const Onnx__NodeProto *sub = node_writing(m, div->input[0]);
  assert_string_equal(sub->op_type, "Sub");
  const Onnx__NodeProto *up = node_writing(m, sub->input[0]);
  assert_string_equal(up->op_type, "Cast");
  assert_string_equal(up->input[0], "x");
  assert_int_equal(attr_i(up, "to"), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
  assert_int_equal(m->graph->input[0]->type->tensor_type->elem_type,
                   ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16);
  free_model(m);
  const char *stats = "op { input: 'x' output: ['y', 'mu', 'sd'] name: 'ln' type: 'LayerNorm' }"
                      "op { input: 'mu' output: 'z' name: 'r' type: 'Relu' }"
                      "external_input: 'x' external_output: ['y', 'z']";
  dm_onnx_input_shape x32 = {"x", 3, {2, 3, 4}, DM_FLOAT};
  expect_fail(NULL, stats, &x32, 1, DM_ERR_UNSUPPORTED,
              (const char *[]){"'ln'", "output 1 (mean) is read", NULL});
  const char *causal = "op { input: 's' output: 'p' name: 'sm' type: 'MaskedSoftmax'"
                       "  arg { name: 'causal' i: 1 } }"
                       "external_input: 's' external_output: 'p'";
  dm_onnx_input_shape wide = {"s", 3, {2, 3, 2}, DM_FLOAT};
  expect_fail(NULL, causal, &wide, 1, DM_ERR_UNSUPPORTED,
              (const char *[]){"'sm'", "Tk 2 < Tq 3", NULL});
  expect_fail(NULL, causal, NULL, 0, DM_ERR_UNSUPPORTED,
              (const char *[]){"'sm'", "causal=1 needs X's shape", NULL});
  /* without the inputs' dtypes a 16-bit input would get FLOAT constants: refused */
  const char *gelu = "op { input: 'x' output: 'y' name: 'g' type: 'Gelu' }"
                     "external_input: 'x' external_output: 'y'";
  expect_fail(NULL, gelu, NULL, 0, DM_ERR_UNSUPPORTED,
              (const char *[]){"'g'", "dtype of input 0 ('x') is unknown", NULL});
}

/* ---- round trip ------------------------------------------------------------------- */

static const char *rt_init =
    "op { output: 'w1' type: 'XavierFill' arg { name: 'shape' ints: [4, 3, 3, 3] }"
    "  device_option { random_seed: 11 } }"
    "op { output: 'b1' type: 'GivenTensorFill' arg { name: 'shape' ints: 4 }"
    "  arg { name: 'values' floats: [0.1, -0.2, 0.3, 0.05] } }"
    "op { output: 'scale' type: 'GivenTensorFill' arg { name: 'shape' ints: 4 }"
    "  arg { name: 'values' floats: [1.5, 0.5, 1, 2] } }"
    "op { output: 'bias' type: 'GivenTensorFill' arg { name: 'shape' ints: 4 }"
    "  arg { name: 'values' floats: [0, 0.1, -0.1, 0.2] } }"
    "op { output: 'mean' type: 'GivenTensorFill' arg { name: 'shape' ints: 4 }"
    "  arg { name: 'values' floats: [0.1, 0, -0.1, 0.3] } }"
    "op { output: 'var' type: 'GivenTensorFill' arg { name: 'shape' ints: 4 }"
    "  arg { name: 'values' floats: [1, 0.5, 2, 0.8] } }"
    "op { output: 'fw' type: 'XavierFill' arg { name: 'shape' ints: [6, 150] }"
    "  device_option { random_seed: 12 } }"
    "op { output: 'fb' type: 'ConstantFill' arg { name: 'shape' ints: 6 } arg { name: 'value' f: 0.1 } }";

/* Every op in a form the importer reads back as the same op and arguments. */
static const char *rt_pred =
    "name: 'rt'"
    "op { input: ['x', 'w1', 'b1'] output: 'c' name: 'conv' type: 'Conv'"
    "  arg { name: 'kernels' ints: [3, 3] } arg { name: 'strides' ints: [1, 1] }"
    "  arg { name: 'pads' ints: [2, 1, 2, 1] } arg { name: 'dilations' ints: [2, 1] } }"
    "op { input: ['c', 'scale', 'bias', 'mean', 'var'] output: 'n' name: 'bn' type: 'SpatialBN'"
    "  arg { name: 'is_test' i: 1 } arg { name: 'epsilon' f: 0.001 } }"
    "op { input: 'n' output: 'r' name: 'relu' type: 'Relu' }"
    "op { input: 'r' output: 'p' name: 'pool' type: 'MaxPool' arg { name: 'kernels' ints: [3, 3] }"
    "  arg { name: 'strides' ints: [2, 2] } arg { name: 'pads' ints: [1, 1, 1, 1] }"
    "  arg { name: 'legacy_pad' i: 3 } }"
    "op { input: 'p' output: 'q' name: 'lrn' type: 'LRN' arg { name: 'size' i: 3 }"
    "  arg { name: 'alpha' f: 0.001 } arg { name: 'beta' f: 0.75 } arg { name: 'bias' f: 1.5 } }"
    "op { input: ['q', 'r2'] output: ['j'] name: 'cat' type: 'Concat' arg { name: 'axis' i: 1 } }"
    "op { input: 'j' output: 'f' name: 'flat' type: 'Flatten' arg { name: 'axis' i: 1 } }"
    "op { input: ['f', 'fw', 'fb'] output: 'y' name: 'fc' type: 'FC' }"
    "op { input: 'y' output: 'prob' name: 'softmax' type: 'Softmax' arg { name: 'axis' i: 1 } }"
    "external_input: ['x', 'r2', 'w1', 'b1', 'scale', 'bias', 'mean', 'var', 'fw', 'fb']"
    "external_output: 'prob'";

static const dm_onnx_input_shape rt_shapes[2] = {{"x", 4, {1, 3, 8, 8}, DM_FLOAT}, {"r2", 4, {1, 2, 5, 5}, DM_FLOAT}};

static const char *arg_names[] = {"kernels", "strides", "pads", "dilations", "legacy_pad",
                                  "epsilon", "is_test", "size", "alpha", "beta", "bias", "axis",
                                  NULL};

/* Runs the pair on x (1x3x8x8) and r2 (1x2x5x5); *out gets prob (6 floats). */
static void run_pair(const Caffe2__NetDef *init, const Caffe2__NetDef *pred, const float *x,
                     const float *r2, float out[6]) {
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  Caffe2__NetDef *i = NULL, *p = NULL;
  assert_ok(DM_PB_CLONE(Caffe2__NetDef, init, &i));
  assert_ok(DM_PB_CLONE(Caffe2__NetDef, pred, &p));
  dm_net *in = NULL, *pn = NULL;
  assert_ok(dm_workspace_create_net(ws, i, "init", &in));
  assert_ok(dm_net_run(in));
  int64_t xd[4] = {1, 3, 8, 8}, rd[4] = {1, 2, 5, 5};
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 4, xd, x));
  assert_ok(dm_workspace_feed(ws, "r2", DM_FLOAT, 4, rd, r2));
  assert_ok(dm_workspace_create_net(ws, p, "pred", &pn));
  assert_ok(dm_net_run(pn));
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, "prob", &t));
  assert_int_equal(dm_tensor_numel(t), 6);
  memcpy(out, dm_tensor_data(t), 6 * sizeof *out);
  dm_workspace_destroy(ws);
}

static void test_round_trip(void **state) {
  (void)state;
  Onnx__ModelProto *m = export_text(rt_init, rt_pred, rt_shapes, 2);
  /* through the file format too: pack, parse */
  size_t len = protobuf_c_message_get_packed_size(&m->base);
  uint8_t *buf = malloc(len);
  protobuf_c_message_pack(&m->base, buf);
  free_model(m);
  m = onnx__model_proto__unpack(NULL, len, buf);
  free(buf);
  assert_non_null(m);
  Caffe2__NetDef *init2 = NULL, *pred2 = NULL;
  assert_ok(dm_onnx_import(m, NULL, &init2, &pred2));
  onnx__model_proto__free_unpacked(m, NULL);
  Caffe2__NetDef *pred = parse(rt_pred), *init = parse(rt_init);
  /* the same ops, names, inputs, outputs and arguments (legacy_pad 3, exported as
   * ceil_mode where the two rules agree, comes back as the op's ceil_mode) */
  assert_int_equal(pred2->n_op, pred->n_op);
  for (size_t i = 0; i < pred->n_op; i++) {
    const Caffe2__OperatorDef *a = pred->op[i], *b = pred2->op[i];
    assert_string_equal(a->type, b->type == NULL ? "" : b->type);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->n_input, b->n_input);
    for (size_t k = 0; k < a->n_input; k++)
      assert_string_equal(a->input[k], b->input[k]);
    assert_string_equal(a->output[0], b->output[0]);
    for (const char **n = arg_names; *n; n++) {
      const Caffe2__Argument *x = dm_opdef_find_arg(a, *n), *y = dm_opdef_find_arg(b, *n);
      if (!x)
        continue;
      if (!y && strcmp(*n, "axis") == 0 && strcmp(a->type, "Softmax") == 0)
        continue;
      if (!y && strcmp(*n, "legacy_pad") == 0 && x->i == 3) { /* as the op's ceil_mode */
        const Caffe2__Argument *c = dm_opdef_find_arg(b, "ceil_mode");
        assert_true(c && c->i == 1);
        continue;
      }
      if (!y)
        fail_msg("op %zu %s lost '%s'", i, a->type, *n);
      if (strcmp(a->type, "Softmax") == 0 && strcmp(*n, "axis") == 0) {
        assert_int_equal(y->i == -1 ? 1 : y->i, x->i); /* the last of 2 dims either way */
        continue;
      }
      assert_int_equal(x->n_ints, y->n_ints);
      if (x->n_ints)
        assert_memory_equal(x->ints, y->ints, x->n_ints * sizeof *x->ints);
      assert_int_equal(x->i, y->i);
      assert_true(x->f == y->f);
    }
  }
  /* and the same answer: the original pair and the imported one, run here */
  float x[3 * 64], r2[50], want[6], got[6];
  for (int i = 0; i < 3 * 64; i++)
    x[i] = sinf(0.37f * (float)i);
  for (int i = 0; i < 50; i++)
    r2[i] = cosf(0.21f * (float)i);
  run_pair(init, pred, x, r2, want);
  run_pair(init2, pred2, x, r2, got);
  for (int i = 0; i < 6; i++)
    assert_true(fabsf(want[i] - got[i]) <= 1e-6f * fmaxf(1.0f, fabsf(want[i])));
  protobuf_c_message_free_unpacked(&init->base, NULL);
  protobuf_c_message_free_unpacked(&pred->base, NULL);
  protobuf_c_message_free_unpacked(&init2->base, NULL);
  protobuf_c_message_free_unpacked(&pred2->base, NULL);
}

/* The file: written whole, and a failed export leaves the old file as it was. */
static void test_write(void **state) {
  (void)state;
  char dir[] = "/tmp/dm_onnx_export_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/m.onnx", dir);
  Onnx__ModelProto *m = export_text(rt_init, rt_pred, rt_shapes, 2);
  assert_ok(dm_onnx_model_write(m, path));
  free_model(m);
  Caffe2__NetDef *i = NULL, *p = NULL;
  assert_ok(dm_onnx_import_file(path, &i, &p));
  assert_int_equal(p->n_op, 9);
  protobuf_c_message_free_unpacked(&i->base, NULL);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  remove(path);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_pool_attributes), cmocka_unit_test(test_initializers_and_names),
      cmocka_unit_test(test_refused_listed),       cmocka_unit_test(test_shape_forms),
      cmocka_unit_test(test_round_trip),           cmocka_unit_test(test_write),
      cmocka_unit_test(test_matmul),               cmocka_unit_test(test_seq_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
