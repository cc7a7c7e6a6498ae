/* allreduce_ranks.c: the Allreduce op and the C API's broadcast and mean, on every rank
 * of an `mpirun -np N` job (tests/dist/meson.build runs it with 2 and 3 ranks).
 *
 * Every rank fills its blobs from a formula of (rank, index), so each rank computes what
 * every other rank holds and the expected result independently, in double, rounded once
 * the way the wire precision rounds it. With two ranks an FP32 or FP16 sum is a single
 * correctly rounded addition, so the results must be bit-identical to the expectation;
 * with more, within the rounding of N-1 additions. Checked: sums and means of FLOAT,
 * FLOAT16 and BFLOAT16 blobs, FP32 blobs summed on an FP16 wire, buckets small enough to
 * pack several blobs per collective and to send a blob alone, a blocked-free empty blob,
 * the results identical on every rank; an FP16 mean whose sum would overflow finite, as
 * one process's gradient is; dm_workspace_broadcast of named and of all blobs,
 * and its refusal (on every rank, naming the blob) when one rank's blob has another
 * shape; dm_dist_mean; the op's errors.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse.h"

static int rank, size, failures;

#define CHECK(cond, ...)                                                                    \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      failures++;                                                                           \
      fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);                        \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fprintf(stderr, " [%s]\n", dm_last_error());                                          \
    }                                                                                       \
  } while (0)

/* Rank r's value at index i: varied magnitudes and signs, not exactly representable sums. */
static double value(int r, int64_t i) {
  return sin(0.37 * (double)i + 1.3 * r) * (1.0 + (double)((i * 7 + r) % 5)) / 3.0;
}

static uint16_t f2h(float f) { /* round to nearest even, no subnormal shortcuts */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  float a = fabsf(f);
  if (a >= 65520.0f)
    return (uint16_t)(sign | 0x7c00u);
  if (a < 6.103515625e-05f) { /* subnormal: multiples of 2^-24 */
    float q = nearbyintf(a * 16777216.0f);
    return (uint16_t)(sign | (uint32_t)q);
  }
  int e;
  float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
  float q = nearbyintf(m * 2048.0f); /* 11 significant bits */
  if (q == 2048.0f) {
    q = 1024.0f;
    e++;
  }
  return (uint16_t)(sign | ((uint32_t)(e + 14) << 10) | ((uint32_t)q - 1024u));
}

static float h2f(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m + 1024), e - 25);
  return (h & 0x8000u) ? -v : v;
}

static uint16_t f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

static float bf2f(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* Rank r's blob as fed: the value rounded to the dtype. */
static double fed(dm_dtype t, int r, int64_t i) {
  double v = value(r, i);
  if (t == DM_FLOAT16)
    return h2f(f2h((float)v));
  if (t == DM_BFLOAT16)
    return bf2f(f2bf((float)v));
  return (float)v;
}

/* v rounded to the wire precision. */
static double on_wire(dm_dtype wire, double v) {
  if (wire == DM_FLOAT16)
    return h2f(f2h((float)v));
  if (wire == DM_BFLOAT16)
    return bf2f(f2bf((float)v));
  return (float)v;
}

/* The expected result at i: the ranks' fed values times scale (the mean's 1/N applied to
 * each rank's value first, as NCCL's average) rounded to the wire precision, summed in
 * rank order in it (each partial sum rounded to it), converted back to dtype t. */
static double expected(dm_dtype t, dm_dtype wire, int64_t i, double scale) {
  double acc = 0;
  for (int r = 0; r < size; r++) {
    double v = on_wire(wire, (float)(fed(t, r, i) * scale));
    acc = r == 0 ? v : acc + v;
    if (wire == DM_FLOAT16)
      acc = h2f(f2h((float)acc));
    else if (wire == DM_BFLOAT16)
      acc = bf2f(f2bf((float)acc));
    else
      acc = (float)acc;
  }
  double out = (float)acc;
  if (t == DM_FLOAT16)
    out = h2f(f2h((float)out));
  if (t == DM_BFLOAT16)
    out = bf2f(f2bf((float)out));
  return out;
}

static void feed(dm_workspace *ws, const char *name, dm_dtype t, int64_t n) {
  void *buf = malloc((size_t)(n ? n : 1) * 4);
  for (int64_t i = 0; i < n; i++) {
    double v = fed(t, rank, i);
    if (t == DM_FLOAT)
      ((float *)buf)[i] = (float)v;
    else if (t == DM_FLOAT16)
      ((uint16_t *)buf)[i] = f2h((float)v);
    else
      ((uint16_t *)buf)[i] = f2bf((float)v);
  }
  CHECK(dm_workspace_feed(ws, name, t, 1, &n, buf) == DM_OK, "feeding %s", name);
  free(buf);
}

static double got(const dm_tensor *t, int64_t i) {
  const void *d = dm_tensor_data(t);
  switch (dm_tensor_dtype(t)) {
  case DM_FLOAT16: return h2f(((const uint16_t *)d)[i]);
  case DM_BFLOAT16: return bf2f(((const uint16_t *)d)[i]);
  default: return ((const float *)d)[i];
  }
}

static dm_status run_text(dm_workspace *ws, const char *text) {
  dm_net *net = NULL;
  dm_status s = dm_workspace_create_net_bytes(ws, text, strlen(text), 1, &net);
  return s == DM_OK ? dm_net_run(net) : s;
}

/* The blobs of one case: name, dtype, count. */
typedef struct blob {
  const char *name;
  dm_dtype t;
  int64_t n;
} blob;

static void check_case(const char *what, const blob *b, int nb, const char *args,
                       dm_dtype wire_override, int average) {
  dm_workspace *ws;
  CHECK(dm_workspace_create(&ws) == DM_OK, "workspace");
  char net[2048];
  int len = snprintf(net, sizeof net, "name: 'ar' op { type: 'Allreduce'");
  for (int k = 0; k < nb; k++) {
    feed(ws, b[k].name, b[k].t, b[k].n);
    len += snprintf(net + len, sizeof net - (size_t)len, " input: '%s' output: '%s'",
                    b[k].name, b[k].name);
  }
  snprintf(net + len, sizeof net - (size_t)len, " %s }", args);
  CHECK(run_text(ws, net) == DM_OK, "%s: running", what);
  double scale = average ? 1.0 / size : 1.0;
  for (int k = 0; k < nb; k++) {
    const dm_tensor *t = NULL;
    CHECK(dm_workspace_fetch(ws, b[k].name, &t) == DM_OK, "%s: fetching %s", what, b[k].name);
    if (!t)
      continue;
    CHECK(dm_tensor_dtype(t) == b[k].t && dm_tensor_numel(t) == b[k].n,
          "%s: %s changed dtype or size", what, b[k].name);
    dm_dtype wire = wire_override ? wire_override : b[k].t;
    /* 2 ranks: one rounded addition, exact; more: N-1 roundings of the wire type. */
    double u = wire == DM_FLOAT16 ? 0x1p-11 : wire == DM_BFLOAT16 ? 0x1p-8 : 0x1p-24;
    for (int64_t i = 0; i < b[k].n; i++) {
      double e = expected(b[k].t, wire, i, scale), g = got(t, i);
      double tol = size == 2 ? 0 : 4.0 * size * u * (fabs(e) + 1.0);
      if (!(fabs(g - e) <= tol)) {
        CHECK(0, "%s: %s[%lld] = %.9g, expected %.9g", what, b[k].name, (long long)i, g, e);
        break;
      }
    }
  }
  /* The same result on every rank: the sum of the ranks' results is size times ours. */
  for (int k = 0; k < nb; k++) {
    const dm_tensor *t = NULL;
    if (dm_workspace_fetch(ws, b[k].name, &t) != DM_OK || b[k].n == 0)
      continue;
    double mine = 0;
    for (int64_t i = 0; i < b[k].n; i++)
      mine += got(t, i) * (double)(i + 1);
    double mean = mine;
    CHECK(dm_dist_mean(&mean, 1) == DM_OK, "dm_dist_mean");
    CHECK(mean == mine, "%s: %s differs between ranks (%.17g here, mean %.17g)", what,
          b[k].name, mine, mean);
  }
  dm_workspace_destroy(ws);
}

static void test_allreduce(void) {
  const blob f32[] = {{"a", DM_FLOAT, 1000}, {"b", DM_FLOAT, 3}, {"c", DM_FLOAT, 1}};
  check_case("FP32 sum, one bucket", f32, 3, "", 0, 0);
  check_case("FP32 mean", f32, 3, "arg { name: 'average' i: 1 }", 0, 1);
  /* 16-byte buckets: 'b' and 'c' (16 bytes) share one, 'a' goes alone */
  check_case("FP32, small buckets", f32, 3, "arg { name: 'bucket_bytes' i: 16 }", 0, 0);
  check_case("FP32 on an FP16 wire", f32, 3, "arg { name: 'wire_dtype' s: 'FLOAT16' }",
             DM_FLOAT16, 0);
  const blob mixed[] = {{"h", DM_FLOAT16, 777}, {"g", DM_FLOAT16, 5}, {"f", DM_FLOAT, 9},
                        {"bf", DM_BFLOAT16, 40}, {"e", DM_FLOAT, 0}};
  check_case("FP16, FP32, BF16 and empty blobs, mean", mixed, 5,
             "arg { name: 'average' i: 1 }", 0, 1);
  check_case("FP16 on an FP32 wire", mixed, 2, "arg { name: 'wire_dtype' s: 'FLOAT' }",
             DM_FLOAT, 0);
}

/* The mean of FP16 gradients every rank holds alike, some so large that their sum over
 * the ranks overflows FP16 (what one process holds is finite): finite on every rank, as
 * one process's, and equal to it (2^k ranks: exactly; others within the rounding of the
 * 1/N and the N-1 additions). A sum taken before the division gave inf here, so N ranks
 * skipped steps that one process applies. */
static void test_fp16_mean_no_overflow(void) {
  static const float g[] = {40000.0f, -40000.0f, 65504.0f / 2, 60000.0f, 1.0f, -0.375f,
                            6.1035156e-05f, 1000.5f};
  const int64_t n = (int64_t)(sizeof g / sizeof g[0]);
  uint16_t h[sizeof g / sizeof g[0]];
  for (int64_t i = 0; i < n; i++)
    h[i] = f2h(g[i]);
  static const char *const wires[] = {"", "arg { name: 'wire_dtype' s: 'FLOAT16' }"};
  for (int w = 0; w < 2; w++) {
    dm_workspace *ws;
    CHECK(dm_workspace_create(&ws) == DM_OK, "workspace");
    CHECK(dm_workspace_feed(ws, "g16", DM_FLOAT16, 1, &n, h) == DM_OK, "feeding g16");
    char net[256];
    snprintf(net, sizeof net, "op { type: 'Allreduce' input: 'g16' output: 'g16' "
             "arg { name: 'average' i: 1 } %s }", wires[w]);
    CHECK(run_text(ws, net) == DM_OK, "FP16 mean (%s)", w ? "FP16 wire" : "own dtype");
    const dm_tensor *t = NULL;
    CHECK(dm_workspace_fetch(ws, "g16", &t) == DM_OK, "fetching g16");
    int pow2 = (size & (size - 1)) == 0;
    for (int64_t i = 0; t && i < n; i++) {
      double one = h2f(h[i]), v = got(t, i);
      double tol = pow2 ? 0 : 4.0 * size * 0x1p-11 * fabs(one);
      CHECK(isfinite(v) && fabs(v - one) <= tol,
            "FP16 mean of %g held by all %d ranks is %g (one process: %g)", one, size, v, one);
    }
    dm_workspace_destroy(ws);
  }
}

static void test_errors(void) {
  dm_workspace *ws;
  CHECK(dm_workspace_create(&ws) == DM_OK, "workspace");
  feed(ws, "x", DM_FLOAT, 4);
  CHECK(run_text(ws, "op { type: 'Allreduce' input: 'x' output: 'y' }") == DM_ERR_INVALID &&
            strstr(dm_last_error(), "in place"),
        "an out-of-place Allreduce is refused");
  CHECK(run_text(ws, "op { type: 'Allreduce' input: 'x' output: 'x' "
                     "arg { name: 'wire_dtype' s: 'INT8' } }") == DM_ERR_INVALID &&
            strstr(dm_last_error(), "wire_dtype"),
        "a bad wire_dtype is refused");
  CHECK(run_text(ws, "op { type: 'Allreduce' input: 'x' output: 'x' "
                     "arg { name: 'bucket_bytes' i: 0 } }") == DM_ERR_INVALID,
        "bucket_bytes 0 is refused");
  dm_workspace_destroy(ws);
}

static void test_broadcast(void) {
  dm_workspace *ws;
  CHECK(dm_workspace_create(&ws) == DM_OK, "workspace");
  /* every rank feeds its own values; after the broadcast all hold root 1's (or 0's) */
  int root = size > 1 ? 1 : 0;
  feed(ws, "w", DM_FLOAT, 50);
  feed(ws, "v", DM_FLOAT16, 7);
  const char *names[] = {"w"};
  CHECK(dm_workspace_broadcast(ws, names, 1, root) == DM_OK, "broadcast of w");
  const dm_tensor *t = NULL;
  dm_workspace_fetch(ws, "w", &t);
  for (int64_t i = 0; t && i < 50; i++)
    if (got(t, i) != fed(DM_FLOAT, root, i)) {
      CHECK(0, "w[%lld] = %g, root's is %g", (long long)i, got(t, i), fed(DM_FLOAT, root, i));
      break;
    }
  dm_workspace_fetch(ws, "v", &t); /* not named: still ours */
  CHECK(t && got(t, 3) == fed(DM_FLOAT16, rank, 3), "v untouched by a named broadcast");
  CHECK(dm_workspace_broadcast(ws, NULL, 0, 0) == DM_OK, "broadcast of everything");
  dm_workspace_fetch(ws, "v", &t);
  CHECK(t && got(t, 3) == fed(DM_FLOAT16, 0, 3), "v is rank 0's after broadcasting all");
  /* one rank's blob of another shape: every rank fails, naming it */
  feed(ws, "odd", DM_FLOAT, rank == size - 1 ? 6 : 5);
  const char *odd[] = {"odd"};
  CHECK(dm_workspace_broadcast(ws, odd, 1, 0) == DM_ERR_SHAPE && strstr(dm_last_error(), "odd"),
        "a shape mismatch fails on every rank");
  CHECK(dm_workspace_broadcast(ws, odd, 1, size) == DM_ERR_INVALID, "a root past the ranks");
  dm_workspace_destroy(ws);
}

int main(void) {
  if (dm_dist_init(&rank, &size) != DM_OK) {
    fprintf(stderr, "dm_dist_init: %s\n", dm_last_error());
    return 1;
  }
  CHECK(dm_dist_rank() == rank && dm_dist_size() == size, "rank and size");
  test_allreduce();
  test_fp16_mean_no_overflow();
  test_errors();
  test_broadcast();
  double v[2] = {rank, 1.0};
  CHECK(dm_dist_mean(v, 2) == DM_OK && v[0] == (size - 1) / 2.0 && v[1] == 1.0, "dm_dist_mean");
  printf("rank %d of %d: %d failure(s)\n", rank, size, failures);
  dm_dist_finalize();
  return failures ? 1 : 0;
}
