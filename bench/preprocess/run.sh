#!/usr/bin/env bash
# Preprocess benchmark (not a test): builds bench/preprocess and runs it on ordinary memory.
#   bench/preprocess/run.sh [--baseline DIR] [--size S]     results: bench/preprocess/results.json
# --baseline DIR (e.g. /work/main): DIR's preprocessor runs alternately with this tree's in the same process.
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
baseline=""
if [[ "${1:-}" == "--baseline" ]]; then
  baseline=$(cd "$2" && pwd)
  shift 2
fi
cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRFDETR_BASELINE="$baseline" >/dev/null
cmake --build "$here/build" -j 2 >&2
"$here/build/bench-preprocess" --out "$here/results.json" "$@"
