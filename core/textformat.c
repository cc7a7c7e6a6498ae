/* textformat.c: protobuf text format (what `protoc --decode` prints and `protoc --encode`
 * reads), parsed and printed for any protobuf-c message by walking its descriptors.
 *
 * The parser builds messages with malloc and protobuf_c_message_init, keeping every
 * message consistent after each step (counts match initialised elements), so on any
 * error one protobuf_c_message_free_unpacked of the root releases everything.
 * Where protoc's text format and protobuf-c disagree we follow protoc, except where
 * noted ("lenient", "stricter") for reasons given there.
 */
#include "netio.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting is refused rather than risking the stack on hostile input. */
#define DM_TEXT_MAX_DEPTH 100

/* ---- numbers in the C locale, whatever locale the host application set ---- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

static locale_t get_c_locale(void) {
  pthread_once(&c_locale_once, c_locale_init);
  return c_locale;
}

static double strtod_c(const char *s, char **end) {
  locale_t loc = get_c_locale();
  return loc ? strtod_l(s, end, loc) : strtod(s, end);
}

static void format_c(char *buf, size_t n, const char *fmt, int prec, double v) {
  locale_t loc = get_c_locale();
  locale_t old = loc ? uselocale(loc) : (locale_t)0;
  snprintf(buf, n, fmt, prec, v);
  if (loc)
    uselocale(old);
}

/* A float parsed the way protoc's text parser does it: as a double, then rounded, with
 * values beyond FLT_MAX + half an ulp becoming infinities (the cast is not left to
 * chance for those). */
static float double_to_float(double v) {
  const double lim = 0x1.ffffffp127;
  if (v >= lim)
    return INFINITY;
  if (v <= -lim)
    return -INFINITY;
  return (float)v;
}

/* ================================ tokenizer ================================ */

typedef enum { TK_EOF, TK_IDENT, TK_INT, TK_FLOAT, TK_STRING, TK_SYM } tk_kind;

typedef struct {
  tk_kind kind;
  size_t pos, len; /* bytes of the token in the text */
  int line, col;   /* 1-based, columns in bytes */
} token;

typedef struct {
  const char *text;
  size_t len;
  size_t pos; /* next unread byte */
  int line, col;
  const char *source;
  token tok; /* the current (lookahead) token */
  int depth;
} parser;

static dm_status perr_at(const parser *p, int line, int col, const char *fmt, ...)
    DM_PRINTF(4, 5);

static dm_status perr_at(const parser *p, int line, int col, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dm_error(DM_ERR_PARSE, "%s:%d:%d: %s", p->source, line, col, msg);
}

/* "'text'" or "end of input", for "got ..." in messages. */
static const char *tok_desc(const parser *p, const token *t, char *buf, size_t n) {
  if (t->kind == TK_EOF) {
    snprintf(buf, n, "end of input");
  } else {
    size_t l = t->len > 40 ? 40 : t->len;
    snprintf(buf, n, "'%.*s%s'", (int)l, p->text + t->pos, t->len > 40 ? "..." : "");
  }
  return buf;
}

static bool is_ident_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }
static bool is_hex(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int hex_val(int c) {
  return is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : c - 'A' + 10;
}

static int peek_at(const parser *p, size_t i) {
  return i < p->len ? (unsigned char)p->text[i] : -1;
}

/* Numbers follow protoc's tokenizer: 0x.. hex, 0.. octal, decimal with optional
 * fraction and exponent, an optional f/F making it a float, and no letter directly
 * after (so "1x" is an error rather than two tokens). */
static dm_status lex_number(parser *p) {
  size_t i = p->pos;
  bool is_float = false;
  if (peek_at(p, i) == '0' && (peek_at(p, i + 1) == 'x' || peek_at(p, i + 1) == 'X')) {
    i += 2;
    if (!is_hex(peek_at(p, i)))
      return perr_at(p, p->line, p->col + (int)(i - p->pos), "'0x' must be followed by hex digits");
    while (is_hex(peek_at(p, i)))
      i++;
  } else if (peek_at(p, i) == '0' && is_digit(peek_at(p, i + 1))) {
    while (is_digit(peek_at(p, i))) {
      if (peek_at(p, i) > '7')
        return perr_at(p, p->line, p->col + (int)(i - p->pos),
                       "numbers starting with a leading zero must be octal");
      i++;
    }
  } else {
    while (is_digit(peek_at(p, i)))
      i++;
    if (peek_at(p, i) == '.') {
      is_float = true;
      i++;
      while (is_digit(peek_at(p, i)))
        i++;
    }
    if (peek_at(p, i) == 'e' || peek_at(p, i) == 'E') {
      is_float = true;
      i++;
      if (peek_at(p, i) == '+' || peek_at(p, i) == '-')
        i++;
      if (!is_digit(peek_at(p, i)))
        return perr_at(p, p->line, p->col + (int)(i - p->pos), "'e' must be followed by an exponent");
      while (is_digit(peek_at(p, i)))
        i++;
    }
    if (peek_at(p, i) == 'f' || peek_at(p, i) == 'F') {
      is_float = true;
      i++;
    }
  }
  if (is_ident_char(peek_at(p, i)))
    return perr_at(p, p->line, p->col + (int)(i - p->pos), "need space between number and identifier");
  if (peek_at(p, i) == '.')
    return perr_at(p, p->line, p->col + (int)(i - p->pos), "unexpected '.' after a number");
  p->tok.kind = is_float ? TK_FLOAT : TK_INT;
  p->tok.len = i - p->pos;
  return DM_OK;
}

/* Only finds the end; escapes are checked when the literal is decoded. */
static dm_status lex_string(parser *p) {
  int q = peek_at(p, p->pos);
  size_t i = p->pos + 1;
  for (;;) {
    int c = peek_at(p, i);
    if (c < 0 || c == '\n')
      return perr_at(p, p->line, p->col, "string literal is not terminated before the end of the line");
    if (c == '\\') {
      if (peek_at(p, i + 1) < 0 || peek_at(p, i + 1) == '\n')
        return perr_at(p, p->line, p->col, "string literal is not terminated before the end of the line");
      i += 2;
      continue;
    }
    i++;
    if (c == q)
      break;
  }
  p->tok.kind = TK_STRING;
  p->tok.len = i - p->pos;
  return DM_OK;
}

/* Moves to the next token, skipping whitespace and # comments. */
static dm_status lex_next(parser *p) {
  dm_status st = DM_OK;
  for (;;) {
    int c = peek_at(p, p->pos);
    if (c == '\n') {
      p->pos++;
      p->line++;
      p->col = 1;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      p->pos++;
      p->col++;
    } else if (c == '#') {
      while (p->pos < p->len && p->text[p->pos] != '\n') {
        p->pos++;
        p->col++;
      }
    } else {
      break;
    }
  }
  p->tok.pos = p->pos;
  p->tok.line = p->line;
  p->tok.col = p->col;
  p->tok.len = 0;
  int c = peek_at(p, p->pos);
  if (c < 0) {
    p->tok.kind = TK_EOF;
    return DM_OK;
  }
  if (is_ident_start(c)) {
    size_t i = p->pos;
    while (is_ident_char(peek_at(p, i)))
      i++;
    p->tok.kind = TK_IDENT;
    p->tok.len = i - p->pos;
  } else if (is_digit(c) || (c == '.' && is_digit(peek_at(p, p->pos + 1)))) {
    st = lex_number(p);
  } else if (c == '"' || c == '\'') {
    st = lex_string(p);
  } else if (strchr("{}<>[]:,;-", c) != NULL) {
    p->tok.kind = TK_SYM;
    p->tok.len = 1;
  } else if (c >= 0x20 && c < 0x7f) {
    return perr_at(p, p->line, p->col, "unexpected character '%c'", c);
  } else {
    return perr_at(p, p->line, p->col, "unexpected byte 0x%02x", (unsigned)c);
  }
  if (st != DM_OK)
    return st;
  /* Tokens never span lines, so the column just moves on. */
  p->pos += p->tok.len;
  p->col += (int)p->tok.len;
  return DM_OK;
}

static bool at_sym(const parser *p, char c) {
  return p->tok.kind == TK_SYM && p->text[p->tok.pos] == c;
}

static bool at_ident(const parser *p, const char *word) {
  return p->tok.kind == TK_IDENT && p->tok.len == strlen(word) &&
         memcmp(p->text + p->tok.pos, word, p->tok.len) == 0;
}

static bool at_ident_nocase(const parser *p, const char *word) {
  return p->tok.kind == TK_IDENT && p->tok.len == strlen(word) &&
         strncasecmp(p->text + p->tok.pos, word, p->tok.len) == 0;
}

static dm_status expected(const parser *p, const char *what) {
  char got[64];
  return perr_at(p, p->tok.line, p->tok.col, "expected %s, got %s", what,
                 tok_desc(p, &p->tok, got, sizeof got));
}

/* ============================ string literals ============================ */

typedef struct {
  uint8_t *buf;
  size_t len, cap;
} bytebuf;

static bool bb_reserve(bytebuf *b, size_t extra) {
  if (b->cap - b->len >= extra)
    return true;
  size_t cap = b->cap ? b->cap : 32;
  while (cap - b->len < extra)
    cap *= 2;
  uint8_t *nb = realloc(b->buf, cap);
  if (!nb)
    return false;
  b->buf = nb;
  b->cap = cap;
  return true;
}

static void bb_put_utf8(bytebuf *b, uint32_t cp) {
  if (cp < 0x80) {
    b->buf[b->len++] = (uint8_t)cp;
  } else if (cp < 0x800) {
    b->buf[b->len++] = (uint8_t)(0xc0 | (cp >> 6));
    b->buf[b->len++] = (uint8_t)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    b->buf[b->len++] = (uint8_t)(0xe0 | (cp >> 12));
    b->buf[b->len++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    b->buf[b->len++] = (uint8_t)(0x80 | (cp & 0x3f));
  } else {
    b->buf[b->len++] = (uint8_t)(0xf0 | (cp >> 18));
    b->buf[b->len++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    b->buf[b->len++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    b->buf[b->len++] = (uint8_t)(0x80 | (cp & 0x3f));
  }
}

/* Appends the bytes of the current string token to `b`. Escapes are C's plus \? and
 * protoc's \u/\U; an octal escape above \377 keeps its low 8 bits, as protoc does. */
static dm_status decode_string(parser *p, bytebuf *b) {
  const char *s = p->text + p->tok.pos + 1;
  size_t n = p->tok.len - 2;
  if (!bb_reserve(b, n))
    return DM_NOMEM("a string literal");
  for (size_t i = 0; i < n; i++) {
    int col = p->tok.col + 1 + (int)i;
    unsigned char c = (unsigned char)s[i];
    if (c != '\\') {
      b->buf[b->len++] = c;
      continue;
    }
    /* lex_string guarantees a character after every backslash. */
    unsigned char e = (unsigned char)s[++i];
    switch (e) {
    case 'a': b->buf[b->len++] = '\a'; break;
    case 'b': b->buf[b->len++] = '\b'; break;
    case 'f': b->buf[b->len++] = '\f'; break;
    case 'n': b->buf[b->len++] = '\n'; break;
    case 'r': b->buf[b->len++] = '\r'; break;
    case 't': b->buf[b->len++] = '\t'; break;
    case 'v': b->buf[b->len++] = '\v'; break;
    case '\\': case '\'': case '"': case '?': b->buf[b->len++] = e; break;
    case 'x': { /* lower case only: protoc refuses \X */
      unsigned v = 0, k = 0;
      while (k < 2 && i + 1 < n && is_hex((unsigned char)s[i + 1])) {
        v = v * 16 + (unsigned)hex_val((unsigned char)s[++i]);
        k++;
      }
      if (k == 0)
        return perr_at(p, p->tok.line, col, "expected hex digits after '\\x'");
      b->buf[b->len++] = (uint8_t)v;
      break;
    }
    case 'u': case 'U': {
      unsigned want = e == 'u' ? 4 : 8, k = 0;
      uint32_t cp = 0;
      while (k < want && i + 1 < n && is_hex((unsigned char)s[i + 1])) {
        cp = cp * 16 + (uint32_t)hex_val((unsigned char)s[++i]);
        k++;
      }
      if (k != want)
        return perr_at(p, p->tok.line, col, "expected %u hex digits after '\\%c'", want, e);
      if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return perr_at(p, p->tok.line, col, "'\\%c' escape is not a Unicode scalar value", e);
      /* A \u escape never takes fewer bytes than its UTF-8, so room is there. */
      bb_put_utf8(b, cp);
      break;
    }
    default:
      if (e >= '0' && e <= '7') {
        unsigned v = e - '0', k = 1;
        while (k < 3 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7') {
          v = v * 8 + (unsigned)(s[++i] - '0');
          k++;
        }
        b->buf[b->len++] = (uint8_t)(v & 0xff);
        break;
      }
      if (e >= 0x20 && e < 0x7f)
        return perr_at(p, p->tok.line, col, "invalid escape sequence '\\%c'", e);
      return perr_at(p, p->tok.line, col, "invalid escape sequence (backslash before byte 0x%02x)", e);
    }
  }
  return DM_OK;
}

/* One or more adjacent string literals, concatenated. */
static dm_status parse_string_value(parser *p, const ProtobufCFieldDescriptor *f, bytebuf *b) {
  dm_status st;
  if (p->tok.kind != TK_STRING) {
    char what[160];
    snprintf(what, sizeof what, "a string for field '%s'", f->name);
    return expected(p, what);
  }
  while (p->tok.kind == TK_STRING) {
    if ((st = decode_string(p, b)) != DM_OK)
      return st;
    if ((st = lex_next(p)) != DM_OK)
      return st;
  }
  return DM_OK;
}

/* ================================ scalars ================================ */

static const char *type_name(ProtobufCType t) {
  static const char *const names[] = {"int32",  "sint32", "sfixed32", "int64", "sint64",
                                      "sfixed64", "uint32", "fixed32", "uint64", "fixed64",
                                      "float",  "double", "bool",     "enum",  "string",
                                      "bytes",  "message"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* The magnitude of the current integer token; false if it exceeds 2^64-1. */
static bool tok_uint(const parser *p, uint64_t *out) {
  const char *s = p->text + p->tok.pos;
  size_t n = p->tok.len, i = 0;
  unsigned base = 10;
  if (n > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
  } else if (n > 1 && s[0] == '0') {
    base = 8;
    i = 1;
  }
  uint64_t v = 0;
  for (; i < n; i++) {
    unsigned d = (unsigned)hex_val((unsigned char)s[i]);
    if (v > (UINT64_MAX - d) / base)
      return false;
    v = v * base + d;
  }
  *out = v;
  return true;
}

/* An integer in [-(max+1), max] when signed, [0, max] when not. */
static dm_status parse_integer(parser *p, const ProtobufCFieldDescriptor *f, bool is_signed,
                               uint64_t max, uint64_t *bits) {
  char what[160];
  bool neg = false;
  int line = p->tok.line, col = p->tok.col;
  dm_status st;
  snprintf(what, sizeof what, "an integer for %s field '%s'", type_name(f->type), f->name);
  if (at_sym(p, '-')) {
    if (!is_signed) {
      snprintf(what, sizeof what, "an unsigned integer for %s field '%s'", type_name(f->type), f->name);
      return expected(p, what);
    }
    neg = true;
    if ((st = lex_next(p)) != DM_OK)
      return st;
  }
  if (p->tok.kind != TK_INT)
    return expected(p, what);
  uint64_t m;
  if (!tok_uint(p, &m) || m > max + (neg ? 1u : 0u))
    return perr_at(p, line, col, "integer %s%.*s is out of range for %s field '%s'", neg ? "-" : "",
                   (int)p->tok.len, p->text + p->tok.pos, type_name(f->type), f->name);
  *bits = neg ? (uint64_t)0 - m : m;
  return lex_next(p);
}

/* A float or double: decimal numbers, inf/infinity/nan in any case, each with '-'. */
static dm_status parse_floating(parser *p, const ProtobufCFieldDescriptor *f, double *out) {
  char what[160];
  bool neg = false;
  dm_status st;
  double v;
  snprintf(what, sizeof what, "a number for %s field '%s'", type_name(f->type), f->name);
  if (at_sym(p, '-')) {
    neg = true;
    if ((st = lex_next(p)) != DM_OK)
      return st;
  }
  if (p->tok.kind == TK_IDENT) {
    if (at_ident_nocase(p, "inf") || at_ident_nocase(p, "infinity"))
      v = INFINITY;
    else if (at_ident_nocase(p, "nan"))
      v = NAN;
    else
      return expected(p, what);
  } else if (p->tok.kind == TK_INT) {
    const char *s = p->text + p->tok.pos;
    uint64_t m;
    /* protoc takes only decimal integers here ("Expect a decimal number"). */
    if (p->tok.len > 1 && s[0] == '0')
      return perr_at(p, p->tok.line, p->tok.col, "expected a decimal number for %s field '%s', got '%.*s'",
                     type_name(f->type), f->name, (int)p->tok.len, s);
    if (!tok_uint(p, &m))
      return perr_at(p, p->tok.line, p->tok.col, "integer %.*s is out of range for %s field '%s'",
                     (int)p->tok.len, s, type_name(f->type), f->name);
    v = (double)m;
  } else if (p->tok.kind == TK_FLOAT) {
    char *tmp = malloc(p->tok.len + 1), *end = NULL;
    if (!tmp)
      return DM_NOMEM("a number");
    memcpy(tmp, p->text + p->tok.pos, p->tok.len);
    tmp[p->tok.len] = '\0';
    v = strtod_c(tmp, &end);
    free(tmp);
  } else {
    return expected(p, what);
  }
  *out = neg ? -v : v;
  return lex_next(p);
}

static dm_status parse_bool(parser *p, const ProtobufCFieldDescriptor *f, protobuf_c_boolean *out) {
  char what[160];
  snprintf(what, sizeof what, "true or false for bool field '%s'", f->name);
  if (at_ident(p, "true") || at_ident(p, "True") || at_ident(p, "t")) {
    *out = 1;
  } else if (at_ident(p, "false") || at_ident(p, "False") || at_ident(p, "f")) {
    *out = 0;
  } else if (p->tok.kind == TK_INT) {
    uint64_t m;
    if (!tok_uint(p, &m) || m > 1)
      return expected(p, what);
    *out = (protobuf_c_boolean)m;
  } else {
    return expected(p, what);
  }
  return lex_next(p);
}

/* By name, or by number. Lenient: protoc refuses numbers the enum does not define, but
 * we print such numbers (they arrive in binary files), so we read them back too. */
static dm_status parse_enum(parser *p, const ProtobufCFieldDescriptor *f, int32_t *out) {
  const ProtobufCEnumDescriptor *ed = f->descriptor;
  if (p->tok.kind == TK_IDENT) {
    char name[128];
    if (p->tok.len < sizeof name) {
      memcpy(name, p->text + p->tok.pos, p->tok.len);
      name[p->tok.len] = '\0';
      const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(ed, name);
      if (ev) {
        *out = ev->value;
        return lex_next(p);
      }
    }
    return perr_at(p, p->tok.line, p->tok.col, "unknown value '%.*s' for enum field '%s' (%s)",
                   (int)(p->tok.len > 64 ? 64 : p->tok.len), p->text + p->tok.pos, f->name, ed->name);
  }
  if (p->tok.kind != TK_INT && !at_sym(p, '-')) {
    char what[160];
    snprintf(what, sizeof what, "an enum value name or number for field '%s'", f->name);
    return expected(p, what);
  }
  uint64_t bits;
  dm_status st = parse_integer(p, f, true, INT32_MAX, &bits);
  if (st == DM_OK)
    *out = (int32_t)(uint32_t)bits;
  return st;
}

/* ================================ messages ================================ */

typedef struct {
  bool seen;
  size_t cap; /* allocated elements of a repeated field */
} field_state;

static dm_status parse_fields(parser *p, ProtobufCMessage *msg, char close);

static size_t elt_size(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
  case PROTOBUF_C_TYPE_ENUM:
    return 4;
  case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
    return 8;
  case PROTOBUF_C_TYPE_BOOL:
    return sizeof(protobuf_c_boolean);
  case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
    return sizeof(void *);
  case PROTOBUF_C_TYPE_BYTES:
    return sizeof(ProtobufCBinaryData);
  }
  return 0;
}

/* Parses one value of `f` into `slot`. A sub-message or string is stored in the slot
 * as soon as it is allocated, so the caller can count it as owned even on failure. */
static dm_status parse_value(parser *p, const ProtobufCFieldDescriptor *f, void *slot) {
  dm_status st = DM_OK;
  uint64_t bits = 0;
  double d = 0;
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    if ((st = parse_integer(p, f, true, INT32_MAX, &bits)) == DM_OK)
      *(int32_t *)slot = (int32_t)(uint32_t)bits;
    return st;
  case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
    if ((st = parse_integer(p, f, false, UINT32_MAX, &bits)) == DM_OK)
      *(uint32_t *)slot = (uint32_t)bits;
    return st;
  case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    if ((st = parse_integer(p, f, true, INT64_MAX, &bits)) == DM_OK)
      memcpy(slot, &bits, 8); /* two's complement bits of the int64 */
    return st;
  case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
    if ((st = parse_integer(p, f, false, UINT64_MAX, &bits)) == DM_OK)
      *(uint64_t *)slot = bits;
    return st;
  case PROTOBUF_C_TYPE_FLOAT:
    if ((st = parse_floating(p, f, &d)) == DM_OK)
      *(float *)slot = double_to_float(d);
    return st;
  case PROTOBUF_C_TYPE_DOUBLE:
    if ((st = parse_floating(p, f, &d)) == DM_OK)
      *(double *)slot = d;
    return st;
  case PROTOBUF_C_TYPE_BOOL:
    return parse_bool(p, f, slot);
  case PROTOBUF_C_TYPE_ENUM:
    return parse_enum(p, f, slot);
  case PROTOBUF_C_TYPE_STRING: {
    int line = p->tok.line, col = p->tok.col;
    bytebuf b = {0};
    if ((st = parse_string_value(p, f, &b)) != DM_OK || !bb_reserve(&b, 1)) {
      free(b.buf);
      return st != DM_OK ? st : DM_NOMEM("a string");
    }
    /* Stricter than protoc: protobuf-c strings are C strings, so a NUL would silently
     * cut the value short. */
    if (memchr(b.buf, 0, b.len)) {
      free(b.buf);
      return perr_at(p, line, col, "string field '%s' cannot hold a NUL byte (\\0); use a bytes field",
                     f->name);
    }
    b.buf[b.len] = '\0';
    *(char **)slot = (char *)b.buf;
    return DM_OK;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    bytebuf b = {0};
    if ((st = parse_string_value(p, f, &b)) != DM_OK) {
      free(b.buf);
      return st;
    }
    ProtobufCBinaryData *bd = slot;
    bd->len = b.len;
    bd->data = b.buf;
    if (b.len == 0) {
      free(b.buf);
      bd->data = NULL;
    }
    return DM_OK;
  }
  case PROTOBUF_C_TYPE_MESSAGE: {
    const ProtobufCMessageDescriptor *md = f->descriptor;
    char close;
    if (at_sym(p, '{')) {
      close = '}';
    } else if (at_sym(p, '<')) {
      close = '>';
    } else {
      char what[160];
      snprintf(what, sizeof what, "'{' or '<' to open message field '%s'", f->name);
      return expected(p, what);
    }
    if (p->depth >= DM_TEXT_MAX_DEPTH)
      return perr_at(p, p->tok.line, p->tok.col, "messages nested more than %d deep", DM_TEXT_MAX_DEPTH);
    ProtobufCMessage *sub = malloc(md->sizeof_message);
    if (!sub)
      return DM_NOMEM(md->name);
    protobuf_c_message_init(md, sub);
    *(ProtobufCMessage **)slot = sub;
    if ((st = lex_next(p)) != DM_OK)
      return st;
    p->depth++;
    st = parse_fields(p, sub, close);
    p->depth--;
    return st;
  }
  }
  return perr_at(p, p->tok.line, p->tok.col, "field '%s' has a type this parser does not know", f->name);
}

/* One value of `f` into `msg`: appended when repeated, else set (with has_/case). */
static dm_status parse_field_value(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                                   field_state *fs) {
  char *base = (char *)msg;
  dm_status st;
  if (f->label != PROTOBUF_C_LABEL_REPEATED) {
    st = parse_value(p, f, base + f->offset);
    if (st == DM_OK && f->quantifier_offset != 0) {
      if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        *(uint32_t *)(base + f->quantifier_offset) = f->id;
      else if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
        *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    }
    return st;
  }
  size_t *n = (size_t *)(base + f->quantifier_offset);
  void **arr = (void **)(base + f->offset);
  size_t sz = elt_size(f->type);
  if (*n == fs->cap) {
    size_t cap = fs->cap ? fs->cap * 2 : 4;
    void *na = realloc(*arr, cap * sz);
    if (!na)
      return DM_NOMEM("a repeated field");
    *arr = na;
    fs->cap = cap;
  }
  char *slot = (char *)*arr + *n * sz;
  memset(slot, 0, sz);
  st = parse_value(p, f, slot);
  /* Count the element if it now owns memory, so the final free releases it. */
  bool owns = f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING
                  ? *(void **)slot != NULL
                  : f->type == PROTOBUF_C_TYPE_BYTES ? ((ProtobufCBinaryData *)slot)->data != NULL
                                                    : false;
  if (st == DM_OK || owns)
    (*n)++;
  return st;
}

static dm_status skip_separator(parser *p) {
  if (at_sym(p, ',') || at_sym(p, ';'))
    return lex_next(p);
  return DM_OK;
}

/* Fields until `close` ('}' or '>'), or until the end of input when close is 0. */
static dm_status parse_fields(parser *p, ProtobufCMessage *msg, char close) {
  const ProtobufCMessageDescriptor *desc = msg->descriptor;
  dm_status st = DM_OK;
  field_state *fs = calloc(desc->n_fields ? desc->n_fields : 1, sizeof *fs);
  if (!fs)
    return DM_NOMEM("parser state");
  for (;;) {
    if (close == 0 && p->tok.kind == TK_EOF)
      break;
    if (close != 0 && at_sym(p, close)) {
      break;
    }
    if (p->tok.kind != TK_IDENT) {
      char what[64];
      if (close)
        snprintf(what, sizeof what, "a field name or '%c'", close);
      else
        snprintf(what, sizeof what, "a field name");
      st = expected(p, what);
      goto cleanup;
    }
    const ProtobufCFieldDescriptor *f = NULL;
    char name[128];
    if (p->tok.len < sizeof name) {
      memcpy(name, p->text + p->tok.pos, p->tok.len);
      name[p->tok.len] = '\0';
      f = protobuf_c_message_descriptor_get_field_by_name(desc, name);
    }
    if (!f) {
      st = perr_at(p, p->tok.line, p->tok.col, "unknown field '%.*s' in message %s",
                   (int)(p->tok.len > 64 ? 64 : p->tok.len), p->text + p->tok.pos, desc->name);
      goto cleanup;
    }
    field_state *s = &fs[f - desc->fields];
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
      bool oneof_taken = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                         *(uint32_t *)((char *)msg + f->quantifier_offset) != 0;
      if (s->seen || oneof_taken) {
        st = perr_at(p, p->tok.line, p->tok.col, "non-repeated field '%s' is specified more than once",
                     f->name);
        goto cleanup;
      }
    }
    s->seen = true;
    if ((st = lex_next(p)) != DM_OK)
      goto cleanup;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
      if (at_sym(p, ':') && (st = lex_next(p)) != DM_OK)
        goto cleanup;
    } else if (at_sym(p, ':')) {
      if ((st = lex_next(p)) != DM_OK)
        goto cleanup;
    } else {
      char what[160];
      snprintf(what, sizeof what, "':' after field name '%s'", f->name);
      st = expected(p, what);
      goto cleanup;
    }
    if (at_sym(p, '[')) {
      if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        st = perr_at(p, p->tok.line, p->tok.col, "field '%s' is not repeated, so it takes no list", f->name);
        goto cleanup;
      }
      if ((st = lex_next(p)) != DM_OK)
        goto cleanup;
      if (at_sym(p, ']')) {
        if ((st = lex_next(p)) != DM_OK)
          goto cleanup;
      } else {
        for (;;) {
          if ((st = parse_field_value(p, msg, f, s)) != DM_OK)
            goto cleanup;
          if (at_sym(p, ']')) {
            if ((st = lex_next(p)) != DM_OK)
              goto cleanup;
            break;
          }
          if (!at_sym(p, ',')) {
            st = expected(p, "',' or ']' in a list");
            goto cleanup;
          }
          if ((st = lex_next(p)) != DM_OK)
            goto cleanup;
        }
      }
    } else if ((st = parse_field_value(p, msg, f, s)) != DM_OK) {
      goto cleanup;
    }
    if ((st = skip_separator(p)) != DM_OK)
      goto cleanup;
  }
  for (unsigned i = 0; i < desc->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &desc->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REQUIRED && !fs[i].seen) {
      st = perr_at(p, p->tok.line, p->tok.col, "message %s is missing required field '%s'", desc->name,
                   f->name);
      goto cleanup;
    }
  }
  if (close != 0)
    st = lex_next(p); /* past the closing bracket */
cleanup:
  free(fs);
  return st;
}

dm_status dm_text_parse(const char *text, size_t len, const char *source,
                        const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out) {
  parser p = {.text = text, .len = len, .line = 1, .col = 1, .source = source ? source : "<text>"};
  dm_status st;
  *out = NULL;
  if (len > DM_MAX_FILE_BYTES)
    return dm_error(DM_ERR_LIMIT, "%s: %zu bytes is more than the limit of %zu", p.source, len,
                    DM_MAX_FILE_BYTES);
  if (!text && len)
    return dm_error(DM_ERR_INVALID, "%s: no text", p.source);
  if (!text)
    p.text = "";
  ProtobufCMessage *msg = malloc(desc->sizeof_message);
  if (!msg)
    return DM_NOMEM(desc->name);
  protobuf_c_message_init(desc, msg);
  if ((st = lex_next(&p)) == DM_OK)
    st = parse_fields(&p, msg, 0);
  if (st != DM_OK) {
    protobuf_c_message_free_unpacked(msg, NULL);
    return st;
  }
  *out = msg;
  return DM_OK;
}

/* ================================ printer ================================ */

typedef struct {
  char *buf;
  size_t len, cap;
  bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom)
    return;
  if (b->cap - b->len < n + 1) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n + 1)
      cap *= 2;
    char *nb = realloc(b->buf, cap);
    if (!nb) {
      b->oom = true;
      return;
    }
    b->buf = nb;
    b->cap = cap;
  }
  memcpy(b->buf + b->len, s, n);
  b->len += n;
  b->buf[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_indent(sbuf *b, int indent) {
  static const char spaces[] = "                                ";
  while (indent > 0) {
    int k = indent < 32 ? indent : 32;
    sb_put(b, spaces, (size_t)k);
    indent -= k;
  }
}

/* protoc's CEscape: named escapes for \n \r \t \" \' \\, three-digit octal for every
 * other byte outside printable ASCII (UTF-8 included). */
static void sb_quoted(sbuf *b, const uint8_t *s, size_t n) {
  sb_put(b, "\"", 1);
  size_t run = 0; /* start of a run of bytes copied as they are */
  for (size_t i = 0; i < n; i++) {
    uint8_t c = s[i];
    const char *esc = NULL;
    char oct[5];
    switch (c) {
    case '\n': esc = "\\n"; break;
    case '\r': esc = "\\r"; break;
    case '\t': esc = "\\t"; break;
    case '"': esc = "\\\""; break;
    case '\'': esc = "\\'"; break;
    case '\\': esc = "\\\\"; break;
    default:
      if (c < 0x20 || c >= 0x7f) {
        snprintf(oct, sizeof oct, "\\%03o", c);
        esc = oct;
      }
    }
    if (esc) {
      sb_put(b, (const char *)s + run, i - run);
      sb_str(b, esc);
      run = i + 1;
    }
  }
  sb_put(b, (const char *)s + run, n - run);
  sb_put(b, "\"", 1);
}

/* protoc's SimpleFtoa/SimpleDtoa: the short form (6 or 15 digits) when it reads back
 * to the same value, else enough digits (9 or 17) to round-trip exactly. */
static void fmt_float(char *buf, size_t n, float v) {
  if (isnan(v)) {
    snprintf(buf, n, "nan");
  } else if (isinf(v)) {
    snprintf(buf, n, v < 0 ? "-inf" : "inf");
  } else {
    format_c(buf, n, "%.*g", FLT_DIG, v);
    /* protoc's check is strtof with errno, which reports ERANGE for denormals, so those
     * always get all 9 digits; ours must read the short form back as well. */
    locale_t loc = get_c_locale();
    errno = 0;
    float back = loc ? strtof_l(buf, NULL, loc) : strtof(buf, NULL);
    if (errno != 0 || back != v || double_to_float(strtod_c(buf, NULL)) != v)
      format_c(buf, n, "%.*g", FLT_DIG + 3, v);
  }
}

static void fmt_double(char *buf, size_t n, double v) {
  if (isnan(v)) {
    snprintf(buf, n, "nan");
  } else if (isinf(v)) {
    snprintf(buf, n, v < 0 ? "-inf" : "inf");
  } else {
    format_c(buf, n, "%.*g", DBL_DIG, v);
    if (strtod_c(buf, NULL) != v)
      format_c(buf, n, "%.*g", DBL_DIG + 2, v);
  }
}

static dm_status print_message(sbuf *b, const ProtobufCMessage *msg, int indent);

static dm_status print_value(sbuf *b, const ProtobufCFieldDescriptor *f, const void *v, int indent) {
  char num[64];
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    snprintf(num, sizeof num, "%" PRId32, *(const int32_t *)v);
    break;
  case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
    snprintf(num, sizeof num, "%" PRIu32, *(const uint32_t *)v);
    break;
  case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    snprintf(num, sizeof num, "%" PRId64, *(const int64_t *)v);
    break;
  case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
    snprintf(num, sizeof num, "%" PRIu64, *(const uint64_t *)v);
    break;
  case PROTOBUF_C_TYPE_FLOAT:
    fmt_float(num, sizeof num, *(const float *)v);
    break;
  case PROTOBUF_C_TYPE_DOUBLE:
    fmt_double(num, sizeof num, *(const double *)v);
    break;
  case PROTOBUF_C_TYPE_BOOL:
    snprintf(num, sizeof num, "%s", *(const protobuf_c_boolean *)v ? "true" : "false");
    break;
  case PROTOBUF_C_TYPE_ENUM: {
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int32_t *)v);
    if (ev)
      snprintf(num, sizeof num, "%s", ev->name);
    else
      snprintf(num, sizeof num, "%" PRId32, *(const int32_t *)v);
    break;
  }
  case PROTOBUF_C_TYPE_STRING: {
    const char *s = *(const char *const *)v;
    sb_quoted(b, (const uint8_t *)(s ? s : ""), s ? strlen(s) : 0);
    return DM_OK;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    const ProtobufCBinaryData *bd = v;
    sb_quoted(b, bd->data ? bd->data : (const uint8_t *)"", bd->data ? bd->len : 0);
    return DM_OK;
  }
  case PROTOBUF_C_TYPE_MESSAGE: {
    const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)v;
    dm_status st;
    sb_str(b, "{\n");
    if (sub && (st = print_message(b, sub, indent + 2)) != DM_OK)
      return st;
    sb_indent(b, indent);
    sb_str(b, "}");
    return DM_OK;
  }
  default:
    return dm_error(DM_ERR_INVALID, "field '%s' has an unknown protobuf-c type %d", f->name, (int)f->type);
  }
  sb_str(b, num);
  return DM_OK;
}

/* proto2 presence: has_ flags for scalars and bytes, non-NULL (and not the shared
 * default) for strings and messages; proto3 (LABEL_NONE) fields when not zero. */
static bool field_present(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  const char *base = (const char *)msg;
  const void *member = base + f->offset;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
    return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING) {
    const void *ptr = *(const void *const *)member;
    if (ptr == NULL || ptr == f->default_value)
      return false;
    if (f->label == PROTOBUF_C_LABEL_NONE && f->type == PROTOBUF_C_TYPE_STRING)
      return *(const char *)ptr != '\0';
    return true;
  }
  if (f->label == PROTOBUF_C_LABEL_REQUIRED)
    return true;
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset != 0)
    return *(const protobuf_c_boolean *)(base + f->quantifier_offset) != 0;
  if (f->type == PROTOBUF_C_TYPE_BYTES)
    return ((const ProtobufCBinaryData *)member)->len != 0;
  size_t sz = elt_size(f->type);
  static const uint8_t zero[8];
  return sz <= sizeof zero && memcmp(member, zero, sz) != 0;
}

static dm_status print_one(sbuf *b, const ProtobufCFieldDescriptor *f, const void *v, int indent) {
  sb_indent(b, indent);
  sb_str(b, f->name);
  sb_str(b, f->type == PROTOBUF_C_TYPE_MESSAGE ? " " : ": ");
  dm_status st = print_value(b, f, v, indent);
  sb_put(b, "\n", 1);
  return st;
}

static dm_status print_message(sbuf *b, const ProtobufCMessage *msg, int indent) {
  const ProtobufCMessageDescriptor *desc = msg->descriptor;
  dm_status st;
  if (indent / 2 > DM_TEXT_MAX_DEPTH)
    return dm_error(DM_ERR_LIMIT, "messages nested more than %d deep", DM_TEXT_MAX_DEPTH);
  /* protoc-c lays the fields out in field-number order, the order protoc prints. */
  for (unsigned i = 0; i < desc->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &desc->fields[i];
    const char *member = (const char *)msg + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)((const char *)msg + f->quantifier_offset);
      const char *arr = *(const char *const *)member;
      size_t sz = elt_size(f->type);
      for (size_t j = 0; j < n && arr; j++)
        if ((st = print_one(b, f, arr + j * sz, indent)) != DM_OK)
          return st;
    } else if (field_present(msg, f)) {
      if ((st = print_one(b, f, member, indent)) != DM_OK)
        return st;
    }
  }
  /* Text format has no way to write these back; a comment at least shows they were
   * there (protoc would print "N: value", which neither protoc nor we can read). */
  for (size_t i = 0; i < msg->n_unknown_fields; i++) {
    char line[128];
    snprintf(line, sizeof line, "# unknown field %" PRIu32 " (wire type %d, %zu bytes) dropped\n",
             msg->unknown_fields[i].tag, (int)msg->unknown_fields[i].wire_type, msg->unknown_fields[i].len);
    sb_indent(b, indent);
    sb_str(b, line);
  }
  return DM_OK;
}

dm_status dm_text_print(const ProtobufCMessage *msg, char **out, size_t *len) {
  sbuf b = {0};
  dm_status st;
  *out = NULL;
  if (len)
    *len = 0;
  if (!msg || !msg->descriptor)
    return dm_error(DM_ERR_INVALID, "dm_text_print: no message");
  sb_put(&b, "", 0); /* an empty message still gets its NUL */
  st = print_message(&b, msg, 0);
  if (st == DM_OK && b.oom)
    st = DM_NOMEM("text output");
  if (st != DM_OK) {
    free(b.buf);
    return st;
  }
  *out = b.buf;
  if (len)
    *len = b.len;
  return DM_OK;
}
