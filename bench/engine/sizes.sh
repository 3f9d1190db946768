#!/usr/bin/env bash
# Speed per RF-DETR size (not a test): the CPU engine's forward on each variant's seed-1 synthetic checkpoint and
# its fixture input (Base: test/fixtures; the others: ../shared/fixtures/rfdetr-family), in one run, so the sizes
# compare on the same machine state. Writes bench/engine/sizes.json (one bench-engine result per size) and prints
# a table: median ms per forward at the engine's threads, CPU ms per forward on 1 thread, ratio to Base.
#   bench/engine/sizes.sh [--runs N] [--threads N]
# Env: FAMILY_FIXTURES (default ../shared/fixtures/rfdetr-family from the repo root), WEIGHTS_ROOT (where the
# checkpoints are made, default sidecar/build/test-weights/family).
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
family=${FAMILY_FIXTURES:-$root/../shared/fixtures/rfdetr-family}
wroot=${WEIGHTS_ROOT:-$root/sidecar/build/test-weights/family}
synth=$root/sidecar/build/rfdetr-synth
bench_build -j "$(nproc)"
[ -x "$synth" ] || { echo "sizes.sh: no $synth; run 'npm install'" >&2; exit 1; }
[ -d "$family" ] || { echo "sizes.sh: no family fixtures at $family (set FAMILY_FIXTURES)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in base nano small medium large; do
  w=$wroot/$v-seed-0x1
  [ -s "$w/model.safetensors" ] || "$synth" --seed 1 --variant "$v" --out "$w" --quiet >&2
  input=$family/$v/case-1/golden.safetensors
  [ "$v" = base ] && input=$root/test/fixtures/rfdetr-synth/case-1/golden.safetensors
  echo "== $v" >&2
  "$here/build/bench-engine" --weights "$w" --input "$input" --no-peers --out "$tmp/$v.json" "$@" >&2
done
node -e '
const fs = require("fs"); const dir = process.argv[1]; const out = {};
for (const v of ["base", "nano", "small", "medium", "large"]) out[v] = JSON.parse(fs.readFileSync(`${dir}/${v}.json`, "utf8"));
fs.writeFileSync(process.argv[2], JSON.stringify(out, null, 2) + "\n");
const b = out.base.engine;
console.log("size     median ms  CPU ms/forward (1 thread)  vs base (1-thread CPU time)  max-abs logits");
for (const [v, r] of Object.entries(out)) {
  const e = r.engine;
  console.log(`${v.padEnd(8)} ${e.median_ms.toFixed(0).padStart(9)}  ${e.cpu_ms_per_forward_1_thread.toFixed(0).padStart(25)}  ${(e.cpu_ms_per_forward_1_thread / b.cpu_ms_per_forward_1_thread).toFixed(2).padStart(27)}x  ${e.maxabs_logits.toExponential(1)}`);
}' "$tmp" "$here/sizes.json" | tee "$here/sizes.txt"
