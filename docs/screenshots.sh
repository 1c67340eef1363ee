#!/usr/bin/env bash
# Refreshes the workbench screenshots in docs/images under Xvfb (1600x1000, a fresh settings folder, so the
# default dock layout is shown). Run after `cmake --build --preset dev`; needs xvfb-run (installer/bootstrap.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
loom=${LOOM:-$root/build/dev/bin/loom}
[ -x "$loom" ] || { echo "screenshots: $loom is missing; build first (cmake --build --preset dev)" >&2; exit 1; }
settings=$(mktemp -d)
trap 'rm -rf "$settings"' EXIT
shoot() {
  XDG_CONFIG_HOME=$settings LOOM_DB=$settings/loom.db \
    xvfb-run -a -s "-screen 0 1600x1000x24" "$loom" "$@"
}
shoot --screenshot "$root/docs/images/workbench-example.png"
shoot "$root/resources/examples/megatron-1t-3072-a100.json" --screenshot "$root/docs/images/workbench-megatron-1t.png"
echo "screenshots: wrote docs/images/workbench-example.png and docs/images/workbench-megatron-1t.png"
