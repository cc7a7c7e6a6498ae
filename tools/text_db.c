/* text_db.c: `make-db --text`, text files -> next-token LMDBs (see text_db.h). */
#include "text_db.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/netio.h"
#include "mkdb_write.h"

/* The token stream: the code points (char) or bytes of every file, later mapped to ids
 * in place (a code point fits in int32). */
typedef struct stream {
  int32_t *tok; /* [n] */
  size_t n, cap;
  uint64_t *present; /* char: a bit per code point seen */
} stream;

static dm_status push(stream *st, const char *path, size_t k) {
  if (st->n + k <= st->cap)
    return DM_OK;
  size_t cap = st->cap ? st->cap : 4096;
  while (cap < st->n + k)
    cap *= 2;
  int32_t *grown = realloc(st->tok, cap * sizeof *grown);
  if (!grown)
    return DM_NOMEM(path);
  st->tok = grown;
  st->cap = cap;
  return DM_OK;
}

static dm_status read_one(const dm_text_db_opts *o, const char *path, stream *st) {
  uint8_t *text = NULL;
  uint32_t *cps = NULL;
  size_t len = 0, n = 0;
  DM_TRY(dm_read_file_as(path, "a text is read from a regular file", &text, &len));
  dm_status s = len ? DM_OK : dm_error(DM_ERR_INVALID, "%s: empty file: no text to tokenize", path);
  if (s == DM_OK && o->tokenizer == DM_VOCAB_CHAR)
    s = dm_utf8_decode(path, text, len, &cps, &n);
  if (s == DM_OK)
    s = push(st, path, o->tokenizer == DM_VOCAB_CHAR ? n : len);
  if (s == DM_OK && o->tokenizer == DM_VOCAB_CHAR)
    for (size_t i = 0; i < n; i++) {
      st->tok[st->n++] = (int32_t)cps[i];
      st->present[cps[i] >> 6] |= (uint64_t)1 << (cps[i] & 63);
    }
  else if (s == DM_OK)
    for (size_t i = 0; i < len; i++)
      st->tok[st->n++] = text[i];
  free(cps);
  free(text);
  return s;
}

/* Record i of a DB whose first window starts at token `base`. */
typedef struct text_fill {
  const int32_t *tok;
  size_t base;
  long T;
  int64_t dims[1];
  Caffe2__TensorProto tokens_pb, targets_pb;
  Caffe2__TensorProto *protos[2];
  Caffe2__TensorProtos rec;
} text_fill;

static void text_fill_init(text_fill *f, const int32_t *tok, size_t base, long T) {
  Caffe2__TensorProto tp = CAFFE2__TENSOR_PROTO__INIT;
  Caffe2__TensorProtos rec = CAFFE2__TENSOR_PROTOS__INIT;
  *f = (text_fill){.tok = tok, .base = base, .T = T, .dims = {T}, .tokens_pb = tp,
                   .targets_pb = tp, .rec = rec};
  Caffe2__TensorProto *pb[2] = {&f->tokens_pb, &f->targets_pb};
  static char *names[2] = {"tokens", "targets"};
  for (int k = 0; k < 2; k++) {
    pb[k]->name = names[k];
    pb[k]->n_dims = 1;
    pb[k]->dims = f->dims;
    pb[k]->has_data_type = 1;
    pb[k]->data_type = CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32;
    pb[k]->n_int32_data = (size_t)T;
    f->protos[k] = pb[k];
  }
  f->rec.n_protos = 2;
  f->rec.protos = f->protos;
}

static dm_status text_record(void *ctx, int64_t i, const Caffe2__TensorProtos **rec) {
  text_fill *f = ctx;
  const int32_t *w = f->tok + f->base + (size_t)i * (size_t)f->T;
  f->tokens_pb.int32_data = (int32_t *)w; /* packed, never written through */
  f->targets_pb.int32_data = (int32_t *)w + 1;
  *rec = &f->rec;
  return DM_OK;
}

/* The split (text_db.h): *n_train and *n_val windows, the validation windows from token
 * *val_at on. */
static dm_status split(const dm_text_db_opts *o, size_t L, int64_t *n_train, int64_t *n_val,
                       size_t *val_at) {
  size_t T = (size_t)o->context;
  if (L < T + 1)
    return dm_error(DM_ERR_INVALID, "the text is %zu tokens, shorter than one window of "
                    "--context %ld + 1 tokens", L, o->context);
  size_t W = (L - 1) / T;
  size_t v = (size_t)llround(o->val_fraction * (double)W);
  if (o->val_fraction > 0 && v == 0)
    return dm_error(DM_ERR_INVALID, "--val-fraction %g of the text's %zu windows of %zu tokens "
                    "is no whole window: a longer text, a larger --val-fraction or a smaller "
                    "--context (or --val-fraction 0 for no validation DB)", o->val_fraction, W,
                    T + 1);
  *val_at = v ? L - (v * T + 1) : L;
  if (*val_at < T + 1)
    return dm_error(DM_ERR_INVALID, "the training text is %zu tokens once the last %zu go to "
                    "validation (--val-fraction %g), shorter than one window of --context %ld "
                    "+ 1 tokens", *val_at, L - *val_at, o->val_fraction, o->context);
  *n_train = (int64_t)((*val_at - 1) / T);
  *n_val = (int64_t)v;
  return DM_OK;
}

/* The code points of the stream -> their ids in the vocabulary (which holds them all). */
static void to_ids(stream *st, const dm_vocab *v) {
  if (v->kind == DM_VOCAB_CHAR)
    for (size_t i = 0; i < st->n; i++)
      st->tok[i] = dm_vocab_id(v, (uint32_t)st->tok[i]);
}

dm_status dm_text_db_make(const dm_text_db_opts *o) {
  stream st = {0};
  dm_vocab voc = {0};
  char *vtext = NULL;
  size_t vlen = 0, val_at = 0;
  int64_t n_train = 0, n_val = 0;
  dm_status s = DM_OK;
  if (o->tokenizer == DM_VOCAB_CHAR &&
      !(st.present = calloc((DM_VOCAB_MAX_CP >> 6) + 1, sizeof *st.present)))
    return DM_NOMEM("the character set");
  /* an output in the way is said before a long text is read */
  if ((s = dm_mkdb_refuse_existing(o->out_train)) == DM_OK && o->out_val)
    s = dm_mkdb_refuse_existing(o->out_val);
  for (size_t i = 0; i < o->n_files && s == DM_OK; i++)
    s = read_one(o, o->files[i], &st);
  if (s == DM_OK)
    s = split(o, st.n, &n_train, &n_val, &val_at);
  if (s == DM_OK && n_val && !o->out_val)
    s = dm_error(DM_ERR_INVALID, "--val-fraction %g leaves %lld windows for validation but "
                 "--out-val is not set (--val-fraction 0: none)", o->val_fraction,
                 (long long)n_val);
  if (s == DM_OK)
    s = dm_vocab_from_bitmap(o->tokenizer, st.present, &voc);
  if (s == DM_OK)
    s = dm_vocab_format(&voc, &vtext, &vlen);
  if (s == DM_OK) {
    to_ids(&st, &voc);
    text_fill fills[2];
    text_fill_init(&fills[0], st.tok, 0, o->context);
    text_fill_init(&fills[1], st.tok, val_at, o->context);
    const dm_mkdb_out outs[2] = {
        {.path = o->out_train, .n = n_train, .fill = text_record, .ctx = &fills[0],
         .extra_name = "vocab.txt", .extra = vtext, .extra_len = vlen},
        {.path = o->out_val, .n = n_val, .fill = text_record, .ctx = &fills[1],
         .extra_name = "vocab.txt", .extra = vtext, .extra_len = vlen}};
    s = dm_mkdb_write(outs, n_val ? 2 : 1);
  }
  if (s == DM_OK) {
    size_t T = (size_t)o->context;
    printf("read %zu tokens (%s tokenizer) from %zu file%s; vocabulary: %d tokens\n", st.n,
           dm_vocab_kind_name(o->tokenizer), o->n_files, o->n_files == 1 ? "" : "s", voc.n);
    printf("wrote %lld record%s (tokens, targets: INT32 [%zu]) from tokens [0, %zu) to %s, "
           "with %s/vocab.txt\n", (long long)n_train, n_train == 1 ? "" : "s", T,
           (size_t)n_train * T + 1, o->out_train, o->out_train);
    if (n_val)
      printf("wrote %lld record%s from tokens [%zu, %zu) to %s, with %s/vocab.txt\n",
             (long long)n_val, n_val == 1 ? "" : "s", val_at, st.n, o->out_val, o->out_val);
  }
  free(vtext);
  dm_vocab_free(&voc);
  free(st.tok);
  free(st.present);
  return s;
}
