/* test_graph_exec.c: the executor's device graphs (net/graph_exec.h), checked on the CPU.
 *
 * A fake backend stands in for CUDA with the capture hooks of core/device.h, behaving as
 * a CUDA graph does: while recording, the test kernels' work is appended to the
 * recording instead of being done, with the addresses it had then baked in; memory
 * allocated while recording belongs to the graph (the same addresses at every replay,
 * released with the graph) and a free of it is the graph's business; a replay does the
 * recorded work again, and nothing else. So a replay that should not happen (other
 * shapes or addresses than at capture) computes a wrong answer, which the tests would
 * see, and one that happens computes the right answer without calling any kernel.
 *
 * Checked: the net's results are the same with and without graphs, run after run; after
 * the warm-up runs the longest graph-safe run of device ops is captured once and then
 * replayed, its kernels no longer called; a new input shape runs op by op, then is
 * captured as a second graph, and the first shape replays its own graph again; graphs
 * off (dm_net_set_device_graphs) capture nothing; an op without DM_KERNEL_GRAPH_SAFE
 * splits the net and the longest side is captured; a kernel that fails while recording
 * leaves the net running op by op with the reason, results unchanged; host syncs are
 * counted (a download per run: one each); profiling turns graphs off for its runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/registry.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "net/net.h"
#include "demitasse_plugin.h"
#include "test_util.h"

/* ---- the fake backend: immediate or recorded work ------------------------------- */

typedef struct work {
  enum { W_SCALE, W_ACCUM } kind;
  const float *x;
  float *y;
  int64_t n;
  float a;
} work;

typedef struct fake_graph {
  work *items;
  size_t n, cap;
  int failed;
} fake_graph;

static fake_graph *recording; /* non-NULL between capture_begin and capture_end */
static long fake_captures, fake_launches, fake_graphs_live;

/* Memory allocated while recording, as CUDA's graph memory behaves: the graph's, at the
 * same address at every launch. Freed within the recording ("internal"), it is the
 * graph's alone; not freed there, it is the host's after each launch, which may free it
 * (user_freed: the graph takes it again at its next launch) or keep it past the graph's
 * end (graph NULL: an orphan, freed when the host frees it). */
typedef struct graph_mem {
  void *p;
  fake_graph *graph;
  int internal, user_freed;
} graph_mem;
static graph_mem *gmem;
static size_t n_gmem, cap_gmem;

static void do_work(const work *w) {
  for (int64_t i = 0; i < w->n; i++)
    w->y[i] = w->kind == W_SCALE ? w->a * w->x[i] : w->y[i] + w->x[i];
}

static int push(void **arr, size_t *n, size_t *cap, size_t size, const void *item) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 8;
    void *p = realloc(*arr, c * size);
    if (!p)
      return 0;
    *arr = p;
    *cap = c;
  }
  memcpy((char *)*arr + *n * size, item, size);
  (*n)++;
  return 1;
}

static dm_status enqueue(work w) {
  if (!recording) {
    do_work(&w);
    return DM_OK;
  }
  if (!push((void **)&recording->items, &recording->n, &recording->cap, sizeof w, &w))
    return DM_NOMEM("a recorded work item");
  return DM_OK;
}

static graph_mem *find_gmem(const void *p) {
  for (size_t k = 0; k < n_gmem; k++)
    if (gmem[k].p == p)
      return &gmem[k];
  return NULL;
}

static void drop_gmem(graph_mem *m) {
  free(m->p);
  *m = gmem[--n_gmem];
}

static dm_status fake_alloc(int id, size_t n, void **out) {
  (void)id;
  if (!(*out = malloc(n ? n : 1)))
    return DM_NOMEM("fake device memory");
  graph_mem m = {*out, recording, 0, 0};
  if (recording && !push((void **)&gmem, &n_gmem, &cap_gmem, sizeof m, &m)) {
    free(*out);
    return DM_NOMEM("a graph allocation");
  }
  return DM_OK;
}

static void fake_free(int id, void *p) {
  (void)id;
  graph_mem *m = find_gmem(p);
  if (recording) {
    /* a graph frees only what it allocated; a recorded free of anything else would
     * free it again at every launch: such a capture fails, as CUDA's does */
    if (m && m->graph == recording)
      m->internal = 1;
    else
      recording->failed = 1;
    return;
  }
  if (!m)
    free(p);
  else if (!m->graph)
    drop_gmem(m);
  else
    m->user_freed = 1;
}

static dm_status fake_copy(dm_device_type dst_dev, int dst_id, void *dst, dm_device_type src_dev,
                           int src_id, const void *src, size_t n) {
  (void)dst_dev;
  (void)dst_id;
  (void)src_dev;
  (void)src_id;
  memcpy(dst, src, n);
  return DM_OK;
}

static int fake_usable(int id, char *why, size_t cap) {
  (void)id;
  (void)why;
  (void)cap;
  return 1;
}

static dm_status fake_synchronize(int id) {
  (void)id;
  return DM_OK;
}

static void graph_release(fake_graph *g) {
  for (size_t k = 0; k < n_gmem;) {
    graph_mem *m = &gmem[k];
    if (m->graph != g) {
      k++;
    } else if (m->internal || m->user_freed) {
      drop_gmem(m); /* (the last entry moved into k) */
    } else {
      m->graph = NULL; /* the host still holds it */
      k++;
    }
  }
  free(g->items);
  free(g);
}

static dm_status fake_capture_begin(int id) {
  (void)id;
  if (recording)
    return dm_error(DM_ERR_INVALID, "fake: already recording");
  if (!(recording = calloc(1, sizeof *recording)))
    return DM_NOMEM("a fake graph");
  return DM_OK;
}

static dm_status fake_capture_end(int id, void **graph, long *nodes) {
  (void)id;
  fake_graph *g = recording;
  recording = NULL;
  *graph = NULL;
  *nodes = 0;
  if (!g)
    return dm_error(DM_ERR_INVALID, "fake: not recording");
  if (g->failed) {
    graph_release(g);
    return dm_error(DM_ERR_DEVICE, "fake: the recording freed memory it did not allocate");
  }
  *graph = g;
  *nodes = (long)g->n;
  fake_captures++;
  fake_graphs_live++;
  return DM_OK;
}

static dm_status fake_graph_launch(int id, void *graph) {
  (void)id;
  fake_graph *g = graph;
  for (size_t k = 0; k < n_gmem; k++) /* its allocations, at their addresses again */
    if (gmem[k].graph == g)
      gmem[k].user_freed = 0;
  for (size_t k = 0; k < g->n; k++)
    do_work(&g->items[k]);
  fake_launches++;
  return DM_OK;
}

static void fake_graph_free(int id, void *graph) {
  (void)id;
  graph_release(graph);
  fake_graphs_live--;
}

static const dm_device_ops fake_ops = {.name = "FAKE",
                                       .alloc = fake_alloc,
                                       .free = fake_free,
                                       .copy = fake_copy,
                                       .usable = fake_usable,
                                       .synchronize = fake_synchronize,
                                       .capture_begin = fake_capture_begin,
                                       .capture_end = fake_capture_end,
                                       .graph_launch = fake_graph_launch,
                                       .graph_free = fake_graph_free};

/* ---- test ops --------------------------------------------------------------------- */

static long kernel_calls;

static dm_status upload_run(dm_op_ctx *ctx) {
  return dm_tensor_copy_to(dm_op_output(ctx, 0), DM_CUDA, 0, dm_op_input(ctx, 0));
}

static dm_status download_run(dm_op_ctx *ctx) {
  return dm_tensor_copy_to(dm_op_output(ctx, 0), DM_CPU, 0, dm_op_input(ctx, 0));
}

/* GScale: Y = scale * X (Y allocated on the device). */
static dm_status scale_run(dm_op_ctx *ctx) {
  kernel_calls++;
  const dm_tensor *x = dm_op_input(ctx, 0);
  DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, dm_tensor_ndim(x), dm_tensor_dims(x)));
  return enqueue((work){W_SCALE, dm_tensor_data(x), dm_tensor_mutable_data(dm_op_output(ctx, 0)),
                        dm_tensor_numel(x), (float)dm_op_arg_float(ctx, "scale", 1.0)});
}

/* GAccum: Y += X, Y zeroed (on the host's side, at its first run) when it is new. */
static dm_status accum_run(dm_op_ctx *ctx) {
  kernel_calls++;
  const dm_tensor *x = dm_op_input(ctx, 0);
  dm_tensor *y = dm_op_output(ctx, 0);
  if (dm_tensor_numel(y) != dm_tensor_numel(x)) {
    DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, dm_tensor_ndim(x), dm_tensor_dims(x)));
    DM_TRY(enqueue((work){W_SCALE, dm_tensor_data(x), dm_tensor_mutable_data(y),
                          dm_tensor_numel(x), 0.0f}));
  }
  return enqueue(
      (work){W_ACCUM, dm_tensor_data(x), dm_tensor_mutable_data(y), dm_tensor_numel(x), 0});
}

/* GScratchScale: GScale through a scratch buffer of the "backend" (as cuDNN's workspace):
 * X copied into it, Y = scale * it. The buffer grows when a bigger X comes, and says so
 * (dm_device_note_private_realloc); the old one is kept, filled with NaN, until the end,
 * so that a graph still pointing into it computes NaN, not a silently right answer. */
static float *fscratch, *old_scratch[8];
static size_t fscratch_n, n_old_scratch;

static void scratch_free_all(void) {
  free(fscratch);
  for (size_t k = 0; k < n_old_scratch; k++)
    free(old_scratch[k]);
  fscratch = NULL;
  fscratch_n = n_old_scratch = 0;
}

static dm_status scratch_scale_run(dm_op_ctx *ctx) {
  kernel_calls++;
  const dm_tensor *x = dm_op_input(ctx, 0);
  size_t n = (size_t)dm_tensor_numel(x);
  if (n > fscratch_n) {
    if (n_old_scratch == sizeof old_scratch / sizeof old_scratch[0] || recording)
      return dm_op_error(ctx, DM_ERR_DEVICE, "fake: the scratch cannot grow now");
    for (size_t k = 0; k < fscratch_n; k++)
      fscratch[k] = NAN;
    if (fscratch)
      old_scratch[n_old_scratch++] = fscratch;
    if (!(fscratch = malloc(n * sizeof *fscratch)))
      return DM_NOMEM("fake scratch");
    fscratch_n = n;
    dm_device_note_private_realloc();
  }
  DM_TRY(dm_op_set_output(ctx, 0, DM_FLOAT, dm_tensor_ndim(x), dm_tensor_dims(x)));
  DM_TRY(enqueue((work){W_SCALE, dm_tensor_data(x), fscratch, (int64_t)n, 1.0f}));
  return enqueue((work){W_SCALE, fscratch, dm_tensor_mutable_data(dm_op_output(ctx, 0)),
                        (int64_t)n, (float)dm_op_arg_float(ctx, "scale", 1.0)});
}

/* GFailsInCapture: GScale that cannot be recorded (claims to be graph-safe, is not). */
static dm_status fails_run(dm_op_ctx *ctx) {
  if (recording)
    return dm_op_error(ctx, DM_ERR_DEVICE, "fake: this kernel cannot be recorded");
  return scale_run(ctx);
}

/* GPingPong: X copied to one of two device buffers in turn, Y made a view of it: the
 * double-buffered input of a training step, whose address alternates. */
typedef struct pingpong {
  dm_tensor *buf[2];
  int next;
} pingpong;

static dm_status pingpong_init(dm_op_ctx *ctx, void **state) {
  (void)ctx;
  pingpong *p = calloc(1, sizeof *p);
  if (!p || !(p->buf[0] = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT)) ||
      !(p->buf[1] = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT))) {
    if (p)
      dm_tensor_free(p->buf[0]);
    free(p);
    return DM_NOMEM("ping-pong buffers");
  }
  *state = p;
  return DM_OK;
}

static void pingpong_fini(void *state) {
  pingpong *p = state;
  dm_tensor_free(p->buf[0]);
  dm_tensor_free(p->buf[1]);
  free(p);
}

static dm_status pingpong_run(dm_op_ctx *ctx) {
  pingpong *p = dm_op_state(ctx);
  dm_tensor *b = p->buf[p->next];
  p->next ^= 1;
  DM_TRY(dm_tensor_copy_to(b, DM_CUDA, 0, dm_op_input(ctx, 0)));
  dm_tensor_share(dm_op_output(ctx, 0), b);
  return DM_OK;
}

static const dm_arg_spec scale_args[] = {{"scale", DM_ARG_FLOAT, 0, "the factor"}, {0}};
#define ONE_TO_ONE(t) \
  {DM_SCHEMA_SIZE, .type = (t), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, \
   .max_outputs = 1, .args = scale_args, .no_gradient = 1}
static const dm_op_schema schemas[] = {
    ONE_TO_ONE("GUpload"), ONE_TO_ONE("GDownload"), ONE_TO_ONE("GScale"), ONE_TO_ONE("GPingPong"),
    ONE_TO_ONE("GUnsafeScale"), ONE_TO_ONE("GFailsInCapture"), ONE_TO_ONE("GScratchScale"),
    {DM_SCHEMA_SIZE, .type = "GAccum", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
     .max_outputs = 1, .no_gradient = 1},
};
static const dm_kernel_def kernels[] = {
    {DM_KERNEL_SIZE, .type = "GUpload", .device = DM_CUDA, .run = upload_run, .cross_device = 1},
    {DM_KERNEL_SIZE, .type = "GDownload", .device = DM_CUDA, .run = download_run,
     .cross_device = 1},
    {DM_KERNEL_SIZE, .type = "GPingPong", .device = DM_CUDA, .init = pingpong_init,
     .run = pingpong_run, .fini = pingpong_fini, .cross_device = 1},
    {DM_KERNEL_SIZE, .type = "GScale", .device = DM_CUDA, .run = scale_run,
     .flags = DM_KERNEL_GRAPH_SAFE},
    {DM_KERNEL_SIZE, .type = "GUnsafeScale", .device = DM_CUDA, .run = scale_run},
    {DM_KERNEL_SIZE, .type = "GScratchScale", .device = DM_CUDA, .run = scratch_scale_run,
     .flags = DM_KERNEL_GRAPH_SAFE},
    {DM_KERNEL_SIZE, .type = "GFailsInCapture", .device = DM_CUDA, .run = fails_run,
     .flags = DM_KERNEL_GRAPH_SAFE},
    {DM_KERNEL_SIZE, .type = "GAccum", .device = DM_CUDA, .run = accum_run,
     .flags = DM_KERNEL_GRAPH_SAFE},
};

static int setup(void **unused) {
  (void)unused;
  if (dm_init() != DM_OK) /* first, so the fake replaces whatever the build registered */
    return -1;
  dm_device_register(DM_CUDA, &fake_ops);
  for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++)
    if (dm_register_schema(&schemas[i]) != DM_OK)
      return -1;
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
    if (dm_register_kernel(&kernels[i]) != DM_OK)
      return -1;
  return 0;
}

#define DEV " device_option { device_type: 1 } "
#define OP(type, in, out, extra) \
  "op { type: \"" type "\" input: \"" in "\" output: \"" out "\" " extra DEV "}\n"
#define SCALE(f) "arg { name: \"scale\" f: " #f " }"

/* x -> upload -> *2 -> *3 -> Free(a) -> acc += b -> download: out = 6 x per run, summed. */
static const char *const chain =
    OP("GUpload", "x", "xg", "") OP("GScale", "xg", "a", SCALE(2)) OP("GScale", "a", "b", SCALE(3))
    OP("Free", "a", "a", "") OP("GAccum", "b", "acc", "") OP("GDownload", "acc", "out", "");

static void feed(dm_workspace *ws, int64_t n, float base) {
  float x[8];
  for (int64_t i = 0; i < n; i++)
    x[i] = base + (float)i;
  assert_ok(dm_workspace_feed(ws, "x", DM_FLOAT, 1, &n, x));
}

/* Feeds x = base + i (n elements), runs the net, and checks out == the sum over the runs
 * of 6 x, kept in sum[] (small integers: exact in FLOAT). The input changes every run, so
 * a replay that read another buffer than the current input would be caught. */
static void run_check(dm_net *net, dm_workspace *ws, int64_t n, float base, double *sum) {
  feed(ws, n, base);
  assert_ok(dm_net_run(net));
  const dm_tensor *t = NULL;
  assert_ok(dm_workspace_fetch(ws, "out", &t));
  assert_int_equal(dm_tensor_numel(t), n);
  const float *p = dm_tensor_data(t);
  for (int64_t i = 0; i < n; i++) {
    sum[i] += 6.0 * (base + (double)i);
    if (p[i] != sum[i])
      fail_msg("out[%lld] = %g, expected %g", (long long)i, p[i], sum[i]);
  }
}

static dm_net *make(dm_workspace **ws, const char *text) {
  assert_ok(dm_workspace_create(ws));
  dm_net *net = NULL;
  assert_ok(net_from_text(*ws, text, &net));
  return net;
}

static void test_capture_then_replay(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, chain);
  double sum[8] = {0};
  long calls0 = kernel_calls, captures0 = fake_captures;
  for (long r = 1; r <= 8; r++) {
    run_check(net, ws, 4, (float)r, sum);
    /* three runs op by op (DM_GRAPH_WARMUP repeats of the steady signature after the
     * first), the fourth captures (its kernels called while recording), then replays */
    long want = 3 * (r < 4 ? r : 4);
    assert_int_equal(kernel_calls - calls0, want);
  }
  assert_int_equal(fake_captures - captures0, 1);
  dm_run_counts c;
  dm_net_run_counts(net, &c);
  assert_int_equal(c.runs, 8);
  assert_int_equal(c.captures, 1);
  assert_int_equal(c.graph_launches, 5); /* runs 4..8 */
  /* ops 1-4 (two scales, the free, the accumulation) run op by op in runs 1-3; the
   * upload and download every run */
  assert_int_equal(c.device_ops, 3 * 4 + 8 * 2);
  assert_int_equal(c.host_syncs, 8); /* the download, one per run */
  assert_int_equal(c.graph_nodes, 5 * 3);
  char line[256];
  dm_net_graph_status(net, line, sizeof line);
  assert_non_null(strstr(line, "ops 1 to 4"));
  dm_workspace_destroy(ws);
  assert_int_equal(fake_graphs_live, 0); /* freed with the net */
}

static void test_graphs_off(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, chain);
  assert_ok(dm_net_set_device_graphs(net, 0));
  double sum[8] = {0};
  long calls0 = kernel_calls, captures0 = fake_captures;
  for (long r = 1; r <= 6; r++)
    run_check(net, ws, 4, (float)r, sum);
  assert_int_equal(kernel_calls - calls0, 6 * 3);
  assert_int_equal(fake_captures - captures0, 0);
  char line[256];
  dm_net_graph_status(net, line, sizeof line);
  assert_string_equal(line, "device graphs off");
  assert_status_msg(dm_net_set_device_graphs(NULL, 0), DM_ERR_INVALID, "NULL net");
  dm_workspace_destroy(ws);
}

/* A new shape runs op by op, is captured in its turn, and both shapes give right answers
 * throughout; once each has its graph, no kernel is called. */
static void test_new_shape(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, chain);
  double sum[8] = {0}, sum3[8] = {0};
  for (int r = 1; r <= 5; r++)
    run_check(net, ws, 4, (float)r, sum);
  long captures0 = fake_captures;
  for (long r = 1; r <= 6; r++) /* GAccum restarts its sum for the new shape */
    run_check(net, ws, 3, (float)(10 + r), sum3);
  assert_int_equal(fake_captures - captures0, 1);
  long calls0 = kernel_calls;
  for (long r = 7; r <= 9; r++)
    run_check(net, ws, 3, (float)(10 + r), sum3);
  assert_int_equal(kernel_calls, calls0);
  dm_workspace_destroy(ws);
}

/* The input's address alternates between two buffers: two graphs, each replayed in turn. */
static void test_double_buffered_input(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, OP("GPingPong", "x", "xg", "") OP("GScale", "xg", "a", SCALE(2))
                              OP("GScale", "a", "b", SCALE(3)) OP("Free", "a", "a", "")
                              OP("GAccum", "b", "acc", "") OP("GDownload", "acc", "out", ""));
  double sum[8] = {0};
  long captures0 = fake_captures;
  for (long r = 1; r <= 8; r++)
    run_check(net, ws, 4, (float)r, sum);
  assert_int_equal(fake_captures - captures0, 2);
  long calls0 = kernel_calls;
  for (long r = 9; r <= 12; r++)
    run_check(net, ws, 4, (float)r, sum);
  assert_int_equal(kernel_calls, calls0);
  dm_run_counts c;
  dm_net_run_counts(net, &c);
  assert_int_equal(c.captures, 2);
  dm_workspace_destroy(ws);
}

/* A blob the run allocates (empty at its start), read after it and freed after that:
 * each replay must hand the host the graph's memory for it again, or the reader after
 * the run finds it empty. */
static void test_blob_made_in_run_read_after(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, OP("GUpload", "x", "xg", "") OP("GScale", "xg", "a", SCALE(2))
                              OP("GScale", "a", "b", SCALE(3)) OP("Free", "a", "a", "")
                              OP("GUnsafeScale", "b", "c", SCALE(1)) OP("Free", "b", "b", "")
                              OP("GAccum", "c", "acc", "") OP("GDownload", "acc", "out", ""));
  double sum[8] = {0};
  for (long r = 1; r <= 8; r++)
    run_check(net, ws, 4, (float)r, sum);
  dm_run_counts c;
  dm_net_run_counts(net, &c);
  assert_int_equal(c.captures, 1);
  assert_true(c.graph_launches >= 5);
  char line[256];
  dm_net_graph_status(net, line, sizeof line);
  assert_non_null(strstr(line, "ops 1 to 3"));
  dm_workspace_destroy(ws);
}

/* Another net grows the backend's scratch, which the first net's graph points into: the
 * epoch retires that graph (replayed, it would read the old buffer, now NaN). */
static void test_private_memory_epoch(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, OP("GUpload", "x", "xg", "") OP("GScratchScale", "xg", "a", SCALE(2))
                              OP("GScale", "a", "b", SCALE(3)) OP("GAccum", "b", "acc", "")
                              OP("GDownload", "acc", "out", ""));
  double sum[8] = {0};
  for (long r = 1; r <= 5; r++)
    run_check(net, ws, 4, (float)r, sum);
  dm_run_counts c;
  dm_net_run_counts(net, &c);
  assert_int_equal(c.captures, 1);
  dm_net *big = NULL; /* the scratch grows to 8 floats */
  assert_ok(net_from_text(ws, OP("GUpload", "y", "yg", "") OP("GScratchScale", "yg", "z", ""), &big));
  const float y[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t d8 = 8;
  assert_ok(dm_workspace_feed(ws, "y", DM_FLOAT, 1, &d8, y));
  assert_ok(dm_net_run(big));
  for (long r = 6; r <= 12; r++) /* op by op, then captured anew: right answers throughout */
    run_check(net, ws, 4, (float)r, sum);
  dm_net_run_counts(net, &c);
  assert_int_equal(c.captures, 2);
  dm_workspace_destroy(ws);
  scratch_free_all();
}

/* An op without the flag splits the net; the longer side is captured. */
static void test_unsafe_op_splits(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, OP("GUpload", "x", "xg", "") OP("GScale", "xg", "a", SCALE(2))
                              OP("GScale", "a", "a1", SCALE(1)) OP("GUnsafeScale", "a1", "b", SCALE(3))
                              OP("GScale", "b", "b1", SCALE(1)) OP("GScale", "b1", "b2", SCALE(1))
                              OP("GScale", "b2", "b3", SCALE(1)) OP("GAccum", "b3", "acc", "")
                              OP("GDownload", "acc", "out", ""));
  double sum[8] = {0};
  for (long r = 1; r <= 6; r++)
    run_check(net, ws, 4, (float)r, sum);
  char line[256];
  dm_net_graph_status(net, line, sizeof line);
  assert_non_null(strstr(line, "ops 4 to 7"));
  dm_run_counts c;
  dm_net_run_counts(net, &c);
  assert_int_equal(c.captures, 1);
  dm_workspace_destroy(ws);
}

/* A kernel that fails while recording: the run is done op by op instead, and graphs
 * stay off for the net with the reason; nothing the failed recording allocated leaks
 * (ASan) or is freed twice. */
static void test_capture_fails(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, OP("GUpload", "x", "xg", "") OP("GScale", "xg", "a", SCALE(2))
                              OP("GFailsInCapture", "a", "b", SCALE(3)) OP("Free", "a", "a", "")
                              OP("GAccum", "b", "acc", "") OP("GDownload", "acc", "out", ""));
  double sum[8] = {0};
  long live0 = fake_graphs_live;
  for (long r = 1; r <= 7; r++)
    run_check(net, ws, 4, (float)r, sum);
  dm_run_counts c;
  dm_net_run_counts(net, &c);
  assert_int_equal(c.captures, 0);
  assert_int_equal(c.graph_launches, 0);
  assert_int_equal(fake_graphs_live, live0); /* the recording was released */
  char line[512];
  dm_net_graph_status(net, line, sizeof line);
  assert_non_null(strstr(line, "capturing failed"));
  assert_non_null(strstr(line, "op 2 (GFailsInCapture)"));
  assert_non_null(strstr(line, "cannot be recorded"));
  dm_workspace_destroy(ws);
}

/* Profiled runs look at each op: no graph for them. */
static void test_profile_runs_op_by_op(void **unused) {
  (void)unused;
  dm_workspace *ws;
  dm_net *net = make(&ws, chain);
  assert_ok(dm_net_set_profile(net, 1));
  double sum[8] = {0};
  long calls0 = kernel_calls;
  for (long r = 1; r <= 6; r++)
    run_check(net, ws, 4, (float)r, sum);
  assert_int_equal(kernel_calls - calls0, 6 * 3);
  dm_workspace_destroy(ws);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_capture_then_replay), cmocka_unit_test(test_graphs_off),
      cmocka_unit_test(test_new_shape),           cmocka_unit_test(test_double_buffered_input),
      cmocka_unit_test(test_unsafe_op_splits),    cmocka_unit_test(test_capture_fails),
      cmocka_unit_test(test_blob_made_in_run_read_after),
      cmocka_unit_test(test_private_memory_epoch),
      cmocka_unit_test(test_profile_runs_op_by_op),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
