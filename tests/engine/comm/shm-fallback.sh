#!/bin/sh
# comm.allreduce "shm" between ranks that cannot share a segment: rank 1 runs with a /dev/shm of its own
# (a mount namespace, as on another machine) and Open MPI talks over TCP on the loopback interface. Both ranks must say that the
# shared-memory all-reduce cannot be used, and the ring must give the right sums (loom-commbench -c).
# Usage: shm-fallback.sh MPIEXEC LOOM_COMMBENCH
set -u
mpiexec=$1 bench=$2
if ! unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null; then
  echo "SKIPPED: no mount namespaces here (unshare -m needs root)"
  exit 0
fi
out=$("$mpiexec" --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo \
  -np 1 "$bench" --algo shm -b 1M -e 4M -f 4 -n 2 -w 1 -c -J : \
  -np 1 unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh \
  "$bench" --algo shm -b 1M -e 4M -f 4 -n 2 -w 1 -c -J 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: mpirun exited with $rc"; exit 1; }
for r in 0 1; do
  echo "$out" | grep -q "rank $r: the shared-memory all-reduce of world cannot be used" \
    || { echo "FAIL: rank $r did not say that it runs the ring"; exit 1; }
done
[ "$(echo "$out" | grep -c '"wrong":0')" -eq 2 ] || { echo "FAIL: wrong sums, or not every size ran"; exit 1; }
echo "PASS: both ranks fell back to the ring with the right sums"
