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

. "$(dirname "$0")/two-hosts.sh"
work=$(mktemp -d /tmp/loom-staleness.XXXXXX)
cleanup() {
  two_hosts_down loomS
  rm -rf "$work"
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
    two_hosts_up loomS 10.232.0 "$rate" "$work" 1
    shaping=$two_hosts_shaping
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
    two_hosts_mpirun loomS 10.232.0 "$work" -np 2 \
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
