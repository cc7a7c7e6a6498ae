/* cli_util.h: helpers shared by the `demitasse` subcommands (exit codes, messages,
 * option parsing, tensor summaries). */
#ifndef DM_TOOLS_CLI_UTIL_H
#define DM_TOOLS_CLI_UTIL_H

#include <stdio.h>

#include "core/tensor.h"
#include "proto/caffe2.pb-c.h"

/* Exit codes of every subcommand. */
enum { DM_EXIT_OK = 0, DM_EXIT_ERROR = 1, DM_EXIT_USAGE = 2 };

/* A subcommand: argv[0] is its name. Returns an exit code. */
typedef int (*dm_cli_cmd_fn)(int argc, char **argv);

int dm_cmd_run(int argc, char **argv);
int dm_cmd_convert(int argc, char **argv);
int dm_cmd_rewrite(int argc, char **argv);
int dm_cmd_inspect(int argc, char **argv);
int dm_cmd_info(int argc, char **argv);
int dm_cmd_ops(int argc, char **argv);
int dm_cmd_init_net(int argc, char **argv);
int dm_cmd_train(int argc, char **argv);
int dm_cmd_make_db(int argc, char **argv);
int dm_cmd_generate(int argc, char **argv);
int dm_cmd_import_onnx(int argc, char **argv);
int dm_cmd_export_onnx(int argc, char **argv);

/* Prints "demitasse: <dm_last_error()>" on stderr; returns DM_EXIT_ERROR. */
int dm_cli_fail(void);
/* Prints "demitasse: <message>" on stderr; returns DM_EXIT_ERROR. */
int dm_cli_failf(const char *fmt, ...) DM_PRINTF(1, 2);
/* Prints "demitasse <cmd>: <message>" and a hint to use --help; returns DM_EXIT_USAGE. */
int dm_cli_usage_error(const char *cmd, const char *fmt, ...) DM_PRINTF(2, 3);
/* Reports what getopt_long rejected (call on '?' or ':'); returns DM_EXIT_USAGE. */
int dm_cli_bad_option(const char *cmd, char **argv);

/* A growable list of borrowed strings (argv entries), for repeated options. */
typedef struct dm_strlist {
  const char **items;
  size_t n, cap;
} dm_strlist;
int dm_strlist_push(dm_strlist *l, const char *s); /* 0 on out of memory */
void dm_strlist_free(dm_strlist *l);

/* Splits "name=path" at the first '='; *name is malloc'd. 0 if malformed. */
int dm_cli_split_binding(const char *arg, char **name, const char **path);
/* Nonzero when an earlier "name=..." item of l binds the same name as arg (an --input
 * given twice for one blob, which would otherwise silently keep the last). */
int dm_cli_binding_repeats(const dm_strlist *l, const char *arg);
/* A decimal integer in [lo, hi]; 0 if it is not one. */
int dm_cli_parse_long(const char *s, long lo, long hi, long *out);
/* A finite number in [lo, hi]; 0 if it is not one. */
int dm_cli_parse_double(const char *s, double lo, double hi, double *out);

/* A byte count: digits with an optional K, M, G, T, P or E (powers of 1024, either case,
 * optionally followed by "B" or "iB": 512M, 8GiB, 100kb). 0 if it is not one or does not
 * fit in size_t. */
int dm_cli_parse_size(const char *s, size_t *out);

/* --memory-limit SIZE, shared by `run` and `train`: the option-table entry, its help line
 * and its parsing (a usage error, returned as the exit code, for a bad SIZE). The value
 * goes to dm_workspace_set_memory_limit. */
#define DM_MEMORY_LIMIT_FLAG 1300
#define DM_MEMORY_LIMIT_OPTION {"memory-limit", required_argument, NULL, DM_MEMORY_LIMIT_FLAG}
/* `pad`: the spaces after "SIZE" that reach the command's help column. */
#define DM_MEMORY_LIMIT_HELP(pad)                                                        \
  "      --memory-limit SIZE" pad "cap the host memory of all blobs together (512M, 8G\n"  \
  "                         " pad "or bytes; 0: none): the op that would pass it fails,\n" \
  "                         " pad "naming itself, the blob and the sizes\n"
int dm_cli_memory_limit_flag(const char *cmd, const char *arg, size_t *out);
/* --threads N, shared by `run`, `train` and `info`: the option-table entry, its help
 * line and its handling. The CLI starts at the cores this process may run on (main.c
 * calls dm_set_num_threads(dm_num_threads_default()) before any command); the flag sets
 * N for OpenMP, OpenBLAS and oneDNN at once, or returns a usage error for a bad N. */
#define DM_THREADS_FLAG 1301
#define DM_THREADS_OPTION {"threads", required_argument, NULL, DM_THREADS_FLAG}
#define DM_THREADS_HELP(pad)                                                               \
  "      --threads N     " pad "    CPU threads for the kernels, OpenMP, OpenBLAS and\n"    \
  "                      " pad "    oneDNN alike (default: the cores this process may\n"  \
  "                      " pad "    run on; `demitasse info` prints the count)\n"
int dm_cli_threads_flag(const char *cmd, const char *arg);
/* --layout nchw|nhwc (`run`, `train`, `rewrite`): *out a dm_train_layout (demitasse.h),
 * or a usage error. */
int dm_cli_layout_flag(const char *cmd, const char *arg, dm_train_layout *out);
/* --pad-channels N (`run`, `train`, `rewrite`): with the layout pass, image channels
 * feeding Convs zero-padded to a multiple of N (0: off; default 8 on a GPU, else off).
 * *out is dm_layout_opts.pad_channels, or a usage error. */
#define DM_PAD_CHANNELS_FLAG 1305
#define DM_PAD_CHANNELS_OPTION {"pad-channels", required_argument, NULL, DM_PAD_CHANNELS_FLAG}
#define DM_PAD_CHANNELS_HELP(pad)                                                          \
  "      --pad-channels N" pad "    with the layout pass: image channels read by Convs\n"  \
  "                      " pad "    zero-padded to a multiple of N (conv1's 3 -> 8 for\n"  \
  "                      " pad "    tensor cores); 0: off (default: 8 on a GPU, else 0)\n"
int dm_cli_pad_channels_flag(const char *cmd, const char *arg, int *out);
/* --engine NAME, shared by `run` and `train`: the CPU engine for ops whose net names
 * none (dm_workspace_set_engine): "dnnl" (the default where built) or "reference". Sets
 * *out to the registry's name ("DNNL", "REFERENCE"), or returns a usage error. */
#define DM_ENGINE_FLAG 1302
#define DM_ENGINE_OPTION {"engine", required_argument, NULL, DM_ENGINE_FLAG}
#define DM_ENGINE_HELP(pad)                                                                \
  "      --engine NAME   " pad "    CPU kernels for ops that name no engine: dnnl\n"       \
  "                      " pad "    (oneDNN, the default where built) or reference\n"    \
  "                      " pad "    (the reference kernels)\n"
int dm_cli_engine_flag(const char *cmd, const char *arg, const char **out);
/* Checks that the `db` of each TensorProtosDBInput in def (read from net_path) exists,
 * for a net run without `flag` (--train-db, --test-db) pointing it elsewhere: a missing
 * DB is named with the flag that gives one and the command that makes one. */
dm_status dm_cli_check_db_inputs(const Caffe2__NetDef *def, const char *net_path,
                                 const char *flag);

/* A file option of a command, for dm_cli_check_outputs: `path` (NULL: not given), or
 * every item of the repeated option `list` ("NAME=PATH" items when `binding`). */
typedef struct dm_cli_file {
  const char *flag; /* "--init", "-o", "OUT" */
  const char *path;
  const dm_strlist *list;
  int binding;
} dm_cli_file;
#define DM_CLI_FILE(flag, path) {(flag), (path), NULL, 0}
#define DM_CLI_LIST(flag, list, binding) {(flag), NULL, (list), (binding)}
#define DM_CLI_FILES_END {NULL, NULL, NULL, 0}
/* Refuses, before anything runs, an output that is the same file (st_dev, st_ino, after
 * symlinks) as one of the inputs, naming both: writing it would destroy what the
 * command reads. `outputs` and `inputs` end with a zero entry (flag NULL). Only regular
 * files and directories count (writing to /dev/null, read too, destroys nothing); an
 * output that does not exist yet is no input. */
dm_status dm_cli_check_outputs(const char *cmd, const dm_cli_file *outputs,
                               const dm_cli_file *inputs);

/* Refuses a blob named by `flag` (--accuracy) that no op of `net` (read from
 * net_path) nor of `test` (may be NULL) writes, naming the nets: a typo would otherwise
 * report nothing, silently. */
dm_status dm_cli_check_blob_written(const char *flag, const char *blob,
                                    const Caffe2__NetDef *net, const char *net_path,
                                    const Caffe2__NetDef *test, const char *test_path);

/* A malloc'd getopt_long table: the first n_base entries of `base` (n_base < 0: up to its
 * zero entry), then `extra` up to its zero entry, then a zero entry (NULL: no memory).
 * The flag modules (optim, mp, device, dist) append their options to a command's. */
struct option;
struct option *dm_cli_merge_options(const struct option *base, long n_base,
                                    const struct option *extra);

/* "name: FLOAT 1x10 [0.1, 0.2, ...]" with at most max_values values. */
void dm_cli_print_tensor(FILE *f, const char *name, const dm_tensor *t, int max_values);

#endif
