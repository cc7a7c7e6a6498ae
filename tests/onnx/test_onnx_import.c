/* test_onnx_import.c: the ONNX importer (net/onnx/import.h) on small models built here.
 *
 * What a translation must produce (argument values, fills, external names), and what
 * must fail with a clear error: a truncated file, a missing initializer, nodes out of
 * order (a cycle), an unsupported data type, raw_data of the wrong length, external
 * data outside the model's folder, and a model with several untranslatable nodes, all
 * listed in one message; the math translators' arguments and refusals.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/netdef_build.h"
#include "net/onnx/import.h"
#include "op_test_util.h"

#define MAXN 8

/* A model held in fixed arrays: nothing to free. */
typedef struct tmodel {
  Onnx__ModelProto m;
  Onnx__GraphProto g;
  Onnx__OperatorSetIdProto os;
  Onnx__OperatorSetIdProto *osp[1];
  Onnx__NodeProto node[MAXN];
  Onnx__NodeProto *nodep[MAXN];
  Onnx__TensorProto init[MAXN];
  Onnx__TensorProto *initp[MAXN];
  Onnx__ValueInfoProto in[MAXN], out[MAXN];
  Onnx__ValueInfoProto *inp[MAXN], *outp[MAXN];
  Onnx__AttributeProto attr[MAXN][MAXN];
  Onnx__AttributeProto *attrp[MAXN][MAXN];
} tmodel;

static void tm_init(tmodel *t, int64_t opset) {
  memset(t, 0, sizeof *t);
  onnx__model_proto__init(&t->m);
  onnx__graph_proto__init(&t->g);
  onnx__operator_set_id_proto__init(&t->os);
  t->os.has_version = 1;
  t->os.version = opset;
  t->osp[0] = &t->os;
  t->m.n_opset_import = 1;
  t->m.opset_import = t->osp;
  t->m.graph = &t->g;
  t->g.node = t->nodep;
  t->g.initializer = t->initp;
  t->g.input = t->inp;
  t->g.output = t->outp;
}

static void tm_input(tmodel *t, char *name) {
  Onnx__ValueInfoProto *v = &t->in[t->g.n_input];
  onnx__value_info_proto__init(v);
  v->name = name;
  t->inp[t->g.n_input++] = v;
}

static void tm_output(tmodel *t, char *name) {
  Onnx__ValueInfoProto *v = &t->out[t->g.n_output];
  onnx__value_info_proto__init(v);
  v->name = name;
  t->outp[t->g.n_output++] = v;
}

/* A FLOAT initializer with `dims` (n_dims of them) and `data`. */
static Onnx__TensorProto *tm_float_init(tmodel *t, char *name, size_t n_dims, int64_t *dims,
                                        size_t n, float *data) {
  Onnx__TensorProto *x = &t->init[t->g.n_initializer];
  onnx__tensor_proto__init(x);
  x->name = name;
  x->has_data_type = 1;
  x->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  x->n_dims = n_dims;
  x->dims = dims;
  x->n_float_data = n;
  x->float_data = data;
  t->initp[t->g.n_initializer++] = x;
  return x;
}

static Onnx__NodeProto *tm_node(tmodel *t, char *type, char *name, size_t n_in, char **in,
                                size_t n_out, char **out) {
  size_t k = t->g.n_node++;
  Onnx__NodeProto *n = &t->node[k];
  onnx__node_proto__init(n);
  n->op_type = type;
  n->name = name;
  n->n_input = n_in;
  n->input = in;
  n->n_output = n_out;
  n->output = out;
  n->attribute = t->attrp[k];
  t->nodep[k] = n;
  return n;
}

static Onnx__AttributeProto *tm_attr(tmodel *t, Onnx__NodeProto *n, char *name) {
  size_t k = (size_t)(n - t->node);
  Onnx__AttributeProto *a = &t->attr[k][n->n_attribute];
  onnx__attribute_proto__init(a);
  a->name = name;
  t->attrp[k][n->n_attribute++] = a;
  return a;
}

static void attr_ints(tmodel *t, Onnx__NodeProto *n, char *name, size_t k, int64_t *v) {
  Onnx__AttributeProto *a = tm_attr(t, n, name);
  a->has_type = 1;
  a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  a->n_ints = k;
  a->ints = v;
}

static void attr_int(tmodel *t, Onnx__NodeProto *n, char *name, int64_t v) {
  Onnx__AttributeProto *a = tm_attr(t, n, name);
  a->has_type = 1;
  a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  a->has_i = 1;
  a->i = v;
}

static const Caffe2__Argument *arg(const Caffe2__OperatorDef *op, const char *name) {
  const Caffe2__Argument *a = dm_opdef_find_arg(op, name);
  if (!a)
    fail_msg("op %s has no argument '%s'", op->type, name);
  return a;
}

static void free_pair(Caffe2__NetDef *init, Caffe2__NetDef *pred) {
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  if (pred)
    protobuf_c_message_free_unpacked(&pred->base, NULL);
}

/* x -> Conv(W, b; 3x3, stride 2, pads 1 0 1 2) -> Relu -> Flatten -> Gemm(Wf, bf) -> y */
static char *conv_in[] = {"x", "W", "b"}, *conv_out[] = {"c"};
static char *relu_in[] = {"c"}, *relu_out[] = {"r"};
static char *flat_in[] = {"r"}, *flat_out[] = {"f"};
static char *gemm_in[] = {"f", "Wf", "bf"}, *gemm_out[] = {"y"};
static int64_t w_dims[] = {2, 1, 3, 3}, b_dims[] = {2}, wf_dims[] = {3, 8}, bf_dims[] = {3};
static float w_data[18], b_data[2] = {0.5f, -0.25f}, wf_data[24], bf_data[3] = {1, 2, 3};
static int64_t strides[] = {2, 2}, pads[] = {1, 0, 1, 2}, kshape[] = {3, 3};

static void build_small(tmodel *t) {
  tm_init(t, 13);
  tm_input(t, "x");
  tm_output(t, "y");
  tm_float_init(t, "W", 4, w_dims, 18, w_data);
  tm_float_init(t, "b", 1, b_dims, 2, b_data);
  tm_float_init(t, "Wf", 2, wf_dims, 24, wf_data);
  tm_float_init(t, "bf", 1, bf_dims, 3, bf_data);
  Onnx__NodeProto *conv = tm_node(t, "Conv", "conv1", 3, conv_in, 1, conv_out);
  attr_ints(t, conv, "kernel_shape", 2, kshape);
  attr_ints(t, conv, "strides", 2, strides);
  attr_ints(t, conv, "pads", 4, pads);
  tm_node(t, "Relu", "relu1", 1, relu_in, 1, relu_out);
  tm_node(t, "Flatten", "flat", 1, flat_in, 1, flat_out);
  Onnx__NodeProto *gemm = tm_node(t, "Gemm", "fc", 3, gemm_in, 1, gemm_out);
  attr_int(t, gemm, "transB", 1);
}

static void test_translation(void **state) {
  (void)state;
  for (int i = 0; i < 18; i++)
    w_data[i] = (float)i * 0.125f;
  tmodel t;
  build_small(&t);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  assert_int_equal(dm_onnx_import(&t.m, NULL, &init, &pred), DM_OK);
  /* the init net fills the four weights under their ONNX names, values kept exactly */
  assert_int_equal(init->n_op, 4);
  assert_string_equal(init->op[0]->type, "GivenTensorFill");
  assert_string_equal(init->op[0]->output[0], "W");
  const Caffe2__Argument *v = arg(init->op[0], "values"), *s = arg(init->op[0], "shape");
  assert_int_equal(v->n_floats, 18);
  assert_memory_equal(v->floats, w_data, sizeof w_data);
  assert_int_equal(s->n_ints, 4);
  assert_memory_equal(s->ints, w_dims, sizeof w_dims);
  /* the predict net: Conv (ONNX's pads are Caffe2's t, l, b, r), Relu, Flatten, FC */
  assert_int_equal(pred->n_op, 4);
  assert_string_equal(pred->op[0]->type, "Conv");
  assert_string_equal(pred->op[0]->name, "conv1");
  assert_memory_equal(arg(pred->op[0], "pads")->ints, pads, sizeof pads);
  assert_memory_equal(arg(pred->op[0], "strides")->ints, strides, sizeof strides);
  assert_memory_equal(arg(pred->op[0], "kernels")->ints, kshape, sizeof kshape);
  assert_int_equal(pred->op[0]->n_input, 3);
  assert_string_equal(pred->op[1]->type, "Relu");
  assert_string_equal(pred->op[2]->type, "Flatten");
  assert_int_equal(arg(pred->op[2], "axis")->i, 1);
  assert_string_equal(pred->op[3]->type, "FC");
  assert_int_equal(pred->n_external_output, 1);
  assert_string_equal(pred->external_output[0], "y");
  assert_string_equal(pred->external_input[0], "x");
  free_pair(init, pred);
}

/* A Gemm with transB 0 and a constant B (K, N): FC reads B transposed, filled under a
 * new name; without C, a zero bias of N. */
static void test_gemm_transposed(void **state) {
  (void)state;
  tmodel t;
  build_small(&t);
  static int64_t kn[] = {8, 3};
  for (int i = 0; i < 24; i++)
    wf_data[i] = (float)i;
  t.init[2].dims = kn;
  t.node[3].attribute[0]->i = 0; /* transB 0 */
  t.node[3].n_input = 2;         /* no C */
  Caffe2__NetDef *init = NULL, *pred = NULL;
  assert_int_equal(dm_onnx_import(&t.m, NULL, &init, &pred), DM_OK);
  const Caffe2__OperatorDef *fc = pred->op[3];
  assert_string_equal(fc->type, "FC");
  assert_string_equal(fc->input[1], "Wf_transposed");
  assert_string_equal(fc->input[2], "y_zero_bias");
  const Caffe2__OperatorDef *wt = init->op[4], *zb = init->op[5];
  assert_string_equal(wt->output[0], "Wf_transposed");
  const Caffe2__Argument *v = arg(wt, "values"), *sh = arg(wt, "shape");
  assert_int_equal(sh->ints[0], 3);
  assert_int_equal(sh->ints[1], 8);
  for (int j = 0; j < 3; j++) /* W^T[j][i] = B[i][j] = 3 i + j */
    for (int i = 0; i < 8; i++)
      assert_true(v->floats[j * 8 + i] == (float)(3 * i + j));
  assert_string_equal(zb->type, "ConstantFill");
  assert_int_equal(arg(zb, "shape")->ints[0], 3);
  free_pair(init, pred);
}

static void test_missing_initializer(void **state) {
  (void)state;
  tmodel t;
  build_small(&t);
  t.g.n_initializer = 1; /* W only: b, Wf, bf are gone */
  Caffe2__NetDef *init = NULL, *pred = NULL;
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_INVALID, "node 0",
                   "Conv 'conv1'", "input 'b'", "missing initializer", NULL);
  assert_null(init);
  assert_null(pred);
}

static void test_cycle(void **state) {
  (void)state;
  tmodel t;
  build_small(&t);
  /* Relu reads Flatten's output, which comes later: not a DAG in order */
  relu_in[0] = "f";
  Caffe2__NetDef *init = NULL, *pred = NULL;
  dm_status s = dm_onnx_import(&t.m, NULL, &init, &pred);
  relu_in[0] = "c";
  opt_expect_error(s, DM_ERR_INVALID, "node 1", "Relu 'relu1'", "input 'f'", "out of order",
                   NULL);
}

static void test_unsupported_listed(void **state) {
  (void)state;
  tmodel t;
  build_small(&t);
  static char *lstm_in[] = {"f"}, *lstm_out[] = {"l"};
  static char *cus_in[] = {"l"}, *cus_out[] = {"q"};
  t.node[3].attribute[0]->name = "transA"; /* Gemm transA 1: not an FC */
  tm_node(&t, "LSTM", "lstm", 1, lstm_in, 1, lstm_out);
  Onnx__NodeProto *cus = tm_node(&t, "Frob", "custom", 1, cus_in, 1, cus_out);
  cus->domain = "com.example";
  Caffe2__NetDef *init = NULL, *pred = NULL;
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED,
                   "3 of 6 nodes cannot be imported", "node 3 'fc': Gemm (domain 'ai.onnx', opset 13)",
                   "transA 1", "node 4 'lstm': LSTM", "no translation",
                   "node 5 'custom': Frob (domain 'com.example'", NULL);
  assert_null(init);
}

static void test_bad_tensors(void **state) {
  (void)state;
  tmodel t;
  build_small(&t);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  t.init[1].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED,
                   "tensor 'b' is FLOAT16", NULL);
  t.init[1].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  uint8_t raw[7] = {0};
  t.init[1].n_float_data = 0;
  t.init[1].has_raw_data = 1;
  t.init[1].raw_data.len = sizeof raw;
  t.init[1].raw_data.data = raw;
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_PARSE, "tensor 'b'",
                   "raw_data has 7 bytes", "need 8", NULL);
  t.init[1].has_raw_data = 0;
  t.init[1].n_float_data = 1; /* dims say 2 */
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_PARSE, "tensor 'b'",
                   "1 values; dims need 2", NULL);
  t.os.version = 6;
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED, "opset 6",
                   NULL);
  t.os.version = 29; /* newer than the importer knows: an op's meaning may have changed */
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED, "opset 29",
                   "opsets 7 to 28", NULL);
  assert_null(init);
}

/* An initializer with a zero dim has no values and, in protobuf-c, no data pointer:
 * it imports as an empty fill (a fuzzer found the copy from a NULL pointer). */
static void test_empty_initializer(void **state) {
  (void)state;
  tmodel t;
  build_small(&t);
  static int64_t zero_dims[] = {0, 4};
  tm_float_init(&t, "empty", 2, zero_dims, 0, NULL);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  assert_int_equal(dm_onnx_import(&t.m, NULL, &init, &pred), DM_OK);
  const Caffe2__OperatorDef *fill = NULL;
  for (size_t i = 0; i < init->n_op; i++)
    if (strcmp(init->op[i]->output[0], "empty") == 0)
      fill = init->op[i];
  assert_non_null(fill);
  assert_string_equal(fill->type, "GivenTensorFill");
  assert_int_equal(arg(fill, "values")->n_floats, 0);
  assert_memory_equal(arg(fill, "shape")->ints, zero_dims, sizeof zero_dims);
  free_pair(init, pred);
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static void test_files(void **state) {
  (void)state;
  char dir[] = "/tmp/dm_onnx_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char model[64], ext[64], extbad[64];
  snprintf(model, sizeof model, "%s/m.onnx", dir);
  snprintf(ext, sizeof ext, "%s/weights.bin", dir);
  /* b's two floats live in weights.bin at offset 4 */
  float file_data[3] = {9.0f, 0.5f, -0.25f};
  write_file(ext, file_data, sizeof file_data);
  tmodel t;
  build_small(&t);
  Onnx__StringStringEntryProto kv[3], *kvp[3] = {&kv[0], &kv[1], &kv[2]};
  char *keys[3] = {"location", "offset", "length"}, *vals[3] = {"weights.bin", "4", "8"};
  for (int i = 0; i < 3; i++) {
    onnx__string_string_entry_proto__init(&kv[i]);
    kv[i].key = keys[i];
    kv[i].value = vals[i];
  }
  t.init[1].n_float_data = 0;
  t.init[1].has_data_location = 1;
  t.init[1].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  t.init[1].n_external_data = 3;
  t.init[1].external_data = kvp;
  size_t len = protobuf_c_message_get_packed_size(&t.m.base);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  protobuf_c_message_pack(&t.m.base, buf);
  write_file(model, buf, len);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  assert_int_equal(dm_onnx_import_file(model, &init, &pred), DM_OK);
  const Caffe2__Argument *v = arg(init->op[1], "values");
  assert_int_equal(v->n_floats, 2);
  assert_true(v->floats[0] == 0.5f && v->floats[1] == -0.25f);
  free_pair(init, pred);
  init = pred = NULL;

  /* a truncated file is a parse error naming the file */
  write_file(model, buf, len / 2);
  opt_expect_error(dm_onnx_import_file(model, &init, &pred), DM_ERR_PARSE, "m.onnx", NULL);
  /* a file that is not there */
  snprintf(extbad, sizeof extbad, "%s/none.onnx", dir);
  opt_expect_error(dm_onnx_import_file(extbad, &init, &pred), DM_ERR_NOT_FOUND, "none.onnx", NULL);
  /* external data may not leave the model's folder */
  kv[0].value = "../weights.bin";
  opt_expect_error(dm_onnx_import(&t.m, dir, &init, &pred), DM_ERR_INVALID, "tensor 'b'",
                   "'../weights.bin'", "inside the model's folder", NULL);
  kv[0].value = "weights.bin";
  kv[1].value = "8"; /* 4 bytes left, 8 wanted */
  opt_expect_error(dm_onnx_import(&t.m, dir, &init, &pred), DM_ERR_PARSE, "tensor 'b'",
                   "no 8 bytes at offset 8", NULL);
  assert_null(init);
  free(buf);
  unlink(model);
  unlink(ext);
  rmdir(dir);
}

/* External data is the file the kernel opens, not the text of its path: a symlink out of
 * the model's folder, a FIFO (which would block the import forever) and a device (an
 * endless /dev/zero) are refused, each in a message naming it; a link that stays inside
 * the folder is read. alarm() turns a hang into a failure. */
static void test_external_data_files(void **state) {
  (void)state;
  char dir[] = "/tmp/dm_onnx_XXXXXX", out_dir[] = "/tmp/dm_onnx_out_XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_non_null(mkdtemp(out_dir));
  char inside[64], outside[64], link_out[80], link_in[80], fifo[80];
  snprintf(inside, sizeof inside, "%s/weights.bin", dir);
  snprintf(outside, sizeof outside, "%s/secret.bin", out_dir);
  snprintf(link_out, sizeof link_out, "%s/link_out", dir);
  snprintf(link_in, sizeof link_in, "%s/link_in", dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  float two[2] = {0.5f, -0.25f};
  write_file(inside, two, sizeof two);
  write_file(outside, two, sizeof two);
  assert_int_equal(symlink(outside, link_out), 0);
  assert_int_equal(symlink("weights.bin", link_in), 0);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  tmodel t;
  build_small(&t);
  Onnx__StringStringEntryProto kv, *kvp[1] = {&kv};
  onnx__string_string_entry_proto__init(&kv);
  kv.key = "location";
  t.init[1].n_float_data = 0;
  t.init[1].has_data_location = 1;
  t.init[1].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  t.init[1].n_external_data = 1;
  t.init[1].external_data = kvp;
  Caffe2__NetDef *init = NULL, *pred = NULL;
  alarm(20);
  kv.value = "link_in"; /* a link inside the folder: read */
  assert_int_equal(dm_onnx_import(&t.m, dir, &init, &pred), DM_OK);
  assert_true(arg(init->op[1], "values")->floats[1] == -0.25f);
  free_pair(init, pred);
  init = pred = NULL;
  kv.value = "link_out";
  opt_expect_error(dm_onnx_import(&t.m, dir, &init, &pred), DM_ERR_INVALID, "tensor 'b'",
                   "'link_out' resolves to", "secret.bin", "outside the model's folder", NULL);
  kv.value = "fifo";
  opt_expect_error(dm_onnx_import(&t.m, dir, &init, &pred), DM_ERR_INVALID, "tensor 'b'",
                   "is a FIFO (named pipe); it must be a regular file", NULL);
  kv.value = "zero"; /* a model in /dev reading /dev/zero */
  opt_expect_error(dm_onnx_import(&t.m, "/dev", &init, &pred), DM_ERR_INVALID, "tensor 'b'",
                   "'/dev/zero' is a character device", NULL);
  kv.value = "."; /* the folder itself */
  opt_expect_error(dm_onnx_import(&t.m, dir, &init, &pred), DM_ERR_INVALID, "tensor 'b'",
                   "outside the model's folder", NULL);
  alarm(0);
  assert_null(init);
  unlink(fifo);
  unlink(link_in);
  unlink(link_out);
  unlink(inside);
  unlink(outside);
  rmdir(dir);
  rmdir(out_dir);
}

/* Constant(value_ints) feeds Reshape's shape: folded into the Reshape's argument, and
 * filled (INT64) in the init net as it is also a graph output (a Constant that nothing
 * reads at run time is not filled); a shape computed by the graph is refused. */
static void test_constant_reshape(void **state) {
  (void)state;
  tmodel t;
  tm_init(&t, 14);
  tm_input(&t, "x");
  tm_output(&t, "y");
  tm_output(&t, "shape");
  static char *k_out[] = {"shape"}, *r_in[] = {"x", "shape"}, *r_out[] = {"y"};
  static int64_t shape[] = {1, -1};
  Onnx__NodeProto *k = tm_node(&t, "Constant", "k", 0, NULL, 1, k_out);
  attr_ints(&t, k, "value_ints", 2, shape);
  tm_node(&t, "Reshape", "r", 2, r_in, 1, r_out);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  assert_int_equal(dm_onnx_import(&t.m, NULL, &init, &pred), DM_OK);
  assert_int_equal(init->n_op, 1);
  assert_string_equal(init->op[0]->type, "GivenTensorInt64Fill");
  assert_memory_equal(arg(init->op[0], "values")->ints, shape, sizeof shape);
  assert_int_equal(pred->n_op, 1);
  assert_string_equal(pred->op[0]->type, "Reshape");
  assert_int_equal(pred->op[0]->n_input, 1);
  assert_memory_equal(arg(pred->op[0], "shape")->ints, shape, sizeof shape);
  free_pair(init, pred);
  init = pred = NULL;
  r_in[1] = "x"; /* the shape is now a graph value */
  dm_status st = dm_onnx_import(&t.m, NULL, &init, &pred);
  r_in[1] = "shape";
  opt_expect_error(st, DM_ERR_UNSUPPORTED, "node 1 'r': Reshape", "only a constant shape",
                   NULL);
}

/* A float argument of an op (NAN when absent). */
static float op_arg_f(const Caffe2__OperatorDef *op, const char *name) {
  for (size_t i = 0; i < op->n_arg; i++)
    if (strcmp(op->arg[i]->name, name) == 0 && op->arg[i]->has_f)
      return op->arg[i]->f;
  return NAN;
}

/* The math translators: Clip's constant bound inputs as arguments, a constant scalar
 * exponent as Pow's `exponent`, ReduceMean's axes attribute before opset 18; and the
 * refusals: bounds and axes that are not constants, LogSoftmax along a non-last axis. */
static void test_math_translations(void **state) {
  (void)state;
  tmodel t;
  tm_init(&t, 13);
  static char *x = "x", *lo = "lo", *hi = "hi", *two = "two";
  static char *clip_in[] = {"x", "lo", "hi"}, *clip_out[] = {"c"};
  static char *pow_in[] = {"c", "two"}, *pow_out[] = {"p"};
  static char *red_in[] = {"p"}, *red_out[] = {"r"};
  static float vlo = -1.5f, vhi = 2.0f, vtwo = 2.0f;
  tm_input(&t, x);
  tm_float_init(&t, lo, 0, NULL, 1, &vlo);
  tm_float_init(&t, hi, 0, NULL, 1, &vhi);
  tm_float_init(&t, two, 0, NULL, 1, &vtwo);
  t.in[0].type = NULL;
  tm_node(&t, "Clip", "clip", 3, clip_in, 1, clip_out);
  tm_node(&t, "Pow", "pow", 2, pow_in, 1, pow_out);
  Onnx__NodeProto *rm = tm_node(&t, "ReduceMean", "mean", 1, red_in, 1, red_out);
  static int64_t axes[] = {1};
  attr_ints(&t, rm, "axes", 1, axes);
  tm_output(&t, "r");
  Caffe2__NetDef *init = NULL, *pred = NULL;
  assert_int_equal(dm_onnx_import(&t.m, NULL, &init, &pred), DM_OK);
  assert_int_equal(pred->n_op, 3);
  assert_string_equal(pred->op[0]->type, "Clip");
  assert_int_equal(pred->op[0]->n_input, 1);
  assert_true(op_arg_f(pred->op[0], "min") == vlo && op_arg_f(pred->op[0], "max") == vhi);
  assert_string_equal(pred->op[1]->type, "Pow");
  assert_int_equal(pred->op[1]->n_input, 1);
  assert_true(op_arg_f(pred->op[1], "exponent") == 2.0f);
  assert_string_equal(pred->op[2]->type, "ReduceMean");
  assert_int_equal(dm_opdef_arg_int(pred->op[2], "keepdims", -1), 1);
  protobuf_c_message_free_unpacked(&init->base, NULL);
  protobuf_c_message_free_unpacked(&pred->base, NULL);

  /* refusals, all listed */
  tm_init(&t, 18);
  static char *c2_in[] = {"x", "x"}, *c2_out[] = {"c"};
  static char *r2_in[] = {"c", "x"}, *r2_out[] = {"r"};
  static char *l_in[] = {"r"}, *l_out[] = {"l"};
  tm_input(&t, x);
  tm_node(&t, "Clip", "clip", 2, c2_in, 1, c2_out);
  tm_node(&t, "ReduceSum", "sum", 2, r2_in, 1, r2_out);
  Onnx__NodeProto *ls = tm_node(&t, "LogSoftmax", "lsm", 1, l_in, 1, l_out);
  Onnx__AttributeProto *a = tm_attr(&t, ls, "axis");
  a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i = 1, a->i = 0;
  tm_output(&t, "l");
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED,
                   "3 of 3 nodes cannot be imported", "min 'x' is not a constant",
                   "axes 'x' is not a constant", "LogSoftmax along axis 0", NULL);
  assert_null(init);
}

/* A graph input's type: FLOAT of dims (-1: a dim_param, unknown at import). */
typedef struct tm_type {
  Onnx__TypeProto type;
  Onnx__TypeProto__Tensor tensor;
  Onnx__TensorShapeProto shape;
  Onnx__TensorShapeProto__Dimension dim[MAXN];
  Onnx__TensorShapeProto__Dimension *dimp[MAXN];
} tm_type;

static Onnx__TypeProto *tm_type_init(tm_type *ty, size_t n_dims, const int64_t *dims) {
  onnx__type_proto__init(&ty->type);
  onnx__type_proto__tensor__init(&ty->tensor);
  onnx__tensor_shape_proto__init(&ty->shape);
  for (size_t d = 0; d < n_dims; d++) {
    onnx__tensor_shape_proto__dimension__init(&ty->dim[d]);
    if (dims[d] >= 0) {
      ty->dim[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      ty->dim[d].dim_value = dims[d];
    } else {
      ty->dim[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      ty->dim[d].dim_param = "C";
    }
    ty->dimp[d] = &ty->dim[d];
  }
  ty->shape.n_dim = n_dims;
  ty->shape.dim = ty->dimp;
  ty->tensor.has_elem_type = 1;
  ty->tensor.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  ty->tensor.shape = &ty->shape;
  ty->type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  ty->type.tensor_type = &ty->tensor;
  return &ty->type;
}

static void tm_int64_init(tmodel *t, char *name, size_t n_dims, int64_t *dims, size_t n,
                          int64_t *data) {
  Onnx__TensorProto *x = tm_float_init(t, name, n_dims, dims, 0, NULL);
  x->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  x->n_int64_data = n;
  x->int64_data = data;
}

/* ShuffleNet's channel shuffle as torch.onnx.export writes x.view(n, g, c // g, -1):
 * Shape -> Gather (a scalar index) -> Div -> Unsqueeze -> Concat -> Reshape. With x's
 * shape declared, everything before the Reshape folds at import: the predict net is the
 * one Reshape with the computed constant shape, and the init net holds the folded
 * values. With the channel dim a dim_param the chain is translated op by op and the
 * Reshape of a run-time shape is refused, naming the node. */
static void test_shape_chain_folds(void **state) {
  (void)state;
  tmodel t;
  tm_type ty;
  tm_init(&t, 11);
  int64_t xd[4] = {1, 4, 3, 3};
  tm_input(&t, "x");
  t.in[0].type = tm_type_init(&ty, 4, xd);
  tm_output(&t, "y");
  static int64_t one = 1, two = 2, head[2] = {1, 2}, tail = -1, d1 = 1, d2 = 2, zero = 0;
  tm_int64_init(&t, "k1", 0, NULL, 1, &one);  /* scalar index 1 (the channels) */
  tm_int64_init(&t, "k2", 0, NULL, 1, &two);  /* scalar divisor: the groups */
  tm_int64_init(&t, "head", 1, &d2, 2, head); /* (n, g) = (1, 2) */
  tm_int64_init(&t, "tail", 1, &d1, 1, &tail);
  static char *x_in[] = {"x"}, *s_out[] = {"s"}, *g_in[] = {"s", "k1"}, *g_out[] = {"c"},
              *d_in[] = {"c", "k2"}, *d_out[] = {"cg"}, *u_in[] = {"cg"}, *u_out[] = {"cg1"},
              *c_in[] = {"head", "cg1", "tail"}, *c_out[] = {"shp"}, *r_in[] = {"x", "shp"},
              *r_out[] = {"y"};
  tm_node(&t, "Shape", "shape", 1, x_in, 1, s_out);
  tm_node(&t, "Gather", "gather", 2, g_in, 1, g_out);
  tm_node(&t, "Div", "div", 2, d_in, 1, d_out);
  Onnx__NodeProto *u = tm_node(&t, "Unsqueeze", "unsq", 1, u_in, 1, u_out);
  attr_ints(&t, u, "axes", 1, &zero);
  Onnx__NodeProto *cc = tm_node(&t, "Concat", "cat", 3, c_in, 1, c_out);
  attr_int(&t, cc, "axis", 0);
  tm_node(&t, "Reshape", "r", 2, r_in, 1, r_out);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  assert_int_equal(dm_onnx_import(&t.m, NULL, &init, &pred), DM_OK);
  assert_int_equal(pred->n_op, 1);
  assert_string_equal(pred->op[0]->type, "Reshape");
  assert_int_equal(pred->op[0]->n_input, 1);
  /* (n, g, c / g, -1) with c = 4 and g = 2, worked out by hand */
  int64_t want[4] = {1, 2, 2, -1};
  assert_int_equal(arg(pred->op[0], "shape")->n_ints, 4);
  assert_memory_equal(arg(pred->op[0], "shape")->ints, want, sizeof want);
  /* the four initializers; s, c, cg, cg1 and shp, which no op reads, are not filled */
  assert_int_equal(init->n_op, 4);
  assert_string_equal(init->op[3]->output[0], "tail");
  assert_int_equal(pred->n_external_input, 5); /* x and the initializers */
  free_pair(init, pred);
  init = pred = NULL;

  xd[1] = -1; /* the channels are a dim_param: nothing folds */
  t.in[0].type = tm_type_init(&ty, 4, xd);
  dm_status st = dm_onnx_import(&t.m, NULL, &init, &pred);
  opt_expect_error(st, DM_ERR_UNSUPPORTED, "1 of 6 nodes", "node 5 'r': Reshape",
                   "only a constant shape", NULL);
  assert_null(init);
  assert_null(pred);

  /* A value for the dim_param (import-onnx --dim C=6) makes the shape static again:
   * the chain folds with c = 6, (1, 2, 6 / 2, -1). */
  dm_onnx_dim dims[2] = {{"C", 6}, {"C", 4}};
  dm_onnx_import_options o = {.dims = dims, .n_dims = 1};
  assert_int_equal(dm_onnx_import_with(&t.m, NULL, &o, &init, &pred), DM_OK);
  assert_int_equal(pred->n_op, 1);
  int64_t want6[4] = {1, 2, 3, -1};
  assert_memory_equal(arg(pred->op[0], "shape")->ints, want6, sizeof want6);
  free_pair(init, pred);
  init = pred = NULL;
  /* the same name twice, a value below 1, a name no input has: refused before anything */
  o.n_dims = 2;
  opt_expect_error(dm_onnx_import_with(&t.m, NULL, &o, &init, &pred), DM_ERR_INVALID,
                   "dim 'C' is given twice", NULL);
  o.n_dims = 1;
  dims[0].value = 0;
  opt_expect_error(dm_onnx_import_with(&t.m, NULL, &o, &init, &pred), DM_ERR_INVALID,
                   "dim 'C' = 0", "at least 1", NULL);
  dims[0] = (dm_onnx_dim){"", 1};
  opt_expect_error(dm_onnx_import_with(&t.m, NULL, &o, &init, &pred), DM_ERR_INVALID,
                   "dim override 0 has no name", NULL);
  dims[0] = (dm_onnx_dim){"N", 1};
  opt_expect_error(dm_onnx_import_with(&t.m, NULL, &o, &init, &pred), DM_ERR_INVALID,
                   "no graph input has a dim named 'N'", "the named dims: 'C'", NULL);
  dims[1] = (dm_onnx_dim){"C", 4};
  o.dims = dims + 1;
  assert_int_equal(dm_onnx_import_with(&t.m, NULL, &o, &init, &pred), DM_OK);
  free_pair(init, pred);
  init = pred = NULL;
  /* a name no input has, beside a good one: named, with the dims the graph has */
  dm_onnx_dim cn[2] = {{"C", 4}, {"N", 1}};
  o.dims = cn;
  o.n_dims = 2;
  opt_expect_error(dm_onnx_import_with(&t.m, NULL, &o, &init, &pred), DM_ERR_INVALID,
                   "no graph input has a dim named 'N'", "the named dims: 'C'", NULL);
  assert_null(init);
  assert_null(pred);
}

/* Static shapes come from the emitted ops' own inference: a Mul of two graph inputs
 * whose declared shapes Caffe2's Mul does not take (numpy's broadcast of (2, 1, 4) and
 * (2, 3, 4)) is refused at import in Mul's words; equal shapes import, and a Slice
 * after it gets exact bounds from the static shape (ONNX's -1 end is dim - 1). */
static void test_inferred_shapes(void **state) {
  (void)state;
  tmodel t;
  tm_type ta, tb;
  tm_init(&t, 13);
  int64_t da[3] = {2, 2, 4}, db[3] = {2, 3, 4}; /* 2 and 3 do not broadcast */
  tm_input(&t, "a");
  t.in[0].type = tm_type_init(&ta, 3, da);
  tm_input(&t, "b");
  t.in[1].type = tm_type_init(&tb, 3, db);
  tm_output(&t, "z");
  static int64_t st[1] = {1}, en[1] = {-1}, ax[1] = {2}, one = 1;
  tm_int64_init(&t, "st", 1, &one, 1, st);
  tm_int64_init(&t, "en", 1, &one, 1, en);
  tm_int64_init(&t, "ax", 1, &one, 1, ax);
  static char *m_in[] = {"a", "b"}, *m_out[] = {"y"}, *s_in[] = {"y", "st", "en", "ax"},
              *s_out[] = {"z"};
  tm_node(&t, "Mul", "m", 2, m_in, 1, m_out);
  tm_node(&t, "Slice", "s", 4, s_in, 1, s_out);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED,
                   "1 of 2 nodes", "node 0 'm': Mul", "refuses the arguments and shapes known at import",
                   "2x2x4", "2x3x4", NULL);
  da[1] = 3;
  t.in[0].type = tm_type_init(&ta, 3, da);
  assert_int_equal(dm_onnx_import(&t.m, NULL, &init, &pred), DM_OK);
  assert_int_equal(pred->n_op, 2);
  assert_string_equal(pred->op[1]->type, "Slice");
  int64_t starts[3] = {0, 0, 1}, ends[3] = {2, 3, 3};
  assert_memory_equal(arg(pred->op[1], "starts")->ints, starts, sizeof starts);
  assert_memory_equal(arg(pred->op[1], "ends")->ints, ends, sizeof ends);
  free_pair(init, pred);
}

/* MatMul of two computed tensors (attention's Q K^T) imports as BatchMatMul with
 * numpy's broadcasting, a MatMul by a constant 2-D B still as FC; two 1-D inputs and
 * inputs of unknown rank are refused, named. */
static void test_matmul_computed(void **state) {
  (void)state;
  tmodel t;
  tm_type tq, tk;
  tm_init(&t, 13);
  int64_t dq[3] = {2, 4, 3}, dk[3] = {2, 3, 5};
  tm_input(&t, "q");
  t.in[0].type = tm_type_init(&tq, 3, dq);
  tm_input(&t, "k");
  t.in[1].type = tm_type_init(&tk, 3, dk);
  static int64_t wd[2] = {5, 6};
  static float w[30];
  tm_float_init(&t, "W", 2, wd, 30, w);
  static char *a_in[] = {"q", "k"}, *a_out[] = {"s"}, *f_in[] = {"s", "W"}, *f_out[] = {"y"};
  tm_node(&t, "MatMul", "qk", 2, a_in, 1, a_out);
  tm_node(&t, "MatMul", "proj", 2, f_in, 1, f_out);
  tm_output(&t, "y");
  Caffe2__NetDef *init = NULL, *pred = NULL;
  if (dm_onnx_import(&t.m, NULL, &init, &pred) != DM_OK)
    fail_msg("%s", dm_last_error());
  assert_int_equal(pred->n_op, 2);
  assert_string_equal(pred->op[0]->type, "BatchMatMul");
  assert_int_equal(dm_opdef_arg_int(pred->op[0], "broadcast", 0), 1);
  assert_string_equal(pred->op[1]->type, "FC");
  free_pair(init, pred);
  /* 1-D by 1-D, and a rank the importer does not know */
  int64_t d1[1] = {3};
  t.in[0].type = tm_type_init(&tq, 1, d1);
  t.in[1].type = tm_type_init(&tk, 1, d1);
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED,
                   "node 0 'qk': MatMul", "two 1-D inputs", NULL);
  t.in[1].type = NULL;
  opt_expect_error(dm_onnx_import(&t.m, NULL, &init, &pred), DM_ERR_UNSUPPORTED,
                   "node 0 'qk': MatMul", "unknown rank", NULL);
  assert_null(init);
}

static void attr_str(tmodel *t, Onnx__NodeProto *n, char *name, char *v) {
  Onnx__AttributeProto *a = tm_attr(t, n, name);
  a->has_type = 1;
  a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  a->has_s = 1;
  a->s.data = (uint8_t *)v;
  a->s.len = strlen(v);
}

/* net/onnx/import_spatial.c: Pad, Resize and ConvTranspose onto PadImage, ResizeNearest and
 * ConvTranspose with their arguments; then the refusals, all listed. */
static void test_spatial(void **state) {
  (void)state;
  tmodel t;
  tm_init(&t, 13);
  tm_input(&t, "x");
  tm_output(&t, "y");
  static char *p_out[] = {"pads"}, *s_out[] = {"scales"}, *pad_in[] = {"x", "pads"};
  static char *pad_out[] = {"p"}, *rs_in[] = {"p", "", "scales"}, *rs_out[] = {"r"};
  static char *ct_in[] = {"r", "W"}, *ct_out[] = {"y"};
  static int64_t pp[] = {0, 0, 1, 2, 0, 0, 3, 4}, want_pads[] = {1, 2, 3, 4};
  static float scales[] = {1, 1, 2, 3};
  static int64_t wd[] = {2, 1, 3, 3}, st[] = {2, 2}, op[] = {1, 0}, want_adj[] = {1, 0};
  static float w[18];
  attr_ints(&t, tm_node(&t, "Constant", "kp", 0, NULL, 1, p_out), "value_ints", 8, pp);
  Onnx__AttributeProto *a = tm_attr(&t, tm_node(&t, "Constant", "ks", 0, NULL, 1, s_out),
                                    "value_floats");
  a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  a->n_floats = 4, a->floats = scales;
  attr_str(&t, tm_node(&t, "Pad", "pad", 2, pad_in, 1, pad_out), "mode", "edge");
  Onnx__NodeProto *rs = tm_node(&t, "Resize", "rs", 3, rs_in, 1, rs_out);
  attr_str(&t, rs, "coordinate_transformation_mode", "asymmetric");
  attr_str(&t, rs, "nearest_mode", "floor");
  tm_float_init(&t, "W", 4, wd, 18, w);
  Onnx__NodeProto *ct = tm_node(&t, "ConvTranspose", "ct", 2, ct_in, 1, ct_out);
  attr_ints(&t, ct, "strides", 2, st);
  attr_ints(&t, ct, "output_padding", 2, op);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  if (dm_onnx_import(&t.m, NULL, &init, &pred) != DM_OK)
    fail_msg("%s", dm_last_error());
  assert_int_equal(pred->n_op, 3);
  assert_string_equal(pred->op[0]->type, "PadImage");
  assert_int_equal(pred->op[0]->n_input, 1);
  assert_memory_equal(arg(pred->op[0], "pads")->ints, want_pads, sizeof want_pads);
  assert_true(arg(pred->op[0], "mode")->s.len == 4 &&
              memcmp(arg(pred->op[0], "mode")->s.data, "edge", 4) == 0);
  assert_string_equal(pred->op[1]->type, "ResizeNearest");
  assert_int_equal(pred->op[1]->n_input, 1);
  assert_true(arg(pred->op[1], "height_scale")->f == 2 && arg(pred->op[1], "width_scale")->f == 3);
  assert_true(arg(pred->op[1], "coordinate_transformation_mode")->s.len == 10 &&
              memcmp(arg(pred->op[1], "coordinate_transformation_mode")->s.data, "asymmetric",
                     10) == 0);
  assert_string_equal(pred->op[2]->type, "ConvTranspose");
  assert_memory_equal(arg(pred->op[2], "adjs")->ints, want_adj, sizeof want_adj);
  assert_memory_equal(arg(pred->op[2], "kernels")->ints, wd + 2, 2 * sizeof *wd);
  free_pair(init, pred);
  init = pred = NULL;
  /* Pads on C, a cubic Resize, an output_padding not below the stride: each refused. */
  pp[1] = 1;
  attr_str(&t, rs, "mode", "cubic");
  op[1] = 2;
  dm_status s = dm_onnx_import(&t.m, NULL, &init, &pred);
  pp[1] = 0, op[1] = 0;
  opt_expect_error(s, DM_ERR_UNSUPPORTED, "3 of 5 nodes cannot be imported",
                   "node 2 'pad': Pad", "padding of N or C", "node 3 'rs': Resize",
                   "mode 'cubic'", "node 4 'ct': ConvTranspose", "output_padding 2 not below the stride 2",
                   NULL);
  assert_null(init);
}

/* LayerNormalization (opset 17) as LayerNorm with elementwise_affine, a missing B as a
 * zero vector of Scale's size, mean and std under names derived from Y's; ONNX's Mean
 * output and a stash_type other than 1 refused. */
static void test_layernorm(void **state) {
  (void)state;
  tmodel t;
  tm_init(&t, 17);
  tm_input(&t, "x");
  tm_output(&t, "y");
  static char *ln_in[] = {"x", "s"}, *ln_out[] = {"y", "m"};
  static int64_t sd[] = {4};
  static float sv[4] = {1, 2, 3, 4};
  tm_float_init(&t, "s", 1, sd, 4, sv);
  Onnx__NodeProto *n = tm_node(&t, "LayerNormalization", "ln", 2, ln_in, 1, ln_out);
  attr_int(&t, n, "axis", -1);
  Caffe2__NetDef *init = NULL, *pred = NULL;
  if (dm_onnx_import(&t.m, NULL, &init, &pred) != DM_OK)
    fail_msg("%s", dm_last_error());
  assert_int_equal(pred->n_op, 1);
  const Caffe2__OperatorDef *op = pred->op[0];
  assert_string_equal(op->type, "LayerNorm");
  assert_int_equal(op->n_input, 3);
  assert_string_equal(op->input[2], "y_zero_beta");
  assert_int_equal(op->n_output, 3);
  assert_string_equal(op->output[1], "y_mean");
  assert_string_equal(op->output[2], "y_std");
  assert_int_equal(arg(op, "axis")->i, -1);
  assert_int_equal(arg(op, "elementwise_affine")->i, 1);
  assert_true(fabsf(arg(op, "epsilon")->f - 1e-5f) == 0);
  int filled = 0;
  for (size_t k = 0; k < init->n_op; k++)
    filled |= init->op[k]->n_output == 1 && strcmp(init->op[k]->output[0], "y_zero_beta") == 0;
  assert_true(filled);
  free_pair(init, pred);
  init = pred = NULL;
  /* the Mean output, then stash_type 0: refused, each saying why */
  n->n_output = 2;
  dm_status s = dm_onnx_import(&t.m, NULL, &init, &pred);
  opt_expect_error(s, DM_ERR_UNSUPPORTED, "node 0 'ln': LayerNormalization",
                   "its Mean or InvStdDev output is used", NULL);
  n->n_output = 1;
  attr_int(&t, n, "stash_type", 0);
  s = dm_onnx_import(&t.m, NULL, &init, &pred);
  opt_expect_error(s, DM_ERR_UNSUPPORTED, "stash_type 0", NULL);
  assert_null(init);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_translation),     cmocka_unit_test(test_missing_initializer),
      cmocka_unit_test(test_cycle),           cmocka_unit_test(test_unsupported_listed),
      cmocka_unit_test(test_bad_tensors),     cmocka_unit_test(test_files),
      cmocka_unit_test(test_external_data_files),
      cmocka_unit_test(test_constant_reshape), cmocka_unit_test(test_gemm_transposed),
      cmocka_unit_test(test_empty_initializer), cmocka_unit_test(test_math_translations),
      cmocka_unit_test(test_shape_chain_folds),
      cmocka_unit_test(test_inferred_shapes),
      cmocka_unit_test(test_matmul_computed),
      cmocka_unit_test(test_spatial),
      cmocka_unit_test(test_layernorm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
