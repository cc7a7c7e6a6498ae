/* protoc_run.h: running the real protoc (--encode/--decode) from tests, as an
 * independent implementation of the wire and text formats to compare against. */
#ifndef DM_TESTS_PROTOC_RUN_H
#define DM_TESTS_PROTOC_RUN_H

#include <stddef.h>
#include <stdint.h>

/* protoc's path from $DM_PROTOC, or NULL when the tests should skip protoc checks. */
const char *pt_protoc(void);
/* Runs `protoc --<mode>=<type> -I$DM_PROTO_DIR caffe2.proto` (mode "encode" or
 * "decode") on `in`. Returns 0 with a malloc'd, NUL-terminated *out (and protoc's
 * stderr in *err, malloc'd, may be empty); -1 when protoc failed, *err saying why. */
int pt_protoc_run(const char *mode, const char *type, const void *in, size_t in_len, uint8_t **out,
                  size_t *out_len, char **err);
/* Reads a test data file from $DM_TEST_DATA (malloc'd); NULL if missing. */
uint8_t *pt_read_data(const char *name, size_t *len);

#endif
