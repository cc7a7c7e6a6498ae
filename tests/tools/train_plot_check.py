#!/usr/bin/env python3
"""train_plot_check.py: train's SVG plot has labelled ticks on both axes of both panels,
and its training curves are the trailing-window mean the legend names, not the per-batch
zigzag (issue 12, Deliver 6: a readable plot).

Writes a small metrics CSV with zigzagging per-batch loss and accuracy (one row without
an accuracy, tests every 10 iterations; then again with a row every 7th iteration, as a
resumed run's CSV logged every N has them, and a single test pass, which must still be
drawn: a mark per pass), has plot_csv draw it as train does, then reads
the SVG back: the tick labels and their positions give each axis's pixel-to-value map,
through which the polylines' points are turned back into values and compared with a
window mean computed here, independently of the C code.

usage: train_plot_check.py PLOT_CSV
"""
import math
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

WINDOW = 20  # what the legend must say
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)
        print("FAIL:", what)


def rows(step, tested):
    out = []
    for i in range(1, 58):
        if i % step and i != 57:
            continue
        loss = 2.0 * math.exp(-i / 20) + 0.2 * (-1) ** i
        acc = None if i == 30 else 0.5 + 0.3 * (-1) ** i + 0.004 * i
        test = tested(i)
        out.append((i, loss, acc, 1.5 - 0.01 * i if test else None, 0.4 + 0.01 * i if test else None))
    return out


def window_means(values):
    """values: (iter, v or None); at each present v, the mean of the present values of
    the last WINDOW iterations (however many rows those are)."""
    out = []
    for it, v in values:
        if v is None:
            continue
        last = [w for i, w in values if w is not None and it - WINDOW < i <= it]
        out.append((it, sum(last) / len(last)))
    return out


def axis_map(pairs, what):
    """pairs: (label value, pixel). A linear pixel -> value map, checked on every tick."""
    check(len(pairs) >= 3, f"{what}: {len(pairs)} tick labels, wanted at least 3")
    if len(pairs) < 2:
        return None
    (v0, p0), (v1, p1) = pairs[0], pairs[-1]
    scale = (v1 - v0) / (p1 - p0)
    for v, p in pairs:
        check(abs(v0 + (p - p0) * scale - v) <= abs(scale) * 0.01,
              f"{what}: tick {v} is not where the others put it")
    return lambda p: v0 + (p - p0) * scale, abs(scale)


def points(poly):
    return [tuple(float(c) for c in xy.split(",")) for xy in poly.get("points").split()]


def compare(poly, xmap, ymap, want, what):
    if poly is None:
        check(False, f"{what}: no polyline")
        return
    got = [(xmap[0](x), ymap[0](y)) for x, y in points(poly)]
    check(len(got) == len(want), f"{what}: {len(got)} points, wanted {len(want)}")
    tol_x, tol_y = xmap[1] * 0.01 + 1e-9, ymap[1] * 0.01 + 1e-9
    for (gi, gv), (wi, wv) in zip(got, want):
        if abs(gi - wi) > tol_x or abs(gv - wv) > tol_y:
            check(False, f"{what}: point at iteration {gi:.3f} is {gv:.6f}; wanted {wi}, {wv:.6f}")
            break


def check_case(plot_csv, step, tested):
    data = rows(step, tested)
    with tempfile.TemporaryDirectory() as d:
        csv = os.path.join(d, "metrics.csv")
        with open(csv, "w") as f:
            f.write("iter,loss,accuracy,test_loss,test_accuracy,images_per_s,loss_scale,skipped\n")
            for it, loss, acc, tl, ta in data:
                cell = lambda v: "" if v is None else repr(v)
                f.write(f"{it},{loss!r},{cell(acc)},{cell(tl)},{cell(ta)},100,,0\n")
        subprocess.run([plot_csv, csv, "1000"], check=True)
        svg = ET.parse(os.path.join(d, "metrics.svg")).getroot()

    ns = "{http://www.w3.org/2000/svg}"
    texts = list(svg.iter(ns + "text"))
    yticks = [t for t in texts if t.get("class") == "ytick"]
    xticks = [t for t in texts if t.get("class") == "xtick"]
    # the panels' y axes sit at distinct x: one group of y ticks per panel, left to right
    axis_x = sorted({float(t.get("x")) for t in yticks})
    check(len(axis_x) == 2, f"y tick labels at {len(axis_x)} x positions, wanted 2 panels")
    if len(axis_x) != 2:
        return
    maps = []
    for k, ax in enumerate(axis_x):
        name = ["loss", "accuracy"][k]
        ys = sorted(((float(t.text), float(t.get("y"))) for t in yticks if float(t.get("x")) == ax),
                    key=lambda vp: vp[1])
        right = axis_x[1] if k == 0 else math.inf
        xs = sorted(((float(t.text), float(t.get("x"))) for t in xticks
                     if ax < float(t.get("x")) < right), key=lambda vp: vp[1])
        check(all(t.get("dominant-baseline") == "middle" for t in yticks),
              "y tick labels are not centred on their ticks")
        maps.append((axis_map(xs, f"{name} x axis"), axis_map(ys, f"{name} y axis")))
        if maps[-1][0] and maps[-1][1]:
            check(xs[0][0] == 0 and xs[-1][0] >= 57, f"{name}: x ticks {xs} do not span 0..57")

    polys = list(svg.iter(ns + "polyline"))
    by = lambda cls: [p for p in polys if p.get("class") == cls]
    smoothed, test, raw = by("train-smoothed"), by("test"), by("train-raw")
    check(len(smoothed) == 2 and len(test) == 2, "each panel has one smoothed and one test series")
    check(len(raw) == 1, "only the loss panel keeps the per-batch values (faint)")
    legend = " ".join("".join(t.itertext()) for t in texts if t.get("class") == "legend")
    check(f"mean of the last {WINDOW} iterations" in legend, f"legend does not name the window: {legend}")
    marks = [c for c in svg.iter(ns + "circle") if c.get("class") == "test-mark"]
    n_tests = sum(r[3] is not None for r in data)
    check(len(marks) == 2 * n_tests, f"{len(marks)} test marks, wanted {n_tests} per panel")
    if fails or len(smoothed) != 2:
        return

    (lx, ly), (axx, axy) = maps
    compare(smoothed[0], lx, ly, window_means([(r[0], r[1]) for r in data]), "smoothed loss")
    compare(raw[0], lx, ly, [(r[0], r[1]) for r in data], "per-batch loss")
    compare(smoothed[1], axx, axy, window_means([(r[0], r[2]) for r in data]), "smoothed accuracy")
    compare(test[1], axx, axy, [(r[0], r[4]) for r in data if r[4] is not None], "test accuracy")


check_case(sys.argv[1], 1, lambda i: i % 10 == 0)
check_case(sys.argv[1], 7, lambda i: i == 56)
print("train plot:", "FAILED" if fails else "ok")
sys.exit(1 if fails else 0)
