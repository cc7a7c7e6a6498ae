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

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "status.h"

/* Single values: inline (they sit in the inner loops of the scalar and strided paths),
 * on the bits so that the result does not depend on the FPU's rounding mode. */
static inline uint32_t dm_half_f2u_(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float dm_half_u2f_(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Rounds m / 2^s to nearest, ties to even (1 <= s <= 31). */
static inline uint32_t dm_half_shift_rne_(uint32_t m, unsigned s) {
  uint32_t r = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  return r + (rem > half || (rem == half && (r & 1)));
}

static inline uint16_t dm_float_to_half(float f) {
  uint32_t x = dm_half_f2u_(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf stays inf; a NaN keeps its top payload bits, made quiet */
    return (uint16_t)(ax == 0x7f800000u ? sign | 0x7c00u : sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x47800000u) /* >= 65536: past the largest half even before rounding */
    return (uint16_t)(sign | 0x7c00u);
  uint32_t e = ax >> 23, m = ax & 0x7fffffu;
  if (e >= 113) /* normal half: rebias the exponent; a carry out of the mantissa bumps it,
                 * up to inf for [65520, 65536) as IEEE requires */
    return (uint16_t)(sign | dm_half_shift_rne_(((e - 112) << 23 | m), 13));
  if (e < 102) /* below 2^-25: rounds to (signed) zero */
    return (uint16_t)sign;
  /* Subnormal half: units of 2^-24. value = (m | 2^23) * 2^(e-150); a carry to 0x400
   * is the smallest normal, which the encoding gives for free. */
  return (uint16_t)(sign | dm_half_shift_rne_(m | 0x800000u, 126 - e));
}

static inline float dm_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) /* inf, or NaN with the payload kept and the quiet bit set (as F16C) */
    return dm_half_u2f_(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
  if (e != 0)
    return dm_half_u2f_(sign | (e + 112) << 23 | m << 13);
  /* Zero or subnormal: m * 2^-24, exact (a normal float, so FTZ cannot touch it). */
  return dm_half_u2f_(sign | dm_half_f2u_((float)m * 0x1p-24f));
}

static inline uint16_t dm_float_to_bf16(float f) {
  uint32_t x = dm_half_f2u_(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate and make quiet, so it stays NaN */
    return (uint16_t)((x >> 16) | 0x40u);
  /* Round to nearest even on the top 16 bits; overflow carries into inf correctly. */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float dm_bf16_to_float(uint16_t h) { return dm_half_u2f_((uint32_t)h << 16); }

/* double -> float rounding to odd: a float keeps 24 bits, at least two more than half
 * (11) or bf16 (8) have, so rounding that float to nearest even then gives the correctly
 * rounded result of the double (the classic round-to-odd argument). NaN and inf pass
 * through; a finite double beyond the float range becomes inf, which both narrower
 * formats would round it to anyway. */
static inline float dm_double_to_float_odd_(double d) {
  float f = (float)d;
  if (f != f || (double)f == d || f - f != 0) /* NaN, exact, or inf */
    return f;
  uint32_t u = dm_half_f2u_(f);
  if (fabs((double)f) > fabs(d)) /* rounded away from zero: step back toward it */
    u--;
  return dm_half_u2f_(u | 1u);
}

/* From double, rounded once (not double -> float -> half, which can round twice). */
static inline uint16_t dm_double_to_half(double d) {
  return dm_float_to_half(dm_double_to_float_odd_(d));
}
static inline uint16_t dm_double_to_bf16(double d) {
  return dm_float_to_bf16(dm_double_to_float_odd_(d));
}

/* Arrays of n elements; src and dst must not overlap. */
DM_HIDDEN void dm_float_to_half_array(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_half_to_float_array(const uint16_t *src, float *dst, size_t n);
DM_HIDDEN void dm_float_to_bf16_array(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_bf16_to_float_array(const uint16_t *src, float *dst, size_t n);
/* Each double rounded once to FP16, as dm_double_to_half (vectorised with AVX + F16C). */
DM_HIDDEN void dm_double_to_half_array(const double *src, uint16_t *dst, size_t n);

/* For tests: nonzero when the array functions use F16C on this CPU, and the two paths
 * called directly (the vectorised ones fall back to the portable loop without F16C). */
DM_HIDDEN int dm_half_simd_available(void);
DM_HIDDEN void dm_float_to_half_array_portable(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_half_to_float_array_portable(const uint16_t *src, float *dst, size_t n);
DM_HIDDEN void dm_float_to_half_array_simd(const float *src, uint16_t *dst, size_t n);
DM_HIDDEN void dm_half_to_float_array_simd(const uint16_t *src, float *dst, size_t n);

#endif
