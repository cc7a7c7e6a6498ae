/* vmath.h: e^x for the oneDNN engine's own loops (internal), in a form the compiler
 * vectorises (no call, no branch, no table, no float-to-int conversion): glibc's expf is
 * a call per element and left Sigmoid five to ten times slower than the convolutions
 * around it. Written for gcc -O2 with `omp simd` on the caller's loop.
 *
 * Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2 (n rounded by adding 1.5 * 2^23, whose
 * low mantissa bits then hold it; ln2 split in two so that n ln2 is exact in FP32), e^r
 * by a polynomial, times 2^n made in the exponent bits. Against double-precision exp
 * over [-87, 0], at most 1 unit in the last place (glibc's expf: 0.5), so the two differ
 * by under 1.5; tests/operators/test_dnnl_eltwise.c checks that on a sample of the range.
 * Defined for x in [-87, 88], where 2^n is a normal number: callers clamp x (with
 * `x < lo ? lo : x`, which keeps a NaN, and e^NaN is NaN); outside, the value is
 * unspecified but computed without undefined behaviour. No select inside: gcc threads
 * a select here with the caller's clamp into a branch, and the loop is not vectorised.
 */
#ifndef DM_OPERATORS_DNNL_VMATH_H
#define DM_OPERATORS_DNNL_VMATH_H

#include <stdint.h>

#define DM_VEXP_LO -87.0f
#define DM_VEXP_HI 88.0f

typedef union dm_vbits {
  uint32_t u;
  float f;
} dm_vbits;

static inline float dm_vexpf(float x) {
  const float round = 12582912.0f; /* 1.5 * 2^23 */
  dm_vbits t = {.f = x * 1.44269504088896341f + round};
  float fn = t.f - round;
  float r = x - fn * 0.693359375f; /* ln2 = 0.693359375 - 2.12194440e-4 */
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  /* 2^n: n sits in t's low mantissa bits, biased by 1.5 * 2^23's; unsigned arithmetic,
   * so that any x (a NaN's bits too) is defined behaviour. */
  dm_vbits s = {.u = (t.u - 0x4b400000u + 127u) << 23};
  return p * s.f;
}

#endif
