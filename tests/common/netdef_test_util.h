/* netdef_test_util.h: NetDef text in and out for the pass tests (cmocka asserts on
 * failure). Include after test_util.h. */
#ifndef DM_TESTS_NETDEF_TEST_UTIL_H
#define DM_TESTS_NETDEF_TEST_UTIL_H

#include <stdlib.h>

#include "core/netio.h"
#include "proto/caffe2.pb-c.h"
#include "test_util.h"

/* A NetDef from protobuf text; free with protobuf_c_message_free_unpacked. */
static inline Caffe2__NetDef *parse(const char *text) {
  ProtobufCMessage *m = NULL;
  assert_ok(dm_text_parse(text, strlen(text), "<test>", &caffe2__net_def__descriptor, &m));
  return (Caffe2__NetDef *)m;
}

/* The net as protobuf text, malloc'd. */
static inline char *print(const Caffe2__NetDef *net) {
  char *s = NULL;
  size_t len = 0;
  assert_ok(dm_text_print(&net->base, &s, &len));
  return s;
}

#endif
