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

work=$(mktemp -d /tmp/loom-two-host.XXXXXX)
cleanup() {
  ip netns del loomA 2>/dev/null || true
  ip netns del loomB 2>/dev/null || true
  rm -rf /etc/netns/loomA /etc/netns/loomB "$work"
}
trap cleanup EXIT
cleanup; work=$(mktemp -d /tmp/loom-two-host.XXXXXX)

ip netns add loomA
ip netns add loomB
ip link add loomA0 type veth peer name loomB0
ip link set loomA0 netns loomA
ip link set loomB0 netns loomB
ip -n loomA addr add 10.231.0.1/24 dev loomA0
ip -n loomB addr add 10.231.0.2/24 dev loomB0
for ns in loomA loomB; do
  ip -n $ns link set lo up
  ip -n $ns link set ${ns}0 up
  mkdir -p /etc/netns/$ns
  printf '127.0.0.1 localhost\n10.231.0.1 hostA\n10.231.0.2 hostB\n' > /etc/netns/$ns/hosts
done
shaping="rate $rate"
for ns in loomA loomB; do
  if ip netns exec $ns tc qdisc add dev ${ns}0 root netem delay 100us rate $rate limit 100000 2>/dev/null; then
    shaping="rate $rate, 0.1 ms each way (netem)"
  else
    ip netns exec $ns tc qdisc add dev ${ns}0 root tbf rate $rate burst 256kb latency 50ms
    shaping="rate $rate (tbf; this kernel has no sch_netem, so no added delay)"
  fi
done
rtt=$(ip netns exec loomA ping -c 5 -q 10.231.0.2 2>/dev/null | awk -F/ '/rtt|round-trip/ {print $5 " ms"}' || true)

# Open MPI starts its daemon on hostB through this agent instead of ssh: it enters hostB's namespace and
# gives it its own host name, so Open MPI sees two hosts (shared memory inside each, TCP between them).
cat > "$work/agent" <<'AGENT'
#!/bin/sh
host=$1; shift
case "$host" in
  hostA) ns=loomA ;;
  hostB) ns=loomB ;;
  *) echo "agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname $host; $*"
AGENT
chmod +x "$work/agent"
printf 'hostA slots=%s\nhostB slots=%s\n' "$ranks" "$ranks" > "$work/hostfile"
np=$((2 * ranks))

# Ranks fill hostA's slots first (--map-by slot), so ranks 0..k-1 are on hostA and k..2k-1 on hostB, which is
# what --ranks-per-node tells the communicator for the hierarchical all-reduce.
run() {  # run LABEL ARGS...: one loom-commbench run across both hosts, JSON lines to $work/LABEL.json
  local label=$1; shift
  ip netns exec loomA unshare --uts sh -c "hostname hostA; exec \"\$@\"" sh \
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LOOM_COMM_TIMEOUT_S=600 \
    mpirun --hostfile "$work/hostfile" -np $np --map-by slot --bind-to none \
      --mca plm_rsh_agent "$work/agent" --mca btl tcp,vader,self \
      --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24 \
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
