/* mnist_idx.h: reading IDX files (the MNIST distribution format), gzip'd or plain.
 *
 * IDX: a big-endian header of two zero bytes, a type code (0x08 = unsigned byte, the
 * only one MNIST uses and the only one read here), the number of dimensions, then one
 * uint32 per dimension, then the data, row-major. The reader is strict: a wrong magic,
 * a zero or oversized dimension, a short file or trailing bytes are errors naming the
 * file, because a silently truncated dataset trains on garbage.
 */
#ifndef DM_TOOLS_MNIST_IDX_H
#define DM_TOOLS_MNIST_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define DM_IDX_MAX_DIMS 4
/* Largest decoded payload accepted (the 60,000-image training set is 47 MB). */
#define DM_IDX_MAX_BYTES ((size_t)1 << 30)

typedef struct dm_idx {
  int ndim;
  int64_t dims[DM_IDX_MAX_DIMS];
  uint8_t *data; /* (dims[0], ..., dims[ndim-1]) bytes, malloc'd; owned */
  size_t nbytes;
} dm_idx;

/* Reads `path` (gzip'd or not: zlib reads both). On failure *out is left empty. */
dm_status dm_idx_read(const char *path, dm_idx *out);
void dm_idx_free(dm_idx *idx);

#endif
