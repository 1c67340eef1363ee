#!/usr/bin/env bash
# Unpacks what the lent GPU machine lacks for tests/gpu/device-check.sh into build/gpu-carry (ignored by
# git): Debian 12's OpenBLAS (pthread build) with its libgfortran, and nlohmann_json's headers. Run it here
# (Debian, apt) before handing the tree to the GPU machine with carry: ["build/gpu-carry"]. The static
# libraries and LAPACK are dropped to keep the carry under 50 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/gpu-carry
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download libopenblas0-pthread libopenblas-pthread-dev libgfortran5 nlohmann-json3-dev)
rm -rf "$out"
mkdir -p "$out"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$out"; done
find "$out" \( -name '*.a' -o -name 'liblapack*' -o -path '*/share/doc*' \) -exec rm -rf {} +
du -sh "$out"
