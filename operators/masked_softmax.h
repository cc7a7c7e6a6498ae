/* masked_softmax.h: MaskedSoftmax's row geometry, shared by the CPU kernel
 * (masked_softmax.c) and the CUDA one (gpu/masked_softmax.c) (internal). */
#ifndef DM_OPERATORS_MASKED_SOFTMAX_H
#define DM_OPERATORS_MASKED_SOFTMAX_H

#include "core/tensor.h"

/* X [..., Tq, Tk] as rows of Tk: nd = X's leading dims (all but the last), lead[k] their
 * sizes, and for a mask m (NULL: none) broadcast to X from the trailing dims, mstride[k]
 * its stride along X's dim k (k <= nd; 0 where it broadcasts). Row r's first mask
 * element is at sum_k ((r / prod(lead[k+1..nd))) % lead[k]) * mstride[k]. */
DM_HIDDEN void dm_masked_softmax_geom(const dm_tensor *x, const dm_tensor *m, int *nd,
                                      int64_t *lead, int64_t *mstride);

#endif
