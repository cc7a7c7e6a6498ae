/* test_layout.c: data in a layout other than plain row-major, carried by a tensor's
 * storage (core/tensor.h, dm_layout_ops), as the oneDNN engine's blocked formats are,
 * checked with a fake layout so that the rules hold whatever engine is built.
 *
 * The fake layout stores the elements in reverse order followed by a padding tail (as
 * blocked formats pad channels), so its buffer is larger than the plain one and reading
 * it as plain gives wrong values: any path that forgets to convert shows.
 *
 * Checked: reading (dm_tensor_data, dm_tensor_mutable_data) converts once and drops the
 * layout; dm_tensor_nbytes answers the plain size; a resize for plain data clears the
 * layout of a buffer of its own and leaves a shared one to its other reader; set_shape,
 * make_unique, copy and the public fetch all see plain values; the executor converts the
 * inputs of a reference kernel in their blobs and drops a blocked output it will write;
 * a conversion that would pass the workspace's memory cap fails cleanly; every recorded
 * description is freed exactly once; storage versions change with every writer only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "core/workspace.h"
#include "demitasse_plugin.h"
#include "test_util.h"

enum { PAD = 5 }; /* elements of padding after the data */

static int descs_made, descs_freed, conversions;

static dm_status reversed_to_plain(const dm_tensor *src, void *dst) {
  const float *s = dm_tensor_raw_data(src);
  float *d = dst;
  for (int64_t i = 0; i < src->numel; i++)
    d[i] = s[src->numel - 1 - i];
  conversions++;
  return DM_OK;
}

static void free_desc(void *desc) {
  descs_freed++;
  free(desc);
}

static const dm_layout_ops reversed = {.name = "reversed", .to_plain = reversed_to_plain,
                                       .free_desc = free_desc};

/* Makes t a FLOAT tensor of dims holding values[i] = i + 1 in the reversed layout. */
static void make_reversed(dm_tensor *t, int ndim, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  void *desc = malloc(8);
  descs_made++;
  assert_int_equal(dm_tensor_resize_layout(t, DM_FLOAT, ndim, dims,
                                           (size_t)(n + PAD) * sizeof(float), &reversed, desc),
                   DM_OK);
  float *raw = dm_tensor_raw_data(t);
  for (int64_t i = 0; i < n; i++)
    raw[n - 1 - i] = (float)(i + 1);
  for (int i = 0; i < PAD; i++)
    raw[n + i] = -1000.0f; /* read as data, it would show */
  assert_false(dm_tensor_is_plain(t));
}

static void expect_plain_values(const dm_tensor *t, int64_t n) {
  const float *p = dm_tensor_data(t);
  assert_non_null(p);
  assert_true(dm_tensor_is_plain(t));
  for (int64_t i = 0; i < n; i++)
    if (p[i] != (float)(i + 1))
      fail_msg("element %lld is %g, want %lld", (long long)i, (double)p[i], (long long)(i + 1));
}

static void test_access_converts(void **state) {
  (void)state;
  dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  int64_t dims[] = {3, 4};
  make_reversed(t, 2, dims);
  assert_int_equal(dm_tensor_nbytes(t), 12 * sizeof(float)); /* the plain size, not 17 */
  conversions = 0;
  expect_plain_values(t, 12);
  expect_plain_values(t, 12);
  assert_int_equal(conversions, 1); /* once: the layout is gone after the first read */
  assert_int_equal(descs_freed, descs_made);
  make_reversed(t, 2, dims);
  float *w = dm_tensor_mutable_data(t); /* a writer sees plain data too */
  assert_float_equal(w[0], 1.0f, 0);
  dm_tensor_free(t);
  assert_int_equal(descs_freed, descs_made);
}

static void test_resize_for_plain_data(void **state) {
  (void)state;
  dm_tensor *a = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  dm_tensor *b = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  int64_t dims[] = {6};
  /* A buffer of its own and of the plain size (no padding): kept, its layout cleared. */
  void *desc = malloc(8);
  descs_made++;
  assert_int_equal(dm_tensor_resize_layout(a, DM_FLOAT, 1, dims, 6 * sizeof(float), &reversed, desc),
                   DM_OK);
  void *buf = dm_tensor_raw_data(a);
  assert_int_equal(dm_tensor_resize(a, DM_FLOAT, 1, dims), DM_OK);
  assert_ptr_equal(dm_tensor_raw_data(a), buf);
  assert_true(dm_tensor_is_plain(a));
  assert_int_equal(descs_freed, descs_made);
  /* Shared: the other reader keeps the buffer and its layout; the resized one gets new. */
  make_reversed(a, 1, dims);
  dm_tensor_share(b, a);
  int64_t bigger[] = {6 + PAD};
  assert_int_equal(dm_tensor_resize(b, DM_FLOAT, 1, bigger), DM_OK); /* same bytes */
  assert_true(dm_tensor_is_plain(b));
  assert_ptr_not_equal(dm_tensor_raw_data(b), dm_tensor_raw_data(a));
  expect_plain_values(a, 6);
  /* set_shape drops a blocked buffer (it would be read as plain later). */
  make_reversed(a, 1, dims);
  assert_int_equal(dm_tensor_set_shape(a, DM_FLOAT, 1, dims), DM_OK);
  assert_null(a->storage);
  dm_tensor_free(a);
  dm_tensor_free(b);
  assert_int_equal(descs_freed, descs_made);
}

static void test_unique_and_copy(void **state) {
  (void)state;
  dm_tensor *a = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  dm_tensor *b = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  dm_tensor *c = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  int64_t dims[] = {2, 3, 2};
  make_reversed(a, 3, dims);
  dm_tensor_share(b, a);
  assert_int_equal(dm_tensor_make_unique(b), DM_OK); /* copy-on-write before an in-place op */
  assert_ptr_not_equal(b->storage, a->storage);
  expect_plain_values(b, 12);
  assert_false(dm_tensor_is_plain(a)); /* the other reader is left as it was */
  assert_int_equal(dm_tensor_copy(c, a), DM_OK);
  expect_plain_values(c, 12);
  expect_plain_values(a, 12);
  dm_tensor_free(a);
  dm_tensor_free(b);
  dm_tensor_free(c);
  assert_int_equal(descs_freed, descs_made);
}

/* A reference kernel's inputs are converted in their blobs before it runs; a blocked
 * output it does not read is dropped, not converted; the public fetch reads plain. */
static void test_executor_and_fetch(void **state) {
  (void)state;
  dm_workspace *ws;
  assert_ok(dm_workspace_create(&ws));
  int64_t dims[] = {2, 5};
  float zeros[10] = {0};
  assert_ok(dm_workspace_feed(ws, "X", DM_FLOAT, 2, dims, zeros));
  assert_ok(dm_workspace_feed(ws, "Y", DM_FLOAT, 2, dims, zeros));
  make_reversed(dm_workspace_find(ws, "X")->tensor, 2, dims);
  make_reversed(dm_workspace_find(ws, "Y")->tensor, 2, dims);
  conversions = 0;
  assert_ok(run_text(ws, "op { type: 'Relu' input: 'X' output: 'Y' engine: 'REFERENCE' }"));
  assert_int_equal(conversions, 1); /* X only: Y was dropped */
  assert_true(dm_tensor_is_plain(dm_workspace_find(ws, "X")->tensor));
  const dm_tensor *y;
  assert_ok(dm_workspace_fetch(ws, "Y", &y));
  expect_plain_values(y, 10);
  make_reversed(dm_workspace_find(ws, "X")->tensor, 2, dims);
  const dm_tensor *x;
  assert_ok(dm_workspace_fetch(ws, "X", &x));
  expect_plain_values(x, 10);
  dm_workspace_destroy(ws);
  assert_int_equal(descs_freed, descs_made);
}

/* Storage versions (dm_tensor_version): every writer gives the contents a new one, a
 * reader does not, and no two storages ever share one, even at a reused address. */
static void test_versions(void **state) {
  (void)state;
  dm_workspace *ws;
  assert_ok(dm_workspace_create(&ws));
  int64_t dims[] = {2, 5};
  float v[10] = {0};
  assert_ok(dm_workspace_feed(ws, "X", DM_FLOAT, 2, dims, v));
  dm_tensor *x = dm_workspace_find(ws, "X")->tensor;
  uint64_t a = dm_tensor_version(x);
  assert_true(a != 0);
  (void)dm_tensor_data(x); /* a read */
  assert_true(dm_tensor_version(x) == a);
  (void)dm_tensor_mutable_data(x); /* a writer */
  uint64_t b = dm_tensor_version(x);
  assert_true(b != a);
  assert_ok(dm_workspace_feed(ws, "X", DM_FLOAT, 2, dims, v)); /* fed again, same size */
  uint64_t c = dm_tensor_version(dm_workspace_find(ws, "X")->tensor);
  assert_true(c != b && c != a);
  /* an op's output, written in place */
  assert_ok(run_text(ws, "op { type: 'Relu' input: 'X' output: 'X' engine: 'REFERENCE' }"));
  uint64_t d = dm_tensor_version(dm_workspace_find(ws, "X")->tensor);
  assert_true(d != c);
  /* its input is only read */
  assert_ok(run_text(ws, "op { type: 'Relu' input: 'X' output: 'Y' engine: 'REFERENCE' }"));
  assert_true(dm_tensor_version(dm_workspace_find(ws, "X")->tensor) == d);
  /* a copy into a tensor; then freed storages and new ones at (maybe) the same address */
  dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  assert_non_null(t);
  assert_ok(dm_tensor_resize(t, DM_FLOAT, 2, dims));
  uint64_t e = dm_tensor_version(t);
  assert_ok(dm_tensor_copy(t, dm_workspace_find(ws, "X")->tensor));
  assert_true(dm_tensor_version(t) != e);
  uint64_t seen[8];
  for (int i = 0; i < 8; i++) {
    dm_tensor_reset(t);
    assert_true(dm_tensor_version(t) == 0);
    assert_ok(dm_tensor_resize(t, DM_FLOAT, 2, dims));
    seen[i] = dm_tensor_version(t);
    for (int j = 0; j < i; j++)
      assert_true(seen[j] != seen[i]);
  }
  dm_tensor_free(t);
  dm_workspace_destroy(ws);
}

/* Converting allocates the plain buffer under the workspace's cap: past it, the read
 * fails with the cap's error and the blocked data stays as it was. */
static void test_conversion_under_cap(void **state) {
  (void)state;
  dm_workspace *ws;
  assert_ok(dm_workspace_create(&ws));
  int64_t dims[] = {1000};
  float zeros[1000] = {0};
  assert_ok(dm_workspace_feed(ws, "X", DM_FLOAT, 1, dims, zeros));
  dm_tensor *t = dm_workspace_find(ws, "X")->tensor;
  make_reversed(t, 1, dims);
  size_t used;
  assert_ok(dm_workspace_memory_usage(ws, &used, NULL));
  /* The plain buffer replaces the blocked one (the cap counts it as freed), so only a
   * cap below the plain size itself refuses the conversion. */
  assert_ok(dm_workspace_set_memory_limit(ws, used - 100));
  assert_status_msg(dm_tensor_make_plain(t), DM_ERR_LIMIT, "memory limit");
  assert_false(dm_tensor_is_plain(t));
  assert_null(dm_tensor_data(t));
  assert_ok(dm_workspace_set_memory_limit(ws, 0));
  expect_plain_values(t, 1000);
  dm_workspace_destroy(ws);
  assert_int_equal(descs_freed, descs_made);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_access_converts),
      cmocka_unit_test(test_resize_for_plain_data),
      cmocka_unit_test(test_unique_and_copy),
      cmocka_unit_test(test_executor_and_fetch),
      cmocka_unit_test(test_conversion_under_cap),
      cmocka_unit_test(test_versions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
