#!/usr/bin/env bash
# The first-card bring-up, in one go, on a host with Tenstorrent cards and the TT build of the sidecar:
#   1. the op harness: sidecar/build/rfdetr-tt-opcheck --impl ttnn (every TT op against the host fp32 one);
#   2. rfdetr verify --engine tt (TT against the CPU engine on the fixture images, detection-IoU gate);
#   3. a short bench: rfdetr bench --engine tt (latency percentiles and the stage split);
#   4. a multi-device smoke: rfdetr serve --engine tt --devices all, then rfdetr smoke and /health's device list.
# Everything goes into one report file (default tt-bringup-<host>-<UTC time>.txt, or $1) to attach to an issue:
# the host, the cards, the build, and each step's command, output and exit status. Exit 0 only when every step
# passed. Without a card (no /dev/tenstorrent/N; RFDETR_TT_DEVICE_DIR overrides the directory) it says so and
# exits 1 before anything runs; so does a sidecar built without the tt engine.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
dev_dir=${RFDETR_TT_DEVICE_DIR:-/dev/tenstorrent}
sidecar=${RFDETR_SIDECAR:-$repo/sidecar/build/rfdetr-sidecar}
opcheck=$repo/sidecar/build/rfdetr-tt-opcheck
rfdetr=(node "$repo/bin/rfdetr.js")
port=${RFDETR_BRINGUP_PORT:-20123}

cards=$(ls "$dev_dir" 2>/dev/null | grep -E '^[0-9]+$' | sort -n | tr '\n' ' ' | sed 's/ $//' || true)
if [ -z "$cards" ]; then
  echo "tt bringup: no Tenstorrent card on this host: $dev_dir has no devices (expected /dev/tenstorrent/0, …)." >&2
  echo "tt bringup: install the tt-kmd driver and check the cards with tt-smi; nothing was run." >&2
  exit 1
fi
if ! "$sidecar" --list-engines 2>/dev/null | node -e 'const l = JSON.parse(require("fs").readFileSync(0, "utf8")); process.exit(l.engines.some((e) => e.name === "tt" && e.built) ? 0 : 1)'; then
  echo "tt bringup: $sidecar has no tt engine (rfdetr-sidecar --list-engines lists what is built)." >&2
  echo "tt bringup: build it with RFDETR_CMAKE_ARGS='-DRFDETR_WITH_TTNN=ON ...' npm run build:sidecar (SERVING.md, \"TT engine\")." >&2
  exit 1
fi

report=${1:-tt-bringup-$(hostname)-$(date -u +%Y%m%dT%H%M%SZ).txt}
: >"$report" || { echo "tt bringup: cannot write the report $report" >&2; exit 1; }
say() { echo "$*" | tee -a "$report" >&2; }
failed=0
results=()
# step NAME COMMAND...: runs it, appends its output and status to the report.
step() {
  local name=$1
  shift
  say ""
  say "=== $name: $*"
  "$@" >>"$report" 2>&1
  local rc=$?
  say "=== $name: exit $rc"
  if [ "$rc" = 0 ]; then results+=("PASS $name"); else results+=("FAIL $name (exit $rc)"); failed=1; fi
}

say "tt bringup report — $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "host: $(hostname); $(uname -srm); $(nproc) cores"
say "cards in $dev_dir: $cards"
say "sidecar: $("$sidecar" --version 2>&1)"
say "repository: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v tt-smi >/dev/null; then step "tt-smi" tt-smi -ls; fi

step "op harness" "$opcheck" --impl ttnn
step "verify" "${rfdetr[@]}" verify --engine tt
step "bench" "${rfdetr[@]}" bench --engine tt -n 20 --warmup 2

# The multi-device smoke: one sidecar per card behind one server.
serve_log=$(mktemp "${TMPDIR:-/tmp}/rfdetr-bringup-serve.XXXXXX")
"${rfdetr[@]}" serve --engine tt --devices all --port "$port" --log-level info >"$serve_log" 2>&1 &
serve_pid=$!
step "smoke (--devices all)" "${rfdetr[@]}" smoke --url "http://127.0.0.1:$port" --wait 1800
n_cards=$(wc -w <<<"$cards")
health_devices() {
  local h
  h=$(node -e 'fetch(process.argv[1]).then(async (r) => { process.stdout.write(await r.text()); process.exit(r.ok ? 0 : 1); }, () => process.exit(1))' "http://127.0.0.1:$port/health") || return 1
  echo "$h"
  # every card listed and ready
  [ "$(grep -o '"state":"ready"' <<<"$h" | wc -l)" = "$n_cards" ]
}
step "every card ready (/health)" health_devices
kill -TERM "$serve_pid" 2>/dev/null
wait "$serve_pid"
say "serve exited $? after SIGTERM; its log:"
cat "$serve_log" >>"$report"
rm -f "$serve_log"

say ""
for r in "${results[@]}"; do say "$r"; done
say "report: $report"
exit "$failed"
