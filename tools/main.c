/* main.c: the `demitasse` command line; dispatches to one file per subcommand.
 *
 * Exit codes: 0 success, 1 an error (message on stderr as "demitasse: ..."), 2 bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cli_util.h"
#include "core/fileio.h"

typedef struct dm_cli_cmd {
  const char *name;
  dm_cli_cmd_fn fn;
  const char *summary;
} dm_cli_cmd;

static const dm_cli_cmd commands[] = {
    {"run", dm_cmd_run, "run a net (after an init net) on .npy inputs"},
    {"rewrite", dm_cmd_rewrite, "add the backward pass and optimizer updates; print the net"},
    {"train", dm_cmd_train, "train a net: gradient and optimizer passes, tests, checkpoints"},
    {"convert", dm_cmd_convert, "convert protobuf files between binary (.pb) and text (.pbtxt)"},
    {"inspect", dm_cmd_inspect, "list a net's ops, blobs and parameters; write a Graphviz graph"},
    {"init-net", dm_cmd_init_net, "an init net for a weightless predict net (shapes inferred)"},
    {"info", dm_cmd_info, "version, CPU features, BLAS, OpenMP, CUDA libraries and GPUs"},
    {"ops", dm_cmd_ops, "list the registered operator types"},
    {"make-db", dm_cmd_make_db, "MNIST IDX files or text -> training and validation LMDBs"},
    {"generate", dm_cmd_generate, "continue a prompt with a language-model net, token by token"},
    {"import-onnx", dm_cmd_import_onnx, "an ONNX model -> a Caffe2 init net and predict net"},
    {"export-onnx", dm_cmd_export_onnx, "a Caffe2 init net and predict net -> an ONNX model"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f) {
  fprintf(f, "usage: demitasse <command> [options]\n\n"
             "Demitasse %s: Caffe2-style nets in C, for FP16 mixed-precision training.\n\n"
             "commands:\n",
          dm_version_string());
  for (const dm_cli_cmd *c = commands; c->name; c++)
    fprintf(f, "  %-9s %s\n", c->name, c->summary);
  fprintf(f, "\n'demitasse <command> --help' describes a command's options.\n");
}

/* What a command printed sits in stdio's buffer until exit, where a failed flush (stdout
 * redirected to a full disk) would be lost and `rewrite NET > F` would exit 0 with F cut
 * short: flush here and fail the command when the output did not all go out. */
static int finish_stdout(int rc) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout))
    return rc;
  if (rc != DM_EXIT_OK)
    return rc; /* the command has said why it failed (its own write to stdout, say) */
  fprintf(stderr, "demitasse: writing to standard output failed: %s\n",
          dm_errno_text(errno ? errno : EIO));
  return DM_EXIT_ERROR;
}

/* A training step frees and reallocates the same activation and gradient buffers
 * every iteration. With glibc's defaults, blocks of a few MB are mmapped, or the heap's
 * top is trimmed, so each step gets fresh pages from the kernel and faults on every one
 * of them (LeNet: about 2,000 faults and 20% of a step, measured with `perf stat`).
 * Keeping them in the heap lets the next step reuse the pages. The library leaves
 * malloc to its host; this is the CLI's own choice. */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 64 << 20); /* blocks under 64 MiB come from the heap */
  mallopt(M_TRIM_THRESHOLD, 512 << 20); /* and up to 512 MiB of free heap is kept */
#endif
}

int main(int argc, char **argv) {
  keep_freed_memory();
  if (argc < 2) {
    usage(stderr);
    return DM_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return DM_EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("demitasse %s\n", dm_version_string());
    return DM_EXIT_OK;
  }
  /* Every command starts at the cores this process may run on (a container's or
   * taskset's mask, not the machine's), for OpenMP, OpenBLAS and oneDNN alike; --threads
   * changes it. dm_num_threads_default is within dm_set_num_threads' range. */
  (void)dm_set_num_threads(dm_num_threads_default());
  for (const dm_cli_cmd *c = commands; c->name; c++)
    if (strcmp(cmd, c->name) == 0)
      return finish_stdout(c->fn(argc - 1, argv + 1));
  fprintf(stderr, "demitasse: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return DM_EXIT_USAGE;
}
