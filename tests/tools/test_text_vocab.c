/* test_text_vocab.c: tools/text_vocab.c and tools/text_sample.c: UTF-8 against byte
 * sequences from the Unicode standard's tables and round trips over every scalar value,
 * a table of invalid UTF-8 (each refused with its byte offset), vocab.txt round trips and
 * a table of hostile vocab files (each refused with file:line), encode/decode, and the
 * sampler against softmax computed here in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_util.h"
#include "text_sample.h"
#include "text_vocab.h"

/* Code points whose UTF-8 is written out in the Unicode standard (table 3-7's ranges). */
static void utf8_known(void **state) {
  (void)state;
  static const struct {
    uint32_t cp;
    const char *bytes;
  } cases[] = {{0x41, "A"},          {0x7F, "\x7F"},           {0x80, "\xC2\x80"},
               {0xE9, "\xC3\xA9"},   {0x7FF, "\xDF\xBF"},      {0x800, "\xE0\xA0\x80"},
               {0x20AC, "\xE2\x82\xAC"}, {0xD7FF, "\xED\x9F\xBF"}, {0xE000, "\xEE\x80\x80"},
               {0xFFFD, "\xEF\xBF\xBD"}, {0x10000, "\xF0\x90\x80\x80"},
               {0x1F600, "\xF0\x9F\x98\x80"}, {0x10FFFF, "\xF4\x8F\xBF\xBF"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t out[4];
    size_t n = dm_utf8_encode(cases[i].cp, out);
    assert_int_equal(n, strlen(cases[i].bytes));
    assert_memory_equal(out, cases[i].bytes, n);
    uint32_t *cps = NULL;
    size_t k = 0;
    assert_ok(dm_utf8_decode("case", (const uint8_t *)cases[i].bytes, n, &cps, &k));
    assert_int_equal(k, 1);
    assert_int_equal(cps[0], cases[i].cp);
    free(cps);
  }
}

/* Every scalar value encodes and decodes back; surrogates and values past U+10FFFF do
 * not encode. */
static void utf8_round_trip_all(void **state) {
  (void)state;
  uint8_t *buf = malloc(4u * 0x110000u);
  assert_non_null(buf);
  size_t len = 0, count = 0;
  for (uint32_t c = 0; c <= 0x10FFFF; c++) {
    size_t n = dm_utf8_encode(c, buf + len);
    if (c >= 0xD800 && c <= 0xDFFF) {
      assert_int_equal(n, 0);
      continue;
    }
    assert_int_equal(n, c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4);
    len += n;
    count++;
  }
  uint8_t tmp[4];
  assert_int_equal(dm_utf8_encode(0x110000, tmp), 0);
  uint32_t *cps = NULL;
  size_t k = 0;
  assert_ok(dm_utf8_decode("all", buf, len, &cps, &k));
  assert_int_equal(k, count);
  for (size_t i = 0, c = 0; i < k; i++, c++) {
    if (c == 0xD800)
      c = 0xE000;
    assert_int_equal(cps[i], c);
  }
  free(cps);
  free(buf);
}

static void utf8_invalid(void **state) {
  (void)state;
  static const struct {
    const char *bytes;
    size_t len, offset;
    const char *why;
  } cases[] = {
      {"\x80", 1, 0, "continuation byte with no lead"},
      {"ab\xBF", 3, 2, "continuation byte with no lead"},
      {"\xC0\x80", 2, 0, "never occurs"}, /* C0, C1: always overlong */
      {"\xC1\xBF", 2, 0, "never occurs"},
      {"\xE0\x80\x80", 3, 0, "overlong"},
      {"\xF0\x80\x80\x80", 4, 0, "overlong"},
      {"x\xED\xA0\x80", 4, 1, "surrogate"},
      {"\xED\xBF\xBF", 3, 0, "surrogate"},
      {"\xF4\x90\x80\x80", 4, 0, "past U+10FFFF"},
      {"\xF5\x80\x80\x80", 4, 0, "never occurs"},
      {"\xFF", 1, 0, "never occurs"},
      {"ok\xE2\x82", 4, 2, "cut off by the end"},
      {"\xC3(", 2, 0, "cut short"},
      {"\xE2\x82(", 3, 0, "cut short"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint32_t *cps = (uint32_t *)1;
    size_t k = 7;
    char where[64];
    snprintf(where, sizeof where, "at byte offset %zu", cases[i].offset);
    assert_status_msg(dm_utf8_decode("text.txt", (const uint8_t *)cases[i].bytes, cases[i].len,
                                     &cps, &k),
                      DM_ERR_PARSE, "text.txt", where, cases[i].why);
    assert_null(cps);
    assert_int_equal(k, 0);
  }
}

static void mark(uint64_t *present, const char *text) {
  uint32_t *cps = NULL;
  size_t n = 0;
  assert_ok(dm_utf8_decode("mark", (const uint8_t *)text, strlen(text), &cps, &n));
  for (size_t i = 0; i < n; i++)
    present[cps[i] >> 6] |= (uint64_t)1 << (cps[i] & 63);
  free(cps);
}

static char *temp_path(const char *name) {
  char *p = malloc(256);
  snprintf(p, 256, "/tmp/test_text_vocab.%d.%s", (int)getpid(), name);
  return p;
}

/* A vocabulary of a text, saved and loaded back; the text encodes to ids in the sorted
 * order and decodes back to itself. */
static void vocab_round_trip(void **state) {
  (void)state;
  const char *text = "héllo, wörld \xF0\x9F\x98\x80\n\tzz";
  uint64_t *present = calloc((DM_VOCAB_MAX_CP >> 6) + 1, sizeof *present);
  assert_non_null(present);
  mark(present, text);
  dm_vocab v, w;
  assert_ok(dm_vocab_from_bitmap(DM_VOCAB_CHAR, present, &v));
  /* the distinct characters, sorted: \t \n ' ' , d h l o r w z é ö U+1F600 */
  static const uint32_t want[] = {0x09, 0x0A, 0x20, 0x2C, 'd', 'h',  'l',
                                  'o',  'r',  'w',  'z',  0xE9, 0xF6, 0x1F600};
  assert_int_equal(v.n, sizeof want / sizeof want[0]);
  for (int32_t i = 0; i < v.n; i++)
    assert_int_equal(v.cp[i], want[i]);
  char *path = temp_path("vocab.txt");
  assert_ok(dm_vocab_save(path, &v));
  assert_ok(dm_vocab_load(path, &w));
  unlink(path);
  free(path);
  assert_int_equal(w.kind, DM_VOCAB_CHAR);
  assert_int_equal(w.n, v.n);
  assert_memory_equal(w.cp, v.cp, (size_t)v.n * sizeof *v.cp);
  char *buf = NULL;
  size_t len = 0;
  assert_ok(dm_vocab_format(&v, &buf, &len));
  assert_true(len > 30 && strncmp(buf, "demitasse-vocab 1 char 14\nU+0009\nU+000A\n", 40) == 0);
  assert_non_null(strstr(buf, "\nU+00E9\nU+00F6\nU+1F600\n"));
  free(buf);

  int32_t *ids = NULL;
  size_t n = 0;
  assert_ok(dm_vocab_encode(&w, "text", (const uint8_t *)text, strlen(text), &ids, &n));
  assert_int_equal(n, 18);
  assert_int_equal(ids[0], 5);  /* h */
  assert_int_equal(ids[1], 11); /* é */
  uint8_t out[128];
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t m = dm_vocab_decode(&w, ids[i], out + k);
    assert_true(m >= 1 && m <= 4);
    k += m;
  }
  assert_int_equal(k, strlen(text));
  assert_memory_equal(out, text, k);
  uint8_t none[4];
  assert_int_equal(dm_vocab_decode(&w, -1, none), 0);
  assert_int_equal(dm_vocab_decode(&w, w.n, none), 0);
  free(ids);

  /* a character the vocabulary lacks, and invalid UTF-8, are named with their offset */
  assert_status_msg(dm_vocab_encode(&w, "--prompt", (const uint8_t *)"hox", 3, &ids, &n),
                    DM_ERR_NOT_FOUND, "--prompt", "U+0078 'x'", "byte offset 2");
  assert_null(ids);
  assert_status_msg(dm_vocab_encode(&w, "--prompt", (const uint8_t *)"h\xC3", 2, &ids, &n),
                    DM_ERR_PARSE, "--prompt", "invalid UTF-8", "byte offset 1");
  dm_vocab_free(&v);
  dm_vocab_free(&w);
  /* no character: no vocabulary */
  memset(present, 0, ((DM_VOCAB_MAX_CP >> 6) + 1) * sizeof *present);
  assert_status_msg(dm_vocab_from_bitmap(DM_VOCAB_CHAR, present, &v), DM_ERR_INVALID, "no character");
  free(present);
}

/* The byte vocabulary is id i = byte i and takes any bytes, invalid UTF-8 included. */
static void byte_vocab(void **state) {
  (void)state;
  dm_vocab v, w;
  assert_ok(dm_vocab_from_bitmap(DM_VOCAB_BYTE, NULL, &v));
  assert_int_equal(v.n, 256);
  char *buf = NULL;
  size_t len = 0;
  assert_ok(dm_vocab_format(&v, &buf, &len));
  assert_int_equal(len, strlen("demitasse-vocab 1 byte 256\n") + 256 * 5);
  assert_ok(dm_vocab_parse("b.txt", buf, len, &w));
  assert_int_equal(w.kind, DM_VOCAB_BYTE);
  assert_non_null(strstr(buf, "\n0x00\n0x01\n"));
  assert_non_null(strstr(buf, "\n0xFF\n"));
  free(buf);
  const uint8_t text[] = {0xFF, 0x00, 'a', 0xC3};
  int32_t *ids = NULL;
  size_t n = 0;
  assert_ok(dm_vocab_encode(&w, "t", text, sizeof text, &ids, &n));
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++) {
    uint8_t b[4];
    assert_int_equal(ids[i], text[i]);
    assert_int_equal(dm_vocab_decode(&w, ids[i], b), 1);
    assert_int_equal(b[0], text[i]);
  }
  free(ids);
  dm_vocab_free(&v);
  dm_vocab_free(&w);
}

static void vocab_hostile(void **state) {
  (void)state;
  static const struct {
    const char *text;
    const char *frags[3];
  } cases[] = {
      {"", {"v.txt:1:", "empty file"}},
      {"demitasse-vocab 1 char 1", {"v.txt:1:", "not complete"}},
      {"hello\nU+0041\n", {"v.txt:1:", "not a vocabulary"}},
      {"demitasse-vocab 2 char 1\nU+0041\n", {"v.txt:1:", "not a vocabulary"}},
      {"demitasse-vocab 1 word 1\nU+0041\n", {"v.txt:1:", "wanted"}},
      {"demitasse-vocab 1 char\nU+0041\n", {"v.txt:1:", "wanted"}},
      {"demitasse-vocab 1 char 1 x\nU+0041\n", {"v.txt:1:", "wanted"}},
      {"demitasse-vocab 1 char 0\n", {"v.txt:1:", "0 tokens"}},
      {"demitasse-vocab 1 char -3\n", {"v.txt:1:", "-3 tokens"}},
      {"demitasse-vocab 1 char 9999999999\n", {"v.txt:1:", "tokens"}},
      {"demitasse-vocab 1 byte 255\n", {"v.txt:1:", "255 tokens", "256"}},
      {"demitasse-vocab 1 char 2\nU+0041\nU+0041\n", {"v.txt:3:", "duplicate of token 0"}},
      {"demitasse-vocab 1 char 2\nU+0042\nU+0041\n", {"v.txt:3:", "ascend"}},
      {"demitasse-vocab 1 char 1\nU+00G1\n", {"v.txt:2:", "'U+00G1'", "hex"}},
      {"demitasse-vocab 1 char 1\nU+00e9\n", {"v.txt:2:", "upper-case hex"}},
      {"demitasse-vocab 1 char 1\nU+41\n", {"v.txt:2:", "4 to 6"}},
      {"demitasse-vocab 1 char 1\nU+0010FFFF\n", {"v.txt:2:", "4 to 6"}},
      {"demitasse-vocab 1 char 1\n0x41\n", {"v.txt:2:", "U+XXXX"}},
      {"demitasse-vocab 1 char 1\nU+0041\r\n", {"v.txt:2:", "U+XXXX"}},
      {"demitasse-vocab 1 char 1\nU+110000\n", {"v.txt:2:", "out of range", "past U+10FFFF"}},
      {"demitasse-vocab 1 char 1\nU+DC00\n", {"v.txt:2:", "surrogate"}},
      {"demitasse-vocab 1 char 3\nU+0041\nU+0042\n", {"v.txt:4:", "truncated", "3 tokens"}},
      {"demitasse-vocab 1 char 2\nU+0041\nU+0042", {"v.txt:3:", "no newline"}},
      {"demitasse-vocab 1 char 1\nU+0041\nU+0042\n", {"v.txt:3:", "after the 1 tokens"}},
      {"demitasse-vocab 1 byte 256\n0x00\n0x1\n", {"v.txt:3:", "0xHH"}},
      {"demitasse-vocab 1 byte 256\n0x00\nU+0001\n", {"v.txt:3:", "0xHH"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dm_vocab v = {.n = 5};
    dm_status s = dm_vocab_parse("v.txt", cases[i].text, strlen(cases[i].text), &v);
    if (s != DM_ERR_PARSE)
      fail_msg("case %zu: status %s: %s", i, dm_status_name(s), dm_last_error());
    for (int k = 0; k < 3 && cases[i].frags[k]; k++)
      if (!strstr(dm_last_error(), cases[i].frags[k]))
        fail_msg("case %zu: message lacks '%s': %s", i, cases[i].frags[k], dm_last_error());
    assert_null(v.cp);
  }
  /* a file that is no regular file, and one that is not there */
  dm_vocab v;
  assert_status_msg(dm_vocab_load("/tmp", &v), DM_ERR_IO, "/tmp", "directory");
  assert_status_msg(dm_vocab_load("/nonexistent/vocab.txt", &v), DM_ERR_NOT_FOUND, "vocab.txt");
}

/* splitmix64's published first outputs for seed 0 (the xoshiro authors' reference code),
 * through the state it seeds: s[0..3]. */
static void rng_seeding(void **state) {
  (void)state;
  dm_rng r, q;
  dm_rng_seed(&r, 0);
  assert_true(r.s[0] == 0xE220A8397B1DCDAFull);
  assert_true(r.s[1] == 0x6E789E6AA1B965F4ull);
  dm_rng_seed(&q, 0);
  for (int i = 0; i < 100; i++)
    assert_true(dm_rng_next(&r) == dm_rng_next(&q));
  dm_rng_seed(&q, 1);
  assert_true(dm_rng_next(&r) != dm_rng_next(&q));
  for (int i = 0; i < 10000; i++) {
    double u = dm_rng_uniform(&r);
    assert_true(u >= 0 && u < 1);
  }
}

/* Draw frequencies against softmax(logits / T) over the top k, computed here in double:
 * each within 5 standard deviations of its binomial count. */
static void check_freq(const float *logits, int V, double temp, int k, int draws) {
  dm_sampler s;
  assert_ok(dm_sampler_init(&s, V, temp, k, 42));
  int *count = calloc((size_t)V, sizeof *count);
  double *p = calloc((size_t)V, sizeof *p);
  for (int i = 0; i < draws; i++) {
    int32_t t = -1;
    assert_ok(dm_sample_token(&s, logits, &t));
    assert_true(t >= 0 && t < V);
    count[t]++;
  }
  /* rank of each logit: how many are larger, or equal with a lower id */
  double sum = 0;
  for (int i = 0; i < V; i++) {
    int rank = 0;
    for (int j = 0; j < V; j++)
      rank += logits[j] > logits[i] || (logits[j] == logits[i] && j < i);
    p[i] = (k == 0 || rank < k) ? exp((double)logits[i] / temp) : 0;
    sum += p[i];
  }
  for (int i = 0; i < V; i++) {
    double q = p[i] / sum, mean = draws * q, sd = sqrt(draws * q * (1 - q));
    if (q == 0)
      assert_int_equal(count[i], 0);
    else if (fabs(count[i] - mean) > 5 * sd + 1)
      fail_msg("token %d: %d draws, expected %.1f +- %.1f", i, count[i], mean, sd);
  }
  free(count);
  free(p);
  dm_sampler_free(&s);
}

static void sampler(void **state) {
  (void)state;
  const float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, -INFINITY};
  check_freq(logits, 6, 1.0, 0, 200000);
  check_freq(logits, 6, 0.5, 0, 200000);
  check_freq(logits, 6, 3.0, 3, 200000);
  check_freq(logits, 6, 1.0, 2, 100000);
  /* greedy and top-k 1: the largest, the lower id on a tie */
  dm_sampler s;
  int32_t t = -1;
  assert_ok(dm_sampler_init(&s, 6, 0, 0, 1));
  assert_ok(dm_sample_token(&s, logits, &t));
  assert_int_equal(t, 1);
  dm_sampler_free(&s);
  assert_ok(dm_sampler_init(&s, 6, 2.0, 1, 1));
  assert_ok(dm_sample_token(&s, logits, &t));
  assert_int_equal(t, 1);
  const float bad[3] = {0, NAN, 1}, inf[2] = {0, INFINITY},
              none[2] = {-INFINITY, -INFINITY};
  s.V = 3;
  assert_status_msg(dm_sample_token(&s, bad, &t), DM_ERR_INVALID, "token 1", "NaN");
  s.V = 2;
  assert_status_msg(dm_sample_token(&s, inf, &t), DM_ERR_INVALID, "token 1", "+inf");
  assert_status_msg(dm_sample_token(&s, none, &t), DM_ERR_INVALID, "every logit is -inf");
  dm_sampler_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(utf8_known),     cmocka_unit_test(utf8_round_trip_all),
      cmocka_unit_test(utf8_invalid),   cmocka_unit_test(vocab_round_trip),
      cmocka_unit_test(byte_vocab),     cmocka_unit_test(vocab_hostile),
      cmocka_unit_test(rng_seeding),    cmocka_unit_test(sampler),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
