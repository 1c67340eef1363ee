#!/bin/sh
# ZeRO-1 at dp 2 keeps one copy of the parameters in shared memory when both ranks are on one machine, and
# all-gathers the updated pieces when they cannot share it. Rank 1 of the second run has a /dev/shm of its
# own (a mount namespace, as on another machine; Open MPI over TCP on the loopback interface): rank 0 must
# say that the parameters are not shared, and both runs must give the same losses within 1e-4 relative.
# Usage: zero1-unshared.sh MPIEXEC LOOM_TRAIN
set -u
mpiexec=$1 train=$2
if ! unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null; then
  echo "SKIPPED: no mount namespaces here (unshare -m needs root)"
  exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/zero1.json" <<'JSON'
{"loom_layout": 1, "name": "zero1-dp2", "model": "gpt-tiny", "cluster": "local",
 "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 2, "global_batch": 8},
 "memory": {"zero": 1}}
JSON
mpi="--allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo"
args="--layout $dir/zero1.json --steps 8"
shared=$("$mpiexec" $mpi -np 2 "$train" $args --metrics "$dir/shared.jsonl" 2>&1) \
  || { echo "$shared"; echo "FAIL: the run on one /dev/shm failed"; exit 1; }
echo "$shared"
echo "$shared" | grep -q "keep one copy of the parameters in shared memory" \
  || { echo "FAIL: the ranks on one /dev/shm did not share the parameters"; exit 1; }
unshared=$("$mpiexec" $mpi -np 1 "$train" $args --metrics "$dir/unshared.jsonl" : \
  -np 1 unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh \
  "$train" $args --metrics "$dir/unshared.jsonl" 2>&1) \
  || { echo "$unshared"; echo "FAIL: the run with two /dev/shm failed"; exit 1; }
echo "$unshared"
echo "$unshared" | grep -q "the parameters of DP group .* are not shared" \
  || { echo "FAIL: rank 0 did not say that the parameters are not shared"; exit 1; }
if echo "$unshared" | grep -q "keep one copy of the parameters"; then
  echo "FAIL: the ranks with two /dev/shm claimed to share the parameters"; exit 1
fi
loss() { sed -n 's/.*"loss":\([-0-9.eE+]*\).*/\1/p' "$1"; }
loss "$dir/shared.jsonl" > "$dir/a"
loss "$dir/unshared.jsonl" > "$dir/b"
[ "$(wc -l < "$dir/a")" -eq 8 ] && [ "$(wc -l < "$dir/b")" -eq 8 ] \
  || { echo "FAIL: not 8 losses in each run's metrics"; exit 1; }
paste "$dir/a" "$dir/b" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * ($1 < 0 ? -$1 : $1)) {
    printf "FAIL: step %d: loss %s with shared parameters, %s with gathered ones\n", NR, $1, $2; bad = 1 } }
  END { exit bad }' || exit 1
echo "PASS: the same 8 losses with one shared copy of the parameters and with gathered pieces"
