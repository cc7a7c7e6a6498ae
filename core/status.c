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
  char old[DM_ERROR_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, error_buf, sizeof old);
  snprintf(error_buf, sizeof error_buf, "%s: %s", prefix, old);
  return s;
}

const char *dm_status_name(dm_status s) {
  static const char *const names[] = {
      "DM_OK",           "DM_ERR_INVALID", "DM_ERR_PARSE",       "DM_ERR_IO",
      "DM_ERR_NOT_FOUND", "DM_ERR_SHAPE",   "DM_ERR_TYPE",        "DM_ERR_NOMEM",
      "DM_ERR_LIMIT",    "DM_ERR_UNSUPPORTED", "DM_ERR_VERSION", "DM_ERR_EXISTS",
      "DM_ERR_DEVICE"};
  if ((unsigned)s < sizeof names / sizeof names[0])
    return names[s];
  return "DM_ERR_?";
}
