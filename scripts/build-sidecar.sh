#!/usr/bin/env bash
# Builds the C++ sidecar (run by `npm install`). Installs missing system packages with apt-get when
# run as root; otherwise stops with the exact command to run. RFDETR_SKIP_SIDECAR_BUILD=1 skips it
# (client-only installs that talk to a remote server with --url).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${RFDETR_SKIP_SIDECAR_BUILD:-0}" = "1" ]; then
  echo "build-sidecar: RFDETR_SKIP_SIDECAR_BUILD=1, not building the sidecar" >&2
  exit 0
fi

arch=$(uname -m)
if [ "$arch" != "x86_64" ]; then
  echo "build-sidecar: the sidecar builds for x86-64 with AVX2 only; this machine is $arch." >&2
  echo "build-sidecar: use 'rfdetr detect --url' against a server on an x86-64 host, or set RFDETR_SKIP_SIDECAR_BUILD=1." >&2
  exit 1
fi

# Debian/Ubuntu packages the build needs: compiler, CMake, Ninja, OpenBLAS, msgpack-cxx, nlohmann-json, GoogleTest,
# libpng (the C++ preprocess test decodes the fixtures' input.png with it; the product links none of it), libjpeg-turbo and
# libdeflate (sidecar/src/decode: the in-sidecar JPEG/PNG decode).
pkgs=(g++ cmake ninja-build pkg-config libopenblas-dev libmsgpack-cxx-dev nlohmann-json3-dev libgtest-dev libpng-dev libjpeg62-turbo-dev libdeflate-dev)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# apt-get update once per run, however many of the blocks below install something.
apt_updated=0
apt_update() {
  [ "$apt_updated" = 1 ] && return 0
  apt-get -o DPkg::Lock::Timeout=600 update -qq || return
  apt_updated=1
}
missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "build-sidecar: missing build dependencies (${missing[*]}) and no apt-get here; install their equivalents and rerun 'npm install'." >&2
    exit 1
  fi
  if [ "$(id -u)" = "0" ]; then
    echo "build-sidecar: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt_update >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    echo "build-sidecar: missing build dependencies: ${missing[*]}" >&2
    echo "build-sidecar: run:  sudo apt-get install -y ${missing[*]} && npm install" >&2
    exit 1
  fi
fi

# Optional packages, installed as root and otherwise told, not fatal: ffmpeg (ffmpeg + ffprobe) decodes and encodes
# videos for `rfdetr detect` (still images never need it); ccache lets build trees share objects
# (sidecar/cmake/rfdetr-ccache.cmake: CI's second and third builds of the same sources, rebuilds after a checkout).
declare -A why=([ffmpeg]="videos will not work (images will)" [ccache]="every build compiles from scratch")
optional=()
for p in ffmpeg ccache; do
  installed "$p" || command -v "$p" >/dev/null 2>&1 || optional+=("$p")
done
if [ ${#optional[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "build-sidecar: installing ${optional[*]} (optional)" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt_update &&
      apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${optional[@]}"; } >&2 ||
      echo "build-sidecar: apt-get could not install ${optional[*]}; building without them" >&2
  else
    for p in "${optional[@]}"; do
      echo "build-sidecar: $p is not installed: ${why[$p]}; run:  sudo apt-get install -y $p" >&2
    done
  fi
fi

build_dir=sidecar/build
cmake -S sidecar -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${RFDETR_CMAKE_ARGS:-} >&2
cmake --build "$build_dir" -j "$(nproc)" >&2
