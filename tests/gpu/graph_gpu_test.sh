#!/bin/sh
# graph_gpu_test.sh: CUDA graphs (net/graph_exec.h) on a GPU. LeNet on the bundled MNIST
# trained with `demitasse train --device cuda --fp16` with the graph (the default) and
# twice with --no-graph: a replay launches the kernels a run would, on the same memory,
# so every logged loss and the final test accuracy must be identical, bit for bit, when
# two op-by-op runs are (else within 2%: see below). The
# graph run must say it captured and replayed, and a steady step must wait for the
# device nowhere inside the net (0 host syncs per run: the skip, the loss scale and the
# iteration stay on the device). Exits 77 without a usable GPU.
# usage: graph_gpu_test.sh demitasse models/mnist [iters]
set -u
exe=$1 mnist=$2 iters=${3:-200}
. "$(dirname "$0")/gpu_test_lib.sh"
gpu_require
mnist_dbs 8000
train() {  # $1: the run's name (its log and CSV in $tmp); the rest: extra options
  name=$1; shift
  lenet_train "$tmp/$name.txt" --device cuda --log-every 10 --csv "$tmp/$name.csv" "$@"
}
train graph || { cat "$tmp/graph.txt"; fail "GPU training with the graph"; }
train eager --no-graph || { cat "$tmp/eager.txt"; fail "GPU training with --no-graph"; }
train eager2 --no-graph || { cat "$tmp/eager2.txt"; fail "GPU training with --no-graph"; }
grep '^#' "$tmp/graph.txt"
grep -q 'device graph of ops .* replays' "$tmp/graph.txt" || fail "no graph was replayed"
grep -q 'device graphs off' "$tmp/eager.txt" || fail "--no-graph did not turn the graph off"
# the counts line: "... graph replays (...), S host syncs"
syncs=$(sed -n 's/.* \([0-9.]*\) host syncs$/\1/p' "$tmp/graph.txt" | tail -n 1)
echo "host syncs per run with the graph: $syncs"
# The copies of a step read the DB's batch on the host (no wait); a few early runs
# may wait (an upload fence): the mean over the run must be well under one.
awk -v s="${syncs:-9}" 'BEGIN { exit !(s < 0.1) }' || fail "host syncs per run: $syncs"
# iter, loss, accuracy, test loss, test accuracy (the speed column differs, of course)
for r in graph eager eager2; do cut -d, -f1-5 "$tmp/$r.csv" > "$tmp/$r.cols"; done
[ "$(wc -l < "$tmp/graph.cols")" -gt 5 ] || fail "the CSV has too few lines"
# cuDNN may pick algorithms that accumulate with atomics (run to run, not bit-identical):
# a second op-by-op run tells. Deterministic: the graph must match bit for bit; else
# every logged value within 2% of the op-by-op run's.
if cmp -s "$tmp/eager.cols" "$tmp/eager2.cols"; then
  cmp -s "$tmp/graph.cols" "$tmp/eager.cols" || {
    diff "$tmp/graph.cols" "$tmp/eager.cols" | head -n 20
    fail "the graph's losses differ from the op-by-op run's (which repeats bit for bit)"
  }
  echo "losses and accuracy identical over $iters iterations, graph and --no-graph"
else
  echo "two op-by-op runs differ (non-deterministic algorithms): comparing within 2%"
  paste -d, "$tmp/graph.cols" "$tmp/eager.cols" | awk -F, 'NR > 1 {
      for (k = 2; k <= 5; k++) { a = $k; b = $(k + 5); if (a == "" && b == "") continue;
        d = a - b; if (d < 0) d = -d; m = (b < 0 ? -b : b);
        if (d > 0.02 * m + 1e-6) { print "line " NR " column " k ": " a " vs " b; bad = 1 } }
    } END { exit bad }' || fail "the graph's losses are more than 2% off the op-by-op run's"
fi
echo ok
