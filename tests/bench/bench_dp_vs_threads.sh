#!/bin/sh
# dp 2 (one thread per rank, ZeRO-1, shm) against one rank with two threads, in alternating rounds on the
# same machine: each round runs both, one after the other, and the ratio of the two step times is taken
# round by round, so that a machine whose speed drifts between rounds still gives a fair comparison.
# Prints every round, then both medians and the median of the ratios (dp 2's step / two threads' step;
# at most 1.000 means dp 2 is at least as fast). With UNSHARED "yes", each round also runs dp 2 with
# `--share no` (ZeRO-1 all-gathering the updated pieces instead of one copy of the parameters per machine)
# and the script prints `shared_vs_unshared`, the median of the rounds' ratios of the two dp 2 steps.
#   tests/bench/bench_dp_vs_threads.sh MPIEXEC BENCH_STEP [ROUNDS (8)] [STEPS (6)] [UNSHARED (no)]
set -eu
mpiexec=$1
bench=$2
rounds=${3:-8}
steps=${4:-6}
unshared=${5:-no}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

stepMs() { sed -n 's/.*"loom_step_ms":\([0-9.]*\).*/\1/p' "$1"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

i=1
while [ "$i" -le "$rounds" ]; do
    "$bench" --threads 2 --no-reference --steps "$steps" --json > "$out/threads"
    "$mpiexec" --allow-run-as-root --oversubscribe --bind-to none -np 2 \
        "$bench" --threads 1 --zero 1 --no-reference --steps "$steps" --json > "$out/dp"
    if [ "$unshared" = yes ]; then
        "$mpiexec" --allow-run-as-root --oversubscribe --bind-to none -np 2 \
            "$bench" --threads 1 --zero 1 --share no --no-reference --steps "$steps" --json > "$out/dpu"
        u=$(stepMs "$out/dpu")
        [ -n "$u" ] || { echo "bench_dp_vs_threads: round $i: bench_step --share no printed no step time" >&2; exit 1; }
        awk -v d="$(stepMs "$out/dp")" -v u="$u" 'BEGIN { printf "%.3f\n", d / u }' >> "$out/s"
    fi
    t=$(stepMs "$out/threads")
    d=$(stepMs "$out/dp")
    if [ -z "$t" ] || [ -z "$d" ]; then
        echo "bench_dp_vs_threads: round $i: bench_step printed no step time" >&2
        exit 1
    fi
    echo "$t" >> "$out/t"
    echo "$d" >> "$out/d"
    awk -v d="$d" -v t="$t" 'BEGIN { printf "%.3f\n", d / t }' >> "$out/r"
    printf 'round %d: two threads %s ms, dp 2 %s ms, ratio %s%s (load %s)\n' "$i" "$t" "$d" \
        "$(tail -n 1 "$out/r")" "$([ "$unshared" = yes ] && echo "; dp 2 unshared $u ms")" \
        "$(cut -d' ' -f1 /proc/loadavg)"
    i=$((i + 1))
done
slower=$(awk '$1 > 1 { n++ } END { print n + 0 }' "$out/r")
printf 'median step: two threads %s ms, dp 2 %s ms; dp 2 slower in %s of %s rounds\n' \
    "$(median < "$out/t")" "$(median < "$out/d")" "$slower" "$rounds"
printf 'dp2_vs_threads=%.3f  (median of the rounds'"'"' ratios, dp 2 step / two threads'"'"' step; goal: at most 1)\n' \
    "$(median < "$out/r")"
if [ "$unshared" = yes ]; then
    faster=$(awk '$1 < 1 { n++ } END { print n + 0 }' "$out/s")
    printf 'shared_vs_unshared=%.3f  (median of the rounds'"'"' ratios, dp 2 with one copy of the parameters / dp 2 all-gathering them; faster in %s of %s rounds)\n' \
        "$(median < "$out/s")" "$faster" "$rounds"
fi
