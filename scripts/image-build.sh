#!/usr/bin/env bash
# Builds the Dockerfile's image with podman (or docker where its daemon runs), on a machine with no registry.
#
#   scripts/image-build.sh cpu|tt
#
#   cpu   rfdetr-serve:cpu: the CPU engine on debian:bookworm-slim
#   tt    rfdetr-serve:tt: the sidecar built with RFDETR_WITH_TTNN=ON against the ttnn 0.78.0 wheel from PyPI
#         (linking inside the image is the check; there is no card)
#
# First makes the base images the Dockerfile's ARGs name when no registry has them (scripts/image/base-images.sh:
# Debian's packages via mmdebstrap, node from PyPI), installing podman from Debian if no engine works
# (scripts/image/engine.sh). Prints how long each step and build stage took and the images' sizes.
# Env: RFDETR_CONTAINER_ENGINE=podman|docker; RFDETR_IMAGE_TAG (default rfdetr-serve:<variant>).
# Builds run under `nice -n 10`; the sidecar compiles with -j$(nproc) of the build container.
set -euo pipefail

usage() {
  echo "usage: scripts/image-build.sh cpu|tt   (the image to build: the CPU engine, or the TT engine linked against ttnn 0.78.0)" >&2
  exit 2
}
[ $# -eq 1 ] || usage
case "$1" in
  cpu|tt) variant=$1 ;;
  -h|--help) echo "usage: scripts/image-build.sh cpu|tt"; exit 0 ;;
  *) echo "image-build: unknown image '$1'" >&2; usage ;;
esac

cd "$(dirname "$0")/.."
. scripts/image/engine.sh
. scripts/image/base-images.sh
tag=${RFDETR_IMAGE_TAG:-rfdetr-serve:$variant}
TTNN_VERSION=0.78.0

# The Dockerfile's ARG defaults, and what the tt image overrides.
arg_default() { sed -n "s/^ARG $1=//p" Dockerfile | head -1; }
node_image=$(arg_default NODE_IMAGE)
build_base=$(arg_default BUILD_BASE)
runtime_base=$(arg_default RUNTIME_BASE)
build_args=()
if [ "$variant" = tt ]; then
  # The bases the Dockerfile's TT command names (its header comment).
  build_base=ubuntu:24.04
  runtime_base=ubuntu:24.04
  build_args+=(--build-arg "BUILD_BASE=$build_base" --build-arg "RUNTIME_BASE=$runtime_base"
    --build-arg "RFDETR_TTNN_VERSION=$TTNN_VERSION"
    --build-arg "RFDETR_CMAKE_ARGS=-DRFDETR_WITH_TTNN=ON -DRFDETR_BUILD_TESTS=OFF -DRFDETR_TTNN_HEADERS=/opt/ttnn-sdk/headers -DRFDETR_TTNN_WHEEL=/opt/ttnn-sdk/wheel")
fi

# tt: the ttnn-sdk stage clones tt-metal's v$TTNN_VERSION headers from GitHub (scripts/fetch-ttnn-sdk.sh); say so
# at once where GitHub is out of reach instead of failing inside the build after the 90 MB wheel.
if [ "$variant" = tt ] && ! timeout 30 git ls-remote --exit-code https://github.com/tenstorrent/tt-metal "refs/tags/v$TTNN_VERSION" >/dev/null 2>&1; then
  echo "image-build: the tt image needs tt-metal's v$TTNN_VERSION headers from https://github.com/tenstorrent/tt-metal" >&2
  echo "image-build: (scripts/fetch-ttnn-sdk.sh, in the ttnn-sdk stage), and GitHub does not answer from here; build it" >&2
  echo "image-build: where GitHub is reachable, or on a base image with a built tt-metal tree (SERVING.md, \"Container image\")" >&2
  exit 1
fi

times=()
t0=$EPOCHREALTIME
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }'; }

engine_setup image-build
times+=("engine ($ENGINE) ready: $(since "$t0") s")

for ref in "$node_image" "$build_base" "$runtime_base"; do
  t=$EPOCHREALTIME
  if base_exists "$(base_qualified "$ref")"; then continue; fi
  base_image "$ref"
  times+=("base image $ref: $(since "$t") s")
done

# The build's downloads (npm ci, pip) trust what this machine trusts: its CA bundle is bind-mounted into every
# RUN with an npmrc and a pip.conf naming it (podman build -v: nothing of it lands in a layer; a docker daemon
# has its own setup). Machines whose TLS goes through an inspecting proxy need this (npm ci fails with
# SELF_SIGNED_CERT_IN_CHAIN without it); elsewhere it is the same public CAs the image would use.
host_ca=${RFDETR_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
trust=$(mktemp -d)
trap 'rm -rf "$trust"' EXIT
if [ "$ENGINE" = podman ] && [ -r "$host_ca" ]; then
  printf 'cafile=/run/rfdetr-host-ca.crt\n' > "$trust/npmrc"
  printf '[global]\ncert = /run/rfdetr-host-ca.crt\n' > "$trust/pip.conf"
  build_args+=(-v "$host_ca:/run/rfdetr-host-ca.crt:ro" -v "$trust/npmrc:/usr/local/etc/npmrc:ro"
    -v "$trust/pip.conf:/etc/pip.conf:ro")
fi

# The build, each output line stamped so the stages' times can be told (podman prints "[3/4] STEP 1/10: FROM
# ... AS build" as a stage starts; stages run one after another). docker's output gives no stage times here.
# podman's default OCI format has no HEALTHCHECK (it drops it with a warning); the docker format keeps it.
fmt=()
[ "$ENGINE" = podman ] && fmt=(--format docker)
log=$(mktemp --suffix=.image-build.log)
echo "image-build: building $tag with $ENGINE (log: $log)" >&2
set +e
nice -n 10 "$ENGINE" build --pull=never ${fmt[@]+"${fmt[@]}"} -t "$tag" "${build_args[@]}" . 2>&1 |
  while IFS= read -r line; do printf '%s\t%s\n' "$EPOCHREALTIME" "$line"; printf '%s\n' "$line" >&2; done > "$log"
status=${PIPESTATUS[0]}
set -e
stages=$(awk -F'\t' '
  match($2, /STEP 1\/[0-9]+: FROM .*/) {
    n = split(substr($2, RSTART, RLENGTH), w, " ")
    if (cur != "") printf "stage %s: %.0f s\n", cur, $1 - start
    cur = (w[n-1] == "AS") ? w[n] : w[n]; start = $1
  }
  { last = $1 }
  END { if (cur != "") printf "stage %s: %.0f s\n", cur, last - start }' "$log")
if [ "$status" != 0 ]; then
  echo "image-build: $ENGINE build of $tag failed (exit $status); the whole output is in $log" >&2
  exit 1
fi
times+=("build $tag: $(since "$t0") s since the start")

echo "image-build: built $tag" >&2
for t in "${times[@]}"; do echo "image-build: $t" >&2; done
[ -n "$stages" ] && printf '%s\n' "$stages" | sed 's/^/image-build: /' >&2
echo "image-build: sizes:" >&2
"$ENGINE" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "rfdetr-serve|$(base_qualified "$node_image")|$(base_qualified "$build_base")|$(base_qualified "$runtime_base")" |
  sed 's/^/image-build:   /' >&2 || true
echo "image-build: smoke it: bash scripts/image-smoke.sh $variant" >&2
