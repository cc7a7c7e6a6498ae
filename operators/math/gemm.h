/* gemm.h: the matrix products CPU kernels share (internal).
 *
 * Row-major throughout. Every FP32 product runs in dm_sgemm: oneDNN's dnnl_sgemm where
 * the build has oneDNN (its kernel chosen from the CPU's features at run time), CBLAS
 * otherwise. The FP16 and BF16 products are faithful to tensor cores: 16-bit operands
 * are widened exactly to FP32, multiplied with FP32 accumulation (dm_sgemm), and the
 * result is rounded to the 16-bit format once, so overflow to inf and underflow happen
 * as on a GPU.
 */
#ifndef DM_OPERATORS_MATH_GEMM_H
#define DM_OPERATORS_MATH_GEMM_H

#include <stdint.h>

#include "core/status.h"
#include "demitasse_plugin.h"

#include <stddef.h>

/* C (M x N, row stride ldc) = alpha * op(A) * op(B) + beta * C with row strides lda, ldb
 * (each at least the row length of its stored matrix, and at least 1). Sizes and strides
 * must fit an int (DM_ERR_LIMIT / DM_ERR_INVALID). M, N or K zero, or alpha zero, never
 * reach the library: C = beta * C here, and beta 0 writes zeros even over NaN (BLAS
 * implementations disagree about these corners). A library failure is DM_ERR_INVALID
 * (DM_ERR_NOMEM for oneDNN's out-of-memory) with its status in the message. */
DM_HIDDEN dm_status dm_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                             float alpha, const float *A, int64_t lda, const float *B,
                             int64_t ldb, float beta, float *C, int64_t ldc);

/* C (M x N) = alpha * op(A) * op(B) + beta * C, op = transpose when trans_* is nonzero.
 * A is M x K (or K x M transposed), B is K x N (or N x K). Sizes are checked to fit
 * the BLAS integer type (DM_ERR_LIMIT). Zero-sized products are handled here (BLAS
 * implementations disagree about K = 0). */
DM_HIDDEN dm_status dm_gemm_f32(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                                float alpha, const float *A, const float *B, float beta,
                                float *C);

/* The same with reduced-precision A, B and C: t is DM_FLOAT16 or DM_BFLOAT16 (uint16_t
 * bit patterns), and an optional bias row of N, of dtype bias_dtype (FLOAT or t), is
 * added to every row in FP32 before the one rounding:
 *   C = round_t(op(A) * op(B) + bias). */
DM_HIDDEN dm_status dm_gemm_r16(dm_dtype t, int trans_a, int trans_b, int64_t M, int64_t N,
                                int64_t K, const uint16_t *A, const uint16_t *B,
                                const void *bias, dm_dtype bias_dtype, uint16_t *C);

/* "oneDNN dnnl_sgemm" or "CBLAS cblas_sgemm": what dm_sgemm calls in this build. */
DM_HIDDEN const char *dm_gemm_engine(void);

/* One line about the CPU engine for `demitasse info`: oneDNN's version and the ISA it
 * runs ("oneDNN 2.6.0: ISA avx512_core_bf16"), or that the build has no oneDNN. */
DM_HIDDEN void dm_gemm_engine_describe(char *buf, size_t n);

/* Nonzero when a BLAS runs a generic kernel on a CPU that has better: blas_config is
 * OpenBLAS's openblas_get_config() text (its last word names the core it picked, e.g.
 * "OpenBLAS 0.3.21 NO_AFFINITY Prescott MAX_THREADS=64"), has_avx2/has_avx512 the CPU's
 * features. Then msg (n bytes) gets the warning: with oneDNN (have_dnnl) that the GEMMs
 * go through oneDNN anyway, without it that speed suffers and OPENBLAS_CORETYPE is the
 * user's workaround. A pure function of its arguments, so tests feed it any machine. */
DM_HIDDEN int dm_blas_generic_warning(const char *blas_config, int has_avx2, int has_avx512,
                                      int have_dnnl, char *msg, size_t n);

#endif
