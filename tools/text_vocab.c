/* text_vocab.c: vocab.txt, strict UTF-8 and the token mapping (see text_vocab.h). */
#include "text_vocab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/netio.h"

#define HEADER "demitasse-vocab 1 "

void dm_vocab_free(dm_vocab *v) {
  if (!v)
    return;
  free(v->cp);
  v->cp = NULL;
  v->n = 0;
}

int dm_vocab_kind_parse(const char *s, dm_vocab_kind *kind) {
  if (strcmp(s, "char") == 0)
    *kind = DM_VOCAB_CHAR;
  else if (strcmp(s, "byte") == 0)
    *kind = DM_VOCAB_BYTE;
  else
    return 0;
  return 1;
}

const char *dm_vocab_kind_name(dm_vocab_kind kind) {
  return kind == DM_VOCAB_BYTE ? "byte" : "char";
}

static int is_scalar(uint32_t c) { return c <= DM_VOCAB_MAX_CP && (c < 0xD800 || c > 0xDFFF); }

/* One code point at p[0..avail): its length, or 0 for an invalid sequence (*why says
 * what is wrong). */
static size_t utf8_one(const uint8_t *p, size_t avail, uint32_t *cp, const char **why) {
  uint8_t b = p[0];
  size_t len;
  uint32_t c, min;
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  if (b >= 0xC2 && b <= 0xDF)
    len = 2, c = b & 0x1F, min = 0x80;
  else if (b >= 0xE0 && b <= 0xEF)
    len = 3, c = b & 0x0F, min = 0x800;
  else if (b >= 0xF0 && b <= 0xF4)
    len = 4, c = b & 0x07, min = 0x10000;
  else {
    *why = b >= 0x80 && b <= 0xBF ? "a continuation byte with no lead byte"
                                  : "a byte that never occurs in UTF-8";
    return 0;
  }
  for (size_t i = 1; i < len; i++) {
    if (i >= avail) {
      *why = "a sequence cut off by the end of the text";
      return 0;
    }
    if ((p[i] & 0xC0) != 0x80) {
      *why = "a sequence cut short (a lead byte without its continuation bytes)";
      return 0;
    }
    c = c << 6 | (p[i] & 0x3F);
  }
  if (c < min) {
    *why = "an overlong encoding";
    return 0;
  }
  if (!is_scalar(c)) {
    *why = c > DM_VOCAB_MAX_CP ? "a value past U+10FFFF" : "a UTF-16 surrogate";
    return 0;
  }
  *cp = c;
  return len;
}

static dm_status utf8_error(const char *what, const uint8_t *text, size_t len, size_t at,
                            const char *why) {
  char bytes[16] = "";
  for (size_t i = 0; i < 4 && at + i < len; i++)
    snprintf(bytes + 3 * i, sizeof bytes - 3 * i, " %02X", text[at + i]);
  return dm_error(DM_ERR_PARSE, "%s: invalid UTF-8 at byte offset %zu (bytes%s): %s", what, at,
                  bytes, why);
}

dm_status dm_utf8_decode(const char *what, const uint8_t *text, size_t len, uint32_t **cps,
                         size_t *n) {
  *cps = NULL;
  *n = 0;
  uint32_t *out = malloc((len ? len : 1) * sizeof *out);
  if (!out)
    return DM_NOMEM("the decoded text");
  size_t k = 0;
  for (size_t at = 0; at < len;) {
    const char *why = "";
    size_t step = utf8_one(text + at, len - at, &out[k], &why);
    if (!step) {
      free(out);
      return utf8_error(what, text, len, at, why);
    }
    at += step;
    k++;
  }
  *cps = out;
  *n = k;
  return DM_OK;
}

size_t dm_utf8_encode(uint32_t cp, uint8_t out[4]) {
  if (!is_scalar(cp))
    return 0;
  if (cp < 0x80) {
    out[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (uint8_t)(0xC0 | cp >> 6);
    out[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (uint8_t)(0xE0 | cp >> 12);
    out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (uint8_t)(0xF0 | cp >> 18);
  out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
  out[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

dm_status dm_vocab_from_bitmap(dm_vocab_kind kind, const uint64_t *present, dm_vocab *out) {
  memset(out, 0, sizeof *out);
  out->kind = kind;
  size_t n = 0;
  if (kind == DM_VOCAB_BYTE)
    n = 256;
  else
    for (uint32_t c = 0; c <= DM_VOCAB_MAX_CP; c++)
      n += present[c >> 6] >> (c & 63) & 1;
  if (n == 0)
    return dm_error(DM_ERR_INVALID, "the text has no character to make a vocabulary of");
  if (!(out->cp = malloc(n * sizeof *out->cp)))
    return DM_NOMEM("the vocabulary");
  size_t k = 0;
  for (uint32_t c = 0; c <= (kind == DM_VOCAB_BYTE ? 255u : DM_VOCAB_MAX_CP); c++)
    if (kind == DM_VOCAB_BYTE || (present[c >> 6] >> (c & 63) & 1))
      out->cp[k++] = c;
  out->n = (int32_t)n; /* n <= 0x110000 */
  return DM_OK;
}

static void format_token(const dm_vocab *v, uint32_t c, char *buf, size_t cap) {
  snprintf(buf, cap, v->kind == DM_VOCAB_BYTE ? "0x%02X" : "U+%04X", (unsigned)c);
}

dm_status dm_vocab_format(const dm_vocab *v, char **buf, size_t *len) {
  size_t cap = 64 + (size_t)v->n * 10; /* "U+10FFFF\n" is 9 bytes */
  char *out = malloc(cap);
  if (!out)
    return DM_NOMEM("vocab.txt");
  size_t k = (size_t)snprintf(out, cap, HEADER "%s %d\n", dm_vocab_kind_name(v->kind), v->n);
  for (int32_t i = 0; i < v->n; i++) {
    format_token(v, v->cp[i], out + k, cap - k);
    k += strlen(out + k);
    out[k++] = '\n';
  }
  *buf = out;
  *len = k;
  return DM_OK;
}

dm_status dm_vocab_save(const char *path, const dm_vocab *v) {
  char *buf = NULL;
  size_t len = 0;
  DM_TRY(dm_vocab_format(v, &buf, &len));
  dm_status s = dm_write_file_atomic(path, buf, len);
  free(buf);
  return s;
}

/* The next line of text[*at..len) (without its '\n') into line[cap]; 0 at the end of
 * the text; -1 when the last line has no '\n' or a line is longer than cap - 1. */
static int next_line(const char *text, size_t len, size_t *at, char *line, size_t cap) {
  if (*at >= len)
    return 0;
  const char *nl = memchr(text + *at, '\n', len - *at);
  size_t n = nl ? (size_t)(nl - (text + *at)) : len - *at;
  if (!nl || n >= cap)
    return -1;
  memcpy(line, text + *at, n);
  line[n] = '\0';
  *at += n + 1;
  return 1;
}

/* "U+XXXX" (4 to 6 upper-case hex digits) or "0xHH" -> *c; 0 if malformed. */
static int parse_token(dm_vocab_kind kind, const char *s, uint32_t *c) {
  const char *prefix = kind == DM_VOCAB_BYTE ? "0x" : "U+";
  size_t lo = kind == DM_VOCAB_BYTE ? 2 : 4, hi = kind == DM_VOCAB_BYTE ? 2 : 6;
  if (strncmp(s, prefix, 2) != 0)
    return 0;
  size_t n = strlen(s + 2);
  if (n < lo || n > hi)
    return 0;
  uint32_t v = 0;
  for (const char *p = s + 2; *p; p++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
    if (d < 0)
      return 0;
    v = v << 4 | (uint32_t)d;
  }
  *c = v;
  return 1;
}

static dm_status parse_header(const char *path, const char *line, dm_vocab *out) {
  char kind[8];
  long n = 0;
  int used = 0;
  if (strncmp(line, HEADER, strlen(HEADER)) != 0)
    return dm_error(DM_ERR_PARSE, "%s:1: not a vocabulary: the first line is not "
                    "\"" HEADER "char|byte N\" (make-db --text writes vocab.txt)", path);
  if (sscanf(line + strlen(HEADER), "%7s %ld%n", kind, &n, &used) != 2 ||
      line[strlen(HEADER) + (size_t)used] != '\0' || !dm_vocab_kind_parse(kind, &out->kind))
    return dm_error(DM_ERR_PARSE, "%s:1: header '%s': wanted \"" HEADER "char N\" or \"" HEADER
                    "byte 256\"", path, line);
  long max = out->kind == DM_VOCAB_BYTE ? 256 : (long)DM_VOCAB_MAX_CP + 1 - 2048;
  if (out->kind == DM_VOCAB_BYTE ? n != 256 : n < 1 || n > max)
    return dm_error(DM_ERR_PARSE, "%s:1: %s vocabulary of %ld tokens: wanted %s", path, kind, n,
                    out->kind == DM_VOCAB_BYTE ? "256" : "1 to 1112064 (the Unicode scalar values)");
  out->n = (int32_t)n;
  return DM_OK;
}

static dm_status parse_body(const char *path, const char *text, size_t len, dm_vocab *out) {
  char line[64];
  size_t at = 0;
  int r = next_line(text, len, &at, line, sizeof line);
  if (r <= 0)
    return dm_error(DM_ERR_PARSE, "%s:1: %s", path,
                    r == 0 ? "empty file: no vocabulary header" : "the header line is not "
                    "complete (no newline, or too long)");
  DM_TRY(parse_header(path, line, out));
  if (!(out->cp = malloc((size_t)out->n * sizeof *out->cp)))
    return DM_NOMEM("the vocabulary");
  for (int32_t i = 0; i < out->n; i++) {
    long ln = (long)i + 2;
    if ((r = next_line(text, len, &at, line, sizeof line)) <= 0)
      return dm_error(DM_ERR_PARSE, "%s:%ld: %s (the header announces %d tokens)", path, ln,
                      r == 0 ? "truncated: the file ends before this token's line"
                             : "truncated or overlong: this line has no newline within 63 bytes",
                      out->n);
    uint32_t c;
    if (!parse_token(out->kind, line, &c))
      return dm_error(DM_ERR_PARSE, "%s:%ld: token %d '%s' is not %s", path, ln, i, line,
                      out->kind == DM_VOCAB_BYTE ? "0xHH (two upper-case hex digits)"
                                                 : "U+XXXX (4 to 6 upper-case hex digits)");
    if (out->kind == DM_VOCAB_CHAR && !is_scalar(c))
      return dm_error(DM_ERR_PARSE, "%s:%ld: token %d '%s' is out of range: %s", path, ln, i,
                      line, c > DM_VOCAB_MAX_CP ? "past U+10FFFF" : "a UTF-16 surrogate");
    if (i > 0 && c == out->cp[i - 1])
      return dm_error(DM_ERR_PARSE, "%s:%ld: token %d '%s' is a duplicate of token %d", path,
                      ln, i, line, i - 1);
    if (i > 0 && c < out->cp[i - 1])
      return dm_error(DM_ERR_PARSE, "%s:%ld: token %d '%s' is below token %d: the values must "
                      "ascend", path, ln, i, line, i - 1);
    out->cp[i] = c;
  }
  if (at < len)
    return dm_error(DM_ERR_PARSE, "%s:%d: text after the %d tokens the header announces", path,
                    out->n + 2, out->n);
  return DM_OK;
}

dm_status dm_vocab_parse(const char *path, const char *text, size_t len, dm_vocab *out) {
  memset(out, 0, sizeof *out);
  dm_status s = parse_body(path, text, len, out);
  if (s != DM_OK)
    dm_vocab_free(out);
  return s;
}

dm_status dm_vocab_load(const char *path, dm_vocab *out) {
  memset(out, 0, sizeof *out);
  uint8_t *text = NULL;
  size_t len = 0;
  DM_TRY(dm_read_file_as(path, "a vocabulary is read from a regular file", &text, &len));
  dm_status s = dm_vocab_parse(path, (const char *)text, len, out);
  free(text);
  return s;
}

int32_t dm_vocab_id(const dm_vocab *v, uint32_t c) {
  int32_t lo = 0, hi = v->n - 1;
  while (lo <= hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (v->cp[mid] == c)
      return mid;
    if (v->cp[mid] < c)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

dm_status dm_vocab_encode(const dm_vocab *v, const char *what, const uint8_t *text, size_t len,
                          int32_t **ids, size_t *n) {
  *ids = NULL;
  *n = 0;
  int32_t *out = malloc((len ? len : 1) * sizeof *out);
  if (!out)
    return DM_NOMEM("the token ids");
  size_t k = 0;
  for (size_t at = 0; at < len; k++) {
    uint32_t c = text[at];
    size_t step = 1;
    const char *why = "";
    if (v->kind == DM_VOCAB_CHAR && !(step = utf8_one(text + at, len - at, &c, &why))) {
      free(out);
      return utf8_error(what, text, len, at, why);
    }
    if ((out[k] = dm_vocab_id(v, c)) < 0) {
      char name[16];
      uint8_t u[5] = {0};
      format_token(v, c, name, sizeof name);
      int printable = v->kind == DM_VOCAB_CHAR && c >= 0x20 && c != 0x7F;
      if (printable)
        dm_utf8_encode(c, u);
      free(out);
      return dm_error(DM_ERR_NOT_FOUND, "%s: character %s%s%s%s at byte offset %zu is not in "
                      "the vocabulary", what, name, printable ? " '" : "",
                      printable ? (char *)u : "", printable ? "'" : "", at);
    }
    at += step;
  }
  *ids = out;
  *n = k;
  return DM_OK;
}

size_t dm_vocab_decode(const dm_vocab *v, int32_t id, uint8_t out[4]) {
  if (id < 0 || id >= v->n)
    return 0;
  if (v->kind == DM_VOCAB_BYTE) {
    out[0] = (uint8_t)v->cp[id];
    return 1;
  }
  return dm_utf8_encode(v->cp[id], out);
}

