/* grad_check.c: gradient ops against central finite differences (see grad_check.h). */
#include "grad_check.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "net/api.h"
#include "core/netio.h"
#include "net/passes/gradient_pass.h"
#include "net/netdef_build.h"

#define GC_H 1e-2
#define GC_MAX_POINTS 64
#define GC_MAX_OUTPUTS 8

static void ok(dm_status s, const char *what) {
  if (s != DM_OK)
    fail_msg("%s: %s: %s", what, dm_status_name(s), dm_last_error());
}

static Caffe2__NetDef *one_op_net(const Caffe2__OperatorDef *op) {
  Caffe2__NetDef *net = NULL;
  Caffe2__OperatorDef *copy = NULL;
  ok(dm_netdef_new("gc_forward", &net), "net");
  ok(DM_PB_CLONE(Caffe2__OperatorDef, op, &copy), "clone");
  ok(dm_netdef_append_op(net, copy), "append");
  return net;
}

/* L = sum r_k y_k over the seeded outputs, in double. */
static double loss(dm_workspace *ws, const Caffe2__OperatorDef *op, int n_seeded,
                   float *const *r) {
  double l = 0;
  for (int o = 0; o < n_seeded; o++) {
    const dm_tensor *y = NULL;
    ok(dm_workspace_fetch(ws, op->output[o], &y), "fetch output");
    const float *py = dm_tensor_data(y);
    for (int64_t k = 0; k < dm_tensor_numel(y); k++)
      l += (double)r[o][k] * py[k];
  }
  return l;
}

/* Copies the seeded outputs into `buf` (allocated on first use). */
static void snapshot(dm_workspace *ws, const Caffe2__OperatorDef *op, int n_seeded, float **buf) {
  for (int o = 0; o < n_seeded; o++) {
    const dm_tensor *y = NULL;
    ok(dm_workspace_fetch(ws, op->output[o], &y), "fetch output");
    size_t bytes = (size_t)dm_tensor_numel(y) * sizeof(float);
    if (!buf[o])
      buf[o] = malloc(bytes ? bytes : 1);
    memcpy(buf[o], dm_tensor_data(y), bytes);
  }
}

/* sum |r_k y_k| over the outputs that differ between the two evaluations: only those
 * carry rounding that does not cancel in L(x+h) - L(x-h). */
static double changed_l1(dm_workspace *ws, const Caffe2__OperatorDef *op, int n_seeded,
                         float *const *r, float *const *plus) {
  double l = 0;
  for (int o = 0; o < n_seeded; o++) {
    const dm_tensor *y = NULL;
    ok(dm_workspace_fetch(ws, op->output[o], &y), "fetch output");
    const float *py = dm_tensor_data(y);
    for (int64_t k = 0; k < dm_tensor_numel(y); k++)
      if (py[k] != plus[o][k])
        l += fabs((double)r[o][k]) * fmax(fabs((double)py[k]), fabs((double)plus[o][k]));
  }
  return l;
}

double gc_check(const char *op_text, const gc_input *inputs, int n_inputs, int n_seeded,
                int64_t reduce_len) {
  ProtobufCMessage *m = NULL;
  ok(dm_text_parse(op_text, strlen(op_text), "gc_check", &caffe2__operator_def__descriptor, &m),
     "parse op");
  Caffe2__OperatorDef *op = (Caffe2__OperatorDef *)m;
  assert_true(n_seeded >= 1 && n_seeded <= GC_MAX_OUTPUTS && (size_t)n_seeded <= op->n_output);
  dm_workspace *ws = NULL;
  ok(dm_workspace_create(&ws), "workspace");
  for (int i = 0; i < n_inputs; i++)
    ok(dm_workspace_feed(ws, inputs[i].name, inputs[i].dtype ? inputs[i].dtype : DM_FLOAT,
                         inputs[i].ndim, inputs[i].dims, inputs[i].data),
       "feed");
  dm_net *fwd = NULL;
  ok(dm_workspace_create_net(ws, one_op_net(op), "gc_forward", &fwd), "forward net");
  ok(dm_net_run(fwd), "forward run");

  /* Seeds r (deterministic) and the gradient net. */
  float *r[8] = {0};
  char seed_names[8][64];
  const char *out_grads[8] = {0};
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  for (int o = 0; o < n_seeded; o++) {
    const dm_tensor *y = NULL;
    ok(dm_workspace_fetch(ws, op->output[o], &y), "fetch output");
    assert_int_equal(dm_tensor_dtype(y), DM_FLOAT);
    r[o] = malloc((size_t)(dm_tensor_numel(y) ? dm_tensor_numel(y) : 1) * sizeof(float));
    for (int64_t k = 0; k < dm_tensor_numel(y); k++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      r[o][k] = (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    snprintf(seed_names[o], sizeof seed_names[o], "%s_gc_seed", op->output[o]);
    ok(dm_workspace_feed(ws, seed_names[o], DM_FLOAT, dm_tensor_ndim(y), dm_tensor_dims(y), r[o]),
       "feed seed");
    out_grads[o] = seed_names[o];
  }
  Caffe2__NetDef *gnet = NULL;
  ok(dm_netdef_new("gc_backward", &gnet), "net");
  ok(dm_op_gradient_ops(op, out_grads, gnet), "gradient maker");
  dm_net *bwd = NULL;
  ok(dm_workspace_create_net(ws, gnet, "gc_backward", &bwd), "backward net");
  ok(dm_net_run(bwd), "backward run");

  double worst = 0;
  float *plus[8] = {0};
  for (int i = 0; i < n_inputs; i++) {
    if (!inputs[i].check)
      continue;
    char gname[128];
    snprintf(gname, sizeof gname, "%s_grad", inputs[i].name);
    const dm_tensor *g = NULL;
    ok(dm_workspace_fetch(ws, gname, &g), gname);
    int64_t n = 1;
    for (int d = 0; d < inputs[i].ndim; d++)
      n *= inputs[i].dims[d];
    if (dm_tensor_numel(g) != n)
      fail_msg("%s has %lld elements, %s has %lld", gname, (long long)dm_tensor_numel(g),
               inputs[i].name, (long long)n);
    float *analytic = malloc((size_t)n * sizeof(float));
    memcpy(analytic, dm_tensor_data(g), (size_t)n * sizeof(float));
    float *x = malloc((size_t)n * sizeof(float));
    memcpy(x, inputs[i].data, (size_t)n * sizeof(float));
    int64_t step = n > GC_MAX_POINTS ? n / GC_MAX_POINTS : 1;
    for (int64_t k = 0; k < n; k += step) {
      float x0 = x[k];
      x[k] = x0 + (float)GC_H;
      ok(dm_workspace_feed(ws, inputs[i].name, DM_FLOAT, inputs[i].ndim, inputs[i].dims, x),
         "feed");
      ok(dm_net_run(fwd), "forward run");
      double lp = loss(ws, op, n_seeded, r);
      snapshot(ws, op, n_seeded, plus);
      x[k] = x0 - (float)GC_H;
      ok(dm_workspace_feed(ws, inputs[i].name, DM_FLOAT, inputs[i].ndim, inputs[i].dims, x),
         "feed");
      ok(dm_net_run(fwd), "forward run");
      double lm = loss(ws, op, n_seeded, r);
      double l1 = changed_l1(ws, op, n_seeded, r, plus);
      x[k] = x0;
      double hp = (double)(x0 + (float)GC_H) - (double)x0, hm = (double)x0 - (double)(x0 - (float)GC_H);
      double numeric = (lp - lm) / (hp + hm);
      double e = (double)(reduce_len + 2) * 0x1p-24 * l1;
      double tol = 4 * e / GC_H + 1e-2 * GC_H * (1 + fabs(x0)) + 1e-3 * fabs(analytic[k]);
      double err = fabs(numeric - analytic[k]);
      if (err / tol > worst)
        worst = err / tol;
      if (err > tol)
        fail_msg("%s: d L / d %s[%lld]: gradient op %.8g, finite difference %.8g "
                 "(error %.3g > tolerance %.3g)",
                 op->type, inputs[i].name, (long long)k, analytic[k], numeric, err, tol);
    }
    ok(dm_workspace_feed(ws, inputs[i].name, DM_FLOAT, inputs[i].ndim, inputs[i].dims, x),
       "feed");
    free(x);
    free(analytic);
  }
  for (int o = 0; o < n_seeded; o++) {
    free(r[o]);
    free(plus[o]);
  }
  protobuf_c_message_free_unpacked(&op->base, NULL);
  dm_workspace_destroy(ws);
  return worst;
}
