/* plot_csv.c: draws train's SVG for an existing metrics CSV, for the plot test: opens the
 * CSV as `train --resume` does at iteration UPTO (which loads its rows as the plot's
 * points), writes the SVG beside it and stops.
 * usage: plot_csv METRICS.csv UPTO */
#include <stdio.h>
#include <stdlib.h>

#include "demitasse.h"
#include "train_report.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s METRICS.csv UPTO\n", argv[0]);
    return 2;
  }
  dm_train_report r;
  dm_status s = dm_report_open(&r, argv[1], atol(argv[2]));
  if (s == DM_OK)
    s = dm_report_write_svg(&r);
  if (s != DM_OK)
    fprintf(stderr, "plot_csv: %s\n", dm_last_error());
  dm_report_close(&r);
  return s == DM_OK ? 0 : 1;
}
