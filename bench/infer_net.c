/* infer_net.c: times CPU inference of one model through the public API alone
 * (<demitasse.h>, the shared library), for bench/cpu_infer.sh. It builds the inference
 * net as `demitasse run` does by default (dm_workspace_create_infer_net, FP32, each
 * test-mode SpatialBN folded into its Conv), feeds a uniform random input of the given
 * shape (the batch is its first dimension; with --tokens V, a language model's INT32
 * token ids uniform in [0, V)), runs the net WARMUP times untimed, then
 * ITERS times, each timed alone with CLOCK_MONOTONIC, and prints one line:
 *
 *     infer_net median_ms M min_ms A max_ms B batch N iters I threads T
 *
 * M is the median of the ITERS runs in milliseconds per batch (not per image).
 *
 * usage: infer_net --net NET [--init INIT] --shape N,C,H,W [--input data] [--iters 20]
 *                  [--warmup 3] [--threads T] [--engine NAME] [--tokens V]
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <demitasse.h>

#define MAX_DIMS 8

typedef struct bench_opts {
  const char *net, *init, *input, *engine;
  int64_t dims[MAX_DIMS]; /* the input's shape, batch first */
  int ndim;
  long iters, warmup;
  int threads;
  long tokens; /* > 0: the input is INT32 token ids in [0, tokens) */
} bench_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: infer_net --net NET [--init INIT] --shape N,C,H,W [--input NAME]\n"
          "                 [--iters N] [--warmup N] [--threads T] [--engine NAME]\n"
          "                 [--tokens V]\n\n"
          "Times the FP32 inference net `demitasse run` builds (BN folded into Conv) on a\n"
          "random input and prints \"infer_net median_ms M min_ms A max_ms B batch N iters I\n"
          "threads T\" (milliseconds per batch).\n\n"
          "  -n, --net FILE      the predict net (.pb or .pbtxt; required)\n"
          "  -i, --init FILE     its init net, run once first (the weights)\n"
          "  -s, --shape DIMS    the input's shape, comma-separated, batch first (required)\n"
          "  -I, --input NAME    the input blob (default data)\n"
          "  -N, --iters N       timed runs (default 20)\n"
          "  -w, --warmup N      untimed runs before them (default 3)\n"
          "  -t, --threads T     CPU threads (default: the cores this process may use)\n"
          "  -e, --engine NAME   DNNL or REFERENCE (dm_workspace_set_engine; default DNNL)\n"
          "  -T, --tokens V      the input is INT32 token ids in [0, V) (a language model)\n"
          "  -h, --help          this text\n");
}

static int parse_long(const char *s, long lo, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo)
    return -1;
  *out = v;
  return 0;
}

static int parse_shape(const char *s, bench_opts *o) {
  o->ndim = 0;
  for (const char *p = s; *p;) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno || end == p || v < 1 || o->ndim == MAX_DIMS || (*end && *end != ','))
      return -1;
    o->dims[o->ndim++] = (int64_t)v;
    p = *end ? end + 1 : end;
  }
  return o->ndim > 0 ? 0 : -1;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Uniform in [-1, 1) from a 64-bit LCG (Knuth's MMIX constants), seeded the same each
 * run: the input's values do not change the work of a dense net. With `tokens` > 0,
 * INT32 ids in [0, tokens) from the same stream instead (x is then an int32_t array). */
static void fill_random(void *x, int64_t n, long tokens) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < n; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(state >> 40) / (double)(1ull << 24); /* [0, 1) */
    if (tokens > 0)
      ((int32_t *)x)[i] = (int32_t)(u * (double)tokens);
    else
      ((float *)x)[i] = (float)(u * 2.0 - 1.0);
  }
}

static int parse_args(int argc, char **argv, bench_opts *o) {
  static const struct option longs[] = {
      {"net", required_argument, NULL, 'n'},    {"init", required_argument, NULL, 'i'},
      {"shape", required_argument, NULL, 's'},  {"input", required_argument, NULL, 'I'},
      {"iters", required_argument, NULL, 'N'},  {"warmup", required_argument, NULL, 'w'},
      {"threads", required_argument, NULL, 't'}, {"engine", required_argument, NULL, 'e'},
      {"tokens", required_argument, NULL, 'T'}, {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c;
  long v;
  while ((c = getopt_long(argc, argv, "n:i:s:I:N:w:t:e:T:h", longs, NULL)) != -1) {
    switch (c) {
    case 'n': o->net = optarg; break;
    case 'i': o->init = optarg; break;
    case 'I': o->input = optarg; break;
    case 'e': o->engine = optarg; break;
    case 's':
      if (parse_shape(optarg, o)) {
        fprintf(stderr, "infer_net: --shape wants positive dims like 8,3,224,224, not '%s'\n",
                optarg);
        return 2;
      }
      break;
    case 'N':
    case 'w':
      if (parse_long(optarg, c == 'N' ? 1 : 0, &v)) {
        fprintf(stderr, "infer_net: --%s wants a count, not '%s'\n",
                c == 'N' ? "iters" : "warmup", optarg);
        return 2;
      }
      *(c == 'N' ? &o->iters : &o->warmup) = v;
      break;
    case 't':
      if (parse_long(optarg, 1, &v) || v > DM_MAX_THREADS) {
        fprintf(stderr, "infer_net: --threads wants 1..%d, not '%s'\n", DM_MAX_THREADS, optarg);
        return 2;
      }
      o->threads = (int)v;
      break;
    case 'T':
      if (parse_long(optarg, 1, &v) || v > INT32_MAX) {
        fprintf(stderr, "infer_net: --tokens wants a vocabulary size, not '%s'\n", optarg);
        return 2;
      }
      o->tokens = v;
      break;
    case 'h': usage(stdout); return -1;
    default: usage(stderr); return 2;
    }
  }
  if (optind != argc || !o->net || !o->ndim) {
    usage(stderr);
    return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  bench_opts o = {.input = "data", .iters = 20, .warmup = 3};
  int rc = parse_args(argc, argv, &o);
  if (rc)
    return rc < 0 ? 0 : rc;

  int rv = 1;
  dm_status s = DM_OK;
  const char *what = "";
  dm_workspace *ws = NULL;
  dm_net *net = NULL;
  void *x = NULL;       /* (dims): the input, FLOAT or (--tokens) INT32 */
  double *times = NULL; /* (iters): ms per run */

  int threads = o.threads ? o.threads : dm_num_threads_default();
  what = "dm_set_num_threads";
  if ((s = dm_set_num_threads(threads)) != DM_OK)
    goto cleanup;
  what = "dm_workspace_create";
  if ((s = dm_workspace_create(&ws)) != DM_OK)
    goto cleanup;
  what = "dm_workspace_set_engine"; /* --engine dnnl|reference; NULL: the default */
  if ((s = dm_workspace_set_engine(ws, o.engine)) != DM_OK)
    goto cleanup;
  if (o.init) {
    what = o.init;
    if ((s = dm_workspace_run_net_file(ws, o.init)) != DM_OK)
      goto cleanup;
  }
  dm_infer_options io;
  dm_infer_options_init(&io);
  io.precision = DM_PRECISION_FP32;
  io.fuse = 1; /* as `demitasse run` without --no-fuse */
  const char *data_blobs[] = {o.input};
  io.data_blobs = data_blobs;
  io.n_data_blobs = 1;
  what = o.net;
  if ((s = dm_workspace_create_infer_net(ws, o.net, &io, &net)) != DM_OK)
    goto cleanup;

  int64_t numel = 1;
  for (int i = 0; i < o.ndim; i++)
    numel *= o.dims[i];
  x = malloc((size_t)numel * (o.tokens ? sizeof(int32_t) : sizeof(float)));
  times = malloc((size_t)o.iters * sizeof *times);
  if (!x || !times) {
    fprintf(stderr, "infer_net: out of memory for the input (%lld floats)\n", (long long)numel);
    goto cleanup;
  }
  fill_random(x, numel, o.tokens);
  what = "feeding the input";
  if ((s = dm_workspace_feed(ws, o.input, o.tokens ? DM_INT32 : DM_FLOAT, o.ndim, o.dims,
                             x)) != DM_OK)
    goto cleanup;

  what = "dm_net_run";
  for (long i = 0; i < o.warmup; i++)
    if ((s = dm_net_run(net)) != DM_OK)
      goto cleanup;
  for (long i = 0; i < o.iters; i++) {
    double t0 = now_ms();
    if ((s = dm_net_run(net)) != DM_OK)
      goto cleanup;
    times[i] = now_ms() - t0;
  }
  qsort(times, (size_t)o.iters, sizeof *times, cmp_double);
  double median = o.iters % 2 ? times[o.iters / 2]
                              : 0.5 * (times[o.iters / 2 - 1] + times[o.iters / 2]);
  printf("infer_net median_ms %.4f min_ms %.4f max_ms %.4f batch %lld iters %ld threads %d\n",
         median, times[0], times[o.iters - 1], (long long)o.dims[0], o.iters,
         dm_get_num_threads());
  rv = 0;

cleanup:
  if (s != DM_OK)
    fprintf(stderr, "infer_net: %s: %s: %s\n", what, dm_status_name(s), dm_last_error());
  free(times);
  free(x);
  dm_workspace_destroy(ws);
  return rv;
}
