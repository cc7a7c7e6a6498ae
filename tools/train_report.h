/* train_report.h: what `demitasse train` shows and writes while it trains: a live
 * progress line on a terminal (plain log lines otherwise), a metrics CSV, and an SVG
 * picture of the training curves written beside the CSV. */
#ifndef DM_TOOLS_TRAIN_REPORT_H
#define DM_TOOLS_TRAIN_REPORT_H

#include <stdio.h>

#include "core/status.h"

typedef struct dm_train_point {
  long iter;
  double loss, accuracy;           /* training batch (NAN if not measured) */
  double test_loss, test_accuracy; /* NAN unless a test pass ran at this iteration */
  double images_per_s;
  double loss_scale; /* NAN when no loss scaling */
  long skipped;      /* steps skipped on overflow so far (-1: not tracked) */
} dm_train_point;

typedef struct dm_train_report {
  FILE *csv;
  char *csv_path;
  char *svg_path;
  int tty;
  double last_print_s; /* off a terminal: when the last line was printed (monotonic) */
  dm_train_point *points;
  size_t n, cap;
} dm_train_report;

/* csv_path may be NULL (no CSV, no SVG); the SVG goes beside it (.csv -> .svg). The
 * CSV's columns: iter, loss, accuracy, test_loss, test_accuracy, images_per_s,
 * loss_scale, skipped, test_perplexity (= exp(test_loss); an older CSV without it is
 * resumed with it filled in).
 * resume_iter < 0: a new CSV. Otherwise a resumed run from a checkpoint at that
 * iteration: the CSV is rewritten (atomically) to its header and its whole rows up to
 * resume_iter, each iteration once (a killed run's rows past its checkpoint and a torn
 * last row go), and continued; a missing one is started. The rows kept are the SVG's
 * first points. Every row is flushed as it is added, and a failed write is an error. */
DM_HIDDEN dm_status dm_report_open(dm_train_report *r, const char *csv_path, long resume_iter);
/* The SVG's path for csv_path: its extension (or the end) replaced by .svg. malloc'd;
 * NULL when out of memory. */
DM_HIDDEN char *dm_report_svg_path(const char *csv_path);
/* Records a point (call it every iteration: the plot's trailing means are over
 * iterations); with `log_now` (every `log_every` iterations and on test passes), or on a
 * terminal, also a CSV row. Prints the progress line: on a terminal at every call, in
 * place; otherwise with `log_now`, and at least every DM_REPORT_PROGRESS_S seconds (a
 * long run off a terminal is never silent; those lines add no CSV row). */
#define DM_REPORT_PROGRESS_S 10.0
DM_HIDDEN dm_status dm_report_add(dm_train_report *r, const dm_train_point *p, long total_iters,
                                  double eta_s, int log_now);
/* Writes the SVG (called at the end, and after test passes so a killed run has one). */
DM_HIDDEN dm_status dm_report_write_svg(const dm_train_report *r);
DM_HIDDEN void dm_report_close(dm_train_report *r);

#endif
