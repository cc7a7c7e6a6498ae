/* im2col.c: patch unfolding and its adjoint for NCHW and NHWC images (see im2col.h).
 *
 * The NCHW loops find, per kernel offset, the run of output columns whose input pixels
 * lie inside the image once, so the inner loop has no bounds test (a memcpy at
 * stride 1): im2col is a large share of a small convolution's time.
 */
#include "im2col.h"

#include <string.h>

/* ceil(a / b) for b > 0 and any sign of a. */
static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The output columns [lo, hi) whose input column ow*sw - pl + off lies in [0, W). */
static void valid_run(const dm_im2col_shape *s, int64_t off, int64_t *lo, int64_t *hi) {
  *lo = clamp(ceil_div(s->pl - off, s->sw), 0, s->outW);
  *hi = clamp(ceil_div(s->W + s->pl - off, s->sw), *lo, s->outW);
}

void dm_im2col_nchw(const dm_im2col_shape *s, const float *x, int64_t ldcol, float *col) {
  for (int64_t c = 0; c < s->C; c++)
    for (int64_t i = 0; i < s->kh; i++)
      for (int64_t j = 0; j < s->kw; j++) {
        float *row = col + ((c * s->kh + i) * s->kw + j) * ldcol; /* (outH, outW) */
        int64_t off = j * s->dw, lo, hi;
        valid_run(s, off, &lo, &hi);
        for (int64_t oh = 0; oh < s->outH; oh++) {
          float *r = row + oh * s->outW;
          int64_t ih = oh * s->sh - s->pt + i * s->dh;
          if (ih < 0 || ih >= s->H || lo == hi) {
            memset(r, 0, (size_t)s->outW * sizeof *r);
            continue;
          }
          const float *xs = x + (c * s->H + ih) * s->W + lo * s->sw - s->pl + off;
          memset(r, 0, (size_t)lo * sizeof *r);
          if (s->sw == 1)
            memcpy(r + lo, xs, (size_t)(hi - lo) * sizeof *r);
          else
            for (int64_t ow = lo; ow < hi; ow++)
              r[ow] = xs[(ow - lo) * s->sw];
          memset(r + hi, 0, (size_t)(s->outW - hi) * sizeof *r);
        }
      }
}

void dm_col2im_nchw(const dm_im2col_shape *s, const float *col, int64_t ldcol, float *x) {
  for (int64_t c = 0; c < s->C; c++)
    for (int64_t i = 0; i < s->kh; i++)
      for (int64_t j = 0; j < s->kw; j++) {
        const float *row = col + ((c * s->kh + i) * s->kw + j) * ldcol;
        int64_t off = j * s->dw, lo, hi;
        valid_run(s, off, &lo, &hi);
        for (int64_t oh = 0; oh < s->outH; oh++) {
          int64_t ih = oh * s->sh - s->pt + i * s->dh;
          if (ih < 0 || ih >= s->H || lo == hi)
            continue;
          const float *r = row + oh * s->outW;
          float *xs = x + (c * s->H + ih) * s->W + lo * s->sw - s->pl + off;
          for (int64_t ow = lo; ow < hi; ow++)
            xs[(ow - lo) * s->sw] += r[ow];
        }
      }
}

void dm_im2col_nhwc(const dm_im2col_shape *s, int64_t ldx, const float *x, float *col) {
  const size_t cb = (size_t)s->C * sizeof *col;
  float *dst = col;
  for (int64_t oh = 0; oh < s->outH; oh++)
    for (int64_t ow = 0; ow < s->outW; ow++)
      for (int64_t i = 0; i < s->kh; i++) {
        int64_t ih = oh * s->sh - s->pt + i * s->dh;
        for (int64_t j = 0; j < s->kw; j++, dst += s->C) {
          int64_t iw = ow * s->sw - s->pl + j * s->dw;
          if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W)
            memset(dst, 0, cb);
          else
            memcpy(dst, x + (ih * s->W + iw) * ldx, cb);
        }
      }
}

void dm_col2im_nhwc(const dm_im2col_shape *s, int64_t ldx, const float *col, float *x) {
  const float *src = col;
  for (int64_t oh = 0; oh < s->outH; oh++)
    for (int64_t ow = 0; ow < s->outW; ow++)
      for (int64_t i = 0; i < s->kh; i++) {
        int64_t ih = oh * s->sh - s->pt + i * s->dh;
        for (int64_t j = 0; j < s->kw; j++, src += s->C) {
          int64_t iw = ow * s->sw - s->pl + j * s->dw;
          if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W)
            continue;
          float *xp = x + (ih * s->W + iw) * ldx;
          for (int64_t c = 0; c < s->C; c++)
            xp[c] += src[c];
        }
      }
}
