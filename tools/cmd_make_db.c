/* cmd_make_db.c: `demitasse make-db`: MNIST IDX files, or text files (--text,
 * text_db.h), -> a training and a validation LMDB (mkdb_write.h).
 *
 * MNIST records are what Caffe2's make_mnist_db (--channel_first) wrote, so Caffe2's own
 * TensorProtosDBInput reads them and ours reads Caffe2's: key "%08d" (the record's number
 * within its DB), value a serialised TensorProtos of two tensors:
 *   protos[0] image: data_type BYTE (3, Caffe2's name for UINT8), dims (1, rows, cols),
 *             the pixels in byte_data (one byte each, not one int32 each);
 *   protos[1] label: data_type INT32, no dims (a scalar), the label in int32_data.
 * The first --train images go to --out-train, the rest to --out-val.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mkdb_write.h"
#include "mnist_idx.h"
#include "proto/caffe2.pb-c.h"
#include "text_db.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: demitasse make-db --images FILE --labels FILE --out-train DIR\n"
          "                         [--out-val DIR] [--train N]\n"
          "       demitasse make-db --text FILE [--text FILE]... --context T --out-train DIR\n"
          "                         [--out-val DIR] [--val-fraction F] [--tokenizer char|byte]\n\n"
          "Converts MNIST IDX files (gzip'd or not) into LMDBs of Caffe2 TensorProtos\n"
          "records (image UINT8 1x28x28 in byte_data, label INT32; keys %%08d), as\n"
          "Caffe2's make_mnist_db wrote them. The output directories must not exist.\n\n"
          "  -i, --images FILE    IDX3 images (e.g. t10k-images-idx3-ubyte.gz)\n"
          "  -l, --labels FILE    IDX1 labels (e.g. t10k-labels-idx1-ubyte.gz)\n"
          "  -n, --train N        the first N images train (default 8000), the rest validate\n"
          "  -t, --out-train DIR  the training LMDB\n"
          "  -v, --out-val DIR    the validation LMDB (needed unless N covers every image,\n"
          "                       or, with --text, unless F is 0)\n\n"
          "With --text, the files (read in order, as one text) become windows of T + 1\n"
          "tokens for a language model: records of \"tokens\" INT32 [T] and \"targets\"\n"
          "INT32 [T] (the next token of each), a window every T tokens; the last F of the\n"
          "text (whole windows) goes to --out-val, so no validation text is trained on.\n"
          "Each DB directory holds vocab.txt, token id -> character (for `generate`).\n\n"
          "      --text FILE      a UTF-8 text file (repeatable; concatenated in order)\n"
          "      --context T      the window: T tokens in, their T next tokens out\n"
          "      --val-fraction F the share of the text that validates (default 0.05)\n"
          "      --tokenizer K    char (default: the text's distinct Unicode characters,\n"
          "                       sorted) or byte (the 256 byte values)\n"
          "  -h, --help           this text\n");
}

/* Record i of a DB that starts at image lo: the image and its label. */
typedef struct mnist_fill {
  const dm_idx *img, *lab;
  int64_t lo;
  int64_t dims[3];
  int32_t label;
  Caffe2__TensorProto image_pb, label_pb;
  Caffe2__TensorProto *protos[2];
  Caffe2__TensorProtos rec;
} mnist_fill;

static void mnist_fill_init(mnist_fill *f, const dm_idx *img, const dm_idx *lab, int64_t lo) {
  Caffe2__TensorProto tp = CAFFE2__TENSOR_PROTO__INIT;
  Caffe2__TensorProtos rec = CAFFE2__TENSOR_PROTOS__INIT;
  int64_t rows = img->dims[1], cols = img->dims[2];
  *f = (mnist_fill){.img = img, .lab = lab, .lo = lo, .dims = {1, rows, cols},
                    .image_pb = tp, .label_pb = tp, .rec = rec};
  f->image_pb.n_dims = 3;
  f->image_pb.dims = f->dims;
  f->image_pb.has_data_type = 1;
  f->image_pb.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__BYTE;
  f->image_pb.has_byte_data = 1;
  f->image_pb.byte_data.len = (size_t)(rows * cols);
  f->label_pb.has_data_type = 1;
  f->label_pb.data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32;
  f->label_pb.n_int32_data = 1;
  f->label_pb.int32_data = &f->label;
  f->protos[0] = &f->image_pb;
  f->protos[1] = &f->label_pb;
  f->rec.n_protos = 2;
  f->rec.protos = f->protos;
}

static dm_status mnist_record(void *ctx, int64_t i, const Caffe2__TensorProtos **rec) {
  mnist_fill *f = ctx;
  f->image_pb.byte_data.data = f->img->data + (size_t)(i + f->lo) * f->image_pb.byte_data.len;
  f->label = f->lab->data[i + f->lo];
  *rec = &f->rec;
  return DM_OK;
}

static dm_status make_db(const char *images, const char *labels, long train,
                         const char *out_train, const char *out_val) {
  dm_idx img, lab;
  DM_TRY(dm_idx_read(images, &img));
  dm_status s = dm_idx_read(labels, &lab);
  if (s != DM_OK) {
    dm_idx_free(&img);
    return s;
  }
  int64_t n = img.dims[0];
  if (img.ndim != 3)
    s = dm_error(DM_ERR_SHAPE, "%s: images must be 3-D (count, rows, cols), not %d-D", images,
                 img.ndim);
  else if (lab.ndim != 1)
    s = dm_error(DM_ERR_SHAPE, "%s: labels must be 1-D (count), not %d-D", labels, lab.ndim);
  else if (lab.dims[0] != n)
    s = dm_error(DM_ERR_SHAPE, "%s has %lld images but %s has %lld labels", images,
                 (long long)n, labels, (long long)lab.dims[0]);
  else if (train > n)
    s = dm_error(DM_ERR_INVALID, "--train %ld is more than the %lld images", train,
                 (long long)n);
  else if (train < n && !out_val)
    s = dm_error(DM_ERR_INVALID, "%lld images are left for validation but --out-val is not set",
                 (long long)(n - train));
  int val = train < n;
  mnist_fill fills[2];
  if (s == DM_OK) {
    mnist_fill_init(&fills[0], &img, &lab, 0);
    mnist_fill_init(&fills[1], &img, &lab, train);
    const dm_mkdb_out outs[2] = {
        {.path = out_train, .n = train, .fill = mnist_record, .ctx = &fills[0]},
        {.path = out_val, .n = n - train, .fill = mnist_record, .ctx = &fills[1]}};
    s = dm_mkdb_write(outs, val ? 2 : 1);
  }
  if (s == DM_OK) {
    printf("wrote %ld records to %s\n", train, out_train);
    if (val)
      printf("wrote %lld records to %s\n", (long long)(n - train), out_val);
  }
  dm_idx_free(&img);
  dm_idx_free(&lab);
  return s;
}

/* Flags without a short form. */
enum { F_TEXT = 1400, F_CONTEXT, F_VAL_FRACTION, F_TOKENIZER };

static int parse_fraction(const char *s, double *out) { /* [0, 1) */
  return dm_cli_parse_double(s, 0, nextafter(1.0, 0.0), out);
}

/* The flags of both modes. parse_flags returns the exit code and sets *done when the
 * command ends there (--help, a usage error). */
typedef struct mkdb_flags {
  const char *images, *labels;
  long train;
  int train_given;
  const char *text_flag; /* the first of --context, --val-fraction, --tokenizer given */
  dm_strlist texts;
  dm_text_db_opts t; /* out_train and out_val serve both modes */
} mkdb_flags;

static int parse_flags(int argc, char **argv, mkdb_flags *f, int *done) {
  static const struct option opts[] = {
      {"images", required_argument, NULL, 'i'},    {"labels", required_argument, NULL, 'l'},
      {"train", required_argument, NULL, 'n'},     {"out-train", required_argument, NULL, 't'},
      {"out-val", required_argument, NULL, 'v'},   {"help", no_argument, NULL, 'h'},
      {"text", required_argument, NULL, F_TEXT},   {"context", required_argument, NULL, F_CONTEXT},
      {"val-fraction", required_argument, NULL, F_VAL_FRACTION},
      {"tokenizer", required_argument, NULL, F_TOKENIZER},
      {NULL, 0, NULL, 0}};
  int c;
  optind = 0;
  opterr = 0;
  *done = 1;
  while ((c = getopt_long(argc, argv, "i:l:n:t:v:h", opts, NULL)) != -1) {
    if (c >= F_CONTEXT && c <= F_TOKENIZER && !f->text_flag)
      f->text_flag = c == F_CONTEXT ? "--context" : c == F_VAL_FRACTION ? "--val-fraction"
                                                                         : "--tokenizer";
    switch (c) {
    case 'i': f->images = optarg; break;
    case 'l': f->labels = optarg; break;
    case 't': f->t.out_train = optarg; break;
    case 'v': f->t.out_val = optarg; break;
    case 'n':
      f->train_given = 1;
      if (!dm_cli_parse_long(optarg, 1, 1L << 31, &f->train))
        return dm_cli_usage_error("make-db", "--train wants a positive integer");
      break;
    case F_TEXT:
      if (!dm_strlist_push(&f->texts, optarg))
        return dm_cli_failf("out of memory");
      break;
    case F_CONTEXT:
      if (!dm_cli_parse_long(optarg, 1, DM_TEXT_MAX_CONTEXT, &f->t.context))
        return dm_cli_usage_error("make-db", "--context wants a window of 1 to %ld tokens, "
                                  "not '%s'", DM_TEXT_MAX_CONTEXT, optarg);
      break;
    case F_VAL_FRACTION:
      if (!parse_fraction(optarg, &f->t.val_fraction))
        return dm_cli_usage_error("make-db", "--val-fraction wants a number in [0, 1), not '%s'",
                                  optarg);
      break;
    case F_TOKENIZER:
      if (!dm_vocab_kind_parse(optarg, &f->t.tokenizer))
        return dm_cli_usage_error("make-db", "--tokenizer wants char or byte, not '%s'", optarg);
      break;
    case 'h': help(stdout); return DM_EXIT_OK;
    default: return dm_cli_bad_option("make-db", argv);
    }
  }
  if (optind != argc)
    return dm_cli_usage_error("make-db", "unexpected argument '%s'", argv[optind]);
  *done = 0;
  return DM_EXIT_OK;
}

/* --text mode: the MNIST flags are refused, the text ones checked. */
static int text_mode(mkdb_flags *f) {
  dm_text_db_opts *t = &f->t;
  t->files = f->texts.items;
  t->n_files = f->texts.n;
  if (f->images || f->labels || f->train_given)
    return dm_cli_usage_error("make-db", "--text makes a text DB: --images, --labels and "
                              "--train are for MNIST");
  if (t->context <= 0 || !t->out_train)
    return dm_cli_usage_error("make-db", "--text needs --context T (the window's length in "
                              "tokens) and --out-train");
  if (t->val_fraction > 0 && !t->out_val)
    return dm_cli_usage_error("make-db", "--val-fraction %g needs --out-val for the validation "
                              "DB (--val-fraction 0: none)", t->val_fraction);
  if (t->val_fraction == 0 && t->out_val)
    return dm_cli_usage_error("make-db", "--out-val is given but --val-fraction is 0: no "
                              "validation text is left for it");
  return dm_text_db_make(t) == DM_OK ? DM_EXIT_OK : dm_cli_fail();
}

static int mnist_mode(const mkdb_flags *f) {
  if (f->text_flag)
    return dm_cli_usage_error("make-db", "%s is for --text (MNIST's split is --train N)",
                              f->text_flag);
  if (!f->images || !f->labels || !f->t.out_train)
    return dm_cli_usage_error("make-db", "needs --images, --labels and --out-train (MNIST), or "
                              "--text, --context and --out-train");
  return make_db(f->images, f->labels, f->train, f->t.out_train, f->t.out_val) == DM_OK
             ? DM_EXIT_OK
             : dm_cli_fail();
}

int dm_cmd_make_db(int argc, char **argv) {
  mkdb_flags f = {.train = 8000, .t = {.val_fraction = 0.05, .tokenizer = DM_VOCAB_CHAR}};
  int done = 0;
  int rc = parse_flags(argc, argv, &f, &done);
  if (!done)
    rc = f.texts.n ? text_mode(&f) : mnist_mode(&f);
  dm_strlist_free(&f.texts);
  return rc;
}
