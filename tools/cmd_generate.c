/* cmd_generate.c: `demitasse generate`: text from a language-model net, one token at a
 * time. The weights come from init nets or checkpoints of `demitasse train`; the net
 * reads `tokens` INT32 [1, T] and writes `logits` [1, T, V]. Each step feeds the last
 * min(len, T) tokens left-aligned and padded on the right with token 0 (the net's
 * attention is causal, so the padding cannot reach the last real position), samples the
 * next token from the logits there (tools/text_sample.h) and prints it as it comes. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "core/half.h"
#include "core/tensor.h"
#include "net/api.h"
#include "net/netdef_build.h"
#include "text_db.h"
#include "text_sample.h"
#include "text_vocab.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse generate --init FILE_OR_CKPT [--init ...] --net NET\n"
          "                          --vocab VOCAB.txt --prompt TEXT --tokens N\n"
          "                          [--temperature T] [--top-k K] [--seed S] [--context T]\n"
          "                          [--input-blob tokens] [--output-blob logits]\n\n"
          "Continues TEXT by N tokens with a language-model net and prints the prompt and\n"
          "the continuation on stdout, token by token. NET reads the token ids INT32\n"
          "[1, T] and writes logits [1, T, V] (FP32, FP16 or BF16); V is the size of the\n"
          "vocabulary (vocab.txt of `make-db --text`). Each step feeds the last T tokens.\n\n"
          "  -i, --init PATH         an init net, run once; or a checkpoint directory of\n"
          "                          `demitasse train` (every blob in it is loaded);\n"
          "                          repeatable, in order\n"
          "  -n, --net NET           the inference net\n"
          "  -V, --vocab FILE        vocab.txt (in the DBs of `make-db --text`)\n"
          "  -p, --prompt TEXT       the text to continue (UTF-8; at least one token)\n"
          "  -N, --tokens N          how many tokens to add\n"
          "  -t, --temperature T     softmax(logits / T) (default 1); 0: always the most\n"
          "                          likely token (greedy)\n"
          "  -k, --top-k K           sample among the K most likely tokens only (0: all,\n"
          "                          the default)\n"
          "  -s, --seed S            the sampler's seed (default 0): one seed, one text\n"
          "  -c, --context T         the window T (default: the size of the INT32 blob\n"
          "                          `positions` the init nets made, the learned positions)\n"
          "      --input-blob B      the net's token input (default tokens)\n"
          "      --output-blob B     the net's logits (default logits)\n"
          DM_THREADS_HELP("")
          "  -h, --help              this text\n");
}

typedef struct gen_opts {
  dm_strlist inits;
  const char *net, *vocab, *prompt, *input, *output;
  long tokens, context, top_k;
  double temperature;
  uint64_t seed;
} gen_opts;

/* A checkpoint of `demitasse train`: one Load op reading every blob in it. */
static dm_status load_checkpoint(dm_workspace *ws, const char *path) {
  Caffe2__NetDef *def = NULL;
  dm_net *net = NULL;
  DM_TRY(dm_netdef_new("load_checkpoint", &def));
  dm_opb b;
  dm_opb_start(&b, "Load");
  dm_opb_arg_string(&b, "db", path);
  dm_opb_arg_string(&b, "db_type", "lmdb");
  dm_opb_arg_int(&b, "load_all", 1);
  dm_status s = dm_opb_append(&b, def);
  if (s != DM_OK) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return s;
  }
  DM_TRY(dm_workspace_create_net(ws, def, path, &net)); /* takes def */
  return dm_net_run(net);
}

/* The state the --init items leave in ws: a directory is a checkpoint, anything else an
 * init net run once. */
static dm_status load_inits(dm_workspace *ws, const dm_strlist *inits) {
  for (size_t i = 0; i < inits->n; i++) {
    const char *path = inits->items[i];
    struct stat st;
    dm_net *net = NULL;
    Caffe2__NetDef *def = NULL;
    dm_status s;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      if ((s = load_checkpoint(ws, path)) != DM_OK)
        return dm_error_prefix(s, "--init '%s' is a directory, so a checkpoint of `demitasse "
                               "train`, but it cannot be loaded", path);
      continue;
    }
    if ((s = dm_netdef_read(path, &def)) == DM_OK &&
        (s = dm_workspace_create_net(ws, def, path, &net)) == DM_OK)
      s = dm_net_run(net);
    if (s != DM_OK)
      return dm_error_prefix(s, "--init %s", path);
  }
  return DM_OK;
}

/* --context, else the size of the INT32 blob `positions` the inits made. */
static dm_status context_of(dm_workspace *ws, const gen_opts *o, long *T) {
  if (o->context) {
    *T = o->context;
    return DM_OK;
  }
  const dm_tensor *pos = NULL;
  if (!dm_workspace_has_blob(ws, "positions") ||
      dm_workspace_fetch(ws, "positions", &pos) != DM_OK || dm_tensor_dtype(pos) == DM_UNDEFINED)
    return dm_error(DM_ERR_INVALID, "no --context, and the --init items made no blob "
                    "'positions' (the learned positions' indices) to take the context from: "
                    "give --context T, the window the net was trained with");
  if (dm_tensor_dtype(pos) != DM_INT32 || dm_tensor_numel(pos) < 1 ||
      dm_tensor_numel(pos) > DM_TEXT_MAX_CONTEXT)
    return dm_error(DM_ERR_INVALID, "blob 'positions' is %s with %lld elements, not the INT32 "
                    "position indices of a context of 1 to %ld tokens: give --context T",
                    dm_dtype_name(dm_tensor_dtype(pos)), (long long)dm_tensor_numel(pos),
                    DM_TEXT_MAX_CONTEXT);
  *T = (long)dm_tensor_numel(pos);
  return DM_OK;
}

/* The logits at position `at` of the net's [1, T, V] output, as FP32, into row[V]. */
static dm_status logits_row(dm_workspace *ws, const gen_opts *o, long T, int32_t V, long at,
                            float *row) {
  const dm_tensor *t = NULL;
  if (dm_workspace_fetch(ws, o->output, &t) != DM_OK || dm_tensor_dtype(t) == DM_UNDEFINED)
    return dm_error(DM_ERR_NOT_FOUND, "%s wrote no blob '%s' (--output-blob names the logits)",
                    o->net, o->output);
  const int64_t *d = dm_tensor_dims(t);
  dm_dtype dt = dm_tensor_dtype(t);
  char shape[128];
  if (dm_tensor_ndim(t) != 3 || d[0] != 1 || d[1] != T)
    return dm_error(DM_ERR_SHAPE, "%s: logits '%s' are %s, not [1, %ld, V] for --context %ld",
                    o->net, o->output, dm_shape_str(t, shape, sizeof shape), T, T);
  if (d[2] != V)
    return dm_error(DM_ERR_SHAPE, "%s: logits '%s' are %s: V = %lld tokens, but the vocabulary "
                    "%s has %d (a vocab.txt of another text?)", o->net, o->output,
                    dm_shape_str(t, shape, sizeof shape), (long long)d[2], o->vocab, V);
  if (dt != DM_FLOAT && dt != DM_FLOAT16 && dt != DM_BFLOAT16)
    return dm_error(DM_ERR_TYPE, "%s: logits '%s' are %s, not FLOAT, FLOAT16 or BFLOAT16",
                    o->net, o->output, dm_dtype_name(dt));
  const void *base = dm_tensor_data(t);
  for (int32_t v = 0; v < V; v++) {
    size_t k = (size_t)at * (size_t)V + (size_t)v;
    row[v] = dt == DM_FLOAT     ? ((const float *)base)[k]
             : dt == DM_FLOAT16 ? dm_half_to_float(((const uint16_t *)base)[k])
                                : dm_bf16_to_float(((const uint16_t *)base)[k]);
  }
  return DM_OK;
}

static void print_token(const dm_vocab *v, int32_t id) {
  uint8_t u[4];
  size_t n = dm_vocab_decode(v, id, u);
  fwrite(u, 1, n, stdout);
}

/* The net, checked to read the token input. */
static dm_status make_net(dm_workspace *ws, const gen_opts *o, dm_net **net) {
  Caffe2__NetDef *def = NULL;
  DM_TRY(dm_netdef_read(o->net, &def));
  int reads = 0;
  for (size_t i = 0; i < def->n_op && !reads; i++)
    reads = dm_opdef_reads(def->op[i], o->input);
  if (!reads) {
    protobuf_c_message_free_unpacked(&def->base, NULL);
    return dm_error(DM_ERR_INVALID, "%s: no op reads '%s' (--input-blob names the net's token "
                    "input)", o->net, o->input);
  }
  return dm_workspace_create_net(ws, def, o->net, net); /* takes def */
}

static dm_status generate(const gen_opts *o) {
  dm_vocab voc = {0};
  dm_workspace *ws = NULL;
  dm_net *net = NULL;
  dm_sampler smp = {0};
  int32_t *ids = NULL, *window = NULL;
  float *row = NULL;
  size_t n = 0;
  long T = 0;
  dm_status s;
  if ((s = dm_init()) != DM_OK || (s = dm_vocab_load(o->vocab, &voc)) != DM_OK)
    goto cleanup;
  if (o->top_k > voc.n) {
    s = dm_error(DM_ERR_INVALID, "--top-k %ld is more than the %d tokens of the vocabulary %s",
                 o->top_k, voc.n, o->vocab);
    goto cleanup;
  }
  char what[512];
  snprintf(what, sizeof what, "--prompt (vocabulary %s)", o->vocab);
  size_t np = strlen(o->prompt);
  if ((s = dm_vocab_encode(&voc, what, (const uint8_t *)o->prompt, np, &ids, &n)) != DM_OK)
    goto cleanup;
  if (n == 0) {
    s = dm_error(DM_ERR_INVALID, "--prompt is empty: generation starts from at least one token");
    goto cleanup;
  }
  int32_t *grown = realloc(ids, (n + (size_t)o->tokens) * sizeof *ids);
  if (!grown) {
    s = DM_NOMEM("the token ids");
    goto cleanup;
  }
  ids = grown;
  if ((s = dm_workspace_create(&ws)) != DM_OK || (s = load_inits(ws, &o->inits)) != DM_OK ||
      (s = context_of(ws, o, &T)) != DM_OK)
    goto cleanup;
  int64_t dims[2] = {1, T};
  window = calloc((size_t)T, sizeof *window);
  row = malloc((size_t)voc.n * sizeof *row);
  if (!window || !row) {
    s = DM_NOMEM("the token window");
    goto cleanup;
  }
  if ((s = dm_workspace_feed(ws, o->input, DM_INT32, 2, dims, window)) != DM_OK ||
      (s = make_net(ws, o, &net)) != DM_OK ||
      (s = dm_sampler_init(&smp, voc.n, o->temperature, (int32_t)o->top_k, o->seed)) != DM_OK)
    goto cleanup;
  /* the prompt is echoed once the first logits are known good: a net that writes the
   * wrong thing fails before anything is printed */
  size_t echoed = o->tokens ? 0 : n;
  for (size_t i = 0; i < echoed; i++)
    print_token(&voc, ids[i]);
  for (long step = 0; step < o->tokens; step++) {
    size_t w = n < (size_t)T ? n : (size_t)T;
    memset(window, 0, (size_t)T * sizeof *window);
    memcpy(window, ids + n - w, w * sizeof *window);
    if ((s = dm_workspace_feed(ws, o->input, DM_INT32, 2, dims, window)) != DM_OK ||
        (s = dm_net_run(net)) != DM_OK ||
        (s = logits_row(ws, o, T, voc.n, (long)w - 1, row)) != DM_OK)
      goto cleanup;
    for (; echoed < n; echoed++)
      print_token(&voc, ids[echoed]);
    if ((s = dm_sample_token(&smp, row, &ids[n])) != DM_OK) {
      dm_error_prefix(s, "%s: logits '%s' of step %ld", o->net, o->output, step + 1);
      goto cleanup;
    }
    print_token(&voc, ids[n++]);
    echoed = n;
    fflush(stdout);
  }
  printf("\n");
cleanup:
  dm_sampler_free(&smp);
  dm_workspace_destroy(ws);
  dm_vocab_free(&voc);
  free(ids);
  free(window);
  free(row);
  return s;
}

static int parse_temperature(const char *s, double *out) {
  return dm_cli_parse_double(s, 0, HUGE_VAL, out);
}

static int parse_seed(const char *s, uint64_t *out) {
  char *end = NULL;
  if (*s < '0' || *s > '9')
    return 0;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno)
    return 0;
  *out = v;
  return 1;
}

enum { F_INPUT_BLOB = 1500, F_OUTPUT_BLOB };

static int parse_flags(int argc, char **argv, gen_opts *o, int *done) {
  static const struct option opts[] = {
      {"init", required_argument, NULL, 'i'},        {"net", required_argument, NULL, 'n'},
      {"vocab", required_argument, NULL, 'V'},       {"prompt", required_argument, NULL, 'p'},
      {"tokens", required_argument, NULL, 'N'},      {"temperature", required_argument, NULL, 't'},
      {"top-k", required_argument, NULL, 'k'},       {"seed", required_argument, NULL, 's'},
      {"context", required_argument, NULL, 'c'},
      {"input-blob", required_argument, NULL, F_INPUT_BLOB},
      {"output-blob", required_argument, NULL, F_OUTPUT_BLOB},
      DM_THREADS_OPTION,                             {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c, rc;
  optind = 0;
  opterr = 0;
  *done = 1;
  while ((c = getopt_long(argc, argv, "i:n:V:p:N:t:k:s:c:h", opts, NULL)) != -1) {
    switch (c) {
    case 'i':
      if (!dm_strlist_push(&o->inits, optarg))
        return dm_cli_failf("out of memory");
      break;
    case 'n': o->net = optarg; break;
    case 'V': o->vocab = optarg; break;
    case 'p': o->prompt = optarg; break;
    case F_INPUT_BLOB: o->input = optarg; break;
    case F_OUTPUT_BLOB: o->output = optarg; break;
    case 'N':
      if (!dm_cli_parse_long(optarg, 0, 1L << 30, &o->tokens))
        return dm_cli_usage_error("generate", "--tokens wants a count of 0 to %ld, not '%s'",
                                  1L << 30, optarg);
      break;
    case 't':
      if (!parse_temperature(optarg, &o->temperature))
        return dm_cli_usage_error("generate", "--temperature wants a number >= 0 (0: greedy), "
                                  "not '%s'", optarg);
      break;
    case 'k':
      if (!dm_cli_parse_long(optarg, 0, INT32_MAX, &o->top_k))
        return dm_cli_usage_error("generate", "--top-k wants a count >= 0 (0: every token), "
                                  "not '%s'", optarg);
      break;
    case 's':
      if (!parse_seed(optarg, &o->seed))
        return dm_cli_usage_error("generate", "--seed wants an integer of 0 to 2^64 - 1, not "
                                  "'%s'", optarg);
      break;
    case 'c':
      if (!dm_cli_parse_long(optarg, 1, DM_TEXT_MAX_CONTEXT, &o->context))
        return dm_cli_usage_error("generate", "--context wants a window of 1 to %ld tokens, "
                                  "not '%s'", DM_TEXT_MAX_CONTEXT, optarg);
      break;
    case DM_THREADS_FLAG:
      if ((rc = dm_cli_threads_flag("generate", optarg)) != DM_EXIT_OK)
        return rc;
      break;
    case 'h': help(stdout); return DM_EXIT_OK;
    default: return dm_cli_bad_option("generate", argv);
    }
  }
  if (optind != argc)
    return dm_cli_usage_error("generate", "unexpected argument '%s'", argv[optind]);
  if (!o->inits.n || !o->net || !o->vocab || !o->prompt || o->tokens < 0)
    return dm_cli_usage_error("generate", "needs --init, --net, --vocab, --prompt and --tokens");
  *done = 0;
  return DM_EXIT_OK;
}

int dm_cmd_generate(int argc, char **argv) {
  gen_opts o = {.input = "tokens", .output = "logits", .tokens = -1, .temperature = 1};
  int done = 0;
  int rc = parse_flags(argc, argv, &o, &done);
  if (!done)
    rc = generate(&o) == DM_OK ? DM_EXIT_OK : dm_cli_fail();
  dm_strlist_free(&o.inits);
  return rc;
}
