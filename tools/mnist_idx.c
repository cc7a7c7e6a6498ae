/* mnist_idx.c: the strict IDX reader (see mnist_idx.h). */
#include "mnist_idx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

void dm_idx_free(dm_idx *idx) {
  if (!idx)
    return;
  free(idx->data);
  memset(idx, 0, sizeof *idx);
}

/* Reads exactly n bytes; *got receives how many there were. */
static dm_status read_full(gzFile f, const char *path, void *buf, size_t n, size_t *got) {
  size_t done = 0;
  while (done < n) {
    unsigned chunk = n - done > (1u << 30) ? (1u << 30) : (unsigned)(n - done);
    int r = gzread(f, (char *)buf + done, chunk);
    if (r < 0) {
      int zerr;
      const char *msg = gzerror(f, &zerr);
      return dm_error(DM_ERR_IO, "%s: read error: %s", path,
                      zerr == Z_ERRNO ? strerror(errno) : msg);
    }
    if (r == 0)
      break;
    done += (size_t)r;
  }
  *got = done;
  return DM_OK;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static dm_status parse(gzFile f, const char *path, dm_idx *out) {
  uint8_t head[4 + 4 * DM_IDX_MAX_DIMS];
  size_t got;
  DM_TRY(read_full(f, path, head, 4, &got));
  if (got < 4)
    return dm_error(DM_ERR_PARSE, "%s: not an IDX file: %zu bytes, shorter than the header",
                    path, got);
  if (head[0] != 0 || head[1] != 0)
    return dm_error(DM_ERR_PARSE,
                    "%s: not an IDX file: magic starts with %02x %02x, expected 00 00", path,
                    head[0], head[1]);
  if (head[2] != 0x08)
    return dm_error(DM_ERR_UNSUPPORTED,
                    "%s: IDX type code 0x%02x; only 0x08 (unsigned byte) is supported", path,
                    head[2]);
  int ndim = head[3];
  if (ndim < 1 || ndim > DM_IDX_MAX_DIMS)
    return dm_error(DM_ERR_PARSE, "%s: IDX header says %d dimensions (1 to %d supported)",
                    path, ndim, DM_IDX_MAX_DIMS);
  DM_TRY(read_full(f, path, head + 4, 4 * (size_t)ndim, &got));
  if (got < 4 * (size_t)ndim)
    return dm_error(DM_ERR_PARSE, "%s: truncated IDX header (%d dimensions announced)", path,
                    ndim);
  size_t total = 1;
  for (int i = 0; i < ndim; i++) {
    uint32_t d = be32(head + 4 + 4 * i);
    if (d == 0)
      return dm_error(DM_ERR_PARSE, "%s: IDX dimension %d is 0", path, i);
    if (total > DM_IDX_MAX_BYTES / d)
      return dm_error(DM_ERR_LIMIT, "%s: IDX payload larger than %zu bytes", path,
                      (size_t)DM_IDX_MAX_BYTES);
    total *= d;
    out->dims[i] = d;
  }
  out->ndim = ndim;
  if (!(out->data = malloc(total)))
    return DM_NOMEM("IDX data");
  out->nbytes = total;
  DM_TRY(read_full(f, path, out->data, total, &got));
  if (got < total)
    return dm_error(DM_ERR_PARSE, "%s: IDX data truncated: %zu of %zu bytes", path, got, total);
  uint8_t extra;
  DM_TRY(read_full(f, path, &extra, 1, &got));
  if (got)
    return dm_error(DM_ERR_PARSE, "%s: trailing bytes after the %zu bytes of IDX data", path,
                    total);
  return DM_OK;
}

dm_status dm_idx_read(const char *path, dm_idx *out) {
  memset(out, 0, sizeof *out);
  gzFile f = gzopen(path, "rb");
  if (!f)
    return dm_error(DM_ERR_IO, "%s: cannot open: %s", path, errno ? strerror(errno) : "zlib");
  dm_status s = parse(f, path, out);
  gzclose(f);
  if (s != DM_OK)
    dm_idx_free(out);
  return s;
}
