/* cmd_info.c: `demitasse info`, what this build and this machine offer: version, CPU
 * features, the GEMM engine (oneDNN's version and ISA), BLAS and OpenMP threads, a
 * warning when the BLAS runs a kernel older than the CPU, CUDA libraries and GPUs (or
 * why none is usable). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "core/half.h"
#include "dm_config.h"
#include "gpu/device_info.h"
#include "operators/math/gemm.h"

#if DM_HAVE_OPENMP
#include <omp.h>
#endif
#if DM_HAVE_DNNL
#include "operators/dnnl/dnnl_common.h"
#endif

#ifdef DM_CLI_HAVE_OPENBLAS
/* Declared here rather than through <cblas.h>, whose OpenBLAS extras vary by version. */
char *openblas_get_config(void);
int openblas_get_num_threads(void);
#endif

/* Which engine runs each dtype: oneDNN's primitive kinds as its trials on this CPU found
 * them (operators/dnnl/caps.c), the reference kernels for the rest. */
static void print_cpu_engine(void) {
  if (!dm_have_dnnl()) {
    printf("CPU engine: reference kernels (%s)\n",
           DM_HAVE_DNNL ? "oneDNN has no CPU engine on this machine" : "built without oneDNN");
    return;
  }
  printf("CPU engine: oneDNN (DNNL) where it builds the op, reference kernels for the rest "
         "(--engine reference: all)\n");
#if DM_HAVE_DNNL
  const dm_dtype dtypes[] = {DM_FLOAT, DM_BFLOAT16};
  for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
    dm_dtype d = dtypes[t];
    printf("  %s: ", dm_dtype_name(d));
    if (dm_dnnl_can_all(d)) {
      printf("oneDNN\n");
      continue;
    }
    printf("reference kernels for");
    const char *sep = " ";
    for (int k = 0; k < DM_DNNL_N_KINDS; k++)
      if (!dm_dnnl_can((dm_dnnl_kind)k, d)) {
        printf("%s%s", sep, dm_dnnl_kind_name((dm_dnnl_kind)k));
        sep = ", ";
      }
    printf(" (oneDNN builds none of these on ISA %s); oneDNN for the rest\n", dm_dnnl_isa_name());
  }
#endif
}

static void help(FILE *f) {
  fprintf(f, "usage: demitasse info [--no-selftest] [--threads N]\n\n"
             "Prints the version; CPU features; the GEMM engine (oneDNN's version and the\n"
             "ISA it runs, or CBLAS); the BLAS library and its threads, with a warning when\n"
             "it runs a kernel older than the CPU; the CPU threads the kernels use; CUDA\n"
             "runtime, driver, cuDNN, cuBLAS and NCCL versions; the GPUs, or why none is\n"
             "usable. With a GPU, also converts a few floats to FP16 on it and compares the\n"
             "bits with the CPU conversion.\n\n"
             "  -n, --no-selftest  skip the GPU self-test\n"
             "      --threads N    report as `run --threads N` would set them\n"
             "  -h, --help         this text\n");
}

static void print_cpu(void) {
  printf("CPU features:");
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  /* __builtin_cpu_supports needs a string literal, hence no table */
  printf(" sse4.2=%s", __builtin_cpu_supports("sse4.2") ? "yes" : "no");
  printf(" avx=%s", __builtin_cpu_supports("avx") ? "yes" : "no");
  printf(" avx2=%s", __builtin_cpu_supports("avx2") ? "yes" : "no");
  printf(" avx512f=%s", __builtin_cpu_supports("avx512f") ? "yes" : "no");
  /* f16c via CPUID in core/half.c: clang 14's __builtin_cpu_supports lacks it */
  printf(" f16c=%s", dm_half_simd_available() ? "yes" : "no");
  printf(" fma=%s", __builtin_cpu_supports("fma") ? "yes" : "no");
  printf("\n");
#else
  printf(" (not an x86 CPU; no feature probe)\n");
#endif
  printf("FP16 conversion: %s\n", dm_half_simd_available() ? "F16C" : "portable");
}

#ifdef DM_CLI_HAVE_OPENBLAS
/* On the running CPU; the decision itself is dm_blas_generic_warning's (tested apart). */
static void print_blas_warning(const char *config) {
  int avx2 = 0, avx512 = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  avx512 = __builtin_cpu_supports("avx512f");
#endif
  char msg[512];
  if (dm_blas_generic_warning(config, avx2, avx512, DM_HAVE_DNNL, msg, sizeof msg)) {
    printf("%s\n", msg);
  }
}
#endif

/* Converts awkward values (ties, subnormals, overflow, inf, nan) on GPU 0 and on the CPU. */
static int gpu_selftest(void) {
  static const float in[] = {0.0f,      -0.0f,      1.0f,      65504.0f,  65520.0f,
                             1.0009765625f,  1.00048828125f, 5.96e-8f, 2.98e-8f, 1e-10f,
                             -3.14159f, 1e30f,      -1e30f,    100000.0f, 0.1f};
  size_t n = sizeof in / sizeof in[0];
  uint16_t gpu[sizeof in / sizeof in[0]], cpu[sizeof in / sizeof in[0]];
  if (dm_cuda_float_to_half(0, in, gpu, n) != DM_OK) {
    printf("GPU self-test: FAILED: %s\n", dm_last_error());
    return 0;
  }
  dm_float_to_half_array_portable(in, cpu, n);
  for (size_t i = 0; i < n; i++)
    if (gpu[i] != cpu[i]) {
      printf("GPU self-test: FAILED: %g -> 0x%04x on GPU 0, 0x%04x on the CPU\n", (double)in[i],
             gpu[i], cpu[i]);
      return 0;
    }
  printf("GPU self-test: float->half on GPU 0 matches the CPU bit for bit (%zu values)\n", n);
  return 1;
}

int dm_cmd_info(int argc, char **argv) {
  static const struct option opts[] = {{"no-selftest", no_argument, NULL, 'n'},
                                       {"help", no_argument, NULL, 'h'},
                                       DM_THREADS_OPTION,
                                       {NULL, 0, NULL, 0}};
  int selftest = 1, c;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "nh", opts, NULL)) != -1) {
    switch (c) {
    case 'n': selftest = 0; break;
    case 'h': help(stdout); return DM_EXIT_OK;
    case DM_THREADS_FLAG: {
      int rc = dm_cli_threads_flag("info", optarg);
      if (rc != DM_EXIT_OK)
        return rc;
      break;
    }
    default: return dm_cli_bad_option("info", argv);
    }
  }
  if (optind < argc)
    return dm_cli_usage_error("info", "unexpected argument '%s'", argv[optind]);

  printf("demitasse %s\n", dm_version_string());
  print_cpu();
  char line[512];
  dm_gemm_engine_describe(line, sizeof line);
  printf("GEMM: %s; %s\n", dm_gemm_engine(), line);
  print_cpu_engine();
#ifdef DM_CLI_HAVE_OPENBLAS
  printf("BLAS: %s, %d threads\n", openblas_get_config(), openblas_get_num_threads());
  print_blas_warning(openblas_get_config());
#else
  printf("BLAS: a CBLAS other than OpenBLAS (no configuration query)\n");
#endif
#if DM_HAVE_OPENMP
  printf("OpenMP: %d threads (max), %d processors\n", omp_get_max_threads(), omp_get_num_procs());
#else
  printf("OpenMP: not built in\n");
#endif
  printf("CPU threads: %d (default: the %d cores this process may run on)\n",
         dm_get_num_threads(), dm_num_threads_default());
  dm_cuda_info *info = malloc(sizeof *info);
  if (!info)
    return dm_cli_failf("out of memory");
  char text[4096];
  dm_cuda_info_get(info);
  dm_cuda_info_format(info, text, sizeof text);
  fputs(text, stdout);
  int ok = 1;
  if (info->n_gpus > 0 && selftest)
    ok = gpu_selftest();
  free(info);
  return ok ? DM_EXIT_OK : DM_EXIT_ERROR;
}
