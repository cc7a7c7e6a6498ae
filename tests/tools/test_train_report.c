/* test_train_report.c: train's metrics CSV and console lines (tools/train_report.c):
 *   - a new CSV's rows carry test_perplexity = exp(test_loss) last, empty without a test
 *     loss, read back and compared with exp() in double (to the 9 digits written);
 *   - the console's test line: a classifier's (an accuracy) as before, a language
 *     model's (a loss, no accuracy) with the perplexity;
 *   - --resume of a CSV written before the column (the 8-column header): the rows up to
 *     the checkpoint kept byte for byte with the column added from their test_loss, the
 *     rows past it and a torn last row dropped, the header replaced; and of a CSV with
 *     the column: its rows kept as they are.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "demitasse.h"
#include "train_report.h"

static const char header9[] = "iter,loss,accuracy,test_loss,test_accuracy,images_per_s,"
                              "loss_scale,skipped,test_perplexity";
static const char header8[] = "iter,loss,accuracy,test_loss,test_accuracy,images_per_s,"
                              "loss_scale,skipped";

static char dir[] = "/tmp/train_report_XXXXXX";

static int setup(void **state) {
  (void)state;
  return mkdtemp(dir) == NULL;
}

static int teardown(void **state) {
  (void)state;
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) != 0;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  char *buf = calloc(1, 1 << 16);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void spit(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* Field k (0-based) of a CSV line, copied into out ("" when empty or missing); returns
 * the number of fields of the line. */
static int csv_get(const char *line, int k, char *out, size_t cap) {
  int nf = 1;
  out[0] = '\0';
  const char *p = line;
  for (int i = 0;; i++) {
    const char *e = p + strcspn(p, ",\n");
    if (i == k)
      snprintf(out, cap, "%.*s", (int)(e - p), p);
    if (*e != ',')
      return nf;
    nf++;
    p = e + 1;
  }
}

/* The lines of text (modified in place), at most cap. */
static int split_lines(char *text, char **lines, int cap) {
  int n = 0;
  for (char *p = strtok(text, "\n"); p && n < cap; p = strtok(NULL, "\n"))
    lines[n++] = p;
  return n;
}

/* Row `line`'s test_perplexity against exp(its test_loss), both read back. */
static void check_perplexity(const char *line) {
  char tl[64], ppl[64];
  assert_int_equal(csv_get(line, 0, tl, sizeof tl), 9);
  csv_get(line, 3, tl, sizeof tl);
  csv_get(line, 8, ppl, sizeof ppl);
  if (!tl[0]) {
    if (ppl[0])
      fail_msg("row '%s': a perplexity without a test loss", line);
    return;
  }
  double want = exp(strtod(tl, NULL)), got = strtod(ppl, NULL);
  /* written with 9 significant digits: half a unit of the 9th */
  if (!(fabs(got - want) <= 5e-9 * fabs(want)))
    fail_msg("row '%s': perplexity %s, exp(test_loss) = %.17g", line, ppl, want);
}

static void test_new_csv_and_console(void **state) {
  (void)state;
  char csv[256], out[256];
  snprintf(csv, sizeof csv, "%s/new.csv", dir);
  snprintf(out, sizeof out, "%s/stdout.txt", dir);
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  assert_non_null(freopen(out, "w", stdout));
  dm_train_report r;
  dm_status s = dm_report_open(&r, csv, -1);
  const dm_train_point pts[] = {
      {1, 2.0, 0.5, NAN, NAN, 100, NAN, -1},  /* no test pass */
      {2, 1.9, 0.6, 2.5, 0.7, 100, NAN, -1},  /* a classifier's: loss and accuracy */
      {3, 1.8, NAN, 5.0, NAN, 100, NAN, -1},  /* a language model's: a loss alone */
      {4, 1.7, NAN, 0.25, NAN, 100, 512, 0},  /* with loss scaling */
  };
  for (size_t i = 0; s == DM_OK && i < sizeof pts / sizeof *pts; i++)
    s = dm_report_add(&r, &pts[i], 4, 1.0, 1);
  dm_report_close(&r);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved); /* stdout's stream writes to descriptor 1 again */
  if (s != DM_OK)
    fail_msg("%s", dm_last_error());

  char *text = slurp(csv), *lines[16] = {0};
  int n = split_lines(text, lines, 16);
  assert_int_equal(n, 5);
  assert_string_equal(lines[0], header9);
  for (int i = 1; i < n; i++)
    check_perplexity(lines[i]);
  char f[64];
  csv_get(lines[3], 8, f, sizeof f);
  assert_true(f[0]); /* the language model's row has one */
  free(text);

  char *con = slurp(out), *cl[16] = {0}, want[128];
  n = split_lines(con, cl, 16);
  assert_int_equal(n, 4);
  assert_null(strstr(cl[0], "test"));
  snprintf(want, sizeof want, "test loss %.4f acc %.4f", 2.5, 0.7);
  assert_non_null(strstr(cl[1], want));
  assert_null(strstr(cl[1], "ppl"));
  snprintf(want, sizeof want, "test loss %.4f ppl %.2f", 5.0, exp(5.0));
  if (!strstr(cl[2], want))
    fail_msg("console '%s' lacks '%s'", cl[2], want);
  snprintf(want, sizeof want, "test loss %.4f ppl %.2f", 0.25, exp(0.25));
  assert_non_null(strstr(cl[3], want));
  free(con);
}

/* An 8-column CSV as train wrote it before test_perplexity, resumed at iteration 4. */
static void test_resume_old_header(void **state) {
  (void)state;
  char csv[256];
  snprintf(csv, sizeof csv, "%s/old.csv", dir);
  const char *rows[] = {
      "1,2.30258512,0.109375,,,850.5,,-1",
      "2,2.1,0.2,1.98765432,0.25,860,,-1",
      "3,2.0,0.3,,,870,65536,0",
      "4,1.9,0.4,0.693147181,0.5,880,65536,1",
      "5,1.8,0.45,1.5,0.55,890,65536,1", /* past the checkpoint: trained again */
  };
  char text[2048];
  int len = snprintf(text, sizeof text, "%s\n", header8);
  for (int i = 0; i < 5; i++)
    len += snprintf(text + len, sizeof text - (size_t)len, "%s\n", rows[i]);
  snprintf(text + len, sizeof text - (size_t)len, "6,1.7"); /* torn */
  spit(csv, text);

  dm_train_report r;
  dm_status s = dm_report_open(&r, csv, 4);
  if (s != DM_OK)
    fail_msg("%s", dm_last_error());
  assert_int_equal(r.n, 4); /* the plot's first points */
  assert_true(fabs(r.points[1].test_loss - 1.98765432) <= 1e-15);
  dm_train_point p5 = {5, 1.8, 0.45, 3.0, 0.6, 900, 65536, 1};
  s = dm_report_add(&r, &p5, 5, 0, 1);
  dm_report_close(&r);
  if (s != DM_OK)
    fail_msg("%s", dm_last_error());

  char *back = slurp(csv), *lines[16] = {0}, f[64];
  int n = split_lines(back, lines, 16);
  assert_int_equal(n, 6);
  assert_string_equal(lines[0], header9);
  for (int i = 1; i <= 4; i++) {
    /* the old row's 8 fields byte for byte, then the new one */
    size_t k = strlen(rows[i - 1]);
    if (strncmp(lines[i], rows[i - 1], k) || lines[i][k] != ',')
      fail_msg("row %d is '%s', was '%s'", i, lines[i], rows[i - 1]);
    check_perplexity(lines[i]);
  }
  csv_get(lines[2], 8, f, sizeof f);
  assert_true(f[0]);
  csv_get(lines[5], 3, f, sizeof f);
  assert_true(fabs(strtod(f, NULL) - 3.0) <= 0);
  check_perplexity(lines[5]);
  free(back);
}

/* A CSV with the column: resumed, its rows stay as they were. */
static void test_resume_new_header(void **state) {
  (void)state;
  char csv[256];
  snprintf(csv, sizeof csv, "%s/cur.csv", dir);
  char text[1024];
  snprintf(text, sizeof text, "%s\n1,2,0.1,1.5,0.2,10,,-1,4.48168907\n2,1.9,0.2,,,10,,-1,\n"
                              "3,1.8,0.3,,,10,,-1,\n", header9);
  spit(csv, text);
  dm_train_report r;
  dm_status s = dm_report_open(&r, csv, 2);
  dm_report_close(&r);
  if (s != DM_OK)
    fail_msg("%s", dm_last_error());
  char *back = slurp(csv), want[1024];
  snprintf(want, sizeof want, "%s\n1,2,0.1,1.5,0.2,10,,-1,4.48168907\n2,1.9,0.2,,,10,,-1,\n",
           header9);
  assert_string_equal(back, want);
  free(back);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_csv_and_console),
      cmocka_unit_test(test_resume_old_header),
      cmocka_unit_test(test_resume_new_header),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
