#!/usr/bin/python3
"""regen.py: rewrites the checked-in GPT and BERT nets (standard library only).

    python3 models/transformer/regen.py      (or: ninja -C build regen-models)

The default configuration: 4 layers, width 256, 4 heads, context 128, and V = the char
vocabulary of Debian's fortunes files CORPUS (`apt-get install fortunes`), counted by
char_vocab.py. The corpus is the list in corpus.txt. Prints each generator command it
runs, which is also the second header line of every net it writes.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FORTUNES = "/usr/share/games/fortunes"


def read_corpus(path=os.path.join(HERE, "corpus.txt")):
    """corpus.txt's file names, in order (# comments and blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


CORPUS = read_corpus()
DEFAULT = ["--layers", "4", "--width", "256", "--heads", "4", "--context", "128"]


def main():
    files = [os.path.join(FORTUNES, f) for f in CORPUS]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise SystemExit("regen.py: %s missing: apt-get install fortunes" % ", ".join(missing))
    v = subprocess.check_output([sys.executable, os.path.join(HERE, "char_vocab.py")] + files,
                                universal_newlines=True).strip()
    for model in ("gpt", "bert"):
        cmd = (["models/%s/make_%s.py" % (model, model)] + DEFAULT
               + ["--vocab", v, "--out-dir", "models/" + model])
        print("python3 " + " ".join(cmd))
        subprocess.check_call([sys.executable] + cmd, cwd=ROOT)


if __name__ == "__main__":
    main()
