#!/usr/bin/env bash
# The precision benchmark of issue 34's "Done when" (not a test): rounds that each run, one after the other in
# the same machine state, the engine (int8-bench) at fp32, bf16 and int8 on 1 thread, then the same three on 2
# threads, then OpenVINO at fp32 (forced), its default (bf16 on a CPU with AMX-BF16/AVX512-BF16) and int8 with its
# default float parts (../shared/peers/bf16_peers.py), then ONNX Runtime fp32/int8 and OpenVINO int8 by
# upstream's recipe (int8_peers.py); peers on 1 thread. One JSON line per measurement, each tagged with the round
# and the 1-minute load average, the first line naming the CPU; an engine precision the CPU cannot run is a line
# with its refusal. Then precision-summary.py prints the Done-when table from the file.
#   bench/engine/precision-run.sh [ROUNDS]    (default 2)
#   env: WEIGHTS (seed-1 checkpoint; default the tests' sidecar/build/test-weights/seed-0x1), PEERS_DIR (prepared
#   peers, default ~/.cache/rfdetr-peers), PEERS_SRC (default ../shared/peers), RUNS (forwards per engine
#   measurement, default 6), OUT (default bench/engine/precision-results.jsonl).
# int8-run.sh stays beside it: the int8 kernels capped to older ISAs (RFDETR_CPU_ISA) against the int8 peers.
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
rounds=${1:-2}
bench_build --target int8-bench
weights=${WEIGHTS:-$root/sidecar/build/test-weights/seed-0x1}
golden=$root/test/fixtures/rfdetr-synth/case-1/golden.safetensors
peers=${PEERS_DIR:-$HOME/.cache/rfdetr-peers}
peers_src=${PEERS_SRC:-$root/../shared/peers}
runs=${RUNS:-6}
out=${OUT:-$here/precision-results.jsonl}
[ -s "$weights/model.safetensors" ] || { echo "precision-run.sh: no checkpoint at $weights (run run.sh once, or set WEIGHTS)" >&2; exit 1; }
py=$peers/venv/bin/python
[ -x "$py" ] || echo "precision-run.sh: no peers in $peers (../shared/peers/prepare.sh); engine only" >&2

tag() { sed "s/^{/{\"round\":$1,\"load1\":$(cut -d' ' -f1 /proc/loadavg),/"; }
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile|amx_int8|amx_bf16' | paste -sd, -)
model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//; s/"/\\"/g')
printf '{"cpu":"%s","cpu_flags":"%s","cores":%s,"date":"%s","commit":"%s"}\n' "$model" "$flags" "$(nproc)" "$(date -u +%FT%TZ)" \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" > "$out.part"

# One engine measurement; a precision the CPU refuses (exit 2) becomes {"refused": its message}.
engine() {  # round threads precision
  local err
  err=$(mktemp)
  if "$here/build/int8-bench" --weights "$weights" --golden "$golden" --precision "$3" --threads "$2" --runs "$runs" 2>"$err" | tag "$1" >> "$out.part"; then :
  else
    printf '{"peer":"engine","precision":"%s","threads":%s,"refused":"%s"}\n' "$3" "$2" "$(tr '\n"' ' \047' < "$err")" | tag "$1" >> "$out.part"
  fi
  rm -f "$err"
}

for r in $(seq 1 "$rounds"); do
  for t in 1 2; do
    for p in fp32 bf16 int8; do engine "$r" "$t" "$p"; done
  done
  if [ -x "$py" ]; then
    for s in bf16_peers.py int8_peers.py; do
      env PEERS_DIR="$peers" "$py" "$peers_src/$s" 1 2>/dev/null | grep '^{' | tag "$r" >> "$out.part" ||
        echo "precision-run.sh: round $r: $s failed (run it by hand: $py $peers_src/$s 1)" >&2
    done
  fi
  grep "\"round\":$r," "$out.part" | cut -c1-160 >&2
done
mv "$out.part" "$out"
echo "precision-run.sh: $(($(wc -l < "$out") - 1)) measurements in $out" >&2
python3 "$here/precision-summary.py" "$out"
