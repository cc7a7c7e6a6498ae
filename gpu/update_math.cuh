/* update_math.cuh: the per-element arithmetic of the update and loss-scaling kernels,
 * shared by the single-tensor kernels (optimizer.cu) and the multi-tensor ones
 * (multi_tensor.cu), so that one MultiMomentumSGDUpdate, MultiAdam, MultiWeightedSum or
 * UnscaleAndCheck launch computes bit for bit what the per-tensor launches compute
 * (internal; .cu files only, after cuda_common.cuh). Each mirrors operators/optimizer.c or loss_scale.c with
 * the _rn intrinsics, so nvcc contracts nothing into an FMA the CPU does not do.
 */
#ifndef DM_GPU_UPDATE_MATH_CUH
#define DM_GPU_UPDATE_MATH_CUH

namespace {
/* optimizer.c's skip_requested, on the device: nonzero or NaN skips. */
__device__ __forceinline__ bool skip_set(const void *p, int t) {
  if (!p)
    return false;
  switch (t) {
  case DMK_BOOL:
  case DMK_UINT8: return *(const uint8_t *)p != 0;
  case DMK_INT32: return *(const int32_t *)p != 0;
  case DMK_INT64: return *(const int64_t *)p != 0;
  case DMK_FLOAT: return !(*(const float *)p == 0.0f);
  case DMK_DOUBLE: return !(*(const double *)p == 0.0);
  case DMK_FLOAT16: return !(__half2float(__ushort_as_half(*(const uint16_t *)p)) == 0.0f);
  default: return true; /* the schema refuses other dtypes */
  }
}

/* MomentumSGDUpdate on element i (optimizer.c's loop body); a skipped step writes only
 * the outputs in other blobs (the identity step). */
__device__ __forceinline__ void momentum_at(int64_t i, const float *g, const float *m,
                                            const float *p, float *ng, float *nm, float *np,
                                            float lrv, float mu, int nesterov, bool skip) {
  if (skip) {
    if (ng != g)
      ng[i] = g[i];
    if (nm != m)
      nm[i] = m[i];
    if (np != p)
      np[i] = p[i];
    return;
  }
  const float gi = g[i], mi = m[i], pi = p[i];
  float adj, mnew;
  if (!nesterov) {
    adj = __fadd_rn(__fmul_rn(lrv, gi), __fmul_rn(mu, mi));
    mnew = adj;
  } else {
    mnew = __fadd_rn(__fmul_rn(mu, mi), __fmul_rn(lrv, gi));
    adj = __fsub_rn(__fmul_rn(__fadd_rn(1.0f, mu), mnew), __fmul_rn(mu, mi));
  }
  nm[i] = mnew;
  ng[i] = adj;
  np[i] = __fsub_rn(pi, adj);
}

/* Adam's correction at step t (optimizer.c's dm_adam_correction), in double as the CPU
 * computes it. */
__device__ __forceinline__ float adam_correction(int64_t t, float b1, float b2) {
  return __double2float_rn(sqrt(1 - pow((double)b2, (double)t)) /
                           (1 - pow((double)b1, (double)t)));
}

/* AdamW's constants from torch's (optimizer.c's dm_adamw_constants, in double): the param
 * factor 1 + lr wd (lr negative) and torch's epsilon inside the corrected quotient. */
__device__ __forceinline__ void adamw_constants(float lrv, float wd, float b2, float eps,
                                                int64_t t, float *decay, float *eps_in) {
  *decay = __double2float_rn(1 + (double)lrv * wd);
  *eps_in = __double2float_rn(eps * sqrt(1 - pow((double)b2, (double)t)));
}

/* Adam on element i, param first multiplied by decay (AdamW; Adam passes 1, which
 * changes no value); a skipped step as momentum_at's. */
__device__ __forceinline__ void adamw_at(int64_t i, const float *w, const float *m,
                                         const float *v, const float *g, float *nw, float *nm,
                                         float *nv, float lrv, float corr, float b1, float b2,
                                         float eps, float decay, bool skip) {
  if (skip) {
    if (nw != w)
      nw[i] = w[i];
    if (nm != m)
      nm[i] = m[i];
    if (nv != v)
      nv[i] = v[i];
    return;
  }
  const float gi = g[i], wi = __fmul_rn(w[i], decay);
  const float c1 = 1 - b1, c2 = 1 - b2;
  const float mi = __fadd_rn(__fmul_rn(m[i], b1), __fmul_rn(gi, c1));
  const float vi = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(__fmul_rn(gi, gi), c2));
  nm[i] = mi;
  nv[i] = vi;
  nw[i] = __fadd_rn(wi, __fdiv_rn(__fmul_rn(__fmul_rn(lrv, corr), mi),
                                  __fadd_rn(__fsqrt_rn(vi), eps)));
}

/* Adam on element i. */
__device__ __forceinline__ void adam_at(int64_t i, const float *w, const float *m,
                                        const float *v, const float *g, float *nw, float *nm,
                                        float *nv, float lrv, float corr, float b1, float b2,
                                        float eps, bool skip) {
  adamw_at(i, w, m, v, g, nw, nm, nv, lrv, corr, b1, b2, eps, 1.0f, skip);
}

/* WeightedSum of two pairs on element i, as optimizer.c's loop (acc = w0 x0; acc += w1 x1);
 * a skipped step copies x0 into y when they differ. */
__device__ __forceinline__ void wsum2_at(int64_t i, const float *x0, const float *x1, float *y,
                                         float w0, float w1, bool skip) {
  if (skip) {
    if (y != x0)
      y[i] = x0[i];
    return;
  }
  y[i] = __fadd_rn(__fmul_rn(w0, x0[i]), __fmul_rn(w1, x1[i]));
}

/* Loss scaling: non-finite tests on the bits, and 1/S once, in double. */
__device__ __forceinline__ bool f32_nonfinite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}
__device__ __forceinline__ bool f16_nonfinite(uint16_t h) { return (h & 0x7c00u) == 0x7c00u; }
__device__ __forceinline__ float unscale_inverse(const float *scale) {
  return __double2float_rn(1.0 / (double)*scale); /* exact for powers of two */
}
/* y[i] = x[i] * inv for FLOAT (H false) or FLOAT16 bit patterns; true when x[i] or y[i]
 * is inf or NaN. */
template <bool H>
__device__ __forceinline__ bool unscale_elem(const void *x, void *y, int64_t i, float inv) {
  if (!H) {
    const float xi = ((const float *)x)[i], yi = __fmul_rn(xi, inv);
    ((float *)y)[i] = yi;
    return f32_nonfinite(xi) | f32_nonfinite(yi);
  }
  const uint16_t xi = ((const uint16_t *)x)[i];
  const uint16_t yi = narrow<false>(__fmul_rn(widen<false>(xi), inv));
  ((uint16_t *)y)[i] = yi;
  return f16_nonfinite(xi) | f16_nonfinite(yi);
}

} // namespace

#endif
