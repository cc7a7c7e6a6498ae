/* cmd_inspect.c: `demitasse inspect`, a net's ops, blobs, external inputs/outputs,
 * parameter count (from an init net) and a Graphviz graph.
 *
 * Works on the NetDef alone, without instantiating it, so it also describes nets whose
 * ops this build does not implement. Parameters are counted from the init net's fill
 * ops (their `shape` argument, or the number of `values`), not by running them.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "core/fileio.h"
#include "net/api.h"
#include "net/onnx/import.h"
#include "inspect_shapes.h"

static void help(FILE *f) {
  fprintf(f, "usage: demitasse inspect NET [--init INIT] [--dot OUT.dot]\n"
             "                         [--input NAME=D0,D1,..[:DTYPE]]... [--out-channels TABLE]\n\n"
             "Prints the ops of NET (index, type, name, inputs -> outputs, engine, device),\n"
             "its blobs and its external inputs and outputs. With --init, also counts the\n"
             "parameters the init net creates and lists the inputs left to feed. A .onnx\n"
             "NET is shown as import-onnx translates it, its weights counted (no --init).\n\n"
             "  -i, --init FILE  the init net that fills NET's weights\n"
             "  -d, --dot FILE   write a Graphviz graph (ops as boxes, blobs as ellipses)\n"
             "  -I, --input NAME=D0,D1,..[:DTYPE]\n"
             "                   an input's shape (dtype default float): prints every blob's\n"
             "                   dtype and shape and each op's FLOPs and bytes; the weights'\n"
             "                   shapes come from --init or --out-channels\n"
             "  -c, --out-channels TABLE\n"
             "                   output channels of each Conv/FC weight (lines 'blob count'),\n"
             "                   for parameter shapes when there is no --init\n"
             "  -h, --help       this text\n");
}

/* Blob names in first-seen order with who writes and reads them. */
typedef struct blob_info {
  const char *name; /* borrowed from the NetDef */
  int writers, readers;
} blob_info;

typedef struct blob_table {
  blob_info *b;
  size_t n, cap;
} blob_table;

static long blob_index(blob_table *t, const char *name) {
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->b[i].name, name) == 0)
      return (long)i;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    blob_info *b = realloc(t->b, cap * sizeof *b);
    if (!b)
      return -1;
    t->b = b;
    t->cap = cap;
  }
  t->b[t->n] = (blob_info){name, 0, 0};
  return (long)t->n++;
}

static dm_status build_table(const Caffe2__NetDef *def, blob_table *t) {
  for (size_t i = 0; i < def->n_external_input; i++)
    if (blob_index(t, def->external_input[i]) < 0)
      return dm_error(DM_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < def->n_op; i++) {
    const Caffe2__OperatorDef *op = def->op[i];
    for (size_t j = 0; j < op->n_input; j++) {
      long k = blob_index(t, op->input[j]);
      if (k < 0)
        return dm_error(DM_ERR_NOMEM, "out of memory");
      t->b[k].readers++;
    }
    for (size_t j = 0; j < op->n_output; j++) {
      long k = blob_index(t, op->output[j]);
      if (k < 0)
        return dm_error(DM_ERR_NOMEM, "out of memory");
      t->b[k].writers++;
    }
  }
  return DM_OK;
}

static void print_list(const char *label, char **items, size_t n) {
  printf("%s (%zu):", label, n);
  for (size_t i = 0; i < n; i++)
    printf(" %s", items[i]);
  printf("\n");
}

static const char *device_str(const Caffe2__DeviceOption *d, char *buf, size_t cap) {
  if (!d || !d->has_device_type) {
    snprintf(buf, cap, "%s", d ? "default" : "");
    return buf;
  }
  const char *name = d->device_type == 0 ? "CPU" : d->device_type == 1 ? "CUDA" : "device";
  if (d->device_type == 0)
    snprintf(buf, cap, "%s", name);
  else
    snprintf(buf, cap, "%s:%d", name, d->has_device_id ? d->device_id : 0);
  return buf;
}

static void print_ops(const Caffe2__NetDef *def) {
  printf("ops (%zu):\n", def->n_op);
  for (size_t i = 0; i < def->n_op; i++) {
    const Caffe2__OperatorDef *op = def->op[i];
    printf("  %3zu  %s", i, op->type ? op->type : "?");
    if (op->name && *op->name)
      printf(" '%s'", op->name);
    printf(":");
    for (size_t j = 0; j < op->n_input; j++)
      printf("%s %s", j ? "," : "", op->input[j]);
    printf(" ->");
    for (size_t j = 0; j < op->n_output; j++)
      printf("%s %s", j ? "," : "", op->output[j]);
    if (op->engine && *op->engine)
      printf("  [engine %s]", op->engine);
    char dev[64];
    if (*device_str(op->device_option, dev, sizeof dev))
      printf("  [device %s]", dev);
    printf("\n");
  }
}

static void print_blobs(const blob_table *t) {
  printf("blobs (%zu):\n", t->n);
  for (size_t i = 0; i < t->n; i++)
    printf("  %-32s written by %d op%s, read by %d\n", t->b[i].name, t->b[i].writers,
           t->b[i].writers == 1 ? "" : "s", t->b[i].readers);
}

/* Elements a fill op creates per output: product of `shape`, else the count of values. */
static int64_t fill_numel(const Caffe2__OperatorDef *op) {
  for (size_t a = 0; a < op->n_arg; a++) {
    const Caffe2__Argument *arg = op->arg[a];
    if (arg->name && strcmp(arg->name, "shape") == 0) {
      int64_t n = 1;
      for (size_t k = 0; k < arg->n_ints; k++)
        if (arg->ints[k] < 0 || __builtin_mul_overflow(n, arg->ints[k], &n))
          return -1;
      return n;
    }
  }
  for (size_t a = 0; a < op->n_arg; a++) {
    const Caffe2__Argument *arg = op->arg[a];
    if (arg->name && strcmp(arg->name, "values") == 0)
      return (int64_t)(arg->n_floats + arg->n_ints + arg->n_strings);
  }
  return -1;
}

/* `init` (taken) fills `def`'s weights; `init_path` names it. */
static dm_status print_params(const Caffe2__NetDef *def, Caffe2__NetDef *init,
                              const char *init_path) {
  int64_t total = 0;
  size_t blobs = 0, unknown = 0;
  for (size_t i = 0; i < init->n_op; i++) {
    int64_t n = fill_numel(init->op[i]);
    for (size_t j = 0; j < init->op[i]->n_output; j++) {
      if (n < 0)
        unknown++;
      else if (!__builtin_add_overflow(total, n, &total))
        blobs++;
    }
  }
  printf("parameters: %" PRId64 " in %zu blobs from %s", total, blobs, init_path);
  if (unknown)
    printf(" (and %zu blobs of unknown size)", unknown);
  printf("\n");
  /* what the init net does not provide has to be fed */
  printf("inputs to feed:");
  int any = 0;
  for (size_t i = 0; i < def->n_external_input; i++) {
    int made = 0;
    for (size_t o = 0; o < init->n_op && !made; o++)
      for (size_t j = 0; j < init->op[o]->n_output; j++)
        if (strcmp(init->op[o]->output[j], def->external_input[i]) == 0)
          made = 1;
    if (!made) {
      printf(" %s", def->external_input[i]);
      any = 1;
    }
  }
  printf("%s\n", any ? "" : " (none)");
  protobuf_c_message_free_unpacked(&init->base, NULL);
  return DM_OK;
}

/* A DOT string literal: quotes and backslashes escaped. */
static void dot_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static dm_status write_dot(const Caffe2__NetDef *def, blob_table *t, const char *path) {
  dm_atomic_file af; /* replaced atomically: a failed write leaves the old file */
  DM_TRY(dm_atomic_open(&af, path));
  FILE *f = af.f;
  fprintf(f, "digraph ");
  dot_str(f, def->name && *def->name ? def->name : "net");
  fprintf(f, " {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
  for (size_t i = 0; i < t->n; i++) {
    fprintf(f, "  b%zu [shape=ellipse, label=", i);
    dot_str(f, t->b[i].name);
    fprintf(f, "];\n");
  }
  for (size_t i = 0; i < def->n_op; i++) {
    const Caffe2__OperatorDef *op = def->op[i];
    char label[512];
    snprintf(label, sizeof label, "%zu: %s%s%s", i, op->type ? op->type : "?",
             op->name && *op->name ? "\n" : "", op->name ? op->name : "");
    fprintf(f, "  op%zu [shape=box, style=filled, fillcolor=\"#dde8f5\", label=", i);
    /* dot_str would escape the newline's backslash; write "\n" as DOT's own escape */
    fputc('"', f);
    for (const char *s = label; *s; s++) {
      if (*s == '\n') {
        fputs("\\n", f);
        continue;
      }
      if (*s == '"' || *s == '\\')
        fputc('\\', f);
      fputc(*s, f);
    }
    fputs("\"];\n", f);
    for (size_t j = 0; j < op->n_input; j++)
      fprintf(f, "  b%ld -> op%zu;\n", blob_index(t, op->input[j]), i);
    for (size_t j = 0; j < op->n_output; j++)
      fprintf(f, "  op%zu -> b%ld;\n", i, blob_index(t, op->output[j]));
  }
  fprintf(f, "}\n");
  return dm_atomic_commit(&af);
}

static dm_status inspect(const char *path, const char *init, const char *dot,
                         const char *table, const dm_strlist *inputs) {
  Caffe2__NetDef *def = NULL, *init_def = NULL;
  blob_table t = {0};
  if (dm_onnx_is_model_path(path)) {
    /* an ONNX model is shown as it imports: the predict net, its weights the init net */
    if (init || inputs->n)
      return dm_error(DM_ERR_INVALID, "%s: --init and --input are not used with an ONNX model",
                      path);
    DM_TRY(dm_onnx_import_file(path, &init_def, &def));
    init = path;
  } else {
    DM_TRY(dm_netdef_read(path, &def));
  }
  dm_status s = init && !init_def ? dm_netdef_read(init, &init_def) : DM_OK;
  if (s == DM_OK)
    s = build_table(def, &t);
  if (s != DM_OK)
    goto cleanup;
  char dev[64];
  printf("net '%s' from %s: %zu ops, %zu blobs", def->name ? def->name : "", path, def->n_op,
         t.n);
  if (def->type && *def->type)
    printf(", type %s", def->type);
  if (*device_str(def->device_option, dev, sizeof dev))
    printf(", device %s", dev);
  printf("\n");
  print_ops(def);
  print_blobs(&t);
  print_list("external inputs", def->external_input, def->n_external_input);
  print_list("external outputs", def->external_output, def->n_external_output);
  if (init_def) {
    s = print_params(def, init_def, init); /* takes init_def */
    init_def = NULL;
    if (s != DM_OK)
      goto cleanup;
  }
  if (inputs->n && (s = dm_inspect_shapes(def, path, init, table, inputs->items, inputs->n)) != DM_OK)
    goto cleanup;
  if (dot) {
    if ((s = write_dot(def, &t, dot)) != DM_OK)
      goto cleanup;
    printf("wrote %s\n", dot);
  }
cleanup:
  free(t.b);
  if (init_def)
    protobuf_c_message_free_unpacked(&init_def->base, NULL);
  protobuf_c_message_free_unpacked(&def->base, NULL);
  return s;
}

int dm_cmd_inspect(int argc, char **argv) {
  static const struct option opts[] = {{"init", required_argument, NULL, 'i'},
                                       {"dot", required_argument, NULL, 'd'},
                                       {"input", required_argument, NULL, 'I'},
                                       {"out-channels", required_argument, NULL, 'c'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *init = NULL, *dot = NULL, *table = NULL;
  dm_strlist inputs = {0};
  int c, rc = DM_EXIT_OK;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "i:d:I:c:h", opts, NULL)) != -1) {
    switch (c) {
    case 'i': init = optarg; break;
    case 'd': dot = optarg; break;
    case 'c': table = optarg; break;
    case 'I':
      if (!dm_strlist_push(&inputs, optarg)) {
        dm_strlist_free(&inputs);
        return dm_cli_failf("out of memory");
      }
      break;
    case 'h': help(stdout); dm_strlist_free(&inputs); return DM_EXIT_OK;
    default: dm_strlist_free(&inputs); return dm_cli_bad_option("inspect", argv);
    }
  }
  if (argc - optind != 1)
    rc = dm_cli_usage_error("inspect", "wants one net file (got %d)", argc - optind);
  else if (table && !inputs.n)
    rc = dm_cli_usage_error("inspect", "--out-channels needs --input shapes");
  else {
    const dm_cli_file outs[] = {DM_CLI_FILE("--dot", dot), DM_CLI_FILES_END},
                      ins[] = {DM_CLI_FILE("NET", argv[optind]), DM_CLI_FILE("--init", init),
                               DM_CLI_FILE("--out-channels", table), DM_CLI_FILES_END};
    if (dm_cli_check_outputs("inspect", outs, ins) != DM_OK ||
        inspect(argv[optind], init, dot, table, &inputs) != DM_OK)
      rc = dm_cli_fail();
  }
  dm_strlist_free(&inputs);
  return rc;
}
