/* export_names.h: the ONNX exporter's name table (internal; net/onnx/emit.c).
 *
 * Every name in use in the graph being built: each Caffe2 blob, with what the driver
 * (net/onnx/export.c) counts of it, and each name a translator makes (ex_fresh), so that
 * no two values share one.
 */
#ifndef DM_NET_ONNX_EXPORT_NAMES_H
#define DM_NET_ONNX_EXPORT_NAMES_H

#include <stddef.h>

#include "net/onnx/emit.h"

/* One name: a Caffe2 blob (how often the predict net writes and reads it, whether it is
 * fixed as a graph input or initializer, the ONNX name of its current value) or a name
 * made here (only taken). Open addressing on an FNV-1a hash; never shrinks. */
typedef struct ex_name {
  char *name;
  int writes, seen, reads;
  int fixed;      /* a graph input or an initializer: every write gets a new name */
  int filled;     /* the init net leaves it */
  int ext_in, ext_out;
  const char *cur; /* the ONNX name of its current value (NULL: none yet) */
} ex_name;

struct ex_names {
  ex_name *slot;
  size_t cap, n;
};

/* The entry for `name`, or NULL. */
DM_HIDDEN ex_name *ex_names_find(const ex_names *t, const char *name);
/* The entry for `name`, added (zeroed) if absent; NULL when out of memory. */
DM_HIDDEN ex_name *ex_names_get(ex_names *t, const char *name);
DM_HIDDEN void ex_names_free(ex_names *t);

#endif
