/* cli_util.c: messages, option helpers and tensor summaries for the CLI. */
#include "cli_util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sys/stat.h>

#include "core/half.h"
#include "net/passes/layout_pass.h"
#include "net/netdef_build.h"

int dm_cli_fail(void) {
  const char *msg = dm_last_error();
  fprintf(stderr, "demitasse: %s\n", msg && *msg ? msg : "unknown error");
  return DM_EXIT_ERROR;
}

int dm_cli_failf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("demitasse: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return DM_EXIT_ERROR;
}

int dm_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "demitasse %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry 'demitasse %s --help'.\n", cmd);
  va_end(ap);
  return DM_EXIT_USAGE;
}

int dm_cli_bad_option(const char *cmd, char **argv) {
  /* getopt_long leaves the offending word just before optind */
  const char *word = optind > 0 ? argv[optind - 1] : "?";
  if (optopt && word[0] == '-' && word[1] != '-')
    return dm_cli_usage_error(cmd, "bad or incomplete option '-%c'", optopt);
  return dm_cli_usage_error(cmd, "bad or incomplete option '%s'", word);
}

int dm_strlist_push(dm_strlist *l, const char *s) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    const char **items = realloc(l->items, cap * sizeof *items);
    if (!items)
      return 0;
    l->items = items;
    l->cap = cap;
  }
  l->items[l->n++] = s;
  return 1;
}

void dm_strlist_free(dm_strlist *l) {
  free(l->items);
  l->items = NULL;
  l->n = l->cap = 0;
}

int dm_cli_split_binding(const char *arg, char **name, const char **path) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1])
    return 0;
  *name = strndup(arg, (size_t)(eq - arg));
  *path = eq + 1;
  return *name != NULL;
}

int dm_cli_binding_repeats(const dm_strlist *l, const char *arg) {
  const char *eq = strchr(arg, '=');
  size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
  for (size_t i = 0; i < l->n; i++)
    if (strncmp(l->items[i], arg, n) == 0 && l->items[i][n] == '=')
      return 1;
  return 0;
}

int dm_cli_parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return 0;
  *out = v;
  return 1;
}

int dm_cli_parse_double(const char *s, double lo, double hi, double *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (!*s || *end || !isfinite(v) || v < lo || v > hi)
    return 0;
  *out = v;
  return 1;
}

int dm_cli_parse_size(const char *s, size_t *out) {
  static const char units[] = "KMGTPE";
  if (!s || *s < '0' || *s > '9') /* no sign, no space: strtoull would take them */
    return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s)
    return 0;
  int shift = 0;
  if (*end) {
    /* memchr, not strchr: a space (0x20 with the case bit cleared is NUL) would find the
     * string's end and mean a shift of 70 */
    const char *u = memchr(units, toupper((unsigned char)end[0]), sizeof units - 1);
    if (!u)
      return 0;
    shift = 10 * (int)(u - units + 1);
    end++;
    if ((end[0] == 'i' && (end[1] == 'B' || end[1] == 'b')))
      end += 2;
    else if (end[0] == 'B' || end[0] == 'b')
      end++;
    if (*end)
      return 0;
  }
  if (shift >= (int)(8 * sizeof(size_t)) || (shift && v > (SIZE_MAX >> shift)))
    return 0;
  if (v > SIZE_MAX)
    return 0;
  *out = (size_t)v << shift;
  return 1;
}

int dm_cli_memory_limit_flag(const char *cmd, const char *arg, size_t *out) {
  if (dm_cli_parse_size(arg, out))
    return DM_EXIT_OK;
  return dm_cli_usage_error(cmd, "--memory-limit wants a size such as 512M, 8G or a number "
                                 "of bytes (0: no limit), got '%s'", arg);
}

int dm_cli_threads_flag(const char *cmd, const char *arg) {
  long n;
  if (!dm_cli_parse_long(arg, 1, DM_MAX_THREADS, &n))
    return dm_cli_usage_error(cmd, "--threads wants a whole number of threads from 1 to %d, "
                                   "got '%s'", DM_MAX_THREADS, arg);
  return dm_set_num_threads((int)n) == DM_OK ? DM_EXIT_OK : dm_cli_fail();
}

int dm_cli_layout_flag(const char *cmd, const char *arg, dm_train_layout *out) {
  if (strcmp(arg, "nhwc") != 0 && strcmp(arg, "nchw") != 0)
    return dm_cli_usage_error(cmd, "--layout is nchw or nhwc (got '%s')", arg);
  *out = arg[1] == 'h' ? DM_TRAIN_LAYOUT_NHWC : DM_TRAIN_LAYOUT_NCHW;
  return DM_EXIT_OK;
}

int dm_cli_pad_channels_flag(const char *cmd, const char *arg, int *out) {
  long n;
  if (!dm_cli_parse_long(arg, 0, 1024, &n))
    return dm_cli_usage_error(cmd, "--pad-channels wants a channel multiple from 0 (off) to "
                                   "1024, got '%s'", arg);
  *out = (int)n;
  return DM_EXIT_OK;
}

int dm_cli_engine_flag(const char *cmd, const char *arg, const char **out) {
  if (strcasecmp(arg, "reference") == 0) {
    *out = "REFERENCE";
    return DM_EXIT_OK;
  }
  if (strcasecmp(arg, "dnnl") == 0 || strcasecmp(arg, "onednn") == 0) {
    if (!dm_have_dnnl())
      return dm_cli_usage_error(cmd, "--engine dnnl: this build has no oneDNN engine (built "
                                     "without libdnnl, or oneDNN cannot run on this CPU)");
    *out = "DNNL";
    return DM_EXIT_OK;
  }
  return dm_cli_usage_error(cmd, "--engine wants dnnl or reference, got '%s'", arg);
}

dm_status dm_cli_check_db_inputs(const Caffe2__NetDef *def, const char *net_path,
                                 const char *flag) {
  for (size_t i = 0; i < def->n_op; i++) {
    const Caffe2__OperatorDef *op = def->op[i];
    if (!op->type || strcmp(op->type, "TensorProtosDBInput") != 0)
      continue;
    const Caffe2__Argument *a = dm_opdef_find_arg(op, "db");
    if (!a || !a->has_s || !a->s.len)
      continue; /* the op itself says it lacks a db */
    char db[4096];
    snprintf(db, sizeof db, "%.*s", (int)(a->s.len < 4095 ? a->s.len : 4095),
             (const char *)a->s.data);
    struct stat st;
    if (stat(db, &st) != 0)
      return dm_error(DM_ERR_NOT_FOUND,
                      "%s: op %zu (TensorProtosDBInput) reads db '%s', which does not exist "
                      "(%s): give %s DIR, an LMDB made by `demitasse make-db`",
                      net_path, i, db, strerror(errno), flag);
  }
  return DM_OK;
}

/* The i-th path of a file option, counting the items of its list; NULL past the end. */
static const char *file_path(const dm_cli_file *f, size_t i) {
  if (!f->list)
    return i == 0 ? f->path : NULL;
  if (i >= f->list->n)
    return NULL;
  const char *item = f->list->items[i], *eq = f->binding ? strchr(item, '=') : NULL;
  return eq ? eq + 1 : item;
}

/* The identity of an existing regular file or directory at `path`; 0 for anything
 * else (absent, a device, a FIFO). */
static int file_id(const char *path, struct stat *st) {
  return path && stat(path, st) == 0 && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode));
}

dm_status dm_cli_check_outputs(const char *cmd, const dm_cli_file *outputs,
                               const dm_cli_file *inputs) {
  for (const dm_cli_file *o = outputs; o->flag; o++) {
    const char *out;
    struct stat so, si;
    for (size_t i = 0; (out = file_path(o, i)); i++) {
      if (!file_id(out, &so))
        continue;
      for (const dm_cli_file *in = inputs; in->flag; in++) {
        const char *inp;
        for (size_t j = 0; (inp = file_path(in, j)); j++)
          if (file_id(inp, &si) && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return dm_error(DM_ERR_INVALID,
                            "%s: %s '%s' is the same file as %s '%s', which this command "
                            "reads: writing it would destroy that input; nothing was written "
                            "or run (give another output file)",
                            cmd, o->flag, out, in->flag, inp);
      }
    }
  }
  return DM_OK;
}

static int writes_blob(const Caffe2__NetDef *def, const char *blob) {
  for (size_t i = 0; def && i < def->n_op; i++)
    for (size_t k = 0; k < def->op[i]->n_output; k++)
      if (def->op[i]->output[k] && strcmp(def->op[i]->output[k], blob) == 0)
        return 1;
  return 0;
}

dm_status dm_cli_check_blob_written(const char *flag, const char *blob,
                                    const Caffe2__NetDef *net, const char *net_path,
                                    const Caffe2__NetDef *test, const char *test_path) {
  if (writes_blob(net, blob) || writes_blob(test, blob))
    return DM_OK;
  return dm_error(DM_ERR_NOT_FOUND, "%s '%s': no op of the training net %s%s%s writes that "
                  "blob, so there is nothing to report (check the name, or leave %s out)",
                  flag, blob, net_path, test ? " or of the test net " : "",
                  test ? test_path : "", flag);
}

/* One element as text; FP16/BF16 widened to float for printing. */
static void print_value(FILE *f, const dm_tensor *t, int64_t i) {
  const void *d = dm_tensor_data(t);
  switch (t->dtype) {
  case DM_FLOAT: fprintf(f, "%.6g", (double)((const float *)d)[i]); break;
  case DM_DOUBLE: fprintf(f, "%.6g", ((const double *)d)[i]); break;
  case DM_FLOAT16: fprintf(f, "%.5g", (double)dm_half_to_float(((const uint16_t *)d)[i])); break;
  case DM_BFLOAT16: fprintf(f, "%.4g", (double)dm_bf16_to_float(((const uint16_t *)d)[i])); break;
  case DM_INT32: fprintf(f, "%" PRId32, ((const int32_t *)d)[i]); break;
  case DM_INT64: fprintf(f, "%" PRId64, ((const int64_t *)d)[i]); break;
  case DM_INT16: fprintf(f, "%d", ((const int16_t *)d)[i]); break;
  case DM_UINT16: fprintf(f, "%u", ((const uint16_t *)d)[i]); break;
  case DM_INT8: fprintf(f, "%d", ((const int8_t *)d)[i]); break;
  case DM_UINT8:
  case DM_BYTE: fprintf(f, "%u", ((const uint8_t *)d)[i]); break;
  case DM_BOOL: fputs(((const uint8_t *)d)[i] ? "true" : "false", f); break;
  case DM_STRING: {
    const char *s = ((char *const *)d)[i];
    fprintf(f, "\"%.40s\"", s ? s : "");
    break;
  }
  default: fputs("?", f);
  }
}

void dm_cli_print_tensor(FILE *f, const char *name, const dm_tensor *t, int max_values) {
  char shape[128];
  if (t->dtype == DM_UNDEFINED) {
    fprintf(f, "%s: (empty)\n", name);
    return;
  }
  fprintf(f, "%s: %s %s [", name, dm_dtype_name(t->dtype),
          t->ndim ? dm_shape_str(t, shape, sizeof shape) : "scalar");
  int64_t n = t->numel < max_values ? t->numel : max_values;
  for (int64_t i = 0; i < n && dm_tensor_data(t); i++) {
    if (i)
      fputs(", ", f);
    print_value(f, t, i);
  }
  if (t->numel > n)
    fprintf(f, ", ... (%" PRId64 " values)", t->numel);
  fputs("]\n", f);
}

struct option *dm_cli_merge_options(const struct option *base, long n_base,
                                    const struct option *extra) {
  size_t nb = 0, ne = 0;
  if (n_base >= 0)
    nb = (size_t)n_base;
  else
    while (base[nb].name)
      nb++;
  while (extra[ne].name)
    ne++;
  struct option *all = calloc(nb + ne + 1, sizeof *all);
  if (all) {
    memcpy(all, base, nb * sizeof *all);
    memcpy(all + nb, extra, ne * sizeof *all);
  }
  return all;
}
