/* test_util.h: small helpers shared by the C tests: build a net from text, run it, and
 * assert on a status together with a fragment of its message. */
#ifndef DM_TESTS_TEST_UTIL_H
#define DM_TESTS_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "demitasse.h"

/* Asserts `got` == `want` and that dm_last_error() contains every fragment given. */
#define assert_status_msg(got, want, ...)                                              \
  do {                                                                                \
    dm_status got_ = (got);                                                           \
    if (got_ != (want))                                                               \
      fail_msg("status %s, wanted %s; message: %s", dm_status_name(got_),             \
               dm_status_name(want), dm_last_error());                                \
    const char *frags_[] = {__VA_ARGS__, NULL};                                       \
    for (const char **f_ = frags_; *f_; f_++)                                         \
      if (!strstr(dm_last_error(), *f_))                                              \
        fail_msg("message lacks '%s': %s", *f_, dm_last_error());                     \
  } while (0)

#define assert_ok(expr)                                                               \
  do {                                                                                \
    dm_status s_ = (expr);                                                            \
    if (s_ != DM_OK)                                                                  \
      fail_msg("%s failed: %s: %s", #expr, dm_status_name(s_), dm_last_error());      \
  } while (0)

/* Instantiates a net given as protobuf text; the workspace owns it. */
static inline dm_status net_from_text(dm_workspace *ws, const char *text, dm_net **out) {
  return dm_workspace_create_net_bytes(ws, text, strlen(text), 1, out);
}

/* Instantiates and runs a text net once. */
static inline dm_status run_text(dm_workspace *ws, const char *text) {
  dm_net *net = NULL;
  dm_status s = net_from_text(ws, text, &net);
  return s == DM_OK ? dm_net_run(net) : s;
}

#endif
