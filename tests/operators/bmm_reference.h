/* bmm_reference.h: the double-precision reference of BatchMatMul and MatMul (and their
 * gradients) and the cases both test_batch_matmul.c (reference kernels) and
 * test_dnnl_matmul.c (the oneDNN engine) check with it.
 *
 * The reference walks Y's batch multi-index and reads each input's matrix at that index
 * by numpy's rule (a dim of 1 reads index 0, missing dims are leading), and each element
 * through its own transpose, independently of the kernels' geometry code.
 *
 * Tolerances follow from the arithmetic. With S = sum |a b| over the n products behind
 * one result, an FP32 accumulation errs by at most n u32 S (u32 = 2^-24); a 16-bit result
 * is then rounded once, adding u |ref| (u = 2^-11 FP16, 2^-8 BF16) plus half the
 * smallest subnormal in that range. The gradients' results sum over N (dA) or M (dB)
 * products per batch matrix and over the batch matrices that read the same input matrix,
 * which is the n counted here.
 */
#ifndef DM_TESTS_BMM_REFERENCE_H
#define DM_TESTS_BMM_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "op_test_util.h"

typedef struct shp {
  int n;
  int64_t d[8];
} shp;

static int64_t numel(const shp *s) {
  int64_t n = 1;
  for (int i = 0; i < s->n; i++)
    n *= s->d[i];
  return n;
}

/* One input as the reference sees it: its matrices (rows x cols stored, a 1-D A a row,
 * a 1-D B a column) behind nbat batch dims. */
typedef struct view {
  const shp *s;
  int t, nbat;
  int64_t rows, cols;
} view;

static view mkview(const shp *s, int t, int is_b) {
  view v = {s, s->n == 1 ? 0 : t, s->n == 1 ? 0 : s->n - 2, 0, 0};
  if (s->n == 1) {
    v.rows = is_b ? s->d[0] : 1;
    v.cols = is_b ? 1 : s->d[0];
  } else {
    v.rows = s->d[s->n - 2];
    v.cols = s->d[s->n - 1];
  }
  return v;
}
static int64_t op_rows(const view *v) { return v->t ? v->cols : v->rows; }
static int64_t op_cols(const view *v) { return v->t ? v->rows : v->cols; }
/* The first element of the matrix that Y's batch index yb (ybn dims) reads. */
static int64_t mat_base(const view *v, int ybn, const int64_t *yb) {
  int64_t lin = 0;
  for (int j = 0; j < v->nbat; j++)
    lin = lin * v->s->d[j] + (v->s->d[j] == 1 ? 0 : yb[ybn - v->nbat + j]);
  return lin * v->rows * v->cols;
}
/* The stored offset of op(v)[r][c] in its matrix. */
static int64_t el(const view *v, int64_t r, int64_t c) {
  return v->t ? c * v->cols + r : r * v->cols + c;
}

typedef struct ref {
  double *y, *ys, *da, *dab, *db, *dbb; /* values and error bounds' n u32 S terms */
} ref;

/* Y = op(A) op(B) and, with dy, dA and dB, all in double; y dims ys (given by the
 * test). The bounds arrays hold n * S per result. */
static void reference(const shp *as, const shp *bs, int ta, int tb, const shp *yshape,
                      const double *a, const double *b, const double *dy, ref *r) {
  view A = mkview(as, ta, 0), B = mkview(bs, tb, 1);
  int64_t M = op_rows(&A), K = op_cols(&A), N = op_cols(&B);
  assert_int_equal(op_rows(&B), K);
  int ybn = yshape->n - (as->n > 1) - (bs->n > 1);
  if (as->n == 1 && bs->n == 1)
    ybn = 0;
  int64_t nb = 1;
  for (int i = 0; i < ybn; i++)
    nb *= yshape->d[i];
  assert_int_equal(nb * M * N, numel(yshape)); /* the case's Y shape is consistent */
  int64_t *cnt_a = calloc((size_t)numel(as) + 1, sizeof *cnt_a);
  int64_t *cnt_b = calloc((size_t)numel(bs) + 1, sizeof *cnt_b);
  for (int64_t i = 0; i < nb; i++) {
    int64_t yb[8], rem = i;
    for (int d = ybn - 1; d >= 0; d--)
      yb[d] = rem % yshape->d[d], rem /= yshape->d[d];
    int64_t ab = mat_base(&A, ybn, yb), bb = mat_base(&B, ybn, yb);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double sum = 0, abs = 0;
        int64_t yi = (i * M + m) * N + n;
        for (int64_t k = 0; k < K; k++) {
          int64_t ia = ab + el(&A, m, k), ib = bb + el(&B, k, n);
          sum += a[ia] * b[ib];
          abs += fabs(a[ia] * b[ib]);
          if (dy) {
            r->da[ia] += dy[yi] * b[ib], r->dab[ia] += fabs(dy[yi] * b[ib]), cnt_a[ia]++;
            r->db[ib] += dy[yi] * a[ia], r->dbb[ib] += fabs(dy[yi] * a[ia]), cnt_b[ib]++;
          }
        }
        r->y[yi] = sum;
        r->ys[yi] = (double)K * abs;
      }
  }
  for (int64_t i = 0; dy && i < numel(as); i++)
    r->dab[i] *= (double)cnt_a[i];
  for (int64_t i = 0; dy && i < numel(bs); i++)
    r->dbb[i] *= (double)cnt_b[i];
  free(cnt_a);
  free(cnt_b);
}

static double got_at(const dm_tensor *t, int mode, int64_t i) {
  return mode ? opt_widen(mode, ((const uint16_t *)dm_tensor_data(t))[i])
              : ((const float *)dm_tensor_data(t))[i];
}

/* Compares n results with the reference within the bound the header derives. */
static double compare(const char *what, const dm_tensor *t, int mode, int64_t n,
                      const double *want, const double *nS) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double acc = nS[i] * OPT_U32;
    double tol = mode ? acc + opt_mode_u(mode) * (fabs(want[i]) + acc) + opt_mode_tiny(mode) : acc;
    double got = got_at(t, mode, i);
    if (!(fabs(got - want[i]) <= tol))
      fail_msg("%s %s[%lld] = %.9g, reference %.9g, tolerance %.3g", opt_mode_name(mode), what,
               (long long)i, got, want[i], tol);
    if (tol > 0)
      worst = fmax(worst, fabs(got - want[i]) / tol);
  }
  return worst;
}

/* A case: the op, the fed shapes, the reference's 2-D (MatMul) or fed shapes, Y's
 * shape, the arguments. */
typedef struct mm_case {
  const char *type;
  shp a, b, ra, rb, y;
  int ta, tb, bc, axis_a, axis_b; /* axis 0: the default, not set */
} mm_case;

static void set_args(opt_op *op, const mm_case *c) {
  if (c->ta)
    opt_arg_int(op, "trans_a", 1);
  if (c->tb)
    opt_arg_int(op, "trans_b", 1);
  if (c->bc)
    opt_arg_int(op, "broadcast", 1);
  if (c->axis_a)
    opt_arg_int(op, "axis_a", c->axis_a);
  if (c->axis_b)
    opt_arg_int(op, "axis_b", c->axis_b);
}

/* Runs the forward op (and with_grad its gradient op) on random data in `mode` on the
 * kernel of `engine` (NULL: the default) against the reference. */
static void check_case(dm_workspace *ws, const mm_case *c, int mode, uint64_t seed,
                       const char *engine, int with_grad) {
  const shp *ra = c->ra.n ? &c->ra : &c->a, *rb = c->rb.n ? &c->rb : &c->b;
  int64_t na = numel(&c->a), nb = numel(&c->b), ny = numel(&c->y);
  double *a = opt_draw(na, -2, 2, mode, &seed), *b = opt_draw(nb, -1, 1, mode, &seed);
  double *dy = opt_draw(ny, -1, 1, mode, &seed);
  ref r = {calloc((size_t)ny + 1, 8), calloc((size_t)ny + 1, 8), calloc((size_t)na + 1, 8),
           calloc((size_t)na + 1, 8), calloc((size_t)nb + 1, 8), calloc((size_t)nb + 1, 8)};
  reference(ra, rb, c->ta, c->tb, &c->y, a, b, dy, &r);
  opt_feed_mode(ws, "A", mode, c->a.n, c->a.d, a);
  opt_feed_mode(ws, "B", mode, c->b.n, c->b.d, b);
  opt_feed_mode(ws, "dY", mode, c->y.n, c->y.d, dy);
  opt_op *op = opt_new(c->type);
  opt_in(op, "A"), opt_in(op, "B"), opt_out(op, "Y");
  set_args(op, c);
  if (engine)
    opt_engine(op, engine);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s: %s", c->type, dm_last_error());
  dm_dtype t = opt_mode_dtype(mode);
  double w = compare("Y", opt_fetch(ws, "Y", t, c->y.n, c->y.d), mode, ny, r.y, r.ys);
  char gtype[64];
  if (!with_grad)
    goto done;
  snprintf(gtype, sizeof gtype, "%sGradient", c->type);
  op = opt_new(gtype);
  opt_in(op, "A"), opt_in(op, "B"), opt_in(op, "dY"), opt_out(op, "dA"), opt_out(op, "dB");
  set_args(op, c);
  if (engine)
    opt_engine(op, engine);
  if (opt_run(op, ws) != DM_OK)
    fail_msg("%s: %s", gtype, dm_last_error());
  w = fmax(w, compare("dA", opt_fetch(ws, "dA", t, c->a.n, c->a.d), mode, na, r.da, r.dab));
  w = fmax(w, compare("dB", opt_fetch(ws, "dB", t, c->b.n, c->b.d), mode, nb, r.db, r.dbb));
done:
  print_message("%s %s ta %d tb %d bc %d: worst error %.2f of the bound\n", c->type,
                opt_mode_name(mode), c->ta, c->tb, c->bc, w);
  free(a), free(b), free(dy);
  free(r.y), free(r.ys), free(r.da), free(r.dab), free(r.db), free(r.dbb);
}

#define S(...) {sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}}
#define NONE {0, {0}}

static const mm_case cases[] = {
    /* equal batch dims, every transpose pair */
    {"BatchMatMul", S(2, 3, 4, 5), S(2, 3, 5, 6), NONE, NONE, S(2, 3, 4, 6), 0, 0, 0, 0, 0},
    {"BatchMatMul", S(2, 5, 4), S(2, 5, 6), NONE, NONE, S(2, 4, 6), 1, 0, 0, 0, 0},
    {"BatchMatMul", S(2, 4, 5), S(2, 6, 5), NONE, NONE, S(2, 4, 6), 0, 1, 0, 0, 0},
    {"BatchMatMul", S(3, 5, 4), S(3, 6, 5), NONE, NONE, S(3, 4, 6), 1, 1, 0, 0, 0},
    {"BatchMatMul", S(7, 9), S(9, 3), NONE, NONE, S(7, 3), 0, 0, 0, 0, 0}, /* plain 2-D */
    /* broadcast: batch dims of 1 and missing ones, both sides */
    {"BatchMatMul", S(2, 1, 4, 5), S(3, 5, 6), NONE, NONE, S(2, 3, 4, 6), 0, 0, 1, 0, 0},
    {"BatchMatMul", S(4, 5), S(2, 3, 6, 5), NONE, NONE, S(2, 3, 4, 6), 0, 1, 1, 0, 0},
    {"BatchMatMul", S(3, 1, 5, 4), S(1, 2, 5, 6), NONE, NONE, S(3, 2, 4, 6), 1, 0, 1, 0, 0},
    {"BatchMatMul", S(2, 3, 4, 5), S(2, 3, 5, 6), NONE, NONE, S(2, 3, 4, 6), 0, 0, 1, 0, 0},
    /* 1-D inputs (broadcast): trans of the 1-D side ignored */
    {"BatchMatMul", S(5), S(2, 5, 3), NONE, NONE, S(2, 3), 1, 0, 1, 0, 0},
    {"BatchMatMul", S(2, 4, 5), S(5), NONE, NONE, S(2, 4), 0, 1, 1, 0, 0},
    {"BatchMatMul", S(2, 5, 4), S(5), NONE, NONE, S(2, 4), 1, 0, 1, 0, 0},
    {"BatchMatMul", S(6), S(6), NONE, NONE, S(1), 0, 0, 1, 0, 0},
    /* MatMul: flattened at its axes (the reference's 2-D shapes given) */
    {"MatMul", S(4, 6), S(6, 3), NONE, NONE, S(4, 3), 0, 0, 0, 0, 0},
    {"MatMul", S(2, 3, 4), S(4, 5), S(6, 4), NONE, S(6, 5), 0, 0, 0, 2, 0},
    {"MatMul", S(2, 3, 4), S(5, 1, 2), S(2, 12), S(5, 2), S(12, 5), 1, 1, 0, 0, 0},
    {"MatMul", S(3, 4), S(1, 3, 5), NONE, S(3, 5), S(4, 5), 1, 0, 0, 0, 2},
};

#endif
