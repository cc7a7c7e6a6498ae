#!/bin/sh
# text_db_full_disk_test.sh: `make-db --text` on a full disk (a small tmpfs in a private
# mount namespace, as atomic_write_test.sh does; exit 77 where `unshare -m` cannot mount
# one) fails with "disk full" and leaves neither DB nor a temporary directory, whether
# the records or vocab.txt find no room; with room the same command succeeds.
# usage: text_db_full_disk_test.sh DEMITASSE
set -u
if [ -z "${DM_ATOMIC_NS:-}" ]; then
  command -v unshare >/dev/null 2>&1 || { echo "no unshare: skipped"; exit 77; }
  unshare -m sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d" && rmdir "$d"' \
    >/dev/null 2>&1 || { echo "cannot mount a tmpfs in a private namespace: skipped"; exit 77; }
  DM_ATOMIC_NS=1 exec unshare -m sh "$0" "$@"
fi
DM=$1
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_textfull_XXXXXX") || exit 1
M=$T/full
mkdir "$M" && mount -t tmpfs -o size=1m,mode=0755 tmpfs "$M" || { echo "mount failed"; exit 1; }
trap 'umount "$M" 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# a text whose DBs need more than the 1 MiB tmpfs: 600 KB of varied lines
i=0
while [ $i -lt 12000 ]; do
  echo "line $i of a text that make-db cuts into windows: $((i * 7919 % 10007))"
  i=$((i + 1))
done >"$T/big.txt"
printf 'a short text, small enough for the disk, with its vocabulary.\n' >"$T/small.txt"

refused() { # NAME: failed with "disk full", nothing left on the tmpfs but the filler
  [ "$rc" -ne 0 ] || fail "$1: succeeded on a full disk"
  grep -q "disk full" "$T/err" || { fail "$1: no \"disk full\" in:"; cat "$T/err"; }
  left=$(ls -A "$M" | grep -v '^fill$')
  [ -z "$left" ] || fail "$1: left $left"
}

"$DM" make-db --text "$T/big.txt" --context 64 --out-train "$M/tr" --out-val "$M/va" \
  >/dev/null 2>"$T/err"
rc=$?
refused "the records"

# the disk full but for 1 to 24 pages: the lock file's 16, the records, then vocab.txt
# find room in turn (on Linux's tmpfs 19 pages leave none for vocab.txt); each try must
# succeed whole or fail whole
ok=0 refusals=0
for pages in $(seq 1 24); do
  rm -f "$M/fill"
  dd if=/dev/zero of="$M/fill" bs=4096 >/dev/null 2>&1
  truncate -s "-$((4096 * pages))" "$M/fill"
  "$DM" make-db --text "$T/small.txt" --context 4 --val-fraction 0 --out-train "$M/db" \
    >/dev/null 2>"$T/err"
  rc=$?
  if [ $rc -eq 0 ]; then
    [ -f "$M/db/data.mdb" ] && [ -f "$M/db/vocab.txt" ] || fail "$pages pages: a DB without its files"
    left=$(ls -A "$M" | grep -v '^fill$' | grep -v '^db$')
    [ -z "$left" ] || fail "$pages pages: left $left"
    rm -rf "$M/db"
    ok=$((ok + 1))
  else
    refused "$pages pages of room"
    refusals=$((refusals + 1))
    grep -q "vocab.txt: write failed" "$T/err" && echo "$pages pages: vocab.txt found no room"
  fi
done
[ $ok -gt 0 ] && [ $refusals -gt 0 ] || fail "1 to 24 pages: $ok successes and $refusals refusals"
rm -f "$M/fill"
"$DM" make-db --text "$T/small.txt" --context 4 --val-fraction 0 --out-train "$M/db" \
  >/dev/null 2>"$T/err" || { fail "with room: $(cat "$T/err")"; }
[ -f "$M/db/vocab.txt" ] || fail "with room: no vocab.txt"
[ $fails -eq 0 ] && echo "make-db --text on a full disk: all passed"
[ $fails -eq 0 ]
