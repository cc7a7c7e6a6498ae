/* train_api_test.c: the training calls of <demitasse.h> at their edges, seen only
 * through the public header: options from a newer header (struct_size larger, unknown
 * tail zero: accepted; set: refused) or none (0: refused); bad enum values and device
 * names refused with the field named; --device cuda without a usable GPU refused by
 * dm_workspace_create_train_net with the device named (where a GPU is usable it gets as
 * far as opening the training DB, which does not exist); dm_rewrite_train_net replaces
 * an existing file, leaves no temporary file behind, and fails with DM_ERR_IO into a
 * missing directory; a net that has gradient ops already (one it wrote) is written back
 * byte for byte, with an empty init addition.
 * usage: train_api_test LENET_TRAIN_NET LENET_INIT_NET BUILD_DIR
 */
#include <demitasse.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      fprintf(stderr, "FAIL line %d: ", __LINE__);           \
      fprintf(stderr, __VA_ARGS__);                          \
      fprintf(stderr, " [%s]\n", dm_last_error());           \
      failures++;                                            \
    }                                                        \
  } while (0)

static size_t count_files(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: train_api_test NET INIT TMPDIR\n");
    return 2;
  }
  const char *net = argv[1], *init = argv[2];
  char dir[2048], out[4096], out_init[4096], bad[4096], again[4096], again_init[4096];
  snprintf(dir, sizeof dir, "%s/train_api_XXXXXX", argv[3]);
  if (!mkdtemp(dir)) {
    perror(dir);
    return 1;
  }
  snprintf(again, sizeof again, "%s/again.pbtxt", dir);
  snprintf(again_init, sizeof again_init, "%s/again_init.pbtxt", dir);
  snprintf(out, sizeof out, "%s/net.pbtxt", dir);
  snprintf(out_init, sizeof out_init, "%s/init.pbtxt", dir);
  snprintf(bad, sizeof bad, "%s/missing/net.pbtxt", dir);

  dm_train_options o;
  dm_train_options_init(&o);
  CHECK(o.struct_size == sizeof o && o.n_losses == 1 && strcmp(o.losses[0], "loss") == 0 &&
            o.optimizer == DM_OPTIMIZER_MOMENTUM && o.lr == 0.01 && o.memory == 1,
        "defaults");

  /* struct_size */
  o.struct_size = 0;
  CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_VERSION, "struct_size 0 accepted");
  struct {
    dm_train_options o;
    double newer_field;
  } grown;
  /* as a program built against a newer header would fill it: its own sizeof */
  memset(&grown, 0xab, sizeof grown);
  CHECK(dm_train_options_init_sized(&grown.o, sizeof grown) == DM_OK &&
            grown.o.struct_size == sizeof grown && grown.newer_field == 0 &&
            grown.o.n_losses == 1,
        "init of a larger struct: its tail zeroed, its size kept");
  CHECK(dm_rewrite_train_net(net, &grown.o, out, out_init) == DM_OK,
        "a larger struct with a zero tail refused");
  grown.newer_field = 1;
  CHECK(dm_rewrite_train_net(net, &grown.o, out, out_init) == DM_ERR_VERSION,
        "a larger struct with an unknown field set accepted");

  /* bad values name the field */
  dm_train_options_init(&o);
  o.device = "gpu";
  CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID &&
            strstr(dm_last_error(), "device") && strstr(dm_last_error(), "gpu"),
        "device 'gpu'");
  dm_train_options_init(&o);
  o.precision = (dm_precision)7;
  CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID &&
            strstr(dm_last_error(), "precision"),
        "precision 7");
  dm_train_options_init(&o);
  o.n_losses = 0;
  CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID, "no loss accepted");
  /* a size that is no layout: refused, and nothing written */
  memset(&o, 0x5a, sizeof o);
  CHECK(dm_train_options_init_sized(&o, 8) == DM_ERR_VERSION &&
            ((unsigned char *)&o)[0] == 0x5a,
        "init with struct_size 8 accepted or wrote");
  CHECK(dm_train_options_init_sized(&o, (size_t)1 << 40) == DM_ERR_VERSION,
        "init with a huge struct_size accepted");
  dm_train_options_init(&o);
  o.struct_size = (size_t)1 << 40; /* garbage: refused before reading past the struct */
  CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_VERSION, "huge struct_size accepted");
  /* a NULL or empty name in a list names the list, never crashes */
  static const char *const null_name[] = {NULL}, *const empty_name[] = {""};
  const char *const *lists[] = {null_name, empty_name};
  for (int k = 0; k < 2; k++) {
    dm_train_options_init(&o);
    o.losses = lists[k];
    CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID &&
              strstr(dm_last_error(), "losses[0]"),
          "a bad loss name");
    dm_train_options_init(&o);
    o.fp32_ops = lists[k];
    o.n_fp32_ops = 1;
    CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID &&
              strstr(dm_last_error(), "fp32_ops[0]"),
          "a bad fp32_ops name");
    dm_train_options_init(&o);
    o.keep = lists[k];
    o.n_keep = 1;
    CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID &&
              strstr(dm_last_error(), "keep[0]"),
          "a bad keep name");
    dm_train_options_init(&o);
    o.cpu_ops = lists[k];
    o.n_cpu_ops = 1;
    CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID &&
              strstr(dm_last_error(), "cpu_ops[0]"),
          "a bad cpu_ops name");
  }
  dm_train_options_init(&o);
  o.precision = DM_PRECISION_FP16;
  o.init_scale = 1e39; /* infinite as a float: every step would overflow */
  CHECK(dm_rewrite_train_net(net, &o, out, NULL) == DM_ERR_INVALID &&
            strstr(dm_last_error(), "init_scale"),
        "init_scale 1e39 accepted");

  /* files: replaced atomically, nothing left behind; a missing directory is an I/O error */
  dm_train_options_init(&o);
  FILE *f = fopen(out, "w");
  if (f) {
    fputs("stale", f);
    fclose(f);
  }
  CHECK(dm_rewrite_train_net(net, &o, out, out_init) == DM_OK, "rewrite");
  CHECK(count_files(dir) == 2, "other files than the two written in %s", dir);
  f = fopen(out, "r");
  char head[64] = {0};
  if (f) {
    CHECK(fread(head, 1, sizeof head - 1, f) > 0, "read back");
    fclose(f);
  }
  CHECK(strncmp(head, "stale", 5) != 0 && strstr(head, "name"), "the file was not replaced");
  CHECK(dm_rewrite_train_net(net, &o, bad, NULL) == DM_ERR_IO &&
            strstr(dm_last_error(), "missing"),
        "writing into a missing directory");

  /* cuda: refused without a usable GPU, naming the device; else a step runs */
  dm_workspace *ws = NULL;
  dm_net *step = NULL;
  CHECK(dm_workspace_create(&ws) == DM_OK && dm_workspace_run_net_file(ws, init) == DM_OK,
        "init");
  dm_train_options_init(&o);
  o.device = "cuda:0";
  o.db = "/nonexistent-db"; /* only reached with a GPU; then the step is not run */
  dm_status s = dm_workspace_create_train_net(ws, net, &o, &step);
  CHECK(s != DM_OK && (strstr(dm_last_error(), "cuda") || strstr(dm_last_error(), "nonexistent-db")),
        "cuda: wanted a refusal naming the device (or, with a GPU, the missing DB)");
  dm_workspace_destroy(ws);

  /* a net with gradient ops already is taken as it is (memory pass off: it would add
   * its Free ops) */
  dm_train_options_init(&o);
  o.memory = 0;
  CHECK(dm_rewrite_train_net(net, &o, out, out_init) == DM_OK, "rewrite for the rerun");
  CHECK(dm_rewrite_train_net(out, &o, again, again_init) == DM_OK, "rewrite of a trained net");
  FILE *fa = fopen(out, "rb"), *fb = fopen(again, "rb");
  int same = fa && fb;
  for (int ca = 0, cb = 0; same && (ca != EOF || cb != EOF);)
    same = (ca = fgetc(fa)) == (cb = fgetc(fb));
  CHECK(same, "a net with gradient ops was changed");
  if (fa)
    fclose(fa);
  if (fb)
    fclose(fb);
  f = fopen(again_init, "r");
  char text[256] = {0};
  if (f) {
    CHECK(fread(text, 1, sizeof text - 1, f) > 0, "read the init addition");
    fclose(f);
  }
  CHECK(strstr(text, "name: \"optimizer_init_additions\"") && !strstr(text, "op {"),
        "the init addition of a trained net is not empty: %s", text);
  const char *files[] = {out, out_init, again, again_init};
  for (size_t i = 0; i < 4; i++)
    remove(files[i]);
  remove(dir);

  if (failures)
    fprintf(stderr, "%d failure(s)\n", failures);
  else
    printf("ok\n");
  return failures ? 1 : 0;
}
