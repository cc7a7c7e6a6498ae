#!/usr/bin/env python3
"""text_lm.py: the helpers of generate_test.sh (a bigram language model as a table).

  text_lm.py init VOCAB S OUT [--flat] [--positions N] [--positions-dtype float]
      an init net filling `table` [V, V]: row i is the logits of the token after token i.
      By default row c of each character c of S is 5 at the character after c in S
      (cyclically) and 4 at the one after that, 0 elsewhere (rows of other tokens: 5 at
      S[0]), so greedy generation spells S over and over. --flat: every row is 0.5 * j at
      token j. --positions N adds the INT32 blob `positions` [N] (0 .. N-1).
  text_lm.py expect S PROMPT N
      prints PROMPT followed by the N characters that follow its last one in S, cyclically.
  text_lm.py topk S TEXT K
      exits 1 unless each character of TEXT after the first is one of the K characters
      that follow the one before it in S (K = 2: the two highest logits); prints how many
      transitions were not the first choice.
"""
import sys


def read_vocab(path):
    lines = open(path, encoding="ascii").read().splitlines()
    kind = lines[0].split()[2]
    if kind == "char":
        return [chr(int(x[2:], 16)) for x in lines[1:]]
    return [bytes([int(x[2:], 16)]).decode("latin-1") for x in lines[1:]]


def init(args):
    vocab_path, s, out, *rest = args
    vocab = read_vocab(vocab_path)
    V = len(vocab)
    idx = {c: i for i, c in enumerate(vocab)}
    flat = "--flat" in rest
    positions = int(rest[rest.index("--positions") + 1]) if "--positions" in rest else 0
    pos_float = "--positions-dtype" in rest
    table = [[0.0] * V for _ in range(V)]
    for i in range(V):
        if flat:
            table[i] = [0.5 * j for j in range(V)]
        else:
            table[i][idx[s[0]]] = 5.0
    if not flat:
        for k, c in enumerate(s):
            row = table[idx[c]]
            row[idx[s[0]]] = 0.0
            row[idx[s[(k + 1) % len(s)]]] = 5.0
            row[idx[s[(k + 2) % len(s)]]] = 4.0
    vals = " ".join("floats: %g" % x for row in table for x in row)
    with open(out, "w") as f:
        f.write('name: "bigram_init"\n')
        f.write('op { output: "table" type: "GivenTensorFill" arg { name: "shape" ints: %d '
                'ints: %d } arg { name: "values" %s } }\n' % (V, V, vals))
        if positions and pos_float:
            f.write('op { output: "positions" type: "GivenTensorFill" arg { name: "shape" '
                    'ints: %d } arg { name: "values" %s } }\n'
                    % (positions, " ".join("floats: %d" % i for i in range(positions))))
        elif positions:
            f.write('op { output: "positions" type: "GivenTensorIntFill" arg { name: "shape" '
                    'ints: %d } arg { name: "values" %s } }\n'
                    % (positions, " ".join("ints: %d" % i for i in range(positions))))


def follow(s, c, k):
    i = s.index(c)
    return [s[(i + j) % len(s)] for j in range(1, k + 1)]


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "init":
        init(args)
    elif cmd == "expect":
        s, prompt, n = args[0], args[1], int(args[2])
        out = prompt
        for _ in range(n):
            out += follow(s, out[-1], 1)[0]
        print(out)
    elif cmd == "topk":
        s, text, k = args[0], args[1], int(args[2])
        other = 0
        for a, b in zip(text, text[1:]):
            if b not in follow(s, a, k):
                print("'%s' -> '%s' is not among the %d that follow it" % (a, b, k))
                sys.exit(1)
            other += b != follow(s, a, 1)[0]
        print(other)


if __name__ == "__main__":
    main()
