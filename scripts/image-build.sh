#!/usr/bin/env bash
# Builds the Dockerfile's image with podman (or docker where its daemon runs), on a machine with no registry.
#
#   scripts/image-build.sh cpu|tt
#
#   cpu   rfdetr-serve:cpu: the CPU engine on debian:bookworm-slim
#   tt    rfdetr-serve:tt: the sidecar built with RFDETR_WITH_TTNN=ON against a ttnn wheel's libraries from PyPI
#         (linking inside the image is the check; there is no card), on debian:bookworm-slim. The headers:
#         - where GitHub answers: tt-metal's v0.78.0 tag (scripts/fetch-ttnn-sdk.sh), linked against ttnn 0.78.0,
#           the serving pin;
#         - otherwise (the project's machines): ../shared/ttnn-sdk's tt-metal-headers-*.tar.xz (RFDETR_TTNN_SDK
#           names another folder), which are 0.70.1's API generation, so the image is LINKED AGAINST ttnn 0.70.1,
#           not the 0.78.0 pin; every ttnn call of the object the image build compiled is then checked against
#           0.78.0's exports beside the build (scripts/ttnn-calls.py, as scripts/check-ttnn.sh step 4).
#         The image carries the label rfdetr.ttnn-linked=<version>.
#
# First makes the base images the Dockerfile's ARGs name when no registry has them (scripts/image/base-images.sh:
# Debian's packages via mmdebstrap, node from PyPI), installing podman from Debian if no engine works
# (scripts/image/engine.sh). Prints how long each step and build stage took and the images' sizes.
# Env: RFDETR_CONTAINER_ENGINE=podman|docker; RFDETR_IMAGE_TAG (default rfdetr-serve:<variant>);
# RFDETR_IMAGE_FFMPEG=1 adds Debian's ffmpeg to the runtime image (video inputs; +~450 MB, SERVING.md);
# RFDETR_TTNN_SDK (tt: the folder holding tt-metal-headers-*.tar.xz, default ../shared/ttnn-sdk);
# RFDETR_TTNN_CACHE (tt: where the 0.78.0 wheel for the call check is kept, as scripts/check-ttnn.sh).
# Builds run under `nice -n 10`; the sidecar compiles with -j$(nproc) of the build container.
set -euo pipefail

usage() {
  echo "usage: scripts/image-build.sh cpu|tt   (the image to build: the CPU engine, or the TT engine linked against a ttnn wheel)" >&2
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
TTNN_PIN=0.78.0          # the release the product serves with
TTNN_SDK_LINKED=0.70.1   # the API generation of ../shared/ttnn-sdk's headers

# The Dockerfile's ARG defaults (debian:bookworm-slim for both images; the Dockerfile's ubuntu:24.04 TT path is
# documented there, not run here: Ubuntu's archive does not answer from the project's machines).
arg_default() { sed -n "s/^ARG $1=//p" Dockerfile | head -1; }
node_image=$(arg_default NODE_IMAGE)
build_base=$(arg_default BUILD_BASE)
runtime_base=$(arg_default RUNTIME_BASE)
build_args=()
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit=$commit-dirty; fi
build_args+=(--build-arg "RFDETR_COMMIT=$commit")
[ "${RFDETR_IMAGE_FFMPEG:-0}" = 1 ] && build_args+=(--build-arg RFDETR_WITH_FFMPEG=1)

staged=
cleanup_staged() { if [ -n "$staged" ]; then rm -f "$staged"; fi; }
trap cleanup_staged EXIT
if [ "$variant" = tt ]; then
  # Which headers: tt-metal's v$TTNN_PIN tag where GitHub answers, else the tarball of ../shared/ttnn-sdk.
  if timeout 30 git ls-remote --exit-code https://github.com/tenstorrent/tt-metal "refs/tags/v$TTNN_PIN" >/dev/null 2>&1; then
    ttnn_version=$TTNN_PIN
    echo "image-build: tt: headers from tt-metal's v$TTNN_PIN tag (GitHub), libraries of the ttnn $TTNN_PIN wheel" >&2
  else
    sdk=${RFDETR_TTNN_SDK:-../shared/ttnn-sdk}
    tarball=$(ls "$sdk"/tt-metal-headers-*.tar.xz 2>/dev/null | head -1 || true)
    if [ -z "$tarball" ]; then
      echo "image-build: the tt image needs tt-metal headers: tt-metal's v$TTNN_PIN tag from https://github.com/tenstorrent/tt-metal" >&2
      echo "image-build: (GitHub does not answer from here), or a tt-metal-headers-*.tar.xz in $sdk (none there; set" >&2
      echo "image-build: RFDETR_TTNN_SDK to the folder holding one). Or build on a base image with a built tt-metal tree (SERVING.md)." >&2
      exit 1
    fi
    ttnn_version=$TTNN_SDK_LINKED
    staged=scripts/image/ttnn-headers/$(basename "$tarball")
    cp "$tarball" "$staged"
    echo "image-build: tt: GitHub does not answer: headers from $tarball ($TTNN_SDK_LINKED's API generation), libraries" >&2
    echo "image-build: tt: of the ttnn $TTNN_SDK_LINKED wheel. This image is LINKED AGAINST ttnn $TTNN_SDK_LINKED, not the serving pin $TTNN_PIN;" >&2
    echo "image-build: tt: its calls are checked against $TTNN_PIN's exports after the build." >&2
    build_args+=(--build-arg "RFDETR_TTNN_HEADERS_TARBALL=$(basename "$tarball")")
  fi
  build_args+=(--build-arg "RFDETR_TTNN_VERSION=$ttnn_version" --label "rfdetr.ttnn-linked=$ttnn_version"
    --build-arg "RFDETR_CMAKE_ARGS=-DRFDETR_WITH_TTNN=ON -DRFDETR_BUILD_TESTS=OFF -DRFDETR_TTNN_HEADERS=/opt/ttnn-sdk/headers -DRFDETR_TTNN_WHEEL=/opt/ttnn-sdk/wheel -DRFDETR_TTNN_VERSION=$ttnn_version")
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
trap 'rm -rf "$trust"; cleanup_staged' EXIT
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

# tt linked against another release than the pin: the 0.78.0 call check, beside the build. It reads the object
# the image build compiled (tt-ops-ttnn.cpp.o, in the build stage's last layer) and
# checks each ttnn call in it against the ttnn $TTNN_PIN wheel's exports on this machine, as check-ttnn.sh step 4
# does. Beside, not inside: it needs a second 90 MB wheel and Python's nm-parsing the image never ships, and its
# verdict is about the sources, which CI's check-ttnn.sh holds too; here it ties that verdict to this image's object.
if [ "$variant" = tt ] && [ "$ttnn_version" != "$TTNN_PIN" ]; then
  t=$EPOCHREALTIME
  check=$(mktemp -d)
  trap 'rm -rf "$trust" "$check"; cleanup_staged' EXIT
  # The build stage's last layer, as this build's log names it (podman keeps it: --layers); with docker, or no
  # such line, the stage is built again with --target (every layer cached unless the sources changed meanwhile).
  stage_image=$(cut -f2 "$log" | awk '/^\[[0-9]+\/[0-9]+\] STEP 1\/[0-9]+: FROM .* AS build$/ { f = 1; next }
    f && /^\[[0-9]+\/[0-9]+\] STEP 1\// { exit } f && /^--> [0-9a-f]+$/ { id = $2 } END { print id }')
  if [ -z "$stage_image" ] || ! "$ENGINE" image inspect "$stage_image" >/dev/null 2>&1; then
    nice -n 10 "$ENGINE" build --pull=never ${fmt[@]+"${fmt[@]}"} --target build -q -t "$tag-build" "${build_args[@]}" . >/dev/null 2>&1 ||
      { echo "image-build: could not build the build stage of $tag (needed for the $TTNN_PIN call check)" >&2; exit 1; }
    stage_image=$tag-build
  fi
  cid=$("$ENGINE" create "$stage_image" true)
  obj=$("$ENGINE" run --rm --entrypoint sh "$stage_image" -c 'find /src/sidecar/build -name tt-ops-ttnn.cpp.o | head -1')
  [ -n "$obj" ] || { "$ENGINE" rm "$cid" >/dev/null; echo "image-build: the build stage of $tag ($stage_image) has no tt-ops-ttnn.cpp.o" >&2; exit 1; }
  "$ENGINE" cp "$cid:$obj" "$check/tt-ops-ttnn.cpp.o"
  "$ENGINE" cp "$cid:/opt/ttnn-sdk/wheel/ttnn/build/lib" "$check/linked-lib"
  "$ENGINE" rm "$cid" >/dev/null
  [ "$stage_image" = "$tag-build" ] && { "$ENGINE" rmi "$tag-build" >/dev/null 2>&1 || true; }
  cache=${RFDETR_TTNN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rfdetr-ttnn}
  target=$cache/ttnn-$TTNN_PIN
  if [ ! -f "$target/.unpacked" ]; then
    mkdir -p "$cache/wheels"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.10 \
      --platform manylinux_2_34_x86_64 "ttnn==$TTNN_PIN" -d "$cache/wheels" >&2 ||
      { echo "image-build: pip could not download ttnn==$TTNN_PIN for the call check (is PyPI reachable?)" >&2; exit 1; }
    rm -rf "$target.tmp"
    python3 -m zipfile -e "$(ls "$cache"/wheels/ttnn-"$TTNN_PIN"-*.whl | head -1)" "$target.tmp"
    rm -rf "$target" && mv "$target.tmp" "$target" && touch "$target/.unpacked"
  fi
  counts=$(python3 scripts/ttnn-calls.py --object "$check/tt-ops-ttnn.cpp.o" --source sidecar/src/engines/tt/tt-ops-ttnn.cpp \
    --linked-lib "$check/linked-lib" --linked-version "$ttnn_version" --target-lib "$target/ttnn/build/lib" \
    --target-version "$TTNN_PIN" --headers "the image's headers ($(basename "$staged"))" --out "$check/TTNN_CALLS.md") ||
    { echo "image-build: a ttnn call of $tag's sidecar has no function of that name in $TTNN_PIN (above)" >&2; exit 1; }
  read -r n m k <<<"$counts"
  times+=("ttnn $TTNN_PIN call check of the image's object: $(since "$t") s")
  echo "image-build: $tag links ttnn $ttnn_version ($n ttnn symbols resolved); $m/$k of its calls bind in ttnn $TTNN_PIN's exports" >&2
fi
for t in "${times[@]}"; do echo "image-build: $t" >&2; done
[ -n "$stages" ] && printf '%s\n' "$stages" | sed 's/^/image-build: /' >&2
echo "image-build: sizes:" >&2
"$ENGINE" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "rfdetr-serve|$(base_qualified "$node_image")|$(base_qualified "$build_base")|$(base_qualified "$runtime_base")" |
  sed 's/^/image-build:   /' >&2 || true
echo "image-build: smoke it: bash scripts/image-smoke.sh $variant" >&2
