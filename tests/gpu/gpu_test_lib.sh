# gpu_test_lib.sh: sourced (POSIX sh) by the LeNet scripts in tests/gpu, which set $exe
# (the demitasse program) and $mnist (models/mnist) first.
# shellcheck disable=SC2154  # $exe, $mnist and $iters are the caller's

fail() { echo "FAIL: $*"; exit 1; }

# Exits 77 (SKIP) unless $exe sees a usable GPU and its train command has --device.
gpu_require() {
  gpus=$("$exe" info 2>&1 | grep '^GPUs:')
  case "$gpus" in
    "GPUs: "[1-9]*) ;;
    *) echo "SKIP: ${gpus:-demitasse info reports no GPUs line}"; exit 77 ;;
  esac
  "$exe" train --help 2>&1 | grep -q -- '--device' \
    || { echo "SKIP: this demitasse train has no --device option yet"; exit 77; }
}

# mnist_dbs N_TRAIN: sets $tmp to a fresh directory (removed on exit) holding the LMDBs
# $tmp/train (the first N_TRAIN images of the bundled t10k set) and $tmp/val (the rest).
mnist_dbs() {
  tmp=$(mktemp -d) || exit 1
  trap 'rm -rf "$tmp"' EXIT
  "$exe" make-db --images "$mnist/data/t10k-images-idx3-ubyte.gz" \
    --labels "$mnist/data/t10k-labels-idx1-ubyte.gz" --train "$1" \
    --out-train "$tmp/train" --out-val "$tmp/val" > /dev/null || fail "make-db"
}

# lenet_train LOG [OPTION]...: trains LeNet on $tmp's DBs with the tests' settings
# (momentum SGD at 0.01, FP16, $iters iterations, 20 test batches at the end), its output
# to LOG; the options are added (--device cuda, ...).
lenet_train() {
  log=$1; shift
  "$exe" train --init "$mnist/lenet_init.pbtxt" --net "$mnist/lenet_train.pbtxt" \
    --test-net "$mnist/lenet_test.pbtxt" --train-db "$tmp/train" --test-db "$tmp/val" \
    --test-iters 20 --test-every "$iters" --iters "$iters" --optimizer momentum \
    --lr 0.01 --momentum 0.9 --fp16 "$@" > "$log" 2>&1
}
