/* gemm.c (bench): a square FP32 GEMM through Demitasse's path (dm_sgemm: oneDNN where
 * built in) beside cblas_sgemm of the BLAS it links, in one process, rounds interleaved,
 * medians in GFLOP/s; and the CPU's FP32 peak two ways:
 *   nominal:  cores x GHz (cpu MHz in /proc/cpuinfo) x 2 FMA units x lanes x 2 flops,
 *             lanes 16 with AVX-512, 8 with AVX2;
 *   measured: a loop of independent FMAs on every thread (12 accumulators, more than
 *             latency x units, so the FMA units never wait), the same lanes, timed in
 *             every round beside the GEMMs (on a shared machine both slow down alike).
 * ours/peak is printed against both; against the measured one as the median of the
 * rounds' ratios. Not a test: figures depend on the machine.
 *
 * usage: bench_gemm [N [ROUNDS [THREADS]]]   (defaults 2048, 7, the cores available)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demitasse.h"
#include "dm_config.h"
#include "operators/math/gemm.h"

#if DM_HAVE_OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define FMA_ACC 12
#if defined(__x86_64__)
/* flops of one thread's loop: iters x FMA_ACC FMAs x lanes x 2 */
__attribute__((target("avx512f"))) static float fma_loop_512(long iters) {
  __m512 acc[FMA_ACC], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int j = 0; j < FMA_ACC; j++)
    acc[j] = _mm512_set1_ps((float)j);
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12 /* the accumulators must stay in registers */
    for (int j = 0; j < FMA_ACC; j++)
      acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  }
  float s = 0;
  for (int j = 0; j < FMA_ACC; j++)
    s += _mm512_reduce_add_ps(acc[j]);
  return s;
}
__attribute__((target("avx2,fma"))) static float fma_loop_256(long iters) {
  __m256 acc[FMA_ACC], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int j = 0; j < FMA_ACC; j++)
    acc[j] = _mm256_set1_ps((float)j);
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
    for (int j = 0; j < FMA_ACC; j++)
      acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  }
  float out[8], s = 0;
  for (int j = 0; j < FMA_ACC; j++) {
    _mm256_storeu_ps(out, acc[j]);
    for (int k = 0; k < 8; k++)
      s += out[k];
  }
  return s;
}
#endif

/* GFLOP/s of the FMA loop on `threads` threads (0 when this CPU has neither ISA). */
static double fma_peak(int threads, int *lanes) {
  *lanes = 0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  *lanes = __builtin_cpu_supports("avx512f")                                   ? 16
           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8
                                                                              : 0;
  if (!*lanes)
    return 0;
  const long iters = 10000000;
  double best = 0;
  for (int r = 0; r < 2; r++) {
    volatile float sink = 0;
    double t0 = now_s();
#if DM_HAVE_OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
      float s = *lanes == 16 ? fma_loop_512(iters) : fma_loop_256(iters);
#if DM_HAVE_OPENMP
#pragma omp atomic
#endif
      sink += s;
    }
    double dt = now_s() - t0;
    (void)sink; /* read once: the loops' results are kept, so they are not optimized away */
#if DM_HAVE_OPENMP
    double n = threads;
#else
    double n = 1;
#endif
    double g = n * (double)iters * FMA_ACC * *lanes * 2 / dt / 1e9;
    best = g > best ? g : best;
  }
  return best;
#else
  (void)threads;
  return 0;
#endif
}

/* The first "cpu MHz" of /proc/cpuinfo, 0 if none. */
static double cpu_mhz(char *model, size_t n) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  double mhz = 0;
  char line[512];
  model[0] = '\0';
  if (!f)
    return 0;
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon)
      continue;
    if (!mhz && strncmp(line, "cpu MHz", 7) == 0)
      mhz = atof(colon + 1);
    if (!model[0] && strncmp(line, "model name", 10) == 0) {
      snprintf(model, n, "%s", colon + 2);
      model[strcspn(model, "\n")] = '\0';
    }
  }
  fclose(f);
  return mhz;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2048;
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  int threads = argc > 3 ? atoi(argv[3]) : dm_num_threads_default();
  if (n < 1 || n > 16384 || rounds < 1 || rounds > 1000 || dm_set_num_threads(threads) != DM_OK) {
    fprintf(stderr, "usage: bench_gemm [N (1..16384) [ROUNDS [THREADS]]]\n");
    return 2;
  }
  size_t nn = (size_t)n * (size_t)n;
  float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
  double *ours = malloc((size_t)rounds * sizeof *ours), *blas = malloc((size_t)rounds * sizeof *blas);
  double *peak = malloc((size_t)rounds * sizeof *peak), *frac = malloc((size_t)rounds * sizeof *frac);
  if (!a || !b || !c || !ours || !blas || !peak || !frac) {
    fprintf(stderr, "bench_gemm: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < nn; i++) {
    a[i] = (float)(i % 7) * 0.25f - 0.75f;
    b[i] = (float)(i % 5) * 0.5f - 1.0f;
    c[i] = 0;
  }
  const double flop = 2.0 * (double)n * (double)n * (double)n;
  int rc = 0;
  /* one untimed call each first (thread pools, oneDNN's JIT, page faults) */
  for (int r = -1; r < rounds && !rc; r++) {
    double t0 = now_s();
    if (dm_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) != DM_OK) {
      fprintf(stderr, "bench_gemm: %s\n", dm_last_error());
      rc = 1;
    }
    double t1 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a,
                (int)n, b, (int)n, 0.0f, c, (int)n);
    double t2 = now_s();
    int lanes_r;
    double pk = fma_peak(threads, &lanes_r); /* in the same round: a busy machine slows both */
    if (r >= 0) {
      ours[r] = flop / (t1 - t0) / 1e9;
      blas[r] = flop / (t2 - t1) / 1e9;
      peak[r] = pk;
      frac[r] = pk > 0 ? ours[r] / pk : 0;
    }
  }
  if (!rc) {
    char model[256], isa[256];
    double mhz = cpu_mhz(model, sizeof model);
    int lanes;
    (void)fma_peak(1, &lanes);
    double measured = median(peak, rounds), mf = median(frac, rounds);
    double nominal = threads * mhz / 1000.0 * 2 * lanes * 2;
    double mo = median(ours, rounds), mb = median(blas, rounds);
    dm_gemm_engine_describe(isa, sizeof isa);
    printf("CPU: %s, %d threads, cpu MHz %.0f\n", model, threads, mhz);
    printf("ours: %s (%s)\n", dm_gemm_engine(), isa);
    printf("SGEMM %ldx%ldx%ld, %d interleaved rounds, medians:\n", n, n, n, rounds);
    printf("  ours (dm_sgemm)   %8.1f GFLOP/s\n", mo);
    printf("  cblas_sgemm       %8.1f GFLOP/s   (ours/cblas %.2f)\n", mb, mo / mb);
    printf("FP32 peak, nominal  %8.1f GFLOP/s   (%d cores x %.2f GHz x 2 FMA units x %d lanes "
           "x 2)   ours/peak %.2f\n",
           nominal, threads, mhz / 1000.0, lanes, nominal > 0 ? mo / nominal : 0.0);
    printf("FP32 peak, measured %8.1f GFLOP/s   (FMA loop on %d threads, each round)   "
           "ours/peak %.2f (median of the rounds' ratios)\n",
           measured, threads, mf);
  }
  free(a);
  free(b);
  free(c);
  free(ours);
  free(blas);
  free(peak);
  free(frac);
  return rc;
}
