/* cmd_convert.c: `demitasse convert`, protobuf files between binary and text format.
 *
 * Any message type of caffe2.proto that files commonly hold; the format of each side is
 * taken from its extension unless forced. Binary output follows Caffe2's byte-exact
 * rules, so .pb -> .pbtxt -> .pb reproduces a zoo file byte for byte.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli_util.h"
#include "core/fileio.h"
#include "core/netio.h"
#include "net/onnx/import.h"
#include "proto/caffe2.pb-c.h"

static const struct {
  const char *name;
  const ProtobufCMessageDescriptor *desc;
} types[] = {
    {"NetDef", &caffe2__net_def__descriptor},
    {"TensorProtos", &caffe2__tensor_protos__descriptor},
    {"TensorProto", &caffe2__tensor_proto__descriptor},
    {"BlobProto", &caffe2__blob_proto__descriptor},
    {"PlanDef", &caffe2__plan_def__descriptor},
    {"TensorShapes", &caffe2__tensor_shapes__descriptor},
    {"ModelProto", &onnx__model_proto__descriptor}, /* ONNX's (proto/onnx.proto) */
};
#define N_TYPES (sizeof types / sizeof types[0])

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse convert [--type TYPE] [--from FMT] [--to FMT] IN OUT\n\n"
          "Converts a protobuf file between binary (.pb) and text (.pbtxt) format. The\n"
          "format of each file follows its extension (.pbtxt .prototxt .txt = text, else\n"
          "binary; an input with another extension is recognised by its content). OUT may\n"
          "be '-' for stdout (text unless --to binary).\n\n"
          "  -t, --type TYPE  message type: NetDef (default), TensorProtos, TensorProto,\n"
          "                   BlobProto, PlanDef, TensorShapes, ModelProto (ONNX; the\n"
          "                   default when IN or OUT ends in .onnx, which is binary)\n"
          "  -f, --from FMT   read IN as text or binary\n"
          "  -T, --to FMT     write OUT as text or binary\n"
          "  -h, --help       this text\n");
}

static int parse_format(const char *s, dm_file_format *out) {
  if (strcmp(s, "text") == 0 || strcmp(s, "pbtxt") == 0)
    *out = DM_FORMAT_TEXT;
  else if (strcmp(s, "binary") == 0 || strcmp(s, "pb") == 0)
    *out = DM_FORMAT_BINARY;
  else
    return 0;
  return 1;
}

static dm_status convert(const char *in, const char *out, const ProtobufCMessageDescriptor *desc,
                         dm_file_format from, dm_file_format to) {
  ProtobufCMessage *msg = NULL;
  DM_TRY(dm_message_read_file(in, desc, from, &msg));
  dm_status s;
  if (strcmp(out, "-") == 0) {
    uint8_t *buf = NULL;
    size_t len = 0;
    s = dm_message_serialize(msg, to == DM_FORMAT_AUTO ? DM_FORMAT_TEXT : to, &buf, &len);
    if (s == DM_OK && fwrite(buf, 1, len, stdout) != len)
      s = dm_error(DM_ERR_IO, "writing to standard output failed: %s", dm_errno_text(errno));
    free(buf);
  } else {
    s = dm_message_write_file(out, msg, to);
  }
  protobuf_c_message_free_unpacked(msg, NULL);
  return s;
}

int dm_cmd_convert(int argc, char **argv) {
  static const struct option opts[] = {{"type", required_argument, NULL, 't'},
                                       {"from", required_argument, NULL, 'f'},
                                       {"to", required_argument, NULL, 'T'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const ProtobufCMessageDescriptor *desc = NULL;
  dm_file_format from = DM_FORMAT_AUTO, to = DM_FORMAT_AUTO;
  int c;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "t:f:T:h", opts, NULL)) != -1) {
    switch (c) {
    case 't': {
      size_t i = 0;
      while (i < N_TYPES && strcasecmp(optarg, types[i].name) != 0)
        i++;
      if (i == N_TYPES)
        return dm_cli_usage_error("convert", "unknown --type '%s'", optarg);
      desc = types[i].desc;
      break;
    }
    case 'f':
    case 'T':
      if (!parse_format(optarg, c == 'f' ? &from : &to))
        return dm_cli_usage_error("convert", "--%s wants text or binary, got '%s'",
                                  c == 'f' ? "from" : "to", optarg);
      break;
    case 'h': help(stdout); return DM_EXIT_OK;
    default: return dm_cli_bad_option("convert", argv);
    }
  }
  if (argc - optind != 2)
    return dm_cli_usage_error("convert", "wants two files, IN and OUT (got %d)", argc - optind);
  const char *in = argv[optind], *out = argv[optind + 1];
  int in_onnx = dm_onnx_is_model_path(in), out_onnx = dm_onnx_is_model_path(out);
  if (!desc)
    desc = in_onnx || out_onnx ? &onnx__model_proto__descriptor : &caffe2__net_def__descriptor;
  if (in_onnx && from == DM_FORMAT_AUTO)
    from = DM_FORMAT_BINARY;
  if (out_onnx && to == DM_FORMAT_AUTO)
    to = DM_FORMAT_BINARY;
  const dm_cli_file outs[] = {DM_CLI_FILE("OUT", out), DM_CLI_FILES_END},
                    ins[] = {DM_CLI_FILE("IN", in), DM_CLI_FILES_END};
  if (dm_cli_check_outputs("convert", outs, ins) != DM_OK ||
      convert(in, out, desc, from, to) != DM_OK)
    return dm_cli_fail();
  return DM_EXIT_OK;
}
