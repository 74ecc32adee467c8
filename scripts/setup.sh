#!/usr/bin/env bash
# Installs exactly the Debian 12 packages sparsp needs that are missing. Idempotent; silent when
# nothing is missing. Run as root (or with sudo available).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev doctest-dev
  libmetis-dev libpugixml-dev libzip-dev libsimgrid-dev libtbb-dev
  libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev
  python3 python3-numpy python3-matplotlib python3-venv python3-pip python3-setuptools
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
