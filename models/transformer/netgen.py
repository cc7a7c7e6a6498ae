"""netgen.py: the Caffe2 text-net writer and the transformer layers GPT and BERT share.

make_gpt.py and make_bert.py import this module (standard library only). It holds:
  - Net: one NetDef as .pbtxt text (ops, comments between them, external inputs/outputs)
  - Model: the init net's fills and the layer writers (embeddings, pre-LayerNorm
    attention and MLP blocks, the tied head), written once for both models so that a
    fix to a layer lands in both
  - the command line both generators take, and the vocabulary size from make-db's
    vocab.txt.

Shapes in the comments: N batch, T context, D width, H heads, Dh = D / H, V vocabulary
rows (GPT: V; BERT: V + 1 with the [MASK] row).
"""
import argparse
import math
import os
import textwrap


def fmt_float(x):
    """A float as the text parser reads it back; %.9g is exact for FP32 values."""
    return "%.9g" % x


def arg_i(name, v):
    return 'arg { name: "%s" i: %d }' % (name, v)


def arg_f(name, v):
    return 'arg { name: "%s" f: %s }' % (name, fmt_float(v))


def arg_s(name, v):
    return 'arg { name: "%s" s: "%s" }' % (name, v)


def arg_ints(name, vs):
    return 'arg { name: "%s" ints: [%s] }' % (name, ", ".join(str(v) for v in vs))


class Net:
    """One NetDef as text: a header comment, then ops and comments in order."""

    def __init__(self, name, header):
        self.name = name
        self.header = header  # lines, written as '# ...'
        self.lines = []
        self.inputs = []
        self.outputs = []

    def comment(self, text):
        self.lines.extend(textwrap.wrap(text, 88, initial_indent="# ", subsequent_indent="#   "))

    def op(self, kind, inputs, outputs, args=(), extra=""):
        parts = (['input: "%s"' % i for i in inputs] + ['output: "%s"' % o for o in outputs]
                 + ['type: "%s"' % kind] + list(args) + ([extra] if extra else []))
        # greedy wrapping near 90 columns, continuation lines indented under the op
        lines, line = [], "op {"
        for p in parts:
            if len(line) + 1 + len(p) > 88 and line.strip() != "op {":
                lines.append(line)
                line = "    "
            line += " " + p if line.strip() else p
        lines.append(line + " }")
        self.lines.extend(lines)

    def text(self):
        out = ["# " + h if h else "#" for h in self.header]
        out.append('name: "%s"' % self.name)
        out.extend(self.lines)
        out.extend('external_input: "%s"' % b for b in self.inputs)
        out.extend('external_output: "%s"' % b for b in self.outputs)
        return "\n".join(out) + "\n"


class Model:
    """The weights (init net) and the forward ops of one model, for one or more nets.

    The init net is written once, while the first net (training) is; later nets (test,
    inference) call the same writers, which then only name the weights (`filling` off),
    so every net reads the init net's blobs."""

    def __init__(self, cfg, prog, what, model, init_lines):
        self.cfg = cfg
        self.model = model  # the file prefix: "gpt", "bert"
        self.head = (prog, config_line(prog, cfg), what)
        self.init = Net(model + "_init", self.header(init_lines))
        self.nets = [("init", self.init)]
        self.net = None
        self.seed = cfg.seed
        self.filling = True
        self.rows = None  # wte's rows, set by embeddings()

    def header(self, lines):
        """A generated file's header: who wrote it, the command that rewrites it, the
        model, then what this net is."""
        prog, cmd, what = self.head
        return ["Written by %s; do not edit. Regenerate with python3 (add --out-dir DIR)" % prog,
                "  " + cmd, what] + lines

    def new_net(self, kind, lines, db_note=None):
        """Starts <model>_<kind>: the first net written fills the init net as it goes;
        with db_note, a data op (a training net's shuffles) opens it."""
        self.net = Net("%s_%s" % (self.model, kind), self.header(lines))
        self.filling = len(self.nets) == 1
        self.nets.append((kind, self.net))
        if db_note is not None:
            db_input(self.net, "%s_%s_lmdb" % (self.model, "train" if kind == "train" else "val"),
                     self.cfg.batch, self.cfg.context, kind == "train", self.cfg.seed, db_note)
        return self.net

    def write_all(self):
        for kind, net in self.nets:
            write(self.cfg.out_dir, net.name + ".pbtxt", net)

    # ---- init-net fills --------------------------------------------------------------

    def _fill(self, blob, kind, shape, args):
        if not self.filling:
            return blob
        extra = ""
        if kind == "GaussianFill":
            # each random fill its own seed, so the init net gives the same weights
            # every run and a weight's values do not depend on the fills before it
            extra = "device_option { random_seed: %d }" % self.seed
            self.seed += 1
        self.init.op(kind, [], [blob], [arg_ints("shape", shape)] + list(args), extra)
        return blob

    def gauss(self, blob, shape, std):
        return self._fill(blob, "GaussianFill", shape, [arg_f("mean", 0.0), arg_f("std", std)])

    def const(self, blob, shape, value):
        return self._fill(blob, "ConstantFill", shape, [arg_f("value", value)])

    def init_comment(self, text):
        if self.filling:
            self.init.comment(text)

    # ---- layers ----------------------------------------------------------------------

    def embeddings(self, tokens, rows):
        """x0 [N, T, D] = wte[tokens] + wpe[positions]; wte [rows, D] is tied to the
        head, positions [T] INT32 = 0..T-1 (an init blob: its length is the context)."""
        c, n = self.cfg, self.net
        self.init_comment("embeddings: token table wte [%d, %d] (tied to the output head), "
                          "learned positions wpe [%d, %d], N(0, 0.02)" % (rows, c.width,
                                                                           c.context, c.width))
        self.rows = rows
        self.gauss("wte", [rows, c.width], 0.02)
        self.gauss("wpe", [c.context, c.width], 0.02)
        if self.filling:
            self.init.comment("positions [%d] INT32 = 0..%d: the position of each token, "
                              "and the context length" % (c.context, c.context - 1))
            self.init.op("GivenTensorIntFill", [], ["positions"],
                         [arg_ints("shape", [c.context]),
                          arg_ints("values", range(c.context))])
        n.comment("embeddings: tok_emb [N, T, D] = wte[%s], pos_emb [T, D] = wpe[positions], "
                  "x0 = their sum (broadcast over N)" % tokens)
        n.op("Gather", ["wte", tokens], ["tok_emb"])
        n.op("Gather", ["wpe", "positions"], ["pos_emb"])
        n.op("Add", ["tok_emb", "pos_emb"], ["x0"])
        return "x0"

    def layer_norm(self, x, name):
        """LayerNorm over the last dim (D), gamma 1 and beta 0 in the init net."""
        D = self.cfg.width
        self.const(name + "_s", [D], 1.0)
        self.const(name + "_b", [D], 0.0)
        self.net.op("LayerNorm", [x, name + "_s", name + "_b"],
                    [name, name + "_mean", name + "_std"],
                    [arg_i("axis", 2), arg_f("epsilon", 1e-5), arg_i("elementwise_affine", 1)])
        return name

    def linear(self, x, name, d_in, d_out, std):
        """FC on [N, T, d_in] at axis 2 -> [N, T, d_out]; W [d_out, d_in] ~ N(0, std),
        b zero."""
        self.gauss(name + "_w", [d_out, d_in], std)
        self.const(name + "_b", [d_out], 0.0)
        self.net.op("FC", [x, name + "_w", name + "_b"], [name], [arg_i("axis", 2)])
        return name

    def split_heads(self, x):
        """[N, T, D] -> [N, H, T, Dh]."""
        c = self.cfg
        self.net.op("Reshape", [x], [x + "_r"], [arg_ints("shape", [0, 0, c.heads,
                                                                   c.width // c.heads])])
        self.net.op("Transpose", [x + "_r"], [x + "_h"], [arg_ints("axes", [0, 2, 1, 3])])
        return x + "_h"

    def attention(self, x, p, causal):
        """Multi-head self-attention of x [N, T, D] -> [N, T, D] (before the projection's
        residual add); causal: key j of query i masked out for j > i."""
        c, n = self.cfg, self.net
        D, Dh = c.width, c.width // c.heads
        std_res = 0.02 / math.sqrt(2 * c.layers)
        self.init_comment("%s attention: q, k, v N(0, 0.02); the output projection "
                          "N(0, 0.02 / sqrt(2 * layers)) = N(0, %s), GPT-2's residual "
                          "scaling" % (p, fmt_float(std_res)))
        n.comment("%s attention: q, k, v [N, T, D] -> heads [N, H, T, Dh] = [N, %d, T, %d]"
                  % (p, c.heads, Dh))
        heads = [self.split_heads(self.linear(x, p + "_" + w, D, D, 0.02)) for w in "qkv"]
        q, k, v = heads
        n.comment("%s scores [N, H, T, T] = q k^T; softmax of scores / sqrt(Dh) in FP32%s"
                  % (p, ", keys after the query masked out (causal)" if causal else ""))
        n.op("BatchMatMul", [q, k], [p + "_att"], [arg_i("trans_b", 1)])
        args = [arg_f("scale", 1.0 / math.sqrt(Dh))]
        if causal:
            args.insert(0, arg_i("causal", 1))
        n.op("MaskedSoftmax", [p + "_att"], [p + "_prob"], args)
        n.comment("%s context [N, H, T, Dh] = prob v, heads joined back to [N, T, D]" % p)
        n.op("BatchMatMul", [p + "_prob", v], [p + "_ctx"])
        n.op("Transpose", [p + "_ctx"], [p + "_ctx_t"], [arg_ints("axes", [0, 2, 1, 3])])
        n.op("Reshape", [p + "_ctx_t"], [p + "_ctx_r"], [arg_ints("shape", [0, 0, D])])
        return self.linear(p + "_ctx_r", p + "_proj", D, D, std_res)

    def mlp(self, x, p, fast_gelu):
        """x [N, T, D] -> FC 4D -> Gelu -> FC D (the second FC residual-scaled)."""
        c, n = self.cfg, self.net
        D = c.width
        std_res = 0.02 / math.sqrt(2 * c.layers)
        self.init_comment("%s MLP: fc N(0, 0.02), out N(0, %s) (residual scaling)"
                          % (p, fmt_float(std_res)))
        n.comment("%s MLP: [N, T, D] -> FC [N, T, %d] -> Gelu%s -> FC [N, T, D]"
                  % (p, 4 * D, " (tanh form)" if fast_gelu else " (erf form)"))
        h = self.linear(x, p + "_fc", D, 4 * D, 0.02)
        n.op("Gelu", [h], [p + "_gelu"], [arg_i("fast_gelu", 1)] if fast_gelu else [])
        return self.linear(p + "_gelu", p + "_out", 4 * D, D, std_res)

    def block(self, x, i, causal, fast_gelu):
        """Pre-LayerNorm transformer block i: x + attn(LN(x)), then + mlp(LN(.))."""
        n, p = self.net, "l%d" % i
        self.init_comment("---- layer %d ----" % i)
        n.comment("---- layer %d: x%d -> x%d (pre-LayerNorm) ----" % (i, i, i + 1))
        a = self.attention(self.layer_norm(x, p + "_ln1"), p, causal)
        n.op("Add", [x, a], [p + "_mid"])
        m = self.mlp(self.layer_norm(p + "_mid", p + "_ln2"), p, fast_gelu)
        n.op("Add", [p + "_mid", m], ["x%d" % (i + 1)])
        return "x%d" % (i + 1)

    def tied_logits(self, h, out, bias=None):
        """out [N, T, rows] = h [N, T, D] wte^T (+ bias [rows], zero in the init net): the
        head reads the embedding table, so its gradient is the sum of this use and the
        Gather's. With a bias it is FC(h, wte, bias), torch's nn.Linear with the tied
        weight (BERT's decoder); without, BatchMatMul (GPT-2's lm_head has no bias)."""
        if bias is None:
            self.net.op("BatchMatMul", [h, "wte"], [out], [arg_i("trans_b", 1), arg_i("broadcast", 1)])
        else:
            self.const(bias, [self.rows], 0.0)
            self.net.op("FC", [h, "wte", bias], [out], [arg_i("axis", 2)])
        return out

    def token_accuracy(self, softmax, labels, rows, ignore_label=None):
        """Token accuracy: the [N, T, rows] softmax and the [N, T] labels flattened to
        N*T rows for Accuracy; with ignore_label, over the positions labelled otherwise
        (a masked LM's chosen positions)."""
        n = self.net
        n.op("Reshape", [softmax], [softmax + "_2d"], [arg_ints("shape", [-1, rows])])
        n.op("Reshape", [labels], [labels + "_1d"], [arg_ints("shape", [-1])])
        n.op("Accuracy", [softmax + "_2d", labels + "_1d"], ["accuracy"],
             [] if ignore_label is None else [arg_i("ignore_label", ignore_label)])


def db_input(net, db, batch, context, train, seed, note):
    """The data op: tokens, targets INT32 [N, T] from an LMDB of make-db's text records.
    Training shuffles and reads batch number `optimizer_iteration` (a resumed run reads
    what an uninterrupted one would); a test net reads in order."""
    args = [arg_s("db", db), arg_s("db_type", "lmdb"), arg_i("batch_size", batch)]
    if train:
        args += [arg_i("shuffle", 1), arg_i("seed", seed)]
    net.comment("tokens, targets INT32 [N, T] = [%d, %d]; %s" % (batch, context, note))
    net.op("TensorProtosDBInput", ["optimizer_iteration"] if train else [],
           ["tokens", "targets"], args)


# ---- command line and vocabulary ----------------------------------------------------


def read_vocab_size(path):
    """V from make-db's vocab.txt, whose first line is `demitasse-vocab 1 char N` or
    `demitasse-vocab 1 byte 256`."""
    with open(path, encoding="utf-8") as f:
        first = f.readline().split()
    if (len(first) != 4 or first[0] != "demitasse-vocab" or first[1] != "1"
            or first[2] not in ("char", "byte") or not first[3].isdigit()):
        raise SystemExit("%s: the first line is %r; expected 'demitasse-vocab 1 char N' or "
                         "'demitasse-vocab 1 byte 256'" % (path, " ".join(first)))
    v = int(first[3])
    if first[2] == "byte" and v != 256:
        raise SystemExit("%s: a byte vocabulary has 256 entries, not %d" % (path, v))
    if v < 2:
        raise SystemExit("%s: a vocabulary of %d entries" % (path, v))
    return v


def parse_args(prog, doc, default_batch):
    ap = argparse.ArgumentParser(prog=prog, description=doc)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256, help="D, the model width")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=128, help="T, tokens per sequence")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--vocab", type=int, help="V, the vocabulary size")
    g.add_argument("--vocab-file", help="make-db's vocab.txt, whose first line gives V")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=1,
                    help="the first random fill's seed (each fill takes the next) and the "
                         "training DB's shuffle seed")
    ap.add_argument("--batch", type=int, default=default_batch, help="sequences per batch")
    a = ap.parse_args()
    if a.vocab_file:
        a.vocab = read_vocab_size(a.vocab_file)
    for name in ("layers", "width", "heads", "context", "vocab", "batch"):
        if getattr(a, name) < 1:
            ap.error("--%s must be at least 1" % name)
    if a.width % a.heads:
        ap.error("--width %d is not a multiple of --heads %d" % (a.width, a.heads))
    if a.vocab < 2:
        ap.error("--vocab must be at least 2")
    return a


def config_line(prog, a):
    """The command that regenerates these nets, for each file's header."""
    return ("%s --layers %d --width %d --heads %d --context %d --vocab %d --seed %d --batch %d"
            % (prog, a.layers, a.width, a.heads, a.context, a.vocab, a.seed, a.batch))


def write(out_dir, filename, net):
    """Written to a temporary file beside it and renamed over, so a reader never sees
    half a net."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, filename)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(net.text())
    os.replace(tmp, path)
