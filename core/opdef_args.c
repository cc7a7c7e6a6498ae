/* opdef_args.c: finding, setting and clearing the arguments of OperatorDef and NetDef
 * messages (opdef_args.h). */
#include "opdef_args.h"

#include <stdlib.h>
#include <string.h>

/* OperatorDef and NetDef both hold `repeated Argument arg`: one search and one setter
 * serve both. */
static Caffe2__Argument *find_arg(Caffe2__Argument *const *arg, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (arg[i]->name && strcmp(arg[i]->name, name) == 0)
      return arg[i];
  return NULL;
}

Caffe2__Argument *dm_opdef_find_arg(const Caffe2__OperatorDef *op, const char *name) {
  return find_arg(op->arg, op->n_arg, name);
}

Caffe2__Argument *dm_netdef_find_arg(const Caffe2__NetDef *net, const char *name) {
  return find_arg(net->arg, net->n_arg, name);
}

int64_t dm_opdef_arg_int(const Caffe2__OperatorDef *op, const char *name, int64_t dflt) {
  const Caffe2__Argument *a = dm_opdef_find_arg(op, name);
  return a && a->has_i ? a->i : dflt;
}

/* A fresh, empty argument named `name`, replacing any of that name. */
static dm_status fresh_arg_in(Caffe2__Argument ***arg, size_t *n_arg, const char *name,
                              Caffe2__Argument **out) {
  Caffe2__Argument *a = malloc(sizeof *a);
  if (!a)
    return DM_NOMEM("an argument");
  caffe2__argument__init(a);
  if (!(a->name = strdup(name))) {
    free(a);
    return DM_NOMEM("an argument");
  }
  for (size_t i = 0; i < *n_arg; i++)
    if ((*arg)[i]->name && strcmp((*arg)[i]->name, name) == 0) {
      protobuf_c_message_free_unpacked(&(*arg)[i]->base, NULL);
      (*arg)[i] = a;
      *out = a;
      return DM_OK;
    }
  Caffe2__Argument **grown = realloc(*arg, (*n_arg + 1) * sizeof *grown);
  if (!grown) {
    protobuf_c_message_free_unpacked(&a->base, NULL);
    return DM_NOMEM("an argument");
  }
  *arg = grown;
  (*arg)[(*n_arg)++] = a;
  *out = a;
  return DM_OK;
}

static dm_status fresh_arg(Caffe2__OperatorDef *op, const char *name, Caffe2__Argument **out) {
  return fresh_arg_in(&op->arg, &op->n_arg, name, out);
}

dm_status dm_opdef_set_arg_int(Caffe2__OperatorDef *op, const char *name, int64_t v) {
  Caffe2__Argument *a;
  DM_TRY(fresh_arg(op, name, &a));
  a->has_i = 1;
  a->i = v;
  return DM_OK;
}

dm_status dm_opdef_set_arg_float(Caffe2__OperatorDef *op, const char *name, float v) {
  Caffe2__Argument *a;
  DM_TRY(fresh_arg(op, name, &a));
  a->has_f = 1;
  a->f = v;
  return DM_OK;
}

static dm_status set_arg_string(Caffe2__Argument ***arg, size_t *n_arg, const char *name,
                                const char *v) {
  Caffe2__Argument *a;
  DM_TRY(fresh_arg_in(arg, n_arg, name, &a));
  size_t len = strlen(v);
  if (!(a->s.data = malloc(len ? len : 1)))
    return DM_NOMEM("an argument");
  memcpy(a->s.data, v, len);
  a->s.len = len;
  a->has_s = 1;
  return DM_OK;
}

dm_status dm_opdef_set_arg_string(Caffe2__OperatorDef *op, const char *name, const char *v) {
  return set_arg_string(&op->arg, &op->n_arg, name, v);
}

dm_status dm_netdef_set_arg_string(Caffe2__NetDef *net, const char *name, const char *v) {
  return set_arg_string(&net->arg, &net->n_arg, name, v);
}

dm_status dm_opdef_set_arg_ints(Caffe2__OperatorDef *op, const char *name, const int64_t *v,
                                size_t n) {
  Caffe2__Argument *a;
  DM_TRY(fresh_arg(op, name, &a));
  if (n && !(a->ints = malloc(n * sizeof *a->ints)))
    return DM_NOMEM("an argument");
  if (n)
    memcpy(a->ints, v, n * sizeof *v);
  a->n_ints = n;
  return DM_OK;
}

dm_status dm_opdef_set_arg_floats(Caffe2__OperatorDef *op, const char *name, const float *v,
                                  size_t n) {
  Caffe2__Argument *a;
  DM_TRY(fresh_arg(op, name, &a));
  if (n && !(a->floats = malloc(n * sizeof *a->floats)))
    return DM_NOMEM("an argument");
  if (n)
    memcpy(a->floats, v, n * sizeof *v);
  a->n_floats = n;
  return DM_OK;
}

void dm_opdef_clear_args(Caffe2__OperatorDef *op) {
  for (size_t i = 0; i < op->n_arg; i++)
    protobuf_c_message_free_unpacked(&op->arg[i]->base, NULL);
  free(op->arg);
  op->arg = NULL;
  op->n_arg = 0;
}
