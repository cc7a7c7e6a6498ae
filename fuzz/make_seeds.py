#!/usr/bin/env python3
"""make_seeds.py: writes the seed corpora of fuzz_npy and fuzz_lmdb_record.

    fuzz/make_seeds.py            (from the repository root; needs protoc)

The .npy seeds are written byte by byte (no numpy needed): every dtype the reader
knows, both byte orders, Fortran order, 0-d, empty, versions 1.0, 2.0 and 3.0. The
record seeds are records as Save and make-db write them, encoded by protoc from text,
framed as fuzz_lmdb_record.c reads its input (a mode byte, then per record a u8 key
length, the key, a u16 little-endian value length, the value).
"""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "proto")


def npy(descr, shape, data, fortran=False, version=(1, 0)):
    shp = "(" + "".join("%d, " % d for d in shape).rstrip(" ") + ")" if len(shape) != 1 \
        else "(%d,)" % shape[0]
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shp)
    lenfmt = "<H" if version[0] == 1 else "<I"
    pre = 6 + 2 + struct.calcsize(lenfmt)
    pad = 64 - (pre + len(d) + 1) % 64
    hdr = (d + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY" + bytes(version) + struct.pack(lenfmt, len(hdr)) + hdr + data


def npy_seeds(out):
    seeds = {
        "f4_2x3": npy("<f4", (2, 3), struct.pack("<6f", 1, -2, 3.5, 0, float("inf"), 1e-40)),
        "f4_be": npy(">f4", (3,), struct.pack(">3f", 1, 2, 3)),
        "f4_fortran": npy("<f4", (2, 2), struct.pack("<4f", 1, 2, 3, 4), fortran=True),
        "f2": npy("<f2", (4,), struct.pack("<4H", 0x3C00, 0x7C00, 0xFC00, 0x0001)),
        "i4": npy("<i4", (2,), struct.pack("<2i", -1, 7)),
        "i8_be": npy(">i8", (1, 2), struct.pack(">2q", 1 << 40, -3)),
        "u1": npy("|u1", (5,), bytes([0, 1, 127, 128, 255])),
        "i1": npy("|i1", (2,), bytes([0x80, 0x7F])),
        "u2": npy("<u2", (2,), struct.pack("<2H", 1, 65535)),
        "i2": npy("<i2", (2,), struct.pack("<2h", -32768, 5)),
        "b1": npy("|b1", (3,), bytes([0, 1, 1])),
        "f8": npy("<f8", (1,), struct.pack("<d", 0.5)),
        "scalar": npy("<f4", (), struct.pack("<f", 42)),
        "empty": npy("<f4", (0, 4), b""),
        "huge_zero": npy("<f4", (0, 1 << 62, 1 << 62), b""),
        "v2": npy("<i4", (1,), struct.pack("<i", 9), version=(2, 0)),
        "v3": npy("<f4", (1,), struct.pack("<f", 9), version=(3, 0)),
        "rank8": npy("<f4", (1,) * 8, struct.pack("<f", 1)),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name + ".npy"), "wb") as f:
            f.write(data)


def encode(message, text):
    r = subprocess.run(["protoc", "-I", PROTO, "--encode=caffe2." + message, "caffe2.proto"],
                       input=text.encode(), capture_output=True, check=True)
    return r.stdout


def framed(mode, records, extra=b""):
    """`extra`: the bytes the mode asks for before the records (the iter value)."""
    b = bytes([mode]) + extra
    for key, val in records:
        b += bytes([len(key)]) + key + struct.pack("<H", len(val)) + val
    return b


def blob(name, body):
    return encode("BlobProto", 'name: "%s" type: "Tensor" tensor { name: "%s" %s }'
                  % (name, name, body))


def record_seeds(out):
    w = 'dims: 2 dims: 3 data_type: FLOAT float_data: [1, 2, 3, 4, 5, 6]'
    chunk0 = 'dims: 2 dims: 3 data_type: FLOAT segment { begin: 0 end: 4 } float_data: [1, 2, 3, 4]'
    chunk1 = 'dims: 2 dims: 3 data_type: FLOAT segment { begin: 4 end: 6 } float_data: [5, 6]'
    seeds = {
        # Load: outputs w and b (mode bit 3), or load_all (bit 1)
        "load_whole": framed(8, [(b"w", blob("w", w)),
                                 (b"b", blob("b", "dims: 3 data_type: INT64 int64_data: [1, 2, 3]"))]),
        "load_chunks": framed(2, [(b"w#%0", blob("w", chunk0)), (b"w#%1", blob("w", chunk1))]),
        "load_fp16": framed(2, [(b"h", blob("h", "dims: 2 data_type: FLOAT16 int32_data: [15360, 31744]"))]),
        "load_bf16_bytes": framed(2, [(b"h", blob("h", 'dims: 2 data_type: BFLOAT16 byte_data: "\\200?\\000@"'))]),
        "load_u8": framed(2, [(b"u", blob("u", "dims: 3 data_type: UINT8 int32_data: [0, 9, 255]"))]),
        "load_bool": framed(2, [(b"t", blob("t", "dims: 2 data_type: BOOL int32_data: [0, 1]"))]),
        "load_i8_i16_u16": framed(2, [
            (b"a", blob("a", "dims: 2 data_type: INT8 int32_data: [-128, 127]")),
            (b"b", blob("b", "dims: 1 data_type: INT16 int32_data: [-5]")),
            (b"c", blob("c", "dims: 1 data_type: UINT16 int32_data: [65535]"))]),
        "load_double": framed(2, [(b"d", blob("d", "dims: 1 data_type: DOUBLE double_data: [0.25]"))]),
        "load_int32": framed(2, [(b"i", blob("i", "dims: 2 data_type: INT32 int32_data: [7, -7]"))]),
        "load_string": framed(2, [(b"s", blob("s", 'dims: 2 data_type: STRING string_data: ["ab", ""]'))]),
        "load_raw": framed(2, [(b"r", blob("r", 'dims: 1 data_type: FLOAT raw_data: "\\000\\000\\200?"'))]),
        "load_scalar": framed(2, [(b"it", blob("it", "data_type: INT64 int64_data: [12]"))]),
        "load_empty": framed(2, [(b"e", blob("e", "dims: 0 dims: 5 data_type: FLOAT"))]),
    }
    img = 'dims: 2 dims: 2 data_type: UINT8 byte_data: "\\001\\002\\003\\377"'
    label = "data_type: INT32 int32_data: [3]"
    rec = lambda body: encode("TensorProtos", body)
    two = [(("%08d" % i).encode(), rec("protos { %s } protos { %s }" % (img, label))) for i in range(3)]
    seeds.update({
        # DB input: mode bit 0; bits 1-2 batch_size - 1; 3 shuffle; 4 two outputs; 5 scale; 6 iter
        "dbi_mnist": framed(1 | 2 | 16 | 32, two),
        "dbi_shuffle_iter": framed(1 | 8 | 16 | 64, two, extra=b"\x05"),
        "dbi_float": framed(1, [(b"k", rec("protos { dims: 3 data_type: FLOAT float_data: [1, 2, 3] }"))]),
        "dbi_u8_int32": framed(1, [(b"k", rec("protos { dims: 2 data_type: UINT8 int32_data: [1, 300] }"))]),
        "dbi_int64": framed(1 | 4, [(b"a", rec("protos { dims: 1 data_type: INT64 int64_data: [5] }")),
                                    (b"b", rec("protos { dims: 1 data_type: INT64 int64_data: [6] }"))]),
    })
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def main():
    for kind, fn in (("npy", npy_seeds), ("lmdb_record", record_seeds)):
        out = os.path.join(HERE, "corpus", kind)
        os.makedirs(out, exist_ok=True)
        fn(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
