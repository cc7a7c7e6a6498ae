/* train_report.c: progress line, metrics CSV and an SVG of the training curves. */
#include "train_report.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dm_status dm_report_open(dm_train_report *r, const char *csv_path, int resume) {
  memset(r, 0, sizeof *r);
  r->tty = isatty(STDOUT_FILENO);
  if (!csv_path)
    return DM_OK;
  r->csv = fopen(csv_path, resume ? "a" : "w");
  if (!r->csv)
    return dm_error(DM_ERR_IO, "%s: cannot open for writing", csv_path);
  if (!resume || ftell(r->csv) == 0)
    fprintf(r->csv, "iter,loss,accuracy,test_loss,test_accuracy,images_per_s,loss_scale,"
                    "skipped\n");
  size_t len = strlen(csv_path);
  r->svg_path = malloc(len + 5);
  if (!r->svg_path)
    return DM_NOMEM("a path");
  memcpy(r->svg_path, csv_path, len + 1);
  char *dot = strrchr(r->svg_path, '.');
  strcpy(dot && !strchr(dot, '/') ? dot : r->svg_path + len, ".svg");
  return DM_OK;
}

static void csv_num(FILE *f, double v) {
  if (isnan(v))
    fputc(',', f);
  else
    fprintf(f, ",%.9g", v);
}

dm_status dm_report_add(dm_train_report *r, const dm_train_point *p, long total, double eta_s,
                        int log_now) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 256;
    dm_train_point *pts = realloc(r->points, cap * sizeof *pts);
    if (!pts)
      return DM_NOMEM("training metrics");
    r->points = pts;
    r->cap = cap;
  }
  r->points[r->n++] = *p;
  if (r->csv) {
    fprintf(r->csv, "%ld", p->iter);
    csv_num(r->csv, p->loss);
    csv_num(r->csv, p->accuracy);
    csv_num(r->csv, p->test_loss);
    csv_num(r->csv, p->test_accuracy);
    csv_num(r->csv, p->images_per_s);
    csv_num(r->csv, p->loss_scale);
    fprintf(r->csv, ",%ld\n", p->skipped);
  }
  char line[256];
  int n = snprintf(line, sizeof line, "iter %ld/%ld  loss %.4f  acc %.3f  %.0f img/s  ETA %.0fs",
                   p->iter, total, p->loss, p->accuracy, p->images_per_s, eta_s);
  if (!isnan(p->loss_scale) && n > 0 && (size_t)n < sizeof line)
    n += snprintf(line + n, sizeof line - (size_t)n, "  S %g  skipped %ld", p->loss_scale,
                  p->skipped);
  if (!isnan(p->test_accuracy) && n > 0 && (size_t)n < sizeof line)
    snprintf(line + n, sizeof line - (size_t)n, "  test loss %.4f acc %.4f", p->test_loss,
             p->test_accuracy);
  if (r->tty) {
    /* one line rewritten in place; test results stay on their own line */
    printf("\r\033[K%s%s", line, !isnan(p->test_accuracy) ? "\n" : "");
    fflush(stdout);
  } else if (log_now || !isnan(p->test_accuracy)) {
    printf("%s\n", line);
    fflush(stdout);
  }
  return DM_OK;
}

/* One panel: the series of field `off` (train) and `test_off` over iterations. */
static void panel(FILE *f, const dm_train_report *r, double x0, double y0, double w, double h,
                  const char *title, size_t off, size_t test_off) {
  double lo = INFINITY, hi = -INFINITY;
  long imax = 1;
  for (size_t i = 0; i < r->n; i++) {
    const char *p = (const char *)&r->points[i];
    double vals[2] = {*(const double *)(p + off), *(const double *)(p + test_off)};
    for (int k = 0; k < 2; k++)
      if (!isnan(vals[k]) && isfinite(vals[k])) {
        lo = fmin(lo, vals[k]);
        hi = fmax(hi, vals[k]);
      }
    if (r->points[i].iter > imax)
      imax = r->points[i].iter;
  }
  if (!(lo < hi)) {
    lo = isfinite(lo) ? lo - 1 : 0;
    hi = lo + 2;
  }
  fprintf(f, "<rect x='%g' y='%g' width='%g' height='%g' fill='none' stroke='#888'/>\n", x0, y0,
          w, h);
  fprintf(f, "<text x='%g' y='%g' font-size='14'>%s</text>\n", x0, y0 - 6, title);
  fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='end'>%.4g</text>\n", x0 - 4,
          y0 + 10, hi);
  fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='end'>%.4g</text>\n", x0 - 4,
          y0 + h, lo);
  fprintf(f, "<text x='%g' y='%g' font-size='10' text-anchor='end'>iteration %ld</text>\n",
          x0 + w, y0 + h + 14, imax);
  const char *colour[2] = {"#1f77b4", "#d62728"};
  for (int k = 0; k < 2; k++) {
    size_t o = k ? test_off : off;
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.5' points='", colour[k]);
    for (size_t i = 0; i < r->n; i++) {
      double v = *(const double *)((const char *)&r->points[i] + o);
      if (isnan(v) || !isfinite(v))
        continue;
      fprintf(f, "%.1f,%.1f ", x0 + w * (double)r->points[i].iter / (double)imax,
              y0 + h - h * (v - lo) / (hi - lo));
    }
    fprintf(f, "'/>\n");
  }
  fprintf(f, "<text x='%g' y='%g' font-size='10' fill='%s'>train</text>\n", x0 + w - 70, y0 + 14,
          colour[0]);
  fprintf(f, "<text x='%g' y='%g' font-size='10' fill='%s'>test</text>\n", x0 + w - 30, y0 + 14,
          colour[1]);
}

dm_status dm_report_write_svg(const dm_train_report *r) {
  if (!r->svg_path)
    return DM_OK;
  FILE *f = fopen(r->svg_path, "w");
  if (!f)
    return dm_error(DM_ERR_IO, "%s: cannot open for writing", r->svg_path);
  fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='900' height='320' "
             "font-family='sans-serif'>\n<rect width='900' height='320' fill='white'/>\n");
  panel(f, r, 60, 30, 360, 250, "loss", offsetof(dm_train_point, loss),
        offsetof(dm_train_point, test_loss));
  panel(f, r, 510, 30, 360, 250, "accuracy", offsetof(dm_train_point, accuracy),
        offsetof(dm_train_point, test_accuracy));
  fprintf(f, "</svg>\n");
  if (fclose(f) != 0)
    return dm_error(DM_ERR_IO, "%s: write failed", r->svg_path);
  return DM_OK;
}

void dm_report_close(dm_train_report *r) {
  if (r->tty && r->n)
    printf("\n");
  if (r->csv)
    fclose(r->csv);
  free(r->svg_path);
  free(r->points);
  memset(r, 0, sizeof *r);
}
