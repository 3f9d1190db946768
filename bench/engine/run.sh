#!/usr/bin/env bash
# CPU engine benchmark (not a test): builds bench/engine, makes sure a seed-1 checkpoint exists, runs
# bench-engine (cold start, RSS, stages, then rounds interleaving the engine with ONNX Runtime and
# OpenVINO when the peers are prepared) and gemm-bench.
#   bench/engine/run.sh [bench-engine args...]      results: bench/engine/results.json, gemm-bench.txt
# Env: WEIGHTS (seed-1 checkpoint dir), PEERS_DIR (prepared peers), PEERS_SRC (the peers scripts,
# default ../shared/peers from the repo root; see its README.md).
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
bench_build -j "$(nproc)"
weights=$("$root/bench/seed1-weights.sh")
peers=${PEERS_DIR:-$HOME/.cache/rfdetr-peers}
peers_src=${PEERS_SRC:-$root/../shared/peers}
"$here/build/bench-engine" --weights "$weights" --peers "$peers" --peers-src "$peers_src" \
  --out "$here/results.json" "$@"
OMP_NUM_THREADS=1 "$here/build/gemm-bench" 10 | tee "$here/gemm-bench.txt"
