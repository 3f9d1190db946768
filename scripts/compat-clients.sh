#!/usr/bin/env bash
# The real clients of other servers against a real `rfdetr serve` (SERVING.md, "Clients of other servers"):
# Roboflow's inference-sdk 1.8.3 with supervision 0.30.9's Detections.from_inference, and Home Assistant's
# deepstack-python 0.9, on synthetic checkpoints (a Base with API keys on; a Seg Nano for instance
# segmentation). test/python/compat_clients.py checks their detections equal /predict's for the same images.
# Needs python3 with venv and the registry (PyPI); not part of npm test. CI runs it (.ci/run).
#   RFDETR_COMPAT_VENV   where the clients are installed (default /tmp/rfdetr-compat-venv; reused when present)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${RFDETR_COMPAT_VENV:-/tmp/rfdetr-compat-venv}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import inference_sdk, supervision, deepstack' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q inference-sdk==1.8.3 supervision==0.30.9 deepstack-python==0.9
fi
[ "$("$venv/bin/python" -c 'import inference_sdk; print(inference_sdk.__version__)')" = 1.8.3 ] || { echo "compat-clients: $venv does not hold inference-sdk 1.8.3: remove it and rerun" >&2; exit 1; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# `rfdetr serve` on WEIGHTS with extra flags, in the background; sets `url` once its /ready is 200.
serve() {
  local weights=$1; shift
  local port; port=$(free_port)
  node bin/rfdetr.js serve --host 127.0.0.1 --port "$port" --weights "$weights" --log-level warn "$@" >>"$work/serve.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 600); do
    if curl -fs "http://127.0.0.1:$port/ready" >/dev/null; then url="http://127.0.0.1:$port"; return; fi
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.5
  done
  echo "compat-clients: rfdetr serve on $weights did not become ready; its log:" >&2
  tail -n 30 "$work/serve.log" >&2
  exit 1
}

images=(test/fixtures/rfdetr-synth/case-1/input.png test/fixtures/rfdetr-synth/case-2/input.png)
node bin/rfdetr.js weights synth --seed 1 --out "$work/base" >/dev/null
node bin/rfdetr.js weights synth --seed 1 --variant seg-nano --out "$work/seg" >/dev/null
key=compat-clients-key-0001
echo "$key" >"$work/keys"
serve "$work/base" --api-key-file "$work/keys"
"$venv/bin/python" test/python/compat_clients.py --url "$url" --model-id rf-detr-base --api-key "$key" "${images[@]}"
serve "$work/seg"
"$venv/bin/python" test/python/compat_clients.py --url "$url" --model-id rf-detr-seg-nano --segment "${images[@]}"
