/* train_report.c: progress line, metrics CSV and an SVG of the training curves.
 *
 * The CSV's last column, test_perplexity, is exp(test_loss): what a language model's
 * loss (the mean cross-entropy per token, in nats) is read as. It came after the other
 * columns, so a CSV written before it (8 columns) is still read by --resume: its rows are
 * kept with the column filled in from their test_loss. The console shows it on the test
 * line in place of an accuracy when the test pass measured none (a language model's test
 * net scores a loss over tokens; a classifier's line keeps its accuracy). The plot does
 * not draw it: the loss panel has the test loss already, and the same values through
 * exp() would be dominated by the first passes' large ones. */
#include "train_report.h"

#include "core/fileio.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char csv_header[] = "iter,loss,accuracy,test_loss,test_accuracy,images_per_s,"
                                 "loss_scale,skipped,test_perplexity\n";
/* The header of a CSV written before the test_perplexity column. */
static const char csv_header_8[] = "iter,loss,accuracy,test_loss,test_accuracy,images_per_s,"
                                   "loss_scale,skipped\n";

/* A row's test_perplexity: exp(test_loss), empty without a test loss ("%.9g": the other
 * columns' digits; a loss past exp's range reads inf). */
static int perplexity_field(char *buf, size_t cap, double test_loss) {
  return isnan(test_loss) ? snprintf(buf, cap, ",") : snprintf(buf, cap, ",%.9g", exp(test_loss));
}

/* One CSV field as a number: empty is NAN; `*s` moves past the field and its comma. */
static double csv_field(const char **s, const char *end) {
  const char *p = *s;
  double v = NAN;
  if (p < end && *p != ',' && *p != '\n') {
    char *e;
    v = strtod(p, &e);
    p = e;
  }
  while (p < end && *p != ',' && *p != '\n')
    p++;
  if (p < end && *p == ',')
    p++;
  *s = p;
  return v;
}

static dm_status add_point(dm_train_report *r, const dm_train_point *p) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 256;
    dm_train_point *pts = realloc(r->points, cap * sizeof *pts);
    if (!pts)
      return DM_NOMEM("training metrics");
    r->points = pts;
    r->cap = cap;
  }
  r->points[r->n++] = *p;
  return DM_OK;
}

/* The CSV a resumed run continues: the header and the whole rows of the old file up to
 * the checkpoint's iteration `upto`, each iteration once, in order. A killed run leaves
 * rows past its last checkpoint (they are trained again) and maybe a torn last row; both
 * go. Written atomically, so a crash here leaves the old file; the rows kept are also
 * the SVG's first points. A missing file gives a new one, with its header. */
static dm_status reconcile_csv(dm_train_report *r, const char *path, long upto) {
  char *buf = NULL, *out = NULL;
  size_t len = 0;
  dm_status s = DM_OK;
  FILE *f = fopen(path, "rb");
  if (!f && errno != ENOENT)
    return dm_error(DM_ERR_IO, "%s: cannot open: %s", path, dm_errno_text(errno));
  if (f) {
    size_t cap = 0;
    for (;;) {
      if (len == cap) {
        cap = cap ? 2 * cap : 65536;
        char *b = realloc(buf, cap);
        if (!b) {
          s = DM_NOMEM("the metrics CSV");
          break;
        }
        buf = b;
      }
      size_t got = fread(buf + len, 1, cap - len, f);
      len += got;
      if (got == 0)
        break;
    }
    if (s == DM_OK && ferror(f))
      s = dm_error(DM_ERR_IO, "%s: read failed: %s", path, dm_errno_text(errno));
    fclose(f);
  }
  /* A CSV from before test_perplexity (its header exactly the 8 columns) gains the field
   * in each row kept: at most a comma and %.9g's 15 characters. */
  size_t hl = sizeof csv_header_8 - 1, rows = 0;
  int old8 = buf && len >= hl && !memcmp(buf, csv_header_8, hl);
  for (size_t i = 0; old8 && i < len; i++)
    rows += buf[i] == '\n';
  if (s == DM_OK && !(out = malloc(sizeof csv_header + len + rows * 24)))
    s = DM_NOMEM("the metrics CSV");
  if (s != DM_OK) {
    free(buf);
    return s;
  }
  size_t n = sizeof csv_header - 1;
  memcpy(out, csv_header, n);
  const char *p = buf, *end = buf + len;
  const char *nl = p ? memchr(p, '\n', len) : NULL;
  p = nl ? nl + 1 : end; /* the old header (or a torn one) is replaced by ours */
  long last = 0;
  while (s == DM_OK && p < end) {
    nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
      break; /* a torn last row */
    char *e;
    errno = 0;
    long it = strtol(p, &e, 10);
    if (e != p && *e == ',' && errno == 0 && it > last && it <= upto) {
      const char *q = e + 1;
      dm_train_point pt = {it, NAN, NAN, NAN, NAN, NAN, NAN, -1};
      pt.loss = csv_field(&q, nl);
      pt.accuracy = csv_field(&q, nl);
      pt.test_loss = csv_field(&q, nl);
      pt.test_accuracy = csv_field(&q, nl);
      pt.images_per_s = csv_field(&q, nl);
      pt.loss_scale = csv_field(&q, nl);
      double sk = csv_field(&q, nl);
      pt.skipped = isnan(sk) ? -1 : (long)sk;
      s = add_point(r, &pt);
      memcpy(out + n, p, (size_t)(nl - p));
      n += (size_t)(nl - p);
      if (old8)
        n += (size_t)perplexity_field(out + n, 24, pt.test_loss);
      out[n++] = '\n';
      last = it;
    }
    p = nl + 1;
  }
  free(buf);
  if (s == DM_OK)
    s = dm_write_file_atomic(path, out, n);
  free(out);
  return s;
}

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

dm_status dm_report_open(dm_train_report *r, const char *csv_path, long resume_iter) {
  memset(r, 0, sizeof *r);
  r->tty = isatty(STDOUT_FILENO);
  r->last_print_s = monotonic_s();
  if (!csv_path)
    return DM_OK;
  /* A new CSV replaces the old one atomically, with its header (core/fileio.h): when it
   * cannot be written the old file stays. A resumed run first rewrites the old one up
   * to the checkpoint's iteration (reconcile_csv), so that every iteration is in it
   * once however often the run was killed. The rows are then appended, each one
   * flushed, and a row that cannot be written whole is cut off again (append_row) and
   * its error returned. */
  if (resume_iter < 0)
    DM_TRY(dm_write_file_atomic(csv_path, csv_header, sizeof csv_header - 1));
  else
    DM_TRY(reconcile_csv(r, csv_path, resume_iter));
  r->csv = fopen(csv_path, "a");
  if (!r->csv)
    return dm_error(DM_ERR_IO, "%s: cannot open for writing: %s", csv_path,
                    dm_errno_text(errno));
  r->csv_path = strdup(csv_path);
  if (!r->csv_path)
    return DM_NOMEM("a path");
  if (!(r->svg_path = dm_report_svg_path(csv_path)))
    return DM_NOMEM("a path");
  return DM_OK;
}

char *dm_report_svg_path(const char *csv_path) {
  size_t len = strlen(csv_path);
  char *svg = malloc(len + 5);
  if (!svg)
    return NULL;
  memcpy(svg, csv_path, len + 1);
  char *dot = strrchr(svg, '.');
  strcpy(dot && !strchr(dot, '/') ? dot : svg + len, ".svg");
  return svg;
}

static void csv_num(FILE *f, double v) {
  if (isnan(v))
    fputc(',', f);
  else
    fprintf(f, ",%.9g", v);
}

/* One row, flushed; a row that fails (a full disk) is cut off again, so the file ends
 * with whole rows. */
static dm_status append_row(dm_train_report *r, const dm_train_point *p) {
  FILE *f = r->csv;
  long at = ftell(f);
  fprintf(f, "%ld", p->iter);
  csv_num(f, p->loss);
  csv_num(f, p->accuracy);
  csv_num(f, p->test_loss);
  csv_num(f, p->test_accuracy);
  csv_num(f, p->images_per_s);
  csv_num(f, p->loss_scale);
  char ppl[32];
  perplexity_field(ppl, sizeof ppl, p->test_loss);
  fprintf(f, ",%ld%s\n", p->skipped, ppl);
  errno = 0;
  if (fflush(f) == 0 && !ferror(f))
    return DM_OK;
  int err = errno ? errno : EIO;
  /* drop what is buffered, then cut the file back to the last whole row */
  int fd = dup(fileno(f));
  fclose(f);
  r->csv = NULL;
  if (fd >= 0) {
    if (at >= 0 && ftruncate(fd, (off_t)at) != 0) {
      /* nothing more to do: the error below is the one to report */
    }
    close(fd);
  }
  return dm_error(DM_ERR_IO, "%s: write failed: %s", r->csv_path, dm_errno_text(err));
}

dm_status dm_report_add(dm_train_report *r, const dm_train_point *p, long total, double eta_s,
                        int log_now) {
  DM_TRY(add_point(r, p));
  int row = log_now || r->tty;
  if (r->csv && row)
    DM_TRY(append_row(r, p));
  double now = monotonic_s();
  if (!r->tty && !row && now - r->last_print_s < DM_REPORT_PROGRESS_S)
    return DM_OK;
  char line[256];
  int n = snprintf(line, sizeof line, "iter %ld/%ld  loss %.4f  acc %.3f  %.0f img/s  ETA %.0fs",
                   p->iter, total, p->loss, p->accuracy, p->images_per_s, eta_s);
  if (!isnan(p->loss_scale) && n > 0 && (size_t)n < sizeof line)
    n += snprintf(line + n, sizeof line - (size_t)n, "  S %g  skipped %ld", p->loss_scale,
                  p->skipped);
  /* A test pass ran when it measured a loss or an accuracy (a language model's test net
   * has no accuracy: its line shows the perplexity instead). */
  int tested = !isnan(p->test_accuracy) || !isnan(p->test_loss);
  if (tested && n > 0 && (size_t)n < sizeof line) {
    if (!isnan(p->test_accuracy))
      snprintf(line + n, sizeof line - (size_t)n, "  test loss %.4f acc %.4f", p->test_loss,
               p->test_accuracy);
    else
      snprintf(line + n, sizeof line - (size_t)n, "  test loss %.4f ppl %.2f", p->test_loss,
               exp(p->test_loss));
  }
  if (r->tty) {
    /* one line rewritten in place; test results stay on their own line */
    printf("\r\033[K%s%s", line, tested ? "\n" : "");
    fflush(stdout);
  } else {
    printf("%s\n", line);
    fflush(stdout);
    r->last_print_s = now;
  }
  return DM_OK;
}

/* The plot. Training values are per batch and zigzag (a batch of 64 is right 60 or 70
 * percent of the time by luck), so each panel draws their mean over a trailing window
 * (SMOOTH_WINDOW points, fewer at the start), said so in the legend; the loss panel
 * keeps the per-batch values as a faint line behind it. Both axes have ticks at 1, 2
 * or 5 times a power of ten with labels, and a light grid. Tick labels are centred on
 * their tick (text-anchor middle, dominant-baseline middle), so that a reader, or a test,
 * can map the points back to values from them. */
#define SMOOTH_WINDOW 20

/* A tick step of 1, 2 or 5 times a power of ten that cuts span into about `target`. */
static double nice_step(double span, int target) {
  double raw = span / target;
  double p = pow(10, floor(log10(raw)));
  double m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* Decimals that show a multiple of step exactly (0.25 -> 2, 5 -> 0). */
static int step_decimals(double step) {
  int d = 0;
  while (d < 8 && fabs(step * pow(10, d) - round(step * pow(10, d))) > 1e-9 * pow(10, d))
    d++;
  return d;
}

static double field(const dm_train_point *p, size_t off) {
  return *(const double *)((const char *)p + off);
}

/* out[i]: the mean of the field's finite values at the points of the last SMOOTH_WINDOW
 * iterations up to point i's (NAN where point i has none). Over iterations, not points:
 * the points are every iteration of this run but may be every log_every-th before a
 * resume (the CSV's rows), and a window of points would then span thousands. */
static void smooth(const dm_train_report *r, size_t off, double *out) {
  size_t first = 0; /* the window's first point */
  for (size_t i = 0; i < r->n; i++) {
    out[i] = NAN;
    if (!isfinite(field(&r->points[i], off)))
      continue;
    while (r->points[first].iter <= r->points[i].iter - SMOOTH_WINDOW)
      first++;
    double sum = 0; /* summed afresh: at most SMOOTH_WINDOW points, and no drift */
    int have = 0;
    for (size_t k = first; k <= i; k++) {
      double v = field(&r->points[k], off);
      if (isfinite(v))
        sum += v, have++;
    }
    out[i] = sum / have;
  }
}

typedef struct plot_box {
  double x0, y0, w, h;   /* the panel's frame in pixels */
  double lo, hi, xmax;   /* the values at its bottom and top, the iteration at its right */
} plot_box;

static double px(const plot_box *b, long iter) { return b->x0 + b->w * (double)iter / b->xmax; }
static double py(const plot_box *b, double v) {
  return b->y0 + b->h - b->h * (v - b->lo) / (b->hi - b->lo);
}

/* One series as a polyline of class `cls`: values[i] at points[i].iter, NANs skipped. */
static void series(FILE *f, const dm_train_report *r, const plot_box *b, const double *values,
                   const char *cls, const char *style) {
  fprintf(f, "<polyline class='%s' fill='none' %s points='", cls, style);
  for (size_t i = 0; i < r->n; i++)
    if (isfinite(values[i]))
      fprintf(f, "%.3f,%.3f ", px(b, r->points[i].iter), py(b, values[i]));
  fprintf(f, "'/>\n");
}

static void axes(FILE *f, const plot_box *b, double ystep, double xstep) {
  int yd = step_decimals(ystep);
  for (int k = 0;; k++) {
    double v = b->lo + k * ystep;
    if (v > b->hi + ystep * 1e-6)
      break;
    double y = py(b, v);
    fprintf(f, "<line x1='%.3f' y1='%.3f' x2='%.3f' y2='%.3f' stroke='#eee'/>\n", b->x0, y,
            b->x0 + b->w, y);
    fprintf(f, "<line x1='%.3f' y1='%.3f' x2='%.3f' y2='%.3f' stroke='#888'/>\n", b->x0 - 4, y,
            b->x0, y);
    fprintf(f, "<text class='ytick' x='%.3f' y='%.3f' font-size='10' text-anchor='end' "
               "dominant-baseline='middle'>%.*f</text>\n", b->x0 - 6, y, yd, v);
  }
  for (int k = 0;; k++) {
    double it = k * xstep;
    if (it > b->xmax + xstep * 1e-6)
      break;
    double x = b->x0 + b->w * it / b->xmax;
    fprintf(f, "<line x1='%.3f' y1='%.3f' x2='%.3f' y2='%.3f' stroke='#888'/>\n", x,
            b->y0 + b->h, x, b->y0 + b->h + 4);
    fprintf(f, "<text class='xtick' x='%.3f' y='%.3f' font-size='10' text-anchor='middle' "
               "dominant-baseline='middle'>%.0f</text>\n", x, b->y0 + b->h + 12, it);
  }
  fprintf(f, "<text x='%.3f' y='%.3f' font-size='10' text-anchor='middle'>iteration</text>\n",
          b->x0 + b->w / 2, b->y0 + b->h + 28);
}

/* One panel: the training series of field `off` smoothed (and per batch, faint, with
 * show_raw) and the test series of `test_off`, over iterations. */
static dm_status panel(FILE *f, const dm_train_report *r, double x0, double y0, double w,
                       double h, const char *title, size_t off, size_t test_off, int show_raw) {
  double *sm = malloc((r->n ? r->n : 1) * sizeof *sm);
  double *raw = malloc((r->n ? r->n : 1) * sizeof *raw);
  double *test = malloc((r->n ? r->n : 1) * sizeof *test);
  if (!sm || !raw || !test) {
    free(sm);
    free(raw);
    free(test);
    return DM_NOMEM("the plot");
  }
  smooth(r, off, sm);
  double lo = INFINITY, hi = -INFINITY;
  long imax = 1;
  for (size_t i = 0; i < r->n; i++) {
    raw[i] = field(&r->points[i], off);
    test[i] = field(&r->points[i], test_off);
    double vals[3] = {show_raw ? raw[i] : NAN, sm[i], test[i]};
    for (int k = 0; k < 3; k++)
      if (isfinite(vals[k])) {
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
  double ystep = nice_step(hi - lo, 5), xstep = nice_step((double)imax, 5);
  if (xstep < 1)
    xstep = 1;
  plot_box b = {x0, y0, w, h, floor(lo / ystep) * ystep, ceil(hi / ystep) * ystep,
                ceil((double)imax / xstep) * xstep};
  if (!(b.lo < b.hi))
    b.hi = b.lo + ystep;
  fprintf(f, "<rect x='%g' y='%g' width='%g' height='%g' fill='none' stroke='#888'/>\n", x0, y0,
          w, h);
  fprintf(f, "<text x='%g' y='%g' font-size='14'>%s</text>\n", x0, y0 - 8, title);
  axes(f, &b, ystep, xstep);
  if (show_raw)
    series(f, r, &b, raw, "train-raw", "stroke='#1f77b4' stroke-opacity='0.3' stroke-width='1'");
  series(f, r, &b, sm, "train-smoothed", "stroke='#1f77b4' stroke-width='1.8'");
  series(f, r, &b, test, "test", "stroke='#d62728' stroke-width='1.8'");
  for (size_t i = 0; i < r->n; i++) /* a mark per test pass: one pass draws no line */
    if (isfinite(test[i]))
      fprintf(f, "<circle class='test-mark' cx='%.3f' cy='%.3f' r='2.5' fill='#d62728'/>\n",
              px(&b, r->points[i].iter), py(&b, test[i]));
  fprintf(f, "<text class='legend' x='%g' y='%g' font-size='10' text-anchor='end'>"
             "<tspan fill='#1f77b4'>train: mean of the last %d iterations%s</tspan>"
             "<tspan fill='#d62728' dx='14'>test</tspan></text>\n",
          x0 + w, y0 - 8, SMOOTH_WINDOW, show_raw ? " (faint: per batch)" : "");
  free(sm);
  free(raw);
  free(test);
  return DM_OK;
}

dm_status dm_report_write_svg(const dm_train_report *r) {
  if (!r->svg_path)
    return DM_OK;
  dm_atomic_file af; /* replaced atomically: a failed write leaves the old plot */
  DM_TRY(dm_atomic_open(&af, r->svg_path));
  FILE *f = af.f;
  fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='960' height='350' "
             "font-family='sans-serif'>\n<rect width='960' height='350' fill='white'/>\n");
  dm_status s = panel(f, r, 60, 40, 380, 250, "loss", offsetof(dm_train_point, loss),
                      offsetof(dm_train_point, test_loss), 1);
  if (s == DM_OK)
    s = panel(f, r, 550, 40, 380, 250, "accuracy", offsetof(dm_train_point, accuracy),
              offsetof(dm_train_point, test_accuracy), 0);
  fprintf(f, "</svg>\n");
  if (s != DM_OK) {
    dm_atomic_abort(&af); /* removes the temporary file; the old plot stays */
    return s;
  }
  return dm_atomic_commit(&af);
}

void dm_report_close(dm_train_report *r) {
  if (r->tty && r->n)
    printf("\n");
  if (r->csv)
    fclose(r->csv);
  free(r->svg_path);
  free(r->csv_path);
  free(r->points);
  memset(r, 0, sizeof *r);
}
