/* blas_check.c: does a BLAS run a kernel older than the CPU? (`demitasse info`'s warning)
 *
 * OpenBLAS picks its kernels from a table of CPUs it knows; a CPU newer than the table
 * gets a generic kernel (Debian's 0.3.21 runs "Prescott", SSE3, on a Sapphire Rapids,
 * 10x slower at 2048^3). openblas_get_config() names the core it chose, so comparing
 * that name with the CPU's features tells. Kept free of the real machine so a test can
 * feed it any configuration string and any feature flags.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gemm.h"

/* OpenBLAS core names whose kernels use AVX-512 or (second list) at least AVX2 + FMA. */
static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
static const char *const avx2_cores[] = {"Haswell", "Zen", "Excavator", NULL};

static int in_list(const char *name, const char *const *list) {
  for (; *list; list++)
    if (strcasecmp(name, *list) == 0)
      return 1;
  return 0;
}

/* The core name: the last word with a lowercase letter and no '=', other than "OpenBLAS"
 * (the rest are the version, upper-case build flags such as DYNAMIC_ARCH, and
 * MAX_THREADS=N). Empty when there is none. */
static void core_name(const char *config, char *out, size_t n) {
  out[0] = '\0';
  const char *p = config;
  while (*p) {
    while (*p == ' ')
      p++;
    size_t len = strcspn(p, " ");
    if (len == 0)
      break;
    int lower = 0, eq = 0;
    for (size_t i = 0; i < len; i++) {
      lower |= islower((unsigned char)p[i]) != 0;
      eq |= p[i] == '=';
    }
    if (lower && !eq && !(len == 8 && strncmp(p, "OpenBLAS", 8) == 0) && len < n) {
      memcpy(out, p, len);
      out[len] = '\0';
    }
    p += len;
  }
}

int dm_blas_generic_warning(const char *blas_config, int has_avx2, int has_avx512,
                            int have_dnnl, char *msg, size_t n) {
  if (n > 0)
    msg[0] = '\0';
  if (!blas_config || !(has_avx2 || has_avx512))
    return 0;
  char core[64];
  core_name(blas_config, core, sizeof core);
  if (!core[0]) /* not a configuration we can read: say nothing rather than guess */
    return 0;
  if (in_list(core, avx512_cores) || (!has_avx512 && in_list(core, avx2_cores)))
    return 0;
  const char *cpu = has_avx512 ? "AVX-512" : "AVX2";
  if (have_dnnl)
    snprintf(msg, n,
             "warning: OpenBLAS runs its %s kernels on this %s CPU; Demitasse's GEMMs go "
             "through oneDNN anyway, so only other users of this OpenBLAS are slow",
             core, cpu);
  else
    snprintf(msg, n,
             "warning: OpenBLAS runs its %s kernels on this %s CPU, and this build has no "
             "oneDNN, so GEMMs (FC, Conv) run several times slower than the CPU allows; "
             "set OPENBLAS_CORETYPE=%s in the environment to choose OpenBLAS's kernels",
             core, cpu, has_avx512 ? "SkylakeX" : "Haswell");
  return 1;
}
