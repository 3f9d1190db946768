#!/usr/bin/env bash
# The Dockerfile's runtime stage: installs the packages the staged sidecar links (the list
# scripts/container-build.sh wrote), creates the non-root `rfdetr` user and its writable cache directories.
#
#   scripts/container-runtime-setup.sh [--dry-run] PACKAGES_FILE
#
# --dry-run prints the commands instead of running them (the tests use it; the real run needs root).
# Env: RFDETR_WITH_FFMPEG=1 also installs ffmpeg.
set -euo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
file=${1:?usage: container-runtime-setup.sh [--dry-run] PACKAGES_FILE}
if [ ! -r "$file" ]; then
  echo "container-runtime-setup: cannot read '$file' (written by scripts/container-build.sh as runtime-packages.txt)" >&2
  exit 2
fi

# ca-certificates: the weights download (HTTPS to the Hub). tini is not needed: node is PID 1 and the CLI
# handles SIGTERM itself (see the Dockerfile).
# RFDETR_WITH_FFMPEG=1 adds ffmpeg (video inputs; the Dockerfile's build arg of that name).
mapfile -t pkgs < <(grep -v '^[[:space:]]*$' "$file"; echo ca-certificates; if [ "${RFDETR_WITH_FFMPEG:-0}" = 1 ]; then echo ffmpeg; fi)
uid=10001
run() {
  if [ "$dry" = "1" ]; then echo "$*"; else "$@"; fi
}

run apt-get update -qq
run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
# The .debs apt keeps in /var/cache/apt/archives: 89 MB of the first podman-built image, on a base without the
# official images' docker-clean apt setting (scripts/image/base-images.sh makes such bases).
run apt-get clean
run sh -c 'rm -rf /var/lib/apt/lists/*'
run groupadd --system --gid "$uid" rfdetr
run useradd --system --uid "$uid" --gid "$uid" --home-dir /var/lib/rfdetr --create-home --shell /usr/sbin/nologin rfdetr
run install -d -o rfdetr -g rfdetr -m 0750 /var/cache/rfdetr /var/cache/rfdetr/huggingface /var/cache/rfdetr/tt-metal
