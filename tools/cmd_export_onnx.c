/* cmd_export_onnx.c: `demitasse export-onnx --init INIT --net NET -o MODEL.onnx`, a
 * Caffe2 inference pair as an ONNX model through net/onnx/export.h.
 *
 * Nothing is written unless the whole net translates: ops without an ONNX translation
 * are all listed in one error. The model file is replaced atomically.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "net/api.h"
#include "net/onnx/export.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse export-onnx --net NET [--init INIT] -o MODEL.onnx\n"
          "                             [--input-shape NAME=D0,D1,...[:TYPE]]...\n\n"
          "Writes a Caffe2 inference pair as an ONNX model (default-domain opset %d, IR\n"
          "version %d). The init net is run once, so every fill (seeded random ones too)\n"
          "gives the weights `run --init` would use; each blob it leaves that NET reads\n"
          "becomes an initializer. NET's ops become ONNX nodes with the blob names kept (a\n"
          "blob written twice, as by an in-place Relu, keeps its name for its last value;\n"
          "earlier values are NAME__1, ...). NET's external inputs that the init net does\n"
          "not fill are the graph inputs, FLOAT unless a TYPE is given (int32 for token\n"
          "ids, bool...), with the shapes given here (none: no shape, which ONNX\n"
          "Runtime takes and onnx.checker does not); its external\n"
          "outputs are the graph outputs. An op with no ONNX translation fails the\n"
          "export, listing every such op; nothing is written then.\n\n"
          "  -n, --net FILE           the predict net (.pb or .pbtxt)\n"
          "  -i, --init FILE          the init net (omit only for a net without weights)\n"
          "  -o, --output FILE        the model to write (.onnx)\n"
          "  -s, --input-shape SPEC   a graph input's shape, e.g. data=1,3,224,224 or\n"
          "                           tokens=1,128:int32; with\n"
          "                           every input's shape the outputs are declared with\n"
          "                           theirs and rank-dependent ops (FC on a 4-D input,\n"
          "                           Softmax) take their simplest form\n"
          "  -h, --help               this text\n",
          DM_ONNX_EXPORT_OPSET, DM_ONNX_EXPORT_IR_VERSION);
}

/* "name=d0,d1,...[:type]" into *out; out->name is *name, a malloc'd copy the caller
 * frees. */
static int parse_shape(const char *spec, dm_onnx_input_shape *out, char **name) {
  const char *dims;
  if (!dm_cli_split_binding(spec, name, &dims))
    return 0;
  out->name = *name;
  out->ndim = 0;
  out->dtype = DM_FLOAT;
  char *copy = strdup(dims);
  if (!copy)
    return 0;
  int ok = 1;
  char *type = strchr(copy, ':');
  if (type) {
    *type++ = '\0';
    ok = dm_dtype_from_name(type, &out->dtype) == DM_OK;
    if (!ok)
      dm_error_clear();
  }
  if (ok && (!*copy || copy[strlen(copy) - 1] == ','))
    ok = 0;
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && ok;
       tok = strtok_r(NULL, ",", &save)) {
    long v;
    ok = out->ndim < 8 && dm_cli_parse_long(tok, 0, 1L << 40, &v);
    if (ok)
      out->dims[out->ndim++] = v;
  }
  free(copy);
  return ok;
}

static int export_pair(const char *init_path, const char *net_path, const char *out,
                       const dm_onnx_export_opts *opts) {
  Caffe2__NetDef *init = NULL, *pred = NULL;
  Onnx__ModelProto *m = NULL;
  dm_status s = dm_netdef_read(net_path, &pred);
  if (s == DM_OK && init_path)
    s = dm_netdef_read(init_path, &init);
  if (s == DM_OK && (s = dm_onnx_export(init, pred, opts, &m)) != DM_OK)
    dm_error_prefix(s, "%s", net_path);
  if (s == DM_OK)
    s = dm_onnx_model_write(m, out);
  if (s == DM_OK)
    fprintf(stderr, "export-onnx: %zu initializers, %zu nodes, opset %d -> %s\n",
            m->graph->n_initializer, m->graph->n_node, DM_ONNX_EXPORT_OPSET, out);
  if (m)
    protobuf_c_message_free_unpacked(&m->base, NULL);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  if (pred)
    protobuf_c_message_free_unpacked(&pred->base, NULL);
  return s == DM_OK ? 0 : dm_cli_fail();
}

int dm_cmd_export_onnx(int argc, char **argv) {
  static const struct option opts[] = {{"net", required_argument, NULL, 'n'},
                                       {"init", required_argument, NULL, 'i'},
                                       {"output", required_argument, NULL, 'o'},
                                       {"input-shape", required_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *net = NULL, *init = NULL, *out = NULL;
  dm_strlist specs = {0};
  int c, rc = -1;
  while (rc < 0 && (c = getopt_long(argc, argv, "n:i:o:s:h", opts, NULL)) != -1) {
    switch (c) {
    case 'n': net = optarg; break;
    case 'i': init = optarg; break;
    case 'o': out = optarg; break;
    case 's':
      if (dm_cli_binding_repeats(&specs, optarg))
        rc = dm_cli_usage_error("export-onnx", "--input-shape '%s': that input has a shape already",
                                optarg);
      else if (!dm_strlist_push(&specs, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'h': help(stdout); rc = 0; break;
    default: rc = dm_cli_bad_option("export-onnx", argv); break;
    }
  }
  if (rc < 0 && optind != argc)
    rc = dm_cli_usage_error("export-onnx", "unexpected argument '%s'", argv[optind]);
  if (rc < 0 && (!net || !out))
    rc = dm_cli_usage_error("export-onnx", "%s is required", !net ? "--net NET" : "-o MODEL.onnx");
  dm_onnx_input_shape *shapes = calloc(specs.n + 1, sizeof *shapes);
  char **names = calloc(specs.n + 1, sizeof *names);
  if (rc < 0 && (!shapes || !names))
    rc = dm_cli_failf("out of memory");
  for (size_t i = 0; rc < 0 && i < specs.n; i++)
    if (!parse_shape(specs.items[i], &shapes[i], &names[i]))
      rc = dm_cli_usage_error("export-onnx",
                              "--input-shape wants NAME=D0,D1,...[:TYPE] (up to 8 dims; TYPE "
                              "float, float16, int32, int64, bool...), got '%s'",
                              specs.items[i]);
  const dm_cli_file outs[] = {DM_CLI_FILE("-o", out), DM_CLI_FILES_END},
                    ins[] = {DM_CLI_FILE("--net", net), DM_CLI_FILE("--init", init),
                             DM_CLI_FILES_END};
  if (rc < 0 && dm_cli_check_outputs("export-onnx", outs, ins) != DM_OK)
    rc = dm_cli_fail();
  if (rc < 0) {
    dm_onnx_export_opts o = {shapes, specs.n};
    rc = export_pair(init, net, out, &o);
  }
  for (size_t i = 0; names && i < specs.n; i++)
    free(names[i]);
  free(names);
  free(shapes);
  dm_strlist_free(&specs);
  return rc;
}
