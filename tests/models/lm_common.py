"""lm_common.py: what the transformer-model tests share (tests/models/*_test.py).

The tiny configuration every test generates (2 layers, width 32, 2 heads, context 16,
vocabulary 20, batch 8), running the generators and the CLI, the token DB of
make_lm_db, and reading the metrics CSV. A failure raises SystemExit with the command
and its stderr, so meson shows why.
"""
import csv
import math
import os
import re
import subprocess
import sys

TINY = dict(layers=2, width=32, heads=2, context=16, vocab=20, batch=8)
SKIP = 77  # meson's exit status for a skipped test


def run(cmd, cwd=None):
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise SystemExit("FAIL: %s exited %d\nstdout:\n%s\nstderr:\n%s"
                         % (" ".join(str(c) for c in cmd), p.returncode, p.stdout[-4000:],
                            p.stderr[-4000:]))
    return p.stdout


def generate(src_root, model, out_dir, cfg=TINY, seed=1):
    """models/<model>/make_<model>.py with cfg into out_dir."""
    script = os.path.join(src_root, "models", model, "make_%s.py" % model)
    args = [sys.executable, script, "--out-dir", out_dir, "--seed", seed]
    for k in ("layers", "width", "heads", "context", "vocab", "batch"):
        args += ["--" + k, cfg[k]]
    run(args)


def make_db(make_lm_db, path, records, cfg=TINY, seed=1):
    run([make_lm_db, path, records, cfg["context"], cfg["vocab"], seed])


def read_losses(path, column="loss"):
    """A column of a train --csv file (loss, test_loss), the rows that have it."""
    with open(path, newline="") as f:
        return [float(r[column]) for r in csv.DictReader(f) if r[column]]


def initial_loss_bound(width, rows):
    """How far the first loss may sit from ln(rows) (chance), from the init's scale.

    The head's logits are lnf wte^T: lnf's rows have mean 0 and variance 1 over D (gamma
    1, beta 0), so sum_d h_d^2 = D, and wte ~ N(0, 0.02^2): each logit is N(0, s^2) with
    s = 0.02 sqrt(D). For small s, E[logsumexp] = ln(rows) + s^2 / 2, and the target's
    logit has mean 0 and standard deviation s even if every row were the same draw. So
    |loss_0 - ln(rows)| <= s^2 / 2 + 3 s (three standard deviations)."""
    s = 0.02 * math.sqrt(width)
    return s * s / 2 + 3 * s


def stand_in(path):
    """A BERT net with MaskTokens replaced by Copy ops (masked = tokens, mlm_labels =
    targets), for builds without the op."""
    with open(path) as f:
        text = f.read()
    text, n = re.subn(r'op \{ input: "tokens" input: "optimizer_iteration" output: "masked"'
                      r'.*?type: "MaskTokens".*?\}\s*\}\n',
                      'op { input: "tokens" output: "masked" type: "Copy" }\n'
                      'op { input: "targets" output: "mlm_labels" type: "Copy" }\n',
                      text, flags=re.S)
    if n != 1:
        lm.fail("%s: %d MaskTokens ops found, expected 1" % (path, n))
    with open(path, "w") as f:
        f.write(text)


def fail(msg):
    raise SystemExit("FAIL: " + msg)
