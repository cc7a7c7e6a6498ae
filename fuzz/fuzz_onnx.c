/* fuzz_onnx.c: the ONNX importer on arbitrary bytes. The input is parsed as an ONNX
 * ModelProto (proto/onnx.proto) and, when it parses, translated into a Caffe2 pair
 * (net/onnx/import.h), with external data looked up in a folder that does not exist, so
 * nothing outside the input is read. A clean error status is fine; a crash, leak,
 * sanitizer report or timeout is a bug. Seeds: fuzz/corpus/onnx (tests/data/onnx). */
#include <stdint.h>
#include <stdlib.h>

#include "core/netio.h"
#include "net/onnx/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ProtobufCMessage *m = NULL;
  if (dm_message_parse(data, size, "<fuzz>", &onnx__model_proto__descriptor, DM_FORMAT_BINARY,
                       &m) != DM_OK)
    return 0;
  Caffe2__NetDef *init = NULL, *pred = NULL;
  if (dm_onnx_import((const Onnx__ModelProto *)m, "/nonexistent-dm-fuzz", &init, &pred) ==
      DM_OK) {
    protobuf_c_message_free_unpacked(&init->base, NULL);
    protobuf_c_message_free_unpacked(&pred->base, NULL);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  return 0;
}
