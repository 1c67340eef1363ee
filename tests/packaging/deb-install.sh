#!/usr/bin/env bash
# Builds Loom's .deb, installs it with apt, runs the installed programs from /usr/bin, checks what the package
# holds, and removes it again so the machine is left as it was. Needs root (or sudo) and the Debian packages
# from installer/bootstrap.sh; apt needs no network when those are installed.
#
#   tests/packaging/deb-install.sh              build with the `package` preset in build/package
#   tests/packaging/deb-install.sh BUILD_DIR    package an already configured build folder instead
#
# Not part of ctest: it builds a release tree and changes the system's package set.
set -euo pipefail

say() { printf 'deb-install: %s\n' "$*"; }
die() { printf 'deb-install: FAIL: %s\n' "$*" >&2; exit 1; }

src=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  die "installing a package needs root; run this script as root or install sudo"
fi
status=$(dpkg-query -W -f='${db:Status-Status}' loom 2>/dev/null || true)
[ "$status" != "installed" ] || die "a loom package is already installed; remove it first (apt-get remove loom)"

# 1. Build and package.
if [ $# -ge 1 ]; then
  build=$(cd "$1" && pwd)
  [ -f "$build/CPackConfig.cmake" ] || die "$build is not a configured Loom build folder (no CPackConfig.cmake); run cmake there first"
else
  build=$src/build/package
  (cd "$src" && cmake --preset package >/dev/null)
fi
say "building in $build"
cmake --build "$build" -j2 >/dev/null
rm -f "$build"/loom_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
debs=("$build"/loom_*_*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then
  die "expected one loom_<version>_<arch>.deb in $build, found: ${debs[*]}"
fi
deb=$(basename "${debs[0]}")
say "made $deb ($(du -h "${debs[0]}" | cut -f1))"
dpkg-deb -f "${debs[0]}" Package Version Architecture Section Depends | sed 's/^/  /'

# 2. What it holds: the three programs, desktop entry, icon, metainfo; no tests or benchmarks.
contents=$(dpkg-deb -c "${debs[0]}" | awk '{print $6}' | sed 's|^\./|/|')
for f in /usr/bin/loom /usr/bin/loom-train /usr/bin/loom-commbench /usr/share/applications/loom.desktop \
         /usr/share/icons/hicolor/scalable/apps/loom.svg /usr/share/metainfo/io.github.loom.Loom.metainfo.xml; do
  grep -qx "$f" <<<"$contents" || die "the package lacks $f"
done
extra=$(grep -v '/$' <<<"$contents" | grep -vxE '/usr/bin/loom(-train|-commbench)?|/usr/share/applications/loom\.desktop|/usr/share/icons/hicolor/scalable/apps/loom\.svg|/usr/share/metainfo/io\.github\.loom\.Loom\.metainfo\.xml' || true)
[ -z "$extra" ] || die "the package holds files it should not (tests, benchmarks, build outputs?): $extra"
say "contents: 3 programs, desktop entry, icon, metainfo, nothing else"
deps=$(dpkg-deb -f "${debs[0]}" Depends)
for d in openmpi-bin libqt6sql6-sqlite libqt6core6 libqt6widgets6 libopenmpi3 libopenblas0; do
  grep -qE "(^|, )$d( |,|$)" <<<"$deps" || die "Depends lacks $d: $deps"
done

# 3. Install with apt, exactly as a user would; remove it again however the script ends.
installed=0
cleanup() {
  if [ "$installed" -eq 1 ]; then
    say "apt-get remove -y loom"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get remove -y loom >/dev/null
    if [ -e /usr/bin/loom ]; then
      say "FAIL: /usr/bin/loom is still there after removal"
      exit 1
    fi
    say "removed; /usr/bin/loom is gone"
  fi
  rm -rf "${work:-}"
}
trap cleanup EXIT
say "apt-get install -y ./$deb"
(cd "$build" && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "./$deb" >/dev/null)
installed=1
dpkg -L loom >/dev/null || die "dpkg does not know the package after apt installed it"
listed=$(dpkg -L loom)
for f in /usr/share/applications/loom.desktop /usr/share/icons/hicolor/scalable/apps/loom.svg \
         /usr/share/metainfo/io.github.loom.Loom.metainfo.xml /usr/bin/loom /usr/bin/loom-train /usr/bin/loom-commbench; do
  grep -qx "$f" <<<"$listed" || die "dpkg -L loom does not list $f"
done
say "dpkg -L loom lists the programs, the desktop entry, the icon and the metainfo"
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate /usr/share/applications/loom.desktop || die "the installed desktop entry is not valid"
  say "desktop-file-validate: the installed desktop entry is valid"
fi
if command -v appstreamcli >/dev/null; then
  appstreamcli validate --no-net /usr/share/metainfo/io.github.loom.Loom.metainfo.xml >/dev/null \
    || die "appstreamcli validate rejects the installed metainfo"
  say "appstreamcli validate: the installed metainfo is valid"
fi
for p in loom loom-train loom-commbench; do
  missing=$(ldd "/usr/bin/$p" | grep 'not found' || true)
  [ -z "$missing" ] || die "/usr/bin/$p lacks libraries: $missing"
done

# 4. Run the installed programs from /usr/bin, with nothing from the build on PATH or in the environment,
#    and a fresh store.
work=$(mktemp -d)
run() { env -i HOME="$work" PATH=/usr/bin:/bin LOOM_DB="$work/loom.db" QT_QPA_PLATFORM=offscreen "$@"; }
out=$(run loom --version) || die "loom --version failed: $out"
[ "$out" = "loom $(dpkg-deb -f "${debs[0]}" Version)" ] || die "loom --version printed '$out'"
say "loom --version: $out"
out=$(env -i HOME="$work" PATH=/usr/bin:/bin LOOM_DB="$work/loom.db" loom --headless 2>&1) \
  || die "loom --headless failed: $out"
grep -qx 'valid' <<<"$out" || die "loom --headless did not describe the built-in example: $out"
say "loom --headless (built-in example from the Qt resources): $(head -n 1 <<<"$out")"
out=$(run loom-train --help 2>&1) || die "loom-train --help failed: $out"
say "loom-train --help: $(head -n 1 <<<"$out")"
out=$(run loom-commbench --help 2>&1) || die "loom-commbench --help failed: $out"
say "loom-commbench --help: $(head -n 1 <<<"$out")"
# `loom run` must find the engine from the install prefix (beside /usr/bin/loom): one step of the example.
out=$(run loom run "$src/resources/examples/tiny-local.json" --steps 1 2>&1) || die "loom run failed: $out"
grep -q 'command mpirun .* /usr/bin/loom-train --layout' <<<"$(run loom runs show 1 2>&1)" \
  || die "the run did not use /usr/bin/loom-train: $(run loom runs show 1 2>&1)"
say "loom run --steps 1 with the installed engine /usr/bin/loom-train: $(tr '\r' '\n' <<<"$out" | grep -E '^step 1/1' | tail -n 1 | sed 's/ *$//')"
if command -v xvfb-run >/dev/null; then
  env -i HOME="$work" PATH=/usr/bin:/bin LOOM_DB="$work/loom.db" xvfb-run -a loom --screenshot "$work/window.png" >/dev/null 2>&1 \
    || die "the installed workbench did not open under Xvfb"
  [ -s "$work/window.png" ] || die "the installed workbench saved no screenshot"
  say "loom --screenshot under Xvfb: the workbench window opens ($(du -h "$work/window.png" | cut -f1) PNG)"
fi
say "PASS"
