/* cmd_init_net.c: `demitasse init-net`, an init net for a predict net that came without
 * weights: parameter shapes are inferred from the input shape and an output-channels
 * table (see param_shapes.h); weights get Xavier (or MSRA) fills, biases 0, BN scale 1,
 * bias 0, mean 0, var 1. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "net/api.h"
#include "net/netdef_build.h"
#include "param_shapes.h"

static void help(FILE *f) {
  fprintf(f, "usage: demitasse init-net --for PREDICT_NET --input NAME=D0,D1,..[:DTYPE]...\n"
             "                          --out-channels TABLE -o INIT_NET [--weight-fill xavier|msra]\n"
             "                          [--seed N]\n\n"
             "Writes an init net of fill ops for PREDICT_NET's parameters. A predict net does\n"
             "not record how many output channels each Conv/FC weight has; TABLE gives them\n"
             "(lines 'blob count', '#' comments) and every other shape follows from the ops.\n"
             "A table entry the net does not use, or a weight the table lacks, is an error.\n\n"
             "  -f, --for FILE          the predict net (.pb or .pbtxt)\n"
             "  -I, --input SPEC        an input's shape, e.g. data=1,3,227,227\n"
             "  -c, --out-channels FILE the output-channels table\n"
             "  -o, --output FILE       where to write the init net (.pb or .pbtxt)\n"
             "  -w, --weight-fill KIND  xavier (default) or msra\n"
             "  -s, --seed N            random_seed of the fills (default 1)\n"
             "  -h, --help              this text\n");
}

static dm_status add_fill(Caffe2__NetDef *init, const char *param, int role, const dm_tensor *t,
                          const char *weight_fill, uint32_t seed) {
  static const float constant[] = {[1] = 0, [2] = 1, [3] = 0, [4] = 0, [5] = 1};
  const char *type = role == 0 ? weight_fill : "ConstantFill";
  Caffe2__OperatorDef *op = NULL;
  DM_TRY(dm_opdef_new(type, &op));
  dm_status s = dm_opdef_add_output(op, param);
  if (s == DM_OK)
    s = dm_opdef_set_arg_ints(op, "shape", t->dims, (size_t)t->ndim);
  if (s == DM_OK && role != 0)
    s = dm_opdef_set_arg_float(op, "value", constant[role]);
  if (s == DM_OK && role == 0) {
    op->device_option = malloc(sizeof *op->device_option);
    if (!op->device_option)
      s = DM_NOMEM("an op");
    else {
      caffe2__device_option__init(op->device_option);
      op->device_option->has_random_seed = 1;
      op->device_option->random_seed = seed;
    }
  }
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&op->base, NULL);
    return s;
  }
  return dm_netdef_append_op(init, op);
}

static dm_status make_init(const char *net_path, const dm_strlist *inputs, const char *table_path,
                           const char *out, const char *weight_fill, uint32_t seed) {
  Caffe2__NetDef *def = NULL, *init = NULL;
  dm_workspace *ws = NULL;
  dm_param_table table = {0};
  DM_TRY(dm_netdef_read(net_path, &def));
  dm_status s = dm_workspace_create(&ws);
  for (size_t i = 0; i < inputs->n && s == DM_OK; i++)
    s = dm_parse_input_shape(ws, inputs->items[i]);
  if (s == DM_OK)
    s = dm_param_table_load(table_path, &table);
  if (s == DM_OK)
    s = dm_infer_net_shapes(ws, def, net_path, dm_param_shapes_hook, &table, NULL);
  if (s == DM_OK)
    s = dm_param_table_check_used(&table);
  if (s == DM_OK) {
    char name[256];
    snprintf(name, sizeof name, "%s_init", def->name && *def->name ? def->name : "net");
    s = dm_netdef_new(name, &init);
  }
  int64_t count = 0;
  for (size_t i = 0; i < table.n_params && s == DM_OK; i++) {
    const dm_tensor *t = dm_workspace_find(ws, table.params[i])->tensor;
    count += t->numel;
    s = add_fill(init, table.params[i], table.param_role[i], t, weight_fill, seed + (uint32_t)i);
  }
  if (s == DM_OK)
    s = dm_message_write_file(out, &init->base, DM_FORMAT_AUTO);
  if (s == DM_OK)
    printf("wrote %s: %zu parameter blobs, %lld values\n", out, table.n_params, (long long)count);
  if (init)
    protobuf_c_message_free_unpacked(&init->base, NULL);
  protobuf_c_message_free_unpacked(&def->base, NULL);
  dm_param_table_free(&table);
  dm_workspace_destroy(ws);
  return s;
}

int dm_cmd_init_net(int argc, char **argv) {
  static const struct option opts[] = {
      {"for", required_argument, NULL, 'f'},         {"input", required_argument, NULL, 'I'},
      {"out-channels", required_argument, NULL, 'c'}, {"output", required_argument, NULL, 'o'},
      {"weight-fill", required_argument, NULL, 'w'}, {"seed", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
  const char *net = NULL, *table = NULL, *out = NULL, *fill = "XavierFill";
  long seed = 1;
  dm_strlist inputs = {0};
  int c, rc = DM_EXIT_OK;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "f:I:c:o:w:s:h", opts, NULL)) != -1) {
    switch (c) {
    case 'f': net = optarg; break;
    case 'c': table = optarg; break;
    case 'o': out = optarg; break;
    case 'w':
      if (strcmp(optarg, "xavier") == 0)
        fill = "XavierFill";
      else if (strcmp(optarg, "msra") == 0)
        fill = "MSRAFill";
      else
        rc = dm_cli_usage_error("init-net", "--weight-fill is xavier or msra, not '%s'", optarg);
      break;
    case 's':
      if (!dm_cli_parse_long(optarg, 0, 4294967295L, &seed))
        rc = dm_cli_usage_error("init-net", "--seed wants an integer in [0, 2^32)");
      break;
    case 'I':
      if (!dm_strlist_push(&inputs, optarg))
        rc = dm_cli_failf("out of memory");
      break;
    case 'h': help(stdout); dm_strlist_free(&inputs); return DM_EXIT_OK;
    default: dm_strlist_free(&inputs); return dm_cli_bad_option("init-net", argv);
    }
    if (rc != DM_EXIT_OK) {
      dm_strlist_free(&inputs);
      return rc;
    }
  }
  if (!net || !table || !out || !inputs.n || optind != argc)
    rc = dm_cli_usage_error("init-net", "needs --for, --input, --out-channels and -o");
  else {
    const dm_cli_file outs[] = {DM_CLI_FILE("-o", out), DM_CLI_FILES_END},
                      ins[] = {DM_CLI_FILE("--for", net), DM_CLI_FILE("--out-channels", table),
                               DM_CLI_FILES_END};
    if (dm_cli_check_outputs("init-net", outs, ins) != DM_OK ||
        make_init(net, &inputs, table, out, fill, (uint32_t)seed) != DM_OK)
      rc = dm_cli_fail();
  }
  dm_strlist_free(&inputs);
  return rc;
}
