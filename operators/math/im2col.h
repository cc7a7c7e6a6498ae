/* im2col.h: unfolding image patches into the columns of a matrix, so that a convolution
 * becomes one GEMM, and folding column gradients back (internal).
 *
 * One image and one channel group per call. Pixels outside the image (padding) are
 * zeros in the columns and are dropped when folding back.
 */
#ifndef DM_OPERATORS_MATH_IM2COL_H
#define DM_OPERATORS_MATH_IM2COL_H

#include <stdint.h>

#include "core/status.h"

typedef struct dm_im2col_shape {
  int64_t C;          /* channels this call covers */
  int64_t H, W;       /* input spatial size */
  int64_t kh, kw;     /* kernel */
  int64_t sh, sw;     /* stride */
  int64_t dh, dw;     /* dilation */
  int64_t pt, pl;     /* top and left padding (the tail follows from outH, outW) */
  int64_t outH, outW; /* output spatial size */
} dm_im2col_shape;

/* NCHW. x: (C, H, W) -> col: (C*kh*kw, outH*outW) with row stride ldcol >= outH*outW
 * (so several images can sit side by side in one matrix), row (c*kh + i)*kw + j. */
DM_HIDDEN void dm_im2col_nchw(const dm_im2col_shape *s, const float *x, int64_t ldcol,
                              float *col);
/* The adjoint: x (C, H, W) += fold(col). */
DM_HIDDEN void dm_col2im_nchw(const dm_im2col_shape *s, const float *col, int64_t ldcol,
                              float *x);

/* NHWC. x: (H, W, ldx) with this group's C channels first at each pixel (ldx >= C is
 * the pixel stride, so a group is x + g*C) -> col: (outH*outW, kh*kw*C), column
 * (i*kw + j)*C + c, which matches an NHWC filter row (kh, kw, C). */
DM_HIDDEN void dm_im2col_nhwc(const dm_im2col_shape *s, int64_t ldx, const float *x, float *col);
/* The adjoint: x (H, W, ldx) += fold(col) on this group's C channels. */
DM_HIDDEN void dm_col2im_nhwc(const dm_im2col_shape *s, int64_t ldx, const float *col, float *x);

#endif
