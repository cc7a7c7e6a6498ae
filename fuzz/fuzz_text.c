/* fuzz_text.c: libFuzzer target for the text-format parser, then the round-trip
 * property (print, reparse, same text and bytes) on whatever parses. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (size_t i = 0; i < sizeof fuzz_descs / sizeof fuzz_descs[0]; i++) {
    ProtobufCMessage *m = NULL;
    if (dm_text_parse((const char *)data, size, "fuzz.pbtxt", fuzz_descs[i], &m) != DM_OK) {
      if (m)
        fuzz_fail("error with a message returned", dm_last_error());
      continue;
    }
    fuzz_check_round_trip(m);
    protobuf_c_message_free_unpacked(m, NULL);
  }
  return 0;
}
