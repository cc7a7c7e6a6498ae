/* sized_options.h: the versioned option structs of the public API (internal).
 *
 * dm_train_options and dm_infer_options begin with struct_size, the caller's sizeof, so a
 * program built against an older or newer header keeps working: init writes only the
 * bytes the caller's struct has, and a larger struct (a newer header) is accepted only
 * when the fields this library does not know are zero, as plugin structs are
 * (demitasse_plugin.h). The rules are the same for every such struct, so they live here
 * once; `what` names the struct in messages.
 */
#ifndef DM_NET_SIZED_OPTIONS_H
#define DM_NET_SIZED_OPTIONS_H

#include <stddef.h>

#include "core/status.h"
#include "demitasse.h"

/* The largest struct_size accepted: a garbage size is refused rather than read. */
#define DM_SIZED_MAX 4096

typedef struct dm_sized_layout {
  const char *what;   /* "dm_train_options" */
  size_t first;       /* the first release's size: anything smaller is not a layout */
  size_t full;        /* this library's sizeof */
} dm_sized_layout;

DM_HIDDEN dm_status dm_sized_check(const dm_sized_layout *l, size_t size);
/* Writes `size` bytes of `defaults` (l->full bytes) to o and sets its struct_size. */
DM_HIDDEN dm_status dm_sized_init(const dm_sized_layout *l, void *o, size_t size,
                                  const void *defaults);
/* out (l->full bytes, holding the defaults) takes the caller's fields from `in`, whose
 * struct_size is in_size; NULL in keeps the defaults. */
DM_HIDDEN dm_status dm_sized_take(const dm_sized_layout *l, const void *in, void *out);
/* A borrowed list of names: each present and non-empty; `field` names it in messages. */
DM_HIDDEN dm_status dm_sized_check_names(const dm_sized_layout *l, const char *field,
                                         const char *const *v, size_t n);

#endif
