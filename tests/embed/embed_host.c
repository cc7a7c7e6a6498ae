/* embed_host.c: Demitasse embedded as a host application would: only <demitasse.h>,
 * linked against the shared libdemitasse. Loads an init and a predict net from text,
 * feeds, runs, fetches, handles errors; then runs two workspaces in two threads at once
 * and checks that they give bit-identical results to running one after the other. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <demitasse.h>

#define CHECK(expr)                                                                   \
  do {                                                                                \
    dm_status s_ = (expr);                                                            \
    if (s_ != DM_OK) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, dm_last_error()); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

/* A 2-layer MLP, 16 -> 32 -> 10, with deterministic weights. */
static const char *init_net =
    "name: 'init'\n"
    "op { output: 'w1' type: 'ConstantFill' arg { name: 'shape' ints: [32, 16] }"
    "     arg { name: 'value' f: 0.05 } }\n"
    "op { output: 'b1' type: 'GivenTensorFill' arg { name: 'shape' ints: 32 }"
    "     arg { name: 'values' floats: [-1, -0.5, 0, 0.5, 1, 1.5, -2, 2, -1, -0.5, 0, 0.5,"
    "       1, 1.5, -2, 2, -1, -0.5, 0, 0.5, 1, 1.5, -2, 2, -1, -0.5, 0, 0.5, 1, 1.5, -2, 2] } }\n"
    "op { output: 'w2' type: 'ConstantFill' arg { name: 'shape' ints: [10, 32] }"
    "     arg { name: 'value' f: -0.03 } }\n"
    "op { output: 'b2' type: 'GivenTensorFill' arg { name: 'shape' ints: 10 }"
    "     arg { name: 'values' floats: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] } }\n";

static const char *predict_net =
    "name: 'predict'\n"
    "op { input: 'data' input: 'w1' input: 'b1' output: 'h' type: 'FC' }\n"
    "op { input: 'h' output: 'h' type: 'Relu' }\n"
    "op { input: 'h' input: 'w2' input: 'b2' output: 'logits' type: 'FC' }\n"
    "op { input: 'logits' output: 'prob' type: 'Softmax' }\n"
    "external_input: 'data' external_output: 'prob'\n";

enum { BATCH = 8, IN = 16, OUT = 10, RUNS = 50 };

typedef struct job {
  float seed;
  float prob[BATCH * OUT];
  int failed;
} job;

/* The whole host-side sequence; returns 0 on success. */
static int run_job(job *j) {
  dm_workspace *ws = NULL;
  dm_net *init = NULL, *net = NULL;
  CHECK(dm_workspace_create(&ws));
  CHECK(dm_workspace_create_net_bytes(ws, init_net, strlen(init_net), 1, &init));
  CHECK(dm_net_run(init));
  CHECK(dm_workspace_create_net_bytes(ws, predict_net, strlen(predict_net), 1, &net));
  float data[BATCH * IN];
  int64_t dims[2] = {BATCH, IN};
  for (int r = 0; r < RUNS; r++) {
    for (int i = 0; i < BATCH * IN; i++)
      data[i] = sinf(j->seed * (float)(i + 1) + (float)r);
    CHECK(dm_workspace_feed(ws, "data", DM_FLOAT, 2, dims, data));
    CHECK(dm_net_run(net));
  }
  const dm_tensor *prob = NULL;
  CHECK(dm_workspace_fetch(ws, "prob", &prob));
  if (dm_tensor_ndim(prob) != 2 || dm_tensor_dims(prob)[0] != BATCH ||
      dm_tensor_dims(prob)[1] != OUT || dm_tensor_dtype(prob) != DM_FLOAT) {
    fprintf(stderr, "prob has the wrong shape or type\n");
    dm_workspace_destroy(ws);
    return 1;
  }
  memcpy(j->prob, dm_tensor_data(prob), sizeof j->prob);
  dm_workspace_destroy(ws);
  return 0;
}

static void *thread_main(void *arg) {
  job *j = arg;
  j->failed = run_job(j);
  return NULL;
}

static int check_errors(void) {
  dm_workspace *ws = NULL;
  dm_net *net = NULL;
  CHECK(dm_workspace_create(&ws));
  const char *bad = "op { input: 'x' output: 'y' type: 'Relu' ";
  dm_status s = dm_workspace_create_net_bytes(ws, bad, strlen(bad), 1, &net);
  int ok = s == DM_ERR_PARSE && strstr(dm_last_error(), "<memory>:1:") != NULL;
  if (!ok)
    fprintf(stderr, "malformed text: got %s: %s\n", dm_status_name(s), dm_last_error());
  const dm_tensor *t = NULL;
  s = dm_workspace_fetch(ws, "nothing", &t);
  if (s != DM_ERR_NOT_FOUND || !strstr(dm_last_error(), "nothing")) {
    fprintf(stderr, "fetch of a missing blob: %s\n", dm_last_error());
    ok = 0;
  }
  s = dm_workspace_run_net_file(ws, "/nonexistent/net.pb");
  if (s != DM_ERR_NOT_FOUND || !strstr(dm_last_error(), "/nonexistent/net.pb")) {
    fprintf(stderr, "missing file: %s: %s\n", dm_status_name(s), dm_last_error());
    ok = 0;
  }
  dm_workspace_destroy(ws);
  return ok ? 0 : 1;
}

int main(void) {
  printf("demitasse %s\n", dm_version_string());
  job seq[2] = {{.seed = 0.37f}, {.seed = 1.91f}}, par[2] = {{.seed = 0.37f}, {.seed = 1.91f}};
  if (run_job(&seq[0]) || run_job(&seq[1]))
    return 1;
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&th[i], NULL, thread_main, &par[i]) != 0)
      return 1;
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    if (par[i].failed)
      return 1;
    if (memcmp(seq[i].prob, par[i].prob, sizeof seq[i].prob) != 0) {
      fprintf(stderr, "job %d: threaded result differs from sequential\n", i);
      return 1;
    }
    for (int b = 0; b < BATCH; b++) { /* each row is a probability vector */
      double sum = 0;
      for (int k = 0; k < OUT; k++)
        sum += seq[i].prob[b * OUT + k];
      if (fabs(sum - 1.0) > 1e-5) {
        fprintf(stderr, "row %d sums to %g\n", b, sum);
        return 1;
      }
    }
  }
  if (memcmp(seq[0].prob, seq[1].prob, sizeof seq[0].prob) == 0) {
    fprintf(stderr, "different inputs gave identical outputs\n");
    return 1;
  }
  if (check_errors())
    return 1;
  printf("ok: two workspaces in two threads match sequential runs\n");
  return 0;
}
