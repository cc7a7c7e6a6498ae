/* netdef_build.c: malloc-based construction of NetDef and OperatorDef messages. */
#include "netdef_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dm_status dm_pb_clone(const ProtobufCMessage *m, ProtobufCMessage **out) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf)
    return DM_NOMEM("a message copy");
  protobuf_c_message_pack(m, buf);
  *out = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
  free(buf);
  return *out ? DM_OK : DM_NOMEM("a message copy");
}

/* Grows a malloc'd array of pointers by one slot. */
static dm_status grow(void ***arr, size_t n) {
  void **a = realloc(*arr, (n + 1) * sizeof *a);
  if (!a)
    return DM_NOMEM("a repeated field");
  *arr = a;
  return DM_OK;
}

dm_status dm_strv_push(char ***arr, size_t *n, const char *s) {
  char *copy = strdup(s);
  if (!copy || grow((void ***)arr, *n) != DM_OK) {
    free(copy);
    return DM_NOMEM("a string");
  }
  (*arr)[(*n)++] = copy;
  return DM_OK;
}

dm_status dm_opdef_new(const char *type, Caffe2__OperatorDef **out) {
  Caffe2__OperatorDef *op = malloc(sizeof *op);
  if (!op)
    return DM_NOMEM("an op");
  caffe2__operator_def__init(op);
  if (type && !(op->type = strdup(type))) {
    free(op);
    return DM_NOMEM("an op");
  }
  *out = op;
  return DM_OK;
}

dm_status dm_opdef_add_input(Caffe2__OperatorDef *op, const char *name) {
  return dm_strv_push(&op->input, &op->n_input, name);
}

dm_status dm_opdef_add_output(Caffe2__OperatorDef *op, const char *name) {
  return dm_strv_push(&op->output, &op->n_output, name);
}

int dm_opdef_reads(const Caffe2__OperatorDef *op, const char *name) {
  for (size_t k = 0; k < op->n_input; k++)
    if (strcmp(op->input[k], name) == 0)
      return 1;
  return 0;
}

int dm_opdef_writes(const Caffe2__OperatorDef *op, const char *name) {
  for (size_t k = 0; k < op->n_output; k++)
    if (strcmp(op->output[k], name) == 0)
      return 1;
  return 0;
}

dm_status dm_netdef_insert_op(Caffe2__NetDef *net, size_t at, Caffe2__OperatorDef *op) {
  if (grow((void ***)&net->op, net->n_op) != DM_OK) {
    protobuf_c_message_free_unpacked(&op->base, NULL);
    return DM_NOMEM("an op list");
  }
  if (at > net->n_op)
    at = net->n_op;
  memmove(net->op + at + 1, net->op + at, (net->n_op - at) * sizeof *net->op);
  net->op[at] = op;
  net->n_op++;
  return DM_OK;
}

dm_status dm_netdef_append_op(Caffe2__NetDef *net, Caffe2__OperatorDef *op) {
  return dm_netdef_insert_op(net, net->n_op, op);
}

dm_status dm_netdef_new(const char *name, Caffe2__NetDef **out) {
  Caffe2__NetDef *n = malloc(sizeof *n);
  if (!n)
    return DM_NOMEM("a net");
  caffe2__net_def__init(n);
  if (name && !(n->name = strdup(name))) {
    free(n);
    return DM_NOMEM("a net");
  }
  *out = n;
  return DM_OK;
}

/* ---- the op builder ---------------------------------------------------------------- */

void dm_opb_fail(dm_opb *b, dm_status s) {
  if (s == DM_OK || b->s != DM_OK)
    return;
  b->s = s;
  if (b->op)
    protobuf_c_message_free_unpacked(&b->op->base, NULL);
  b->op = NULL;
}

void dm_opb_start(dm_opb *b, const char *type) {
  b->op = NULL;
  b->s = dm_opdef_new(type, &b->op);
}

void dm_opb_input(dm_opb *b, const char *name) {
  if (b->s == DM_OK)
    dm_opb_fail(b, dm_opdef_add_input(b->op, name));
}

void dm_opb_inputs(dm_opb *b, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    dm_opb_input(b, names[i]);
}

void dm_opb_output(dm_opb *b, const char *name) {
  if (b->s == DM_OK)
    dm_opb_fail(b, dm_opdef_add_output(b->op, name));
}

void dm_opb_outputs(dm_opb *b, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    dm_opb_output(b, names[i]);
}

void dm_opb_arg_int(dm_opb *b, const char *name, int64_t v) {
  if (b->s == DM_OK)
    dm_opb_fail(b, dm_opdef_set_arg_int(b->op, name, v));
}

void dm_opb_arg_float(dm_opb *b, const char *name, float v) {
  if (b->s == DM_OK)
    dm_opb_fail(b, dm_opdef_set_arg_float(b->op, name, v));
}

void dm_opb_arg_string(dm_opb *b, const char *name, const char *v) {
  if (b->s == DM_OK)
    dm_opb_fail(b, dm_opdef_set_arg_string(b->op, name, v));
}

void dm_opb_arg_ints(dm_opb *b, const char *name, const int64_t *v, size_t n) {
  if (b->s == DM_OK)
    dm_opb_fail(b, dm_opdef_set_arg_ints(b->op, name, v, n));
}

void dm_opb_copy_arg(dm_opb *b, const Caffe2__Argument *a) {
  if (b->s != DM_OK)
    return;
  Caffe2__Argument *c = NULL;
  dm_status s = DM_PB_CLONE(Caffe2__Argument, a, &c);
  if (s == DM_OK && (s = grow((void ***)&b->op->arg, b->op->n_arg)) == DM_OK)
    b->op->arg[b->op->n_arg++] = c;
  else if (c)
    protobuf_c_message_free_unpacked(&c->base, NULL);
  dm_opb_fail(b, s);
}

void dm_opb_device_option(dm_opb *b, const Caffe2__DeviceOption *d) {
  if (b->s != DM_OK)
    return;
  if (b->op->device_option)
    protobuf_c_message_free_unpacked(&b->op->device_option->base, NULL);
  b->op->device_option = NULL;
  dm_opb_fail(b, DM_PB_CLONE(Caffe2__DeviceOption, d, &b->op->device_option));
}

void dm_opb_engine(dm_opb *b, const char *engine) {
  if (b->s != DM_OK)
    return;
  char *e = strdup(engine);
  if (!e) {
    dm_opb_fail(b, DM_NOMEM("an engine name"));
    return;
  }
  free(b->op->engine);
  b->op->engine = e;
}

void dm_opb_gradient(dm_opb *b, int on) {
  if (b->s != DM_OK)
    return;
  b->op->has_is_gradient_op = on != 0;
  b->op->is_gradient_op = on != 0;
}

Caffe2__OperatorDef *dm_opb_op(const dm_opb *b) { return b->s == DM_OK ? b->op : NULL; }

dm_status dm_opb_finish(dm_opb *b, Caffe2__OperatorDef **out) {
  dm_status s = b->s;
  *out = s == DM_OK ? b->op : NULL;
  b->op = NULL;
  return s;
}

dm_status dm_opb_insert(dm_opb *b, Caffe2__NetDef *net, size_t at) {
  Caffe2__OperatorDef *op = NULL;
  DM_TRY(dm_opb_finish(b, &op));
  return dm_netdef_insert_op(net, at, op);
}

dm_status dm_opb_append(dm_opb *b, Caffe2__NetDef *net) {
  return dm_opb_insert(b, net, net->n_op);
}

void dm_opb_discard(dm_opb *b) {
  if (b->op)
    protobuf_c_message_free_unpacked(&b->op->base, NULL);
  b->op = NULL;
}

void dm_text_appendf(char **text, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dm_text_vappendf(text, len, fmt, ap);
  va_end(ap);
}

void dm_text_vappendf(char **text, size_t *len, const char *fmt, va_list ap) {
  char line[512];
  int n = vsnprintf(line, sizeof line, fmt, ap);
  if (n <= 0)
    return;
  size_t add = strlen(line);
  char *r = realloc(*text, *len + add + 1);
  if (!r)
    return;
  memcpy(r + *len, line, add + 1);
  *text = r;
  *len += add;
}

int dm_str_in_list(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], s) == 0)
      return 1;
  return 0;
}
