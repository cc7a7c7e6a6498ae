/* netdef_test_util.h: NetDef text in and out for the pass tests (cmocka asserts on
 * failure). Include after test_util.h. */
#ifndef DM_TESTS_NETDEF_TEST_UTIL_H
#define DM_TESTS_NETDEF_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "core/netio.h"
#include "net/passes/pipeline.h"
#include "proto/caffe2.pb-c.h"
#include "test_util.h"

/* A NetDef from protobuf text; free with protobuf_c_message_free_unpacked. */
static inline Caffe2__NetDef *parse(const char *text) {
  ProtobufCMessage *m = NULL;
  assert_ok(dm_text_parse(text, strlen(text), "<test>", &caffe2__net_def__descriptor, &m));
  return (Caffe2__NetDef *)m;
}

/* The net as protobuf text, malloc'd. */
static inline char *print(const Caffe2__NetDef *net) {
  char *s = NULL;
  size_t len = 0;
  assert_ok(dm_text_print(&net->base, &s, &len));
  return s;
}

/* What op_list writes of each op besides "Type(in,in)". */
enum { OPL_OUTPUTS = 1, /* ">out,out" */
       OPL_DEVICE = 2   /* "@C" (CPU), "@G" (CUDA:0), "@GN" (CUDA:N) */ };

/* The shape of a net at a glance: one "Type(in,in)" per op, joined by spaces, with
 * what `flags` asks for. */
static inline void op_list(const Caffe2__NetDef *net, int flags, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (size_t i = 0; i < net->n_op && n < cap; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    n += (size_t)snprintf(buf + n, cap - n, "%s%s(", i ? " " : "", op->type);
    for (size_t k = 0; k < op->n_input && n < cap; k++)
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? "," : "", op->input[k]);
    if (!(flags & OPL_OUTPUTS) && n < cap)
      n += (size_t)snprintf(buf + n, cap - n, ")");
    for (size_t k = 0; (flags & OPL_OUTPUTS) && k < op->n_output && n < cap; k++)
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? "," : ")>", op->output[k]);
    const Caffe2__DeviceOption *d = op->device_option;
    int cuda = d && d->has_device_type && d->device_type == 1;
    if (!(flags & OPL_DEVICE) || n >= cap)
      continue;
    if (cuda && d->device_id)
      n += (size_t)snprintf(buf + n, cap - n, "@G%d", d->device_id);
    else
      n += (size_t)snprintf(buf + n, cap - n, "@%s", cuda ? "G" : "C");
  }
}

/* `net` with every op of type `type` removed (a training net's DB input, when the test
 * feeds data and label itself); the ops go and are freed. Returns how many went. */
static inline size_t drop_ops(Caffe2__NetDef *net, const char *type) {
  size_t kept = 0, n = net->n_op;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(net->op[i]->type, type) == 0)
      protobuf_c_message_free_unpacked(&net->op[i]->base, NULL);
    else
      net->op[kept++] = net->op[i];
  }
  net->n_op = kept;
  return n - kept;
}

/* The training pipeline the model-step tests share: `data` and `label` fed, momentum SGD
 * at 0.05 on *loss, and with fp16 mixed precision from a loss scale of 128 (the default
 * 65536 overflows on the first step, which would then be skipped). */
static inline void model_step_opts(dm_pipeline_opts *p, const char *const *loss, int fp16) {
  static const char *const fed[] = {"data", "label"};
  dm_pipeline_opts_init_training(p, loss, 1, fed, 2);
  p->optim.kind = DM_OPTIMIZER_MOMENTUM;
  p->optim.lr = 0.05;
  p->mixed_precision = fp16;
  p->mp.init_scale = 128;
}

#endif
