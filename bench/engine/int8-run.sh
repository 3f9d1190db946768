#!/usr/bin/env bash
# The int8 benchmark (not a test): rounds that run, one after the other in the same machine state, the engine
# at fp32 and int8 with the best kernels this CPU has (AMX where it has AMX-INT8), int8 on the AVX-512 VNNI
# kernel (RFDETR_CPU_ISA=avx512, on a CPU with AMX), and fp32 and int8 capped to AVX2 (RFDETR_CPU_ISA=avx2,
# the kernels of an AVX2-only CPU), then the int8 peers (ONNX Runtime and OpenVINO, fp32 and int8 by upstream's recipe:
# ../shared/peers/int8_peers.py). 1 thread, CPU time per forward. One JSON line per measurement, each with
# the round and the 1-minute load average, into bench/engine/int8-results.jsonl.
#   bench/engine/int8-run.sh [ROUNDS]       env: WEIGHTS, PEERS_DIR, PEERS_SRC as run.sh; OUT (result file);
#   PEERS_ISA=AVX2: the peers' oneDNN capped too (ONEDNN_MAX_CPU_ISA; OpenVINO honours it, ONNX Runtime's
#   MLAS has no such cap) and only the AVX2-capped engine runs.
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
rounds=${1:-3}
bench_build --target int8-bench
weights=${WEIGHTS:-$root/sidecar/build/test-weights/seed-0x1}
golden=$root/test/fixtures/rfdetr-synth/case-1/golden.safetensors
peers=${PEERS_DIR:-$HOME/.cache/rfdetr-peers}
peers_src=${PEERS_SRC:-$root/../shared/peers}
[ -s "$weights/model.safetensors" ] || { echo "int8-run.sh: no checkpoint at $weights (run run.sh once, or set WEIGHTS)" >&2; exit 1; }
out=${OUT:-$here/int8-results.jsonl}
if [ -n "${PEERS_ISA:-}" ]; then caps=(avx2); elif grep -qw amx_int8 /proc/cpuinfo; then caps=("" avx512 avx2); else caps=("" avx2); fi
: > "$out.part"
tag() { sed "s/^{/{\"round\":$1,\"load1\":$(cut -d' ' -f1 /proc/loadavg),\"isa_cap\":\"$2\",/"; }
for r in $(seq 1 "$rounds"); do
  for cap in "${caps[@]}"; do
    for p in fp32 int8; do
      [ "$cap" = avx512 ] && [ "$p" = fp32 ] && continue  # the same float kernel as the uncapped run
      RFDETR_CPU_ISA=$cap "$here/build/int8-bench" --weights "$weights" --golden "$golden" --precision "$p" --runs 6 | tag "$r" "$cap" >> "$out.part"
    done
  done
  if [ -x "$peers/venv/bin/python" ]; then
    env PEERS_DIR="$peers" ${PEERS_ISA:+ONEDNN_MAX_CPU_ISA=$PEERS_ISA} "$peers/venv/bin/python" "$peers_src/int8_peers.py" 1 2>/dev/null |
      grep '^{' | tag "$r" "${PEERS_ISA:+peers:$PEERS_ISA}" >> "$out.part"
  else
    echo "int8-run.sh: no peers in $peers (../shared/peers/prepare.sh); engine only" >&2
  fi
  tail -n 9 "$out.part" >&2
done
mv "$out.part" "$out"
echo "int8-run.sh: $(wc -l < "$out") measurements in $out" >&2
