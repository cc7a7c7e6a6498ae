/* test_memory_pass.c: the memory pass (Free after each step-local blob's last use) and
 * the Free op.
 *   - structure on a hand-written net: which blobs are freed and where, what is never
 *     freed (state read before written, external inputs and outputs, the keep list);
 *   - idempotence, determinism, the refusals of the passes that must run before it;
 *   - Free's own errors (not in place; a freed blob read later);
 *   - on a training net (MLP, gradient and momentum passes, FP32 and mixed precision):
 *     five steps of the planned net leave every blob of state bit-identical to the
 *     unplanned net's, and the allocator's measured peak of the planned step equals the
 *     liveness peak computed here from the unplanned run's blob sizes, and is lower.
 */
#include <stdio.h>
#include <stdlib.h>

#include "net/api.h"
#include "core/netio.h"
#include "core/workspace.h"
#include "net/passes/gradient_pass.h"
#include "net/passes/memory_pass.h"
#include "net/passes/mixed_precision_pass.h"
#include "net/netdef_build.h"
#include "net/passes/optimizer_pass.h"
#include "net/passes/pipeline.h"
#include "netdef_test_util.h"
#include "test_util.h"

/* "Type(in,in)" per op, joined by spaces: the shape of a net at a glance. */
static void summarize(const Caffe2__NetDef *net, char *buf, size_t cap) { op_list(net, 0, buf, cap); }

/* `it` is state (read first, in place), `w` an external input, `out` an external output,
 * `kept` is on the keep list, `dead` is written and never read. */
static const char *const small_net =
    "name: \"small\"\n"
    "op { type: \"Iter\" input: \"it\" output: \"it\" }\n"
    "op { type: \"ConstantFill\" output: \"a\" arg { name: \"shape\" ints: 4 } "
    "arg { name: \"value\" f: 2 } }\n"
    "op { type: \"Relu\" input: \"a\" output: \"b\" }\n"
    "op { type: \"Relu\" input: \"b\" output: \"c\" }\n"
    "op { type: \"Add\" input: \"b\" input: \"c\" output: \"d\" }\n"
    "op { type: \"Relu\" input: \"w\" output: \"dead\" }\n"
    "op { type: \"Add\" input: \"d\" input: \"w\" output: \"kept\" }\n"
    "op { type: \"Relu\" input: \"kept\" output: \"out\" }\n"
    "external_input: \"it\" external_input: \"w\" external_output: \"out\"\n";

static void test_structure(void **unused) {
  (void)unused;
  Caffe2__NetDef *net = parse(small_net);
  const char *keep[] = {"kept"};
  dm_memory_summary sum;
  assert_ok(dm_memory_pass(net, &(dm_memory_opts){keep, 1}, &sum));
  char got[1024];
  summarize(net, got, sizeof got);
  assert_string_equal(got, "Iter(it) ConstantFill() Relu(a) Free(a) Relu(b) Add(b,c) Free(b,c) "
                           "Relu(w) Free(dead) Add(d,w) Free(d) Relu(kept)");
  assert_int_equal(sum.blobs_freed, 5);
  assert_int_equal(sum.free_ops, 4);
  assert_int_equal(sum.already, 0);
  for (size_t i = 0; i < net->n_op; i++)
    if (strcmp(net->op[i]->type, "Free") == 0)
      for (size_t k = 0; k < net->op[i]->n_input; k++)
        assert_string_equal(net->op[i]->input[k], net->op[i]->output[k]);
  assert_true(dm_memory_planned(net));
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_idempotent_and_deterministic(void **unused) {
  (void)unused;
  Caffe2__NetDef *a = parse(small_net), *b = parse(small_net);
  dm_memory_summary sum;
  assert_ok(dm_memory_pass(a, NULL, &sum));
  assert_ok(dm_memory_pass(b, NULL, &sum));
  char *ta = print(a), *tb = print(b);
  assert_string_equal(ta, tb);
  assert_ok(dm_memory_pass(a, NULL, &sum));
  assert_int_equal(sum.already, 1);
  char *again = print(a);
  assert_string_equal(again, ta);
  free(ta);
  free(tb);
  free(again);
  protobuf_c_message_free_unpacked(&a->base, NULL);
  protobuf_c_message_free_unpacked(&b->base, NULL);
}

/* The passes that add ops refuse a planned net, naming the order to use. */
static void test_refusals(void **unused) {
  (void)unused;
  Caffe2__NetDef *net = parse(small_net);
  dm_memory_summary sum;
  assert_ok(dm_memory_pass(net, NULL, &sum));
  const char *loss = "out";
  assert_status_msg(dm_gradient_pass(net, &(dm_gradient_opts){&loss, 1}), DM_ERR_INVALID, "memory pass",
                    "run the gradient pass before");
  dm_optimizer_opts o;
  dm_optimizer_opts_init(&o);
  assert_status_msg(dm_optimizer_pass(net, &o, NULL), DM_ERR_INVALID,
                    "run the optimizer pass before");
  dm_mp_opts mp;
  dm_mp_opts_init(&mp);
  dm_mp_summary ms;
  assert_status_msg(dm_mixed_precision_pass(net, &mp, NULL, &ms), DM_ERR_INVALID,
                    "run the mixed-precision pass before");
  dm_mp_summary_free(&ms);
  protobuf_c_message_free_unpacked(&net->base, NULL);

  /* a nested net hides blob uses: refused, and the net is left as it was */
  Caffe2__NetDef *ctl = parse("op { type: \"Relu\" input: \"x\" output: \"y\" "
                              "arg { name: \"then_net\" n { name: \"inner\" } } }\n");
  assert_status_msg(dm_memory_pass(ctl, NULL, &sum), DM_ERR_UNSUPPORTED, "op 0 (Relu)",
                    "then_net", "nested net");
  assert_int_equal(ctl->n_op, 1);
  assert_false(dm_memory_planned(ctl));
  protobuf_c_message_free_unpacked(&ctl->base, NULL);
}

static void test_free_op(void **unused) {
  (void)unused;
  dm_workspace *ws = NULL;
  assert_ok(dm_workspace_create(&ws));
  dm_net *net = NULL;
  assert_status_msg(net_from_text(ws, "op { type: \"Free\" input: \"a\" output: \"b\" }", &net),
                    DM_ERR_INVALID, "in place", "'b'", "'a'");
  assert_status_msg(net_from_text(ws, "op { type: \"Free\" input: \"a\" input: \"b\" "
                                      "output: \"a\" }", &net),
                    DM_ERR_INVALID, "as many outputs as inputs");
  /* a blob read after its Free: a clear error, never stale memory */
  assert_status_msg(
      run_text(ws, "op { type: \"ConstantFill\" output: \"a\" arg { name: \"shape\" ints: 3 } }\n"
                   "op { type: \"Free\" input: \"a\" output: \"a\" }\n"
                   "op { type: \"Relu\" input: \"a\" output: \"b\" }\n"),
      DM_ERR_NOT_FOUND, "op 2 (Relu)", "'a' has no data");
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, "a", &t));
  assert_int_equal(dm_tensor_numel(t), 0);
  assert_null(dm_tensor_data(t));
  dm_workspace_destroy(ws);
}

/* ---- a training net, planned vs not ---------------------------------------------- */

enum { NB = 64, IN = 32, HID = 48, CLS = 10, STEPS = 5 };

static const char *const mlp_text =
    "name: \"mlp\"\n"
    "op { type: \"FC\" input: \"data\" input: \"fc1_w\" input: \"fc1_b\" output: \"fc1\" }\n"
    "op { type: \"Relu\" input: \"fc1\" output: \"fc1\" }\n"
    "op { type: \"FC\" input: \"fc1\" input: \"fc2_w\" input: \"fc2_b\" output: \"fc2\" }\n"
    "op { type: \"Relu\" input: \"fc2\" output: \"relu2\" }\n"
    "op { type: \"FC\" input: \"relu2\" input: \"pred_w\" input: \"pred_b\" output: \"pred\" }\n"
    "op { type: \"SoftmaxWithLoss\" input: \"pred\" input: \"label\" output: \"softmax\" "
    "output: \"loss\" }\n";

static const char *const mlp_init =
    "op { type: \"XavierFill\" output: \"fc1_w\" arg { name: \"shape\" ints: 48 ints: 32 } }\n"
    "op { type: \"ConstantFill\" output: \"fc1_b\" arg { name: \"shape\" ints: 48 } }\n"
    "op { type: \"XavierFill\" output: \"fc2_w\" arg { name: \"shape\" ints: 48 ints: 48 } }\n"
    "op { type: \"ConstantFill\" output: \"fc2_b\" arg { name: \"shape\" ints: 48 } }\n"
    "op { type: \"XavierFill\" output: \"pred_w\" arg { name: \"shape\" ints: 10 ints: 48 } }\n"
    "op { type: \"ConstantFill\" output: \"pred_b\" arg { name: \"shape\" ints: 10 } }\n";

typedef struct trainer {
  dm_workspace *ws;
  dm_net *net;
  Caffe2__NetDef *plain; /* the unplanned training net (a copy), for the liveness check */
  char **state;          /* what existed after the init nets */
  size_t n_state;
} trainer;

static void trainer_free(trainer *t) {
  for (size_t i = 0; i < t->n_state; i++)
    free(t->state[i]);
  free(t->state);
  if (t->plain)
    protobuf_c_message_free_unpacked(&t->plain->base, NULL);
  dm_workspace_destroy(t->ws);
}

static int is_state(const trainer *t, const char *name) {
  for (size_t i = 0; i < t->n_state; i++)
    if (strcmp(t->state[i], name) == 0)
      return 1;
  return 0;
}

static void feed_batch(dm_workspace *ws) {
  static float x[NB * IN];
  static int32_t label[NB];
  for (int i = 0; i < NB * IN; i++)
    x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
  for (int i = 0; i < NB; i++)
    label[i] = (i * 7) % CLS;
  const int64_t xd[2] = {NB, IN}, ld[1] = {NB};
  assert_ok(dm_workspace_feed(ws, "data", DM_FLOAT, 2, xd, x));
  assert_ok(dm_workspace_feed(ws, "label", DM_INT32, 1, ld, label));
}

/* Builds the training net (gradient, momentum, optionally FP16) and, with `plan`, the
 * memory pass keeping the state and the loss. Data is fed before, so it is state too. */
static void trainer_init(trainer *t, int fp16, int plan) {
  memset(t, 0, sizeof *t);
  assert_ok(dm_workspace_create(&t->ws));
  assert_ok(run_text(t->ws, mlp_init));
  feed_batch(t->ws);
  Caffe2__NetDef *def = parse(mlp_text), *add = NULL;
  const char *loss = "loss";
  static const char *const data_blobs[] = {"data", "label"};
  /* the pipeline without its memory stage: the pass is applied below, by hand, with the
   * state read from the workspace (the unplanned net is kept for the liveness oracle) */
  dm_pipeline_opts p;
  dm_pipeline_opts_init_training(&p, &loss, 1, data_blobs, 2);
  p.optim.kind = DM_OPTIMIZER_MOMENTUM;
  p.mixed_precision = fp16;
  p.mp.scaling = DM_LOSS_SCALE_DYNAMIC;
  assert_ok(dm_pipeline_run(def, &p, &add, NULL));
  dm_net *init_net = NULL;
  assert_ok(dm_workspace_create_net(t->ws, add, "init_add", &init_net));
  assert_ok(dm_net_run(init_net));
  t->n_state = dm_workspace_blob_count(t->ws);
  t->state = calloc(t->n_state, sizeof *t->state);
  assert_non_null(t->state);
  for (size_t i = 0; i < t->n_state; i++)
    t->state[i] = strdup(dm_workspace_blob_name(t->ws, i));
  assert_ok(DM_PB_CLONE(Caffe2__NetDef, def, &t->plain));
  if (plan) {
    const char **keep = calloc(t->n_state + 1, sizeof *keep);
    assert_non_null(keep);
    for (size_t i = 0; i < t->n_state; i++)
      keep[i] = t->state[i];
    keep[t->n_state] = "loss";
    dm_memory_summary sum;
    assert_ok(dm_memory_pass(def, &(dm_memory_opts){keep, t->n_state + 1}, &sum));
    assert_true(sum.blobs_freed > 10);
    free(keep);
  }
  assert_ok(dm_workspace_create_net(t->ws, def, "mlp_train", &t->net));
}

static size_t rounded(size_t n) { return n ? (n + 63) / 64 * 64 : 64; }

/* The most bytes live at once while `def` runs, if each step-local blob (first touched by
 * a write) is allocated when first written and released after its last use; sizes are
 * those the blobs have after an unplanned run in `ws`, rounded as the allocator counts
 * them. Computed from scratch here, beside the pass, from the definition of liveness. */
static size_t liveness_peak(const trainer *t) {
  const Caffe2__NetDef *def = t->plain;
  size_t n = 0, cap = 256, live = 0, peak = 0;
  const char **name = calloc(cap, sizeof *name);
  long *last = calloc(cap, sizeof *last);
  int *local = calloc(cap, sizeof *local), *alive = calloc(cap, sizeof *alive);
  assert_true(name && last && local && alive);
  for (size_t i = 0; i < def->n_op; i++)
    for (int side = 0; side < 2; side++) {
      const Caffe2__OperatorDef *op = def->op[i];
      size_t cnt = side ? op->n_output : op->n_input;
      for (size_t k = 0; k < cnt; k++) {
        const char *b = side ? op->output[k] : op->input[k];
        size_t j = 0;
        while (j < n && strcmp(name[j], b) != 0)
          j++;
        if (j == n) {
          assert_true(n < cap);
          name[n] = b;
          local[n++] = side == 1 && !is_state(t, b) && strcmp(b, "loss") != 0;
        }
        last[j] = (long)i;
      }
    }
  for (size_t i = 0; i < def->n_op; i++) {
    const Caffe2__OperatorDef *op = def->op[i];
    for (size_t k = 0; k < op->n_output; k++)
      for (size_t j = 0; j < n; j++)
        if (strcmp(name[j], op->output[k]) == 0 && local[j] && !alive[j]) {
          const dm_tensor *x = NULL;
          assert_ok(dm_workspace_fetch(t->ws, name[j], &x));
          alive[j] = 1;
          live += rounded(dm_tensor_nbytes(x));
        }
    peak = live > peak ? live : peak;
    for (size_t j = 0; j < n; j++)
      if (alive[j] && last[j] == (long)i) {
        const dm_tensor *x = NULL;
        assert_ok(dm_workspace_fetch(t->ws, name[j], &x));
        alive[j] = 0;
        live -= rounded(dm_tensor_nbytes(x));
      }
  }
  free(name);
  free(last);
  free(local);
  free(alive);
  return peak;
}

static size_t step_peak(trainer *t) {
  size_t before, peak;
  dm_memory_usage(DM_CPU, &before, &peak);
  dm_memory_reset_peak(DM_CPU);
  assert_ok(dm_net_run(t->net));
  dm_memory_usage(DM_CPU, &peak, &peak);
  return peak - before;
}

static void check_training(int fp16) {
  trainer plain, planned;
  trainer_init(&plain, fp16, 0);
  trainer_init(&planned, fp16, 1);
  size_t peak_plain = 0, peak_planned = 0;
  for (int step = 0; step < STEPS; step++) {
    size_t a = step_peak(&plain), b = step_peak(&planned);
    /* the first unplanned step allocates every blob of the step; a planned step from
     * the second on allocates only the freed ones (the kept loss exists by then) */
    if (step == 0)
      peak_plain = a;
    if (step == 1)
      peak_planned = b;
    for (size_t i = 0; i < plain.n_state; i++) {
      const dm_tensor *x = NULL, *y = NULL;
      assert_ok(dm_workspace_fetch(plain.ws, plain.state[i], &x));
      assert_ok(dm_workspace_fetch(planned.ws, plain.state[i], &y));
      assert_int_equal(dm_tensor_nbytes(x), dm_tensor_nbytes(y));
      if (memcmp(dm_tensor_data(x), dm_tensor_data(y), dm_tensor_nbytes(x)) != 0)
        fail_msg("%s: state blob '%s' differs after step %d", fp16 ? "fp16" : "fp32",
                 plain.state[i], step + 1);
    }
  }
  size_t want = liveness_peak(&plain);
  printf("# %s: step peak %zu bytes unplanned, %zu planned (liveness %zu)\n",
         fp16 ? "fp16" : "fp32", peak_plain, peak_planned, want);
  assert_int_equal(peak_planned, want);
  assert_true(peak_planned < peak_plain);
  trainer_free(&plain);
  trainer_free(&planned);
}

static void test_training_fp32(void **unused) {
  (void)unused;
  check_training(0);
}

static void test_training_fp16(void **unused) {
  (void)unused;
  check_training(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_idempotent_and_deterministic),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_free_op),
      cmocka_unit_test(test_training_fp32),
      cmocka_unit_test(test_training_fp16),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
