#!/usr/bin/env bash
# Preprocess benchmark (not a test): builds bench/preprocess and runs it on one thread.
#   bench/preprocess/run.sh [--size S]          results: bench/preprocess/results.json
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$here/build" -j 2 >&2
"$here/build/bench-preprocess" --out "$here/results.json" "$@"
