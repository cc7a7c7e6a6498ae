/* dnnl_test_util.h: what the oneDNN engine's tests (tests/operators/test_dnnl_*.c) share:
 * the two workspaces each kernel is compared in, one on the default engine (DNNL) and one
 * set to REFERENCE, and blobs put in a channel-blocked layout as a convolution would
 * leave them. Header-only (static inline): every test is its own executable. */
#ifndef DM_TESTS_DNNL_TEST_UTIL_H
#define DM_TESTS_DNNL_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/half.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "operators/dnnl/dnnl_common.h"

/* *d on the default engine, *r on REFERENCE; nonzero on failure (a cmocka setup's). */
static inline int dtu_two_workspaces(dm_workspace **d, dm_workspace **r) {
  if (dm_workspace_create(d) != DM_OK || dm_workspace_create(r) != DM_OK)
    return 1;
  return dm_workspace_set_engine(*r, "REFERENCE") != DM_OK;
}

static inline void dtu_destroy_two(dm_workspace *d, dm_workspace *r) {
  dm_workspace_destroy(d);
  dm_workspace_destroy(r);
}

/* Static wd (the default engine) and wr (REFERENCE) and the cmocka group's setup and
 * teardown that make and destroy them, for tests that keep the pair in globals. */
#define DTU_TWO_WORKSPACES                                                                 \
  static dm_workspace *wd, *wr;                                                            \
  static int setup(void **state) {                                                         \
    (void)state;                                                                           \
    return dtu_two_workspaces(&wd, &wr);                                                   \
  }                                                                                        \
  static int teardown(void **state) {                                                      \
    (void)state;                                                                           \
    dtu_destroy_two(wd, wr);                                                               \
    return 0;                                                                              \
  }

/* Element i of t (FLOAT or BFLOAT16) as a double, read plain (converted from a blocked
 * layout, in t's blob). */
static inline double dtu_val(const dm_tensor *t, int64_t i) {
  const void *p = dm_tensor_data(t);
  return dm_tensor_dtype(t) == DM_BFLOAT16 ? dm_bf16_to_float(((const uint16_t *)p)[i])
                                           : ((const float *)p)[i];
}

/* d and r (the same blob of the two workspaces) exist and have the same dtype and dims. */
static inline void dtu_expect_alike(const dm_tensor *d, const dm_tensor *r) {
  assert_non_null(d);
  assert_non_null(r);
  assert_int_equal(dm_tensor_dtype(d), dm_tensor_dtype(r));
  assert_int_equal(d->ndim, r->ndim);
  for (int i = 0; i < d->ndim; i++)
    assert_int_equal(d->dims[i], r->dims[i]);
}

/* Reorders 4-D blob `name` of ws into nChw16c (blk 16) or nChw8c (blk 8). */
static inline void dtu_make_blocked(dm_workspace *ws, const char *name, int blk) {
  dm_tensor *t = (dm_tensor *)dm_workspace_tensor(ws, name);
  assert_non_null(t);
  assert_int_equal(t->ndim, 4);
  dnnl_memory_desc_t md;
  dnnl_data_type_t dt;
  assert_true(dm_dnnl_dtype(t->dtype, &dt));
  dnnl_dims_t d = {t->dims[0], t->dims[1], t->dims[2], t->dims[3]};
  assert_int_equal(dnnl_memory_desc_init_by_tag(&md, 4, d, dt, blk == 16 ? dnnl_nChw16c
                                                                         : dnnl_nChw8c),
                   dnnl_success);
  assert_int_equal(dm_dnnl_relayout(t, &md), DM_OK);
  assert_false(dm_tensor_is_plain(t));
}

#endif
