#!/usr/bin/env python3
"""check_calls.py: fails on a call that points up the layers, and on a cycle of calls.

check_includes.py sees what a file includes; a file can still call up without including
anything of the layer above (a function declared in a lower header, defined higher up).
This check reads what the build's objects define and use instead: `nm` on each object of
the library (and the CLI's), each object mapped to its source file through the build's
compile_commands.json (the nvcc objects, build/gpu/NAME.o, to gpu/NAME.cu). A symbol
an object uses (U) and another object defines is an edge between their source files:
a call, or a reference to a table or variable, which is a dependency all the same.

Fails on
  (a) an edge from a lower layer to a higher one, with the same order as the include
      check (proto < core < operators, gpu < net < tools; operators never reach gpu),
      unless the symbol is listed in ALLOWED_UPWARD with the reason it may;
  (b) any cycle between files (a strongly connected set of two files or more), the
      files and one cycle through them printed, unless listed in KNOWN_CYCLES.

Usage: check_calls.py --build DIR [--nm NM]
Prints each problem, then how many objects, symbols and edges it read; exits 1 on a
problem, or when it read no edges (a check that finds nothing checks nothing).

check_calls.py --self-test runs the same analysis on synthetic symbol tables: a clean
one passes; a planted upward call, a planted cycle, an allowed upward call, a known
cycle, and stale entries of both lists each give exactly the expected report.
"""
import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys

LAYERS = {"proto": 0, "core": 1, "operators": 2, "gpu": 2, "net": 3, "tools": 4}
FORBIDDEN_SIDEWAYS = {("operators", "gpu")}
# Upward references that are by design, as (calling layer, symbol pattern) -> why. Each
# must still occur (a stale entry is an error), so the list cannot outlive its reason.
# Allowed edges are left out of the cycle search too: each would close a cycle with the
# downward calls that registration makes (net/init.c -> operators/builtin.c -> ...).
# Empty: what kernels and gradient makers call is core's (core/op_ctx.c, core/grad_ctx.c),
# and what those need of net/ is handed down to them (a field, a callback).
ALLOWED_UPWARD = {}
# Cycles between files being removed elsewhere, as sets of files: printed as notes. One
# that no longer occurs exactly so is an error, so the list cannot outlive the fix.
KNOWN_CYCLES = []
# nm's letters for a symbol an object defines globally (weak ones included).
DEFINED = set("TDBRCGSVWiu")


def layer_of(rel):
    top = rel.split("/", 1)[0]
    return top if top in LAYERS else None


def nm_symbols(nm, path):
    """(defined, undefined) global symbol names of one object."""
    out = subprocess.run([nm, "-P", "--no-sort", path], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in DEFINED:
            defined.add(name)
    return defined, undefined


def source_of(build, entry):
    """The root-relative source file of a compile_commands entry, or None outside ours."""
    f = entry["file"]
    path = os.path.normpath(os.path.join(entry.get("directory", build), f))
    root = os.path.normpath(os.path.join(build, ".."))
    for base in (root, os.path.normpath(build)):  # generated sources live in the build
        rel = os.path.relpath(path, base).replace(os.sep, "/")
        if not rel.startswith("../") and layer_of(rel):
            return rel
    return None


def object_tables(build, nm):
    """{source file: (defined, undefined)} for the library's and the CLI's objects."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    tables = {}
    for e in entries:
        out = e.get("output", "")
        if not (out.startswith("libdemitasse_static.a.p/") or out.startswith("tools/demitasse.p/")):
            continue
        src = source_of(build, e)
        obj = os.path.join(build, out)
        if src and os.path.isfile(obj):
            d, u = nm_symbols(nm, obj)
            old = tables.get(src, (set(), set()))
            tables[src] = (old[0] | d, old[1] | u)
    gpu_objs = os.path.join(build, "gpu")
    root = os.path.normpath(os.path.join(build, ".."))
    if os.path.isdir(gpu_objs):  # nvcc's objects (gpu/meson.build's custom_target)
        for name in sorted(os.listdir(gpu_objs)):
            stem = name[:-2] if name.endswith(".o") else None
            if stem and os.path.isfile(os.path.join(root, "gpu", stem + ".cu")):
                tables[f"gpu/{stem}.cu"] = nm_symbols(nm, os.path.join(gpu_objs, name))
    return tables


def edges_of(tables):
    """{(from file, to file): sorted symbols} and the symbol count."""
    definer = {}
    for src, (defined, _) in tables.items():
        for s in defined:
            definer.setdefault(s, set()).add(src)
    edges = {}
    for src, (_, undefined) in tables.items():
        for s in undefined:
            for dst in definer.get(s, ()):
                if dst != src:
                    edges.setdefault((src, dst), set()).add(s)
    return {k: sorted(v) for k, v in edges.items()}, len(definer)


def cycles(nodes, edges):
    """The strongly connected sets of two files or more (Tarjan), each sorted."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):  # iterative, so a long chain cannot hit Python's recursion limit
        work = [(v, iter(sorted(succ.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out)


def one_cycle(comp, edges):
    """A path a -> ... -> a inside the strongly connected set comp, for the message."""
    inside = set(comp)
    succ = {}
    for a, b in edges:
        if a in inside and b in inside:
            succ.setdefault(a, []).append(b)
    start = comp[0]
    prev, frontier = {start: None}, [start]
    while frontier:  # breadth-first back to start: the shortest cycle through it
        nxt = []
        for a in frontier:
            for b in sorted(succ.get(a, ())):
                if b == start:
                    path = [a]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, a, start]
                if b not in prev:
                    prev[b] = a
                    nxt.append(b)
        frontier = nxt
    return comp


def allowed_why(allowed, layer, symbol):
    """(key, reason) of the ALLOWED_UPWARD entry covering a call from `layer`, or None."""
    for key, why in allowed.items():
        if key[0] == layer and fnmatch.fnmatchcase(symbol, key[1]):
            return key, why
    return None


def check(tables, allowed, known_cycles=()):
    """(problems, notes, n_edges, n_symbols) for symbol tables {file: (defined, undefined)}."""
    edges, n_symbols = edges_of(tables)
    problems, notes, used = [], [], set()
    cycle_edges = dict(edges)
    for (src, dst), syms in sorted(edges.items()):
        a, b = layer_of(src), layer_of(dst)
        if not (LAYERS[b] > LAYERS[a] or (a, b) in FORBIDDEN_SIDEWAYS):
            continue
        bad, ok = [], []
        for s in syms:
            hit = allowed_why(allowed, a, s)
            if hit:
                used.add(hit[0])
                ok.append(s)
            else:
                bad.append(s)
        if ok:
            key, why = allowed_why(allowed, a, ok[0])
            notes.append(f"{src}: note: uses {key[1]} of {dst} upward, allowed: {why}")
        if bad:
            problems.append(f"{src}: upward call into {dst} (layer {a} calls layer {b}): "
                            + ", ".join(bad))
        else:
            del cycle_edges[(src, dst)]
    for key in sorted(set(allowed) - used):
        problems.append(f"{key[1]} from {key[0]} is no longer used upward: remove it from "
                        "ALLOWED_UPWARD in tests/layering/check_calls.py")
    known = [sorted(k) for k in known_cycles]
    seen_known = []
    for comp in cycles(tables.keys(), cycle_edges):
        path = one_cycle(comp, cycle_edges)
        hops = [f"{x} ({', '.join(cycle_edges[(x, y)][:2])})" for x, y in zip(path, path[1:])]
        text = (f"call cycle between {len(comp)} files ({', '.join(comp)}): "
                + " -> ".join(hops) + f" -> {path[-1]}")
        if comp in known:
            seen_known.append(comp)
            notes.append("note: known " + text + " (KNOWN_CYCLES)")
        else:
            problems.append(text)
    for comp in known:
        # stale only where this build compiles every file of it (no oneDNN: no dnnl/)
        if comp not in seen_known and set(comp) <= set(tables):
            problems.append(f"no longer a cycle as listed: {', '.join(comp)}: remove it from "
                            "KNOWN_CYCLES in tests/layering/check_calls.py")
    return problems, notes, len(edges), n_symbols


def run(build, nm):
    if not os.path.isfile(os.path.join(build, "compile_commands.json")):
        print(f"error: no compile_commands.json in {build}")
        return 1
    tables = object_tables(build, nm)
    problems, notes, n_edges, n_symbols = check(tables, ALLOWED_UPWARD, KNOWN_CYCLES)
    for line in notes + problems:
        print(line)
    print(f"read {len(tables)} objects, {n_symbols} defined symbols, {n_edges} edges between "
          f"files under {build}")
    if n_edges == 0:
        print("error: read no edges; the check would check nothing")
        return 1
    if problems:
        print(f"{len(problems)} call layering error(s); the order is proto < core < operators, "
              "gpu < net < tools (operators never call gpu), and no file cycle")
        return 1
    return 0


def self_test():
    clean = {
        "proto/p.c": ({"proto_pack"}, set()),
        "core/tensor.c": ({"dm_tensor_new"}, {"proto_pack"}),
        "core/op_ctx.c": ({"dm_op_input"}, {"dm_tensor_new"}),
        "operators/conv.c": ({"conv_kernels"}, {"dm_op_input", "dm_tensor_new"}),
        "gpu/conv.cu": ({"conv_cuda"}, set()),
        "gpu/register.c": ({"gpu_register"}, {"conv_cuda", "conv_kernels", "dm_op_input"}),
        "net/net.c": ({"dm_net_run"}, {"dm_graph_run", "dm_op_input"}),
        "net/graph.c": ({"dm_graph_run"}, {"dm_tensor_new"}),
        "tools/main.c": ({"main"}, {"dm_net_run", "printf"}),
        "core/fileio.c": ({"dm_file_replace"}, set()),  # called by no one: a planted
        "operators/fill.c": ({"fill_kernels"}, set()),  # call from here closes no cycle
    }
    failures = []

    def planted(extra_u):
        t = {k: (set(d), set(u)) for k, (d, u) in clean.items()}
        for f, syms in extra_u.items():
            t[f][1].update(syms)
        return t

    problems, notes, n_edges, _ = check(clean, {})
    if problems or notes or n_edges != 11:
        failures.append(f"clean tables: expected 11 edges and no report, got {n_edges}, "
                        f"{problems}, {notes}")
    cases = [
        ({"core/fileio.c": {"dm_net_run"}},
         ["core/fileio.c: upward call into net/net.c (layer core calls layer net): dm_net_run"]),
        ({"operators/fill.c": {"conv_cuda"}},
         ["operators/fill.c: upward call into gpu/conv.cu (layer operators calls layer gpu): "
          "conv_cuda"]),
        # an upward call with a way back down is a cycle as well
        ({"core/tensor.c": {"dm_net_run"}},
         ["core/tensor.c: upward call into net/net.c (layer core calls layer net): dm_net_run",
          "call cycle between 4 files (core/op_ctx.c, core/tensor.c, net/graph.c, net/net.c): "
          "core/op_ctx.c "
          "(dm_tensor_new) -> core/tensor.c (dm_net_run) -> net/net.c (dm_op_input) -> "
          "core/op_ctx.c"]),
        ({"net/graph.c": {"dm_net_run"}},
         ["call cycle between 2 files (net/graph.c, net/net.c): net/graph.c (dm_net_run) -> "
          "net/net.c (dm_graph_run) -> net/graph.c"]),
    ]
    for extra, expected in cases:
        problems, _, _, _ = check(planted(extra), {})
        if problems != expected:
            failures.append(f"planted {extra}: expected {expected}, got {problems}")
    # an upward call into a cycle is reported both ways: as upward, and as the cycle
    problems, _, _, _ = check(planted({"core/tensor.c": {"dm_op_input"}}), {})
    if problems != ["call cycle between 2 files (core/op_ctx.c, core/tensor.c): core/op_ctx.c "
                    "(dm_tensor_new) -> core/tensor.c (dm_op_input) -> core/op_ctx.c"]:
        failures.append(f"a same-layer cycle: got {problems}")
    # allowed: a note, and left out of the cycle search; stale: an error
    allowed = {("core", "dm_net_*"): "a reason"}
    problems, notes, _, _ = check(planted({"core/tensor.c": {"dm_net_run"}}), allowed)
    if problems or notes != ["core/tensor.c: note: uses dm_net_* of net/net.c upward, "
                             "allowed: a reason"]:
        failures.append(f"an allowed upward call: got {problems}, {notes}")
    problems, _, _, _ = check(clean, allowed)
    if problems != ["dm_net_* from core is no longer used upward: remove it from "
                    "ALLOWED_UPWARD in tests/layering/check_calls.py"]:
        failures.append(f"a stale allowed entry: got {problems}")
    # a known cycle: a note; gone: an error
    known = [{"net/graph.c", "net/net.c"}]
    problems, notes, _, _ = check(planted({"net/graph.c": {"dm_net_run"}}), {}, known)
    if problems or len(notes) != 1 or not notes[0].startswith("note: known call cycle"):
        failures.append(f"a known cycle: got {problems}, {notes}")
    problems, _, _, _ = check(clean, {}, known)
    if problems != ["no longer a cycle as listed: net/graph.c, net/net.c: remove it from "
                    "KNOWN_CYCLES in tests/layering/check_calls.py"]:
        failures.append(f"a stale known cycle: got {problems}")
    # a known cycle through a file this build does not compile (dnnl/ without oneDNN): quiet
    problems, _, _, _ = check(clean, {}, [{"net/net.c", "net/not_built.c"}])
    if problems:
        failures.append(f"a known cycle of a file not built: got {problems}")
    if check({}, {})[2] != 0:
        failures.append("empty tables have edges")
    for f in failures:
        print("self-test FAILED: " + f)
    if not failures:
        print("self-test passed: clean tables pass (11 edges); a planted upward call (core -> "
              "net, operators -> gpu) and a planted cycle (net/graph.c <-> net/net.c, one "
              "inside core, one through an upward call) are each reported; allowed calls and "
              "known cycles are notes until they go stale")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="the build directory (with compile_commands.json)")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.build:
        ap.error("--build is required")
    return run(os.path.normpath(a.build), a.nm)


if __name__ == "__main__":
    sys.exit(main())
