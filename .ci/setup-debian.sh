#!/usr/bin/env bash
# Installs the Debian packages moepack builds with, only those missing. Idempotent; safe to rerun.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config
          libcli11-dev nlohmann-json3-dev libzstd-dev libtbb-dev libxxhash-dev
          libgtest-dev libbenchmark-dev libdnnl-dev ocl-icd-opencl-dev groff-base)
if [ "${MOEPACK_WITH_CLANG:-0}" = 1 ]; then packages+=(clang libclang-rt-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing: ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
