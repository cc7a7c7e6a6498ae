/* gemm.c: FP32 GEMM through CBLAS, and the FP16/BF16 (FP32-accumulate) GEMM built on it. */
#include "gemm.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "operators/common.h"

static dm_status check_dims(int64_t M, int64_t N, int64_t K) {
  if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return dm_error(DM_ERR_LIMIT, "GEMM of %lld x %lld x %lld exceeds the BLAS index range",
                    (long long)M, (long long)N, (long long)K);
  return DM_OK;
}

dm_status dm_gemm_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, const float *B, float beta, float *C) {
  DM_TRY(check_dims(M, N, K));
  if (M == 0 || N == 0)
    return DM_OK;
  if (K == 0) { /* empty sum: C = beta * C (beta 0 clears, even NaN) */
    for (int64_t i = 0; i < M * N; i++)
      C[i] = beta == 0.0f ? 0.0f : beta * C[i];
    return DM_OK;
  }
  int lda = (int)(trans_a ? M : K), ldb = (int)(trans_b ? K : N);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, lda, B,
              ldb, beta, C, (int)N);
  return DM_OK;
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
