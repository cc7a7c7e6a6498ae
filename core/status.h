/* status.h: recording error messages with context (internal).
 *
 * The message lives in a thread-local buffer, so workspaces in different threads never
 * see each other's errors. Functions set it when they fail and return the status;
 * callers higher up prepend their context ("predict.pbtxt: op 3 (Conv 'conv1'): ...")
 * with dm_error_prefix, so the final message reads from the outside in.
 */
#ifndef DM_CORE_STATUS_H
#define DM_CORE_STATUS_H

#include "demitasse.h"

#define DM_HIDDEN __attribute__((visibility("hidden")))

/* Replaces this thread's message and returns `s`. */
DM_HIDDEN dm_status dm_error(dm_status s, const char *fmt, ...) DM_PRINTF(2, 3);
/* Prepends "<context>: " to this thread's message and returns `s`. */
DM_HIDDEN dm_status dm_error_prefix(dm_status s, const char *fmt, ...) DM_PRINTF(2, 3);
DM_HIDDEN void dm_error_clear(void);
/* Out of memory, with what was being allocated. */
#define DM_NOMEM(what) dm_error(DM_ERR_NOMEM, "out of memory allocating %s", (what))

#endif
