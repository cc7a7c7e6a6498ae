#!/usr/bin/python3
"""lm_precisions_report.py: the table bench/lm_precisions.sh prints (standard library).

    lm_precisions_report.py OUT "fp32 fp16 bf16" TEST_ITERS FILE...

For each precision: the last test_loss and test_accuracy in OUT/<precision>/metrics.csv
(the validation loss and accuracy at the end of training), the loss's ratio to FP32's,
and the steps skipped on overflow. Beside them, the bars a language model must clear, on
the same validation characters the test passes read: a unigram model's loss (each
character's frequency in the training text, add-one smoothed over the vocabulary) and
the accuracy of always answering the training text's most frequent character. The split
is make-db --text's (text_db.h): the last round(0.05 * W) windows of T = 128 go to
validation; the first TEST_ITERS * 16 validation windows are tested. (The BERT is scored
on the masked positions only, drawn uniformly, so the same bars hold in expectation.)
"""
import csv
import math
import os
import sys

T, BATCH, VAL_FRACTION = 128, 16, 0.05


def last_row(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("test_loss")]
    if not rows:
        raise SystemExit("%s: no row with a test_loss" % path)
    return rows[-1]


def baselines(files, test_iters):
    """The unigram loss and the majority accuracy on the tested validation targets."""
    text = ""
    for p in files:
        with open(p, encoding="utf-8") as f:
            text += f.read()
    n = len(text)
    windows = (n - 1) // T
    v = int(math.floor(VAL_FRACTION * windows + 0.5))  # llround, as make-db rounds
    val_at = n - (v * T + 1)
    train, vocab = text[:val_at], set(text)
    counts = {c: 1 for c in vocab}  # add-one
    for c in train:
        counts[c] += 1
    total = sum(counts.values())
    tested = min(test_iters * BATCH, v)
    targets = text[val_at + 1: val_at + 1 + tested * T]
    top = max(counts, key=counts.get)
    loss = -sum(math.log(counts[c] / total) for c in targets) / len(targets)
    return loss, sum(c == top for c in targets) / len(targets), top, len(targets)


def main():
    out, precisions, test_iters, files = (sys.argv[1], sys.argv[2].split(), int(sys.argv[3]),
                                          sys.argv[4:])
    uni, major, top, ntok = baselines(files, test_iters)
    rows = {p: last_row(os.path.join(out, p, "metrics.csv")) for p in precisions}
    ref = float(rows["fp32"]["test_loss"]) if "fp32" in rows else None
    print("validation: %d target characters; unigram model loss %.4f (perplexity %.2f); "
          "always %r: accuracy %.4f" % (ntok, uni, math.exp(uni), top, major))
    print("%-9s %6s %10s %11s %9s %10s %10s %8s" % ("run", "iter", "val loss", "perplexity",
                                                  "/ FP32", "/ unigram", "val acc", "skipped"))
    for p in precisions:
        r = rows[p]
        loss = float(r["test_loss"])
        skipped = r.get("skipped") or ""
        acc = r.get("test_accuracy")
        print("%-9s %6s %10.4f %11.2f %9s %10.3f %10s %8s"
              % (p, r["iter"], loss, math.exp(loss),
                 "%.4f" % (loss / ref) if ref else "-", loss / uni,
                 "%.4f" % float(acc) if acc else "-",
                 skipped if skipped not in ("", "-1") else "-"))


if __name__ == "__main__":
    main()
