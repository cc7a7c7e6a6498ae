/* test_netio.c: binary and text net I/O against the squeezenet zoo net and protoc, and
 * malformed input (every truncation, byte corruptions, a table of bad .pbtxt snippets,
 * each with the exact line:col and message expected). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "netio.h"
#include "proto/caffe2.pb-c.h"
#include "protoc_run.h"

#define NETDEF (&caffe2__net_def__descriptor)

static uint8_t *zoo;
static size_t zoo_len;

static int load_zoo(void **state) {
  (void)state;
  zoo = pt_read_data("squeezenet_predict_net.pb", &zoo_len);
  return zoo ? 0 : -1;
}

static int free_zoo(void **state) {
  (void)state;
  free(zoo);
  return 0;
}

#define assert_ok(expr)                                                                      \
  do {                                                                                       \
    dm_status s_ = (expr);                                                                   \
    if (s_ != DM_OK)                                                                         \
      fail_msg("%s -> %s: %s", #expr, dm_status_name(s_), dm_last_error());                  \
  } while (0)

static void pack(const ProtobufCMessage *m, uint8_t **out, size_t *len) {
  assert_ok(dm_message_serialize(m, DM_FORMAT_BINARY, out, len));
}

/* (a) .pb -> text -> .pb is byte-identical, and text -> text is stable. */
static void test_zoo_round_trip(void **state) {
  (void)state;
  ProtobufCMessage *m = NULL, *m2 = NULL;
  char *text = NULL, *text2 = NULL;
  uint8_t *bin = NULL;
  size_t tlen, t2len, blen;
  assert_ok(dm_message_parse(zoo, zoo_len, "predict_net.pb", NETDEF, DM_FORMAT_AUTO, &m));
  assert_ok(dm_message_serialize(m, DM_FORMAT_TEXT, (uint8_t **)&text, &tlen));
  assert_int_equal(strlen(text), tlen);
  assert_ok(dm_message_parse(text, tlen, "predict_net.pbtxt", NETDEF, DM_FORMAT_AUTO, &m2));
  pack(m2, &bin, &blen);
  assert_int_equal(blen, zoo_len);
  assert_memory_equal(bin, zoo, zoo_len);
  assert_ok(dm_text_print(m2, &text2, &t2len));
  assert_string_equal(text, text2);
  protobuf_c_message_free_unpacked(m, NULL);
  protobuf_c_message_free_unpacked(m2, NULL);
  free(text);
  free(text2);
  free(bin);
}

/* The same through files, with formats chosen by extension and by content. */
static void test_zoo_files(void **state) {
  (void)state;
  char dir[] = "/tmp/dm_netio_XXXXXX", p_txt[256], p_pb[256], p_odd[256];
  ProtobufCMessage *m = NULL, *m2 = NULL, *m3 = NULL;
  uint8_t *bin = NULL, *raw = NULL;
  size_t blen, rlen;
  assert_non_null(mkdtemp(dir));
  snprintf(p_txt, sizeof p_txt, "%s/net.pbtxt", dir);
  snprintf(p_pb, sizeof p_pb, "%s/net.pb", dir);
  snprintf(p_odd, sizeof p_odd, "%s/net.model", dir);
  assert_ok(dm_message_parse(zoo, zoo_len, "zoo", NETDEF, DM_FORMAT_BINARY, &m));
  assert_ok(dm_message_write_file(p_txt, m, DM_FORMAT_AUTO));
  assert_ok(dm_message_read_file(p_txt, NETDEF, DM_FORMAT_AUTO, &m2));
  assert_ok(dm_message_write_file(p_pb, m2, DM_FORMAT_AUTO));
  assert_ok(dm_read_file(p_pb, &raw, &rlen));
  assert_int_equal(rlen, zoo_len);
  assert_memory_equal(raw, zoo, zoo_len);
  /* No telling extension: sniffed from the content. */
  assert_ok(dm_message_write_file(p_odd, m2, DM_FORMAT_TEXT));
  free(raw);
  assert_ok(dm_read_file(p_odd, &raw, &rlen));
  assert_int_equal(dm_format_guess(p_odd, raw, rlen), DM_FORMAT_TEXT);
  assert_ok(dm_message_read_file(p_odd, NETDEF, DM_FORMAT_AUTO, &m3));
  pack(m3, &bin, &blen);
  assert_memory_equal(bin, zoo, zoo_len);
  assert_int_equal(dm_format_guess("x.model", zoo, zoo_len), DM_FORMAT_BINARY);
  free(bin);
  assert_int_equal(dm_read_file("/nonexistent/dir/net.pb", &bin, &blen), DM_ERR_NOT_FOUND);
  assert_null(bin);
  free(raw);
  protobuf_c_message_free_unpacked(m, NULL);
  protobuf_c_message_free_unpacked(m2, NULL);
  protobuf_c_message_free_unpacked(m3, NULL);
  unlink(p_txt);
  unlink(p_pb);
  unlink(p_odd);
  rmdir(dir);
}

static void test_format_guess(void **state) {
  (void)state;
  assert_int_equal(dm_format_guess("a.pbtxt", NULL, 0), DM_FORMAT_TEXT);
  assert_int_equal(dm_format_guess("a.PROTOTXT", NULL, 0), DM_FORMAT_TEXT);
  assert_int_equal(dm_format_guess("a.txt", "\x0a\x00", 2), DM_FORMAT_TEXT);
  assert_int_equal(dm_format_guess("a.pbtext", NULL, 0), DM_FORMAT_TEXT);
  assert_int_equal(dm_format_guess("a.pb", "name: \"x\"", 9), DM_FORMAT_BINARY);
  assert_int_equal(dm_format_guess("a.bin", NULL, 0), DM_FORMAT_BINARY);
  assert_int_equal(dm_format_guess("a", "  # hi\n name: \"x\"", 17), DM_FORMAT_TEXT);
  assert_int_equal(dm_format_guess("a", "\x0a\x03" "abc", 5), DM_FORMAT_BINARY);
  assert_int_equal(dm_format_guess("a", "{ }", 3), DM_FORMAT_BINARY);
  assert_int_equal(dm_format_guess(NULL, NULL, 0), DM_FORMAT_BINARY);
}

/* (b) protoc agrees: our text of the zoo net is what protoc --decode prints and encodes
 * with protoc --encode to the original bytes; protoc's text parses to the same bytes. */
static void test_zoo_protoc(void **state) {
  (void)state;
  if (!pt_protoc())
    skip();
  ProtobufCMessage *m = NULL, *m2 = NULL;
  char *text = NULL, *err = NULL;
  uint8_t *enc = NULL, *dec = NULL, *bin = NULL;
  size_t tlen, elen, dlen, blen;
  assert_ok(dm_message_parse(zoo, zoo_len, "zoo", NETDEF, DM_FORMAT_BINARY, &m));
  assert_ok(dm_text_print(m, &text, &tlen));
  if (pt_protoc_run("encode", "caffe2.NetDef", text, tlen, &enc, &elen, &err) != 0)
    fail_msg("protoc --encode failed: %s", err ? err : "?");
  assert_int_equal(elen, zoo_len);
  assert_memory_equal(enc, zoo, zoo_len);
  free(err);
  if (pt_protoc_run("decode", "caffe2.NetDef", zoo, zoo_len, &dec, &dlen, &err) != 0)
    fail_msg("protoc --decode failed: %s", err ? err : "?");
  assert_string_equal((char *)dec, text);
  assert_ok(dm_text_parse((char *)dec, dlen, "protoc", NETDEF, &m2));
  pack(m2, &bin, &blen);
  assert_int_equal(blen, zoo_len);
  assert_memory_equal(bin, zoo, zoo_len);
  free(err);
  free(text);
  free(enc);
  free(dec);
  free(bin);
  protobuf_c_message_free_unpacked(m, NULL);
  protobuf_c_message_free_unpacked(m2, NULL);
}

/* proto2 presence: an explicit "" or false is printed and kept; absent fields are not. */
static void test_presence(void **state) {
  (void)state;
  static const char text[] = "name: \"\"\nop {\n  device_option {\n  }\n  engine: \"\"\n"
                             "  is_gradient_op: false\n}\nop {\n}\n";
  ProtobufCMessage *m = NULL;
  char *out = NULL;
  size_t len;
  assert_ok(dm_text_parse(text, sizeof text - 1, "presence", NETDEF, &m));
  Caffe2__NetDef *net = (Caffe2__NetDef *)m;
  assert_non_null(net->name);
  assert_null(net->type);
  assert_int_equal(net->n_op, 2);
  assert_true(net->op[0]->has_is_gradient_op);
  assert_false(net->op[1]->has_is_gradient_op);
  assert_null(net->op[1]->device_option);
  assert_ok(dm_text_print(m, &out, &len));
  assert_string_equal(out, text);
  free(out);
  protobuf_c_message_free_unpacked(m, NULL);
}

/* Every value syntax the parser accepts, checked field by field. */
static void test_syntax(void **state) {
  (void)state;
  static const char text[] =
      "# a comment\n"
      "name: 'single' \"double\" 'adj\\x41\\101\\u00e9' ;\n"
      "arg < name: \"a\", f: -inf i: -0x8000000000000000 floats: [1, 2.5f, .5, 1e3, -Infinity, NaN]"
      " ints: [] ints: 077 ints: [0x10, -9223372036854775808, 9223372036854775807] >,\n"
      "arg: { name: \"esc\" s: \"\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\\"\\?\\0\\377\" }\n"
      "arg [ { name: \"l1\" }, < name: \"l2\" > ]\n"
      "device_option { device_type: 1 random_seed: 4294967295 }\n"
      "op { is_gradient_op: t arg { t { data_type: INT32 dims: 2 int32_data: [1, -1] } } }\n"
      "op { is_gradient_op: 1 arg { t { data_type: 13 double_data: -0.0 } } }";
  ProtobufCMessage *m = NULL;
  assert_ok(dm_text_parse(text, sizeof text - 1, "syntax", NETDEF, &m));
  Caffe2__NetDef *net = (Caffe2__NetDef *)m;
  assert_string_equal(net->name, "singledoubleadjAA\xc3\xa9");
  assert_int_equal(net->n_arg, 4);
  Caffe2__Argument *a = net->arg[0];
  assert_true(a->has_f && a->f < 0 && a->f * 0 != 0);
  assert_true(a->i == INT64_MIN);
  assert_int_equal(a->n_floats, 6);
  assert_true(a->floats[0] == 1.0f && a->floats[1] == 2.5f && a->floats[2] == 0.5f && a->floats[3] == 1000.0f);
  assert_true(a->floats[4] < -3e38f && a->floats[5] != a->floats[5]);
  assert_int_equal(a->n_ints, 4);
  assert_true(a->ints[0] == 077 && a->ints[1] == 16 && a->ints[2] == INT64_MIN && a->ints[3] == INT64_MAX);
  assert_int_equal(net->arg[1]->s.len, 13);
  assert_memory_equal(net->arg[1]->s.data, "\a\b\f\n\r\t\v\\'\"?\0\377", 13);
  assert_string_equal(net->arg[2]->name, "l1");
  assert_string_equal(net->arg[3]->name, "l2");
  assert_int_equal(net->device_option->random_seed, 4294967295u);
  assert_true(net->op[0]->is_gradient_op && net->op[1]->is_gradient_op);
  Caffe2__TensorProto *t = net->op[0]->arg[0]->t;
  assert_int_equal(t->data_type, CAFFE2__TENSOR_PROTO__DATA_TYPE__INT32);
  assert_int_equal(t->n_int32_data, 2);
  assert_int_equal(t->int32_data[1], -1);
  t = net->op[1]->arg[0]->t;
  assert_int_equal(t->data_type, CAFFE2__TENSOR_PROTO__DATA_TYPE__DOUBLE);
  assert_true(t->double_data[0] == 0 && 1 / t->double_data[0] < 0);
  protobuf_c_message_free_unpacked(m, NULL);
}

/* (d) Every prefix of the zoo file: either a valid net that repacks to exactly that
 * prefix (it ended between fields), or an error naming the byte and "truncated". */
static void test_truncations(void **state) {
  (void)state;
  size_t ok = 0;
  for (size_t n = 0; n < zoo_len; n++) {
    ProtobufCMessage *m = NULL;
    dm_status s = dm_message_parse(zoo, n, "net.pb", NETDEF, DM_FORMAT_BINARY, &m);
    if (s == DM_OK) {
      uint8_t *bin = NULL;
      size_t blen;
      pack(m, &bin, &blen);
      assert_int_equal(blen, n);
      assert_memory_equal(bin, zoo, n);
      free(bin);
      protobuf_c_message_free_unpacked(m, NULL);
      ok++;
      continue;
    }
    assert_int_equal(s, DM_ERR_PARSE);
    assert_null(m);
    const char *e = dm_last_error();
    if (strncmp(e, "net.pb: byte ", 13) != 0 || !strstr(e, "runs past the end of the file (truncated?)"))
      fail_msg("prefix %zu: unexpected message: %s", n, e);
  }
  assert_true(ok > 2); /* the empty prefix, the name field, a few whole ops */
}

/* Removes the "# unknown field ..." lines the printer writes for unknown fields. */
static void strip_unknown_comments(char *t) {
  char *w = t;
  for (char *r = t; *r;) {
    char *nl = strchr(r, '\n');
    size_t n = nl ? (size_t)(nl - r + 1) : strlen(r);
    size_t ind = strspn(r, " "); /* whole comment lines only, not string values */
    if (strncmp(r + ind, "# unknown field ", 16) != 0) {
      memmove(w, r, n);
      w += n;
    }
    r += n;
  }
  *w = '\0';
}

/* Corrupt each byte a few ways: never a crash or leak, and what loads prints and
 * re-reads to the same bytes. */
static void test_corruptions(void **state) {
  (void)state;
  static const uint8_t flips[] = {0xff, 0x80, 0x07, 0x01};
  uint8_t *buf = malloc(zoo_len);
  assert_non_null(buf);
  for (size_t i = 0; i < zoo_len; i++) {
    for (size_t k = 0; k < sizeof flips; k++) {
      memcpy(buf, zoo, zoo_len);
      buf[i] ^= flips[k];
      ProtobufCMessage *m = NULL, *m2 = NULL;
      dm_status s = dm_message_parse(buf, zoo_len, "net.pb", NETDEF, DM_FORMAT_BINARY, &m);
      if (s != DM_OK) {
        assert_int_equal(s, DM_ERR_PARSE);
        assert_true(strncmp(dm_last_error(), "net.pb: byte ", 13) == 0);
        continue;
      }
      /* Text drops unknown fields, so compare text: print, read back, print again. */
      char *text = NULL, *text2 = NULL;
      size_t tlen, t2len;
      assert_ok(dm_text_print(m, &text, &tlen));
      assert_ok(dm_text_parse(text, tlen, "reprint", NETDEF, &m2));
      assert_ok(dm_text_print(m2, &text2, &t2len));
      strip_unknown_comments(text);
      assert_string_equal(text, text2);
      free(text2);
      free(text);
      protobuf_c_message_free_unpacked(m, NULL);
      protobuf_c_message_free_unpacked(m2, NULL);
    }
  }
  free(buf);
}

typedef struct {
  const char *data;
  size_t len;
  const ProtobufCMessageDescriptor *desc;
  const char *message; /* the whole expected error */
} bin_case;

#define BIN(s) s, sizeof s - 1

static void test_binary_errors(void **state) {
  (void)state;
  static const bin_case cases[] = {
      {BIN("\x08"), NETDEF, "b.pb: byte 0: varint field 1 runs past the end of the file (truncated?)"},
      {BIN("\x00\x01"), NETDEF, "b.pb: byte 0: field number 0 is not allowed (corrupt data?)"},
      {BIN("\x0a\x02x"), NETDEF,
       "b.pb: byte 0: length-delimited field 1 runs past the end of the file (truncated?): 2 bytes "
       "declared, 1 left"},
      {BIN("\x0b"), NETDEF, "b.pb: byte 0: field 1 is a group (wire type 3), which is not supported"},
      {BIN("\x0e"), NETDEF, "b.pb: byte 0: field 1 has invalid wire type 6 (corrupt data?)"},
      {BIN("\x0a\x01x\x80"), NETDEF, "b.pb: byte 3: field tag runs past the end of the file (truncated?)"},
      {BIN("\x80\x80\x80\x80\x80\x01"), NETDEF, "b.pb: byte 0: field tag is longer than 5 bytes"},
      {BIN("\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), NETDEF,
       "b.pb: byte 1: varint of field 4 is longer than 10 bytes"},
      {BIN("\x0d\x00\x00\x00\x00"), NETDEF,
       "b.pb: byte 0: field 1 (name) is 32-bit on the wire, but a scalar field needs length-delimited"},
      {BIN("\x12\x02\x1a\x00\x0a\x02" "a\x00"), NETDEF,
       "b.pb: byte 6: string field 1 (name) contains a NUL byte, which a C string cannot hold"},
      {BIN("\x12\x04\x0a\x05xy"), NETDEF,
       "b.pb: byte 2: length-delimited field 1 runs past the end of its enclosing message (truncated?): 5 "
       "bytes declared, 2 left"},
      {BIN("\x5a\x02\x08\x01"), &caffe2__tensor_proto__descriptor,
       "b.pb: byte 2: message caffe2.TensorProto.Segment starting here lacks required field 2 (end)"},
      {BIN("\x1a\x03\x00\x00\x00"), &caffe2__tensor_proto__descriptor,
       "b.pb: byte 2: packed field 3 (float_data): 3 bytes is not a whole number of 4-byte values"},
      {BIN("\x22\x01\x80"), &caffe2__tensor_proto__descriptor,
       "b.pb: byte 2: packed field 4 (int32_data): the last varint runs past the end of the field"},
      {BIN("\x1a\x01\x02"), &caffe2__tensor_shape__descriptor, NULL}, /* packed int32 unknown_dims: fine */
      {BIN("\x10\x05"), &caffe2__tensor_proto__descriptor, NULL},     /* enum value not in the enum: kept */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ProtobufCMessage *m = NULL;
    dm_status s = dm_message_parse(cases[i].data, cases[i].len, "b.pb", cases[i].desc, DM_FORMAT_BINARY, &m);
    if (!cases[i].message) {
      if (s != DM_OK)
        fail_msg("case %zu: %s", i, dm_last_error());
      protobuf_c_message_free_unpacked(m, NULL);
      continue;
    }
    if (s != DM_ERR_PARSE)
      fail_msg("case %zu: status %s, expected an error", i, dm_status_name(s));
    if (strcmp(dm_last_error(), cases[i].message) != 0)
      fail_msg("case %zu:\n got      %s\n expected %s", i, dm_last_error(), cases[i].message);
  }
}

/* Deep nesting is refused by both readers instead of exhausting the stack. */
static void test_depth(void **state) {
  (void)state;
  enum { LEVELS = 150 };
  /* Binary: NetDef.arg(6) { Argument.n(8) { NetDef ... } }, built from the inside out. */
  uint8_t *buf = malloc(LEVELS * 16), *tmp = malloc(LEVELS * 16);
  size_t len = 0;
  assert_true(buf && tmp);
  for (int i = 0; i < LEVELS; i++) {
    size_t k = 0;
    uint8_t hdr[12];
    /* Argument { n: <buf> } */
    hdr[k++] = 0x42;
    for (size_t v = len;; v >>= 7) {
      hdr[k++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
      if (v < 0x80)
        break;
    }
    size_t alen = k + len;
    size_t k2 = 0;
    tmp[k2++] = 0x32;
    for (size_t v = alen;; v >>= 7) {
      tmp[k2++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
      if (v < 0x80)
        break;
    }
    memcpy(tmp + k2, hdr, k);
    memcpy(tmp + k2 + k, buf, len);
    len = k2 + k + len;
    memcpy(buf, tmp, len);
  }
  ProtobufCMessage *m = NULL;
  assert_int_equal(dm_message_parse(buf, len, "deep.pb", NETDEF, DM_FORMAT_BINARY, &m), DM_ERR_PARSE);
  assert_non_null(strstr(dm_last_error(), "nested more than 100 deep"));
  free(buf);
  free(tmp);
  /* Text */
  size_t cap = LEVELS * 24 + 1, n = 0;
  char *t = malloc(cap);
  for (int i = 0; i < LEVELS; i++)
    n += (size_t)snprintf(t + n, cap - n, "arg { n { ");
  assert_int_equal(dm_text_parse(t, n, "deep.pbtxt", NETDEF, &m), DM_ERR_PARSE);
  assert_non_null(strstr(dm_last_error(), "nested more than 100 deep"));
  free(t);
}

typedef struct {
  const char *text;
  const ProtobufCMessageDescriptor *desc;
  const char *where;   /* "line:col" */
  const char *message; /* a fragment of what follows "file:line:col: " */
} text_case;

static void test_text_errors(void **state) {
  (void)state;
  static const text_case cases[] = {
      {"name: \"x\" name: \"y\"", NETDEF, "1:11", "non-repeated field 'name' is specified more than once"},
      {"foo: 1", NETDEF, "1:1", "unknown field 'foo' in message caffe2.NetDef"},
      {"op { type: \"Conv\" ", NETDEF, "1:19", "expected a field name or '}', got end of input"},
      {"op { type \"Conv\" }", NETDEF, "1:11", "expected ':' after field name 'type', got '\"Conv\"'"},
      {"name: 'abc", NETDEF, "1:7", "string literal is not terminated before the end of the line"},
      {"name: \"ab\ncd\"", NETDEF, "1:7", "string literal is not terminated"},
      {"name: \"a\\qb\"", NETDEF, "1:9", "invalid escape sequence '\\q'"},
      {"name: \"\\x\"", NETDEF, "1:8", "expected hex digits after '\\x'"},
      {"name: \"\\X41\"", NETDEF, "1:8", "invalid escape sequence '\\X'"},
      {"name: \"\\u12\"", NETDEF, "1:8", "expected 4 hex digits after '\\u'"},
      {"name: \"\\ud800\"", NETDEF, "1:8", "not a Unicode scalar value"},
      {"name: \"a\\0b\"", NETDEF, "1:7", "string field 'name' cannot hold a NUL byte"},
      {"num_workers: 2147483648", NETDEF, "1:14", "integer 2147483648 is out of range for int32 field"},
      {"num_workers: -2147483649", NETDEF, "1:14", "integer -2147483649 is out of range"},
      {"arg { i: 18446744073709551616 }", NETDEF, "1:10", "out of range for int64 field 'i'"},
      {"num_workers: 1.5", NETDEF, "1:14", "expected an integer for int32 field 'num_workers', got '1.5'"},
      {"device_option { random_seed: -1 }", NETDEF, "1:30",
       "expected an unsigned integer for uint32 field 'random_seed', got '-'"},
      {"op { is_gradient_op: maybe }", NETDEF, "1:22", "expected true or false for bool field 'is_gradient_op'"},
      {"op { is_gradient_op: 2 }", NETDEF, "1:22", "expected true or false"},
      {"arg { f: 0x10 }", NETDEF, "1:10", "expected a decimal number for float field 'f', got '0x10'"},
      {"arg { f: \"1\" }", NETDEF, "1:10", "expected a number for float field 'f', got '\"1\"'"},
      {"num_workers: 08", NETDEF, "1:15", "numbers starting with a leading zero must be octal"},
      {"num_workers: 1x", NETDEF, "1:15", "need space between number and identifier"},
      {"arg { f: 1e }", NETDEF, "1:12", "'e' must be followed by an exponent"},
      {"arg { f: 1.5.2 }", NETDEF, "1:13", "unexpected '.' after a number"},
      {"external_input: [\"a\", \"b\",]", NETDEF, "1:27", "expected a string for field 'external_input', got ']'"},
      {"external_input: [\"a\" \"b\"", NETDEF, "1:25", "expected ',' or ']' in a list, got end of input"},
      {"name: [\"a\"]", NETDEF, "1:7", "field 'name' is not repeated, so it takes no list"},
      {"op { } }", NETDEF, "1:8", "expected a field name, got '}'"},
      {"op { >", NETDEF, "1:6", "expected a field name or '}', got '>'"},
      {"op 5", NETDEF, "1:4", "expected '{' or '<' to open message field 'op', got '5'"},
      {"name: @", NETDEF, "1:7", "unexpected character '@'"},
      {"name: \"x\"\n# comment\n  op {\n    bogus: 1\n  }\n", NETDEF, "4:5",
       "unknown field 'bogus' in message caffe2.OperatorDef"},
      {"arg { t { data_type: FLOATY } }", NETDEF, "1:22",
       "unknown value 'FLOATY' for enum field 'data_type' (caffe2.TensorProto.DataType)"},
      {"segment { begin: 1 }", &caffe2__tensor_proto__descriptor, "1:20",
       "message caffe2.TensorProto.Segment is missing required field 'end'"},
      {"[caffe2.ext]: 1", NETDEF, "1:1", "expected a field name, got '['"},
      {"\n\x03" "abc", NETDEF, "2:1", "unexpected byte 0x03"},
      {"name: \"x\"\x01", NETDEF, "1:10", "unexpected byte 0x01"},
      {"arg { name: \"x\" n: { name: 'y' ", NETDEF, "1:32", "expected a field name or '}', got end of input"},
      {"arg < name: \"x\" }", NETDEF, "1:17", "expected a field name or '>', got '}'"},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ProtobufCMessage *m = NULL;
    const char *t = cases[i].text;
    char prefix[64];
    dm_status s = dm_text_parse(t, strlen(t), "bad.pbtxt", cases[i].desc, &m);
    if (s != DM_ERR_PARSE) {
      print_error("case %zu (%s): status %s, expected a parse error\n", i, t, dm_status_name(s));
      protobuf_c_message_free_unpacked(m, NULL);
      bad++;
      continue;
    }
    assert_null(m);
    snprintf(prefix, sizeof prefix, "bad.pbtxt:%s: ", cases[i].where);
    const char *e = dm_last_error();
    if (strncmp(e, prefix, strlen(prefix)) != 0 || !strstr(e + strlen(prefix), cases[i].message)) {
      print_error("case %zu (%s):\n got      %s\n expected %s...%s\n", i, t, e, prefix, cases[i].message);
      bad++;
    }
  }
  assert_int_equal(bad, 0);
}

/* Unknown fields survive binary round trips and show up as comments in text. */
static void test_unknown_fields(void **state) {
  (void)state;
  static const uint8_t bin[] = {0x0a, 0x01, 'n', 0xf8, 0x01, 0x07}; /* name "n", field 31 = 7 */
  ProtobufCMessage *m = NULL, *m2 = NULL;
  uint8_t *out = NULL;
  char *text = NULL;
  size_t len;
  assert_ok(dm_message_parse(bin, sizeof bin, "u.pb", NETDEF, DM_FORMAT_BINARY, &m));
  pack(m, &out, &len);
  assert_int_equal(len, sizeof bin);
  assert_memory_equal(out, bin, sizeof bin);
  assert_ok(dm_text_print(m, &text, &len));
  assert_string_equal(text, "name: \"n\"\n# unknown field 31 (wire type 0, 1 bytes) dropped\n");
  assert_ok(dm_text_parse(text, len, "u.pbtxt", NETDEF, &m2));
  free(out);
  free(text);
  protobuf_c_message_free_unpacked(m, NULL);
  protobuf_c_message_free_unpacked(m2, NULL);
}

static void test_limits(void **state) {
  (void)state;
  ProtobufCMessage *m = NULL;
  assert_int_equal(dm_message_parse("", DM_MAX_FILE_BYTES + 1, "big", NETDEF, DM_FORMAT_BINARY, &m), DM_ERR_LIMIT);
  assert_int_equal(dm_text_parse("", DM_MAX_FILE_BYTES + 1, "big", NETDEF, &m), DM_ERR_LIMIT);
  /* Empty input is an empty message in both formats. */
  assert_ok(dm_message_parse(NULL, 0, "e", NETDEF, DM_FORMAT_BINARY, &m));
  protobuf_c_message_free_unpacked(m, NULL);
  assert_ok(dm_message_parse("", 0, "e", NETDEF, DM_FORMAT_TEXT, &m));
  char *t = NULL;
  size_t len = 1;
  assert_ok(dm_text_print(m, &t, &len));
  assert_int_equal(len, 0);
  assert_string_equal(t, "");
  free(t);
  protobuf_c_message_free_unpacked(m, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zoo_round_trip), cmocka_unit_test(test_zoo_files),
      cmocka_unit_test(test_format_guess),   cmocka_unit_test(test_zoo_protoc),
      cmocka_unit_test(test_presence),       cmocka_unit_test(test_syntax),
      cmocka_unit_test(test_truncations),    cmocka_unit_test(test_corruptions),
      cmocka_unit_test(test_binary_errors),  cmocka_unit_test(test_depth),
      cmocka_unit_test(test_text_errors),    cmocka_unit_test(test_unknown_fields),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, load_zoo, free_zoo);
}
