/* activation.h: Relu's loops on bare buffers, shared by the reference kernels
 * (activation.c) and the oneDNN engine's (dnnl/eltwise.c), which runs them over blocked
 * buffers as they are: an elementwise op does not care about the layout (internal). */
#ifndef DM_OPERATORS_ACTIVATION_H
#define DM_OPERATORS_ACTIVATION_H

#include <stdint.h>

#include "core/status.h"

/* y = max(x, 0) over n elements of FLOAT, FLOAT16 or BFLOAT16, NaN passed through (the
 * overflow check of mixed precision must see it), -0 and -inf to +0; y may be x. */
DM_HIDDEN void dm_relu_buffer(dm_dtype t, const void *x, void *y, int64_t n);
/* dx = dy where y > 0, else 0 (NaN in y: 0); dx may be dy. */
DM_HIDDEN void dm_relu_grad_buffer(dm_dtype t, const void *y, const void *dy, void *dx, int64_t n);

#endif
