/* host_expect.h: the embedding hosts' check (the tests/embed hosts, <demitasse.h> only):
 * EXPECT(cond, fmt, ...) prints the place, the message and dm_last_error() when cond is
 * false and counts a failure in `failures`, which the host reports at its end. */
#ifndef DM_TESTS_EMBED_HOST_EXPECT_H
#define DM_TESTS_EMBED_HOST_EXPECT_H

#include <stdio.h>

#include <demitasse.h>

static int failures;

#define EXPECT(cond, ...)                                      \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);          \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, " [last error: %s]\n", dm_last_error()); \
      failures++;                                              \
    }                                                          \
  } while (0)

#endif
