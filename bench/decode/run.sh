#!/usr/bin/env bash
# Decode benchmark (not a test): the in-sidecar decode (bench-decode, thread CPU time) and the server's sharp decode
# (sharp-decode.ts) on the same four files: case-1's 640x480 and a 1920x1080 resize of it, PNG and JPEG q90.
#   bench/decode/run.sh [--runs N]      inputs in bench/decode/build/inputs; numbers: bench/decode/RESULTS.md
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
bench_build -j 2
inputs="$here/build/inputs"
[ -s "$inputs/1920x1080-q90.jpg" ] || (cd "$root" && node --import tsx bench/decode/sharp-decode.ts --write "$inputs")
files=("$inputs/640x480.png" "$inputs/640x480-q90.jpg" "$inputs/1920x1080.png" "$inputs/1920x1080-q90.jpg")
echo "== rfdetr_decode (bench-decode, thread CPU time)"
"$here/build/bench-decode" "$@" "${files[@]}"
echo "== sharp decodeImage (sharp-decode.ts)"
(cd "$root" && node --import tsx bench/decode/sharp-decode.ts "$@" "${files[@]}")
