#!/usr/bin/env bash
# The `tt` engine against real ttnn releases, on a machine without a card (a step of .ci/run, after npm test):
#  1. compiles rfdetr-sidecar with RFDETR_WITH_TTNN=ON against the tt-metal headers of ../shared/ttnn-sdk (or
#     RFDETR_TTNN_HEADERS) and links it against the ttnn 0.70.1 wheel's libraries (the same API generation);
#  2. checks the link: every shared library resolves through the rpath (ldd, LD_LIBRARY_PATH unset) and every
#     symbol binds at load (LD_BIND_NOW=1);
#  3. runs `rfdetr-sidecar --engine tt` on a synthetic checkpoint: it must exit 1 at the device open with a
#     message naming the driver, /dev/tenstorrent and TT_METAL_VISIBLE_DEVICES, and the op this build lacks;
#     no READY line, nothing left behind;
#  4. compiles tt-ops-ttnn.cpp (syntax only) with the op headers the 0.78.0 wheel ships (it ships some of its
#     ops' host headers exactly, among its 1,801 headers: permute, concat, slice, reshape, …) put ahead of the
#     tt-metal headers, so the calls of those ops are checked against 0.78.0's own declarations (the include
#     trace must show each of them used); then checks each ttnn call against the 0.78.0 wheel's exports and
#     regenerates sidecar/src/engines/tt/TTNN_CALLS.md (scripts/ttnn-calls.py), which records both; a call
#     0.78.0 does not have fails;
#  5. imports the tt-model app module (tt-model/rfdetr_tt_app) the two ways tt-model does.
# Wheels are fetched once with pip into ${RFDETR_TTNN_CACHE:-~/.cache/rfdetr-ttnn} and reused.
# Needs: python3 with pip, cmake, ninja, g++, nm (binutils). Last line on success:
#   ttnn link check: OK (<headers>, ttnn 0.70.1 linked, <n> ttnn symbols resolved, <m>/<k> calls bind in 0.78.0)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

LINKED=0.70.1
TARGET=0.78.0
cache=${RFDETR_TTNN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rfdetr-ttnn}
build=sidecar/build-ttnn
calls_md=sidecar/src/engines/tt/TTNN_CALLS.md

fail() {
  echo "check-ttnn: FAILED: $*" >&2
  echo "ttnn link check: FAILED ($1)" >&2
  exit 1
}
step() { echo "check-ttnn: $*" >&2; }

for tool in cmake ninja g++ nm ldd; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (Debian: apt-get install cmake ninja-build g++ binutils libc-bin)"
done
python3 -m pip --version >/dev/null 2>&1 ||
  fail "python3 with pip is needed to fetch the ttnn wheels (Debian: apt-get install python3-pip; or python3 -m ensurepip)"

# --- the wheels ------------------------------------------------------------------------------------------------
mkdir -p "$cache/wheels"
fetch_wheel() { # version -> unpacked at $cache/ttnn-<version>
  local v=$1 dest=$cache/ttnn-$1
  if [ -f "$dest/.unpacked" ]; then return; fi
  step "fetching ttnn==$v from PyPI into $cache/wheels"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.10 \
    --platform manylinux_2_34_x86_64 "ttnn==$v" -d "$cache/wheels" >&2 ||
    fail "pip could not download ttnn==$v (is PyPI reachable?)"
  local whl
  whl=$(ls "$cache"/wheels/ttnn-"$v"-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || fail "pip reported success but no ttnn-$v wheel is in $cache/wheels"
  rm -rf "$dest.tmp"
  python3 -m zipfile -e "$whl" "$dest.tmp" || fail "could not unpack $whl"
  rm -rf "$dest" && mv "$dest.tmp" "$dest" && touch "$dest/.unpacked"
}
fetch_wheel "$LINKED"
fetch_wheel "$TARGET"

# --- the headers -----------------------------------------------------------------------------------------------
if [ -n "${RFDETR_TTNN_HEADERS:-}" ]; then
  headers=$RFDETR_TTNN_HEADERS
  headers_desc="tt-metal headers at $headers"
else
  sdk=${RFDETR_TTNN_SDK:-$repo/../shared/ttnn-sdk}
  tarball=$(ls "$sdk"/tt-metal-headers-*.tar.xz 2>/dev/null | head -1 || true)
  [ -n "$tarball" ] || fail "no tt-metal headers: set RFDETR_TTNN_HEADERS, or RFDETR_TTNN_SDK to the folder holding tt-metal-headers-*.tar.xz (looked in $sdk)"
  rev=$(basename "$tarball" .tar.xz)
  rev=${rev#tt-metal-headers-}
  headers=$cache/headers-$rev
  if [ ! -f "$headers/.unpacked" ]; then
    rm -rf "$headers" && mkdir -p "$headers"
    tar -xJf "$tarball" -C "$headers" --strip-components=1 || fail "could not unpack $tarball"
    touch "$headers/.unpacked"
  fi
  headers_desc="tt-metal headers $rev"
fi

# --- 1. compile and link ---------------------------------------------------------------------------------------
step "building rfdetr-sidecar with RFDETR_WITH_TTNN=ON into $build (ttnn $LINKED libraries)"
cmake -S sidecar -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRFDETR_WITH_TTNN=ON -DRFDETR_BUILD_TESTS=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DRFDETR_TTNN_HEADERS="$headers" -DRFDETR_TTNN_WHEEL="$cache/ttnn-$LINKED" -DRFDETR_TTNN_VERSION= >&2 ||
  fail "cmake could not configure the TT build"
cmake --build "$build" -j "$(nproc)" --target rfdetr-sidecar rfdetr-synth rfdetr-tt-opcheck >&2 ||
  fail "rfdetr-sidecar did not compile or link against ttnn $LINKED (the build log above names the call)"
bin=$build/rfdetr-sidecar
obj=$(find "$build" -name 'tt-ops-ttnn.cpp.o' | head -1)
[ -n "$obj" ] || fail "the build has no tt-ops-ttnn.cpp.o: the ttnn layer was not compiled"

# --- 2. the link -----------------------------------------------------------------------------------------------
lddout=$(env -u LD_LIBRARY_PATH ldd "$bin")
if grep -q "not found" <<<"$lddout"; then
  fail "shared libraries do not resolve: $(grep 'not found' <<<"$lddout" | tr -s ' \t' ' ' | tr '\n' ';')"
fi
for lib in _ttnncpp.so libtt_metal.so libtt_stl.so; do
  grep -q "$lib => $cache/ttnn-$LINKED/ttnn/build/lib/$lib" <<<"$lddout" ||
    fail "$lib does not resolve to the ttnn $LINKED wheel through the rpath: $(grep "$lib" <<<"$lddout" || echo absent)"
done
env -u LD_LIBRARY_PATH LD_BIND_NOW=1 "$bin" --version >/dev/null 2>"$cache/bind-now.err" ||
  fail "rfdetr-sidecar does not load with every symbol bound (LD_BIND_NOW=1): $(head -3 "$cache/bind-now.err")"
"$bin" --list-engines | node -e 'const l = JSON.parse(require("fs").readFileSync(0, "utf8")); process.exit(l.engines.some((e) => e.name === "tt" && e.built) ? 0 : 1)' ||
  fail "rfdetr-sidecar --list-engines does not list the tt engine as built"

# --- 3. run it: no card here -----------------------------------------------------------------------------------
run=$(mktemp -d "${TMPDIR:-/tmp}/rfdetr-check-ttnn.XXXXXX")
trap 'rm -rf "$run"' EXIT
"$build/rfdetr-synth" --seed 1 --out "$run/weights" --quiet 2>/dev/null || fail "rfdetr-synth could not write a synthetic checkpoint"
mkdir -m 700 "$run/sock" "$run/cwd" "$run/tmp"
shm_before=$(ls -A /dev/shm 2>/dev/null | sort || true)
set +e
(cd "$run/cwd" && env -u LD_LIBRARY_PATH -u TT_METAL_VISIBLE_DEVICES TMPDIR="$run/tmp" TT_METAL_CACHE="$run/tmp" \
  timeout 300 "$repo/$bin" --engine tt --weights "$run/weights" --socket "$run/sock/sidecar.sock" \
  >"$run/stdout" 2>"$run/stderr")
rc=$?
set -e
msg=$(grep "engine 'tt' failed to start" "$run/stderr" || true)
[ "$rc" = 1 ] || fail "rfdetr-sidecar --engine tt exited $rc without a card (expected 1, a startup failure); stderr: $(tail -3 "$run/stderr")"
if grep -q '^READY' "$run/stdout"; then fail "rfdetr-sidecar printed a READY line without a card"; fi
[ -n "$msg" ] || fail "no 'engine tt failed to start' message on stderr: $(tail -3 "$run/stderr")"
for want in "could not open Tenstorrent device 0" "/dev/tenstorrent" "TT_METAL_VISIBLE_DEVICES" "tt-kmd" \
  "No chips detected" "multi_scale_deformable_attn" "needs ttnn >= $TARGET"; do
  grep -qF -- "$want" <<<"$msg" || fail "the failure message does not say '$want': $msg"
done
left=$(cd "$run" && find sock cwd tmp -mindepth 1 | head -5)
[ -z "$left" ] || fail "the failed start left files behind: $left"
shm_after=$(ls -A /dev/shm 2>/dev/null | sort || true)
[ "$shm_before" = "$shm_after" ] || fail "the failed start left files in /dev/shm: $(comm -13 <(echo "$shm_before") <(echo "$shm_after"))"
if pgrep -f -- "$repo/$bin --engine tt --weights $run/weights" >/dev/null; then
  fail "a rfdetr-sidecar process outlived the failed start"
fi
step "no card: exit 1 at the device open, as expected: ${msg#*: }"
# The op harness's device path gets as far as the same device open.
set +e
opcheck=$(cd "$run/cwd" && env -u LD_LIBRARY_PATH TMPDIR="$run/tmp" timeout 300 "$repo/$build/rfdetr-tt-opcheck" --impl ttnn 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "could not open Tenstorrent device 0" <<<"$opcheck" ||
  fail "rfdetr-tt-opcheck --impl ttnn did not stop at the device open with exit 1 (exit $rc): $(tail -2 <<<"$opcheck")"

# --- 4. the calls whose 0.78.0 declarations ship in the wheel, then every call against 0.78.0's exports ---------
src=sidecar/src/engines/tt/tt-ops-ttnn.cpp
wheel_cpp=$cache/ttnn-$TARGET/ttnn/ttnn/cpp
n_wheel_headers=$(find "$cache/ttnn-$TARGET" \( -name '*.h' -o -name '*.hpp' \) | wc -l)
overlay=$run/declared-$TARGET
declared=$run/declared.tsv
: >"$declared"
for inc in $(grep -oE '^#include <ttnn/operations/[^>]+>' "$src" | sed -E 's/^#include <(.*)>$/\1/'); do
  [ -f "$wheel_cpp/$inc" ] || continue
  op=ttnn::$(basename "$inc" .hpp)
  grep -qF "$op(" "$src" || continue
  mkdir -p "$overlay/$(dirname "$inc")"
  cp "$wheel_cpp/$(dirname "$inc")"/*.hpp "$overlay/$(dirname "$inc")/"
  printf '%s\t%s\n' "$op" "$inc" >>"$declared"
done
[ -s "$declared" ] || fail "the $TARGET wheel ships none of the op headers $src includes (looked in $wheel_cpp)"
compile=$(python3 -c 'import json, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("/tt-ops-ttnn.cpp"):
        print(e["command"]); break' "$build/compile_commands.json") || fail "no compile command for $src in $build/compile_commands.json"
[ -n "$compile" ] || fail "no compile command for $src in $build/compile_commands.json"
# One 0.78.0 type those headers use is declared in a 0.78.0 header the wheel does not ship: ttnn::PadValue, the
# std::variant<unsigned int, float> parameter of 0.78.0's exported ttnn::reshape (TTNN_CALLS.md). It is
# declared so, force-included ahead of everything.
shim=$run/declared-types.hpp
printf '%s\n' '#pragma once' '#include <cstdint>' '#include <variant>' \
  'namespace ttnn { using PadValue = std::variant<uint32_t, float>; }' >"$shim"
# The same command, syntax only, with the wheel's op headers searched first (-I before the tt-metal -isystem
# directories) and the include trace (-H) on stderr.
compile=$(sed -E "s# -o [^ ]+ -c # -fsyntax-only -H #; s#^([^ ]+) #\1 -I$overlay -include $shim #" <<<"$compile")
step "compiling $src against $TARGET's own headers of: $(cut -f1 "$declared" | tr '\n' ' ')"
(cd "$build" && eval "$compile") >"$run/declared.out" 2>"$run/declared.err" ||
  fail "the calls of $(cut -f1 "$declared" | tr '\n' ' ')do not compile against ttnn $TARGET's declarations: $(grep -m3 'error' "$run/declared.err")"
while IFS=$'\t' read -r op inc; do
  grep -qE "^\.+ $overlay/$inc\$" "$run/declared.err" || fail "$inc of ttnn $TARGET was not the header the compile used for $op"
  if grep -qE "^\.+ $headers/.*/$inc\$" "$run/declared.err"; then fail "the compile also read the tt-metal headers' $inc: $op is not checked against $TARGET alone"; fi
done <"$declared"
counts=$(python3 scripts/ttnn-calls.py --object "$obj" --source "$src" \
  --declared "$declared" --target-headers "$n_wheel_headers" \
  --linked-lib "$cache/ttnn-$LINKED/ttnn/build/lib" --linked-version "$LINKED" \
  --target-lib "$cache/ttnn-$TARGET/ttnn/build/lib" --target-version "$TARGET" \
  --headers "$headers_desc" --out "$calls_md") ||
  fail "a ttnn call has no function of that name in $TARGET (see above; $calls_md has the table)"
read -r n m k <<<"$counts"
if command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 && ! git diff --quiet -- "$calls_md"; then
  git --no-pager diff --stat -- "$calls_md" >&2
  fail "$calls_md was out of date with the code; it is regenerated now: review and commit it"
fi

# --- 5. the tt-model app module --------------------------------------------------------------------------------
# The kind's HTTP stack (its verify step imports these), pinned, in a venv beside the wheels.
venv=$cache/venv-tt-app
if [ ! -f "$venv/.installed" ]; then
  step "installing uvicorn, fastapi, pydantic into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$venv/bin/python" -m pip install --quiet uvicorn==0.54.0 fastapi==0.165.0 pydantic==2.14.4 >&2 ||
    fail "pip could not install uvicorn/fastapi/pydantic into $venv"
  touch "$venv/.installed"
fi
python3 scripts/check-tt-app.py --python "$venv/bin/python" ||
  fail "the tt-model app module (tt-model/rfdetr_tt_app) failed its import checks"

echo "ttnn link check: OK ($headers_desc, ttnn $LINKED linked, $n ttnn symbols resolved, $m/$k calls bind in $TARGET)"
