#!/usr/bin/env bash
# Installs the Debian 12 packages that Loom's build, tests and workbench need. Idempotent: installs only
# what is missing, and says what it does. Run as root, or as a user who may use sudo.
#
#   installer/bootstrap.sh            build, test and GUI packages
#   installer/bootstrap.sh --check    only report what is missing (exit 1 when something is)
#   installer/bootstrap.sh --torch    also python3-torch (tests/bridges' PyTorch fixtures, tst_torch_parity)
set -euo pipefail

# Build: compiler, CMake, Qt 6 (Core, Sql + SQLite driver, Widgets, Test, Svg), QCustomPlot (Qt 6 build),
# Open MPI, Gloo, OpenBLAS, LZ4, SQLite, nlohmann-json. Tests and screenshots: Xvfb with xauth, fonts. CI:
# clang-format (.ci/check-format).
# Launching: ssh (the client for `loom run` on hosts; the server so the launcher tests can start throwaway
# sshd hosts) and Slurm (the clients sbatch/srun/scontrol/scancel; munged, slurmctld and slurmd for the tests'
# one-node cluster).
packages=(
  build-essential cmake pkg-config
  qt6-base-dev qt6-base-dev-tools libqt6sql6-sqlite qt6-svg-dev
  libqcustomplot-dev libqcustomplot2.1-qt6
  libopenmpi-dev openmpi-bin
  libgloo-dev
  libopenblas-dev liblz4-dev libsqlite3-dev nlohmann-json3-dev
  xvfb xauth fonts-dejavu-core
  clang-format
  openssh-client openssh-server slurm-wlm
)

say() { printf 'bootstrap: %s\n' "$*"; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

check_only=0
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    # Debian's PyTorch (CPU), only for remaking the PyTorch profiler fixtures and their live test
    # (tests/bridges/make-torch-traces.py) and for loom-train's PyTorch parity test
    # (tests/engine/train/torch_parity.py); both run with ctest -L torch and are skipped without it. The
    # default suite reads the committed fixtures.
    --torch) packages+=(python3-torch) ;;
    *) die "unknown option '$arg'; use no option to install, --check to report what is missing, --torch to add python3-torch" ;;
  esac
done

[ -r /etc/debian_version ] || die "this script installs Debian packages; on another system install the equivalents of: ${packages[*]}"
command -v dpkg-query >/dev/null || die "dpkg-query is missing; this does not look like a Debian system"

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  say "all ${#packages[@]} packages are installed; nothing to do"
  exit 0
fi
say "missing: ${missing[*]}"
if [ "$check_only" -eq 1 ]; then
  exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo=(sudo)
elif command -v sudo >/dev/null; then
  say "installing needs root; sudo will ask for your password"
  sudo=(sudo)
else
  die "installing packages needs root; run this script as root or install sudo, or install: ${missing[*]}"
fi

export DEBIAN_FRONTEND=noninteractive
say "apt-get update"
"${sudo[@]}" apt-get update -qq || die "apt-get update failed; check the network and /etc/apt/sources.list"
say "apt-get install ${missing[*]}"
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
  || die "apt-get install failed for: ${missing[*]} (see the messages above)"

still=()
for p in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || still+=("$p")
done
[ ${#still[@]} -eq 0 ] || die "these packages are still missing after apt-get: ${still[*]}"
say "installed ${#missing[@]} package(s)"
