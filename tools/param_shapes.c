/* param_shapes.c: parameter shapes of a predict net from an output-channels table. */
#include "param_shapes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/netio.h"
#include "net/netdef_build.h"

dm_status dm_param_table_load(const char *path, dm_param_table *t) {
  memset(t, 0, sizeof *t);
  t->path = path;
  uint8_t *text = NULL;
  size_t len = 0;
  DM_TRY(dm_read_file(path, &text, &len));
  dm_status s = DM_OK;
  int line = 0;
  for (char *save = NULL, *ln = strtok_r((char *)text, "\n", &save); ln && s == DM_OK;
       ln = strtok_r(NULL, "\n", &save)) {
    line++;
    char *hash = strchr(ln, '#');
    if (hash)
      *hash = '\0';
    char name[512];
    long long count;
    char extra;
    int got = sscanf(ln, "%511s %lld %c", name, &count, &extra);
    if (got <= 0)
      continue; /* blank or comment */
    if (got != 2 || count <= 0) {
      s = dm_error(DM_ERR_PARSE, "%s:%d: expected 'blob count' with a positive count", path,
                   line);
      break;
    }
    dm_param_entry *e = realloc(t->e, (t->n + 1) * sizeof *e);
    if (!e) {
      s = DM_NOMEM("the table");
      break;
    }
    t->e = e;
    t->e[t->n] = (dm_param_entry){strdup(name), count, line, 0};
    if (!t->e[t->n].blob)
      s = DM_NOMEM("the table");
    t->n++;
  }
  free(text);
  if (s != DM_OK)
    dm_param_table_free(t);
  return s;
}

void dm_param_table_free(dm_param_table *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->e[i].blob);
  for (size_t i = 0; i < t->n_params; i++)
    free(t->params[i]);
  free(t->e);
  free(t->params);
  free(t->param_op_type);
  free(t->param_role);
  memset(t, 0, sizeof *t);
}

static dm_param_entry *lookup(dm_param_table *t, const char *blob) {
  for (size_t i = 0; t && i < t->n; i++)
    if (strcmp(t->e[i].blob, blob) == 0)
      return &t->e[i];
  return NULL;
}

static int64_t arg_int(const Caffe2__OperatorDef *op, const char *name, int64_t dflt) {
  const Caffe2__Argument *a = dm_opdef_find_arg(op, name);
  return a && a->has_i ? a->i : dflt;
}

static int is_nhwc(const Caffe2__OperatorDef *op) {
  const Caffe2__Argument *a = dm_opdef_find_arg(op, "order");
  return a && a->has_s && a->s.len == 4 && memcmp(a->s.data, "NHWC", 4) == 0;
}

/* kH, kW from kernel | kernel_h + kernel_w | kernels. */
static dm_status conv_kernel(const Caffe2__OperatorDef *op, int64_t *kh, int64_t *kw) {
  const Caffe2__Argument *ks = dm_opdef_find_arg(op, "kernels");
  if (ks && ks->n_ints == 2) {
    *kh = ks->ints[0];
    *kw = ks->ints[1];
  } else {
    *kh = arg_int(op, "kernel_h", arg_int(op, "kernel", 0));
    *kw = arg_int(op, "kernel_w", arg_int(op, "kernel", 0));
  }
  if (*kh <= 0 || *kw <= 0)
    return dm_error(DM_ERR_INVALID, "cannot tell the Conv's kernel size from its arguments");
  return DM_OK;
}

static dm_status give_shape(dm_param_table *t, dm_workspace *ws, const Caffe2__OperatorDef *op,
                            int input, int role, int ndim, const int64_t *dims) {
  const char *name = op->input[input];
  dm_blob *b;
  DM_TRY(dm_workspace_get_or_create(ws, name, &b));
  if (b->tensor->dtype != DM_UNDEFINED)
    return DM_OK; /* known already: produced, given, or from an earlier op */
  DM_TRY(dm_tensor_set_shape(b->tensor, DM_FLOAT, ndim, dims));
  char **p = realloc(t->params, (t->n_params + 1) * sizeof *p);
  if (p)
    t->params = p;
  const char **ty = realloc(t->param_op_type, (t->n_params + 1) * sizeof *ty);
  if (ty)
    t->param_op_type = ty;
  int *r = realloc(t->param_role, (t->n_params + 1) * sizeof *r);
  if (r)
    t->param_role = r;
  if (!p || !ty || !r || !(t->params[t->n_params] = strdup(name)))
    return DM_NOMEM("the parameter list");
  t->param_op_type[t->n_params] = op->type;
  t->param_role[t->n_params++] = role;
  return DM_OK;
}

static int unknown(dm_workspace *ws, const char *name) {
  dm_blob *b = dm_workspace_find(ws, name);
  return !b || b->tensor->dtype == DM_UNDEFINED;
}

/* Output channels of weight w: from its shape if known, else from the table. */
static dm_status channels_for(dm_param_table *t, dm_workspace *ws, const char *w, int64_t *m) {
  if (!unknown(ws, w)) {
    const dm_tensor *wt = dm_workspace_find(ws, w)->tensor;
    *m = wt->ndim ? wt->dims[0] : 1;
    return DM_OK;
  }
  dm_param_entry *e = lookup(t, w);
  if (!e && (!t || !t->path))
    /* shapes from --input alone: the weights' output channels are not in the net */
    return dm_error(DM_ERR_NOT_FOUND, "weight '%s' has no known shape: shapes from --input "
                    "also need the weights', from --init INIT (the init net that fills them) "
                    "or --out-channels TABLE (lines 'blob count', each Conv/FC weight's "
                    "output channels)", w);
  if (!e)
    return dm_error(DM_ERR_NOT_FOUND, "weight '%s' has no entry in the output-channels table%s%s",
                    w, t && t->path ? " " : "", t && t->path ? t->path : "");
  e->used = 1;
  *m = e->channels;
  return DM_OK;
}

dm_status dm_param_shapes_hook(void *user, dm_workspace *ws, const Caffe2__OperatorDef *op,
                               int index) {
  (void)index;
  dm_param_table *t = user;
  const char *type = op->type ? op->type : "";
  if (op->n_input < 2 || unknown(ws, op->input[0]))
    return DM_OK; /* the op's own inference reports the missing input */
  const dm_tensor *x = dm_workspace_find(ws, op->input[0])->tensor;
  int64_t m;
  if (strcmp(type, "Conv") == 0) {
    int nhwc = is_nhwc(op);
    int64_t group = arg_int(op, "group", 1), kh, kw;
    DM_TRY(conv_kernel(op, &kh, &kw));
    if (x->ndim != 4)
      return dm_error(DM_ERR_SHAPE, "Conv input '%s' is %d-D, not 4-D", op->input[0], x->ndim);
    int64_t c = nhwc ? x->dims[3] : x->dims[1];
    if (group <= 0 || c % group)
      return dm_error(DM_ERR_SHAPE, "group %lld does not divide the %lld input channels",
                      (long long)group, (long long)c);
    DM_TRY(channels_for(t, ws, op->input[1], &m));
    int64_t w_nchw[4] = {m, c / group, kh, kw}, w_nhwc[4] = {m, kh, kw, c / group};
    DM_TRY(give_shape(t, ws, op, 1, 0, 4, nhwc ? w_nhwc : w_nchw));
    if (op->n_input > 2)
      DM_TRY(give_shape(t, ws, op, 2, 1, 1, &m));
  } else if (strcmp(type, "FC") == 0) {
    int64_t axis = arg_int(op, "axis", 1), k = 1;
    if (axis < 0)
      axis += x->ndim;
    if (axis < 0 || axis > x->ndim)
      return dm_error(DM_ERR_INVALID, "axis %lld is out of range", (long long)axis);
    for (int d = (int)axis; d < x->ndim; d++)
      k *= x->dims[d];
    DM_TRY(channels_for(t, ws, op->input[1], &m));
    int64_t w[2] = {m, k};
    DM_TRY(give_shape(t, ws, op, 1, 0, 2, w));
    if (op->n_input > 2)
      DM_TRY(give_shape(t, ws, op, 2, 1, 1, &m));
  } else if (strcmp(type, "SpatialBN") == 0 && op->n_input >= 5) {
    int64_t c = x->ndim < 2 ? 0 : is_nhwc(op) ? x->dims[x->ndim - 1] : x->dims[1];
    for (int i = 1; i <= 4; i++)
      DM_TRY(give_shape(t, ws, op, i, 1 + i, 1, &c));
  }
  return DM_OK;
}

dm_status dm_param_table_check_used(const dm_param_table *t) {
  for (size_t i = 0; i < t->n; i++)
    if (!t->e[i].used)
      return dm_error(DM_ERR_INVALID, "%s:%d: '%s' is not the weight of a Conv or FC in the net",
                      t->path, t->e[i].line, t->e[i].blob);
  return DM_OK;
}

dm_status dm_parse_input_shape(dm_workspace *ws, const char *spec) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec)
    return dm_error(DM_ERR_INVALID, "'%s': expected name=d0,d1,...[:dtype]", spec);
  char name[512];
  size_t nlen = (size_t)(eq - spec);
  if (nlen >= sizeof name)
    return dm_error(DM_ERR_INVALID, "'%s': blob name too long", spec);
  memcpy(name, spec, nlen);
  name[nlen] = '\0';
  int64_t dims[DM_MAX_DIMS];
  int ndim = 0;
  const char *p = eq + 1;
  dm_dtype dtype = DM_FLOAT;
  while (*p && *p != ':') {
    if (ndim == DM_MAX_DIMS)
      return dm_error(DM_ERR_INVALID, "'%s': more than %d dimensions", spec, DM_MAX_DIMS);
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (end != p && !errno && (*end == 'x' || *end == 'X' || *end == '*'))
      /* 1x3x227x227 is how shapes are printed (and how NumPy users say them) */
      return dm_error(DM_ERR_INVALID, "'%s': separate the dimensions with commas, "
                      "as in %s=1,3,227,227", spec, name);
    if (end == p || errno || d < 0 || (*end && *end != ',' && *end != ':'))
      return dm_error(DM_ERR_INVALID, "'%s': dimensions must be non-negative integers", spec);
    dims[ndim++] = d;
    p = *end == ',' ? end + 1 : end;
  }
  if (*p == ':')
    DM_TRY(dm_dtype_from_name(p + 1, &dtype));
  dm_blob *b = dm_workspace_find(ws, name);
  /* the inputs are parsed first, into a fresh workspace: a shape there is an earlier
   * --input for the same blob, which would otherwise be silently replaced */
  if (b && b->tensor->dtype != DM_UNDEFINED)
    return dm_error(DM_ERR_INVALID, "--input '%s' is given twice; give each blob's shape once",
                    name);
  DM_TRY(dm_workspace_get_or_create(ws, name, &b));
  return dm_tensor_set_shape(b->tensor, dtype, ndim, dims);
}
