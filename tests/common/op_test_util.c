/* op_test_util.c: one-op nets for operator tests (see op_test_util.h). */
#include "op_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/net.h"

#define MAX_BLOBS 32
#define MAX_ARGS 16

struct opt_op {
  Caffe2__OperatorDef def;
  char *in[MAX_BLOBS], *out[MAX_BLOBS];
  Caffe2__Argument args[MAX_ARGS];
  Caffe2__Argument *argp[MAX_ARGS];
};

opt_op *opt_new(const char *type) {
  opt_op *op = calloc(1, sizeof *op);
  assert_non_null(op);
  Caffe2__OperatorDef init = CAFFE2__OPERATOR_DEF__INIT;
  op->def = init;
  op->def.type = strdup(type);
  op->def.input = op->in;
  op->def.output = op->out;
  op->def.arg = op->argp;
  return op;
}

void opt_in(opt_op *op, const char *blob) {
  assert_true(op->def.n_input < MAX_BLOBS);
  op->in[op->def.n_input++] = strdup(blob);
}

void opt_out(opt_op *op, const char *blob) {
  assert_true(op->def.n_output < MAX_BLOBS);
  op->out[op->def.n_output++] = strdup(blob);
}

void opt_engine(opt_op *op, const char *engine) {
  free(op->def.engine);
  op->def.engine = strdup(engine);
}

static Caffe2__Argument *new_arg(opt_op *op, const char *name) {
  assert_true(op->def.n_arg < MAX_ARGS);
  Caffe2__Argument init = CAFFE2__ARGUMENT__INIT;
  Caffe2__Argument *a = &op->args[op->def.n_arg];
  *a = init;
  a->name = strdup(name);
  op->argp[op->def.n_arg++] = a;
  return a;
}

void opt_arg_int(opt_op *op, const char *name, int64_t v) {
  Caffe2__Argument *a = new_arg(op, name);
  a->has_i = 1;
  a->i = v;
}

void opt_arg_float(opt_op *op, const char *name, float v) {
  Caffe2__Argument *a = new_arg(op, name);
  a->has_f = 1;
  a->f = v;
}

void opt_arg_string(opt_op *op, const char *name, const char *v) {
  Caffe2__Argument *a = new_arg(op, name);
  a->has_s = 1;
  a->s.data = (uint8_t *)strdup(v);
  a->s.len = strlen(v);
}

void opt_arg_ints(opt_op *op, const char *name, size_t n, const int64_t *v) {
  Caffe2__Argument *a = new_arg(op, name);
  a->n_ints = n;
  a->ints = malloc((n ? n : 1) * sizeof *v);
  if (n)
    memcpy(a->ints, v, n * sizeof *v);
}

void opt_arg_floats(opt_op *op, const char *name, size_t n, const float *v) {
  Caffe2__Argument *a = new_arg(op, name);
  a->n_floats = n;
  a->floats = malloc((n ? n : 1) * sizeof *v);
  if (n)
    memcpy(a->floats, v, n * sizeof *v);
}

void opt_arg_strings(opt_op *op, const char *name, size_t n, const char *const *v) {
  Caffe2__Argument *a = new_arg(op, name);
  a->n_strings = n;
  a->strings = calloc(n ? n : 1, sizeof *a->strings);
  for (size_t i = 0; i < n; i++) {
    a->strings[i].data = (uint8_t *)strdup(v[i]);
    a->strings[i].len = strlen(v[i]);
  }
}

static void free_op(opt_op *op) {
  for (size_t i = 0; i < op->def.n_input; i++)
    free(op->in[i]);
  for (size_t i = 0; i < op->def.n_output; i++)
    free(op->out[i]);
  for (size_t i = 0; i < op->def.n_arg; i++) {
    Caffe2__Argument *a = &op->args[i];
    free(a->name);
    free(a->s.data);
    free(a->ints);
    free(a->floats);
    for (size_t j = 0; j < a->n_strings; j++)
      free(a->strings[j].data);
    free(a->strings);
  }
  free(op->def.type);
  free(op->def.engine);
  free(op);
}

dm_status opt_run(opt_op *op, dm_workspace *ws) {
  Caffe2__NetDef net = CAFFE2__NET_DEF__INIT;
  Caffe2__OperatorDef *ops[1] = {&op->def};
  net.name = "test";
  net.n_op = 1;
  net.op = ops;
  size_t len = caffe2__net_def__get_packed_size(&net);
  uint8_t *buf = malloc(len ? len : 1);
  assert_non_null(buf);
  caffe2__net_def__pack(&net, buf);
  free_op(op);
  Caffe2__NetDef *def = caffe2__net_def__unpack(NULL, len, buf);
  free(buf);
  assert_non_null(def);
  dm_net *n = NULL;
  dm_status s = dm_net_create(ws, def, "test.pbtxt", &n);
  if (s == DM_OK) {
    s = dm_net_run(n);
    dm_net_free(n);
  }
  return s;
}

void opt_feed(dm_workspace *ws, const char *name, dm_dtype t, int ndim, const int64_t *dims,
              const void *data) {
  dm_status s = dm_workspace_feed(ws, name, t, ndim, dims, data);
  if (s != DM_OK)
    fail_msg("feeding %s: %s", name, dm_last_error());
}

const dm_tensor *opt_fetch(dm_workspace *ws, const char *name, dm_dtype t, int ndim,
                           const int64_t *dims) {
  const dm_tensor *x = NULL;
  if (dm_workspace_fetch(ws, name, &x) != DM_OK)
    fail_msg("fetching %s: %s", name, dm_last_error());
  assert_int_equal(dm_tensor_dtype(x), t);
  assert_int_equal(dm_tensor_ndim(x), ndim);
  for (int i = 0; i < ndim; i++)
    assert_int_equal(dm_tensor_dims(x)[i], dims[i]);
  return x;
}

void opt_expect_error(dm_status s, dm_status want, ...) {
  if (s != want)
    fail_msg("expected %s, got %s: %s", dm_status_name(want), dm_status_name(s),
             dm_last_error());
  const char *missing = NULL;
  va_list ap;
  va_start(ap, want);
  for (const char *frag; !missing && (frag = va_arg(ap, const char *));)
    if (!strstr(dm_last_error(), frag))
      missing = frag;
  va_end(ap);
  if (missing)
    fail_msg("message \"%s\" lacks \"%s\"", dm_last_error(), missing);
}

double opt_uniform(uint64_t *state, double lo, double hi) {
  uint64_t x = *state;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  *state = x;
  return lo + (hi - lo) * ((double)(x >> 11) * 0x1p-53);
}

double *opt_draw(int64_t n, double lo, double hi, int mode, uint64_t *seed) {
  double *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; v && i < n; i++) {
    float f = (float)opt_uniform(seed, lo, hi);
    v[i] = mode ? opt_widen(mode, opt_narrow(mode, f)) : f;
  }
  return v;
}

void opt_feed_mode(dm_workspace *ws, const char *name, int mode, int ndim, const int64_t *dims,
                   const double *v) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= dims[i];
  void *buf = malloc((size_t)(n > 0 ? n : 1) * 4);
  for (int64_t i = 0; buf && i < n; i++)
    if (mode)
      ((uint16_t *)buf)[i] = opt_narrow(mode, (float)v[i]);
    else
      ((float *)buf)[i] = (float)v[i];
  opt_feed(ws, name, opt_mode_dtype(mode), ndim, dims, buf);
  free(buf);
}
