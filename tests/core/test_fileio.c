/* test_fileio.c: core/fileio.c, files replaced and never overwritten (issue 12, item 2).
 *
 * Checked: the write loop on a descriptor to /dev/full (ENOSPC) fails saying "disk
 * full" (skipped without /dev/full); dm_write_file_atomic replaces a file, and when it
 * cannot create its temporary file (a missing directory) says so and creates nothing;
 * a stdio atomic file that is aborted, or whose writes failed (the errno a writer keeps
 * in .err, ENOSPC), leaves the old file byte-identical and no temporary file; one that
 * commits replaces it; a temporary directory is renamed into place, refused over a
 * non-empty directory, and removed with its files. The CLI's writers on a really full
 * disk: tests/tools/atomic_write_test.sh.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "test_util.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/dm_fileio_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static char *in_dir(const char *name) {
  static char buf[4][256];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 256, "%s/%s", dir, name);
  return p;
}

/* the number of entries of `dir` whose name contains ".tmp." */
static int temps(const char *d) {
  DIR *dd = opendir(d);
  int n = 0;
  for (struct dirent *e; dd && (e = readdir(dd));)
    n += strstr(e->d_name, ".tmp.") != NULL;
  if (dd)
    closedir(dd);
  return n;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static void assert_file(const char *path, const char *text) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char buf[256] = {0};
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  assert_int_equal(n, strlen(text));
  assert_string_equal(buf, text);
}

static void test_dev_full(void **state) {
  (void)state;
  int fd = open("/dev/full", O_WRONLY);
  if (fd < 0)
    skip();
  char data[8192] = {1};
  assert_int_equal(dm_write_fd_all(fd, data, sizeof data, "out.bin"), DM_ERR_IO);
  close(fd);
  assert_non_null(strstr(dm_last_error(), "out.bin: write failed: disk full"));
  assert_non_null(strstr(dm_errno_text(EDQUOT), "disk full"));
  assert_string_equal(dm_errno_text(EACCES), strerror(EACCES));
}

static void test_write_file_atomic(void **state) {
  (void)state;
  const char *p = in_dir("net.pbtxt");
  put(p, "old\n");
  assert_ok(dm_write_file_atomic(p, "new contents\n", 13));
  assert_file(p, "new contents\n");
  assert_int_equal(temps(dir), 0);
  /* no directory for the temporary file: an error naming the file, nothing created */
  const char *q = in_dir("missing/net.pb");
  assert_int_equal(dm_write_file_atomic(q, "x", 1), DM_ERR_IO);
  assert_non_null(strstr(dm_last_error(), "missing/net.pb: cannot create a temporary file"));
  assert_int_equal(access(q, F_OK), -1);
}

static void test_atomic_file(void **state) {
  (void)state;
  const char *p = in_dir("plot.svg");
  put(p, "old plot\n");
  dm_atomic_file af;
  /* aborted */
  assert_ok(dm_atomic_open(&af, p));
  fprintf(af.f, "half a plot");
  dm_atomic_abort(&af);
  assert_file(p, "old plot\n");
  assert_int_equal(temps(dir), 0);
  /* a write failed on a full disk: the commit fails, says so, and removes it */
  assert_ok(dm_atomic_open(&af, p));
  fprintf(af.f, "a plot cut short");
  af.err = ENOSPC;
  assert_int_equal(dm_atomic_commit(&af), DM_ERR_IO);
  assert_non_null(strstr(dm_last_error(), "plot.svg: write failed: disk full"));
  assert_file(p, "old plot\n");
  assert_int_equal(temps(dir), 0);
  /* committed */
  assert_ok(dm_atomic_open(&af, p));
  fprintf(af.f, "new plot\n");
  assert_ok(dm_atomic_commit(&af));
  assert_file(p, "new plot\n");
  assert_int_equal(temps(dir), 0);
  dm_atomic_abort(&af); /* an ended one: nothing */
}

static void test_atomic_dir(void **state) {
  (void)state;
  const char *db = in_dir("db");
  char *tmp = NULL;
  assert_ok(dm_atomic_dir_create(db, &tmp));
  char f[300];
  snprintf(f, sizeof f, "%s/data.mdb", tmp);
  put(f, "records\n");
  assert_ok(dm_atomic_dir_commit(tmp, db));
  free(tmp);
  assert_file(in_dir("db/data.mdb"), "records\n");
  /* over a non-empty directory: refused, the old one kept, the temporary one removed */
  assert_ok(dm_atomic_dir_create(db, &tmp));
  snprintf(f, sizeof f, "%s/data.mdb", tmp);
  put(f, "other records\n");
  assert_int_equal(dm_atomic_dir_commit(tmp, db), DM_ERR_EXISTS);
  dm_atomic_dir_remove(tmp);
  free(tmp);
  assert_file(in_dir("db/data.mdb"), "records\n");
  assert_int_equal(temps(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dev_full),
      cmocka_unit_test_setup_teardown(test_write_file_atomic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_atomic_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_atomic_dir, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
