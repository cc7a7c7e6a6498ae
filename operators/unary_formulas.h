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

/* LeakyRelu's alpha; HardSigmoid's alpha and beta; Clip's bounds (lo, hi). */
typedef struct dm_unary_params {
  float alpha, beta, lo, hi;
} dm_unary_params;

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
