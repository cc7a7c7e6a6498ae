/* test_gradient.c: the gradient pass on nets of test ops whose gradient makers are
 * written here: naming (X_grad, the autogen seed), partial gradients summed where a
 * blob feeds several ops, in-place ops, no-gradient ops stopping the flow, ops whose
 * gradient must not be taken, ops of another arity than their schema's, what a maker may
 * edit of the ops it emits and what it is refused, and the numbers the backward net
 * computes. */
#include <stdio.h>
#include <stdlib.h>

#include "core/netio.h"
#include "core/registry.h"
#include "core/workspace.h"
#include "net/passes/gradient_pass.h"
#include "net/net.h"
#include "netdef_test_util.h"
#include "test_util.h"

/* GScale: Y = scale * X. Gradient: GScale(dY) with the same scale. */
static dm_status scale_run(dm_op_ctx *ctx) {
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, x->ndim, x->dims));
  const float *px = dm_tensor_data(x);
  float *py = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  float k = dm_op_arg_float(ctx, "scale", 1);
  for (int64_t i = 0; i < x->numel; i++)
    py[i] = k * px[i];
  return DM_OK;
}
static dm_status scale_grad(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "GScale", 1, in, 1, out);
}
/* GAdd: C = A + B. Gradient: both inputs receive dC itself (no op). */
static dm_status add_run(dm_op_ctx *ctx) {
  const dm_tensor *a = dm_op_input(ctx, 0), *b = dm_op_input(ctx, 1);
  DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, a->ndim, a->dims));
  const float *pa = dm_tensor_data(a), *pb = dm_tensor_data(b);
  float *pc = dm_tensor_mutable_data(dm_op_output(ctx, 0));
  for (int64_t i = 0; i < a->numel; i++)
    pc[i] = pa[i] + pb[i];
  return DM_OK;
}
static dm_status add_grad(dm_grad_ctx *g) {
  DM_TRY(dm_grad_set_input_grad(g, 0, dm_grad_output_grad(g, 0)));
  return dm_grad_set_input_grad(g, 1, dm_grad_output_grad(g, 0));
}
/* GEdit: Y = X. Gradient: GScale(dY) whose copied arguments are replaced by scale 5 and
 * k 7, through dm_grad_clear_args and dm_grad_set_arg_*. */
static dm_status edit_grad(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_output_grad(g, 0)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  DM_TRY(dm_grad_emit(g, "GScale", 1, in, 1, out));
  dm_grad_clear_args(g);
  DM_TRY(dm_grad_set_arg_float(g, "scale", 5));
  return dm_grad_set_arg_int(g, "k", dm_grad_arg_int(g, "k", 0) + 1);
}
/* GBad: a maker passing on the gradient of an output that does not exist (NULL);
 * GEarly: one setting an argument before it has emitted anything. Both are refused. */
static dm_status bad_grad(dm_grad_ctx *g) {
  const char *in[] = {dm_grad_output_grad(g, 0), dm_grad_output_grad(g, 1)};
  const char *out[] = {dm_grad_input_grad(g, 0)};
  return dm_grad_emit(g, "GScale", 2, in, 1, out);
}
static dm_status early_grad(dm_grad_ctx *g) { return dm_grad_set_arg_int(g, "k", 1); }
/* GFill: X = value (no gradient); GStop: Y = X, stops the gradient; GAcc: forbidden. */
static dm_status fill_run(dm_op_ctx *ctx) {
  int64_t one = 1;
  DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, 1, &one));
  *(float *)dm_tensor_mutable_data(dm_op_output(ctx, 0)) = dm_op_arg_float(ctx, "value", 0);
  return DM_OK;
}
static dm_status copy_run(dm_op_ctx *ctx) {
  return dm_tensor_copy(dm_op_output(ctx, 0), dm_op_input(ctx, 0));
}

static const dm_inplace_pair one_one[] = {{0, 0}, {-1, -1}};
static const dm_op_schema schemas[] = {
    {DM_SCHEMA_SIZE, .type = "GScale", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .inplace = one_one, .gradient = scale_grad},
    {DM_SCHEMA_SIZE, .type = "GAdd", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .gradient = add_grad},
    {DM_SCHEMA_SIZE, .type = "GFill", .min_outputs = 1, .max_outputs = 1, .no_gradient = 1},
    {DM_SCHEMA_SIZE, .type = "GStop", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .no_gradient = 1},
    {DM_SCHEMA_SIZE, .type = "GAcc", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1},
    {DM_SCHEMA_SIZE, .type = "GEdit", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .gradient = edit_grad},
    {DM_SCHEMA_SIZE, .type = "GBad", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .gradient = bad_grad},
    {DM_SCHEMA_SIZE, .type = "GEarly", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .gradient = early_grad},
};
static const dm_kernel_def kernels[] = {
    {DM_KERNEL_SIZE, .type = "GScale", .run = scale_run}, {DM_KERNEL_SIZE, .type = "GAdd", .run = add_run},
    {DM_KERNEL_SIZE, .type = "GFill", .run = fill_run},   {DM_KERNEL_SIZE, .type = "GStop", .run = copy_run},
    {DM_KERNEL_SIZE, .type = "GAcc", .run = copy_run},    {DM_KERNEL_SIZE, .type = "GEdit", .run = copy_run},
    {DM_KERNEL_SIZE, .type = "GBad", .run = copy_run},    {DM_KERNEL_SIZE, .type = "GEarly", .run = copy_run},
};

static int setup(void **state) {
  (void)state;
  if (dm_init() != DM_OK)
    return -1;
  for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++)
    if (dm_register_schema(&schemas[i]) || dm_register_kernel(&kernels[i]))
      return -1;
  return 0;
}

/* The ops from `from` on as "Type(in,in)->out,out" joined by "; ". */
static void describe(const Caffe2__NetDef *net, size_t from, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = from; i < net->n_op; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    used += (size_t)snprintf(buf + used, cap - used, "%s%s(", i > from ? "; " : "", op->type);
    for (size_t j = 0; j < op->n_input; j++)
      used += (size_t)snprintf(buf + used, cap - used, "%s%s", j ? "," : "", op->input[j]);
    used += (size_t)snprintf(buf + used, cap - used, ")->");
    for (size_t j = 0; j < op->n_output; j++)
      used += (size_t)snprintf(buf + used, cap - used, "%s%s", j ? "," : "", op->output[j]);
    assert_true(op->is_gradient_op);
  }
}

static const char *chain =
    "op { output: 'x' type: 'GFill' arg { name: 'value' f: 1 } }"
    "op { input: 'x' output: 'y' type: 'GScale' arg { name: 'scale' f: 3 } }"
    "op { input: 'y' input: 'y' output: 'z' type: 'GAdd' }"
    "op { input: 'z' output: 'z' type: 'GScale' arg { name: 'scale' f: 2 } }";

static void test_structure(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(chain);
  const char *loss = "z";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  char buf[1024];
  describe(net, 4, buf, sizeof buf);
  assert_string_equal(buf, "ConstantFill(z)->z_autogen_grad; GScale(z_autogen_grad)->z_grad; "
                           "Sum(z_grad,z_grad)->y_grad; GScale(y_grad)->x_grad");
  /* The copied argument rides along: the gradient of scale-by-2 scales by 2. */
  assert_int_equal(net->op[5]->n_arg, 1);
  assert_true(net->op[5]->arg[0]->f == 2.0f);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_values(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse(chain);
  const char *loss = "z";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  dm_net *n = NULL;
  assert_ok(dm_net_create(ws, net, "test", &n)); /* takes the NetDef */
  assert_ok(dm_net_run(n));
  const dm_tensor *g = NULL;
  assert_ok(dm_workspace_fetch(ws, "x_grad", &g));
  assert_true(*(const float *)dm_tensor_data(g) == 12.0f); /* z = 2 * (3x + 3x) */
  dm_net_free(n);
  dm_workspace_destroy(ws);
}

static void test_autosplit_names(void **state) {
  (void)state;
  /* x feeds two GScale ops: their partial gradients get autosplit names, then a Sum. */
  Caffe2__NetDef *net = parse("op { input: 'x' output: 'a' type: 'GScale' }"
                              "op { input: 'x' output: 'b' type: 'GScale' }"
                              "op { input: 'a' input: 'b' output: 'l' type: 'GAdd' }");
  const char *loss = "l";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  char buf[1024];
  describe(net, 3, buf, sizeof buf);
  assert_string_equal(buf, "ConstantFill(l)->l_autogen_grad; "
                           "GScale(l_autogen_grad)->_x_grad_autosplit_0; "
                           "GScale(l_autogen_grad)->_x_grad_autosplit_1; "
                           "Sum(_x_grad_autosplit_0,_x_grad_autosplit_1)->x_grad");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_stop_gradient(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse("op { input: 'x' output: 'a' type: 'GScale' }"
                              "op { input: 'a' output: 'b' type: 'GStop' }"
                              "op { input: 'b' input: 'w' output: 'l' type: 'GAdd' }");
  const char *loss = "l";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  char buf[1024];
  describe(net, 3, buf, sizeof buf);
  /* w gets l's gradient (alias, no op); nothing flows past GStop to x. */
  assert_string_equal(buf, "ConstantFill(l)->l_autogen_grad");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_forbidden_and_missing_loss(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse("op { input: 'x' output: 'a' type: 'GAcc' }");
  const char *loss = "a";
  assert_status_msg(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}), DM_ERR_INVALID, "op 0 (GAcc)",
                    "has no gradient");
  /* A net that has its backward pass is refused (running the pass twice is a mistake). */
  Caffe2__NetDef *fwd = parse("op { input: 'x' output: 'a' type: 'GScale' }");
  const char *a = "a";
  assert_ok(dm_gradient_pass(fwd, &(dm_gradient_opts){&a, 1}));
  assert_status_msg(dm_gradient_pass(fwd, &(dm_gradient_opts){&a, 1}), DM_ERR_INVALID, "already a gradient op");
  protobuf_c_message_free_unpacked(&fwd->base, NULL);
  const char *nope = "nope";
  assert_status_msg(dm_gradient_pass(net, &(dm_gradient_opts){&nope, 1}), DM_ERR_NOT_FOUND, "'nope'");
  protobuf_c_message_free_unpacked(&net->base, NULL);
  /* An op of another arity than its schema's never reaches its maker: Sub's, with the
   * gradient reaching only a third output, passed a NULL name to strdup (fuzz_net). */
  Caffe2__NetDef *odd = parse("op { input: 'x' input: 'y' input: 'z' output: 'l' output: 'm' "
                              "output: 'n' type: 'Sub' }");
  const char *n = "n";
  assert_status_msg(dm_gradient_pass(odd, &(dm_gradient_opts){&n, 1}), DM_ERR_INVALID, "op 0 (Sub) has 3 inputs",
                    "allows 2 to 2 inputs");
  protobuf_c_message_free_unpacked(&odd->base, NULL);
}

/* What a maker emits is appended as a gradient op with the forward op's arguments, device
 * and engine, which the maker may then replace; a NULL name, or an argument set before
 * any op, is refused with the maker's op named. */
static void test_maker_edits_and_refusals(void **state) {
  (void)state;
  Caffe2__NetDef *net = parse("op { input: 'x' output: 'y' type: 'GEdit' engine: 'E' "
                              "device_option { device_type: 0 } arg { name: 'k' i: 6 } "
                              "arg { name: 'scale' f: 2 } }");
  const char *loss = "y";
  assert_ok(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}));
  char buf[1024];
  describe(net, 1, buf, sizeof buf);
  assert_string_equal(buf, "ConstantFill(y)->y_autogen_grad; GScale(y_autogen_grad)->x_grad");
  const Caffe2__OperatorDef *g = net->op[2];
  assert_int_equal(g->n_arg, 2);
  assert_string_equal(g->arg[0]->name, "scale");
  assert_true(g->arg[0]->has_f && g->arg[0]->f == 5.0f);
  assert_string_equal(g->arg[1]->name, "k");
  assert_true(g->arg[1]->has_i && g->arg[1]->i == 7);
  assert_string_equal(g->engine, "E");
  assert_non_null(g->device_option);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  Caffe2__NetDef *bad = parse("op { input: 'x' output: 'y' type: 'GBad' }");
  assert_status_msg(dm_gradient_pass(bad, &(dm_gradient_opts){&loss, 1}), DM_ERR_INVALID, "op 0 (GBad)",
                    "gradient maker: input 1 of GScale is NULL");
  protobuf_c_message_free_unpacked(&bad->base, NULL);
  Caffe2__NetDef *early = parse("op { input: 'x' output: 'y' type: 'GEarly' }");
  assert_status_msg(dm_gradient_pass(early, &(dm_gradient_opts){&loss, 1}), DM_ERR_INVALID, "op 0 (GEarly)",
                    "gradient maker: no op emitted yet");
  protobuf_c_message_free_unpacked(&early->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_autosplit_names),
      cmocka_unit_test(test_stop_gradient),
      cmocka_unit_test(test_forbidden_and_missing_loss),
      cmocka_unit_test(test_maker_edits_and_refusals),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
