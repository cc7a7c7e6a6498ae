/* test_dnnl_matmul.c: the oneDNN engine's BatchMatMul and MatMul (operators/dnnl/
 * matmul.c) against the double-precision reference of bmm_reference.h, FP32 and BF16,
 * with the bounds derived there (oneDNN accumulates in FP32 and rounds BF16 once, as the
 * reference kernel); that the engine kernel is the one chosen (dm_op_probe_kernel), that
 * it refuses FLOAT16 (the reference kernel runs it), and that its errors are the
 * reference's words.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bmm_reference.h"
#include "core/workspace.h"
#include "net/net.h"
#include "net/netdef_build.h"
#include "op_test_util.h"
#include "operators/dnnl/dnnl_common.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* The engine of the CPU kernel the executor picks for case c on the blobs fed now. */
static const char *engine_of(dm_workspace *ws, const mm_case *c) {
  Caffe2__OperatorDef *def;
  assert_int_equal(dm_opdef_new(c->type, &def), DM_OK);
  assert_int_equal(dm_opdef_add_input(def, "A"), DM_OK);
  assert_int_equal(dm_opdef_add_input(def, "B"), DM_OK);
  assert_int_equal(dm_opdef_add_output(def, "Y"), DM_OK);
  const char *names[] = {"trans_a", "trans_b", "broadcast", "axis_a", "axis_b"};
  int64_t vals[] = {c->ta, c->tb, c->bc, c->axis_a, c->axis_b};
  for (int i = 0; i < 5; i++)
    if (vals[i])
      assert_int_equal(dm_opdef_set_arg_int(def, names[i], vals[i]), DM_OK);
  const dm_kernel_def *k = NULL;
  dm_status st = dm_op_probe_kernel(ws, def, DM_CPU, 0, &k);
  protobuf_c_message_free_unpacked(&def->base, NULL);
  assert_int_equal(st, DM_OK);
  return k->engine ? k->engine : "";
}

/* Feeds A and B of case c in mode (zeros: only the dtype matters to the choice). */
static void feed_zeros(dm_workspace *ws, const mm_case *c, int mode) {
  int64_t na = numel(&c->a), nb = numel(&c->b);
  double *z = calloc((size_t)(na > nb ? na : nb) + 1, sizeof *z);
  opt_feed_mode(ws, "A", mode, c->a.n, c->a.d, z);
  opt_feed_mode(ws, "B", mode, c->b.n, c->b.d, z);
  free(z);
}

static void run_mode(dm_workspace *ws, int mode) {
  int builds = dm_dnnl_can(DM_DNNL_MATMUL, opt_mode_dtype(mode));
  if (!builds)
    print_message("oneDNN builds no %s matmul here: the reference kernel runs\n",
                  opt_mode_name(mode));
  const mm_case extra[] = {
      {"BatchMatMul", S(2, 3, 700), S(2, 700, 4), NONE, NONE, S(2, 3, 4), 0, 0, 0, 0, 0},
      {"BatchMatMul", S(3, 300, 2), S(5, 1, 2, 300), NONE, NONE, S(5, 3, 2, 2), 1, 1, 1, 0, 0},
      {"BatchMatMul", S(2, 3, 0), S(2, 0, 4), NONE, NONE, S(2, 3, 4), 0, 0, 0, 0, 0},
      {"BatchMatMul", S(0, 3, 2), S(1, 2, 4), NONE, NONE, S(0, 3, 4), 0, 0, 1, 0, 0},
      /* attention's shapes: (batch, heads, T, d) against its transpose */
      {"BatchMatMul", S(2, 4, 16, 8), S(2, 4, 16, 8), NONE, NONE, S(2, 4, 16, 16), 0, 1, 0, 0, 0},
  };
  size_t n = sizeof cases / sizeof *cases, ne = sizeof extra / sizeof *extra;
  for (size_t i = 0; i < n + ne; i++) {
    const mm_case *c = i < n ? &cases[i] : &extra[i - n];
    feed_zeros(ws, c, mode);
    assert_string_equal(engine_of(ws, c), builds ? DM_ENGINE_DNNL : "");
    check_case(ws, c, mode, 300 + i, NULL, 0);
  }
}

static void test_fp32(void **state) { run_mode(*state, 0); }
static void test_bf16(void **state) { run_mode(*state, 2); }

/* FLOAT16 is refused (the reference kernels are the tensor-core-faithful path) and runs
 * on the reference kernel, with the same results. */
static void test_fp16_refused(void **state) {
  dm_workspace *ws = *state;
  feed_zeros(ws, &cases[0], 1);
  assert_string_equal(engine_of(ws, &cases[0]), "");
  check_case(ws, &cases[0], 1, 5, NULL, 0);
  feed_zeros(ws, &cases[13], 1);
  assert_string_equal(engine_of(ws, &cases[13]), "");
}

/* One net run on new shapes, then on the first again: the kernel's primitive, kept in
 * its state, is rebuilt when the shapes (or transposes' strides) change. */
static void test_shape_changes(void **state) {
  dm_workspace *ws = *state;
  const char *text = "op { input: ['A', 'B'] output: 'Y' type: 'BatchMatMul'"
                     " arg { name: 'broadcast' i: 1 } arg { name: 'trans_b' i: 1 } }";
  dm_net *net = NULL;
  const mm_case first = {"BatchMatMul", S(2, 3, 4, 5), S(2, 3, 6, 5), NONE, NONE, S(2, 3, 4, 6), 0, 1, 1, 0, 0};
  const mm_case next = {"BatchMatMul", S(3, 1, 7, 5), S(2, 4, 5), NONE, NONE, S(3, 2, 7, 4), 0, 1, 1, 0, 0};
  const mm_case *order[] = {&first, &next, &first};
  for (int mode = 0; mode < 3; mode += 2) {
    for (int r = 0; r < 3; r++) {
      const mm_case *c = order[r];
      uint64_t seed = 900 + (uint64_t)r;
      int64_t na = numel(&c->a), nb = numel(&c->b), ny = numel(&c->y);
      double *a = opt_draw(na, -2, 2, mode, &seed), *b = opt_draw(nb, -1, 1, mode, &seed);
      ref rf = {calloc((size_t)ny, 8), calloc((size_t)ny, 8), NULL, NULL, NULL, NULL};
      reference(&c->a, &c->b, c->ta, c->tb, &c->y, a, b, NULL, &rf);
      opt_feed_mode(ws, "A", mode, c->a.n, c->a.d, a);
      opt_feed_mode(ws, "B", mode, c->b.n, c->b.d, b);
      if (!net)
        assert_int_equal(dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net), DM_OK);
      if (dm_net_run(net) != DM_OK)
        fail_msg("run %d: %s", r, dm_last_error());
      compare("Y", opt_fetch(ws, "Y", opt_mode_dtype(mode), c->y.n, c->y.d), mode, ny, rf.y, rf.ys);
      free(a), free(b), free(rf.y), free(rf.ys);
    }
    net = NULL; /* the workspace owns it; a new one for the next dtype */
  }
}

/* A bad shape reads the same on both engines: the reference's own checks. */
static void test_same_errors(void **state) {
  dm_workspace *ws = *state;
  char msg[2][512];
  for (int e = 0; e < 2; e++) {
    int64_t a[] = {2, 3, 4}, b[] = {2, 5, 6};
    static float z[64];
    opt_feed(ws, "A", DM_FLOAT, 3, a, z);
    opt_feed(ws, "B", DM_FLOAT, 3, b, z);
    opt_op *op = opt_new("BatchMatMul");
    opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "Y");
    opt_engine(op, e ? "REFERENCE" : DM_ENGINE_DNNL);
    opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "K = 4 columns but op(B) has 5 rows", NULL);
    snprintf(msg[e], sizeof msg[e], "%s", dm_last_error());
  }
  assert_string_equal(msg[0], msg[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_fp16_refused),
      cmocka_unit_test(test_shape_changes),
      cmocka_unit_test(test_same_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
