/* npy.h: NumPy .npy files in and out of tensors (internal; used by the CLI and tests).
 *
 * Version 1.0/2.0/3.0 headers; little-endian dtypes f2 f4 f8 i1 i2 i4 i8 u1 u2 b1
 * (and big-endian ones, byte-swapped on load); C order only. Everything in the header is
 * validated before use: magic, header length, dict syntax, shape product against the
 * file size and the tensor limit.
 */
#ifndef DM_CORE_NPY_H
#define DM_CORE_NPY_H

#include "tensor.h"

/* Loads `path` into `t` (resized). */
DM_HIDDEN dm_status dm_npy_load(const char *path, dm_tensor *t);
/* The same from memory; `source` names it in messages. */
DM_HIDDEN dm_status dm_npy_parse(const void *data, size_t len, const char *source, dm_tensor *t);
/* Writes `t` to `path` (BFLOAT16 is written as float32, NumPy having no bf16). */
DM_HIDDEN dm_status dm_npy_save(const char *path, const dm_tensor *t);

#endif
