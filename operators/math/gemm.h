/* gemm.h: the matrix products CPU kernels share (internal).
 *
 * Row-major throughout. The FP16 and BF16 products are faithful to tensor cores: 16-bit
 * operands are widened exactly to FP32, multiplied with FP32 accumulation (CBLAS sgemm),
 * and the result is rounded to the 16-bit format once, so overflow to inf and underflow
 * happen as on a GPU.
 */
#ifndef DM_OPERATORS_MATH_GEMM_H
#define DM_OPERATORS_MATH_GEMM_H

#include <stdint.h>

#include "core/status.h"
#include "demitasse_plugin.h"

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

#endif
