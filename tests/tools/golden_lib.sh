# golden_lib.sh: what the golden-output tests (rewrite_golden_test.sh,
# train_golden_test.sh) share, sourced by them: the arguments, the output folder, each
# case's files stripped of paths and summed, and the comparison with the fixture.
#   $1 DEMITASSE, $2 SOURCE_ROOT, [$3 CAPTURE_DIR]: with CAPTURE_DIR every output is
#   kept there and its sums in CAPTURE_DIR/sums (to refresh a fixture, copy that file).
set -u
exe=$1
root=$2
capture=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${capture:-$work/out}
mkdir -p "$out"
: > "$out/sums"

# golden_strip DIR FILE...: DIR/FILE.raw -> DIR/FILE without the case's and the
# source's paths
golden_strip() {
  d=$1
  shift
  for k in "$@"; do
    sed -e "s#$d/##g" -e "s#$root/##g" "$d/$k.raw" > "$d/$k"
    rm -f "$d/$k.raw"
  done
}

# golden_sum NAME FILE...: the sums of the case's files that exist
golden_sum() {
  name=$1
  shift
  for k in "$@"; do
    if [ -f "$out/$name/$k" ]; then
      (cd "$out" && sha256sum "$name/$k") >> "$out/sums"
    fi
  done
}

# A build without CUDA places every op of a `--device cuda` net on the CPU (no CUDA
# kernels are registered), so its outputs are its own: its fixture is FIXTURE with
# _nocuda before the extension.
golden_nocuda=0
"$exe" info 2>/dev/null | grep -q "built without CUDA" && golden_nocuda=1

# golden_finish WHAT FIXTURE: captured, or compared with the fixture's sums (for this
# build's kind)
golden_finish() {
  fixture=$2
  [ "$golden_nocuda" = 1 ] && fixture=${fixture%.sha256}_nocuda.sha256
  n=$(grep -c /rc "$out/sums")
  if [ -n "$capture" ]; then
    echo "captured $n option sets into $capture (the fixture: $fixture)"
    exit 0
  fi
  if ! diff -u "$here/$fixture" "$out/sums"; then
    echo "$1 output changed from the golden sums (re-run with a CAPTURE_DIR to diff)" >&2
    exit 1
  fi
  echo "$1: $n option sets byte-identical"
}
