"""models_regen_test.py: the checked-in GPT and BERT nets are what their generators write.

    models_regen_test.py SOURCE_ROOT

For models/gpt and models/bert: the command in the second header line of the init net
(the generator writes it there) is run into a temporary folder, and every generated
.pbtxt must be byte-identical to the checked-in one, and no checked-in .pbtxt may be
missing from the output. The command must be the documented default (4 layers, width
256, 4 heads, context 128); where Debian's fortunes files are installed, its --vocab
must be the char vocabulary of the files the README names (char_vocab.py). The
configuration and the corpus are regen.py's. Then the generators' --vocab-file and
their refusals (check_cli).
"""
import filecmp
import os
import shlex
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_common as lm  # noqa: E402


def main():
    src = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.join(src, "models", "transformer"))
    import regen  # the default configuration and the corpus
    FORTUNES, CORPUS = regen.FORTUNES, regen.CORPUS
    DEFAULT = dict(zip(regen.DEFAULT[::2], regen.DEFAULT[1::2]))
    vocab = None
    if all(os.path.exists(os.path.join(FORTUNES, f)) for f in CORPUS):
        vocab = lm.run([sys.executable, os.path.join(src, "models/transformer/char_vocab.py")]
                       + [os.path.join(FORTUNES, f) for f in CORPUS]).strip()
    else:
        print("fortunes not installed: the vocabulary size is not recomputed")
    for model in ("gpt", "bert"):
        folder = os.path.join(src, "models", model)
        with open(os.path.join(folder, model + "_init.pbtxt"), encoding="utf-8") as f:
            f.readline()
            cmd = shlex.split(f.readline().lstrip("#").strip())
        opts = dict(zip(cmd[1::2], cmd[2::2]))
        for k, v in DEFAULT.items():
            if opts.get(k) != v:
                lm.fail("%s: the checked-in nets were made with %s %s, not the default %s"
                        % (model, k, opts.get(k), v))
        if vocab is not None and opts.get("--vocab") != vocab:
            lm.fail("%s: --vocab %s, but the corpus %s has %s code points"
                    % (model, opts.get("--vocab"), " ".join(CORPUS), vocab))
        with tempfile.TemporaryDirectory(prefix="dm_regen_") as d:
            lm.run([sys.executable, os.path.join(src, cmd[0])] + cmd[1:] + ["--out-dir", d])
            made = sorted(f for f in os.listdir(d) if f.endswith(".pbtxt"))
            have = sorted(f for f in os.listdir(folder) if f.endswith(".pbtxt"))
            if made != have:
                lm.fail("%s: the generator writes %s, the folder holds %s" % (model, made, have))
            for name in made:
                if not filecmp.cmp(os.path.join(d, name), os.path.join(folder, name), shallow=False):
                    lm.fail("models/%s/%s differs from what `%s` writes now: regenerate it"
                            % (model, name, " ".join(cmd)))
            print("%s: %s regenerate byte for byte" % (model, ", ".join(made)))
    check_cli(src)
    print("PASS")


def check_cli(src):
    """--vocab-file reads V from make-db's vocab.txt header: the same nets as --vocab V;
    a byte vocabulary is 256; a malformed header, or a width that the heads do not
    divide, is refused naming the problem."""
    import subprocess
    with tempfile.TemporaryDirectory(prefix="dm_gen_cli_") as d:
        def gen(model, out, *extra):
            script = os.path.join(src, "models", model, "make_%s.py" % model)
            return subprocess.run([sys.executable, script, "--layers", "1", "--width", "8",
                                   "--heads", "2", "--context", "4", "--out-dir",
                                   os.path.join(d, out)] + list(extra),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True)

        for name, text in (("char.txt", "demitasse-vocab 1 char 37\na\n"),
                           ("byte.txt", "demitasse-vocab 1 byte 256\n"),
                           ("bad.txt", "vocab 37\n"), ("badbyte.txt", "demitasse-vocab 1 byte 37\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        for model in ("gpt", "bert"):
            char = os.path.join(d, "char.txt")
            for args, out in ((("--vocab", "37"), "v"), (("--vocab-file", char), "f")):
                p = gen(model, model + out, *args)
                if p.returncode:
                    lm.fail("%s %s: %s" % (model, args, p.stderr))
            for name in os.listdir(os.path.join(d, model + "v")):
                a, b = (os.path.join(d, model + k, name) for k in "vf")
                if not filecmp.cmp(a, b, shallow=False):
                    lm.fail("%s: --vocab-file (char 37) and --vocab 37 write different %s" % (model, name))
            p = gen(model, model + "b", "--vocab-file", os.path.join(d, "byte.txt"))
            with open(os.path.join(d, model + "b", model + "_init.pbtxt")) as f:
                if p.returncode or "--vocab 256 " not in f.read():
                    lm.fail("%s: a byte vocab.txt does not give V = 256: %s" % (model, p.stderr))
            refusals = ((("--vocab-file", os.path.join(d, "bad.txt")), "bad.txt: the first line"),
                        (("--vocab-file", os.path.join(d, "badbyte.txt")), "a byte vocabulary has 256"),
                        (("--vocab", "37", "--heads", "3"), "is not a multiple of --heads 3"))
            for args, want in refusals:
                p = gen(model, model + "x", *args)
                if p.returncode == 0 or want not in p.stderr:
                    lm.fail("%s %s: exit %d, stderr %r; expected a refusal saying %r"
                            % (model, args, p.returncode, p.stderr, want))
    print("generators: --vocab-file gives --vocab's nets, byte vocabularies are 256, bad "
          "headers and widths refused")


if __name__ == "__main__":
    main()
