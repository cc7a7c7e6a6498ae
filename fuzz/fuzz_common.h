/* fuzz_common.h: what both fuzz targets share: the message types tried on each input
 * and the round-trip property (print, read back, print again: same text). */
#ifndef DM_FUZZ_COMMON_H
#define DM_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netio.h"
#include "proto/caffe2.pb-c.h"

/* Between them these reach every message in caffe2.proto. */
static const ProtobufCMessageDescriptor *const fuzz_descs[] = {
    &caffe2__net_def__descriptor, &caffe2__tensor_protos__descriptor, &caffe2__plan_def__descriptor,
    &caffe2__blob_proto__descriptor};

/* A violated property is a bug in our code, so it must crash the fuzzer loudly. */
static void fuzz_fail(const char *what, const char *detail) {
  fprintf(stderr, "round-trip property violated: %s\n%s\n", what, detail ? detail : "");
  __builtin_trap();
}

/* Drops the "# unknown field ..." lines: text cannot carry unknown fields. */
static void fuzz_strip_unknown(char *t) {
  char *w = t;
  for (char *r = t; *r;) {
    char *nl = strchr(r, '\n');
    size_t n = nl ? (size_t)(nl - r + 1) : strlen(r);
    /* Only whole comment lines: a string value may well contain the same words. */
    size_t ind = strspn(r, " ");
    if (strncmp(r + ind, "# unknown field ", 16) != 0) {
      memmove(w, r, n);
      w += n;
    }
    r += n;
  }
  *w = '\0';
}

/* For a message that loaded: its text reads back and prints the same; its binary form
 * reads back and prints the same. (Bytes are compared through text, because a NaN's
 * payload and unknown fields legitimately do not survive text.) */
static void fuzz_check_round_trip(const ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  char *t1 = NULL, *t2 = NULL, *t3 = NULL;
  size_t l1, l2, l3, bl;
  uint8_t *bin = NULL;
  ProtobufCMessage *m2 = NULL, *m3 = NULL;
  if (dm_text_print(m, &t1, &l1) != DM_OK)
    fuzz_fail("print failed", dm_last_error());
  if (dm_text_parse(t1, l1, "printed", d, &m2) != DM_OK)
    fuzz_fail("printed text does not parse", dm_last_error());
  if (dm_text_print(m2, &t2, &l2) != DM_OK)
    fuzz_fail("reprint failed", dm_last_error());
  fuzz_strip_unknown(t1);
  if (strcmp(t1, t2) != 0)
    fuzz_fail("text -> parse -> text changed", t2);
  if (dm_message_serialize(m2, DM_FORMAT_BINARY, &bin, &bl) != DM_OK)
    fuzz_fail("serialize failed", dm_last_error());
  if (dm_message_parse(bin, bl, "packed", d, DM_FORMAT_BINARY, &m3) != DM_OK)
    fuzz_fail("packed bytes do not parse", dm_last_error());
  if (dm_text_print(m3, &t3, &l3) != DM_OK || strcmp(t2, t3) != 0)
    fuzz_fail("binary -> parse -> text changed", t3);
  free(t1);
  free(t2);
  free(t3);
  free(bin);
  protobuf_c_message_free_unpacked(m2, NULL);
  protobuf_c_message_free_unpacked(m3, NULL);
}

#endif
