/* op_origin.c: the origin stamps of op_origin.h and the op names errors print. */
#include "op_origin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netdef_build.h"

static const char *stamp_of(const Caffe2__OperatorDef *op) {
  const char *d = op->debug_info;
  return d && strncmp(d, DM_ORIGIN_PREFIX, strlen(DM_ORIGIN_PREFIX)) == 0
             ? d + strlen(DM_ORIGIN_PREFIX)
             : NULL;
}

/* "op I (TYPE 'NAME'[, EXTRA])", the name and EXTRA where there are. */
static void plain(const Caffe2__OperatorDef *op, size_t index, const char *extra, char *buf,
                  size_t cap) {
  const char *type = op->type ? op->type : "";
  int named = op->name && *op->name;
  snprintf(buf, cap, "op %zu (%s%s%s%s%s%s)", index, type, named ? " '" : "",
           named ? op->name : "", named ? "'" : "", extra ? ", " : "", extra ? extra : "");
}

static dm_status set_stamp(Caffe2__OperatorDef *op, const char *text) {
  size_t n = strlen(DM_ORIGIN_PREFIX) + strlen(text) + 1;
  char *d = malloc(n);
  if (!d)
    return DM_NOMEM("an op's origin");
  snprintf(d, n, "%s%s", DM_ORIGIN_PREFIX, text);
  free(op->debug_info);
  op->debug_info = d;
  return DM_OK;
}

dm_status dm_origin_stamp(Caffe2__NetDef *net) {
  char what[512];
  for (size_t i = 0; net && i < net->n_op; i++)
    if (!net->op[i]->debug_info || !*net->op[i]->debug_info) {
      plain(net->op[i], i, NULL, what, sizeof what);
      DM_TRY(set_stamp(net->op[i], what));
    }
  return DM_OK;
}

int dm_origin_any(const Caffe2__NetDef *net) {
  for (size_t i = 0; net && i < net->n_op; i++)
    if (stamp_of(net->op[i]))
      return 1;
  return 0;
}

dm_status dm_origin_mark_added(Caffe2__NetDef *net, const char *pass) {
  if (!dm_origin_any(net))
    return DM_OK;
  char what[256];
  snprintf(what, sizeof what, "added by the %s pass", pass);
  for (size_t i = 0; i < net->n_op; i++)
    if (!net->op[i]->debug_info || !*net->op[i]->debug_info)
      DM_TRY(set_stamp(net->op[i], what));
  return DM_OK;
}

char *dm_origin_of_gradient(const Caffe2__OperatorDef *fwd) {
  const char *s = stamp_of(fwd);
  if (!s || strncmp(s, "op ", 3) != 0) /* an added op's gradient: the pass's stamp */
    return NULL;
  size_t n = strlen(DM_ORIGIN_PREFIX) + strlen("the gradient of ") + strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    snprintf(d, n, "%sthe gradient of %s", DM_ORIGIN_PREFIX, s);
  return d;
}

void dm_origin_strip(Caffe2__NetDef *net) {
  for (size_t i = 0; net && i < net->n_op; i++)
    if (stamp_of(net->op[i])) {
      free(net->op[i]->debug_info);
      net->op[i]->debug_info = NULL;
    }
}

const char *dm_opdef_describe(const Caffe2__OperatorDef *op, size_t index, char *buf,
                              size_t cap) {
  char now[512];
  plain(op, index, NULL, now, sizeof now);
  const char *s = stamp_of(op);
  if (!s || strcmp(s, now) == 0) /* never stamped, or where and what it was written */
    snprintf(buf, cap, "%s", now);
  else if (strncmp(s, "op ", 3) == 0)
    snprintf(buf, cap, "%s as written (op %zu, %s, in the rewritten net)", s, index,
             op->type ? op->type : "");
  else if (strncmp(s, "the gradient of ", 16) == 0) {
    char extra[512];
    snprintf(extra, sizeof extra, "%s as written", s);
    plain(op, index, extra, buf, cap);
  } else
    plain(op, index, s, buf, cap);
  return buf;
}
