/* test_where.c: Where and WhereGradient against references written here: numpy's
 * broadcast index arithmetic spelled out, every float dtype and an integer one, the
 * gradient summed over broadcast dims in double, finite differences through the gradient
 * maker, and hostile inputs.
 *
 * Bounds (derived): Where copies, so Z is bit-exact. dX sums, per X element, the k dZ
 * values C routed to it (k = the product of the dims X was broadcast along), in FP32
 * from exact widenings: (k - 1) u32 sum |terms|; a 16-bit dX adds one rounding, u16 (or
 * BF16's u) of the sum plus half the smallest subnormal.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "demitasse_plugin.h"
#include "grad_check.h"
#include "op_test_util.h"

static int setup(void **state) { return dm_workspace_create((dm_workspace **)state) != DM_OK; }
static int teardown(void **state) {
  dm_workspace_destroy(*state);
  return 0;
}

/* Z's dims [2, 3, 4]; each input's dims right-aligned, a 1 or a missing dim broadcast. */
enum { ZN = 24 };
static const int64_t zd[3] = {2, 3, 4};

typedef struct shape {
  int ndim;
  int64_t dims[3];
} shape;

/* The element of an input of shape s that Z's element (a, b, c) reads (numpy's rule). */
static int64_t src_index(const shape *s, int64_t a, int64_t b, int64_t c) {
  int64_t z[3] = {a, b, c}, off = 0;
  for (int i = 0; i < s->ndim; i++) {
    int d = 3 - s->ndim + i;
    off = off * s->dims[i] + (s->dims[i] == 1 ? 0 : z[d]);
  }
  return off;
}

static int64_t numel(const shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->ndim; i++)
    n *= s->dims[i];
  return n;
}

static double value_at(int mode, const dm_tensor *t, int64_t i) {
  return mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(t))[i])
              : ((const float *)dm_tensor_data(t))[i];
}

static void check_case(dm_workspace *ws, int mode, shape cs, shape xs, shape ys, uint64_t seed) {
  uint64_t s = seed;
  int64_t nc = numel(&cs), nx = numel(&xs), ny = numel(&ys);
  uint8_t *c = malloc((size_t)nc);
  for (int64_t i = 0; i < nc; i++)
    c[i] = opt_uniform(&s, 0, 1) < 0.5;
  double *x = opt_draw(nx, -4, 4, mode, &s), *y = opt_draw(ny, -4, 4, mode, &s);
  double *dz = opt_draw(ZN, -2, 2, mode, &s);
  opt_feed(ws, "C", DM_BOOL, cs.ndim, cs.dims, c);
  opt_feed_mode(ws, "X", mode, xs.ndim, xs.dims, x);
  opt_feed_mode(ws, "Y", mode, ys.ndim, ys.dims, y);
  opt_feed_mode(ws, "dZ", mode, 3, zd, dz);
  opt_op *op = opt_new("Where");
  opt_in(op, "C"), opt_in(op, "X"), opt_in(op, "Y"), opt_out(op, "Z");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *z = opt_fetch(ws, "Z", opt_mode_dtype(mode), 3, zd);
  double *rx = calloc((size_t)nx, sizeof *rx), *ry = calloc((size_t)ny, sizeof *ry);
  double *mx = calloc((size_t)nx, sizeof *mx), *my = calloc((size_t)ny, sizeof *my);
  int *kx = calloc((size_t)nx, sizeof *kx), *ky = calloc((size_t)ny, sizeof *ky);
  for (int64_t a = 0; a < 2; a++)
    for (int64_t b = 0; b < 3; b++)
      for (int64_t e = 0; e < 4; e++) {
        int64_t zi = (a * 3 + b) * 4 + e;
        int64_t ci = src_index(&cs, a, b, e), xi = src_index(&xs, a, b, e);
        int64_t yi = src_index(&ys, a, b, e);
        double ref = c[ci] ? x[xi] : y[yi];
        if (value_at(mode, z, zi) != ref)
          fail_msg("%s Z[%lld] = %.9g, expected %.9g", opt_mode_name(mode), (long long)zi,
                   value_at(mode, z, zi), ref);
        if (c[ci])
          rx[xi] += dz[zi], mx[xi] += fabs(dz[zi]);
        else
          ry[yi] += dz[zi], my[yi] += fabs(dz[zi]);
        kx[xi]++, ky[yi]++;
      }
  op = opt_new("WhereGradient");
  opt_in(op, "C"), opt_in(op, "X"), opt_in(op, "Y"), opt_in(op, "dZ");
  opt_out(op, "dX"), opt_out(op, "dY");
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s", dm_last_error());
  const dm_tensor *gx = opt_fetch(ws, "dX", opt_mode_dtype(mode), xs.ndim, xs.dims);
  const dm_tensor *gy = opt_fetch(ws, "dY", opt_mode_dtype(mode), ys.ndim, ys.dims);
  for (int w = 0; w < 2; w++) {
    const dm_tensor *gt = w ? gy : gx;
    const double *ref = w ? ry : rx, *mass = w ? my : mx;
    const int *k = w ? ky : kx;
    for (int64_t i = 0; i < (w ? ny : nx); i++) {
      double tol = (k[i] > 1 ? k[i] - 1 : 0) * OPT_U32 * mass[i];
      if (mode)
        tol += opt_mode_u(mode) * (fabs(ref[i]) + tol) + opt_mode_tiny(mode);
      double got = value_at(mode, gt, i);
      if (!(fabs(got - ref[i]) <= tol))
        fail_msg("%s d%c[%lld] = %.9g, reference %.9g (tolerance %.3g)", opt_mode_name(mode),
                 w ? 'Y' : 'X', (long long)i, got, ref[i], tol);
    }
  }
  free(c), free(x), free(y), free(dz), free(rx), free(ry), free(mx), free(my), free(kx),
      free(ky);
}

static void test_where(void **state) {
  dm_workspace *ws = *state;
  const shape full = {3, {2, 3, 4}}, row = {1, {4}}, col = {3, {2, 3, 1}}, mid = {2, {3, 1}};
  const shape one = {0, {0}};
  for (int mode = 0; mode < 3; mode++) {
    check_case(ws, mode, full, full, full, 1);
    check_case(ws, mode, row, full, col, 2);  /* the condition broadcast (a mask per column) */
    check_case(ws, mode, full, mid, row, 3);  /* X and Y broadcast: their gradients summed */
    check_case(ws, mode, col, one, full, 4);  /* a scalar X (a fill value, as -inf masks) */
  }
  /* integer data moves as well (the forward only) */
  uint8_t c[4] = {1, 0, 0, 1};
  int32_t x[4] = {1, 2, 3, 4}, y[4] = {-1, -2, -3, -4}, want[4] = {1, -2, -3, 4};
  int64_t d[1] = {4};
  opt_feed(ws, "C", DM_BOOL, 1, d, c);
  opt_feed(ws, "Xi", DM_INT32, 1, d, x);
  opt_feed(ws, "Yi", DM_INT32, 1, d, y);
  opt_op *op = opt_new("Where");
  opt_in(op, "C"), opt_in(op, "Xi"), opt_in(op, "Yi"), opt_out(op, "Xi"); /* in place */
  assert_int_equal(opt_run(op, ws), DM_OK);
  assert_memory_equal(dm_tensor_data(opt_fetch(ws, "Xi", DM_INT32, 1, d)), want, sizeof want);
}

static void test_where_gradient_fd(void **state) {
  (void)state;
  uint64_t s = 5;
  float x[12], y[4];
  uint8_t c[12];
  for (int i = 0; i < 12; i++)
    x[i] = (float)opt_uniform(&s, -1, 1), c[i] = (i * 7) % 3 == 0;
  for (int i = 0; i < 4; i++)
    y[i] = (float)opt_uniform(&s, -1, 1);
  gc_input in[] = {{"C", 2, {3, 4}, c, 0, DM_BOOL}, {"X", 2, {3, 4}, x, 1, 0},
                   {"Y", 1, {4}, y, 1, 0}};
  double w = gc_check("type: 'Where' input: 'C' input: 'X' input: 'Y' output: 'Z'", in, 3, 1,
                      3);
  print_message("Where gradient: worst %.2f of the tolerance\n", w);
}

static void test_where_errors(void **state) {
  dm_workspace *ws = *state;
  float f[6] = {0};
  uint8_t c[6] = {0};
  int32_t ci[6] = {0};
  uint16_t h[6] = {0};
  int64_t d23[] = {2, 3}, d22[] = {2, 2}, d3[] = {3};
  opt_feed(ws, "C", DM_BOOL, 2, d23, c);
  opt_feed(ws, "Ci", DM_INT32, 2, d23, ci);
  opt_feed(ws, "X", DM_FLOAT, 2, d23, f);
  opt_feed(ws, "H", DM_FLOAT16, 2, d23, h);
  opt_feed(ws, "B", DM_FLOAT, 2, d22, f);
  opt_feed(ws, "R", DM_FLOAT, 1, d3, f);
  struct {
    const char *c, *x, *y;
    dm_status s;
    const char *msg, *blob;
  } bad[] = {
      {"Ci", "X", "X", DM_ERR_TYPE, "C is INT32", "'Ci'"},
      {"C", "X", "H", DM_ERR_TYPE, "X is FLOAT and Y is FLOAT16", "'H'"},
      {"C", "X", "B", DM_ERR_SHAPE, "do not broadcast", "'B'"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    opt_op *op = opt_new("Where");
    opt_in(op, bad[k].c), opt_in(op, bad[k].x), opt_in(op, bad[k].y), opt_out(op, "Z");
    opt_expect_error(opt_run(op, ws), bad[k].s, bad[k].msg, bad[k].blob, NULL);
  }
  /* in place on a broadcast input: refused */
  opt_op *op = opt_new("Where");
  opt_in(op, "C"), opt_in(op, "R"), opt_in(op, "X"), opt_out(op, "R");
  opt_expect_error(opt_run(op, ws), DM_ERR_INVALID, "broadcast", NULL);
  /* the gradient: dZ of the wrong shape or an integer dtype */
  opt_feed(ws, "dZbad", DM_FLOAT, 2, d22, f);
  op = opt_new("WhereGradient");
  opt_in(op, "C"), opt_in(op, "X"), opt_in(op, "R"), opt_in(op, "dZbad");
  opt_out(op, "dX"), opt_out(op, "dR");
  opt_expect_error(opt_run(op, ws), DM_ERR_SHAPE, "dZ is 2x2", "output shape 2x3", "'dZbad'",
                   NULL);
  opt_feed(ws, "dZi", DM_INT32, 2, d23, ci);
  op = opt_new("WhereGradient");
  opt_in(op, "C"), opt_in(op, "X"), opt_in(op, "R"), opt_in(op, "dZi");
  opt_out(op, "dX"), opt_out(op, "dR");
  opt_expect_error(opt_run(op, ws), DM_ERR_TYPE, "dZ is INT32", NULL);
  const dm_op_schema *sc = dm_schema_lookup("Where");
  assert_non_null(sc);
  assert_non_null(sc->gradient);
  assert_int_equal(sc->nonfloat_inputs, 0x1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_where, setup, teardown),
      cmocka_unit_test_setup_teardown(test_where_gradient_fd, setup, teardown),
      cmocka_unit_test_setup_teardown(test_where_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
