/* test_gpu_ops.c: every op with a CUDA kernel against its CPU kernel (cases in
 * gpu_cases.h), in up to three passes: FP32, FP16 and BF16, in which a case's 'T' inputs
 * are FLOAT, FLOAT16 and BFLOAT16 (each case names its passes; a 16-bit pass is only
 * for ops whose CPU kernel takes that dtype).
 *
 * Each case is one op built twice from text: the reference net on the CPU, and the
 * device net, where CopyCPUToGPU takes each input X to X_cuda, the op runs with
 * device_option { device_type: 1 } and CopyGPUToCPU brings each output Y back as Y_cpu.
 * Both workspaces get the same seeded inputs; every output is compared. A case marked
 * GC_RESHAPE runs the same two instantiated nets twice more, at batch N+1 and back at N,
 * fed anew each time (a seed per run), every run compared: the CUDA kernels keep cuDNN
 * descriptors and parsed arguments in per-op state and re-set them on a shape change.
 *
 * Tolerance (derived, not tuned): both sides accumulate in FP32 (the CPU kernels are
 * faithful to tensor cores) and round once to the output dtype, so each differs from the
 * exact result by at most u_out |y| (the final rounding: the unit roundoff of the output
 * dtype, u_out = 2^-24 for FLOAT, 2^-11 for FLOAT16, 2^-8 for BFLOAT16, whose significand
 * has 8 bits) plus (k + 2) u32 times the size of the terms summed, k being the
 * longest reduction behind one output; the terms are bounded by the output tensor's
 * largest magnitude M (inputs are O(1)). We allow twice the sum of both sides' bounds:
 *   |dev - ref| <= 4 u_out |ref| + 4 (k + 2) u32 (|ref| + M) + 2^-23 (FP16 subnormals),
 * integer outputs exactly. The rule is the same in every pass; only u_out follows each
 * output's dtype (an op's FLOAT outputs, BN's running statistics say, keep 2^-24 in the
 * 16-bit passes too). A case whose op has no CUDA kernel, or whose kernel refuses the
 * pass's dtype or layout with DM_ERR_UNSUPPORTED, is skipped (printed, with its pass);
 * any other refusal fails it, a library's (cuDNN's NOT_SUPPORTED for BFLOAT16, say, comes
 * back as DM_ERR_DEVICE) included, as does a dtype error from the schema inference the
 * CUDA kernels share with the CPU's.
 *
 * Without a usable GPU the test prints why and exits 77. With DM_GPU_TEST_SELF=1 the
 * device side is the reference net itself in a second workspace on the CPU, so the
 * harness (feeds, prep nets, comparison) is exercised on machines without a GPU; every
 * case must then pass.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/half.h"
#include "core/registry.h"
#include "demitasse.h"
#include "gpu_cases.h"

#define U32 0x1p-24
#define U16 0x1p-11
#define UBF16 0x1p-8
#define TEXT_CAP 8192

typedef struct text {
  char buf[TEXT_CAP];
  size_t len;
  int overflow;
} text;

/* One pass: the mode bit that selects it, its name in the output, the dtype of 'T'. */
typedef struct pass {
  int bit;
  const char *name;
  dm_dtype t;
} pass;

static const pass passes[] = {
    {GC_FP32, "FP32", DM_FLOAT}, {GC_FP16, "FP16", DM_FLOAT16}, {GC_BF16, "BF16", DM_BFLOAT16}};

static void add(text *t, const char *fmt, ...) DM_PRINTF(2, 3);
static void add(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, TEXT_CAP - t->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= TEXT_CAP - t->len)
    t->overflow = 1;
  else
    t->len += (size_t)n;
}

/* The op itself; on the device its blobs carry the _cuda suffix. */
static void add_op(text *t, const gpu_case *c, int dev) {
  const char *sfx = dev ? "_cuda" : "";
  add(t, "op { ");
  for (int i = 0; c->in[i]; i++)
    add(t, "input: '%s%s' ", c->in[i], sfx);
  for (int i = 0; c->out[i]; i++)
    add(t, "output: '%s%s' ", c->out[i], sfx);
  add(t, "%s%s }\n", c->op, dev ? " device_option { device_type: 1 }" : "");
}

static void build_nets(const gpu_case *c, int self, text *ref, text *dev) {
  add(ref, "name: 'ref'\n");
  add_op(ref, c, 0);
  if (self) {
    *dev = *ref;
    return;
  }
  add(dev, "name: 'dev'\n");
  for (int i = 0; c->in[i]; i++)
    add(dev, "op { input: '%s' output: '%s_cuda' type: 'CopyCPUToGPU' "
             "device_option { device_type: 1 } }\n", c->in[i], c->in[i]);
  add_op(dev, c, 1);
  for (int i = 0; c->out[i]; i++)
    add(dev, "op { input: '%s_cuda' output: '%s_cpu' type: 'CopyGPUToCPU' "
             "device_option { device_type: 1 } }\n", c->out[i], c->out[i]);
}

static double uniform(uint64_t *s, double lo, double hi) {
  uint64_t x = *s;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  *s = x;
  return lo + (hi - lo) * ((double)(x >> 11) * 0x1p-53);
}

static dm_dtype feed_dtype(char t, dm_dtype tt) {
  switch (t) {
  case 'T': return tt;
  case 'i': return DM_INT32;
  case 'l': return DM_INT64;
  default: return DM_FLOAT;
  }
}

/* Feeds the same seeded values into both workspaces. */
static dm_status feed(const gpu_feed *f, dm_dtype tt, uint64_t seed, dm_workspace *a,
                      dm_workspace *b) {
  int64_t n = 1;
  for (int d = 0; d < f->ndim; d++)
    n *= f->dims[d];
  dm_dtype dt = feed_dtype(f->t, tt);
  void *buf = malloc((size_t)n * 8 + 8);
  if (!buf)
    return DM_ERR_NOMEM;
  for (int64_t i = 0; i < n; i++) {
    double v = f->lo == f->hi ? f->lo : uniform(&seed, f->lo, f->hi);
    if (f->inf_at == i + 1)
      v = INFINITY;
    switch (dt) {
    case DM_FLOAT16: ((uint16_t *)buf)[i] = dm_float_to_half((float)v); break;
    case DM_BFLOAT16: ((uint16_t *)buf)[i] = dm_float_to_bf16((float)v); break;
    case DM_INT32: ((int32_t *)buf)[i] = (int32_t)floor(v); break;
    case DM_INT64: ((int64_t *)buf)[i] = (int64_t)floor(v); break;
    default: ((float *)buf)[i] = (float)v; break;
    }
  }
  dm_status s = dm_workspace_feed(a, f->name, dt, f->ndim, f->dims, buf);
  if (s == DM_OK)
    s = dm_workspace_feed(b, f->name, dt, f->ndim, f->dims, buf);
  free(buf);
  return s;
}

static double elem(const dm_tensor *t, int64_t i) {
  const void *p = dm_tensor_data(t);
  switch (dm_tensor_dtype(t)) {
  case DM_FLOAT: return ((const float *)p)[i];
  case DM_FLOAT16: return dm_half_to_float(((const uint16_t *)p)[i]);
  case DM_BFLOAT16: return dm_bf16_to_float(((const uint16_t *)p)[i]);
  case DM_DOUBLE: return ((const double *)p)[i];
  case DM_INT32: return ((const int32_t *)p)[i];
  case DM_INT64: return (double)((const int64_t *)p)[i];
  case DM_BOOL:
  case DM_UINT8: return ((const uint8_t *)p)[i];
  default: return NAN;
  }
}

/* Compares one output; prints and returns 0 on the first mismatch. */
static int compare(const char *label, const char *mode, const char *name, const dm_tensor *r,
                   const dm_tensor *d, int k) {
  if (dm_tensor_dtype(r) != dm_tensor_dtype(d) || dm_tensor_ndim(r) != dm_tensor_ndim(d)) {
    printf("FAIL %s %s: %s: dtype/rank %s/%d on the CPU, %s/%d on the device\n", label, mode,
           name, dm_dtype_name(dm_tensor_dtype(r)), dm_tensor_ndim(r),
           dm_dtype_name(dm_tensor_dtype(d)), dm_tensor_ndim(d));
    return 0;
  }
  for (int i = 0; i < dm_tensor_ndim(r); i++)
    if (dm_tensor_dims(r)[i] != dm_tensor_dims(d)[i]) {
      printf("FAIL %s %s: %s: dim %d is %lld on the CPU, %lld on the device\n", label, mode,
             name, i, (long long)dm_tensor_dims(r)[i], (long long)dm_tensor_dims(d)[i]);
      return 0;
    }
  dm_dtype dt = dm_tensor_dtype(r);
  int exact = dt != DM_FLOAT && dt != DM_FLOAT16 && dt != DM_BFLOAT16 && dt != DM_DOUBLE;
  double u_out = dt == DM_FLOAT16 ? U16 : dt == DM_BFLOAT16 ? UBF16 : U32;
  int64_t n = dm_tensor_numel(r);
  double m = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(elem(r, i)) && fabs(elem(r, i)) > m)
      m = fabs(elem(r, i));
  for (int64_t i = 0; i < n; i++) {
    double a = elem(r, i), b = elem(d, i);
    if ((isnan(a) && isnan(b)) || a == b)
      continue;
    double tol = exact || !isfinite(a)
                     ? 0
                     : 4 * u_out * fabs(a) + 4 * (k + 2) * U32 * (fabs(a) + m) + 0x1p-23;
    if (!(fabs(a - b) <= tol)) {
      printf("FAIL %s %s: %s[%lld]: CPU %.9g, device %.9g (|diff| %.3g > tolerance %.3g)\n",
             label, mode, name, (long long)i, a, b, fabs(a - b), tol);
      return 0;
    }
  }
  return 1;
}

static int has_cuda_kernel(const char *type) {
  return dm_kernel_exists(type, DM_CUDA, "CUDNN") || dm_kernel_exists(type, DM_CUDA, "");
}

/* The op type from "type: 'X' ..." into buf. */
static const char *op_type(const char *op, char *buf, size_t cap) {
  const char *p = strchr(op, '\'');
  size_t n = p ? strcspn(p + 1, "'") : 0;
  if (!p || n >= cap)
    return "";
  memcpy(buf, p + 1, n);
  buf[n] = 0;
  return buf;
}

enum { PASS, FAIL, SKIP };

/* Runs a net given as text in ws; the workspace owns it. */
static dm_status run_net(dm_workspace *ws, const char *t) {
  dm_net *net = NULL;
  dm_status s = dm_workspace_create_net_bytes(ws, t, strlen(t), 1, &net);
  return s == DM_OK ? dm_net_run(net) : s;
}

/* Feeds every input of case ci for one run, at batch nb (N, dim 0 of the first feed, in
 * the table; see GC_RESHAPE), both workspaces alike. The seed is the case's and the
 * input's, plus the run's, so a run's values differ from the previous run's. */
static dm_status feed_case(int ci, const pass *p, int run, int64_t nb, dm_workspace *wr,
                           dm_workspace *wd) {
  const gpu_case *c = &gpu_cases[ci];
  int64_t n0 = c->feed[0].ndim > 0 ? c->feed[0].dims[0] : -1;
  for (int i = 0; c->feed[i].name; i++) {
    gpu_feed f = c->feed[i];
    if (f.ndim > 0 && f.dims[0] == n0)
      f.dims[0] = nb;
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(ci * 16 + i + 1) +
                    0xD1B54A32D192ED03ull * (uint64_t)run;
    if (feed(&f, p->t, seed, wr, wd) != DM_OK) {
      printf("FAIL %s %s: feeding %s: %s\n", c->label, p->name, f.name, dm_last_error());
      return DM_ERR_INVALID;
    }
  }
  return DM_OK;
}

static int n_reshaped;

/* Runs case ci in pass p. A GC_RESHAPE case runs the same two instantiated nets three
 * times: at batch N, N + 1 and N, every run's outputs compared. The reduction length k
 * grows with the batch in the second run as N + 1 over N (rounded up): the tolerance is
 * still the header's rule for the shape that ran. */
static int run_case(int ci, const pass *p, int self) {
  const gpu_case *c = &gpu_cases[ci];
  text *ref = calloc(1, sizeof *ref), *dev = calloc(1, sizeof *dev);
  dm_workspace *wr = NULL, *wd = NULL;
  dm_net *nr = NULL, *nd = NULL;
  int result = FAIL;
  int runs = c->reshape ? 3 : 1;
  int64_t n0 = c->feed[0].name && c->feed[0].ndim > 0 ? c->feed[0].dims[0] : 0;
  char mode[64];
  snprintf(mode, sizeof mode, "%s", p->name);
  if (!ref || !dev || dm_workspace_create(&wr) != DM_OK || dm_workspace_create(&wd) != DM_OK) {
    printf("FAIL %s %s: setup: %s\n", c->label, mode, dm_last_error());
    goto cleanup;
  }
  if (c->reshape && n0 <= 0) {
    printf("FAIL %s %s: marked GC_RESHAPE, but its first feed has no batch dim\n", c->label,
           mode);
    goto cleanup;
  }
  build_nets(c, self, ref, dev);
  if (ref->overflow || dev->overflow) {
    printf("FAIL %s %s: net text longer than %d bytes\n", c->label, mode, TEXT_CAP);
    goto cleanup;
  }
  for (int run = 0; run < runs; run++) {
    int64_t nb = run == 1 ? n0 + 1 : n0;
    int k = run == 1 ? (int)((c->k * (n0 + 1) + n0 - 1) / n0) : c->k;
    if (run > 0)
      snprintf(mode, sizeof mode, "%s re-shape run %d/3 N=%lld", p->name, run + 1,
               (long long)nb);
    if (feed_case(ci, p, run, nb, wr, wd) != DM_OK)
      goto cleanup;
    if (c->prep) {
      char prep[TEXT_CAP];
      snprintf(prep, sizeof prep, "name: 'prep'\n%s", c->prep);
      if (run_net(wr, prep) != DM_OK || run_net(wd, prep) != DM_OK) {
        printf("FAIL %s %s: prep net: %s\n", c->label, mode, dm_last_error());
        goto cleanup;
      }
    }
    /* The nets are instantiated once, after the first feeds: later runs reuse them. */
    if (!nr && dm_workspace_create_net_bytes(wr, ref->buf, strlen(ref->buf), 1, &nr) != DM_OK) {
      printf("FAIL %s %s: CPU reference: %s\n", c->label, mode, dm_last_error());
      goto cleanup;
    }
    if (dm_net_run(nr) != DM_OK) {
      printf("FAIL %s %s: CPU reference: %s\n", c->label, mode, dm_last_error());
      goto cleanup;
    }
    dm_status s =
        nd ? DM_OK : dm_workspace_create_net_bytes(wd, dev->buf, strlen(dev->buf), 1, &nd);
    if (s == DM_OK)
      s = dm_net_run(nd);
    if (s == DM_ERR_UNSUPPORTED && !self && run == 0) {
      /* A kernel may accept fewer dtypes or layouts than the CPU's; say which. */
      printf("SKIP %s %s: %s\n", c->label, mode, dm_last_error());
      result = SKIP;
      goto cleanup;
    }
    if (s != DM_OK) {
      printf("FAIL %s %s: device net: %s\n", c->label, mode, dm_last_error());
      goto cleanup;
    }
    for (int i = 0; c->out[i]; i++) {
      char dname[128];
      snprintf(dname, sizeof dname, "%s%s", c->out[i], self ? "" : "_cpu");
      const dm_tensor *r = NULL, *d = NULL;
      if (dm_workspace_fetch(wr, c->out[i], &r) != DM_OK ||
          dm_workspace_fetch(wd, dname, &d) != DM_OK) {
        printf("FAIL %s %s: fetching %s: %s\n", c->label, mode, c->out[i], dm_last_error());
        goto cleanup;
      }
      if (!compare(c->label, mode, c->out[i], r, d, k))
        goto cleanup;
    }
    if (run == 0)
      printf("ok   %s %s\n", c->label, mode);
  }
  if (runs > 1) {
    printf("RESHAPE ok %s %s N=%lld,%lld,%lld\n", c->label, p->name, (long long)n0,
           (long long)n0 + 1, (long long)n0);
    n_reshaped++;
  }
  result = PASS;
cleanup:
  dm_workspace_destroy(wr);
  dm_workspace_destroy(wd);
  free(ref);
  free(dev);
  return result;
}

int main(void) {
  const char *env = getenv("DM_GPU_TEST_SELF");
  int self = env && !strcmp(env, "1");
  if (dm_init() != DM_OK) {
    printf("dm_init: %s\n", dm_last_error());
    return 1;
  }
  if (!self) {
    if (dm_device_check(DM_CUDA, 0) != DM_OK) {
      printf("SKIP: %s\n", dm_last_error());
      return 77;
    }
    if (!has_cuda_kernel("CopyCPUToGPU") || !has_cuda_kernel("CopyGPUToCPU")) {
      printf("SKIP: no CUDA kernels for CopyCPUToGPU/CopyGPUToCPU\n");
      return 77;
    }
  }
  printf("%s: %zu cases\n", self ? "self-check (device side on the CPU)" : "CUDA vs CPU",
         sizeof gpu_cases / sizeof gpu_cases[0]);
  int n[3] = {0, 0, 0};
  for (int ci = 0; ci < (int)(sizeof gpu_cases / sizeof gpu_cases[0]); ci++) {
    char tb[64];
    const char *type = op_type(gpu_cases[ci].op, tb, sizeof tb);
    for (size_t pi = 0; pi < sizeof passes / sizeof passes[0]; pi++) {
      const pass *p = &passes[pi];
      if (!(gpu_cases[ci].modes & p->bit))
        continue;
      if (!self && !has_cuda_kernel(type)) {
        printf("SKIP %s %s: no CUDA kernel for %s\n", gpu_cases[ci].label, p->name, type);
        n[SKIP]++;
        continue;
      }
      n[run_case(ci, p, self)]++;
    }
  }
  printf("%d passed, %d failed, %d skipped; %d passed the re-shape pass (N, N+1, N)\n",
         n[PASS], n[FAIL], n[SKIP], n_reshaped);
  if (n[FAIL])
    return 1;
  return n[PASS] ? 0 : 77; /* nothing compared is not a pass */
}
