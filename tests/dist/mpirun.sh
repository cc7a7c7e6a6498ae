#!/bin/sh
# mpirun.sh N PROGRAM ARGS...: runs PROGRAM as N ranks on this machine (OpenMPI's mpirun,
# oversubscribed: CI has 2 cores), as root where the tests run as root. Exit 77 (skip)
# where there is no mpirun.
n=$1
shift
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun: skipped"; exit 77; }
root=
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
# --bind-to none: two ranks on two cores must not both be bound to the first; the
# vader shared-memory transport and TCP are enough between ranks of one machine.
# Under AddressSanitizer: OpenMPI's own leaks are suppressed (lsan.supp); the slow
# unwinder follows their stacks back into OpenMPI's libraries (the fast one stops in its
# unloaded components, which have no names).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
exec mpirun $root --oversubscribe --bind-to none -np "$n" \
  --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none "$@"
