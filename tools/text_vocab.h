/* text_vocab.h: the token vocabulary of `make-db --text` and `generate`, its vocab.txt
 * file, and the UTF-8 <-> token id mapping.
 *
 * vocab.txt (written by make-db beside the records, read by generate):
 *   line 1      "demitasse-vocab 1 char N" or "demitasse-vocab 1 byte 256"
 *   line i + 2  token id i: "U+XXXX" (a Unicode scalar value, 4 to 6 upper-case hex
 *               digits) for char, "0xHH" (two upper-case hex digits) for byte
 * every line ends with '\n'; the values ascend strictly (so a vocabulary is the sorted
 * distinct characters of its text, and a byte vocabulary is id i = byte i).
 *
 * Char tokens are Unicode code points of UTF-8 text, decoded strictly: overlong forms,
 * surrogates, values past U+10FFFF and cut-off sequences are errors naming the text and
 * the byte offset. Byte tokens are the 256 byte values, any text accepted.
 */
#ifndef DM_TOOLS_TEXT_VOCAB_H
#define DM_TOOLS_TEXT_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum dm_vocab_kind { DM_VOCAB_CHAR = 0, DM_VOCAB_BYTE = 1 } dm_vocab_kind;

/* The largest Unicode scalar value: a char vocabulary has at most 0x110000 - 2048 (the
 * surrogates) entries, far inside INT32 range. */
#define DM_VOCAB_MAX_CP 0x10FFFFu

typedef struct dm_vocab {
  dm_vocab_kind kind;
  int32_t n;     /* the number of tokens */
  uint32_t *cp;  /* [n] the code point (char) or byte value (byte) of each id, ascending;
                    owned, freed by dm_vocab_free */
} dm_vocab;

void dm_vocab_free(dm_vocab *v); /* the arrays; the struct itself is the caller's */

/* "char" or "byte" -> *kind; 0 if it is neither. */
int dm_vocab_kind_parse(const char *s, dm_vocab_kind *kind);
const char *dm_vocab_kind_name(dm_vocab_kind kind);

/* The strict UTF-8 decoder: `len` bytes of `what` (a file name, "--prompt") -> *cps
 * (malloc'd, *n code points). An error names `what` and the byte offset. */
dm_status dm_utf8_decode(const char *what, const uint8_t *text, size_t len, uint32_t **cps,
                         size_t *n);
/* The UTF-8 bytes of code point cp (at most 4) into out; the count, or 0 for a value
 * that is no Unicode scalar value. */
size_t dm_utf8_encode(uint32_t cp, uint8_t out[4]);

/* The vocabulary of a text: for char, the sorted distinct values of present[] (a bitmap
 * of DM_VOCAB_MAX_CP + 1 bits, bit c set when code point c occurs); for byte, all 256
 * values (present ignored). DM_ERR_INVALID for a char text with no character. */
dm_status dm_vocab_from_bitmap(dm_vocab_kind kind, const uint64_t *present, dm_vocab *out);

/* vocab.txt: the text above (*buf malloc'd, *len bytes), and the file written atomically
 * (core/fileio.h). */
dm_status dm_vocab_format(const dm_vocab *v, char **buf, size_t *len);
dm_status dm_vocab_save(const char *path, const dm_vocab *v);
/* Reads and checks vocab.txt (a regular file); errors say "path:line: what is wrong". */
dm_status dm_vocab_load(const char *path, dm_vocab *out);
/* The same on a file's contents already in memory (`path` names it in errors). */
dm_status dm_vocab_parse(const char *path, const char *text, size_t len, dm_vocab *out);

/* The id of code point / byte value c, or -1 when the vocabulary lacks it. */
int32_t dm_vocab_id(const dm_vocab *v, uint32_t c);
/* `len` bytes of text (UTF-8 for char) -> *ids (malloc'd, *n ids). An invalid UTF-8
 * sequence or a character the vocabulary lacks is an error naming `what`, the character
 * and its byte offset. */
dm_status dm_vocab_encode(const dm_vocab *v, const char *what, const uint8_t *text, size_t len,
                          int32_t **ids, size_t *n);
/* The bytes of token `id` into out: its UTF-8 (char) or its byte; the count (1 to 4), or
 * 0 for an id outside [0, n). */
size_t dm_vocab_decode(const dm_vocab *v, int32_t id, uint8_t out[4]);


#endif
