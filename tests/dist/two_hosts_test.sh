#!/bin/sh
# two_hosts_test.sh: data-parallel training between two "hosts" on one machine: two
# network namespaces joined by a veth pair, OpenMPI over TCP between them (its rsh agent
# a script that runs the remote daemon with `ip netns exec` instead of ssh). Checks that
# the two ranks really run in different namespaces, and that LeNet trained for N steps
# this way ends bit-identical to the same 2-rank run inside one namespace (the reduction
# is the same arithmetic whatever the transport). Then a network partition mid-run: the
# rank that loses its peer exits by itself after MPI_Abort's grace period.
# Needs root and iproute2 (exit 77 otherwise, or where namespaces cannot be made).
#
# usage: two_hosts_test.sh MPIRUN_SH DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
MPI=$1 DM=$2 IMAGES=$3 LABELS=$4 INIT=$5 NET=$6
N=${DM_HOSTS_ITERS:-30}
case $DM in /*) ;; *) DM=$(pwd)/$DM ;; esac
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun: skipped"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "not root (network namespaces): skipped"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "no ip (iproute2): skipped"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_hosts_XXXXXX") || exit 1
A=dm$$a B=dm$$b
NET_A=10.199.$(($$ % 250)).1 NET_B=10.199.$(($$ % 250)).2
cleanup() {
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
if ! { ip netns add "$A" && ip netns add "$B" &&
  ip link add "v$A" type veth peer name "v$B" && ip link set "v$A" netns "$A" &&
  ip link set "v$B" netns "$B" && ip -n "$A" addr add "$NET_A/24" dev "v$A" &&
  ip -n "$B" addr add "$NET_B/24" dev "v$B" && ip -n "$A" link set "v$A" up &&
  ip -n "$B" link set "v$B" up && ip -n "$A" link set lo up && ip -n "$B" link set lo up; } \
  >"$T/ns.log" 2>&1; then
  cat "$T/ns.log"
  echo "cannot make network namespaces here: skipped"
  exit 77
fi
# OpenMPI's rsh agent: "agent HOST COMMAND..." runs COMMAND in HOST's namespace.
{
  echo '#!/bin/sh'
  echo 'h=$1; shift'
  echo "case \$h in $NET_A) ns=$A ;; $NET_B) ns=$B ;; *) echo \"no host \$h\" >&2; exit 1 ;; esac"
  echo 'exec ip netns exec "$ns" sh -c "$*"'
} >"$T/rsh.sh"
chmod +x "$T/rsh.sh"
# Under AddressSanitizer: OpenMPI's leaks suppressed, as mpirun.sh does.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
two_hosts() { # the ranks on two hosts: $NET_A (where mpirun runs) and $NET_B
  ip netns exec "$A" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    --host "$NET_A:1,$NET_B:1" --mca plm_rsh_agent "$T/rsh.sh" \
    --mca oob_tcp_if_include "$NET_A/24" --mca btl self,tcp \
    --mca btl_tcp_if_include "$NET_A/24" "$@"
}
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

two_hosts sh -c 'readlink /proc/self/ns/net' >"$T/ns.txt" 2>&1 || { cat "$T/ns.txt"; exit 1; }
[ "$(grep 'net:' "$T/ns.txt" | sort -u | wc -l)" = 2 ] ||
  fail "the two ranks are not in two namespaces: $(cat "$T/ns.txt")"

"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 2000 --out-train "$T/db" \
  --out-val "$T/val" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
sed 's/\(name: "batch_size" i:\) 64/\1 32/' "$NET" >"$T/net32.pbtxt"
set -- train --init "$INIT" --net "$T/net32.pbtxt" --train-db "$T/db" --iters "$N" \
  --threads 1 --data-parallel --dp-timeout 120
sh "$MPI" 2 "$DM" "$@" --checkpoint "$T/one_host" >"$T/one.log" 2>&1 ||
  { tail -20 "$T/one.log"; exit 1; }
two_hosts "$DM" "$@" --checkpoint "$T/two_hosts" >"$T/two.log" 2>&1 ||
  { tail -20 "$T/two.log"; exit 1; }
grep -q "trained $N iterations" "$T/two.log" ||
  fail "the two-host run did not train: $(tail -3 "$T/two.log")"
# the checkpoints' blobs, exported and compared byte for byte
for c in one_host two_hosts; do
  mkdir -p "$T/$c.out"
  printf 'name: "load"\nop { type: "Load" arg { name: "db" s: "%s" } arg { name: "load_all" i: 1 } }\n' \
    "$T/$c" >"$T/load.pbtxt"
  set --
  for b in $(sed -n 's/.*output: *"\([^"]*\)".*/\1/p' "$INIT") optimizer_iteration; do
    set -- "$@" --output "$b=$T/$c.out/$b.npy"
  done
  "$DM" run --net "$T/load.pbtxt" "$@" >"$T/export.log" 2>&1 || { cat "$T/export.log"; exit 1; }
done
for f in "$T"/one_host.out/*.npy; do
  cmp -s "$f" "$T/two_hosts.out/$(basename "$f")" ||
    fail "$(basename "$f" .npy) differs between one host and two"
done
# A network partition: the link between the hosts goes down mid-run. Rank 0's collective
# times out (--dp-timeout 3) and it calls MPI_Abort, which mpirun cannot carry to the
# lost host; the rank must still exit by itself after the CLI's grace period (15 s),
# whatever mpirun does (it is killed from outside at the end, and what it did is logged).
two_hosts "$DM" train --init "$INIT" --net "$T/net32.pbtxt" --train-db "$T/db" --iters 100000 \
  --threads 1 --log-every 1 --data-parallel --dp-timeout 3 >"$T/part.log" 2>&1 &
p_pid=$!
p_i=0
while ! grep -q "iter 3/" "$T/part.log" 2>/dev/null && [ $p_i -lt 600 ]; do sleep 0.1; p_i=$((p_i + 1)); done
rank_pid() { # rank_pid NAMESPACE RANK
  ip netns pids "$1" | while read -r p; do
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -c "^OMPI_COMM_WORLD_RANK=$2\$")" = 1 ] &&
      grep -q "net32.pbtxt" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
  done | head -1
}
rank0=$(rank_pid "$A" 0) rank1=$(rank_pid "$B" 1)
if [ -z "$rank0" ] || [ -z "$rank1" ]; then
  fail "partition: rank processes not found ('$rank0' '$rank1'): $(tail -3 "$T/part.log")"
else
  ip -n "$A" link set "v$A" down
  # each side of the partition: its rank must end within 60 s (rank 1's abort cannot
  # reach mpirun at all: without the grace period it never ends)
  for r in 0 1; do
    eval "pid=\$rank$r"
    p_t=0
    while kill -0 "$pid" 2>/dev/null && [ $p_t -lt 60 ]; do sleep 1; p_t=$((p_t + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      fail "partition: rank $r still alive 60 s after the link went down"
    else
      echo "partition: rank $r gone ${p_t} s after rank 0 (or the link) went down"
    fi
  done
  grep -q "waited [0-9]* s for the other 1 rank" "$T/part.log" ||
    fail "partition: no timeout error: $(tail -5 "$T/part.log")"
  sleep 5
  [ -n "${DM_SHOW_PARTITION:-}" ] && cat "$T/part.log"
  kill -0 "$p_pid" 2>/dev/null && echo "partition: mpirun still running 5 s after the ranks ended (killed now)"
fi
kill -9 "$p_pid" 2>/dev/null
for p in $(ip netns pids "$A") $(ip netns pids "$B"); do kill -9 "$p" 2>/dev/null; done
wait "$p_pid" 2>/dev/null

[ "$fails" = 0 ] && echo "two hosts (network namespaces, TCP): $(ls "$T"/one_host.out | wc -l)" \
  "blobs bit-identical to one host after $N steps"
exit $((fails > 0))
