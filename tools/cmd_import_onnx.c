/* cmd_import_onnx.c: `demitasse import-onnx MODEL.onnx -o DIR`, an ONNX model as a
 * Caffe2 pair (DIR/init_net.pb, DIR/predict_net.pb) through net/onnx/import.h.
 *
 * Nothing is written unless the whole model translates: an unsupported model fails with
 * every node it cannot translate listed. Both files are replaced atomically.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "core/fileio.h"
#include "net/onnx/import.h"
#include "net/passes/pipeline.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse import-onnx MODEL.onnx -o DIR [--dim NAME=VALUE]...\n\n"
          "Translates an ONNX model into a Caffe2 init net (the initializers and Constant\n"
          "values, as GivenTensor*Fill ops) and predict net (the other nodes), keeping the\n"
          "ONNX blob names, and writes DIR/init_net.pb and DIR/predict_net.pb (DIR is\n"
          "created if missing). A model with nodes that cannot be translated fails, listing\n"
          "them all; nothing is written then.\n\n"
          "  -o, --output DIR  where to write the two nets (required)\n"
          "  -t, --text        write .pbtxt instead of .pb\n"
          "  -d, --dim NAME=VALUE\n"
          "                    give the inputs' symbolic dim NAME (a dim_param, such as a\n"
          "                    batch size N) the value VALUE (at least 1), as ONNX Runtime's\n"
          "                    free-dimension overrides: shape arithmetic on it folds into\n"
          "                    constants (torch's x.view(x.size(0), ...) in a model exported\n"
          "                    with a dynamic batch), and the net runs at that size only\n"
          "  -h, --help        this text\n");
}

static dm_status write_pair(const char *dir, int text, const Caffe2__NetDef *init,
                            const Caffe2__NetDef *pred) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return dm_error(DM_ERR_IO, "cannot create '%s': %s", dir, dm_errno_text(errno));
  size_t n = strlen(dir) + 32;
  char *path = malloc(n);
  if (!path)
    return DM_NOMEM("a path");
  const char *ext = text ? "pbtxt" : "pb";
  snprintf(path, n, "%s/init_net.%s", dir, ext);
  dm_status s = dm_netdef_write_atomic(init, path);
  if (s == DM_OK) {
    snprintf(path, n, "%s/predict_net.%s", dir, ext);
    s = dm_netdef_write_atomic(pred, path);
  }
  free(path);
  return s;
}

/* NAME=VALUE into d (NAME points into arg); 0 when malformed. */
static int parse_dim(char *arg, dm_onnx_dim *d) {
  char *eq = strrchr(arg, '=');
  if (!eq || eq == arg)
    return 0;
  *eq = '\0';
  d->name = arg;
  long v;
  if (!dm_cli_parse_long(eq + 1, 1, 1L << 40, &v))
    return 0;
  d->value = v;
  return 1;
}

int dm_cmd_import_onnx(int argc, char **argv) {
  static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                       {"text", no_argument, NULL, 't'},
                                       {"dim", required_argument, NULL, 'd'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *out = NULL;
  int text = 0, c;
  dm_onnx_dim dims[16];
  dm_onnx_import_options io = {.dims = dims, .n_dims = 0};
  while ((c = getopt_long(argc, argv, "o:td:h", opts, NULL)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case 't': text = 1; break;
    case 'd':
      if (io.n_dims == sizeof dims / sizeof dims[0])
        return dm_cli_usage_error("import-onnx", "at most 16 --dim overrides");
      if (!parse_dim(optarg, &dims[io.n_dims++]))
        return dm_cli_usage_error("import-onnx", "--dim takes NAME=VALUE, VALUE an integer from 1 to 2^40");
      break;
    case 'h': help(stdout); return 0;
    default: return dm_cli_bad_option("import-onnx", argv);
    }
  }
  if (optind != argc - 1)
    return dm_cli_usage_error("import-onnx", optind >= argc ? "MODEL.onnx is required"
                                                            : "one model at a time");
  if (!out)
    return dm_cli_usage_error("import-onnx", "-o DIR is required");
  Caffe2__NetDef *init = NULL, *pred = NULL;
  dm_status s = dm_onnx_import_file_with(argv[optind], &io, &init, &pred);
  if (s == DM_OK)
    s = write_pair(out, text, init, pred);
  if (s == DM_OK)
    fprintf(stderr, "import-onnx: %zu weights, %zu ops -> %s/{init_net,predict_net}.%s\n",
            init->n_op, pred->n_op, out, text ? "pbtxt" : "pb");
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  if (pred)
    protobuf_c_message_free_unpacked(&pred->base, NULL);
  return s == DM_OK ? 0 : dm_cli_fail();
}
