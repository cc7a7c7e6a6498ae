#!/usr/bin/env python3
"""check_includes.py: fails on an #include that points up the layers.

The layers, lowest first (DESIGN.md, "Includes point down only"):

    proto 0 < core 1 < operators 2, gpu 2 < net 3 < tools 4

gpu may include operators (their schemas); operators must not include gpu. A file may
include its own layer or any lower one. Generated headers (dm_config.h,
proto/caffe2.pb-c.h) belong to the proto layer (build/proto).

Every #include in proto/ core/ operators/ gpu/ net/ tools/ (.c .h .cu .cuh) is resolved
the way the compiler would: a quoted name against the including file's folder first,
then against the build's include directories (the project root and core/); an <angle>
name against the include directories only (one that does not resolve there is a system
header). A quoted name that resolves nowhere is an error too, so a renamed header cannot
hide an edge. An edge listed in KNOWN_EDGES (being removed in another branch) is printed
as a note; one listed there that no longer occurs is an error.

Files that include each other, directly or around a longer loop, are an error too
(include guards make such a loop compile, but neither file can then be read alone).

Usage: check_includes.py [--root DIR]
Prints "file:line: upward include of X (layer A includes layer B)" for each upward edge
and exits 1 if there was any; prints how many files and includes it read, and exits 1
if it read none (a check that finds nothing checks nothing).

check_includes.py --self-test builds a tiny tree in a temporary folder, with one upward
include planted, and checks that the check finds exactly that edge (and that a clean
tree passes): so the real run cannot pass silently because it stopped seeing files.
"""
import argparse
import contextlib
import io
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_calls import cycles  # noqa: E402  (the same strongly-connected search)

LAYERS = {"proto": 0, "core": 1, "operators": 2, "gpu": 2, "net": 3, "tools": 4}
# Same rank, but one may not include the other: (includer, included).
FORBIDDEN_SIDEWAYS = {("operators", "gpu")}
GENERATED = {"dm_config.h": "proto", "proto/caffe2.pb-c.h": "proto", "proto/onnx.pb-c.h": "proto"}
INCLUDE_DIRS = ["", "core"]  # relative to the project root, as dm_inc in meson.build
EXTENSIONS = (".c", ".h", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
# Upward edges being removed in another branch, as (file, included file): reported as
# known rather than as errors. An entry that no longer occurs is an error, so the list
# cannot outlive the fix. Empty: there are none.
KNOWN_EDGES = set()


def layer_of(relpath):
    """The layer of a path relative to the root, or None outside the layers."""
    top = relpath.split("/", 1)[0]
    return top if top in LAYERS else None


def source_files(root):
    for layer in sorted(LAYERS):
        base = os.path.join(root, layer)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def resolve(root, includer, name, quoted):
    """The included file as a root-relative path (or a GENERATED key), or None."""
    candidates = []
    if quoted:
        candidates.append(os.path.dirname(includer))
    candidates += INCLUDE_DIRS
    for d in candidates:
        rel = os.path.normpath(os.path.join(d, name)).replace(os.sep, "/")
        if rel.startswith("../"):
            continue
        if rel in GENERATED:
            return rel
        if os.path.isfile(os.path.join(root, rel)):
            return rel
    return None


def check(root, known=frozenset()):
    """Returns (files, includes, problems, notes), the last two as printable lines. Edges
    in `known` are notes rather than problems; a `known` edge not seen is a problem."""
    n_files = n_includes = 0
    problems, notes = [], []
    seen_known = set()
    graph, files_seen = {}, []
    for rel in source_files(root):
        files_seen.append(rel)
        n_files += 1
        src_layer = layer_of(rel)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                quoted, name = m.group(1) == '"', m.group(2)
                target = resolve(root, rel, name, quoted)
                if target is None:
                    if quoted:
                        n_includes += 1
                        problems.append(f'{rel}:{lineno}: cannot resolve include "{name}"')
                    continue  # <system header>
                n_includes += 1
                if target != rel:
                    graph.setdefault((rel, target), lineno)
                dst_layer = GENERATED.get(target) or layer_of(target)
                if dst_layer is None:
                    problems.append(f"{rel}:{lineno}: include of {target}, outside the layers")
                    continue
                if (LAYERS[dst_layer] > LAYERS[src_layer]
                        or (src_layer, dst_layer) in FORBIDDEN_SIDEWAYS):
                    if (rel, target) in known:
                        seen_known.add((rel, target))
                        notes.append(f"{rel}:{lineno}: note: known upward include of "
                                     f"{target}, being removed elsewhere (KNOWN_EDGES)")
                        continue
                    problems.append(f"{rel}:{lineno}: upward include of {target} "
                                    f"(layer {src_layer} includes layer {dst_layer})")
    for comp in cycles(files_seen, graph):
        inside = set(comp)
        where = [f"{a}:{graph[(a, b)]} includes {b}" for a, b in sorted(graph)
                 if a in inside and b in inside]
        problems.append(f"include cycle between {', '.join(comp)}: " + "; ".join(where))
    for rel, target in sorted(set(known) - seen_known):
        problems.append(f"{rel}: no longer includes {target} upward: remove it from "
                        "KNOWN_EDGES in tests/layering/check_includes.py")
    return n_files, n_includes, problems, notes


def run(root):
    n_files, n_includes, problems, notes = check(root, KNOWN_EDGES)
    for line in notes + problems:
        print(line)
    print(f"read {n_includes} project includes in {n_files} files under {root}")
    if n_includes == 0:
        print("error: read no includes; the check would check nothing")
        return 1
    if problems:
        print(f"{len(problems)} layering error(s); the order is "
              "proto < core < operators, gpu < net < tools (operators never include gpu)")
        return 1
    return 0


def self_test():
    files = {
        "core/a.h": '#include "tensor.h"\n#include <stdio.h>\n',
        "core/tensor.h": '#include "dm_config.h"\n#include "proto/caffe2.pb-c.h"\n',
        "operators/op.c": '#include "core/a.h"\n#include "a.h"\n#include "op.h"\n',
        "operators/op.h": "",
        "gpu/k.cu": '#include "operators/op.h"\n#include "k.cuh"\n',
        "gpu/k.cuh": "",
        "net/net.h": '#include "core/a.h"\n',
        "net/net.c": '#include "net.h"\n#include "gpu/k.cuh"\n',
        "tools/main.c": '#include "net/net.h"\n#include <demitasse.h>\n',
        "core/demitasse.h": "",
    }
    failures = []
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        n_files, n_includes, problems, _ = check(root)
        if (n_files, n_includes, problems) != (10, 13, []):
            failures.append(f"clean tree: expected (10 files, 13 includes, no errors), got "
                            f"({n_files}, {n_includes}, {problems})")
        cases = [
            ("core/demitasse.h", '#include "net/net.h"\n',
             "core/demitasse.h:1: upward include of net/net.h (layer core includes layer net)"),
            ("operators/op.c", '#include "gpu/k.cuh"\n',
             "operators/op.c:4: upward include of gpu/k.cuh "
             "(layer operators includes layer gpu)"),
            ("net/net.c", '#include "tools/x.h"\n', 'net/net.c:3: cannot resolve include "tools/x.h"'),
            ("gpu/k.cuh", '#include "../net/net.h"\n',
             "gpu/k.cuh:1: upward include of net/net.h (layer gpu includes layer net)"),
            ("core/tensor.h", '#include "a.h"\n',
             "include cycle between core/a.h, core/tensor.h: core/a.h:1 includes "
             "core/tensor.h; core/tensor.h:3 includes core/a.h"),
        ]
        for rel, line, expected in cases:
            path = os.path.join(root, rel)
            with open(path) as f:
                before = f.read()
            with open(path, "w") as f:
                f.write(before + line)
            _, _, problems, _ = check(root)
            if problems != [expected]:
                failures.append(f"planted {line.strip()} in {rel}: expected [{expected}], "
                                f"got {problems}")
            with open(path, "w") as f:
                f.write(before)
        # a known edge is a note, not an error; a known edge that is gone is an error
        known = {("net/net.c", "tools/main.c")}
        _, _, problems, notes = check(root, known)
        if notes or problems != ["net/net.c: no longer includes tools/main.c upward: remove it "
                                 "from KNOWN_EDGES in tests/layering/check_includes.py"]:
            failures.append(f"a stale known edge: got problems {problems}, notes {notes}")
        with open(os.path.join(root, "net/net.c"), "a") as f:
            f.write('#include "tools/main.c"\n')
        _, _, problems, notes = check(root, known)
        if problems or notes != ["net/net.c:3: note: known upward include of tools/main.c, "
                                 "being removed elsewhere (KNOWN_EDGES)"]:
            failures.append(f"a known edge: got problems {problems}, notes {notes}")
        # a tree with no sources must fail, not pass with nothing checked
        empty = os.path.join(root, "empty")
        os.makedirs(empty)
        if check(empty)[:2] != (0, 0):
            failures.append("an empty tree has includes")
        with contextlib.redirect_stdout(io.StringIO()):
            if run(empty) != 1:
                failures.append("an empty tree passed")
    for f in failures:
        print("self-test FAILED: " + f)
    if not failures:
        print("self-test passed: a clean tree passes (10 files, 13 includes), each planted "
              "upward or unresolvable include, and a planted include cycle, is reported at its "
              "file:line, known edges are "
              "notes until they go stale, an empty tree fails")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    return run(os.path.normpath(a.root))


if __name__ == "__main__":
    sys.exit(main())
