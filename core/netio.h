/* netio.h: reading and writing Caffe2 protobuf files, binary and text (internal).
 *
 * Messages are protobuf-c structs of any type in proto/caffe2.proto (NetDef,
 * TensorProtos, BlobProto, ...), chosen by descriptor. Whatever these functions return
 * is freed with protobuf_c_message_free_unpacked(msg, NULL), whether it came from binary
 * or text. Binary output follows Caffe2's byte-exact rules (field-number order, proto2
 * presence kept, unpacked dims/ints/floats), so real zoo files re-encode byte for byte.
 * Text format is protobuf's own (what `protoc --decode` prints and `--encode` reads),
 * parsed and printed by one implementation driven by protobuf-c's descriptors.
 */
#ifndef DM_CORE_NETIO_H
#define DM_CORE_NETIO_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum dm_file_format {
  DM_FORMAT_AUTO = 0, /* by extension (.pbtxt .prototxt .txt = text), else by content */
  DM_FORMAT_BINARY = 1,
  DM_FORMAT_TEXT = 2
} dm_file_format;

/* Largest file these functions will read (1 GiB): untrusted sizes are checked first. */
#define DM_MAX_FILE_BYTES ((size_t)1 << 30)

/* Guess the format of `path` (and of `data` when the extension says nothing). */
DM_HIDDEN dm_file_format dm_format_guess(const char *path, const void *data, size_t len);

/* Parses `data` as `desc` in `fmt`. `source` names the input in error messages
 * ("net.pbtxt:3:14: expected '}' ..."). */
DM_HIDDEN dm_status dm_message_parse(const void *data, size_t len, const char *source,
                                     const ProtobufCMessageDescriptor *desc, dm_file_format fmt,
                                     ProtobufCMessage **out);
/* DM_ERR_PARSE for 0 bytes (`source` named): protobuf reads them as a valid empty
 * message, so a net that was never written (a failed download, a `>` that truncated the
 * file, an empty buffer) would run as a net of no ops. */
DM_HIDDEN dm_status dm_message_check_nonempty(const char *source, size_t len);
/* Reads and parses a file; 0 bytes are refused (dm_message_check_nonempty). */
DM_HIDDEN dm_status dm_message_read_file(const char *path, const ProtobufCMessageDescriptor *desc,
                                         dm_file_format fmt, ProtobufCMessage **out);
/* Serialises to a malloc'd buffer (text is NUL-terminated; *len excludes the NUL). */
DM_HIDDEN dm_status dm_message_serialize(const ProtobufCMessage *msg, dm_file_format fmt,
                                         uint8_t **out, size_t *len);
/* Writes a file (AUTO: by extension, binary unless it looks like text), replacing it
 * atomically (core/fileio.h). */
DM_HIDDEN dm_status dm_message_write_file(const char *path, const ProtobufCMessage *msg,
                                          dm_file_format fmt);

/* The text format alone. */
DM_HIDDEN dm_status dm_text_parse(const char *text, size_t len, const char *source,
                                  const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out);
DM_HIDDEN dm_status dm_text_print(const ProtobufCMessage *msg, char **out, size_t *len);

/* Reads a whole file into a malloc'd buffer (NUL-terminated), refusing files larger
 * than DM_MAX_FILE_BYTES. */
DM_HIDDEN dm_status dm_read_file(const char *path, uint8_t **out, size_t *len);
/* The same, with `hint` saying what kind of file is wanted where `path` is no regular
 * file (a FIFO, a directory, a device). */
DM_HIDDEN dm_status dm_read_file_as(const char *path, const char *hint, uint8_t **out,
                                    size_t *len);
/* dm_write_file_atomic (core/fileio.h): the old file stays when the write fails. */
DM_HIDDEN dm_status dm_write_file(const char *path, const void *data, size_t len);

#endif
