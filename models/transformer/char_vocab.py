#!/usr/bin/python3
"""char_vocab.py: the size of the char vocabulary of some text files (standard library).

    python3 models/transformer/char_vocab.py FILE...   (prints V)

V is the number of distinct Unicode code points in the files read as UTF-8, the
vocabulary `make-db --text` builds for its char tokenizer (sorted code points, one id
each). The default nets in models/gpt and models/bert use it on Debian's `fortunes`
package: the files models/transformer/corpus.txt lists.
"""
import sys


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: char_vocab.py FILE...")
    points = set()
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            points.update(f.read())
    print(len(points))


if __name__ == "__main__":
    main()
