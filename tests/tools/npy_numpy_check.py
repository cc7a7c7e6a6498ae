#!/usr/bin/python3
"""npy_numpy_check.py: .npy files against NumPy, an independent implementation.

For every supported dtype and a range of shapes: np.save writes a file, npy_copy (our
dm_npy_load + dm_npy_save) copies it (all files in one run), and the copy must (1) load
in NumPy with the same dtype, shape and values, and (2) be byte-identical to np.save's own output. Big-endian
and version 2.0 inputs must come back little-endian and version 1.0. Fortran-order
arrays must be refused. Exits 77 (skipped) when NumPy is not installed.

usage: npy_numpy_check.py NPY_COPY WORKDIR
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from numpy.lib import format as npformat
except ImportError:
    print("numpy not installed: skipped")
    sys.exit(77)


def main():
    # the files live only as long as the check: a TemporaryDirectory removes them
    with tempfile.TemporaryDirectory(prefix="dm_npy_numpy_",
                                     dir=sys.argv[2] if len(sys.argv) > 2 else None) as work:
        return check(sys.argv[1], work)


def check(tool, work):
    rng = np.random.default_rng(1234)
    dtypes = ["<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "|b1"]
    shapes = [(), (0,), (1,), (7,), (3, 4), (2, 0, 5), (2, 3, 4, 5), (1,) * 8, (100,)]
    cases = []  # (label, expected array, file written by np.save, our copy)
    for dt in dtypes:
        for shape in shapes:
            if dt == "|b1":
                a = rng.integers(0, 2, size=shape).astype(dt)
            elif dt[1] in "iu":
                info = np.iinfo(np.dtype(dt))
                a = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.dtype(dt))
            else:
                a = (rng.standard_normal(size=shape) * 1000).astype(dt)
                if a.size >= 4:
                    a.flat[0], a.flat[1], a.flat[2] = np.inf, -np.inf, np.nan
            variants = [("le", a)]
            if dt[0] == "<":
                variants.append(("be", a.astype(dt.replace("<", ">"))))
            for variant, src_arr in variants:
                k = len(cases)
                src = os.path.join(work, f"in{k}.npy")
                np.save(src, src_arr)
                cases.append((f"{dt} {shape} {variant}", a, src, os.path.join(work, f"out{k}.npy")))
    # a version 2.0 header in, version 1.0 out
    a = np.arange(6, dtype="<f4").reshape(2, 3)
    src = os.path.join(work, "v2.npy")
    with open(src, "wb") as f:
        npformat.write_array(f, a, version=(2, 0))
    cases.append(("version 2.0 input", a, src, os.path.join(work, "v2out.npy")))

    r = subprocess.run([tool] + [p for c in cases for p in c[2:]], capture_output=True, text=True)
    failures = 0
    if r.returncode != 0:
        print("FAIL npy_copy:", r.stderr.strip())
        failures += 1
    for label, a, src, dst in cases:
        if not os.path.exists(dst):
            failures += 1
            continue
        b = np.load(dst)
        ok = b.dtype == a.dtype and b.shape == a.shape and \
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        ref = os.path.join(work, "ref.npy")
        np.save(ref, a)  # what NumPy itself writes for the little-endian array
        same = open(ref, "rb").read() == open(dst, "rb").read()
        if not ok or not same:
            print(f"FAIL {label}: values ok={ok}, bytes identical to np.save={same}")
            failures += 1
    count = len(cases)

    # Fortran order is refused with a message that says so
    np.save(os.path.join(work, "f.npy"), np.asfortranarray(np.ones((2, 3), "<f4")))
    r = subprocess.run([tool, os.path.join(work, "f.npy"), os.path.join(work, "fout.npy")],
                       capture_output=True, text=True)
    count += 1
    if r.returncode != 1 or "fortran_order is True" not in r.stderr:
        print(f"FAIL fortran order: rc={r.returncode} err={r.stderr.strip()}")
        failures += 1
    print(f"{count - failures}/{count} checks passed against numpy {np.__version__}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
