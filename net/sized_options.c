/* sized_options.c: struct_size handling shared by the public option structs (see
 * sized_options.h for the rules and why). */
#include "sized_options.h"

#include <string.h>

/* Every sized struct starts with its size_t struct_size. */
static size_t size_of(const void *o) {
  size_t s;
  memcpy(&s, o, sizeof s);
  return s;
}

static void set_size(void *o, size_t s) { memcpy(o, &s, sizeof s); }

dm_status dm_sized_check(const dm_sized_layout *l, size_t size) {
  if (size < l->first || size > DM_SIZED_MAX)
    return dm_error(DM_ERR_VERSION,
                    "%s: struct_size %zu is not a layout of this struct (%zu to %d bytes); "
                    "fill it with %s_init",
                    l->what, size, l->first, DM_SIZED_MAX, l->what);
  return DM_OK;
}

dm_status dm_sized_init(const dm_sized_layout *l, void *o, size_t size, const void *defaults) {
  if (!o)
    return dm_error(DM_ERR_INVALID, "%s_init: NULL options", l->what);
  DM_TRY(dm_sized_check(l, size));
  memset(o, 0, size);
  memcpy(o, defaults, size < l->full ? size : l->full);
  set_size(o, size);
  return DM_OK;
}

dm_status dm_sized_take(const dm_sized_layout *l, const void *in, void *out) {
  if (!in)
    return DM_OK;
  size_t size = size_of(in);
  DM_TRY(dm_sized_check(l, size));
  for (size_t i = l->full; i < size; i++)
    if (((const unsigned char *)in)[i])
      return dm_error(DM_ERR_VERSION,
                      "%s: fields past byte %zu are set, which this library (%zu bytes) does "
                      "not know",
                      l->what, l->full, l->full);
  memcpy(out, in, size < l->full ? size : l->full);
  set_size(out, l->full);
  return DM_OK;
}

dm_status dm_sized_check_names(const dm_sized_layout *l, const char *field,
                               const char *const *v, size_t n) {
  if (n && !v)
    return dm_error(DM_ERR_INVALID, "%s.%s: %zu names but no list", l->what, field, n);
  for (size_t i = 0; i < n; i++)
    if (!v[i] || !*v[i])
      return dm_error(DM_ERR_INVALID, "%s.%s[%zu]: %s name", l->what, field, i,
                      v[i] ? "an empty" : "a NULL");
  return DM_OK;
}
