#!/usr/bin/env bash
# Thread scaling of the CPU engine (not a test): rounds that run int8-bench at --threads 1 and then 2 (the pool's
# size) back to back for each precision, so both see the same machine state; one JSON line per measurement (with
# the round and the 1-minute load average) into bench/engine/threads-results.jsonl, then per precision the median
# forwards per second (1000 / wall median of --runs forwards) at each thread count, the median of the per-round
# ratios 2 threads / 1 thread, and CPU ms per forward at each. The wall figure is the scaling; on a machine others
# are using it measures the scheduler too, so the load is printed beside it, and OpenVINO fp32 (the peers'
# ov_bench.py, when prepared) runs at the same thread counts in each round as the baseline for what the machine allows.
#   bench/engine/threads-run.sh [ROUNDS]     env: WEIGHTS (seed-1 checkpoint dir), OUT (result file),
#   PRECISIONS (default "fp32 int8"), THREADS (default "1 2"), RUNS (forwards per measurement, default 6),
#   PEERS_DIR, PEERS_SRC as run.sh
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
rounds=${1:-5}
bench_build --target int8-bench
weights=${WEIGHTS:-$root/sidecar/build/test-weights/seed-0x1}
golden=$root/test/fixtures/rfdetr-synth/case-1/golden.safetensors
[ -s "$weights/model.safetensors" ] || { echo "threads-run.sh: no checkpoint at $weights (run run.sh once, or set WEIGHTS)" >&2; exit 1; }
out=${OUT:-$here/threads-results.jsonl}
peers=${PEERS_DIR:-$HOME/.cache/rfdetr-peers}
peers_src=${PEERS_SRC:-$root/../shared/peers}
[ -x "$peers/venv/bin/python" ] || echo "threads-run.sh: no peers in $peers (../shared/peers/prepare.sh); engine only" >&2
: > "$out.part"
for r in $(seq 1 "$rounds"); do
  for p in ${PRECISIONS:-fp32 int8}; do
    for t in ${THREADS:-1 2}; do
      "$here/build/int8-bench" --weights "$weights" --golden "$golden" --precision "$p" --threads "$t" --runs "${RUNS:-6}" |
        sed "s/^{/{\"round\":$r,\"load1\":$(cut -d' ' -f1 /proc/loadavg),/" >> "$out.part"
    done
  done
  if [ -x "$peers/venv/bin/python" ]; then
    for t in ${THREADS:-1 2}; do
      env PEERS_DIR="$peers" "$peers/venv/bin/python" "$peers_src/ov_bench.py" "$t" 2>/dev/null | grep '^{' |
        sed "s/^{/{\"round\":$r,\"load1\":$(cut -d' ' -f1 /proc/loadavg),\"precision\":\"openvino-fp32\",/" >> "$out.part"
    done
  fi
done
mv "$out.part" "$out"
python3 - "$out" <<'PY'
import json, statistics as st, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for r in rows: r.setdefault("forwards_per_s", 1000.0 / r["median_ms"])
by = collections.defaultdict(dict)
for r in rows: by[(r["precision"], r["round"])][r["threads"]] = r
loads = [r["load1"] for r in rows]
print(f"threads-run: {len(rows)} measurements, 1-minute load {min(loads)}-{max(loads)}")
for prec in dict.fromkeys(r["precision"] for r in rows):
    rounds = [v for (p, _), v in sorted(by.items()) if p == prec]
    ts = sorted({t for v in rounds for t in v})
    fps = {t: st.median(v[t]["forwards_per_s"] for v in rounds if t in v) for t in ts}
    cpu = {t: st.median(v[t]["cpu_ms_per_forward"] for v in rounds if t in v) for t in ts}
    line = f"{prec}: " + ", ".join(f"{t} thr {fps[t]:.3f} fwd/s ({cpu[t]:.0f} CPU ms/fwd)" for t in ts)
    if 1 in ts:
        for t in ts[1:]:
            ratios = [v[t]["forwards_per_s"] / v[1]["forwards_per_s"] for v in rounds if 1 in v and t in v]
            line += f"; {t}/1 = {st.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"
    print(line)
PY
