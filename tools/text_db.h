/* text_db.h: `make-db --text`: text files -> LMDBs of next-token windows for a language
 * model, and vocab.txt beside the records (tools/text_vocab.h).
 *
 * The files are read in order and tokenized as one stream of L tokens. A record is a
 * window of T + 1 consecutive tokens, as a TensorProtos of two tensors:
 *   protos[0] "tokens"  INT32 dims [T], int32_data: tokens s .. s+T-1
 *   protos[1] "targets" INT32 dims [T], int32_data: tokens s+1 .. s+T (the next token of
 *                       each)
 * with windows starting every T tokens, so each token is a target once. The split is by
 * position: the last round(F * W) windows' tokens (W = (L - 1) / T, the windows of the
 * whole stream), v*T + 1 tokens, go to the validation DB and the training windows are
 * cut from the tokens before them, so no token of the validation text is in a training
 * record.
 */
#ifndef DM_TOOLS_TEXT_DB_H
#define DM_TOOLS_TEXT_DB_H

#include <stddef.h>

#include "core/status.h"
#include "text_vocab.h"

/* --context's range: a window of more than a million tokens is a mistake. */
#define DM_TEXT_MAX_CONTEXT (1L << 20)

typedef struct dm_text_db_opts {
  const char *const *files; /* [n_files], read in this order */
  size_t n_files;
  long context;         /* T, 1 to DM_TEXT_MAX_CONTEXT */
  double val_fraction;  /* F, in [0, 1) */
  dm_vocab_kind tokenizer;
  const char *out_train;
  const char *out_val;  /* needed when F > 0 */
} dm_text_db_opts;

/* Reads, tokenizes, splits and writes both DBs (all or none; mkdb_write.h), printing the
 * token counts, the vocabulary's size and where it wrote on stdout. */
dm_status dm_text_db_make(const dm_text_db_opts *o);

#endif
