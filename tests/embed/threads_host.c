/* threads_host.c: a host (<demitasse.h> only) that uses workspaces from two threads.
 *
 * One workspace, two threads: every call either does its whole work or fails at once
 * with DM_ERR_BUSY, so each thread's results are exactly what it computed (each thread
 * works on blobs of its own; the workspace's blob table and net list are what the two
 * share), and DM_ERR_BUSY is seen. Two workspaces, one per thread: nothing is ever
 * busy, and both are correct. Each thread feeds x, creates a net Relu(x) -> y from
 * bytes, runs it, fetches y and checks it against max(x, 0) computed here. */
#include <demitasse.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_VALUES 64
#define MIN_ROUNDS 2000    /* rounds each thread does at least */
#define MAX_SECONDS 30.0   /* rounds go on, up to this, until DM_ERR_BUSY was seen */

typedef struct worker {
  dm_workspace *ws;
  int id;
  pthread_barrier_t *start;
  long busy;   /* calls answered DM_ERR_BUSY */
  long wrong;  /* values that differed from max(x, 0) */
  long failed; /* calls that failed with anything but DM_ERR_BUSY */
  long rounds;
  char first_failure[512];
  long *busy_total;      /* both workers' count (rounds go on until it is nonzero) */
  int wait_for_busy;
  int *stop;             /* set by a worker that failed: the other stops too */
} worker;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Retries a call while it is busy; anything else but DM_OK is a failure. */
#define CALL(w, expr)                                                                     \
  do {                                                                                    \
    dm_status s_;                                                                         \
    while ((s_ = (expr)) == DM_ERR_BUSY) {                                                \
      if (!strstr(dm_last_error(), "busy"))                                               \
        fail(w, "DM_ERR_BUSY without saying so", #expr);                                  \
      (w)->busy++;                                                                        \
      __atomic_add_fetch((w)->busy_total, 1, __ATOMIC_RELAXED);                           \
    }                                                                                     \
    if (s_ != DM_OK) {                                                                    \
      fail(w, dm_status_name(s_), #expr);                                                 \
      return;                                                                             \
    }                                                                                     \
  } while (0)

static void fail(worker *w, const char *what, const char *call) {
  if (!w->failed++)
    snprintf(w->first_failure, sizeof w->first_failure, "thread %d: %s: %s [%s]", w->id, call,
             what, dm_last_error());
}

/* One round: round r of thread id has blobs x<id>_<r> and y<id>_<r>. */
static void round_trip(worker *w, long r) {
  char x[64], y[64], net_text[256];
  snprintf(x, sizeof x, "x%d_%ld", w->id, r);
  snprintf(y, sizeof y, "y%d_%ld", w->id, r);
  snprintf(net_text, sizeof net_text, "name: \"relu%d_%ld\"\nop { type: \"Relu\" input: \"%s\" "
           "output: \"%s\" }\n", w->id, r, x, y);
  float v[N_VALUES];
  for (int j = 0; j < N_VALUES; j++) /* distinct per thread and round, half negative */
    v[j] = (float)((w->id + 1) * 100000 + r * N_VALUES + j) * (j % 2 ? -1.0f : 1.0f);
  int64_t dims[1] = {N_VALUES};
  dm_net *net = NULL;
  const dm_tensor *t = NULL;
  CALL(w, dm_workspace_feed(w->ws, x, DM_FLOAT, 1, dims, v));
  CALL(w, dm_workspace_create_net_bytes(w->ws, net_text, strlen(net_text), 1, &net));
  CALL(w, dm_net_run(net));
  CALL(w, dm_workspace_fetch(w->ws, y, &t));
  const float *out = dm_tensor_data(t);
  if (dm_tensor_numel(t) != N_VALUES || !out) {
    w->wrong++;
    return;
  }
  for (int j = 0; j < N_VALUES; j++)
    if (out[j] != (v[j] > 0 ? v[j] : 0.0f))
      w->wrong++;
}

static void *work(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  double t0 = now_s();
  for (long r = 0;; r++) {
    if (r >= MIN_ROUNDS &&
        (!w->wait_for_busy || __atomic_load_n(w->busy_total, __ATOMIC_RELAXED) > 0 ||
         now_s() - t0 > MAX_SECONDS))
      break;
    round_trip(w, r);
    w->rounds = r + 1;
    if (w->failed)
      __atomic_store_n(w->stop, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(w->stop, __ATOMIC_RELAXED))
      break;
  }
  return NULL;
}

/* Runs two workers, on one workspace (shared) or one each; returns the failures. */
static int run_pair(int shared) {
  dm_workspace *ws[2] = {NULL, NULL};
  if (dm_workspace_create(&ws[0]) != DM_OK ||
      (!shared && dm_workspace_create(&ws[1]) != DM_OK)) {
    fprintf(stderr, "dm_workspace_create: %s\n", dm_last_error());
    return 1;
  }
  if (shared)
    ws[1] = ws[0];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  long busy_total = 0;
  int stop = 0;
  worker w[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].ws = ws[i];
    w[i].id = i;
    w[i].start = &start;
    w[i].busy_total = &busy_total;
    w[i].wait_for_busy = shared;
    w[i].stop = &stop;
  }
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, work, &w[i]);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&start);
  int failures = 0;
  long busy = w[0].busy + w[1].busy;
  for (int i = 0; i < 2; i++) {
    printf("%s workspace, thread %d: %ld rounds, %ld busy, %ld wrong values, %ld failed calls\n",
           shared ? "one" : "own", i, w[i].rounds, w[i].busy, w[i].wrong, w[i].failed);
    if (w[i].failed) {
      fprintf(stderr, "%s\n", w[i].first_failure);
      failures++;
    }
    if (w[i].wrong) {
      fprintf(stderr, "thread %d: %ld wrong values\n", i, w[i].wrong);
      failures++;
    }
    if (w[i].rounds < MIN_ROUNDS && !stop) {
      fprintf(stderr, "thread %d: only %ld rounds\n", i, w[i].rounds);
      failures++;
    }
  }
  if (shared && busy == 0) {
    fprintf(stderr, "one workspace from two threads: no call was refused with DM_ERR_BUSY\n");
    failures++;
  }
  if (!shared && busy != 0) {
    fprintf(stderr, "two workspaces: %ld calls refused with DM_ERR_BUSY\n", busy);
    failures++;
  }
  /* Every round's blobs are there, exactly: the table was never corrupted. */
  size_t want = shared ? (size_t)(2 * (w[0].rounds + w[1].rounds)) : 0;
  for (int i = 0; i < (shared ? 1 : 2); i++) {
    size_t n = dm_workspace_blob_count(ws[i]);
    size_t expect = shared ? want : (size_t)(2 * w[i].rounds);
    if (n != expect) {
      fprintf(stderr, "workspace %d holds %zu blobs, %zu were made\n", i, n, expect);
      failures++;
    }
  }
  dm_workspace_destroy(ws[0]);
  if (!shared)
    dm_workspace_destroy(ws[1]);
  return failures;
}

int main(void) {
  /* The status is named, appended to the enum. */
  if (strcmp(dm_status_name(DM_ERR_BUSY), "DM_ERR_BUSY") != 0 || DM_ERR_BUSY != 14) {
    fprintf(stderr, "DM_ERR_BUSY is named '%s' (%d)\n", dm_status_name(DM_ERR_BUSY),
            (int)DM_ERR_BUSY);
    return 1;
  }
  int failures = run_pair(0) + run_pair(1);
  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
