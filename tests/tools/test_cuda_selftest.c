/* test_cuda_selftest.c: the GPU float->half kernel against the CPU conversion, bit for
 * bit, over every FP16 boundary case and a sweep of float bit patterns. Skipped (77)
 * where there is no usable GPU or no CUDA build, which it says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "gpu/device_info.h"

#define SKIP 77

int main(void) {
  char why[512];
  if (!dm_cuda_available(why, sizeof why)) {
    printf("skipped: %s\n", why);
    return SKIP;
  }
  /* Every 2^8-th float bit pattern (2^24 values, both signs, nan and inf included) plus
   * the exact FP16 rounding boundaries around each half value. */
  size_t n_sweep = (size_t)1 << 24, n_edges = (size_t)1 << 16;
  size_t n = n_sweep + 2 * n_edges;
  float *in = malloc(n * sizeof *in);
  uint16_t *gpu = malloc(n * sizeof *gpu), *cpu = malloc(n * sizeof *cpu);
  if (!in || !gpu || !cpu) {
    printf("out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < n_sweep; i++) {
    uint32_t bits = (uint32_t)i << 8 | (uint32_t)(i & 0xff);
    memcpy(&in[i], &bits, 4);
  }
  for (size_t h = 0; h < n_edges; h++) {
    /* the midpoint between half h and h+1 (a tie), and one float ulp above it */
    float lo = dm_half_to_float((uint16_t)h), hi = dm_half_to_float((uint16_t)(h + 1));
    float mid = (float)(((double)lo + (double)hi) / 2);
    in[n_sweep + 2 * h] = mid;
    uint32_t b;
    memcpy(&b, &mid, 4);
    b++;
    memcpy(&in[n_sweep + 2 * h + 1], &b, 4);
  }
  if (dm_cuda_float_to_half(0, in, gpu, n) != DM_OK) {
    printf("FAIL: %s\n", dm_last_error());
    return 1;
  }
  dm_float_to_half_array_portable(in, cpu, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    int both_nan = (gpu[i] & 0x7c00) == 0x7c00 && (gpu[i] & 0x3ff) && (cpu[i] & 0x7c00) == 0x7c00 &&
                   (cpu[i] & 0x3ff);
    /* NaN stays NaN; the GPU's cvt.rn.f16.f32 returns a canonical NaN (sign and payload
     * dropped) where the CPU keeps them, as IEEE 754 allows either */
    if (gpu[i] != cpu[i] && !both_nan) {
      if (bad++ < 10)
        printf("FAIL: %a -> GPU 0x%04x, CPU 0x%04x\n", (double)in[i], gpu[i], cpu[i]);
    }
  }
  printf("%zu of %zu conversions differ\n", bad, n);
  free(in);
  free(gpu);
  free(cpu);
  return bad ? 1 : 0;
}
