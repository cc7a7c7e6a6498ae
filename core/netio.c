/* netio.c: reading and writing protobuf messages as files, binary or text.
 *
 * Binary input is first walked by a small wire-format checker, then handed to
 * protobuf_c_message_unpack. The walk is there because protobuf-c says only "failed":
 * the checker names the byte offset and what is wrong, bounds the nesting depth (unpack
 * recurses without limit) and refuses what protobuf-c would mishandle (lengths that
 * overflow its 32-bit arithmetic, strings it would cut at a NUL).
 */
#include "netio.h"
#include "fileio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Nesting deeper than this is refused: unpack's recursion must not exhaust the stack. */
#define DM_WIRE_MAX_DEPTH 100
/* Largest field number protobuf allows (2^29 - 1). */
#define DM_WIRE_MAX_FIELD 536870911u

/* ============================ format guessing ============================ */

static bool has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  return n > e && strcasecmp(path + n - e, ext) == 0;
}

static bool text_ext(const char *path) {
  return has_ext(path, ".pbtxt") || has_ext(path, ".prototxt") || has_ext(path, ".txt") ||
         has_ext(path, ".pbtext");
}

static bool binary_ext(const char *path) { return has_ext(path, ".pb") || has_ext(path, ".bin"); }

/* Text if, past blanks and # comments, it starts with an identifier and the first 4 KiB
 * hold no control bytes other than whitespace. Binary nets start with a tag byte and
 * carry length bytes below 0x20 soon after, so they fail this test. */
static bool looks_like_text(const uint8_t *d, size_t len) {
  size_t n = len < 4096 ? len : 4096, i = 0;
  for (size_t k = 0; k < n; k++) {
    uint8_t c = d[k];
    if (c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\v' && c != '\f')
      return false;
    if (c == 0x7f)
      return false;
  }
  for (;;) {
    while (i < n && (d[i] == ' ' || d[i] == '\n' || d[i] == '\t' || d[i] == '\r' || d[i] == '\v' ||
                     d[i] == '\f'))
      i++;
    if (i < n && d[i] == '#') {
      while (i < n && d[i] != '\n')
        i++;
      continue;
    }
    break;
  }
  if (i >= n)
    return len <= n; /* nothing but comments: fine as text if we saw it all */
  return (d[i] >= 'a' && d[i] <= 'z') || (d[i] >= 'A' && d[i] <= 'Z') || d[i] == '_';
}

dm_file_format dm_format_guess(const char *path, const void *data, size_t len) {
  if (path && text_ext(path))
    return DM_FORMAT_TEXT;
  if (path && binary_ext(path))
    return DM_FORMAT_BINARY;
  if (data && len > 0 && looks_like_text(data, len))
    return DM_FORMAT_TEXT;
  return DM_FORMAT_BINARY;
}

/* ============================ wire-format walker ============================ */

typedef struct {
  const uint8_t *base; /* the whole input; offsets in messages are from here */
  const char *source;
} wire_ctx;

static dm_status wire_err(const wire_ctx *w, size_t off, const char *fmt, ...) DM_PRINTF(3, 4);

static dm_status wire_err(const wire_ctx *w, size_t off, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dm_error(DM_ERR_PARSE, "%s: byte %zu: %s", w->source, off, msg);
}

/* Bytes used by the varint at p (1..10); 0 if the data ends inside it; -1 if ten bytes
 * pass without an end. */
static int read_varint(const uint8_t *p, size_t avail, uint64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < 10; i++) {
    if ((size_t)i >= avail)
      return 0;
    v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) {
      *out = v;
      return i + 1;
    }
  }
  return -1;
}

static int wire_type_of(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
    return 5;
  case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
    return 1;
  case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_BYTES: case PROTOBUF_C_TYPE_MESSAGE:
    return 2;
  default:
    return 0;
  }
}

static const char *wire_type_name(unsigned wt) {
  static const char *const names[] = {"varint", "64-bit", "length-delimited", "start-group",
                                      "end-group", "32-bit", "6", "7"};
  return names[wt & 7];
}

/* A packed run of `f` at [off, end): the checks protobuf-c's unpack makes, with detail. */
static dm_status check_packed(const wire_ctx *w, size_t off, size_t end, const ProtobufCFieldDescriptor *f) {
  size_t len = end - off;
  int wt = wire_type_of(f->type);
  if (wt == 5 || wt == 1) {
    size_t sz = wt == 5 ? 4 : 8;
    if (len % sz != 0)
      return wire_err(w, off, "packed field %u (%s): %zu bytes is not a whole number of %zu-byte values",
                      f->id, f->name, len, sz);
    return DM_OK;
  }
  for (size_t i = off; i < end;) {
    if (f->type == PROTOBUF_C_TYPE_BOOL) {
      /* protobuf-c reads packed bools one byte each and refuses anything but 0 and 1. */
      if (w->base[i] > 1)
        return wire_err(w, i, "packed bool field %u (%s) holds 0x%02x; only 0 and 1 are allowed", f->id,
                        f->name, w->base[i]);
      i++;
      continue;
    }
    uint64_t v;
    int r = read_varint(w->base + i, end - i, &v);
    if (r == 0)
      return wire_err(w, i, "packed field %u (%s): the last varint runs past the end of the field", f->id,
                      f->name);
    if (r < 0)
      return wire_err(w, i, "packed field %u (%s): varint longer than 10 bytes", f->id, f->name);
    i += (size_t)r;
  }
  return DM_OK;
}

static dm_status check_message(const wire_ctx *w, size_t start, size_t end, const ProtobufCMessageDescriptor *desc,
                               int depth);

/* One field's payload, once its extent is known. */
static dm_status check_field(const wire_ctx *w, size_t tag_off, size_t off, size_t end, unsigned wt,
                             const ProtobufCFieldDescriptor *f, int depth) {
  int want = wire_type_of(f->type);
  if (f->label == PROTOBUF_C_LABEL_REPEATED && wt == 2 && want != 2)
    return check_packed(w, off, end, f);
  if ((int)wt != want)
    return wire_err(w, tag_off, "field %u (%s) is %s on the wire, but a %s field needs %s", f->id, f->name,
                    wire_type_name(wt), f->type == PROTOBUF_C_TYPE_MESSAGE ? "message" : "scalar",
                    wire_type_name((unsigned)want));
  if (f->type == PROTOBUF_C_TYPE_STRING && memchr(w->base + off, 0, end - off))
    return wire_err(w, off, "string field %u (%s) contains a NUL byte, which a C string cannot hold",
                    f->id, f->name);
  if (f->type == PROTOBUF_C_TYPE_MESSAGE)
    return check_message(w, off, end, f->descriptor, depth + 1);
  return DM_OK;
}

static dm_status check_message(const wire_ctx *w, size_t start, size_t end, const ProtobufCMessageDescriptor *desc,
                               int depth) {
  uint8_t seen_stack[64];
  uint8_t *seen = seen_stack;
  dm_status st = DM_OK;
  const char *outer = depth == 0 ? "the file" : "its enclosing message";
  if (depth > DM_WIRE_MAX_DEPTH)
    return wire_err(w, start, "messages nested more than %d deep", DM_WIRE_MAX_DEPTH);
  if (desc->n_fields > sizeof seen_stack && !(seen = calloc(desc->n_fields, 1)))
    return DM_NOMEM("a field bitmap");
  if (seen == seen_stack)
    memset(seen_stack, 0, sizeof seen_stack);
  size_t pos = start;
  while (pos < end) {
    size_t tag_off = pos;
    uint64_t tag, val;
    int r = read_varint(w->base + pos, end - pos, &tag);
    if (r == 0) {
      st = wire_err(w, tag_off, "field tag runs past the end of %s (truncated?)", outer);
      goto cleanup;
    }
    /* protobuf-c reads tags of at most 5 bytes. */
    if (r < 0 || r > 5) {
      st = wire_err(w, tag_off, "field tag is longer than 5 bytes");
      goto cleanup;
    }
    unsigned wt = (unsigned)(tag & 7);
    uint64_t num = tag >> 3;
    if (num == 0) {
      st = wire_err(w, tag_off, "field number 0 is not allowed (corrupt data?)");
      goto cleanup;
    }
    if (num > DM_WIRE_MAX_FIELD) {
      st = wire_err(w, tag_off, "field number %" PRIu64 " is out of range", num);
      goto cleanup;
    }
    pos += (size_t)r;
    size_t off = pos; /* start of the payload */
    switch (wt) {
    case 0:
      r = read_varint(w->base + pos, end - pos, &val);
      if (r == 0) {
        st = wire_err(w, tag_off, "varint field %" PRIu64 " runs past the end of %s (truncated?)", num, outer);
        goto cleanup;
      }
      if (r < 0) {
        st = wire_err(w, off, "varint of field %" PRIu64 " is longer than 10 bytes", num);
        goto cleanup;
      }
      pos += (size_t)r;
      break;
    case 1:
    case 5: {
      size_t sz = wt == 1 ? 8 : 4;
      if (end - pos < sz) {
        st = wire_err(w, tag_off, "%s field %" PRIu64 " runs past the end of %s (truncated?)",
                      wire_type_name(wt), num, outer);
        goto cleanup;
      }
      pos += sz;
      break;
    }
    case 2:
      r = read_varint(w->base + pos, end - pos, &val);
      if (r == 0) {
        st = wire_err(w, tag_off, "length of field %" PRIu64 " runs past the end of %s (truncated?)", num,
                      outer);
        goto cleanup;
      }
      /* protobuf-c reads lengths of at most 5 bytes, into 32 bits. */
      if (r < 0 || r > 5) {
        st = wire_err(w, off, "length of field %" PRIu64 " is longer than 5 bytes", num);
        goto cleanup;
      }
      pos += (size_t)r;
      off = pos;
      if (val > end - pos) {
        st = wire_err(w, tag_off,
                      "length-delimited field %" PRIu64 " runs past the end of %s (truncated?): "
                      "%" PRIu64 " bytes declared, %zu left",
                      num, outer, val, end - pos);
        goto cleanup;
      }
      pos += (size_t)val;
      break;
    case 3:
    case 4:
      st = wire_err(w, tag_off, "field %" PRIu64 " is a group (wire type %u), which is not supported", num, wt);
      goto cleanup;
    default:
      st = wire_err(w, tag_off, "field %" PRIu64 " has invalid wire type %u (corrupt data?)", num, wt);
      goto cleanup;
    }
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, (unsigned)num);
    if (!f)
      continue; /* unknown fields are kept by protobuf-c as they are */
    if ((st = check_field(w, tag_off, off, pos, wt, f, depth)) != DM_OK)
      goto cleanup;
    seen[f - desc->fields] = 1;
  }
  for (unsigned i = 0; i < desc->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &desc->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REQUIRED && f->default_value == NULL && !seen[i]) {
      st = wire_err(w, start, "message %s starting here lacks required field %u (%s)", desc->name, f->id,
                    f->name);
      goto cleanup;
    }
  }
cleanup:
  if (seen != seen_stack)
    free(seen);
  return st;
}

static dm_status parse_binary(const uint8_t *data, size_t len, const char *source,
                              const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out) {
  wire_ctx w = {data, source};
  static const uint8_t empty[1];
  dm_status st;
  if (!data)
    w.base = data = empty;
  if ((st = check_message(&w, 0, len, desc, 0)) != DM_OK)
    return st;
  ProtobufCMessage *msg = protobuf_c_message_unpack(desc, NULL, len, data);
  if (!msg) /* the walk passed, so what is left is running out of memory */
    return dm_error(DM_ERR_NOMEM, "%s: protobuf-c could not unpack %s (out of memory?)", source, desc->name);
  *out = msg;
  return DM_OK;
}

/* ================================ API ================================ */

dm_status dm_message_parse(const void *data, size_t len, const char *source,
                           const ProtobufCMessageDescriptor *desc, dm_file_format fmt,
                           ProtobufCMessage **out) {
  if (!out || !desc)
    return dm_error(DM_ERR_INVALID, "dm_message_parse: no descriptor or output");
  *out = NULL;
  if (!source)
    source = "<input>";
  if (len > DM_MAX_FILE_BYTES)
    return dm_error(DM_ERR_LIMIT, "%s: %zu bytes is more than the limit of %zu", source, len,
                    DM_MAX_FILE_BYTES);
  if (!data && len)
    return dm_error(DM_ERR_INVALID, "%s: no data", source);
  if (fmt == DM_FORMAT_AUTO)
    fmt = dm_format_guess(source, data, len);
  if (fmt == DM_FORMAT_TEXT)
    return dm_text_parse(data, len, source, desc, out);
  if (fmt == DM_FORMAT_BINARY)
    return parse_binary(data, len, source, desc, out);
  return dm_error(DM_ERR_INVALID, "%s: unknown file format %d", source, (int)fmt);
}

dm_status dm_message_check_nonempty(const char *source, size_t len) {
  if (len == 0)
    return dm_error(DM_ERR_PARSE, "%s: empty (0 bytes): not a net", source);
  return DM_OK;
}

dm_status dm_message_read_file(const char *path, const ProtobufCMessageDescriptor *desc, dm_file_format fmt,
                               ProtobufCMessage **out) {
  uint8_t *buf = NULL;
  size_t len = 0;
  dm_status st;
  if (out)
    *out = NULL;
  if ((st = dm_read_file(path, &buf, &len)) != DM_OK)
    return st;
  if ((st = dm_message_check_nonempty(path, len)) != DM_OK) {
    free(buf);
    return st;
  }
  if (fmt == DM_FORMAT_AUTO)
    fmt = dm_format_guess(path, buf, len);
  st = dm_message_parse(buf, len, path, desc, fmt, out);
  free(buf);
  return st;
}

dm_status dm_message_serialize(const ProtobufCMessage *msg, dm_file_format fmt, uint8_t **out, size_t *len) {
  if (!out || !len || !msg)
    return dm_error(DM_ERR_INVALID, "dm_message_serialize: missing argument");
  *out = NULL;
  *len = 0;
  /* pack would dereference a missing required sub-message; check first. */
  if (!protobuf_c_message_check(msg))
    return dm_error(DM_ERR_INVALID, "%s is incomplete (a required field or an element is missing)",
                    msg->descriptor ? msg->descriptor->name : "message");
  if (fmt == DM_FORMAT_TEXT)
    return dm_text_print(msg, (char **)out, len);
  size_t n = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf)
    return DM_NOMEM("serialised message");
  size_t wrote = protobuf_c_message_pack(msg, buf);
  if (wrote != n) {
    free(buf);
    return dm_error(DM_ERR_INVALID, "protobuf-c packed %zu bytes of %s, expected %zu", wrote,
                    msg->descriptor->name, n);
  }
  *out = buf;
  *len = n;
  return DM_OK;
}

dm_status dm_message_write_file(const char *path, const ProtobufCMessage *msg, dm_file_format fmt) {
  uint8_t *buf = NULL;
  size_t len = 0;
  dm_status st;
  if (!path)
    return dm_error(DM_ERR_INVALID, "dm_message_write_file: no path");
  if (fmt == DM_FORMAT_AUTO)
    fmt = text_ext(path) ? DM_FORMAT_TEXT : DM_FORMAT_BINARY;
  if ((st = dm_message_serialize(msg, fmt, &buf, &len)) != DM_OK)
    return dm_error_prefix(st, "%s", path);
  st = dm_write_file(path, buf, len);
  free(buf);
  return st;
}

dm_status dm_read_file(const char *path, uint8_t **out, size_t *len) {
  return dm_read_file_as(path, "a net is read from a regular file", out, len);
}

dm_status dm_read_file_as(const char *path, const char *hint, uint8_t **out, size_t *len) {
  FILE *f = NULL;
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  dm_status st = DM_OK;
  struct stat sb;
  if (!path || !out || !len)
    return dm_error(DM_ERR_INVALID, "dm_read_file: missing argument");
  *out = NULL;
  *len = 0;
  /* a regular file only: a FIFO would block the open (or the read) forever, and a
   * directory or a device is no net (core/fileio.h) */
  int fd = -1;
  DM_TRY(dm_open_regular(path, hint, &fd, &sb));
  if (!(f = fdopen(fd, "rb"))) {
    int e = errno;
    close(fd);
    return dm_error(DM_ERR_IO, "%s: cannot open: %s", path, strerror(e));
  }
  if ((uint64_t)sb.st_size > DM_MAX_FILE_BYTES) {
    st = dm_error(DM_ERR_LIMIT, "%s: %" PRIu64 " bytes is more than the limit of %zu", path,
                  (uint64_t)sb.st_size, DM_MAX_FILE_BYTES);
    goto cleanup;
  }
  /* The size from stat is only a first guess (a growing file); the limit is enforced on
   * what is actually read. */
  cap = (size_t)sb.st_size + 1;
  if (cap < 4096)
    cap = 4096;
  if (!(buf = malloc(cap))) {
    st = DM_NOMEM(path);
    goto cleanup;
  }
  for (;;) {
    if (n + 1 >= cap) {
      if (cap > DM_MAX_FILE_BYTES) {
        st = dm_error(DM_ERR_LIMIT, "%s: more than the limit of %zu bytes", path, DM_MAX_FILE_BYTES);
        goto cleanup;
      }
      size_t ncap = cap * 2 > DM_MAX_FILE_BYTES + 2 ? DM_MAX_FILE_BYTES + 2 : cap * 2;
      uint8_t *nb = realloc(buf, ncap);
      if (!nb) {
        st = DM_NOMEM(path);
        goto cleanup;
      }
      buf = nb;
      cap = ncap;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) {
        st = dm_error(DM_ERR_IO, "%s: read error: %s", path, strerror(errno));
        goto cleanup;
      }
      break;
    }
  }
  if (n > DM_MAX_FILE_BYTES) {
    st = dm_error(DM_ERR_LIMIT, "%s: more than the limit of %zu bytes", path, DM_MAX_FILE_BYTES);
    goto cleanup;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  buf = NULL;
cleanup:
  free(buf);
  if (f)
    fclose(f);
  return st;
}

dm_status dm_write_file(const char *path, const void *data, size_t len) {
  if (!path || (!data && len))
    return dm_error(DM_ERR_INVALID, "dm_write_file: missing argument");
  return dm_write_file_atomic(path, data, len);
}
