#!/usr/bin/env bash
# Asynchronous data parallelism measured: gpt-mini, dp 2 (global batch 8, micro-batch 4), STEPS steps, with
# comm.staleness 0 and 1, (a) both ranks on this machine (shared memory) and (b) one rank on each of two
# network namespaces joined by a veth pair shaped to RATE (the link of tests/cluster/two-host-bench.sh), where
# the data-parallel all-reduce is exposed. Runs alternate 0, 1, 0, 1 ... so that load from elsewhere falls on
# both alike. Prints one line per run and a table: median step time (steps 11..STEPS), mean loss of the last
# 10 steps.
#
#   sudo tests/cluster/staleness-bench.sh [--steps 300] [--rate 1gbit] [--repeat 1] [--only local|hosts]
#                                         [--train build/dev/bin/loom-train] [--json FILE]
#
# Needs root for (b), iproute2 (ip, tc), util-linux (unshare) and Open MPI. Uses only the addresses
# 10.232.0.1 and 10.232.0.2 inside the namespaces it creates.
set -euo pipefail

steps=300 rate=1gbit repeat=1 only="" json=""
train="$(cd "$(dirname "$0")/../.." && pwd)/build/dev/bin/loom-train"
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --train) train=$(realpath "$2"); shift 2 ;;
    --json) json=$(realpath -m "$2"); shift 2 ;;
    *) echo "staleness-bench: unknown option $1" >&2; exit 64 ;;
  esac
done
[ -x "$train" ] || { echo "staleness-bench: $train not found; build first (cmake --build --preset dev)" >&2; exit 1; }
case "$steps" in ''|*[!0-9]*) echo "staleness-bench: --steps needs a whole number" >&2; exit 64 ;; esac
[ "$steps" -gt 20 ] || { echo "staleness-bench: --steps must be more than 20" >&2; exit 64; }

work=$(mktemp -d /tmp/loom-staleness.XXXXXX)
cleanup() {
  ip netns del loomSA 2>/dev/null || true
  ip netns del loomSB 2>/dev/null || true
  rm -rf /etc/netns/loomSA /etc/netns/loomSB "$work"
}
trap cleanup EXIT

for s in 0 1; do
  cat > "$work/stale$s.json" <<JSON
{"loom_layout": 1, "name": "gpt-mini-dp2-staleness$s", "model": "gpt-mini", "cluster": "local",
 "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 4, "global_batch": 8},
 "comm": {"staleness": $s}}
JSON
done

hosts=no shaping=""
if [ "$only" != local ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v tc >/dev/null || ! command -v unshare >/dev/null; then
    echo "# two hosts: skipped (needs root, iproute2 and util-linux)"
  else
    ip netns del loomSA 2>/dev/null || true
    ip netns del loomSB 2>/dev/null || true
    ip netns add loomSA
    ip netns add loomSB
    ip link add loomSA0 type veth peer name loomSB0
    ip link set loomSA0 netns loomSA
    ip link set loomSB0 netns loomSB
    ip -n loomSA addr add 10.232.0.1/24 dev loomSA0
    ip -n loomSB addr add 10.232.0.2/24 dev loomSB0
    for ns in loomSA loomSB; do
      ip -n $ns link set lo up
      ip -n $ns link set ${ns}0 up
      mkdir -p /etc/netns/$ns
      printf '127.0.0.1 localhost\n10.232.0.1 hostA\n10.232.0.2 hostB\n' > /etc/netns/$ns/hosts
    done
    shaping="rate $rate"
    for ns in loomSA loomSB; do
      if ip netns exec $ns tc qdisc add dev ${ns}0 root netem delay 100us rate $rate limit 100000 2>/dev/null; then
        shaping="rate $rate, 0.1 ms each way (netem)"
      else
        ip netns exec $ns tc qdisc add dev ${ns}0 root tbf rate $rate burst 256kb latency 50ms
        shaping="rate $rate (tbf; no sch_netem here, so no added delay)"
      fi
    done
    # Open MPI starts its daemon on hostB through this agent instead of ssh (see two-host-bench.sh).
    cat > "$work/agent" <<'AGENT'
#!/bin/sh
host=$1; shift
case "$host" in
  hostA) ns=loomSA ;;
  hostB) ns=loomSB ;;
  *) echo "agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname $host; $*"
AGENT
    chmod +x "$work/agent"
    printf 'hostA slots=1\nhostB slots=1\n' > "$work/hostfile"
    hosts=yes
  fi
fi

# run WHERE STALENESS: one training run; prints "WHERE STALENESS median_step_ms mean_step_ms final_loss seconds"
run() {
  local where=$1 s=$2 metrics="$work/$1-$2.metrics" t0 t1
  rm -f "$metrics"
  t0=$(date +%s.%N)
  if [ "$where" = local ]; then
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun -np 2 --oversubscribe --bind-to none "$train" --layout "$work/stale$s.json" --steps "$steps" \
      --metrics "$metrics" > "$work/$where-$s.log" 2>&1
  else
    ip netns exec loomSA unshare --uts sh -c "hostname hostA; exec \"\$@\"" sh \
      env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LOOM_COMM_TIMEOUT_S=600 \
      mpirun --hostfile "$work/hostfile" -np 2 --map-by slot --bind-to none \
        --mca plm_rsh_agent "$work/agent" --mca btl tcp,vader,self \
        --mca btl_tcp_if_include 10.232.0.0/24 --mca oob_tcp_if_include 10.232.0.0/24 \
        "$train" --layout "$work/stale$s.json" --steps "$steps" --metrics "$metrics" > "$work/$where-$s.log" 2>&1
  fi || { echo "staleness-bench: the $where run with staleness $s failed:" >&2; tail -n 20 "$work/$where-$s.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 - "$where" "$s" "$metrics" "$t0" "$t1" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, statistics, sys
where, s, path, t0, t1, load = sys.argv[1:7]
rows = [json.loads(l) for l in open(path) if l.strip()]
times = [r["step_time_s"] for r in rows[10:]]
loss = statistics.mean(r["loss"] for r in rows[-10:])
print("%s %s %.1f %.1f %.4f %.0f %s" % (where, s, statistics.median(times) * 1e3, statistics.mean(times) * 1e3, loss,
                                         float(t1) - float(t0), load))
PY
}

echo "# gpt-mini, dp 2, global batch 8, micro-batch 4, $steps steps; load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
[ "$hosts" = yes ] && echo "# two hosts: one rank each, link $shaping"
echo "# where staleness median_step_ms mean_step_ms final_loss wall_s load1_after"
: > "$work/results"
for _ in $(seq "$repeat"); do
  for where in local hosts; do
    [ "$where" = hosts ] && [ "$hosts" != yes ] && continue
    [ -n "$only" ] && [ "$only" != "$where" ] && continue
    for s in 0 1; do
      run "$where" "$s" | tee -a "$work/results"
    done
  done
done

python3 - "$work/results" "${json:-}" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
out = []
print("\n| where | staleness | median step (ms) | final loss | speed-up (same pairs) |")
print("|---|---|---|---|---|")
for where in ("local", "hosts"):
    mine = [r for r in rows if r[0] == where]
    if not mine:
        continue
    pairs = [(float(a[2]), float(b[2])) for a, b in zip(mine[0::2], mine[1::2])]
    for s in ("0", "1"):
        sel = [r for r in mine if r[1] == s]
        step = statistics.median(float(r[2]) for r in sel)
        loss = statistics.mean(float(r[4]) for r in sel)
        ratio = statistics.median(a / b for a, b in pairs) if s == "1" else None
        print("| %s | %s | %.1f | %.4f | %s |" % (where, s, step, loss, "%.2fx" % ratio if ratio else ""))
        out.append({"where": where, "staleness": int(s), "median_step_ms": step, "final_loss": loss, "speedup": ratio})
if len(sys.argv) > 2 and sys.argv[2]:
    with open(sys.argv[2], "w") as f:
        for o in out:
            f.write(json.dumps(o) + "\n")
PY
