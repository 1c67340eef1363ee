#!/usr/bin/env bash
# Refreshes the workbench screenshots in docs/images under Xvfb (1600x1000, a fresh settings folder and
# store, so the default dock layout is shown). Run after `cmake --build --preset dev`; needs xvfb-run
# (installer/bootstrap.sh). The run screenshots train the example for real (about 10 s each).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
loom=${LOOM:-$root/build/dev/bin/loom}
[ -x "$loom" ] || { echo "screenshots: $loom is missing; build first (cmake --build --preset dev)" >&2; exit 1; }
settings=$(mktemp -d)
trap 'rm -rf "$settings"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
shoot() {
  XDG_CONFIG_HOME=$settings LOOM_DB=$settings/loom.db \
    xvfb-run -a -s "-screen 0 1600x1000x24" "$loom" "$@"
}
images=$root/docs/images
shoot --screenshot "$images/workbench-example.png"
shoot "$root/resources/examples/megatron-1t-3072-a100.json" --screenshot "$images/workbench-megatron-1t.png"
shoot --run 40 --show timeline --screenshot "$images/run-timeline.png"
shoot --run 40 --show metrics --screenshot "$images/run-metrics.png"
shoot --show runs --screenshot "$images/run-history.png"
# The timeline's tools (groups, flows, an area's table; the run above against its prediction), made by
# shot_timeline through real clicks and drags.
shots=${SHOT_TIMELINE:-$root/build/dev/bin/shot_timeline}
XDG_CONFIG_HOME=$settings xvfb-run -a -s "-screen 0 1600x1000x24" "$shots" "$images" --db "$settings/loom.db" --run 1
# Lessons with the widget of their step framed, and the all-reduce stepper (lesson 11, topology, its second step).
shoot --lesson pipeline-bubble --screenshot "$images/lesson-pipeline-bubble.png"
shoot --lesson data-parallel --lesson-step 2 --screenshot "$images/lesson-data-parallel.png"
shoot --lesson hybrid-zero --lesson-step 2 --screenshot "$images/lesson-hybrid-zero.png"
shoot --lesson topology --lesson-step 2 --screenshot "$images/allreduce-stepper.png"
# The window at the two screen sizes it is tested at (tst_workbenchfit): the default start, lesson 1, megatron-1t.
for size in 1600x1000 1280x800; do
  for shot in "workbench-example|" "lesson-one-device|--lesson one-device" \
    "workbench-megatron-1t|$root/resources/examples/megatron-1t-3072-a100.json"; do
    fresh=$(mktemp -d) # the default dock layout for each, never a remembered one
    # shellcheck disable=SC2086 # the arguments are split on purpose
    XDG_CONFIG_HOME=$fresh LOOM_DB=$fresh/loom.db xvfb-run -a -s "-screen 0 ${size}x24" "$loom" ${shot#*|} \
      --screenshot "$images/${shot%%|*}-$size.png"
    rm -rf "$fresh"
  done
done
echo "screenshots: wrote $(cd "$images" && ls *.png | tr '\n' ' ')"
