/* npy.c: NumPy .npy files to and from tensors.
 *
 * A .npy file is a 6-byte magic, a version, a header length, a Python dict literal
 * ({'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }) and the raw data. The
 * file is untrusted, so the dict is parsed by a small strict parser (not evaluated), and
 * the shape product is checked for overflow and against the bytes actually present
 * before anything is allocated. Saving mimics NumPy 1.24's np.save byte for byte
 * (version 1.0, the header padded with spaces so the data starts on a 64-byte boundary).
 */
#include "npy.h"
#include "fileio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* NumPy itself refuses headers longer than this (max_header_size) for the same reason:
 * a header is a few dozen bytes, and a huge one is an attack or a broken file. */
#define NPY_MAX_HEADER 10000
/* NumPy leaves room for the first dimension to grow to this many digits in place. */
#define NPY_GROWTH_DIGITS 21
#define NPY_ALIGN 64

/* What the header says. */
typedef struct npy_header {
  dm_dtype dtype;
  size_t elem; /* bytes per element */
  int swap;    /* big-endian data on a little-endian host, or the reverse */
  int ndim;
  int64_t dims[DM_MAX_DIMS];
  char descr[16];
} npy_header;

static int host_is_little(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

/* --- the prelude: magic, version, header length --------------------------------- */

/* Checks the fixed part at the start of the file; `total` is the file's full length.
 * hdr_off and hdr_len locate the dict text, data_off the first data byte. */
static dm_status parse_prelude(const uint8_t *p, size_t avail, uint64_t total, const char *src,
                               size_t *hdr_off, size_t *hdr_len, uint64_t *data_off) {
  if (avail < NPY_MAGIC_LEN + 2 || memcmp(p, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
    return dm_error(DM_ERR_PARSE, "%s: not a .npy file (the magic \\x93NUMPY is missing)", src);
  int major = p[6], minor = p[7];
  size_t len_bytes;
  if (major == 1)
    len_bytes = 2;
  else if (major == 2 || major == 3)
    len_bytes = 4;
  else
    return dm_error(DM_ERR_PARSE, "%s: unsupported .npy version %d.%d (1.0, 2.0 and 3.0 are known)",
                    src, major, minor);
  if (minor != 0)
    return dm_error(DM_ERR_PARSE, "%s: unsupported .npy version %d.%d (1.0, 2.0 and 3.0 are known)",
                    src, major, minor);
  if (avail < 8 + len_bytes)
    return dm_error(DM_ERR_PARSE, "%s: truncated: the header length is cut off", src);
  uint32_t hl = (uint32_t)p[8] | (uint32_t)p[9] << 8;
  if (len_bytes == 4)
    hl |= (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
  if (hl > NPY_MAX_HEADER)
    return dm_error(DM_ERR_LIMIT, "%s: header length %" PRIu32 " exceeds the limit of %d bytes",
                    src, hl, NPY_MAX_HEADER);
  *hdr_off = 8 + len_bytes;
  *hdr_len = hl;
  *data_off = (uint64_t)*hdr_off + hl;
  if (*data_off > total)
    return dm_error(DM_ERR_PARSE,
                    "%s: header length %" PRIu32 " runs past the end of the file (%" PRIu64
                    " bytes)",
                    src, hl, total);
  return DM_OK;
}

/* --- the header dict --------------------------------------------------------------- */

typedef struct dict_lexer {
  const char *s;
  size_t n, i;
  const char *src;
} dict_lexer;

static void skip_ws(dict_lexer *lx) {
  while (lx->i < lx->n && (lx->s[lx->i] == ' ' || lx->s[lx->i] == '\t' || lx->s[lx->i] == '\n' ||
                           lx->s[lx->i] == '\r'))
    lx->i++;
}

static dm_status syntax(dict_lexer *lx, const char *what) {
  if (lx->i >= lx->n)
    return dm_error(DM_ERR_PARSE, "%s: header: %s, found the end of the header", lx->src, what);
  return dm_error(DM_ERR_PARSE, "%s: header column %zu: %s, found '%c'", lx->src, lx->i + 1, what,
                  lx->s[lx->i]);
}

/* Consumes `c` after optional whitespace; returns 1 if it was there. */
static int accept(dict_lexer *lx, char c) {
  skip_ws(lx);
  if (lx->i < lx->n && lx->s[lx->i] == c) {
    lx->i++;
    return 1;
  }
  return 0;
}

/* A quoted string without escapes (none of the legal keys or descrs need them). */
static dm_status lex_string(dict_lexer *lx, char *out, size_t cap) {
  skip_ws(lx);
  if (lx->i >= lx->n || (lx->s[lx->i] != '\'' && lx->s[lx->i] != '"'))
    return syntax(lx, "expected a quoted string");
  char q = lx->s[lx->i++];
  size_t start = lx->i;
  while (lx->i < lx->n && lx->s[lx->i] != q) {
    if (lx->s[lx->i] == '\\' || lx->s[lx->i] == '\n')
      return syntax(lx, "unexpected character in a string");
    lx->i++;
  }
  if (lx->i >= lx->n)
    return syntax(lx, "unterminated string");
  size_t len = lx->i - start;
  lx->i++;
  if (len >= cap)
    return dm_error(DM_ERR_PARSE, "%s: header: string '%.*s' is too long", lx->src,
                    len > 40 ? 40 : (int)len, lx->s + start);
  memcpy(out, lx->s + start, len);
  out[len] = '\0';
  return DM_OK;
}

static int match_word(dict_lexer *lx, const char *w) {
  skip_ws(lx);
  size_t len = strlen(w);
  if (lx->n - lx->i >= len && memcmp(lx->s + lx->i, w, len) == 0) {
    lx->i += len;
    return 1;
  }
  return 0;
}

/* A shape tuple: (), (3,), (3, 4) or (3, 4,). Python ints may carry an L suffix in
 * files written by Python 2. */
static dm_status lex_shape(dict_lexer *lx, npy_header *h) {
  if (!accept(lx, '('))
    return syntax(lx, "expected '(' to start the shape tuple");
  h->ndim = 0;
  int comma = 0;
  for (;;) {
    if (accept(lx, ')'))
      break;
    skip_ws(lx);
    if (lx->i >= lx->n || lx->s[lx->i] < '0' || lx->s[lx->i] > '9')
      return syntax(lx, "expected a non-negative integer in the shape");
    int64_t v = 0;
    while (lx->i < lx->n && lx->s[lx->i] >= '0' && lx->s[lx->i] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, lx->s[lx->i] - '0', &v))
        return dm_error(DM_ERR_LIMIT, "%s: header: a dimension of the shape overflows 64 bits",
                        lx->src);
      lx->i++;
    }
    if (lx->i < lx->n && lx->s[lx->i] == 'L')
      lx->i++;
    if (h->ndim == DM_MAX_DIMS)
      return dm_error(DM_ERR_LIMIT, "%s: header: the shape has more than %d dimensions", lx->src,
                      DM_MAX_DIMS);
    h->dims[h->ndim++] = v;
    comma = accept(lx, ',');
    if (comma)
      continue;
    if (accept(lx, ')'))
      break;
    return syntax(lx, "expected ',' or ')' in the shape");
  }
  /* (3) is just 3 in Python, not a tuple; NumPy writes (3,) */
  if (h->ndim == 1 && !comma)
    return dm_error(DM_ERR_PARSE, "%s: header: the shape (%" PRId64 ") is not a tuple (write (%" PRId64 ",))",
                    lx->src, h->dims[0], h->dims[0]);
  return DM_OK;
}

typedef struct descr_info {
  const char *code; /* without the byte-order character */
  dm_dtype dtype;
  size_t size;
} descr_info;

static const descr_info descrs[] = {
    {"f2", DM_FLOAT16, 2}, {"f4", DM_FLOAT, 4},  {"f8", DM_DOUBLE, 8}, {"i1", DM_INT8, 1},
    {"i2", DM_INT16, 2},   {"i4", DM_INT32, 4},  {"i8", DM_INT64, 8},  {"u1", DM_UINT8, 1},
    {"u2", DM_UINT16, 2},  {"b1", DM_BOOL, 1},
};
#define N_DESCRS (sizeof descrs / sizeof descrs[0])

static dm_status parse_descr(const char *d, const char *src, npy_header *h) {
  char order = d[0];
  const char *code = d + 1;
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return dm_error(DM_ERR_UNSUPPORTED,
                    "%s: unsupported descr '%s' (a simple dtype such as '<f4' is needed)", src, d);
  for (size_t i = 0; i < N_DESCRS; i++) {
    if (strcmp(code, descrs[i].code) != 0)
      continue;
    h->dtype = descrs[i].dtype;
    h->elem = descrs[i].size;
    int big = order == '>' || (order == '=' && !host_is_little());
    h->swap = descrs[i].size > 1 && big == host_is_little();
    if (order == '|' && descrs[i].size > 1)
      return dm_error(DM_ERR_PARSE, "%s: descr '%s' has no byte order for a %zu-byte type", src,
                      d, descrs[i].size);
    snprintf(h->descr, sizeof h->descr, "%s", d);
    return DM_OK;
  }
  return dm_error(DM_ERR_UNSUPPORTED,
                  "%s: unsupported dtype '%s' (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 b1)", src, d);
}

/* Parses the dict: exactly the keys descr, fortran_order and shape, once each. */
static dm_status parse_dict(const char *s, size_t n, const char *src, npy_header *h) {
  dict_lexer lx = {s, n, 0, src};
  int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
  char descr[16] = "";
  if (!accept(&lx, '{'))
    return syntax(&lx, "expected '{' to start the header dict");
  for (;;) {
    if (accept(&lx, '}'))
      break;
    char key[32];
    DM_TRY(lex_string(&lx, key, sizeof key));
    if (!accept(&lx, ':'))
      return syntax(&lx, "expected ':' after a key");
    if (strcmp(key, "descr") == 0) {
      if (have_descr++)
        return dm_error(DM_ERR_PARSE, "%s: header: key 'descr' appears twice", src);
      skip_ws(&lx);
      if (lx.i < lx.n && lx.s[lx.i] == '[')
        return dm_error(DM_ERR_UNSUPPORTED,
                        "%s: structured dtypes (a list descr) are not supported", src);
      DM_TRY(lex_string(&lx, descr, sizeof descr));
    } else if (strcmp(key, "fortran_order") == 0) {
      if (have_fortran++)
        return dm_error(DM_ERR_PARSE, "%s: header: key 'fortran_order' appears twice", src);
      if (match_word(&lx, "True"))
        fortran = 1;
      else if (!match_word(&lx, "False"))
        return syntax(&lx, "expected True or False for 'fortran_order'");
    } else if (strcmp(key, "shape") == 0) {
      if (have_shape++)
        return dm_error(DM_ERR_PARSE, "%s: header: key 'shape' appears twice", src);
      DM_TRY(lex_shape(&lx, h));
    } else {
      return dm_error(DM_ERR_PARSE, "%s: header: unexpected key '%s'", src, key);
    }
    if (accept(&lx, ','))
      continue;
    if (accept(&lx, '}'))
      break;
    return syntax(&lx, "expected ',' or '}' in the header dict");
  }
  skip_ws(&lx);
  if (lx.i != lx.n)
    return syntax(&lx, "expected only padding after the header dict");
  if (!have_descr || !have_fortran || !have_shape)
    return dm_error(DM_ERR_PARSE, "%s: header: missing key '%s'", src,
                    !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
  if (fortran)
    return dm_error(DM_ERR_UNSUPPORTED,
                    "%s: fortran_order is True; only C-order arrays are supported "
                    "(save np.ascontiguousarray(a) instead)",
                    src);
  return parse_descr(descr, src, h);
}

static const char *shape_text(const npy_header *h, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < h->ndim && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ", %" PRId64 : "%" PRId64, h->dims[i]);
  if (h->ndim == 1 && k < cap)
    k += (size_t)snprintf(buf + k, cap - k, ",");
  if (k < cap)
    snprintf(buf + k, cap - k, ")");
  return buf;
}

/* Checks that the data the header promises is exactly what the file holds. */
static dm_status check_data_size(const npy_header *h, uint64_t held, const char *src,
                                 size_t *nbytes) {
  int64_t numel = 1;
  char shape[256];
  for (int i = 0; i < h->ndim; i++)
    if (__builtin_mul_overflow(numel, h->dims[i], &numel))
      return dm_error(DM_ERR_LIMIT, "%s: header says shape %s, whose product overflows 64 bits",
                      src, shape_text(h, shape, sizeof shape));
  uint64_t want;
  if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)h->elem, &want))
    return dm_error(DM_ERR_LIMIT, "%s: header says shape %s of %s, whose size overflows 64 bits",
                    src, shape_text(h, shape, sizeof shape), h->descr);
  if (want != held)
    return dm_error(DM_ERR_PARSE,
                    "%s: header says shape %s of %s = %" PRIu64 " bytes but the file holds %" PRIu64,
                    src, shape_text(h, shape, sizeof shape), h->descr, want, held);
  if (want > SIZE_MAX)
    return dm_error(DM_ERR_LIMIT, "%s: %" PRIu64 " bytes of data are too many for this machine",
                    src, want);
  *nbytes = (size_t)want;
  return DM_OK;
}

/* Byte-swaps foreign-endian data and checks booleans, in place. */
static dm_status fix_data(void *data, size_t nbytes, const npy_header *h, const char *src) {
  uint8_t *p = data;
  if (h->swap) {
    for (size_t off = 0; off + h->elem <= nbytes; off += h->elem)
      for (size_t a = 0, b = h->elem - 1; a < b; a++, b--) {
        uint8_t t = p[off + a];
        p[off + a] = p[off + b];
        p[off + b] = t;
      }
  }
  if (h->dtype == DM_BOOL)
    for (size_t i = 0; i < nbytes; i++)
      if (p[i] > 1)
        return dm_error(DM_ERR_PARSE, "%s: element %zu of a bool array is %u, not 0 or 1", src, i,
                        p[i]);
  return DM_OK;
}

static dm_status resize_for(dm_tensor *t, const npy_header *h, const char *src) {
  dm_status s = dm_tensor_resize(t, h->dtype, h->ndim, h->dims);
  if (s != DM_OK)
    return dm_error_prefix(s, "%s", src);
  return DM_OK;
}

dm_status dm_npy_parse(const void *data, size_t len, const char *source, dm_tensor *t) {
  const char *src = source ? source : "<memory>";
  if (!t || (!data && len))
    return dm_error(DM_ERR_INVALID, "dm_npy_parse: NULL argument");
  const uint8_t *p = data;
  size_t hoff, hlen;
  uint64_t doff;
  npy_header h = {0};
  size_t nbytes;
  DM_TRY(parse_prelude(p, len, len, src, &hoff, &hlen, &doff));
  DM_TRY(parse_dict((const char *)p + hoff, hlen, src, &h));
  DM_TRY(check_data_size(&h, len - doff, src, &nbytes));
  DM_TRY(resize_for(t, &h, src));
  if (nbytes)
    memcpy(dm_tensor_mutable_data(t), p + doff, nbytes);
  return fix_data(dm_tensor_mutable_data(t), nbytes, &h, src);
}

/* Reads the header first and the data straight into the tensor, so a large file is
 * validated before any allocation and never held twice in memory. */
dm_status dm_npy_load(const char *path, dm_tensor *t) {
  if (!path || !t)
    return dm_error(DM_ERR_INVALID, "dm_npy_load: NULL argument");
  dm_status s = DM_OK;
  char *hdr = NULL;
  /* a regular file only: a FIFO has no size to validate the header by (core/fileio.h) */
  int fd = -1;
  struct stat st;
  DM_TRY(dm_open_regular(path, "a .npy is read from a regular file (save the array with "
                               "np.save first)", &fd, &st));
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    int e = errno;
    close(fd);
    return dm_error(DM_ERR_IO, "%s: cannot open: %s", path, strerror(e));
  }
  uint64_t total = (uint64_t)st.st_size;
  uint8_t pre[12];
  size_t got = fread(pre, 1, sizeof pre, f);
  size_t hoff, hlen;
  uint64_t doff;
  if ((s = parse_prelude(pre, got, total, path, &hoff, &hlen, &doff)) != DM_OK)
    goto cleanup;
  hdr = malloc(hlen ? hlen : 1);
  if (!hdr) {
    s = DM_NOMEM("a .npy header");
    goto cleanup;
  }
  if (fseek(f, (long)hoff, SEEK_SET) != 0 || fread(hdr, 1, hlen, f) != hlen) {
    s = dm_error(DM_ERR_IO, "%s: cannot read the header", path);
    goto cleanup;
  }
  npy_header h = {0};
  size_t nbytes;
  if ((s = parse_dict(hdr, hlen, path, &h)) != DM_OK ||
      (s = check_data_size(&h, total - doff, path, &nbytes)) != DM_OK ||
      (s = resize_for(t, &h, path)) != DM_OK)
    goto cleanup;
  if (nbytes && fread(dm_tensor_mutable_data(t), 1, nbytes, f) != nbytes) {
    s = dm_error(DM_ERR_IO, "%s: short read of the data", path);
    goto cleanup;
  }
  s = fix_data(dm_tensor_mutable_data(t), nbytes, &h, path);
cleanup:
  free(hdr);
  fclose(f);
  return s;
}

/* --- saving -------------------------------------------------------------------------- */

static const char *descr_for(dm_dtype t) {
  switch (t) {
  case DM_FLOAT16: return "<f2";
  case DM_FLOAT: return "<f4";
  case DM_BFLOAT16: return "<f4"; /* widened: NumPy has no bfloat16 */
  case DM_DOUBLE: return "<f8";
  case DM_INT8: return "|i1";
  case DM_INT16: return "<i2";
  case DM_INT32: return "<i4";
  case DM_INT64: return "<i8";
  case DM_UINT8:
  case DM_BYTE: return "|u1";
  case DM_UINT16: return "<u2";
  case DM_BOOL: return "|b1";
  default: return NULL;
  }
}

/* Writes `n` elements of `size` bytes little-endian, widening bfloat16 to float32. */
static int write_data(FILE *f, const dm_tensor *t, size_t size) {
  const uint8_t *p = dm_tensor_data(t);
  size_t n = (size_t)t->numel;
  if (t->dtype != DM_BFLOAT16 && (size == 1 || host_is_little()))
    return n == 0 || fwrite(p, size, n, f) == n;
  uint8_t buf[4096];
  size_t out_size = t->dtype == DM_BFLOAT16 ? 4 : size;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t e[8];
    if (t->dtype == DM_BFLOAT16) {
      uint16_t b;
      memcpy(&b, p + 2 * i, 2);
      uint32_t w = (uint32_t)b << 16; /* bfloat16 is the top half of a float32 */
      for (int j = 0; j < 4; j++)
        e[j] = (uint8_t)(w >> (8 * j));
    } else {
      for (size_t j = 0; j < size; j++)
        e[j] = p[i * size + size - 1 - j]; /* big-endian host */
    }
    memcpy(buf + k, e, out_size);
    k += out_size;
    if (k + 8 > sizeof buf) {
      if (fwrite(buf, 1, k, f) != k)
        return 0;
      k = 0;
    }
  }
  return fwrite(buf, 1, k, f) == k;
}

dm_status dm_npy_save(const char *path, const dm_tensor *t) {
  if (!path || !t)
    return dm_error(DM_ERR_INVALID, "dm_npy_save: NULL argument");
  const char *descr = descr_for(t->dtype);
  if (!descr)
    return dm_error(DM_ERR_UNSUPPORTED, "%s: cannot save a %s tensor as .npy", path,
                    dm_dtype_name(t->dtype));
  if (t->numel && !dm_tensor_data(t))
    return dm_error(DM_ERR_INVALID, "%s: the tensor has no data", path);
  /* The dict exactly as NumPy 1.24 writes it, including its spare room for growing the
   * first dimension, so that our files and np.save's are byte-identical. */
  char hdr[NPY_ALIGN * 8];
  npy_header h = {.ndim = t->ndim};
  memcpy(h.dims, t->dims, sizeof h.dims);
  char shape[256];
  int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                   descr, shape_text(&h, shape, sizeof shape));
  if (t->ndim > 0) {
    char first[32];
    int digits = snprintf(first, sizeof first, "%" PRId64, t->dims[0]);
    for (int i = digits; i < NPY_GROWTH_DIGITS; i++)
      hdr[k++] = ' ';
  }
  size_t pad = NPY_ALIGN - (size_t)(NPY_MAGIC_LEN + 2 + 2 + k + 1) % NPY_ALIGN;
  memset(hdr + k, ' ', pad);
  k += (int)pad;
  hdr[k++] = '\n';
  uint8_t pre[10];
  memcpy(pre, NPY_MAGIC, NPY_MAGIC_LEN);
  pre[6] = 1;
  pre[7] = 0;
  pre[8] = (uint8_t)(k & 0xff);
  pre[9] = (uint8_t)(k >> 8);

  /* replaced atomically: a failed write (a full disk) leaves the old file */
  dm_atomic_file af;
  DM_TRY(dm_atomic_open(&af, path));
  FILE *f = af.f;
  if (!(fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(hdr, 1, (size_t)k, f) == (size_t)k &&
        write_data(f, t, dm_dtype_size(t->dtype))))
    af.err = errno ? errno : EIO;
  return dm_atomic_commit(&af); /* fails when any write above did */
}
