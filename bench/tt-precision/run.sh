#!/usr/bin/env bash
# The TT precision study (not a test; about 40 s per plan on one thread): builds bench/tt-precision, makes sure
# the seed-1 checkpoint exists, runs every plan.   bench/tt-precision/run.sh [--plans a,b]
# Results: bench/tt-precision/results.json. Env: WEIGHTS (seed-1 checkpoint dir), RFDETR_SHARED_FIXTURES.
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
bench_build -j "$(nproc)"
weights=$("$root/bench/seed1-weights.sh")
"$here/build/tt-precision" --weights "$weights" --out "$here/results.json" "$@"
