/* gemm.c: the one FP32 GEMM every CPU kernel calls, and the FP16/BF16 (FP32-accumulate)
 * GEMM built on it.
 *
 * With oneDNN (DM_HAVE_DNNL) the product runs in dnnl_sgemm, which picks its kernel from
 * the CPU's features at run time (AVX-512 on a Sapphire Rapids). Without it, CBLAS. Why
 * not always CBLAS: Debian's OpenBLAS 0.3.21 picks its kernels from a table of known
 * CPUs and runs its SSE3 "Prescott" kernels on CPUs newer than the table, 10x slower at
 * 2048^3 (bench/results/2026-12-01-bench-gemm.md). Both libraries are row-major here and see the same checked
 * arguments, so the two builds differ only in rounding order.
 */
#include "gemm.h"

#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dm_config.h"
#include "operators/common.h"

#if DM_HAVE_DNNL
#include "operators/dnnl/dnnl_common.h" /* dnnl.h, dm_dnnl_isa_name */
#endif

/* The same limit with and without oneDNN (dnnl_sgemm takes int64, CBLAS int), so a net
 * that runs in one build runs in the other. */
static dm_status check_dims(int64_t M, int64_t N, int64_t K) {
  if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return dm_error(DM_ERR_LIMIT, "GEMM of %lld x %lld x %lld exceeds the BLAS index range",
                    (long long)M, (long long)N, (long long)K);
  return DM_OK;
}

static dm_status check_ld(const char *name, int64_t ld, int64_t cols) {
  if (ld < (cols > 1 ? cols : 1) || ld > INT_MAX)
    return dm_error(DM_ERR_INVALID, "GEMM leading dimension %s = %lld, needs %lld..%d", name,
                    (long long)ld, (long long)(cols > 1 ? cols : 1), INT_MAX);
  return DM_OK;
}

dm_status dm_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc) {
  DM_TRY(check_dims(M, N, K));
  DM_TRY(check_ld("lda", lda, trans_a ? M : K));
  DM_TRY(check_ld("ldb", ldb, trans_b ? K : N));
  DM_TRY(check_ld("ldc", ldc, N));
  if (M == 0 || N == 0)
    return DM_OK;
  if (K == 0 || alpha == 0.0f) { /* no product: C = beta * C (beta 0 clears, even NaN) */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++)
        C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return DM_OK;
  }
#if DM_HAVE_DNNL
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                                lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success)
    return dm_error(st == dnnl_out_of_memory ? DM_ERR_NOMEM : DM_ERR_INVALID,
                    "dnnl_sgemm(%c%c, %lld x %lld x %lld) failed with oneDNN status %d",
                    trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', (long long)M, (long long)N,
                    (long long)K, (int)st);
#else
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda,
              B, (int)ldb, beta, C, (int)ldc);
#endif
  return DM_OK;
}

dm_status dm_gemm_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, const float *B, float beta, float *C) {
  int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  return dm_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda > 1 ? lda : 1, B,
                  ldb > 1 ? ldb : 1, beta, C, N > 1 ? N : 1);
}

dm_status dm_gemm_r16(dm_dtype t, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                      const uint16_t *A, const uint16_t *B, const void *bias,
                      dm_dtype bias_dtype, uint16_t *C) {
  DM_TRY(check_dims(M, N, K));
  if (M == 0 || N == 0)
    return DM_OK;
  /* Widen the operands (exact) into one scratch block: A (M*K), B (K*N), C (M*N). */
  size_t na = (size_t)M * (size_t)K, nb = (size_t)K * (size_t)N, nc = (size_t)M * (size_t)N;
  float *buf = malloc((na + nb + nc) * sizeof *buf);
  if (!buf)
    return DM_NOMEM("FP32 scratch for a 16-bit GEMM");
  float *a = buf, *b = buf + na, *c = buf + na + nb;
  dm_widen(t, A, a, na);
  dm_widen(t, B, b, nb);
  float beta = 0.0f;
  if (bias) { /* start C at the bias so sgemm adds the product to it in FP32 */
    for (int64_t i = 0; i < M; i++)
      dm_load_f32(bias_dtype, bias, 0, N, c + i * N);
    beta = 1.0f;
  }
  dm_status s = dm_gemm_f32(trans_a, trans_b, M, N, K, 1.0f, a, b, beta, c);
  if (s == DM_OK)
    dm_narrow(t, c, C, nc);
  free(buf);
  return s;
}

const char *dm_gemm_engine(void) {
#if DM_HAVE_DNNL
  return "oneDNN dnnl_sgemm";
#else
  return "CBLAS cblas_sgemm";
#endif
}

void dm_gemm_engine_describe(char *buf, size_t n) {
#if DM_HAVE_DNNL
  const dnnl_version_t *v = dnnl_version();
  snprintf(buf, n, "oneDNN %d.%d.%d (%s), ISA %s (0x%x), CPU runtime %s", v->major, v->minor,
           v->patch, v->hash ? v->hash : "?", dm_dnnl_isa_name(),
           (unsigned)dnnl_get_effective_cpu_isa(),
           v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP"
           : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                : "other");
#else
  snprintf(buf, n, "no oneDNN in this build (GEMMs through CBLAS)");
#endif
}
