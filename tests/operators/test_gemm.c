/* test_gemm.c: the GEMM every CPU kernel calls (dm_sgemm, dm_gemm_f32, dm_gemm_r16)
 * against a double-precision loop, and `demitasse info`'s BLAS warning decision.
 *
 * The same test runs whether dm_sgemm goes through oneDNN or CBLAS (demitasse info says
 * which), so both builds are held to one contract.
 *
 * Tolerance, from the arithmetic: C = alpha sum_k a_ik b_kj + beta c_ij in FP32, in any
 * summation order and with or without FMA, errs by at most (K + 2) u32 S, where
 * S = |alpha| sum_k |a_ik b_kj| + |beta c_ij| (the K products and sums, the scaling by
 * alpha and the beta term; u32 = 2^-24). The 16-bit GEMM adds one rounding to FP16/BF16:
 * u16 |ref| plus half the smallest subnormal. Values are drawn, then rounded to the
 * stored type, and the reference uses exactly the stored values.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "op_test_util.h"
#include "operators/math/gemm.h"

#define SENTINEL 12345.0f /* in the padding of C: must survive every call */

/* op(X)[i][k] with X stored row-major with leading dimension ld. */
static double at(const float *x, int64_t ld, int trans, int64_t i, int64_t k) {
  return trans ? x[k * ld + i] : x[i * ld + k];
}

/* One product with padded leading dimensions (pad extra columns per row; pad 0 and
 * packed: also through dm_gemm_f32), checked element by element. */
static void check_one(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                      int64_t pad, int packed_api, uint64_t *seed) {
  int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  int64_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
  if (lda < 1)
    lda = 1;
  if (ldb < 1)
    ldb = 1;
  if (ldc < 1)
    ldc = 1;
  size_t na = (size_t)(ar * lda) + 1, nb = (size_t)(br * ldb) + 1, nc = (size_t)(M * ldc) + 1;
  float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
  float *c0 = malloc(nc * sizeof *c0);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  assert_non_null(c0);
  for (size_t i = 0; i < na; i++)
    a[i] = (float)opt_uniform(seed, -2, 2);
  for (size_t i = 0; i < nb; i++)
    b[i] = (float)opt_uniform(seed, -1, 1);
  for (size_t i = 0; i < nc; i++)
    c[i] = SENTINEL;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) /* beta 0 must ignore C: NaN there proves it */
      c[i * ldc + j] = beta == 0.0f ? NAN : (float)opt_uniform(seed, -3, 3);
  memcpy(c0, c, nc * sizeof *c);
  dm_status s = packed_api ? dm_gemm_f32(ta, tb, M, N, K, alpha, a, b, beta, c)
                           : dm_sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  assert_int_equal(s, DM_OK);
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < ldc; j++) {
      float got = c[i * ldc + j];
      if (j >= N) { /* padding: untouched */
        assert_true(got == SENTINEL);
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        double p = at(a, lda, ta, i, k) * at(b, ldb, tb, k, j);
        ref += p;
        mag += fabs(p);
      }
      ref *= alpha;
      mag *= fabs(alpha);
      if (beta != 0.0f) {
        ref += (double)beta * c0[i * ldc + j];
        mag += fabs((double)beta * c0[i * ldc + j]);
      }
      double tol = (double)(K + 2) * OPT_U32 * mag;
      if (!(fabs(got - ref) <= tol))
        fail_msg("%c%c M=%lld N=%lld K=%lld alpha=%g beta=%g pad=%lld: C[%lld][%lld] = %.9g, "
                 "reference %.9g, tolerance %.3g",
                 ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M, (long long)N, (long long)K,
                 (double)alpha, (double)beta, (long long)pad, (long long)i, (long long)j,
                 (double)got, ref, tol);
    }
  }
  assert_true(c[nc - 1] == SENTINEL); /* nothing written past the last row */
  free(a);
  free(b);
  free(c);
  free(c0);
}

/* Transposes, alpha/beta, odd sizes (vector tails of every length), one large enough for
 * the libraries' blocked and threaded paths, padded and packed leading dimensions. */
static void test_sgemm_shapes(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{1, 1, 1},   {3, 5, 7},    {17, 33, 65}, {64, 1, 129},
                                      {1, 70, 3},  {130, 67, 31}, {2, 2, 1000}, {33, 17, 1},
                                      {257, 129, 300}};
  static const float alphas[] = {1.0f, -0.5f}, betas[] = {0.0f, 1.0f, 2.5f};
  uint64_t seed = 42;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int t = 0; t < 4; t++)
      for (size_t ai = 0; ai < 2; ai++)
        for (size_t bi = 0; bi < 3; bi++) {
          const int64_t *d = shapes[si];
          check_one(t & 1, t >> 1, d[0], d[1], d[2], alphas[ai], betas[bi], 0, 1, &seed);
          check_one(t & 1, t >> 1, d[0], d[1], d[2], alphas[ai], betas[bi], 3, 0, &seed);
        }
}

/* K = 0 is an empty sum: C = beta C, and beta 0 writes zeros even over NaN. alpha 0
 * (BLAS: A and B are not read) the same, so NaN in A stays out. M or N 0: nothing. */
static void test_sgemm_degenerate(void **state) {
  (void)state;
  float c[6] = {1, 2, NAN, 4, 5, 6}, a[6] = {NAN, 1, 1, 1, 1, 1}, b[6] = {1, 1, 1, 1, 1, 1};
  assert_int_equal(dm_gemm_f32(0, 0, 2, 3, 0, 1.0f, a, b, 0.0f, c), DM_OK);
  for (int i = 0; i < 6; i++)
    assert_true(c[i] == 0.0f);
  float d[6] = {1, 2, 3, 4, 5, 6};
  assert_int_equal(dm_gemm_f32(1, 1, 2, 3, 0, 1.0f, a, b, 2.0f, d), DM_OK);
  for (int i = 0; i < 6; i++)
    assert_true(d[i] == 2.0f * (float)(i + 1));
  float e[4] = {1, 2, 3, 4};
  assert_int_equal(dm_gemm_f32(0, 0, 2, 2, 3, 0.0f, a, b, -1.0f, e), DM_OK);
  for (int i = 0; i < 4; i++)
    assert_true(e[i] == -(float)(i + 1));
  float f[2] = {7, 8};
  assert_int_equal(dm_gemm_f32(0, 0, 0, 2, 3, 1.0f, a, b, 0.0f, f), DM_OK);
  assert_int_equal(dm_gemm_f32(0, 0, 2, 0, 3, 1.0f, a, b, 0.0f, f), DM_OK);
  assert_true(f[0] == 7.0f && f[1] == 8.0f);
  /* zero-sized products need no memory at all */
  assert_int_equal(dm_gemm_f32(0, 0, 0, 0, 0, 1.0f, NULL, NULL, 0.0f, NULL), DM_OK);
}

/* Bad sizes and strides are errors with a message, never a crash or a library abort. */
static void test_sgemm_errors(void **state) {
  (void)state;
  float x[4] = {0};
  opt_expect_error(dm_gemm_f32(0, 0, -1, 2, 2, 1.0f, x, x, 0.0f, x), DM_ERR_LIMIT, "GEMM",
                   NULL);
  opt_expect_error(dm_gemm_f32(0, 0, 2, 2, (int64_t)1 << 33, 1.0f, x, x, 0.0f, x),
                   DM_ERR_LIMIT, "exceeds", NULL);
  opt_expect_error(dm_sgemm(0, 0, 2, 2, 2, 1.0f, x, 1, x, 2, 0.0f, x, 2), DM_ERR_INVALID,
                   "lda", NULL);
  opt_expect_error(dm_sgemm(0, 1, 2, 2, 3, 1.0f, x, 3, x, 2, 0.0f, x, 2), DM_ERR_INVALID,
                   "ldb", NULL);
  opt_expect_error(dm_sgemm(0, 0, 2, 3, 2, 1.0f, x, 2, x, 3, 0.0f, x, 2), DM_ERR_INVALID,
                   "ldc", NULL);
  opt_expect_error(dm_sgemm(0, 0, 1, 1, 1, 1.0f, x, 0, x, 1, 0.0f, x, 1), DM_ERR_INVALID,
                   "lda", NULL);
}

/* FP16/BF16 in, FP32 accumulate (bias in FP32 or the 16-bit type), one rounding out. */
static void check_r16(int mode, int ta, int tb, int64_t M, int64_t N, int64_t K, int bias,
                      int bias32, uint64_t *seed) {
  dm_dtype t = opt_mode_dtype(mode);
  uint16_t *a = malloc((size_t)(M * K) * 2 + 2), *b = malloc((size_t)(K * N) * 2 + 2);
  uint16_t *c = malloc((size_t)(M * N) * 2 + 2), *bh = malloc((size_t)N * 2 + 2);
  float *bf = malloc((size_t)N * sizeof(float) + 4);
  for (int64_t i = 0; i < M * K; i++)
    a[i] = opt_narrow(mode, (float)opt_uniform(seed, -2, 2));
  for (int64_t i = 0; i < K * N; i++)
    b[i] = opt_narrow(mode, (float)opt_uniform(seed, -1, 1));
  for (int64_t j = 0; j < N; j++) {
    bf[j] = (float)opt_uniform(seed, -1, 1);
    bh[j] = opt_narrow(mode, bf[j]);
    if (!bias32)
      bf[j] = opt_widen(mode, bh[j]);
  }
  const void *bp = !bias ? NULL : bias32 ? (const void *)bf : (const void *)bh;
  assert_int_equal(dm_gemm_r16(t, ta, tb, M, N, K, a, b, bp, bias32 ? DM_FLOAT : t, c), DM_OK);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double ref = bias ? bf[j] : 0.0, mag = fabs(ref);
      for (int64_t k = 0; k < K; k++) {
        double p = (double)opt_widen(mode, ta ? a[k * M + i] : a[i * K + k]) *
                   opt_widen(mode, tb ? b[j * K + k] : b[k * N + j]);
        ref += p;
        mag += fabs(p);
      }
      double got = opt_widen(mode, c[i * N + j]);
      double tol = (double)(K + 1) * OPT_U32 * mag * (1 + opt_mode_u(mode)) +
                   opt_mode_u(mode) * fabs(ref) + opt_mode_tiny(mode);
      if (!(fabs(got - ref) <= tol))
        fail_msg("%s %c%c M=%lld N=%lld K=%lld bias=%d: C[%lld][%lld] = %.9g, reference %.9g",
                 opt_mode_name(mode), ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M,
                 (long long)N, (long long)K, bias, (long long)i, (long long)j, got, ref);
    }
  free(a);
  free(b);
  free(c);
  free(bh);
  free(bf);
}

static void test_gemm_r16(void **state) {
  (void)state;
  uint64_t seed = 7;
  static const int64_t shapes[][3] = {{1, 1, 1}, {5, 3, 17}, {31, 19, 130}, {4, 9, 0}};
  for (int mode = 1; mode <= 2; mode++)
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (int t = 0; t < 4; t++)
        for (int bias = 0; bias < 3; bias++)
          check_r16(mode, t & 1, t >> 1, shapes[si][0], shapes[si][1], shapes[si][2], bias > 0,
                    bias == 2, &seed);
}

/* FP16 overflows to inf as on a tensor core: 2 * 256 * 256 = 131072 > 65504, although
 * every operand is small; the FP32 accumulation itself does not overflow. */
static void test_gemm_r16_overflow(void **state) {
  (void)state;
  uint16_t a[2] = {dm_float_to_half(256.0f), dm_float_to_half(256.0f)};
  uint16_t b[2] = {dm_float_to_half(256.0f), dm_float_to_half(256.0f)};
  uint16_t c[1] = {0};
  assert_int_equal(dm_gemm_r16(DM_FLOAT16, 0, 0, 1, 1, 2, a, b, NULL, DM_FLOAT, c), DM_OK);
  assert_true(isinf(dm_half_to_float(c[0])) && dm_half_to_float(c[0]) > 0);
  /* 65504 + 16 rounds back to 65504 (below the halfway point to inf) */
  uint16_t one = dm_float_to_half(1.0f), big = dm_float_to_half(65504.0f);
  uint16_t a2[2] = {big, one}, b2[2] = {one, dm_float_to_half(15.0f)};
  assert_int_equal(dm_gemm_r16(DM_FLOAT16, 0, 0, 1, 1, 2, a2, b2, NULL, DM_FLOAT, c), DM_OK);
  assert_true(dm_half_to_float(c[0]) == 65504.0f);
}

/* The decision behind `demitasse info`'s warning, fed configuration strings and feature
 * flags instead of the real machine. */
static void test_blas_warning(void **state) {
  (void)state;
  static const char prescott[] =
      "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Prescott MAX_THREADS=64";
  char msg[512];
  /* Debian on a Sapphire Rapids, with oneDNN: warns, says the GEMMs avoid it */
  assert_int_equal(dm_blas_generic_warning(prescott, 1, 1, 1, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "Prescott"));
  assert_non_null(strstr(msg, "AVX-512"));
  assert_non_null(strstr(msg, "oneDNN anyway"));
  assert_null(strstr(msg, "OPENBLAS_CORETYPE"));
  /* without oneDNN: speed suffers, and the workaround is named */
  assert_int_equal(dm_blas_generic_warning(prescott, 1, 1, 0, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "OPENBLAS_CORETYPE=SkylakeX"));
  assert_int_equal(dm_blas_generic_warning(prescott, 1, 0, 0, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "AVX2"));
  assert_non_null(strstr(msg, "OPENBLAS_CORETYPE=Haswell"));
  /* an old CPU: Prescott is right for it */
  assert_int_equal(dm_blas_generic_warning(prescott, 0, 0, 0, msg, sizeof msg), 0);
  assert_string_equal(msg, "");
  /* kernels that match the CPU */
  assert_int_equal(dm_blas_generic_warning("OpenBLAS 0.3.26 DYNAMIC_ARCH NO_AFFINITY "
                                           "SkylakeX MAX_THREADS=64",
                                           1, 1, 0, msg, sizeof msg),
                   0);
  assert_int_equal(
      dm_blas_generic_warning("OpenBLAS 0.3.21 USE_OPENMP Zen MAX_THREADS=64", 1, 0, 0, msg,
                              sizeof msg),
      0);
  assert_int_equal(dm_blas_generic_warning("OpenBLAS 0.3.21 Haswell MAX_THREADS=8", 1, 0, 0,
                                           msg, sizeof msg),
                   0);
  /* AVX2 kernels on an AVX-512 CPU, and a pre-AVX2 core on an AVX2 CPU */
  assert_int_equal(dm_blas_generic_warning("OpenBLAS 0.3.21 Haswell MAX_THREADS=8", 1, 1, 0,
                                           msg, sizeof msg),
                   1);
  assert_non_null(strstr(msg, "Haswell"));
  assert_int_equal(dm_blas_generic_warning("OpenBLAS 0.3.13 Sandybridge MAX_THREADS=4", 1, 0,
                                           1, msg, sizeof msg),
                   1);
  /* nothing readable: no guess */
  assert_int_equal(dm_blas_generic_warning("", 1, 1, 0, msg, sizeof msg), 0);
  assert_int_equal(dm_blas_generic_warning("OpenBLAS 0.3.21 DYNAMIC_ARCH MAX_THREADS=64", 1, 1,
                                           0, msg, sizeof msg),
                   0);
  assert_int_equal(dm_blas_generic_warning(NULL, 1, 1, 0, msg, sizeof msg), 0);
  /* a short buffer is cut, never overrun */
  char small[8];
  assert_int_equal(dm_blas_generic_warning(prescott, 1, 1, 1, small, sizeof small), 1);
  assert_int_equal(strlen(small), 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgemm_shapes),      cmocka_unit_test(test_sgemm_degenerate),
      cmocka_unit_test(test_sgemm_errors),      cmocka_unit_test(test_gemm_r16),
      cmocka_unit_test(test_gemm_r16_overflow), cmocka_unit_test(test_blas_warning),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
