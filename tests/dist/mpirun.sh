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
exec mpirun $root --oversubscribe --bind-to none -np "$n" \
  --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none "$@"
