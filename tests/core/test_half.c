/* test_half.c: FP16/BF16 conversion against the CPU's own conversion (F16C, and the
 * compiler's _Float16 where it has one) and against a double-precision reference
 * rounding written here.
 *
 * half -> float: every one of the 65,536 patterns. float -> half: for every half, its
 * value, the exact midpoint to the next half and one float ulp either side of that
 * midpoint (where ties-to-even matters), plus every sign/exponent class with assorted
 * mantissas, specials and NaN payloads. All 2^32 floats would be too slow under ASan.
 * BF16 likewise against its reference (there is no BF16 hardware to ask on most CPUs).
 * Exit 77 (skipped) only if neither F16C nor _Float16 is available for the hardware
 * comparison; everything else still runs.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "demitasse_plugin.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#if defined(__FLT16_MAX__)
#define HAVE_FLOAT16 1
#else
#define HAVE_FLOAT16 0
#endif

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int have_f16c(void) {
#if HAVE_X86
  /* CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know f16c) */
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
#else
  return 0;
#endif
}

#if HAVE_X86
__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) {
  return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

#if HAVE_FLOAT16
__extension__ typedef _Float16 f16; /* -Wpedantic: _Float16 is an ISO TS extension */
static float cc_h2f(uint16_t h) {
  f16 x;
  memcpy(&x, &h, 2);
  return (float)x;
}
static uint16_t cc_f2h(float f) {
  f16 x = (f16)f;
  uint16_t h;
  memcpy(&h, &x, 2);
  return h;
}
#endif

/* ---- references in double precision -------------------------------------------- */

/* Finite (or infinite) double to half, rounded once, to nearest even. */
static uint16_t ref_d2h(double d) {
  uint16_t sign = signbit(d) ? 0x8000u : 0;
  double a = fabs(d);
  if (a >= 65520.0) /* halfway between 65504 and 2^16 and beyond: inf (ties to even) */
    return (uint16_t)(sign | 0x7c00u);
  int e;
  frexp(a, &e);  /* a = m * 2^e, m in [0.5, 1) */
  int E = e - 1; /* a in [2^E, 2^(E+1)) */
  if (E < -14)
    E = -14; /* subnormal range shares the quantum of the smallest binade */
  double q = ldexp(1.0, E - 10);
  double r = nearbyint(a / q); /* exact quotient; nearbyint: ties to even */
  double v = r * q;
  if (v < ldexp(1.0, -14))
    return (uint16_t)(sign | (uint16_t)r); /* subnormal (or zero): count of 2^-24 */
  frexp(v, &e);
  E = e - 1;
  uint16_t mant = (uint16_t)((v / ldexp(1.0, E) - 1.0) * 1024.0);
  return (uint16_t)(sign | (uint16_t)((E + 15) << 10) | mant);
}

/* NaN rule (IEEE leaves the payload open; this is what F16C does and what we promise):
 * keep the sign, keep the top payload bits, set the quiet bit. */
static uint16_t ref_f2h(float f) {
  uint32_t x = f2u(f);
  if (isnan(f))
    return (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
  return ref_d2h((double)f);
}

static uint32_t ref_h2f_bits(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 31)
    return m ? sign | 0x7fc00000u | (uint32_t)m << 13 : sign | 0x7f800000u;
  double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m, -24);
  return sign | f2u((float)v);
}

static uint16_t ref_d2bf(double d) {
  uint16_t sign = signbit(d) ? 0x8000u : 0;
  double a = fabs(d);
  if (a == 0)
    return sign;
  int e;
  frexp(a, &e);
  int E = e - 1;
  if (E < -126)
    E = -126;
  double q = ldexp(1.0, E - 7);
  double v = nearbyint(a / q) * q;
  if (v >= ldexp(1.0, 128))
    return (uint16_t)(sign | 0x7f80u);
  return (uint16_t)(sign | (f2u((float)v) >> 16));
}

static uint16_t ref_f2bf(float f) {
  if (isnan(f))
    return (uint16_t)((f2u(f) >> 16) | 0x40u);
  return ref_d2bf((double)f);
}

/* ---- the float test set ------------------------------------------------------- */

typedef struct fvec {
  float *v;
  size_t n, cap;
} fvec;

static void push(fvec *s, float f) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 1 << 16;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    assert_non_null(s->v);
  }
  s->v[s->n++] = f;
}

static void push_around(fvec *s, float mid) {
  push(s, mid);
  push(s, nextafterf(mid, INFINITY));
  push(s, nextafterf(mid, -INFINITY));
}

/* Value, midpoint to the next value and +-1 ulp around it, for every 16-bit pattern
 * of a format (decode: pattern -> double value, or NAN/INFINITY). */
static void add_grid(fvec *s, int bf16) {
  for (uint32_t h = 0; h < 0x10000u; h++) {
    float f = bf16 ? u2f(h << 16) : u2f(ref_h2f_bits((uint16_t)h));
    push(s, f);
    if (isnan(f) || isinf(f))
      continue;
    push(s, nextafterf(f, INFINITY));
    push(s, nextafterf(f, -INFINITY));
    /* next pattern away from zero; past the largest finite value that is 2^16 (FP16)
     * or 2^128 (BF16), whose midpoint is still a float */
    uint32_t nh = h + 1;
    double next;
    if (bf16)
      next = ((nh & 0x7fffu) == 0x7f80u) ? ldexp(1.0, 128) : (double)u2f(nh << 16);
    else
      next = ((nh & 0x7fffu) == 0x7c00u) ? 65536.0 : (double)u2f(ref_h2f_bits((uint16_t)nh));
    if ((h & 0x7fffu) == 0x7fffu)
      continue;
    if (h & 0x8000u)
      next = -fabs(next);
    double mid = ((double)f + next) / 2; /* exact: one more bit than the format has */
    if (fabs(mid) < 3.4e38)
      push_around(s, (float)mid);
    else
      push(s, nextafterf((float)f, f > 0 ? INFINITY : -INFINITY));
  }
}

/* Every sign/exponent class (the top 9 bits), each with mantissas that exercise the
 * rounding bits of both formats, and specials. */
static void add_classes(fvec *s) {
  static const uint32_t mants[] = {0,        1,        0x1000,   0x0fff,   0x1001,   0x2000,
                                   0x3000,   0x8000,   0x7fff,   0x8001,   0x18000,  0x7fffff,
                                   0x400000, 0x200000, 0x3fffff, 0x401000, 0x002001, 0x7fe000};
  for (uint32_t se = 0; se < 512; se++)
    for (size_t i = 0; i < sizeof mants / sizeof mants[0]; i++)
      push(s, u2f(se << 23 | mants[i]));
  uint64_t r = 0x9e3779b97f4a7c15ull; /* xorshift: fixed random mantissas per class */
  for (uint32_t se = 0; se < 512; se++)
    for (int i = 0; i < 64; i++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      push(s, u2f(se << 23 | (uint32_t)(r & 0x7fffffu)));
    }
  push(s, 65504.0f), push(s, 65519.99f), push(s, 65520.0f), push(s, 1e30f), push(s, -1e-30f);
  push(s, ldexpf(1.0f, -25)), push(s, ldexpf(1.0f, -24)), push(s, ldexpf(3.0f, -26));
}

static fvec *float_set(void) {
  static fvec s;
  if (!s.n) {
    add_grid(&s, 0);
    add_grid(&s, 1);
    add_classes(&s);
  }
  return &s;
}

/* ---- tests -------------------------------------------------------------------- */

static uint16_t all_halves[0x10000];

static void test_h2f_exhaustive_reference(void **state) {
  (void)state;
  float arr_p[0x10000], arr_s[0x10000];
  for (uint32_t h = 0; h < 0x10000u; h++)
    all_halves[h] = (uint16_t)h;
  dm_half_to_float_array_portable(all_halves, arr_p, 0x10000);
  dm_half_to_float_array_simd(all_halves, arr_s, 0x10000);
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    uint32_t want = ref_h2f_bits((uint16_t)h);
    uint32_t got = f2u(dm_half_to_float((uint16_t)h));
    if (got != want || f2u(arr_p[h]) != want || f2u(arr_s[h]) != want) {
      if (bad++ < 10)
        print_error("half %04x: want %08x scalar %08x portable %08x simd %08x\n", h, want, got,
                    f2u(arr_p[h]), f2u(arr_s[h]));
    }
  }
  assert_int_equal(bad, 0);
}

static void test_h2f_roundtrip(void **state) {
  (void)state;
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    uint16_t back = dm_float_to_half(dm_half_to_float((uint16_t)h));
    int nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
    uint16_t want = nan ? (uint16_t)(h | 0x200u) : (uint16_t)h; /* NaN: made quiet */
    if (back != want && bad++ < 10)
      print_error("half %04x -> float -> %04x\n", h, back);
  }
  assert_int_equal(bad, 0);
}

static void test_f2h_reference(void **state) {
  (void)state;
  fvec *s = float_set();
  uint16_t *p = malloc(s->n * 2), *v = malloc(s->n * 2);
  assert_non_null(p);
  assert_non_null(v);
  dm_float_to_half_array_portable(s->v, p, s->n);
  dm_float_to_half_array_simd(s->v, v, s->n);
  int bad = 0;
  for (size_t i = 0; i < s->n; i++) {
    uint16_t want = ref_f2h(s->v[i]), got = dm_float_to_half(s->v[i]);
    if ((got != want || p[i] != want || v[i] != want) && bad++ < 10)
      print_error("float %08x (%a): want %04x scalar %04x portable %04x simd %04x\n",
                  f2u(s->v[i]), (double)s->v[i], want, got, p[i], v[i]);
  }
  print_message("float->half: %zu floats checked against the double reference\n", s->n);
  free(p);
  free(v);
  assert_int_equal(bad, 0);
}

static int hw_compared;

static void test_hardware(void **state) {
  (void)state;
  int bad = 0, sources = 0;
  fvec *s = float_set();
#if HAVE_X86
  if (have_f16c()) {
    sources++;
    for (uint32_t h = 0; h < 0x10000u; h++)
      if (f2u(hw_h2f((uint16_t)h)) != f2u(dm_half_to_float((uint16_t)h)) && bad++ < 10)
        print_error("F16C half %04x -> %08x, ours %08x\n", h, f2u(hw_h2f((uint16_t)h)),
                    f2u(dm_half_to_float((uint16_t)h)));
    for (size_t i = 0; i < s->n; i++)
      if (hw_f2h(s->v[i]) != dm_float_to_half(s->v[i]) && bad++ < 10)
        print_error("F16C float %08x -> %04x, ours %04x\n", f2u(s->v[i]), hw_f2h(s->v[i]),
                    dm_float_to_half(s->v[i]));
  }
#endif
#if HAVE_FLOAT16
  sources++;
  for (uint32_t h = 0; h < 0x10000u; h++)
    if (f2u(cc_h2f((uint16_t)h)) != f2u(dm_half_to_float((uint16_t)h)) && bad++ < 10)
      print_error("_Float16 half %04x -> %08x, ours %08x\n", h, f2u(cc_h2f((uint16_t)h)),
                  f2u(dm_half_to_float((uint16_t)h)));
  for (size_t i = 0; i < s->n; i++)
    if (cc_f2h(s->v[i]) != dm_float_to_half(s->v[i]) && bad++ < 10)
      print_error("_Float16 float %08x -> %04x, ours %04x\n", f2u(s->v[i]), cc_f2h(s->v[i]),
                  dm_float_to_half(s->v[i]));
#endif
  hw_compared = sources;
  if (!sources)
    skip();
  print_message("hardware: %d independent conversion(s) (F16C: %s, _Float16: %s)\n", sources,
                have_f16c() ? "yes" : "no", HAVE_FLOAT16 ? "yes" : "no");
  assert_int_equal(bad, 0);
}

static void test_bf16(void **state) {
  (void)state;
  fvec *s = float_set();
  uint16_t *a = malloc(s->n * 2);
  float *back = malloc(s->n * 4);
  assert_non_null(a);
  assert_non_null(back);
  dm_float_to_bf16_array(s->v, a, s->n);
  int bad = 0;
  for (size_t i = 0; i < s->n; i++) {
    uint16_t want = ref_f2bf(s->v[i]), got = dm_float_to_bf16(s->v[i]);
    if ((got != want || a[i] != want) && bad++ < 10)
      print_error("bf16: float %08x: want %04x scalar %04x array %04x\n", f2u(s->v[i]), want,
                  got, a[i]);
  }
  /* widening is exact: every pattern, value identity via the top half of the float */
  for (uint32_t h = 0; h < 0x10000u; h++)
    all_halves[h] = (uint16_t)h;
  dm_bf16_to_float_array(all_halves, back, 0x10000);
  for (uint32_t h = 0; h < 0x10000u; h++) {
    if ((f2u(back[h]) != h << 16 || f2u(dm_bf16_to_float((uint16_t)h)) != h << 16) && bad++ < 10)
      print_error("bf16 %04x widened to %08x\n", h, f2u(back[h]));
    int nan = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
    uint16_t want = nan ? (uint16_t)(h | 0x40u) : (uint16_t)h;
    if (dm_float_to_bf16(back[h]) != want && bad++ < 10)
      print_error("bf16 %04x round trip gave %04x\n", h, dm_float_to_bf16(back[h]));
  }
  free(a);
  free(back);
  assert_int_equal(bad, 0);
}

/* From double: the cases where going through float would round twice are a half's
 * (or bf16's) midpoint nudged by less than half a float ulp, plus random doubles. */
static void test_from_double(void **state) {
  (void)state;
  int bad = 0;
  size_t n = 0;
  uint64_t r = 0x2545f4914f6cdd1dull;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    for (int bf = 0; bf < 2; bf++) {
      double f = bf ? (double)u2f(h << 16) : (double)u2f(ref_h2f_bits((uint16_t)h));
      if (isnan(f) || isinf(f))
        continue;
      double ulp = bf ? ldexp(fabs(f) > 0 ? fabs(f) : ldexp(1.0, -126), -8)
                      : ldexp(1.0, (fabs(f) >= ldexp(1.0, -14) ? ilogb(f) : -14) - 11);
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      double tiny = ulp * ldexp(1.0, -30);
      double cand[] = {f,
                       f + ulp,
                       f + ulp + tiny,
                       f + ulp - tiny,
                       f - ulp + tiny,
                       f + ulp * ((double)(r >> 11) * ldexp(1.0, -53))};
      for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++, n++) {
        double d = cand[i];
        uint16_t want = bf ? ref_d2bf(d) : ref_d2h(d);
        uint16_t got = bf ? dm_double_to_bf16(d) : dm_double_to_half(d);
        if (got != want && bad++ < 10)
          print_error("%s from double %a: want %04x got %04x\n", bf ? "bf16" : "half", d, want,
                      got);
      }
    }
  }
  assert_true(isnan(dm_half_to_float(dm_double_to_half(NAN))));
  assert_int_equal(dm_double_to_half(1e300), 0x7c00);
  assert_int_equal(dm_double_to_bf16(-1e300), 0xff80);
  assert_int_equal(dm_double_to_half(1e-300), 0x0000);
  print_message("from double: %zu values checked\n", n);
  assert_int_equal(bad, 0);
}

/* Spot checks a reader can verify by hand. */
static void test_known_values(void **state) {
  (void)state;
  assert_int_equal(dm_float_to_half(1.0f), 0x3c00);
  assert_int_equal(dm_float_to_half(-2.0f), 0xc000);
  assert_int_equal(dm_float_to_half(65504.0f), 0x7bff);
  assert_int_equal(dm_float_to_half(65519.0f), 0x7bff);
  assert_int_equal(dm_float_to_half(65520.0f), 0x7c00); /* tie, goes to even = inf */
  assert_int_equal(dm_float_to_half(ldexpf(1.0f, -24)), 0x0001);
  assert_int_equal(dm_float_to_half(ldexpf(1.0f, -25)), 0x0000); /* tie to even: zero */
  assert_int_equal(dm_float_to_half(ldexpf(3.0f, -26)), 0x0001);
  assert_int_equal(dm_float_to_half(-0.0f), 0x8000);
  assert_int_equal(dm_float_to_half(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie -> even */
  assert_int_equal(dm_float_to_half(1.0f + ldexpf(3.0f, -11)), 0x3c02); /* tie -> even */
  assert_true(dm_half_to_float(0x7bff) == 65504.0f);
  assert_true(dm_half_to_float(0x0001) == ldexpf(1.0f, -24));
  assert_true(isnan(dm_half_to_float(0x7c01)));
  assert_int_equal(dm_float_to_bf16(1.0f), 0x3f80);
  assert_int_equal(dm_float_to_bf16(u2f(0x3f808000)), 0x3f80); /* tie -> even */
  assert_int_equal(dm_float_to_bf16(u2f(0x3f818000)), 0x3f82); /* tie -> even */
  assert_int_equal(dm_float_to_bf16(u2f(0x7f800001)), 0x7fc0); /* sNaN stays NaN */
  assert_int_equal(dm_float_to_bf16(u2f(0x7f7fffff)), 0x7f80); /* overflow -> inf */
}

/* The exported conversions (demitasse_plugin.h) give the internal functions' bits for
 * every FP16 pattern, in both directions and through dm_convert; dm_convert refuses
 * other dtypes and NULL buffers. */
static void test_exported(void **state) {
  (void)state;
  enum { N = 65536 };
  uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2), *b = malloc(N * sizeof *b);
  float *f = malloc(N * sizeof *f);
  assert_non_null(h);
  assert_non_null(h2);
  assert_non_null(b);
  assert_non_null(f);
  for (uint32_t i = 0; i < N; i++)
    h[i] = (uint16_t)i;
  assert_int_equal(dm_convert(DM_FLOAT, f, DM_FLOAT16, h, N), DM_OK);
  for (uint32_t i = 0; i < N; i++) {
    float want = dm_half_to_float(h[i]);
    assert_memory_equal(&f[i], &want, sizeof want);
    float one = dm_f16_to_f32(h[i]);
    assert_memory_equal(&one, &want, sizeof want);
    assert_int_equal(dm_f32_to_f16(f[i]), dm_float_to_half(f[i]));
    assert_int_equal(dm_f32_to_bf16(f[i]), dm_float_to_bf16(f[i]));
    float wb = dm_bf16_to_float(h[i]), gb = dm_bf16_to_f32(h[i]);
    assert_memory_equal(&gb, &wb, sizeof wb);
  }
  assert_int_equal(dm_convert(DM_FLOAT16, h2, DM_FLOAT, f, N), DM_OK);
  assert_int_equal(dm_convert(DM_BFLOAT16, b, DM_FLOAT16, h, N), DM_OK);
  for (uint32_t i = 0; i < N; i++) {
    assert_int_equal(h2[i], dm_float_to_half(f[i]));
    assert_int_equal(b[i], dm_float_to_bf16(dm_half_to_float(h[i])));
  }
  assert_int_equal(dm_convert(DM_FLOAT16, h2, DM_FLOAT16, h, N), DM_OK); /* a copy */
  assert_memory_equal(h2, h, N * sizeof *h);
  assert_int_equal(dm_convert(DM_DOUBLE, f, DM_FLOAT, f, 1), DM_ERR_TYPE);
  assert_int_equal(dm_convert(DM_FLOAT, NULL, DM_FLOAT16, h, 1), DM_ERR_INVALID);
  assert_int_equal(dm_convert(DM_FLOAT, NULL, DM_FLOAT16, NULL, 0), DM_OK);
  free(h);
  free(h2);
  free(b);
  free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_values),  cmocka_unit_test(test_h2f_exhaustive_reference),
      cmocka_unit_test(test_h2f_roundtrip), cmocka_unit_test(test_f2h_reference),
      cmocka_unit_test(test_bf16),          cmocka_unit_test(test_from_double),
      cmocka_unit_test(test_hardware),          cmocka_unit_test(test_exported),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  free(float_set()->v);
  if (failed)
    return failed;
  return hw_compared ? 0 : 77; /* the hardware comparison could not run: skipped */
}
