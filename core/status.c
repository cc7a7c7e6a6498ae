/* status.c: thread-local error messages and the names of statuses. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DM_ERROR_CAP 2048

static _Thread_local char error_buf[DM_ERROR_CAP];

const char *dm_last_error(void) { return error_buf; }

void dm_error_clear(void) { error_buf[0] = '\0'; }

dm_status dm_error(dm_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_buf, sizeof error_buf, fmt, ap);
  va_end(ap);
  return s;
}

dm_status dm_error_prefix(dm_status s, const char *fmt, ...) {
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
  va_end(ap);
  if (n < 0)
    return s;
  size_t plen = strlen(prefix);
  memcpy(prefix + plen, ": ", 3);
  plen += 2;
  /* Shift the old message right (truncating its tail), then put the prefix in front. */
  size_t old = strnlen(error_buf, DM_ERROR_CAP - 1);
  if (plen + old > DM_ERROR_CAP - 1)
    old = DM_ERROR_CAP - 1 - plen;
  memmove(error_buf + plen, error_buf, old);
  error_buf[plen + old] = '\0';
  memcpy(error_buf, prefix, plen);
  return s;
}

const char *dm_status_name(dm_status s) {
  static const char *const names[] = {
      "DM_OK",           "DM_ERR_INVALID", "DM_ERR_PARSE",       "DM_ERR_IO",
      "DM_ERR_NOT_FOUND", "DM_ERR_SHAPE",   "DM_ERR_TYPE",        "DM_ERR_NOMEM",
      "DM_ERR_LIMIT",    "DM_ERR_UNSUPPORTED", "DM_ERR_VERSION", "DM_ERR_EXISTS",
      "DM_ERR_DEVICE",   "DM_ERR_NONFINITE", "DM_ERR_BUSY"};
  if ((unsigned)s < sizeof names / sizeof names[0])
    return names[s];
  return "DM_ERR_?";
}
