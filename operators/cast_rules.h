/* cast_rules.h: Cast's conversion rules where C leaves things undefined, written once for
 * the CPU kernel (operators/cast.c, gcc) and the CUDA kernel (gpu/elementwise.cu, nvcc):
 * floating -> integer truncates toward zero, saturates at the type's range and maps NaN
 * to 0; integer -> narrower integer wraps (two's complement, through the unsigned type);
 * int64 -> a 16-bit float goes through a double rounded to odd, so that it rounds once.
 * The dtype switches of both kernels are expansions of DM_CAST_NARROW_INTS, each with
 * its own dtype numbers (DM_* and DMK_*, which gpu/register.c checks agree).
 *
 * Plain C with no include of core/ (nvcc never sees those).
 */
#ifndef DM_OPERATORS_CAST_RULES_H
#define DM_OPERATORS_CAST_RULES_H

#include <stdint.h>

#include "hostdev.h"

/* X(DT, T, U, lo, hi): the integer dtypes narrower than INT64: element type T, wrapped
 * through U from an int64, saturated to [lo, hi] from a floating value. */
#define DM_CAST_NARROW_INTS(X)                                                              \
  X(INT32, int32_t, uint32_t, INT32_MIN, INT32_MAX)                                         \
  X(UINT8, uint8_t, uint8_t, 0, UINT8_MAX)                                                  \
  X(INT8, int8_t, uint8_t, INT8_MIN, INT8_MAX)                                              \
  X(UINT16, uint16_t, uint16_t, 0, UINT16_MAX)                                              \
  X(INT16, int16_t, uint16_t, INT16_MIN, INT16_MAX)

/* Truncate toward zero, saturate to [lo, hi], NaN -> 0. lo and hi are exact in double
 * (not INT64's hi, 2^63 - 1: dm_cast_real_to_int64). */
static inline DM_HOSTDEV int64_t dm_cast_real_to_int(double d, int64_t lo, int64_t hi) {
  if (d != d)
    return 0;
  if (d <= (double)lo)
    return lo;
  if (d >= (double)hi)
    return hi;
  return (int64_t)d;
}

/* (double)INT64_MAX rounds up to 2^63, so >= catches exactly the out-of-range ones. */
static inline DM_HOSTDEV int64_t dm_cast_real_to_int64(double d) {
  return d != d ? 0 : d >= 0x1p63 ? INT64_MAX : d <= -0x1p63 ? INT64_MIN : (int64_t)d;
}

/* int64 -> double rounded to odd (truncate, then set the last kept bit if anything was
 * dropped): exact below 2^53, and above it still rounds correctly once more to a format
 * with far fewer bits, where (double)v could have rounded onto a midpoint. */
static inline DM_HOSTDEV double dm_cast_int_to_double_odd(int64_t v) {
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
#ifdef __CUDA_ARCH__
  int bits = 64 - __clzll((long long)(u | 1));
#else
  int bits = 64 - __builtin_clzll(u | 1);
#endif
  if (bits > 53) {
    uint64_t mask = ((uint64_t)1 << (bits - 53)) - 1;
    u = (u & ~mask) | ((u & mask) ? mask + 1 : 0);
  }
  double d = (double)u;
  return v < 0 ? -d : d;
}

#endif
