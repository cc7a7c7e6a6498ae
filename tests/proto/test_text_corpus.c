/* test_text_corpus.c: a generated corpus of text-format messages, checked both ways
 * against protoc.
 *
 * A seeded generator walks the protobuf-c descriptors and writes random messages of
 * several types in every syntax the text format allows (both quote styles, adjacent
 * literals, every escape, hex/octal/signed integers, int64 extremes, float specials,
 * denormals, -0, list syntax, < > brackets, optional colons, separators, comments).
 * For each text T:
 *   ours(T) packed == protoc --encode(T)            (our parser agrees with protoc's)
 *   print(ours(T)) == protoc --decode(those bytes)  (our printer is protoc's, byte for byte)
 *   ours(protoc's text) packed == the same bytes    (we read what protoc writes)
 *   our binary reader + printer give the same text again.
 * Set DM_CORPUS_DIR to keep the generated texts; DM_CORPUS_N to change the count.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "netio.h"
#include "proto/caffe2.pb-c.h"
#include "protoc_run.h"

/* ---- deterministic random numbers (xorshift64*) ---- */
static uint64_t rng_state;
static uint64_t rnd64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static uint32_t rnd(uint32_t n) { return n ? (uint32_t)(rnd64() >> 32) % n : 0; }
static int chance(int percent) { return (int)rnd(100) < percent; }

/* ---- output text ---- */
typedef struct {
  char *buf;
  size_t len, cap;
} text;

static void put(text *t, const char *s, size_t n) {
  if (t->cap - t->len < n + 1) {
    while (t->cap - t->len < n + 1)
      t->cap = t->cap ? t->cap * 2 : 1024;
    t->buf = realloc(t->buf, t->cap);
    if (!t->buf)
      abort(); /* test code: out of memory is not a case under test */
  }
  memcpy(t->buf + t->len, s, n);
  t->len += n;
  t->buf[t->len] = '\0';
}
static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }
static void printf_(text *t, const char *fmt, ...) DM_PRINTF(2, 3);
static void printf_(text *t, const char *fmt, ...) {
  char b[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  puts_(t, b);
}

/* Blanks between tokens, sometimes with a comment holding quotes and brackets. */
static void blank(text *t) {
  switch (rnd(8)) {
  case 0: puts_(t, "\n  "); break;
  case 1: puts_(t, "\t"); break;
  case 2: puts_(t, "  # comment: \"not a string' { < [\n"); break;
  case 3: puts_(t, "\n"); break;
  default: puts_(t, " ");
  }
}

/* ---- values ---- */

static void gen_uint(text *t, uint64_t v) {
  switch (rnd(4)) {
  case 0: printf_(t, "0x%llx", (unsigned long long)v); break;
  case 1: printf_(t, v ? "0%llo" : "0", (unsigned long long)v); break;
  case 2: printf_(t, "0X%llX", (unsigned long long)v); break;
  default: printf_(t, "%llu", (unsigned long long)v);
  }
}

static void gen_sint(text *t, int64_t v) {
  if (v < 0) {
    puts_(t, "-");
    if (chance(30))
      blank(t); /* protoc allows space after the sign */
    gen_uint(t, (uint64_t)0 - (uint64_t)v);
  } else {
    gen_uint(t, (uint64_t)v);
  }
}

static int64_t pick_int(int64_t lo, int64_t hi) {
  switch (rnd(6)) {
  case 0: return lo;
  case 1: return hi;
  case 2: return 0;
  case 3: return -1 < lo ? 1 : -1;
  case 4: return (int64_t)rnd(1000) - (lo < 0 ? 500 : 0);
  default: {
    uint64_t span = (uint64_t)hi - (uint64_t)lo;
    uint64_t r = rnd64();
    return (int64_t)((uint64_t)lo + (span == UINT64_MAX ? r : r % (span + 1)));
  }
  }
}

/* A decimal for `v` that protoc and we both read back as `v`, in varied spellings. */
static void gen_real(text *t, double v, int is_float) {
  if (isnan(v)) {
    static const char *const nans[] = {"nan", "NaN", "NAN"};
    puts_(t, nans[rnd(3)]);
    return;
  }
  if (isinf(v)) {
    static const char *const infs[] = {"inf", "Infinity", "INF", "infinity"};
    if (v < 0)
      puts_(t, "-");
    puts_(t, infs[rnd(4)]);
    return;
  }
  char b[64];
  int digits = is_float ? 9 : 17;
  switch (rnd(4)) {
  case 0: snprintf(b, sizeof b, "%.*e", digits - 1, v); break;
  case 1: snprintf(b, sizeof b, "%.*E", digits - 1, v); break;
  default: snprintf(b, sizeof b, "%.*g", digits, v);
  }
  /* "0.5" may be written ".5"; a float may end in f; an integral value may stay bare. */
  char *s = b;
  if (s[0] == '0' && s[1] == '.' && chance(50))
    s++;
  puts_(t, s);
  if (chance(20) && strpbrk(s, ".eE"))
    puts_(t, chance(50) ? "f" : "F");
}

static double pick_real(int is_float) {
  uint64_t bits = rnd64();
  switch (rnd(12)) {
  case 0: return INFINITY;
  case 1: return -INFINITY;
  case 2: return NAN;
  case 3: return -0.0;
  case 4: return 0.0;
  case 5: return is_float ? FLT_MAX : DBL_MAX;
  case 6: return is_float ? -FLT_MIN : DBL_MIN;
  case 7: { /* denormal */
    if (is_float) {
      uint32_t fb = (uint32_t)bits & 0x807fffffu;
      float f;
      memcpy(&f, &fb, 4);
      return f;
    }
    bits &= 0x800fffffffffffffull;
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  case 8: return (double)((int)rnd(2001) - 1000) / 8;
  default: {
    if (is_float) {
      uint32_t fb = (uint32_t)bits;
      float f;
      memcpy(&f, &fb, 4);
      return isnan(f) ? 1.5 : f;
    }
    double d;
    memcpy(&d, &bits, 8);
    return isnan(d) ? -2.25 : d;
  }
  }
}

/* Bytes as one to three adjacent literals, each in either quote style, each byte
 * written plainly or with any escape that protoc also reads. */
static void gen_bytes(text *t, const uint8_t *d, size_t n, int is_string) {
  size_t cut1 = n ? rnd((uint32_t)n + 1) : 0, cut2 = cut1 + (n > cut1 ? rnd((uint32_t)(n - cut1) + 1) : 0);
  size_t cuts[4] = {0, cut1, cut2, n};
  int parts = chance(70) ? 1 : 3;
  for (int p = 0; p < 3; p++) {
    size_t from = parts == 1 ? (p == 0 ? 0 : n) : cuts[p], to = parts == 1 ? n : cuts[p + 1];
    if (parts == 1 && p > 0)
      break;
    char q = chance(50) ? '"' : '\'';
    if (p > 0)
      blank(t);
    put(t, &q, 1);
    for (size_t i = from; i < to; i++) {
      uint8_t c = d[i];
      char b[8];
      int how = (int)rnd(4);
      if (c == '\\' || c == (uint8_t)q || c < 0x20 || c == 0x7f || (c >= 0x80 && (is_string || how < 2)) ||
          how == 0) {
        static const char named[] = "\a\b\f\n\r\t\v\\'\"?";
        static const char names[] = "abfnrtv\\'\"?";
        const char *k = c ? strchr(named, c) : NULL;
        if (k && chance(60))
          snprintf(b, sizeof b, "\\%c", names[k - named]);
        else if (chance(50))
          snprintf(b, sizeof b, "\\%03o", c);
        else
          snprintf(b, sizeof b, chance(50) ? "\\x%02x" : "\\x%02X", c);
        puts_(t, b);
      } else {
        put(t, (const char *)&c, 1);
      }
    }
    put(t, &q, 1);
  }
}

static size_t pick_bytes(uint8_t *d, size_t cap, int is_string) {
  static const char *const utf8[] = {"\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "gpu_0/", "conv1_w"};
  size_t n = 0, want = rnd(14);
  while (n < want && n + 4 < cap) {
    if (is_string) {
      if (chance(20)) {
        const char *u = utf8[rnd(5)];
        size_t l = strlen(u);
        if (n + l >= cap)
          break;
        memcpy(d + n, u, l);
        n += l;
      } else {
        d[n++] = (uint8_t)(1 + rnd(127)); /* ASCII without NUL */
      }
    } else {
      d[n++] = (uint8_t)rnd(256);
    }
  }
  return n;
}

/* ---- messages ---- */

static void gen_message(text *t, const ProtobufCMessageDescriptor *d, int depth);

static void gen_value(text *t, const ProtobufCFieldDescriptor *f, int depth) {
  uint8_t bytes[64];
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    gen_sint(t, pick_int(INT32_MIN, INT32_MAX));
    break;
  case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    gen_sint(t, pick_int(INT64_MIN, INT64_MAX));
    break;
  case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
    gen_uint(t, (uint64_t)pick_int(0, UINT32_MAX));
    break;
  case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
    gen_uint(t, chance(20) ? UINT64_MAX : rnd64());
    break;
  case PROTOBUF_C_TYPE_FLOAT:
    gen_real(t, (float)pick_real(1), 1);
    break;
  case PROTOBUF_C_TYPE_DOUBLE:
    gen_real(t, pick_real(0), 0);
    break;
  case PROTOBUF_C_TYPE_BOOL: {
    static const char *const b[] = {"true", "false", "t", "f", "True", "False", "1", "0"};
    puts_(t, b[rnd(8)]);
    break;
  }
  case PROTOBUF_C_TYPE_ENUM: {
    const ProtobufCEnumDescriptor *ed = f->descriptor;
    const ProtobufCEnumValue *v = &ed->values[rnd(ed->n_values)];
    if (chance(70))
      puts_(t, v->name);
    else
      printf_(t, "%d", v->value);
    break;
  }
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES: {
    int is_string = f->type == PROTOBUF_C_TYPE_STRING;
    size_t n = pick_bytes(bytes, sizeof bytes, is_string);
    gen_bytes(t, bytes, n, is_string);
    break;
  }
  case PROTOBUF_C_TYPE_MESSAGE: {
    int angle = chance(25);
    puts_(t, angle ? "<" : "{");
    blank(t);
    gen_message(t, f->descriptor, depth + 1);
    puts_(t, angle ? ">" : "}");
    break;
  }
  }
}

static void gen_field(text *t, const ProtobufCFieldDescriptor *f, int depth) {
  int is_msg = f->type == PROTOBUF_C_TYPE_MESSAGE;
  int repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
  /* Nested messages thin out with depth so the texts stay small. */
  int max_n = is_msg ? (depth < 3 ? 2 : 0) : 4;
  size_t n = repeated ? rnd((uint32_t)max_n + 1) : 1;
  int list = repeated && chance(40);
  if (n == 0 && !(list && chance(30)))
    return;
  for (size_t i = 0; i < n || (list && i == 0); i++) {
    puts_(t, f->name);
    if (!is_msg || chance(40))
      puts_(t, ":");
    blank(t);
    if (list) {
      puts_(t, "[");
      for (size_t j = 0; j < n; j++) {
        if (j)
          puts_(t, ", ");
        gen_value(t, f, depth);
      }
      puts_(t, "]");
      n = 0;
    } else {
      gen_value(t, f, depth);
    }
    if (chance(30))
      puts_(t, chance(50) ? "," : ";");
    blank(t);
    if (list)
      break;
  }
}

static void gen_message(text *t, const ProtobufCMessageDescriptor *d, int depth) {
  unsigned order[64];
  unsigned n = d->n_fields < 64 ? d->n_fields : 64;
  for (unsigned i = 0; i < n; i++)
    order[i] = i;
  for (unsigned i = n; i > 1; i--) { /* any field order is valid text */
    unsigned j = rnd(i), tmp = order[i - 1];
    order[i - 1] = order[j];
    order[j] = tmp;
  }
  for (unsigned k = 0; k < n; k++) {
    const ProtobufCFieldDescriptor *f = &d->fields[order[k]];
    int is_msg = f->type == PROTOBUF_C_TYPE_MESSAGE;
    if (f->label == PROTOBUF_C_LABEL_REQUIRED || f->label == PROTOBUF_C_LABEL_REPEATED ||
        chance(is_msg ? (depth < 3 ? 40 : 0) : 60))
      gen_field(t, f, depth);
  }
}

/* ---- the checks ---- */

typedef struct {
  const ProtobufCMessageDescriptor *desc;
  const char *type;
} kind;

static const kind kinds[] = {
    {&caffe2__net_def__descriptor, "caffe2.NetDef"},
    {&caffe2__net_def__descriptor, "caffe2.NetDef"},
    {&caffe2__tensor_proto__descriptor, "caffe2.TensorProto"},
    {&caffe2__tensor_protos__descriptor, "caffe2.TensorProtos"},
    {&caffe2__argument__descriptor, "caffe2.Argument"},
    {&caffe2__plan_def__descriptor, "caffe2.PlanDef"},
    {&caffe2__blob_proto__descriptor, "caffe2.BlobProto"},
    {&caffe2__tensor_shapes__descriptor, "caffe2.TensorShapes"},
    {&caffe2__qtensor_proto__descriptor, "caffe2.QTensorProto"},
    {&caffe2__dbreader_proto__descriptor, "caffe2.DBReaderProto"},
};

static void save(const char *name, const void *d, size_t n) {
  const char *dir = getenv("DM_CORPUS_DIR");
  if (!dir || !*dir)
    return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  dm_write_file(path, d, n);
}

/* Runs every check on one text; fails the test with the text on any mismatch. */
static void check_text(const kind *k, const char *src, size_t len, const char *label) {
  ProtobufCMessage *m = NULL, *m2 = NULL, *m3 = NULL;
  uint8_t *ours = NULL, *theirs = NULL, *dec = NULL, *again = NULL;
  char *err = NULL, *printed = NULL, *printed2 = NULL;
  size_t ol, tl, dl, al, pl, p2l;
  dm_status s = dm_text_parse(src, len, label, k->desc, &m);
  if (s != DM_OK)
    fail_msg("%s: our parser refused it: %s\n---\n%s", label, dm_last_error(), src);
  if (dm_message_serialize(m, DM_FORMAT_BINARY, &ours, &ol) != DM_OK)
    fail_msg("%s: serialize: %s", label, dm_last_error());
  if (pt_protoc_run("encode", k->type, src, len, &theirs, &tl, &err) != 0)
    fail_msg("%s: protoc --encode refused it: %s\n---\n%s", label, err ? err : "?", src);
  if (tl != ol || memcmp(ours, theirs, ol) != 0)
    fail_msg("%s: our bytes (%zu) differ from protoc's (%zu)\n---\n%s", label, ol, tl, src);
  free(err);
  err = NULL;
  if (dm_text_print(m, &printed, &pl) != DM_OK)
    fail_msg("%s: print: %s", label, dm_last_error());
  if (pt_protoc_run("decode", k->type, ours, ol, &dec, &dl, &err) != 0)
    fail_msg("%s: protoc --decode failed: %s", label, err ? err : "?");
  if (strcmp(printed, (char *)dec) != 0)
    fail_msg("%s: our text differs from protoc --decode\n--- ours\n%s\n--- protoc\n%s\n--- input\n%s", label,
             printed, (char *)dec, src);
  if (dm_text_parse((char *)dec, dl, "protoc-decode", k->desc, &m2) != DM_OK)
    fail_msg("%s: we refused protoc's text: %s\n---\n%s", label, dm_last_error(), (char *)dec);
  if (dm_message_serialize(m2, DM_FORMAT_BINARY, &again, &al) != DM_OK || al != ol ||
      memcmp(again, ours, ol) != 0)
    fail_msg("%s: protoc's text read back to different bytes", label);
  if (dm_message_parse(ours, ol, "bin", k->desc, DM_FORMAT_BINARY, &m3) != DM_OK ||
      dm_text_print(m3, &printed2, &p2l) != DM_OK || strcmp(printed, printed2) != 0)
    fail_msg("%s: binary read + print disagrees: %s", label, dm_last_error());
  free(err);
  free(ours);
  free(theirs);
  free(dec);
  free(again);
  free(printed);
  free(printed2);
  protobuf_c_message_free_unpacked(m, NULL);
  protobuf_c_message_free_unpacked(m2, NULL);
  protobuf_c_message_free_unpacked(m3, NULL);
}

/* Hand-written cases the generator might only reach by luck. */
static void test_fixed_cases(void **state) {
  (void)state;
  if (!pt_protoc())
    skip();
  text t = {0};
  uint8_t all[256];
  for (int i = 0; i < 256; i++)
    all[i] = (uint8_t)i;
  /* Every byte value in a bytes field, once per quote style. */
  puts_(&t, "name: \"all bytes\" arg { name: 'b' s: ");
  gen_bytes(&t, all, 256, 0);
  puts_(&t, " strings: [");
  gen_bytes(&t, all, 256, 0);
  puts_(&t, ", '\\377\\0\\x00\\x7F'] }\n");
  puts_(&t, "arg { name: \"i64\" ints: [-9223372036854775808, 9223372036854775807, -0x8000000000000000,"
            " 0x7fffffffffffffff, 0777777777777777777777, -1, 0] i: -9223372036854775808 }\n"
            "arg { name: \"f\" floats: [inf, -inf, nan, -0.0, 0, 1.40129846e-45, 1.17549435e-38,"
            " 3.40282347e+38, 1e-46, 3.4028236e38, 1e39, 0.1, 0.2f, 100, 1.5e+3F] }\n"
            "arg { name: \"n\" n { name: \"inner\" op { type: \"Relu\" input: \"x\" output: \"x\" } }"
            " nets [ { name: 'a' }, < name: \"b\" > ] nets: { } }\n"
            "arg { t { dims: [2, 3] data_type: DOUBLE double_data: [4.9406564584124654e-324, -0.0,"
            " 1.7976931348623157e308, 2.2250738585072009e-308, nan, -inf] segment { begin: -1 end: 2 } }"
            " tensors { int64_data: [-9223372036854775808] string_data: ['x', \"\"] raw_data: '' } }\n"
            "device_option { device_type: -2147483648 device_id: 2147483647 random_seed: 4294967295"
            " numa_node_id: 0x7fffffff extra_info: ['\\u00e9\\U0001F600', \"\\344\\270\\255\"] }\n");
  save("fixed.pbtxt", t.buf, t.len);
  check_text(&kinds[0], t.buf, t.len, "fixed");
  free(t.buf);
}

static void test_generated(void **state) {
  (void)state;
  if (!pt_protoc())
    skip();
  const char *nenv = getenv("DM_CORPUS_N");
  int n = nenv ? atoi(nenv) : 400;
  rng_state = 0x5eed1234abcdef01ull;
  for (int i = 0; i < n; i++) {
    const kind *k = &kinds[i % (int)(sizeof kinds / sizeof kinds[0])];
    text t = {0};
    char label[64];
    puts_(&t, "");
    if (chance(30))
      puts_(&t, "# generated\n");
    gen_message(&t, k->desc, 0);
    snprintf(label, sizeof label, "gen_%03d_%s.pbtxt", i, k->type + 7);
    save(label, t.buf, t.len);
    check_text(k, t.buf, t.len, label);
    free(t.buf);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixed_cases),
      cmocka_unit_test(test_generated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
