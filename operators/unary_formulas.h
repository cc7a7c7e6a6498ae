/* unary_formulas.h: the formulas of the activations of unary_family.h, written once for
 * the CPU kernels (operators/unary_math.c, gcc) and the CUDA kernels (gpu/elementwise.cu,
 * nvcc): y = dm_unary_fwd_<Name>(x, p) and dx = dm_unary_grad_<Name>(s, dy, p), s being Y
 * (X where the row's reads_x is 1), all in FP32, and the dispatch on the kind that both
 * kernels call per element (a switch on a kind that is the same for every element).
 *
 * Plain C with no include of core/ (nvcc never sees those). The CPU results are those of
 * these expressions as written (x86-64's baseline has no FMA to contract them into); nvcc
 * may contract a * b + c, which the GPU tests' tolerances allow. NaN passes through every
 * forward.
 */
#ifndef DM_OPERATORS_UNARY_FORMULAS_H
#define DM_OPERATORS_UNARY_FORMULAS_H

#include <math.h>

#include "hostdev.h"
#include "unary_family.h"

/* The fields the rows' argument lists (unary_family.h) fill: LeakyRelu's alpha;
 * HardSigmoid's alpha and beta; Clip's bounds (lo, hi); Gelu's fast_gelu (fast). */
typedef struct dm_unary_params {
  float alpha, beta, lo, hi, fast;
} dm_unary_params;

/* Gelu: sqrt(2 / pi) and the cubic term's coefficient of the tanh form; below -GELU_LOW
 * X * Phi(X) is under FP32's smallest subnormal, so the forms (whose X * 0 would be NaN
 * at -inf) return -0 there, and their derivatives 0 below it and 1 above GELU_LOW. */
#define DM_GELU_K 0.7978845608028654f
#define DM_GELU_C 0.044715f
#define DM_GELU_LOW 20.0f

static inline DM_HOSTDEV float dm_unary_clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

/* ---- forwards: X -> Y ------------------------------------------------------------ */

static inline DM_HOSTDEV float dm_unary_fwd_Sigmoid(float x, const dm_unary_params *p) {
  (void)p;
  if (x >= 0) /* no overflow of exp for either sign */
    return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}
static inline DM_HOSTDEV float dm_unary_fwd_Tanh(float x, const dm_unary_params *p) {
  (void)p;
  return tanhf(x);
}
static inline DM_HOSTDEV float dm_unary_fwd_LeakyRelu(float x, const dm_unary_params *p) {
  return x > 0 ? x : p->alpha * x;
}
static inline DM_HOSTDEV float dm_unary_fwd_Clip(float x, const dm_unary_params *p) {
  return x < p->lo ? p->lo : x > p->hi ? p->hi : x;
}
static inline DM_HOSTDEV float dm_unary_fwd_HardSigmoid(float x, const dm_unary_params *p) {
  return x != x ? x : dm_unary_clamp01(p->alpha * x + p->beta);
}
static inline DM_HOSTDEV float dm_unary_fwd_HardSwish(float x, const dm_unary_params *p) {
  (void)p;
  return x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x / 6.0f + 0.5f);
}

static inline DM_HOSTDEV float dm_unary_fwd_Erf(float x, const dm_unary_params *p) {
  (void)p;
  return erff(x);
}
static inline DM_HOSTDEV float dm_unary_fwd_Sqrt(float x, const dm_unary_params *p) {
  (void)p;
  return sqrtf(x);
}
static inline DM_HOSTDEV float dm_unary_fwd_Gelu(float x, const dm_unary_params *p) {
  if (x < -DM_GELU_LOW)
    return -0.0f;
  if (p->fast != 0)
    return 0.5f * x * (1.0f + tanhf(DM_GELU_K * (x + DM_GELU_C * x * x * x)));
  return 0.5f * x * erfcf(-x * 0.70710678118654752f); /* erfc: exact in the left tail */
}

/* ---- gradients: S (Y, or X), dY -> dX ----------------------------------------------- */

static inline DM_HOSTDEV float dm_unary_grad_Sigmoid(float y, float dy, const dm_unary_params *p) {
  (void)p;
  return dy * y * (1.0f - y);
}
static inline DM_HOSTDEV float dm_unary_grad_Tanh(float y, float dy, const dm_unary_params *p) {
  (void)p;
  return dy * (1.0f - y * y);
}
static inline DM_HOSTDEV float dm_unary_grad_LeakyRelu(float y, float dy,
                                                        const dm_unary_params *p) {
  return y > 0 ? dy : p->alpha * dy;
}
static inline DM_HOSTDEV float dm_unary_grad_Clip(float y, float dy, const dm_unary_params *p) {
  return y > p->lo && y < p->hi ? dy : 0.0f;
}
static inline DM_HOSTDEV float dm_unary_grad_HardSigmoid(float y, float dy,
                                                          const dm_unary_params *p) {
  return y > 0 && y < 1 ? p->alpha * dy : 0.0f;
}
static inline DM_HOSTDEV float dm_unary_grad_HardSwish(float x, float dy,
                                                        const dm_unary_params *p) {
  (void)p;
  return x < -3.0f ? 0.0f : x > 3.0f ? dy : dy * (2.0f * x + 3.0f) / 6.0f;
}

static inline DM_HOSTDEV float dm_unary_grad_Erf(float x, float dy, const dm_unary_params *p) {
  (void)p;
  return dy * 1.1283791670955126f * expf(-x * x); /* 2 / sqrt(pi) */
}
static inline DM_HOSTDEV float dm_unary_grad_Sqrt(float y, float dy, const dm_unary_params *p) {
  (void)p;
  return dy * 0.5f / y;
}
static inline DM_HOSTDEV float dm_unary_grad_Gelu(float x, float dy, const dm_unary_params *p) {
  if (x < -DM_GELU_LOW)
    return 0.0f * dy;
  if (x > DM_GELU_LOW)
    return dy;
  if (p->fast != 0) {
    float t = tanhf(DM_GELU_K * (x + DM_GELU_C * x * x * x));
    float dt = (1.0f - t * t) * DM_GELU_K * (1.0f + 3.0f * DM_GELU_C * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * dt);
  }
  float cdf = 0.5f * erfcf(-x * 0.70710678118654752f);
  float pdf = 0.3989422804014327f * expf(-0.5f * x * x); /* 1 / sqrt(2 pi) */
  return dy * (cdf + x * pdf);
}

/* ---- by kind ------------------------------------------------------------------------ */

#define DM_UN_FWD_CASE_(Name, ...)                                                          \
  case DM_UN_##Name: return dm_unary_fwd_##Name(x, p);
#define DM_UN_GRAD_CASE_(Name, ...)                                                         \
  case DM_UN_##Name: return dm_unary_grad_##Name(s, dy, p);

static inline DM_HOSTDEV float dm_unary_forward(dm_unary_kind k, const dm_unary_params *p,
                                                float x) {
  switch (k) {
    DM_UNARY_OPS(DM_UN_FWD_CASE_)
  default: return x;
  }
}
static inline DM_HOSTDEV float dm_unary_gradient(dm_unary_kind k, const dm_unary_params *p,
                                                 float s, float dy) {
  switch (k) {
    DM_UNARY_OPS(DM_UN_GRAD_CASE_)
  default: return dy;
  }
}

#undef DM_UN_FWD_CASE_
#undef DM_UN_GRAD_CASE_

#endif
