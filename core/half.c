/* half.c: FP16 and BF16 conversion, portable bit manipulation plus an F16C path.
 *
 * The portable code is written against the bit layouts rather than relying on a
 * compiler's _Float16, so it behaves the same on every target; tests/core/test_half.c
 * checks it against the hardware over every FP16 pattern.
 */
#include "half.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define DM_X86 1
#else
#define DM_X86 0
#endif

static inline uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Rounds m / 2^s to nearest, ties to even (1 <= s <= 31). */
static inline uint32_t shift_rne(uint32_t m, unsigned s) {
  uint32_t r = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  return r + (rem > half || (rem == half && (r & 1)));
}

uint16_t dm_float_to_half(float f) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf stays inf; a NaN keeps its top payload bits, made quiet */
    return (uint16_t)(ax == 0x7f800000u ? sign | 0x7c00u : sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x47800000u) /* >= 65536: past the largest half even before rounding */
    return (uint16_t)(sign | 0x7c00u);
  uint32_t e = ax >> 23, m = ax & 0x7fffffu;
  if (e >= 113) /* normal half: rebias the exponent; a carry out of the mantissa bumps it,
                 * up to inf for [65520, 65536) as IEEE requires */
    return (uint16_t)(sign | shift_rne(((e - 112) << 23 | m), 13));
  if (e < 102) /* below 2^-25: rounds to (signed) zero */
    return (uint16_t)sign;
  /* Subnormal half: units of 2^-24. value = (m | 2^23) * 2^(e-150); a carry to 0x400
   * is the smallest normal, which the encoding gives for free. */
  return (uint16_t)(sign | shift_rne(m | 0x800000u, 126 - e));
}

float dm_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) /* inf, or NaN with the payload kept and the quiet bit set (as F16C) */
    return u2f(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
  if (e != 0)
    return u2f(sign | (e + 112) << 23 | m << 13);
  if (m == 0)
    return u2f(sign);
  /* Subnormal half: normalise; every one is a normal float. */
  e = 113;
  while (!(m & 0x400u)) {
    m <<= 1;
    e--;
  }
  return u2f(sign | e << 23 | (m & 0x3ffu) << 13);
}

uint16_t dm_float_to_bf16(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate and make quiet, so it stays NaN */
    return (uint16_t)((x >> 16) | 0x40u);
  /* Round to nearest even on the top 16 bits; overflow carries into inf correctly. */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float dm_bf16_to_float(uint16_t h) { return u2f((uint32_t)h << 16); }

/* double -> float rounding to odd: a float keeps 24 bits, at least two more than half
 * (11) or bf16 (8) have, so rounding that float to nearest even then gives the correctly
 * rounded result of the double (the classic round-to-odd argument). NaN and inf pass
 * through; a finite double beyond the float range becomes inf, which both narrower
 * formats would round it to anyway. */
static float double_to_float_odd(double d) {
  float f = (float)d;
  if (f != f || (double)f == d || f - f != 0) /* NaN, exact, or inf */
    return f;
  uint32_t u = f2u(f);
  if (fabs((double)f) > fabs(d)) /* rounded away from zero: step back toward it */
    u--;
  return u2f(u | 1u);
}

uint16_t dm_double_to_half(double d) { return dm_float_to_half(double_to_float_odd(d)); }
uint16_t dm_double_to_bf16(double d) { return dm_float_to_bf16(double_to_float_odd(d)); }

void dm_float_to_half_array_portable(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = dm_float_to_half(src[i]);
}

void dm_half_to_float_array_portable(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = dm_half_to_float(src[i]);
}

#if DM_X86
__attribute__((target("f16c,avx"))) static void f2h_f16c(const float *src, uint16_t *dst,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    /* Explicit round-to-nearest-even, whatever MXCSR says. */
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
  }
  dm_float_to_half_array_portable(src + i, dst + i, n - i);
}

__attribute__((target("f16c,avx"))) static void h2f_f16c(const uint16_t *src, float *dst,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  dm_half_to_float_array_portable(src + i, dst + i, n - i);
}

int dm_half_simd_available(void) {
  /* CPUID leaf 1: ECX bit 29 is F16C, bit 28 AVX, bit 27 OSXSAVE (the OS saves the YMM
   * state). Asked directly because clang 14 does not know "f16c" as a
   * __builtin_cpu_supports feature. Cached: CPUID is slow-ish and the answer fixed. */
  static _Atomic int cached = -1; /* a benign race: every thread computes the same */
  if (cached < 0) {
    unsigned a, b, c, d;
    int ok = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) && (c & (1u << 28)) &&
             (c & (1u << 27));
    if (ok) { /* XCR0 bits 1 and 2: SSE and AVX state enabled by the OS */
      unsigned lo, hi;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      ok = (lo & 6u) == 6u;
    }
    cached = ok;
  }
  return cached;
}
#else
int dm_half_simd_available(void) { return 0; }
#endif

void dm_float_to_half_array_simd(const float *src, uint16_t *dst, size_t n) {
#if DM_X86
  if (dm_half_simd_available()) {
    f2h_f16c(src, dst, n);
    return;
  }
#endif
  dm_float_to_half_array_portable(src, dst, n);
}

void dm_half_to_float_array_simd(const uint16_t *src, float *dst, size_t n) {
#if DM_X86
  if (dm_half_simd_available()) {
    h2f_f16c(src, dst, n);
    return;
  }
#endif
  dm_half_to_float_array_portable(src, dst, n);
}

void dm_float_to_half_array(const float *src, uint16_t *dst, size_t n) {
  dm_float_to_half_array_simd(src, dst, n);
}

void dm_half_to_float_array(const uint16_t *src, float *dst, size_t n) {
  dm_half_to_float_array_simd(src, dst, n);
}

/* BF16 is a plain truncation/round of the top half; these loops vectorise as written. */
void dm_float_to_bf16_array(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = dm_float_to_bf16(src[i]);
}

void dm_bf16_to_float_array(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = dm_bf16_to_float(src[i]);
}
