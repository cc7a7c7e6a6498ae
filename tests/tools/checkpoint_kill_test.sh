#!/bin/sh
# checkpoint_kill_test.sh: checkpoints survive SIGKILL at any moment. `demitasse run`
# loops a net that bumps a counter, writes it into two 16 MB blobs and Saves all three
# (so the process spends most of its time inside Save); it is killed with SIGKILL at a
# random moment, several times. Each time a Load of the checkpoint must succeed and give
# one save's blobs: both big blobs filled with exactly the saved counter, which never
# goes back (each round resumes from the checkpoint the previous one left). The blobs are
# compared by a Python stdlib reader of the .npy outputs (no NumPy needed).
#
# usage: checkpoint_kill_test.sh DEMITASSE [PYTHON3]   (exit 77: skipped, no python3)
set -u
DM=$1
PY=${2:-/usr/bin/python3}
[ -x "$PY" ] || { echo "no $PY: skipped"; exit 77; }
ROUNDS=${DM_KILL_ROUNDS:-8}
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_ckpt_kill_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fails=0

cat >"$T/init.pbtxt" <<EOF
name: "init"
op { output: "counter" type: "ConstantFill" arg { name: "shape" ints: 1 } arg { name: "value" f: 0 } }
op { output: "one" type: "ConstantFill" arg { name: "shape" ints: 1 } arg { name: "value" f: 1 } }
op { output: "zeros" type: "ConstantFill" arg { name: "shape" ints: 4 ints: 1000000 } arg { name: "value" f: 0 } }
EOF
cat >"$T/save.pbtxt" <<EOF
name: "save"
op { input: "counter" input: "one" output: "counter" type: "Add" }
op { input: "zeros" input: "counter" output: "a" type: "Add" arg { name: "broadcast" i: 1 } }
op { input: "zeros" input: "counter" output: "b" type: "Add" arg { name: "broadcast" i: 1 } }
op { input: "counter" input: "a" input: "b" type: "Save" arg { name: "db" s: "$T/ckpt" } arg { name: "db_type" s: "lmdb" } }
EOF
# Later rounds resume: the init net also Loads the checkpoint, so the counter must only grow.
{ cat "$T/init.pbtxt"; cat <<EOF
op { output: "counter" output: "a" output: "b" type: "Load" arg { name: "db" s: "$T/ckpt" } }
EOF
} >"$T/resume.pbtxt"
cat >"$T/load.pbtxt" <<EOF
name: "load"
op { output: "counter" output: "a" output: "b" type: "Load" arg { name: "db" s: "$T/ckpt" } arg { name: "db_type" s: "lmdb" } }
EOF
cat >"$T/check.py" <<'EOF'
# check.py C A B MIN: A and B hold 4,000,000 float32 values, all equal to C's one value,
# which is at least MIN.
import array, struct, sys
def load(path):
    d = open(path, "rb").read()
    assert d[:6] == b"\x93NUMPY", path
    n, off = (struct.unpack("<H", d[8:10])[0], 10) if d[6] == 1 else (struct.unpack("<I", d[8:12])[0], 12)
    assert "'<f4'" in d[off:off + n].decode(), path
    a = array.array("f")
    a.frombytes(d[off + n:])
    return a
c, a, b = (load(p) for p in sys.argv[1:4])
v = c[0]
ok = len(c) == 1 and v >= max(1, float(sys.argv[4])) and len(a) == len(b) == 4000000 and a.count(v) == len(a) and b.count(v) == len(b)
print("counter %g: %s" % (v, "consistent" if ok else "MIXED: a has %d, b has %d of %d" % (a.count(v), b.count(v), len(a))))
sys.exit(0 if ok else 1)
EOF

rand_ms() { echo $(($(od -An -N2 -tu2 /dev/urandom) % ${1} + ${2})); }

r=1
last=0
init="$T/init.pbtxt"
while [ "$r" -le "$ROUNDS" ]; do
  "$DM" run --init "$init" --net "$T/save.pbtxt" --iters 1000000 >"$T/run.log" 2>&1 &
  pid=$!
  # Wait for a first checkpoint (later rounds already have one), then kill at random.
  i=0
  while [ ! -L "$T/ckpt" ] && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  ms=$(rand_ms 1450 50)
  sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
  if ! kill -9 "$pid" 2>/dev/null; then
    echo "FAIL: round $r: the saving process ended early:"; cat "$T/run.log"; fails=$((fails + 1))
  fi
  wait "$pid" 2>/dev/null
  rm -f "$T"/*.npy
  if "$DM" run --net "$T/load.pbtxt" --output counter="$T/c.npy" --output a="$T/a.npy" \
       --output b="$T/b.npy" >"$T/load.log" 2>&1; then
    printf 'round %d (killed after %d ms): ' "$r" "$ms"
    "$PY" "$T/check.py" "$T/c.npy" "$T/a.npy" "$T/b.npy" "$last" || fails=$((fails + 1))
    last=$("$PY" -c "import struct,sys; d=open(sys.argv[1],'rb').read(); print(int(struct.unpack('<f', d[-4:])[0]))" "$T/c.npy")
  else
    echo "FAIL: round $r: Load after SIGKILL failed:"; cat "$T/load.log"; fails=$((fails + 1))
  fi
  init="$T/resume.pbtxt"
  r=$((r + 1))
done
# Leftovers of killed saves are cleaned by the next save: at most the current version
# and one interrupted one remain.
n=$(ls -d "$T"/ckpt.v* 2>/dev/null | wc -l)
[ "$n" -le 2 ] || { echo "FAIL: $n version directories left"; ls -la "$T"; fails=$((fails + 1)); }
echo "$ROUNDS kills, $fails failures"
[ "$fails" -eq 0 ]
