/* half.h: FP16 (IEEE binary16) and BF16 (bfloat16) <-> FP32 conversion (internal).
 *
 * Both 16-bit formats are stored as raw uint16_t bit patterns. Narrowing rounds to
 * nearest, ties to even; subnormals, infinities and signed zeros are exact. A NaN stays
 * a NaN of the same sign: its payload is kept as far as the narrower format allows and
 * its quiet bit is set, which is what the F16C instructions do, so the portable and the
 * vectorised paths give identical bits. Widening is exact for every non-NaN value.
 *
 * The array functions pick the F16C path at run time when the CPU has it (x86-64) and
 * fall back to the portable loop otherwise.
 */
#ifndef DM_CORE_HALF_H
#define DM_CORE_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Single values. */
DM_HIDDEN uint16_t dm_float_to_half(float f);
DM_HIDDEN float dm_half_to_float(uint16_t h);
DM_HIDDEN uint16_t dm_float_to_bf16(float f);
DM_HIDDEN float dm_bf16_to_float(uint16_t h);
/* From double, rounded once (not double -> float -> half, which can round twice). */
DM_HIDDEN uint16_t dm_double_to_half(double d);
DM_HIDDEN uint16_t dm_double_to_bf16(double d);

/* Arrays of n elements; src and dst must not overlap. */
DM_HIDDEN void dm_float_to_half_array(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_half_to_float_array(const uint16_t *src, float *dst, size_t n);
DM_HIDDEN void dm_float_to_bf16_array(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_bf16_to_float_array(const uint16_t *src, float *dst, size_t n);

/* For tests: nonzero when the array functions use F16C on this CPU, and the two paths
 * called directly (the vectorised ones fall back to the portable loop without F16C). */
DM_HIDDEN int dm_half_simd_available(void);
DM_HIDDEN void dm_float_to_half_array_portable(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_half_to_float_array_portable(const uint16_t *src, float *dst, size_t n);
DM_HIDDEN void dm_float_to_half_array_simd(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_half_to_float_array_simd(const uint16_t *src, float *dst, size_t n);

#endif
