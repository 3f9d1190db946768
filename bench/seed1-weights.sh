#!/usr/bin/env bash
# Prints the seed-1 synthetic checkpoint directory the benches run on ($WEIGHTS, else the tests' cache),
# generating it with the built rfdetr-synth when absent.   weights=$(bench/seed1-weights.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
weights=${WEIGHTS:-$root/sidecar/build/test-weights/seed-0x1}
if [ ! -s "$weights/model.safetensors" ]; then
  synth=$root/sidecar/build/rfdetr-synth
  if [ ! -x "$synth" ]; then
    echo "seed1-weights.sh: no checkpoint at $weights and no $synth; run 'npm install' or set WEIGHTS=DIR" >&2
    exit 1
  fi
  "$synth" --seed 1 --out "$weights" >&2
fi
echo "$weights"
