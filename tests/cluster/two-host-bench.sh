#!/usr/bin/env bash
# A two-host cluster on this one machine: two network namespaces ("hostA", "hostB") joined by a veth pair
# shaped to about 1 Gbit/s (and 0.1 ms each way where the kernel has sch_netem), 2-4 ranks per host,
# mpirun across them over TCP. Runs loom-commbench for the flat ring, the hierarchical all-reduce, the
# library's all-reduce and the int8 and top-k codecs, prints a table, and tears everything down.
#
#   sudo tests/cluster/two-host-bench.sh [--ranks-per-host 2] [--size 64M] [--rate 1gbit] [--iters 3]
#                                        [--bench build/dev/bin/loom-commbench] [--json FILE]
#
# Needs root, iproute2 (ip, tc), util-linux (unshare) and Open MPI. Uses only the addresses 10.231.0.1
# and 10.231.0.2 inside the namespaces it creates.
set -euo pipefail

ranks=2 size=64M rate=1gbit iters=7 json=""
bench="$(cd "$(dirname "$0")/../.." && pwd)/build/dev/bin/loom-commbench"
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks-per-host) ranks=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --bench) bench=$(realpath "$2"); shift 2 ;;
    --json) json=$(realpath -m "$2"); shift 2 ;;
    *) echo "two-host-bench: unknown option $1" >&2; exit 64 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "two-host-bench: needs root (network namespaces)" >&2; exit 1; }
for tool in ip tc unshare mpirun; do
  command -v $tool >/dev/null || { echo "two-host-bench: $tool is missing (install iproute2, util-linux, openmpi-bin)" >&2; exit 1; }
done
[ -x "$bench" ] || { echo "two-host-bench: $bench not found; build first (cmake --build --preset dev)" >&2; exit 1; }

. "$(dirname "$0")/two-hosts.sh"
work=$(mktemp -d /tmp/loom-two-host.XXXXXX)
cleanup() {
  two_hosts_down loom
  rm -rf "$work"
}
trap cleanup EXIT
two_hosts_up loom 10.231.0 "$rate" "$work" "$ranks"
shaping=$two_hosts_shaping
rtt=$(ip netns exec loomA ping -c 5 -q 10.231.0.2 2>/dev/null | awk -F/ '/rtt|round-trip/ {print $5 " ms"}' || true)

np=$((2 * ranks))

run() {  # run LABEL ARGS...: one loom-commbench run across both hosts, JSON lines to $work/LABEL.json
  local label=$1; shift
  two_hosts_mpirun loom 10.231.0 "$work" -np $np \
    "$bench" -b "$size" -e "$size" -n "$iters" -w 1 -c -J --ranks-per-node $ranks "$@" > "$work/$label.json"
}

echo "# two hosts x $ranks ranks, link $shaping; ping RTT ${rtt:-n/a}; all-reduce of $size, $iters iterations"
printf '# %-16s %11s %11s %12s %14s %6s\n' "what" "median(ms)" "mean(ms)" "busbw(GB/s)" "wire(B)/rank" "wrong"
for spec in "sendrecv-8B:--op sendrecv -b 8 -e 8" "sendrecv:--op sendrecv" "flat-ring:--algo ring" "hierarchical:--algo hierarchical" "library:--algo library" \
            "int8:--codec int8" "topk-0.01:--codec topk:0.01"; do
  label=${spec%%:*}; args=${spec#*:}
  run "$label" $args
  line=$(tail -n 1 "$work/$label.json")
  python3 - "$label" "$line" <<'PY'
import json, sys
label, line = sys.argv[1], sys.argv[2]
j = json.loads(line)
factor = {"allreduce": 2.0 * (j["ranks"] - 1) / j["ranks"]}.get(j["op"], 1.0)
busbw = j["bytes"] / (j["time_median_us"] * 1e-6) / 1e9 * factor if j["time_median_us"] > 0 else 0
print("  %-16s %11.1f %11.1f %12.4f %14d %6s" % (label, j["time_median_us"] / 1e3, j["time_us"] / 1e3, busbw, j["wire_bytes"], j["wrong"]))
PY
done
if [ -n "$json" ]; then
  for f in "$work"/*.json; do
    python3 -c 'import json,sys; l=open(sys.argv[1]).read().strip().splitlines()[-1]; d=json.loads(l); d["label"]=sys.argv[2]; d["link"]=sys.argv[3]; print(json.dumps(d))' \
      "$f" "$(basename "$f" .json)" "$shaping"
  done > "$json"
  echo "# wrote $json"
fi
