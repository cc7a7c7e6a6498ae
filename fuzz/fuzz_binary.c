/* fuzz_binary.c: libFuzzer target for the binary reader (wire walker + protobuf-c
 * unpack), then the round-trip property on whatever loads. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (size_t i = 0; i < sizeof fuzz_descs / sizeof fuzz_descs[0]; i++) {
    ProtobufCMessage *m = NULL;
    if (dm_message_parse(data, size, "fuzz.pb", fuzz_descs[i], DM_FORMAT_BINARY, &m) != DM_OK) {
      if (m)
        fuzz_fail("error with a message returned", dm_last_error());
      continue;
    }
    fuzz_check_round_trip(m);
    protobuf_c_message_free_unpacked(m, NULL);
  }
  return 0;
}
