/* test_npy.c: .npy loading and saving: a table of malformed files (each refused with the
 * right status and a message that says what is wrong, through both the memory and the
 * file path) and round trips for every supported dtype. The NumPy-side check (our files
 * against np.save/np.load) is npy_numpy_check.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/npy.h"

/* A file image: prelude (magic, version, length) + header text + data. */
typedef struct image {
  uint8_t *p;
  size_t n;
} image;

static image make_npy(int major, int minor, const char *header, size_t data_bytes, uint8_t fill) {
  size_t hl = strlen(header);
  size_t lenb = major == 1 ? 2 : 4;
  image im;
  im.n = 8 + lenb + hl + data_bytes;
  im.p = malloc(im.n);
  assert_non_null(im.p);
  memcpy(im.p, "\x93NUMPY", 6);
  im.p[6] = (uint8_t)major;
  im.p[7] = (uint8_t)minor;
  for (size_t i = 0; i < lenb; i++)
    im.p[8 + i] = (uint8_t)(hl >> (8 * i));
  memcpy(im.p + 8 + lenb, header, hl);
  memset(im.p + 8 + lenb + hl, fill, data_bytes);
  return im;
}

static char tmpdir[256];

static int setup_dir(void **state) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/dm_npy_XXXXXX", base && *base ? base : "/tmp");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static void write_image(const char *path, const image *im) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(im->p, 1, im->n, f), im->n);
  assert_int_equal(fclose(f), 0);
}

typedef struct bad_case {
  const char *what;
  int major, minor;
  const char *header;
  size_t data; /* bytes of data after the header */
  uint8_t fill;
  dm_status want;
  const char *fragment;
  long truncate_to; /* >= 0: cut the image to this many bytes */
} bad_case;

#define H(dict) dict "\n"
static const bad_case bad_cases[] = {
    {"empty file", 1, 0, "", 0, 0, DM_ERR_PARSE, "not a .npy file", 0},
    {"magic only", 1, 0, "", 0, 0, DM_ERR_PARSE, "header length is cut off", 8},
    {"version 4.0", 4, 0, H("{}"), 0, 0, DM_ERR_PARSE, "unsupported .npy version 4.0", -1},
    {"version 1.1", 1, 1, H("{}"), 0, 0, DM_ERR_PARSE, "unsupported .npy version 1.1", -1},
    {"header past the end", 1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"), 0,
     0, DM_ERR_PARSE, "runs past the end of the file", 40},
    {"not a dict", 1, 0, H("['descr']"), 0, 0, DM_ERR_PARSE, "expected '{'", -1},
    {"missing shape", 1, 0, H("{'descr': '<f4', 'fortran_order': False}"), 0, 0, DM_ERR_PARSE,
     "missing key 'shape'", -1},
    {"missing descr", 1, 0, H("{'fortran_order': False, 'shape': ()}"), 0, 0, DM_ERR_PARSE,
     "missing key 'descr'", -1},
    {"duplicate key", 1, 0, H("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}"),
     4, 0, DM_ERR_PARSE, "'descr' appears twice", -1},
    {"unknown key", 1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}"), 4, 0,
     DM_ERR_PARSE, "unexpected key 'x'", -1},
    {"fortran order", 1, 0, H("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }"), 16, 0,
     DM_ERR_UNSUPPORTED, "fortran_order is True", -1},
    {"fortran_order not a bool", 1, 0, H("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}"), 4, 0,
     DM_ERR_PARSE, "expected True or False", -1},
    {"negative dimension", 1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }"), 0,
     0, DM_ERR_PARSE, "non-negative integer", -1},
    {"dimension overflows", 1, 0,
     H("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"), 0, 0,
     DM_ERR_LIMIT, "overflows 64 bits", -1},
    {"shape product overflows", 1, 0,
     H("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"), 0, 0,
     DM_ERR_LIMIT, "whose product overflows 64 bits", -1},
    {"zero-element shape whose other dims overflow", 1, 0,
     H("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, "
       "4611686018427387904), }"),
     0, 0, DM_ERR_LIMIT, "overflows 64 bits", -1},
    {"byte size overflows", 1, 0,
     H("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }"), 0, 0,
     DM_ERR_LIMIT, "whose size overflows 64 bits", -1},
    {"too many dimensions", 1, 0,
     H("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }"), 4, 0,
     DM_ERR_LIMIT, "more than 8 dimensions", -1},
    {"data too short", 1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"), 40, 0,
     DM_ERR_PARSE, "header says shape (3, 4) of <f4 = 48 bytes but the file holds 40", -1},
    {"data too long", 1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"), 13, 0,
     DM_ERR_PARSE, "shape (3,) of <f4 = 12 bytes but the file holds 13", -1},
    {"huge shape, little data", 1, 0,
     H("{'descr': '|u1', 'fortran_order': False, 'shape': (1000000000000,), }"), 8, 0,
     DM_ERR_PARSE, "= 1000000000000 bytes but the file holds 8", -1},
    {"complex dtype", 1, 0, H("{'descr': '<c8', 'fortran_order': False, 'shape': (), }"), 8, 0,
     DM_ERR_UNSUPPORTED, "unsupported dtype '<c8'", -1},
    {"structured dtype", 1, 0, H("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}"), 4,
     0, DM_ERR_UNSUPPORTED, "structured dtypes", -1},
    {"no byte order", 1, 0, H("{'descr': '|f4', 'fortran_order': False, 'shape': (), }"), 4, 0,
     DM_ERR_PARSE, "no byte order", -1},
    {"unterminated string", 1, 0, H("{'descr: '<f4'}"), 0, 0, DM_ERR_PARSE, "expected ':'", -1},
    {"string runs to the end", 1, 0, "{'descr", 0, 0, DM_ERR_PARSE, "unterminated string", -1},
    {"garbage after the dict", 1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x"), 4,
     0, DM_ERR_PARSE, "only padding after the header dict", -1},
    {"missing comma", 1, 0, H("{'descr': '<f4' 'fortran_order': False, 'shape': ()}"), 4, 0,
     DM_ERR_PARSE, "expected ',' or '}'", -1},
    {"shape not a tuple", 1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}"), 12, 0,
     DM_ERR_PARSE, "is not a tuple", -1},
    {"bool not 0 or 1", 1, 0, H("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }"), 2, 7,
     DM_ERR_PARSE, "not 0 or 1", -1},
    {"v2 header over the limit", 2, 0, "", 0, 0, DM_ERR_LIMIT, "exceeds the limit", -2},
};

/* -2 in truncate_to: patch a 1 MiB header length into a v2 prelude. */
static image build_case(const bad_case *c) {
  image im = make_npy(c->major, c->minor, c->header, c->data, c->fill);
  if (c->truncate_to == -2) {
    im.p[10] = 0x10; /* length 0x00100000 */
  } else if (c->truncate_to >= 0 && (size_t)c->truncate_to < im.n) {
    im.n = (size_t)c->truncate_to;
  }
  return im;
}

static void check_error(const bad_case *c, dm_status got, const char *src) {
  const char *msg = dm_last_error();
  if (got != c->want || !strstr(msg, c->fragment) || !strstr(msg, src))
    fail_msg("case '%s': got %s \"%s\"; wanted %s containing \"%s\" and the file name",
             c->what, dm_status_name(got), msg, dm_status_name(c->want), c->fragment);
}

static void test_malformed_memory(void **state) {
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    image im = build_case(&bad_cases[i]);
    dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
    check_error(&bad_cases[i], dm_npy_parse(im.p, im.n, "x.npy", t), "x.npy");
    dm_tensor_free(t);
    free(im.p);
  }
}

static void test_malformed_file(void **state) {
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    image im = build_case(&bad_cases[i]);
    char path[300];
    snprintf(path, sizeof path, "%s/bad%zu.npy", tmpdir, i);
    write_image(path, &im);
    dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
    check_error(&bad_cases[i], dm_npy_load(path, t), path);
    dm_tensor_free(t);
    free(im.p);
  }
}

static void test_missing_file(void **state) {
  dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  assert_int_equal(dm_npy_load("/nonexistent/x.npy", t), DM_ERR_NOT_FOUND);
  assert_non_null(strstr(dm_last_error(), "/nonexistent/x.npy: cannot open"));
  dm_tensor_free(t);
}

static void test_tensor_limit(void **state) {
  image im = make_npy(1, 0, H("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"), 48, 0);
  dm_tensor *t = dm_tensor_new(16);
  assert_int_equal(dm_npy_parse(im.p, im.n, "big.npy", t), DM_ERR_LIMIT);
  assert_non_null(strstr(dm_last_error(), "big.npy"));
  assert_non_null(strstr(dm_last_error(), "exceeds the limit of 16 bytes"));
  dm_tensor_free(t);
  free(im.p);
}

static void test_big_endian_and_versions(void **state) {
  /* (2,) >i4 holding 1 and -2; v2 and v3 headers; no growth padding, no 64 alignment */
  const char *hdr = "{'descr': '>i4', 'fortran_order': False, 'shape': (2,)}\n";
  for (int major = 1; major <= 3; major++) {
    image im = make_npy(major, 0, hdr, 8, 0);
    static const uint8_t be[8] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe};
    memcpy(im.p + im.n - 8, be, 8);
    dm_tensor *t = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
    assert_int_equal(dm_npy_parse(im.p, im.n, "be.npy", t), DM_OK);
    assert_int_equal(t->dtype, DM_INT32);
    assert_int_equal(t->ndim, 1);
    assert_int_equal(t->dims[0], 2);
    const int32_t *v = dm_tensor_data(t);
    assert_int_equal(v[0], 1);
    assert_int_equal(v[1], -2);
    dm_tensor_free(t);
    free(im.p);
  }
}

/* Every supported dtype through save and load, with the file's layout checked. */
static void test_round_trip(void **state) {
  static const dm_dtype dtypes[] = {DM_FLOAT,  DM_DOUBLE, DM_FLOAT16, DM_INT8,   DM_INT16,
                                    DM_INT32,  DM_INT64,  DM_UINT8,   DM_UINT16, DM_BOOL};
  static const int64_t shapes[][3] = {{0}, {1, 5}, {2, 3, 4}, {3, 0, 2}};
  static const int ndims[] = {0, 2, 3, 3};
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
    for (size_t s = 0; s < 4; s++) {
      dm_tensor *a = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
      dm_tensor *b = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
      assert_int_equal(dm_tensor_resize(a, dtypes[d], ndims[s], shapes[s]), DM_OK);
      uint8_t *p = dm_tensor_mutable_data(a);
      size_t nbytes = (size_t)a->numel * dm_dtype_size(dtypes[d]);
      for (size_t i = 0; i < nbytes; i++)
        p[i] = dtypes[d] == DM_BOOL ? (uint8_t)(i % 2) : (uint8_t)(i * 37 + 11);
      char path[300];
      snprintf(path, sizeof path, "%s/rt_%d_%zu.npy", tmpdir, (int)dtypes[d], s);
      assert_int_equal(dm_npy_save(path, a), DM_OK);
      FILE *f = fopen(path, "rb");
      assert_non_null(f);
      uint8_t pre[10];
      assert_int_equal(fread(pre, 1, 10, f), 10);
      fseek(f, 0, SEEK_END);
      long size = ftell(f);
      fclose(f);
      size_t hl = (size_t)pre[8] | (size_t)pre[9] << 8;
      assert_int_equal(pre[6], 1); /* version 1.0 */
      assert_int_equal(pre[7], 0);
      assert_int_equal((10 + hl) % 64, 0); /* data 64-byte aligned */
      assert_int_equal((size_t)size, 10 + hl + nbytes);
      assert_int_equal(dm_npy_load(path, b), DM_OK);
      assert_int_equal(b->dtype, a->dtype);
      assert_true(dm_tensor_same_shape(a, b));
      if (nbytes)
        assert_memory_equal(dm_tensor_data(a), dm_tensor_data(b), nbytes);
      dm_tensor_free(a);
      dm_tensor_free(b);
    }
}

static void test_bf16_saved_as_float(void **state) {
  dm_tensor *a = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  dm_tensor *b = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  int64_t n = 3;
  assert_int_equal(dm_tensor_resize(a, DM_BFLOAT16, 1, &n), DM_OK);
  uint16_t *p = dm_tensor_mutable_data(a);
  p[0] = 0x3f80; /* 1.0 */
  p[1] = 0xc040; /* -3.0 */
  p[2] = 0x7f80; /* inf */
  char path[300];
  snprintf(path, sizeof path, "%s/bf16.npy", tmpdir);
  assert_int_equal(dm_npy_save(path, a), DM_OK);
  assert_int_equal(dm_npy_load(path, b), DM_OK);
  assert_int_equal(b->dtype, DM_FLOAT);
  const float *f = dm_tensor_data(b);
  assert_true(f[0] == 1.0f && f[1] == -3.0f && f[2] > 3e38f);
  dm_tensor_free(a);
  dm_tensor_free(b);
}

static void test_save_refuses_strings(void **state) {
  dm_tensor *a = dm_tensor_new(DM_DEFAULT_TENSOR_LIMIT);
  int64_t n = 1;
  assert_int_equal(dm_tensor_resize(a, DM_STRING, 1, &n), DM_OK);
  char path[300];
  snprintf(path, sizeof path, "%s/s.npy", tmpdir);
  assert_int_equal(dm_npy_save(path, a), DM_ERR_UNSUPPORTED);
  assert_non_null(strstr(dm_last_error(), "cannot save a STRING tensor"));
  dm_tensor_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_malformed_memory),   cmocka_unit_test(test_malformed_file),
      cmocka_unit_test(test_missing_file),       cmocka_unit_test(test_tensor_limit),
      cmocka_unit_test(test_big_endian_and_versions), cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_bf16_saved_as_float), cmocka_unit_test(test_save_refuses_strings),
  };
  return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
