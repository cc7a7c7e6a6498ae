/* grad_check.h: checks an op's gradient (its gradient maker and gradient kernels) against
 * central finite differences of the forward op, in FP32.
 *
 *     gc_input in[] = {{"X", 4, {2, 3, 5, 5}, x, 1}, {"W", 4, {4, 3, 3, 3}, w, 1}};
 *     gc_check("type: 'Conv' input: 'X' input: 'W' output: 'Y' arg { name: 'kernel' i: 3 }",
 *              in, 2, 1, 3 * 3 * 3);
 *
 * The scalar loss is L = sum_k r_k y_k over the first `n_seeded` outputs with fixed
 * pseudo-random r, so the seeded output gradient is r. For each checked input (up to 64
 * elements each, spread over the tensor) dL/dx from the gradient ops is compared with
 * (L(x+h) - L(x-h)) / 2h. Tolerance (derived, not tuned): the FP32 forward rounds each
 * output with relative error ~ n u (u = 2^-24, n = `reduce_len`, the longest sum behind
 * one output: K for FC, C/group*kH*kW for Conv, D for Softmax), so each L has absolute
 * error e = (n + 2) u sum|r_k y_k| (summed over the outputs that x changes: the rest
 * round identically in both evaluations and cancel), the difference
 * quotient 2e / 2h, and the truncation error h^2/6 |f'''|; we allow
 * 4 e / h + 1e-2 h |x-scale| + 1e-3 |dL/dx|. Inputs must keep h = 1e-2 away from kinks
 * (Relu at 0, max-pool ties).
 */
#ifndef DM_TESTS_GRAD_CHECK_H
#define DM_TESTS_GRAD_CHECK_H

#include <stdint.h>

#include "demitasse.h"

typedef struct gc_input {
  const char *name;
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  const void *data; /* FLOAT (or the dtype below) */
  int check;        /* nonzero: compare this input's gradient */
  dm_dtype dtype;   /* 0 means FLOAT; non-float inputs (labels) are never checked */
} gc_input;

/* Runs the check with cmocka assertions; returns the worst error/tolerance ratio seen. */
double gc_check(const char *op_text, const gc_input *inputs, int n_inputs, int n_seeded,
                int64_t reduce_len);

#endif
