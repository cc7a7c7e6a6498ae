/* half.c: FP16 and BF16 conversion, portable bit manipulation plus an F16C path.
 *
 * The portable code is written against the bit layouts rather than relying on a
 * compiler's _Float16, so it behaves the same on every target; tests/core/test_half.c
 * checks it against the hardware over every FP16 pattern.
 */
#include "half.h"

#include "demitasse_plugin.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define DM_X86 1
#else
#define DM_X86 0
#endif

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

/* Four doubles to floats rounded to odd (dm_double_to_float_odd_, lane by lane): the
 * conversion uses MXCSR's rounding as the scalar cast does; an inexact lane steps back
 * toward zero when it rounded away, then sets the low bit. */
__attribute__((target("f16c,avx"), always_inline)) static inline __m128 d2f_odd4(__m256d d) {
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  __m128 f = _mm256_cvtpd_ps(d);
  __m256d fd = _mm256_cvtps_pd(f);
  __m256d eq = _mm256_cmp_pd(fd, d, _CMP_EQ_OQ);
  __m256d gt = _mm256_cmp_pd(_mm256_and_pd(fd, abs_mask), _mm256_and_pd(d, abs_mask),
                             _CMP_GT_OQ);
  /* 64-bit lane masks to 32-bit ones: the low halves of the four lanes. */
  __m128 eq4 = _mm_shuffle_ps(_mm256_castps256_ps128(_mm256_castpd_ps(eq)),
                              _mm256_extractf128_ps(_mm256_castpd_ps(eq), 1), 0x88);
  __m128 gt4 = _mm_shuffle_ps(_mm256_castps256_ps128(_mm256_castpd_ps(gt)),
                              _mm256_extractf128_ps(_mm256_castpd_ps(gt), 1), 0x88);
  __m128i u = _mm_castps_si128(f);
  __m128i mag = _mm_and_si128(u, _mm_set1_epi32(0x7fffffff));
  __m128i special = _mm_cmpgt_epi32(mag, _mm_set1_epi32(0x7f7fffff)); /* inf or NaN */
  __m128i keep = _mm_or_si128(special, _mm_castps_si128(eq4));
  __m128i odd = _mm_or_si128(_mm_add_epi32(u, _mm_castps_si128(gt4)), _mm_set1_epi32(1));
  return _mm_castsi128_ps(_mm_blendv_epi8(odd, u, keep));
}

__attribute__((target("f16c,avx"))) static void d2h_f16c(const double *src, uint16_t *dst,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128 lo = d2f_odd4(_mm256_loadu_pd(src + i)), hi = d2f_odd4(_mm256_loadu_pd(src + i + 4));
    __m256 v = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
  }
  for (; i < n; i++)
    dst[i] = dm_double_to_half(src[i]);
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

void dm_double_to_half_array(const double *src, uint16_t *dst, size_t n) {
#if DM_X86
  if (dm_half_simd_available()) {
    d2h_f16c(src, dst, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++)
    dst[i] = dm_double_to_half(src[i]);
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

/* The exported conversions (demitasse_plugin.h), for plugins: the same code as the
 * built-in kernels' inline ones. */
uint16_t dm_f32_to_f16(float f) { return dm_float_to_half(f); }
float dm_f16_to_f32(uint16_t h) { return dm_half_to_float(h); }
uint16_t dm_f32_to_bf16(float f) { return dm_float_to_bf16(f); }
float dm_bf16_to_f32(uint16_t h) { return dm_bf16_to_float(h); }

dm_status dm_convert(dm_dtype dst_type, void *dst, dm_dtype src_type, const void *src,
                     size_t n) {
  int ok_dst = dst_type == DM_FLOAT || dst_type == DM_FLOAT16 || dst_type == DM_BFLOAT16;
  int ok_src = src_type == DM_FLOAT || src_type == DM_FLOAT16 || src_type == DM_BFLOAT16;
  if (!ok_dst || !ok_src)
    return dm_error(DM_ERR_TYPE, "dm_convert: only FLOAT, FLOAT16 and BFLOAT16, not %s to %s",
                    dm_dtype_name(src_type), dm_dtype_name(dst_type));
  if (n && (!dst || !src))
    return dm_error(DM_ERR_INVALID, "dm_convert: NULL buffer");
  if (dst_type == src_type) {
    memmove(dst, src, n * dm_dtype_size(dst_type));
    return DM_OK;
  }
  if (src_type == DM_FLOAT) {
    if (dst_type == DM_FLOAT16)
      dm_float_to_half_array(src, dst, n);
    else
      dm_float_to_bf16_array(src, dst, n);
    return DM_OK;
  }
  if (dst_type == DM_FLOAT) {
    if (src_type == DM_FLOAT16)
      dm_half_to_float_array(src, dst, n);
    else
      dm_bf16_to_float_array(src, dst, n);
    return DM_OK;
  }
  /* between the two 16-bit formats: through FP32, exact on the way up */
  const uint16_t *s = src;
  uint16_t *d = dst;
  for (size_t i = 0; i < n; i++)
    d[i] = src_type == DM_FLOAT16 ? dm_float_to_bf16(dm_half_to_float(s[i]))
                                  : dm_float_to_half(dm_bf16_to_float(s[i]));
  return DM_OK;
}
