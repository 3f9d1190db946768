#!/usr/bin/env bash
# Preprocess benchmark (not a test): builds bench/preprocess and runs it on one thread.
#   bench/preprocess/run.sh [--size S]          results: bench/preprocess/results.json
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
bench_build -j 2
"$here/build/bench-preprocess" --out "$here/results.json" "$@"
