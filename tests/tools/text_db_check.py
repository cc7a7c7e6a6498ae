#!/usr/bin/env python3
"""text_db_check.py: checks the DBs of `make-db --text` against the text itself.

Python's own UTF-8 decoder and sorted(set(text)) make the vocabulary; each vocab.txt
must be exactly that. The records (printed by text_db_dump) must be the windows: record
k of the training DB is tokens [kT, kT+T) with targets [kT+1, kT+T+1); the validation
DB's v records are the windows of the last v*T + 1 tokens, v = round(F * W) with W =
(L - 1) // T, and the training windows stop before them (no shared token).

usage: text_db_check.py DUMP T F char|byte TRAIN_DB [VAL_DB|-] FILE...
       text_db_check.py batch DUMP DB TOKENS.npy TARGETS.npy
The second form checks what TensorProtosDBInput read from DB (saved by `run --output`):
INT32 [N, T] each, the first N records' tensors. It exits 77 without numpy.
Prints what it checked; exits 1 on the first mismatch.
"""
import math
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def records(dump, db):
    out = subprocess.run([dump, db], capture_output=True, text=True)
    if out.returncode != 0:
        fail("%s: %s" % (db, out.stderr.strip()))
    recs = []
    for line in out.stdout.splitlines():
        key, *protos = line.split("\t")
        tensors = []
        for p in protos:
            head, _, vals = p.partition(" :")
            name, dtype, dims = head.split(" ")
            tensors.append((name, int(dtype), dims, [int(v) for v in vals.split()]))
        recs.append((key, tensors))
    return recs


def check_db(db, recs, stream, start, T, ids_to_tok):
    for k, (key, tensors) in enumerate(recs):
        if key != "%08d" % k:
            fail("%s: record %d has key %r" % (db, k, key))
        if [(t[0], t[1], t[2]) for t in tensors] != [("tokens", 2, str(T)), ("targets", 2, str(T))]:
            fail("%s: record %d is %r, not tokens and targets INT32 [%d]" % (db, k, tensors, T))
        s = start + k * T
        got_in = [ids_to_tok(i) for i in tensors[0][3]]
        got_out = [ids_to_tok(i) for i in tensors[1][3]]
        if got_in != stream[s:s + T]:
            fail("%s: record %d tokens %r, wanted %r" % (db, k, got_in, stream[s:s + T]))
        if got_out != stream[s + 1:s + T + 1]:
            fail("%s: record %d targets %r, wanted %r" % (db, k, got_out, stream[s + 1:s + T + 1]))


def batch(dump, db, tok_path, tgt_path):
    try:
        import numpy as np
    except ImportError:
        print("no numpy: the batch cannot be read")
        sys.exit(77)
    recs = records(dump, db)
    for path, k, name in ((tok_path, 0, "tokens"), (tgt_path, 1, "targets")):
        a = np.load(path)
        if a.dtype != np.int32 or a.ndim != 2:
            fail("%s: %s %r, not INT32 [N, T]" % (name, a.dtype, a.shape))
        want = np.array([r[1][k][3] for r in recs[:a.shape[0]]], dtype=np.int32)
        if a.shape != want.shape or not (a == want).all():
            fail("%s: the batch %r is not the first records %r" % (name, a.tolist(), want.tolist()))
    print("the batch is the first %d records: %s" % (a.shape[0], "x".join(map(str, a.shape))))


def main():
    if sys.argv[1] == "batch":
        batch(*sys.argv[2:])
        return
    dump, T, F, kind, train_db, val_db, *files = sys.argv[1:]
    T, F = int(T), float(F)
    data = b"".join(open(f, "rb").read() for f in files)
    if kind == "char":
        stream = list(data.decode("utf-8"))
        vocab = sorted(set(stream))
        lines = ["demitasse-vocab 1 char %d" % len(vocab)] + ["U+%04X" % ord(c) for c in vocab]
    else:
        stream = list(data)
        vocab = list(range(256))
        lines = ["demitasse-vocab 1 byte 256"] + ["0x%02X" % b for b in vocab]
    want_vocab = "\n".join(lines) + "\n"
    dbs = [train_db] + ([val_db] if val_db != "-" else [])
    for db in dbs:
        got = open(db + "/vocab.txt", encoding="ascii").read()
        if got != want_vocab:
            fail("%s/vocab.txt differs from the text's sorted distinct %ss" % (db, kind))

    def tok(i):
        if not 0 <= i < len(vocab):
            fail("token id %d is outside the vocabulary of %d" % (i, len(vocab)))
        return vocab[i]

    L = len(stream)
    W = (L - 1) // T
    v = math.floor(F * W + 0.5)
    val_at = L - (v * T + 1) if v else L
    train = records(dump, train_db)
    if len(train) != (val_at - 1) // T:
        fail("%s: %d records, wanted %d" % (train_db, len(train), (val_at - 1) // T))
    check_db(train_db, train, stream, 0, T, tok)
    if val_db != "-":
        val = records(dump, val_db)
        if len(val) != v:
            fail("%s: %d records, wanted round(%g * %d) = %d" % (val_db, len(val), F, W, v))
        check_db(val_db, val, stream, val_at, T, tok)
        if len(train) * T + 1 > val_at:
            fail("training windows reach token %d, past the validation start %d"
                 % (len(train) * T, val_at))
    print("text DBs match: %d tokens, vocabulary %d, %d training records%s"
          % (L, len(vocab), len(train),
             ", %d validation records from token %d" % (v, val_at) if val_db != "-" else ""))


if __name__ == "__main__":
    main()
