#!/usr/bin/env bash
# Issue 34's "Done when" from forward-by-forward pairs (not a test): pair-run.py at fp32 (against OpenVINO fp32
# forced), bf16 (OpenVINO's default) and int8 (OpenVINO int8 with its default float parts), then `pair-run.py
# threads` (2 threads / 1) at each precision the CPU runs; a precision it refuses is a line with the refusal. Each
# result is appended to OUT as one JSON line (the first line of the run names the CPU and the commit), and the table
# is printed from this run's lines. precision-run.sh's rounds time each side in a different minute; on a VM whose
# speed drifts between minutes they measured the drift (bench/README.md).
#   bench/engine/pair-table.sh [PAIRS]    (default 60; ~20 min at 60 on the Zen 3 VM)
#   env: PEERS_DIR (prepared peers, default ~/.cache/rfdetr-peers), OUT (default bench/engine/pair-results.jsonl),
#   WEIGHTS, PEERS_SRC (as pair-run.py).
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
pairs=${1:-60}
bench_build --target int8-bench
peers=${PEERS_DIR:-$HOME/.cache/rfdetr-peers}
py=$peers/venv/bin/python
[ -x "$py" ] || { echo "pair-table.sh: no peers in $peers (run ../shared/peers/prepare.sh)" >&2; exit 1; }
out=${OUT:-$here/pair-results.jsonl}
run=$(date -u +%FT%TZ)
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile|amx_int8|amx_bf16' | paste -sd, -)
model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//; s/"/\\"/g')
printf '{"run":"%s","cpu":"%s","cpu_flags":"%s","cores":%s,"commit":"%s"}\n' "$run" "$model" "$flags" "$(nproc)" \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" >> "$out"

# One pair-run.py line tagged with this run, or {"precision":..,"refused":..} when the engine would not start.
pair() {  # python precision-or-"threads precision"
  local err line
  err=$(mktemp)
  if line=$(env PEERS_DIR="$peers" "$1" "$here/pair-run.py" $2 "$pairs" 2>"$err"); then
    sed "s/^{/{\"run\":\"$run\",/" <<< "$line" >> "$out"
  else
    printf '{"run":"%s","mode":"%s","refused":"%s"}\n' "$run" "$2" "$(tr '\n"' ' \047' < "$err")" >> "$out"
  fi
  rm -f "$err"
  tail -1 "$out" | cut -c1-200 >&2
}

for p in fp32 bf16 int8; do pair "$py" "$p"; done
for p in fp32 bf16 int8; do pair python3 "threads $p"; done
python3 - "$out" "$run" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
lines = [l for l in lines if l.get("run") == sys.argv[2]]
print(f"{lines[0]['cpu']} ({lines[0]['cpu_flags']}), {lines[0]['commit']}: median per-pair ratio [95 % interval]")
target = {"fp32": 1.0, "bf16": 0.9, "int8": 0.9}
for l in lines[1:]:
    if "refused" in l:
        print(f"  {l['mode']:<14} refused: {l['refused'].strip()}")
    elif "threads" in l:
        lo, hi = l["speedup_ci95"]
        print(f"  threads {l['precision']:<6} 2T / 1T {l['speedup_median']:.3f} [{lo:.3f}-{hi:.3f}]  target >= 1.7: "
              f"{'yes' if lo >= 1.7 else 'median' if l['speedup_median'] >= 1.7 else 'no'}")
    else:
        lo, hi = l["ratio_ci95"]
        t = target[l["precision"]]
        print(f"  {l['precision']:<14} ours / {l['peer']} {l['ratio_median']:.3f} [{lo:.3f}-{hi:.3f}]  target <= {t}: "
              f"{'yes' if hi <= t else 'median' if l['ratio_median'] <= t else 'no'}; "
              f"top-100 ours {l['ours_top100']} / peer {l['peer_top100']}")
EOF
